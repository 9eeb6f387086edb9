//! `data_parallel`: wall time to simulate 100 steps of `examples/10_data_parallel.rs` (3-layer
//! MLP, 8 devices on a ring, gradient buckets all-reduced while backward goes on) with 1 and
//! with 2 worker threads, and their ratio. Both runs happen in this process, alternating, so
//! the ratio compares like with like; the simulated results are identical (asserted).
//!
//! What runs in parallel: the kernels of different devices that end at the same simulated
//! moment (all eight devices run the same kernels in lockstep), and the element-wise reduction
//! of each all-reduce. Frames, dispatch and the rendezvous stay on the calling thread.
//!
//! Run: `cargo bench --bench data_parallel` (the ratio is printed first, then criterion's
//! figures for each thread count).

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};

#[allow(dead_code)]
#[path = "../examples/10_data_parallel.rs"]
mod example;

const DEVICES: u32 = 8;
const STEPS: usize = 100;

fn simulate(threads: usize) -> Vec<Vec<Vec<f32>>> {
    let run = example::train(&example::TrainConfig {
        devices: DEVICES,
        local_batch: example::LOCAL_BATCH,
        steps: STEPS,
        overlap: true,
        threads,
        timeline: false,
    })
    .expect("training runs");
    run.weights
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // The ratio, from alternating runs (skipped with DATA_PARALLEL_NO_RATIO set, e.g. to
    // profile one thread count with `--profile-time`).
    if std::env::var_os("DATA_PARALLEL_NO_RATIO").is_none() {
        ratio();
    }
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(16))
        .configure_from_args();
    let mut group = c.benchmark_group("data_parallel_100_steps_8_devices");
    for threads in [1usize, 2] {
        group.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, &t| {
            b.iter(|| simulate(t))
        });
    }
    group.finish();
    c.final_summary();
}

/// Medians of alternating 1- and 2-thread runs, and their ratio.
fn ratio() {
    let rounds = 5;
    let (mut one, mut two) = (Vec::new(), Vec::new());
    let reference = simulate(1);
    for _ in 0..rounds {
        let t = Instant::now();
        let w1 = simulate(1);
        one.push(t.elapsed());
        let t = Instant::now();
        let w2 = simulate(2);
        two.push(t.elapsed());
        assert!(
            w1 == reference && w2 == reference,
            "results depend on the thread count"
        );
    }
    let (m1, m2) = (median(one), median(two));
    println!(
        "data_parallel: {STEPS} steps on {DEVICES} devices: 1 thread {:.3} s, 2 threads {:.3} s \
         (medians of {rounds}); speed-up {:.2}x",
        m1.as_secs_f64(),
        m2.as_secs_f64(),
        m1.as_secs_f64() / m2.as_secs_f64()
    );
}
