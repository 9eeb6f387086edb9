//! Device physical memory (HBM), backed sparsely by host memory.
//!
//! A simulated device may advertise tens of gigabytes; only the 4 KiB frames that were actually
//! written hold host memory. Frames live in a two-level table (2 MiB groups of 512 frames), so
//! finding a frame is two indexed loads: the hot path of every simulated load and store ends here.

use bytemuck::Pod;

use super::{DriverError, MemFault};

/// Size of one physical frame: the unit in which host memory backs device memory.
pub const FRAME_SIZE: u64 = 4096;
const FRAME_SHIFT: u32 = 12;
/// A group of frames is one second-level table: 512 frames, 2 MiB of device memory.
const GROUP_SHIFT: u32 = 21;
const FRAMES_PER_GROUP: usize = 1 << (GROUP_SHIFT - FRAME_SHIFT);
/// Largest device memory `PhysMem` models (16 TiB). The first-level table has one pointer per
/// 2 MiB of capacity, allocated zeroed (so the OS backs it lazily too): 64 MiB at this limit,
/// 256 KiB for a 64 GiB device.
pub const MAX_PHYS_CAPACITY: u64 = 1 << 44;

/// One frame of device memory.
pub type Frame = [u8; FRAME_SIZE as usize];
type Group = [Option<Box<Frame>>; FRAMES_PER_GROUP];

/// Sparse device physical memory: reads of never-written memory return zeros, and host memory
/// is spent only on frames that were written.
///
/// ```
/// use npusim_device::memory::PhysMem;
/// let mut hbm = PhysMem::new(64 << 30).unwrap(); // 64 GiB, costs nothing yet
/// hbm.write(0x1234, &[1, 2, 3]).unwrap();
/// let mut out = [0u8; 4];
/// hbm.read(0x1233, &mut out).unwrap();
/// assert_eq!(out, [0, 1, 2, 3]);
/// assert_eq!(hbm.backed_bytes(), 4096);
/// ```
pub struct PhysMem {
    capacity: u64,
    groups: Box<[Option<Box<Group>>]>,
    backed_frames: u64,
}

impl std::fmt::Debug for PhysMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhysMem")
            .field("capacity", &self.capacity)
            .field("backed_bytes", &self.backed_bytes())
            .finish()
    }
}

impl PhysMem {
    /// Device memory of `capacity` bytes, rounded down to whole frames. Nothing is backed yet.
    ///
    /// Fails with [`DriverError::InvalidCapacity`] above [`MAX_PHYS_CAPACITY`].
    pub fn new(capacity: u64) -> Result<Self, DriverError> {
        if capacity > MAX_PHYS_CAPACITY {
            return Err(DriverError::InvalidCapacity {
                capacity,
                max: MAX_PHYS_CAPACITY,
            });
        }
        let capacity = capacity & !(FRAME_SIZE - 1);
        let groups = capacity.div_ceil(1 << GROUP_SHIFT) as usize;
        Ok(Self {
            capacity,
            // `vec![None; n]` of `Option<Box<_>>` is a zeroed allocation: untouched groups cost
            // no resident host memory.
            groups: vec![None; groups].into_boxed_slice(),
            backed_frames: 0,
        })
    }

    /// Size of device memory in bytes (a multiple of [`FRAME_SIZE`]).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Host memory spent on backing frames, in bytes.
    pub fn backed_bytes(&self) -> u64 {
        self.backed_frames * FRAME_SIZE
    }

    /// The frame holding `pa`, if it was ever written (`None` reads as zeros).
    #[inline]
    pub fn frame(&self, pa: u64) -> Option<&Frame> {
        if pa >= self.capacity {
            return None;
        }
        let group = self.groups[(pa >> GROUP_SHIFT) as usize].as_deref()?;
        group[frame_index(pa)].as_deref()
    }

    /// The frame holding `pa`, backing it with zeros first if it was never written.
    #[inline]
    pub fn frame_mut(&mut self, pa: u64) -> Result<&mut Frame, MemFault> {
        if pa >= self.capacity {
            return Err(self.out_of_range(pa, 1));
        }
        let group = self.groups[(pa >> GROUP_SHIFT) as usize]
            .get_or_insert_with(|| Box::new([const { None }; FRAMES_PER_GROUP]));
        let slot = &mut group[frame_index(pa)];
        if slot.is_none() {
            self.backed_frames += 1;
        }
        Ok(slot.get_or_insert_with(zeroed_frame))
    }

    /// Copies `buf.len()` bytes at `pa` into `buf`.
    pub fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        self.check(pa, buf.len() as u64)?;
        let mut done = 0;
        for (addr, n) in frame_pieces(pa, buf.len() as u64) {
            let out = &mut buf[done..done + n];
            match self.frame(addr) {
                Some(frame) => out.copy_from_slice(&frame[in_frame(addr)..in_frame(addr) + n]),
                None => out.fill(0),
            }
            done += n;
        }
        Ok(())
    }

    /// Copies `data` to device memory at `pa`, backing the frames it touches. Zeros written to
    /// a never-written frame leave it unbacked (it reads as zeros already): loading a binary
    /// with a large `.bss`, or copying in a mostly empty buffer, costs no host memory for the
    /// zero pages.
    pub fn write(&mut self, pa: u64, data: &[u8]) -> Result<(), MemFault> {
        self.check(pa, data.len() as u64)?;
        let mut done = 0;
        for (addr, n) in frame_pieces(pa, data.len() as u64) {
            let piece = &data[done..done + n];
            if self.frame(addr).is_none() && piece.iter().all(|&b| b == 0) {
                done += n;
                continue;
            }
            let frame = self.frame_mut(addr)?;
            frame[in_frame(addr)..in_frame(addr) + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Sets `len` bytes at `pa` to `byte`. Filling never-written frames with zero leaves them
    /// unbacked: clearing a large buffer costs no host memory.
    pub fn fill(&mut self, pa: u64, len: u64, byte: u8) -> Result<(), MemFault> {
        self.check(pa, len)?;
        for (addr, n) in frame_pieces(pa, len) {
            if byte == 0 && self.frame(addr).is_none() {
                continue;
            }
            let frame = self.frame_mut(addr)?;
            frame[in_frame(addr)..in_frame(addr) + n].fill(byte);
        }
        Ok(())
    }

    /// Copies `len` bytes from `src` to `dst` with `memmove` semantics (overlap is allowed),
    /// a frame piece at a time. Unbacked source pieces are copied as zeros without backing
    /// destination frames that are unbacked too.
    pub fn copy(&mut self, src: u64, dst: u64, len: u64) -> Result<(), MemFault> {
        self.check(src, len)?;
        self.check(dst, len)?;
        if len == 0 || src == dst {
            return Ok(());
        }
        // Pieces are bounded by both the source and the destination frame and go through a
        // bounce buffer, so walking them back to front when dst > src makes overlap safe.
        let backwards = dst > src;
        let mut bounce = [0u8; FRAME_SIZE as usize];
        let mut remaining = len;
        while remaining > 0 {
            let (s, d, n) = if backwards {
                let (se, de) = (src + remaining, dst + remaining);
                let n = remaining.min(frame_head(se)).min(frame_head(de));
                (se - n, de - n, n)
            } else {
                let (s, d) = (src + len - remaining, dst + len - remaining);
                let n = remaining.min(frame_tail(s)).min(frame_tail(d));
                (s, d, n)
            };
            remaining -= n;
            let n = n as usize;
            match self.frame(s) {
                Some(frame) => bounce[..n].copy_from_slice(&frame[in_frame(s)..in_frame(s) + n]),
                None if self.frame(d).is_none() => continue,
                None => bounce[..n].fill(0),
            }
            let frame = self.frame_mut(d)?;
            frame[in_frame(d)..in_frame(d) + n].copy_from_slice(&bounce[..n]);
        }
        Ok(())
    }

    /// Returns the frames fully inside `[pa, pa + len)` to the host and zeroes the partial
    /// frames at the edges: the range reads as zeros afterwards. The driver calls this when a
    /// chunk is released, so the next owner never sees the previous owner's data.
    pub fn discard(&mut self, pa: u64, len: u64) -> Result<(), MemFault> {
        self.check(pa, len)?;
        for (addr, n) in frame_pieces(pa, len) {
            if n as u64 == FRAME_SIZE {
                if let Some(group) = self.groups[(addr >> GROUP_SHIFT) as usize].as_deref_mut()
                    && group[frame_index(addr)].take().is_some()
                {
                    self.backed_frames -= 1;
                }
            } else if self.frame(addr).is_some() {
                let frame = self.frame_mut(addr)?;
                frame[in_frame(addr)..in_frame(addr) + n].fill(0);
            }
        }
        Ok(())
    }

    /// Reads a plain-old-data value at `pa` (no alignment required).
    pub fn read_pod<T: Pod>(&self, pa: u64) -> Result<T, MemFault> {
        let mut value = T::zeroed();
        self.read(pa, bytemuck::bytes_of_mut(&mut value))?;
        Ok(value)
    }

    /// Writes a plain-old-data value at `pa` (no alignment required).
    pub fn write_pod<T: Pod>(&mut self, pa: u64, value: &T) -> Result<(), MemFault> {
        self.write(pa, bytemuck::bytes_of(value))
    }

    /// Checks that `[pa, pa + len)` lies inside device memory, without overflowing.
    #[inline]
    pub fn check(&self, pa: u64, len: u64) -> Result<(), MemFault> {
        match pa.checked_add(len) {
            Some(end) if end <= self.capacity => Ok(()),
            _ => Err(self.out_of_range(pa, len)),
        }
    }

    fn out_of_range(&self, pa: u64, len: u64) -> MemFault {
        MemFault::OutOfRange {
            pa,
            len,
            capacity: self.capacity,
        }
    }
}

#[inline]
fn frame_index(pa: u64) -> usize {
    ((pa >> FRAME_SHIFT) as usize) & (FRAMES_PER_GROUP - 1)
}

/// Bytes from `pa` to the end of its frame.
#[inline]
fn frame_tail(pa: u64) -> u64 {
    FRAME_SIZE - (pa & (FRAME_SIZE - 1))
}

/// Bytes from the start of the frame holding `end - 1` up to `end` (`end > 0`).
#[inline]
fn frame_head(end: u64) -> u64 {
    ((end - 1) & (FRAME_SIZE - 1)) + 1
}

#[inline]
fn in_frame(pa: u64) -> usize {
    (pa & (FRAME_SIZE - 1)) as usize
}

fn zeroed_frame() -> Box<Frame> {
    // A zeroed `Vec` comes from the allocator's zeroed path; going through a boxed slice avoids
    // building the 4 KiB array on the stack first.
    vec![0u8; FRAME_SIZE as usize]
        .into_boxed_slice()
        .try_into()
        .expect("the vector has exactly FRAME_SIZE bytes")
}

/// Splits `[pa, pa + len)` into `(address, length)` pieces that never cross a frame boundary.
/// The caller has checked that the range does not overflow.
pub(crate) fn frame_pieces(pa: u64, len: u64) -> impl Iterator<Item = (u64, usize)> {
    let end = pa + len;
    let mut at = pa;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let n = (end - at).min(FRAME_SIZE - (at & (FRAME_SIZE - 1)));
        let piece = (at, n as usize);
        at += n;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_across_frames_reads_back() {
        let mut m = PhysMem::new(1 << 24).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        m.write(4000, &data).unwrap();
        let mut out = vec![0u8; data.len()];
        m.read(4000, &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(m.backed_bytes(), 4 * FRAME_SIZE);
    }

    #[test]
    fn overlapping_copy_is_a_memmove() {
        let mut m = PhysMem::new(1 << 24).unwrap();
        let data: Vec<u8> = (0..9000u32).map(|i| (i % 251) as u8).collect();
        m.write(100, &data).unwrap();
        m.copy(100, 2100, 9000).unwrap();
        let mut out = vec![0u8; 9000];
        m.read(2100, &mut out).unwrap();
        assert_eq!(out, data);
        m.copy(2100, 50, 9000).unwrap();
        m.read(50, &mut out).unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn zero_fill_of_untouched_memory_backs_nothing() {
        let mut m = PhysMem::new(1 << 30).unwrap();
        m.fill(0, 1 << 30, 0).unwrap();
        assert_eq!(m.backed_bytes(), 0);
    }

    #[test]
    fn discard_returns_frames_and_reads_zero() {
        let mut m = PhysMem::new(1 << 24).unwrap();
        m.fill(0, 3 * FRAME_SIZE, 7).unwrap();
        m.discard(10, 2 * FRAME_SIZE).unwrap();
        assert_eq!(m.backed_bytes(), 2 * FRAME_SIZE);
        let mut out = vec![0u8; 3 * FRAME_SIZE as usize];
        m.read(0, &mut out).unwrap();
        assert!(out[..10].iter().all(|&b| b == 7));
        assert!(
            out[10..2 * FRAME_SIZE as usize + 10]
                .iter()
                .all(|&b| b == 0)
        );
        assert!(out[2 * FRAME_SIZE as usize + 10..].iter().all(|&b| b == 7));
    }

    #[test]
    fn out_of_range_access_is_an_error() {
        let mut m = PhysMem::new(1 << 20).unwrap();
        assert!(m.write(u64::MAX, &[1]).is_err());
        assert!(m.read(1 << 20, &mut [0]).is_err());
        assert!(m.fill(1, u64::MAX, 1).is_err());
        assert!(m.copy(0, u64::MAX - 1, 4).is_err());
        assert!(PhysMem::new(u64::MAX).is_err());
    }
}
