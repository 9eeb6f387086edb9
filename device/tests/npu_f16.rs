//! The vector unit's typed instructions: f16 arithmetic bit-exact against the `half` crate's
//! IEEE binary16, casts with every Ascend C rounding mode against an independent neighbour
//! search, integer arithmetic, compare / select, and f16 running at twice the f32 rate.

mod npu_support;

use half::f16;
use npu_support::*;
use npusim_device::abi;
use npusim_device::core::Trap;
use npusim_device::core::npu::isa::{CopyDir, VecOp, encode};
use npusim_device::core::npu::{
    CmpMode, DType, NpuFault, Pipe, RoundMode, VECTOR_STARTUP_CYCLES, bf16_to_f32, f16_to_f32,
    f32_to_bf16_rounded, f32_to_f16_rounded,
};

const GM: u64 = abi::HEAP_BASE;
const UB: u64 = abi::UB_BASE;

fn h(x: u16) -> f16 {
    f16::from_bits(x)
}

/// Runs `op` on typed operands placed in UB (a at 0, b at 0x10000, result at 0x20000) and
/// returns `out_bytes` of the result.
fn run_vec(op: VecOp, a: &[u8], b: &[u8], s: u64, rs3: u64, out_bytes: usize) -> Vec<u8> {
    let mut m = Machine::new();
    m.gm.write_bytes(GM, a);
    m.gm.write_bytes(GM + 0x10000, b);
    let mut asm = Asm::new();
    if !a.is_empty() {
        asm.copy(CopyDir::GmToUb, UB, GM, a.len() as u32);
    }
    if !b.is_empty() {
        asm.copy(CopyDir::GmToUb, UB + 0x10000, GM + 0x10000, b.len() as u32);
    }
    let b_op = if b.is_empty() { s } else { UB + 0x10000 };
    asm.sync(Pipe::Mte2, Pipe::V)
        .vec(op, UB + 0x20000, UB, b_op, rs3)
        .sync(Pipe::V, Pipe::Mte3)
        .copy(
            CopyDir::UbToGm,
            GM + 0x20000,
            UB + 0x20000,
            out_bytes as u32,
        );
    m.run(&asm.words).unwrap();
    let o = 0x20000usize;
    m.gm.mem[o..o + out_bytes].to_vec()
}

fn u16_bytes(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_u16(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn same_f16(got: u16, want: f16) -> bool {
    got == want.to_bits() || (h(got).is_nan() && want.is_nan())
}

#[test]
fn f16_add_sub_mul_div_are_bit_exact_ieee_half_for_every_pattern_against_sampled_partners() {
    // Every f16 bit pattern as `a`, against partners from a fixed pseudo-random sequence that
    // covers subnormals, normals, infinities and NaNs.
    let mut rng = Rng(0x5eed);
    let chunk = 16384usize;
    for op in [VecOp::Add, VecOp::Sub, VecOp::Mul, VecOp::Div, VecOp::Max] {
        for start in (0..65536usize).step_by(chunk) {
            let a: Vec<u16> = (start..start + chunk).map(|x| x as u16).collect();
            let b: Vec<u16> = (0..chunk).map(|_| rng.next() as u16).collect();
            let out = run_vec(
                op,
                &u16_bytes(&a),
                &u16_bytes(&b),
                0,
                encode::count(chunk as u32, DType::F16),
                2 * chunk,
            );
            for (i, &got) in bytes_u16(&out).iter().enumerate() {
                let (x, y) = (h(a[i]).to_f64(), h(b[i]).to_f64());
                let want = f16::from_f64(match op {
                    VecOp::Add => x + y,
                    VecOp::Sub => x - y,
                    VecOp::Mul => x * y,
                    VecOp::Div => x / y,
                    _ if x.is_nan() => y,
                    _ if y.is_nan() => x,
                    _ => x.max(y),
                });
                assert!(
                    same_f16(got, want),
                    "{} {:#06x} {:#06x}: got {got:#06x}, want {:#06x}",
                    op.name(),
                    a[i],
                    b[i],
                    want.to_bits()
                );
            }
        }
    }
}

#[test]
fn f16_scalar_unary_and_reduction_instructions_round_once_to_half() {
    let n = 4096usize;
    let mut rng = Rng(7);
    let a: Vec<u16> = (0..n)
        .map(|_| f16::from_f32(rng.f32(-8.0, 8.0)).to_bits())
        .collect();
    let s = f16::from_f32(0.3).to_bits() as u64;
    let count = encode::count(n as u32, DType::F16);
    type Reference = fn(f64, f64) -> f64;
    let cases: [(VecOp, Reference); 8] = [
        (VecOp::Adds, |x, s| x + s),
        (VecOp::Muls, |x, s| x * s),
        (VecOp::Maxs, |x, s| x.max(s)),
        (VecOp::LRelu, |x, s| if x > 0.0 { x } else { x * s }),
        (VecOp::Abs, |x, _| x.abs()),
        (VecOp::Relu, |x, _| x.max(0.0)),
        (VecOp::Exp, |x, _| x.exp()),
        (VecOp::Sqrt, |x, _| x.sqrt()),
    ];
    for (op, f) in cases {
        let out = bytes_u16(&run_vec(op, &u16_bytes(&a), &[], s, count, 2 * n));
        for (i, &got) in out.iter().enumerate() {
            let want = f16::from_f64(f(h(a[i]).to_f64(), h(s as u16).to_f64()));
            assert!(same_f16(got, want), "{} of {:#06x}", op.name(), a[i]);
        }
    }
    // ReduceSum: exact sum, rounded once; ReduceMax exact.
    let sum = bytes_u16(&run_vec(VecOp::Sum, &u16_bytes(&a), &[], 0, count, 2))[0];
    let exact: f64 = a.iter().map(|&x| h(x).to_f64()).sum();
    assert_eq!(sum, f16::from_f64(exact).to_bits());
    let max = bytes_u16(&run_vec(VecOp::RMax, &u16_bytes(&a), &[], 0, count, 2))[0];
    let want = a.iter().map(|&x| h(x)).fold(f16::NEG_INFINITY, f16::max);
    assert_eq!(max, want.to_bits());
}

/// The f16 values just below and just above `x` (equal when `x` is an f16), by stepping
/// through f16 bit patterns from the round-to-nearest result.
fn neighbours(x: f64) -> (f64, f64) {
    let near = f16::from_f64(x);
    let step = |v: f16, up: bool| -> f16 {
        let b = v.to_bits();
        let positive = b & 0x8000 == 0;
        let bits = match (positive, up, b & 0x7fff == 0) {
            (_, true, true) => 0x0001,
            (_, false, true) => 0x8001,
            (true, true, _) | (false, false, _) => b + 1,
            _ => b - 1,
        };
        f16::from_bits(bits)
    };
    let n = near.to_f64();
    if n == x {
        (n, n)
    } else if n < x {
        (n, step(near, true).to_f64())
    } else {
        (step(near, false).to_f64(), n)
    }
}

fn reference_round(x: f32, mode: RoundMode) -> f64 {
    let x = x as f64;
    let (lo, hi) = neighbours(x);
    if lo == hi {
        return lo;
    }
    // Only finite inputs inside the f16 range come here: lo and hi are finite halves.
    let toward_zero = if x > 0.0 { lo } else { hi };
    let away = if x > 0.0 { hi } else { lo };
    let (dl, dh) = (x - lo, hi - x);
    match mode {
        RoundMode::None | RoundMode::Rint => f16::from_f64(x).to_f64(),
        RoundMode::Floor => lo,
        RoundMode::Ceil => hi,
        RoundMode::Round if dl == dh => away,
        RoundMode::Round => {
            if dl < dh {
                lo
            } else {
                hi
            }
        }
        RoundMode::Trunc => toward_zero,
        RoundMode::Odd => {
            if f16::from_f64(toward_zero).to_bits() & 1 == 1 {
                toward_zero
            } else {
                away
            }
        }
    }
}

#[test]
fn f32_to_f16_casts_follow_every_ascend_round_mode() {
    // Every f16 exponent and sign with assorted low bits, the midpoints between neighbouring
    // halves, and values past the largest half.
    let mut xs: Vec<f32> = Vec::new();
    let mut rng = Rng(99);
    for hi in 0..=0xffffu32 {
        let x = f32::from_bits(hi << 16 | (rng.next() as u32 & 0xffff));
        if x.is_finite() && x.abs() < 65504.0 {
            xs.push(x);
        }
    }
    for b in (0..0x7bffu16).step_by(7) {
        let mid = ((f16_to_f32(b) as f64 + f16_to_f32(b + 1) as f64) / 2.0) as f32;
        xs.extend([mid, -mid]);
    }
    for mode in RoundMode::ALL {
        for &x in &xs {
            let got = f16_to_f32(f32_to_f16_rounded(x, mode)) as f64;
            let want = reference_round(x, mode);
            assert_eq!(got, want, "{mode:?} {x:e} ({:#010x})", x.to_bits());
        }
    }
    // Overflow by mode.
    let big = 1e6f32;
    let ov = |x, m| f16_to_f32(f32_to_f16_rounded(x, m));
    assert_eq!(ov(big, RoundMode::Rint), f32::INFINITY);
    assert_eq!(ov(big, RoundMode::Trunc), 65504.0);
    assert_eq!(ov(big, RoundMode::Floor), 65504.0);
    assert_eq!(ov(-big, RoundMode::Floor), f32::NEG_INFINITY);
    assert_eq!(ov(-big, RoundMode::Ceil), -65504.0);
    assert_eq!(ov(big, RoundMode::Odd), 65504.0);
}

#[test]
fn the_cast_instruction_converts_between_every_pair_of_types_with_its_round_mode() {
    let xs: Vec<f32> = vec![
        2.5,
        -2.5,
        3.5,
        0.1,
        -0.7,
        1e10,
        -1e10,
        70000.0,
        1.0 + 1.0 / 2048.0,
    ];
    let n = xs.len() as u32;
    let src = f32_bytes(&xs);
    let cast = |dst: DType, mode: RoundMode| {
        let rs3 = encode::cast(n, dst, DType::F32, mode);
        run_vec(
            VecOp::Cvt,
            &src,
            &[],
            0,
            rs3,
            n as usize * dst.size() as usize,
        )
    };
    let i32s = |b: Vec<u8>| -> Vec<i32> {
        b.chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let max = i32::MAX;
    assert_eq!(
        i32s(cast(DType::I32, RoundMode::Rint)),
        [2, -2, 4, 0, -1, max, i32::MIN, 70000, 1]
    );
    assert_eq!(
        i32s(cast(DType::I32, RoundMode::Round)),
        [3, -3, 4, 0, -1, max, i32::MIN, 70000, 1]
    );
    assert_eq!(
        i32s(cast(DType::I32, RoundMode::Floor)),
        [2, -3, 3, 0, -1, max, i32::MIN, 70000, 1]
    );
    assert_eq!(
        i32s(cast(DType::I32, RoundMode::Ceil)),
        [3, -2, 4, 1, 0, max, i32::MIN, 70000, 2]
    );
    // To f16 a finite value past the range saturates at ±65504 in every mode (Ascend C's
    // Cast: float -> half overflow saturates); the others round as f32_to_f16_rounded does.
    for mode in RoundMode::ALL {
        let halves = bytes_u16(&cast(DType::F16, mode));
        for (i, &x) in xs.iter().enumerate() {
            let want = if x.abs() > 65504.0 {
                if x > 0.0 { 0x7bff } else { 0xfbff }
            } else {
                f32_to_f16_rounded(x, mode)
            };
            assert_eq!(halves[i], want, "{x} {mode:?}");
        }
    }
    let i16s: Vec<i16> = bytes_u16(&cast(DType::I16, RoundMode::Trunc))
        .iter()
        .map(|&v| v as i16)
        .collect();
    assert_eq!(i16s, [2, -2, 3, 0, 0, 32767, -32768, 32767, 1]);
    // Back: i16 -> f16 -> f32 is exact for these.
    let ints: Vec<u16> = [-3i16, 0, 2047, 2049, 32767]
        .iter()
        .map(|&v| v as u16)
        .collect();
    let rs3 = encode::cast(5, DType::F16, DType::I16, RoundMode::Rint);
    let f = bytes_u16(&run_vec(VecOp::Cvt, &u16_bytes(&ints), &[], 0, rs3, 10));
    let back: Vec<f32> = f.iter().map(|&b| f16_to_f32(b)).collect();
    assert_eq!(back, [-3.0, 0.0, 2047.0, 2048.0, 32768.0]);
}

#[test]
fn integer_arithmetic_wraps_and_compare_select_pick_per_element() {
    let a: Vec<i16> = vec![1, -2, 32767, -32768, 100, 0, 7, -7];
    let b: Vec<i16> = vec![5, 3, 1, -1, -100, 0, 7, 8];
    let ab: Vec<u8> = a.iter().flat_map(|x| x.to_le_bytes()).collect();
    let bb: Vec<u8> = b.iter().flat_map(|x| x.to_le_bytes()).collect();
    let n = a.len() as u32;
    let i16s = |v: Vec<u8>| -> Vec<i16> { bytes_u16(&v).iter().map(|&x| x as i16).collect() };
    let add = i16s(run_vec(
        VecOp::Add,
        &ab,
        &bb,
        0,
        encode::count(n, DType::I16),
        16,
    ));
    assert_eq!(add, [6, 1, -32768, 32767, 0, 0, 14, 1]);
    let mul = i16s(run_vec(
        VecOp::Mul,
        &ab,
        &bb,
        0,
        encode::count(n, DType::I16),
        16,
    ));
    let want: Vec<i16> = a.iter().zip(&b).map(|(x, y)| x.wrapping_mul(*y)).collect();
    assert_eq!(mul, want);
    let mx = i16s(run_vec(
        VecOp::Maxs,
        &ab,
        &[],
        3,
        encode::count(n, DType::I16),
        16,
    ));
    assert_eq!(mx, [3, 3, 32767, 3, 100, 3, 7, 3]);
    let sum = i16s(run_vec(
        VecOp::Sum,
        &ab,
        &[],
        0,
        encode::count(n, DType::I16),
        2,
    ));
    assert_eq!(sum[0], a.iter().fold(0i16, |s, x| s.wrapping_add(*x)));

    // i32 duplicate and relu.
    let dup = run_vec(
        VecOp::Dup,
        &[],
        &[],
        (-9i32) as u32 as u64,
        encode::count(3, DType::I32),
        12,
    );
    assert_eq!(dup, [(-9i32).to_le_bytes(); 3].concat());

    // Compare a < b into a bit mask, then select a where it holds, b elsewhere.
    let mask = run_vec(
        VecOp::Cmp,
        &ab,
        &bb,
        0,
        encode::compare(n, DType::I16, CmpMode::Lt),
        1,
    );
    let lt: u8 = a
        .iter()
        .zip(&b)
        .enumerate()
        .map(|(i, (x, y))| ((x < y) as u8) << i)
        .sum();
    assert_eq!(mask[0], lt);
    let mut m = Machine::new();
    m.gm.write_bytes(GM, &ab);
    m.gm.write_bytes(GM + 0x100, &bb);
    m.gm.write_bytes(GM + 0x200, &mask);
    let mut asm = Asm::new();
    asm.copy(CopyDir::GmToUb, UB, GM, 16)
        .copy(CopyDir::GmToUb, UB + 0x100, GM + 0x100, 16)
        .copy(CopyDir::GmToUb, UB + 0x200, GM + 0x200, 1)
        .sync(Pipe::Mte2, Pipe::V)
        .vec(
            VecOp::Sel,
            UB + 0x300,
            UB,
            UB + 0x100,
            encode::select(n, DType::I16, 0x200, false),
        )
        .vec(
            VecOp::Sel,
            UB + 0x400,
            UB,
            0xffff,
            encode::select(n, DType::I16, 0x200, true),
        )
        .sync(Pipe::V, Pipe::Mte3)
        .copy(CopyDir::UbToGm, GM + 0x300, UB + 0x300, 16)
        .copy(CopyDir::UbToGm, GM + 0x400, UB + 0x400, 16);
    m.run(&asm.words).unwrap();
    let min = i16s(m.gm.mem[0x300..0x310].to_vec());
    let want: Vec<i16> = a.iter().zip(&b).map(|(x, y)| *x.min(y)).collect();
    assert_eq!(min, want);
    let picked = i16s(m.gm.mem[0x400..0x410].to_vec());
    let want: Vec<i16> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| if x < y { *x } else { -1 })
        .collect();
    assert_eq!(picked, want);
}

#[test]
fn f16_runs_at_twice_the_f32_element_rate() {
    let cost = |t: DType| {
        let mut m = Machine::new();
        let mut asm = Asm::new();
        asm.vec(
            VecOp::Add,
            UB + 0x20000,
            UB,
            UB + 0x10000,
            encode::count(8192, t),
        )
        .barrier(6);
        let stats = m.run(&asm.words).unwrap();
        stats.pipe_busy.vector
    };
    let start = VECTOR_STARTUP_CYCLES as u64;
    assert_eq!(cost(DType::F32), start + 8192 / 128);
    assert_eq!(cost(DType::F16), start + 8192 / 256);
    assert_eq!(cost(DType::I16), start + 8192 / 256);
    assert_eq!(cost(DType::I32), start + 8192 / 128);
}

#[test]
fn bitwise_and_or_not_act_on_the_bits_of_integers_and_refuse_floats() {
    let a: Vec<i16> = vec![0x0f0f, -1, 0, 0x7fff, -32768, 0x1234, 5, -6];
    let b: Vec<i16> = vec![0x00ff, 0x5555, -1, 0x0001, -1, 0x4321, 3, 3];
    let ab: Vec<u8> = a.iter().flat_map(|x| x.to_le_bytes()).collect();
    let bb: Vec<u8> = b.iter().flat_map(|x| x.to_le_bytes()).collect();
    let rs3 = encode::count(a.len() as u32, DType::I16);
    let i16s = |v: Vec<u8>| -> Vec<i16> { bytes_u16(&v).iter().map(|&x| x as i16).collect() };
    let want =
        |f: fn(i16, i16) -> i16| -> Vec<i16> { a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect() };
    assert_eq!(
        i16s(run_vec(VecOp::And, &ab, &bb, 0, rs3, 16)),
        want(|x, y| x & y)
    );
    assert_eq!(
        i16s(run_vec(VecOp::Or, &ab, &bb, 0, rs3, 16)),
        want(|x, y| x | y)
    );
    assert_eq!(
        i16s(run_vec(VecOp::Not, &ab, &[], 0, rs3, 16)),
        want(|x, _| !x)
    );
    // 32-bit words.
    let a32: Vec<i32> = vec![0x0f0f_0f0f, -1, i32::MIN, 0x1234_5678];
    let b32: Vec<i32> = vec![0x00ff_00ff, 0x5555_5555, -1, 0x0f0f_0f0f];
    let a32b: Vec<u8> = a32.iter().flat_map(|x| x.to_le_bytes()).collect();
    let b32b: Vec<u8> = b32.iter().flat_map(|x| x.to_le_bytes()).collect();
    let i32s = |v: Vec<u8>| -> Vec<i32> {
        v.chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let rs3 = encode::count(4, DType::I32);
    let and: Vec<i32> = a32.iter().zip(&b32).map(|(x, y)| x & y).collect();
    assert_eq!(i32s(run_vec(VecOp::And, &a32b, &b32b, 0, rs3, 16)), and);
    let not: Vec<i32> = a32.iter().map(|x| !x).collect();
    assert_eq!(i32s(run_vec(VecOp::Not, &a32b, &[], 0, rs3, 16)), not);
    // A float type is refused at issue, naming the instruction.
    let mut m = Machine::new();
    let mut asm = Asm::new();
    asm.vec(VecOp::Or, UB, UB, UB, encode::count(8, DType::F16));
    match m.run(&asm.words) {
        Err(Trap::Npu { fault, .. }) => {
            assert_eq!(fault.to_string(), "vor is not defined on f16 elements")
        }
        other => panic!("expected a fault, got {other:?}"),
    }
}

/// The fault one vector instruction `op` over UB with count word `rs3` stops at.
fn vector_fault(op: VecOp, rs3: u64) -> NpuFault {
    let mut m = Machine::new();
    let mut asm = Asm::new();
    asm.vec(op, UB, UB, UB, rs3);
    match m.run(&asm.words) {
        Err(Trap::Npu { fault, .. }) => fault,
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[test]
fn undefined_types_and_float_only_instructions_on_integers_fault_at_issue() {
    assert!(matches!(
        vector_fault(VecOp::Exp, encode::count(8, DType::I32)),
        NpuFault::UnsupportedType {
            dtype: DType::I32,
            ..
        }
    ));
    assert!(matches!(
        vector_fault(VecOp::Add, 8 | 9 << 32),
        NpuFault::BadVectorOperand { .. }
    ));
    assert!(matches!(
        vector_fault(VecOp::Cvt, encode::count(8, DType::F16) | 9 << 36),
        NpuFault::BadVectorOperand { .. }
    ));
    let msg = vector_fault(VecOp::Div, encode::count(8, DType::I16)).to_string();
    assert_eq!(msg, "vdiv is not defined on i16 elements");
}

#[test]
fn bf16_arithmetic_and_casts_are_bit_exact_against_the_half_crate() {
    use half::bf16;
    let mut rng = Rng(0xbf16);
    let n = 16384usize;
    // Finite patterns with exponents near 1 (so products and quotients stay in range) and a
    // sprinkling of arbitrary ones (subnormals, huge values, infinities, NaNs).
    let pattern = |r: &mut Rng| -> u16 {
        let x = r.next();
        if x.is_multiple_of(8) {
            x as u16
        } else {
            (x as u16 & 0x80ff) | (0x3c00 + ((x >> 20) as u16 % 0x800))
        }
    };
    let a: Vec<u16> = (0..n).map(|_| pattern(&mut rng)).collect();
    let b: Vec<u16> = (0..n).map(|_| pattern(&mut rng)).collect();
    for op in [VecOp::Add, VecOp::Sub, VecOp::Mul, VecOp::Div] {
        let rs3 = encode::count(n as u32, DType::BF16);
        let out = bytes_u16(&run_vec(op, &u16_bytes(&a), &u16_bytes(&b), 0, rs3, 2 * n));
        for i in 0..n {
            let (x, y) = (
                bf16::from_bits(a[i]).to_f64(),
                bf16::from_bits(b[i]).to_f64(),
            );
            let want = bf16::from_f64(match op {
                VecOp::Add => x + y,
                VecOp::Sub => x - y,
                VecOp::Mul => x * y,
                _ => x / y,
            });
            let ok =
                out[i] == want.to_bits() || (want.is_nan() && bf16::from_bits(out[i]).is_nan());
            assert!(
                ok,
                "{} {:#06x} {:#06x}: {:#06x} vs {:#06x}",
                op.name(),
                a[i],
                b[i],
                out[i],
                want.to_bits()
            );
        }
    }
    // f32 -> bf16 to nearest even, through the instruction and the function.
    let xs: Vec<f32> = (0..n)
        .map(|_| f32::from_bits(rng.next() as u32))
        .filter(|x| !x.is_nan())
        .collect();
    let rs3 = encode::cast(xs.len() as u32, DType::BF16, DType::F32, RoundMode::Rint);
    let out = bytes_u16(&run_vec(
        VecOp::Cvt,
        &f32_bytes(&xs),
        &[],
        0,
        rs3,
        2 * xs.len(),
    ));
    for (i, &x) in xs.iter().enumerate() {
        assert_eq!(out[i], bf16::from_f32(x).to_bits(), "{x:e}");
        assert_eq!(f32_to_bf16_rounded(x, RoundMode::Rint), out[i]);
        let t = bf16_to_f32(f32_to_bf16_rounded(x, RoundMode::Trunc));
        assert!(
            t.abs() <= x.abs() && (t == 0.0 || t.signum() == x.signum()),
            "{x:e}"
        );
    }
}

#[test]
fn eight_bit_integers_cast_both_ways_saturating_and_fault_in_arithmetic() {
    let xs: Vec<f32> = vec![2.5, -2.5, 127.6, -128.5, 300.0, -300.0, 0.49, f32::NAN];
    let n = xs.len() as u32;
    let src = f32_bytes(&xs);
    let cast = |dst: DType, mode: RoundMode| {
        let rs3 = encode::cast(n, dst, DType::F32, mode);
        run_vec(VecOp::Cvt, &src, &[], 0, rs3, n as usize)
    };
    let i8s = |b: Vec<u8>| b.iter().map(|&v| v as i8).collect::<Vec<i8>>();
    assert_eq!(
        i8s(cast(DType::I8, RoundMode::Rint)),
        [2, -2, 127, -128, 127, -128, 0, 0]
    );
    assert_eq!(
        i8s(cast(DType::I8, RoundMode::Floor)),
        [2, -3, 127, -128, 127, -128, 0, 0]
    );
    assert_eq!(
        cast(DType::U8, RoundMode::Round),
        [3, 0, 128, 0, 255, 0, 0, 0]
    );
    // Back to f16: every 8-bit value is exact.
    let all: Vec<u8> = (0..=255u8).collect();
    for (t, value) in [
        (DType::I8, (|b: u8| b as i8 as f32) as fn(u8) -> f32),
        (DType::U8, |b: u8| b as f32),
    ] {
        let rs3 = encode::cast(256, DType::F16, t, RoundMode::None);
        let f = bytes_u16(&run_vec(VecOp::Cvt, &all, &[], 0, rs3, 512));
        let want: Vec<u16> = all
            .iter()
            .map(|&b| f32_to_f16_rounded(value(b), RoundMode::Rint))
            .collect();
        assert_eq!(f, want, "{t}");
    }
    // Arithmetic on 8-bit elements is not defined: the instruction faults at issue.
    let mut m = Machine::new();
    let mut asm = Asm::new();
    asm.vec(VecOp::Add, UB, UB, UB, encode::count(8, DType::I8));
    match m.run(&asm.words) {
        Err(Trap::Npu { fault, .. }) => {
            assert_eq!(fault.to_string(), "vadd is not defined on i8 elements")
        }
        other => panic!("expected a fault, got {other:?}"),
    }
}

/// `x` rounded to an integer by Ascend C's `mode` (CAST_NONE as CAST_RINT; CAST_ODD is not a
/// mode of an integer cast on the 910B and is not asked for), saturated to `lo..=hi`, NaN 0.
fn reference_int(x: f32, mode: RoundMode, lo: i32, hi: i32) -> i32 {
    if x.is_nan() {
        return 0;
    }
    let r = match mode {
        RoundMode::None | RoundMode::Rint => x.round_ties_even(),
        RoundMode::Floor => x.floor(),
        RoundMode::Ceil => x.ceil(),
        RoundMode::Round => x.round(),
        RoundMode::Trunc => x.trunc(),
        RoundMode::Odd => unreachable!(),
    };
    r.clamp(lo as f32, hi as f32) as i32
}

#[test]
fn four_bit_integers_pack_two_to_a_byte_and_cast_from_every_half_saturating() {
    // Every f16 pattern (NaNs included) to i4 with every integer mode: element 2k in the low
    // nibble of byte k, 2k + 1 in the high one.
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let n = all.len();
    // Every mode but round-to-odd (a float mode).
    for mode in RoundMode::ALL[..6].iter().copied() {
        let rs3 = encode::cast(n as u32, DType::I4, DType::F16, mode);
        let packed = run_vec(VecOp::Cvt, &u16_bytes(&all), &[], 0, rs3, n / 2);
        for (i, &b) in all.iter().enumerate() {
            let nibble = (packed[i / 2] >> (4 * (i % 2))) & 0xf;
            let got = ((nibble << 4) as i8 >> 4) as i32;
            let want = reference_int(f16_to_f32(b), mode, -8, 7);
            assert_eq!(got, want, "{:?} {mode:?}", h(b));
        }
    }
    // Back: every byte is two i4 values, each exact in f16.
    let bytes: Vec<u8> = (0..=255u8).collect();
    let rs3 = encode::cast(512, DType::F16, DType::I4, RoundMode::None);
    let f = bytes_u16(&run_vec(VecOp::Cvt, &bytes, &[], 0, rs3, 1024));
    for (i, &b) in bytes.iter().enumerate() {
        let (lo, hi) = (((b << 4) as i8 >> 4) as f32, ((b as i8) >> 4) as f32);
        assert_eq!((f16_to_f32(f[2 * i]), f16_to_f32(f[2 * i + 1])), (lo, hi));
    }
}

#[test]
fn an_odd_i4_count_or_i4_arithmetic_faults_at_issue() {
    let odd = encode::cast(7, DType::I4, DType::F16, RoundMode::Rint);
    assert!(matches!(
        vector_fault(VecOp::Cvt, odd),
        NpuFault::BadVectorOperand { .. }
    ));
    let odd_src = encode::cast(7, DType::F16, DType::I4, RoundMode::None);
    assert!(matches!(
        vector_fault(VecOp::Cvt, odd_src),
        NpuFault::BadVectorOperand { .. }
    ));
    let msg = vector_fault(VecOp::Mov, encode::count(8, DType::I4)).to_string();
    assert_eq!(msg, "vmov is not defined on i4 elements");
}
