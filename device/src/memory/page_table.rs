//! Page tables: one [`AddressSpace`] per context, mapping virtual pages (4 KiB or 2 MiB) to
//! physical pages.
//!
//! The table is stored as extents — one entry per run of pages mapped to contiguous physical
//! memory, keyed by virtual start in a `BTreeMap` — rather than as a radix tree of page-table
//! entries. Translations are the same page-granular answers a radix walk gives, but mapping a
//! 64 GiB heap costs one entry instead of millions, and lookups are O(log mappings). The
//! software TLB in the engine sits in front of it for hot paths.

use std::collections::BTreeMap;

use smallvec::SmallVec;

use super::{DriverError, MemFault};
use crate::abi::NULL_GUARD_END;

/// Size of a 4 KiB page.
pub const NORMAL_PAGE_SIZE: u64 = 4096;
/// Size of a 2 MiB huge page.
pub const HUGE_PAGE_SIZE: u64 = 2 << 20;

/// The two page sizes of the NPU MMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PageSize {
    /// 4 KiB pages: fine-grained, but each costs a page-table entry to map.
    Normal4K,
    /// 2 MiB pages: one entry maps 512 times more memory, so mapping is cheaper and TLB reach
    /// larger; memory is reserved in 2 MiB units.
    Huge2M,
}

impl PageSize {
    /// The page size in bytes.
    #[inline]
    pub const fn bytes(self) -> u64 {
        match self {
            PageSize::Normal4K => NORMAL_PAGE_SIZE,
            PageSize::Huge2M => HUGE_PAGE_SIZE,
        }
    }

    /// `bytes() - 1`: masks the offset inside a page.
    #[inline]
    pub const fn offset_mask(self) -> u64 {
        self.bytes() - 1
    }

    /// Whether `addr` is a multiple of the page size.
    #[inline]
    pub const fn is_aligned(self, addr: u64) -> bool {
        addr & self.offset_mask() == 0
    }
}

/// The result of translating one virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The physical address of the translated virtual address.
    pub pa: u64,
    /// Virtual address of the start of the page holding it.
    pub page_base_va: u64,
    /// Physical address of the start of that page.
    pub page_pa: u64,
    /// Size of that page.
    pub page_size: PageSize,
}

impl Translation {
    /// Bytes from the translated address to the end of its page: how far an access may run
    /// before it needs the next translation.
    #[inline]
    pub fn page_remaining(&self) -> u64 {
        self.page_size.bytes() - (self.pa - self.page_pa)
    }
}

/// One mapping of an address space: `len` bytes at `va` map to `pa` in pages of `page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Virtual start (page-aligned).
    pub va: u64,
    /// Length in bytes (a whole number of pages).
    pub len: u64,
    /// Physical start (page-aligned).
    pub pa: u64,
    /// Page size of every page in the mapping.
    pub page: PageSize,
}

impl Mapping {
    /// Exclusive virtual end. Cannot overflow: `map` checks it.
    #[inline]
    pub fn end(&self) -> u64 {
        self.va + self.len
    }
}

#[derive(Clone, Copy, Debug)]
struct Extent {
    len: u64,
    pa: u64,
    page: PageSize,
}

/// A context's page table: a set of non-overlapping mappings of virtual to physical pages.
///
/// ```
/// use npusim_device::memory::{AddressSpace, PageSize};
/// let mut space = AddressSpace::new();
/// space.map(0x10_0000_0000, 0x4_0000_0000, 4 << 20, PageSize::Huge2M).unwrap();
/// let t = space.translate(0x10_0020_0010).unwrap();
/// assert_eq!(t.pa, 0x4_0020_0010);
/// assert_eq!(t.page_base_va, 0x10_0020_0000);
/// space.unmap(0x10_0000_0000, 4 << 20).unwrap();
/// assert!(space.translate(0x10_0020_0010).is_err());
/// ```
#[derive(Clone, Debug, Default)]
pub struct AddressSpace {
    extents: BTreeMap<u64, Extent>,
    mapped_bytes: u64,
}

impl AddressSpace {
    /// An empty address space: every access faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `len` bytes of virtual memory at `va` to physical memory at `pa`, in pages of
    /// `page`. `va`, `pa` and `len` must be multiples of the page size, the range must not
    /// overflow, touch the null guard, or overlap an existing mapping. On error nothing changes.
    pub fn map(&mut self, va: u64, pa: u64, len: u64, page: PageSize) -> Result<(), DriverError> {
        let end = check_range(va, len, page)?;
        if !page.is_aligned(pa) {
            return Err(DriverError::BadAlignment {
                addr: pa,
                align: page.bytes(),
            });
        }
        if pa.checked_add(len).is_none() {
            return Err(DriverError::AddressOverflow { addr: pa, len });
        }
        if va < NULL_GUARD_END {
            return Err(DriverError::NullGuard { va });
        }
        let before = self.extents.range(..va).next_back();
        let after = self.extents.range(va..).next();
        if before.is_some_and(|(&s, e)| s + e.len > va) || after.is_some_and(|(&s, _)| s < end) {
            return Err(DriverError::Overlap { va, len });
        }
        self.extents.insert(va, Extent { len, pa, page });
        self.mapped_bytes += len;
        Ok(())
    }

    /// Unmaps every page in `[va, va + len)`. The whole range must be mapped, and its ends must
    /// fall on page boundaries of the mappings they cut (a huge page is never split). On error
    /// nothing changes.
    pub fn unmap(&mut self, va: u64, len: u64) -> Result<(), DriverError> {
        let end = check_range(va, len, PageSize::Normal4K)?;
        // Collect the extents covering the range and check coverage before changing anything.
        let mut cover: SmallVec<[(u64, Extent); 4]> = SmallVec::new();
        let first = self
            .extents
            .range(..=va)
            .next_back()
            .filter(|(s, e)| **s + e.len > va)
            .ok_or(DriverError::NotMapped { va })?;
        cover.push((*first.0, *first.1));
        let mut cursor = first.0 + first.1.len;
        if cursor < end {
            for (&s, e) in self.extents.range(cursor..end) {
                if s != cursor {
                    break;
                }
                cover.push((s, *e));
                cursor = s + e.len;
            }
        }
        if cursor < end {
            return Err(DriverError::NotMapped { va: cursor });
        }
        let (head_start, head) = cover[0];
        if !head.page.is_aligned(va - head_start) {
            return Err(DriverError::BadAlignment {
                addr: va,
                align: head.page.bytes(),
            });
        }
        let (tail_start, tail) = cover[cover.len() - 1];
        if !tail.page.is_aligned(end - tail_start) {
            return Err(DriverError::BadAlignment {
                addr: end,
                align: tail.page.bytes(),
            });
        }
        for &(s, _) in &cover {
            self.extents.remove(&s);
        }
        if head_start < va {
            let keep = va - head_start;
            self.extents
                .insert(head_start, Extent { len: keep, ..head });
        }
        let tail_end = tail_start + tail.len;
        if tail_end > end {
            let cut = end - tail_start;
            self.extents.insert(
                end,
                Extent {
                    len: tail_end - end,
                    pa: tail.pa + cut,
                    page: tail.page,
                },
            );
        }
        self.mapped_bytes -= len;
        Ok(())
    }

    /// Translates `va` to its physical address and page.
    #[inline]
    pub fn translate(&self, va: u64) -> Result<Translation, MemFault> {
        let (&start, e) = self
            .extents
            .range(..=va)
            .next_back()
            .ok_or(MemFault::PageFault { va })?;
        let offset = va - start;
        if offset >= e.len {
            return Err(MemFault::PageFault { va });
        }
        let page_offset = offset & !e.page.offset_mask();
        Ok(Translation {
            pa: e.pa + offset,
            page_base_va: start + page_offset,
            page_pa: e.pa + page_offset,
            page_size: e.page,
        })
    }

    /// Checks that every byte of `[va, va + len)` is mapped, without translating page by page
    /// (O(mappings crossed)); the fault names the first unmapped address.
    pub fn check_mapped(&self, va: u64, len: u64) -> Result<(), MemFault> {
        if len == 0 {
            return Ok(());
        }
        let end = va.checked_add(len);
        let mut cursor = va;
        loop {
            let (&s, e) = self
                .extents
                .range(..=cursor)
                .next_back()
                .filter(|(s, e)| **s + e.len > cursor)
                .ok_or(MemFault::PageFault { va: cursor })?;
            cursor = s + e.len;
            if end.is_some_and(|end| cursor >= end) {
                return Ok(());
            }
        }
    }

    /// Bytes mapped in total.
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped_bytes
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// The mappings, in increasing virtual address order.
    pub fn mappings(&self) -> impl Iterator<Item = Mapping> + '_ {
        self.extents.iter().map(|(&va, e)| Mapping {
            va,
            len: e.len,
            pa: e.pa,
            page: e.page,
        })
    }
}

/// Validates a page-granular range and returns its exclusive end.
fn check_range(va: u64, len: u64, page: PageSize) -> Result<u64, DriverError> {
    if len == 0 {
        return Err(DriverError::ZeroLength);
    }
    for addr in [va, len] {
        if !page.is_aligned(addr) {
            return Err(DriverError::BadAlignment {
                addr,
                align: page.bytes(),
            });
        }
    }
    va.checked_add(len)
        .ok_or(DriverError::AddressOverflow { addr: va, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VA: u64 = 0x10_0000_0000;

    #[test]
    fn partial_unmap_splits_a_mapping() {
        let mut s = AddressSpace::new();
        s.map(VA, 0x20_0000, 16 * 4096, PageSize::Normal4K).unwrap();
        s.unmap(VA + 4 * 4096, 4 * 4096).unwrap();
        assert_eq!(s.mapped_bytes(), 12 * 4096);
        assert!(s.translate(VA + 4 * 4096).is_err());
        assert_eq!(s.translate(VA + 3 * 4096).unwrap().pa, 0x20_0000 + 3 * 4096);
        assert_eq!(
            s.translate(VA + 8 * 4096 + 5).unwrap().pa,
            0x20_0000 + 8 * 4096 + 5
        );
        assert_eq!(s.mappings().count(), 2);
    }

    #[test]
    fn unmap_never_splits_a_huge_page() {
        let mut s = AddressSpace::new();
        s.map(VA, 0, 2 * HUGE_PAGE_SIZE, PageSize::Huge2M).unwrap();
        let err = s.unmap(VA + 4096, 4096).unwrap_err();
        assert!(matches!(err, DriverError::BadAlignment { .. }));
        s.unmap(VA + HUGE_PAGE_SIZE, HUGE_PAGE_SIZE).unwrap();
        assert_eq!(s.mapped_bytes(), HUGE_PAGE_SIZE);
    }

    #[test]
    fn unmap_across_a_hole_changes_nothing() {
        let mut s = AddressSpace::new();
        s.map(VA, 0, 4096, PageSize::Normal4K).unwrap();
        s.map(VA + 2 * 4096, 4096, 4096, PageSize::Normal4K)
            .unwrap();
        assert_eq!(
            s.unmap(VA, 3 * 4096),
            Err(DriverError::NotMapped { va: VA + 4096 })
        );
        assert_eq!(s.mapped_bytes(), 2 * 4096);
        assert_eq!(
            s.check_mapped(VA, 3 * 4096),
            Err(MemFault::PageFault { va: VA + 4096 })
        );
        assert!(s.check_mapped(VA + 10, 10).is_ok());
    }
}
