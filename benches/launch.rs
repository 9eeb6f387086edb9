//! `launch`: the host cost of enqueueing one kernel launch, against pushing the same descriptor
//! onto a `Vec` in the same run. Only the enqueue is timed; the queued work is drained between
//! timed batches.
//!
//! Run: `cargo bench --bench launch` (add `--features tracy` to profile with Tracy).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use npusim::components::task::{TaskDescriptor, TaskKind};
use npusim::prelude::*;

const BATCH: u64 = 10_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("launch");
    group.bench_function("vec_push_descriptor", |b| {
        b.iter_custom(|iters| {
            let mut v: Vec<TaskDescriptor> = Vec::with_capacity(BATCH as usize);
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                v.clear();
                let start = Instant::now();
                for i in 0..n {
                    let mut d = TaskDescriptor::new(TaskKind::Kernel);
                    d.kernel = 0;
                    d.block_dim = 1;
                    d.arg_count = 1;
                    d.args[0] = black_box(i);
                    v.push(d);
                }
                black_box(&v);
                total += start.elapsed();
                left -= n;
            }
            total
        })
    });
    let rt = Runtime::new(RuntimeConfig {
        timeline: false,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let stream = rt.create_stream().unwrap();
    let noop = rt.kernel("noop").unwrap();
    group.bench_function("npusim_launch", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                let start = Instant::now();
                for i in 0..n {
                    rt.launch(noop, 1, &[Arg::U64(black_box(i))], stream)
                        .unwrap();
                }
                total += start.elapsed();
                rt.synchronize_stream(stream).unwrap();
                left -= n;
            }
            total
        })
    });
    group.finish();
}

/// The fixed cost of a frame with nothing to do (`Runtime::step` on an idle runtime), against
/// running an empty `bevy_ecs` schedule on an empty world (the ECS's own floor).
fn idle_frame(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame");
    let mut world = bevy_ecs::world::World::new();
    let mut schedule = bevy_ecs::schedule::Schedule::default();
    schedule.set_executor(bevy_ecs::schedule::SingleThreadedExecutor::new());
    schedule.run(&mut world);
    group.bench_function("empty_bevy_schedule", |b| {
        b.iter(|| schedule.run(black_box(&mut world)))
    });
    let rt = Runtime::new(RuntimeConfig {
        timeline: false,
        ..RuntimeConfig::default()
    })
    .unwrap();
    rt.step();
    group.bench_function("npusim_idle_frame", |b| b.iter(|| black_box(rt.step())));
    group.finish();
}

criterion_group!(benches, bench, idle_frame);
criterion_main!(benches);
