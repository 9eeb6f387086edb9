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

use crate::abi::{CODE_BASE, CODE_END, HEAP_BASE, MODULE_DATA_BASE, MODULE_DATA_END};
use crate::memory::pool::{AllocPolicy, Pool, PoolConfig, PoolError, PoolStats};
use crate::memory::tlb::{Tlb, TlbStats};
use crate::memory::{AsId, ChunkId, Driver, DriverStats, FxBuildHasher, MemFault, PageSize};
use smallvec::SmallVec;
use thiserror::Error;

mod access;
mod blocks;
mod code;

#[cfg(test)]
mod tests;

use code::RangeAlloc;
/// What identifies a context (and a stream, in stream positions): the runtime uses its world's
/// entity ids; anything ordered, copyable and printable will do.
pub trait ContextKey: Copy + Ord + std::fmt::Debug + std::fmt::Display {}

impl<T: Copy + Ord + std::fmt::Debug + std::fmt::Display> ContextKey for T {}

/// Why a device memory call was refused (the runtime's error type converts from it, variant
/// for variant).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum MemoryError {
    /// A parameter is out of its documented range.
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    /// The context has no address space.
    #[error("no current context: {0}")]
    ContextNull(String),
    /// `free` of an address that is not the start of a live allocation (double free, interior
    /// or unknown pointer).
    #[error("free of {ptr:#x}: {why}")]
    BadFree {
        /// The address passed to free.
        ptr: u64,
        /// Why it was refused.
        why: &'static str,
    },
    /// Device memory is exhausted even after releasing cached memory.
    #[error("device out of memory: {requested} bytes requested, {available} available")]
    OutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// Bytes that could still be reserved.
        available: u64,
    },
    /// A bug in npusim; nothing the caller did.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The result of a device memory call.
pub type MemResult<T> = Result<T, MemoryError>;

/// Every allocation starts on this boundary.
pub const ALLOC_ALIGN: u64 = 64;

/// Virtual-address span reserved for each context's heap (256 GiB, past any device's memory):
/// context `i` allocates from `HEAP_BASE + i * CONTEXT_VA_SPAN`.
pub const CONTEXT_VA_SPAN: u64 = 1 << 38;

/// Most contexts alive at once on one device (their heaps must fit the 47-bit user space).
pub const MAX_CONTEXTS: u64 = 480;

/// A live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo<K> {
    /// First address.
    pub base: u64,
    /// Size in bytes as requested.
    pub size: u64,
    /// The context that owns it.
    pub context: K,
}

/// Why a device memory access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessFault<K> {
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
        block: BlockInfo<K>,
    },
}

impl<K> std::fmt::Display for AccessFault<K> {
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

/// A stream position: (stream entity, sequence number). Reached when the stream has completed
/// that many tasks.
pub type StreamPosition<K> = (K, u64);

#[derive(Debug)]
struct Block<K> {
    size: u64,
    /// `free` was called; the block waits for its uses and must not be used again.
    freeing: bool,
    /// The latest position of each stream whose tasks name this block.
    uses: SmallVec<[StreamPosition<K>; 2]>,
}

#[derive(Debug)]
struct Space<K> {
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
    blocks: std::collections::HashMap<u64, Block<K>, FxBuildHasher>,
    /// How many times every block was released at once (`free_all_of`, after a fault): an
    /// owner that remembers the value at allocation knows whether its block is still its own.
    epoch: u64,
}

impl<K> Space<K> {
    /// Walks `[addr, addr + len)` through this space's TLB one physically contiguous extent at
    /// a time, calling `f(phys, pa, offset, n)` for each: the one page walk every access by
    /// virtual address goes through. Stops at the first fault.
    fn extents(
        &mut self,
        driver: &mut Driver,
        addr: u64,
        len: u64,
        mut f: impl FnMut(&mut crate::memory::PhysMem, u64, u64, u64) -> Result<(), MemFault>,
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
pub struct PendingFree<K> {
    /// Owning context.
    pub context: K,
    /// Block base.
    pub base: u64,
    /// Positions that must complete first.
    pub after: SmallVec<[StreamPosition<K>; 4]>,
    /// How far each stream of the context had been submitted when `free` was called (see
    /// [`DeviceMemory::begin_free_enqueued`]); `None` when unknown.
    pub enqueued: Option<SmallVec<[StreamPosition<K>; 4]>>,
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
pub struct DeviceMemory<K> {
    driver: Driver,
    spaces: BTreeMap<K, Space<K>>,
    free_slots: Vec<u64>,
    next_slot: u64,
    pending: Vec<PendingFree<K>>,
    deferred_releases: u64,
    peak_live_bytes: u64,
    /// The instruction-memory window's free ranges.
    code_space: RangeAlloc,
    /// Instruction memory handed out: base → length.
    code_live: BTreeMap<u64, u64>,
}

fn pool_error(e: PoolError, requested: u64, available: u64) -> MemoryError {
    match e {
        PoolError::ZeroSize => MemoryError::InvalidParam("allocation size must be nonzero".into()),
        PoolError::OutOfMemory { .. } => MemoryError::OutOfMemory {
            requested,
            available,
        },
        other => MemoryError::Internal(format!("memory pool: {other}")),
    }
}

impl<K: ContextKey> DeviceMemory<K> {
    /// Memory of `capacity` bytes.
    pub fn new(capacity: u64) -> MemResult<Self> {
        let driver = Driver::new(capacity).map_err(|e| {
            MemoryError::InvalidParam(format!("device memory of {capacity} bytes: {e}"))
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
    pub fn create_space(&mut self, context: K) -> MemResult<()> {
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
                return Err(MemoryError::InvalidParam(format!(
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

    /// Releases everything of `context` and its address space.
    pub fn destroy_space(&mut self, context: K) {
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
    pub fn address_space(&self, context: K) -> Option<AsId> {
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

    fn space(&self, context: K) -> MemResult<&Space<K>> {
        self.spaces.get(&context).ok_or_else(|| {
            MemoryError::ContextNull(format!("context {context} has no address space"))
        })
    }
}
