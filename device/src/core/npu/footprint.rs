//! Which global memory a block's data movers touched. A launch's blocks share the device's
//! HBM; bytes that several blocks read are served by L2 after the first time, so what the HBM
//! must deliver is the union of the blocks' reads plus the union of their writes
//! ([`launch`](super::launch) turns that into a time floor).

/// The global-memory byte ranges one run read and wrote, as sorted, disjoint, half-open
/// `(start, end)` pairs once the run has finished.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    reads: Vec<(u64, u64)>,
    writes: Vec<(u64, u64)>,
}

fn push(v: &mut Vec<(u64, u64)>, addr: u64, len: u64) {
    if len == 0 {
        return;
    }
    let end = addr.saturating_add(len);
    match v.last_mut() {
        Some(last) if last.1 == addr => last.1 = end,
        _ => v.push((addr, end)),
    }
}

fn normalize(v: &mut Vec<(u64, u64)>) {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for &(s, e) in v.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    *v = out;
}

impl Footprint {
    pub(crate) fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
    }

    pub(crate) fn read(&mut self, addr: u64, len: u64) {
        push(&mut self.reads, addr, len);
    }

    pub(crate) fn write(&mut self, addr: u64, len: u64) {
        push(&mut self.writes, addr, len);
    }

    /// Sorts and merges the ranges.
    pub fn normalize(&mut self) {
        normalize(&mut self.reads);
        normalize(&mut self.writes);
    }

    /// Ranges read.
    pub fn reads(&self) -> &[(u64, u64)] {
        &self.reads
    }

    /// Ranges written.
    pub fn writes(&self) -> &[(u64, u64)] {
        &self.writes
    }

    /// Distinct bytes read.
    pub fn read_bytes(&self) -> u64 {
        self.reads.iter().map(|(s, e)| e - s).sum()
    }

    /// Distinct bytes written.
    pub fn write_bytes(&self) -> u64 {
        self.writes.iter().map(|(s, e)| e - s).sum()
    }

    /// Adds `other`'s ranges to this one (normalized).
    pub fn merge(&mut self, other: &Footprint) {
        self.reads.extend_from_slice(&other.reads);
        self.writes.extend_from_slice(&other.writes);
        self.normalize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_and_adjacent_ranges_merge() {
        let mut f = Footprint::default();
        f.read(100, 10);
        f.read(110, 10);
        f.read(0, 5);
        f.read(105, 30);
        f.write(7, 0);
        f.normalize();
        assert_eq!(f.reads(), &[(0, 5), (100, 135)]);
        assert_eq!(f.read_bytes(), 40);
        assert_eq!(f.write_bytes(), 0);
        let mut g = Footprint::default();
        g.read(3, 4);
        g.merge(&f);
        assert_eq!(g.reads(), &[(0, 7), (100, 135)]);
    }
}
