//! The extension's C kernels (`examples/kernels/ext_*.c`, linked by
//! `scripts/build-ext-kernels.sh`) run block by block on the core against CPU references, for
//! several shapes (including ones that are not multiples of the tile) and block counts, with
//! their tiling from `core::npu::tiling`. Tolerances are stated per kernel.

mod npu_support;

use npu_support::*;
use npusim_device::config::DeviceConfig;
use npusim_device::core::npu::launch::LaunchModel;
use npusim_device::core::npu::tiling::{self, Buffering};
use npusim_device::core::npu::{f16_to_f32, f32_to_f16};
use npusim_device::core::{Core, CoreConfig, KernelArg, Trap};

struct Env {
    core: Core,
    gm: Gm,
    cfg: CoreConfig,
    model: LaunchModel,
}

fn env(gm_bytes: usize) -> Env {
    let device = DeviceConfig::ascend_910b();
    let cfg = CoreConfig::from_device(&device);
    Env {
        core: Core::new(cfg.clone()),
        gm: Gm::new(gm_bytes),
        cfg,
        model: LaunchModel::from_device(&device),
    }
}

fn ptr(a: u64) -> KernelArg {
    KernelArg::ptr(a)
}

fn run_vadd(
    e: &mut Env,
    sym: &str,
    n: usize,
    blocks: u32,
    buffering: Buffering,
    seed: u64,
) -> (Vec<f32>, Vec<f32>, LaunchRun) {
    let k = Kernel::load("ext_vadd");
    let mut rng = Rng(seed);
    let x = rng.vec(n, -100.0, 100.0);
    let y = rng.vec(n, -100.0, 100.0);
    let bytes = (4 * n as u64).div_ceil(64) * 64;
    let (xa, ya, za) = (DATA, DATA + bytes, DATA + 2 * bytes);
    e.gm.write_f32(xa, &x);
    e.gm.write_f32(ya, &y);
    e.gm.write_f32(za, &vec![f32::NAN; n]);
    let t = tiling::vadd(n as u64, blocks, buffering, &e.cfg.npu);
    let run = launch(
        &mut e.core,
        &mut e.gm,
        &k,
        sym,
        &[ptr(xa), ptr(ya), ptr(za)],
        bytemuck::bytes_of(&t),
        blocks,
        &e.model,
    )
    .unwrap_or_else(|t| panic!("{sym}: {t}"));
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    (want, e.gm.read_f32(za, n), run)
}

/// Tolerance: exact (one f32 addition per element, as on the CPU).
#[test]
fn vector_add_is_exact_for_every_shape_and_block_count() {
    let mut e = env(4 << 20);
    for &n in &[1usize, 7, 1000, 4099, 40_000, 100_003] {
        for &blocks in &[1u32, 3, 8, 24] {
            for (sym, buf) in [
                ("ext_vadd_single", Buffering::Single),
                ("ext_vadd_double", Buffering::Double),
            ] {
                let (want, got, _) =
                    run_vadd(&mut e, sym, n, blocks, buf, n as u64 + blocks as u64);
                assert_eq!(got, want, "{sym} n={n} blocks={blocks}");
            }
        }
    }
}

#[test]
fn a_kernel_that_forgets_its_wait_adds_stale_data() {
    let mut e = env(1 << 20);
    let (want, got, _) = run_vadd(
        &mut e,
        "ext_vadd_missing_wait",
        4096,
        1,
        Buffering::Single,
        5,
    );
    // UB was zero when the add ran: z = 0 + 0.
    assert!(got.iter().all(|&v| v == 0.0), "{:?}", &got[..4]);
    assert_ne!(got, want);
    let (want, got, _) = run_vadd(&mut e, "ext_vadd_single", 4096, 1, Buffering::Single, 5);
    assert_eq!(got, want);
}

#[test]
fn double_buffering_is_at_least_1_6_times_faster_on_a_core() {
    let mut e = env(8 << 20);
    let n = 512 * 1024;
    let (_, _, single) = run_vadd(&mut e, "ext_vadd_single", n, 1, Buffering::Single, 1);
    let (_, _, double) = run_vadd(&mut e, "ext_vadd_double", n, 1, Buffering::Double, 1);
    let ratio = single.estimate.cycles as f64 / double.estimate.cycles as f64;
    assert!(
        ratio >= 1.6,
        "single {} vs double {} cycles: {ratio:.2}x",
        single.estimate.cycles,
        double.estimate.cycles
    );
    // The double-buffered kernel keeps MTE2 (its bound) busy most of the time.
    let b = &double.blocks[0].stats;
    assert!(
        b.pipe_busy.mte2 as f64 / b.block_cycles as f64 > 0.85,
        "{b:?}"
    );
}

fn softmax_ref(x: &[f32], cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let m = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| (v / s) as f32));
    }
    out
}

/// Tolerance: |y - ref| <= 1e-6 + 2e-5 * ref (f64 reference; the kernel rounds to f32 at every
/// step and scales by a rounded reciprocal).
#[test]
fn softmax_matches_the_reference() {
    let k = Kernel::load("ext_softmax");
    let mut e = env(8 << 20);
    for &(rows, cols) in &[
        (1usize, 1usize),
        (3, 10),
        (7, 1000),
        (64, 129),
        (33, 4096),
        (5, 20_000),
    ] {
        for &blocks in &[1u32, 5, 24] {
            let mut rng = Rng((rows * cols) as u64 + blocks as u64);
            let x = rng.vec(rows * cols, -8.0, 8.0);
            let bytes = (4 * rows * cols) as u64;
            let (xa, ya) = (DATA, DATA + bytes.div_ceil(64) * 64);
            e.gm.write_f32(xa, &x);
            let t = tiling::softmax(rows as u64, cols as u64, blocks, &e.cfg.npu).unwrap();
            launch(
                &mut e.core,
                &mut e.gm,
                &k,
                "ext_softmax",
                &[ptr(xa), ptr(ya)],
                bytemuck::bytes_of(&t),
                blocks,
                &e.model,
            )
            .unwrap_or_else(|t| panic!("{rows}x{cols}: {t}"));
            let got = e.gm.read_f32(ya, rows * cols);
            for (i, (g, w)) in got.iter().zip(softmax_ref(&x, cols)).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-6 + 2e-5 * w,
                    "{rows}x{cols}/{blocks} [{i}]: {g} vs {w}"
                );
            }
        }
    }
}

fn layernorm_ref(x: &[f32], g: &[f32], b: &[f32], cols: usize, eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + eps as f64).sqrt();
        out.extend(
            row.iter()
                .enumerate()
                .map(|(c, &v)| ((v as f64 - mean) * rstd * g[c] as f64 + b[c] as f64) as f32),
        );
    }
    out
}

/// Tolerance: |y - ref| <= 2e-5 * (1 + |ref|) (f64 reference; outputs are O(1)).
#[test]
fn layernorm_matches_the_reference() {
    let k = Kernel::load("ext_layernorm");
    let mut e = env(8 << 20);
    for &(rows, cols) in &[(1usize, 1usize), (3, 10), (17, 768), (40, 1000), (9, 4097)] {
        for &blocks in &[1u32, 4, 24] {
            let mut rng = Rng(31 * (rows * cols) as u64 + blocks as u64);
            let x: Vec<f32> = rng.vec(rows * cols, -3.0, 5.0);
            let g = rng.vec(cols, 0.5, 1.5);
            let b = rng.vec(cols, -1.0, 1.0);
            let eps = 1e-5;
            let round = |v: u64| v.div_ceil(64) * 64;
            let xa = DATA;
            let ga = xa + round(4 * (rows * cols) as u64);
            let ba = ga + round(4 * cols as u64);
            let ya = ba + round(4 * cols as u64);
            e.gm.write_f32(xa, &x);
            e.gm.write_f32(ga, &g);
            e.gm.write_f32(ba, &b);
            let t = tiling::layernorm(rows as u64, cols as u64, eps, blocks, &e.cfg.npu).unwrap();
            launch(
                &mut e.core,
                &mut e.gm,
                &k,
                "ext_layernorm",
                &[ptr(xa), ptr(ga), ptr(ba), ptr(ya)],
                bytemuck::bytes_of(&t),
                blocks,
                &e.model,
            )
            .unwrap_or_else(|t| panic!("{rows}x{cols}: {t}"));
            let got = e.gm.read_f32(ya, rows * cols);
            for (i, (gv, w)) in got
                .iter()
                .zip(layernorm_ref(&x, &g, &b, cols, eps))
                .enumerate()
            {
                assert!(
                    (gv - w).abs() <= 2e-5 * (1.0 + w.abs()),
                    "{rows}x{cols}/{blocks} [{i}]: {gv} vs {w}"
                );
            }
        }
    }
}

/// Runs the f16 matmul and returns (reference, result). The reference accumulates every
/// element's products in k order in f32, which is exactly what the cube does, so the
/// tolerance is zero.
fn run_matmul(
    e: &mut Env,
    m: usize,
    n: usize,
    k: usize,
    blocks: u32,
) -> (Vec<f32>, Vec<f32>, LaunchRun) {
    let kernel = Kernel::load("ext_matmul");
    let mut rng = Rng((m * 1_000_003 + n * 1009 + k) as u64);
    let a16: Vec<u16> = rng
        .vec(m * k, -1.0, 1.0)
        .into_iter()
        .map(f32_to_f16)
        .collect();
    let b16: Vec<u16> = rng
        .vec(k * n, -1.0, 1.0)
        .into_iter()
        .map(f32_to_f16)
        .collect();
    let round = |v: u64| v.div_ceil(64) * 64;
    let aa = DATA;
    let ba = aa + round(2 * (m * k) as u64);
    let ca = ba + round(2 * (k * n) as u64);
    e.gm.write_u16(aa, &a16);
    e.gm.write_u16(ba, &b16);
    let t = tiling::matmul(m as u64, n as u64, k as u64, blocks, &e.cfg.npu).unwrap();
    let run = launch(
        &mut e.core,
        &mut e.gm,
        &kernel,
        "ext_matmul_f16",
        &[ptr(aa), ptr(ba), ptr(ca)],
        bytemuck::bytes_of(&t),
        blocks,
        &e.model,
    )
    .unwrap_or_else(|tr| panic!("{m}x{n}x{k} {t:?}: {tr}"));
    let a: Vec<f32> = a16.iter().map(|&h| f16_to_f32(h)).collect();
    let b: Vec<f32> = b16.iter().map(|&h| f16_to_f32(h)).collect();
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for kk in 0..k {
            let av = a[i * k + kk];
            for j in 0..n {
                want[i * n + j] += av * b[kk * n + j];
            }
        }
    }
    (want, e.gm.read_f32(ca, m * n), run)
}

#[test]
fn matmul_matches_the_reference_exactly() {
    let mut e = env(8 << 20);
    for &(m, n, k) in &[
        (16, 16, 16),
        (1, 1, 1),
        (33, 47, 70),
        (100, 60, 1000),
        (128, 256, 384),
        (200, 130, 300),
        (300, 20, 40),
    ] {
        for &blocks in &[1u32, 4, 24] {
            let (want, got, _) = run_matmul(&mut e, m, n, k, blocks);
            assert!(got == want, "{m}x{n}x{k} over {blocks} blocks");
        }
    }
}

#[test]
fn matmul_tilings_that_keep_or_stream_the_a_panel_agree() {
    // The same problem with A resident in L1 and with A streamed, and with one or two L0C
    // buffers.
    let mut e = env(8 << 20);
    let (m, n, k) = (160, 96, 200);
    let kernel = Kernel::load("ext_matmul");
    let mut rng = Rng(3);
    let a16: Vec<u16> = rng
        .vec(m * k, -1.0, 1.0)
        .into_iter()
        .map(f32_to_f16)
        .collect();
    let b16: Vec<u16> = rng
        .vec(k * n, -1.0, 1.0)
        .into_iter()
        .map(f32_to_f16)
        .collect();
    let (aa, ba, ca) = (DATA, DATA + 0x20000, DATA + 0x40000);
    e.gm.write_u16(aa, &a16);
    e.gm.write_u16(ba, &b16);
    let mut results = Vec::new();
    for (resident, cbufs, tk1) in [(1, 2, 64), (0, 2, 64), (1, 1, 128), (0, 1, 32)] {
        let t = tiling::MatmulTiling {
            m: m as u32,
            n: n as u32,
            k: k as u32,
            tm: 64,
            tn: 32,
            tk1,
            tk0: 32,
            a_resident: resident,
            l0c_buffers: cbufs,
            reserved: [0; 3],
        };
        launch(
            &mut e.core,
            &mut e.gm,
            &kernel,
            "ext_matmul_f16",
            &[ptr(aa), ptr(ba), ptr(ca)],
            bytemuck::bytes_of(&t),
            2,
            &e.model,
        )
        .unwrap();
        results.push(e.gm.read_f32(ca, m * n));
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn a_launch_without_tiling_aborts() {
    let mut e = env(1 << 20);
    let k = Kernel::load("ext_matmul");
    let err = launch(
        &mut e.core,
        &mut e.gm,
        &k,
        "ext_matmul_f16",
        &[ptr(DATA), ptr(DATA), ptr(DATA)],
        &[],
        1,
        &e.model,
    )
    .err()
    .unwrap();
    assert!(matches!(err, Trap::Abort { code: 1, .. }), "{err}");
}

#[test]
fn the_matmul_tiling_estimate_tracks_the_simulation() {
    let mut e = env(8 << 20);
    for &(m, n, k, blocks) in &[
        (256usize, 256usize, 256usize, 4u32),
        (200, 130, 300, 3),
        (512, 352, 128, 8),
    ] {
        let t = tiling::matmul(m as u64, n as u64, k as u64, blocks, &e.cfg.npu).unwrap();
        let est = tiling::matmul_block_estimate(&t, blocks, &e.cfg.npu.timing);
        let (_, _, run) = run_matmul(&mut e, m, n, k, blocks);
        let sim = run.estimate.busiest_core_cycles;
        let err = (est as f64 - sim as f64).abs() / sim as f64;
        // Small shapes are partly bound by the scalar unit, which the dry run only
        // approximates.
        assert!(
            err < 0.10,
            "{m}x{n}x{k}/{blocks}: estimate {est}, simulated {sim}"
        );
    }
}
