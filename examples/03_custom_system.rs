//! 03 — a system of your own in npusim's frame.
//!
//! What happens each frame: npusim's systems run in their `NpuSet` order — ingest, dependencies,
//! shape propagation, tiling, dispatch, hardware tick, deferred free, retire. This example adds
//! one system, `sample_occupancy`, between dispatch and the hardware tick: at that point the
//! frame has decided what runs until the device clock's next jump, so the system counts tasks
//! by status (queued behind their stream, ready but waiting for a unit, running) and the AI
//! cores in use, and integrates cores-in-use over simulated time into an `Occupancy` resource.
//!
//! Part 1 adds it to the runtime's own schedule (`rt.lock_world()` gives the world and the
//! schedule); three streams then compete for the 4 AI cores of the `small` preset, and the
//! example prints the first frames it sampled, the peaks, and the busy core-time it measured next
//! to npusim's own counter — they agree to the nanosecond.
//!
//! Part 2 builds a schedule from scratch with `npusim::systems::install`, adds the same system,
//! and hands that schedule to a second runtime: the way to reorder or replace stages.
//!
//! Run: `cargo run --release --example 03_custom_system`

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::{Schedule, SingleThreadedExecutor};
use npusim::components::{DeviceState, SimClock, Task, TaskStatus};
use npusim::prelude::*;

/// One frame as `sample_occupancy` saw it.
#[derive(Clone, Copy, Debug)]
struct Sample {
    now: SimTime,
    queued: usize,
    waiting: usize,
    running: usize,
    cores_in_use: u32,
}

/// What the custom system collects.
#[derive(Resource, Default, Debug)]
struct Occupancy {
    frames: u64,
    /// The first frames, for printing.
    first: Vec<Sample>,
    peak_waiting: usize,
    peak_running: usize,
    /// Frames in which a ready task found no free unit.
    frames_with_waiting: u64,
    /// Integral of cores in use over simulated time, in core-nanoseconds.
    busy_core_ns: u64,
    last: Option<Sample>,
}

/// The custom system: counts tasks by status and integrates core use over simulated time.
fn sample_occupancy(
    clock: Res<SimClock>,
    tasks: Query<&Task>,
    devices: Query<&DeviceState>,
    mut occ: ResMut<Occupancy>,
) {
    let (mut queued, mut waiting, mut running) = (0, 0, 0);
    for t in &tasks {
        match t.status {
            TaskStatus::Queued => queued += 1,
            TaskStatus::Ready => waiting += 1,
            TaskStatus::Running => running += 1,
            _ => {}
        }
    }
    let cores_in_use = devices
        .iter()
        .map(|d| d.config.ai_cores - d.units.free_cores)
        .sum();
    let sample = Sample {
        now: clock.now,
        queued,
        waiting,
        running,
        cores_in_use,
    };
    // What was in use since the previous sample stayed in use until now.
    if let Some(prev) = occ.last {
        occ.busy_core_ns += prev.cores_in_use as u64 * (sample.now - prev.now).as_ns();
    }
    occ.last = Some(sample);
    occ.frames += 1;
    occ.peak_waiting = occ.peak_waiting.max(waiting);
    occ.peak_running = occ.peak_running.max(running);
    occ.frames_with_waiting += (waiting > 0) as u64;
    if occ.first.len() < 16 {
        occ.first.push(sample);
    }
}

/// Three streams, each a chain of kernels wanting 3 of the 4 cores: they queue for cores.
fn workload(rt: &Runtime) -> Result<(), NpuError> {
    let n = 1 << 18;
    let ctx = rt.device_context(0)?;
    let fill = rt.kernel("fill_f32")?;
    let add = rt.kernel("vector_add_f32")?;
    let mut streams = Vec::new();
    for s in 0..3 {
        let stream = ctx.stream()?;
        let (mut x, mut y) = (ctx.alloc::<f32>(n)?, ctx.alloc::<f32>(n)?);
        let launch = |k| stream.launch_builder(k).grid(3);
        launch(&fill).arg(&mut x).arg(n).arg(s as f32).launch()?;
        for _ in 0..4 {
            launch(&add).arg(&x).arg(&x).arg(&mut y).arg(n).launch()?;
            launch(&add).arg(&y).arg(&y).arg(&mut x).arg(n).launch()?;
        }
        streams.push((stream, x));
    }
    ctx.synchronize()?;
    for (s, (stream, x)) in streams.iter().enumerate() {
        let back = stream.clone_dtoh(&x.slice(..4)?)?;
        // Eight doublings of s.
        assert_eq!(back[0], s as f32 * 256.0);
    }
    Ok(())
}

fn report(rt: &Runtime) {
    let guard = rt.lock_world();
    let occ = guard.world().resource::<Occupancy>();
    println!(
        "{:>6} {:>12} {:>7} {:>8} {:>8} {:>6}",
        "frame", "device time", "queued", "waiting", "running", "cores"
    );
    for (i, s) in occ.first.iter().enumerate() {
        println!(
            "{:>6} {:>12} {:>7} {:>8} {:>8} {:>6}",
            i,
            s.now.to_string(),
            s.queued,
            s.waiting,
            s.running,
            s.cores_in_use
        );
    }
    println!(
        "... {} frames sampled; peak {} ready tasks waiting for a unit, peak {} running; \
         {} frames had a task waiting",
        occ.frames, occ.peak_waiting, occ.peak_running, occ.frames_with_waiting
    );
    let busy = occ.busy_core_ns;
    drop(guard);
    let stats = rt.stats();
    let counter: u64 = stats.units.iter().map(|u| u.core_busy_ns).sum();
    let cores = rt.device_config(0).map_or(1, |c| c.ai_cores) as f64;
    println!(
        "busy core-time: measured by our system {}, npusim's counter {} ({}); \
         cores {:.0}% busy over {}",
        SimTime(busy),
        SimTime(counter),
        if busy == counter {
            "equal"
        } else {
            "DIFFERENT"
        },
        100.0 * busy as f64 / (cores * stats.device_now.as_ns().max(1) as f64),
        stats.device_now
    );
}

fn main() -> Result<(), NpuError> {
    // Part 1: add the system to the runtime's schedule.
    println!("part 1: a system added to the runtime's own schedule\n");
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small()))?;
    {
        let mut guard = rt.lock_world();
        guard.world_mut().init_resource::<Occupancy>();
        guard.schedule_mut().add_systems(
            sample_occupancy
                .after(NpuSet::Dispatch)
                .before(NpuSet::HardwareTick),
        );
    } // API calls wait while the guard is held: drop it before using the runtime.
    workload(&rt)?;
    report(&rt);

    // Part 2: a schedule built from scratch — npusim's sets and systems, then ours — replaces
    // the runtime's. `install` is all it takes to get the standard pipeline; anything else
    // (another executor, systems removed or reordered) is up to the embedder.
    println!("\npart 2: the same system in a schedule built with npusim::systems::install\n");
    let rt2 = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small()))?;
    {
        let mut schedule = Schedule::default();
        schedule.set_executor(SingleThreadedExecutor::new());
        npusim::systems::install(&mut schedule);
        schedule.add_systems(
            sample_occupancy
                .after(NpuSet::Dispatch)
                .before(NpuSet::HardwareTick),
        );
        let mut guard = rt2.lock_world();
        // Inserts npusim's resources a fresh world would need (the runtime's has them all
        // already; existing ones are kept), then our own.
        npusim::systems::init_resources(guard.world_mut());
        guard.world_mut().init_resource::<Occupancy>();
        *guard.schedule_mut() = schedule;
    }
    workload(&rt2)?;
    report(&rt2);

    let same = |rt: &Runtime| {
        let g = rt.lock_world();
        let o = g.world().resource::<Occupancy>();
        (o.frames, o.busy_core_ns, o.peak_waiting)
    };
    println!(
        "\nboth runtimes saw the same frames: {}",
        same(&rt) == same(&rt2)
    );
    Ok(())
}
