//! The driver's physical allocator: hands out contiguous physical ranges ("chunks") of
//! device memory. It runs only on reserve and release, which are rare (the runtime pool caches
//! chunks), so it is a plain ordered free list; simple and obviously correct beats fast here.

use std::collections::BTreeMap;

use super::{HUGE_PAGE_SIZE, PageSize};

/// Free physical ranges, keyed by start, never adjacent (neighbours are merged on release).
#[derive(Clone, Debug)]
pub(crate) struct FrameAllocator {
    free: BTreeMap<u64, u64>,
    free_bytes: u64,
}

impl FrameAllocator {
    pub(crate) fn new(capacity: u64) -> Self {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(0, capacity);
        }
        Self {
            free,
            free_bytes: capacity,
        }
    }

    pub(crate) fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Takes `len` bytes (a multiple of the page size) aligned to the page size. Huge chunks
    /// are placed first-fit from the bottom of memory and normal chunks first-fit from the top,
    /// so 4 KiB chunks do not pepper the 2 MiB-aligned ranges that huge chunks need.
    pub(crate) fn alloc(&mut self, len: u64, page: PageSize) -> Option<u64> {
        let (start, range_start, range_len) = match page {
            PageSize::Huge2M => self.free.iter().find_map(|(&s, &l)| {
                let aligned = s.checked_next_multiple_of(HUGE_PAGE_SIZE)?;
                let end = aligned.checked_add(len)?;
                (end <= s + l).then_some((aligned, s, l))
            })?,
            PageSize::Normal4K => self
                .free
                .iter()
                .rev()
                .find_map(|(&s, &l)| (l >= len).then(|| (s + l - len, s, l)))?,
        };
        self.free.remove(&range_start);
        if start > range_start {
            self.free.insert(range_start, start - range_start);
        }
        let end = start + len;
        let range_end = range_start + range_len;
        if range_end > end {
            self.free.insert(end, range_end - end);
        }
        self.free_bytes -= len;
        Some(start)
    }

    /// Returns `[pa, pa + len)`, which the caller got from `alloc`, merging it with free
    /// neighbours.
    pub(crate) fn release(&mut self, pa: u64, len: u64) {
        let mut start = pa;
        let mut end = pa + len;
        if let Some((&s, &l)) = self.free.range(..pa).next_back()
            && s + l == pa
        {
            self.free.remove(&s);
            start = s;
        }
        if let Some(l) = self.free.remove(&end) {
            end += l;
        }
        self.free.insert(start, end - start);
        self.free_bytes += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_chunks_are_aligned_and_normal_chunks_come_from_the_top() {
        let mut f = FrameAllocator::new(16 << 20);
        let n = f.alloc(4096, PageSize::Normal4K).unwrap();
        assert_eq!(n, (16 << 20) - 4096);
        let h = f.alloc(2 << 20, PageSize::Huge2M).unwrap();
        assert_eq!(h % HUGE_PAGE_SIZE, 0);
        f.release(n, 4096);
        f.release(h, 2 << 20);
        assert_eq!(f.free_bytes(), 16 << 20);
        assert_eq!(f.free.len(), 1, "releases merge back into one range");
    }

    #[test]
    fn fragmented_free_memory_refuses_a_contiguous_chunk() {
        let mut f = FrameAllocator::new(4 << 20);
        let n1 = f.alloc(1 << 20, PageSize::Normal4K).unwrap();
        let n2 = f.alloc(2 << 20, PageSize::Normal4K).unwrap();
        let n3 = f.alloc(1 << 20, PageSize::Normal4K).unwrap();
        f.release(n1, 1 << 20);
        f.release(n3, 1 << 20);
        assert_eq!(f.free_bytes(), 2 << 20);
        assert_eq!(f.alloc(2 << 20, PageSize::Huge2M), None);
        assert_eq!(f.alloc(2 << 20, PageSize::Normal4K), None);
        f.release(n2, 2 << 20);
        assert_eq!(f.free.len(), 1);
        assert_eq!(f.alloc(4 << 20, PageSize::Huge2M), Some(0));
    }
}
