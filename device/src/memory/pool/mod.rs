//! The device memory pool of one context (DESIGN.md §4): reserves large physical chunks from
//! the [`Driver`], maps them into the context's address space, and serves allocations from
//! size-class free lists so that the steady state never calls the driver.
//!
//! How a request is served:
//!
//! 1. **Class.** Requests up to 1 MiB are *small*: carved from 2 MiB chunks at 64-byte
//!    granularity. Larger ones are *large*: carved at 512-byte granularity from chunks of at
//!    least [`PoolConfig::large_chunk_min`] (16 MiB), or the request rounded up to 2 MiB. Small
//!    blocks never share a chunk with large ones, so short-lived small buffers do not pin large
//!    chunks.
//! 2. **Page size.** Each class has one heap per page size; the [`AllocPolicy`] says which
//!    heaps may serve the request and in which order (huge pages first, huge only, normal only).
//! 3. **Search.** Each heap is a two-level segregated-fit (TLSF) index: 64 power-of-two ranges
//!    split into 32 sub-ranges, two bitmaps to find the first non-empty list at or above the
//!    request in O(1). The request's own list is checked first (a few entries) so that a block
//!    freed at the exact size is reused; then the rounded-up search guarantees any block found
//!    fits.
//! 4. **Split and coalesce.** A found block is split and its tail goes back to a free list; a
//!    freed block merges with free physical neighbours at once, so a chunk whose blocks are all
//!    free is a single block again, cached for reuse.
//! 5. **Growth.** With no fitting block, the pool reserves a chunk, maps it at the next free
//!    virtual address (from [`PoolConfig::heap_base`] upwards, with an unmapped 2 MiB guard
//!    between chunks so that overruns fault), and carves from it. Addresses never leave the
//!    pool's slice `[heap_base, heap_base + heap_span)`: at its end, placement wraps to the
//!    lowest gap between live chunks, so pools of different contexts never overlap however
//!    long they churn.
//! 6. **Exhaustion.** When the driver refuses, the pool releases its cached fully-free chunks
//!    (unmap + release) and tries once more; only then does it report
//!    [`PoolError::OutOfMemory`], with no allocation changed.
//!
//! Freed virtual addresses of released chunks are reused only once placement has walked the
//! whole slice, so a stale pointer into a released chunk faults rather than reading a newer
//! allocation for as long as the slice allows.
//!
//! Bookkeeping lives outside device memory (device memory is simulated; nothing is stored in
//! it): blocks sit in a slab with recycled slots, live blocks are found by address in an
//! open-addressing hash table, and each chunk keeps a hierarchical bitmap of live block starts
//! so that [`Pool::block_containing`] answers "which allocation holds this address" in
//! O(log chunks). Steady-state alloc and free allocate no host memory and make no driver call.

use std::collections::BTreeMap;

use crate::abi::HEAP_BASE;
use crate::memory::{AsId, ChunkId, Driver, DriverError, HUGE_PAGE_SIZE, PageSize};
use thiserror::Error;

mod index;

use index::{FreeLists, LiveMap, StartBitmap};

/// Largest request of the small class.
pub const SMALL_MAX: u64 = 1 << 20;
/// Size of the chunks that serve small requests.
pub const SMALL_CHUNK: u64 = 2 << 20;
/// Alignment of every address the pool returns.
pub const ALIGN: u64 = 64;

/// Requests above this are refused as out-of-memory before any arithmetic (no device is that
/// large: [`crate::memory::MAX_PHYS_CAPACITY`] is 2^44), so sizes never overflow.
const MAX_FAST: u64 = 1 << 60;
/// Unmapped virtual space left after each chunk, so that running off its end faults.
const GUARD: u64 = HUGE_PAGE_SIZE;
const SMALL_SHIFT: u32 = 6; // 64-byte units
const LARGE_SHIFT: u32 = 9; // 512-byte units
const NIL: u32 = u32::MAX;

/// Which page sizes an allocation may use, as in `aclrtMalloc`'s policy argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AllocPolicy {
    /// `ACL_MEM_MALLOC_HUGE_FIRST`: huge pages when possible, normal pages otherwise.
    #[default]
    HugeFirst,
    /// `ACL_MEM_MALLOC_HUGE_ONLY`: huge pages or out-of-memory.
    HugeOnly,
    /// `ACL_MEM_MALLOC_NORMAL_ONLY`: 4 KiB pages only.
    NormalOnly,
}

impl AllocPolicy {
    fn pages(self) -> &'static [PageSize] {
        match self {
            AllocPolicy::HugeFirst => &[PageSize::Huge2M, PageSize::Normal4K],
            AllocPolicy::HugeOnly => &[PageSize::Huge2M],
            AllocPolicy::NormalOnly => &[PageSize::Normal4K],
        }
    }
}

/// A live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Device virtual address, a multiple of [`ALIGN`].
    pub va: u64,
    /// The size asked for; accesses past `va + size` are out of bounds even where the block's
    /// rounding would leave room.
    pub size: u64,
    /// Page size of the chunk it came from.
    pub page: PageSize,
}

/// Why a pool operation was refused. A refused operation changes no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PoolError {
    /// An allocation of zero bytes.
    #[error("cannot allocate zero bytes")]
    ZeroSize,
    /// No memory for the request under its policy, even after releasing cached chunks.
    #[error("out of device memory: {requested} bytes with policy {policy:?}")]
    OutOfMemory {
        /// Bytes asked for.
        requested: u64,
        /// The policy that constrained it.
        policy: AllocPolicy,
    },
    /// `free` of an address that is not the start of a live allocation: never allocated,
    /// already freed, or pointing inside a block.
    #[error("{va:#x} is not the start of a live allocation (double free or foreign pointer?)")]
    NotAllocated {
        /// The address passed.
        va: u64,
    },
    /// A driver call failed in a way that is not exhaustion.
    #[error(transparent)]
    Driver(#[from] DriverError),
}

/// Default size of a pool's virtual-address slice: 256 GiB, past any device's memory.
pub const DEFAULT_HEAP_SPAN: u64 = 1 << 38;

/// Tunables of a [`Pool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// First virtual address the pool hands out. Default [`HEAP_BASE`].
    pub heap_base: u64,
    /// Bytes of virtual addresses from `heap_base` on that the pool may use (chunks and their
    /// guards); no address it hands out lies past `heap_base + heap_span`. Default
    /// [`DEFAULT_HEAP_SPAN`].
    pub heap_span: u64,
    /// Smallest chunk reserved for large requests; larger requests get a chunk of their size
    /// rounded up to 2 MiB. Default 16 MiB: big enough to amortize the driver calls over many
    /// medium buffers, small enough not to strand much memory.
    pub large_chunk_min: u64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            heap_base: HEAP_BASE,
            heap_span: DEFAULT_HEAP_SPAN,
            large_chunk_min: 16 << 20,
        }
    }
}

/// Counters and sizes of a [`Pool`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolStats {
    /// Bytes of live allocations (as requested).
    pub live_bytes: u64,
    /// Number of live allocations.
    pub live_blocks: u64,
    /// Bytes of chunks reserved from the driver.
    pub reserved_bytes: u64,
    /// Of which in huge-page chunks.
    pub reserved_huge_bytes: u64,
    /// Of which in normal-page chunks.
    pub reserved_normal_bytes: u64,
    /// Highest `live_bytes` so far.
    pub peak_live_bytes: u64,
    /// Highest `reserved_bytes` so far.
    pub peak_reserved_bytes: u64,
    /// Reserved bytes in free blocks (ready for reuse without a driver call).
    pub free_bytes: u64,
    /// The largest free block.
    pub largest_free_block: u64,
    /// `1 - largest_free_block / free_bytes` (0 with nothing free): how far free memory is from
    /// being one block. Free space in different chunks can never merge, so two cached chunks
    /// already score 0.5; read it together with `peak_reserved / peak_live`.
    pub fragmentation: f64,
    /// Chunks held.
    pub chunks: u64,
    /// Chunks with no live block (released by [`Pool::trim`]).
    pub cached_chunks: u64,
    /// Driver calls made by the pool (reserve, map, unmap, release), refused ones included.
    pub driver_calls: u64,
    /// Successful allocations.
    pub allocs: u64,
    /// Successful frees.
    pub frees: u64,
    /// Allocations refused with out-of-memory.
    pub failed_allocs: u64,
    /// Chunks given back to the driver so far.
    pub released_chunks: u64,
}

/// A block of a chunk: live, or free and linked into its heap's free list.
#[derive(Clone, Copy, Debug)]
struct Block {
    va: u64,
    /// Bytes covered, a multiple of the heap's unit.
    len: u64,
    /// Requested bytes while live; 0 while free.
    size: u64,
    prev_phys: u32,
    next_phys: u32,
    prev_free: u32,
    next_free: u32,
    chunk: u32,
}

impl Block {
    #[inline]
    fn is_free(&self) -> bool {
        self.size == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Small,
    Large,
}

/// The four heaps: (class, page size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HeapKind {
    class: Class,
    page: PageSize,
}

impl HeapKind {
    #[inline]
    fn new(size: u64, page: PageSize) -> Self {
        let class = if size <= SMALL_MAX {
            Class::Small
        } else {
            Class::Large
        };
        Self { class, page }
    }

    #[inline]
    fn index(self) -> usize {
        (self.class == Class::Large) as usize * 2 + (self.page == PageSize::Normal4K) as usize
    }

    #[inline]
    fn shift(self) -> u32 {
        match self.class {
            Class::Small => SMALL_SHIFT,
            Class::Large => LARGE_SHIFT,
        }
    }
}

#[derive(Debug)]
struct Chunk {
    id: ChunkId,
    va: u64,
    len: u64,
    kind: HeapKind,
    /// The block at offset 0: it keeps its slot for the chunk's whole life (merges keep the
    /// lower block), so a fully free chunk is exactly this block.
    first: u32,
    live: u32,
    starts: StartBitmap,
}

/// A device memory pool for one address space. See the [module docs](self).
///
/// ```
/// use npusim_device::memory::Driver;
/// use npusim_device::memory::pool::{AllocPolicy, Pool};
///
/// let mut driver = Driver::new(1 << 30).unwrap();
/// let asid = driver.create_address_space();
/// let mut pool = Pool::new(asid);
/// let a = pool.alloc(&mut driver, 1000, AllocPolicy::HugeFirst).unwrap();
/// assert_eq!(pool.block_containing(a.va + 999), Some((a.va, 1000)));
/// assert_eq!(pool.free(a.va), Ok(1000));
/// let calls = pool.stats().driver_calls;
/// pool.alloc(&mut driver, 1000, AllocPolicy::HugeFirst).unwrap(); // served from the cache
/// assert_eq!(pool.stats().driver_calls, calls);
/// ```
#[derive(Debug)]
pub struct Pool {
    asid: AsId,
    config: PoolConfig,
    next_va: u64,
    blocks: Vec<Block>,
    spare_blocks: Vec<u32>,
    chunks: Vec<Option<Chunk>>,
    spare_chunks: Vec<u32>,
    chunk_by_va: BTreeMap<u64, u32>,
    heaps: Box<[FreeLists; 4]>,
    live: LiveMap,
    live_span: u64,
    stats: PoolStats,
}

impl Pool {
    /// An empty pool for the address space `asid` with the default configuration.
    pub fn new(asid: AsId) -> Self {
        Self::with_config(asid, PoolConfig::default())
    }

    /// An empty pool with the given configuration.
    pub fn with_config(asid: AsId, config: PoolConfig) -> Self {
        Self {
            asid,
            next_va: config.heap_base,
            config,
            blocks: Vec::new(),
            spare_blocks: Vec::new(),
            chunks: Vec::new(),
            spare_chunks: Vec::new(),
            chunk_by_va: BTreeMap::new(),
            heaps: Box::new([const { FreeLists::new() }; 4]),
            live: LiveMap::new(),
            live_span: 0,
            stats: PoolStats::default(),
        }
    }

    /// The address space this pool maps into.
    pub fn address_space(&self) -> AsId {
        self.asid
    }

    /// Allocates `size` bytes under `policy`. Served from cached free blocks when possible
    /// (no driver call); otherwise reserves and maps a new chunk; on exhaustion releases cached
    /// chunks and retries before reporting out-of-memory.
    #[inline]
    pub fn alloc(
        &mut self,
        driver: &mut Driver,
        size: u64,
        policy: AllocPolicy,
    ) -> Result<Allocation, PoolError> {
        // Fast path: a cached block of the policy's first heap fits. Kept small so that it
        // inlines into callers; everything that may call the driver is out of line.
        if size != 0 && size <= MAX_FAST {
            let kind = HeapKind::new(size, policy.pages()[0]);
            let len = size.next_multiple_of(1 << kind.shift());
            if let Some(b) = self.heaps[kind.index()].find(&mut self.blocks, len, kind.shift()) {
                return Ok(self.carve(b, len, size, kind));
            }
        }
        self.alloc_slow(driver, size, policy)
    }

    /// Everything the fast path does not cover: other heaps of the policy, growth, exhaustion,
    /// and refused sizes.
    #[cold]
    #[inline(never)]
    fn alloc_slow(
        &mut self,
        driver: &mut Driver,
        size: u64,
        policy: AllocPolicy,
    ) -> Result<Allocation, PoolError> {
        if size == 0 {
            return Err(PoolError::ZeroSize);
        }
        let oom = PoolError::OutOfMemory {
            requested: size,
            policy,
        };
        // Nothing larger than the device can fit; this bound also keeps every size computation
        // below far from overflow.
        if size > driver.phys().capacity().min(MAX_FAST) {
            self.stats.failed_allocs += 1;
            return Err(oom);
        }
        for attempt in 0..2 {
            for &page in policy.pages() {
                let kind = HeapKind::new(size, page);
                let len = size.next_multiple_of(1 << kind.shift());
                let mut found = self.heaps[kind.index()].find(&mut self.blocks, len, kind.shift());
                if found.is_none() {
                    found = self.grow(driver, kind, len)?;
                }
                if let Some(block) = found {
                    return Ok(self.carve(block, len, size, kind));
                }
            }
            if attempt == 0 && self.release_cached(driver) == 0 {
                break;
            }
        }
        self.stats.failed_allocs += 1;
        Err(oom)
    }

    /// Frees the allocation starting at `va` and returns its size. Its block merges with free
    /// neighbours at once; the chunk stays reserved (cached) until [`Pool::trim`] or
    /// exhaustion. No driver call.
    pub fn free(&mut self, va: u64) -> Result<u64, PoolError> {
        let mut b = self.live.remove(va).ok_or(PoolError::NotAllocated { va })?;
        let Block {
            size, len, chunk, ..
        } = self.blocks[b as usize];
        let kind = {
            let c = self.chunk_mut(chunk);
            c.live -= 1;
            let kind = c.kind;
            let unit = (va - c.va) >> kind.shift();
            c.starts.clear(unit);
            kind
        };
        let heap = &mut self.heaps[kind.index()];
        self.blocks[b as usize].size = 0;
        let next = self.blocks[b as usize].next_phys;
        if next != NIL && self.blocks[next as usize].is_free() {
            heap.remove(&mut self.blocks, next, kind.shift());
            absorb_next(&mut self.blocks, b);
            self.spare_blocks.push(next);
        }
        let prev = self.blocks[b as usize].prev_phys;
        if prev != NIL && self.blocks[prev as usize].is_free() {
            heap.remove(&mut self.blocks, prev, kind.shift());
            absorb_next(&mut self.blocks, prev);
            self.spare_blocks.push(b);
            b = prev;
        }
        heap.insert(&mut self.blocks, b, kind.shift());
        self.live_span -= len;
        self.stats.live_bytes -= size;
        self.stats.live_blocks -= 1;
        self.stats.frees += 1;
        Ok(size)
    }

    /// The live allocation that contains `va`, as `(base, size)`: the check the engine applies
    /// to copies and kernel arguments. Addresses in a block's rounding slack (past `size`) or
    /// in free memory give `None`. O(log chunks).
    pub fn block_containing(&self, va: u64) -> Option<(u64, u64)> {
        let (&chunk_va, &ci) = self.chunk_by_va.range(..=va).next_back()?;
        let chunk = self.chunks[ci as usize].as_ref()?;
        if va - chunk_va >= chunk.len {
            return None;
        }
        let shift = chunk.kind.shift();
        let start = chunk_va + (chunk.starts.pred((va - chunk_va) >> shift)? << shift);
        let block = &self.blocks[self.live.get(start)? as usize];
        (va - start < block.size).then_some((start, block.size))
    }

    /// The live allocation starting exactly at `va`.
    pub fn allocation(&self, va: u64) -> Option<Allocation> {
        let block = &self.blocks[self.live.get(va)? as usize];
        let page = self.chunks[block.chunk as usize].as_ref()?.kind.page;
        Some(Allocation {
            va,
            size: block.size,
            page,
        })
    }

    /// Releases every cached (fully free) chunk to the driver, and returns the bytes released.
    pub fn trim(&mut self, driver: &mut Driver) -> u64 {
        self.release_cached(driver)
    }

    /// Unmaps and releases every chunk, live allocations included, leaving the pool empty (for
    /// context teardown). Returns the bytes released.
    pub fn release_all(&mut self, driver: &mut Driver) -> u64 {
        let all: Vec<u32> = self.chunk_by_va.values().copied().collect();
        let mut released = 0;
        for ci in all {
            released += self.release_chunk(driver, ci);
        }
        // Every block went with its chunk: start the bookkeeping afresh (capacity is kept).
        self.blocks.clear();
        self.spare_blocks.clear();
        self.chunks.clear();
        self.spare_chunks.clear();
        for heap in self.heaps.iter_mut() {
            *heap = FreeLists::new();
        }
        self.live.clear();
        self.live_span = 0;
        self.stats.live_bytes = 0;
        self.stats.live_blocks = 0;
        released
    }

    /// A snapshot of the pool's counters (O(chunks) for the free-space figures).
    pub fn stats(&self) -> PoolStats {
        let mut s = self.stats;
        s.free_bytes = s.reserved_bytes - self.live_span;
        s.largest_free_block = self
            .heaps
            .iter()
            .map(|h| h.largest(&self.blocks))
            .max()
            .unwrap_or(0);
        s.fragmentation = if s.free_bytes == 0 {
            0.0
        } else {
            1.0 - s.largest_free_block as f64 / s.free_bytes as f64
        };
        s.chunks = self.chunk_by_va.len() as u64;
        s.cached_chunks = self.chunks.iter().flatten().filter(|c| c.live == 0).count() as u64;
        s
    }
}

/// Growth, placement and release of chunks.
impl Pool {
    /// Reserves and maps a chunk for `len` bytes of heap `kind`, and returns its single free
    /// block (not on any free list). `Ok(None)` when the driver has no memory for it; an error
    /// when mapping fails for another reason (the address space was destroyed).
    #[cold]
    #[inline(never)]
    fn grow(
        &mut self,
        driver: &mut Driver,
        kind: HeapKind,
        len: u64,
    ) -> Result<Option<u32>, PoolError> {
        let Some(exact) = len.checked_next_multiple_of(HUGE_PAGE_SIZE) else {
            return Ok(None);
        };
        let preferred = match kind.class {
            Class::Small => SMALL_CHUNK,
            Class::Large => exact.max(self.config.large_chunk_min),
        };
        // Under memory pressure a chunk just big enough may still fit where the preferred one
        // does not.
        let candidates = [Some(preferred), (exact < preferred).then_some(exact)];
        for chunk_len in candidates.into_iter().flatten() {
            // Placement first: an exhausted slice needs no driver call.
            let Some(va) = self.place(chunk_len) else {
                continue;
            };
            let next_va = va + chunk_len + GUARD;
            self.stats.driver_calls += 1;
            let Ok(id) = driver.reserve(chunk_len, kind.page) else {
                continue;
            };
            self.stats.driver_calls += 1;
            if let Err(e) = driver.map(self.asid, va, id) {
                self.stats.driver_calls += 1;
                let _ = driver.release(id);
                return Err(e.into());
            }
            self.next_va = next_va;
            return Ok(Some(self.adopt_chunk(id, va, chunk_len, kind)));
        }
        Ok(None)
    }

    /// Where a new chunk of `len` bytes goes: the next address upwards, or, when the slice's
    /// end is reached, the lowest gap among live chunks that holds it and its guard.
    fn place(&self, len: u64) -> Option<u64> {
        let end = self.config.heap_base.saturating_add(self.config.heap_span);
        self.gap_from(self.next_va, len, end)
            .or_else(|| self.gap_from(self.config.heap_base, len, end))
    }

    /// The first 2 MiB-aligned address at or above `from` where `len` bytes and a guard fit
    /// below `end` without touching a live chunk or its guard.
    fn gap_from(&self, from: u64, len: u64, end: u64) -> Option<u64> {
        let need = len.checked_add(GUARD)?;
        let mut va = from.checked_next_multiple_of(HUGE_PAGE_SIZE)?;
        // The chunk starting below `va` may reach past it.
        let first = self
            .chunk_by_va
            .range(..va)
            .next_back()
            .map_or(va, |(&k, _)| k);
        for (&cva, &ci) in self.chunk_by_va.range(first..) {
            let clen = self.chunks[ci as usize].as_ref().map_or(0, |c| c.len);
            let cend = cva.saturating_add(clen).saturating_add(GUARD);
            if cend <= va {
                continue;
            }
            if va.checked_add(need)? <= cva {
                break;
            }
            va = cend.checked_next_multiple_of(HUGE_PAGE_SIZE)?;
        }
        (va.checked_add(need)? <= end).then_some(va)
    }

    /// Records a newly mapped chunk and returns its single free block.
    fn adopt_chunk(&mut self, id: ChunkId, va: u64, chunk_len: u64, kind: HeapKind) -> u32 {
        let block = self.new_block(Block {
            va,
            len: chunk_len,
            size: 0,
            prev_phys: NIL,
            next_phys: NIL,
            prev_free: NIL,
            next_free: NIL,
            chunk: 0,
        });
        let chunk = Chunk {
            id,
            va,
            len: chunk_len,
            kind,
            first: block,
            live: 0,
            starts: StartBitmap::new(chunk_len >> kind.shift()),
        };
        let ci = match self.spare_chunks.pop() {
            Some(ci) => {
                self.chunks[ci as usize] = Some(chunk);
                ci
            }
            None => {
                self.chunks.push(Some(chunk));
                (self.chunks.len() - 1) as u32
            }
        };
        self.blocks[block as usize].chunk = ci;
        self.chunk_by_va.insert(va, ci);
        self.stats.reserved_bytes += chunk_len;
        match kind.page {
            PageSize::Huge2M => self.stats.reserved_huge_bytes += chunk_len,
            PageSize::Normal4K => self.stats.reserved_normal_bytes += chunk_len,
        }
        self.stats.peak_reserved_bytes = self
            .stats
            .peak_reserved_bytes
            .max(self.stats.reserved_bytes);
        block
    }

    /// Makes free block `b` (off its free list) a live block of `len` bytes holding `size`,
    /// returning its tail to the free list.
    #[inline]
    fn carve(&mut self, b: u32, len: u64, size: u64, kind: HeapKind) -> Allocation {
        let block = self.blocks[b as usize];
        if block.len > len {
            let tail = self.new_block(Block {
                va: block.va + len,
                len: block.len - len,
                size: 0,
                prev_phys: b,
                next_phys: block.next_phys,
                prev_free: NIL,
                next_free: NIL,
                chunk: block.chunk,
            });
            if block.next_phys != NIL {
                self.blocks[block.next_phys as usize].prev_phys = tail;
            }
            self.blocks[b as usize].next_phys = tail;
            self.blocks[b as usize].len = len;
            self.heaps[kind.index()].insert(&mut self.blocks, tail, kind.shift());
        }
        self.blocks[b as usize].size = size;
        let chunk = self.chunk_mut(block.chunk);
        chunk.live += 1;
        let unit = (block.va - chunk.va) >> kind.shift();
        chunk.starts.set(unit);
        self.live.insert(block.va, b);
        self.live_span += len;
        let s = &mut self.stats;
        s.live_bytes += size;
        s.live_blocks += 1;
        s.allocs += 1;
        s.peak_live_bytes = s.peak_live_bytes.max(s.live_bytes);
        Allocation {
            va: block.va,
            size,
            page: kind.page,
        }
    }

    /// Releases every chunk without live blocks; returns the bytes released.
    #[cold]
    #[inline(never)]
    fn release_cached(&mut self, driver: &mut Driver) -> u64 {
        let cached: Vec<u32> = self
            .chunk_by_va
            .values()
            .copied()
            .filter(|&ci| {
                self.chunks[ci as usize]
                    .as_ref()
                    .is_some_and(|c| c.live == 0)
            })
            .collect();
        let mut released = 0;
        for ci in cached {
            let Some(chunk) = self.chunks[ci as usize].as_ref() else {
                continue;
            };
            let (kind, first) = (chunk.kind, chunk.first);
            self.heaps[kind.index()].remove(&mut self.blocks, first, kind.shift());
            released += self.release_chunk(driver, ci);
        }
        released
    }

    /// Unmaps and releases chunk `ci` and forgets it and its blocks. The caller has taken its
    /// free blocks off the free lists (a cached chunk is one free block), or resets the lists
    /// afterwards (`release_all`).
    fn release_chunk(&mut self, driver: &mut Driver, ci: u32) -> u64 {
        let Some(chunk) = self.chunks[ci as usize].take() else {
            return 0;
        };
        // The address space may already be gone (destroyed with the context), which unmapped
        // everything; the release below is what matters.
        self.stats.driver_calls += 2;
        let _ = driver.unmap(self.asid, chunk.va);
        let _ = driver.release(chunk.id);
        let mut b = chunk.first;
        while b != NIL {
            let block = self.blocks[b as usize];
            if !block.is_free() {
                self.live.remove(block.va);
                self.live_span -= block.len;
                self.stats.live_bytes -= block.size;
                self.stats.live_blocks -= 1;
            }
            self.spare_blocks.push(b);
            b = block.next_phys;
        }
        self.chunk_by_va.remove(&chunk.va);
        self.spare_chunks.push(ci);
        self.stats.reserved_bytes -= chunk.len;
        match chunk.kind.page {
            PageSize::Huge2M => self.stats.reserved_huge_bytes -= chunk.len,
            PageSize::Normal4K => self.stats.reserved_normal_bytes -= chunk.len,
        }
        self.stats.released_chunks += 1;
        chunk.len
    }

    #[inline]
    fn new_block(&mut self, block: Block) -> u32 {
        match self.spare_blocks.pop() {
            Some(b) => {
                self.blocks[b as usize] = block;
                b
            }
            None => {
                self.blocks.push(block);
                (self.blocks.len() - 1) as u32
            }
        }
    }

    #[inline]
    fn chunk_mut(&mut self, ci: u32) -> &mut Chunk {
        self.chunks[ci as usize]
            .as_mut()
            .expect("a block's chunk is alive while the block is")
    }
}

/// Merges the block after `b` (free, already off its list) into `b`.
#[inline]
fn absorb_next(blocks: &mut [Block], b: u32) {
    let next = blocks[b as usize].next_phys;
    let Block { len, next_phys, .. } = blocks[next as usize];
    blocks[b as usize].len += len;
    blocks[b as usize].next_phys = next_phys;
    if next_phys != NIL {
        blocks[next_phys as usize].prev_phys = b;
    }
}

#[cfg(test)]
mod tests;
