//! The runtime: a `bevy_ecs` world holding the simulated devices and everything users create,
//! the schedule that advances it one frame per run, and the host's simulated clock. API calls
//! lock it briefly, push work and return; waits drive frames until what they wait for is done.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bevy_ecs::component::Mutable;
use bevy_ecs::prelude::*;
use bevy_ecs::query::QueryState;
use bevy_ecs::schedule::{Schedule, SingleThreadedExecutor};
use npusim_components::resources::{
    Devices, FrameStats, PendingCallbacks, ReadyQueue, Running, SimClock, Timeline,
};
use npusim_components::{
    ContextState, DeviceMemory, DeviceState, EventState, KernelRegistry, NpuError, NpuResult,
    SimTime, StreamKind, StreamState, TaskRecord, Units, WorldResources,
};
use npusim_device::config::DeviceConfig;
use npusim_device::link::{Topology, TopologyConfig};

static NEXT_RUNTIME_ID: AtomicU32 = AtomicU32::new(1);

/// Modeled host-side cost of API calls, in nanoseconds of the host's simulated clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCosts {
    /// A light call: create, query, record, wait.
    pub call_ns: u64,
    /// Enqueueing a kernel launch.
    pub launch_ns: u64,
    /// Enqueueing a copy or memset.
    pub copy_call_ns: u64,
    /// Returning from a synchronize once the device is done (wake-up latency).
    pub sync_ns: u64,
    /// Staging pageable host memory, per byte (for async copies from pageable memory).
    pub stage_ns_per_kib: u64,
}

impl HostCosts {
    /// No host cost at all: every call happens at the host's current time. Useful when the
    /// device alone should bound a simulated run.
    pub fn zero() -> Self {
        Self {
            call_ns: 0,
            launch_ns: 0,
            copy_call_ns: 0,
            sync_ns: 0,
            stage_ns_per_kib: 0,
        }
    }
}

impl Default for HostCosts {
    fn default() -> Self {
        Self {
            call_ns: 200,
            launch_ns: 1_500,
            copy_call_ns: 1_000,
            sync_ns: 1_000,
            stage_ns_per_kib: 100,
        }
    }
}

/// How to build a [`Runtime`].
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Number of devices.
    pub devices: u32,
    /// The preset every device uses.
    pub device: DeviceConfig,
    /// Host-side API costs.
    pub host: HostCosts,
    /// Whether finished tasks are recorded on the timeline (off for very long runs).
    pub timeline: bool,
    /// How the devices are connected to each other.
    pub topology: TopologyConfig,
    /// Worker threads that run independent devices' work side by side: 0 picks one per
    /// available core (at most one per device), 1 runs everything on the calling thread.
    /// Results and timelines are the same for every value.
    pub threads: usize,
    /// How long (wall time) a wait gives a host callback that has not returned before it gives
    /// up with `ACL_ERROR_RT_REPORT_TIMEOUT` (a timed wait: at most its own timeout). Default
    /// 60 s, or `NPUSIM_CALLBACK_TIMEOUT_MS` (see [`crate::callback`]).
    pub callback_timeout: std::time::Duration,
    /// The stream sanitizer ([`crate::sanitizer`]): off by default (and then it costs
    /// nothing), or what `NPUSIM_SANITIZE` says.
    pub sanitizer: npusim_components::SanitizerConfig,
    /// Record every API call to a trace (see [`crate::record`]). `None` (the default): record
    /// only if `NPUSIM_RECORD` names a file.
    pub recording: Option<crate::record::Recording>,
    /// Timing-only mode: kernels, copies and collectives take their modelled time but move no
    /// data, so device memory is never backed; allocations still go through the pool, so
    /// fragmentation and out-of-memory stay as they are. For replays at scale and what-if
    /// runs (see [`crate::record`]).
    pub timing_only: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            devices: 1,
            device: DeviceConfig::default(),
            host: HostCosts::default(),
            timeline: true,
            topology: TopologyConfig::default(),
            threads: 0,
            callback_timeout: crate::callback::default_callback_timeout(),
            sanitizer: crate::sanitizer::default_config(),
            recording: None,
            timing_only: false,
        }
    }
}

impl RuntimeConfig {
    /// One device of preset `device`.
    pub fn with_device(device: DeviceConfig) -> Self {
        Self {
            device,
            ..Self::default()
        }
    }

    /// This configuration, recording every API call to the trace file `path` (written when
    /// the runtime ends, or at [`Runtime::finish_recording`]).
    pub fn record(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.recording = Some(crate::record::Recording {
            path: Some(path.into()),
            data: false,
        });
        self
    }
}

pub(crate) struct Inner {
    /// The runtime's id (a callback thread's host clock is looked up by it).
    pub runtime_id: u32,
    /// Callback threads and the callbacks out on them.
    pub callbacks: crate::callback::Callbacks,
    pub world: World,
    pub schedule: Schedule,
    /// How a frame runs the systems: npusim's own straight, or the schedule an embedder took.
    pub frames: Frames,
    pub costs: HostCosts,
    pub next_stream_order: u64,
    /// The host's simulated clock.
    host_now: SimTime,
    /// Per device index: the device entity.
    pub devices: Vec<Entity>,
    /// Per device index: the primary context.
    pub default_contexts: Vec<Entity>,
    /// How many thread stack entries name each context (a context in use by another thread
    /// cannot be destroyed).
    pub ctx_users: std::collections::BTreeMap<Entity, u32>,
    /// The exception callback.
    pub exception_callback: Option<crate::context::ExceptionCallback>,
    /// Host-side spans for the timeline (host work, waits), when the timeline is on.
    pub host_spans: Vec<crate::timeline::HostSpan>,
    /// A wait in progress: what, and the host time it began (closed at the next lock, once
    /// the waiting call has moved the host clock).
    pub open_wait: Option<(String, SimTime)>,
    /// Display id of the next communicator.
    pub next_comm_id: u32,
    /// Communicators every rank destroyed while operations of theirs were still queued: each
    /// goes once those have run (see `close_drained_comms`).
    pub(crate) closing_comms: Vec<Entity>,
    /// The cached queries and resource ids of `world` (see [`Bound`]).
    pub(crate) bound: Bound,
    /// Whether the stream sanitizer is on (its state is a world resource).
    pub sanitize: bool,
    /// The recorder, when API calls are recorded.
    pub recorder: Option<Box<crate::record::Recorder>>,
    /// Whether some context may be faulted. While none is, a handle check that found the
    /// stream (or event) of the current context knows that context is there and healthy
    /// without looking it up: a context's streams and events go with it, and only a fault
    /// makes one unhealthy. Worked out again after a frame in which a task failed, after a
    /// reset, and when an embedder's [`RuntimeGuard`] is dropped.
    pub maybe_faulted: bool,
    /// `FrameStats::tasks_failed` when `maybe_faulted` was last worked out.
    failures_seen: u64,
    /// The native kernels launches found registered (forgotten after every frame and when a
    /// guard is dropped, see `KnownNatives`).
    pub known_natives: crate::launch::KnownNatives,
}

/// `e`'s `T` through the cached query `q` of `world` (the world it was made for, see
/// [`Bound`]), else through `World::get` (a stale cache misses; it never answers wrongly).
#[inline(always)]
fn cached<'w, T: Component<Mutability = Mutable>>(
    q: &QueryState<&'static mut T>,
    world: &'w World,
    e: Entity,
) -> Option<&'w T> {
    q.get_manual(world, e).ok().or_else(|| world.get::<T>(e))
}

/// As [`cached`], mutably.
#[inline(always)]
fn cached_mut<'w, T: Component<Mutability = Mutable>>(
    q: &mut QueryState<&'static mut T>,
    world: &'w mut World,
    e: Entity,
) -> Option<Mut<'w, T>> {
    // SAFETY: `&mut World` is exclusive access to the world, the world the cached query was
    // made for (`Bound` is rebound whenever the world may have been swapped); its archetype
    // list is refreshed after every frame and spawn (a stale one misses, and the fallback
    // finds the component), so skipping the refresh is sound.
    let cell = world.as_unsafe_world_cell();
    unsafe {
        match q.query_unchecked_manual(cell).get_inner(e) {
            Ok(found) => Some(found),
            Err(_) => cell.world_mut().get_mut::<T>(e),
        }
    }
}

/// Resource `T`'s id in one world: fetched by it, a resource is found without hashing its type
/// (a frame fetches a few every time).
/// An id is only ever used with the world it was taken from: the runtime's ids live in
/// [`Bound`], taken again whenever its world may have been swapped.
pub(crate) struct ResId<T> {
    id: bevy_ecs::component::ComponentId,
    of: std::marker::PhantomData<fn() -> T>,
}

impl<T: Resource> ResId<T> {
    /// `T`'s id in `world`, registering the type if it is not yet.
    fn of(world: &mut World) -> Self {
        Self {
            id: world.register_component::<T>(),
            of: std::marker::PhantomData,
        }
    }

    /// `T` in `world` (the world the id was taken from), unless it was removed.
    #[inline]
    pub(crate) fn get<'w>(&self, world: &'w World) -> Option<&'w T> {
        // SAFETY: `id` is `T`'s resource id in this world (`of`; ids are taken again for a
        // swapped world, see `Bound`), so the pointer is to a `T`.
        world
            .get_resource_by_id(self.id)
            .map(|p| unsafe { p.deref::<T>() })
    }
}

impl<T: Resource + Component<Mutability = Mutable>> ResId<T> {
    /// `T` in `world`, mutably, unless it was removed.
    #[inline]
    pub(crate) fn get_mut<'w>(&self, world: &'w mut World) -> Option<Mut<'w, T>> {
        // SAFETY: as in `get`.
        world
            .get_resource_mut_by_id(self.id)
            .map(|p| unsafe { p.with_type::<T>() })
    }
}

/// The resources a frame reads outside the schedule.
pub(crate) struct FrameIds {
    /// The frame counters.
    pub(crate) stats: ResId<FrameStats>,
    /// Faults waiting for the exception callback.
    pub(crate) faults: ResId<npusim_components::resources::Faults>,
    /// Host callbacks the tick released.
    pub(crate) callbacks: ResId<PendingCallbacks>,
}

/// What the runtime keeps of one world to find things in it fast: cached queries for the
/// per-call handle checks (a plain `World::get` looks the component type up by `TypeId` on
/// every call) and resource ids. Valid for the world it was made of only: an embedder can swap
/// the runtime's world through a [`RuntimeGuard`] (and a user system could, in a frame), so it is
/// made again for the new world ([`Inner::rebind`]) when the guard drops, before and after a
/// frame, and when a frame ends in a panic (`run_systems`) — the only times the world can have
/// changed — and no lookup checks the world itself. Kept current with new archetypes after
/// every frame and spawn ([`Inner::refresh_queries`]); a miss falls back to `World::get`, so a
/// stale cache costs time, never correctness.
pub(crate) struct Bound {
    /// The world it was made of.
    world: bevy_ecs::world::WorldId,
    /// Streams.
    q_streams: QueryState<&'static mut StreamState>,
    /// Contexts.
    q_contexts: QueryState<&'static ContextState>,
    /// Events.
    q_events: QueryState<&'static mut EventState>,
    /// The kernel registry, so a launch finds it without a type lookup.
    registry: ResId<KernelRegistry>,
    /// The task pool (an op launch takes its box from the pool).
    task_pool: ResId<npusim_components::TaskPool>,
    /// The resources every frame reads outside the schedule.
    pub(crate) frame: FrameIds,
    /// The world's archetype generation when the queries were last refreshed.
    archetypes_seen: Option<bevy_ecs::archetype::ArchetypeGeneration>,
}

impl Bound {
    /// Made of `world`.
    fn new(world: &mut World) -> Self {
        Self {
            world: world.id(),
            q_streams: QueryState::new(world),
            q_contexts: QueryState::new(world),
            q_events: QueryState::new(world),
            registry: ResId::of(world),
            task_pool: ResId::of(world),
            frame: FrameIds {
                stats: ResId::of(world),
                faults: ResId::of(world),
                callbacks: ResId::of(world),
            },
            archetypes_seen: None,
        }
    }
}

impl Inner {
    /// The stream `e`, if it exists.
    #[inline(always)]
    pub fn stream(&self, e: Entity) -> Option<&StreamState> {
        cached(&self.bound.q_streams, &self.world, e)
    }

    /// The stream `e`, mutably, if it exists (the submission path's one mutable lookup).
    #[inline]
    pub fn stream_mut(&mut self, e: Entity) -> Option<Mut<'_, StreamState>> {
        cached_mut(&mut self.bound.q_streams, &mut self.world, e)
    }

    /// The event `e`, if it exists.
    #[inline]
    pub fn event(&self, e: Entity) -> Option<&EventState> {
        cached(&self.bound.q_events, &self.world, e)
    }

    /// The event `e`, mutably, if it exists.
    #[inline]
    pub fn event_mut(&mut self, e: Entity) -> Option<Mut<'_, EventState>> {
        cached_mut(&mut self.bound.q_events, &mut self.world, e)
    }

    /// The kernel registry, unless an embedder removed it.
    #[inline]
    pub fn registry(&self) -> NpuResult<&KernelRegistry> {
        match self.bound.registry.get(&self.world) {
            Some(r) => Ok(r),
            None => self.world.res::<KernelRegistry>(),
        }
    }

    /// The task pool, unless an embedder removed it.
    #[inline]
    pub fn task_pool_mut(&mut self) -> Option<Mut<'_, npusim_components::TaskPool>> {
        self.bound.task_pool.get_mut(&mut self.world)
    }

    /// The context `e`, if it exists.
    #[inline]
    pub fn context(&self, e: Entity) -> Option<&ContextState> {
        self.bound
            .q_contexts
            .get_manual(&self.world, e)
            .ok()
            .or_else(|| self.world.get::<ContextState>(e))
    }

    /// Brings the cached queries up to date with new archetypes (nothing to do, and nearly
    /// free, when no archetype was added since the last refresh).
    pub fn refresh_queries(&mut self) {
        let generation = self.world.archetypes().generation();
        let b = &mut self.bound;
        if b.archetypes_seen == Some(generation) {
            return;
        }
        b.q_streams.update_archetypes(&self.world);
        b.q_contexts.update_archetypes(&self.world);
        b.q_events.update_archetypes(&self.world);
        b.archetypes_seen = Some(generation);
    }

    /// Makes [`Bound`] again if the world is not the one it was made of (an embedder swapped
    /// it through a [`RuntimeGuard`]); nothing otherwise.
    #[inline]
    pub(crate) fn rebind(&mut self) {
        if self.world.id() != self.bound.world {
            self.bound = Bound::new(&mut self.world);
            self.refresh_queries();
        }
    }

    /// The host's simulated clock (only the runtime keeps it: no system reads host time). On
    /// a thread running a host callback, the callback's own clock.
    #[inline]
    pub fn host_now(&self) -> SimTime {
        crate::callback::clock_of(self.runtime_id).unwrap_or(self.host_now)
    }

    /// Sets the host's clock (a callback's own, on its thread).
    #[inline]
    pub fn set_host_now(&mut self, t: SimTime) {
        if !crate::callback::set_clock_of(self.runtime_id, t) {
            self.host_now = t;
        }
    }

    /// Moves the host's clock on by `d`.
    #[inline]
    pub fn advance_host(&mut self, d: SimTime) {
        if crate::callback::advance_clock_of(self.runtime_id, d).is_none() {
            self.host_now += d;
        }
    }

    /// Charges `ns` of host time for an API call; returns the new host time.
    #[inline]
    pub fn charge(&mut self, ns: u64) -> SimTime {
        crate::callback::advance_clock_of(self.runtime_id, SimTime(ns)).unwrap_or_else(|| {
            self.host_now += SimTime(ns);
            self.host_now
        })
    }

    /// Charges the host for the driver calls (kernel-mode crossings) device `device`'s memory
    /// made since the last charge.
    pub fn charge_driver(&mut self, device: Entity) {
        let ns = self
            .world
            .get::<DeviceState>(device)
            .map_or(0, |d| d.memory.take_driver_cost_ns());
        self.charge(ns);
    }

    /// Works out again whether some context is faulted (see `maybe_faulted`).
    pub fn recheck_faults(&mut self) {
        self.failures_seen = self
            .bound
            .frame
            .stats
            .get(&self.world)
            .map_or(0, |s| s.tasks_failed);
        self.maybe_faulted = self
            .world
            .query::<&ContextState>()
            .iter(&self.world)
            .any(|c| c.status == npusim_components::ContextStatus::Faulted);
    }

    /// Whether the timeline records (off without it: an embedder removed it).
    pub fn timeline_on(&self) -> bool {
        self.world
            .get_resource::<Timeline>()
            .is_some_and(|t| t.enabled)
    }

    /// Sets how far the hardware tick may advance the device clock (`None`: no limit); nothing
    /// without the clock (an embedder removed it; no tick runs then).
    pub fn set_horizon(&mut self, horizon: Option<SimTime>) {
        if let Some(mut clock) = self.world.get_resource_mut::<SimClock>() {
            clock.horizon = horizon;
        }
    }

    /// Whether some stream has submissions not yet ingested.
    pub fn doorbell_rung(&self) -> bool {
        self.bound
            .q_streams
            .iter_manual(&self.world)
            .any(|s| !s.doorbell.is_empty())
    }

    /// Whether device `index` has finished everything submitted to it: every stream on it has
    /// completed as many tasks as it was given (the streams count; nothing else does).
    #[inline]
    pub fn device_idle(&self, index: u32) -> bool {
        self.streams_idle(Some(index))
    }

    /// Whether every stream (of device `index`, or of every device) has completed as many
    /// tasks as it was given.
    #[inline]
    pub fn streams_idle(&self, device: Option<u32>) -> bool {
        self.bound
            .q_streams
            .iter_manual(&self.world)
            .filter(|s| device.is_none_or(|d| s.device_index == d))
            .all(StreamState::is_idle)
    }
}

pub(crate) struct Shared {
    id: u32,
    inner: Mutex<Inner>,
    /// Whether `releases` may hold something (one load a frame).
    pub(crate) releases_pending: std::sync::atomic::AtomicBool,
    /// Binaries to release that were let go while the lock was held (a module's last
    /// countdown dropped inside a frame, with its aborted callback): the frame releases them.
    pub(crate) releases: Mutex<Vec<Entity>>,
}

impl Shared {
    /// Releases binary `b` now if the lock is free, else at the end of the frame that holds it
    /// (the holder may be this very thread, inside a frame).
    pub(crate) fn release_binary_soon(&self, b: Entity) {
        match self.inner.try_lock() {
            Ok(mut g) => {
                crate::binary::release_binary(&mut g, b);
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                crate::binary::release_binary(&mut p.into_inner(), b);
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                self.releases
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(b);
                self.releases_pending
                    .store(true, std::sync::atomic::Ordering::Release);
            }
        }
    }
}

/// A simulated NPU runtime: its devices, and every context, stream, event and allocation made
/// on them. Cheap to clone (a shared handle); usable from several threads, each with its own
/// current context.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Runtime({})", self.shared.id)
    }
}

/// Exclusive access to the runtime's world and schedule, for embedding: add systems, read
/// components, run frames by hand. API calls from the same thread wait until it is dropped.
pub struct RuntimeGuard<'a> {
    inner: MutexGuard<'a, Inner>,
}

impl Drop for RuntimeGuard<'_> {
    fn drop(&mut self) {
        // The embedder may have swapped the world, changed a context's status by hand, or the
        // kernel registry.
        self.inner.rebind();
        self.inner.recheck_faults();
        self.inner.known_natives.forget();
    }
}

impl RuntimeGuard<'_> {
    /// The world.
    pub fn world(&self) -> &World {
        &self.inner.world
    }

    /// The world, mutably.
    pub fn world_mut(&mut self) -> &mut World {
        &mut self.inner.world
    }

    /// The host's simulated clock.
    pub fn host_now(&self) -> SimTime {
        self.inner.host_now()
    }

    /// The frame schedule (add systems with `.in_set(NpuSet::…)`). Until it is taken here, a
    /// frame runs npusim's systems itself, in the schedule's order but without its executor
    /// (cheaper); from now on every frame runs the schedule, with whatever was added to it.
    pub fn schedule_mut(&mut self) -> &mut Schedule {
        self.inner.frames = Frames::Schedule;
        &mut self.inner.schedule
    }

    /// Runs one frame.
    pub fn run_frame(&mut self) -> bool {
        let inner = &mut *self.inner;
        run_schedule(inner)
    }
}

/// Counters over the life of a runtime.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Frame and task counters.
    pub frames: FrameStats,
    /// Device clock.
    pub device_now: SimTime,
    /// Host clock.
    pub host_now: SimTime,
    /// Task entities alive (queued, running or finished but not yet retired).
    pub live_tasks: u64,
    /// Contexts alive (including each device's primary context).
    pub contexts: u64,
    /// Streams alive.
    pub streams: u64,
    /// Events alive.
    pub events: u64,
    /// Per device: bytes of host memory backing its simulated memory.
    pub backed_bytes: Vec<u64>,
    /// Per device: units' busy time.
    pub units: Vec<Units>,
    /// Per device: bytes in live allocations.
    pub live_bytes: Vec<u64>,
    /// Per device: live allocations.
    pub live_blocks: Vec<usize>,
}

/// How a frame runs the systems. While the runtime's schedule holds only npusim's systems —
/// nobody took it through [`RuntimeGuard::schedule_mut`] — a frame runs them itself, in their
/// order ([`npusim_systems::stages`]: the sets' order, each system after its run condition),
/// without the schedule's executor (its bookkeeping is about a quarter of an idle frame and
/// some 85 instructions of every pipeline kernel; BENCHMARKS.md, thirteenth round). Once an
/// embedder takes the schedule, every later frame runs it, with whatever was added. Both run
/// the same systems in the same order, so a program's results and timeline are the same either
/// way.
pub(crate) enum Frames {
    /// npusim's systems, run in their order (made at the first frame, for the world it runs on).
    Direct(Option<DirectStages>),
    /// The schedule.
    Schedule,
}

/// npusim's systems as a frame runs them itself, made for one world.
pub(crate) struct DirectStages {
    world: bevy_ecs::world::WorldId,
    stages: Vec<npusim_systems::Stage>,
}

impl DirectStages {
    fn new(world: &mut World) -> Self {
        let mut stages = npusim_systems::stages();
        for stage in &mut stages {
            stage.system.initialize(world);
            if let Some(condition) = &mut stage.condition {
                condition.initialize(world);
            }
        }
        Self {
            world: world.id(),
            stages,
        }
    }

    /// One frame: each system whose condition (if any) holds, in order. A system that fails
    /// goes to the world's error handler, as the schedule's executor sends it; one that skips
    /// its run (a resource missing) just skips it.
    fn run(&mut self, world: &mut World) {
        use bevy_ecs::error::ErrorContext;
        use bevy_ecs::system::RunSystemError;
        if let Some(check) = world.check_change_ticks() {
            for stage in &mut self.stages {
                stage.system.check_change_tick(check);
                if let Some(condition) = &mut stage.condition {
                    condition.check_change_tick(check);
                }
            }
        }
        for stage in &mut self.stages {
            if let Some(condition) = &mut stage.condition {
                match condition.run((), world) {
                    Ok(true) => {}
                    Ok(false) | Err(RunSystemError::Skipped(_)) => continue,
                    Err(RunSystemError::Failed(err)) => {
                        (world.fallback_error_handler())(
                            err,
                            ErrorContext::RunCondition {
                                name: condition.name(),
                                last_run: condition.get_last_run(),
                                system: stage.system.name(),
                                on_set: false,
                            },
                        );
                        continue;
                    }
                }
            }
            if let Err(RunSystemError::Failed(err)) = stage.system.run((), world) {
                (world.fallback_error_handler())(
                    err,
                    ErrorContext::System {
                        name: stage.system.name(),
                        last_run: stage.system.get_last_run(),
                    },
                );
            }
        }
    }
}

/// Runs the systems once ([`Frames`]). Should it not return — a user system panicked (bevy
/// hands the panic on) — the runtime is made whole on the way out: the interrupted executor
/// would skip the systems it had run before the panic in every later frame, so the schedule
/// gets a fresh one (an embedder's own executor is replaced by the runtime's), and the system
/// may have swapped the world, so [`Bound`] is made again. The lock the caller held is poisoned by the panic;
/// later calls take it all the same (`Runtime::lock_quiet`).
fn run_systems(inner: &mut Inner) {
    struct Recover<'a> {
        inner: &'a mut Inner,
        returned: bool,
    }
    impl Drop for Recover<'_> {
        fn drop(&mut self) {
            if !self.returned {
                self.inner
                    .schedule
                    .set_executor(SingleThreadedExecutor::new());
                self.inner.rebind();
            }
        }
    }
    let mut run = Recover {
        inner,
        returned: false,
    };
    let i = &mut *run.inner;
    match &mut i.frames {
        Frames::Schedule => {
            // `Schedule::run` checks the world's change ticks but not its own systems' (it is
            // not in the world's `Schedules`): both, here, before they can wrap.
            if let Some(check) = i.world.check_change_ticks() {
                i.schedule.check_change_ticks(check);
            }
            i.schedule.run(&mut i.world);
        }
        Frames::Direct(stages) => {
            let stages = match stages {
                Some(s) if s.world == i.world.id() => s,
                // The first frame, or an embedder swapped the world: made for this one.
                _ => stages.insert(DirectStages::new(&mut i.world)),
            };
            stages.run(&mut i.world);
        }
    }
    run.returned = true;
}

fn run_schedule(inner: &mut Inner) -> bool {
    // Run by an embedder's guard, the world may have been swapped.
    inner.rebind();
    if let Some(mut stats) = inner.bound.frame.stats.get_mut(&mut inner.world) {
        stats.last_frame_progressed = false;
    }
    run_systems(inner);
    // A user system may have replaced the kernel registry, or even the world.
    inner.rebind();
    inner.known_natives.forget();
    inner.refresh_queries();
    if inner.sanitize {
        crate::sanitizer::flush(inner);
    }
    let Some(mut stats) = inner.bound.frame.stats.get_mut(&mut inner.world) else {
        // An embedder removed the counters: no progress is reported, so a wait that nothing
        // else moves ends in an error rather than looping.
        return false;
    };
    stats.frames += 1;
    let failed = stats.tasks_failed != inner.failures_seen;
    #[cfg(feature = "tracy")]
    if let Some(client) = tracy_client::Client::running() {
        client.frame_mark();
    }
    let (frames, progressed) = (stats.frames, stats.last_frame_progressed);
    if failed {
        inner.recheck_faults();
    }
    // The world's removed-component trackers grow with every despawn (streams, events,
    // binaries, contexts) until they are cleared, as bevy's App does each update; nothing here
    // reads them, so every 64 frames is enough to keep them small.
    if frames.is_multiple_of(64) {
        inner.world.clear_trackers();
    }
    progressed
}

impl Runtime {
    /// Builds a runtime with `config.devices` devices, each with a primary context.
    pub fn new(config: RuntimeConfig) -> NpuResult<Self> {
        if config.devices == 0 || config.devices > 1024 {
            return Err(NpuError::InvalidParam(format!(
                "device count must be 1..=1024, got {}",
                config.devices
            )));
        }
        let c = &config.device;
        if c.ai_cores == 0 || c.dma_engines == 0 || c.core_clock_hz == 0 {
            return Err(NpuError::InvalidParam(
                "a device needs cores, DMA engines and a clock".into(),
            ));
        }
        if !(c.hbm_bandwidth > 0.0 && c.host_link_bandwidth > 0.0) {
            return Err(NpuError::InvalidParam("bandwidths must be positive".into()));
        }
        #[cfg(feature = "tracy")]
        tracy_client::Client::start();

        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let mut world = World::new();
        npusim_systems::init_resources(&mut world);
        world.resource_mut::<KernelRegistry>().set_runtime(id);
        world.resource_mut::<Timeline>().enabled = config.timeline;
        world
            .resource_mut::<npusim_components::ExecutionMode>()
            .timing_only = config.timing_only;
        crate::kernels::register_builtins(&mut world.resource_mut::<KernelRegistry>());
        crate::ops::register_builtin_ops(&mut world)?;
        let mut schedule = Schedule::default();
        schedule.set_executor(SingleThreadedExecutor::new());
        npusim_systems::install(&mut schedule);
        let bound = Bound::new(&mut world);

        let mut inner = Inner {
            runtime_id: id,
            callbacks: crate::callback::Callbacks::new(id, config.callback_timeout),
            world,
            schedule,
            frames: Frames::Direct(None),
            costs: config.host.clone(),
            next_stream_order: 0,
            host_now: SimTime::ZERO,
            devices: Vec::new(),
            default_contexts: Vec::new(),
            ctx_users: Default::default(),
            exception_callback: None,
            host_spans: Vec::new(),
            open_wait: None,
            next_comm_id: 0,
            closing_comms: Vec::new(),
            bound,
            sanitize: false,
            recorder: None,
            maybe_faulted: false,
            failures_seen: 0,
            known_natives: Default::default(),
        };
        crate::sanitizer::install(&mut inner, config.sanitizer);
        let topology = Topology::new(config.topology.clone(), config.devices)
            .map_err(|e| NpuError::InvalidParam(format!("topology: {e}")))?;
        inner
            .world
            .insert_resource(npusim_components::Interconnect::new(topology));
        let threads = match config.threads {
            0 => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(config.devices as usize),
            n => n,
        };
        let workers = npusim_systems::tick::Workers::new(threads)
            .map_err(|e| NpuError::Internal(format!("worker threads: {e}")))?;
        inner.world.insert_resource(workers);
        // Tracy's systems go into the schedule: frames run it.
        #[cfg(feature = "tracy")]
        {
            crate::timeline::install_tracy(&mut inner.schedule);
            inner.frames = Frames::Schedule;
        }
        let mut devices = Vec::new();
        for index in 0..config.devices {
            let device = inner
                .world
                .spawn(DeviceState {
                    index,
                    config: config.device.clone(),
                    units: Units {
                        free_cores: config.device.ai_cores,
                        free_dma: config.device.dma_engines,
                        ..Units::default()
                    },
                    memory: DeviceMemory::new(config.device.hbm_bytes)?,
                    default_context: Entity::PLACEHOLDER,
                    limits: Default::default(),
                })
                .id();
            let ctx = spawn_context(&mut inner, device, index, true);
            inner
                .world
                .get_mut::<DeviceState>(device)
                .expect("just spawned")
                .default_context = ctx;
            devices.push(device);
            inner.default_contexts.push(ctx);
        }
        inner.devices = devices.clone();
        inner.world.resource_mut::<Devices>().entities = devices;
        if let Some(target) = config
            .recording
            .clone()
            .or_else(crate::record::Recording::from_env)
        {
            let header = crate::record::TraceHeader {
                devices: config.devices,
                device: config.device.clone(),
                topology: config.topology.clone(),
                host: (&config.host).into(),
                with_data: target.data,
            };
            let recorder = crate::record::Recorder::new(target, header);
            let mut mode = inner
                .world
                .resource_mut::<npusim_components::ExecutionMode>();
            mode.binary_log = Some(recorder.binary_log.clone());
            mode.shape_log = Some(recorder.shape_log.clone());
            inner.recorder = Some(Box::new(recorder));
        }
        let sanitize = inner.sanitize;
        let rt = Self {
            shared: Arc::new(Shared {
                id,
                inner: Mutex::new(inner),
                releases_pending: Default::default(),
                releases: Default::default(),
            }),
        };
        if sanitize {
            crate::sanitizer::watch(&rt);
        }
        Ok(rt)
    }

    pub(crate) fn weak(&self) -> std::sync::Weak<Shared> {
        Arc::downgrade(&self.shared)
    }

    pub(crate) fn from_shared(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// This runtime's id (handles carry it, so handles of another runtime are refused).
    pub fn id(&self) -> u32 {
        self.shared.id
    }

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // The world is only mutated by code that does not panic on user input; if a user system
        // panicked mid-frame, going on with the world as it is beats poisoning every later call.
        let mut g = self.lock_quiet();
        // Most calls find no wait open.
        if g.open_wait.is_some() {
            self.close_open_wait(&mut g);
        }
        g
    }

    /// Closes the program's open wait as a host span, unless the caller is a callback: a
    /// callback's calls run on its own clock; the program's wait is closed by the program.
    #[cold]
    #[inline(never)]
    fn close_open_wait(&self, g: &mut Inner) {
        if crate::callback::context_of(self.id()).is_some() {
            return;
        }
        if let Some((what, start)) = g.open_wait.take() {
            let end = g.host_now();
            g.host_spans.push(crate::timeline::HostSpan {
                name: what,
                start,
                end,
            });
        }
    }

    /// Locks without closing an open wait (the waiting call itself re-locking).
    #[inline]
    pub(crate) fn lock_quiet(&self) -> MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a wait gives a host callback that has not returned (wall time).
    pub fn callback_timeout(&self) -> std::time::Duration {
        self.lock().callbacks.timeout
    }

    /// Sets how long a wait gives a host callback that has not returned (wall time); see
    /// [`RuntimeConfig::callback_timeout`].
    pub fn set_callback_timeout(&self, limit: std::time::Duration) {
        let mut g = self.lock();
        g.callbacks.timeout = limit;
        g.record(|_, _| crate::record::Call::SetCallbackTimeout {
            ns: limit.as_nanos().min(u64::MAX as u128) as u64,
        });
    }

    /// Exclusive access to the world and schedule, for embedding.
    pub fn lock_world(&self) -> RuntimeGuard<'_> {
        RuntimeGuard { inner: self.lock() }
    }

    /// Number of devices.
    pub fn device_count(&self) -> u32 {
        // Without the device list (an embedder removed it), none.
        self.lock()
            .world
            .get_resource::<Devices>()
            .map_or(0, |d| d.entities.len() as u32)
    }

    /// The datasheet of device `index`.
    pub fn device_config(&self, index: u32) -> NpuResult<DeviceConfig> {
        let g = self.lock();
        let device = device_entity(&g.world, index)?;
        Ok(g.world
            .get::<DeviceState>(device)
            .expect("device entity")
            .config
            .clone())
    }

    /// Runs one frame; returns whether anything changed.
    /// When nothing changes but host callbacks are still out on other threads, waits briefly
    /// (at most [`STEP_CALLBACK_WAIT`] of wall time) for one to return and runs the frame that
    /// takes it in; a callback that takes longer leaves this `false` (polling queries stay
    /// quick). [`Runtime::run_until_idle`] and the synchronizes wait for callbacks in full.
    pub fn step(&self) -> bool {
        let g = self.lock();
        let (g, progressed) = self.held_frame(g);
        if progressed || !g.callbacks.any_out() {
            return progressed;
        }
        let wait = g.callbacks.timeout.min(STEP_CALLBACK_WAIT);
        let (g, returned) = self.await_return(g, Some(wait));
        if !returned {
            return false;
        }
        let (_g, progressed) = self.held_frame(g);
        progressed
    }

    /// One frame whose clock does not pass a host callback out on the host that a wait of the
    /// calling thread would hold for (see [`crate::callback`]).
    fn held_frame<'a>(&'a self, mut g: MutexGuard<'a, Inner>) -> (MutexGuard<'a, Inner>, bool) {
        if !g.callbacks.any_out() {
            return self.frame(g);
        }
        let me = crate::callback::context_of(self.id());
        let scope = self.current_ctx_entity(&g).ok();
        let hold = g.callbacks.hold(scope, me);
        g.set_horizon(hold);
        let (mut g, progressed) = self.frame(g);
        g.set_horizon(None);
        (g, progressed)
    }

    /// Runs frames until nothing is left to do (host callbacks out on other threads included);
    /// the host clock moves to the device's time. A callback that does not return within the
    /// callback timeout makes it fail with `ACL_ERROR_RT_REPORT_TIMEOUT`.
    pub fn run_until_idle(&self) -> NpuResult<()> {
        let mut g = self.lock();
        let me = crate::callback::context_of(self.id());
        loop {
            let (g2, progressed) = self.held_frame(g);
            g = g2;
            if progressed {
                continue;
            }
            if !g.callbacks.others_out(me) {
                break;
            }
            let (g2, returned) = self.await_return(g, None);
            g = g2;
            // A callback can go without a return to wait for (it destroyed its own context):
            // then there is nothing left to time out on.
            if !returned && g.callbacks.others_out(me) {
                let limit = g.callbacks.timeout;
                return Err(NpuError::CallbackTimeout {
                    what: "run_until_idle".into(),
                    limit,
                });
            }
        }
        // Work left that nothing moves: without one of npusim's resources (an embedder removed
        // it) the stages that need it do nothing, and the error says so.
        if !g.streams_idle(None)
            && let Some(missing) = npusim_systems::missing_resource(&g.world)
        {
            return Err(missing);
        }
        let now = g.world.res::<SimClock>()?.now;
        let t = g.host_now().max(now);
        g.set_host_now(t);
        crate::sanitizer::synchronized_device(&mut g, None);
        Ok(())
    }

    /// With host callbacks out on other threads, sleeps (lock released) until one returns or
    /// something is submitted, at most `limit` (default: the callback timeout). Returns
    /// whether there is something for a frame to do.
    fn await_return<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        limit: Option<std::time::Duration>,
    ) -> (MutexGuard<'a, Inner>, bool) {
        let me = crate::callback::context_of(self.id());
        let limit = limit.unwrap_or(g.callbacks.timeout);
        let start = std::time::Instant::now();
        let hub = g.callbacks.hub();
        loop {
            if hub.has_returns() || g.doorbell_rung() {
                return (g, true);
            }
            if !g.callbacks.others_out(me) {
                return (g, false);
            }
            let elapsed = start.elapsed();
            if elapsed >= limit {
                return (g, false);
            }
            drop(g);
            // Woken by a return; a callback may also submit work without returning yet.
            hub.wait((limit - elapsed).min(CALLBACK_POLL));
            g = self.lock_quiet();
        }
    }

    /// Runs a frame, then the host callbacks it released (outside the lock, so they may call
    /// the runtime).
    pub(crate) fn frame<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
    ) -> (MutexGuard<'a, Inner>, bool) {
        let returned = take_callback_returns(&mut g);
        let progressed = run_schedule(&mut g) || returned;
        if !g.closing_comms.is_empty() {
            crate::collective::close_drained_comms(&mut g);
        }
        if self
            .shared
            .releases_pending
            .swap(false, std::sync::atomic::Ordering::Acquire)
        {
            let releases = std::mem::take(
                &mut *self
                    .shared
                    .releases
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            for b in releases {
                crate::binary::release_binary(&mut g, b);
            }
        }
        let faults = self.take_faults(&mut g);
        let inner = &mut *g;
        // Exclusive access to the world: the list's mutex is not locked (no atomic a frame).
        let released = inner
            .bound
            .frame
            .callbacks
            .get_mut(&mut inner.world)
            .map(|mut c| {
                let calls = c.bypass_change_detection().calls.get_mut();
                std::mem::take(calls.unwrap_or_else(|p| p.into_inner()))
            })
            .unwrap_or_default();
        let released_any = !released.is_empty();
        // Each callback goes to its context's thread; none runs on this one.
        for r in released {
            g.callbacks.dispatch(r);
        }
        if faults.is_empty() {
            return (g, progressed || released_any);
        }
        drop(g);
        // The exception callback runs on this thread; a panic in it stays there (the fault is
        // reported by the failed task's synchronize all the same).
        for (callback, info) in faults {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(&info)));
        }
        (self.lock_quiet(), true)
    }

    /// Drives frames until `done` holds. With a `timeout` (simulated), the device clock is not
    /// advanced past the deadline and the wait fails with a timeout; without one, a wait that
    /// nothing can finish fails instead of hanging. Host callbacks out on their threads are
    /// waited for (lock released), at most the callback timeout of wall time without progress
    /// (a timed wait: at most its timeout); see [`crate::callback`].
    pub(crate) fn drive<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        what: &dyn Fn() -> String,
        done: &dyn Fn(&Inner) -> bool,
        timeout: Option<SimTime>,
    ) -> (MutexGuard<'a, Inner>, NpuResult<()>) {
        let deadline = timeout.map(|t| g.host_now() + t);
        // The callback this thread runs, if any (its context's callbacks cannot return while
        // it waits), and the context the wait is for.
        let me = crate::callback::context_of(self.id());
        let scope = self.current_ctx_entity(&g).ok();
        if g.timeline_on() && me.is_none() {
            let start = g.host_now();
            g.open_wait = Some((format!("wait: {}", what()), start));
        }
        let mut stuck_since: Option<std::time::Instant> = None;
        // When the rendezvous grace (below) began, if it runs.
        let mut grace_since: Option<std::time::Instant> = None;
        loop {
            if done(&g) {
                g.set_horizon(None);
                return (g, Ok(()));
            }
            // Only ranks waiting at a rendezvous are left, so the next frame would jump to their
            // timeout. If another handle of this runtime exists (a thread per rank), give the
            // other threads up to RENDEZVOUS_GRACE of wall time to enqueue the missing ranks:
            // the wait sleeps until one enqueues a collective's part (it pokes the hub), not
            // by the millisecond.
            if !only_rendezvous_left(&g) {
                grace_since = None;
            } else if Arc::strong_count(&self.shared) > 1 {
                let since = *grace_since.get_or_insert_with(std::time::Instant::now);
                let left = RENDEZVOUS_GRACE.saturating_sub(since.elapsed());
                if !left.is_zero() {
                    let hub = g.callbacks.hub();
                    let seen = hub.pokes();
                    drop(g);
                    hub.wait_poke(seen, left);
                    g = self.lock_quiet();
                    continue;
                }
            }
            // The device clock does not pass a callback out on the host that this wait holds
            // for: it may still enqueue work, and it ends when it returns.
            let hold = g.callbacks.hold(scope, me);
            let horizon = match (deadline, hold) {
                (Some(d), Some(h)) => Some(d.min(h)),
                (d, h) => d.or(h),
            };
            g.set_horizon(horizon);
            let (g2, progressed) = self.frame(g);
            g = g2;
            if progressed {
                stuck_since = None;
                continue;
            }
            if done(&g) {
                continue;
            }
            // Nothing more happens until a callback out on another thread returns.
            let held_before_deadline = hold.is_some_and(|h| deadline.is_none_or(|d| h <= d));
            // A callback's own wait waits only while the clock is held for another callback
            // (the rest of its context's callbacks are queued behind it; another context's
            // cannot finish its wait, and two callbacks waiting for each other would hang).
            let wait_for_callbacks = match (deadline, me) {
                (Some(_), _) => held_before_deadline,
                (None, Some(_)) => hold.is_some(),
                (None, None) => g.callbacks.others_out(me),
            };
            if wait_for_callbacks {
                let limit =
                    g.callbacks
                        .timeout
                        .min(timeout.map_or(std::time::Duration::MAX, |t| {
                            std::time::Duration::from_nanos(t.as_ns())
                        }));
                let since = *stuck_since.get_or_insert_with(std::time::Instant::now);
                let left = limit.saturating_sub(since.elapsed());
                if !left.is_zero() {
                    // Until a callback returns, or another context's callback leaves its grace.
                    let wake = g
                        .callbacks
                        .next_grace_end(scope, me)
                        .map_or(left, |d| d.max(CALLBACK_POLL).min(left));
                    let (g2, _) = self.await_return(g, Some(wake));
                    g = g2;
                    continue;
                }
                g.set_horizon(None);
                if let (Some(deadline), Some(timeout)) = (deadline, timeout) {
                    let t = g.host_now().max(deadline);
                    g.set_host_now(t);
                    return (
                        g,
                        Err(NpuError::WaitTimeout {
                            what: what(),
                            timeout,
                        }),
                    );
                }
                return (
                    g,
                    Err(NpuError::CallbackTimeout {
                        what: what(),
                        limit,
                    }),
                );
            }
            g.set_horizon(None);
            // Nothing more can happen. Without one of npusim's resources (an embedder removed
            // it) the stages that need it do nothing: that is why, and the error says so.
            if let Some(missing) = npusim_systems::missing_resource(&g.world) {
                return (g, Err(missing));
            }
            let pending = g
                .world
                .get_resource::<Running>()
                .is_some_and(|r| r.next_event().is_some());
            if let (Some(deadline), Some(timeout), true) = (deadline, timeout, pending) {
                let t = g.host_now().max(deadline);
                g.set_host_now(t);
                return (
                    g,
                    Err(NpuError::WaitTimeout {
                        what: what(),
                        timeout,
                    }),
                );
            }
            if g.callbacks.mine_out(me) {
                return (
                    g,
                    Err(NpuError::NeverCompletes(format!(
                        "{} (from a host callback: it waits for itself, or for a callback \
                         queued behind it on its context's callback thread)",
                        what()
                    ))),
                );
            }
            return (g, Err(NpuError::NeverCompletes(what())));
        }
    }

    /// The host's simulated clock.
    pub fn host_now(&self) -> SimTime {
        self.lock().host_now()
    }

    /// The device's simulated clock (zero if an embedder removed it).
    pub fn device_now(&self) -> SimTime {
        self.lock()
            .world
            .get_resource::<SimClock>()
            .map_or(SimTime::ZERO, |c| c.now)
    }

    /// Models `duration` of CPU work on the host (preprocessing the next batch, say): the host
    /// clock moves on while queued device work keeps its own times.
    pub fn host_work(&self, duration: SimTime) {
        let mut g = self.lock();
        let start = g.host_now();
        g.advance_host(duration);
        g.record(|_, _| crate::record::Call::HostWork {
            ns: duration.as_ns(),
        });
        if g.timeline_on() {
            let end = g.host_now();
            g.host_spans.push(crate::timeline::HostSpan {
                name: "host_work".into(),
                start,
                end,
            });
        }
    }

    /// Finished tasks so far, in the order they finished (empty when the timeline is off, or
    /// an embedder removed it).
    pub fn timeline(&self) -> Vec<TaskRecord> {
        self.lock()
            .world
            .get_resource::<Timeline>()
            .map_or_else(Vec::new, |t| t.records.clone())
    }

    /// Takes the recorded timeline, leaving it empty.
    pub fn take_timeline(&self) -> Vec<TaskRecord> {
        self.lock()
            .world
            .get_resource_mut::<Timeline>()
            .map_or_else(Vec::new, |mut t| std::mem::take(&mut t.records))
    }

    /// Turns timeline recording on or off (nothing, if an embedder removed the timeline).
    pub fn set_timeline_enabled(&self, on: bool) {
        if let Some(mut t) = self.lock().world.get_resource_mut::<Timeline>() {
            t.enabled = on;
        }
    }

    /// Counters: frames, tasks, units' busy time, memory (what an embedder removed from the
    /// world counts as its default).
    pub fn stats(&self) -> Stats {
        let mut g = self.lock();
        let host_now = g.host_now();
        let world = &mut g.world;
        let live_tasks = world
            .query::<&npusim_components::Task>()
            .iter(world)
            .filter(|t| t.status != npusim_components::TaskStatus::Retired)
            .count() as u64;
        let contexts = world.query::<&ContextState>().iter(world).count() as u64;
        let streams = world.query::<&StreamState>().iter(world).count() as u64;
        let events = world
            .query::<&npusim_components::EventState>()
            .iter(world)
            .count() as u64;
        let devices = world
            .get_resource::<Devices>()
            .map_or_else(Vec::new, |d| d.entities.clone());
        let mut stats = Stats {
            contexts,
            streams,
            events,
            frames: world
                .get_resource::<FrameStats>()
                .cloned()
                .unwrap_or_default(),
            device_now: world
                .get_resource::<SimClock>()
                .map_or(SimTime::ZERO, |c| c.now),
            host_now,
            live_tasks,
            ..Stats::default()
        };
        for d in devices {
            let Some(dev) = world.get::<DeviceState>(d) else {
                continue;
            };
            stats.units.push(dev.units.clone());
            stats.live_bytes.push(dev.memory.live_bytes());
            stats.live_blocks.push(dev.memory.live_blocks());
            stats.backed_bytes.push(dev.memory.backed_bytes());
        }
        stats
    }

    /// Whether the doorbell, ready queue and running set are all empty (one an embedder
    /// removed holds nothing).
    pub fn is_idle(&self) -> bool {
        let g = self.lock();
        let w = &g.world;
        !g.doorbell_rung()
            && g.callbacks.in_flight.is_empty()
            && w.get_resource::<ReadyQueue>()
                .is_none_or(|r| r.tasks.is_empty())
            && w.get_resource::<Running>()
                .is_none_or(|r| r.heap.is_empty())
            && w.get_resource::<npusim_components::Rendezvous>()
                .is_none_or(|r| r.ops.is_empty())
    }
}

/// The longest [`Runtime::step`] waits for a host callback to return when nothing else changes.
pub const STEP_CALLBACK_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// How often a wait for a host callback looks for work submitted meanwhile.
const CALLBACK_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// Puts the host callbacks that returned back on the device: each task ends at its callback's
/// clock (never before the device's now), with its outcome, and the hardware tick completes
/// it in order. Returns whether any came back. A return for a task that is gone (its stream
/// or context was destroyed meanwhile) is dropped.
fn take_callback_returns(g: &mut Inner) -> bool {
    let returns = g.callbacks.take_returns();
    if returns.is_empty() {
        return false;
    }
    let now = g
        .world
        .get_resource::<SimClock>()
        .map_or(SimTime::ZERO, |c| c.now);
    let mut any = false;
    for (entity, stream, seq, end, panic) in returns {
        let Some(mut task) = g.world.get_mut::<npusim_components::Task>(entity) else {
            continue;
        };
        if task.stream != stream
            || task.seq != seq
            || task.applied
            || task.status != npusim_components::TaskStatus::Running
        {
            continue;
        }
        let end = end.max(now).max(task.start);
        task.applied = true;
        task.end = end;
        task.error = panic.map(|m| Box::new(crate::callback::panicked(stream, m)));
        // Without the running set (an embedder removed it, and with it the end of every task
        // that was running) the task cannot end either.
        let Some(mut running) = g.world.get_resource_mut::<Running>() else {
            break;
        };
        let order = running.next_order;
        running.next_order += 1;
        running.heap.push(std::cmp::Reverse((end, order, entity)));
        any = true;
    }
    any
}

/// How long (wall time) a wait gives other host threads to join a rendezvous before letting
/// the ranks already there time out; it ends as soon as one enqueues a collective's part.
pub(crate) const RENDEZVOUS_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether the next thing to happen is ranks at a rendezvous timing out: nothing is queued,
/// ready or running, and no stream head waits for a submit time before the deadline.
fn only_rendezvous_left(inner: &Inner) -> bool {
    let w = &inner.world;
    // Without these (an embedder removed one), no rendezvous to give a moment to.
    let Some(rendezvous) = w.get_resource::<npusim_components::Rendezvous>() else {
        return false;
    };
    let waiting = rendezvous
        .ops
        .iter()
        .any(|op| op.phase == npusim_components::collective::OpPhase::Waiting);
    let Some(running) = w.get_resource::<Running>() else {
        return false;
    };
    waiting
        && !inner.doorbell_rung()
        && w.get_resource::<ReadyQueue>()
            .is_none_or(|r| r.tasks.is_empty())
        && running.heap.is_empty()
        && running
            .next_wake
            .is_none_or(|t| rendezvous.next_deadline.is_none_or(|d| t >= d))
}

pub(crate) fn device_entity(world: &World, index: u32) -> NpuResult<Entity> {
    let devices = &world.res::<Devices>()?.entities;
    devices
        .get(index as usize)
        .copied()
        .ok_or(NpuError::InvalidDevice {
            index,
            count: devices.len() as u32,
        })
}

/// Spawns a context with its default stream.
pub(crate) fn spawn_context(
    inner: &mut Inner,
    device: Entity,
    device_index: u32,
    is_default: bool,
) -> Entity {
    let ctx = inner
        .world
        .spawn(ContextState::new(device, device_index, is_default))
        .id();
    if let Some(mut d) = inner.world.get_mut::<DeviceState>(device) {
        // Fails only past MAX_CONTEXTS; the context then faults on its first allocation.
        let _ = d.memory.create_space(ctx);
    }
    let stream = spawn_stream(inner, ctx, device, 0, StreamKind::Compute);
    let mut c = inner
        .world
        .get_mut::<ContextState>(ctx)
        .expect("just spawned");
    c.default_stream = stream;
    ctx
}

/// Spawns a stream in `ctx`.
pub(crate) fn spawn_stream(
    inner: &mut Inner,
    ctx: Entity,
    device: Entity,
    priority: i32,
    kind: StreamKind,
) -> Entity {
    let order = inner.next_stream_order;
    inner.next_stream_order += 1;
    let stream = inner
        .world
        .spawn(StreamState::new(
            ctx,
            device,
            inner
                .world
                .get::<DeviceState>(device)
                .map_or(0, |d| d.index),
            priority,
            kind,
            order,
        ))
        .id();
    if let Some(mut c) = inner.world.get_mut::<ContextState>(ctx) {
        c.streams.push(stream);
    }
    inner.refresh_queries();
    stream
}
