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

use npusim_device::abi::HEAP_BASE;
use npusim_device::memory::{AsId, ChunkId, Driver, DriverError, HUGE_PAGE_SIZE, PageSize};
use thiserror::Error;

/// Largest request of the small class.
pub const SMALL_MAX: u64 = 1 << 20;
/// Size of the chunks that serve small requests.
pub const SMALL_CHUNK: u64 = 2 << 20;
/// Alignment of every address the pool returns.
pub const ALIGN: u64 = 64;

/// Requests above this are refused as out-of-memory before any arithmetic (no device is that
/// large: [`npusim_device::memory::MAX_PHYS_CAPACITY`] is 2^44), so sizes never overflow.
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
/// use npusim_components::pool::{AllocPolicy, Pool};
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

const SL_LOG2: u32 = 5;
const SL: usize = 1 << SL_LOG2;
const FL: usize = 64;
/// Entries of the request's own size list checked before the rounded-up search.
const EXACT_SCAN: usize = 4;

/// The TLSF index of one heap: free lists by size class, with bitmaps of non-empty lists.
/// Sizes are in the heap's units. Class `(0, s)` holds exactly `s` units (`s < 32`); class
/// `(f, s)` for `f >= 1` holds `[2^(f+4) + s·2^(f-1), 2^(f+4) + (s+1)·2^(f-1))`.
#[derive(Debug)]
struct FreeLists {
    fl_bitmap: u64,
    sl_bitmap: [u32; FL],
    heads: [[u32; SL]; FL],
}

/// The class `(fl, sl)` of a block of `units` units. The masks are no-ops on the values that
/// occur (`fl < 60`, `sl < 32`) and let the compiler drop the bounds checks on the tables.
#[inline(always)]
fn mapping(units: u64) -> (usize, usize) {
    if units < SL as u64 {
        (0, units as usize & (SL - 1))
    } else {
        let log = 63 - units.leading_zeros();
        let fl = log - SL_LOG2 + 1;
        let sl = (units >> (log - SL_LOG2)) as usize - SL;
        (fl as usize & (FL - 1), sl & (SL - 1))
    }
}

impl FreeLists {
    const fn new() -> Self {
        Self {
            fl_bitmap: 0,
            sl_bitmap: [0; FL],
            heads: [[NIL; SL]; FL],
        }
    }

    #[inline(always)]
    fn insert(&mut self, blocks: &mut [Block], b: u32, shift: u32) {
        let (fl, sl) = mapping(blocks[b as usize].len >> shift);
        let head = self.heads[fl][sl];
        blocks[b as usize].prev_free = NIL;
        blocks[b as usize].next_free = head;
        if head != NIL {
            blocks[head as usize].prev_free = b;
        }
        self.heads[fl][sl] = b;
        self.fl_bitmap |= 1 << fl;
        self.sl_bitmap[fl] |= 1 << sl;
    }

    #[inline(always)]
    fn remove(&mut self, blocks: &mut [Block], b: u32, shift: u32) {
        let Block {
            prev_free,
            next_free,
            len,
            ..
        } = blocks[b as usize];
        if prev_free != NIL {
            blocks[prev_free as usize].next_free = next_free;
        } else {
            let (fl, sl) = mapping(len >> shift);
            self.heads[fl][sl] = next_free;
            if next_free == NIL {
                self.sl_bitmap[fl] &= !(1 << sl);
                if self.sl_bitmap[fl] == 0 {
                    self.fl_bitmap &= !(1 << fl);
                }
            }
        }
        if next_free != NIL {
            blocks[next_free as usize].prev_free = prev_free;
        }
    }

    /// Takes a free block of at least `len` bytes (a whole number of `1 << shift` units) off
    /// its list.
    #[inline]
    fn find(&mut self, blocks: &mut [Block], len: u64, shift: u32) -> Option<u32> {
        let units = len >> shift;
        let (fl, sl) = mapping(units);
        // The request's own list first: below 32 units classes are exact so its head fits;
        // above, a few entries are tried so that a block freed at this size is reused whole
        // rather than a larger one split (best fit where it is cheap).
        let mut b = self.heads[fl][sl];
        for _ in 0..EXACT_SCAN {
            if b == NIL {
                break;
            }
            if blocks[b as usize].len >= len {
                self.remove(blocks, b, shift);
                return Some(b);
            }
            b = blocks[b as usize].next_free;
        }
        // Good fit: round the request up to the next class boundary, so that the head of any
        // non-empty list at or above it fits, and find that list with two bit scans.
        let rounded = if units < SL as u64 {
            units
        } else {
            let log = 63 - units.leading_zeros();
            units + (1 << (log - SL_LOG2)) - 1
        };
        let (fl, sl) = mapping(rounded);
        let sl_map = self.sl_bitmap[fl] & (!0u32 << sl);
        let (fl, sl) = if sl_map != 0 {
            (fl, sl_map.trailing_zeros() as usize)
        } else {
            let fl_map = self.fl_bitmap & (!0u64).checked_shl(fl as u32 + 1).unwrap_or(0);
            if fl_map == 0 {
                return None;
            }
            let fl = fl_map.trailing_zeros() as usize;
            (fl, self.sl_bitmap[fl].trailing_zeros() as usize)
        };
        let b = self.heads[fl][sl];
        self.remove(blocks, b, shift);
        Some(b)
    }

    /// Length in bytes of the largest free block (scans the highest non-empty list).
    fn largest(&self, blocks: &[Block]) -> u64 {
        if self.fl_bitmap == 0 {
            return 0;
        }
        let fl = 63 - self.fl_bitmap.leading_zeros() as usize;
        let sl = 31 - self.sl_bitmap[fl].leading_zeros() as usize;
        let mut b = self.heads[fl][sl];
        let mut largest = 0;
        while b != NIL {
            largest = largest.max(blocks[b as usize].len);
            b = blocks[b as usize].next_free;
        }
        largest
    }
}

/// Live blocks by start address: an open-addressing table with linear probing and
/// backward-shift deletion (no tombstones, so a steady alloc/free stream never degrades it or
/// rehashes), kept at most a quarter full so that probe runs stay short. Keys are 64-byte aligned addresses; Fibonacci hashing of `va / 64` takes the top
/// bits of a golden-ratio product, which spreads consecutive and strided addresses alike. It
/// replaces a general hash map because the pool's fast path is two lookups per alloc+free and
/// the general map's SIMD group probing and tombstones cost several times more here.
#[derive(Debug)]
struct LiveMap {
    keys: Box<[u64]>,
    values: Box<[u32]>,
    len: usize,
    /// `64 - log2(capacity)`.
    shift: u32,
}

/// Marks an empty slot: never a block address (those are 64-byte aligned).
const EMPTY: u64 = u64::MAX;

impl LiveMap {
    const MIN_CAPACITY: usize = 64;

    fn new() -> Self {
        Self::with_capacity(Self::MIN_CAPACITY)
    }

    fn with_capacity(capacity: usize) -> Self {
        Self {
            keys: vec![EMPTY; capacity].into_boxed_slice(),
            values: vec![0; capacity].into_boxed_slice(),
            len: 0,
            shift: 64 - capacity.trailing_zeros(),
        }
    }

    #[inline(always)]
    fn home(&self, va: u64) -> usize {
        ((va >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.keys.len() - 1
    }

    #[inline]
    fn get(&self, va: u64) -> Option<u32> {
        let mut i = self.home(va);
        loop {
            match self.keys[i] {
                k if k == va => return Some(self.values[i]),
                EMPTY => return None,
                _ => i = (i + 1) & self.mask(),
            }
        }
    }

    /// Inserts a key that is not present.
    #[inline(always)]
    fn insert(&mut self, va: u64, value: u32) {
        if (self.len + 1) * 4 > self.keys.len() {
            self.grow();
        }
        let mut i = self.home(va);
        while self.keys[i] != EMPTY {
            i = (i + 1) & self.mask();
        }
        self.keys[i] = va;
        self.values[i] = value;
        self.len += 1;
    }

    #[inline(always)]
    fn remove(&mut self, va: u64) -> Option<u32> {
        let mask = self.mask();
        let mut i = self.home(va);
        loop {
            match self.keys[i] {
                k if k == va => break,
                EMPTY => return None,
                _ => i = (i + 1) & mask,
            }
        }
        let value = self.values[i];
        // Backward shift: pull later entries of the probe run into the hole when the hole lies
        // between their home slot and their current slot, so lookups never cross a gap.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.keys[j] != EMPTY {
            let home = self.home(self.keys[j]);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.keys[hole] = self.keys[j];
                self.values[hole] = self.values[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.keys[hole] = EMPTY;
        self.len -= 1;
        Some(value)
    }

    #[cold]
    fn grow(&mut self) {
        let mut bigger = Self::with_capacity(self.keys.len() * 2);
        for (&k, &v) in self.keys.iter().zip(self.values.iter()) {
            if k != EMPTY {
                bigger.insert(k, v);
            }
        }
        *self = bigger;
    }

    fn clear(&mut self) {
        *self = Self::new();
    }
}

/// A hierarchical bitmap over a chunk's units marking where live blocks start: level 0 has a
/// bit per unit, each level above a bit per non-zero word below, so finding the last set bit at
/// or before a position takes one word per level (six levels cover 2^42 units, more than any
/// chunk of the largest modeled device). All levels share one allocation (level 0 first) so
/// that the common update,
/// which stops at level 0, is a single dependent load. Host cost: 1/512 of the chunk's size for
/// small chunks, 1/4096 for large ones.
#[derive(Debug)]
struct StartBitmap {
    words: Box<[u64]>,
    /// Start of each level in `words`, and how many levels there are.
    level_start: [u32; 6],
    levels: usize,
}

impl StartBitmap {
    fn new(bits: u64) -> Self {
        let mut level_start = [0u32; 6];
        let mut levels = 0;
        let mut total = 0u64;
        let mut words = bits.div_ceil(64).max(1);
        loop {
            level_start[levels] = total as u32;
            levels += 1;
            total += words;
            if words == 1 || levels == level_start.len() {
                break;
            }
            words = words.div_ceil(64);
        }
        Self {
            words: vec![0u64; total as usize].into_boxed_slice(),
            level_start,
            levels,
        }
    }

    #[inline]
    fn word(&mut self, level: usize, index: u64) -> &mut u64 {
        &mut self.words[self.level_start[level] as usize + index as usize]
    }

    #[inline]
    fn set(&mut self, mut i: u64) {
        // Setting a summary bit that is already set is harmless, and the upper levels are
        // tiny and hot: no early exit, so no branch to mispredict.
        for level in 0..self.levels {
            *self.word(level, i / 64) |= 1 << (i % 64);
            i /= 64;
        }
    }

    #[inline]
    fn clear(&mut self, mut i: u64) {
        for level in 0..self.levels {
            let word = self.word(level, i / 64);
            *word &= !(1 << (i % 64));
            if *word != 0 {
                break;
            }
            i /= 64;
        }
    }

    /// The last set bit at or before `i`.
    fn pred(&self, i: u64) -> Option<u64> {
        let at = |level: usize, index: u64| {
            self.words[self.level_start[level] as usize + index as usize]
        };
        let mut level = 0;
        let mut i = i;
        loop {
            let word_index = i / 64;
            let word = at(level, word_index) & (!0u64 >> (63 - i % 64));
            if word != 0 {
                // Descend along the highest set bits.
                let mut pos = word_index * 64 + u64::from(63 - word.leading_zeros());
                while level > 0 {
                    level -= 1;
                    pos = pos * 64 + u64::from(63 - at(level, pos).leading_zeros());
                }
                return Some(pos);
            }
            if word_index == 0 || level + 1 == self.levels {
                return None;
            }
            // Nothing at or before `i` in this word: look for an earlier non-empty word.
            level += 1;
            i = word_index - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npusim_device::memory::Driver;

    const MIB: u64 = 1 << 20;

    fn setup(capacity: u64) -> (Driver, Pool) {
        let mut driver = Driver::new(capacity).unwrap();
        let asid = driver.create_address_space();
        (driver, Pool::new(asid))
    }

    #[test]
    fn churn_with_trim_never_leaves_the_pools_slice() {
        let mut driver = Driver::new(1 << 30).unwrap();
        let asid = driver.create_address_space();
        let base = HEAP_BASE + (1 << 38);
        let span = 64 * MIB;
        let mut pool = Pool::with_config(
            asid,
            PoolConfig {
                heap_base: base,
                heap_span: span,
                ..PoolConfig::default()
            },
        );
        let keep = pool
            .alloc(&mut driver, 100, AllocPolicy::HugeFirst)
            .unwrap();
        for i in 0..200 {
            let a = pool
                .alloc(&mut driver, 3 * MIB, AllocPolicy::HugeFirst)
                .unwrap();
            assert!(
                a.va >= base && a.va + a.size <= base + span,
                "round {i}: {:#x} outside the slice",
                a.va
            );
            assert!(a.va + a.size <= keep.va || a.va >= keep.va + keep.size);
            pool.free(a.va).unwrap();
            pool.trim(&mut driver);
        }
        assert_eq!(pool.block_containing(keep.va), Some((keep.va, 100)));
    }

    #[test]
    fn a_pool_can_live_in_a_component() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<Pool>();
    }

    #[test]
    fn start_bitmap_finds_predecessors_across_levels() {
        let mut bm = StartBitmap::new(1 << 20);
        assert_eq!(bm.pred(12345), None);
        bm.set(5);
        bm.set(70_000);
        bm.set(1 << 19);
        assert_eq!(bm.pred(4), None);
        assert_eq!(bm.pred(5), Some(5));
        assert_eq!(bm.pred(69_999), Some(5));
        assert_eq!(bm.pred(70_000), Some(70_000));
        assert_eq!(bm.pred((1 << 20) - 1), Some(1 << 19));
        bm.clear(70_000);
        assert_eq!(bm.pred((1 << 19) - 1), Some(5));
        bm.clear(5);
        assert_eq!(bm.pred((1 << 19) - 1), None);
    }

    #[test]
    fn live_map_matches_a_btree_map() {
        let mut m = LiveMap::new();
        let mut model = std::collections::BTreeMap::new();
        let mut x = 0x1234_5678u64;
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Clustered keys, to exercise long probe runs and wrap-around.
            let va = HEAP_BASE + (x % 512) * 64 * if i % 3 == 0 { 4096 } else { 1 };
            match model.entry(va) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    assert_eq!(m.remove(va), Some(e.remove()));
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    m.insert(va, i);
                    e.insert(i);
                }
            }
            assert_eq!(m.len, model.len());
        }
        for (&k, &v) in &model {
            assert_eq!(m.get(k), Some(v));
        }
        assert_eq!(
            m.get(HEAP_BASE + 7 * 64 * 4096 + 64),
            model.get(&(HEAP_BASE + 7 * 64 * 4096 + 64)).copied()
        );
    }

    #[test]
    fn tlsf_mapping_is_monotonic_and_rounding_fits() {
        let mut last = (0, 0);
        for units in 1..100_000u64 {
            let m = mapping(units);
            assert!(m >= last, "{units}");
            last = m;
        }
    }

    #[test]
    fn small_and_large_requests_use_separate_chunks() {
        let (mut d, mut p) = setup(1 << 30);
        let small = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
        let large = p.alloc(&mut d, 3 * MIB, AllocPolicy::HugeFirst).unwrap();
        let s = p.stats();
        assert_eq!(s.chunks, 2);
        assert_eq!(s.reserved_bytes, SMALL_CHUNK + 16 * MIB);
        assert_eq!(small.va % ALIGN, 0);
        assert_eq!(large.va % ALIGN, 0);
        assert_eq!(p.free(small.va), Ok(100));
        assert_eq!(p.free(large.va), Ok(3 * MIB));
        assert_eq!(p.stats().cached_chunks, 2);
        assert_eq!(p.trim(&mut d), SMALL_CHUNK + 16 * MIB);
        assert_eq!(d.stats().reserved_bytes, 0);
    }

    #[test]
    fn freeing_everything_coalesces_to_one_block_per_chunk() {
        let (mut d, mut p) = setup(1 << 30);
        let blocks: Vec<_> = (0..100)
            .map(|i| {
                p.alloc(&mut d, 1000 + i * 64, AllocPolicy::HugeFirst)
                    .unwrap()
            })
            .collect();
        for b in blocks
            .iter()
            .step_by(2)
            .chain(blocks.iter().skip(1).step_by(2))
        {
            p.free(b.va).unwrap();
        }
        let s = p.stats();
        assert_eq!(s.free_bytes, s.reserved_bytes);
        assert_eq!(s.largest_free_block, SMALL_CHUNK);
        assert_eq!(s.fragmentation, 0.0);
    }

    #[test]
    fn zero_absurd_and_foreign_requests_are_errors() {
        let (mut d, mut p) = setup(1 << 30);
        assert_eq!(
            p.alloc(&mut d, 0, AllocPolicy::HugeFirst),
            Err(PoolError::ZeroSize)
        );
        for size in [u64::MAX, u64::MAX - 63, (1 << 30) + 1, 1 << 62] {
            assert!(matches!(
                p.alloc(&mut d, size, AllocPolicy::HugeFirst),
                Err(PoolError::OutOfMemory { .. })
            ));
        }
        let a = p.alloc(&mut d, 256, AllocPolicy::HugeFirst).unwrap();
        assert_eq!(
            p.free(a.va + 64),
            Err(PoolError::NotAllocated { va: a.va + 64 })
        );
        assert_eq!(p.free(0), Err(PoolError::NotAllocated { va: 0 }));
        assert_eq!(p.free(a.va), Ok(256));
        assert_eq!(p.free(a.va), Err(PoolError::NotAllocated { va: a.va }));
        let s = p.stats();
        assert_eq!(
            (s.allocs, s.frees, s.live_bytes, s.failed_allocs),
            (1, 1, 0, 4)
        );
    }

    #[test]
    fn policies_choose_the_page_size() {
        let (mut d, mut p) = setup(1 << 30);
        for (policy, page) in [
            (AllocPolicy::HugeFirst, PageSize::Huge2M),
            (AllocPolicy::HugeOnly, PageSize::Huge2M),
            (AllocPolicy::NormalOnly, PageSize::Normal4K),
        ] {
            for size in [64, 5 * MIB] {
                let a = p.alloc(&mut d, size, policy).unwrap();
                assert_eq!(a.page, page, "{policy:?} {size}");
                assert_eq!(p.allocation(a.va), Some(a));
            }
        }
        let s = p.stats();
        assert_eq!(s.reserved_normal_bytes, SMALL_CHUNK + 16 * MIB);
        assert_eq!(s.reserved_huge_bytes, SMALL_CHUNK + 16 * MIB);
    }

    /// Leaves exactly `[1 MiB, 3 MiB)` of a 4 MiB device free: 2 MiB, but not 2 MiB aligned.
    fn unaligned_free_space(d: &mut Driver) {
        let _x = d.reserve(MIB, PageSize::Normal4K).unwrap();
        let y = d.reserve(2 * MIB, PageSize::Normal4K).unwrap();
        let _z = d.reserve(MIB, PageSize::Normal4K).unwrap();
        d.release(y).unwrap();
    }

    #[test]
    fn huge_first_falls_back_to_normal_pages() {
        let (mut d, mut p) = setup(4 * MIB);
        unaligned_free_space(&mut d);
        assert!(matches!(
            p.alloc(&mut d, 100, AllocPolicy::HugeOnly),
            Err(PoolError::OutOfMemory { .. })
        ));
        let a = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
        assert_eq!(a.page, PageSize::Normal4K);
        // Cached normal memory does not serve huge-only requests.
        p.free(a.va).unwrap();
        assert!(p.alloc(&mut d, 100, AllocPolicy::HugeOnly).is_err());
    }

    #[test]
    fn exhaustion_releases_cached_chunks_and_retries() {
        let (mut d, mut p) = setup(32 * MIB);
        let small = p.alloc(&mut d, MIB, AllocPolicy::HugeFirst).unwrap();
        p.free(small.va).unwrap();
        let big = p.alloc(&mut d, 31 * MIB, AllocPolicy::HugeFirst).unwrap();
        let s = p.stats();
        assert_eq!(s.released_chunks, 1);
        assert_eq!(s.reserved_bytes, 32 * MIB);
        assert_eq!(s.chunks, 1);
        // Now truly full: refused, and nothing changed.
        let before = p.stats();
        assert!(p.alloc(&mut d, 64, AllocPolicy::HugeFirst).is_err());
        let after = p.stats();
        assert_eq!(after.live_bytes, before.live_bytes);
        assert_eq!(after.reserved_bytes, before.reserved_bytes);
        assert_eq!(p.block_containing(big.va), Some((big.va, 31 * MIB)));
        // After a free the same request succeeds.
        p.free(big.va).unwrap();
        assert!(p.alloc(&mut d, 64, AllocPolicy::HugeFirst).is_ok());
    }

    #[test]
    fn a_destroyed_address_space_is_a_driver_error_not_oom() {
        let (mut d, mut p) = setup(1 << 30);
        d.destroy_address_space(p.address_space()).unwrap();
        assert!(matches!(
            p.alloc(&mut d, 100, AllocPolicy::HugeFirst),
            Err(PoolError::Driver(DriverError::UnknownAddressSpace(_)))
        ));
        assert_eq!(
            d.stats().reserved_bytes,
            0,
            "the chunk reserved for it was released"
        );
    }

    #[test]
    fn bounds_lookup_respects_the_requested_size() {
        let (mut d, mut p) = setup(1 << 30);
        let a = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
        let b = p
            .alloc(&mut d, 3 * MIB + 1, AllocPolicy::HugeFirst)
            .unwrap();
        assert_eq!(p.block_containing(a.va), Some((a.va, 100)));
        assert_eq!(p.block_containing(a.va + 99), Some((a.va, 100)));
        assert_eq!(
            p.block_containing(a.va + 100),
            None,
            "rounding slack is out of bounds"
        );
        assert_eq!(
            p.block_containing(b.va + 3 * MIB),
            Some((b.va, 3 * MIB + 1))
        );
        assert_eq!(p.block_containing(b.va + 3 * MIB + 1), None);
        assert_eq!(p.block_containing(a.va - 1), None);
        assert_eq!(p.block_containing(0), None);
        assert_eq!(p.block_containing(u64::MAX), None);
        p.free(a.va).unwrap();
        assert_eq!(p.block_containing(a.va), None);
    }

    #[test]
    fn steady_state_reuses_without_driver_calls() {
        let (mut d, mut p) = setup(1 << 30);
        let warm: Vec<_> = [64, 4096, 100_000, 2 * MIB, 20 * MIB]
            .iter()
            .map(|&s| p.alloc(&mut d, s, AllocPolicy::HugeFirst).unwrap())
            .collect();
        for a in &warm {
            p.free(a.va).unwrap();
        }
        let calls = d.stats().calls.total();
        for _ in 0..1000 {
            for &s in &[64, 4096, 100_000, 2 * MIB, 20 * MIB] {
                let a = p.alloc(&mut d, s, AllocPolicy::HugeFirst).unwrap();
                p.free(a.va).unwrap();
            }
        }
        assert_eq!(d.stats().calls.total(), calls);
        assert_eq!(p.stats().chunks, 3);
    }

    #[test]
    fn release_all_returns_everything_to_the_driver() {
        let (mut d, mut p) = setup(1 << 30);
        let a = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
        p.alloc(&mut d, 50 * MIB, AllocPolicy::NormalOnly).unwrap();
        p.release_all(&mut d);
        assert_eq!(d.stats().reserved_bytes, 0);
        assert_eq!(d.stats().mapped_bytes, 0);
        let s = p.stats();
        assert_eq!((s.live_bytes, s.reserved_bytes, s.chunks), (0, 0, 0));
        assert_eq!(p.free(a.va), Err(PoolError::NotAllocated { va: a.va }));
        let b = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
        assert_ne!(a.va, b.va, "released virtual addresses are not reused");
        // Only cached chunks left: released too, and the pool works afterwards.
        p.free(b.va).unwrap();
        p.alloc(&mut d, 5 * MIB, AllocPolicy::HugeFirst).unwrap();
        p.release_all(&mut d);
        assert_eq!(d.stats().reserved_bytes, 0);
        for size in [64, 100_000, 3 * MIB] {
            let a = p.alloc(&mut d, size, AllocPolicy::HugeFirst).unwrap();
            assert_eq!(p.block_containing(a.va + size - 1), Some((a.va, size)));
        }
        assert_eq!(p.stats().chunks, 2);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Alloc(u64, AllocPolicy),
            Free(usize),
            Trim,
            ReleaseAll,
        }

        fn size() -> impl Strategy<Value = u64> {
            prop_oneof![
                8 => 1u64..=4096,
                4 => 4097u64..=SMALL_MAX,
                2 => SMALL_MAX + 1..=8 * MIB,
                1 => 8 * MIB..=40 * MIB,
            ]
        }

        fn policy() -> impl Strategy<Value = AllocPolicy> {
            prop_oneof![
                Just(AllocPolicy::HugeFirst),
                Just(AllocPolicy::HugeOnly),
                Just(AllocPolicy::NormalOnly)
            ]
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => (size(), policy()).prop_map(|(s, p)| Op::Alloc(s, p)),
                5 => any::<usize>().prop_map(Op::Free),
                1 => Just(Op::Trim),
                1 => Just(Op::ReleaseAll),
            ]
        }

        /// Tags the first and last byte of a block with its index, to catch blocks that share
        /// physical memory.
        fn tag(d: &mut Driver, asid: AsId, a: &Allocation, t: u8) {
            d.write_virt(asid, a.va, &[t]).unwrap();
            d.write_virt(asid, a.va + a.size - 1, &[t]).unwrap();
        }

        fn check_tag(d: &Driver, asid: AsId, a: &Allocation, t: u8) {
            let mut b = [0u8; 1];
            d.read_virt(asid, a.va, &mut b).unwrap();
            assert_eq!(b[0], t);
            d.read_virt(asid, a.va + a.size - 1, &mut b).unwrap();
            assert_eq!(b[0], t);
        }

        /// Replays `ops` against a model of the live set, checking the invariants after each.
        fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
            // 96 MiB: large requests exhaust it regularly.
            let (mut d, mut p) = setup(96 * MIB);
            let asid = p.address_space();
            let mut live: Vec<(Allocation, u8)> = Vec::new();
            let mut next_tag = 0u8;
            for op in ops {
                match op {
                    Op::Alloc(size, policy) => {
                        let before = p.stats();
                        match p.alloc(&mut d, size, policy) {
                            Ok(a) => {
                                prop_assert_eq!(a.size, size);
                                prop_assert_eq!(a.va % ALIGN, 0);
                                match policy {
                                    AllocPolicy::HugeOnly => {
                                        prop_assert_eq!(a.page, PageSize::Huge2M)
                                    }
                                    AllocPolicy::NormalOnly => {
                                        prop_assert_eq!(a.page, PageSize::Normal4K)
                                    }
                                    AllocPolicy::HugeFirst => {}
                                }
                                next_tag = next_tag.wrapping_add(1);
                                tag(&mut d, asid, &a, next_tag);
                                live.push((a, next_tag));
                            }
                            Err(e) => {
                                let oom = matches!(e, PoolError::OutOfMemory { .. });
                                prop_assert!(oom, "{:?}", e);
                                let after = p.stats();
                                prop_assert_eq!(after.live_bytes, before.live_bytes);
                                prop_assert_eq!(after.live_blocks, before.live_blocks);
                                // Recovery: a pool holding nothing gets any request that
                                // the empty device could hold.
                                if live.is_empty() && size <= 64 * MIB {
                                    prop_assert!(false, "empty pool refused {} bytes", size);
                                }
                            }
                        }
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (a, t) = live.swap_remove(i % live.len());
                        check_tag(&d, asid, &a, t);
                        prop_assert_eq!(p.free(a.va), Ok(a.size));
                        prop_assert_eq!(p.free(a.va), Err(PoolError::NotAllocated { va: a.va }));
                    }
                    Op::Free(_) => {}
                    Op::Trim => {
                        p.trim(&mut d);
                        prop_assert_eq!(p.stats().cached_chunks, 0);
                    }
                    Op::ReleaseAll => {
                        p.release_all(&mut d);
                        prop_assert_eq!(d.stats().reserved_bytes, 0);
                        for (a, _) in live.drain(..) {
                            prop_assert_eq!(p.block_containing(a.va), None);
                            prop_assert_eq!(
                                p.free(a.va),
                                Err(PoolError::NotAllocated { va: a.va })
                            );
                        }
                    }
                }
                // Invariants.
                let s = p.stats();
                let mut sorted: Vec<_> = live.iter().map(|(a, _)| (a.va, a.size)).collect();
                sorted.sort_unstable();
                for w in sorted.windows(2) {
                    prop_assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {:?}", w);
                }
                prop_assert_eq!(s.live_bytes, sorted.iter().map(|x| x.1).sum::<u64>());
                prop_assert_eq!(s.live_blocks, sorted.len() as u64);
                prop_assert!(s.reserved_bytes >= s.live_bytes);
                prop_assert_eq!(s.reserved_bytes, d.stats().reserved_bytes);
                prop_assert_eq!(
                    s.reserved_bytes,
                    s.reserved_huge_bytes + s.reserved_normal_bytes
                );
                prop_assert!(s.peak_live_bytes >= s.live_bytes);
                prop_assert!(s.peak_reserved_bytes >= s.reserved_bytes);
                prop_assert!(s.largest_free_block <= s.free_bytes);
                for &(va, size) in &sorted {
                    prop_assert_eq!(p.block_containing(va), Some((va, size)));
                    prop_assert_eq!(p.block_containing(va + size - 1), Some((va, size)));
                    prop_assert!(p.block_containing(va + size) != Some((va, size)));
                }
            }
            for (a, t) in &live {
                check_tag(&d, asid, a, *t);
                p.free(a.va).unwrap();
            }
            let s = p.stats();
            prop_assert_eq!(s.free_bytes, s.reserved_bytes);
            prop_assert_eq!(s.cached_chunks, s.chunks);
            p.trim(&mut d);
            prop_assert_eq!(d.stats().reserved_bytes, 0);
            prop_assert_eq!(d.stats().mapped_bytes, 0);
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn random_alloc_free_keeps_the_invariants(
                ops in proptest::collection::vec(op(), 1..200)
            ) {
                run(ops)?;
            }
        }
    }
}
