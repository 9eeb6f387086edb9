//! Accesses by address: checked against live blocks (the runtime's) or walked through the TLB
//! (the core's).

use super::*;

impl<K: ContextKey> DeviceMemory<K> {
    /// Checks, for an access by queued work, that `[addr, addr+len)` lies inside one block of
    /// `context` that is live or still reserved behind a pending free.
    pub fn check(&self, addr: u64, len: u64, context: K) -> Result<BlockInfo<K>, AccessFault<K>> {
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
    pub fn read(&mut self, addr: u64, buf: &mut [u8], context: K) -> Result<(), AccessFault<K>> {
        self.check(addr, buf.len() as u64, context)?;
        self.read_virt(context, addr, buf)
            .map_err(|_| AccessFault::Unmapped { addr })
    }

    /// Writes `data` at `addr` of a live block of `context`.
    pub fn write(&mut self, addr: u64, data: &[u8], context: K) -> Result<(), AccessFault<K>> {
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
        context: K,
    ) -> Result<(), AccessFault<K>> {
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
    pub fn read_virt(&mut self, context: K, addr: u64, buf: &mut [u8]) -> Result<(), MemFault> {
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
    pub fn translate_virt(&mut self, context: K, addr: u64, len: u64) -> Result<(), MemFault> {
        let Some(space) = self.spaces.get_mut(&context) else {
            return Err(MemFault::PageFault { va: addr });
        };
        space.extents(&mut self.driver, addr, len, |_, _, _, _| Ok(()))
    }

    /// Writes through `context`'s page table; faults (writing nothing more) on an unmapped page.
    pub fn write_virt(&mut self, context: K, addr: u64, data: &[u8]) -> Result<(), MemFault> {
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
