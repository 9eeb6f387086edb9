//! Ascend C kernels (`examples/ascendc/*.cpp`, written against `device/sdk/ascendc/
//! kernel_operator.h` and built by `scripts/build-ascendc-kernels.sh`) run through the normal
//! launch API and match CPU references.

use npusim::device::core::npu::{f16_to_f32, f32_to_f16};
use npusim::prelude::*;

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::default()).unwrap()
}

fn load(rt: &Runtime, object: &str) -> Binary {
    let path = format!("{}/examples/ascendc/{object}", env!("CARGO_MANIFEST_DIR"));
    rt.load_binary_file(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn upload<T: bytemuck::Pod>(rt: &Runtime, data: &[T]) -> DevicePtr {
    let p = rt
        .malloc((std::mem::size_of_val(data) as u64).max(64))
        .unwrap();
    rt.memcpy_htod(p, data).unwrap();
    p
}

fn download<T: bytemuck::Pod + Default + Clone>(rt: &Runtime, p: DevicePtr, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    rt.memcpy_dtoh(&mut out, p).unwrap();
    out
}

fn halves(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| f32_to_f16(x)).collect()
}

/// Runs `kernel` on `blocks` blocks and returns the launch's simulated cycles.
fn run(rt: &Runtime, k: Kernel, blocks: u32, args: &[Arg], s: Stream) -> u64 {
    rt.launch(k, blocks, args, s).unwrap();
    rt.synchronize_stream(s).unwrap();
    rt.take_binary_launch_stats().pop().unwrap().cycles
}

const N: usize = 8 * 2048;

#[test]
fn the_half_add_sample_matches_the_cpu_bit_for_bit_single_and_double_buffered() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.create_stream().unwrap();
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
        let k = rt.get_function(bin, name).unwrap();
        let dz = rt.malloc(2 * N as u64).unwrap();
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
    let s = rt.create_stream().unwrap();
    let x: Vec<f32> = (0..N).map(|i| i as f32 * 0.25).collect();
    let y: Vec<f32> = (0..N).map(|i| 1000.0 - i as f32 * 0.5).collect();
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let k = rt.get_function(bin, "add_custom_f32").unwrap();
    let dz = rt.malloc(4 * N as u64).unwrap();
    run(&rt, k, 8, &[dx.into(), dy.into(), dz.into()], s);
    assert_eq!(download::<f32>(&rt, dz, N), want);

    // Tiling by value: {totalLength, tileNum} packed in one register (LP64).
    let total = 3 * 4096usize;
    let k = rt.get_function(bin, "add_custom_tiling_f32").unwrap();
    let dz = rt.malloc(4 * total as u64).unwrap();
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
    let k = rt.get_function(bin, "add_custom_tiling").unwrap();
    let dz = rt.malloc(2 * N as u64).unwrap();
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
    let s = rt.create_stream().unwrap();
    let d = rt.malloc(4096).unwrap();
    let tiling = upload(&rt, &[1000u32, 3u32]);
    let k = rt.get_function(bin, "add_custom_tiling").unwrap();
    rt.launch(k, 2, &[d.into(), d.into(), d.into(), tiling.into()], s)
        .unwrap();
    let err = rt.synchronize_stream(s).unwrap_err();
    assert!(err.to_string().contains("134"), "{err}");
}

#[test]
fn forgetting_enque_and_deque_of_the_inputs_adds_stale_bytes() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.create_stream().unwrap();
    let x = halves(&vec![1.5; N]);
    let y = halves(&vec![2.0; N]);
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    let dz = rt.malloc(2 * N as u64).unwrap();
    let k = rt.get_function(bin, "add_custom_unsynced").unwrap();
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
    let s = rt.create_stream().unwrap();
    let n = 4 * 2 * 2 * 1024;
    let x: Vec<f32> = (0..n).map(|i| (i % 101) as f32 * 0.11).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 3.3).collect();
    let (hx, hy) = (halves(&x), halves(&y));
    let (dx, dy) = (upload(&rt, &hx), upload(&rt, &hy));
    let dz = rt.malloc(2 * n as u64).unwrap();
    let tiling = upload(&rt, &[n as u32, 2]);
    let k = rt.get_function(bin, "sub_custom").unwrap();
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
    let s = rt.create_stream().unwrap();
    let n = 10_007usize;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 5000.0) * 0.013).collect();
    let hx = halves(&x);
    let dx = upload(&rt, &hx);
    let dy = rt.malloc(2 * n as u64 + 64).unwrap();
    let slope = 0.1f32;
    let k = rt.get_function(bin, "leaky_relu_custom").unwrap();
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
    let s = rt.create_stream().unwrap();
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
    let dy = rt.malloc(2 * n as u64).unwrap();
    let mut t = [0u32; 3];
    t[0] = n as u32;
    t[1] = tile;
    t[2] = value.to_bits();
    let tiling = upload(&rt, &t);
    let k = rt.get_function(bin, "addcdiv_custom").unwrap();
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
    let s = rt.create_stream().unwrap();
    let (rows, cols) = (37usize, 200usize);
    let x = rows_input(rows, cols);
    let dx = upload(&rt, &x);
    let dy = rt.malloc(4 * (rows * cols) as u64).unwrap();
    let tiling = upload(&rt, &[rows as u32, cols as u32]);
    let k = rt.get_function(bin, "softmax_custom").unwrap();
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
    let s = rt.create_stream().unwrap();
    let (rows, cols, eps) = (29usize, 768usize, 1e-5f32);
    let x = rows_input(rows, cols);
    let gamma: Vec<f32> = (0..cols).map(|i| 1.0 + (i % 9) as f32 * 0.1).collect();
    let beta: Vec<f32> = (0..cols).map(|i| (i % 4) as f32 * 0.25 - 0.5).collect();
    let (dx, dg, db) = (upload(&rt, &x), upload(&rt, &gamma), upload(&rt, &beta));
    let dy = rt.malloc(4 * (rows * cols) as u64).unwrap();
    let tiling = upload(&rt, &[rows as u32, cols as u32, eps.to_bits()]);
    let k = rt.get_function(bin, "layer_norm_custom").unwrap();
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
    let s = rt.create_stream().unwrap();
    let (rows, cols) = (21usize, 20_000usize);
    let x = rows_input(rows, cols);
    let dx = upload(&rt, &x);
    let dy = rt.malloc(4 * rows as u64 + 64).unwrap();
    let tiling = upload(&rt, &[rows as u32, cols as u32]);
    let k = rt.get_function(bin, "reduce_sum_custom").unwrap();
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
    let s = rt.create_stream().unwrap();
    let n = 48 * 2 * 1024usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let dx = upload(&rt, &x);
    let dz = rt.malloc(4 * n as u64).unwrap();
    let k = rt.get_function(bin, "add_custom_tiling_f32").unwrap();
    let packed = n as u64 | 1 << 32;
    rt.launch(k, 48, &[dx.into(), dx.into(), dz.into(), packed.into()], s)
        .unwrap();
    rt.synchronize_stream(s).unwrap();
    let l = rt.take_binary_launch_stats().pop().unwrap();
    let cores: std::collections::BTreeSet<u32> = l.blocks.iter().map(|b| b.core).collect();
    assert_eq!(cores.len(), 48, "one vector core per block");
    let slowest = l.blocks.iter().map(|b| b.cycles).max().unwrap();
    assert_eq!(l.cycles, slowest.max(l.hbm_floor_cycles));
    let z: Vec<f32> = download(&rt, dz, n);
    assert!(z.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));

    // The small preset keeps one core type: 8 blocks on its 4 cores, two each.
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap();
    let bin = load(&rt, "add_custom.o");
    let s = rt.create_stream().unwrap();
    let dx = upload(&rt, &x[..8 * 2048]);
    let dz = rt.malloc(4 * 8 * 2048).unwrap();
    let k = rt.get_function(bin, "add_custom_f32").unwrap();
    rt.launch(k, 8, &[dx.into(), dx.into(), dz.into()], s)
        .unwrap();
    rt.synchronize_stream(s).unwrap();
    let l = rt.take_binary_launch_stats().pop().unwrap();
    assert_eq!(l.blocks.iter().map(|b| b.core).max(), Some(3));
}

#[test]
fn the_api_probe_computes_and_prints_what_the_layer_promises() {
    let rt = rt();
    let bin = load(&rt, "api_probe.o");
    let s = rt.create_stream().unwrap();
    let out = rt.malloc(16).unwrap();
    let k = rt.get_function(bin, "api_probe").unwrap();
    run(&rt, k, 1, &[out.into()], s);
    assert_eq!(download::<f32>(&rt, out, 4), [7.0, -1.0, 7.0, -3.0]);
    assert_eq!(
        rt.take_kernel_log(),
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
    let s = rt.create_stream().unwrap();
    let n = 4 * 1024usize;
    let x = halves(&(0..n).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
    let dx = upload(&rt, &x);
    let dz = rt.malloc(2 * n as u64).unwrap();
    let k = rt.get_function(bin, "add_custom_tiling").unwrap();
    rt.launch_with_tiling(
        k,
        4,
        &[dx.into(), dx.into(), dz.into(), 0u64.into()],
        &[n as u32, 1],
        s,
    )
    .unwrap();
    rt.synchronize_stream(s).unwrap();
    let z: Vec<u16> = download(&rt, dz, n);
    for i in 0..n {
        assert_eq!(z[i], f32_to_f16(2.0 * f16_to_f32(x[i])), "[{i}]");
    }
}

#[test]
fn a_deque_with_nothing_enqueued_fails_the_launch_instead_of_hanging() {
    let rt = rt();
    let bin = load(&rt, "api_probe.o");
    let s = rt.create_stream().unwrap();
    let out = rt.malloc(256).unwrap();
    let k = rt.get_function(bin, "deque_without_enque").unwrap();
    rt.launch(k, 1, &[out.into()], s).unwrap();
    let err = rt.synchronize_stream(s).unwrap_err().to_string();
    assert!(
        err.contains("wait_flag(MTE2->V, event 0) has no set_flag"),
        "{err}"
    );
}
