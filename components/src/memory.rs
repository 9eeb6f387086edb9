//! Device memory of one device, as the runtime sees it: the driver (physical memory and
//! address spaces), and per context a pool, a software TLB and the table of its allocations.
//!
//! Every context has its own address space and its own range of virtual addresses, so a
//! pointer of one context is unmapped in every other: a kernel given a foreign pointer faults,
//! it never reads someone else's bytes. Accesses by the runtime (copies, native kernels) are
//! checked against live allocations; accesses by the simulated core go through the TLB and fault
//! only on unmapped pages, as on hardware.
//!
//! Freeing is stream-ordered ([`DeviceMemory::begin_free`]): a freed block stays reserved until
//! every stream position that used it has completed; the deferred-free system then returns it to
//! the pool ([`DeviceMemory::release_completed`]).

use std::collections::BTreeMap;

use bevy_ecs::entity::Entity;
use npusim_device::abi::{CODE_BASE, CODE_END, HEAP_BASE, MODULE_DATA_BASE, MODULE_DATA_END};
use npusim_device::memory::pool::{AllocPolicy, Pool, PoolConfig, PoolError, PoolStats};
use npusim_device::memory::tlb::{Tlb, TlbStats};
use npusim_device::memory::{
    AsId, ChunkId, Driver, DriverStats, FxBuildHasher, MemFault, PageSize,
};
use smallvec::SmallVec;

use crate::error::{NpuError, NpuResult};

/// Every allocation starts on this boundary.
pub const ALLOC_ALIGN: u64 = 64;

/// Virtual-address span reserved for each context's heap (256 GiB, past any device's memory):
/// context `i` allocates from `HEAP_BASE + i * CONTEXT_VA_SPAN`.
pub const CONTEXT_VA_SPAN: u64 = 1 << 38;

/// Most contexts alive at once on one device (their heaps must fit the 47-bit user space).
pub const MAX_CONTEXTS: u64 = 480;

/// A live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// First address.
    pub base: u64,
    /// Size in bytes as requested.
    pub size: u64,
    /// The context that owns it.
    pub context: Entity,
}

/// Why a device memory access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessFault {
    /// No live block of the accessing context contains the address.
    Unmapped {
        /// The faulting address.
        addr: u64,
    },
    /// The access starts in a block but runs past its end.
    PastEnd {
        /// The start of the access.
        addr: u64,
        /// Its length.
        len: u64,
        /// The block it starts in.
        block: BlockInfo,
    },
}

impl std::fmt::Display for AccessFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessFault::Unmapped { addr } => write!(f, "page fault at {addr:#x}"),
            AccessFault::PastEnd { addr, len, block } => write!(
                f,
                "{len} bytes at {addr:#x} run past the allocation [{:#x}, +{})",
                block.base, block.size
            ),
        }
    }
}

/// First-fit allocation of address ranges in a fixed window, with coalescing on free: the
/// instruction-memory window of a device and the module-data window of each context. Ranges are
/// returned on unload, so loading and unloading forever never runs out.
#[derive(Debug)]
struct RangeAlloc {
    /// Free ranges: start → end.
    free: BTreeMap<u64, u64>,
}

impl RangeAlloc {
    fn new(base: u64, end: u64) -> Self {
        Self {
            free: BTreeMap::from([(base, end)]),
        }
    }

    /// The lowest free range of `len` bytes (a multiple of 4 KiB), taken.
    fn alloc(&mut self, len: u64) -> Option<u64> {
        let (&start, &end) = self.free.iter().find(|&(&s, &e)| e - s >= len)?;
        self.free.remove(&start);
        if start + len < end {
            self.free.insert(start + len, end);
        }
        Some(start)
    }

    /// Returns `[start, start + len)`, merging it with free neighbours.
    fn release(&mut self, start: u64, len: u64) {
        let (mut s, mut e) = (start, start + len);
        if let Some((&ps, &pe)) = self.free.range(..s).next_back()
            && pe == s
        {
            self.free.remove(&ps);
            s = ps;
        }
        if let Some(ne) = self.free.remove(&e) {
            e = ne;
        }
        self.free.insert(s, e);
    }

    /// The largest free range (what an out-of-memory error reports as available).
    fn largest(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).max().unwrap_or(0)
    }
}

/// A stream position: (stream entity, sequence number). Reached when the stream has completed
/// that many tasks.
pub type StreamPosition = (Entity, u64);

#[derive(Debug)]
struct Block {
    size: u64,
    /// `free` was called; the block waits for its uses and must not be used again.
    freeing: bool,
    /// The latest position of each stream whose tasks name this block.
    uses: SmallVec<[StreamPosition; 2]>,
}

#[derive(Debug)]
struct Space {
    /// A module-data page holding the tiling words of the launch being run (0 until needed).
    tiling_page: u64,
    /// The module-data window's free ranges.
    module_space: RangeAlloc,
    /// Mapped module data: base → (chunk, length).
    modules: BTreeMap<u64, (ChunkId, u64)>,
    slot: u64,
    asid: AsId,
    pool: Pool,
    tlb: Tlb,
    blocks: std::collections::HashMap<u64, Block, FxBuildHasher>,
    /// How many times every block was released at once (`free_all_of`, after a fault): an
    /// owner that remembers the value at allocation knows whether its block is still its own.
    epoch: u64,
}

impl Space {
    /// Walks `[addr, addr + len)` through this space's TLB one physically contiguous extent at
    /// a time, calling `f(phys, pa, offset, n)` for each: the one page walk every access by
    /// virtual address goes through. Stops at the first fault.
    fn extents(
        &mut self,
        driver: &mut Driver,
        addr: u64,
        len: u64,
        mut f: impl FnMut(&mut npusim_device::memory::PhysMem, u64, u64, u64) -> Result<(), MemFault>,
    ) -> Result<(), MemFault> {
        let mut done = 0u64;
        while done < len {
            let va = addr.wrapping_add(done);
            let (pa, room) = self.tlb.translate_extent(driver, self.asid, va)?;
            let n = room.min(len - done);
            f(driver.phys_mut(), pa, done, n).map_err(|_| MemFault::PageFault { va })?;
            done += n;
        }
        Ok(())
    }
}

/// A free waiting for stream positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingFree {
    /// Owning context.
    pub context: Entity,
    /// Block base.
    pub base: u64,
    /// Positions that must complete first.
    pub after: SmallVec<[StreamPosition; 4]>,
    /// How far each stream of the context had been submitted when `free` was called (see
    /// [`DeviceMemory::begin_free_enqueued`]); `None` when unknown.
    pub enqueued: Option<SmallVec<[StreamPosition; 4]>>,
}

/// Memory counters of one device.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryStats {
    /// Pool counters summed over contexts (fragmentation is over all free bytes).
    pub pool: PoolStats,
    /// TLB counters summed over contexts.
    pub tlb: TlbStats,
    /// Driver counters.
    pub driver: DriverStats,
    /// Frees waiting for stream positions.
    pub pending_frees: u64,
    /// Frees released by the deferred-free system so far.
    pub deferred_releases: u64,
    /// Contexts with an address space.
    pub address_spaces: u64,
}

/// The memory of one device.
#[derive(Debug)]
pub struct DeviceMemory {
    driver: Driver,
    spaces: BTreeMap<Entity, Space>,
    free_slots: Vec<u64>,
    next_slot: u64,
    pending: Vec<PendingFree>,
    deferred_releases: u64,
    peak_live_bytes: u64,
    /// The instruction-memory window's free ranges.
    code_space: RangeAlloc,
    /// Instruction memory handed out: base → length.
    code_live: BTreeMap<u64, u64>,
}

fn pool_error(e: PoolError, requested: u64, available: u64) -> NpuError {
    match e {
        PoolError::ZeroSize => NpuError::InvalidParam("allocation size must be nonzero".into()),
        PoolError::OutOfMemory { .. } => NpuError::OutOfMemory {
            requested,
            available,
        },
        other => NpuError::Internal(format!("memory pool: {other}")),
    }
}

impl DeviceMemory {
    /// Memory of `capacity` bytes.
    pub fn new(capacity: u64) -> NpuResult<Self> {
        let driver = Driver::new(capacity).map_err(|e| {
            NpuError::InvalidParam(format!("device memory of {capacity} bytes: {e}"))
        })?;
        Ok(Self {
            driver,
            spaces: BTreeMap::new(),
            free_slots: Vec::new(),
            next_slot: 0,
            pending: Vec::new(),
            deferred_releases: 0,
            peak_live_bytes: 0,
            code_space: RangeAlloc::new(CODE_BASE, CODE_END),
            code_live: BTreeMap::new(),
        })
    }

    /// The driver (physical memory, address spaces, call counters).
    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// Modeled host time of driver calls since the last drain (a kernel-mode crossing each).
    pub fn take_driver_cost_ns(&self) -> u64 {
        self.driver.take_host_cost_ns()
    }

    /// Gives `context` an address space, pool and TLB.
    pub fn create_space(&mut self, context: Entity) -> NpuResult<()> {
        if self.spaces.contains_key(&context) {
            return Ok(());
        }
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None if self.next_slot < MAX_CONTEXTS => {
                self.next_slot += 1;
                self.next_slot - 1
            }
            None => {
                return Err(NpuError::InvalidParam(format!(
                    "at most {MAX_CONTEXTS} contexts per device"
                )));
            }
        };
        let asid = self.driver.create_address_space();
        let config = PoolConfig {
            heap_base: HEAP_BASE + slot * CONTEXT_VA_SPAN,
            heap_span: CONTEXT_VA_SPAN,
            ..PoolConfig::default()
        };
        self.spaces.insert(
            context,
            Space {
                tiling_page: 0,
                module_space: RangeAlloc::new(MODULE_DATA_BASE, MODULE_DATA_END),
                modules: BTreeMap::new(),
                slot,
                asid,
                pool: Pool::with_config(asid, config),
                tlb: Tlb::new(),
                blocks: Default::default(),
                epoch: 0,
            },
        );
        Ok(())
    }

    /// Reserves `len` bytes of instruction memory for a binary's `.text` (aligned to 4 KiB).
    /// Instruction memory is not data memory: the core fetches from the decoded program only.
    /// Returned by [`DeviceMemory::free_code`] when the binary is unloaded.
    pub fn alloc_code(&mut self, len: u64) -> NpuResult<u64> {
        let size = len
            .max(4)
            .checked_next_multiple_of(4096)
            .filter(|&n| n <= CODE_END - CODE_BASE);
        let base =
            size.and_then(|n| self.code_space.alloc(n))
                .ok_or_else(|| NpuError::OutOfMemory {
                    requested: len,
                    available: self.code_space.largest(),
                })?;
        self.code_live.insert(base, size.expect("allocated"));
        Ok(base)
    }

    /// Takes `[base, base + len)` of instruction memory for an image linked at that fixed
    /// address, if it is free; returns whether it did. A range outside the window or partly in
    /// use is not taken (nor returned later): each binary's code is decoded on its own, so two
    /// images at the same addresses still run their own instructions, as they did before
    /// instruction memory was accounted.
    pub fn claim_code(&mut self, base: u64, len: u64) -> bool {
        let size = len.max(4).next_multiple_of(4096);
        let end = base.saturating_add(size);
        if end <= CODE_BASE || base >= CODE_END {
            return false;
        }
        let fits = base.is_multiple_of(4096)
            && self
                .code_space
                .free
                .range(..=base)
                .next_back()
                .is_some_and(|(_, &e)| e >= end);
        if !fits {
            return false;
        }
        let (&s, &e) = self
            .code_space
            .free
            .range(..=base)
            .next_back()
            .expect("fits");
        self.code_space.free.remove(&s);
        if s < base {
            self.code_space.free.insert(s, base);
        }
        if end < e {
            self.code_space.free.insert(end, e);
        }
        self.code_live.insert(base, size);
        true
    }

    /// Returns the instruction memory at `base` (from [`DeviceMemory::alloc_code`]); any other
    /// address is ignored, so an image linked at a fixed address frees nothing.
    pub fn free_code(&mut self, base: u64) {
        if let Some(len) = self.code_live.remove(&base) {
            self.code_space.release(base, len);
        }
    }

    /// Bytes of instruction memory in use.
    pub fn code_bytes(&self) -> u64 {
        self.code_live.values().sum()
    }

    /// Maps `len` bytes of zeroed module data (a binary's `.rodata`, `.data`, `.bss`) into
    /// `context`'s address space, in the module-data window below 2 GiB.
    pub fn map_module_data(&mut self, context: Entity, len: u64) -> NpuResult<u64> {
        let space = self.spaces.get_mut(&context).ok_or_else(|| {
            NpuError::ContextNull(format!("context {context} has no address space"))
        })?;
        // A guard page after each module, so running off one faults.
        let window = MODULE_DATA_END - MODULE_DATA_BASE;
        let Some(size) = len
            .max(1)
            .checked_next_multiple_of(4096)
            .filter(|&n| n < window)
        else {
            return Err(NpuError::OutOfMemory {
                requested: len,
                available: space.module_space.largest(),
            });
        };
        let base = space
            .module_space
            .alloc(size + 4096)
            .ok_or_else(|| NpuError::OutOfMemory {
                requested: len,
                available: space.module_space.largest(),
            })?;
        let chunk = match self.driver.reserve(size, PageSize::Normal4K) {
            Ok(c) => c,
            Err(_) => {
                space.module_space.release(base, size + 4096);
                return Err(NpuError::OutOfMemory {
                    requested: len,
                    available: self
                        .driver
                        .phys()
                        .capacity()
                        .saturating_sub(self.driver.stats().reserved_bytes),
                });
            }
        };
        if let Err(e) = self.driver.map(space.asid, base, chunk) {
            let _ = self.driver.release(chunk);
            space.module_space.release(base, size + 4096);
            return Err(NpuError::Internal(format!("mapping module data: {e}")));
        }
        space.modules.insert(base, (chunk, size));
        Ok(base)
    }

    /// Writes a launch's tiling words where the kernel can read them (one page per context,
    /// mapped on first use) and returns their device address.
    pub fn write_tiling(&mut self, context: Entity, words: &[u32]) -> NpuResult<u64> {
        let page = match self.spaces.get(&context).map(|s| s.tiling_page) {
            Some(0) => {
                let va = self.map_module_data(context, 4096)?;
                self.spaces.get_mut(&context).expect("mapped").tiling_page = va;
                va
            }
            Some(va) => va,
            None => {
                return Err(NpuError::ContextNull(format!(
                    "context {context} has no address space"
                )));
            }
        };
        self.write_virt(context, page, bytemuck::cast_slice(words))
            .map_err(|e| NpuError::Internal(format!("writing tiling words: {e}")))?;
        Ok(page)
    }

    /// Unmaps and releases module data mapped at `base`.
    pub fn unmap_module_data(&mut self, context: Entity, base: u64) {
        let Some(space) = self.spaces.get_mut(&context) else {
            return;
        };
        if let Some((chunk, size)) = space.modules.remove(&base) {
            let _ = self.driver.unmap(space.asid, base);
            let _ = self.driver.release(chunk);
            space.module_space.release(base, size + 4096);
            space.tlb.flush();
        }
    }

    /// Releases everything of `context` and its address space.
    pub fn destroy_space(&mut self, context: Entity) {
        self.free_all_of(context);
        let modules: Vec<u64> = self
            .spaces
            .get(&context)
            .map(|s| s.modules.keys().copied().collect())
            .unwrap_or_default();
        for m in modules {
            self.unmap_module_data(context, m);
        }
        if let Some(space) = self.spaces.remove(&context) {
            let _ = self.driver.destroy_address_space(space.asid);
            self.free_slots.push(space.slot);
        }
    }

    /// The address space of `context`, if it has one.
    pub fn address_space(&self, context: Entity) -> Option<AsId> {
        self.spaces.get(&context).map(|s| s.asid)
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.driver.phys().capacity()
    }

    /// Bytes in live allocations (including those waiting for a deferred free).
    pub fn live_bytes(&self) -> u64 {
        self.spaces
            .values()
            .map(|s| s.pool.stats().live_bytes)
            .sum()
    }

    /// Highest `live_bytes` seen (sampled at allocation).
    pub fn peak_live_bytes(&self) -> u64 {
        self.peak_live_bytes
    }

    /// Number of live allocations (including those waiting for a deferred free).
    pub fn live_blocks(&self) -> usize {
        self.spaces.values().map(|s| s.blocks.len()).sum()
    }

    /// Bytes of host memory backing device pages.
    pub fn backed_bytes(&self) -> u64 {
        self.driver.phys().backed_bytes()
    }

    /// Counters.
    pub fn stats(&self) -> MemoryStats {
        let mut pool = PoolStats::default();
        let mut tlb = TlbStats::default();
        for s in self.spaces.values() {
            let p = s.pool.stats();
            pool.live_bytes += p.live_bytes;
            pool.live_blocks += p.live_blocks;
            pool.reserved_bytes += p.reserved_bytes;
            pool.reserved_huge_bytes += p.reserved_huge_bytes;
            pool.reserved_normal_bytes += p.reserved_normal_bytes;
            pool.peak_live_bytes += p.peak_live_bytes;
            pool.peak_reserved_bytes += p.peak_reserved_bytes;
            pool.free_bytes += p.free_bytes;
            pool.largest_free_block = pool.largest_free_block.max(p.largest_free_block);
            pool.chunks += p.chunks;
            pool.cached_chunks += p.cached_chunks;
            pool.driver_calls += p.driver_calls;
            pool.allocs += p.allocs;
            pool.frees += p.frees;
            pool.failed_allocs += p.failed_allocs;
            pool.released_chunks += p.released_chunks;
            let t = s.tlb.stats();
            tlb.hits += t.hits;
            tlb.misses += t.misses;
            tlb.driver_calls += t.driver_calls;
            tlb.flushes += t.flushes;
            tlb.faults += t.faults;
            tlb.entries += t.entries;
        }
        pool.fragmentation = if pool.free_bytes == 0 {
            0.0
        } else {
            1.0 - pool.largest_free_block as f64 / pool.free_bytes as f64
        };
        MemoryStats {
            pool,
            tlb,
            driver: self.driver.stats(),
            pending_frees: self.pending.len() as u64,
            deferred_releases: self.deferred_releases,
            address_spaces: self.spaces.len() as u64,
        }
    }

    fn space(&self, context: Entity) -> NpuResult<&Space> {
        self.spaces
            .get(&context)
            .ok_or_else(|| NpuError::ContextNull(format!("context {context} has no address space")))
    }

    /// Allocates `size` bytes for `context` with the default policy (huge pages first).
    pub fn alloc(&mut self, size: u64, context: Entity) -> NpuResult<u64> {
        self.alloc_with(size, AllocPolicy::HugeFirst, context)
    }

    /// Allocates `size` bytes for `context` with `policy`. When the pool is exhausted, memory
    /// cached by other contexts' pools is released to the driver and the request retried;
    /// only then is it out of memory, with nothing changed.
    pub fn alloc_with(
        &mut self,
        size: u64,
        policy: AllocPolicy,
        context: Entity,
    ) -> NpuResult<u64> {
        if size == 0 {
            return Err(NpuError::InvalidParam(
                "allocation size must be nonzero".into(),
            ));
        }
        self.space(context)?;
        let available = self
            .capacity()
            .saturating_sub(self.driver.stats().reserved_bytes);
        let first = {
            let space = self.spaces.get_mut(&context).expect("checked");
            space.pool.alloc(&mut self.driver, size, policy)
        };
        let allocation = match first {
            Ok(a) => a,
            Err(PoolError::OutOfMemory { .. }) => {
                for (c, s) in self.spaces.iter_mut() {
                    if *c != context {
                        s.pool.trim(&mut self.driver);
                    }
                }
                let space = self.spaces.get_mut(&context).expect("checked");
                space
                    .pool
                    .alloc(&mut self.driver, size, policy)
                    .map_err(|e| {
                        let available = self
                            .driver
                            .phys()
                            .capacity()
                            .saturating_sub(self.driver.stats().reserved_bytes);
                        pool_error(e, size, available)
                    })?
            }
            Err(e) => return Err(pool_error(e, size, available)),
        };
        let space = self.spaces.get_mut(&context).expect("checked");
        space.blocks.insert(
            allocation.va,
            Block {
                size,
                freeing: false,
                uses: SmallVec::new(),
            },
        );
        let live = self.live_bytes();
        self.peak_live_bytes = self.peak_live_bytes.max(live);
        Ok(allocation.va)
    }

    /// Checks that `ptr` is the start of a live, not yet freed block of `context`.
    pub fn check_free(&self, ptr: u64, context: Entity) -> NpuResult<BlockInfo> {
        let space = self.space(context)?;
        match space.blocks.get(&ptr) {
            Some(b) if !b.freeing => Ok(BlockInfo {
                base: ptr,
                size: b.size,
                context,
            }),
            Some(_) => Err(NpuError::BadFree {
                ptr,
                why: "already freed (its release is pending)",
            }),
            None => {
                let why = if self
                    .spaces
                    .iter()
                    .any(|(c, s)| *c != context && s.blocks.contains_key(&ptr))
                {
                    "the allocation belongs to another context"
                } else if space.pool.block_containing(ptr).is_some() {
                    "not the start of an allocation"
                } else {
                    "not a live allocation (double free or unknown pointer)"
                };
                Err(NpuError::BadFree { ptr, why })
            }
        }
    }

    /// Frees the block at `ptr` of `context` at once (no queued work may use it).
    pub fn free(&mut self, ptr: u64, context: Entity) -> NpuResult<BlockInfo> {
        let info = self.check_free(ptr, context)?;
        self.release(context, ptr);
        Ok(info)
    }

    fn release(&mut self, context: Entity, ptr: u64) {
        if let Some(space) = self.spaces.get_mut(&context) {
            space.blocks.remove(&ptr);
            let _ = space.pool.free(ptr);
        }
    }

    /// Starts a stream-ordered free: the block can no longer be used, and is released once
    /// every position that used it (and `after`) has completed. Returns the positions it waits
    /// for.
    pub fn begin_free(
        &mut self,
        ptr: u64,
        context: Entity,
        after: &[StreamPosition],
    ) -> NpuResult<BlockInfo> {
        self.begin_free_inner(ptr, context, after, None)
    }

    /// As [`DeviceMemory::begin_free`], knowing how far each stream of the context had been
    /// submitted at the call (`enqueued`). Only work enqueued before the free keeps the block
    /// reserved: a task noted later (it names the block after `free`) joins no wait, so the
    /// block is released when the earlier work is done whatever is queued after it, and such
    /// a task faults when it touches the released block. Without `enqueued`, every use noted
    /// before the release joins the wait, so whether a late task runs or faults would depend on
    /// what else was queued.
    pub fn begin_free_enqueued(
        &mut self,
        ptr: u64,
        context: Entity,
        after: &[StreamPosition],
        enqueued: &[StreamPosition],
    ) -> NpuResult<BlockInfo> {
        self.begin_free_inner(
            ptr,
            context,
            after,
            Some(enqueued.iter().copied().collect()),
        )
    }

    fn begin_free_inner(
        &mut self,
        ptr: u64,
        context: Entity,
        after: &[StreamPosition],
        enqueued: Option<SmallVec<[StreamPosition; 4]>>,
    ) -> NpuResult<BlockInfo> {
        let info = self.check_free(ptr, context)?;
        let space = self.spaces.get_mut(&context).expect("validated");
        let block = space.blocks.get_mut(&ptr).expect("validated");
        block.freeing = true;
        let mut wait: SmallVec<[StreamPosition; 4]> = block.uses.iter().copied().collect();
        for &(s, seq) in after {
            match wait.iter_mut().find(|(w, _)| *w == s) {
                Some(w) => w.1 = w.1.max(seq),
                None => wait.push((s, seq)),
            }
        }
        self.pending.push(PendingFree {
            context,
            base: ptr,
            after: wait,
            enqueued,
        });
        Ok(info)
    }

    /// Notes that the task at `pos` names `addr`: if it lies in a live block of `context`, that
    /// block's free waits for `pos`. Addresses outside the heap are ignored quickly.
    pub fn note_use(&mut self, context: Entity, addr: u64, pos: StreamPosition) {
        self.note_use_range(context, addr, 0, pos);
    }

    /// As [`DeviceMemory::note_use`] for every block that `bytes` bytes at `addr` overlap: an
    /// access range may run across adjacent blocks (an access set joins a range that continues
    /// the previous one, whichever block it is in), and each of them must wait for `pos`. Each
    /// block is found once.
    pub fn note_use_range(&mut self, context: Entity, addr: u64, bytes: u64, pos: StreamPosition) {
        if addr < HEAP_BASE {
            return;
        }
        let Some(space) = self.spaces.get_mut(&context) else {
            return;
        };
        let end = addr.saturating_add(bytes);
        let mut at = addr;
        while let Some((base, size)) = space.pool.block_containing(at) {
            if let Some(block) = space.blocks.get_mut(&base) {
                note_block_use(block, &mut self.pending, context, base, pos);
            }
            let next = base.saturating_add(size);
            if next <= at || next >= end {
                break;
            }
            at = next;
        }
    }

    /// The positions the pending free of `base` waits for (empty if none is pending).
    pub fn pending_positions(&self, base: u64, context: Entity) -> SmallVec<[StreamPosition; 4]> {
        self.pending
            .iter()
            .find(|p| p.context == context && p.base == base)
            .map(|p| p.after.clone())
            .unwrap_or_default()
    }

    /// Releases the pending free of `base` now (its positions are known to have completed).
    pub fn release_now(&mut self, base: u64, context: Entity) {
        let before = self.pending.len();
        self.pending
            .retain(|p| !(p.context == context && p.base == base));
        if self.pending.len() < before {
            self.release(context, base);
            self.deferred_releases += 1;
        }
    }

    /// Whether frees are waiting.
    pub fn has_pending_frees(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Releases every pending free whose positions have all completed (`reached` says whether a
    /// position has); returns how many were released.
    pub fn release_completed(&mut self, reached: impl Fn(StreamPosition) -> bool) -> usize {
        let mut done = Vec::new();
        self.pending.retain(|p| {
            if p.after.iter().all(|&pos| reached(pos)) {
                done.push((p.context, p.base));
                false
            } else {
                true
            }
        });
        for &(c, b) in &done {
            self.release(c, b);
        }
        self.deferred_releases += done.len() as u64;
        done.len()
    }

    /// Frees every block of `context` at once (its work was aborted or it is being destroyed).
    pub fn free_all_of(&mut self, context: Entity) -> usize {
        self.pending.retain(|p| p.context != context);
        let Some(space) = self.spaces.get_mut(&context) else {
            return 0;
        };
        let n = space.blocks.len();
        space.blocks.clear();
        space.epoch += 1;
        space.pool.release_all(&mut self.driver);
        space.tlb.flush();
        n
    }

    /// How many times `context`'s blocks were all released at once (by a fault under
    /// stop-on-failure); `None` when the context has no address space. An allocation made
    /// at one value is gone once the value moves on, even if its address is live again.
    pub fn epoch(&self, context: Entity) -> Option<u64> {
        self.spaces.get(&context).map(|s| s.epoch)
    }

    /// Releases memory cached by `context`'s pool back to the driver; returns bytes released.
    pub fn trim(&mut self, context: Entity) -> u64 {
        match self.spaces.get_mut(&context) {
            Some(s) => s.pool.trim(&mut self.driver),
            None => 0,
        }
    }

    /// The live, not freed block of `context` that starts at `base`, if any: one hash lookup,
    /// for an owner that knows its block's base (no search of the pool's ranges).
    pub fn block_at(&self, base: u64, context: Entity) -> Option<BlockInfo> {
        let b = self.spaces.get(&context)?.blocks.get(&base)?;
        (!b.freeing).then_some(BlockInfo {
            base,
            size: b.size,
            context,
        })
    }

    /// The live, not freed block of `context` containing `addr`, if any: what new work may
    /// name.
    pub fn block_containing(&self, addr: u64, context: Entity) -> Option<BlockInfo> {
        self.find_block(addr, context, false)
    }

    fn find_block(&self, addr: u64, context: Entity, include_freeing: bool) -> Option<BlockInfo> {
        let space = self.spaces.get(&context)?;
        let (base, _) = space.pool.block_containing(addr)?;
        let b = space
            .blocks
            .get(&base)
            .filter(|b| include_freeing || !b.freeing)?;
        Some(BlockInfo {
            base,
            size: b.size,
            context,
        })
    }

    /// Checks, for an access by queued work, that `[addr, addr+len)` lies inside one block of
    /// `context` that is live or still reserved behind a pending free.
    pub fn check(&self, addr: u64, len: u64, context: Entity) -> Result<BlockInfo, AccessFault> {
        let block = self
            .find_block(addr, context, true)
            .ok_or(AccessFault::Unmapped { addr })?;
        if addr
            .checked_add(len)
            .is_none_or(|e| e > block.base + block.size)
        {
            return Err(AccessFault::PastEnd { addr, len, block });
        }
        Ok(block)
    }

    /// Reads `buf.len()` bytes at `addr` of a live block of `context`.
    pub fn read(&mut self, addr: u64, buf: &mut [u8], context: Entity) -> Result<(), AccessFault> {
        self.check(addr, buf.len() as u64, context)?;
        self.read_virt(context, addr, buf)
            .map_err(|_| AccessFault::Unmapped { addr })
    }

    /// Writes `data` at `addr` of a live block of `context`.
    pub fn write(&mut self, addr: u64, data: &[u8], context: Entity) -> Result<(), AccessFault> {
        self.check(addr, data.len() as u64, context)?;
        self.write_virt(context, addr, data)
            .map_err(|_| AccessFault::Unmapped { addr })
    }

    /// Sets `len` bytes at `addr` of a live block of `context` to `value`.
    pub fn fill(
        &mut self,
        addr: u64,
        len: u64,
        value: u8,
        context: Entity,
    ) -> Result<(), AccessFault> {
        self.check(addr, len, context)?;
        let space = self
            .spaces
            .get_mut(&context)
            .ok_or(AccessFault::Unmapped { addr })?;
        space
            .extents(&mut self.driver, addr, len, |phys, pa, _, n| {
                phys.fill(pa, n, value)
            })
            .map_err(|f| AccessFault::Unmapped {
                addr: match f {
                    MemFault::PageFault { va } => va,
                    _ => addr,
                },
            })
    }

    /// Reads through `context`'s page table (page-level protection only, as the AI core sees
    /// memory): faults on an unmapped page.
    pub fn read_virt(
        &mut self,
        context: Entity,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), MemFault> {
        let Some(space) = self.spaces.get_mut(&context) else {
            return Err(MemFault::PageFault { va: addr });
        };
        space.extents(
            &mut self.driver,
            addr,
            buf.len() as u64,
            |phys, pa, at, n| phys.read(pa, &mut buf[at as usize..(at + n) as usize]),
        )
    }

    /// Translates `len` bytes at `addr` through `context`'s TLB without touching their data:
    /// the page walks a timing-only run still makes, so its TLB and driver counters (and the
    /// host time the driver calls cost) are a functional run's.
    pub fn translate_virt(&mut self, context: Entity, addr: u64, len: u64) -> Result<(), MemFault> {
        let Some(space) = self.spaces.get_mut(&context) else {
            return Err(MemFault::PageFault { va: addr });
        };
        space.extents(&mut self.driver, addr, len, |_, _, _, _| Ok(()))
    }

    /// Writes through `context`'s page table; faults (writing nothing more) on an unmapped page.
    pub fn write_virt(&mut self, context: Entity, addr: u64, data: &[u8]) -> Result<(), MemFault> {
        let Some(space) = self.spaces.get_mut(&context) else {
            return Err(MemFault::PageFault { va: addr });
        };
        space.extents(
            &mut self.driver,
            addr,
            data.len() as u64,
            |phys, pa, at, n| phys.write(pa, &data[at as usize..(at + n) as usize]),
        )
    }
}

/// Records that the task at `pos` uses `block` (at `base` in `context`): its free waits for
/// `pos`. A use noted after `free` (the frees are processed after ingest) joins the wait if its
/// task was enqueued before the free; one enqueued after it does not.
fn note_block_use(
    block: &mut Block,
    pending: &mut [PendingFree],
    context: Entity,
    base: u64,
    pos: StreamPosition,
) {
    match block.uses.iter_mut().find(|(s, _)| *s == pos.0) {
        Some(u) => u.1 = u.1.max(pos.1),
        None => block.uses.push(pos),
    }
    if block.freeing
        && let Some(p) = pending
            .iter_mut()
            .find(|p| p.context == context && p.base == base)
        && p.enqueued.as_ref().is_none_or(|e| {
            e.iter()
                .any(|&(s, submitted)| s == pos.0 && pos.1 <= submitted)
        })
    {
        match p.after.iter_mut().find(|(s, _)| *s == pos.0) {
            Some(u) => u.1 = u.1.max(pos.1),
            None => p.after.push(pos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(i: u32) -> Entity {
        Entity::from_raw_u32(i).unwrap()
    }

    fn mem() -> DeviceMemory {
        let mut m = DeviceMemory::new(1 << 30).unwrap();
        m.create_space(ctx(1)).unwrap();
        m.create_space(ctx(2)).unwrap();
        m
    }

    #[test]
    fn a_block_is_found_at_its_base_only_while_it_is_live_and_not_being_freed() {
        let mut m = mem();
        let a = m.alloc(4096, ctx(1)).unwrap();
        assert_eq!(m.block_at(a, ctx(1)).map(|b| b.size), Some(4096));
        assert!(
            m.block_at(a + 64, ctx(1)).is_none(),
            "inside, not at its base"
        );
        assert!(m.block_at(a, ctx(2)).is_none(), "another context's");
        m.free(a, ctx(1)).unwrap();
        assert!(m.block_at(a, ctx(1)).is_none());
    }

    #[test]
    fn never_written_memory_reads_zero_and_costs_nothing() {
        let mut m = DeviceMemory::new(64 << 30).unwrap();
        m.create_space(ctx(1)).unwrap();
        let p = m.alloc(1 << 30, ctx(1)).unwrap();
        let mut buf = [7u8; 16];
        m.read(p + 12345, &mut buf, ctx(1)).unwrap();
        assert_eq!(buf, [0; 16]);
        assert_eq!(m.backed_bytes(), 0);
    }

    #[test]
    fn other_contexts_memory_is_unmapped() {
        let mut m = mem();
        let a = m.alloc(256, ctx(1)).unwrap();
        m.write(a, &[1, 2, 3], ctx(1)).unwrap();
        let mut buf = [0u8; 3];
        assert_eq!(
            m.read(a, &mut buf, ctx(2)),
            Err(AccessFault::Unmapped { addr: a })
        );
        assert!(
            m.read_virt(ctx(2), a, &mut buf).is_err(),
            "not even mapped in the other space"
        );
        assert!(matches!(
            m.read(a + 250, &mut [0u8; 8], ctx(1)),
            Err(AccessFault::PastEnd { .. })
        ));
        assert!(m.free(a, ctx(2)).is_err());
        m.free(a, ctx(1)).unwrap();
        assert!(matches!(m.free(a, ctx(1)), Err(NpuError::BadFree { .. })));
    }

    #[test]
    fn a_pending_free_waits_for_every_use() {
        let mut m = mem();
        let a = m.alloc(4096, ctx(1)).unwrap();
        let (s1, s2) = (ctx(10), ctx(11));
        m.note_use(ctx(1), a + 100, (s1, 3));
        m.note_use(ctx(1), a, (s2, 7));
        m.begin_free(a, ctx(1), &[]).unwrap();
        assert!(
            m.block_containing(a, ctx(1)).is_none(),
            "new work cannot name a freed block"
        );
        assert!(m.check(a, 4, ctx(1)).is_ok(), "queued work still may");
        assert_eq!(m.release_completed(|(s, seq)| s == s1 && seq <= 3), 0);
        assert_eq!(m.live_blocks(), 1);
        assert_eq!(m.release_completed(|_| true), 1);
        assert_eq!(m.live_blocks(), 0);
    }

    #[test]
    fn a_use_of_a_range_across_adjacent_blocks_holds_each_of_their_frees() {
        let mut m = mem();
        let a = m.alloc(4096, ctx(1)).unwrap();
        let b = m.alloc(4096, ctx(1)).unwrap();
        let c = m.alloc(4096, ctx(1)).unwrap();
        assert_eq!((b - a, c - b), (4096, 4096), "adjacent");
        let s = ctx(10);
        // From inside `a` to inside `b`: `a` and `b` are used, `c` is not.
        m.note_use_range(ctx(1), a + 8, 4096 + 8, (s, 5));
        for p in [a, b, c] {
            m.begin_free(p, ctx(1), &[]).unwrap();
        }
        assert_eq!(m.pending_positions(a, ctx(1)).as_slice(), &[(s, 5)]);
        assert_eq!(m.pending_positions(b, ctx(1)).as_slice(), &[(s, 5)]);
        assert!(m.pending_positions(c, ctx(1)).is_empty());
        // Outside the heap, nothing is noted.
        m.note_use_range(ctx(1), 0x10, 1 << 40, (s, 6));
        assert_eq!(m.release_completed(|(_, seq)| seq < 5), 1, "only `c`");
        assert_eq!(m.release_completed(|(_, seq)| seq <= 5), 2);
    }

    #[test]
    fn instruction_memory_and_module_data_come_back_for_reuse() {
        let mut m = mem();
        for _ in 0..70_000 {
            let code = m.alloc_code(4096).unwrap();
            let data = m.map_module_data(ctx(1), 4096).unwrap();
            m.free_code(code);
            m.unmap_module_data(ctx(1), data);
        }
        assert_eq!(m.code_bytes(), 0);
        let a = m.alloc_code(10_000).unwrap();
        let b = m.alloc_code(4096).unwrap();
        assert_eq!(b, a + 12_288, "first fit after the rounded first range");
        m.free_code(a);
        assert_eq!(m.alloc_code(8192).unwrap(), a, "a freed range is reused");
        assert!(!m.claim_code(b, 4096), "code in use is not taken twice");
        let before = m.code_bytes();
        assert!(
            m.claim_code(b + (1 << 20), 4096),
            "a free fixed range is taken"
        );
        assert_eq!(m.code_bytes(), before + 4096);
    }

    #[test]
    fn destroying_a_space_returns_every_page() {
        let mut m = mem();
        let a = m.alloc(3 << 20, ctx(1)).unwrap();
        m.write(a, &[9; 8192], ctx(1)).unwrap();
        assert!(m.backed_bytes() > 0);
        m.destroy_space(ctx(1));
        assert_eq!(m.driver().stats().reserved_bytes, 0);
        assert_eq!(m.backed_bytes(), 0);
    }
}
