//! Access sets: the device memory a task reads and writes, as typed byte ranges with a
//! direction. Every task gets one at ingest, computed once from what its kind knows:
//!
//! - copies and memsets: exactly the ranges their words name;
//! - native kernels: what the kernel declares for its arguments at registration
//!   ([`NativeKernel::with_access`](crate::NativeKernel::with_access)); a kernel that declares nothing gets the
//!   exact ranges of the buffer arguments of a typed launch builder (`&buf` read, `&mut buf`
//!   read and written; [`crate::TaskExtra::Access`]; an untyped address among its arguments
//!   stands for its block), or else the whole block behind each non-float argument word,
//!   marked inexact;
//! - op launches: the blocks behind their tensors at ingest (inexact), then exactly the bytes
//!   of their resolved shapes once shape propagation has run;
//! - binary kernels: until they run, the typed launch builder's ranges, or else the blocks
//!   behind their argument words (a kernel reaches memory only through its arguments: the
//!   ABI's upper bound); once they have run, exactly the byte ranges the AI cores touched;
//! - collectives: their send and receive buffers.
//!
//! Deferred free reads them (which blocks a stream position may still touch); so may any
//! system of the embedder's.

use smallvec::SmallVec;

/// Whether a range is read, written or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessMode {
    /// Read only.
    Read,
    /// Written only.
    Write,
    /// Read and written.
    ReadWrite,
}

impl AccessMode {
    /// Whether the range may be read.
    pub fn reads(self) -> bool {
        matches!(self, AccessMode::Read | AccessMode::ReadWrite)
    }

    /// Whether the range may be written.
    pub fn writes(self) -> bool {
        matches!(self, AccessMode::Write | AccessMode::ReadWrite)
    }

    fn union(self, other: AccessMode) -> AccessMode {
        if self == other {
            self
        } else {
            AccessMode::ReadWrite
        }
    }
}

/// Which address space a range is in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Space {
    /// The task's own context (the usual case).
    #[default]
    Local,
    /// The other side of a peer copy: the context and device its
    /// `PeerCopy` names.
    Peer,
}

/// One range a task reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// Device virtual address of the first byte.
    pub addr: u64,
    /// Bytes (0 when only the block behind `addr` is known, see [`AccessSet::exact`]).
    pub bytes: u64,
    /// Direction.
    pub mode: AccessMode,
    /// Address space.
    pub space: Space,
}

impl Access {
    /// A read of `bytes` at `addr` in the task's context.
    pub fn read(addr: u64, bytes: u64) -> Self {
        Self {
            addr,
            bytes,
            mode: AccessMode::Read,
            space: Space::Local,
        }
    }

    /// A write of `bytes` at `addr` in the task's context.
    pub fn write(addr: u64, bytes: u64) -> Self {
        Self {
            addr,
            bytes,
            mode: AccessMode::Write,
            space: Space::Local,
        }
    }

    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.addr.saturating_add(self.bytes)
    }
}

/// The device memory one task touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessSet {
    ranges: SmallVec<[Access; 2]>,
    inexact: bool,
}

impl AccessSet {
    /// An empty, exact set.
    #[inline]
    pub fn new() -> Self {
        Self {
            ranges: SmallVec::new(),
            inexact: false,
        }
    }

    /// Empties the set (keeping its allocation) and marks it exact.
    #[inline]
    pub fn clear(&mut self) {
        self.ranges.clear();
        self.inexact = false;
    }

    /// Adds a range; an empty one is ignored unless the set is inexact (a block is named by
    /// its address alone). A range that continues the previous one in the same direction and
    /// space extends it, so a sequential sweep stays one range.
    pub fn push(&mut self, access: Access) {
        if access.bytes == 0 && !self.inexact {
            return;
        }
        if let Some(last) = self.ranges.last_mut()
            && last.space == access.space
            && last.bytes != 0
            && access.bytes != 0
        {
            if last.mode == access.mode && last.end() == access.addr {
                last.bytes += access.bytes;
                return;
            }
            if last.addr == access.addr && last.bytes == access.bytes {
                last.mode = last.mode.union(access.mode);
                return;
            }
        }
        self.ranges.push(access);
    }

    /// Records an access as a core makes it: one that extends or lies inside a recent range in
    /// the same direction joins it, so interleaved sweeps over a few buffers stay a few ranges.
    /// Call [`AccessSet::normalize`] once the run is over.
    #[inline]
    pub fn record(&mut self, access: Access) {
        // The common case first: a sweep continuing the latest range.
        if let Some(last) = self.ranges.last_mut()
            && access.addr == last.addr.wrapping_add(last.bytes)
            && last.mode == access.mode
            && last.space == access.space
        {
            last.bytes += access.bytes;
            return;
        }
        self.record_near(access);
    }

    fn record_near(&mut self, access: Access) {
        const WINDOW: usize = 8;
        let n = self.ranges.len();
        for r in self.ranges[n.saturating_sub(WINDOW)..].iter_mut().rev() {
            if r.mode == access.mode && r.space == access.space {
                if access.addr >= r.addr && access.end() <= r.end() {
                    return;
                }
                if access.addr == r.end() {
                    r.bytes += access.bytes;
                    return;
                }
            }
        }
        if access.bytes != 0 {
            self.ranges.push(access);
        }
    }

    /// Sorts the ranges and merges those that overlap or touch in the same direction.
    pub fn normalize(&mut self) {
        let key = |a: &Access| (a.space as u8, a.mode as u8, a.addr);
        self.ranges.sort_unstable_by_key(key);
        let mut out: SmallVec<[Access; 2]> = SmallVec::with_capacity(self.ranges.len());
        for a in self.ranges.drain(..) {
            match out.last_mut() {
                Some(last)
                    if last.mode == a.mode && last.space == a.space && a.addr <= last.end() =>
                {
                    let end = last.end().max(a.end());
                    last.bytes = end - last.addr;
                }
                _ => out.push(a),
            }
        }
        self.ranges = out;
    }

    /// Marks the set as an upper bound by blocks: ranges with `bytes == 0` stand for the whole
    /// block that holds their address.
    #[inline]
    pub fn mark_inexact(&mut self) {
        self.inexact = true;
    }

    /// Whether every range is exact (bytes known); otherwise some stand for whole blocks.
    #[inline]
    pub fn exact(&self) -> bool {
        !self.inexact
    }

    /// The ranges, in the order they were added.
    #[inline]
    pub fn ranges(&self) -> &[Access] {
        &self.ranges
    }

    /// Whether the set names no memory.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ranges_in_one_direction_merge() {
        let mut s = AccessSet::new();
        s.push(Access::read(0x1000, 64));
        s.push(Access::read(0x1040, 64));
        s.push(Access::write(0x1080, 8));
        assert_eq!(
            s.ranges(),
            &[Access::read(0x1000, 128), Access::write(0x1080, 8)]
        );
        assert!(s.exact());
    }

    #[test]
    fn the_same_range_read_and_written_is_read_write() {
        let mut s = AccessSet::new();
        s.push(Access::read(0x1000, 64));
        s.push(Access::write(0x1000, 64));
        assert_eq!(s.ranges().len(), 1);
        assert_eq!(s.ranges()[0].mode, AccessMode::ReadWrite);
    }

    #[test]
    fn interleaved_sweeps_over_three_buffers_record_as_three_ranges() {
        let mut s = AccessSet::new();
        for i in 0..100u64 {
            s.record(Access::read(0x1000 + 4 * i, 4));
            s.record(Access::read(0x9000 + 4 * i, 4));
            s.record(Access::write(0x20000 + 4 * i, 4));
            s.record(Access::read(0x1000 + 4 * i, 4));
        }
        s.normalize();
        assert_eq!(
            s.ranges(),
            &[
                Access::read(0x1000, 400),
                Access::read(0x9000, 400),
                Access::write(0x20000, 400)
            ]
        );
    }

    #[test]
    fn empty_ranges_count_only_in_inexact_sets() {
        let mut s = AccessSet::new();
        s.push(Access::read(0x1000, 0));
        assert!(s.is_empty());
        s.mark_inexact();
        s.push(Access::read(0x1000, 0));
        assert_eq!(s.ranges().len(), 1);
        assert!(!s.exact());
        s.clear();
        assert!(s.exact() && s.is_empty());
    }
}
