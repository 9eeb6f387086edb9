//! `sanitizer`: what the stream sanitizer costs in `report` mode against off, in the same
//! process, alternating runs: the pipeline program (`benches/common`: 1,000,000 trivial kernels
//! on 16 streams with an event wait every 8) and 100 steps of `examples/10_data_parallel.rs` on
//! 8 devices (gradient all-reduces overlapped with backward, kernels that read and write real
//! buffers). Prints the medians, the ratios and the shadow memory example 10 leaves; then
//! criterion's figures for the pipeline both ways.
//!
//! Both programs build their runtimes with `RuntimeConfig::default()`, whose sanitizer is what
//! `NPUSIM_SANITIZE` says: the bench sets it between runs.
//!
//! Run: `cargo bench --bench sanitizer`

use std::time::{Duration, Instant};

use criterion::Criterion;

#[allow(dead_code)] // the hand-written loop is the pipeline bench's
mod common;

#[allow(dead_code)]
#[path = "../examples/10_data_parallel.rs"]
mod example;

fn sanitize(on: bool) {
    // SAFETY: set and cleared from the bench's main thread between runs, while no other
    // thread of this process reads the environment.
    unsafe {
        if on {
            std::env::set_var("NPUSIM_SANITIZE", "report");
        } else {
            std::env::remove_var("NPUSIM_SANITIZE");
        }
    }
}

fn train() -> example::TrainResult {
    example::train(&example::TrainConfig {
        devices: 8,
        local_batch: example::LOCAL_BATCH,
        steps: 100,
        overlap: true,
        threads: 0,
        timeline: false,
    })
    .expect("training runs")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Medians of `rounds` alternating runs of `f` off and in report mode, and their ratio.
fn alternate(what: &str, rounds: usize, mut f: impl FnMut()) {
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        sanitize(false);
        let t = Instant::now();
        f();
        off.push(t.elapsed());
        sanitize(true);
        let t = Instant::now();
        f();
        on.push(t.elapsed());
    }
    sanitize(false);
    let (a, b) = (median(off), median(on));
    println!(
        "{what}: off {a:.2?}, report {b:.2?}: {:.2}x",
        b.as_secs_f64() / a.as_secs_f64()
    );
}

fn main() {
    alternate("pipeline, 1,000,000 kernels", 5, || {
        common::run_npusim(common::TASKS);
    });
    alternate("example 10, 100 steps on 8 devices", 3, || {
        train();
    });
    sanitize(true);
    let run = train();
    sanitize(false);
    let shadow = run.runtime.sanitizer().shadow();
    println!(
        "example 10 shadow: {} intervals, {} accesses, {} blocks, {} bytes; reports: {}",
        shadow.intervals,
        shadow.accesses,
        shadow.blocks,
        shadow.bytes,
        run.runtime.sanitizer().reports().len()
    );

    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    let mut group = c.benchmark_group("pipeline_1M_tasks_sanitizer");
    for (name, on) in [("off", false), ("report", true)] {
        group.bench_function(name, |b| {
            sanitize(on);
            b.iter(|| common::run_npusim(common::TASKS));
            sanitize(false);
        });
    }
    group.finish();
    c.final_summary();
}
