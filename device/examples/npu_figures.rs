//! The NPU extension's figures: each example kernel (`examples/kernels/ext_*.c`) run block by
//! block on the simulated AI core, its simulated time against the device roofline, per-pipe
//! busy time, double- against single-buffered add, the 1024³ f16 matmul against the cube peak,
//! and how fast the simulator runs it.
//!
//! Usage: `cargo run -p npusim-device --release --example npu_figures [-- --hbm-share]`
//! (`--hbm-share` gives each core's data movers only its share of HBM bandwidth instead of
//! the L2 port: `NpuTiming::hbm_share`).

#[path = "../tests/npu_support/mod.rs"]
mod npu_support;

use npu_support::*;
use npusim_device::config::DeviceConfig;
use npusim_device::core::npu::launch::LaunchModel;
use npusim_device::core::npu::tiling::{self, Buffering};
use npusim_device::core::npu::{NpuTiming, f32_to_f16};
use npusim_device::core::{Core, CoreConfig, KernelArg};

struct Ctx {
    device: DeviceConfig,
    cfg: CoreConfig,
    core: Core,
    gm: Gm,
    model: LaunchModel,
}

fn ptr(a: u64) -> KernelArg {
    KernelArg::ptr(a)
}

/// Device roofline in cycles: compute at the unit's peak on all cores, or the compulsory
/// bytes over the HBM bandwidth, whichever is longer.
fn roofline(c: &Ctx, flops: f64, flops_per_cycle_per_core: f64, bytes: f64) -> f64 {
    let compute = flops / (flops_per_cycle_per_core * c.device.ai_cores as f64);
    let memory = bytes / (c.device.hbm_bandwidth / c.device.core_clock_hz as f64);
    compute.max(memory)
}

fn report(name: &str, run: &LaunchRun, roof: f64) {
    let e = &run.estimate;
    let p = &e.pipe_busy;
    // The slowest block's busiest unit: how close that core runs to its own bound.
    let slow = run
        .blocks
        .iter()
        .max_by_key(|b| b.stats.block_cycles)
        .map(|b| b.stats)
        .unwrap_or_default();
    let (unit, busy) = [
        ("V", slow.pipe_busy.vector),
        ("M", slow.pipe_busy.cube),
        ("MTE1", slow.pipe_busy.mte1),
        ("MTE2", slow.pipe_busy.mte2),
        ("MTE3", slow.pipe_busy.mte3),
    ]
    .into_iter()
    .max_by_key(|x| x.1)
    .unwrap_or(("-", 0));
    let per =
        |v: u64| 100.0 * v as f64 / (e.busiest_core_cycles.max(1) as f64 * e.blocks.min(24) as f64);
    println!(
        "{name:<34} {:>9} cyc {:>8.2} us  roofline {:>5.1}%  (busiest core {:>8}, HBM floor {:>8}; slowest block's {unit} busy {:>5.1}%)  busy% V {:>5.1} M {:>5.1} MTE1 {:>5.1} MTE2 {:>5.1} MTE3 {:>5.1} S {:>5.1}",
        e.cycles,
        e.seconds * 1e6,
        100.0 * roof / e.cycles as f64,
        e.busiest_core_cycles,
        e.hbm_floor_cycles,
        100.0 * busy as f64 / slow.block_cycles.max(1) as f64,
        per(p.vector),
        per(p.cube),
        per(p.mte1),
        per(p.mte2),
        per(p.mte3),
        per(p.scalar),
    );
}

fn vadd(c: &mut Ctx, sym: &str, n: usize, blocks: u32, buffering: Buffering) -> LaunchRun {
    let k = Kernel::load("ext_vadd");
    let bytes = (4 * n as u64).div_ceil(64) * 64;
    let (xa, ya, za) = (DATA, DATA + bytes, DATA + 2 * bytes);
    let mut rng = Rng(1);
    c.gm.write_f32(xa, &rng.vec(n, -1.0, 1.0));
    c.gm.write_f32(ya, &rng.vec(n, -1.0, 1.0));
    let t = tiling::vadd(n as u64, blocks, buffering, &c.cfg.npu);
    launch(
        &mut c.core,
        &mut c.gm,
        &k,
        sym,
        &[ptr(xa), ptr(ya), ptr(za)],
        bytemuck::bytes_of(&t),
        blocks,
        &c.model,
    )
    .unwrap()
}

/// `--sweep`: the 1024³ matmul with hand-picked tilings, simulated, next to the tiling
/// function's choice (to check its estimate).
fn sweep(c: &mut Ctx) {
    let (m, n, k) = (1024usize, 1024usize, 1024usize);
    let kernel = Kernel::load("ext_matmul");
    let (aa, ba) = (DATA, DATA + (2 * m * k) as u64);
    let ca = ba + (2 * k * n) as u64;
    let chosen = tiling::matmul(m as u64, n as u64, k as u64, 24, &c.cfg.npu).unwrap();
    let mut cands = vec![chosen];
    for &(tm, tn, tk1, tk0, res, cb) in &[
        (128, 128, 256, 128, 1, 2),
        (128, 128, 128, 128, 1, 2),
        (128, 128, 128, 64, 1, 2),
        (128, 176, 256, 64, 1, 1),
        (128, 176, 128, 64, 1, 1),
        (128, 192, 256, 64, 1, 1),
        (256, 128, 128, 64, 1, 1),
        (64, 256, 256, 128, 1, 1),
        (96, 128, 256, 128, 1, 2),
        (112, 128, 256, 128, 1, 2),
    ] {
        cands.push(tiling::MatmulTiling {
            m: m as u32,
            n: n as u32,
            k: k as u32,
            tm,
            tn,
            tk1,
            tk0,
            a_resident: res,
            l0c_buffers: cb,
            reserved: [0; 3],
        });
    }
    for t in cands {
        match launch(
            &mut c.core,
            &mut c.gm,
            &kernel,
            "ext_matmul_f16",
            &[ptr(aa), ptr(ba), ptr(ca)],
            bytemuck::bytes_of(&t),
            24,
            &c.model,
        ) {
            Ok(r) => println!(
                "tm={:>3} tn={:>3} tk1={:>3} tk0={:>3} res={} l0c={}: {:>6} cycles, {:.1}% of cube peak",
                t.tm,
                t.tn,
                t.tk1,
                t.tk0,
                t.a_resident,
                t.l0c_buffers,
                r.estimate.cycles,
                100.0 * 2.0 * (m * n * k) as f64 / (8192.0 * 24.0) / r.estimate.cycles as f64
            ),
            Err(e) => println!("tm={} tn={}: {e}", t.tm, t.tn),
        }
    }
}

fn main() {
    let hbm_share = std::env::args().any(|a| a == "--hbm-share");
    let device = DeviceConfig::ascend_910b();
    let mut cfg = CoreConfig::from_device(&device);
    if hbm_share {
        cfg.npu.timing = NpuTiming::hbm_share(&device);
    }
    let mut c = Ctx {
        model: LaunchModel::from_device(&device),
        core: Core::new(cfg.clone()),
        gm: Gm::new(200 << 20),
        device,
        cfg,
    };
    let t = &c.cfg.npu.timing;
    println!(
        "preset {}: {} cores at {:.2} GHz, HBM {:.1} TB/s ({:.1} B/cycle device-wide); per-core GM port {:.1} B/cycle per mover, GM latency {} cycles",
        c.device.name,
        c.device.ai_cores,
        c.device.core_clock_hz as f64 / 1e9,
        c.device.hbm_bandwidth / 1e12,
        c.device.hbm_bandwidth / c.device.core_clock_hz as f64,
        t.gm_bytes_per_cycle.to_f64(),
        t.gm_latency
    );
    let vec_peak = c.device.vector_flops_per_cycle as f64;
    let port = t.gm_bytes_per_cycle.to_f64();
    if std::env::args().any(|a| a == "--sweep") {
        sweep(&mut c);
        return;
    }

    println!("\n== vector add: double- vs single-buffered ==");
    for &(n, blocks) in &[(1usize << 20, 1u32), (16 << 20, 24)] {
        let s = vadd(&mut c, "ext_vadd_single", n, blocks, Buffering::Single);
        let d = vadd(&mut c, "ext_vadd_double", n, blocks, Buffering::Double);
        // One core: its movers' bandwidth bounds it; the device: HBM.
        let roof = if blocks == 1 {
            (8.0 * n as f64 / port).max(n as f64 / vec_peak)
        } else {
            roofline(&c, n as f64, vec_peak, 12.0 * n as f64)
        };
        report(&format!("vadd single  n={n} blocks={blocks}"), &s, roof);
        report(&format!("vadd double  n={n} blocks={blocks}"), &d, roof);
        println!(
            "  -> double-buffered is {:.2}x faster (busiest core: {:.2}x)",
            s.estimate.cycles as f64 / d.estimate.cycles as f64,
            s.estimate.busiest_core_cycles as f64 / d.estimate.busiest_core_cycles as f64
        );
    }

    println!("\n== softmax and layer norm, 24 blocks ==");
    for &(rows, cols) in &[(4096usize, 1024usize), (4096, 4096)] {
        let k = Kernel::load("ext_softmax");
        let n = rows * cols;
        let (xa, ya) = (DATA, DATA + (4 * n as u64).div_ceil(64) * 64);
        c.gm.write_f32(xa, &Rng(2).vec(n, -4.0, 4.0));
        let t = tiling::softmax(rows as u64, cols as u64, 24, &c.cfg.npu).unwrap();
        let r = launch(
            &mut c.core,
            &mut c.gm,
            &k,
            "ext_softmax",
            &[ptr(xa), ptr(ya)],
            bytemuck::bytes_of(&t),
            24,
            &c.model,
        )
        .unwrap();
        report(
            &format!("softmax {rows}x{cols}"),
            &r,
            roofline(&c, 5.0 * n as f64, vec_peak, 8.0 * n as f64),
        );

        let k = Kernel::load("ext_layernorm");
        let ga = ya + (4 * n as u64).div_ceil(64) * 64;
        let ba = ga + 4 * cols as u64;
        c.gm.write_f32(ga, &vec![1.0; cols]);
        c.gm.write_f32(ba, &vec![0.5; cols]);
        let t = tiling::layernorm(rows as u64, cols as u64, 1e-5, 24, &c.cfg.npu).unwrap();
        let r = launch(
            &mut c.core,
            &mut c.gm,
            &k,
            "ext_layernorm",
            &[ptr(xa), ptr(ga), ptr(ba), ptr(ya)],
            bytemuck::bytes_of(&t),
            24,
            &c.model,
        )
        .unwrap();
        report(
            &format!("layernorm {rows}x{cols}"),
            &r,
            roofline(&c, 7.0 * n as f64, vec_peak, 8.0 * n as f64),
        );
    }

    println!("\n== f16 matmul on the cube, 24 blocks ==");
    for &(m, n, k) in &[
        (1024usize, 1024usize, 1024usize),
        (2048, 2048, 2048),
        (1000, 1000, 1000),
        (4096, 1024, 512),
    ] {
        let kernel = Kernel::load("ext_matmul");
        let (aa, ba) = (DATA, DATA + (2 * m * k) as u64);
        let ca = ba + (2 * k * n) as u64;
        let mut rng = Rng(4);
        let a: Vec<u16> = rng
            .vec(m * k, -1.0, 1.0)
            .into_iter()
            .map(f32_to_f16)
            .collect();
        let b: Vec<u16> = rng
            .vec(k * n, -1.0, 1.0)
            .into_iter()
            .map(f32_to_f16)
            .collect();
        c.gm.write_u16(aa, &a);
        c.gm.write_u16(ba, &b);
        let t = tiling::matmul(m as u64, n as u64, k as u64, 24, &c.cfg.npu).unwrap();
        let r = launch(
            &mut c.core,
            &mut c.gm,
            &kernel,
            "ext_matmul_f16",
            &[ptr(aa), ptr(ba), ptr(ca)],
            bytemuck::bytes_of(&t),
            24,
            &c.model,
        )
        .unwrap();
        let flops = 2.0 * (m * n * k) as f64;
        let cube_peak = c.device.cube_f16_flops_per_cycle as f64;
        let roof = roofline(
            &c,
            flops,
            cube_peak,
            (2 * m * k + 2 * k * n + 4 * m * n) as f64,
        );
        report(&format!("matmul f16 {m}x{n}x{k}"), &r, roof);
        let peak_cycles = flops / (cube_peak * c.device.ai_cores as f64);
        println!(
            "  -> {:.1}% of the cube peak ({:.1} TFLOPS of {:.1}); tiling tm={} tn={} tk1={} tk0={} a_resident={} l0c_buffers={}",
            100.0 * peak_cycles / r.estimate.cycles as f64,
            flops / r.estimate.seconds / 1e12,
            c.device.peak_cube_f16_flops() / 1e12,
            t.tm,
            t.tn,
            t.tk1,
            t.tk0,
            t.a_resident,
            t.l0c_buffers
        );
        println!(
            "  -> tiling's dry-run estimate of the busiest block: {} cycles (simulated {})",
            tiling::matmul_block_estimate(&t, 24, &c.cfg.npu.timing),
            r.estimate.busiest_core_cycles
        );
        let instr: u64 = r.blocks.iter().map(|b| b.stats.instructions).sum();
        println!(
            "  -> simulation: {:.3} s wall for {:.2} us simulated = {:.2e} simulated s per wall s ({} instructions, {:.1} M instr/s)",
            r.wall.as_secs_f64(),
            r.estimate.seconds * 1e6,
            r.estimate.seconds / r.wall.as_secs_f64(),
            instr,
            instr as f64 / r.wall.as_secs_f64() / 1e6
        );
    }
}
