//! The vector unit's arithmetic: what each [`VecOp`] computes from UB operands. f32 results
//! are IEEE single precision computed on the host (transcendentals in f64, rounded once), so
//! they are deterministic for a given host libm and exact for everything else. f16 results are
//! exact IEEE half (see [`dtype`](super::dtype)); integer arithmetic wraps.

use super::buffers::{Staging, f32s, u16s};
use super::dtype::{CmpMode, DType, RoundMode, cast, load_i4, round_float, store_i4};
use super::f16::{f16_to_f32, f32_to_f16};
use super::isa::VecOp;

/// Operands of one vector instruction, as UB offsets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VectorOp {
    pub op: VecOp,
    pub dst: u32,
    pub a: u32,
    pub b: u32,
    pub scalar: f32,
    pub n: u32,
    /// Element type (the destination's, for casts).
    pub dtype: DType,
    /// Source element type of a cast (`dtype` otherwise).
    pub src_dtype: DType,
    /// Round mode (casts), comparison (`vcmp`), scalar flag (`vsel`).
    pub mode: u8,
    /// UB offset of `vsel`'s mask.
    pub mask: u32,
    /// The raw scalar register.
    pub scalar_bits: u64,
    /// Fields of the mask-register instructions (`vred`, `vperm`).
    pub rep: super::masked::RepeatForm,
}

impl VectorOp {
    /// An instruction with every operand zero.
    pub fn new(op: VecOp, dtype: DType) -> VectorOp {
        VectorOp {
            op,
            dst: 0,
            a: 0,
            b: 0,
            scalar: 0.0,
            n: 0,
            dtype,
            src_dtype: dtype,
            mode: 0,
            mask: 0,
            scalar_bits: 0,
            rep: Default::default(),
        }
    }

    /// Bytes the destination receives.
    pub fn dst_bytes(&self) -> u64 {
        let n = self.n as u64;
        match self.op {
            VecOp::Sum | VecOp::RMax => self.dtype.size(),
            VecOp::CvtF32ToF16 => 2 * n,
            VecOp::CvtF16ToF32 => 4 * n,
            VecOp::Cmp => n.div_ceil(8),
            _ => self.dtype.bytes(n),
        }
    }

    /// Bytes per element of the sources (rounded up: an i4 source counts 1).
    pub fn src_elem(&self) -> u64 {
        match self.op {
            VecOp::CvtF16ToF32 => 2,
            VecOp::Cvt => self.src_dtype.size(),
            _ => self.dtype.size(),
        }
    }

    /// Bytes each source operand spans.
    pub fn src_bytes(&self) -> u64 {
        match self.op {
            VecOp::Cvt => self.src_dtype.bytes(self.n as u64),
            _ => self.n as u64 * self.src_elem(),
        }
    }
}

fn relu(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}

/// Computes `v` from `ub` into `out` (the bytes its destination receives). Only the
/// mask-register instructions can fault here (on data: a gather offset).
pub(crate) fn compute(v: &VectorOp, ub: &[u8], out: &mut Staging) -> Result<(), super::NpuFault> {
    if matches!(v.op, VecOp::Red | VecOp::Perm) {
        return super::masked::compute(v, ub, out);
    }
    compute_plain(v, ub, out);
    Ok(())
}

fn compute_plain(v: &VectorOp, ub: &[u8], out: &mut Staging) {
    if v.dtype != DType::F32 || matches!(v.op, VecOp::Cvt | VecOp::Cmp | VecOp::Sel) {
        return compute_typed(v, ub, out);
    }
    let n = v.n as usize;
    let (a, b) = (v.a as usize, v.b as usize);
    out.resize(v.dst_bytes() as usize);
    let s = v.scalar;
    macro_rules! map {
        ($f:expr) => {{
            let src = f32s(ub, a, n);
            for (o, &x) in out.f32s_mut().iter_mut().zip(src) {
                *o = $f(x);
            }
        }};
    }
    macro_rules! zip {
        ($f:expr) => {{
            let (x, y) = (f32s(ub, a, n), f32s(ub, b, n));
            for ((o, &p), &q) in out.f32s_mut().iter_mut().zip(x).zip(y) {
                *o = $f(p, q);
            }
        }};
    }
    match v.op {
        VecOp::Add => zip!(|p: f32, q: f32| p + q),
        VecOp::Sub => zip!(|p: f32, q: f32| p - q),
        VecOp::Mul => zip!(|p: f32, q: f32| p * q),
        VecOp::Div => zip!(|p: f32, q: f32| p / q),
        VecOp::Max => zip!(f32::max),
        VecOp::Min => zip!(f32::min),
        VecOp::Adds => map!(|x: f32| x + s),
        VecOp::Muls => map!(|x: f32| x * s),
        VecOp::Maxs => map!(|x: f32| x.max(s)),
        VecOp::Mins => map!(|x: f32| x.min(s)),
        VecOp::Dup => out.f32s_mut().fill(s),
        VecOp::LRelu => map!(|x: f32| if x > 0.0 { x } else { x * s }),
        VecOp::Exp => map!(|x: f32| (x as f64).exp() as f32),
        VecOp::Ln => map!(|x: f32| (x as f64).ln() as f32),
        VecOp::Sqrt => map!(f32::sqrt),
        VecOp::Relu => map!(relu),
        VecOp::Abs => map!(f32::abs),
        VecOp::Rec => map!(|x: f32| 1.0 / x),
        VecOp::Mov => map!(|x: f32| x),
        VecOp::Sum => {
            let total: f64 = f32s(ub, a, n).iter().map(|&x| x as f64).sum();
            out.f32s_mut()[0] = total as f32;
        }
        VecOp::RMax => {
            let m = f32s(ub, a, n)
                .iter()
                .fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            out.f32s_mut()[0] = m;
        }
        VecOp::CvtF32ToF16 => {
            for (o, &x) in out.u16s_mut().iter_mut().zip(f32s(ub, a, n)) {
                *o = f32_to_f16(x);
            }
        }
        VecOp::CvtF16ToF32 => {
            for (o, &h) in out.f32s_mut().iter_mut().zip(u16s(ub, a, n)) {
                *o = f16_to_f32(h);
            }
        }
        VecOp::Cvt | VecOp::Cmp | VecOp::Sel => unreachable!("typed instructions"),
        // Refused on f32 at issue (`VecOp::supports`).
        VecOp::And | VecOp::Or | VecOp::Not => unreachable!("integer-only instructions"),
        VecOp::Mask | VecOp::Red | VecOp::Perm => unreachable!("mask-register instructions"),
    }
}

/// f16 element-wise instructions and the common casts on slices: the same results as the
/// general path below (each operation in f32, then `f32_to_f16`, which rounds to nearest
/// even exactly like `round_float(.., Rint)`; `vcvt` to f16 saturating as `dtype::cast`
/// does), without its per-element dispatch. Returns
/// false when the instruction is not one of them.
fn compute_fast(v: &VectorOp, ub: &[u8], out: &mut Staging) -> bool {
    let n = v.n as usize;
    let (a, b) = (v.a as usize, v.b as usize);
    if v.op == VecOp::Cvt {
        let rne = matches!(
            RoundMode::ALL[v.mode as usize],
            RoundMode::None | RoundMode::Rint
        );
        match (v.src_dtype, v.dtype) {
            (DType::F16, DType::F32) => {
                out.resize(4 * n);
                for (o, &h) in out.f32s_mut().iter_mut().zip(u16s(ub, a, n)) {
                    *o = f16_to_f32(h);
                }
            }
            (DType::F32, DType::F16) if rne => {
                out.resize(2 * n);
                for (o, &x) in out.u16s_mut().iter_mut().zip(f32s(ub, a, n)) {
                    let h = f32_to_f16(x);
                    // A finite value past the range saturates at ±65504 (`dtype::cast`).
                    *o = if h & 0x7fff == 0x7c00 && x.is_finite() {
                        h - 1
                    } else {
                        h
                    };
                }
            }
            _ => return false,
        }
        return true;
    }
    if v.dtype != DType::F16 {
        return false;
    }
    let s = f16_to_f32(v.scalar_bits as u16);
    macro_rules! map {
        ($f:expr) => {{
            out.resize(2 * n);
            for (o, &x) in out.u16s_mut().iter_mut().zip(u16s(ub, a, n)) {
                *o = f32_to_f16($f(f16_to_f32(x)));
            }
        }};
    }
    macro_rules! zip {
        ($f:expr) => {{
            out.resize(2 * n);
            let (x, y) = (u16s(ub, a, n), u16s(ub, b, n));
            for ((o, &p), &q) in out.u16s_mut().iter_mut().zip(x).zip(y) {
                *o = f32_to_f16($f(f16_to_f32(p), f16_to_f32(q)));
            }
        }};
    }
    match v.op {
        VecOp::Add => zip!(|p: f32, q: f32| p + q),
        VecOp::Sub => zip!(|p: f32, q: f32| p - q),
        VecOp::Mul => zip!(|p: f32, q: f32| p * q),
        VecOp::Div => zip!(|p: f32, q: f32| p / q),
        VecOp::Max => zip!(f32::max),
        VecOp::Min => zip!(f32::min),
        VecOp::Adds => map!(|x: f32| x + s),
        VecOp::Muls => map!(|x: f32| x * s),
        VecOp::Maxs => map!(|x: f32| x.max(s)),
        VecOp::Mins => map!(|x: f32| x.min(s)),
        VecOp::LRelu => map!(|x: f32| if x > 0.0 { x } else { x * s }),
        VecOp::Relu => map!(relu),
        VecOp::Abs => map!(f32::abs),
        VecOp::Sqrt => map!(f32::sqrt),
        VecOp::Rec => map!(|x: f32| 1.0 / x),
        VecOp::Mov => map!(|x: f32| x),
        _ => return false,
    }
    true
}

/// The element-wise, reduction, cast, compare and select instructions on any element type.
fn compute_typed(v: &VectorOp, ub: &[u8], out: &mut Staging) {
    if !compute_fast(v, ub, out) {
        compute_general(v, ub, out);
    }
}

/// Every typed instruction, element by element through `f64` (the reference the fast path
/// is checked against).
fn compute_general(v: &VectorOp, ub: &[u8], out: &mut Staging) {
    let n = v.n as usize;
    let t = v.dtype;
    let es = t.size() as usize;
    out.resize(v.dst_bytes() as usize);
    let o = out.bytes_mut();
    let at = |base: u32, i: usize, t: DType| t.load(&ub[base as usize + i * t.size() as usize..]);
    let s = t.scalar(v.scalar_bits);
    match v.op {
        VecOp::Cvt => {
            let (src, mode) = (v.src_dtype, RoundMode::ALL[v.mode as usize]);
            let a = &ub[v.a as usize..];
            for i in 0..n {
                let x = if src == DType::I4 {
                    load_i4(a, i)
                } else {
                    at(v.a, i, src)
                };
                let r = cast(x, src, t, mode);
                if t == DType::I4 {
                    store_i4(r, o, i);
                } else {
                    t.store(r, &mut o[i * es..]);
                }
            }
            return;
        }
        VecOp::Cmp => {
            let mode = CmpMode::ALL[v.mode as usize];
            for i in 0..n {
                if mode.holds(at(v.a, i, t), at(v.b, i, t)) {
                    o[i / 8] |= 1 << (i % 8);
                }
            }
            return;
        }
        VecOp::Sel => {
            for i in 0..n {
                let pick = ub[v.mask as usize + i / 8] >> (i % 8) & 1 == 1;
                let x = if pick {
                    at(v.a, i, t)
                } else if v.mode & 1 == 1 {
                    s
                } else {
                    at(v.b, i, t)
                };
                t.store(x, &mut o[i * es..]);
            }
            return;
        }
        _ => {}
    }
    if t.is_float() {
        // Each operation in f32 (exact inputs, one rounding), then one rounding to the type:
        // the correctly rounded result for f16 (module docs of `dtype`).
        let fin = |x: f32| round_float(x as f64, t, RoundMode::Rint);
        let fin64 = |x: f64| round_float(x, t, RoundMode::Rint);
        let s32 = s as f32;
        let unary = |x: f32| -> f64 {
            match v.op {
                VecOp::Adds => fin(x + s32),
                VecOp::Muls => fin(x * s32),
                VecOp::Maxs => fin(x.max(s32)),
                VecOp::Mins => fin(x.min(s32)),
                VecOp::Dup => fin(s32),
                VecOp::LRelu => fin(if x > 0.0 { x } else { x * s32 }),
                VecOp::Exp => fin64((x as f64).exp()),
                VecOp::Ln => fin64((x as f64).ln()),
                VecOp::Sqrt => fin(x.sqrt()),
                VecOp::Relu => fin(relu(x)),
                VecOp::Abs => fin(x.abs()),
                VecOp::Rec => fin(1.0 / x),
                _ => fin(x),
            }
        };
        match v.op {
            VecOp::Sum => {
                let total: f64 = (0..n).map(|i| at(v.a, i, t)).sum();
                t.store(fin64(total), o);
            }
            VecOp::RMax => {
                let m = (0..n).fold(f32::NEG_INFINITY, |m, i| m.max(at(v.a, i, t) as f32));
                t.store(m as f64, o);
            }
            VecOp::Add | VecOp::Sub | VecOp::Mul | VecOp::Div | VecOp::Max | VecOp::Min => {
                for i in 0..n {
                    let (p, q) = (at(v.a, i, t) as f32, at(v.b, i, t) as f32);
                    let r = match v.op {
                        VecOp::Add => p + q,
                        VecOp::Sub => p - q,
                        VecOp::Mul => p * q,
                        VecOp::Div => p / q,
                        VecOp::Max => p.max(q),
                        _ => p.min(q),
                    };
                    t.store(fin(r), &mut o[i * es..]);
                }
            }
            _ => {
                for i in 0..n {
                    let x = if v.op == VecOp::Dup {
                        0.0
                    } else {
                        at(v.a, i, t) as f32
                    };
                    t.store(unary(x), &mut o[i * es..]);
                }
            }
        }
    } else {
        // Integers: exact in i64, then wrapped to the type's width.
        let wrap = |x: i64| match t {
            DType::I16 => x as i16 as f64,
            DType::I8 => x as i8 as f64,
            DType::U8 => x as u8 as f64,
            _ => x as i32 as f64,
        };
        let int = |base: u32, i: usize| at(base, i, t) as i64;
        let si = s as i64;
        match v.op {
            VecOp::Sum => {
                let total = (0..n).fold(0i64, |acc, i| acc.wrapping_add(int(v.a, i)));
                t.store(wrap(total), o);
            }
            VecOp::RMax => {
                let min = t.int_range().0;
                let m = (0..n).fold(min, |m, i| m.max(int(v.a, i)));
                t.store(m as f64, o);
            }
            _ => {
                for i in 0..n {
                    let p = if v.op == VecOp::Dup { 0 } else { int(v.a, i) };
                    let q = if v.op.class() == super::isa::VecClass::Binary {
                        int(v.b, i)
                    } else {
                        si
                    };
                    let r = match v.op {
                        VecOp::Add | VecOp::Adds => p + q,
                        VecOp::Sub => p - q,
                        VecOp::Mul | VecOp::Muls => p.wrapping_mul(q),
                        VecOp::Max | VecOp::Maxs => p.max(q),
                        VecOp::Min | VecOp::Mins => p.min(q),
                        VecOp::Dup => si,
                        VecOp::Relu => p.max(0),
                        VecOp::Abs => p.abs(),
                        VecOp::And => p & q,
                        VecOp::Or => p | q,
                        VecOp::Not => !p,
                        // Mov; float-only instructions never get here (checked at issue).
                        _ => p,
                    };
                    t.store(wrap(r), &mut o[i * es..]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_f16_fast_path_matches_the_general_path_bit_for_bit() {
        // Every f16 pattern against a fixed partner sequence, with a scalar.
        let n = 32768usize;
        let mut ub = vec![0u8; 8 * n];
        let mut x = 0x2545_f491u32;
        for i in 0..n {
            let a = (2 * i) as u16;
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            ub[2 * i..2 * i + 2].copy_from_slice(&a.to_le_bytes());
            ub[2 * n + 2 * i..2 * n + 2 * i + 2].copy_from_slice(&(x as u16).to_le_bytes());
        }
        for i in 0..n / 2 {
            let f = (i as f32 - 8000.0) * 0.37;
            ub[4 * n + 4 * i..4 * n + 4 * i + 4].copy_from_slice(&f.to_le_bytes());
        }
        let ops = [
            VecOp::Add,
            VecOp::Sub,
            VecOp::Mul,
            VecOp::Div,
            VecOp::Max,
            VecOp::Min,
            VecOp::Adds,
            VecOp::Muls,
            VecOp::Maxs,
            VecOp::Mins,
            VecOp::LRelu,
            VecOp::Relu,
            VecOp::Abs,
            VecOp::Sqrt,
            VecOp::Rec,
            VecOp::Mov,
            VecOp::Cvt,
        ];
        for op in ops {
            for (src, dst) in [
                (DType::F16, DType::F16),
                (DType::F16, DType::F32),
                (DType::F32, DType::F16),
            ] {
                if (op == VecOp::Cvt) == (src == dst) {
                    continue;
                }
                let v = VectorOp {
                    op,
                    dst: 0,
                    a: if src == DType::F32 { 4 * n as u32 } else { 0 },
                    b: 2 * n as u32,
                    scalar: 0.0,
                    n: (n / 2) as u32,
                    dtype: dst,
                    src_dtype: src,
                    mode: RoundMode::Rint as u8,
                    mask: 0,
                    scalar_bits: 0xb555,
                    rep: Default::default(),
                };
                let (mut fast, mut general) = (Staging::default(), Staging::default());
                assert!(compute_fast(&v, &ub, &mut fast), "{}", op.name());
                compute_general(&v, &ub, &mut general);
                // Equal values; NaNs only as NaNs (their payloads are not specified).
                let es = dst.size() as usize;
                let (f, g) = (fast.bytes(), general.bytes());
                assert_eq!(f.len(), g.len());
                for i in 0..f.len() / es {
                    let (x, y) = (dst.load(&f[i * es..]), dst.load(&g[i * es..]));
                    let bits = f[i * es..(i + 1) * es] == g[i * es..(i + 1) * es];
                    assert!(
                        bits || (x.is_nan() && y.is_nan()),
                        "{} {src} -> {dst} [{i}]: {x} vs {y}",
                        op.name()
                    );
                }
            }
        }
    }
}
