//! The cube unit's arithmetic: `C (+)= A × B` with A (`m × k`), B (`k × n`) and C (`m × n`,
//! f32) row-major in L0A, L0B and L0C, each row starting on a 32-byte boundary (row pitch =
//! row bytes rounded up to 32). f16 inputs are widened exactly; products are exact in f32 for
//! f16 inputs, and every element accumulates its `k` products in order, one f32 rounding per
//! addition.

use super::buffers::{Staging, f32s, u16s};
use super::f16::f16_to_f32;
use super::layout::pitch;

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
}

impl CubeOp {
    pub fn elem(&self) -> u64 {
        if self.f32_inputs { 4 } else { 2 }
    }
    /// Bytes between rows of A, B and C.
    pub fn pitches(&self) -> (u64, u64, u64) {
        let e = self.elem();
        (
            pitch(self.k as u64 * e),
            pitch(self.n as u64 * e),
            pitch(self.n as u64 * 4),
        )
    }
}

/// Scratch the cube keeps between instructions (widened operands).
#[derive(Default)]
pub(crate) struct CubeScratch {
    a: Vec<f32>,
    b: Vec<f32>,
}

/// Widens `rows` rows of `cols` elements at `off` (row pitch `pitch` bytes) into `dst`.
fn widen(
    dst: &mut Vec<f32>,
    src: &[u8],
    off: usize,
    rows: usize,
    cols: usize,
    pitch: usize,
    f32_in: bool,
) {
    dst.clear();
    dst.reserve(rows * cols);
    for r in 0..rows {
        let o = off + r * pitch;
        if f32_in {
            dst.extend_from_slice(f32s(src, o, cols));
        } else {
            dst.extend(u16s(src, o, cols).iter().map(|&h| f16_to_f32(h)));
        }
    }
}

/// Computes the new C tile, dense `m × n`, into `out`.
pub(crate) fn compute(
    op: &CubeOp,
    l0a: &[u8],
    l0b: &[u8],
    l0c: &[u8],
    scratch: &mut CubeScratch,
    out: &mut Staging,
) {
    let (m, n, k) = (op.m as usize, op.n as usize, op.k as usize);
    let (pa, pb, pc) = op.pitches();
    widen(
        &mut scratch.a,
        l0a,
        op.a as usize,
        m,
        k,
        pa as usize,
        op.f32_inputs,
    );
    widen(
        &mut scratch.b,
        l0b,
        op.b as usize,
        k,
        n,
        pb as usize,
        op.f32_inputs,
    );
    out.resize(m * n * 4);
    let c = out.f32s_mut();
    if op.accumulate {
        for i in 0..m {
            c[i * n..(i + 1) * n].copy_from_slice(f32s(l0c, op.c as usize + i * pc as usize, n));
        }
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
