//! `probe`: the runtime-core workloads as a plain program (no criterion), for counting
//! instructions with callgrind, which gives exact, repeatable figures on a noisy machine.
//! `scripts/count-instructions.sh` runs it; by hand:
//!
//! ```sh
//! cargo bench --bench probe --no-run
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/probe-* pipeline
//! ```
//!
//! Modes: `pipeline` (the pipeline bench's program at 100,000 kernels), `plain` (its hand-written
//! loop), `skeleton` (its semantics on a bare `bevy_ecs` world), `pipeline-recording` (the
//! pipeline program with its API calls recorded in memory), `trace-size` (that trace's size
//! encoded), `idle N` (N idle frames), `launch N` (N kernel enqueues, drained every 10,000 as the
//! launch bench drains them; count only the enqueues with callgrind's
//! `--toggle-collect='*Runtime>::launch'`).

mod common;

use npusim::Launch;
use std::hint::black_box;

use common::{plain, run_npusim, run_npusim_recorded, skeleton};
use npusim::prelude::*;

/// Kernels of the pipeline program here (a tenth of the criterion bench's).
const TASKS: u64 = 100_000;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let which = args.next().unwrap_or_default();
    let n: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    if which == "idle" {
        let rt = Runtime::new(RuntimeConfig {
            timeline: false,
            ..RuntimeConfig::default()
        })
        .unwrap();
        rt.step();
        for _ in 0..n {
            black_box(rt.step());
        }
        return;
    }
    if which == "launch" {
        let rt = Runtime::new(RuntimeConfig {
            timeline: false,
            ..RuntimeConfig::default()
        })
        .unwrap();
        let stream = rt.streams().create().unwrap();
        let noop = rt.kernel("noop").unwrap();
        for i in 0..n {
            rt.submit(Launch::new(noop, 1, &[Arg::U64(black_box(i))], stream))
                .unwrap();
            // Drained as the launch bench drains, so the doorbell's memory is reused.
            if (i + 1) % 10_000 == 0 {
                rt.streams().synchronize(stream).unwrap();
            }
        }
        return;
    }
    if which == "plain" {
        let cfg = DeviceConfig::default();
        let kernel_ns = cfg.kernel_duration_ns(&KernelCost::default(), 1, 1);
        println!("{}", black_box(plain::run(TASKS, cfg.ai_cores, kernel_ns)));
    } else if which == "skeleton" {
        let cfg = DeviceConfig::default();
        let kernel_ns = cfg.kernel_duration_ns(&KernelCost::default(), 1, 1);
        println!(
            "{}",
            black_box(skeleton::run(TASKS, cfg.ai_cores, kernel_ns))
        );
    } else if which == "pipeline" {
        println!("{}", black_box(run_npusim(TASKS)));
    } else if which == "pipeline-recording" {
        let (done, trace) = black_box(run_npusim_recorded(TASKS));
        println!("{done} tasks, {} calls recorded", trace.entries.len());
    } else if which == "trace-size" {
        let (_, trace) = run_npusim_recorded(TASKS);
        let bytes = trace.to_bytes().expect("encodes").len();
        println!(
            "{} calls, {bytes} bytes encoded ({:.1} bytes per call)",
            trace.entries.len(),
            bytes as f64 / trace.entries.len() as f64
        );
    }
}
