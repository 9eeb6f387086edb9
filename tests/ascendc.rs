//! Ascend C kernels (`examples/ascendc/*.cpp`, written against `device/sdk/ascendc/
//! kernel_operator.h` and built by `scripts/build-ascendc-kernels.sh`) run through the normal
//! launch API and match CPU references.

use npusim::Launch;
use npusim::codes;
use npusim::components::binary::LaunchStats;
use npusim::device::core::npu::{f16_to_f32, f32_to_f16};
use npusim::prelude::*;

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::default()).unwrap()
}

fn load(rt: &Runtime, object: &str) -> Binary {
    let path = format!("{}/examples/ascendc/{object}", env!("CARGO_MANIFEST_DIR"));
    rt.binaries()
        .load_file(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn upload<T: bytemuck::Pod>(rt: &Runtime, data: &[T]) -> DevicePtr {
    let p = rt
        .memory()
        .malloc((std::mem::size_of_val(data) as u64).max(64))
        .unwrap();
    rt.memory().memcpy_htod(p, data).unwrap();
    p
}

fn download<T: bytemuck::Pod + Default + Clone>(rt: &Runtime, p: DevicePtr, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    rt.memory().memcpy_dtoh(&mut out, p).unwrap();
    out
}

fn halves(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| f32_to_f16(x)).collect()
}

/// Runs `kernel` on `blocks` blocks and returns the launch's simulated cycles.
fn run(rt: &Runtime, k: Kernel, blocks: u32, args: &[Arg], s: Stream) -> u64 {
    rt.submit(Launch::new(k, blocks, args, s)).unwrap();
    rt.streams().synchronize(s).unwrap();
    rt.binaries().take_launch_stats().pop().unwrap().cycles
}

const N: usize = 8 * 2048;

#[test]
fn the_half_add_sample_matches_the_cpu_bit_for_bit_single_and_double_buffered() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.streams().create().unwrap();
    let x: Vec<f32> = (0..N).map(|i| (i % 97) as f32 * 0.37 - 9.0).collect();
    let y: Vec<f32> = (0..N).map(|i| (i % 13) as f32 * 1.75 + 0.001).collect();
    let (hx, hy) = (halves(&x), halves(&y));
    let (dx, dy) = (upload(&rt, &hx), upload(&rt, &hy));
    let want: Vec<u16> = hx
        .iter()
        .zip(&hy)
        .map(|(&a, &b)| f32_to_f16(f16_to_f32(a) + f16_to_f32(b)))
        .collect();
    let mut cycles = Vec::new();
    for name in ["add_custom", "add_custom_single"] {
        let k = rt.binaries().get_function(bin, name).unwrap();
        let dz = rt.memory().malloc(2 * N as u64).unwrap();
        cycles.push(run(&rt, k, 8, &[dx.into(), dy.into(), dz.into()], s));
        let z: Vec<u16> = download(&rt, dz, N);
        assert_eq!(z, want, "{name}");
    }
    // At the sample's shape (16 tiles of 128 halves per block) the scalar unit's queue
    // bookkeeping dominates, so buffering changes little; both finish within a few µs.
    assert!(cycles.iter().all(|&c| c > 0 && c < 20_000), "{cycles:?}");
}

#[test]
fn the_float_add_and_the_tiled_adds_match_the_cpu() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.streams().create().unwrap();
    let x: Vec<f32> = (0..N).map(|i| i as f32 * 0.25).collect();
    let y: Vec<f32> = (0..N).map(|i| 1000.0 - i as f32 * 0.5).collect();
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let k = rt.binaries().get_function(bin, "add_custom_f32").unwrap();
    let dz = rt.memory().malloc(4 * N as u64).unwrap();
    run(&rt, k, 8, &[dx.into(), dy.into(), dz.into()], s);
    assert_eq!(download::<f32>(&rt, dz, N), want);

    // Tiling by value: {totalLength, tileNum} packed in one register (LP64).
    let total = 3 * 4096usize;
    let k = rt
        .binaries()
        .get_function(bin, "add_custom_tiling_f32")
        .unwrap();
    let dz = rt.memory().malloc(4 * total as u64).unwrap();
    let packed = total as u64 | 4 << 32;
    run(
        &rt,
        k,
        3,
        &[dx.into(), dy.into(), dz.into(), packed.into()],
        s,
    );
    assert_eq!(download::<f32>(&rt, dz, total), want[..total]);

    // Tiling through a device pointer, read with GET_TILING_DATA.
    let (hx, hy) = (halves(&x), halves(&y));
    let (hdx, hdy) = (upload(&rt, &hx), upload(&rt, &hy));
    let tiling = upload(&rt, &[N as u32, 2u32]);
    let k = rt
        .binaries()
        .get_function(bin, "add_custom_tiling")
        .unwrap();
    let dz = rt.memory().malloc(2 * N as u64).unwrap();
    run(
        &rt,
        k,
        16,
        &[hdx.into(), hdy.into(), dz.into(), tiling.into()],
        s,
    );
    let z: Vec<u16> = download(&rt, dz, N);
    for i in 0..N {
        assert_eq!(
            z[i],
            f32_to_f16(f16_to_f32(hx[i]) + f16_to_f32(hy[i])),
            "[{i}]"
        );
    }
}

#[test]
fn a_tiling_that_does_not_divide_the_work_fails_the_launch_with_the_assert() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.streams().create().unwrap();
    let d = rt.memory().malloc(4096).unwrap();
    let tiling = upload(&rt, &[1000u32, 3u32]);
    let k = rt
        .binaries()
        .get_function(bin, "add_custom_tiling")
        .unwrap();
    rt.submit(Launch::new(
        k,
        2,
        &[d.into(), d.into(), d.into(), tiling.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert!(err.to_string().contains("134"), "{err}");
}

#[test]
fn forgetting_enque_and_deque_of_the_inputs_adds_stale_bytes() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.streams().create().unwrap();
    let x = halves(&vec![1.5; N]);
    let y = halves(&vec![2.0; N]);
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    let dz = rt.memory().malloc(2 * N as u64).unwrap();
    let k = rt
        .binaries()
        .get_function(bin, "add_custom_unsynced")
        .unwrap();
    run(&rt, k, 8, &[dx.into(), dy.into(), dz.into()], s);
    let z: Vec<u16> = download(&rt, dz, N);
    // The first tile of every block is added before its copies land: UB still holds zeros.
    assert_eq!(f16_to_f32(z[0]), 0.0);
    assert!(z.iter().any(|&v| f16_to_f32(v) != 3.5));
}

#[test]
fn sub_in_the_repeat_form_matches_the_cpu() {
    let rt = rt();
    let bin = load(&rt, "sub_custom.o");
    let s = rt.streams().create().unwrap();
    let n = 4 * 2 * 2 * 1024;
    let x: Vec<f32> = (0..n).map(|i| (i % 101) as f32 * 0.11).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 3.3).collect();
    let (hx, hy) = (halves(&x), halves(&y));
    let (dx, dy) = (upload(&rt, &hx), upload(&rt, &hy));
    let dz = rt.memory().malloc(2 * n as u64).unwrap();
    let tiling = upload(&rt, &[n as u32, 2]);
    let k = rt.binaries().get_function(bin, "sub_custom").unwrap();
    run(
        &rt,
        k,
        4,
        &[dx.into(), dy.into(), dz.into(), tiling.into()],
        s,
    );
    let z: Vec<u16> = download(&rt, dz, n);
    for i in 0..n {
        let want = f32_to_f16(f16_to_f32(hx[i]) - f16_to_f32(hy[i]));
        assert_eq!(z[i], want, "[{i}]");
    }
}

#[test]
fn leaky_relu_with_a_float_argument_matches_the_cpu_on_a_ragged_length() {
    let rt = rt();
    let bin = load(&rt, "leaky_relu_custom.o");
    let s = rt.streams().create().unwrap();
    let n = 10_007usize;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 5000.0) * 0.013).collect();
    let hx = halves(&x);
    let dx = upload(&rt, &hx);
    let dy = rt.memory().malloc(2 * n as u64 + 64).unwrap();
    let slope = 0.1f32;
    let k = rt
        .binaries()
        .get_function(bin, "leaky_relu_custom")
        .unwrap();
    run(
        &rt,
        k,
        5,
        &[dx.into(), dy.into(), (n as u64).into(), Arg::F32(slope)],
        s,
    );
    let y: Vec<u16> = download(&rt, dy, n);
    let hs = f16_to_f32(f32_to_f16(slope));
    for i in 0..n {
        let v = f16_to_f32(hx[i]);
        let want = if v > 0.0 { hx[i] } else { f32_to_f16(v * hs) };
        assert_eq!(y[i], want, "[{i}] x = {v}");
    }
}

#[test]
fn addcdiv_through_float_casts_matches_the_cpu() {
    let rt = rt();
    let bin = load(&rt, "addcdiv_custom.o");
    let s = rt.streams().create().unwrap();
    let (n, tile, value) = (6 * 2048usize, 512u32, 0.75f32);
    let inp = halves(
        &(0..n)
            .map(|i| (i % 31) as f32 * 0.2 - 3.0)
            .collect::<Vec<_>>(),
    );
    let a = halves(
        &(0..n)
            .map(|i| (i % 17) as f32 * 0.9 - 7.0)
            .collect::<Vec<_>>(),
    );
    let b = halves(&(0..n).map(|i| (i % 5) as f32 + 0.5).collect::<Vec<_>>());
    let (di, da, db) = (upload(&rt, &inp), upload(&rt, &a), upload(&rt, &b));
    let dy = rt.memory().malloc(2 * n as u64).unwrap();
    let mut t = [0u32; 3];
    t[0] = n as u32;
    t[1] = tile;
    t[2] = value.to_bits();
    let tiling = upload(&rt, &t);
    let k = rt.binaries().get_function(bin, "addcdiv_custom").unwrap();
    run(
        &rt,
        k,
        6,
        &[di.into(), da.into(), db.into(), dy.into(), tiling.into()],
        s,
    );
    let y: Vec<u16> = download(&rt, dy, n);
    for i in 0..n {
        let q = f16_to_f32(a[i]) / f16_to_f32(b[i]);
        let want = f32_to_f16(f16_to_f32(inp[i]) + q * value);
        assert_eq!(y[i], want, "[{i}]");
    }
}

fn rows_input(rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| ((i * 37) % 101) as f32 * 0.05 - 2.0)
        .collect()
}

#[test]
fn row_softmax_matches_an_f64_reference() {
    let rt = rt();
    let bin = load(&rt, "softmax_custom.o");
    let s = rt.streams().create().unwrap();
    let (rows, cols) = (37usize, 200usize);
    let x = rows_input(rows, cols);
    let dx = upload(&rt, &x);
    let dy = rt.memory().malloc(4 * (rows * cols) as u64).unwrap();
    let tiling = upload(&rt, &[rows as u32, cols as u32]);
    let k = rt.binaries().get_function(bin, "softmax_custom").unwrap();
    run(&rt, k, 8, &[dx.into(), dy.into(), tiling.into()], s);
    let y: Vec<f32> = download(&rt, dy, rows * cols);
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
        for c in 0..cols {
            let want = (row[c] as f64 - m).exp() / sum;
            let got = y[r * cols + c] as f64;
            assert!(
                (got - want).abs() <= 1e-6 + 2e-5 * want,
                "[{r}, {c}] {got} vs {want}"
            );
        }
    }
}

#[test]
fn layer_norm_matches_an_f64_reference() {
    let rt = rt();
    let bin = load(&rt, "layer_norm_custom.o");
    let s = rt.streams().create().unwrap();
    let (rows, cols, eps) = (29usize, 768usize, 1e-5f32);
    let x = rows_input(rows, cols);
    let gamma: Vec<f32> = (0..cols).map(|i| 1.0 + (i % 9) as f32 * 0.1).collect();
    let beta: Vec<f32> = (0..cols).map(|i| (i % 4) as f32 * 0.25 - 0.5).collect();
    let (dx, dg, db) = (upload(&rt, &x), upload(&rt, &gamma), upload(&rt, &beta));
    let dy = rt.memory().malloc(4 * (rows * cols) as u64).unwrap();
    let tiling = upload(&rt, &[rows as u32, cols as u32, eps.to_bits()]);
    let k = rt
        .binaries()
        .get_function(bin, "layer_norm_custom")
        .unwrap();
    run(
        &rt,
        k,
        6,
        &[dx.into(), dg.into(), db.into(), dy.into(), tiling.into()],
        s,
    );
    let y: Vec<f32> = download(&rt, dy, rows * cols);
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + eps as f64).sqrt();
        for c in 0..cols {
            let want = (row[c] as f64 - mean) * rstd * gamma[c] as f64 + beta[c] as f64;
            let got = y[r * cols + c] as f64;
            assert!(
                (got - want).abs() <= 2e-5 * (1.0 + want.abs()),
                "[{r}, {c}] {got} vs {want}"
            );
        }
    }
}

#[test]
fn row_sums_match_the_cpu_in_the_kernels_order() {
    let rt = rt();
    let bin = load(&rt, "reduce_sum_custom.o");
    let s = rt.streams().create().unwrap();
    let (rows, cols) = (21usize, 20_000usize);
    let x = rows_input(rows, cols);
    let dx = upload(&rt, &x);
    let dy = rt.memory().malloc(4 * rows as u64 + 64).unwrap();
    let tiling = upload(&rt, &[rows as u32, cols as u32]);
    let k = rt
        .binaries()
        .get_function(bin, "reduce_sum_custom")
        .unwrap();
    run(&rt, k, 4, &[dx.into(), dy.into(), tiling.into()], s);
    let y: Vec<f32> = download(&rt, dy, rows);
    for r in 0..rows {
        // Each tile of 8192 summed exactly and rounded once; the tile sums added in f32.
        let row = &x[r * cols..(r + 1) * cols];
        let want = row
            .chunks(8192)
            .map(|t| t.iter().map(|&v| v as f64).sum::<f64>() as f32)
            .fold(0.0f32, |a, t| a + t);
        assert_eq!(y[r], want, "row {r}");
    }
}

#[test]
fn on_the_910b_a_vector_only_kernel_spreads_its_blocks_over_two_vector_cores_per_ai_core() {
    use npusim::device::core::Program;
    use npusim::device::core::npu::launch::is_vector_only;
    let image = |name: &str| {
        let path = format!("{}/examples/kernels/{name}", env!("CARGO_MANIFEST_DIR"));
        Program::decode(0x4000_0000, &std::fs::read(path).unwrap())
    };
    assert!(is_vector_only(&image("ext_vadd.bin")));
    assert!(!is_vector_only(&image("ext_matmul.bin")));

    let rt = rt();
    let dev = rt.device_config(0).unwrap();
    assert_eq!((dev.ai_cores, dev.vector_cores_per_ai_core), (24, 2));
    let bin = load(&rt, "add_custom.o");
    let s = rt.streams().create().unwrap();
    let n = 48 * 2 * 1024usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let dx = upload(&rt, &x);
    let dz = rt.memory().malloc(4 * n as u64).unwrap();
    let k = rt
        .binaries()
        .get_function(bin, "add_custom_tiling_f32")
        .unwrap();
    let packed = n as u64 | 1 << 32;
    rt.submit(Launch::new(
        k,
        48,
        &[dx.into(), dx.into(), dz.into(), packed.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let l = rt.binaries().take_launch_stats().pop().unwrap();
    let cores: std::collections::BTreeSet<u32> = l.blocks.iter().map(|b| b.core).collect();
    assert_eq!(cores.len(), 48, "one vector core per block");
    let slowest = l.blocks.iter().map(|b| b.cycles).max().unwrap();
    assert_eq!(l.cycles, slowest.max(l.hbm_floor_cycles));
    let z: Vec<f32> = download(&rt, dz, n);
    assert!(z.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));

    // The small preset keeps one core type: 8 blocks on its 4 cores, two each.
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap();
    let bin = load(&rt, "add_custom.o");
    let s = rt.streams().create().unwrap();
    let dx = upload(&rt, &x[..8 * 2048]);
    let dz = rt.memory().malloc(4 * 8 * 2048).unwrap();
    let k = rt.binaries().get_function(bin, "add_custom_f32").unwrap();
    rt.submit(Launch::new(k, 8, &[dx.into(), dx.into(), dz.into()], s))
        .unwrap();
    rt.streams().synchronize(s).unwrap();
    let l = rt.binaries().take_launch_stats().pop().unwrap();
    assert_eq!(l.blocks.iter().map(|b| b.core).max(), Some(3));
}

#[test]
fn the_api_probe_computes_and_prints_what_the_layer_promises() {
    let rt = rt();
    let bin = load(&rt, "api_probe.o");
    let s = rt.streams().create().unwrap();
    let out = rt.memory().malloc(16).unwrap();
    let k = rt.binaries().get_function(bin, "api_probe").unwrap();
    run(&rt, k, 1, &[out.into()], s);
    assert_eq!(download::<f32>(&rt, out, 4), [7.0, -1.0, 7.0, -3.0]);
    assert_eq!(
        rt.binaries().take_kernel_log(),
        [
            "[api_probe block 0] probe: block 0 of 1, max 7.00, min -1.000000, picked 7.000000, \
             floor -3, hex ff, ok"
        ]
    );
}

#[test]
fn get_tiling_data_with_a_null_pointer_reads_the_launchs_tiling_words() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.streams().create().unwrap();
    let n = 4 * 1024usize;
    let x = halves(&(0..n).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
    let dx = upload(&rt, &x);
    let dz = rt.memory().malloc(2 * n as u64).unwrap();
    let k = rt
        .binaries()
        .get_function(bin, "add_custom_tiling")
        .unwrap();
    rt.submit(
        Launch::new(k, 4, &[dx.into(), dx.into(), dz.into(), 0u64.into()], s)
            .tiling(&[n as u32, 1]),
    )
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let z: Vec<u16> = download(&rt, dz, n);
    for i in 0..n {
        assert_eq!(z[i], f32_to_f16(2.0 * f16_to_f32(x[i])), "[{i}]");
    }
}

#[test]
fn a_deque_with_nothing_enqueued_fails_the_launch_instead_of_hanging() {
    let rt = rt();
    let bin = load(&rt, "api_probe.o");
    let s = rt.streams().create().unwrap();
    let out = rt.memory().malloc(256).unwrap();
    let k = rt
        .binaries()
        .get_function(bin, "deque_without_enque")
        .unwrap();
    rt.submit(Launch::new(k, 1, &[out.into()], s)).unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(
        err.contains("wait_flag(MTE2->V, event 0) has no set_flag"),
        "{err}"
    );
}

/// Runs `compile_env` of `bin` on `blocks` blocks and returns its 8 + blocks
/// words: the mode macros, two limits, and each block's `get_block_idx() + 1`.
fn compile_env_words(rt: &Runtime, bin: Binary, blocks: u32) -> Vec<i32> {
    let k = rt.binaries().get_function(bin, "compile_env").unwrap();
    let s = rt.streams().create().unwrap();
    let out = upload(rt, &[0i32; 64]);
    run(rt, k, blocks, &[out.into()], s);
    download(rt, out, 8 + blocks as usize)
}

#[test]
fn the_npu_build_defines_cann_s_device_macros_and_the_intrinsic_spellings_work() {
    let rt = rt();
    let bin = load(&rt, "compile_env.o");
    let w = compile_env_words(&rt, bin, 4);
    // __CCE_AICORE__ = 220 and __DAV_C220_VEC__ (the default dav-c220-vec); no cube macro,
    // no __CCE_KT_TEST__, no ASCENDC_CPU_DEBUG; get_block_num() and <limits>.
    assert_eq!(&w[..8], &[220, 1, 0, 0, 0, 4, i32::MIN, 255]);
    assert_eq!(
        &w[8..],
        &[1, 2, 3, 4],
        "get_block_idx() + 1 from each block"
    );
}

/// Distance in units in the last place between two floats of the same sign class (0 when
/// both are the same NaN-ness or bit-equal).
fn ulps(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    let key = |x: f32| {
        let u = x.to_bits() as i64;
        if u & 0x8000_0000 != 0 {
            0x8000_0000 - u
        } else {
            u
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

#[test]
fn cmath_on_the_core_is_exact_or_within_its_documented_ulp_bounds() {
    let rt = rt();
    let bin = load(&rt, "compile_env.o");
    let k = rt.binaries().get_function(bin, "std_math").unwrap();
    let s = rt.streams().create().unwrap();
    // Both signs, zeros, subnormals, halves (the rounding ties), the exp range's ends, huge
    // values, infinities and NaN.
    let mut x: Vec<f32> = vec![
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        88.7,
        -103.0,
        -87.0,
        1e30,
        -1e30,
        8388609.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
    ];
    x.extend((0..1500).map(|i| (i as f32 - 750.0) * 0.1373));
    x.extend((0..500).map(|i| 1.0 + i as f32 * 7.9e-4));
    x.extend(
        (0..500)
            .map(|i| f32::from_bits(0x0080_0000 + (i as u64 * 0x00fe_1234 % 0x7f00_0000) as u32)),
    );
    let n = x.len();
    let dx = upload(&rt, &x);
    let dy = rt.memory().malloc((16 * n * 4) as u64).unwrap();
    run(&rt, k, 4, &[dx.into(), dy.into(), (n as u64).into()], s);
    let y: Vec<f32> = download(&rt, dy, 16 * n);
    // The reference: f64, rounded once (correctly rounded but for vanishingly rare double
    // roundings), and the exact operations.
    let f64r = |f: fn(f64) -> f64| move |v: f32| f(v as f64) as f32;
    type Check = (
        &'static str,
        Box<dyn Fn(f32) -> f32>,
        Box<dyn Fn(f32) -> u64>,
    );
    let exact = || Box::new(|_: f32| 0u64) as Box<dyn Fn(f32) -> u64>;
    let within = |u: u64| Box::new(move |_: f32| u) as Box<dyn Fn(f32) -> u64>;
    let checks: Vec<Check> = vec![
        ("exp", Box::new(f64r(f64::exp)), within(1)),
        ("log", Box::new(f64r(f64::ln)), within(1)),
        ("sqrt", Box::new(f32::sqrt), exact()),
        ("exp2", Box::new(f64r(f64::exp2)), within(1)),
        ("log2", Box::new(f64r(f64::log2)), within(2)),
        ("log10", Box::new(f64r(f64::log10)), within(2)),
        ("floor", Box::new(f32::floor), exact()),
        ("ceil", Box::new(f32::ceil), exact()),
        ("round", Box::new(f32::round), exact()),
        ("trunc", Box::new(f32::trunc), exact()),
        ("rint", Box::new(f32::round_ties_even), exact()),
        ("fabs", Box::new(f32::abs), exact()),
        ("pow(x, 2)", Box::new(|v: f32| v * v), exact()),
        (
            "pow(x, 0.75)",
            Box::new(|v: f32| (v as f64).powf(0.75) as f32),
            // pow is exp2(y log2 x): its documented bound grows with |y log2 x|.
            Box::new(|v: f32| {
                2u64.saturating_add((1.5 * (v as f64).abs().log2()).abs().ceil() as u64)
            }),
        ),
        ("fmin(x, 1)", Box::new(|v: f32| v.min(1.0)), exact()),
        (
            "fma(x, x, 1)",
            Box::new(|v: f32| v.mul_add(v, 1.0)),
            exact(),
        ),
    ];
    for (f, (name, reference, bound)) in checks.iter().enumerate() {
        let mut worst = (0u64, 0.0f32);
        for (i, &v) in x.iter().enumerate() {
            let (got, want) = (y[f * n + i], reference(v));
            let d = ulps(got, want);
            assert!(
                d <= bound(v),
                "std::{name}({v:e} = {:#x}) = {got:e}, want {want:e} ({d} ulp)",
                v.to_bits()
            );
            if d > worst.0 {
                worst = (d, v);
            }
        }
        eprintln!("std::{name}: worst {} ulp (at {:e})", worst.0, worst.1);
    }
}

#[test]
fn the_local_tensor_operators_run_the_vector_apis_they_stand_for() {
    let rt = rt();
    let bin = load(&rt, "compile_env.o");
    let k = rt.binaries().get_function(bin, "tensor_operators").unwrap();
    let s = rt.streams().create().unwrap();
    let a: Vec<f32> = (0..256).map(|i| i as f32 * 0.37 - 20.0).collect();
    let b: Vec<f32> = (0..256).map(|i| 1.0 + (i % 11) as f32 * 0.3).collect();
    let (da, db) = (upload(&rt, &a), upload(&rt, &b));
    let out = rt.memory().malloc(6 * 256 * 4).unwrap();
    run(&rt, k, 1, &[da.into(), db.into(), out.into()], s);
    let got: Vec<f32> = download(&rt, out, 6 * 256);
    for i in 0..256 {
        let r0 = a[i] * b[i];
        let r1 = r0 + 1.5;
        let r2 = r1 - a[i];
        let r3 = 2.0 * r2;
        let r4 = r3 / b[i];
        let r5 = r4 - 0.25;
        let want = [r0, r1, r2, r3, r4, r5];
        for (j, w) in want.iter().enumerate() {
            assert_eq!(got[j * 256 + i].to_bits(), w.to_bits(), "r{j}[{i}]");
        }
    }
}

#[test]
fn and_or_not_act_on_the_bits_of_uint16_and_int32_tensors() {
    for obj in objects("api_probe") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let k = rt.binaries().get_function(bin, "bitwise_probe").unwrap();
        let s = rt.streams().create().unwrap();
        let a16: Vec<u16> = (0..128u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 16) as u16)
            .collect();
        let b16: Vec<u16> = (0..128u32).map(|i| (i * 40503 + 0x0f0f) as u16).collect();
        let a32: Vec<i32> = (0..64i32).map(|i| i.wrapping_mul(-1_640_531_535)).collect();
        let b32: Vec<i32> = (0..64).map(|i| 0x00ff_00ff ^ (i << 20)).collect();
        let args = [&a16[..], &b16[..]].map(|v| upload(&rt, v));
        let args32 = [&a32[..], &b32[..]].map(|v| upload(&rt, v));
        let (o16, o32) = (
            rt.memory().malloc(3 * 256).unwrap(),
            rt.memory().malloc(3 * 256).unwrap(),
        );
        let list = [args[0], args[1], args32[0], args32[1], o16, o32].map(Arg::from);
        run(&rt, k, 1, &list, s);
        let got16: Vec<u16> = download(&rt, o16, 3 * 128);
        let got32: Vec<i32> = download(&rt, o32, 3 * 64);
        for i in 0..128 {
            let want = [a16[i] & b16[i], a16[i] | b16[i], !a16[i]];
            for (j, w) in want.iter().enumerate() {
                assert_eq!(got16[j * 128 + i], *w, "u16 op {j} at {i}");
            }
        }
        for i in 0..64 {
            let want = [a32[i] & b32[i], a32[i] | b32[i], !a32[i]];
            for (j, w) in want.iter().enumerate() {
                assert_eq!(got32[j * 64 + i], *w, "i32 op {j} at {i}");
            }
        }
    }
}

/// `C = A × B` on the CPU in the cube's order: every element accumulates its `k` products
/// (exact in f32 for f16 inputs) in `k` order, one f32 rounding per addition.
fn matmul_ref(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for kk in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + kk] * b[kk * n + j];
            }
        }
    }
    c
}

/// Values exactly representable in f16, varied in sign and magnitude.
fn f16_values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let v = ((i.wrapping_mul(2654435761).wrapping_add(seed)) >> 20) % 2001;
            f16_to_f32(f32_to_f16(v as f32 / 200.0 - 5.0))
        })
        .collect()
}

fn transpose(b: &[f32], k: usize, n: usize) -> Vec<f32> {
    (0..n * k).map(|i| b[(i % k) * n + i / k]).collect()
}

/// Runs one of `mmad_custom.o`'s `(a, b, c)` kernels on one block; returns C's `n` elements
/// and the launch's cycles.
fn run_cube<T: bytemuck::Pod + Default + Clone>(
    rt: &Runtime,
    name: &str,
    a: DevicePtr,
    b: DevicePtr,
    n: usize,
) -> (Vec<T>, u64) {
    let bin = load(rt, "mmad_custom.o");
    let s = rt.streams().create().unwrap();
    let k = rt.binaries().get_function(bin, name).unwrap();
    let c = rt
        .memory()
        .malloc((n * std::mem::size_of::<T>()) as u64)
        .unwrap();
    let cycles = run(rt, k, 1, &[a.into(), b.into(), c.into()], s);
    (download(rt, c, n), cycles)
}

#[test]
fn the_mmad_sample_and_a_k_loop_over_odd_fractal_counts_match_the_cpu_bit_for_bit() {
    let rt = rt();
    for (name, m, n, k) in [("mmad_custom", 32, 32, 32), ("mmad_kloop", 48, 32, 64)] {
        let a = f16_values(m * k, 1);
        let b = f16_values(k * n, 77);
        let (da, db) = (upload(&rt, &halves(&a)), upload(&rt, &halves(&b)));
        let (c, cycles) = run_cube::<f32>(&rt, name, da, db, m * n);
        let want = matmul_ref(&a, &b, m, n, k);
        assert_eq!(c, want, "{name}");
        assert!(want.iter().any(|&v| v != 0.0));
        // A block of a few thousand cycles, not one cube startup per fractal triple.
        assert!(cycles > 0 && cycles < 5_000, "{name}: {cycles} cycles");
    }
}

#[test]
fn an_mmad_that_skips_the_l0_queues_multiplies_what_l0a_and_l0b_held_before() {
    let rt = rt();
    let (m, n, k) = (32, 32, 32);
    let a = f16_values(m * k, 1);
    let b = f16_values(k * n, 77);
    let (da, db) = (upload(&rt, &halves(&a)), upload(&rt, &halves(&b)));
    let (good, _) = run_cube::<f32>(&rt, "mmad_custom", da, db, m * n);
    assert_eq!(good, matmul_ref(&a, &b, m, n, k));
    // Without A2 / B2's EnQue and DeQue nothing orders the cube after LoadData: it multiplies
    // the zeros L0A and L0B start a block with.
    let (stale, _) = run_cube::<f32>(&rt, "mmad_unsynced", da, db, m * n);
    assert!(stale.iter().all(|&v| v == 0.0), "{:?}", &stale[..8]);
}

#[test]
fn partial_fractals_and_a_half_fixpipe_match_the_cpu_rounded_once() {
    let rt = rt();
    let (m, n, k) = (20, 24, 40);
    let a = f16_values(m * k, 5);
    let b = f16_values(k * n, 9);
    let (da, db) = (upload(&rt, &halves(&a)), upload(&rt, &halves(&b)));
    let (c, _) = run_cube::<u16>(&rt, "mmad_ragged_half", da, db, m * n);
    assert_eq!(c, halves(&matmul_ref(&a, &b, m, n, k)));
}

#[test]
fn a_transposed_b_in_float_and_in_half_matches_the_cpu() {
    let rt = rt();
    let (m, n, k) = (32, 16, 24);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 37) as f32 * 0.3 - 4.1).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 23) as f32 * -0.7 + 3.3).collect();
    let (da, db) = (upload(&rt, &a), upload(&rt, &transpose(&b, k, n)));
    let (c, _) = run_cube::<f32>(&rt, "mmad_f32_bt", da, db, m * n);
    assert_eq!(c, matmul_ref(&a, &b, m, n, k), "float");

    let (m, n, k) = (16, 48, 32);
    let a = f16_values(m * k, 3);
    let b = f16_values(k * n, 4);
    let (da, db) = (
        upload(&rt, &halves(&a)),
        upload(&rt, &halves(&transpose(&b, k, n))),
    );
    let (c, _) = run_cube::<f32>(&rt, "mmad_half_bt", da, db, m * n);
    assert_eq!(c, matmul_ref(&a, &b, m, n, k), "half");
}

#[test]
fn a_bias_through_c1_and_c2_starts_c_and_matches_the_cpu_bit_for_bit() {
    let rt = rt();
    let bin = load(&rt, "mmad_custom.o");
    let s = rt.streams().create().unwrap();
    for (name, m, n, k, half) in [
        ("mmad_bias", 48, 32, 64, true),
        ("mmad_bias_f32_bt", 16, 32, 16, false),
    ] {
        let (a, b, bias) = if half {
            (
                f16_values(m * k, 11),
                f16_values(k * n, 12),
                f16_values(n, 13),
            )
        } else {
            let v = |len: usize, s: f32| -> Vec<f32> {
                (0..len).map(|i| (i % 29) as f32 * s - 3.7).collect()
            };
            (v(m * k, 0.31), v(k * n, -0.23), v(n, 1.9))
        };
        let (da, db, dbias) = if half {
            (
                upload(&rt, &halves(&a)),
                upload(&rt, &halves(&b)),
                upload(&rt, &halves(&bias)),
            )
        } else {
            (
                upload(&rt, &a),
                upload(&rt, &transpose(&b, k, n)),
                upload(&rt, &bias),
            )
        };
        let f = rt.binaries().get_function(bin, name).unwrap();
        let dc = rt.memory().malloc(4 * (m * n) as u64).unwrap();
        run(
            &rt,
            f,
            1,
            &[da.into(), db.into(), dbias.into(), dc.into()],
            s,
        );
        let c: Vec<f32> = download(&rt, dc, m * n);
        // C starts at the bias, then accumulates its products in k order.
        let mut want: Vec<f32> = (0..m * n).map(|i| bias[i % n]).collect();
        for i in 0..m {
            for kk in 0..k {
                for j in 0..n {
                    want[i * n + j] += a[i * k + kk] * b[kk * n + j];
                }
            }
        }
        assert_eq!(c, want, "{name}");
        assert_ne!(c, matmul_ref(&a, &b, m, n, k), "{name}: the bias is in");
    }
}

#[test]
fn an_l0a_overflow_or_an_mmad_on_l1_fails_the_launch_naming_the_mistake() {
    let rt = rt();
    let bin = load(&rt, "mmad_custom.o");
    let s = rt.streams().create().unwrap();
    let d = upload(&rt, &[0u16; 1024]);
    let k = rt
        .binaries()
        .get_function(bin, "mmad_l0a_overflow")
        .unwrap();
    rt.submit(Launch::new(k, 1, &[d.into(), d.into(), d.into()], s))
        .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("136"), "{err}");
    let log = rt.binaries().take_kernel_log();
    assert!(
        log.iter()
            .any(|l| l.contains("66560 bytes do not fit in L0A (65536 of 65536 left)")),
        "{log:?}"
    );

    // The abort faulted that context; the second mistake runs in a fresh runtime.
    let rt = self::rt();
    let bin = load(&rt, "mmad_custom.o");
    let s = rt.streams().create().unwrap();
    let d = upload(&rt, &[0u16; 1024]);
    let k = rt
        .binaries()
        .get_function(bin, "mmad_wrong_position")
        .unwrap();
    rt.submit(Launch::new(k, 1, &[d.into(), d.into(), d.into()], s))
        .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("a address 0x22000000 is not in L0A"), "{err}");
}

#[test]
fn static_tensor_programming_adds_through_an_allocator_and_fixed_addresses_on_any_block_count() {
    let rt = rt();
    let bin = load(&rt, "static_tensor.o");
    let s = rt.streams().create().unwrap();
    let n = 8 * 5 * 1024;
    let x: Vec<f32> = (0..n).map(|i| (i % 101) as f32 * 0.25 - 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 3.5 + 0.125).collect();
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    for (name, blocks) in [("static_add", 8), ("static_add", 1), ("static_add_addr", 4)] {
        let k = rt.binaries().get_function(bin, name).unwrap();
        let dz = rt.memory().malloc(4 * n as u64).unwrap();
        let args = [dx.into(), dy.into(), dz.into(), (n as u64).into()];
        run(&rt, k, blocks, &args, s);
        let z: Vec<f32> = download(&rt, dz, n);
        assert_eq!(z, want, "{name} on {blocks} blocks");
    }
}

#[test]
fn half_tensors_read_and_write_single_elements_as_a_scatter_does() {
    let rt = rt();
    let bin = load(&rt, "static_tensor.o");
    let s = rt.streams().create().unwrap();
    let n = 37;
    let x: Vec<u16> = (0..48).map(|i| f32_to_f16(i as f32 * 0.5 - 3.0)).collect();
    // Element i goes to (7 i + 3) mod n: a permutation, as byte offsets.
    let to: Vec<usize> = (0..n).map(|i| (7 * i + 3) % n).collect();
    let idx: Vec<i32> = to.iter().map(|&t| 2 * t as i32).chain([0; 11]).collect();
    let (dx, di) = (upload(&rt, &x), upload(&rt, &idx));
    let dz = upload(&rt, &[0u16; 48]);
    let k = rt.binaries().get_function(bin, "half_permute").unwrap();
    run(
        &rt,
        k,
        1,
        &[dx.into(), di.into(), dz.into(), (n as u64).into()],
        s,
    );
    let z: Vec<u16> = download(&rt, dz, 48);
    let mut want = [0u16; 48];
    for i in 0..n {
        want[to[i]] = x[i];
    }
    assert_eq!(&z[..n], &want[..n]);
}

#[test]
fn an_allocator_that_runs_out_of_ub_aborts_the_block_naming_the_sizes() {
    let rt = rt();
    let bin = load(&rt, "static_tensor.o");
    let s = rt.streams().create().unwrap();
    let d = upload(&rt, &[0u32; 16]);
    let k = rt.binaries().get_function(bin, "static_overflow").unwrap();
    rt.submit(Launch::new(k, 1, &[d.into()], s)).unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("136"), "{err}");
    let log = rt.binaries().take_kernel_log();
    assert!(
        log.iter().any(|l| l.contains(
            "LocalMemAllocator::Alloc: 131072 bytes do not fit in UB (65536 of 196608 left)"
        )),
        "{log:?}"
    );
}

#[test]
fn dump_tensor_prints_gm_and_ub_values_by_shape_and_names_what_it_cannot_read() {
    let rt = rt();
    let bin = load(&rt, "api_probe.o");
    let s = rt.streams().create().unwrap();
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
    let d = upload(&rt, &x);
    let k = rt.binaries().get_function(bin, "dump_probe").unwrap();
    run(&rt, k, 1, &[d.into()], s);
    let log = rt.binaries().take_kernel_log();
    let lines: Vec<&str> = log
        .iter()
        .map(|l| l.strip_prefix("[dump_probe block 0] ").unwrap())
        .collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in {log:?}"))
    };
    let gm = at("DumpTensor: desc=0, addr=0x");
    assert!(
        lines[gm].ends_with("data_type=float32, position=GM, dump_size=12"),
        "{log:?}"
    );
    assert_eq!(
        lines[gm + 1],
        "-1.000000, -0.500000, 0.000000, 0.500000, 1.000000, 1.500000, 2.000000, 2.500000"
    );
    assert_eq!(lines[gm + 2], "3.000000, 3.500000, 4.000000, 4.500000");
    // The UB tensor as its shape's rows of 4.
    let ub = at("DumpTensor: desc=1,");
    assert!(
        lines[ub].contains("data_type=float16, position=UB, dump_size=12"),
        "{log:?}"
    );
    assert_eq!(lines[ub + 1], "1.500000, 1.500000, 1.500000, 1.500000");
    assert_eq!(lines[ub + 2], "1.500000, -2.250000, 1.500000, 1.500000");
    assert_eq!(lines[ub + 3], "1.500000, 1.500000, 1.500000, 1.500000");
    let chk = at("DumpAccChkPoint: index=2,");
    assert_eq!(lines[chk + 1], "1.500000, -2.250000, 1.500000");
    let l1 = at("DumpTensor: desc=3,");
    assert!(
        lines[l1].contains("data_type=int32, position=L1, dump_size=8"),
        "{log:?}"
    );
    assert!(
        lines[l1 + 1].contains("not readable by the scalar unit"),
        "{log:?}"
    );
}

#[test]
fn a_kernel_assert_with_a_message_prints_it_and_the_condition_and_fails_the_launch() {
    let rt = rt();
    let bin = load(&rt, "matmul_api.o");
    let s = rt.streams().create().unwrap();
    let d = rt.memory().malloc(4096).unwrap();
    // A TCubeTiling (CANN's field order: usedCoreNum, M, N, Ka, Kb, singleCoreM, singleCoreN,
    // singleCoreK, baseM, baseN, baseK, ...) whose Ka and Kb disagree.
    let mut words = [0i32; 64];
    words[..11].copy_from_slice(&[1, 16, 16, 32, 16, 16, 16, 32, 16, 16, 32]);
    let tiling = upload(&rt, &words);
    let k = rt.binaries().get_function(bin, "matmul_api").unwrap();
    rt.submit(Launch::new(
        k,
        1,
        &[d.into(), d.into(), d.into(), tiling.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("134"), "{err}");
    let log = rt.binaries().take_kernel_log().join("\n");
    assert!(log.contains("matmul_api: Ka 32 != Kb 16"), "{log}");
    assert!(
        log.contains("Assertion `tiling.Ka == tiling.Kb' failed."),
        "{log}"
    );
}

/// A one-block TCubeTiling (CANN's field order) for `m × n` over `k` in `base × base × base`
/// steps, with or without a bias.
fn cube_tiling(m: i32, n: i32, k: i32, base: i32, bias: bool) -> [i32; 64] {
    let mut w = [0i32; 64];
    // usedCoreNum, M, N, Ka, Kb, singleCoreM, singleCoreN, singleCoreK, baseM, baseN, baseK,
    // depthA1, depthB1, stepM, stepN, isBias.
    w[..16].copy_from_slice(&[
        1,
        m,
        n,
        k,
        k,
        m,
        n,
        k,
        base,
        base,
        base,
        2,
        2,
        1,
        1,
        bias as i32,
    ]);
    w
}

/// `C = bias + A × B` in the cube's order: every element starts from its column's bias and
/// adds its `k` products in `k` order.
fn matmul_bias_ref(a: &[f32], b: &[f32], bias: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c: Vec<f32> = (0..m * n).map(|i| bias[i % n]).collect();
    for i in 0..m {
        for kk in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + kk] * b[kk * n + j];
            }
        }
    }
    c
}

/// Runs one of `matmul_api.o`'s `(a, b, bias, c, tiling)` kernels on one block with A, B and the
/// bias as halves (`half_bias`) or a float bias; returns C's bytes as `T`.
fn run_matmul_api<T: bytemuck::Pod + Default + Clone>(
    rt: &Runtime,
    object: &std::path::Path,
    name: &str,
    (a, b, bias): (&[f32], &[f32], &[f32]),
    half_bias: bool,
    tiling: &[i32; 64],
) -> Result<Vec<T>, String> {
    let bin = load_path(rt, object);
    let s = rt.streams().create().unwrap();
    let f = rt.binaries().get_function(bin, name).unwrap();
    let (da, db) = (upload(rt, &halves(a)), upload(rt, &halves(b)));
    let dbias = if half_bias {
        upload(rt, &halves(bias))
    } else {
        upload(rt, bias)
    };
    let n = (tiling[1] * tiling[2]) as usize;
    // C starts as 0.25, 1.25, 2.25, … (what an atomic add adds into).
    let c0: Vec<f32> = (0..n).map(|i| i as f32 + 0.25).collect();
    let dc = rt
        .memory()
        .malloc((n * std::mem::size_of::<T>()) as u64)
        .unwrap();
    if std::mem::size_of::<T>() == 4 {
        rt.memory().memcpy_htod(dc, &c0).unwrap();
    }
    let dt = upload(rt, tiling);
    rt.submit(Launch::new(
        f,
        1,
        &[da.into(), db.into(), dbias.into(), dc.into(), dt.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).map_err(|e| e.to_string())?;
    Ok(download(rt, dc, n))
}

#[test]
fn a_matmul_bias_is_added_to_every_row_of_c_bit_for_bit_in_float_and_half() {
    // 40 × 48 over 72 in 32-steps: tails on every side (8 rows, 16 columns, a K step of 8).
    let (m, n, k) = (40, 48, 72);
    let a = f16_values(m * k, 21);
    let b = f16_values(k * n, 22);
    let bias = f16_values(n, 23);
    let rt = rt();
    let t = cube_tiling(m as i32, n as i32, k as i32, 32, true);
    let c: Vec<f32> = run_matmul_api(
        &rt,
        &committed("matmul_api"),
        "matmul_bias",
        (&a, &b, &bias),
        false,
        &t,
    )
    .unwrap();
    let want = matmul_bias_ref(&a, &b, &bias, m, n, k);
    assert_eq!(c, want);
    assert_ne!(c, matmul_ref(&a, &b, m, n, k), "the bias is in");
    let c: Vec<u16> = run_matmul_api(
        &rt,
        &committed("matmul_api"),
        "matmul_bias_half",
        (&a, &b, &bias),
        true,
        &t,
    )
    .unwrap();
    assert_eq!(c, halves(&want), "half bias, half C rounded once");
    // enAtomic = 1: each element of C is added once into what GM held, rounded once.
    let c: Vec<f32> = run_matmul_api(
        &rt,
        &committed("matmul_api"),
        "matmul_bias_atomic",
        (&a, &b, &bias),
        false,
        &t,
    )
    .unwrap();
    let added: Vec<f32> = want
        .iter()
        .enumerate()
        .map(|(i, w)| (i as f32 + 0.25) + w)
        .collect();
    assert_eq!(c, added, "IterateAll(c, enAtomic = 1) adds into c");
}

#[test]
fn a_matmul_whose_tiling_holds_a_over_all_of_k_loads_a_once_for_every_block_in_its_rows() {
    // 32 × 96 over 96 in 32-steps: three blocks of C along N share A's rows. With stepKa = 3
    // (depthA1 3: A's rows over all of K in one A1 load) the layer keeps the load for all
    // three; with stepKa 1 it reads A again for each. Same C bit for bit, A read a third.
    let (m, n, k) = (32, 96, 96);
    let a = f16_values(m * k, 31);
    let b = f16_values(k * n, 32);
    let bias = f16_values(n, 33);
    let rt = rt();
    let per_step = cube_tiling(m as i32, n as i32, k as i32, 32, true);
    let mut whole_k = per_step;
    whole_k[11] = 3; // depthA1
    whole_k[26] = 3; // stepKa
    let mut mte2 = Vec::new();
    for t in [&per_step, &whole_k] {
        let c: Vec<f32> = run_matmul_api(
            &rt,
            &committed("matmul_api"),
            "matmul_bias",
            (&a, &b, &bias),
            false,
            t,
        )
        .unwrap();
        assert_eq!(c, matmul_bias_ref(&a, &b, &bias, m, n, k));
        mte2.push(
            rt.binaries()
                .take_launch_stats()
                .pop()
                .unwrap()
                .pipe_busy
                .mte2,
        );
    }
    // A is 32 × 96 halves (6 KiB): two reads fewer move at least 12 KiB less at 128 B/cycle.
    let a_cycles = (m * k * 2 / 128) as u64;
    assert!(
        mte2[1] + 2 * a_cycles <= mte2[0],
        "MTE2 busy {} cycles with A held, {} without",
        mte2[1],
        mte2[0]
    );
}

#[test]
fn two_matmul_objects_of_one_regist_matmul_obj_run_in_one_kernel() {
    // The first writes bias + A x B, the second adds A x B into it: every element is
    // (bias + AB) + AB, one f32 rounding for the add.
    let (m, n, k) = (40, 48, 72);
    let a = f16_values(m * k, 41);
    let b = f16_values(k * n, 42);
    let bias = f16_values(n, 43);
    let rt = rt();
    let t = cube_tiling(m as i32, n as i32, k as i32, 32, true);
    let first = matmul_bias_ref(&a, &b, &bias, m, n, k);
    let ab = matmul_ref(&a, &b, m, n, k);
    let want: Vec<f32> = first.iter().zip(&ab).map(|(f, p)| f + p).collect();
    for obj in objects("matmul_api") {
        let c: Vec<f32> =
            run_matmul_api(&rt, &obj, "matmul_two_objects", (&a, &b, &bias), false, &t).unwrap();
        assert_eq!(c, want, "{}", obj.display());
    }
}

#[test]
fn a_matmul_bias_with_a_tiling_made_without_one_fails_the_launch_naming_set_bias() {
    let (m, n, k) = (16, 16, 16);
    let v = f16_values(256, 1);
    let rt = rt();
    let t = cube_tiling(m, n, k, 16, false);
    let err = run_matmul_api::<f32>(
        &rt,
        &committed("matmul_api"),
        "matmul_bias_untiled",
        (&v, &v, &v[..16]),
        false,
        &t,
    )
    .unwrap_err();
    let log = rt.binaries().take_kernel_log().join("\n");
    assert!(
        log.contains("Matmul::SetBias: the tiling was made without a bias"),
        "{err}\n{log}"
    );
}

#[test]
fn matmul_c_into_ub_feeds_leaky_relu_per_base_block_sync_and_async() {
    let (m, n, k) = (40, 48, 72);
    let a = f16_values(m * k, 31);
    let b = f16_values(k * n, 32);
    let bias = f16_values(n, 33);
    let lrelu = |x: f32| if x >= 0.0 { x } else { x * 0.125 };
    let want: Vec<f32> = matmul_bias_ref(&a, &b, &bias, m, n, k)
        .into_iter()
        .map(lrelu)
        .collect();
    assert!(want.iter().any(|&x| x < 0.0) && want.iter().any(|&x| x > 0.0));
    let rt = rt();
    let t = cube_tiling(m as i32, n as i32, k as i32, 32, true);
    for name in ["matmul_ub_lrelu", "matmul_ub_async"] {
        let c: Vec<f32> = run_matmul_api(
            &rt,
            &committed("matmul_api"),
            name,
            (&a, &b, &bias),
            false,
            &t,
        )
        .unwrap();
        assert_eq!(c, want, "{name}");
    }
}

#[test]
fn matmul_iterate_all_into_ub_gives_the_whole_c_to_the_vector_unit() {
    let (m, n, k) = (40, 48, 72);
    let a = f16_values(m * k, 41);
    let b = f16_values(k * n, 42);
    let rt = rt();
    let t = cube_tiling(m as i32, n as i32, k as i32, 32, false);
    let c: Vec<u16> = run_matmul_api(
        &rt,
        &committed("matmul_api"),
        "matmul_ub_all",
        (&a, &b, &[0.0; 48]),
        false,
        &t,
    )
    .unwrap();
    // C rounded to half once, then doubled on the vector unit (exact).
    let want: Vec<u16> = halves(&matmul_ref(&a, &b, m, n, k))
        .into_iter()
        .map(|h| f32_to_f16(2.0 * f16_to_f32(h)))
        .collect();
    assert_eq!(c, want);
}

/// Runs one of `atomic_add.o`'s kernels on `blocks` blocks of 37 elements: x, z (37, from
/// `z0`), w, v (from `v0`); returns z, w and v.
fn run_atomic<T: bytemuck::Pod + Default + Clone>(
    name: &str,
    x: &[T],
    z0: &[T],
    v0: &[T],
    blocks: u32,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let rt = rt();
    let bin = load(&rt, "atomic_add.o");
    let s = rt.streams().create().unwrap();
    let f = rt.binaries().get_function(bin, name).unwrap();
    let n = x.len();
    let (dx, dz, dv) = (upload(&rt, x), upload(&rt, z0), upload(&rt, v0));
    let dw = upload(&rt, &vec![T::default(); n]);
    run(
        &rt,
        f,
        blocks,
        &[dx.into(), dz.into(), dw.into(), dv.into()],
        s,
    );
    (
        download(&rt, dz, 37),
        download(&rt, dw, n),
        download(&rt, dv, n),
    )
}

#[test]
fn set_atomic_add_makes_copies_out_add_into_gm_until_set_atomic_none() {
    const B: usize = 3;
    let n = 37 * B;
    // float: z accumulates the blocks' x in block order, one rounding per add.
    let x: Vec<f32> = (0..n).map(|i| 1.0 / (i as f32 + 3.0) - 0.1).collect();
    let z0: Vec<f32> = (0..37).map(|i| i as f32 * 1e3).collect();
    let v0 = vec![100.0f32; n];
    let (z, w, v) = run_atomic("atomic_add_f32", &x, &z0, &v0, B as u32);
    let mut want = z0.clone();
    for b in 0..B {
        (0..37).for_each(|i| want[i] += x[b * 37 + i]);
    }
    assert_eq!(z, want);
    assert_eq!(
        w,
        x.iter().map(|v| 3.0 + v).collect::<Vec<_>>(),
        "InitGlobalMemory, then add"
    );
    assert_eq!(v, x, "SetAtomicNone: plain copies again");

    // half: every add rounded to half once.
    let xh = halves(&x.iter().map(|v| v * 300.0).collect::<Vec<_>>());
    let zh0 = halves(&z0);
    let (z, w, v) = run_atomic("atomic_add_f16", &xh, &zh0, &halves(&v0), B as u32);
    let mut want = zh0.clone();
    for b in 0..B {
        (0..37).for_each(|i| {
            want[i] = f32_to_f16(f16_to_f32(want[i]) + f16_to_f32(xh[b * 37 + i]));
        });
    }
    assert_eq!(z, want);
    let want_w: Vec<u16> = xh
        .iter()
        .map(|&h| f32_to_f16(3.0 + f16_to_f32(h)))
        .collect();
    assert_eq!(w, want_w);
    assert_eq!(v, xh);

    // int32: wrapping.
    let xi: Vec<i32> = (0..n as i32).map(|i| i * 7919 - 300).collect();
    let mut zi0: Vec<i32> = (0..37).collect();
    zi0[0] = i32::MAX;
    let (z, w, v) = run_atomic("atomic_add_i32", &xi, &zi0, &vec![100; n], B as u32);
    let mut want = zi0.clone();
    for b in 0..B {
        (0..37).for_each(|i| want[i] = want[i].wrapping_add(xi[b * 37 + i]));
    }
    assert_eq!(z, want);
    assert_eq!(w, xi.iter().map(|v| 3 + v).collect::<Vec<_>>());
    assert_eq!(v, xi);
}

/// A ListTensorDesc as hosts lay it out: the data-pointer array's byte offset, then per tensor
/// `dim | index << 32` and the shape, then the data pointers.
fn list_desc(tensors: &[(u32, &[u64], DevicePtr)]) -> Vec<u64> {
    let head: usize = tensors.iter().map(|(_, s, _)| 1 + s.len()).sum();
    let mut w = vec![8 * (1 + head) as u64];
    for (index, shape, _) in tensors {
        w.push(shape.len() as u64 | (*index as u64) << 32);
        w.extend_from_slice(shape);
    }
    w.extend(tensors.iter().map(|(_, _, p)| p.0));
    w
}

#[test]
fn a_list_of_tensors_gives_each_one_s_shape_index_and_data() {
    let rt = rt();
    let bin = load(&rt, "list_tensor.o");
    let s = rt.streams().create().unwrap();
    let shapes: [&[u64]; 3] = [&[8, 16], &[5], &[2, 3, 4]];
    let datas: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(t, sh)| {
            let n: u64 = sh.iter().product();
            (0..n).map(|i| (t * 1000) as f32 + i as f32 * 0.5).collect()
        })
        .collect();
    let ptrs: Vec<DevicePtr> = datas.iter().map(|d| upload(&rt, d)).collect();
    let list: Vec<(u32, &[u64], DevicePtr)> =
        (0..3).map(|t| (7 + t as u32, shapes[t], ptrs[t])).collect();
    let desc = upload(&rt, &list_desc(&list));
    let out = upload(&rt, &[0u64; 12]);
    let k = rt.binaries().get_function(bin, "list_probe").unwrap();
    run(&rt, k, 1, &[desc.into(), out.into(), 3u64.into()], s);
    let got: Vec<u64> = download(&rt, out, 12);
    for t in 0..3 {
        let n: u64 = shapes[t].iter().product();
        let want = [
            shapes[t].len() as u64,
            7 + t as u64,
            n,
            datas[t][n as usize - 1].to_bits() as u64,
        ];
        assert_eq!(got[4 * t..4 * t + 4], want, "tensor {t}");
    }

    // Asking a list for a tensor past its end stops the block with the reason.
    let k = rt.binaries().get_function(bin, "list_past_end").unwrap();
    rt.submit(Launch::new(k, 1, &[desc.into(), out.into()], s))
        .unwrap();
    assert!(rt.streams().synchronize(s).is_err());
    let log = rt.binaries().take_kernel_log();
    assert!(
        log.iter()
            .any(|l| l.contains("ListTensorDesc: the tensor index is past the list")),
        "{log:?}"
    );
}

// ---- WholeReduce / BlockReduce / Brcb / GatherMask / Gather -----------------------------------

/// The documented f16 tree addition: the f32 sum of the exact inputs rounded once to f16; a
/// finite sum past 65504 saturates there.
fn add16(a: u16, b: u16) -> u16 {
    let s = f32_to_f16(f16_to_f32(a) + f16_to_f32(b));
    if s & 0x7fff == 0x7c00 && a & 0x7c00 != 0x7c00 && b & 0x7c00 != 0x7c00 {
        (s & 0x8000) | 0x7bff
    } else {
        s
    }
}

/// Pairwise (0+1)(2+3)… over the slots, recursively; an unselected slot passes its partner.
fn tree<T: Copy>(v: &[Option<T>], add: &dyn Fn(T, T) -> T) -> Option<T> {
    if v.len() == 1 {
        return v[0];
    }
    let next: Vec<Option<T>> = v
        .chunks(2)
        .map(|p| match (p[0], p[1]) {
            (Some(x), Some(y)) => Some(add(x, y)),
            (x, None) => x,
            (None, y) => y,
        })
        .collect();
    tree(&next, add)
}

#[test]
fn whole_reduce_sum_over_ragged_rows_matches_the_documented_binary_tree() {
    for obj in objects("whole_reduce_custom") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let s = rt.streams().create().unwrap();
        let k = rt
            .binaries()
            .get_function(bin, "whole_reduce_sum_rows")
            .unwrap();
        // The sample's 13 × 123 (values 1..100, as its gen_data.py), and 7 × 77 with large
        // values whose partial sums saturate.
        for (rows, cols, lo, hi) in [
            (13usize, 123usize, 1.0f32, 100.0f32),
            (7, 77, 2000.0, 9000.0),
        ] {
            let x: Vec<f32> = (0..rows * cols)
                .map(|i| lo + ((i * 7919) % 1000) as f32 * (hi - lo) / 1000.0)
                .collect();
            let xh = halves(&x);
            let dx = upload(&rt, &xh);
            let dy = rt.memory().malloc(64 + 2 * rows as u64).unwrap();
            run(
                &rt,
                k,
                1,
                &[
                    dx.into(),
                    dy.into(),
                    (rows as u64).into(),
                    (cols as u64).into(),
                ],
                s,
            );
            let y: Vec<u16> = download(&rt, dy, rows);
            for r in 0..rows {
                let slots: Vec<Option<u16>> = (0..128)
                    .map(|p| (p < cols).then(|| xh[r * cols + p]))
                    .collect();
                assert_eq!(y[r], tree(&slots, &add16).unwrap(), "{rows}x{cols} row {r}");
            }
            if hi > 5000.0 {
                // 77 values near 5500 sum to about 420000: every row saturated at 65504.
                assert!(y.iter().all(|&v| v == 0x7bff), "{y:x?}");
            }
        }
    }
}

#[test]
fn whole_and_block_reductions_follow_masks_strides_and_orders() {
    for obj in objects("whole_reduce_custom") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let s = rt.streams().create().unwrap();
        let k = rt.binaries().get_function(bin, "reduce_families").unwrap();
        let x: Vec<f32> = (0..2048)
            .map(|i| ((i * 37 + 11) % 203) as f32 * 0.75 - 70.0 + (i % 5) as f32 * 0.001)
            .collect();
        let dx = upload(&rt, &x);
        let dy = rt.memory().malloc(1024).unwrap();
        run(&rt, k, 1, &[dx.into(), dy.into()], s);
        let y: Vec<f32> = download(&rt, dy, 256);
        let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
        let sel = |r: usize, m: &dyn Fn(usize) -> bool| -> Vec<Option<f32>> {
            (0..64).map(|p| m(p).then_some(x[r * 64 + p])).collect()
        };
        let extreme = |v: &[Option<f32>], max: bool| {
            let mut best: Option<(f32, usize)> = None;
            for (i, x) in v.iter().enumerate() {
                if let Some(x) = *x
                    && best.is_none_or(|(b, _)| if max { x > b } else { x < b })
                {
                    best = Some((x, i));
                }
            }
            best.unwrap()
        };
        let mask = 0xf0f0_f0f0_0f0f_0f0fu64;
        let untouched = (-1.0f32).to_bits();
        for r in 0..5 {
            // WholeReduceMax, bit mask, [value, index] every 3 × 8 bytes.
            let (v, i) = extreme(&sel(r, &|p| mask >> p & 1 == 1), true);
            assert_eq!((y[6 * r], bits[6 * r + 1]), (v, i as u32), "max repeat {r}");
            assert_eq!(bits[6 * r + 2], untouched);
            // WholeReduceMin, count mask 37: [index, value], then the index alone.
            let (v, i) = extreme(&sel(r, &|p| p < 37), false);
            assert_eq!(
                (bits[32 + 2 * r], y[33 + 2 * r]),
                (i as u32, v),
                "min repeat {r}"
            );
            assert_eq!(bits[48 + r], i as u32);
        }
        assert_eq!(bits[53], untouched);
        // BlockReduce*, 13 of 64 elements (blocks 0 and 1 of 8), repeats 10 blocks apart.
        for r in 0..3 {
            for blk in 0..2 {
                let n = if blk == 0 { 8 } else { 5 };
                let b: Vec<Option<f32>> = (0..8)
                    .map(|j| (j < n).then_some(x[r * 80 + blk * 8 + j]))
                    .collect();
                let sum = tree(&b, &|p, q| p + q).unwrap();
                assert_eq!(y[64 + r * 16 + blk], sum, "block sum r{r} b{blk}");
                assert_eq!(y[136 + r * 8 + blk], extreme(&b, false).0);
            }
            for blk in 2..8 {
                assert_eq!(
                    bits[64 + r * 16 + blk],
                    untouched,
                    "an empty block is not written"
                );
            }
        }
        // BlockReduceMax with srcBlkStride 2: block k of repeat r starts at element r*80 + 16k.
        for r in 0..3 {
            for blk in 0..2 {
                let n = if blk == 0 { 8 } else { 5 };
                let b: Vec<Option<f32>> = (0..8)
                    .map(|j| (j < n).then_some(x[r * 80 + blk * 16 + j]))
                    .collect();
                assert_eq!(y[112 + r * 8 + blk], extreme(&b, true).0);
            }
        }
        // ReduceMin, bit mask, 30 repeats: the minimum over every selected element.
        let xr = &x;
        let all_min = (0..30)
            .flat_map(|r| {
                (0..64)
                    .filter(|p| mask >> p & 1 == 1)
                    .map(move |p| xr[r * 64 + p])
            })
            .fold(f32::INFINITY, f32::min);
        assert_eq!(y[160], all_min);
        // ReduceSum, 9 repeats of 64: a tree per repeat, then a tree over the 9 sums.
        let per: Vec<Option<f32>> = (0..9)
            .map(|r| tree(&sel(r, &|_| true), &|p, q| p + q))
            .collect();
        let mut slots = per.clone();
        slots.resize(64, None);
        assert_eq!(y[168], tree(&slots, &|p, q| p + q).unwrap());
    }
}

#[test]
fn brcb_and_gather_place_elements_where_the_docs_say() {
    for obj in objects("whole_reduce_custom") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let s = rt.streams().create().unwrap();
        let k = rt.binaries().get_function(bin, "brcb_gather").unwrap();
        let x: Vec<u32> = (0..256).map(|i| 0x4000_0000 + i * 3).collect();
        let offs: Vec<u32> = (0..256).map(|i| ((i * 53 + 7) % 255) * 4).collect();
        let (dx, doff) = (upload(&rt, &x), upload(&rt, &offs));
        let dy = rt.memory().malloc(4096).unwrap();
        run(&rt, k, 1, &[dx.into(), doff.into(), dy.into()], s);
        let y: Vec<u32> = download(&rt, dy, 1024);
        let y16: Vec<u16> = y
            .iter()
            .flat_map(|w| [*w as u16, (*w >> 16) as u16])
            .collect();
        let x16: Vec<u16> = x
            .iter()
            .flat_map(|w| [*w as u16, (*w >> 16) as u16])
            .collect();
        for r in 0..2 {
            for j in 0..8 {
                let blk = r * 20 + j * 2;
                assert!(
                    y16[blk * 16..blk * 16 + 16]
                        .iter()
                        .all(|&v| v == x16[r * 8 + j])
                );
                assert!(
                    y16[(blk + 1) * 16..(blk + 2) * 16]
                        .iter()
                        .all(|&v| v == 0xeeee)
                );
            }
        }
        for i in 0..200 {
            assert_eq!(y[384 + i], x[offs[i] as usize / 4], "gather {i}");
        }
        assert_eq!(y[584], 0xeeee_eeee);
        // Mask form: even slots of 2 repeats, 10 blocks apart, srcBaseAddr 4 bytes.
        for r in 0..2 {
            for p in 0..64 {
                let got = y[640 + r * 80 + p];
                if p % 2 == 0 {
                    assert_eq!(got, x[offs[r * 64 + p] as usize / 4 + 1], "r{r} p{p}");
                } else {
                    assert_eq!(got, 0xeeee_eeee);
                }
            }
        }
    }
}

#[test]
fn gather_mask_packs_by_pattern_and_reports_the_count() {
    for obj in objects("gather_mask_custom") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let s = rt.streams().create().unwrap();
        let k = rt
            .binaries()
            .get_function(bin, "gather_mask_custom")
            .unwrap();
        let x: Vec<u16> = (0..1024).map(|i| (i * 5 + 1) as u16).collect();
        let pattern: Vec<u16> = (0..128).map(|i| (i * 0x9e37 + 0x1234) as u16).collect();
        let count = 97u32;
        let (dx, dp) = (upload(&rt, &x), upload(&rt, &pattern));
        let dy = rt.memory().malloc(3072).unwrap();
        let dc = rt.memory().malloc(64).unwrap();
        run(
            &rt,
            k,
            1,
            &[
                dx.into(),
                dp.into(),
                dy.into(),
                dc.into(),
                (count as u64).into(),
            ],
            s,
        );
        let y: Vec<u16> = download(&rt, dy, 1536);
        let counts: Vec<u64> = download(&rt, dc, 3);
        let bit = |words: &[u16], p: usize| words[p / 16] >> (p % 16) & 1 == 1;
        // Normal mode: 2 repeats of 128, pattern of repeat r at 16 r halves (1 block).
        let mut want0 = Vec::new();
        for r in 0..2 {
            for p in (0..128).filter(|&p| bit(&pattern[16 * r..], p)) {
                want0.push(x[r * 128 + p]);
            }
        }
        assert_eq!(counts[0], want0.len() as u64);
        assert_eq!(&y[..want0.len()], &want0[..]);
        assert_eq!(y[want0.len()], 0xeeee);
        // Counter mode, 97 elements, built-in pattern 5 (third of every four), src0 blocks 2 apart
        // and repeats 16 blocks apart.
        let want1: Vec<u16> = (0..count as usize)
            .filter(|p| p % 4 == 2)
            .map(|i| {
                let (r, p) = (i / 128, i % 128);
                x[r * 256 + (p / 16) * 32 + p % 16]
            })
            .collect();
        assert_eq!(counts[1], want1.len() as u64);
        assert_eq!(&y[512..512 + want1.len()], &want1[..]);
        assert_eq!(y[512 + want1.len()], 0xeeee);
        // Floats with a uint32_t pattern, 50 elements.
        let pat32: Vec<u32> = pattern
            .chunks(2)
            .map(|c| c[0] as u32 | (c[1] as u32) << 16)
            .collect();
        let x32: Vec<u32> = x
            .chunks(2)
            .map(|c| c[0] as u32 | (c[1] as u32) << 16)
            .collect();
        let want2: Vec<u32> = (0..50)
            .filter(|&p| pat32[p / 32] >> (p % 32) & 1 == 1)
            .map(|p| x32[p])
            .collect();
        assert_eq!(counts[2], want2.len() as u64);
        let y32: Vec<u32> = y[1024..]
            .chunks(2)
            .map(|c| c[0] as u32 | (c[1] as u32) << 16)
            .collect();
        assert_eq!(&y32[..want2.len()], &want2[..]);
    }
}

#[test]
fn a_gather_offset_outside_ub_fails_the_launch_naming_the_element() {
    for obj in objects("whole_reduce_custom") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let s = rt.streams().create().unwrap();
        let k = rt.binaries().get_function(bin, "gather_custom").unwrap();
        let x: Vec<f32> = (0..256).map(|i| i as f32 * 0.5 - 3.0).collect();
        let dx = upload(&rt, &x);
        let n = 333usize;
        let mut offs: Vec<u32> = (0..n as u32).map(|i| (255 - i % 256) * 4).collect();
        let doff = upload(&rt, &offs);
        let dy = rt.memory().malloc(4 * n as u64).unwrap();
        run(
            &rt,
            k,
            1,
            &[dx.into(), doff.into(), dy.into(), (n as u64).into()],
            s,
        );
        let y: Vec<f32> = download(&rt, dy, n);
        for i in 0..n {
            assert_eq!(y[i], x[offs[i] as usize / 4], "{i}");
        }
        offs[300] = 0x4_0000;
        let doff = upload(&rt, &offs);
        rt.submit(Launch::new(
            k,
            1,
            &[dx.into(), doff.into(), dy.into(), (n as u64).into()],
            s,
        ))
        .unwrap();
        let err = rt.streams().synchronize(s).unwrap_err().to_string();
        assert!(
            err.contains("gather element 300: byte offset 0x40000"),
            "{err}"
        );
    }
}

#[test]
fn buffer_pools_reuse_one_ub_region_for_two_phases() {
    let rt = rt();
    let bin = load(&rt, "buf_pool.o");
    let s = rt.streams().create().unwrap();
    let n = 4 * 256;
    let x: Vec<f32> = (0..n).map(|i| (i % 31) as f32 * 0.75 - 4.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 17) as f32 * -0.5 + 2.25).collect();
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    let (ds, dp) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let k = rt.binaries().get_function(bin, "buf_pool").unwrap();
    run(
        &rt,
        k,
        1,
        &[
            dx.into(),
            dy.into(),
            ds.into(),
            dp.into(),
            (n as u64).into(),
        ],
        s,
    );
    let sum: Vec<f32> = download(&rt, ds, n);
    let prod: Vec<f32> = download(&rt, dp, n);
    let want_sum: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let want_prod: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    assert_eq!(sum, want_sum);
    assert_eq!(prod, want_prod);

    let k = rt
        .binaries()
        .get_function(bin, "buf_pool_overflow")
        .unwrap();
    rt.submit(Launch::new(k, 1, &[dx.into()], s)).unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("136"), "{err}");
    let log = rt.binaries().take_kernel_log();
    assert!(
        log.iter().any(|l| l.contains(
            "TBufPool::InitBuffer: 2048 bytes do not fit in the TBufPool (1024 of 1024 left)"
        )),
        "{log:?}"
    );
}

#[test]
fn int8_tensors_cast_to_half_and_back_rounding_and_saturating() {
    let rt = rt();
    let bin = load(&rt, "static_tensor.o");
    let s = rt.streams().create().unwrap();
    let n = 256;
    let x: Vec<i8> = (0..n).map(|i| (i as i32 - 128) as i8).collect();
    let dx = upload(&rt, &x);
    let dz = upload(&rt, &vec![0i8; n]);
    let k = rt.binaries().get_function(bin, "int8_scale").unwrap();
    run(&rt, k, 1, &[dx.into(), dz.into(), (n as u64).into()], s);
    let z: Vec<i8> = download(&rt, dz, n);
    // Every step is exact in half here (|x · 1.5 + 0.5| ≤ 191.5 on a 0.5 grid), so the
    // result is x · 1.5 + 0.5 rounded to nearest even, saturated to i8.
    let want: Vec<i8> = x
        .iter()
        .map(|&v| {
            (v as f64 * 1.5 + 0.5)
                .round_ties_even()
                .clamp(-128.0, 127.0) as i8
        })
        .collect();
    assert_eq!(z, want);
    assert!(z.contains(&127) && z.contains(&-128));
}

const SYNC_N: usize = 40;

/// Runs one of `sync_all.o`'s kernels on `blocks` blocks (x = 1, 2, 3, …; w, y and the sync
/// workspace zeroed) and returns w and y, or the launch's error.
fn run_sync_all(
    rt: &Runtime,
    name: &str,
    blocks: usize,
) -> Result<(Vec<f32>, Vec<f32>, LaunchStats), NpuError> {
    let bin = load(rt, "sync_all.o");
    let s = rt.streams().create().unwrap();
    let f = rt.binaries().get_function(bin, name).unwrap();
    let n = SYNC_N * blocks;
    let x: Vec<f32> = (0..n).map(|i| i as f32 + 1.0).collect();
    let dx = upload(rt, &x);
    let (dw, dy) = (upload(rt, &vec![0f32; n]), upload(rt, &vec![0f32; n]));
    let sync = upload(rt, &vec![0i32; 8 * blocks]);
    rt.submit(Launch::new(
        f,
        blocks as u32,
        &[dx.into(), dw.into(), dy.into(), sync.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s)?;
    let stats = rt.binaries().take_launch_stats().pop().unwrap();
    Ok((download(rt, dw, n), download(rt, dy, n), stats))
}

/// Slot `b` of a per-block array of SYNC_N values.
fn slot(v: &[f32], b: usize) -> &[f32] {
    &v[b * SYNC_N..(b + 1) * SYNC_N]
}

/// 2x of block `b`'s slice of x (x = 1, 2, 3, …).
fn doubled(b: usize) -> Vec<f32> {
    (0..SYNC_N)
        .map(|i| 2.0 * ((b * SYNC_N + i) as f32 + 1.0))
        .collect()
}

#[test]
fn sync_all_lets_every_block_read_what_the_others_wrote_before_the_barrier() {
    let rt = rt();
    for blocks in [2, 5, 48] {
        let (w, y, stats) = run_sync_all(&rt, "sync_all_soft", blocks).unwrap();
        for b in 0..blocks {
            assert_eq!(slot(&w, b), doubled(b), "{blocks} blocks: w[{b}]");
            let next = doubled((b + 1) % blocks);
            let want: Vec<f32> = doubled(b).iter().zip(&next).map(|(a, c)| a + c).collect();
            assert_eq!(
                slot(&y, b),
                want,
                "{blocks} blocks: y[{b}] = w[{b}] + w[{b} + 1]"
            );
        }
        assert_eq!(stats.blocks.len(), blocks);
    }
    // The hardware form, twice: the second barrier orders the first phase's reads of w before
    // the second phase's writes of it.
    let blocks = 6;
    let (w, y, _) = run_sync_all(&rt, "sync_all_hard", blocks).unwrap();
    let pair = |b: usize| -> Vec<f32> {
        let next = doubled((b + 1) % blocks);
        doubled(b).iter().zip(&next).map(|(a, c)| a + c).collect()
    };
    for b in 0..blocks {
        assert_eq!(slot(&y, b), pair(b), "y[{b}]");
        assert_eq!(slot(&w, b), pair((b + 1) % blocks), "w[{b}] = y[{b} + 1]");
    }
}

#[test]
fn sync_all_among_the_first_used_cores_leaves_the_other_blocks_free() {
    let rt = rt();
    let (_, y, _) = run_sync_all(&rt, "sync_all_few", 4).unwrap();
    let sum: Vec<f32> = doubled(0)
        .iter()
        .zip(doubled(1))
        .map(|(a, c)| a + c)
        .collect();
    assert_eq!(slot(&y, 0), sum, "blocks 0 and 1 meet");
    assert_eq!(slot(&y, 1), sum);
    for b in 2..4 {
        let x: Vec<f32> = doubled(b).iter().map(|v| v / 2.0).collect();
        assert_eq!(slot(&y, b), x, "block {b} stays out of the barrier");
    }
}

#[test]
fn every_block_leaves_a_sync_all_when_the_slowest_block_reaches_it() {
    let rt = rt();
    let (_, _, even) = run_sync_all(&rt, "sync_all_soft", 4).unwrap();
    let (_, y, skew) = run_sync_all(&rt, "sync_all_skew", 4).unwrap();
    assert_eq!(slot(&y, 3), {
        let n = doubled(0);
        doubled(3)
            .iter()
            .zip(&n)
            .map(|(a, c)| a + c)
            .collect::<Vec<_>>()
    });
    // Block 0 works 200 vector instructions longer before the barrier; the other blocks wait
    // for it there, so every block of the skewed launch ends about as late as block 0, and
    // later than any block of the even one.
    let cycles: Vec<u64> = skew.blocks.iter().map(|b| b.cycles).collect();
    let (lo, hi) = (*cycles.iter().min().unwrap(), *cycles.iter().max().unwrap());
    let even_hi = even.blocks.iter().map(|b| b.cycles).max().unwrap();
    assert!(
        lo > even_hi + 200 * 4,
        "{cycles:?} vs an even launch's {even_hi}"
    );
    assert!(
        hi - lo < (hi - even_hi) / 4,
        "{cycles:?}: the blocks leave together"
    );
    assert_eq!(skew.cycles, hi.max(skew.hbm_floor_cycles));
}

#[test]
fn a_sync_all_that_can_never_be_released_fails_the_launch_naming_the_blocks() {
    let rt = rt();
    // Block 0 returns without the barrier blocks 1..4 wait at.
    let err = run_sync_all(&rt, "sync_all_skipped", 4).unwrap_err();
    assert_eq!(err.code(), codes::RT_AICORE_TRAP_EXCEPTION, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("SyncAll for 4 blocks: 3 reached it (block 1, block 2, block 3)"),
        "{text}"
    );
    // More blocks than the launch has cores: those past the last core could never start.
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap();
    let err = run_sync_all(&rt, "sync_all_soft", 6).unwrap_err();
    assert_eq!(err.code(), codes::RT_AICORE_TRAP_EXCEPTION, "{err}");
    assert!(
        err.to_string()
            .contains("needs a core for each, and the launch has 4"),
        "{err}"
    );
    // A launch that fits runs.
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap();
    let (_, y, _) = run_sync_all(&rt, "sync_all_soft", 4).unwrap();
    assert_eq!(slot(&y, 3)[0], doubled(3)[0] + doubled(0)[0]);
}

const CC_N: usize = 64;

/// Runs one of `cross_core.o`'s split mix kernels on `groups` AI cores (x = 0, 1, 2, …; w, y, z
/// and info zeroed); returns w, y, z, info and the launch's statistics, or its error.
#[allow(clippy::type_complexity)]
fn run_cross_core(
    name: &str,
    groups: usize,
) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>, Vec<i32>, LaunchStats), NpuError> {
    let rt = rt();
    let bin = load(&rt, "cross_core.o");
    let s = rt.streams().create().unwrap();
    let f = rt.binaries().get_function(bin, name).unwrap();
    let n = CC_N * groups;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let dx = upload(&rt, &x);
    let zeros = vec![0f32; n];
    let (dw, dy, dz) = (
        upload(&rt, &zeros),
        upload(&rt, &zeros),
        upload(&rt, &zeros),
    );
    let info = upload(&rt, &vec![0i32; 4 * 64]);
    rt.submit(Launch::new(
        f,
        groups as u32,
        &[dx.into(), dw.into(), dy.into(), dz.into(), info.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s)?;
    let stats = rt.binaries().take_launch_stats().pop().unwrap();
    Ok((
        download(&rt, dw, n),
        download(&rt, dy, n),
        download(&rt, dz, n),
        download(&rt, info, 4 * 64),
        stats,
    ))
}

#[test]
fn a_split_mix_kernel_runs_a_cube_and_two_vector_blocks_per_ai_core_meeting_through_flags() {
    let groups = 3;
    let (w, y, z, info, stats) = run_cross_core("cross_core_pingpong", groups).unwrap();
    let x: Vec<f32> = (0..CC_N * groups).map(|i| i as f32).collect();
    let want_w: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    let want_y: Vec<f32> = want_w.iter().map(|v| v + 1.0).collect();
    let want_z: Vec<f32> = want_y.iter().map(|v| 3.0 * v).collect();
    assert_eq!(w, want_w, "the cube blocks' scalar stores");
    assert_eq!(
        y, want_y,
        "the vector blocks waited for the cube blocks' flag 3"
    );
    assert_eq!(
        z, want_z,
        "the cube blocks waited for both vector blocks' flag 5"
    );
    // GetBlockIdx, GetBlockNum, GetSubBlockIdx, GetTaskRation per block.
    for g in 0..groups as i32 {
        let aic = &info[4 * g as usize..4 * g as usize + 4];
        assert_eq!(aic, [g, groups as i32, 0, 1], "AIC block {g}");
        for s in 0..2 {
            let b = 2 * g + s;
            let aiv = &info[4 * (16 + b) as usize..4 * (16 + b) as usize + 4];
            assert_eq!(aiv, [b, groups as i32, s, 2], "AIV block {b}");
        }
    }
    // One cube and two vector blocks per AI core, on AI cores 0..3; the vector blocks
    // started after the cube block's set, so each ends later than that set, and the cube
    // block ends after both.
    assert_eq!(stats.blocks.len(), 3 * groups);
    let cores: Vec<u32> = stats.blocks.iter().map(|b| b.core).collect();
    assert_eq!(cores, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
    for g in 0..groups {
        let (aic, aiv) = (&stats.blocks[3 * g], &stats.blocks[3 * g + 1..3 * g + 3]);
        assert!(
            aiv.iter().all(|b| b.cycles < aic.cycles),
            "{:?}",
            stats.blocks
        );
    }
    let slowest = stats.blocks.iter().map(|b| b.cycles).max().unwrap();
    assert_eq!(stats.cycles, slowest.max(stats.hbm_floor_cycles));
}

#[test]
fn cross_core_flags_between_the_vector_blocks_of_a_core_and_across_the_launch() {
    let groups = 2;
    let x: Vec<f32> = (0..CC_N * groups).map(|i| i as f32).collect();
    let y_want: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    // Mode 1: each vector block reads the half its partner wrote before their set / wait.
    let (_, y, z, _, _) = run_cross_core("cross_core_pair", groups).unwrap();
    assert_eq!(y, y_want);
    for g in 0..groups {
        let (lo, hi) = (g * CC_N, g * CC_N + CC_N / 2);
        assert_eq!(
            z[lo..hi],
            y_want[hi..hi + CC_N / 2],
            "core {g}: half 0 from half 1"
        );
        assert_eq!(
            z[hi..hi + CC_N / 2],
            y_want[lo..hi],
            "core {g}: half 1 from half 0"
        );
    }
    // Mode 0: every vector block of the launch sets, then each reads the next one's half.
    let (_, y, z, _, _) = run_cross_core("cross_core_all", groups).unwrap();
    assert_eq!(y, y_want);
    let halves = 2 * groups;
    for b in 0..halves {
        let next = (b + 1) % halves;
        let h = CC_N / 2;
        assert_eq!(
            z[b * h..(b + 1) * h],
            y_want[next * h..(next + 1) * h],
            "AIV {b}"
        );
    }
}

#[test]
fn a_cross_core_wait_nothing_sets_fails_the_launch_naming_the_block_and_flag() {
    let err = run_cross_core("cross_core_never", 2).unwrap_err();
    assert_eq!(err.code(), codes::RT_AICORE_TRAP_EXCEPTION, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("CrossCoreWaitFlag(7) on AIV block 0 can never be released"),
        "{text}"
    );
    assert!(
        text.contains("AIV block 0, AIV block 1, AIV block 2, AIV block 3"),
        "{text}"
    );
}

// ---- Width padding: Duplicate's mask forms, Pad, UnPad, Broadcast (pad_custom.cpp) ----------

/// The bytes each pad_custom kernel copies out: its whole 8 KiB UB buffer.
const PAD_BUF: usize = 8192;
const SENTINEL16: u16 = 0x7777;

/// Distinct 16-bit patterns (no NaN or infinity as half) for the input buffer.
fn pad_input16() -> Vec<u16> {
    (0..PAD_BUF / 2)
        .map(|i| f32_to_f16((i % 2000) as f32 * 0.25 - 100.0))
        .collect()
}

fn pad_input32() -> Vec<f32> {
    (0..PAD_BUF / 4).map(|i| i as f32 * 0.5 - 300.0).collect()
}

/// Runs `name` from pad_custom.o on one block with `args` after (x, y) and returns y's words.
fn run_pad<T: bytemuck::Pod + Default + Clone>(name: &str, x: &[T], args: &[Arg]) -> Vec<T> {
    let rt = rt();
    let bin = load(&rt, "pad_custom.o");
    let s = rt.streams().create().unwrap();
    let k = rt.binaries().get_function(bin, name).unwrap();
    let dx = upload(&rt, x);
    let dy = rt.memory().malloc(PAD_BUF as u64).unwrap();
    let mut all: Vec<Arg> = vec![dx.into(), dy.into()];
    all.extend_from_slice(args);
    run(&rt, k, 1, &all, s);
    download(&rt, dy, PAD_BUF / std::mem::size_of::<T>())
}

/// Runs `name` with (x, y, a u32 table in device memory, then `args`) expecting the block to
/// abort, and returns the kernel log.
fn run_pad_failing(name: &str, table: &[u32], args: &[Arg]) -> Vec<String> {
    let rt = rt();
    let bin = load(&rt, "pad_custom.o");
    let s = rt.streams().create().unwrap();
    let k = rt.binaries().get_function(bin, name).unwrap();
    let dx = upload(&rt, &vec![0u8; PAD_BUF]);
    let dy = rt.memory().malloc(PAD_BUF as u64).unwrap();
    let dt = upload(&rt, table);
    let mut all: Vec<Arg> = vec![dx.into(), dy.into(), dt.into()];
    all.extend_from_slice(args);
    rt.submit(Launch::new(k, 1, &all, s)).unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("135"), "{err}");
    rt.binaries().take_kernel_log()
}

/// What Duplicate's mask / repeat form writes: element p of repeat r (p selected) at
/// `(r * rep + (p / per_block) * blk) * per_block + p % per_block`.
fn duplicate_model<T: Copy>(
    x: &[T],
    v: T,
    per_block: usize,
    selected: impl Fn(usize) -> bool,
    (repeat, blk, rep): (usize, usize, usize),
) -> Vec<T> {
    let mut y = x.to_vec();
    for r in 0..repeat {
        for p in 0..8 * per_block {
            if selected(p) {
                y[(r * rep + (p / per_block) * blk) * per_block + p % per_block] = v;
            }
        }
    }
    y
}

fn shape_arg(repeat: usize, blk: usize, rep: usize) -> Arg {
    ((repeat | blk << 8 | rep << 16) as u64).into()
}

#[test]
fn duplicate_with_a_bitwise_mask_writes_only_the_selected_elements_of_each_block_and_repeat() {
    let x = pad_input16();
    let v = f32_to_f16(-3.5);
    let bit = |m: [u64; 2]| move |p: usize| (m[p / 64] >> (p % 64)) & 1 == 1;
    let cases: [([u64; 2], (usize, usize, usize)); 5] = [
        // The AbsDuplicate sample's mask: the last 5 of the first 16 elements.
        ([(1 << 16) - (1 << 11), 0], (1, 1, 1)),
        // Runs from a block's start, scattered bits, and mask[1]'s blocks, 3 repeats.
        ([0x0F0F_FFFF_8001_F800, 0x8000_0001_FFFF_0F0F], (3, 1, 8)),
        // Block stride 2, repeats 17 blocks apart (odd), alternate bits.
        ([0x5555_AAAA_0000_FFFF, 0xAAAA_AAAA_AAAA_AAAA], (2, 2, 17)),
        // Every element: vdup only.
        ([!0, !0], (2, 1, 8)),
        // Overlapping repeats (one block apart).
        ([0x0000_0000_0000_FF00, 0], (4, 1, 1)),
    ];
    for (mask, shape) in cases {
        let y: Vec<u16> = run_pad(
            "dup_mask_half",
            &x,
            &[
                mask[0].into(),
                mask[1].into(),
                shape_arg(shape.0, shape.1, shape.2),
            ],
        );
        assert_eq!(
            y,
            duplicate_model(&x, v, 16, bit(mask), shape),
            "{mask:x?} {shape:?}"
        );
    }

    // float: 8 elements a block, mask[1] ignored.
    let x = pad_input32();
    for (mask, shape) in [
        ([0x00FF_F0F0_8001_0003u64, !0u64], (3, 1, 8)),
        ([0xF0F0_0F0F_00FF_FF01, 0x1234], (2, 3, 25)),
    ] {
        let y: Vec<f32> = run_pad(
            "dup_mask_f32",
            &x,
            &[
                mask[0].into(),
                mask[1].into(),
                shape_arg(shape.0, shape.1, shape.2),
            ],
        );
        let want = duplicate_model(&x, 2.25, 8, bit([mask[0], 0]), shape);
        assert_eq!(y, want, "{mask:x?} {shape:?}");
    }
}

#[test]
fn duplicate_with_a_counter_mask_writes_the_first_elements_of_each_repeat() {
    let x = pad_input16();
    let v = f32_to_f16(-3.5);
    for (count, shape) in [(37usize, (2, 1, 8)), (100, (3, 2, 16)), (128, (1, 1, 8))] {
        let y: Vec<u16> = run_pad(
            "dup_count_half",
            &x,
            &[
                (count as u64).into(),
                0u64.into(),
                shape_arg(shape.0, shape.1, shape.2),
            ],
        );
        assert_eq!(
            y,
            duplicate_model(&x, v, 16, |p| p < count, shape),
            "{count} {shape:?}"
        );
    }
}

/// PadTiling's 26 words with the shape the kernel reads (the host's other fields do not
/// change the result).
fn pad_tiling(height: u32, width: u32, ori: u32) -> Vec<u32> {
    let mut t = vec![0u32; 26];
    t[..3].copy_from_slice(&[height, width, ori]);
    t
}

fn pad_params(left: u64, right: u64, value: i32) -> Arg {
    (left | right << 16 | (value as u32 as u64) << 32).into()
}

/// Runs a Pad kernel on (height x width, data columns) and returns y.
fn run_pad_kernel<T: bytemuck::Pod + Default + Clone>(
    name: &str,
    x: &[T],
    (height, width, ori): (u32, u32, u32),
    (left, right, value): (u64, u64, i32),
) -> Vec<T> {
    let rt = rt();
    let bin = load(&rt, "pad_custom.o");
    let s = rt.streams().create().unwrap();
    let k = rt.binaries().get_function(bin, name).unwrap();
    let dx = upload(&rt, x);
    let dt = upload(&rt, &pad_tiling(height, width, ori));
    let dy = rt.memory().malloc(PAD_BUF as u64).unwrap();
    run(
        &rt,
        k,
        1,
        &[
            dx.into(),
            dy.into(),
            dt.into(),
            pad_params(left, right, value),
        ],
        s,
    );
    download(&rt, dy, PAD_BUF / std::mem::size_of::<T>())
}

#[test]
fn pad_on_an_aligned_width_sets_the_right_columns_and_keeps_the_rest() {
    let x = pad_input16();
    // (height, width, data columns, rightPad, value): the AbsPad sample's 16 x 16 with 7 data
    // columns and 9 padded, fewer padded than the block's spare columns, a 2-block row.
    for (h, w, ori, right, value) in [
        (16u32, 16u32, 7u32, 9u64, 0i32),
        (5, 16, 7, 4, -2),
        (3, 32, 21, 11, 321),
        (250, 16, 15, 1, 7),
    ] {
        let y: Vec<u16> = run_pad_kernel("pad_half", &x, (h, w, ori), (0, right, value));
        let (h, w, ori, right) = (h as usize, w as usize, ori as usize, right as usize);
        for r in 0..h {
            for c in 0..w {
                let i = r * w + c;
                let want = if (ori..ori + right).contains(&c) {
                    f32_to_f16(value as f32)
                } else {
                    x[i]
                };
                assert_eq!(y[i], want, "{h}x{w} ({ori}+{right}) row {r} column {c}");
            }
        }
        assert!(y[h * w..].iter().all(|&b| b == SENTINEL16), "{h}x{w}");
    }
    let x = pad_input32();
    let y: Vec<f32> = run_pad_kernel("pad_f32", &x, (4, 8, 5), (0, 3, -7));
    for r in 0..4 {
        for c in 0..8 {
            let want = if c >= 5 { -7.0 } else { x[r * 8 + c] };
            assert_eq!(y[r * 8 + c], want, "row {r} column {c}");
        }
    }
}

#[test]
fn pad_on_an_unaligned_width_adds_columns_on_both_sides() {
    let x = pad_input16();
    // (height, width, leftPad, rightPad, value): to the aligned width, and to less than it.
    for (h, w, left, right, value) in [
        (16u32, 15u32, 0u64, 1u64, 321i32),
        (3, 13, 1, 2, -9),
        (4, 9, 2, 3, 5),
        (7, 1, 3, 12, 1),
    ] {
        let y: Vec<u16> = run_pad_kernel("pad_half", &x, (h, w, w), (left, right, value));
        let (h, w, left, right) = (h as usize, w as usize, left as usize, right as usize);
        let out = left + w + right;
        let pad = f32_to_f16(value as f32);
        for r in 0..h {
            for c in 0..out {
                let want = if c < left || c >= left + w {
                    pad
                } else {
                    x[r * w + c - left]
                };
                assert_eq!(
                    y[r * out + c],
                    want,
                    "{h}x{w} +{left}+{right} row {r} column {c}"
                );
            }
        }
        assert!(y[h * out..].iter().all(|&b| b == SENTINEL16), "{h}x{w}");
    }
    let x = pad_input32();
    let y: Vec<f32> = run_pad_kernel("pad_f32", &x, (3, 5, 5), (1, 2, 4));
    for r in 0..3 {
        let row: Vec<f32> = std::iter::once(4.0)
            .chain(x[r * 5..r * 5 + 5].iter().copied())
            .chain([4.0, 4.0])
            .collect();
        assert_eq!(&y[r * 8..r * 8 + 8], &row[..], "row {r}");
    }
}

#[test]
fn pad_in_place_gives_what_pad_into_another_tensor_gives() {
    let x = pad_input16();
    for (shape, params) in [((6, 13, 13), (2, 1, 11)), ((4, 16, 10), (0, 6, -1))] {
        let apart: Vec<u16> = run_pad_kernel("pad_half", &x, shape, params);
        let in_place: Vec<u16> = run_pad_kernel("pad_in_place_half", &x, shape, params);
        // Both shapes' rows are 16 halves once padded.
        let n = (shape.0 * 16) as usize;
        assert_eq!(&in_place[..n], &apart[..n], "{shape:?}");
    }
}

#[test]
fn pad_and_unpad_refuse_parameters_outside_the_api_naming_them() {
    let cases: [(&str, Vec<u32>, Arg, &str); 4] = [
        (
            "pad_half",
            pad_tiling(4, 16, 7),
            pad_params(1, 2, 0),
            "Pad: a 32-byte-aligned width is padded on the right only (leftPad must be 0)",
        ),
        (
            "pad_half",
            pad_tiling(4, 32, 7),
            pad_params(0, 10, 0),
            "Pad: srcOriWidth + rightPad passes the data's last 32-byte block",
        ),
        (
            "pad_half",
            pad_tiling(4, 13, 13),
            pad_params(2, 2, 0),
            "Pad: leftPad + srcWidth + rightPad passes the width rounded up to 32 bytes",
        ),
        (
            "unpad_half",
            unpad_tiling(4, 16),
            16u64.into(),
            "UnPad: rightPad must be fewer elements than a 32-byte block holds",
        ),
    ];
    for (name, table, arg, message) in cases {
        let log = run_pad_failing(name, &table, &[arg]);
        assert!(
            log.iter().any(|l| l.contains(message)),
            "{message}: {log:?}"
        );
    }
    let log = run_pad_failing("unpad_f32", &unpad_tiling(2, 12), &[1u64.into()]);
    assert!(
        log.iter()
            .any(|l| l.contains("UnPad: srcWidth must be a whole number of 32-byte blocks")),
        "{log:?}"
    );
}

fn unpad_tiling(height: u32, width: u32) -> Vec<u32> {
    let mut t = vec![0u32; 8];
    t[..2].copy_from_slice(&[height, width]);
    t
}

#[test]
fn unpad_takes_the_right_columns_off_and_packs_the_rows() {
    let rt = rt();
    let bin = load(&rt, "pad_custom.o");
    let s = rt.streams().create().unwrap();
    let x16 = pad_input16();
    let x32 = pad_input32();
    // The AbsUnPad sample's 16 x 16 less 2, a wide row, and float rows.
    for (h, w, right) in [(16usize, 16usize, 2usize), (5, 48, 15), (1, 16, 0)] {
        let k = rt.binaries().get_function(bin, "unpad_half").unwrap();
        let (dx, dt) = (
            upload(&rt, &x16),
            upload(&rt, &unpad_tiling(h as u32, w as u32)),
        );
        let dy = rt.memory().malloc(PAD_BUF as u64).unwrap();
        let args = [dx.into(), dy.into(), dt.into(), (right as u64).into()];
        run(&rt, k, 1, &args, s);
        let y: Vec<u16> = download(&rt, dy, PAD_BUF / 2);
        let out = w - right;
        for r in 0..h {
            assert_eq!(
                &y[r * out..(r + 1) * out],
                &x16[r * w..r * w + out],
                "{h}x{w}-{right} row {r}"
            );
        }
        assert!(
            y[h * out..].iter().all(|&b| b == SENTINEL16),
            "{h}x{w}-{right}"
        );
    }
    let k = rt.binaries().get_function(bin, "unpad_f32").unwrap();
    let (dx, dt) = (upload(&rt, &x32), upload(&rt, &unpad_tiling(3, 8)));
    let dy = rt.memory().malloc(PAD_BUF as u64).unwrap();
    run(
        &rt,
        k,
        1,
        &[dx.into(), dy.into(), dt.into(), 3u64.into()],
        s,
    );
    let y: Vec<u32> = download(&rt, dy, PAD_BUF / 4);
    for r in 0..3 {
        let want: Vec<u32> = x32[r * 8..r * 8 + 5].iter().map(|f| f.to_bits()).collect();
        assert_eq!(&y[r * 5..r * 5 + 5], &want[..], "row {r}");
    }
    assert!(y[15..].iter().all(|&b| b == 0x7777_7777));
}

#[test]
fn broadcast_repeats_a_column_or_a_row_on_aligned_and_unaligned_rows() {
    // [m, 1] -> [m, k] int8 with 255-byte rows (the broadcast sample's unaligned case).
    let x8: Vec<i8> = (0..PAD_BUF)
        .map(|i| (i as i32 * 37 % 251 - 125) as i8)
        .collect();
    let y: Vec<i8> = run_pad("broadcast_i8_axis1", &x8, &[3u64.into(), 255u64.into()]);
    for r in 0..3 {
        assert!(
            y[r * 255..(r + 1) * 255].iter().all(|&v| v == x8[r]),
            "row {r}"
        );
    }
    assert!(y[765..].iter().all(|&b| b == 0x77));
    // half: 16 per row (aligned) and 13 (unaligned).
    let x = pad_input16();
    for (m, k) in [(5usize, 16usize), (4, 13), (20, 1)] {
        let y: Vec<u16> = run_pad(
            "broadcast_half_axis1",
            &x,
            &[(m as u64).into(), (k as u64).into()],
        );
        for r in 0..m {
            assert!(
                y[r * k..(r + 1) * k].iter().all(|&v| v == x[r]),
                "{m}x{k} row {r}"
            );
        }
        assert!(y[m * k..].iter().all(|&b| b == SENTINEL16), "{m}x{k}");
    }
    // [1, k] -> [m, k] float.
    let x = pad_input32();
    let y: Vec<f32> = run_pad("broadcast_f32_axis0", &x, &[5u64.into(), 16u64.into()]);
    for r in 0..5 {
        assert_eq!(&y[r * 16..(r + 1) * 16], &x[..16], "row {r}");
    }
    assert!(y[80..].iter().all(|&f| f.to_bits() == 0x7777_7777));
    // [1] -> [37] int16 (BroadCast, with a temporary buffer).
    let x16: Vec<i16> = (0..PAD_BUF / 2).map(|i| -(i as i16) - 5).collect();
    let y: Vec<i16> = run_pad("broadcast_i16_dim1", &x16, &[37u64.into()]);
    assert!(y[..37].iter().all(|&v| v == -5));
    assert!(y[37..].iter().all(|&b| b == SENTINEL16 as i16));
}

#[test]
fn broadcast_refuses_an_unaligned_row_along_axis_0() {
    let rt = rt();
    let bin = load(&rt, "pad_custom.o");
    let s = rt.streams().create().unwrap();
    let k = rt
        .binaries()
        .get_function(bin, "broadcast_f32_axis0")
        .unwrap();
    let dx = upload(&rt, &vec![0u8; PAD_BUF]);
    let dy = rt.memory().malloc(PAD_BUF as u64).unwrap();
    rt.submit(Launch::new(
        k,
        1,
        &[dx.into(), dy.into(), 3u64.into(), 5u64.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("135"), "{err}");
    let log = rt.binaries().take_kernel_log();
    assert!(
        log.iter().any(|l| l.contains(
            "Broadcast: with dim 2 and axis 0, srcShape[1] must fill whole 32-byte blocks"
        )),
        "{log:?}"
    );
}

/// `x` rounded to an integer by Ascend C's RoundMode `mode` (0 CAST_NONE, as CAST_RINT, 1
/// CAST_RINT, 2 CAST_FLOOR, 3 CAST_CEIL, 4 CAST_ROUND, 5 CAST_TRUNC), saturated to `lo..=hi`,
/// NaN 0.
fn round_to_int(x: f32, mode: u32, lo: i32, hi: i32) -> i32 {
    if x.is_nan() {
        return 0;
    }
    let r = match mode {
        0 | 1 => x.round_ties_even(),
        2 => x.floor(),
        3 => x.ceil(),
        4 => x.round(),
        _ => x.trunc(),
    };
    r.clamp(lo as f32, hi as f32) as i32
}

/// The committed NPU object of `examples/ascendc/STEM.cpp`.
fn committed(stem: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/ascendc/{stem}.o"))
}

/// The objects of `examples/ascendc/STEM.cpp` to check: the committed NPU build, and the
/// --cpu-debug (twin-debug) build of the same file where clang++-16 is installed, built once
/// per test binary. The layer's header does not branch on the mode macros, so a file that does
/// not either gives the same bytes in both; running both keeps it so.
fn objects(stem: &str) -> Vec<std::path::PathBuf> {
    static BUILT: std::sync::Mutex<Vec<(String, std::path::PathBuf)>> =
        std::sync::Mutex::new(Vec::new());
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut objs = vec![committed(stem)];
    let installed = std::process::Command::new("clang++-16")
        .arg("--version")
        .output()
        .is_ok();
    if !installed {
        return objs;
    }
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, out)) = built.iter().find(|(s, _)| s == stem) {
        objs.push(out.clone());
        return objs;
    }
    let out =
        std::env::temp_dir().join(format!("npusim-{stem}-cpu-debug-{}.o", std::process::id()));
    let run = std::process::Command::new("bash")
        .arg(root.join("scripts/ascendc-compile.sh"))
        .arg("--cpu-debug")
        .arg(root.join(format!("examples/ascendc/{stem}.cpp")))
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{stem}.cpp --cpu-debug: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    built.push((stem.to_string(), out.clone()));
    objs.push(out);
    objs
}

/// `object` loaded into `rt` (a path from [`objects`]).
fn load_path(rt: &Runtime, object: &std::path::Path) -> Binary {
    rt.binaries()
        .load_file(object)
        .unwrap_or_else(|e| panic!("{}: {e}", object.display()))
}

#[test]
fn every_half_casts_to_int8_and_int4_with_every_round_mode_saturating_and_back_exactly() {
    const TILE: usize = 4096;
    for obj in objects("cast_int") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let s = rt.streams().create().unwrap();
        let k8 = rt.binaries().get_function(bin, "cast_half_int8").unwrap();
        let k4 = rt.binaries().get_function(bin, "cast_half_int4").unwrap();
        // Every f16 bit pattern (NaNs, infinities, subnormals, ties), 4096 at a time.
        for base in (0..=u16::MAX as usize).step_by(TILE) {
            let x: Vec<u16> = (base..base + TILE).map(|b| b as u16).collect();
            let dx = upload(&rt, &x);
            for mode in 0..6u32 {
                let d8 = upload(&rt, &vec![0x55u8; TILE]);
                let d4 = upload(&rt, &vec![0x55u8; TILE / 2]);
                let args = |d: DevicePtr| [dx.into(), d.into(), (TILE as u32).into(), mode.into()];
                run(&rt, k8, 1, &args(d8), s);
                run(&rt, k4, 1, &args(d4), s);
                let y8: Vec<i8> = download(&rt, d8, TILE);
                let y4: Vec<u8> = download(&rt, d4, TILE / 2);
                for (i, &b) in x.iter().enumerate() {
                    let v = f16_to_f32(b);
                    assert_eq!(
                        y8[i] as i32,
                        round_to_int(v, mode, -128, 127),
                        "{v} mode {mode}"
                    );
                    let nibble = (y4[i / 2] >> (4 * (i % 2))) & 0xf;
                    let got = ((nibble << 4) as i8 >> 4) as i32;
                    assert_eq!(got, round_to_int(v, mode, -8, 7), "{v} mode {mode} (int4)");
                }
            }
        }
        // Back to half: every int8_t, and every byte as two int4b_t (low nibble first).
        let bytes: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
        let dx = upload(&rt, &bytes);
        let dy = upload(&rt, &vec![0u16; 1024]);
        let k = rt.binaries().get_function(bin, "cast_int8_half").unwrap();
        run(&rt, k, 1, &[dx.into(), dy.into(), 512u32.into()], s);
        let h: Vec<u16> = download(&rt, dy, 512);
        let want: Vec<u16> = bytes.iter().map(|&b| f32_to_f16(b as i8 as f32)).collect();
        assert_eq!(h, want);
        let k = rt.binaries().get_function(bin, "cast_int4_half").unwrap();
        run(&rt, k, 1, &[dx.into(), dy.into(), 1024u32.into()], s);
        let h: Vec<u16> = download(&rt, dy, 1024);
        let want: Vec<u16> = bytes
            .iter()
            .flat_map(|&b| [((b << 4) as i8 >> 4) as f32, ((b as i8) >> 4) as f32])
            .map(f32_to_f16)
            .collect();
        assert_eq!(h, want);
    }
}

#[test]
fn a_round_mode_the_cast_table_does_not_give_a_pair_fails_the_launch_naming_both() {
    let rt = rt();
    let bin = load(&rt, "cast_int.o");
    let s = rt.streams().create().unwrap();
    let k = rt.binaries().get_function(bin, "cast_half_int4").unwrap();
    let dx = upload(&rt, &[0u16; 64]);
    let dy = upload(&rt, &[0u8; 64]);
    // CAST_ODD (6): Ascend C's table gives it to float -> half only.
    rt.submit(Launch::new(
        k,
        1,
        &[dx.into(), dy.into(), 64u32.into(), 6u32.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err().to_string();
    assert!(err.contains("aborted with code 135"), "{err}");
    let log = rt.binaries().take_kernel_log();
    let want =
        "Cast: RoundMode::CAST_ODD is not in Ascend C's Cast table for half -> int4b_t on the 910B";
    assert!(log.iter().any(|l| l.contains(want)), "{log:?}");
}

#[test]
fn global_tensor_index_reads_see_the_copy_out_before_them_and_set_value_writes_by_index() {
    for obj in objects("api_probe") {
        let rt = rt();
        let bin = load_path(&rt, &obj);
        let s = rt.streams().create().unwrap();
        let x: Vec<f32> = (0..256).map(|i| i as f32 * 0.75 - 40.0).collect();
        let idx: Vec<u32> = (0..37).map(|k| (k * 97 + 13) % 256).collect();
        let want: Vec<f32> = idx.iter().map(|&i| 2.0 * x[i as usize]).collect();
        let read = |name: &str| -> Vec<f32> {
            let k = rt.binaries().get_function(bin, name).unwrap();
            let (dx, di) = (upload(&rt, &x), upload(&rt, &idx));
            let dy = upload(&rt, &[-1.0f32; 256]);
            let dout = upload(&rt, &[0.0f32; 37]);
            let args = [dx.into(), dy.into(), di.into(), dout.into(), 37u32.into()];
            run(&rt, k, 1, &args, s);
            download(&rt, dout, 37)
        };
        assert_eq!(read("gm_index_read"), want);
        // Without GetValue's wait the first scalar reads land before the copy out has: y's old
        // -1.0s (the later ones, once it has, the new values).
        let stale = read("gm_index_read_unsynced");
        assert_eq!(stale[0], -1.0);
        assert_ne!(stale, want);
    }
}

/// `cast_repeat.cpp`'s `shape` argument: repeatTimes and UnaryRepeatParams' (dstBlkStride,
/// srcBlkStride, dstRepStride, srcRepStride), a byte each.
fn repeat_shape(repeat: u64, [db, sb, dr, sr]: [u64; 4]) -> Arg {
    (repeat | db << 8 | sb << 16 | dr << 24 | sr << 32).into()
}

/// The (destination, source) element indices of element `p` of repeat `r` in Cast's repeat
/// form: blocks of `per_block` elements (32 bytes of the wider type), block `k` of an operand
/// `blkStride` of its blocks apart, repeats `repStride` × 32 bytes apart.
fn cast_slot(
    r: usize,
    p: usize,
    per_block: usize,
    (dsize, ssize): (usize, usize),
    [db, sb, dr, sr]: [u64; 4],
) -> (usize, usize) {
    let (k, j) = (p / per_block, p % per_block);
    let at = |size: usize, blk: u64, rep: u64| {
        (r * rep as usize * 32 + k * blk as usize * per_block * size) / size + j
    };
    (at(dsize, db, dr), at(ssize, sb, sr))
}

/// Ascend C's float -> half Cast of `x` with round mode `mode` (0..=6): rounded once, a finite
/// value past half's range saturated at ±65504; ±inf and NaN stay.
fn cast_f32_half(x: f32, mode: u32) -> u16 {
    use npusim::device::core::npu::{RoundMode, f32_to_f16_rounded};
    let h = f32_to_f16_rounded(x, RoundMode::ALL[mode as usize]);
    if h & 0x7fff == 0x7c00 && x.is_finite() {
        h - 1
    } else {
        h
    }
}

const CAST_BYTES: usize = 8192;

/// Runs one of `cast_repeat.o`'s kernels on `x` with y starting as `y0` (8 KiB each); returns
/// y's bytes as `T`, or the launch's error and the kernel log.
fn run_cast_repeat<T: bytemuck::Pod + Default + Clone>(
    obj: &std::path::Path,
    name: &str,
    x: &[u8],
    y0: &[T],
    args: &[Arg],
) -> Result<Vec<T>, String> {
    let rt = rt();
    let bin = load_path(&rt, obj);
    let s = rt.streams().create().unwrap();
    let k = rt.binaries().get_function(bin, name).unwrap();
    let (dx, dy) = (upload(&rt, x), upload(&rt, y0));
    let mut all = vec![dx.into(), dy.into()];
    all.extend_from_slice(args);
    rt.submit(Launch::new(k, 1, &all, s)).unwrap();
    if let Err(e) = rt.streams().synchronize(s) {
        return Err(format!("{e}: {:?}", rt.binaries().take_kernel_log()));
    }
    Ok(download(&rt, dy, y0.len()))
}

#[test]
fn cast_with_a_continuous_mask_converts_the_first_elements_of_each_repeat_over_strides() {
    let x: Vec<f32> = (0..CAST_BYTES / 4)
        .map(|i| (i as f32 * 0.37 - 300.0) * 1.001)
        .collect();
    let y0 = vec![0xeeeeu16; CAST_BYTES / 2];
    // (mask, mode, repeats, strides): the reference's float -> half strides (dst 4, src 8),
    // then block strides on both sides and repeats that leave gaps.
    let cases = [
        (50u64, 1u32, 3u64, [1u64, 1, 4, 8]),
        (64, 2, 3, [2, 3, 20, 30]),
        (17, 5, 4, [1, 1, 5, 9]),
    ];
    for obj in objects("cast_repeat") {
        for (mask, mode, repeat, strides) in cases {
            let args = [mask.into(), mode.into(), repeat_shape(repeat, strides)];
            let bytes = bytemuck::cast_slice(&x);
            let y: Vec<u16> =
                run_cast_repeat(&obj, "cast_f32_half_mask", bytes, &y0, &args).unwrap();
            let mut want = y0.clone();
            for r in 0..repeat as usize {
                for p in 0..mask as usize {
                    let (d, s) = cast_slot(r, p, 8, (2, 4), strides);
                    want[d] = cast_f32_half(x[s], mode);
                }
            }
            assert_eq!(
                y,
                want,
                "mask {mask} mode {mode} {strides:?} ({})",
                obj.display()
            );
        }
        // A mask past a repeat's 64 floats stops the block naming the API.
        let args = [65u64.into(), 1u32.into(), repeat_shape(1, [1, 1, 4, 8])];
        let bytes = bytemuck::cast_slice(&x);
        let err = run_cast_repeat(&obj, "cast_f32_half_mask", bytes, &y0, &args).unwrap_err();
        assert!(
            err.contains("Cast: a continuous mask is 1..64 elements per repeat"),
            "{err}"
        );
    }
}

#[test]
fn cast_with_a_bitwise_mask_converts_the_selected_elements_and_keeps_the_others() {
    let mask0 = 0xf0f0_0f0f_1234_8001u64;
    let mask1 = 0x8000_0000_ffff_0007u64;
    let bit = |m: [u64; 2], p: usize| m[p / 64] >> (p % 64) & 1 == 1;
    let xf: Vec<f32> = (0..CAST_BYTES / 4)
        .map(|i| (i as f32 * 1.37 - 900.0) / 7.0)
        .collect();
    let xh: Vec<u16> = (0..CAST_BYTES / 2)
        .map(|i| f32_to_f16((i as f32 * 0.61 - 1000.0) / 3.0))
        .collect();
    for obj in objects("cast_repeat") {
        // float -> half: 64 elements a repeat (mask[0] only), contiguous and strided.
        for strides in [[1u64, 1, 4, 8], [2, 1, 12, 10]] {
            let y0 = vec![0xeeeeu16; CAST_BYTES / 2];
            let args = [mask0.into(), 5u32.into(), repeat_shape(3, strides)];
            let bytes = bytemuck::cast_slice(&xf);
            let y: Vec<u16> =
                run_cast_repeat(&obj, "cast_f32_half_bits", bytes, &y0, &args).unwrap();
            let mut want = y0.clone();
            for r in 0..3 {
                for p in (0..64).filter(|&p| bit([mask0, 0], p)) {
                    let (d, s) = cast_slot(r, p, 8, (2, 4), strides);
                    want[d] = cast_f32_half(xf[s], 5);
                }
            }
            assert_eq!(y, want, "float -> half {strides:?} ({})", obj.display());
        }
        // half -> float: the wider type is 32-bit, so mask[1] (all ones here) is not read.
        let strides = [1u64, 1, 8, 4];
        let y0 = vec![-7.5f32; CAST_BYTES / 4];
        let args = [mask0.into(), repeat_shape(2, strides)];
        let bytes = bytemuck::cast_slice(&xh);
        let y: Vec<f32> = run_cast_repeat(&obj, "cast_half_f32_bits", bytes, &y0, &args).unwrap();
        let mut want = y0.clone();
        for r in 0..2 {
            for p in (0..64).filter(|&p| bit([mask0, 0], p)) {
                let (d, s) = cast_slot(r, p, 8, (4, 2), strides);
                want[d] = f16_to_f32(xh[s]);
            }
        }
        assert_eq!(y, want, "half -> float ({})", obj.display());
        // half -> int8_t: 128 elements a repeat, both mask words, rounding and saturating.
        let strides = [1u64, 1, 4, 8];
        let y0 = vec![0x55u8; CAST_BYTES];
        let args = [
            mask0.into(),
            mask1.into(),
            4u32.into(),
            repeat_shape(2, strides),
        ];
        let y: Vec<u8> = run_cast_repeat(&obj, "cast_half_int8_bits", bytes, &y0, &args).unwrap();
        let mut want = y0.clone();
        for r in 0..2 {
            for p in (0..128).filter(|&p| bit([mask0, mask1], p)) {
                let (d, s) = cast_slot(r, p, 16, (1, 2), strides);
                want[d] = round_to_int(f16_to_f32(xh[s]), 4, -128, 127) as i8 as u8;
            }
        }
        assert_eq!(y, want, "half -> int8_t ({})", obj.display());
    }
}

#[test]
fn float_to_half_saturates_past_65504_in_every_round_mode_and_keeps_inf_and_nan() {
    let mut x: Vec<f32> = vec![
        65504.0,
        65519.0,
        65520.0,
        70000.0,
        1e10,
        f32::MAX,
        f32::INFINITY,
        f32::NAN,
        1.5,
        6.1e-5,
    ];
    x.extend(x.clone().iter().map(|v| -v));
    let n = 64;
    x.resize(n, 0.25);
    let mut bytes = bytemuck::cast_slice::<f32, u8>(&x).to_vec();
    bytes.resize(CAST_BYTES, 0);
    let y0 = vec![0u16; CAST_BYTES / 2];
    for obj in objects("cast_repeat") {
        for mode in 0..=6u32 {
            let args = [(n as u32).into(), mode.into()];
            let y: Vec<u16> =
                run_cast_repeat(&obj, "cast_f32_half_count", &bytes, &y0, &args).unwrap();
            // The Cast table's rule: overflow saturates, whatever the mode.
            for (i, v) in [70000.0f32, 1e10, f32::MAX].iter().enumerate() {
                assert_eq!(y[3 + i], 0x7bff, "{v} mode {mode}");
                assert_eq!(y[13 + i], 0xfbff, "-{v} mode {mode}");
            }
            assert_eq!((y[6], y[16]), (0x7c00, 0xfc00), "inf stays, mode {mode}");
            assert!(y[7] & 0x7c00 == 0x7c00 && y[7] & 0x3ff != 0, "NaN stays");
            for i in 0..n {
                if !x[i].is_nan() {
                    assert_eq!(y[i], cast_f32_half(x[i], mode), "{} mode {mode}", x[i]);
                }
            }
        }
    }
}
