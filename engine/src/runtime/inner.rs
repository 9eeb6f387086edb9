//! The state behind the runtime's lock: the world and its schedule, the host's simulated
//! clock, the runtime's own bookkeeping (devices, context users, communicators, recorder), and
//! spawning the contexts and streams every device and API call needs.

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::Schedule;
use npusim_components::resources::{Devices, SimClock, Timeline};
use npusim_components::{
    ContextState, DeviceState, NpuError, NpuResult, SimTime, StreamKind, StreamState,
    WorldResources,
};

use super::{Bound, HostCosts};

pub(crate) struct Inner {
    /// The runtime's id (a callback thread's host clock is looked up by it).
    pub runtime_id: u32,
    /// Callback threads and the callbacks out on them.
    pub callbacks: crate::callback::Callbacks,
    pub world: World,
    pub schedule: Schedule,
    pub costs: HostCosts,
    pub next_stream_order: u64,
    /// The host's simulated clock.
    pub(super) host_now: SimTime,
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
    ///
    /// [`RuntimeGuard`]: super::RuntimeGuard
    pub maybe_faulted: bool,
    /// `FrameStats::tasks_failed` when `maybe_faulted` was last worked out.
    pub(super) failures_seen: u64,
    /// The native kernels launches found registered (forgotten after every frame and when a
    /// guard is dropped, see `KnownNatives`).
    pub known_natives: crate::launch::KnownNatives,
}

impl Inner {
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
