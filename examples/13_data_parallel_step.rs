//! 13 — one data-parallel training step, the shape `npusim whatif` scales: every device runs a
//! compute kernel (a GEMM), then its 100 MB gradient is all-reduced over a ring of all the
//! devices. Run it under recording and replay the trace on more devices, timing-only:
//!
//! ```text
//! cargo run --release --example 13_data_parallel_step
//! npusim record -o step.npt -- target/release/examples/13_data_parallel_step
//! npusim replay step.npt --timing-only --devices 1024
//! ```
//!
//! Run: `cargo run --release --example 13_data_parallel_step [devices]` (default 8).

use npusim::prelude::*;
use npusim::{Collective, Launch};
use npusim::{DataType, LinkConfig, ReduceOp, StreamKind, TopologyConfig};

/// Gradient elements per device: 100 MB of f32.
const GRAD: u64 = 25_000_000;

fn main() -> NpuResult<()> {
    let devices: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8);
    let end = step(devices)?;
    println!("{devices} devices: one step (GEMM, then a 100 MB ring all-reduce) takes {end}");
    Ok(())
}

/// Runs the step on `devices` devices; returns when its last task ends (simulated).
pub fn step(devices: u32) -> NpuResult<SimTime> {
    let rt = Runtime::new(RuntimeConfig {
        devices,
        device: DeviceConfig::ascend_910b(),
        topology: TopologyConfig::ring(LinkConfig::hccs()),
        // The step is tiny next to the gradient: timing-only, nothing is computed or moved.
        timing_only: true,
        ..RuntimeConfig::default()
    })?;
    let gemm = rt.kernel("gemm_f32")?;
    let all: Vec<u32> = (0..devices).collect();
    let comms = rt.collectives().init_all(&all)?;
    let mut streams = Vec::new();
    for (r, comm) in comms.iter().enumerate() {
        rt.contexts().set_device(r as u32)?;
        let s = rt.streams().create()?;
        let c = rt.streams().create_with(StreamConfig {
            kind: StreamKind::Communication,
            ..StreamConfig::default()
        })?;
        let (m, n, k) = (2048usize, 2048usize, 2048usize);
        let a = rt.memory().malloc(4 * (m * k) as u64)?;
        let b = rt.memory().malloc(4 * (k * n) as u64)?;
        let out = rt.memory().malloc(4 * (m * n) as u64)?;
        let grad = rt.memory().malloc(4 * GRAD)?;
        rt.submit(Launch::new(
            gemm,
            24,
            &[a.into(), b.into(), out.into(), m.into(), n.into(), k.into()],
            s,
        ))?;
        let done = rt.events().create()?;
        rt.events().record(done, s)?;
        rt.events().stream_wait(c, done)?;
        rt.submit(
            Collective::all_reduce(grad, grad, GRAD, DataType::F32, ReduceOp::Sum).on(comm, c),
        )?;
        streams.push(c);
    }
    for (r, c) in streams.into_iter().enumerate() {
        rt.contexts().set_device(r as u32)?;
        rt.streams().synchronize(c)?;
    }
    let tl = rt.timeline();
    Ok(tl.iter().map(|t| t.end).max().unwrap_or(SimTime::ZERO))
}
