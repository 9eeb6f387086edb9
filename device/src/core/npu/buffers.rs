//! The storage behind the local buffers: one zeroed block per buffer, 8-byte aligned so the
//! vector and cube units can view 32-byte aligned regions as `f32` / `u16` slices. Resetting
//! zeroes only the prefix that may have been written, so a core with a megabyte of buffers
//! still resets in the time its kernel touched.

use super::config::BufferSizes;
use super::layout::Buffer;

/// The five local buffers of one core.
pub(crate) struct LocalBuffers {
    mem: [Vec<u64>; 5],
    size: [usize; 5],
    /// Bytes from 0 up to here may be non-zero.
    dirty: [usize; 5],
}

impl LocalBuffers {
    pub fn new(sizes: &BufferSizes) -> LocalBuffers {
        let size = Buffer::ALL.map(|b| sizes.of(b) as usize);
        LocalBuffers {
            mem: size.map(|s| vec![0u64; s / 8]),
            size,
            dirty: [0; 5],
        }
    }

    pub fn size(&self, b: Buffer) -> usize {
        self.size[b.index()]
    }

    pub fn reset(&mut self) {
        for b in Buffer::ALL {
            let d = std::mem::take(&mut self.dirty[b.index()]);
            let words = d.div_ceil(8);
            self.mem[b.index()][..words].fill(0);
        }
    }

    pub fn bytes(&self, b: Buffer) -> &[u8] {
        bytemuck::cast_slice(&self.mem[b.index()])
    }

    /// The whole buffer, writable; marks all of it as possibly non-zero.
    pub fn bytes_mut(&mut self, b: Buffer) -> &mut [u8] {
        self.dirty[b.index()] = self.size[b.index()];
        bytemuck::cast_slice_mut(&mut self.mem[b.index()])
    }

    /// `len` bytes at `off`, writable. The caller has checked the range.
    pub fn range_mut(&mut self, b: Buffer, off: usize, len: usize) -> &mut [u8] {
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
        b.range_mut(Buffer::L1, 1000, 8).fill(7);
        b.bytes_mut(Buffer::Ub)[5] = 1;
        b.reset();
        assert!(b.bytes(Buffer::L1).iter().all(|&x| x == 0));
        assert!(b.bytes(Buffer::Ub).iter().all(|&x| x == 0));
        assert_eq!(b.size(Buffer::L0c), 128 << 10);
    }
}
