//! Ascend-style kernels (data movers, vector and cube units, double buffering) compiled from C
//! run through the normal launch API with their tiling words, and match CPU references.

use npusim::Launch;
use npusim::device::core::NpuConfig;
use npusim::device::core::npu::tiling::{self, Buffering};
use npusim::device::core::npu::{f16_to_f32, f32_to_f16};
use npusim::prelude::*;

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::default()).unwrap()
}

fn load(rt: &Runtime, object: &str) -> Binary {
    rt.binaries()
        .load_file(format!(
            "{}/examples/kernels/{object}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
}

fn words<T: bytemuck::Pod>(t: &T) -> Vec<u32> {
    bytemuck::cast_slice::<u8, u32>(bytemuck::bytes_of(t)).to_vec()
}

fn upload<T: bytemuck::Pod>(rt: &Runtime, data: &[T]) -> DevicePtr {
    let p = rt
        .memory()
        .malloc((std::mem::size_of_val(data) as u64).max(64))
        .unwrap();
    rt.memory().memcpy_htod(p, data).unwrap();
    p
}

#[test]
fn double_buffered_add_is_correct_and_faster_than_single_buffered_on_one_core() {
    let rt = rt();
    let cfg = NpuConfig::from_device(&rt.device_config(0).unwrap());
    let bin = load(&rt, "ext_vadd.o");
    let s = rt.streams().create().unwrap();
    let n = 100_003usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 7.0 - i as f32).collect();
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    let mut cycles = Vec::new();
    for (name, buffering) in [
        ("ext_vadd_single", Buffering::Single),
        ("ext_vadd_double", Buffering::Double),
    ] {
        let k = rt.binaries().get_function(bin, name).unwrap();
        let dz = rt.memory().malloc(4 * n as u64).unwrap();
        let t = tiling::vadd(n as u64, 1, buffering, &cfg);
        rt.submit(Launch::new(k, 1, &[dx.into(), dy.into(), dz.into()], s).tiling(&words(&t)))
            .unwrap();
        rt.streams().synchronize(s).unwrap();
        let mut z = vec![0f32; n];
        rt.memory().memcpy_dtoh(&mut z, dz).unwrap();
        assert!(
            z.iter().enumerate().all(|(i, &v)| v == x[i] + y[i]),
            "{name}"
        );
        cycles.push(rt.binaries().take_launch_stats().pop().unwrap().cycles);
    }
    assert!(
        cycles[0] as f64 >= 1.6 * cycles[1] as f64,
        "single {} vs double {}",
        cycles[0],
        cycles[1]
    );
}

#[test]
fn f16_matmul_on_the_cube_matches_the_cpu_on_shapes_that_are_not_tile_multiples() {
    let rt = rt();
    let dev = rt.device_config(0).unwrap();
    let cfg = NpuConfig::from_device(&dev);
    let bin = load(&rt, "ext_matmul.o");
    let k_mm = rt.binaries().get_function(bin, "ext_matmul_f16").unwrap();
    let s = rt.streams().create().unwrap();
    for (m, n, k) in [(16usize, 16usize, 16usize), (100, 70, 33), (128, 256, 96)] {
        let a: Vec<u16> = (0..m * k)
            .map(|i| f32_to_f16(((i * 7) % 11) as f32 * 0.25 - 1.0))
            .collect();
        let b: Vec<u16> = (0..k * n)
            .map(|i| f32_to_f16(((i * 5) % 13) as f32 * 0.125 - 0.75))
            .collect();
        let (da, db) = (upload(&rt, &a), upload(&rt, &b));
        let dc = rt.memory().malloc((4 * m * n) as u64).unwrap();
        let blocks = dev.ai_cores.min(8);
        let t = tiling::matmul(m as u64, n as u64, k as u64, blocks, &cfg).unwrap();
        rt.submit(
            Launch::new(k_mm, blocks, &[da.into(), db.into(), dc.into()], s).tiling(&words(&t)),
        )
        .unwrap();
        rt.streams().synchronize(s).unwrap();
        let mut c = vec![0f32; m * n];
        rt.memory().memcpy_dtoh(&mut c, dc).unwrap();
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k)
                    .map(|p| f16_to_f32(a[i * k + p]) * f16_to_f32(b[p * n + j]))
                    .sum();
                let got = c[i * n + j];
                assert!(
                    (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                    "{m}x{n}x{k} [{i},{j}]: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn softmax_and_layernorm_kernels_match_the_cpu() {
    let rt = rt();
    let dev = rt.device_config(0).unwrap();
    let cfg = NpuConfig::from_device(&dev);
    let s = rt.streams().create().unwrap();
    let (rows, cols) = (37usize, 200usize);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 31) % 97) as f32 / 16.0 - 3.0)
        .collect();
    let dx = upload(&rt, &x);
    let dy = rt.memory().malloc((4 * rows * cols) as u64).unwrap();

    let sm = rt
        .binaries()
        .get_function(load(&rt, "ext_softmax.o"), "ext_softmax")
        .unwrap();
    let t = tiling::softmax(rows as u64, cols as u64, 4, &cfg).unwrap();
    rt.submit(Launch::new(sm, 4, &[dx.into(), dy.into()], s).tiling(&words(&t)))
        .unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut y = vec![0f32; rows * cols];
    rt.memory().memcpy_dtoh(&mut y, dy).unwrap();
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = row.iter().map(|v| (v - m).exp()).sum();
        for c in 0..cols {
            let want = (row[c] - m).exp() / sum;
            assert!(
                (y[r * cols + c] - want).abs() <= 1e-6 + 2e-5 * want,
                "softmax [{r},{c}]"
            );
        }
    }

    let gamma: Vec<f32> = (0..cols).map(|i| 1.0 + i as f32 / 100.0).collect();
    let beta: Vec<f32> = (0..cols).map(|i| i as f32 / 50.0 - 1.0).collect();
    let (dg, db) = (upload(&rt, &gamma), upload(&rt, &beta));
    let ln = rt
        .binaries()
        .get_function(load(&rt, "ext_layernorm.o"), "ext_layernorm")
        .unwrap();
    let t = tiling::layernorm(rows as u64, cols as u64, 1e-5, 4, &cfg).unwrap();
    rt.submit(
        Launch::new(ln, 4, &[dx.into(), dg.into(), db.into(), dy.into()], s).tiling(&words(&t)),
    )
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    rt.memory().memcpy_dtoh(&mut y, dy).unwrap();
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mean = row.iter().sum::<f32>() / cols as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / cols as f32;
        for c in 0..cols {
            let want = (row[c] - mean) / (var + 1e-5).sqrt() * gamma[c] + beta[c];
            assert!(
                (y[r * cols + c] - want).abs() <= 2e-5 * (1.0 + want.abs()),
                "layernorm [{r},{c}]"
            );
        }
    }
}
