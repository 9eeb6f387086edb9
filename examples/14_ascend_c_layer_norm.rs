//! 14 — one large Ascend C launch as a program runs it: `layer_norm_custom`
//! (`examples/ascendc/layer_norm_custom.cpp`) over 16384 rows of 1024 f32 on the simulated
//! 910B. The program makes its inputs, uploads x, gamma, beta and the tiling, launches on every
//! vector core, synchronizes, downloads y and checks every row against a CPU layer norm. It
//! prints the launch's simulated time and HBM roofline fraction, then the wall time of each
//! phase and of the whole program, so a slow run shows where its time went.
//!
//! Run: `cargo run --release --example 14_ascend_c_layer_norm [ROWS COLS]` (16384 1024 by
//! default; COLS a multiple of 8, at most 8192).

use npusim::Launch;
use std::time::Instant;

use npusim::prelude::*;

/// Deterministic inputs: multiples of 1/512 in [-2, 2).
fn values(n: usize, mut seed: u32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((seed >> 8) % 2048) as f32 / 512.0 - 2.0
        })
        .collect()
}

/// The CPU reference of one row, as the kernel defines it (biased variance).
fn layer_norm_row(x: &[f32], g: &[f32], b: &[f32], eps: f32, y: &mut [f32]) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    let rstd = 1.0 / (var + eps as f64).sqrt();
    for i in 0..x.len() {
        y[i] = ((x[i] as f64 - mean) * rstd * g[i] as f64 + b[i] as f64) as f32;
    }
}

fn main() -> Result<(), NpuError> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (rows, cols) = match args[..] {
        [r, c] => (r, c),
        _ => (16_384, 1024),
    };
    let eps = 1e-5f32;
    let start = Instant::now();
    let mut phases: Vec<(&str, f64)> = Vec::new();
    let mut lap = Instant::now();
    let mut phase = |name, phases: &mut Vec<(&str, f64)>| {
        phases.push((name, lap.elapsed().as_secs_f64()));
        lap = Instant::now();
    };

    let rt = Runtime::new(RuntimeConfig::default())?;
    let dev = rt.device_config(0)?;
    let s = rt.streams().create()?;
    let path = format!(
        "{}/examples/ascendc/layer_norm_custom.o",
        env!("CARGO_MANIFEST_DIR")
    );
    let bin = rt.binaries().load_file(path)?;
    let kernel = rt.binaries().get_function(bin, "layer_norm_custom")?;
    phase("runtime, load the kernel", &mut phases);

    let hx = values(rows * cols, 1);
    let hg = values(cols, 2);
    let hb = values(cols, 3);
    phase("make the inputs", &mut phases);

    let bytes = (4 * rows * cols) as u64;
    let (x, y) = (rt.memory().malloc(bytes)?, rt.memory().malloc(bytes)?);
    let (g, b) = (
        rt.memory().malloc(4 * cols as u64)?,
        rt.memory().malloc(4 * cols as u64)?,
    );
    let tiling = rt.memory().malloc(64)?;
    rt.memory().memcpy_htod(x, &hx)?;
    rt.memory().memcpy_htod(g, &hg)?;
    rt.memory().memcpy_htod(b, &hb)?;
    rt.memory()
        .memcpy_htod(tiling, &[rows as u32, cols as u32, eps.to_bits()])?;
    phase("upload", &mut phases);

    // A vector-only kernel: its blocks run on the AIV cores, two per AI core on the 910B.
    let blocks = dev.vector_cores();
    rt.submit(Launch::new(
        kernel,
        blocks,
        &[x.into(), g.into(), b.into(), y.into(), tiling.into()],
        s,
    ))?;
    rt.streams().synchronize(s)?;
    phase("launch, synchronize", &mut phases);

    let mut hy = vec![0f32; rows * cols];
    rt.memory().memcpy_dtoh(&mut hy, y)?;
    phase("download", &mut phases);

    let mut want = vec![0f32; cols];
    let mut worst = 0f32;
    for r in 0..rows {
        let row = r * cols..(r + 1) * cols;
        layer_norm_row(&hx[row.clone()], &hg, &hb, eps, &mut want);
        for (got, want) in hy[row].iter().zip(&want) {
            worst = worst.max((got - want).abs());
        }
    }
    phase("check on the CPU", &mut phases);
    let wall = start.elapsed().as_secs_f64();

    let l = rt.binaries().take_launch_stats().pop().expect("one launch");
    let secs = l.cycles as f64 / dev.core_clock_hz as f64;
    // x in, y out; gamma and beta are read once per block and are small.
    let moved = 2.0 * bytes as f64;
    let ok = worst <= 1e-4;
    println!(
        "layer_norm_custom, f32, {rows} x {cols} on {blocks} blocks ({}): {} \
         (largest difference from the CPU {worst:.2e})",
        dev.name,
        if ok { "correct" } else { "WRONG" }
    );
    println!(
        "simulated: {:.2} us, {:.0} GB/s, {:.1}% of the HBM roofline",
        secs * 1e6,
        moved / secs / 1e9,
        100.0 * moved / dev.hbm_bandwidth / secs
    );
    for (name, t) in &phases {
        println!("  {name:<26} {:>9.1} ms", t * 1e3);
    }
    println!("wall time, whole program: {:.1} ms", wall * 1e3);
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
