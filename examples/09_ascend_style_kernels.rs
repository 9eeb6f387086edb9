//! 09 — Ascend-style kernels: data movers, vector and cube units, double buffering.
//!
//! The kernels in `examples/kernels/ext_*.c` are written the way Ascend C kernels are: the MTE
//! data movers bring tiles from global memory into the unified buffer / L1, the vector unit or
//! the cube works on them, flags order the pipes, and double buffering keeps them all busy.
//! Each launch carries tiling words computed on the host from the actual shapes (the
//! sequence lengths of the dynamic NLP pipeline). In the frame a launch is dispatched, every
//! block runs on an AI core whose pipes advance in parallel; the launch lasts as long as its
//! busiest core, or as its HBM traffic needs, whichever is longer.
//!
//! Run: `cargo run --release --example 09_ascend_style_kernels`

use npusim::Launch;
use npusim::device::core::NpuConfig;
use npusim::device::core::npu::f32_to_f16;
use npusim::device::core::npu::tiling::{self, Buffering};
use npusim::prelude::*;

fn words<T: bytemuck::Pod>(t: &T) -> Vec<u32> {
    bytemuck::cast_slice::<u8, u32>(bytemuck::bytes_of(t)).to_vec()
}

struct Ctx {
    rt: Runtime,
    dev: DeviceConfig,
    cfg: NpuConfig,
    s: Stream,
}

impl Ctx {
    fn kernel(&self, object: &str, name: &str) -> Result<Kernel, NpuError> {
        let path = format!("{}/examples/kernels/{object}", env!("CARGO_MANIFEST_DIR"));
        let bin = self.rt.binaries().load_file(path)?;
        self.rt.binaries().get_function(bin, name)
    }

    fn zeros(&self, bytes: usize) -> Result<DevicePtr, NpuError> {
        let p = self.rt.memory().malloc(bytes as u64)?;
        self.rt.memory().memset(p, 0, bytes as u64)?;
        Ok(p)
    }

    /// Runs one launch and prints its time, per-pipe busy share and fraction of the roofline.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        label: &str,
        k: Kernel,
        blocks: u32,
        args: &[Arg],
        tiling: &[u32],
        flops: f64,
        bytes: f64,
    ) -> Result<f64, NpuError> {
        self.rt
            .submit(Launch::new(k, blocks, args, self.s).tiling(tiling))?;
        self.rt.streams().synchronize(self.s)?;
        let l = self
            .rt
            .binaries()
            .take_launch_stats()
            .pop()
            .expect("one launch");
        let secs = l.cycles as f64 / self.dev.core_clock_hz as f64;
        let total = l.cycles.max(1) as f64 * l.blocks.len().max(1) as f64;
        let p = l.pipe_busy;
        let (roof, what) = if flops > 0.0 {
            (flops / (secs * self.dev.peak_cube_f16_flops()), "cube peak")
        } else {
            (bytes / (secs * self.dev.hbm_bandwidth), "HBM roofline")
        };
        println!(
            "{label:<34} {:>9.2} us  busy: scalar {:>4.0}% vec {:>4.0}% cube {:>4.0}% mte2 {:>4.0}% mte3 {:>4.0}%  {:>5.1}% of {what}",
            secs * 1e6,
            100.0 * p.scalar as f64 / total,
            100.0 * p.vector as f64 / total,
            100.0 * p.cube as f64 / total,
            100.0 * p.mte2 as f64 / total,
            100.0 * p.mte3 as f64 / total,
            100.0 * roof,
        );
        Ok(secs)
    }
}

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::default())?;
    let dev = rt.device_config(0)?;
    let cfg = NpuConfig::from_device(&dev);
    let s = rt.streams().create()?;
    let c = Ctx { rt, dev, cfg, s };
    let cores = c.dev.ai_cores;
    println!(
        "device: {} — {} AI cores, cube peak {:.0} TFLOPS (f16), HBM {:.1} TB/s\n",
        c.dev.name,
        cores,
        c.dev.peak_cube_f16_flops() / 1e12,
        c.dev.hbm_bandwidth / 1e12
    );

    // Vector add, single- vs double-buffered, on one core: the pipes overlap when buffered twice.
    let n = 1usize << 18;
    let (x, y, z) = (c.zeros(4 * n)?, c.zeros(4 * n)?, c.zeros(4 * n)?);
    let mut times = Vec::new();
    for (name, buf) in [
        ("ext_vadd_single", Buffering::Single),
        ("ext_vadd_double", Buffering::Double),
    ] {
        let k = c.kernel("ext_vadd.o", name)?;
        let t = tiling::vadd(n as u64, 1, buf, &c.cfg);
        times.push(c.run(
            &format!("{name} n={n} (1 core)"),
            k,
            1,
            &[x.into(), y.into(), z.into()],
            &words(&t),
            0.0,
            12.0 * n as f64,
        )?);
    }
    println!("  double buffering: {:.2}x faster\n", times[0] / times[1]);

    let hidden = 768usize;
    let softmax = c.kernel("ext_softmax.o", "ext_softmax")?;
    let layernorm = c.kernel("ext_layernorm.o", "ext_layernorm")?;
    let matmul = c.kernel("ext_matmul.o", "ext_matmul_f16")?;
    let (gamma, beta) = (c.zeros(4 * hidden)?, c.zeros(4 * hidden)?);
    let w: Vec<u16> = (0..hidden * hidden)
        .map(|i| f32_to_f16((i % 7) as f32 * 0.01))
        .collect();
    let dw = c.rt.memory().malloc((2 * hidden * hidden) as u64)?;
    c.rt.memory().memcpy_htod(dw, &w)?;
    for seq in [128usize, 384, 512] {
        let batch = 8;
        let rows = batch * seq;
        println!("batch {batch} x seq {seq} (hidden {hidden}):");
        let act = c.zeros(2 * rows * hidden)?;
        let out = c.zeros(4 * rows * hidden)?;
        let normed = c.zeros(4 * rows * hidden)?;
        let t = tiling::matmul(rows as u64, hidden as u64, hidden as u64, cores, &c.cfg)
            .map_err(|e| NpuError::InvalidParam(e.to_string()))?;
        let flops = 2.0 * (rows * hidden * hidden) as f64;
        c.run(
            &format!("  matmul f16 {rows}x{hidden}x{hidden}"),
            matmul,
            cores,
            &[act.into(), dw.into(), out.into()],
            &words(&t),
            flops,
            0.0,
        )?;
        let t = tiling::layernorm(rows as u64, hidden as u64, 1e-5, cores, &c.cfg)
            .map_err(|e| NpuError::InvalidParam(e.to_string()))?;
        c.run(
            &format!("  layernorm {rows}x{hidden}"),
            layernorm,
            cores,
            &[out.into(), gamma.into(), beta.into(), normed.into()],
            &words(&t),
            0.0,
            8.0 * (rows * hidden) as f64,
        )?;
        let (srows, scols) = (batch * 12 * seq, seq);
        let scores = c.zeros(4 * srows * scols)?;
        let probs = c.zeros(4 * srows * scols)?;
        let t = tiling::softmax(srows as u64, scols as u64, cores, &c.cfg)
            .map_err(|e| NpuError::InvalidParam(e.to_string()))?;
        c.run(
            &format!("  softmax {srows}x{scols} (attention)"),
            softmax,
            cores,
            &[scores.into(), probs.into()],
            &words(&t),
            0.0,
            8.0 * (srows * scols) as f64,
        )?;
        for p in [act, out, normed, scores, probs] {
            c.rt.memory().free(p)?;
        }
    }
    let t = tiling::matmul(1024, 1024, 1024, cores, &c.cfg)
        .map_err(|e| NpuError::InvalidParam(e.to_string()))?;
    let (a, b, o) = (c.zeros(2 << 20)?, c.zeros(2 << 20)?, c.zeros(4 << 20)?);
    let wall = std::time::Instant::now();
    let secs = c.run(
        "\nmatmul f16 1024x1024x1024",
        matmul,
        cores,
        &[a.into(), b.into(), o.into()],
        &words(&t),
        2.0 * 1024f64.powi(3),
        0.0,
    )?;
    println!(
        "  simulated {:.2} us in {:.3} s of wall time",
        secs * 1e6,
        wall.elapsed().as_secs_f64()
    );
    Ok(())
}
