//! The runtime: a `bevy_ecs` world holding the simulated devices and everything users create,
//! the schedule that advances it one frame per run, and the host's simulated clock. API calls
//! lock it briefly, push work and return; waits drive frames until what they wait for is done.
//!
//! Where each part lives:
//!
//! - `config`: what a runtime is built from ([`RuntimeConfig`], [`HostCosts`]).
//! - `inner`: the state behind the lock (`Inner`): the world and schedule, the host's clock,
//!   and spawning contexts and streams.
//! - `cache`: what `Inner` keeps to find things in its world fast (`Bound`, `ResId`), and the
//!   lookups that use it.
//! - `frame`: one frame (npusim's systems run straight, or the embedder's schedule) and what
//!   the runtime does around it: host callbacks, binaries to release, faults to report.
//! - `drive`: the waits that run frames until what they wait for is done ([`Runtime::step`],
//!   [`Runtime::run_until_idle`], and `drive` under every synchronize).
//!
//! This file holds the handle ([`Runtime`], [`RuntimeGuard`]), building a runtime, and its
//! clock, timeline and counter queries.

mod cache;
mod config;
mod drive;
mod frame;
mod inner;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::{Schedule, SingleThreadedExecutor};
use npusim_components::resources::{Devices, FrameStats, ReadyQueue, Running, SimClock, Timeline};
use npusim_components::{
    ContextState, DeviceMemory, DeviceState, KernelRegistry, NpuError, NpuResult, SimTime,
    StreamState, TaskRecord, Units,
};
use npusim_device::config::DeviceConfig;
use npusim_device::link::Topology;

use cache::Bound;
pub use config::{HostCosts, RuntimeConfig};
pub use drive::STEP_CALLBACK_WAIT;
use frame::run_schedule;
pub(crate) use inner::{Inner, device_entity, spawn_context, spawn_stream};

static NEXT_RUNTIME_ID: AtomicU32 = AtomicU32::new(1);

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

    /// The frame schedule every frame runs (add systems with `.in_set(NpuSet::…)`).
    pub fn schedule_mut(&mut self) -> &mut Schedule {
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
        let workers = npusim_systems::workers::Workers::new(threads)
            .map_err(|e| NpuError::Internal(format!("worker threads: {e}")))?;
        inner.world.insert_resource(workers);
        // Tracy's systems go into the schedule beside npusim's.
        #[cfg(feature = "tracy")]
        crate::timeline::install_tracy(&mut inner.schedule);
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
