//! The kernel-mode driver interface: physical memory, chunk reservation, address spaces and
//! their page tables.
//!
//! Every call models an ioctl: it is counted per kind and adds its modeled cost to an
//! accumulator that the engine drains into the simulated host clock
//! ([`Driver::take_host_cost_ns`]). Data access by physical address ([`Driver::phys`]) and the
//! page-by-page virtual copies ([`Driver::read_virt`] and friends) are not driver calls: they
//! model the device's own data path, and count translations instead.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use slotmap::{SlotMap, new_key_type};
use smallvec::SmallVec;

use super::frames::FrameAllocator;
use super::{AddressSpace, DriverError, MemFault, PageSize, PhysMem, Translation};

new_key_type! {
    /// An address space (one per context) created by [`Driver::create_address_space`].
    /// Generational: a destroyed address space's id is never valid again.
    pub struct AsId;
    /// A reserved physical chunk, from [`Driver::reserve`]. Generational like [`AsId`].
    pub struct ChunkId;
}

/// The modeled host-side cost of driver calls, in simulated nanoseconds.
///
/// The defaults follow measured orders of magnitude on Linux accelerator drivers: an ioctl
/// round trip costs about a microsecond and a half, and writing (or tearing down, with its TLB
/// shootdown) one page-table entry about a tenth of a microsecond, which is why mapping a
/// large buffer in 4 KiB pages is far slower than in 2 MiB pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverCosts {
    /// Cost of every call: entering and leaving kernel mode once. Default 1500 ns.
    pub call_ns: u64,
    /// Extra cost per page mapped by [`Driver::map`]. Default 100 ns.
    pub map_page_ns: u64,
    /// Extra cost per page unmapped by [`Driver::unmap`] or
    /// [`Driver::destroy_address_space`]. Default 100 ns.
    pub unmap_page_ns: u64,
    /// Cost of a [`Driver::translate`] call (a software-TLB miss), charged instead of
    /// `call_ns`. Default 1500 ns, a crossing like any other call; set it to 0 to treat misses
    /// as free page walks (they happen while the device runs, not on the host's path).
    pub translate_ns: u64,
}

impl Default for DriverCosts {
    fn default() -> Self {
        Self {
            call_ns: 1_500,
            map_page_ns: 100,
            unmap_page_ns: 100,
            translate_ns: 1_500,
        }
    }
}

/// How many driver calls of each kind were made (refused calls included: they crossed into
/// kernel mode too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverCalls {
    /// [`Driver::create_address_space`] calls.
    pub create_address_space: u64,
    /// [`Driver::destroy_address_space`] calls.
    pub destroy_address_space: u64,
    /// [`Driver::reserve`] calls.
    pub reserve: u64,
    /// [`Driver::release`] calls.
    pub release: u64,
    /// [`Driver::map`] calls.
    pub map: u64,
    /// [`Driver::unmap`] calls.
    pub unmap: u64,
    /// [`Driver::translate`] calls (software-TLB misses).
    pub translate: u64,
}

impl DriverCalls {
    /// All calls, of every kind.
    pub fn total(&self) -> u64 {
        self.create_address_space
            + self.destroy_address_space
            + self.reserve
            + self.release
            + self.map
            + self.unmap
            + self.translate
    }
}

/// A snapshot of the driver's state and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverStats {
    /// Device memory size.
    pub capacity: u64,
    /// Bytes held by reserved chunks.
    pub reserved_bytes: u64,
    /// Bytes not reserved.
    pub free_bytes: u64,
    /// Bytes mapped, summed over all mappings (a chunk mapped twice counts twice).
    pub mapped_bytes: u64,
    /// Host memory backing written device memory.
    pub backed_bytes: u64,
    /// Reserved chunks.
    pub chunks: u64,
    /// Live address spaces.
    pub address_spaces: u64,
    /// Driver calls per kind.
    pub calls: DriverCalls,
    /// Page translations done by the virtual-access helpers (not driver calls).
    pub virt_translations: u64,
    /// Modeled host cost of all calls so far, drained or not.
    pub host_cost_total_ns: u64,
}

/// What the driver knows about a reserved chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// Physical start (aligned to the page size).
    pub pa: u64,
    /// Length (a whole number of pages).
    pub len: u64,
    /// Page size the chunk is mapped with.
    pub page: PageSize,
    /// How many mappings of it exist.
    pub mappings: usize,
}

#[derive(Debug)]
struct Chunk {
    pa: u64,
    len: u64,
    page: PageSize,
    /// Where it is mapped: a chunk may be mapped into several address spaces (shared memory).
    maps: SmallVec<[(AsId, u64); 1]>,
}

#[derive(Debug, Default)]
struct Space {
    table: AddressSpace,
    /// Chunk mapped at each virtual start, for `unmap` and teardown.
    chunk_maps: BTreeMap<u64, ChunkId>,
    /// Bumped on every unmap: a software TLB that saw another value must drop its entries.
    epoch: u64,
}

#[derive(Debug, Default)]
struct Counters {
    create_address_space: u64,
    destroy_address_space: u64,
    reserve: u64,
    release: u64,
    map: u64,
    unmap: u64,
    // Translation happens through `&self` (many readers), hence atomics; relaxed ordering is
    // enough for counters.
    translate: AtomicU64,
    virt_translations: AtomicU64,
    host_cost_pending: AtomicU64,
    host_cost_total: AtomicU64,
}

/// The simulated NPU driver: owns device physical memory, reserves physical chunks, and maps
/// them into per-context address spaces.
///
/// ```
/// use npusim_device::memory::{Driver, PageSize};
/// let mut drv = Driver::new(64 << 30).unwrap();
/// let ctx = drv.create_address_space();
/// let chunk = drv.reserve(4 << 20, PageSize::Huge2M).unwrap();
/// drv.map(ctx, 0x10_0000_0000, chunk).unwrap();
/// drv.write_virt(ctx, 0x10_0000_0100, b"hello").unwrap();
/// let mut out = [0u8; 5];
/// drv.read_virt(ctx, 0x10_0000_0100, &mut out).unwrap();
/// assert_eq!(&out, b"hello");
/// assert_eq!(drv.stats().calls.total(), 3);
/// assert!(drv.take_host_cost_ns() > 0);
/// ```
#[derive(Debug)]
pub struct Driver {
    phys: PhysMem,
    frames: FrameAllocator,
    chunks: SlotMap<ChunkId, Chunk>,
    spaces: SlotMap<AsId, Space>,
    costs: DriverCosts,
    counters: Counters,
    reserved_bytes: u64,
    mapped_bytes: u64,
}

impl Driver {
    /// A driver for a device with `capacity` bytes of memory and default costs.
    pub fn new(capacity: u64) -> Result<Self, DriverError> {
        Self::with_costs(capacity, DriverCosts::default())
    }

    /// A driver with the given call costs.
    pub fn with_costs(capacity: u64, costs: DriverCosts) -> Result<Self, DriverError> {
        let phys = PhysMem::new(capacity)?;
        Ok(Self {
            frames: FrameAllocator::new(phys.capacity()),
            phys,
            chunks: SlotMap::with_key(),
            spaces: SlotMap::with_key(),
            costs,
            counters: Counters::default(),
            reserved_bytes: 0,
            mapped_bytes: 0,
        })
    }

    /// The cost model in use.
    pub fn costs(&self) -> DriverCosts {
        self.costs
    }

    /// Replaces the cost model (costs already accumulated stay).
    pub fn set_costs(&mut self, costs: DriverCosts) {
        self.costs = costs;
    }

    /// Returns the modeled host time of the calls made since the last drain, and resets it.
    pub fn take_host_cost_ns(&self) -> u64 {
        self.counters.host_cost_pending.swap(0, Relaxed)
    }

    /// A snapshot of sizes and counters.
    pub fn stats(&self) -> DriverStats {
        let c = &self.counters;
        DriverStats {
            capacity: self.phys.capacity(),
            reserved_bytes: self.reserved_bytes,
            free_bytes: self.frames.free_bytes(),
            mapped_bytes: self.mapped_bytes,
            backed_bytes: self.phys.backed_bytes(),
            chunks: self.chunks.len() as u64,
            address_spaces: self.spaces.len() as u64,
            calls: DriverCalls {
                create_address_space: c.create_address_space,
                destroy_address_space: c.destroy_address_space,
                reserve: c.reserve,
                release: c.release,
                map: c.map,
                unmap: c.unmap,
                translate: c.translate.load(Relaxed),
            },
            virt_translations: c.virt_translations.load(Relaxed),
            host_cost_total_ns: c.host_cost_total.load(Relaxed),
        }
    }

    /// Device physical memory, for the engine's data path.
    pub fn phys(&self) -> &PhysMem {
        &self.phys
    }

    /// Device physical memory, mutable.
    pub fn phys_mut(&mut self) -> &mut PhysMem {
        &mut self.phys
    }

    /// The page table of an address space, for inspection (not a driver call).
    pub fn address_space(&self, asid: AsId) -> Option<&AddressSpace> {
        self.spaces.get(asid).map(|s| &s.table)
    }

    /// What the driver knows about a chunk (not a driver call: `reserve` returned it).
    pub fn chunk(&self, id: ChunkId) -> Option<ChunkInfo> {
        self.chunks.get(id).map(|c| ChunkInfo {
            pa: c.pa,
            len: c.len,
            page: c.page,
            mappings: c.maps.len(),
        })
    }

    /// The unmap epoch of an address space: it changes whenever something is unmapped from it,
    /// so a translation cached under an older epoch may be stale. `None` once destroyed.
    #[inline]
    pub fn mapping_epoch(&self, asid: AsId) -> Option<u64> {
        self.spaces.get(asid).map(|s| s.epoch)
    }

    /// Creates an empty address space (a context's page table).
    pub fn create_address_space(&mut self) -> AsId {
        self.counters.create_address_space += 1;
        self.charge_call();
        self.spaces.insert(Space::default())
    }

    /// Destroys an address space: unmaps everything it had mapped. The chunks stay reserved —
    /// their owner releases them.
    pub fn destroy_address_space(&mut self, asid: AsId) -> Result<(), DriverError> {
        self.counters.destroy_address_space += 1;
        self.charge_call();
        let Some(space) = self.spaces.remove(asid) else {
            return Err(DriverError::UnknownAddressSpace(asid));
        };
        let mut pages = 0;
        for (va, id) in space.chunk_maps {
            if let Some(chunk) = self.chunks.get_mut(id) {
                chunk.maps.retain(|m| *m != (asid, va));
                self.mapped_bytes -= chunk.len;
                pages += chunk.len / chunk.page.bytes();
            }
        }
        self.charge_extra(pages * self.costs.unmap_page_ns);
        Ok(())
    }

    /// Reserves `len` bytes of physical memory (rounded up to whole pages of `page`) as one
    /// contiguous chunk, aligned to the page size.
    pub fn reserve(&mut self, len: u64, page: PageSize) -> Result<ChunkId, DriverError> {
        self.counters.reserve += 1;
        self.charge_call();
        if len == 0 {
            return Err(DriverError::ZeroLength);
        }
        let oom = DriverError::OutOfMemory {
            requested: len,
            available: self.frames.free_bytes(),
        };
        let rounded = len.checked_next_multiple_of(page.bytes()).ok_or(oom)?;
        if rounded > self.frames.free_bytes() {
            return Err(oom);
        }
        let pa = self.frames.alloc(rounded, page).ok_or(oom)?;
        self.reserved_bytes += rounded;
        Ok(self.chunks.insert(Chunk {
            pa,
            len: rounded,
            page,
            maps: SmallVec::new(),
        }))
    }

    /// Releases a chunk that is mapped nowhere. Its memory reads as zeros when reserved again,
    /// as a real driver scrubs memory before handing it to another process.
    pub fn release(&mut self, id: ChunkId) -> Result<(), DriverError> {
        self.counters.release += 1;
        self.charge_call();
        let chunk = self.chunks.get(id).ok_or(DriverError::UnknownChunk(id))?;
        if !chunk.maps.is_empty() {
            return Err(DriverError::ChunkMapped(id));
        }
        let (pa, len) = (chunk.pa, chunk.len);
        self.chunks.remove(id);
        self.frames.release(pa, len);
        self.reserved_bytes -= len;
        // Cannot fail: the chunk lies inside device memory.
        let _ = self.phys.discard(pa, len);
        Ok(())
    }

    /// Maps a whole chunk at `va` (aligned to the chunk's page size) in an address space.
    pub fn map(&mut self, asid: AsId, va: u64, id: ChunkId) -> Result<(), DriverError> {
        self.counters.map += 1;
        self.charge_call();
        let space = self
            .spaces
            .get_mut(asid)
            .ok_or(DriverError::UnknownAddressSpace(asid))?;
        let chunk = self
            .chunks
            .get_mut(id)
            .ok_or(DriverError::UnknownChunk(id))?;
        space.table.map(va, chunk.pa, chunk.len, chunk.page)?;
        space.chunk_maps.insert(va, id);
        chunk.maps.push((asid, va));
        self.mapped_bytes += chunk.len;
        let pages = chunk.len / chunk.page.bytes();
        self.charge_extra(pages * self.costs.map_page_ns);
        Ok(())
    }

    /// Unmaps the chunk mapped at `va` (the address given to [`Driver::map`]) and returns it.
    pub fn unmap(&mut self, asid: AsId, va: u64) -> Result<ChunkId, DriverError> {
        self.counters.unmap += 1;
        self.charge_call();
        let space = self
            .spaces
            .get_mut(asid)
            .ok_or(DriverError::UnknownAddressSpace(asid))?;
        let id = *space
            .chunk_maps
            .get(&va)
            .ok_or(DriverError::NotMapped { va })?;
        let chunk = self
            .chunks
            .get_mut(id)
            .ok_or(DriverError::UnknownChunk(id))?;
        space.table.unmap(va, chunk.len)?;
        space.chunk_maps.remove(&va);
        space.epoch += 1;
        chunk.maps.retain(|m| *m != (asid, va));
        self.mapped_bytes -= chunk.len;
        let pages = chunk.len / chunk.page.bytes();
        self.charge_extra(pages * self.costs.unmap_page_ns);
        Ok(id)
    }

    /// Translates `va` in an address space: the page walk a software-TLB miss asks for. An
    /// unknown address space has nothing mapped, so every address faults.
    pub fn translate(&self, asid: AsId, va: u64) -> Result<Translation, MemFault> {
        self.counters.translate.fetch_add(1, Relaxed);
        self.charge_shared(self.costs.translate_ns);
        self.table(asid, va)?.translate(va)
    }

    /// Reads `buf.len()` bytes at `va`, translating page by page.
    pub fn read_virt(&self, asid: AsId, va: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        let table = table_of(&self.spaces, asid, va)?;
        pages(&self.counters, table, va, buf.len() as u64, |pa, at, n| {
            self.phys.read(pa, &mut buf[at as usize..(at + n) as usize])
        })
    }

    /// Writes `data` at `va`, translating page by page. The whole range is checked first: a
    /// write that would fault changes nothing.
    pub fn write_virt(&mut self, asid: AsId, va: u64, data: &[u8]) -> Result<(), MemFault> {
        let Self {
            spaces,
            phys,
            counters,
            ..
        } = self;
        let table = table_of(spaces, asid, va)?;
        table.check_mapped(va, data.len() as u64)?;
        pages(counters, table, va, data.len() as u64, |pa, at, n| {
            phys.write(pa, &data[at as usize..(at + n) as usize])
        })
    }

    /// Sets `len` bytes at `va` to `byte` (a memset). Checked first like [`Driver::write_virt`].
    pub fn fill_virt(&mut self, asid: AsId, va: u64, len: u64, byte: u8) -> Result<(), MemFault> {
        let Self {
            spaces,
            phys,
            counters,
            ..
        } = self;
        let table = table_of(spaces, asid, va)?;
        table.check_mapped(va, len)?;
        pages(counters, table, va, len, |pa, _, n| phys.fill(pa, n, byte))
    }

    /// Copies `len` bytes from `src_va` in `src_as` to `dst_va` in `dst_as`, page by page.
    /// Both ranges are checked first, so a faulting copy changes nothing. Within one address
    /// space, overlapping ranges behave like `memmove`.
    pub fn copy_virt(
        &mut self,
        src_as: AsId,
        src_va: u64,
        dst_as: AsId,
        dst_va: u64,
        len: u64,
    ) -> Result<(), MemFault> {
        let Self {
            spaces,
            phys,
            counters,
            ..
        } = self;
        let src_table = table_of(spaces, src_as, src_va)?;
        let dst_table = table_of(spaces, dst_as, dst_va)?;
        src_table.check_mapped(src_va, len)?;
        dst_table.check_mapped(dst_va, len)?;
        let backwards = src_as == dst_as && dst_va > src_va;
        let mut remaining = len;
        while remaining > 0 {
            let (s, d, n) = if backwards {
                // Walk from the end: each piece ends at the last byte still to copy.
                let ts = walk(counters, src_table, src_va + remaining - 1)?;
                let td = walk(counters, dst_table, dst_va + remaining - 1)?;
                let n = remaining
                    .min(ts.pa - ts.page_pa + 1)
                    .min(td.pa - td.page_pa + 1);
                (ts.pa + 1 - n, td.pa + 1 - n, n)
            } else {
                let off = len - remaining;
                let ts = walk(counters, src_table, src_va + off)?;
                let td = walk(counters, dst_table, dst_va + off)?;
                let n = remaining.min(ts.page_remaining()).min(td.page_remaining());
                (ts.pa, td.pa, n)
            };
            phys.copy(s, d, n)?;
            remaining -= n;
        }
        Ok(())
    }

    /// The page table of `asid`, or a fault at `va` when it does not exist.
    #[inline]
    fn table(&self, asid: AsId, va: u64) -> Result<&AddressSpace, MemFault> {
        table_of(&self.spaces, asid, va)
    }

    /// Adds one call's kernel-mode crossing.
    fn charge_call(&mut self) {
        self.charge_extra(self.costs.call_ns);
    }

    /// Adds `ns` of work inside a call already charged.
    fn charge_extra(&mut self, ns: u64) {
        let c = &mut self.counters;
        *c.host_cost_pending.get_mut() = c.host_cost_pending.get_mut().saturating_add(ns);
        *c.host_cost_total.get_mut() = c.host_cost_total.get_mut().saturating_add(ns);
    }

    fn charge_shared(&self, ns: u64) {
        self.counters.host_cost_pending.fetch_add(ns, Relaxed);
        self.counters.host_cost_total.fetch_add(ns, Relaxed);
    }
}

/// The page table of `asid`, or a fault at `va` when it does not exist (free function so the
/// callers can borrow `phys` mutably at the same time).
#[inline]
fn table_of(spaces: &SlotMap<AsId, Space>, asid: AsId, va: u64) -> Result<&AddressSpace, MemFault> {
    spaces
        .get(asid)
        .map(|s| &s.table)
        .ok_or(MemFault::PageFault { va })
}

/// One translation of the virtual-access helpers: counted, not charged.
#[inline]
/// Walks `[va, va + len)` of `table` one page at a time, calling `f(pa, offset, n)` for each
/// piece: the one loop behind every access by virtual address.
fn pages(
    counters: &Counters,
    table: &AddressSpace,
    va: u64,
    len: u64,
    mut f: impl FnMut(u64, u64, u64) -> Result<(), MemFault>,
) -> Result<(), MemFault> {
    let mut done = 0;
    while done < len {
        let t = walk(counters, table, va.wrapping_add(done))?;
        let n = t.page_remaining().min(len - done);
        f(t.pa, done, n)?;
        done += n;
    }
    Ok(())
}

fn walk(counters: &Counters, table: &AddressSpace, va: u64) -> Result<Translation, MemFault> {
    counters.virt_translations.fetch_add(1, Relaxed);
    table.translate(va)
}
