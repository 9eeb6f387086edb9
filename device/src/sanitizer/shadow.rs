//! Shadow memory: per address space, a map of disjoint byte intervals (keyed by start), each
//! holding the last write and the reads since that are not ordered with each other (FastTrack's
//! rule, per interval instead of per byte), and how the intervals are split, pruned and merged.
//! What an access record holds is the checker's; the shadow needs only its epoch ([`Epoch`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use smallvec::SmallVec;

use super::VectorClock;

/// An access record's epoch: its clock thread's slot and the position on it.
pub trait Epoch {
    /// `(slot, clock)`.
    fn epoch(&self) -> (u32, u64);
}

/// One interval of shadow state: it ends at `end` (its start is its key in the [`Shadow`]).
#[derive(Debug)]
pub struct Segment<R> {
    /// One past the last byte.
    pub end: u64,
    /// The last write.
    pub write: Option<Arc<R>>,
    /// The reads since the last write that are not ordered with each other.
    pub reads: SmallVec<[Arc<R>; 2]>,
    /// Whether the bytes were written since they were allocated.
    pub init: bool,
}

impl<R> Clone for Segment<R> {
    fn clone(&self) -> Self {
        Self {
            end: self.end,
            write: self.write.clone(),
            reads: self.reads.clone(),
            init: self.init,
        }
    }
}

impl<R> Segment<R> {
    /// Whether the two hold the same accesses (the same records, not equal ones) and
    /// initialisation.
    pub fn same_state(&self, other: &Segment<R>) -> bool {
        let same = |a: &Option<Arc<R>>, b: &Option<Arc<R>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.init == other.init
            && same(&self.write, &other.write)
            && self.reads.len() == other.reads.len()
            && self
                .reads
                .iter()
                .zip(&other.reads)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// The shadow of one address space: disjoint intervals by start address.
pub type Shadow<R> = BTreeMap<u64, Segment<R>>;

/// Shadow memory in use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShadowStats {
    /// Intervals in the shadow.
    pub intervals: usize,
    /// Distinct accesses the intervals hold.
    pub accesses: usize,
    /// Blocks tracked.
    pub blocks: usize,
    /// Approximate bytes of host memory all of it takes (intervals, accesses, clocks).
    pub bytes: usize,
}

/// Drops from `[start, end)` of `space` the accesses `host` covers, and the intervals left
/// empty.
pub fn prune<R: Epoch>(space: Option<&mut Shadow<R>>, start: u64, end: u64, host: &VectorClock) {
    let Some(space) = space else {
        return;
    };
    split(space, start);
    split(space, end);
    let mut empty = Vec::new();
    for (&k, seg) in space.range_mut(start..end) {
        if seg.write.as_ref().is_some_and(|w| covered(host, &**w)) {
            seg.write = None;
        }
        seg.reads.retain(|r| !covered(host, &**r));
        if seg.write.is_none() && seg.reads.is_empty() {
            empty.push(k);
        }
    }
    for k in empty {
        space.remove(&k);
    }
    coalesce(space, start, end);
}

fn covered<R: Epoch>(host: &VectorClock, r: &R) -> bool {
    let (slot, clock) = r.epoch();
    host.covers(slot, clock)
}

/// Splits the interval that holds `at` so that one starts there.
pub fn split<R>(space: &mut Shadow<R>, at: u64) {
    let Some((&s, seg)) = space.range_mut(..at).next_back() else {
        return;
    };
    if seg.end <= at {
        return;
    }
    let mut right = seg.clone();
    seg.end = at;
    right.end = right.end.max(at);
    let _ = s;
    space.insert(at, right);
}

/// Merges neighbouring intervals around `[start, end)` that hold the same state.
pub fn coalesce<R>(space: &mut Shadow<R>, start: u64, end: u64) {
    let from = space.range(..start).next_back().map_or(start, |(&s, _)| s);
    let keys: Vec<u64> = space.range(from..=end).map(|(&k, _)| k).collect();
    let mut prev: Option<u64> = None;
    for k in keys {
        if let Some(p) = prev {
            let (pe, same) = {
                let a = &space[&p];
                let b = &space[&k];
                (a.end, a.end == k && a.same_state(b))
            };
            let _ = pe;
            if same {
                let seg = space.remove(&k).expect("listed");
                space.get_mut(&p).expect("listed").end = seg.end;
                continue;
            }
        }
        prev = Some(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Rec(u32, u64);

    impl Epoch for Rec {
        fn epoch(&self) -> (u32, u64) {
            (self.0, self.1)
        }
    }

    fn written(end: u64, rec: &Arc<Rec>) -> Segment<Rec> {
        Segment {
            end,
            write: Some(rec.clone()),
            reads: SmallVec::new(),
            init: true,
        }
    }

    fn intervals(space: &Shadow<Rec>) -> Vec<(u64, u64)> {
        space.iter().map(|(&s, seg)| (s, seg.end)).collect()
    }

    #[test]
    fn split_cuts_the_interval_holding_the_address_and_nothing_else() {
        let w = Arc::new(Rec(0, 1));
        let mut space = Shadow::new();
        space.insert(0, written(100, &w));
        split(&mut space, 40);
        split(&mut space, 40);
        split(&mut space, 100);
        split(&mut space, 200);
        assert_eq!(intervals(&space), vec![(0, 40), (40, 100)]);
        assert!(space[&0].same_state(&space[&40]));
    }

    #[test]
    fn coalesce_merges_touching_intervals_of_the_same_records_only() {
        let w = Arc::new(Rec(0, 1));
        let other = Arc::new(Rec(0, 1));
        let mut space = Shadow::new();
        space.insert(0, written(10, &w));
        space.insert(10, written(20, &w));
        space.insert(30, written(40, &w));
        space.insert(40, written(50, &other));
        coalesce(&mut space, 0, 50);
        assert_eq!(intervals(&space), vec![(0, 20), (30, 40), (40, 50)]);
    }

    #[test]
    fn prune_drops_covered_accesses_and_the_intervals_left_empty() {
        let old = Arc::new(Rec(0, 1));
        let new = Arc::new(Rec(1, 5));
        let mut space = Shadow::new();
        space.insert(0, written(64, &old));
        let mut seg = written(128, &old);
        seg.reads.push(new.clone());
        space.insert(64, seg);
        let mut host = VectorClock::default();
        host.set(0, 1);
        prune(Some(&mut space), 0, 128, &host);
        assert_eq!(intervals(&space), vec![(64, 128)]);
        assert!(space[&64].write.is_none());
        assert_eq!(space[&64].reads.len(), 1);
        prune(None::<&mut Shadow<Rec>>, 0, 128, &host);
    }
}
