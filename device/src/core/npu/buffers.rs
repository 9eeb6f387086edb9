//! The storage behind the local buffers: one zeroed block per buffer, 8-byte aligned so the
//! vector and cube units can view 32-byte aligned regions as `f32` / `u16` slices. The blocks
//! are allocated when a kernel first touches a buffer (a core that only runs scalar code never
//! pays for the megabyte), and resetting zeroes only the prefix that may have been written.

use super::config::BufferSizes;
use super::layout::Buffer;
use crate::abi;

const BUFFERS: usize = Buffer::ALL.len();

/// The local buffers of one core.
pub(crate) struct LocalBuffers {
    /// Empty until [`LocalBuffers::ensure`].
    mem: [Vec<u64>; BUFFERS],
    allocated: bool,
    size: [usize; BUFFERS],
    /// Bytes from 0 up to here may be non-zero.
    dirty: [usize; BUFFERS],
}

/// Zeros that unallocated buffers read as: one lazily mapped block as large as a buffer
/// window, never written (so its pages stay the kernel's shared zero page).
fn zeros(len: usize) -> &'static [u8] {
    static ZEROS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    let z = ZEROS.get_or_init(|| vec![0u64; abi::LOCAL_BUFFER_WINDOW as usize / 8]);
    &bytemuck::cast_slice(z)[..len]
}

impl LocalBuffers {
    pub fn new(sizes: &BufferSizes) -> LocalBuffers {
        LocalBuffers {
            mem: Default::default(),
            allocated: false,
            size: Buffer::ALL.map(|b| sizes.of(b) as usize),
            dirty: [0; BUFFERS],
        }
    }

    /// Allocates the buffers if this is their first use.
    #[inline]
    pub fn ensure(&mut self) {
        if !self.allocated {
            for b in Buffer::ALL {
                self.mem[b.index()] = vec![0u64; self.size[b.index()] / 8];
            }
            self.allocated = true;
        }
    }

    pub fn size(&self, b: Buffer) -> usize {
        self.size[b.index()]
    }

    pub fn reset(&mut self) {
        for b in Buffer::ALL {
            let d = std::mem::take(&mut self.dirty[b.index()]);
            let words = d.div_ceil(8).min(self.mem[b.index()].len());
            self.mem[b.index()][..words].fill(0);
        }
    }

    /// The whole buffer (zeros if it was never used).
    pub fn bytes(&self, b: Buffer) -> &[u8] {
        if self.allocated {
            bytemuck::cast_slice(&self.mem[b.index()])
        } else {
            zeros(self.size[b.index()])
        }
    }

    /// The whole buffer, writable; marks all of it as possibly non-zero.
    pub fn bytes_mut(&mut self, b: Buffer) -> &mut [u8] {
        self.ensure();
        self.dirty[b.index()] = self.size[b.index()];
        bytemuck::cast_slice_mut(&mut self.mem[b.index()])
    }

    /// `len` bytes at `off`, writable. The caller has checked the range.
    pub fn range_mut(&mut self, b: Buffer, off: usize, len: usize) -> &mut [u8] {
        self.ensure();
        let d = &mut self.dirty[b.index()];
        *d = (*d).max(off + len);
        &mut bytemuck::cast_slice_mut(&mut self.mem[b.index()])[off..off + len]
    }
}

/// An 8-byte aligned byte buffer for staged results (so they can be viewed as `f32`s).
#[derive(Default)]
pub(crate) struct Staging {
    words: Vec<u64>,
    len: usize,
}

impl Staging {
    pub fn resize(&mut self, len: usize) {
        self.words.clear();
        self.words.resize(len.div_ceil(8), 0);
        self.len = len;
    }

    /// Grows to `len` bytes keeping the current ones (the new ones are zero).
    pub fn grow(&mut self, len: usize) {
        self.words.resize(len.div_ceil(8).max(self.words.len()), 0);
        self.len = self.len.max(len);
    }

    /// Keeps the first `len` bytes (`len` ≤ the current length).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    pub fn f32s_mut(&mut self) -> &mut [f32] {
        let n = self.len / 4;
        &mut bytemuck::cast_slice_mut(&mut self.words)[..n]
    }

    pub fn u16s_mut(&mut self) -> &mut [u16] {
        let n = self.len / 2;
        &mut bytemuck::cast_slice_mut(&mut self.words)[..n]
    }
}

/// `len` bytes at `off` of `bytes` as `f32`s (`off` is 4-aligned in an 8-aligned buffer).
pub(crate) fn f32s(bytes: &[u8], off: usize, n: usize) -> &[f32] {
    bytemuck::cast_slice(&bytes[off..off + 4 * n])
}

/// `n` f16 bit patterns at `off`.
pub(crate) fn u16s(bytes: &[u8], off: usize, n: usize) -> &[u16] {
    bytemuck::cast_slice(&bytes[off..off + 2 * n])
}

// The units view buffers through bytemuck, which assumes the host's byte order is the
// device's (little-endian).
#[cfg(target_endian = "big")]
compile_error!("npusim's NPU model assumes a little-endian host");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;

    #[test]
    fn reset_zeroes_what_was_written() {
        let mut b = LocalBuffers::new(&BufferSizes::from_device(&DeviceConfig::default()));
        assert!(
            b.bytes(Buffer::L1).iter().all(|&x| x == 0),
            "unallocated reads as zeros"
        );
        b.range_mut(Buffer::L1, 1000, 8).fill(7);
        assert_eq!(b.bytes(Buffer::L1)[1000], 7);
        b.bytes_mut(Buffer::Ub)[5] = 1;
        b.reset();
        assert!(b.bytes(Buffer::L1).iter().all(|&x| x == 0));
        assert!(b.bytes(Buffer::Ub).iter().all(|&x| x == 0));
        assert_eq!(b.size(Buffer::L0c), 128 << 10);
    }
}
