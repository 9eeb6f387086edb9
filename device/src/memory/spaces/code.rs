//! Instruction memory (one window per device) and module data (one window per context): address
//! ranges handed out first-fit and returned on unload.

use super::*;

/// First-fit allocation of address ranges in a fixed window, with coalescing on free: the
/// instruction-memory window of a device and the module-data window of each context. Ranges are
/// returned on unload, so loading and unloading forever never runs out.
#[derive(Debug)]
pub(super) struct RangeAlloc {
    /// Free ranges: start → end.
    free: BTreeMap<u64, u64>,
}

impl RangeAlloc {
    pub(super) fn new(base: u64, end: u64) -> Self {
        Self {
            free: BTreeMap::from([(base, end)]),
        }
    }

    /// The lowest free range of `len` bytes (a multiple of 4 KiB), taken.
    pub(super) fn alloc(&mut self, len: u64) -> Option<u64> {
        let (&start, &end) = self.free.iter().find(|&(&s, &e)| e - s >= len)?;
        self.free.remove(&start);
        if start + len < end {
            self.free.insert(start + len, end);
        }
        Some(start)
    }

    /// Returns `[start, start + len)`, merging it with free neighbours.
    pub(super) fn release(&mut self, start: u64, len: u64) {
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
    pub(super) fn largest(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).max().unwrap_or(0)
    }
}

impl<K: ContextKey> DeviceMemory<K> {
    /// Reserves `len` bytes of instruction memory for a binary's `.text` (aligned to 4 KiB).
    /// Instruction memory is not data memory: the core fetches from the decoded program only.
    /// Returned by [`DeviceMemory::free_code`] when the binary is unloaded.
    pub fn alloc_code(&mut self, len: u64) -> MemResult<u64> {
        let size = len
            .max(4)
            .checked_next_multiple_of(4096)
            .filter(|&n| n <= CODE_END - CODE_BASE);
        let base = size.and_then(|n| self.code_space.alloc(n)).ok_or_else(|| {
            MemoryError::OutOfMemory {
                requested: len,
                available: self.code_space.largest(),
            }
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
    pub fn map_module_data(&mut self, context: K, len: u64) -> MemResult<u64> {
        let space = self.spaces.get_mut(&context).ok_or_else(|| {
            MemoryError::ContextNull(format!("context {context} has no address space"))
        })?;
        // A guard page after each module, so running off one faults.
        let window = MODULE_DATA_END - MODULE_DATA_BASE;
        let Some(size) = len
            .max(1)
            .checked_next_multiple_of(4096)
            .filter(|&n| n < window)
        else {
            return Err(MemoryError::OutOfMemory {
                requested: len,
                available: space.module_space.largest(),
            });
        };
        let base =
            space
                .module_space
                .alloc(size + 4096)
                .ok_or_else(|| MemoryError::OutOfMemory {
                    requested: len,
                    available: space.module_space.largest(),
                })?;
        let chunk = match self.driver.reserve(size, PageSize::Normal4K) {
            Ok(c) => c,
            Err(_) => {
                space.module_space.release(base, size + 4096);
                return Err(MemoryError::OutOfMemory {
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
            return Err(MemoryError::Internal(format!("mapping module data: {e}")));
        }
        space.modules.insert(base, (chunk, size));
        Ok(base)
    }

    /// Writes a launch's tiling words where the kernel can read them (one page per context,
    /// mapped on first use) and returns their device address.
    pub fn write_tiling(&mut self, context: K, words: &[u32]) -> MemResult<u64> {
        let page = match self.spaces.get(&context).map(|s| s.tiling_page) {
            Some(0) => {
                let va = self.map_module_data(context, 4096)?;
                self.spaces.get_mut(&context).expect("mapped").tiling_page = va;
                va
            }
            Some(va) => va,
            None => {
                return Err(MemoryError::ContextNull(format!(
                    "context {context} has no address space"
                )));
            }
        };
        self.write_virt(context, page, bytemuck::cast_slice(words))
            .map_err(|e| MemoryError::Internal(format!("writing tiling words: {e}")))?;
        Ok(page)
    }

    /// Unmaps and releases module data mapped at `base`.
    pub fn unmap_module_data(&mut self, context: K, base: u64) {
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
}
