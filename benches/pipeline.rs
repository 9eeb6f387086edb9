//! `pipeline`: 1,000,000 trivial kernels on 16 streams, each stream waiting every 8 kernels on
//! an event its neighbour recorded, submitted and run to completion. Compared, in the same run,
//! with a hand-written plain-Rust discrete-event loop that has the same semantics (in-stream
//! FIFO, a wait captures the latest record, kernels take cores, the clock jumps to the next
//! completion). Finished tasks are recycled through the task pool, so memory stays flat.
//!
//! Host-side API costs are set to zero here, so every task is submitted at simulated time 0 and
//! the device (not the modeled host) bounds the run — the same semantics the hand-written loop
//! has. The host program steps the device once per round of submissions, as a host loop that
//! overlaps submission with execution would.
//!
//! `npusim_recording` runs the npusim program with every API call recorded to an in-memory
//! trace (`npusim::record`), against `npusim` for the recording overhead; the trace's size is
//! printed after the figures.
//!
//! Run: `cargo bench --bench pipeline` (add `--features tracy` to profile with Tracy).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use npusim::prelude::*;

mod common;

use common::{STREAMS, TASKS, WAIT_EVERY, plain, run_npusim, run_npusim_recorded, skeleton};

fn bench(c: &mut Criterion) {
    let cfg = DeviceConfig::default();
    let kernel_ns = cfg.kernel_duration_ns(&KernelCost::default(), 1, 1);
    let expected = TASKS + 2 * (TASKS / STREAMS as u64 / WAIT_EVERY) * STREAMS as u64;
    assert_eq!(plain::run(TASKS, cfg.ai_cores, kernel_ns), expected);
    assert_eq!(run_npusim(TASKS), expected);
    assert_eq!(skeleton::run(TASKS, cfg.ai_cores, kernel_ns), expected);

    let mut group = c.benchmark_group("pipeline_1M_tasks_16_streams");
    group.sample_size(10);
    group.bench_function("hand_written_loop", |b| {
        b.iter(|| black_box(plain::run(TASKS, cfg.ai_cores, kernel_ns)))
    });
    // The same semantics on a bare bevy_ecs world (tasks as entities, one system per stage):
    // what the design's shape costs before any of npusim's work.
    group.bench_function("bare_ecs_skeleton", |b| {
        b.iter(|| black_box(skeleton::run(TASKS, cfg.ai_cores, kernel_ns)))
    });
    group.bench_function("npusim", |b| b.iter(|| black_box(run_npusim(TASKS))));
    // The same program with every API call recorded (in memory), for the recording overhead.
    group.bench_function("npusim_recording", |b| {
        b.iter(|| black_box(run_npusim_recorded(TASKS)))
    });
    group.finish();
    let (_, trace) = run_npusim_recorded(TASKS);
    let (calls, bytes) = (
        trace.entries.len(),
        trace.to_bytes().expect("encodes").len(),
    );
    println!(
        "trace of the pipeline program: {calls} calls, {bytes} bytes ({:.1} MB per million calls)",
        bytes as f64 / calls as f64
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
