//! `shapes`: what dynamic shapes add to a kernel launch. Two comparisons, each against a
//! baseline run in the same process:
//!
//! 1. `launch_*`: the whole life of a launch — enqueue, then the frames that ingest, resolve,
//!    dispatch, run and retire it — for a plain kernel launch (`launch_static`, the built-in
//!    `noop`), against an op launch whose input shape is read from the device shape buffer
//!    (`launch_dynamic_shape`: shape propagation + tiling + the op's empty kernel) and one
//!    with static shapes only (`launch_static_shape_op`). Per launch; the difference is what
//!    the dynamic-shape stages and the op launch path add. `enqueue_*` time the API calls only.
//! 2. `stage_*`: the stages' own work on one descriptor — read the input shape from device
//!    memory, infer, check buffers, run the tiling function, check it against the device, write
//!    tiling and cost into the descriptor (`stage_propagate_and_tile`) — against copying the
//!    descriptor (`stage_copy_descriptor`).
//!
//! Run: `cargo bench --bench shapes` (add `--features tracy` to profile with Tracy).

use npusim::{Launch, LaunchOp};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use npusim::HostCosts;
use npusim::components::DeviceState;
use npusim::components::resources::Devices;
use npusim::components::shape::{
    OpLaunch, OpRegistry, ResolvedLaunch, ShapeBuffer, ShapeStats, TensorSource,
};
use npusim::components::task::TaskDescriptor;
use npusim::prelude::*;
use npusim::systems::{shapes::resolve_launch, tiling::tile_launch};

const BATCH: u64 = 2_000;

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        timeline: false,
        host: HostCosts::zero(),
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// An op that does nothing on the device, so only the launch path is measured.
fn empty_op(rt: &Runtime) -> Kernel {
    rt.ops()
        .register(
            OpBuilder::new("empty_op")
                .input("x", 4)
                .output("y", 4)
                .infer(|i, _, o| {
                    o[0] = i[0];
                    Ok(())
                })
                .tiling(|s, cfg| {
                    let n = s.inputs[0].numel();
                    Ok(Tiling::new(n.clamp(1, cfg.ai_cores as u64) as u32, 1)
                        .push_u64(n)
                        .with_buffers(4096, 0))
                })
                .cost(|_, _| KernelCost::default())
                .kernel(|_, _| Ok(())),
        )
        .unwrap()
}

/// Times `launch` `iters` times, driving the device to idle after every `BATCH` launches; with
/// `with_frames` false, only the enqueueing is timed.
fn run_batches(
    rt: &Runtime,
    s: Stream,
    iters: u64,
    with_frames: bool,
    launch: &dyn Fn(u64),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        let start = Instant::now();
        for i in 0..n {
            launch(i);
        }
        if !with_frames {
            total += start.elapsed();
        }
        rt.streams().synchronize(s).unwrap();
        if with_frames {
            total += start.elapsed();
        }
        left -= n;
    }
    total
}

fn launches(c: &mut Criterion) {
    let mut group = c.benchmark_group("shapes");
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(4 * 64).unwrap();
    let noop = rt.kernel("noop").unwrap();
    let op = empty_op(&rt);
    let h = rt.ops().create_shape().unwrap();
    rt.ops().set_shape_async(h, &[64], s).unwrap();
    rt.streams().synchronize(s).unwrap();

    let plain = |_: u64| {
        rt.submit(Launch::new(noop, 1, &[x.into(), x.into()], s))
            .unwrap();
    };
    let dynamic = |_: u64| {
        rt.submit(LaunchOp::new(
            op,
            &[TensorArg::dynamic(x, h)],
            &[TensorArg::output(x)],
            &[],
            s,
        ))
        .unwrap();
    };
    let fixed = |_: u64| {
        rt.submit(LaunchOp::new(
            op,
            &[TensorArg::new(x, &[64])],
            &[TensorArg::output(x)],
            &[],
            s,
        ))
        .unwrap();
    };
    for (name, f, frames) in [
        ("launch_static", &plain as &dyn Fn(u64), true),
        ("launch_dynamic_shape", &dynamic, true),
        ("launch_static_shape_op", &fixed, true),
        ("enqueue_static", &plain, false),
        ("enqueue_dynamic_shape", &dynamic, false),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| run_batches(&rt, s, iters, frames, f))
        });
    }
    assert_eq!(rt.ops().shape_stats().host_shape_reads, 0);
    group.finish();
}

fn stages(c: &mut Criterion) {
    let mut group = c.benchmark_group("shapes");
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 100_000u64;
    let (x, y) = (
        rt.memory().malloc(4 * n).unwrap(),
        rt.memory().malloc(4 * n).unwrap(),
    );
    let h = rt.ops().create_shape().unwrap();
    rt.ops().set_shape_async(h, &[n as i64], s).unwrap();
    rt.streams().synchronize(s).unwrap();
    let sigmoid = rt.ops().get("sigmoid_f32").unwrap();

    // The descriptor and op launch `launch_op` builds for sigmoid(x: dynamic) -> y.
    let desc = TaskDescriptor::kernel(
        sigmoid.slot(),
        1,
        [(x.addr(), false), (y.addr(), false)],
        &[],
    );
    let mut op_launch = OpLaunch::new(1, 1);
    op_launch.set_tensor(0, TensorSource::Slot(h.slot()));

    let mut guard = rt.lock_world();
    let world = guard.world_mut();
    let op = world.resource::<OpRegistry>().get(sigmoid).unwrap().clone();
    let ctx = h.context();
    let buffer = ShapeBuffer::new(world.get::<ShapeBuffer>(ctx).unwrap().base());
    let device = world.resource::<Devices>().entities[0];
    let config = world.get::<DeviceState>(device).unwrap().config.clone();
    let mut state = world.get_mut::<DeviceState>(device).unwrap();
    let memory = &mut state.memory;
    let mut stats = ShapeStats::default();
    let mut launch = ResolvedLaunch::EMPTY;

    group.bench_function("stage_copy_descriptor", |b| {
        b.iter(|| {
            let mut d = black_box(desc);
            d.block_dim = black_box(24);
            black_box(d)
        })
    });
    group.bench_function("stage_propagate_and_tile", |b| {
        b.iter(|| {
            let mut d = black_box(desc);
            let mut l = black_box(op_launch.clone());
            resolve_launch(
                &d,
                &l,
                &op,
                Some(&buffer),
                memory,
                ctx,
                &mut stats,
                &mut launch,
            )
            .unwrap();
            tile_launch(&mut d, &mut l, &launch, &op, &config).unwrap();
            black_box(d)
        })
    });
    group.finish();
}

criterion_group!(benches, launches, stages);
criterion_main!(benches);
