//! The vector unit's arithmetic: what each [`VecOp`] computes from UB operands. Results are
//! IEEE single precision computed on the host (transcendentals in f64, rounded once), so they
//! are deterministic for a given host libm and exact for everything else.

use super::buffers::{Staging, f32s, u16s};
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
}

fn relu(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}

/// Computes `v` from `ub` into `out` (the bytes its destination receives).
pub(crate) fn compute(v: &VectorOp, ub: &[u8], out: &mut Staging) {
    let n = v.n as usize;
    let (a, b) = (v.a as usize, v.b as usize);
    out.resize(v.op.dst_bytes(n as u64) as usize);
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
    }
}
