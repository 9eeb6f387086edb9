//! `launch`: the host cost of enqueueing one kernel launch, against pushing the same descriptor
//! onto a `Vec` in the same run, in batches of 10,000 and of 100. Only the enqueue is timed;
//! the queued work is drained between timed batches. `locked_entry_push_floor` is what any
//! enqueue that takes a lock and writes a whole doorbell entry costs at the least: a locked
//! push of the same entry onto a stream's doorbell, with the same drain between batches.
//!
//! Run: `cargo bench --bench launch` (add `--features tracy` to profile with Tracy).

use npusim::Launch;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use npusim::components::doorbell::Doorbell;
use npusim::components::task::{TaskDescriptor, TaskExtra, TaskKind};
use npusim::prelude::*;

const BATCH: u64 = 10_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("launch");
    let rt = Runtime::new(RuntimeConfig {
        timeline: false,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let stream = rt.streams().create().unwrap();
    let noop = rt.kernel("noop").unwrap();
    // Batches of 10,000 write ~2.5 MB of descriptors, more than the L2 cache holds; batches of
    // 100 (~25 KB) stay in it. The pair separates what the enqueue computes from the memory
    // it writes.
    for (batch, suffix) in [(BATCH, ""), (100, "_batch_100")] {
        group.bench_function(format!("vec_push_descriptor{suffix}"), |b| {
            b.iter_custom(|iters| {
                let mut v: Vec<TaskDescriptor> = Vec::with_capacity(batch as usize);
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(batch);
                    v.clear();
                    let start = Instant::now();
                    for i in 0..n {
                        v.push(noop_descriptor(black_box(i)));
                    }
                    black_box(&v);
                    total += start.elapsed();
                    left -= n;
                }
                total
            })
        });
        // The floor of any enqueue that takes a lock and writes a whole doorbell entry: a
        // `Mutex<Doorbell>` push of the same entry, timed the same way, with the same drain
        // between batches (the same launches run through the runtime, untimed), so the
        // entries land in memory the drain has just walked over, as the runtime's do.
        let floor: std::sync::Mutex<Doorbell> = std::sync::Mutex::new(Doorbell::new());
        group.bench_function(format!("locked_entry_push_floor{suffix}"), |b| {
            b.iter_custom(|iters| {
                timed_in(
                    batch,
                    iters,
                    |i| {
                        let i = black_box(i);
                        let mut v = floor.lock().unwrap();
                        let seq = v.len() as u64 + 1;
                        v.push_with(seq, SimTime(seq), TaskExtra::None, |d| {
                            *d = noop_descriptor(i)
                        });
                    },
                    || {
                        let n = {
                            let mut v = floor.lock().unwrap();
                            let n = v.len();
                            v.clear();
                            n
                        };
                        for i in 0..n {
                            rt.submit(Launch::new(noop, 1, &[Arg::U64(i as u64)], stream))
                                .unwrap();
                        }
                        rt.streams().synchronize(stream).unwrap();
                    },
                )
            })
        });
        group.bench_function(format!("npusim_launch{suffix}"), |b| {
            b.iter_custom(|iters| {
                timed_in(
                    batch,
                    iters,
                    |i| {
                        rt.submit(Launch::new(noop, 1, &[Arg::U64(black_box(i))], stream))
                            .unwrap();
                    },
                    || rt.streams().synchronize(stream).unwrap(),
                )
            })
        });
    }
    group.finish();
    safe_launch(c, &rt);
}

/// The descriptor of a one-block launch of kernel slot 0 with argument word `i`, as the
/// baselines build it.
fn noop_descriptor(i: u64) -> TaskDescriptor {
    let mut d = TaskDescriptor::new(TaskKind::Kernel);
    d.kernel = 0;
    d.block_dim = 1;
    d.arg_count = 1;
    d.args[0] = i;
    d
}

/// Times `BATCH`-sized runs of `launch`, draining the queue with `drain` between them.
fn timed(iters: u64, launch: impl FnMut(u64), drain: impl Fn()) -> Duration {
    timed_in(BATCH, iters, launch, drain)
}

/// Times `batch`-sized runs of `launch`, draining the queue with `drain` between them.
fn timed_in(batch: u64, iters: u64, mut launch: impl FnMut(u64), drain: impl Fn()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(batch);
        let start = Instant::now();
        for i in 0..n {
            launch(i);
        }
        total += start.elapsed();
        drain();
        left -= n;
    }
    total
}

/// The safe API's launch builder against the raw `Runtime::submit(Launch)` of the same launch: what the
/// builder's checks (live buffers of the stream's context, the kernel's declared parameters)
/// cost per launch.
fn safe_launch(c: &mut Criterion, rt: &Runtime) {
    let mut group = c.benchmark_group("launch_builder");
    let ctx = rt.device_context(0).unwrap();
    let stream = ctx.stream().unwrap();
    let raw = stream.raw();
    let (noop, add) = (
        rt.kernel("noop").unwrap(),
        rt.kernel("vector_add_f32").unwrap(),
    );
    let (a, b) = (ctx.alloc::<f32>(16).unwrap(), ctx.alloc::<f32>(16).unwrap());
    let mut out = ctx.alloc::<f32>(16).unwrap();
    let drain = || stream.synchronize().unwrap();
    group.bench_function("raw_noop", |bch| {
        bch.iter_custom(|iters| {
            timed(
                iters,
                |_| {
                    rt.submit(Launch::new(noop, 1, &[], raw)).unwrap();
                },
                drain,
            )
        })
    });
    group.bench_function("builder_noop", |bch| {
        bch.iter_custom(|iters| {
            timed(
                iters,
                |_| stream.launch_builder(&noop).launch().unwrap(),
                drain,
            )
        })
    });
    let ptrs = [a.device_ptr(), b.device_ptr(), out.device_ptr()];
    group.bench_function("raw_vector_add", |bch| {
        bch.iter_custom(|iters| {
            timed(
                iters,
                |i| {
                    let args = [
                        ptrs[0].into(),
                        ptrs[1].into(),
                        ptrs[2].into(),
                        Arg::U64(black_box(i) % 16),
                    ];
                    rt.submit(Launch::new(add, 1, &args, raw)).unwrap();
                },
                drain,
            )
        })
    });
    group.bench_function("builder_vector_add", |bch| {
        bch.iter_custom(|iters| {
            timed(
                iters,
                |i| {
                    stream
                        .launch_builder(&add)
                        .arg(&a)
                        .arg(&b)
                        .arg(&mut out)
                        .arg(black_box(i) % 16)
                        .launch()
                        .unwrap()
                },
                drain,
            )
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
