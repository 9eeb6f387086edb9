//! The Ascend-style binary kernels registered as ops: their Rust tiling functions run in the
//! frame's tiling stage on the actual (here, dynamic) shapes, the kernels read the tiles
//! through the tiling CSR, and results match CPU references for shapes that change per batch.

use npusim::LaunchOp;
use npusim::device::core::npu::{f16_to_f32, f32_to_f16};
use npusim::prelude::*;

fn setup() -> (Runtime, npusim::ops::npu::NpuOps, Stream) {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let ops = rt
        .ops()
        .register_npu(format!("{}/examples/kernels", env!("CARGO_MANIFEST_DIR")))
        .unwrap();
    let s = rt.streams().create().unwrap();
    (rt, ops, s)
}

#[test]
fn softmax_op_with_a_dynamic_row_count_matches_the_cpu_and_retiles_per_batch() {
    let (rt, ops, s) = setup();
    rt.ops().set_tiling_log_enabled(true);
    let cols = 96usize;
    let max_rows = 300usize;
    let x = rt.memory().malloc((4 * max_rows * cols) as u64).unwrap();
    let y = rt.memory().malloc((4 * max_rows * cols) as u64).unwrap();
    let shape = rt.ops().create_shape().unwrap();
    let data: Vec<f32> = (0..max_rows * cols)
        .map(|i| ((i * 13) % 29) as f32 / 7.0 - 2.0)
        .collect();
    rt.memory().memcpy_htod(x, &data).unwrap();
    let mut outputs = Vec::new();
    // All batches queued up front; the row count is set on the device, in stream order.
    for rows in [1usize, 37, 300] {
        rt.ops()
            .set_shape_async(shape, &[rows as i64, cols as i64], s)
            .unwrap();
        rt.submit(LaunchOp::new(
            ops.softmax,
            &[TensorArg::dynamic(x, shape)],
            &[TensorArg::output(y)],
            &[],
            s,
        ))
        .unwrap();
        let out = rt.memory().malloc_host((4 * rows * cols) as u64).unwrap();
        rt.memory()
            .memcpy_dtoh_async(&out, y, (4 * rows * cols) as u64, s)
            .unwrap();
        outputs.push((rows, out));
    }
    rt.streams().synchronize(s).unwrap();
    for (rows, out) in outputs {
        let got: Vec<f32> = out.read().unwrap();
        for r in 0..rows {
            let row = &data[r * cols..(r + 1) * cols];
            let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = row.iter().map(|v| (v - m).exp()).sum();
            for c in 0..cols {
                let want = (row[c] - m).exp() / sum;
                assert!(
                    (got[r * cols + c] - want).abs() <= 1e-6 + 2e-5 * want,
                    "rows {rows} [{r},{c}]"
                );
            }
        }
    }
    let log = rt.ops().take_tiling_log();
    let chosen: Vec<(u32, Vec<u32>)> = log
        .iter()
        .map(|t| (t.tiling.block_dim, t.tiling.words().to_vec()))
        .collect();
    assert_eq!(chosen.len(), 3);
    assert!(
        chosen[0] != chosen[1] && chosen[1] != chosen[2],
        "the tiling follows the shape: {chosen:?}"
    );
    assert_eq!(chosen[0].0, 1, "one row needs one core");
}

#[test]
fn matmul_and_layernorm_ops_match_the_cpu() {
    let (rt, ops, s) = setup();
    let (m, k, n) = (48usize, 40usize, 72usize);
    let a: Vec<u16> = (0..m * k)
        .map(|i| f32_to_f16(((i * 3) % 7) as f32 * 0.5 - 1.5))
        .collect();
    let b: Vec<u16> = (0..k * n)
        .map(|i| f32_to_f16(((i * 11) % 5) as f32 * 0.25 - 0.5))
        .collect();
    let (da, db) = (
        rt.memory().malloc((2 * m * k) as u64).unwrap(),
        rt.memory().malloc((2 * k * n) as u64).unwrap(),
    );
    rt.memory().memcpy_htod(da, &a).unwrap();
    rt.memory().memcpy_htod(db, &b).unwrap();
    let dc = rt.memory().malloc((4 * m * n) as u64).unwrap();
    rt.submit(LaunchOp::new(
        ops.matmul,
        &[
            TensorArg::new(da, &[m as i64, k as i64]),
            TensorArg::new(db, &[k as i64, n as i64]),
        ],
        &[TensorArg::output(dc)],
        &[],
        s,
    ))
    .unwrap();
    let gamma = rt.memory().malloc((4 * n) as u64).unwrap();
    let beta = rt.memory().malloc((4 * n) as u64).unwrap();
    rt.memory().memcpy_htod(gamma, &vec![2.0f32; n]).unwrap();
    rt.memory().memcpy_htod(beta, &vec![0.5f32; n]).unwrap();
    let dy = rt.memory().malloc((4 * m * n) as u64).unwrap();
    rt.submit(LaunchOp::new(
        ops.layernorm,
        &[
            TensorArg::new(dc, &[m as i64, n as i64]),
            TensorArg::new(gamma, &[n as i64]),
            TensorArg::new(beta, &[n as i64]),
        ],
        &[TensorArg::output(dy)],
        &[Arg::F32(1e-5)],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut c = vec![0f32; m * n];
    rt.memory().memcpy_dtoh(&mut c, dc).unwrap();
    let mut y = vec![0f32; m * n];
    rt.memory().memcpy_dtoh(&mut y, dy).unwrap();
    for i in 0..m {
        let want_row: Vec<f32> = (0..n)
            .map(|j| {
                (0..k)
                    .map(|p| f16_to_f32(a[i * k + p]) * f16_to_f32(b[p * n + j]))
                    .sum()
            })
            .collect();
        for j in 0..n {
            assert!(
                (c[i * n + j] - want_row[j]).abs() <= 1e-3 * want_row[j].abs().max(1.0),
                "c[{i},{j}]"
            );
        }
        let mean = want_row.iter().sum::<f32>() / n as f32;
        let var = want_row
            .iter()
            .map(|v| (v - mean) * (v - mean))
            .sum::<f32>()
            / n as f32;
        for j in 0..n {
            let want = (want_row[j] - mean) / (var + 1e-5).sqrt() * 2.0 + 0.5;
            assert!(
                (y[i * n + j] - want).abs() <= 1e-3 * (1.0 + want.abs()),
                "y[{i},{j}]: {} vs {want}",
                y[i * n + j]
            );
        }
    }
}

#[test]
fn a_shape_that_does_not_fit_fails_the_op_cleanly() {
    let (rt, ops, s) = setup();
    let x = rt.memory().malloc(4 * 64).unwrap();
    let z = rt.memory().malloc(4 * 64).unwrap();
    // 1000 elements claimed over 64-element buffers: refused before the kernel runs.
    let shape = rt.ops().create_shape().unwrap();
    rt.ops().set_shape_async(shape, &[1000], s).unwrap();
    rt.submit(LaunchOp::new(
        ops.vadd,
        &[TensorArg::dynamic(x, shape), TensorArg::dynamic(x, shape)],
        &[TensorArg::output(z)],
        &[],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(err.code(), 507015, "{err}");
}
