//! Replay: a trace's calls rebuilt on a fresh runtime, in the order they were recorded, from
//! one thread (each recorded thread's current context is kept and made current before its
//! calls, so threads replay in their recorded order). On the recorded machine the timeline is
//! the recorded one, task for task: every call charges the same host time and enqueues the
//! same work in the same order.
//!
//! **Devices.** Replayed on `M` devices instead of the recorded `N` (the data-parallel rule):
//! device `k` replays what recorded device `k mod N` did — its allocations, streams, launches
//! and its rank's collectives, with the sizes recorded — and every communicator over recorded
//! devices spans all their replicas, so rings grow with `M`. With `M < N`, devices `M..N` are
//! left out. Point-to-point partners and broadcast roots map to the same replica. Anything
//! else (a model-parallel program whose ranks do different work, host-side decisions on
//! results) is out of scope: it replays under this rule all the same, which is only a model
//! of the bigger machine.

use crate::{HostFunc, Launch, LaunchOp};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use npusim_components::WorldResources;
use npusim_components::collective::CollectiveKind;
use npusim_components::{
    Arg, Binary, Context, DataType, DevicePtr, Event, HostBuffer, Kernel, NativeKernel, NpuError,
    NpuResult, ReduceOp, SimTime, Stream,
};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;
use npusim_device::link::TopologyConfig;

use super::format::{
    ArgRecord, Call, CommSide, HostSide, KernelRef, ShapeRecord, TensorRecord, Trace,
};
use crate::{
    CommBuffer, Communicator, Runtime, RuntimeConfig, ShapeHandle, StreamConfig, TensorArg,
};

mod entry;
use entry::replay_entry;

/// How to replay a trace.
pub struct ReplayOptions {
    /// Devices to replay on (default: as recorded); see the module docs for the rule.
    pub devices: Option<u32>,
    /// The preset (default: as recorded).
    pub device: Option<DeviceConfig>,
    /// The interconnect (default: as recorded).
    pub topology: Option<TopologyConfig>,
    /// Replay in timing-only mode (no data moves; see
    /// [`RuntimeConfig::timing_only`](crate::RuntimeConfig::timing_only)).
    pub timing_only: bool,
    /// Keep the timeline (task records) of the replay.
    pub timeline: bool,
    /// Simulator worker threads (as [`RuntimeConfig::threads`](crate::RuntimeConfig::threads)).
    pub threads: usize,
    /// The program's own native kernels, for a functional replay; a kernel not given here is
    /// replayed by a stand-in with its recorded cost that computes nothing.
    pub kernels: Vec<NativeKernel>,
    /// The program's own ops ([`Ops::register`](crate::Ops::register)), registered when the trace's
    /// registration of the op of the same name comes; a trace registering an op not given
    /// here is refused, naming the op. (An op whose kernel is a binary function names a
    /// kernel of the recording runtime: such ops are out of scope, except the Ascend-style
    /// ops of [`Ops::register_npu`](crate::Ops::register_npu), which a replay registers itself.)
    pub ops: Vec<crate::OpBuilder>,
    /// Called every few thousand calls with (calls done, calls in all).
    pub progress: Option<Box<dyn FnMut(usize, usize)>>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            devices: None,
            device: None,
            topology: None,
            timing_only: false,
            timeline: true,
            threads: 0,
            kernels: Vec::new(),
            ops: Vec::new(),
            progress: None,
        }
    }
}

impl std::fmt::Debug for ReplayOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayOptions")
            .field("devices", &self.devices)
            .field("device", &self.device.as_ref().map(|d| &d.name))
            .field("timing_only", &self.timing_only)
            .field("kernels", &self.kernels.len())
            .field("ops", &self.ops)
            .finish_non_exhaustive()
    }
}

/// What a replay produced.
#[derive(Debug)]
pub struct Replayed {
    /// The runtime, after its last call and with all its work done: its timeline, stats.
    pub runtime: Runtime,
    /// Calls replayed (a call on a replicated device counts once per replica).
    pub calls: u64,
    /// Calls that returned an error in the replay, by trace entry (an error the program saw
    /// too, such as a synchronize reporting a failed task, shows here as well).
    pub errors: Vec<(usize, NpuError)>,
}

/// Recorded costs of stand-in kernels' launches, by (argument words, block dim).
pub type StandInCosts = Arc<Mutex<BTreeMap<(Vec<u64>, u32), KernelCost>>>;

/// The stand-in for a native kernel whose code a replay does not have: it computes nothing and
/// takes the cost its launches recorded (`costs`, by argument words and block dim).
pub fn stand_in_kernel(name: &str, costs: StandInCosts) -> NativeKernel {
    NativeKernel::new(
        name,
        |_| Ok(()),
        move |args, block_dim| {
            costs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(args.to_vec(), block_dim))
                .copied()
                .unwrap_or_default()
        },
    )
}

/// A recorded thread's current context: a device's primary one, or a context the trace made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CtxRef {
    Primary(u32),
    Made(u32),
}

/// The runtime a replay state calls: the replay's own handle, or, in the state a replayed
/// callback carries while it is queued, a weak one (the runtime holds the queued callback, so
/// a strong handle would keep the runtime alive for ever if the callback never runs).
enum Rt {
    Strong(Runtime),
    Weak(std::sync::Weak<crate::runtime::Shared>),
}

impl std::ops::Deref for Rt {
    type Target = Runtime;

    fn deref(&self) -> &Runtime {
        match self {
            Rt::Strong(rt) => rt,
            // A replayed callback upgrades its state's handle before it makes any call.
            Rt::Weak(_) => unreachable!("a replayed callback's runtime is upgraded first"),
        }
    }
}

impl Rt {
    fn into_runtime(self) -> Option<Runtime> {
        match self {
            Rt::Strong(rt) => Some(rt),
            Rt::Weak(w) => w.upgrade().map(Runtime::from_shared),
        }
    }
}

/// Replay state: handles by (trace id, replica).
struct State {
    rt: Rt,
    n: u32,
    m: u32,
    threads: BTreeMap<u32, Vec<CtxRef>>,
    applied: Option<(CtxRef, u32)>,
    ctx_alias: BTreeMap<u32, CtxRef>,
    ctx_device: BTreeMap<u32, u32>,
    contexts: BTreeMap<(u32, u32), Context>,
    streams: BTreeMap<(u32, u32), (Stream, u32)>,
    stream_device: BTreeMap<u32, u32>,
    events: BTreeMap<(u32, u32), Event>,
    event_device: BTreeMap<u32, u32>,
    allocs: BTreeMap<(u32, u32), BTreeMap<u64, (u64, u64)>>,
    hosts: BTreeMap<u32, HostBuffer>,
    binaries: BTreeMap<(u32, u32), Binary>,
    functions: BTreeMap<(u32, u32), Kernel>,
    comms: BTreeMap<u32, (Vec<u32>, BTreeMap<u32, Communicator>)>,
    kernels: BTreeMap<String, Kernel>,
    stand_in_costs: StandInCosts,
    stand_ins: std::collections::BTreeSet<String>,
    calls: u64,
    timing_only: bool,
    shapes: BTreeMap<(u32, u32), ShapeHandle>,
    /// The program's own ops, by name, until their registration comes.
    ops: BTreeMap<String, crate::OpBuilder>,
    /// Inside a replayed callback: the replica it belongs to.
    only: Option<u32>,
    /// Each thread's declared access set for its next launch.
    declared: BTreeMap<u32, (Vec<super::AccessRecord>, bool)>,
    /// What replayed callbacks need.
    callbacks: Arc<CallbackCalls>,
}

/// One callback's calls: (trace entry, thread, call), in order.
type CallsInside = Arc<Vec<(usize, u32, Call)>>;

/// The calls made inside host callbacks, for the replayed callbacks to make.
#[derive(Default)]
struct CallbackCalls {
    /// A copy of the trace (its blobs and kernel names), when any call was made inside one.
    trace: Option<Arc<Trace>>,
    /// Callback id by the trace entry that launched it.
    ids: BTreeMap<usize, u32>,
    /// Each callback's calls: (trace entry, thread, call), in order.
    calls: BTreeMap<u32, CallsInside>,
    /// Errors of calls made in replayed callbacks.
    errors: Mutex<Vec<(usize, NpuError)>>,
}

impl CallbackCalls {
    fn of(trace: &Trace) -> Self {
        let mut out = CallbackCalls::default();
        let mut calls: BTreeMap<u32, Vec<(usize, u32, Call)>> = BTreeMap::new();
        for (i, e) in trace.entries.iter().enumerate() {
            let call = match &e.call {
                Call::InCallback { callback, call } => {
                    calls
                        .entry(*callback)
                        .or_default()
                        .push((i, e.thread, (**call).clone()));
                    call
                }
                call => call,
            };
            if let Call::HostFunc { .. } = call {
                let id = out.ids.len() as u32;
                out.ids.insert(i, id);
            }
        }
        if !calls.is_empty() {
            out.trace = Some(Arc::new(trace.clone()));
        }
        out.calls = calls.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
        out
    }
}

fn kernel_name(trace: &Trace, id: u32) -> NpuResult<&str> {
    trace
        .kernels
        .get(id as usize)
        .map(String::as_str)
        .ok_or_else(|| unknown("kernel", id))
}

fn unknown(what: &str, id: u32) -> NpuError {
    NpuError::InvalidParam(format!("trace: {what} {id} was never created"))
}

impl State {
    /// Replicas of recorded device `d`: the replayed devices `d, d + N, …` below `M`.
    fn replicas(&self, d: u32) -> u32 {
        if d >= self.m {
            0
        } else {
            (self.m - d).div_ceil(self.n)
        }
    }

    /// The replicas of recorded device `d` a call replays on: all of them, or inside a
    /// replayed callback only the callback's own.
    fn replicas_here(&self, d: u32) -> std::ops::Range<u32> {
        let all = self.replicas(d);
        match self.only {
            Some(j) if j < all => j..j + 1,
            Some(_) => 0..0,
            None => 0..all,
        }
    }

    /// The state a replayed callback of replica `j` replays its calls with: the handles as
    /// they are now (handles the callback makes stay its own), every thread of its calls in
    /// `ctx`, the context current where it was launched.
    fn for_callback(&self, j: u32, ctx: CtxRef, calls: &[(usize, u32, Call)]) -> State {
        let threads = calls.iter().map(|&(_, t, _)| (t, vec![ctx])).collect();
        State {
            rt: Rt::Weak(self.rt.weak()),
            n: self.n,
            m: self.m,
            threads,
            applied: None,
            ctx_alias: self.ctx_alias.clone(),
            ctx_device: self.ctx_device.clone(),
            contexts: self.contexts.clone(),
            streams: self.streams.clone(),
            stream_device: self.stream_device.clone(),
            events: self.events.clone(),
            event_device: self.event_device.clone(),
            allocs: self.allocs.clone(),
            hosts: self.hosts.clone(),
            binaries: self.binaries.clone(),
            functions: self.functions.clone(),
            comms: self.comms.clone(),
            kernels: self.kernels.clone(),
            stand_in_costs: self.stand_in_costs.clone(),
            stand_ins: self.stand_ins.clone(),
            calls: 0,
            timing_only: self.timing_only,
            shapes: self.shapes.clone(),
            ops: BTreeMap::new(),
            only: Some(j),
            declared: BTreeMap::new(),
            callbacks: self.callbacks.clone(),
        }
    }

    fn lane(&self, d: u32, j: u32) -> u32 {
        d + j * self.n
    }

    fn top(&self, thread: u32) -> Option<CtxRef> {
        self.threads.get(&thread).and_then(|s| s.last().copied())
    }

    fn set_top(&mut self, thread: u32, c: CtxRef) {
        let s = self.threads.entry(thread).or_default();
        s.pop();
        s.push(c);
    }

    fn ctx_device(&self, c: CtxRef) -> NpuResult<u32> {
        match c {
            CtxRef::Primary(d) => Ok(d),
            CtxRef::Made(id) => self
                .ctx_device
                .get(&id)
                .copied()
                .ok_or_else(|| unknown("context", id)),
        }
    }

    fn resolve_ctx(&self, id: u32) -> NpuResult<CtxRef> {
        if let Some(c) = self.ctx_alias.get(&id) {
            return Ok(*c);
        }
        if self.ctx_device.contains_key(&id) {
            return Ok(CtxRef::Made(id));
        }
        Err(unknown("context", id))
    }

    /// The device the thread's current context is on (a thread that never chose one works
    /// in device 0's primary context, as the runtime gives it).
    fn current_device(&self, thread: u32) -> NpuResult<u32> {
        self.ctx_device(self.top(thread).unwrap_or(CtxRef::Primary(0)))
    }

    /// Makes replica `j` of the thread's current context current (or, when it is on another
    /// device than `device`, replica `j`'s primary context of `device`).
    fn enter(&mut self, thread: u32, device: u32, j: u32) -> NpuResult<()> {
        let want = match self.top(thread) {
            Some(c) if self.ctx_device(c)? == device => c,
            _ => CtxRef::Primary(device),
        };
        if self.applied == Some((want, j)) {
            return Ok(());
        }
        match want {
            CtxRef::Primary(d) => self.rt.contexts().set_device(self.lane(d, j))?,
            CtxRef::Made(id) => {
                let c = *self
                    .contexts
                    .get(&(id, j))
                    .ok_or_else(|| unknown("context", id))?;
                self.rt.contexts().set_current(c)?;
            }
        }
        self.applied = Some((want, j));
        Ok(())
    }

    fn stream(&self, id: u32, j: u32) -> NpuResult<Stream> {
        self.streams
            .get(&(id, j))
            .map(|s| s.0)
            .ok_or_else(|| unknown("stream", id))
    }

    fn stream_dev(&self, id: u32) -> NpuResult<u32> {
        self.stream_device
            .get(&id)
            .copied()
            .ok_or_else(|| unknown("stream", id))
    }

    fn event(&self, id: u32, j: u32) -> NpuResult<Event> {
        self.events
            .get(&(id, j))
            .copied()
            .ok_or_else(|| unknown("event", id))
    }

    /// A recorded device address of device `d`, in replica `j`'s allocations.
    fn ptr(&self, d: u32, j: u32, addr: u64) -> u64 {
        let Some(map) = self.allocs.get(&(d, j)) else {
            return addr;
        };
        match map.range(..=addr).next_back() {
            Some((&base, &(size, new))) if addr <= base + size => new + (addr - base),
            _ => addr,
        }
    }

    /// A recorded argument, its pointer mapped into replica `j` of device `d`.
    fn arg(&self, d: u32, j: u32, a: ArgRecord) -> Arg {
        match a {
            ArgRecord::Ptr(p) => Arg::Ptr(DevicePtr(self.ptr(d, j, p))),
            ArgRecord::U64(v) => Arg::U64(v),
            ArgRecord::I64(v) => Arg::I64(v),
            ArgRecord::F32(b) => Arg::F32(f32::from_bits(b)),
        }
    }

    fn kernel(&mut self, name: &str) -> NpuResult<Kernel> {
        if let Some(k) = self.kernels.get(name) {
            return Ok(*k);
        }
        let k = match self.rt.kernel(name) {
            Ok(k) => k,
            Err(_) => {
                self.stand_ins.insert(name.to_string());
                self.rt
                    .kernels()
                    .register(stand_in_kernel(name, self.stand_in_costs.clone()))
            }
        };
        self.kernels.insert(name.to_string(), k);
        Ok(k)
    }
}

impl Runtime {
    /// Timing-only: the op launch just enqueued on `stream` publishes `slot` (a shape slot's
    /// bytes) at its end, as it did when recorded.
    fn publish_next_from(&self, stream: Stream, slot: Vec<u8>) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, _) = self.check_stream(&g, stream)?;
        let seq = g.stream(s).map_or(0, |st| st.submitted);
        g.world
            .res_mut::<npusim_components::ExecutionMode>()?
            .recorded_shapes
            .insert((s, seq), slot);
        Ok(())
    }

    /// Timing-only: the launch just enqueued on `stream` is priced from `run` instead of run.
    fn price_next_from(
        &self,
        stream: Stream,
        run: npusim_components::mode::BinaryRun,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, _) = self.check_stream(&g, stream)?;
        let seq = g.stream(s).map_or(0, |st| st.submitted);
        g.world
            .res_mut::<npusim_components::ExecutionMode>()?
            .recorded
            .insert((s, seq), run);
        Ok(())
    }
}

/// Replays `trace` on a fresh runtime built from its header and `options`; returns the
/// runtime once its last call is made and its work is done. A call that fails in the replay
/// is noted in [`Replayed::errors`] and the replay goes on; a trace that names a handle it
/// never created is an `ACL_ERROR_INVALID_PARAM` error.
pub fn replay(trace: &Trace, mut options: ReplayOptions) -> NpuResult<Replayed> {
    let h = &trace.header;
    let m = options.devices.unwrap_or(h.devices);
    let rt = Runtime::new(RuntimeConfig {
        devices: m,
        device: options.device.clone().unwrap_or_else(|| h.device.clone()),
        topology: options
            .topology
            .clone()
            .unwrap_or_else(|| h.topology.clone()),
        host: (&h.host).into(),
        timeline: options.timeline,
        threads: options.threads,
        timing_only: options.timing_only,
        ..RuntimeConfig::default()
    })?;
    // A replay is not itself recorded (`NPUSIM_RECORD` may be set for the program).
    let _ = rt.take_trace();
    // The state holds the replay's only handle: a wait at a rendezvous would otherwise give
    // other handles' threads time to join it (see `Runtime::drive`).
    let mut st = State {
        rt: Rt::Strong(rt),
        n: h.devices.max(1),
        m,
        threads: BTreeMap::new(),
        applied: None,
        ctx_alias: BTreeMap::new(),
        ctx_device: BTreeMap::new(),
        contexts: BTreeMap::new(),
        streams: BTreeMap::new(),
        stream_device: BTreeMap::new(),
        events: BTreeMap::new(),
        event_device: BTreeMap::new(),
        allocs: BTreeMap::new(),
        hosts: BTreeMap::new(),
        binaries: BTreeMap::new(),
        functions: BTreeMap::new(),
        comms: BTreeMap::new(),
        kernels: BTreeMap::new(),
        stand_in_costs: Arc::new(Mutex::new(BTreeMap::new())),
        stand_ins: Default::default(),
        calls: 0,
        timing_only: options.timing_only,
        shapes: BTreeMap::new(),
        ops: std::mem::take(&mut options.ops)
            .into_iter()
            .map(|op| (op.name().to_string(), op))
            .collect(),
        only: None,
        declared: BTreeMap::new(),
        callbacks: Arc::new(CallbackCalls::of(trace)),
    };
    for k in std::mem::take(&mut options.kernels) {
        let name = k.name.clone();
        let id = st.rt.kernels().register(k);
        st.kernels.insert(name, id);
    }
    let total = trace.entries.len();
    let mut errors = Vec::new();
    for (i, entry) in trace.entries.iter().enumerate() {
        if let Some(p) = options.progress.as_mut()
            && i % 4096 == 0
        {
            p(i, total);
        }
        // Made by the replayed callback instead.
        if let Call::InCallback { .. } = entry.call {
            continue;
        }
        replay_entry(&mut st, trace, entry.thread, &entry.call, i, &mut errors)?;
    }
    if let Some(p) = options.progress.as_mut() {
        p(total, total);
    }
    if let Err(e) = st.rt.run_until_idle() {
        errors.push((total, e));
    }
    errors.extend(std::mem::take(
        &mut *st
            .callbacks
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner()),
    ));
    errors.sort_by_key(|(i, _)| *i);
    let runtime = st
        .rt
        .into_runtime()
        .ok_or_else(|| NpuError::Internal("the replay's runtime is gone".into()))?;
    Ok(Replayed {
        runtime,
        calls: st.calls,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Recording;

    #[test]
    fn a_replayed_callback_that_never_runs_does_not_keep_the_runtime_alive() {
        // Recorded: a callback on stream `a` that enqueues a memset, and a wait on stream `b`
        // for a record that never comes.
        let rt = Runtime::new(RuntimeConfig {
            recording: Some(Recording {
                path: None,
                data: true,
            }),
            ..RuntimeConfig::default()
        })
        .unwrap();
        let (a, b) = (
            rt.streams().create().unwrap(),
            rt.streams().create().unwrap(),
        );
        let ev = rt.events().create().unwrap();
        let buf = rt.memory().malloc(64).unwrap();
        rt.events().stream_wait_record(b, ev, 1, None).unwrap();
        let inner = rt.clone();
        rt.submit(HostFunc::new(a, move || {
            inner.memory().memset_async(buf, 0, 64, a).unwrap()
        }))
        .unwrap();
        rt.streams().synchronize(a).unwrap();
        let mut trace = rt.take_trace().unwrap();
        // Replayed with the callback behind `b`'s wait: it stays queued for good.
        let blocked = trace.entries.iter().find_map(|e| match e.call {
            Call::StreamWaitEventRecord { stream, .. } => Some(stream),
            _ => None,
        });
        for e in &mut trace.entries {
            if let Call::HostFunc { stream } = &mut e.call {
                *stream = blocked.unwrap();
            }
        }
        let replayed = replay(&trace, ReplayOptions::default()).unwrap();
        let weak = replayed.runtime.weak();
        drop(replayed);
        assert!(
            weak.upgrade().is_none(),
            "the queued callback keeps the runtime"
        );
    }
}
