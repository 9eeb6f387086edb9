//! The NPU extension instruction by instruction: data movement with strides, every vector
//! operation and the cube against Rust references, the pipes' timing, the flags, and the
//! faults. Programs are hand-assembled (`npu_support::Asm`).

mod npu_support;

use npu_support::*;
use npusim_device::abi;
use npusim_device::core::npu::isa::{CopyDir, CopyMode, CubeLayout, VecOp, encode};
use npusim_device::core::npu::{
    Buffer, DType, GM_LATENCY_CYCLES, MTE_SETUP_CYCLES, NpuFault, Pipe, VECTOR_STARTUP_CYCLES,
    f16_to_f32, f32_to_f16, pipes::PIPE_ALL,
};
use npusim_device::core::{CoreConfig, Trap};

const GM: u64 = abi::HEAP_BASE;
const UB: u64 = abi::UB_BASE;

fn gm_copy_cycles(bytes: u64) -> u64 {
    MTE_SETUP_CYCLES as u64 + bytes.div_ceil(128)
}

#[test]
fn copy_in_add_copy_out_computes_the_sum() {
    let mut m = Machine::new();
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    m.gm.write_f32(GM, &x);
    m.gm.write_f32(GM + 0x4000, &y);
    let mut a = Asm::new();
    a.copy(CopyDir::GmToUb, UB, GM, 4 * n)
        .copy(CopyDir::GmToUb, UB + 0x4000, GM + 0x4000, 4 * n)
        .sync(Pipe::Mte2, Pipe::V)
        .vec(VecOp::Add, UB + 0x8000, UB, UB + 0x4000, n as u64)
        .sync(Pipe::V, Pipe::Mte3)
        .copy(CopyDir::UbToGm, GM + 0x8000, UB + 0x8000, 4 * n);
    let stats = m.run(&a.words).unwrap();
    let z = m.gm.read_f32(GM + 0x8000, n as usize);
    for i in 0..n as usize {
        assert_eq!(z[i], x[i] + y[i]);
    }
    assert_eq!(stats.gm_read_bytes, 8 * n as u64);
    assert_eq!(stats.gm_write_bytes, 4 * n as u64);
    assert_eq!(stats.npu_instructions, 8);
    // The block ends when the last write has landed in global memory.
    assert!(stats.block_cycles > stats.cycles);
    assert_eq!(
        m.core.footprint().reads(),
        &[(GM, GM + 4000), (GM + 0x4000, GM + 0x4000 + 4000)]
    );
    assert_eq!(
        m.core.footprint().writes(),
        &[(GM + 0x8000, GM + 0x8000 + 4000)]
    );
}

#[test]
fn a_scalar_read_without_a_wait_sees_the_old_bytes() {
    let run = |wait: bool| {
        let mut m = Machine::new();
        m.gm.write_f32(GM, &[42.0; 8]);
        let mut a = Asm::new();
        a.copy(CopyDir::GmToUb, UB, GM, 32);
        if wait {
            a.sync(Pipe::Mte2, Pipe::S);
        }
        a.load_w(A0, UB);
        let stats = m.run(&a.words).unwrap();
        (f32::from_bits(m.core.x(A0 as usize) as u32), stats)
    };
    let (stale, s1) = run(false);
    let (fresh, s2) = run(true);
    assert_eq!(
        stale, 0.0,
        "the copy had not landed when the scalar unit read UB"
    );
    assert_eq!(fresh, 42.0);
    assert_eq!(s1.stall_cycles, 0);
    // The wait lasted until the copy's data landed: setup + 1 cycle of data + GM latency after
    // it was issued.
    assert!(s2.stall_cycles > 0);
    assert!(s2.cycles >= gm_copy_cycles(32) + GM_LATENCY_CYCLES as u64);
}

#[test]
fn a_vector_op_that_forgets_its_wait_reads_stale_data() {
    let run = |wait: bool| {
        let mut m = Machine::new();
        m.gm.write_f32(GM, &[1.0; 64]);
        // UB starts with 0; a first copy puts 5.0 there and is waited for properly.
        m.gm.write_f32(GM + 0x1000, &[5.0; 64]);
        let mut a = Asm::new();
        a.copy(CopyDir::GmToUb, UB, GM + 0x1000, 256)
            .sync(Pipe::Mte2, Pipe::V)
            .copy(CopyDir::GmToUb, UB, GM, 256);
        if wait {
            a.sync(Pipe::Mte2, Pipe::V);
        }
        a.vec(VecOp::Adds, UB + 0x1000, UB, 10f32.to_bits() as u64, 64)
            .sync(Pipe::V, Pipe::Mte3)
            .copy(CopyDir::UbToGm, GM + 0x2000, UB + 0x1000, 256);
        m.run(&a.words).unwrap();
        m.gm.read_f32(GM + 0x2000, 64)
    };
    assert_eq!(run(false), vec![15.0; 64], "old UB contents + 10");
    assert_eq!(run(true), vec![11.0; 64], "new UB contents + 10");
}

#[test]
fn a_copy_that_does_not_wait_for_its_reader_clobbers_what_it_reads() {
    // The vector unit is kept busy by a long operation, so the add that reads UB[0..] starts
    // late; a refill of UB[0..] issued after it but not ordered after it lands first.
    let run = |wait: bool| {
        let mut m = Machine::new();
        m.gm.write_f32(GM, &[1.0; 64]);
        m.gm.write_f32(GM + 0x1000, &[100.0; 64]);
        let mut a = Asm::new();
        a.copy(CopyDir::GmToUb, UB, GM, 256)
            .sync(Pipe::Mte2, Pipe::V)
            .vec(VecOp::Exp, UB + 0x2000, UB + 0x2000, 0, 40_000)
            .vec(VecOp::Adds, UB + 0x1000, UB, 0, 64);
        if wait {
            a.sync(Pipe::V, Pipe::Mte2);
        }
        a.copy(CopyDir::GmToUb, UB, GM + 0x1000, 256)
            .sync(Pipe::V, Pipe::Mte3)
            .copy(CopyDir::UbToGm, GM + 0x2000, UB + 0x1000, 256);
        m.run(&a.words).unwrap();
        m.gm.read_f32(GM + 0x2000, 64)
    };
    assert_eq!(run(false), vec![100.0; 64], "write-after-read race");
    assert_eq!(run(true), vec![1.0; 64]);
}

#[test]
fn strided_copies_gather_and_scatter_tiles() {
    // A 6 × 10 f32 matrix in GM; copy rows 1..4, columns 2..7 into UB with a 32-float pitch,
    // then back out to a 5-wide dense matrix.
    let mut m = Machine::new();
    let mat: Vec<f32> = (0..60).map(|i| i as f32).collect();
    m.gm.write_f32(GM, &mat);
    let mut a = Asm::new();
    a.copy2d(CopyDir::GmToUb, UB, GM + 4 * (10 + 2), 3, 20, 40, 128)
        .sync(Pipe::Mte2, Pipe::Mte3)
        .copy2d(CopyDir::UbToGm, GM + 0x1000, UB, 3, 20, 128, 20);
    m.run(&a.words).unwrap();
    let ub = bytes_f32(&m.core.buffer(Buffer::Ub)[..3 * 128]);
    for r in 0..3 {
        assert_eq!(
            &ub[r * 32..r * 32 + 5],
            &mat[(r + 1) * 10 + 2..(r + 1) * 10 + 7]
        );
        assert!(ub[r * 32 + 5..(r + 1) * 32].iter().all(|&v| v == 0.0));
    }
    let out = m.gm.read_f32(GM + 0x1000, 15);
    for r in 0..3 {
        assert_eq!(
            &out[r * 5..r * 5 + 5],
            &mat[(r + 1) * 10 + 2..(r + 1) * 10 + 7]
        );
    }
}

fn vector_reference(op: VecOp, a: &[f32], b: &[f32], s: f32) -> Vec<f32> {
    let f = |g: &dyn Fn(f32, f32) -> f32| a.iter().zip(b).map(|(&x, &y)| g(x, y)).collect();
    let u = |g: &dyn Fn(f32) -> f32| a.iter().map(|&x| g(x)).collect();
    match op {
        VecOp::Add => f(&|x, y| x + y),
        VecOp::Sub => f(&|x, y| x - y),
        VecOp::Mul => f(&|x, y| x * y),
        VecOp::Div => f(&|x, y| x / y),
        VecOp::Max => f(&f32::max),
        VecOp::Min => f(&f32::min),
        VecOp::Adds => u(&|x| x + s),
        VecOp::Muls => u(&|x| x * s),
        VecOp::Maxs => u(&|x| x.max(s)),
        VecOp::Mins => u(&|x| x.min(s)),
        VecOp::Dup => vec![s; a.len()],
        VecOp::LRelu => u(&|x| if x > 0.0 { x } else { x * s }),
        VecOp::Exp => u(&|x| x.exp()),
        VecOp::Ln => u(&|x| x.ln()),
        VecOp::Sqrt => u(&f32::sqrt),
        VecOp::Relu => u(&|x| if x > 0.0 { x } else { 0.0 }),
        VecOp::Abs => u(&f32::abs),
        VecOp::Rec => u(&|x| 1.0 / x),
        VecOp::Mov => a.to_vec(),
        VecOp::Sum => vec![a.iter().map(|&x| x as f64).sum::<f64>() as f32],
        VecOp::RMax => vec![a.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x))],
        // Typed and integer-only instructions: device/tests/npu_f16.rs.
        VecOp::CvtF32ToF16
        | VecOp::CvtF16ToF32
        | VecOp::Cvt
        | VecOp::Cmp
        | VecOp::Sel
        | VecOp::And
        | VecOp::Or
        | VecOp::Not
        // Mask-register instructions: the `masked` tests below.
        | VecOp::Mask
        | VecOp::Red
        | VecOp::Perm => {
            unreachable!()
        }
    }
}

#[test]
fn every_vector_op_matches_its_reference() {
    let n = 777usize;
    let mut rng = Rng(7);
    let a = rng.vec(n, 0.01, 20.0);
    let b = rng.vec(n, -5.0, 5.0);
    let s = 2.75f32;
    for op in VecOp::ALL {
        if !op.supports(npusim_device::core::npu::DType::F32)
            || matches!(
                op,
                VecOp::CvtF32ToF16
                    | VecOp::CvtF16ToF32
                    | VecOp::Cvt
                    | VecOp::Cmp
                    | VecOp::Sel
                    | VecOp::Mask
                    | VecOp::Red
                    | VecOp::Perm
            )
        {
            continue;
        }
        let mut m = Machine::new();
        m.core.buffer_mut(Buffer::Ub)[..4 * n].copy_from_slice(&f32_bytes(&a));
        m.core.buffer_mut(Buffer::Ub)[0x1000..0x1000 + 4 * n].copy_from_slice(&f32_bytes(&b));
        let bb = if matches!(op.code() >> 3, 1) {
            s.to_bits() as u64
        } else {
            UB + 0x1000
        };
        let mut asm = Asm::new();
        asm.vec(op, UB + 0x2000, UB, bb, n as u64);
        // Core::run resets the buffers, so stage the operands with scalar stores instead.
        let mut prog = Asm::new();
        for (i, v) in a.iter().enumerate() {
            prog.li(A4, v.to_bits() as u64)
                .store_w(UB + 4 * i as u64, A4);
        }
        for (i, v) in b.iter().enumerate() {
            prog.li(A4, v.to_bits() as u64)
                .store_w(UB + 0x1000 + 4 * i as u64, A4);
        }
        prog.set_flag(Pipe::S, Pipe::V, 0)
            .wait_flag(Pipe::S, Pipe::V, 0);
        prog.words.extend_from_slice(&asm.words);
        m.run(&prog.words).unwrap();
        let want = vector_reference(op, &a, &b, s);
        let got = bytes_f32(&m.core.buffer(Buffer::Ub)[0x2000..0x2000 + 4 * want.len()]);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let tol = match op {
                VecOp::Exp | VecOp::Ln => w.abs() * 2e-7,
                VecOp::Sum => w.abs() * 1e-6,
                _ => 0.0,
            };
            assert!(
                (g - w).abs() <= tol,
                "{} [{i}]: got {g}, want {w}",
                op.name()
            );
        }
    }
}

#[test]
fn casts_convert_between_f32_and_f16() {
    let vals = [0.0f32, 1.0, -2.5, 65504.0, 1e-7, 3.3, 70000.0, -0.000061];
    let mut prog = Asm::new();
    for (i, v) in vals.iter().enumerate() {
        prog.li(A4, v.to_bits() as u64)
            .store_w(UB + 4 * i as u64, A4);
    }
    prog.sync(Pipe::S, Pipe::V)
        .vec(VecOp::CvtF32ToF16, UB + 0x100, UB, 0, vals.len() as u64)
        .vec(
            VecOp::CvtF16ToF32,
            UB + 0x200,
            UB + 0x100,
            0,
            vals.len() as u64,
        );
    let mut m = Machine::new();
    m.run(&prog.words).unwrap();
    let ub = m.core.buffer(Buffer::Ub);
    for (i, v) in vals.iter().enumerate() {
        let h = u16::from_le_bytes([ub[0x100 + 2 * i], ub[0x101 + 2 * i]]);
        assert_eq!(h, f32_to_f16(*v));
        let back = f32::from_le_bytes(ub[0x200 + 4 * i..0x204 + 4 * i].try_into().unwrap());
        assert_eq!(back, f16_to_f32(h));
    }
}

fn matmul_ref(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    matmul_acc_ref(vec![0f32; m * n], a, b, m, n, k)
}

/// `c += a × b`, each element accumulating its products in `k` order, as the cube does.
fn matmul_acc_ref(mut c: Vec<f32>, a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    for i in 0..m {
        for kk in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + kk] * b[kk * n + j];
            }
        }
    }
    c
}

/// Runs A (m × k) × B (k × n) through GM → L1 → L0A/L0B → cube → L0C → GM, twice with
/// accumulate on the second, and returns C.
fn cube_round_trip(m: usize, n: usize, k: usize, f32_in: bool) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng(99 + m as u64);
    let a: Vec<f32> = rng
        .vec(m * k, -2.0, 2.0)
        .into_iter()
        .map(|v| f16_to_f32(f32_to_f16(v)))
        .collect();
    let b: Vec<f32> = rng
        .vec(k * n, -2.0, 2.0)
        .into_iter()
        .map(|v| f16_to_f32(f32_to_f16(v)))
        .collect();
    let e = if f32_in { 4 } else { 2 };
    let mut mach = Machine::new();
    if f32_in {
        mach.gm.write_f32(GM, &a);
        mach.gm.write_f32(GM + 0x10000, &b);
    } else {
        mach.gm
            .write_u16(GM, &a.iter().map(|&v| f32_to_f16(v)).collect::<Vec<_>>());
        mach.gm.write_u16(
            GM + 0x10000,
            &b.iter().map(|&v| f32_to_f16(v)).collect::<Vec<_>>(),
        );
    }
    let pitch = |bytes: usize| bytes.div_ceil(32) * 32;
    let (pa, pb, pc) = (pitch(k * e), pitch(n * e), pitch(n * 4));
    let l1 = abi::L1_BASE;
    let mut asm = Asm::new();
    asm.copy2d(
        CopyDir::GmToL1,
        l1,
        GM,
        m as u32,
        (k * e) as u32,
        (k * e) as u32,
        pa as u32,
    )
    .copy2d(
        CopyDir::GmToL1,
        l1 + 0x10000,
        GM + 0x10000,
        k as u32,
        (n * e) as u32,
        (n * e) as u32,
        pb as u32,
    )
    .sync(Pipe::Mte2, Pipe::Mte1)
    .copy2d(
        CopyDir::L1ToL0a,
        abi::L0A_BASE,
        l1,
        m as u32,
        (k * e) as u32,
        pa as u32,
        pa as u32,
    )
    .copy2d(
        CopyDir::L1ToL0b,
        abi::L0B_BASE,
        l1 + 0x10000,
        k as u32,
        (n * e) as u32,
        pb as u32,
        pb as u32,
    )
    .sync(Pipe::Mte1, Pipe::M)
    .mmad(
        false,
        f32_in,
        abi::L0C_BASE,
        abi::L0A_BASE,
        abi::L0B_BASE,
        m as u16,
        n as u16,
        k as u16,
    )
    .sync(Pipe::M, Pipe::Mte3)
    .copy2d(
        CopyDir::L0cToGm,
        GM + 0x20000,
        abi::L0C_BASE,
        m as u32,
        (n * 4) as u32,
        pc as u32,
        (n * 4) as u32,
    )
    .sync(Pipe::Mte3, Pipe::M)
    .mmad(
        true,
        f32_in,
        abi::L0C_BASE,
        abi::L0A_BASE,
        abi::L0B_BASE,
        m as u16,
        n as u16,
        k as u16,
    )
    .sync(Pipe::M, Pipe::Mte3)
    .copy2d(
        CopyDir::L0cToGm,
        GM + 0x40000,
        abi::L0C_BASE,
        m as u32,
        (n * 4) as u32,
        pc as u32,
        (n * 4) as u32,
    );
    mach.run(&asm.words).unwrap();
    let once = mach.gm.read_f32(GM + 0x20000, m * n);
    let twice = mach.gm.read_f32(GM + 0x40000, m * n);
    let want = matmul_ref(&a, &b, m, n, k);
    let want2 = matmul_acc_ref(want.clone(), &a, &b, m, n, k);
    assert_eq!(twice, want2, "{m}x{n}x{k} f32_in={f32_in}: accumulate");
    (want, once, twice)
}

#[test]
fn the_cube_multiplies_f16_and_f32_matrices_of_any_shape() {
    for &(m, n, k) in &[(16, 16, 16), (5, 7, 9), (33, 17, 40), (1, 64, 3)] {
        for f32_in in [false, true] {
            let (want, once, twice) = cube_round_trip(m, n, k, f32_in);
            assert_eq!(once, want, "{m}x{n}x{k} f32_in={f32_in}");
            assert_ne!(once, twice);
        }
    }
}

/// The fractal images of A (zZ), B (zN) for L0A / L0B and the reader of C (NZ) from L0C, as
/// `docs/isa.md` defines them; element bytes `e` (2: f16 bits, 4: f32).
fn fractal_a(a: &[u32], m: usize, k: usize, e: usize) -> Vec<u8> {
    let k0 = 32 / e;
    let (m1, k1) = (m.div_ceil(16), k.div_ceil(k0));
    let mut out = vec![0u8; m1 * k1 * 512];
    for i in 0..m {
        for kk in 0..k {
            let off = ((i / 16) * k1 + kk / k0) * 512 + (i % 16) * 32 + (kk % k0) * e;
            out[off..off + e].copy_from_slice(&a[i * k + kk].to_le_bytes()[..e]);
        }
    }
    out
}

fn fractal_b(b: &[u32], k: usize, n: usize, e: usize) -> Vec<u8> {
    let k0 = 32 / e;
    let (k1, n1) = (k.div_ceil(k0), n.div_ceil(16));
    let mut out = vec![0u8; k1 * n1 * 512];
    for kk in 0..k {
        for j in 0..n {
            let off = ((kk / k0) * n1 + j / 16) * 512 + (j % 16) * 32 + (kk % k0) * e;
            out[off..off + e].copy_from_slice(&b[kk * n + j].to_le_bytes()[..e]);
        }
    }
    out
}

fn read_nz(img: &[f32], m: usize, n: usize) -> Vec<f32> {
    let m1 = m.div_ceil(16);
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = img[((j / 16) * m1 + i / 16) * 256 + (i % 16) * 16 + j % 16];
        }
    }
    c
}

/// A and B as fractal images through GM → L1 → L0A / L0B, one fractal-layout `mmad`, then
/// `mmad` accumulating; returns (once, twice) read back from the NZ image of C.
fn fractal_cube(
    a: &[f32],
    b: &[f32],
    m: usize,
    n: usize,
    k: usize,
    f32_in: bool,
) -> (Vec<f32>, Vec<f32>) {
    let e = if f32_in { 4 } else { 2 };
    let bits = |v: &[f32]| -> Vec<u32> {
        v.iter()
            .map(|&x| {
                if f32_in {
                    x.to_bits()
                } else {
                    f32_to_f16(x) as u32
                }
            })
            .collect()
    };
    let (ia, ib) = (fractal_a(&bits(a), m, k, e), fractal_b(&bits(b), k, n, e));
    let c_bytes = m.div_ceil(16) * n.div_ceil(16) * 1024;
    let mut mach = Machine::new();
    mach.gm.write_bytes(GM, &ia);
    mach.gm.write_bytes(GM + 0x10000, &ib);
    let l1 = abi::L1_BASE;
    let mut asm = Asm::new();
    asm.copy(CopyDir::GmToL1, l1, GM, ia.len() as u32)
        .copy(CopyDir::GmToL1, l1 + 0x10000, GM + 0x10000, ib.len() as u32)
        .sync(Pipe::Mte2, Pipe::Mte1)
        .copy(CopyDir::L1ToL0a, abi::L0A_BASE, l1, ia.len() as u32)
        .copy(
            CopyDir::L1ToL0b,
            abi::L0B_BASE,
            l1 + 0x10000,
            ib.len() as u32,
        )
        .sync(Pipe::Mte1, Pipe::M);
    for (acc, out) in [(false, GM + 0x20000), (true, GM + 0x40000)] {
        asm.li(A0, abi::L0C_BASE)
            .li(A1, abi::L0A_BASE)
            .li(A2, abi::L0B_BASE)
            .li(A3, encode::mnk(m as u16, n as u16, k as u16))
            .word(encode::mmad_layout(
                CubeLayout::Fractal,
                acc,
                f32_in,
                A0,
                A1,
                A2,
                A3,
            ))
            .sync(Pipe::M, Pipe::Mte3)
            .copy(CopyDir::L0cToGm, out, abi::L0C_BASE, c_bytes as u32)
            .sync(Pipe::Mte3, Pipe::M);
    }
    mach.run(&asm.words).unwrap();
    (
        read_nz(&mach.gm.read_f32(GM + 0x20000, c_bytes / 4), m, n),
        read_nz(&mach.gm.read_f32(GM + 0x40000, c_bytes / 4), m, n),
    )
}

#[test]
fn the_fractal_cube_computes_what_the_row_major_cube_computes() {
    for &(m, n, k) in &[
        (16, 16, 16),
        (32, 32, 32),
        (48, 32, 64),
        (5, 7, 9),
        (33, 17, 40),
        (1, 64, 3),
    ] {
        for f32_in in [false, true] {
            let mut rng = Rng(7 + (m * n * k) as u64);
            let halves = |v: Vec<f32>| -> Vec<f32> {
                v.into_iter().map(|x| f16_to_f32(f32_to_f16(x))).collect()
            };
            let a = halves(rng.vec(m * k, -2.0, 2.0));
            let b = halves(rng.vec(k * n, -2.0, 2.0));
            let (once, twice) = fractal_cube(&a, &b, m, n, k, f32_in);
            let want = matmul_ref(&a, &b, m, n, k);
            assert_eq!(once, want, "{m}x{n}x{k} f32_in={f32_in}");
            assert_eq!(
                twice,
                matmul_acc_ref(want, &a, &b, m, n, k),
                "{m}x{n}x{k} accumulate"
            );
        }
    }
}

#[test]
fn a_bias_mmad_starts_every_row_of_c_from_the_bias_table() {
    let (m, n, k) = (20, 24, 40);
    let halves =
        |v: Vec<f32>| -> Vec<f32> { v.into_iter().map(|x| f16_to_f32(f32_to_f16(x))).collect() };
    let mut rng = Rng(31);
    let a = halves(rng.vec(m * k, -2.0, 2.0));
    let b = halves(rng.vec(k * n, -2.0, 2.0));
    let bias = halves(rng.vec(n, -8.0, 8.0));
    let bits = |v: &[f32]| v.iter().map(|&x| f32_to_f16(x) as u32).collect::<Vec<_>>();
    let (ia, ib) = (fractal_a(&bits(&a), m, k, 2), fractal_b(&bits(&b), k, n, 2));
    let mut mach = Machine::new();
    mach.gm.write_bytes(GM, &ia);
    mach.gm.write_bytes(GM + 0x10000, &ib);
    mach.gm.write_u16(
        GM + 0x20000,
        &bias.iter().map(|&x| f32_to_f16(x)).collect::<Vec<_>>(),
    );
    let l1 = abi::L1_BASE;
    let c_bytes = m.div_ceil(16) * n.div_ceil(16) * 1024;
    let mut asm = Asm::new();
    asm.copy(CopyDir::GmToL1, l1, GM, ia.len() as u32)
        .copy(CopyDir::GmToL1, l1 + 0x10000, GM + 0x10000, ib.len() as u32)
        .copy(CopyDir::GmToL1, l1 + 0x20000, GM + 0x20000, 2 * n as u32)
        .sync(Pipe::Mte2, Pipe::Mte1)
        .copy(CopyDir::L1ToL0a, abi::L0A_BASE, l1, ia.len() as u32)
        .copy(
            CopyDir::L1ToL0b,
            abi::L0B_BASE,
            l1 + 0x10000,
            ib.len() as u32,
        )
        // The bias row, f16 in L1, lands as f32 at BT offset 64.
        .copy2d_mode(
            CopyDir::L1ToBt,
            CopyMode::F16ToF32,
            abi::BT_BASE + 64,
            l1 + 0x20000,
            1,
            2 * n as u32,
            0,
            0,
        )
        .sync(Pipe::Mte1, Pipe::M)
        .li(A0, abi::L0C_BASE)
        .li(A1, abi::L0A_BASE)
        .li(A2, abi::L0B_BASE)
        .li(A3, encode::mnk_bias(m as u16, n as u16, k as u16, 64))
        .word(encode::mmad_bias(
            CubeLayout::Fractal,
            false,
            A0,
            A1,
            A2,
            A3,
        ))
        .sync(Pipe::M, Pipe::Mte3)
        .copy(
            CopyDir::L0cToGm,
            GM + 0x30000,
            abi::L0C_BASE,
            c_bytes as u32,
        );
    mach.run(&asm.words).unwrap();
    let c = read_nz(&mach.gm.read_f32(GM + 0x30000, c_bytes / 4), m, n);
    let start: Vec<f32> = (0..m * n).map(|i| bias[i % n]).collect();
    assert_eq!(c, matmul_acc_ref(start, &a, &b, m, n, k));
    let bt = mach.core.buffer(Buffer::Bt);
    assert_eq!(f32::from_le_bytes(bt[64..68].try_into().unwrap()), bias[0]);
    assert_eq!(mach.core.buffer_size(Buffer::Bt), 1024);

    // A bias row past the 1 KiB table faults; bias with accumulate is no instruction.
    let mut asm = Asm::new();
    asm.li(A0, abi::L0C_BASE)
        .li(A1, abi::L0A_BASE)
        .li(A2, abi::L0B_BASE)
        .li(A3, encode::mnk_bias(16, 16, 16, 1024 - 32))
        .word(encode::mmad_bias(
            CubeLayout::Fractal,
            false,
            A0,
            A1,
            A2,
            A3,
        ));
    let (_, f) = npu_fault(&asm.words);
    assert!(
        matches!(
            f,
            NpuFault::OutOfBuffer {
                buffer: Buffer::Bt,
                len: 64,
                ..
            }
        ),
        "{f}"
    );
    let w = encode::r4(0x5b, 5, 1, 0, 0, 0, 0);
    assert_eq!(
        Machine::new().run(&[w]).unwrap_err(),
        Trap::IllegalInstruction {
            pc: abi::CODE_BASE,
            bits: w
        }
    );
}

#[test]
fn a_fractal_mmad_leaves_the_padding_of_partial_fractals_alone() {
    // C is 5 × 7 inside one 16 × 16 fractal; L0C starts as 0, so the other 256 - 35 f32 stay 0
    // while a real product lands in the 35.
    let (m, n, k) = (5, 7, 9);
    let a = vec![1.5f32; m * k];
    let b = vec![2.0f32; k * n];
    let mut mach = Machine::new();
    let bits = |v: &[f32]| v.iter().map(|&x| f32_to_f16(x) as u32).collect::<Vec<_>>();
    mach.gm.write_bytes(GM, &fractal_a(&bits(&a), m, k, 2));
    mach.gm
        .write_bytes(GM + 0x1000, &fractal_b(&bits(&b), k, n, 2));
    let mut asm = Asm::new();
    asm.copy(CopyDir::GmToL1, abi::L1_BASE, GM, 512)
        .copy(CopyDir::GmToL1, abi::L1_BASE + 512, GM + 0x1000, 512)
        .sync(Pipe::Mte2, Pipe::Mte1)
        .copy(CopyDir::L1ToL0a, abi::L0A_BASE, abi::L1_BASE, 512)
        .copy(CopyDir::L1ToL0b, abi::L0B_BASE, abi::L1_BASE + 512, 512)
        .sync(Pipe::Mte1, Pipe::M)
        .li(A0, abi::L0C_BASE)
        .li(A1, abi::L0A_BASE)
        .li(A2, abi::L0B_BASE)
        .li(A3, encode::mnk(m as u16, n as u16, k as u16))
        .word(encode::mmad_layout(
            CubeLayout::Fractal,
            false,
            false,
            A0,
            A1,
            A2,
            A3,
        ))
        .sync(Pipe::M, Pipe::Mte3)
        .copy(CopyDir::L0cToGm, GM + 0x2000, abi::L0C_BASE, 1024);
    mach.run(&asm.words).unwrap();
    let img = mach.gm.read_f32(GM + 0x2000, 256);
    for r in 0..16 {
        for c in 0..16 {
            let want = if r < m && c < n { 27.0 } else { 0.0 };
            assert_eq!(img[r * 16 + c], want, "({r}, {c})");
        }
    }
}

#[test]
fn a_transposing_copy_transposes_each_fractal_and_rejects_other_rows() {
    let mut mach = Machine::new();
    let src: Vec<u16> = (0..512u16).collect(); // two fractals
    mach.gm.write_u16(GM, &src);
    let mut asm = Asm::new();
    asm.copy(CopyDir::GmToL1, abi::L1_BASE, GM, 1024)
        .sync(Pipe::Mte2, Pipe::Mte1)
        .copy2d_mode(
            CopyDir::L1ToL0b,
            CopyMode::Transpose16,
            abi::L0B_BASE,
            abi::L1_BASE,
            2,
            512,
            512,
            1024,
        )
        .sync(Pipe::Mte1, Pipe::S);
    mach.run(&asm.words).unwrap();
    let l0b = mach.core.buffer(Buffer::L0b);
    let at = |i: usize| u16::from_le_bytes([l0b[2 * i], l0b[2 * i + 1]]);
    for f in 0..2 {
        for r in 0..16 {
            for c in 0..16 {
                // Fractal f landed at 1024 * f bytes, transposed.
                assert_eq!(at(f * 512 + r * 16 + c), (f * 256 + c * 16 + r) as u16);
            }
        }
    }
    let mut asm = Asm::new();
    asm.copy2d_mode(
        CopyDir::L1ToL0a,
        CopyMode::Transpose16,
        abi::L0A_BASE,
        abi::L1_BASE,
        1,
        256,
        0,
        0,
    );
    let (_, f) = npu_fault(&asm.words);
    assert!(
        matches!(f, NpuFault::BadCopyRow { row_bytes: 256, .. }),
        "{f}"
    );
    assert!(f.to_string().contains("512"), "{f}");
}

/// Puts `rows` (2 × 8 f32) into L0C, row-major, as the product `rows × I (8 × 8)`: GM -> L1
/// is the only way into a local buffer from GM for the cube side. Returns the program so far
/// (ending with the M -> MTE3 wait).
fn rows_into_l0c(mach: &mut Machine, rows: &[f32]) -> Asm {
    mach.gm.write_f32(GM, rows);
    let ident: Vec<f32> = (0..64)
        .map(|i| if i % 9 == 0 { 1.0 } else { 0.0 })
        .collect();
    mach.gm.write_f32(GM + 0x1000, &ident);
    let mut asm = Asm::new();
    asm.copy(CopyDir::GmToL1, abi::L1_BASE, GM, 64)
        .copy(CopyDir::GmToL1, abi::L1_BASE + 64, GM + 0x1000, 256)
        .sync(Pipe::Mte2, Pipe::Mte1)
        .copy(CopyDir::L1ToL0a, abi::L0A_BASE, abi::L1_BASE, 64)
        .copy(CopyDir::L1ToL0b, abi::L0B_BASE, abi::L1_BASE + 64, 256)
        .sync(Pipe::Mte1, Pipe::M)
        .mmad(
            false,
            true,
            abi::L0C_BASE,
            abi::L0A_BASE,
            abi::L0B_BASE,
            2,
            8,
            8,
        )
        .sync(Pipe::M, Pipe::Mte3);
    asm
}

#[test]
fn an_f16_copy_out_of_l0c_rounds_each_f32_to_nearest_even() {
    let vals = [
        1.0f32,
        1.0 + 1.0 / 2048.0,
        1.0 + 3.0 / 2048.0,
        65520.0,
        -0.1,
        1e-8,
        3.25,
    ];
    let mut mach = Machine::new();
    let mut row = vals.to_vec();
    row.push(2.5); // 8 f32 = one 32-byte row
    let mut rows = row.clone();
    rows.extend(row.iter().map(|v| -v));
    let mut asm = rows_into_l0c(&mut mach, &rows);
    asm.copy2d_mode(
        CopyDir::L0cToGm,
        CopyMode::F32ToF16,
        GM + 0x2000,
        abi::L0C_BASE,
        2,
        32,
        32,
        16,
    );
    let stats = mach.run(&asm.words).unwrap();
    let out = mach.gm.read_bytes(GM + 0x2000, 32);
    for (i, want) in rows.iter().enumerate() {
        let h = u16::from_le_bytes([out[2 * i], out[2 * i + 1]]);
        assert_eq!(h, f32_to_f16(*want), "element {i}: {want}");
    }
    assert_eq!(stats.gm_write_bytes, 32);
    assert_eq!(
        f32_to_f16(1.0 + 1.0 / 2048.0),
        f32_to_f16(1.0),
        "a tie rounds to even"
    );
}

#[test]
fn a_copy_from_l0c_to_ub_hands_c_to_the_vector_unit_as_f32_or_f16() {
    // C = rows (2 x 8 f32) x I (8 x 8) in L0C; L0C -> UB as f32 (row 1 first: strides pick the
    // rows) and as f16, then the vector unit doubles the f32 copy and UB -> GM shows all three.
    let row: Vec<f32> = vec![
        1.0,
        -2.5,
        3.25,
        1e-8,
        65520.0,
        1.0 + 3.0 / 2048.0,
        -0.1,
        7.0,
    ];
    let mut rows = row.clone();
    rows.extend(row.iter().map(|v| v * 2.0 + 1.0));
    let mut mach = Machine::new();
    let ub = abi::UB_BASE;
    let mut asm = rows_into_l0c(&mut mach, &rows);
    asm
        // f32: L0C row 1 to UB + 0x100, row 0 to UB + 0x120 (a negative order by strides).
        .copy2d(
            CopyDir::L0cToUb,
            ub + 0x100,
            abi::L0C_BASE + 32,
            1,
            32,
            32,
            32,
        )
        .copy2d(CopyDir::L0cToUb, ub + 0x120, abi::L0C_BASE, 1, 32, 32, 32)
        .copy2d_mode(
            CopyDir::L0cToUb,
            CopyMode::F32ToF16,
            ub + 0x200,
            abi::L0C_BASE,
            2,
            32,
            32,
            32,
        )
        .sync(Pipe::Mte3, Pipe::V)
        .vec(VecOp::Add, ub + 0x300, ub + 0x100, ub + 0x100, 16)
        .sync(Pipe::V, Pipe::Mte3)
        .copy(CopyDir::UbToGm, GM + 0x2000, ub + 0x100, 64)
        .copy(CopyDir::UbToGm, GM + 0x2100, ub + 0x200, 64)
        .copy(CopyDir::UbToGm, GM + 0x2200, ub + 0x300, 64);
    mach.run(&asm.words).unwrap();
    let swapped: Vec<f32> = rows[8..].iter().chain(&rows[..8]).copied().collect();
    assert_eq!(mach.gm.read_f32(GM + 0x2000, 16), swapped);
    let halves = mach.gm.read_bytes(GM + 0x2100, 64);
    for (i, want) in rows.iter().enumerate() {
        // Each row's 16 bytes of f16 land dst_stride (32) bytes after the last.
        let at = 32 * (i / 8) + 2 * (i % 8);
        let h = u16::from_le_bytes([halves[at], halves[at + 1]]);
        assert_eq!(h, f32_to_f16(*want), "element {i}: {want}");
    }
    let doubled: Vec<f32> = swapped.iter().map(|v| v + v).collect();
    assert_eq!(mach.gm.read_f32(GM + 0x2200, 16), doubled);

    // A destination past UB faults at issue, naming UB.
    let mut asm = Asm::new();
    asm.copy(
        CopyDir::L0cToUb,
        ub + Machine::new().core.buffer_size(Buffer::Ub) as u64 - 32,
        abi::L0C_BASE,
        64,
    );
    let (_, f) = npu_fault(&asm.words);
    assert!(
        matches!(
            f,
            NpuFault::OutOfBuffer {
                buffer: Buffer::Ub,
                ..
            }
        ),
        "{f}"
    );
}

#[test]
fn an_atomic_add_copy_out_adds_into_global_memory_by_element_type() {
    // Two rows of 8 elements, 64 bytes apart in GM: f32, f16 and i32 each add what UB holds to
    // what GM holds; the gap between the rows keeps its bytes.
    let mut mach = Machine::new();
    let ub = abi::UB_BASE;
    let f_gm: Vec<f32> = (0..24).map(|i| i as f32 * 0.1 - 1.0).collect();
    let f_ub: Vec<f32> = (0..16).map(|i| 1e8 / (i as f32 + 1.0)).collect();
    let h_gm: Vec<u16> = (0..24).map(|i| f32_to_f16(1.0 + i as f32)).collect();
    // 1 + 2048 is a tie in f16 (rounds to even: 2048); 1/3 rounds once.
    let h_ub: Vec<u16> = (0..16)
        .map(|i| f32_to_f16(if i == 0 { 2048.0 } else { 1.0 / 3.0 }))
        .collect();
    let i_gm: Vec<i32> = (0..24)
        .map(|i| if i == 0 { i32::MAX } else { -i })
        .collect();
    let i_ub: Vec<i32> = (0..16).map(|i| 1 + 3 * i).collect();
    let i32_bytes = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    mach.gm.write_f32(GM, &f_gm);
    mach.gm.write_f32(GM + 0x400, &f_ub);
    mach.gm.write_u16(GM + 0x800, &h_gm);
    mach.gm.write_u16(GM + 0xc00, &h_ub);
    mach.gm.write_bytes(GM + 0x1000, &i32_bytes(&i_gm));
    mach.gm.write_bytes(GM + 0x1400, &i32_bytes(&i_ub));
    let mut asm = Asm::new();
    asm.copy(CopyDir::GmToUb, ub, GM + 0x400, 64)
        .copy2d(CopyDir::GmToUb, ub + 0x100, GM + 0xc00, 2, 16, 16, 32)
        .copy(CopyDir::GmToUb, ub + 0x200, GM + 0x1400, 64)
        .sync(Pipe::Mte2, Pipe::Mte3);
    // (UB rows are 32 bytes apart, as a local stride must be.)
    for (t, dst, src, row) in [
        (DType::F32, GM, ub, 32u32),
        (DType::F16, GM + 0x800, ub + 0x100, 16),
        (DType::I32, GM + 0x1000, ub + 0x200, 32),
    ] {
        asm.copy2d_mode(
            CopyDir::UbToGm,
            CopyMode::AtomicAdd(t),
            dst,
            src,
            2,
            row,
            32,
            2 * row,
        );
    }
    let stats = mach.run(&asm.words).unwrap();
    // Row r of 8 lands at element 16 r: elements 8..16 are the gap.
    let at = |i: usize| (i / 8) * 16 + i % 8;
    let f = mach.gm.read_f32(GM, 24);
    let mut want_f = f_gm.clone();
    (0..16).for_each(|i| want_f[at(i)] += f_ub[i]);
    assert_eq!(f, want_f);
    let hb = mach.gm.read_bytes(GM + 0x800, 48);
    let h: Vec<u16> = hb
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let mut want_h = h_gm.clone();
    (0..16).for_each(|i| {
        want_h[at(i)] = f32_to_f16(f16_to_f32(h_gm[at(i)]) + f16_to_f32(h_ub[i]));
    });
    assert_eq!(h, want_h);
    assert_eq!(h[0], f32_to_f16(2048.0), "1 + 2048 in f16, to even");
    let ib = mach.gm.read_bytes(GM + 0x1000, 96);
    let got_i: Vec<i32> = ib
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut want_i = i_gm.clone();
    (0..16).for_each(|i| want_i[at(i)] = want_i[at(i)].wrapping_add(i_ub[i]));
    assert_eq!(got_i, want_i);
    assert_eq!(got_i[0], i32::MIN, "i32 wraps");
    // Each atomic row is read from GM before it is written back.
    assert_eq!(stats.gm_write_bytes, 64 + 32 + 64);
    assert_eq!(stats.gm_read_bytes, 2 * (64 + 32 + 64));

    // A row that is not whole elements of the mode's type faults at issue.
    let mut asm = Asm::new();
    asm.copy2d_mode(
        CopyDir::UbToGm,
        CopyMode::AtomicAdd(DType::F32),
        GM,
        ub,
        1,
        6,
        6,
        6,
    );
    let (_, f) = npu_fault(&asm.words);
    assert!(
        matches!(f, NpuFault::BadCopyRow { row_bytes: 6, .. }),
        "{f}"
    );
}

#[test]
fn fractal_operands_past_their_buffer_fault_at_issue() {
    // 256 × 256 × 256 f16: A needs 16 × 16 fractals = 128 KiB > L0A (64 KiB).
    let mut asm = Asm::new();
    asm.li(A0, abi::L0C_BASE)
        .li(A1, abi::L0A_BASE)
        .li(A2, abi::L0B_BASE)
        .li(A3, encode::mnk(256, 16, 256))
        .word(encode::mmad_layout(
            CubeLayout::Fractal,
            false,
            false,
            A0,
            A1,
            A2,
            A3,
        ));
    let (_, f) = npu_fault(&asm.words);
    assert!(
        matches!(
            f,
            NpuFault::OutOfBuffer {
                buffer: Buffer::L0a,
                len: 131072,
                ..
            }
        ),
        "{f}"
    );
}

#[test]
fn a_copy_costs_setup_plus_bytes_over_bandwidth_plus_latency() {
    let mut m = Machine::new();
    let mut a = Asm::new();
    a.copy(CopyDir::GmToUb, UB, GM, 64 * 1024);
    let issue_words = a.words.len() as u64;
    m.run(&a.words).unwrap();
    let s = m.core.stats();
    // Each `li`/copy word costs one scalar cycle; the copy starts when issued.
    let start = issue_words;
    assert_eq!(s.pipe_busy.mte2, gm_copy_cycles(64 * 1024));
    assert_eq!(
        s.block_cycles,
        start + gm_copy_cycles(64 * 1024) + GM_LATENCY_CYCLES as u64
    );
}

#[test]
fn pipes_overlap_and_a_pipe_runs_in_order() {
    let n = 128 * 300; // 300 cycles of vector work per instruction
    let mut a = Asm::new();
    a.vec(VecOp::Dup, UB, 0, 0, n)
        .vec(VecOp::Dup, UB, 0, 0, n)
        .copy(CopyDir::GmToL1, abi::L1_BASE, GM, 128 * 300);
    let mut m = Machine::new();
    let s = m.run(&a.words).unwrap();
    let v = VECTOR_STARTUP_CYCLES as u64 + 300;
    assert_eq!(s.pipe_busy.vector, 2 * v);
    // The copy ran beside the two vector instructions, which ran one after the other.
    assert!(s.block_cycles < s.pipe_busy.vector + s.pipe_busy.mte2);
    assert!(s.block_cycles >= 2 * v);
}

#[test]
fn barrier_all_waits_for_every_pipe() {
    let mut a = Asm::new();
    a.vec(VecOp::Dup, UB, 0, 0, 128 * 100);
    // One cycle per word so far: the vector instruction issues at this cycle.
    let issued = a.words.len() as u64;
    a.barrier(PIPE_ALL as u64);
    let mut m = Machine::new();
    let s = m.run(&a.words).unwrap();
    assert!(s.stall_cycles > 0);
    let done = issued + VECTOR_STARTUP_CYCLES as u64 + 100;
    assert_eq!(
        s.cycles,
        done + 2,
        "the barrier released at `done`, then `ret` (2 cycles)"
    );
    assert_eq!(s.block_cycles, s.cycles);
}

#[test]
fn sync_all_drains_the_pipes_and_stops_the_block_past_it_until_resumed() {
    use npusim_device::core::{Exit, NpuCsrs, Program};
    let mut a = Asm::new();
    a.vec(VecOp::Dup, UB, 0, 0, 128 * 100);
    let issued = a.words.len() as u64;
    a.sync_all(3);
    let resume_at = a.words.len();
    a.li(A0, 7);
    let mut text = a.words.clone();
    text.push(core_asm::RET);
    let program = Program::decode(abi::CODE_BASE, &core_asm::bytes(&text));
    let mut m = Machine::new();
    m.core
        .start(abi::CODE_BASE, &[], NpuCsrs::default())
        .unwrap();
    let exit = m.core.execute(&program, &mut m.gm, 1000).unwrap();
    assert_eq!(exit, Exit::SyncAll(3));
    assert_eq!(
        m.core.pc(),
        Machine::pc_of(resume_at),
        "stopped past the sync_all"
    );
    let s = m.core.stats();
    assert_eq!(
        s.cycles,
        issued + VECTOR_STARTUP_CYCLES as u64 + 100,
        "the pipes drained"
    );
    assert_eq!(s.block_cycles, s.cycles);
    // Resumed at a later cycle (the last block's arrival), the wait counts as stall.
    m.core.resume_at(s.cycles + 1000);
    assert_eq!(
        m.core.execute(&program, &mut m.gm, 1000).unwrap(),
        Exit::Returned
    );
    assert_eq!(m.core.x(A0 as usize), 7);
    let t = m.core.stats();
    assert!(t.cycles >= s.cycles + 1000);
    assert_eq!(t.stall_cycles, s.stall_cycles + 1000);

    // A count that is not a u32 (a negative usedCores) faults.
    let mut a = Asm::new();
    a.sync_all(-2i64 as u64);
    let err = Machine::new().run(&a.words).unwrap_err();
    assert!(
        matches!(err, Trap::Npu { fault: NpuFault::BadSyncAll { blocks }, .. } if blocks == -2i64 as u64),
        "{err}"
    );
}

#[test]
fn a_full_queue_stalls_the_scalar_unit() {
    let mut a = Asm::new();
    a.li(A0, UB).li(A1, UB).li(A3, 128 * 100);
    for _ in 0..100 {
        a.word(encode::vector(VecOp::Mov, A0, A1, A2, A3));
    }
    let mut m = Machine::new();
    let s = m.run(&a.words).unwrap();
    assert!(
        s.stall_cycles > 0,
        "100 instructions of 100 cycles do not fit in a queue of 32"
    );
    assert_eq!(
        s.pipe_busy.vector,
        100 * (VECTOR_STARTUP_CYCLES as u64 + 100)
    );
}

fn npu_fault(words: &[u32]) -> (u64, NpuFault) {
    let mut m = Machine::new();
    match m.run(words) {
        Err(Trap::Npu { pc, fault }) => (pc, fault),
        other => panic!("expected an NPU fault, got {other:?}"),
    }
}

#[test]
fn operands_outside_their_buffer_fault_precisely() {
    // A vector op running past the end of UB.
    let mut a = Asm::new();
    a.vec(VecOp::Add, UB, UB, UB + 0x2_0000, 0x1_0000 / 4 + 1);
    let (pc, f) = npu_fault(&a.words);
    assert_eq!(pc, Machine::pc_of(a.words.len() - 1));
    assert!(
        matches!(
            f,
            NpuFault::OutOfBuffer {
                buffer: Buffer::Ub,
                ..
            }
        ),
        "{f}"
    );
    assert!(
        f.to_string()
            .contains("run past the end of UB (196608 bytes at 0x21000000)"),
        "{f}"
    );

    // Misaligned UB address.
    let (_, f) = npu_fault(&Asm::new().vec(VecOp::Exp, UB + 4, UB, 0, 8).words);
    assert!(
        matches!(
            f,
            NpuFault::Misaligned {
                what: "address",
                ..
            }
        ),
        "{f}"
    );

    // A copy into L1 whose destination is in UB.
    let (_, f) = npu_fault(&Asm::new().copy(CopyDir::GmToL1, UB, GM, 64).words);
    assert!(
        matches!(
            f,
            NpuFault::WrongBuffer {
                expected: Buffer::L1,
                ..
            }
        ),
        "{f}"
    );

    // Overlapping rows on the local side.
    let (_, f) = npu_fault(
        &Asm::new()
            .copy2d(CopyDir::GmToUb, UB, GM, 4, 64, 64, 32)
            .words,
    );
    assert!(matches!(f, NpuFault::OverlappingRows { .. }), "{f}");

    // A cube operand too big for L0A (256 × 256 f16 = 128 KiB > 64 KiB).
    let (_, f) = npu_fault(
        &Asm::new()
            .mmad(
                false,
                false,
                abi::L0C_BASE,
                abi::L0A_BASE,
                abi::L0B_BASE,
                256,
                16,
                256,
            )
            .words,
    );
    assert!(
        matches!(
            f,
            NpuFault::OutOfBuffer {
                buffer: Buffer::L0a,
                ..
            }
        ),
        "{f}"
    );
}

#[test]
fn the_scalar_unit_may_touch_ub_only() {
    let (_, f) = npu_fault(&Asm::new().load_w(A0, abi::L1_BASE).words);
    assert!(
        matches!(
            f,
            NpuFault::ScalarAccess {
                buffer: Buffer::L1,
                ..
            }
        ),
        "{f}"
    );
    let (_, f) = npu_fault(&Asm::new().store_w(abi::L0C_BASE + 64, A0).words);
    assert!(
        matches!(
            f,
            NpuFault::ScalarAccess {
                buffer: Buffer::L0c,
                ..
            }
        ),
        "{f}"
    );
    let (_, f) = npu_fault(&Asm::new().load_w(A0, UB + (192 << 10)).words);
    assert!(
        matches!(
            f,
            NpuFault::OutOfBuffer {
                buffer: Buffer::Ub,
                ..
            }
        ),
        "{f}"
    );
    let mut m = Machine::new();
    m.run(
        &Asm::new()
            .li(A0, 7)
            .store_w(UB + 100, A0)
            .load_w(A1, UB + 100)
            .words,
    )
    .unwrap();
    assert_eq!(m.core.x(A1 as usize), 7);
}

#[test]
fn bad_flags_fault() {
    let (_, f) = npu_fault(&Asm::new().wait_flag(Pipe::V, Pipe::Mte2, 3).words);
    assert!(
        matches!(
            f,
            NpuFault::WaitWithoutSet {
                src: Pipe::V,
                dst: Pipe::Mte2,
                event: 3
            }
        ),
        "{f}"
    );
    assert!(f.to_string().contains("wait_flag(V->MTE2, event 3)"), "{f}");
    let (_, f) = npu_fault(&Asm::new().set_flag(Pipe::V, Pipe::V, 0).words);
    assert!(matches!(f, NpuFault::BadPipe { .. }), "{f}");
    let (_, f) = npu_fault(&Asm::new().barrier(9).words);
    assert!(matches!(f, NpuFault::BadPipe { .. }), "{f}");
}

#[test]
fn undefined_extension_encodings_are_illegal() {
    for w in [
        // (custom-0 has no free code left: vmask, vred and vperm took 0x0e, 0x0f, 0x1f.)
        encode::r4(0x2b, 7, 2, 0, 0, 0, 0), // copy mode 2 on L0C -> UB
        encode::r4(0x2b, 0, 1, 0, 0, 0, 0), // funct2 != 0
        encode::r4(0x5b, 4, 2, 0, 0, 0, 0), // cube funct2 2
        encode::r4(0x2b, 3, 2, 0, 0, 0, 0), // copy mode 2
        encode::r4(0x2b, 1, 1, 0, 0, 0, 0), // no transpose on GM -> L1
        encode::r4(0x7b, 6, 0, 0, 0, 0, 0), // sync funct3 6
        encode::r4(0x7b, 0, 0, 0, 0, 0, 1), // sync with rs3 != 0
    ] {
        let mut m = Machine::new();
        assert_eq!(
            m.run(&[w]).unwrap_err(),
            Trap::IllegalInstruction {
                pc: abi::CODE_BASE,
                bits: w
            }
        );
    }
}

#[test]
fn a_gm_fault_in_a_transfer_names_the_transfer() {
    let mut a = Asm::new();
    a.copy(CopyDir::GmToUb, UB, 0x1000, 64);
    let copy_pc = Machine::pc_of(a.words.len() - 1);
    a.li(A5, 1);
    let mut m = Machine::new();
    match m.run(&a.words) {
        Err(Trap::LoadPageFault { pc, addr, .. }) => {
            assert_eq!(pc, copy_pc);
            assert_eq!(addr, 0x1000);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn buffer_sizes_come_from_the_config_and_are_readable_as_csrs() {
    let mut cfg = CoreConfig::default();
    cfg.npu.buffers.ub = 4096;
    let mut m = Machine::with_config(cfg.clone());
    let mut a = Asm::new();
    a.word(core_asm::csrr(A0, abi::CSR_UB_BYTES))
        .word(core_asm::csrr(A1, abi::CSR_L0C_BYTES));
    m.run(&a.words).unwrap();
    assert_eq!(m.core.x(A0 as usize), 4096);
    assert_eq!(m.core.x(A1 as usize), 128 << 10);
    assert_eq!(m.core.buffer_size(Buffer::Ub), 4096);
    let (_, f) = {
        let mut m = Machine::with_config(cfg);
        match m.run(&Asm::new().vec(VecOp::Dup, UB, 0, 0, 1025).words) {
            Err(Trap::Npu { pc, fault }) => (pc, fault),
            o => panic!("{o:?}"),
        }
    };
    assert!(matches!(f, NpuFault::OutOfBuffer { size: 4096, .. }));
}

#[test]
fn runs_are_deterministic_and_reset_clears_the_buffers() {
    let mut m = Machine::new();
    m.gm.write_f32(GM, &[3.0; 16]);
    let mut a = Asm::new();
    a.copy(CopyDir::GmToUb, UB, GM, 64)
        .sync(Pipe::Mte2, Pipe::V)
        .vec(VecOp::Exp, UB + 64, UB, 0, 16);
    let s1 = m.run(&a.words).unwrap();
    assert_ne!(m.core.buffer(Buffer::Ub)[64], 0);
    let s2 = m.run(&a.words).unwrap();
    assert_eq!(s1, s2);
    m.run(&[]).unwrap();
    assert!(m.core.buffer(Buffer::Ub).iter().all(|&b| b == 0));
}

#[test]
fn random_extension_instructions_never_panic() {
    let mut rng = Rng(0x5eed);
    for round in 0..3000 {
        let mut a = Asm::new();
        let bases = [
            UB,
            abi::L1_BASE,
            abi::L0A_BASE,
            abi::L0B_BASE,
            abi::L0C_BASE,
            GM,
            0,
        ];
        for r in [A0, A1, A2, A3, A4, A5] {
            let v = match rng.next() % 4 {
                0 => bases[(rng.next() % 7) as usize] + (rng.next() % 4096) * 32,
                1 => rng.next() % 5000,
                2 => encode::shape((rng.next() % 64) as u32, (rng.next() % 4096) as u32),
                _ => rng.next(),
            };
            a.li(r, v);
        }
        for _ in 0..4 {
            let opcode = [0x0b, 0x2b, 0x5b, 0x7b][(rng.next() % 4) as usize];
            let regs = [A0, A1, A2, A3, A4, A5];
            let pick = |rng: &mut Rng| regs[(rng.next() % 6) as usize];
            let w = encode::r4(
                opcode,
                (rng.next() % 8) as u32,
                (rng.next() % 4) as u32 * (round % 2),
                pick(&mut rng),
                pick(&mut rng),
                pick(&mut rng),
                pick(&mut rng) * (round % 3 != 0) as u32,
            );
            a.word(w);
        }
        let mut m = Machine::new();
        let _ = m.run(&a.words);
    }
}

// ---- Mask-register instructions: vmask, vred, vperm -----------------------------------------

mod masked {
    use super::*;
    use half::f16;
    use npusim_device::core::npu::masked::{GATHER_MASK_BUILTIN, GATHER_MASK_COUNTER};
    use npusim_device::core::npu::{DType, PermMode, Reduce, ReduceOrder};

    const UB_IN: u64 = UB;
    const UB_AUX: u64 = UB + 0x8000;
    const UB_OUT: u64 = UB + 0x1_0000;
    const GM_IN: u64 = GM;
    const GM_AUX: u64 = GM + 0x8000;
    const GM_OUT: u64 = GM + 0x1_0000;
    const OUT_BYTES: u32 = 0x4000;

    /// Copies `input` and `aux` into UB, runs `body`, returns `OUT_BYTES` of UB from `UB_OUT`
    /// (pre-filled with 0xEE so untouched bytes show) and the machine.
    fn run(
        input: &[u8],
        aux: &[u8],
        body: impl FnOnce(&mut Asm),
    ) -> Result<(Vec<u8>, Machine), Trap> {
        let mut m = Machine::new();
        m.gm.write_bytes(GM_IN, input);
        m.gm.write_bytes(GM_AUX, aux);
        m.gm.write_bytes(GM_OUT, &vec![0xEE; OUT_BYTES as usize]);
        let mut a = Asm::new();
        if !input.is_empty() {
            a.copy(CopyDir::GmToUb, UB_IN, GM_IN, input.len() as u32);
        }
        if !aux.is_empty() {
            a.copy(CopyDir::GmToUb, UB_AUX, GM_AUX, aux.len() as u32);
        }
        a.copy(CopyDir::GmToUb, UB_OUT, GM_OUT, OUT_BYTES)
            .sync(Pipe::Mte2, Pipe::V);
        body(&mut a);
        a.sync(Pipe::V, Pipe::Mte3)
            .copy(CopyDir::UbToGm, GM_OUT, UB_OUT, OUT_BYTES);
        m.run(&a.words)?;
        let o = (GM_OUT - GM) as usize;
        Ok((m.gm.mem[o..o + OUT_BYTES as usize].to_vec(), m))
    }

    fn set_mask(a: &mut Asm, mask: u128) {
        a.li(A1, mask as u64).li(A2, (mask >> 64) as u64);
        a.word(encode::mask(A1, A2));
    }

    fn vred(a: &mut Asm, dst: u64, src: u64, strides: u64, rs3: u64) {
        a.li(A0, dst).li(A1, src).li(A2, strides).li(A3, rs3);
        a.word(encode::vector(VecOp::Red, A0, A1, A2, A3));
    }

    fn vperm(a: &mut Asm, dst: u64, src: u64, b: u64, rs3: u64) {
        a.li(A0, dst).li(A1, src).li(A2, b).li(A3, rs3);
        a.word(encode::vector(VecOp::Perm, A0, A1, A2, A3));
    }

    fn h(x: f32) -> u16 {
        f16::from_f32(x).to_bits()
    }

    fn u16s(b: &[u8]) -> Vec<u16> {
        b.chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    }

    fn u16_bytes(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// The documented f16 pairwise addition: exact sum rounded once; a finite overflow is
    /// ±65504.
    fn add16(a: f16, b: f16) -> f16 {
        let s = f16::from_f64(a.to_f64() + b.to_f64());
        if s.is_infinite() && a.is_finite() && b.is_finite() {
            if s.is_sign_negative() {
                -f16::MAX
            } else {
                f16::MAX
            }
        } else {
            s
        }
    }

    /// The reference tree: pairs (0, 1), (2, 3), … of the selected slots, recursively.
    fn tree16(v: &[Option<f16>]) -> Option<f16> {
        if v.len() == 1 {
            return v[0];
        }
        let (l, r) = v.split_at(v.len() / 2);
        let pairs: Vec<Option<f16>> = l
            .iter()
            .chain(r)
            .copied()
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|p| match (p[0], p[1]) {
                (Some(x), Some(y)) => Some(add16(x, y)),
                (x, None) => x,
                (None, y) => y,
            })
            .collect();
        tree16(&pairs)
    }

    fn tree32(v: &[Option<f32>]) -> Option<f32> {
        if v.len() == 1 {
            return v[0];
        }
        let pairs: Vec<Option<f32>> = v
            .chunks(2)
            .map(|p| match (p[0], p[1]) {
                (Some(x), Some(y)) => Some(x + y),
                (x, None) => x,
                (None, y) => y,
            })
            .collect();
        tree32(&pairs)
    }

    #[test]
    fn whole_reduce_sum_on_f16_adds_pairwise_and_saturates_as_documented() {
        // Ascend's documented example: [60000, 60000, -30000, 100] -> (65504) + (-29900).
        let x: Vec<u16> = [60000.0, 60000.0, -30000.0, 100.0].map(h).to_vec();
        let (out, _) = run(&u16_bytes(&x), &[], |a| {
            set_mask(a, 0b1111);
            vred(
                a,
                UB_OUT,
                UB_IN,
                encode::reduce_strides(1, 1, 8),
                encode::reduce(1, DType::F16, Reduce::Sum, ReduceOrder::ValueIndex),
            );
        })
        .unwrap();
        let want = add16(
            f16::MAX,
            add16(f16::from_f32(-30000.0), f16::from_f32(100.0)),
        );
        assert_eq!(u16s(&out[..2])[0], want.to_bits());
        // -30000 + 100 rounds to -29904; 65504 - 29904 = 35600 is a tie, to even: 35584.
        assert_eq!(f16::from_bits(u16s(&out[..2])[0]).to_f32(), 35584.0);
        // A plain f32 sum would have given 90100 (inf in f16): the tree order is observable.
        assert_eq!(&out[2..4], &[0xEE, 0xEE], "only one result written");
    }

    #[test]
    fn whole_reduce_sum_follows_mask_and_strides_over_repeats() {
        let mut rng = Rng(7);
        // f16: 5 repeats 10 blocks apart, blocks 2 apart (reads 8 × 2 blocks per repeat).
        let blocks = 4 * 10 + 7 * 2 + 1;
        let x: Vec<u16> = (0..blocks * 16).map(|_| h(rng.f32(-50.0, 50.0))).collect();
        let mask: u128 = 0x0f0f_ffff_0000_1234_8000_0000_ffff_0001;
        let (out, _) = run(&u16_bytes(&x), &[], |a| {
            set_mask(a, mask);
            vred(
                a,
                UB_OUT,
                UB_IN,
                encode::reduce_strides(3, 2, 10),
                encode::reduce(5, DType::F16, Reduce::Sum, ReduceOrder::ValueIndex),
            );
        })
        .unwrap();
        let got = u16s(&out);
        for r in 0..5 {
            let slots: Vec<Option<f16>> = (0..128)
                .map(|p| {
                    (mask >> p & 1 == 1)
                        .then(|| f16::from_bits(x[(r * 10 + (p / 16) * 2) * 16 + p % 16]))
                })
                .collect();
            assert_eq!(got[3 * r], tree16(&slots).unwrap().to_bits(), "repeat {r}");
            assert_eq!(got[3 * r + 1], 0xEEEE, "stride gap untouched");
        }

        // f32: a count mask of 37 (shorter than the 64-element repeat), 3 repeats.
        let y = rng.vec(3 * 64, -1e3, 1e3);
        let (out, _) = run(&f32_bytes(&y), &[], |a| {
            set_mask(a, (1u128 << 37) - 1);
            vred(
                a,
                UB_OUT,
                UB_IN,
                encode::reduce_strides(1, 1, 8),
                encode::reduce(3, DType::F32, Reduce::Sum, ReduceOrder::ValueIndex),
            );
        })
        .unwrap();
        let got = bytes_f32(&out[..12]);
        for r in 0..3 {
            let slots: Vec<Option<f32>> =
                (0..64).map(|p| (p < 37).then_some(y[r * 64 + p])).collect();
            assert_eq!(got[r].to_bits(), tree32(&slots).unwrap().to_bits());
        }
    }

    #[test]
    fn whole_reduce_max_and_min_write_value_and_index_in_each_order() {
        let mut x: Vec<u16> = (0..256).map(|i| h((i % 37) as f32 - 18.0)).collect();
        x[77] = h(100.0); // repeat 0's maximum (inside the mask)
        x[3] = h(500.0); // outside the mask
        x[128 + 100] = h(-99.0); // repeat 1's minimum
        let mask: u128 = !0b1111;
        for (red, order) in [
            (Reduce::Max, ReduceOrder::ValueIndex),
            (Reduce::Max, ReduceOrder::IndexValue),
            (Reduce::Min, ReduceOrder::OnlyValue),
            (Reduce::Min, ReduceOrder::OnlyIndex),
        ] {
            let (out, _) = run(&u16_bytes(&x), &[], |a| {
                set_mask(a, mask);
                vred(
                    a,
                    UB_OUT,
                    UB_IN,
                    encode::reduce_strides(1, 1, 8),
                    encode::reduce(2, DType::F16, red, order),
                );
            })
            .unwrap();
            let max = red == Reduce::Max;
            for r in 0..2 {
                let mut best: Option<(f16, usize)> = None;
                for p in 4..128 {
                    let v = f16::from_bits(x[r * 128 + p]);
                    if best.is_none_or(|(b, _)| if max { v > b } else { v < b }) {
                        best = Some((v, p));
                    }
                }
                let (v, i) = best.unwrap();
                let w = u16s(&out);
                match order {
                    ReduceOrder::ValueIndex => {
                        assert_eq!((w[2 * r], w[2 * r + 1]), (v.to_bits(), i as u16))
                    }
                    ReduceOrder::IndexValue => {
                        assert_eq!((w[2 * r], w[2 * r + 1]), (i as u16, v.to_bits()))
                    }
                    ReduceOrder::OnlyValue => assert_eq!(w[r], v.to_bits()),
                    ReduceOrder::OnlyIndex => {
                        let idx = u32::from_le_bytes(out[4 * r..4 * r + 4].try_into().unwrap());
                        assert_eq!(idx, i as u32)
                    }
                }
            }
        }
    }

    #[test]
    fn block_reduce_writes_one_result_per_block_and_skips_empty_blocks() {
        let mut rng = Rng(3);
        let y = rng.vec(2 * 64, -10.0, 10.0);
        // 13 elements: blocks 0 (8) and 1 (5); blocks 2..8 have none and keep their bytes.
        for red in [Reduce::BlockSum, Reduce::BlockMax, Reduce::BlockMin] {
            let (out, _) = run(&f32_bytes(&y), &[], |a| {
                set_mask(a, (1 << 13) - 1);
                vred(
                    a,
                    UB_OUT,
                    UB_IN,
                    encode::reduce_strides(2, 1, 8),
                    encode::reduce(2, DType::F32, red, ReduceOrder::ValueIndex),
                );
            })
            .unwrap();
            for r in 0..2 {
                for k in 0..8 {
                    let got = &out[(r * 16 + k) * 4..(r * 16 + k) * 4 + 4];
                    let n = if k == 0 {
                        8
                    } else if k == 1 {
                        5
                    } else {
                        0
                    };
                    if n == 0 {
                        assert_eq!(got, &[0xEE; 4]);
                        continue;
                    }
                    let b: Vec<Option<f32>> = (0..8)
                        .map(|j| (j < n).then_some(y[r * 64 + k * 8 + j]))
                        .collect();
                    let vals = b.iter().flatten();
                    let want = match red {
                        Reduce::BlockSum => tree32(&b).unwrap(),
                        Reduce::BlockMax => vals.fold(f32::NEG_INFINITY, |m, &v| m.max(v)),
                        _ => vals.fold(f32::INFINITY, |m, &v| m.min(v)),
                    };
                    assert_eq!(
                        f32::from_le_bytes(got.try_into().unwrap()),
                        want,
                        "{red:?} r{r} b{k}"
                    );
                }
            }
        }
    }

    #[test]
    fn brcb_broadcasts_each_element_over_a_block() {
        let x: Vec<u16> = (0..16).map(|i| 1000 + i).collect();
        let (out, _) = run(&u16_bytes(&x), &[], |a| {
            let (rs3, rs2) = encode::brcb(2, DType::I16, 2, 20);
            vperm(a, UB_OUT, UB_IN, rs2, rs3);
        })
        .unwrap();
        let w = u16s(&out);
        for r in 0..2 {
            for j in 0..8 {
                let blk = r * 20 + j * 2;
                assert!(
                    w[blk * 16..blk * 16 + 16]
                        .iter()
                        .all(|&v| v == x[r * 8 + j])
                );
                assert!(
                    w[(blk + 1) * 16..(blk + 2) * 16]
                        .iter()
                        .all(|&v| v == 0xEEEE)
                );
            }
        }
    }

    #[test]
    fn gather_mask_packs_selected_elements_and_counts_them() {
        let x: Vec<u16> = (0..768).map(|i| i as u16).collect();
        // The sample's pattern: elements 2..=17 of the first 32 (counter mode, count 32).
        let pat = u16_bytes(&[
            0b1111_1111_1111_1100,
            0b11,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ]);
        let (out, m) = run(&u16_bytes(&x), &pat, |a| {
            set_mask(a, 32);
            let rs3 = encode::gather_mask(1, DType::I16, 1, 8, 8, GATHER_MASK_COUNTER);
            vperm(a, UB_OUT, UB_IN, UB_AUX, rs3);
            a.sync(Pipe::V, Pipe::S);
            a.word(core_asm::csrr(A5, abi::CSR_RSVD_CNT));
        })
        .unwrap();
        assert_eq!(u16s(&out[..32]), (2..18).collect::<Vec<u16>>());
        assert_eq!(&out[32..34], &[0xEE, 0xEE]);
        assert_eq!(m.core.x(A5 as usize), 16);

        // Normal mode, built-in pattern 4 (second of every four), 3 repeats, src0 repeats 16
        // blocks apart; then pattern 2 (odd) on f32.
        let (out, _) = run(&u16_bytes(&x), &[], |a| {
            let rs3 = encode::gather_mask(3, DType::F16, 1, 16, 0, GATHER_MASK_BUILTIN);
            vperm(a, UB_OUT, UB_IN, 4, rs3);
        })
        .unwrap();
        let want: Vec<u16> = (0..3)
            .flat_map(|r| {
                (0..128)
                    .filter(|p| p % 4 == 1)
                    .map(move |p| (r * 256 + p) as u16)
            })
            .collect();
        assert_eq!(want.len(), 96);
        assert_eq!(u16s(&out[..192]), want);
        assert_eq!(&out[192..194], &[0xEE, 0xEE]);
    }

    #[test]
    fn gather_reads_elements_at_byte_offsets_under_the_mask() {
        let y: Vec<f32> = (0..64).map(|i| i as f32 * 1.5).collect();
        let offs: Vec<u32> = (0..128u32).map(|i| ((i * 7) % 64) * 4).collect();
        let off_bytes: Vec<u8> = offs.iter().flat_map(|o| o.to_le_bytes()).collect();
        let (out, _) = run(&f32_bytes(&y), &off_bytes, |a| {
            set_mask(a, u64::MAX as u128 & !(1 << 5));
            vperm(a, UB_OUT, UB_IN, UB_AUX, encode::gather(2, DType::F32, 10));
        })
        .unwrap();
        for r in 0..2 {
            for p in 0..64 {
                let got = &out[(r * 80 + p) * 4..(r * 80 + p) * 4 + 4];
                if p == 5 {
                    assert_eq!(got, &[0xEE; 4]);
                } else {
                    let want = y[offs[r * 64 + p] as usize / 4];
                    assert_eq!(f32::from_le_bytes(got.try_into().unwrap()), want);
                }
            }
        }
        // An offset past the end of UB is a fault naming the element.
        let bad: Vec<u8> = [0u32, 4, 0x3_0000]
            .iter()
            .flat_map(|o| o.to_le_bytes())
            .collect();
        let err = run(&f32_bytes(&y), &bad, |a| {
            set_mask(a, 0b111);
            vperm(a, UB_OUT, UB_IN, UB_AUX, encode::gather(1, DType::F32, 8));
        })
        .map(|_| ())
        .unwrap_err();
        match err {
            Trap::Npu {
                fault: f @ NpuFault::BadGatherOffset { element: 2, .. },
                ..
            } => {
                assert!(f.to_string().contains("offset 0x30000"), "{f}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mask_register_instructions_fault_on_bad_operands() {
        let mut a = Asm::new();
        set_mask(&mut a, 0);
        vred(
            &mut a,
            UB_OUT,
            UB_IN,
            encode::reduce_strides(1, 1, 8),
            encode::reduce(1, DType::F32, Reduce::Sum, ReduceOrder::ValueIndex),
        );
        let (pc, f) = npu_fault(&a.words);
        assert_eq!(pc, Machine::pc_of(a.words.len() - 1));
        assert_eq!(f, NpuFault::EmptyMask { op: "vred" });

        let mut a = Asm::new();
        vred(
            &mut a,
            UB_OUT,
            UB_IN,
            encode::reduce_strides(1, 1, 8),
            encode::reduce(1, DType::I32, Reduce::Max, ReduceOrder::ValueIndex),
        );
        assert!(matches!(
            npu_fault(&a.words).1,
            NpuFault::UnsupportedType { op: "vred", .. }
        ));

        // 255 repeats 32 blocks apart run past the end of UB.
        let mut a = Asm::new();
        vred(
            &mut a,
            UB_OUT,
            UB_IN,
            encode::reduce_strides(1, 1, 32),
            encode::reduce(255, DType::F32, Reduce::Sum, ReduceOrder::ValueIndex),
        );
        assert!(matches!(
            npu_fault(&a.words).1,
            NpuFault::OutOfBuffer { .. }
        ));

        // An order on a sum, and an undefined vperm mode.
        let mut a = Asm::new();
        vred(
            &mut a,
            UB_OUT,
            UB_IN,
            0,
            encode::reduce(1, DType::F32, Reduce::Sum, ReduceOrder::OnlyIndex),
        );
        assert!(matches!(
            npu_fault(&a.words).1,
            NpuFault::BadVectorOperand { .. }
        ));
        let mut a = Asm::new();
        vperm(&mut a, UB_OUT, UB_IN, 0, 7 << 36);
        assert!(matches!(
            npu_fault(&a.words).1,
            NpuFault::BadVectorOperand { .. }
        ));
        let _ = PermMode::Brcb;
    }
}

/// `reps | src_rep << 16 | dst_rep << 40`: the repeat register's value.
fn move_repeat(reps: u64, src_rep: u64, dst_rep: u64) -> u64 {
    reps | src_rep << 16 | dst_rep << 40
}

#[test]
fn the_repeat_register_turns_one_copy_into_an_nd_to_nz_conversion() {
    // A 20 x 48 half matrix, row-major in GM (96-byte rows), to NZ in L1: three column blocks
    // of 16 halves, each its 20 rows of 32 bytes, 32 rows (1024 bytes) apart — one copy with
    // 3 repeats (32 bytes apart in GM), then an ordinary copy, which the register no longer
    // repeats.
    let mut m = Machine::new();
    let mat: Vec<f32> = (0..20 * 24).map(|i| i as f32).collect(); // 20 rows of 96 bytes
    m.gm.write_f32(GM, &mat);
    let l1 = abi::L1_BASE;
    let mut a = Asm::new();
    a.li(A4, move_repeat(3, 32, 1024))
        .word(core_asm::csrw(abi::CSR_MOVE_REPEAT, A4))
        .copy2d(CopyDir::GmToL1, l1, GM, 20, 32, 96, 32)
        .copy(CopyDir::GmToL1, l1 + 0x4000, GM, 64)
        .word(core_asm::csrr(A5, abi::CSR_MOVE_REPEAT));
    let stats = m.run(&a.words).unwrap();
    let img = bytes_f32(&m.core.buffer(Buffer::L1)[..3 * 1024]);
    for blk in 0..3 {
        for r in 0..20 {
            let got = &img[blk * 256 + r * 8..blk * 256 + r * 8 + 8];
            assert_eq!(
                got,
                &mat[r * 24 + blk * 8..r * 24 + blk * 8 + 8],
                "block {blk} row {r}"
            );
        }
        // Rows 20..32 of each column block are not written.
        assert!(
            img[blk * 256 + 160..(blk + 1) * 256]
                .iter()
                .all(|&v| v == 0.0)
        );
    }
    // The second copy moved 64 bytes once, and the register reads 0 after the repeated copy.
    let plain = bytes_f32(&m.core.buffer(Buffer::L1)[0x4000..0x4000 + 128]);
    assert_eq!(&plain[..16], &mat[..16]);
    assert!(plain[16..].iter().all(|&v| v == 0.0));
    assert_eq!(m.core.x(A5 as usize), 0);
    assert_eq!(stats.gm_read_bytes, 3 * 20 * 32 + 64);
    assert_eq!(stats.npu_instructions, 2);
    // One instruction: one setup for all 60 rows.
    assert_eq!(
        stats.pipe_busy.mte2,
        gm_copy_cycles(3 * 20 * 32) + gm_copy_cycles(64)
    );
}

#[test]
fn a_repeated_copy_checks_every_repeat_against_its_buffer() {
    let big = abi::L1_BASE + (CoreConfig::default().npu.buffers.l1 as u64) - 1024;
    // The last repeat past the end of L1.
    let mut a = Asm::new();
    a.li(A4, move_repeat(2, 32, 1024))
        .word(core_asm::csrw(abi::CSR_MOVE_REPEAT, A4))
        .copy2d(CopyDir::GmToL1, big, GM, 4, 32, 64, 32);
    let (_, f) = npu_fault(&a.words);
    assert!(matches!(f, NpuFault::OutOfBuffer { .. }), "{f}");
    // A repeat stride that is not a multiple of 32 on the local side.
    let mut a = Asm::new();
    a.li(A4, move_repeat(2, 32, 48))
        .word(core_asm::csrw(abi::CSR_MOVE_REPEAT, A4))
        .copy2d(CopyDir::GmToL1, abi::L1_BASE, GM, 1, 32, 32, 32);
    let (_, f) = npu_fault(&a.words);
    assert!(
        matches!(
            f,
            NpuFault::Misaligned {
                what: "repeat stride",
                ..
            }
        ),
        "{f}"
    );
}
