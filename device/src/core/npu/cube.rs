//! The cube unit's arithmetic: `C (+)= A × B` with A (`m × k`), B (`k × n`) in L0A and L0B and
//! C (`m × n`, f32) in L0C, in one of two layouts ([`CubeLayout`]):
//!
//! - **row-major**: each row starting on a 32-byte boundary (row pitch = row bytes rounded up
//!   to 32);
//! - **fractal** (Ascend's): with `K0 = 32 / element size` (16 for f16, 8 for f32), A is
//!   `⌈m/16⌉ × ⌈k/K0⌉` fractals of 16 rows × K0 elements, stored fractal row by fractal row
//!   ("zZ"); B is `⌈k/K0⌉ × ⌈n/16⌉` fractals in the same order, each holding its 16 columns of
//!   B as 32-byte rows of K0 elements ("zN": the fractal transposed); C is `⌈n/16⌉ × ⌈m/16⌉`
//!   fractals of 16 × 16 f32, stored fractal column by fractal column, rows inside ("NZ").
//!   Every fractal is 512 bytes (C's 1024).
//!
//! C starts at 0, at what L0C holds (accumulate), or at a bias row of `n` f32 in BT repeated
//! for every row (`C = bias + A × B`). Either way only the `m × n` elements are computed and
//! written (padding of a partial
//! fractal is neither read nor written). f16 inputs are widened exactly; products are exact in
//! f32 for f16 inputs, and every element accumulates its `k` products in order, one f32
//! rounding per addition — the same numbers in both layouts.

use super::buffers::{Staging, f32s, u16s};
use super::f16::f16_to_f32;
use super::isa::CubeLayout;
use super::layout::pitch;

/// Bytes of an A or B fractal (16 rows of 32 bytes).
pub(crate) const FRACTAL_BYTES: u64 = 512;
/// Bytes of a C fractal (16 × 16 f32).
pub(crate) const C_FRACTAL_BYTES: u64 = 1024;

/// Operands of one cube instruction, as buffer offsets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CubeOp {
    pub c: u32,
    pub a: u32,
    pub b: u32,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub accumulate: bool,
    pub f32_inputs: bool,
    pub layout: CubeLayout,
    /// C starts from this BT offset's `n` f32, the same for every row (instead of 0 or L0C).
    pub bias: Option<u32>,
}

/// A run of consecutive elements of a dense matrix and where it lives in a buffer.
#[derive(Clone, Copy, Debug)]
struct Segment {
    /// First element in the dense (row-major, no padding) matrix.
    dense: usize,
    /// Byte offset in the buffer.
    off: usize,
    /// Elements.
    len: usize,
}

impl CubeOp {
    pub fn elem(&self) -> u64 {
        if self.f32_inputs { 4 } else { 2 }
    }

    /// Bytes between rows of A, B and C (row-major layout).
    pub fn pitches(&self) -> (u64, u64, u64) {
        let e = self.elem();
        (
            pitch(self.k as u64 * e),
            pitch(self.n as u64 * e),
            pitch(self.n as u64 * 4),
        )
    }

    /// Elements along K in one fractal row (fractal layout).
    fn k0(&self) -> u64 {
        32 / self.elem()
    }

    /// Fractal counts along M, K and N.
    fn fractals(&self) -> (u64, u64, u64) {
        (
            (self.m as u64).div_ceil(16),
            (self.k as u64).div_ceil(self.k0()),
            (self.n as u64).div_ceil(16),
        )
    }

    /// The bytes each operand spans from its first byte: A, B, C.
    pub fn extents(&self) -> (u64, u64, u64) {
        let (m, n, k) = (self.m as u64, self.n as u64, self.k as u64);
        match self.layout {
            CubeLayout::RowMajor => {
                let (pa, pb, pc) = self.pitches();
                let e = self.elem();
                let span = |rows: u64, pitch: u64, row: u64| {
                    if rows == 0 || row == 0 {
                        0
                    } else {
                        (rows - 1) * pitch + row
                    }
                };
                (span(m, pa, k * e), span(k, pb, n * e), span(m, pc, n * 4))
            }
            CubeLayout::Fractal => {
                let (m1, k1, n1) = self.fractals();
                (
                    m1 * k1 * FRACTAL_BYTES,
                    k1 * n1 * FRACTAL_BYTES,
                    m1 * n1 * C_FRACTAL_BYTES,
                )
            }
        }
    }

    /// A's rows as segments of the dense `m × k` matrix.
    fn a_segments(&self, mut f: impl FnMut(Segment)) {
        let (m, k) = (self.m as usize, self.k as usize);
        match self.layout {
            CubeLayout::RowMajor => {
                let pa = self.pitches().0 as usize;
                for i in 0..m {
                    f(Segment {
                        dense: i * k,
                        off: self.a as usize + i * pa,
                        len: k,
                    });
                }
            }
            CubeLayout::Fractal => {
                let (_, k1, _) = self.fractals();
                let k0 = self.k0() as usize;
                for i in 0..m {
                    for j in 0..k1 as usize {
                        let fractal = (i / 16) * k1 as usize + j;
                        f(Segment {
                            dense: i * k + j * k0,
                            off: self.a as usize + fractal * FRACTAL_BYTES as usize + (i % 16) * 32,
                            len: k0.min(k - j * k0),
                        });
                    }
                }
            }
        }
    }

    /// B's storage as segments of the dense `k × n` matrix (row-major layout) or of its
    /// transpose, the dense `n × k` matrix (fractal layout).
    fn b_segments(&self, mut f: impl FnMut(Segment)) {
        let (n, k) = (self.n as usize, self.k as usize);
        match self.layout {
            CubeLayout::RowMajor => {
                let pb = self.pitches().1 as usize;
                for kk in 0..k {
                    f(Segment {
                        dense: kk * n,
                        off: self.b as usize + kk * pb,
                        len: n,
                    });
                }
            }
            CubeLayout::Fractal => {
                let (_, k1, n1) = self.fractals();
                let k0 = self.k0() as usize;
                for col in 0..n {
                    for j in 0..k1 as usize {
                        let fractal = j * n1 as usize + col / 16;
                        f(Segment {
                            dense: col * k + j * k0,
                            off: self.b as usize
                                + fractal * FRACTAL_BYTES as usize
                                + (col % 16) * 32,
                            len: k0.min(k - j * k0),
                        });
                    }
                }
            }
        }
    }

    /// C's rows as segments of the dense `m × n` matrix.
    fn c_segments(&self, mut f: impl FnMut(Segment)) {
        let (m, n) = (self.m as usize, self.n as usize);
        match self.layout {
            CubeLayout::RowMajor => {
                let pc = self.pitches().2 as usize;
                for i in 0..m {
                    f(Segment {
                        dense: i * n,
                        off: self.c as usize + i * pc,
                        len: n,
                    });
                }
            }
            CubeLayout::Fractal => {
                let (m1, _, n1) = self.fractals();
                for i in 0..m {
                    for l in 0..n1 as usize {
                        let fractal = l * m1 as usize + i / 16;
                        f(Segment {
                            dense: i * n + l * 16,
                            off: self.c as usize
                                + fractal * C_FRACTAL_BYTES as usize
                                + (i % 16) * 64,
                            len: 16.min(n - l * 16),
                        });
                    }
                }
            }
        }
    }
}

/// Scratch the cube keeps between instructions (widened operands).
#[derive(Default)]
pub(crate) struct CubeScratch {
    a: Vec<f32>,
    b: Vec<f32>,
    bt: Vec<f32>,
}

/// Widens the elements of `segments` (in `src`) into the dense `dst` of `len` elements.
fn widen(
    dst: &mut Vec<f32>,
    len: usize,
    src: &[u8],
    f32_in: bool,
    segments: impl FnOnce(&mut dyn FnMut(Segment)),
) {
    dst.clear();
    dst.resize(len, 0.0);
    segments(&mut |s: Segment| {
        let out = &mut dst[s.dense..s.dense + s.len];
        if f32_in {
            out.copy_from_slice(f32s(src, s.off, s.len));
        } else {
            for (o, &h) in out.iter_mut().zip(u16s(src, s.off, s.len)) {
                *o = f16_to_f32(h);
            }
        }
    });
}

/// Computes the new C tile, dense `m × n`, into `out`.
pub(crate) fn compute(
    op: &CubeOp,
    [l0a, l0b, l0c, bt]: [&[u8]; 4],
    scratch: &mut CubeScratch,
    out: &mut Staging,
) {
    let (m, n, k) = (op.m as usize, op.n as usize, op.k as usize);
    let f32_in = op.f32_inputs;
    widen(&mut scratch.a, m * k, l0a, f32_in, |f| op.a_segments(f));
    match op.layout {
        CubeLayout::RowMajor => widen(&mut scratch.b, k * n, l0b, f32_in, |f| op.b_segments(f)),
        CubeLayout::Fractal => {
            widen(&mut scratch.bt, n * k, l0b, f32_in, |f| op.b_segments(f));
            scratch.b.clear();
            scratch.b.resize(k * n, 0.0);
            for (col, bcol) in scratch.bt.chunks_exact(k.max(1)).take(n).enumerate() {
                for (kk, &v) in bcol.iter().enumerate() {
                    scratch.b[kk * n + col] = v;
                }
            }
        }
    }
    out.resize(m * n * 4);
    let c = out.f32s_mut();
    if let Some(off) = op.bias {
        let row = f32s(bt, off as usize, n);
        for c_row in c.chunks_exact_mut(n.max(1)) {
            c_row.copy_from_slice(row);
        }
    } else if op.accumulate {
        op.c_segments(|s| {
            c[s.dense..s.dense + s.len].copy_from_slice(f32s(l0c, s.off, s.len));
        });
    }
    if n == 0 {
        return;
    }
    for (i, row) in c.chunks_exact_mut(n).enumerate() {
        let arow = &scratch.a[i * k..(i + 1) * k];
        for (kk, &x) in arow.iter().enumerate() {
            let brow = &scratch.b[kk * n..(kk + 1) * n];
            for (acc, &y) in row.iter_mut().zip(brow) {
                *acc += x * y;
            }
        }
    }
}

/// Writes the dense `m × n` result `data` (f32 bytes) into L0C, `l0c` being the whole buffer.
pub(crate) fn store(op: &CubeOp, data: &[u8], l0c: &mut [u8]) {
    op.c_segments(|s| {
        let bytes = s.len * 4;
        l0c[s.off..s.off + bytes].copy_from_slice(&data[s.dense * 4..s.dense * 4 + bytes]);
    });
}
