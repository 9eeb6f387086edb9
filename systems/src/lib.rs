//! The systems that advance the simulated NPU, one frame per run of the schedule they are
//! [`install`]ed in, and the [`NpuSet`] order they run in (DESIGN §3):
//!
//! 1. [`NpuSet::Ingest`] — submissions on each stream's doorbell become task entities in it.
//! 2. [`NpuSet::Dependencies`] — a stream's head becomes ready when its predecessor is done, its
//!    submit time has come and the event record it waits for has fired.
//! 3. [`NpuSet::ShapePropagation`] — ready op launches read their input shapes from the
//!    device-side shape buffer and write their inferred output shapes back ([`shapes`]).
//! 4. [`NpuSet::Tiling`] — ready op launches compute their tiling from the actual shapes and
//!    the device's resources, into their descriptors ([`tiling`]).
//! 5. [`NpuSet::Dispatch`] — ready tasks take free units, in priority order, and get their
//!    simulated start and end; peer copies take the links of their route; collective tasks
//!    wait at the rendezvous until every rank is there ([`collective`]).
//! 6. [`NpuSet::HardwareTick`] — the clock jumps to the next completion; finishing tasks execute
//!    (different devices' side by side on the [`workers::Workers`]) and complete; collectives move
//!    their data across devices; faults are raised here.
//! 7. [`NpuSet::DeferredFree`] — memory freed behind queued work returns to the pool once the
//!    stream positions whose access sets name it have completed ([`deferred_free`]).
//! 8. [`NpuSet::Retire`] — finished tasks are recorded and go back to the task pool for reuse.
//!
//! Whatever the stage, a task finishes through one function, [`complete::Completion`]. A
//! resource a stage needs only for rare work is an `Option<Res<…>>` / `Option<ResMut<…>>`.
//! A stage whose world lacks one of its resources ([`RESOURCES`]: an embedder removed it)
//! skips its run rather than panic (its parameters are `If<Res<…>>`); one it only counts or
//! logs into is optional, and the stage runs without it.
//!
//! Embedders add their own systems with `.in_set(NpuSet::Dispatch)` (or any set), or call
//! [`install`] on a schedule of their own.
#![warn(missing_docs)]

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::{BoxedCondition, InternedSystemSet, Schedule, SystemSet};
use bevy_ecs::system::{ReadOnlySystem, ScheduleSystem};
use npusim_components::binary::HostLog;
use npusim_components::collective::{Interconnect, LinkTimeline, Rendezvous};
use npusim_components::resources::{
    AbortRequests, Devices, Faults, Finished, FrameStats, PendingCallbacks, ReadyQueue, Running,
    SimClock, TaskPool, Timeline,
};
use npusim_components::shape::{OpRegistry, ResolvedShapes, ShapeStats, TilingLog};
use npusim_components::{ExecutionMode, KernelRegistry, NpuError};
use workers::Workers;

pub mod binary;
pub mod collective;
pub mod complete;
pub mod copy;
pub mod deferred_free;
pub mod dependencies;
pub mod dispatch;
pub mod ingest;
pub mod retire;
pub mod shapes;
#[cfg(test)]
pub(crate) mod test_support;
pub mod tick;
pub mod tiling;
pub mod watchdog;
pub mod workers;

/// Opens a Tracy zone for the rest of the scope when the `tracy` feature is on (and a client
/// runs); nothing at all otherwise.
#[macro_export]
macro_rules! zone {
    ($name:literal) => {
        #[cfg(feature = "tracy")]
        let _zone = if tracy_client::Client::is_running() {
            Some(tracy_client::span!($name))
        } else {
            None
        };
    };
}

/// The stages of a frame, chained in this order.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NpuSet {
    /// Submissions on the streams' doorbells become task entities.
    Ingest,
    /// Stream heads whose predecessors and event waits are done become ready.
    Dependencies,
    /// Ready tasks resolve dynamic shapes from the device-side shape buffer.
    ShapePropagation,
    /// Ready kernels compute tiling from their actual shapes.
    Tiling,
    /// Ready tasks go to free execution units.
    Dispatch,
    /// The clock advances to the next completion; finishing tasks execute.
    HardwareTick,
    /// Memory freed behind queued work returns to the pool.
    DeferredFree,
    /// Finished tasks are recorded and recycled.
    Retire,
}

/// One of the resources npusim's systems and runtime need (see [`RESOURCES`]).
#[derive(Clone, Copy, Debug)]
pub struct NpuResource {
    /// The resource type's name, without its path (as [`NpuError::MissingResource`] names it).
    pub name: &'static str,
    /// Inserts its default into a world that does not have it.
    pub init: fn(&mut World),
    /// Whether a world has it.
    pub present: fn(&World) -> bool,
    /// Takes it out of a world; whether it was there.
    pub remove: fn(&mut World) -> bool,
}

impl NpuResource {
    /// The entry of resource type `T`, named `name`.
    const fn of<T: Resource + FromWorld>(name: &'static str) -> Self {
        fn init<T: Resource + FromWorld>(world: &mut World) {
            world.init_resource::<T>();
        }
        fn present<T: Resource>(world: &World) -> bool {
            world.contains_resource::<T>()
        }
        fn remove<T: Resource>(world: &mut World) -> bool {
            world.remove_resource::<T>().is_some()
        }
        Self {
            name,
            init: init::<T>,
            present: present::<T>,
            remove: remove::<T>,
        }
    }
}

/// [`RESOURCES`], from one list of types.
macro_rules! npu_resources {
    ($($t:ident),* $(,)?) => {
        /// Every resource the systems need, in the order [`init_resources`] inserts them. An
        /// embedder that takes one out of a runtime's world makes the calls that need it fail
        /// with [`NpuError::MissingResource`], and the stages that read it skip their work.
        pub const RESOURCES: &[NpuResource] = &[$(NpuResource::of::<$t>(stringify!($t))),*];
    };
}

npu_resources!(
    SimClock,
    ReadyQueue,
    Running,
    Finished,
    TaskPool,
    HostLog,
    Faults,
    AbortRequests,
    PendingCallbacks,
    Devices,
    Timeline,
    FrameStats,
    KernelRegistry,
    Rendezvous,
    Interconnect,
    LinkTimeline,
    Workers,
    OpRegistry,
    ResolvedShapes,
    ShapeStats,
    TilingLog,
    ExecutionMode,
);

/// Inserts every resource the systems need (keeps any already present).
pub fn init_resources(world: &mut World) {
    for r in RESOURCES {
        (r.init)(world);
    }
}

/// The first of npusim's resources `world` lacks, as the error that names it (a wait that
/// nothing can finish tells why with it).
pub fn missing_resource(world: &World) -> Option<NpuError> {
    RESOURCES
        .iter()
        .find(|r| !(r.present)(world))
        .map(|r| NpuError::MissingResource(r.name))
}

/// One of npusim's systems: the stage it belongs to, the system, and its run condition if it
/// has one.
pub struct Stage {
    /// The set it runs in.
    pub set: NpuSet,
    /// The system.
    pub system: ScheduleSystem,
    /// Whether it has work this frame, if the system does not look for its work itself.
    pub condition: Option<BoxedCondition>,
}

impl Stage {
    fn new<M>(set: NpuSet, system: impl IntoSystem<(), (), M>) -> Self {
        Self {
            set,
            system: Box::new(IntoSystem::into_system(system)),
            condition: None,
        }
    }

    fn run_if<M>(
        mut self,
        condition: impl IntoSystem<(), bool, M, System: ReadOnlySystem>,
    ) -> Self {
        self.condition = Some(Box::new(IntoSystem::into_system(condition)));
        self
    }
}

/// npusim's systems in the order a frame runs them (the sets' order; within a set, this order),
/// each with its run condition: what [`install`] puts in a schedule.
pub fn stages() -> Vec<Stage> {
    vec![
        Stage::new(NpuSet::Ingest, ingest::ingest),
        Stage::new(NpuSet::Dependencies, dependencies::resolve_dependencies),
        // The stages that are often idle run only when they have work: their parameter fetches
        // are a large part of a frame's fixed cost (see [`has_work`]). Dispatch and the tick,
        // busy in most frames, look for their work themselves (their resources are fetched only
        // then), so a busy frame evaluates no condition for them.
        Stage::new(NpuSet::ShapePropagation, shapes::propagate_shapes).run_if(has_work::new_ops),
        Stage::new(NpuSet::Tiling, tiling::compute_tiling).run_if(has_work::shapes_resolved),
        Stage::new(NpuSet::Dispatch, dispatch::dispatch),
        Stage::new(NpuSet::Dispatch, collective::start_collectives)
            .run_if(has_work::ranks_at_the_rendezvous),
        Stage::new(NpuSet::HardwareTick, tick::hardware_tick),
        Stage::new(NpuSet::DeferredFree, deferred_free::deferred_free),
        // Retire looks at the finished list first itself: cheaper than a run condition.
        Stage::new(NpuSet::Retire, retire::retire),
    ]
}

/// The sets, chained in frame order.
const SETS: [NpuSet; 8] = [
    NpuSet::Ingest,
    NpuSet::Dependencies,
    NpuSet::ShapePropagation,
    NpuSet::Tiling,
    NpuSet::Dispatch,
    NpuSet::HardwareTick,
    NpuSet::DeferredFree,
    NpuSet::Retire,
];

/// Adds the sets, chained, and npusim's systems ([`stages`], in their order) to `schedule`.
pub fn install(schedule: &mut Schedule) {
    let [a, b, c, d, e, f, g, h] = SETS;
    schedule.configure_sets((a, b, c, d, e, f, g, h).chain());
    let mut previous: Option<(NpuSet, InternedSystemSet)> = None;
    for stage in stages() {
        let own = stage.system.default_system_sets();
        let mut config = stage.system.in_set(stage.set);
        // After the one before it in the same set.
        if let Some((set, before)) = previous
            && set == stage.set
        {
            config = config.after(before);
        }
        if let Some(condition) = stage.condition {
            config.run_if_dyn(condition);
        }
        previous = own.first().map(|&s| (stage.set, s));
        schedule.add_systems(config);
    }
}

/// The run conditions of the stages that are often idle: whether a stage has work this frame.
/// A condition reads its resource as an `Option<Res<…>>`; a missing resource means no work. Dispatch and the hardware tick have none: busy in most
/// frames, they look for their work themselves.
pub mod has_work {
    use bevy_ecs::prelude::Res;
    use npusim_components::collective::Rendezvous;
    use npusim_components::resources::ReadyQueue;
    use npusim_components::shape::ResolvedShapes;

    /// Ready op launches for shape propagation.
    pub fn new_ops(r: Option<Res<ReadyQueue>>) -> bool {
        r.as_deref().is_some_and(|r| r.new_ops > 0)
    }

    /// Op launches whose shapes were resolved, for tiling.
    pub fn shapes_resolved(r: Option<Res<ResolvedShapes>>) -> bool {
        r.as_deref().is_some_and(|r| !r.launches.is_empty())
    }

    /// Collective ranks arriving at or waiting in the rendezvous.
    pub fn ranks_at_the_rendezvous(r: Option<Res<Rendezvous>>) -> bool {
        r.as_deref()
            .is_some_and(|r| !r.arriving.is_empty() || !r.ops.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::resources::{FrameStats, TaskPool, Timeline};
    use npusim_components::task::{EventView, MemsetView, TaskDescriptor};
    use npusim_components::{EventState, StreamState, TaskStatus};

    fn schedule() -> Schedule {
        let mut s = Schedule::default();
        s.set_executor(bevy_ecs::schedule::SingleThreadedExecutor::new());
        install(&mut s);
        s
    }

    /// A memset of 64 sevens at `buf`.
    fn sevens(buf: u64) -> TaskDescriptor {
        TaskDescriptor::memset(MemsetView {
            dst: buf,
            value: 7,
            bytes: 64,
        })
    }

    #[test]
    fn a_frame_takes_a_submission_through_every_stage_in_order() {
        let mut s = setup();
        s.world.resource_mut::<Timeline>().enabled = true;
        let buf = alloc(&mut s.world, s.device, s.ctx, 4096);
        submit(&mut s.world, s.stream, sevens(buf));
        let mut schedule = schedule();
        // One frame: ingested, made ready, dispatched, run to its end, completed, retired.
        schedule.run(&mut s.world);
        assert_eq!(read(&mut s.world, s.device, s.ctx, buf, 64), vec![7u8; 64]);
        let st = s.world.get::<StreamState>(s.stream).unwrap();
        assert!(st.is_idle() && st.queue.is_empty());
        let records = &s.world.resource::<Timeline>().records;
        assert_eq!(records.len(), 1);
        assert!(records[0].ok && records[0].end > records[0].start);
        assert_eq!(s.world.resource::<TaskPool>().free.len(), 1, "recycled");
        let stats = s.world.resource::<FrameStats>();
        assert_eq!(
            (
                stats.tasks_ingested,
                stats.tasks_completed,
                stats.tasks_retired
            ),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_stage_has_work_only_when_its_resource_says_so() {
        use bevy_ecs::system::RunSystemOnce;
        use npusim_components::collective::Rendezvous;
        use npusim_components::resources::ReadyQueue;
        use npusim_components::shape::ResolvedShapes;
        let mut world = World::new();
        let ask = |world: &mut World| {
            [
                world.run_system_once(has_work::new_ops).unwrap(),
                world.run_system_once(has_work::shapes_resolved).unwrap(),
                world
                    .run_system_once(has_work::ranks_at_the_rendezvous)
                    .unwrap(),
            ]
        };
        // Without the resources (an embedder removed them): no work, and no panic.
        assert_eq!(ask(&mut world), [false; 3]);
        init_resources(&mut world);
        assert_eq!(ask(&mut world), [false; 3]);
        // Ready work that is not an op's is dispatch's, not shape propagation's.
        let e = Entity::PLACEHOLDER;
        world
            .resource_mut::<ReadyQueue>()
            .tasks
            .push(((0, 0, 1), e));
        assert_eq!(ask(&mut world), [false; 3]);
        world.resource_mut::<ReadyQueue>().new_ops = 1;
        assert_eq!(ask(&mut world), [true, false, false]);
        world
            .resource_mut::<ResolvedShapes>()
            .launches
            .push(npusim_components::shape::ResolvedLaunch::EMPTY);
        assert_eq!(ask(&mut world), [true, true, false]);
        world.resource_mut::<Rendezvous>().arriving.push(e);
        assert_eq!(ask(&mut world), [true; 3]);
    }

    #[test]
    fn a_frame_without_one_of_the_resources_runs_without_panicking() {
        for r in RESOURCES {
            let mut s = setup();
            let buf = alloc(&mut s.world, s.device, s.ctx, 4096);
            let k = register_kernel(&mut s.world, "k", 100.0, |_| Ok(()));
            s.world.resource_mut::<Timeline>().enabled = true;
            submit(&mut s.world, s.stream, sevens(buf));
            submit(&mut s.world, s.stream, launch(k, 1, &[]));
            let mut schedule = schedule();
            // Some work in flight when it goes.
            schedule.run(&mut s.world);
            submit(&mut s.world, s.stream, launch(k, 2, &[]));
            assert!((r.remove)(&mut s.world), "{} was there", r.name);
            assert_eq!(
                missing_resource(&s.world),
                Some(NpuError::MissingResource(r.name))
            );
            for _ in 0..4 {
                schedule.run(&mut s.world);
            }
            (r.init)(&mut s.world);
            assert_eq!(missing_resource(&s.world), None, "{} is back", r.name);
        }
    }

    #[test]
    fn every_resource_is_named_without_its_path() {
        let mut world = World::new();
        init_resources(&mut world);
        assert_eq!(
            NpuError::missing_resource::<npusim_components::KernelRegistry>(),
            NpuError::MissingResource("KernelRegistry")
        );
        for r in RESOURCES {
            assert!((r.present)(&world), "{}", r.name);
            assert!(!r.name.contains("::"), "{}", r.name);
        }
    }

    #[test]
    fn a_schedule_runs_the_stages_in_their_order_and_no_two_of_them_unordered() {
        use bevy_ecs::schedule::{LogLevel, ScheduleBuildSettings};
        let mut world = World::new();
        init_resources(&mut world);
        let mut schedule = Schedule::default();
        schedule.set_build_settings(ScheduleBuildSettings {
            ambiguity_detection: LogLevel::Error,
            ..Default::default()
        });
        install(&mut schedule);
        schedule
            .initialize(&mut world)
            .expect("no two of npusim's systems that touch the same data are unordered");
        let names = |it: &mut dyn Iterator<Item = &ScheduleSystem>| -> Vec<String> {
            it.map(|s| s.name().to_string()).collect()
        };
        let order = names(&mut schedule.systems().unwrap().map(|(_, s)| s));
        let stages = stages();
        assert_eq!(order, names(&mut stages.iter().map(|s| &s.system)));
        assert_eq!(order.len(), 9);
    }

    #[test]
    fn an_idle_frame_changes_nothing() {
        let mut s = setup();
        let mut schedule = schedule();
        schedule.run(&mut s.world);
        assert!(!s.world.resource::<FrameStats>().last_frame_progressed);
    }

    #[test]
    fn a_wait_on_another_streams_record_orders_the_two_streams() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let ev = s.world.spawn(EventState::new(s.ctx)).id();
        let buf = alloc(&mut s.world, s.device, s.ctx, 1 << 20);
        let set = |v, bytes| {
            TaskDescriptor::memset(MemsetView {
                dst: buf,
                value: v,
                bytes,
            })
        };
        // A long memset, then (after the event) a short one: unordered, the short one would end
        // first and be overwritten.
        submit(&mut s.world, s.stream, set(1, 1 << 20));
        let record = s.world.get_mut::<EventState>(ev).unwrap().push_record();
        let view = EventView { event: ev, record };
        submit(&mut s.world, s.stream, TaskDescriptor::event(view, false));
        submit(&mut s.world, other, TaskDescriptor::event(view, true));
        submit(&mut s.world, other, set(2, 4));
        let mut schedule = schedule();
        for _ in 0..8 {
            schedule.run(&mut s.world);
        }
        // The second memset ran after the first: the buffer holds its value.
        assert_eq!(read(&mut s.world, s.device, s.ctx, buf, 4), vec![2u8; 4]);
        let pool = s.world.resource::<TaskPool>().free.clone();
        assert_eq!(pool.len(), 4);
        assert!(
            pool.iter()
                .all(|&t| task(&s.world, t).status == TaskStatus::Retired)
        );
    }
}
