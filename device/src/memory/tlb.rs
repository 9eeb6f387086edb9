//! The software TLB of one context (DESIGN.md §4): caches virtual-page → physical-page
//! translations so that the AI core's loads and stores and the copy engines do not ask the
//! [`Driver`] for every access.
//!
//! A hit costs a few nanoseconds: a one-entry "last translation" register is checked first
//! (consecutive accesses almost always fall in the same page), then a hash map keyed by page
//! number (with an [`FxBuildHasher`]). A miss asks the driver — a counted, costed driver call —
//! and caches the page, 4 KiB or 2 MiB.
//!
//! Staleness: every lookup first compares the address space's unmap epoch
//! ([`Driver::mapping_epoch`]) with the one its entries were filled under, and flushes when it
//! moved. So no unmap — by the pool, by a context teardown, by anyone — can leave a translation
//! to released memory behind. [`Tlb::invalidate`] and [`Tlb::flush`] remain for callers that
//! want to drop entries explicitly. Faults are never cached: a page mapped later is found.

use std::collections::HashMap;

use crate::memory::{AsId, Driver, FxBuildHasher, MemFault, PageSize};

/// Entries kept before the TLB starts over (bounds host memory; a flush is deterministic,
/// unlike any eviction that depends on hash-map order).
pub const DEFAULT_TLB_CAPACITY: usize = 1 << 16;

/// Counters of a [`Tlb`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbStats {
    /// Translations served from the TLB.
    pub hits: u64,
    /// Translations that were not cached.
    pub misses: u64,
    /// `Driver::translate` calls made (one per miss).
    pub driver_calls: u64,
    /// Misses the driver answered with a fault.
    pub faults: u64,
    /// Times all entries were dropped (explicit flush, unmap epoch change, capacity, or a
    /// different address space).
    pub flushes: u64,
    /// Entries currently cached.
    pub entries: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    page_pa: u64,
}

/// A per-context software TLB. See the [module docs](self).
///
/// ```
/// use npusim_device::memory::{Driver, PageSize};
/// use npusim_device::memory::tlb::Tlb;
///
/// let mut driver = Driver::new(1 << 30).unwrap();
/// let asid = driver.create_address_space();
/// let chunk = driver.reserve(2 << 20, PageSize::Huge2M).unwrap();
/// driver.map(asid, 0x10_0000_0000, chunk).unwrap();
/// let mut tlb = Tlb::new();
/// let pa = tlb.translate(&driver, asid, 0x10_0000_0040).unwrap(); // miss: asks the driver
/// assert_eq!(tlb.translate(&driver, asid, 0x10_0010_0000).unwrap(), pa - 0x40 + 0x10_0000);
/// assert_eq!((tlb.stats().hits, tlb.stats().misses), (1, 1));
/// ```
#[derive(Debug)]
pub struct Tlb {
    asid: Option<AsId>,
    epoch: u64,
    // The last translation: hit when `va & !last_mask == last_base`. `last_base = u64::MAX`
    // never matches (page bases have zero low bits), which marks it empty.
    last_base: u64,
    last_mask: u64,
    last_pa: u64,
    entries: HashMap<u64, Entry, FxBuildHasher>,
    huge_entries: usize,
    normal_entries: usize,
    capacity: usize,
    stats: TlbStats,
}

impl Default for Tlb {
    fn default() -> Self {
        Self::new()
    }
}

/// Key of a cached page: the page number tagged with its size in the low bit, so both sizes
/// share one map.
#[inline]
fn key(va: u64, page: PageSize) -> u64 {
    match page {
        PageSize::Huge2M => ((va >> 21) << 1) | 1,
        PageSize::Normal4K => (va >> 12) << 1,
    }
}

impl Tlb {
    /// An empty TLB holding up to [`DEFAULT_TLB_CAPACITY`] entries.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_TLB_CAPACITY)
    }

    /// An empty TLB holding up to `capacity` entries (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            asid: None,
            epoch: 0,
            last_base: u64::MAX,
            last_mask: 0,
            last_pa: 0,
            entries: HashMap::default(),
            huge_entries: 0,
            normal_entries: 0,
            capacity: capacity.max(1),
            stats: TlbStats::default(),
        }
    }

    /// Translates `va` in address space `asid` to a physical address.
    #[inline]
    pub fn translate(&mut self, driver: &Driver, asid: AsId, va: u64) -> Result<u64, MemFault> {
        self.translate_extent(driver, asid, va).map(|(pa, _)| pa)
    }

    /// Translates `va` and also returns how many bytes remain in its page: an access of up to
    /// that many bytes needs no further translation.
    #[inline]
    pub fn translate_extent(
        &mut self,
        driver: &Driver,
        asid: AsId,
        va: u64,
    ) -> Result<(u64, u64), MemFault> {
        if self.asid != Some(asid) || driver.mapping_epoch(asid) != Some(self.epoch) {
            self.resync(driver, asid, va)?;
        }
        if va & !self.last_mask == self.last_base {
            self.stats.hits += 1;
            let offset = va & self.last_mask;
            return Ok((self.last_pa + offset, self.last_mask + 1 - offset));
        }
        self.lookup(driver, asid, va)
    }

    /// Drops the cached translations of every page overlapping `[va, va + len)`.
    pub fn invalidate(&mut self, va: u64, len: u64) {
        if len == 0 {
            return;
        }
        let last = va.saturating_add(len - 1);
        if self.last_base != u64::MAX
            && self.last_base <= last
            && va <= self.last_base + self.last_mask
        {
            self.last_base = u64::MAX;
        }
        let huge_pages = (last >> 21) - (va >> 21) + 1;
        let normal_pages = (last >> 12) - (va >> 12) + 1;
        if huge_pages + normal_pages > self.entries.len() as u64 {
            // A range wider than the TLB: filter the entries instead of probing every page.
            self.entries.retain(|&k, _| {
                let (first, end) = if k & 1 == 1 {
                    ((k >> 1) << 21, ((k >> 1) << 21) + (1 << 21) - 1)
                } else {
                    ((k >> 1) << 12, ((k >> 1) << 12) + (1 << 12) - 1)
                };
                end < va || first > last
            });
            self.recount();
        } else {
            for p in (va >> 21)..=(last >> 21) {
                if self.entries.remove(&((p << 1) | 1)).is_some() {
                    self.huge_entries -= 1;
                }
            }
            for p in (va >> 12)..=(last >> 12) {
                if self.entries.remove(&(p << 1)).is_some() {
                    self.normal_entries -= 1;
                }
            }
        }
    }

    /// Drops every cached translation.
    pub fn flush(&mut self) {
        self.entries.clear();
        self.huge_entries = 0;
        self.normal_entries = 0;
        self.last_base = u64::MAX;
        self.stats.flushes += 1;
    }

    /// The counters.
    pub fn stats(&self) -> TlbStats {
        TlbStats {
            entries: self.entries.len() as u64,
            ..self.stats
        }
    }

    /// Starts over for `asid` at its current epoch; faults if the address space is gone.
    #[cold]
    fn resync(&mut self, driver: &Driver, asid: AsId, va: u64) -> Result<(), MemFault> {
        self.flush();
        self.asid = Some(asid);
        match driver.mapping_epoch(asid) {
            Some(epoch) => {
                self.epoch = epoch;
                Ok(())
            }
            None => {
                // Forget the address space so the next call resyncs (and faults) again.
                self.asid = None;
                self.stats.faults += 1;
                Err(MemFault::PageFault { va })
            }
        }
    }

    /// The hash-map probe and, on a miss, the driver walk.
    fn lookup(&mut self, driver: &Driver, asid: AsId, va: u64) -> Result<(u64, u64), MemFault> {
        // Probe the page size of the last hit first: programs mostly use one page size, so
        // a hit usually costs one hash probe.
        let huge = (PageSize::Huge2M, self.huge_entries);
        let normal = (PageSize::Normal4K, self.normal_entries);
        let probes = if self.last_mask == PageSize::Huge2M.offset_mask() {
            [huge, normal]
        } else {
            [normal, huge]
        };
        for (page, count) in probes {
            if count > 0
                && let Some(e) = self.entries.get(&key(va, page))
            {
                self.stats.hits += 1;
                return Ok(self.remember(va, e.page_pa, page));
            }
        }
        self.stats.misses += 1;
        self.stats.driver_calls += 1;
        let t = driver.translate(asid, va).inspect_err(|_| {
            self.stats.faults += 1;
        })?;
        if self.entries.len() >= self.capacity {
            self.flush();
        }
        self.entries
            .insert(key(va, t.page_size), Entry { page_pa: t.page_pa });
        match t.page_size {
            PageSize::Huge2M => self.huge_entries += 1,
            PageSize::Normal4K => self.normal_entries += 1,
        }
        Ok(self.remember(va, t.page_pa, t.page_size))
    }

    #[inline]
    fn remember(&mut self, va: u64, page_pa: u64, page: PageSize) -> (u64, u64) {
        self.last_mask = page.offset_mask();
        self.last_base = va & !self.last_mask;
        self.last_pa = page_pa;
        let offset = va & self.last_mask;
        (page_pa + offset, page.bytes() - offset)
    }

    fn recount(&mut self) {
        self.huge_entries = self.entries.keys().filter(|&&k| k & 1 == 1).count();
        self.normal_entries = self.entries.len() - self.huge_entries;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Driver;

    const VA: u64 = 0x10_0000_0000;

    #[test]
    fn a_tlb_can_live_in_a_component() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<Tlb>();
    }

    #[test]
    fn normal_and_huge_pages_are_cached_separately() {
        let mut d = Driver::new(1 << 30).unwrap();
        let asid = d.create_address_space();
        let n = d.reserve(8192, PageSize::Normal4K).unwrap();
        let h = d.reserve(2 << 20, PageSize::Huge2M).unwrap();
        d.map(asid, VA, n).unwrap();
        d.map(asid, VA + (4 << 20), h).unwrap();
        let mut tlb = Tlb::new();
        let pn = d.chunk(n).unwrap().pa;
        let ph = d.chunk(h).unwrap().pa;
        for _ in 0..3 {
            assert_eq!(tlb.translate(&d, asid, VA + 4100).unwrap(), pn + 4100);
            assert_eq!(tlb.translate(&d, asid, VA + 10).unwrap(), pn + 10);
            assert_eq!(
                tlb.translate_extent(&d, asid, VA + (5 << 20)).unwrap(),
                (ph + (1 << 20), 1 << 20)
            );
        }
        let s = tlb.stats();
        assert_eq!((s.misses, s.hits, s.entries), (3, 6, 3));
        assert_eq!(d.stats().calls.translate, 3);
    }

    #[test]
    fn invalidate_drops_only_the_range() {
        let mut d = Driver::new(1 << 30).unwrap();
        let asid = d.create_address_space();
        let c = d.reserve(16 * 4096, PageSize::Normal4K).unwrap();
        d.map(asid, VA, c).unwrap();
        let mut tlb = Tlb::new();
        for p in 0..16 {
            tlb.translate(&d, asid, VA + p * 4096).unwrap();
        }
        tlb.invalidate(VA + 4096, 2 * 4096);
        assert_eq!(tlb.stats().entries, 14);
        tlb.invalidate(0, u64::MAX);
        assert_eq!(tlb.stats().entries, 0);
    }

    #[test]
    fn unmap_invalidates_without_being_told() {
        let mut d = Driver::new(1 << 30).unwrap();
        let asid = d.create_address_space();
        let c = d.reserve(2 << 20, PageSize::Huge2M).unwrap();
        d.map(asid, VA, c).unwrap();
        let mut tlb = Tlb::new();
        tlb.translate(&d, asid, VA).unwrap();
        d.unmap(asid, VA).unwrap();
        assert_eq!(
            tlb.translate(&d, asid, VA + 8),
            Err(MemFault::PageFault { va: VA + 8 })
        );
        // Map other memory at the same address: the TLB finds the new page.
        d.release(c).unwrap();
        let _hold = d.reserve(2 << 20, PageSize::Huge2M).unwrap();
        let c2 = d.reserve(2 << 20, PageSize::Huge2M).unwrap();
        d.map(asid, VA, c2).unwrap();
        assert_eq!(
            tlb.translate(&d, asid, VA + 8).unwrap(),
            d.chunk(c2).unwrap().pa + 8
        );
        d.destroy_address_space(asid).unwrap();
        assert!(tlb.translate(&d, asid, VA + 8).is_err());
    }

    #[test]
    fn switching_address_space_flushes() {
        let mut d = Driver::new(1 << 30).unwrap();
        let a = d.create_address_space();
        let b = d.create_address_space();
        let ca = d.reserve(4096, PageSize::Normal4K).unwrap();
        d.map(a, VA, ca).unwrap();
        let mut tlb = Tlb::new();
        tlb.translate(&d, a, VA).unwrap();
        assert!(tlb.translate(&d, b, VA).is_err(), "b maps nothing at VA");
        assert_eq!(tlb.stats().flushes, 2);
    }

    #[test]
    fn capacity_bounds_the_entries() {
        let mut d = Driver::new(1 << 30).unwrap();
        let asid = d.create_address_space();
        let c = d.reserve(64 * 4096, PageSize::Normal4K).unwrap();
        d.map(asid, VA, c).unwrap();
        let mut tlb = Tlb::with_capacity(8);
        for p in 0..64 {
            tlb.translate(&d, asid, VA + p * 4096).unwrap();
            assert!(tlb.stats().entries <= 8);
        }
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Map(u64, bool),
            Unmap(u64),
            Probe(u64, u64),
            Invalidate(u64, u64),
        }

        const SLOTS: u64 = 16;
        const SLOT: u64 = 4 << 20;

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                2 => (0..SLOTS, any::<bool>()).prop_map(|(s, h)| Op::Map(s, h)),
                1 => (0..SLOTS).prop_map(Op::Unmap),
                8 => (0..SLOTS, 0..SLOT).prop_map(|(s, o)| Op::Probe(s, o)),
                1 => (0..SLOTS * SLOT, 0..2 * SLOT).prop_map(|(a, l)| Op::Invalidate(a, l)),
            ]
        }

        /// Replays `ops`, checking every probe against the page table itself.
        fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
            let mut d = Driver::new(256 << 20).unwrap();
            let asid = d.create_address_space();
            let mut slots: Vec<Option<crate::memory::ChunkId>> = vec![None; SLOTS as usize];
            let mut tlb = Tlb::with_capacity(64);
            for op in ops {
                match op {
                    Op::Map(s, huge) if slots[s as usize].is_none() => {
                        let page = if huge {
                            PageSize::Huge2M
                        } else {
                            PageSize::Normal4K
                        };
                        let c = d.reserve(2 << 20, page).unwrap();
                        d.map(asid, VA + s * SLOT, c).unwrap();
                        slots[s as usize] = Some(c);
                    }
                    Op::Unmap(s) => {
                        if let Some(c) = slots[s as usize].take() {
                            d.unmap(asid, VA + s * SLOT).unwrap();
                            d.release(c).unwrap();
                        }
                    }
                    Op::Probe(s, off) => {
                        let va = VA + s * SLOT + off;
                        let expect = d.address_space(asid).unwrap().translate(va);
                        let got = tlb.translate_extent(&d, asid, va);
                        match (expect, got) {
                            (Ok(t), Ok((pa, rest))) => {
                                prop_assert_eq!(pa, t.pa);
                                prop_assert_eq!(rest, t.page_remaining());
                            }
                            (Err(_), Err(_)) => {}
                            (e, g) => prop_assert!(false, "driver {:?} tlb {:?}", e, g),
                        }
                    }
                    Op::Invalidate(a, l) => tlb.invalidate(VA + a, l),
                    Op::Map(..) => {}
                }
                let s = tlb.stats();
                prop_assert_eq!(s.misses, s.driver_calls);
                prop_assert!(s.entries <= 64);
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn tlb_agrees_with_the_page_table(ops in proptest::collection::vec(op(), 1..300)) {
                run(ops)?;
            }
        }
    }
}
