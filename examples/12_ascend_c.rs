//! 12 — Ascend C kernels on npusim.
//!
//! The kernels in `examples/ascendc/*.cpp` are Ascend C: `#include "kernel_operator.h"`, a
//! `TPipe` with `TQue<VECIN/VECOUT>` queues and `TBuf` scratch, `GlobalTensor` /
//! `LocalTensor`, `DataCopy`, the vector APIs. They compile unchanged against npusim's
//! compatibility layer (`device/sdk/ascendc/`, `scripts/build-ascendc-kernels.sh`) and run
//! here on the simulated 910B: each launch prints its simulated time, its bandwidth and its
//! fraction of the HBM roofline (the bytes the kernel must move over the device's HBM
//! bandwidth), and the wall time the simulation took. The first line is the introductory
//! sample itself: a half-precision add of 8 × 2048 elements on 8 blocks, double buffered,
//! through the whole path (upload, launch, synchronize, download). The last lines are the cube
//! path (`mmad_custom.cpp`: `Nd2NzParams`, `LoadData`, `Mmad`, `Fixpipe`).
//!
//! Run: `cargo run --release --example 12_ascend_c`

use npusim::Launch;
use std::time::Instant;

use npusim::device::core::npu::{f16_to_f32, f32_to_f16};
use npusim::prelude::*;

struct Ctx {
    rt: Runtime,
    dev: DeviceConfig,
    s: Stream,
}

impl Ctx {
    fn kernel(&self, object: &str, name: &str) -> Result<Kernel, NpuError> {
        let path = format!("{}/examples/ascendc/{object}", env!("CARGO_MANIFEST_DIR"));
        let bin = self.rt.binaries().load_file(path)?;
        self.rt.binaries().get_function(bin, name)
    }

    fn upload<T: bytemuck::Pod>(&self, data: &[T]) -> Result<DevicePtr, NpuError> {
        let p = self
            .rt
            .memory()
            .malloc(std::mem::size_of_val(data).max(64) as u64)?;
        self.rt.memory().memcpy_htod(p, data)?;
        Ok(p)
    }

    fn zeros(&self, bytes: usize) -> Result<DevicePtr, NpuError> {
        let p = self.rt.memory().malloc(bytes.max(64) as u64)?;
        self.rt.memory().memset(p, 0, bytes.max(64) as u64)?;
        Ok(p)
    }

    /// Runs one launch; prints simulated time, bandwidth, roofline fraction and wall time.
    fn run(
        &self,
        label: &str,
        k: Kernel,
        blocks: u32,
        args: &[Arg],
        bytes: f64,
    ) -> Result<f64, NpuError> {
        let wall = Instant::now();
        self.rt.submit(Launch::new(k, blocks, args, self.s))?;
        self.rt.streams().synchronize(self.s)?;
        let wall = wall.elapsed().as_secs_f64();
        let l = self
            .rt
            .binaries()
            .take_launch_stats()
            .pop()
            .expect("one launch");
        let secs = l.cycles as f64 / self.dev.core_clock_hz as f64;
        let roof = bytes / self.dev.hbm_bandwidth / secs;
        println!(
            "{label:<44} {blocks:>3} blocks {:>10.2} us {:>8.1} GB/s {:>6.1}% of HBM roofline   wall {:>7.1} ms",
            secs * 1e6,
            bytes / secs / 1e9,
            100.0 * roof,
            wall * 1e3
        );
        Ok(secs)
    }
}

fn halves(n: usize, f: impl Fn(usize) -> f32) -> Vec<u16> {
    (0..n).map(|i| f32_to_f16(f(i))).collect()
}

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::default())?;
    let dev = rt.device_config(0)?;
    let s = rt.streams().create()?;
    let c = Ctx { rt, dev, s };
    println!(
        "device: {} — {} AI cores ({} vector cores), HBM {:.1} TB/s\n",
        c.dev.name,
        c.dev.ai_cores,
        c.dev.ai_cores * c.dev.vector_cores_per_ai_core.max(1),
        c.dev.hbm_bandwidth / 1e12
    );

    // The introductory sample, through the whole path, timed on the wall clock.
    let n = 8 * 2048;
    let wall = Instant::now();
    let (hx, hy) = (
        halves(n, |i| i as f32 * 0.01),
        halves(n, |i| 1.0 - i as f32 * 0.02),
    );
    let (x, y, z) = (c.upload(&hx)?, c.upload(&hy)?, c.zeros(2 * n)?);
    let add = c.kernel("add_custom.o", "add_custom")?;
    c.rt.submit(Launch::new(add, 8, &[x.into(), y.into(), z.into()], c.s))?;
    c.rt.streams().synchronize(c.s)?;
    let mut hz = vec![0u16; n];
    c.rt.memory().memcpy_dtoh(&mut hz, z)?;
    let ok = (0..n).all(|i| hz[i] == f32_to_f16(f16_to_f32(hx[i]) + f16_to_f32(hy[i])));
    let l =
        c.rt.binaries()
            .take_launch_stats()
            .pop()
            .expect("one launch");
    println!(
        "add_custom, half, 8 x 2048 on 8 blocks (double buffered): {} — {:.2} us simulated, \
         {:.1} ms of wall time for the whole path\n",
        if ok { "correct" } else { "WRONG" },
        l.cycles as f64 / c.dev.core_clock_hz as f64 * 1e6,
        wall.elapsed().as_secs_f64() * 1e3
    );

    // Every kernel at the sample's shape and at a size that fills the device.
    for (name, blocks) in [
        ("add_custom_single", 8),
        ("add_custom", 8),
        ("add_custom_f32", 8),
    ] {
        let k = c.kernel("add_custom.o", name)?;
        let (x, y, z) = (c.zeros(4 * n)?, c.zeros(4 * n)?, c.zeros(4 * n)?);
        let esize = if name.ends_with("f32") { 4.0 } else { 2.0 };
        c.run(
            &format!("{name} 16384"),
            k,
            blocks,
            &[x.into(), y.into(), z.into()],
            3.0 * esize * n as f64,
        )?;
    }
    let blocks = c.dev.ai_cores * c.dev.vector_cores_per_ai_core.max(1);
    let big = blocks as usize * 2 * 16 * 8192;
    let (x, y, z) = (c.zeros(4 * big)?, c.zeros(4 * big)?, c.zeros(4 * big)?);
    let tiling = c.upload(&[big as u32, 16])?;
    let k = c.kernel("add_custom.o", "add_custom_tiling")?;
    c.run(
        &format!("add_custom_tiling (half) {big}"),
        k,
        blocks,
        &[x.into(), y.into(), z.into(), tiling.into()],
        6.0 * big as f64,
    )?;
    let big32 = big / 2;
    let k = c.kernel("add_custom.o", "add_custom_tiling_f32")?;
    c.run(
        &format!("add_custom_tiling_f32 {big32}"),
        k,
        blocks,
        &[
            x.into(),
            y.into(),
            z.into(),
            (big32 as u64 | 16 << 32).into(),
        ],
        12.0 * big32 as f64,
    )?;
    let k = c.kernel("sub_custom.o", "sub_custom")?;
    c.run(
        &format!("sub_custom (half, repeat form) {big}"),
        k,
        blocks,
        &[x.into(), y.into(), z.into(), tiling.into()],
        6.0 * big as f64,
    )?;
    let k = c.kernel("leaky_relu_custom.o", "leaky_relu_custom")?;
    c.run(
        &format!("leaky_relu_custom (half) {big}"),
        k,
        blocks,
        &[x.into(), z.into(), (big as u64).into(), Arg::F32(0.1)],
        4.0 * big as f64,
    )?;
    let w = c.zeros(2 * big)?;
    let t = [big as u32, 2048, 0.5f32.to_bits()];
    let tiling_a = c.upload(&t)?;
    let k = c.kernel("addcdiv_custom.o", "addcdiv_custom")?;
    c.run(
        &format!("addcdiv_custom (half via float) {big}"),
        k,
        blocks,
        &[x.into(), y.into(), w.into(), z.into(), tiling_a.into()],
        8.0 * big as f64,
    )?;
    let (rows, cols) = (4096usize, 1024usize);
    let rc = c.upload(&[rows as u32, cols as u32])?;
    let k = c.kernel("softmax_custom.o", "softmax_custom")?;
    c.run(
        &format!("softmax_custom (float) {rows} x {cols}"),
        k,
        blocks,
        &[x.into(), z.into(), rc.into()],
        8.0 * (rows * cols) as f64,
    )?;
    let ln = c.upload(&[rows as u32, cols as u32, 1e-5f32.to_bits()])?;
    let k = c.kernel("layer_norm_custom.o", "layer_norm_custom")?;
    c.run(
        &format!("layer_norm_custom (float) {rows} x {cols}"),
        k,
        blocks,
        &[x.into(), y.into(), y.into(), z.into(), ln.into()],
        8.0 * (rows * cols) as f64,
    )?;
    let k = c.kernel("reduce_sum_custom.o", "reduce_sum_custom")?;
    c.run(
        &format!("reduce_sum_custom (float rows) {rows} x {cols}"),
        k,
        blocks,
        &[x.into(), z.into(), rc.into()],
        4.0 * (rows * cols + rows) as f64,
    )?;

    // The cube path (mmad_custom.cpp): GM -> A1 / B1 (ND -> NZ), LoadData to A2 / B2, one Mmad,
    // Fixpipe back to GM; one block each, so latency-bound at these sample shapes.
    for (name, m, n, k) in [("mmad_custom", 32, 32, 32), ("mmad_kloop", 48, 32, 64)] {
        let a = c.upload(&halves(m * k, |i| (i % 7) as f32 * 0.5 - 1.0))?;
        let b = c.upload(&halves(k * n, |i| (i % 5) as f32 * 0.25))?;
        let out = c.zeros(4 * m * n)?;
        let kernel = c.kernel("mmad_custom.o", name)?;
        c.run(
            &format!("{name} (half -> float) {m} x {n} x {k}"),
            kernel,
            1,
            &[a.into(), b.into(), out.into()],
            (2 * (m * k + k * n) + 4 * m * n) as f64,
        )?;
    }
    Ok(())
}
