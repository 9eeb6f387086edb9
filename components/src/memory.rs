//! Device memory of one device: the allocations (blocks) and their bytes. Blocks are looked up
//! by address for every access, so a kernel or copy can only touch live memory of its own
//! context: anything else is a fault, never someone else's bytes.
//!
//! Backing is sparse: 4 KiB pages get host memory on first write, and never-written memory
//! reads as zeros, so a 64 GiB device costs nothing until used.

use std::collections::BTreeMap;

use bevy_ecs::entity::Entity;

use crate::error::{NpuError, NpuResult};

const PAGE: u64 = 4096;
/// Every allocation starts on this boundary.
pub const ALLOC_ALIGN: u64 = 64;

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

/// The memory of one device.
#[derive(Debug)]
pub struct DeviceMemory {
    base: u64,
    capacity: u64,
    live_bytes: u64,
    peak_live_bytes: u64,
    blocks: BTreeMap<u64, BlockInfo>,
    /// Free address ranges, base → length, coalesced.
    free: BTreeMap<u64, u64>,
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl DeviceMemory {
    /// Memory of `capacity` bytes whose addresses start at `base`.
    pub fn new(base: u64, capacity: u64) -> Self {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(base, capacity);
        }
        Self {
            base,
            capacity,
            live_bytes: 0,
            peak_live_bytes: 0,
            blocks: BTreeMap::new(),
            free,
            pages: BTreeMap::new(),
        }
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes in live blocks (rounded to the allocation granule).
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Highest `live_bytes` seen.
    pub fn peak_live_bytes(&self) -> u64 {
        self.peak_live_bytes
    }

    /// Number of live blocks.
    pub fn live_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes of host memory backing device pages.
    pub fn backed_bytes(&self) -> u64 {
        self.pages.len() as u64 * PAGE
    }

    /// Allocates `size` bytes for `context` (first fit, 64-byte aligned).
    pub fn alloc(&mut self, size: u64, context: Entity) -> NpuResult<u64> {
        if size == 0 {
            return Err(NpuError::InvalidParam(
                "allocation size must be nonzero".into(),
            ));
        }
        let rounded = size
            .checked_add(ALLOC_ALIGN - 1)
            .map(|s| s & !(ALLOC_ALIGN - 1))
            .filter(|&s| s <= self.capacity)
            .ok_or(NpuError::OutOfMemory {
                requested: size,
                available: self.capacity - self.live_bytes,
            })?;
        let found = self
            .free
            .iter()
            .find(|(_, len)| **len >= rounded)
            .map(|(b, l)| (*b, *l));
        let Some((base, len)) = found else {
            return Err(NpuError::OutOfMemory {
                requested: size,
                available: self.capacity - self.live_bytes,
            });
        };
        self.free.remove(&base);
        if len > rounded {
            self.free.insert(base + rounded, len - rounded);
        }
        self.blocks.insert(
            base,
            BlockInfo {
                base,
                size,
                context,
            },
        );
        self.live_bytes += rounded;
        self.peak_live_bytes = self.peak_live_bytes.max(self.live_bytes);
        Ok(base)
    }

    /// Frees the block starting at `ptr`, owned by `context`.
    pub fn free(&mut self, ptr: u64, context: Entity) -> NpuResult<BlockInfo> {
        let Some(block) = self.blocks.get(&ptr).copied() else {
            let why = match self.block_containing(ptr) {
                Some(_) => "not the start of an allocation",
                None => "not a live allocation (double free or unknown pointer)",
            };
            return Err(NpuError::BadFree { ptr, why });
        };
        if block.context != context {
            return Err(NpuError::BadFree {
                ptr,
                why: "the allocation belongs to another context",
            });
        }
        self.blocks.remove(&ptr);
        let rounded = (block.size + ALLOC_ALIGN - 1) & !(ALLOC_ALIGN - 1);
        self.live_bytes -= rounded;
        self.insert_free(ptr, rounded);
        Ok(block)
    }

    fn insert_free(&mut self, mut base: u64, mut len: u64) {
        if let Some((&pb, &pl)) = self.free.range(..base).next_back()
            && pb + pl == base
        {
            self.free.remove(&pb);
            base = pb;
            len += pl;
        }
        if let Some(&nl) = self.free.get(&(base + len)) {
            self.free.remove(&(base + len));
            len += nl;
        }
        self.free.insert(base, len);
    }

    /// Frees every block of `context` (when the context is destroyed); returns how many.
    pub fn free_all_of(&mut self, context: Entity) -> usize {
        let bases: Vec<u64> = self
            .blocks
            .values()
            .filter(|b| b.context == context)
            .map(|b| b.base)
            .collect();
        for &b in &bases {
            let _ = self.free(b, context);
        }
        bases.len()
    }

    /// The live block containing `addr`, if any.
    pub fn block_containing(&self, addr: u64) -> Option<BlockInfo> {
        let (_, b) = self.blocks.range(..=addr).next_back()?;
        (addr < b.base + b.size.max(1)).then_some(*b)
    }

    /// Checks that `[addr, addr+len)` lies inside one live block of `context`.
    pub fn check(&self, addr: u64, len: u64, context: Entity) -> Result<BlockInfo, AccessFault> {
        let block = self
            .block_containing(addr)
            .filter(|b| b.context == context)
            .ok_or(AccessFault::Unmapped { addr })?;
        let end = addr.checked_add(len);
        if end.is_none_or(|e| e > block.base + block.size) {
            return Err(AccessFault::PastEnd { addr, len, block });
        }
        Ok(block)
    }

    /// Reads `buf.len()` bytes at `addr` on behalf of `context`.
    pub fn read(&self, addr: u64, buf: &mut [u8], context: Entity) -> Result<(), AccessFault> {
        self.check(addr, buf.len() as u64, context)?;
        self.read_unchecked(addr, buf);
        Ok(())
    }

    /// Writes `data` at `addr` on behalf of `context`.
    pub fn write(&mut self, addr: u64, data: &[u8], context: Entity) -> Result<(), AccessFault> {
        self.check(addr, data.len() as u64, context)?;
        self.write_unchecked(addr, data);
        Ok(())
    }

    /// Sets `len` bytes at `addr` to `value` on behalf of `context`.
    pub fn fill(
        &mut self,
        addr: u64,
        len: u64,
        value: u8,
        context: Entity,
    ) -> Result<(), AccessFault> {
        self.check(addr, len, context)?;
        let mut done = 0;
        while done < len {
            let a = addr + done;
            let off = a % PAGE;
            let n = (PAGE - off).min(len - done);
            if value == 0 && !self.pages.contains_key(&(a / PAGE)) {
                // Untouched pages already read as zero.
            } else {
                let page = self.page_mut(a / PAGE);
                page[off as usize..(off + n) as usize].fill(value);
            }
            done += n;
        }
        Ok(())
    }

    fn page_mut(&mut self, index: u64) -> &mut [u8] {
        self.pages
            .entry(index)
            .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice())
    }

    fn read_unchecked(&self, addr: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        while done < buf.len() {
            let a = addr + done as u64;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(buf.len() - done);
            match self.pages.get(&(a / PAGE)) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[off..off + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    fn write_unchecked(&mut self, addr: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let a = addr + done as u64;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(data.len() - done);
            let page = self.page_mut(a / PAGE);
            page[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    /// The first address of this memory.
    pub fn base(&self) -> u64 {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(i: u32) -> Entity {
        Entity::from_raw_u32(i).unwrap()
    }

    #[test]
    fn never_written_memory_reads_zero_and_costs_nothing() {
        let mut m = DeviceMemory::new(1 << 36, 64 << 30);
        let p = m.alloc(1 << 30, ctx(1)).unwrap();
        let mut buf = [7u8; 16];
        m.read(p + 12345, &mut buf, ctx(1)).unwrap();
        assert_eq!(buf, [0; 16]);
        assert_eq!(m.backed_bytes(), 0);
    }

    #[test]
    fn free_coalesces_so_a_large_block_fits_again() {
        let mut m = DeviceMemory::new(0x1000_0000, 1 << 20);
        let a = m.alloc(512 << 10, ctx(1)).unwrap();
        let b = m.alloc(512 << 10, ctx(1)).unwrap();
        assert!(m.alloc(64, ctx(1)).is_err());
        m.free(a, ctx(1)).unwrap();
        m.free(b, ctx(1)).unwrap();
        assert_eq!(m.alloc(1 << 20, ctx(1)).unwrap(), a);
    }

    #[test]
    fn other_contexts_memory_is_unmapped() {
        let mut m = DeviceMemory::new(0x1000_0000, 1 << 20);
        let a = m.alloc(256, ctx(1)).unwrap();
        m.write(a, &[1, 2, 3], ctx(1)).unwrap();
        let mut buf = [0u8; 3];
        assert_eq!(
            m.read(a, &mut buf, ctx(2)),
            Err(AccessFault::Unmapped { addr: a })
        );
        assert!(matches!(
            m.read(a + 250, &mut [0u8; 8], ctx(1)),
            Err(AccessFault::PastEnd { .. })
        ));
        assert!(m.free(a, ctx(2)).is_err());
        m.free(a, ctx(1)).unwrap();
        assert!(matches!(m.free(a, ctx(1)), Err(NpuError::BadFree { .. })));
    }
}
