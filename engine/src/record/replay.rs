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

/// A declared access set from its record, addresses mapped by `ptr`.
fn declared_access(
    ranges: &[super::AccessRecord],
    exact: bool,
    ptr: impl Fn(u64) -> u64,
) -> npusim_components::AccessSet {
    use npusim_components::access::Space;
    use npusim_components::{Access, AccessMode, AccessSet};
    let mut set = AccessSet::new();
    if !exact {
        set.mark_inexact();
    }
    for r in ranges {
        set.push(Access {
            addr: if r.peer { r.addr } else { ptr(r.addr) },
            bytes: r.bytes,
            mode: match r.mode {
                0 => AccessMode::Read,
                1 => AccessMode::Write,
                _ => AccessMode::ReadWrite,
            },
            space: if r.peer { Space::Peer } else { Space::Local },
        });
    }
    set
}

/// Replays one call, on every replica of the device it concerns.
fn replay_entry(
    st: &mut State,
    trace: &Trace,
    thread: u32,
    call: &Call,
    index: usize,
    errors: &mut Vec<(usize, NpuError)>,
) -> NpuResult<()> {
    let mut note = |r: NpuResult<()>| {
        if let Err(e) = r {
            errors.push((index, e));
        }
    };
    // Calls on no device in particular.
    match call {
        Call::SetDevice { device } => {
            st.set_top(thread, CtxRef::Primary(*device));
            return Ok(());
        }
        Call::CurrentContext { ctx } => {
            let top = st.top(thread).unwrap_or(CtxRef::Primary(0));
            st.ctx_alias.insert(*ctx, top);
            return Ok(());
        }
        Call::SetCurrentContext { ctx } => {
            let c = st.resolve_ctx(*ctx)?;
            st.set_top(thread, c);
            return Ok(());
        }
        Call::PushContext { ctx } => {
            let c = st.resolve_ctx(*ctx)?;
            st.threads.entry(thread).or_default().push(c);
            return Ok(());
        }
        Call::PopContext => {
            st.threads.entry(thread).or_default().pop();
            return Ok(());
        }
        Call::HostWork { ns } => {
            st.rt.host_work(SimTime(*ns));
            st.calls += 1;
            return Ok(());
        }
        Call::ReadShape { ns } => {
            st.rt.lock().charge(*ns);
            st.calls += 1;
            return Ok(());
        }
        Call::RegisterKernel { name } => {
            st.kernel(name)?;
            return Ok(());
        }
        Call::MallocHost { size, host } => {
            st.calls += 1;
            let b = st.rt.memory().malloc_host(*size)?;
            st.hosts.insert(*host, b);
            return Ok(());
        }
        Call::FreeHost { host } => {
            st.calls += 1;
            let b = st
                .hosts
                .remove(host)
                .ok_or_else(|| unknown("host buffer", *host))?;
            note(st.rt.memory().free_host(&b));
            return Ok(());
        }
        Call::CommInit { devices, comm } => {
            st.calls += 1;
            let mut lanes: Vec<u32> = devices
                .iter()
                .flat_map(|&d| (0..st.replicas(d)).map(move |j| (d, j)))
                .map(|(d, j)| st.lane(d, j))
                .collect();
            lanes.sort_unstable();
            let handles = st.rt.collectives().init_all(&lanes)?;
            let by_device = lanes.iter().copied().zip(handles).collect();
            st.comms.insert(*comm, (devices.clone(), by_device));
            return Ok(());
        }
        Call::SetCoreLimits {
            device,
            cube,
            vector,
        } => {
            for j in st.replicas_here(*device) {
                st.calls += 1;
                note(
                    st.rt
                        .limits()
                        .set_core_limits(st.lane(*device, j), *cube, *vector),
                );
            }
            return Ok(());
        }
        Call::DeclaredAccess { ranges, exact } => {
            st.declared.insert(thread, (ranges.clone(), *exact));
            return Ok(());
        }
        Call::RegisterOp { name } => {
            st.calls += 1;
            let op = st.ops.remove(name).ok_or_else(|| {
                NpuError::KernelNotFound(format!(
                    "trace: the program registered op {name}, whose code a trace does not \
                     hold: give it in ReplayOptions::ops"
                ))
            })?;
            note(st.rt.ops().register(op).map(drop));
            return Ok(());
        }
        Call::RegisterNpuOps { functions } => {
            st.calls += 1;
            let k = |i: usize| -> NpuResult<Kernel> {
                let f = *functions.get(i).ok_or_else(|| {
                    NpuError::InvalidParam("trace: register_npu_ops names too few functions".into())
                })?;
                st.functions
                    .get(&(f, 0))
                    .copied()
                    .ok_or_else(|| unknown("function", f))
            };
            let functions = [k(0)?, k(1)?, k(2)?, k(3)?];
            note(st.rt.npu_ops_with(functions).map(drop));
            return Ok(());
        }
        Call::SetKernelTimeout { ns } => {
            st.calls += 1;
            note(st.rt.limits().set_kernel_timeout(SimTime(*ns)));
            return Ok(());
        }
        Call::SetKernelWallLimit { ns } => {
            st.calls += 1;
            st.rt
                .limits()
                .set_kernel_wall_limit(std::time::Duration::from_nanos(*ns));
            return Ok(());
        }
        Call::SetEventWaitTimeout { ns } => {
            st.calls += 1;
            st.rt.limits().set_event_wait_timeout(ns.map(SimTime));
            return Ok(());
        }
        Call::SetCallbackTimeout { ns } => {
            st.calls += 1;
            st.rt
                .set_callback_timeout(std::time::Duration::from_nanos(*ns));
            return Ok(());
        }
        _ => {}
    }
    // The device the call concerns: its stream's or event's, else the current context's.
    let device = match call {
        Call::DestroyStream { stream }
        | Call::SynchronizeStream { stream, .. }
        | Call::RecordEvent { stream, .. }
        | Call::StreamWaitEvent { stream, .. }
        | Call::StreamWaitEventRecord { stream, .. }
        | Call::CopyPeer { stream, .. }
        | Call::RecordStream { stream, .. }
        | Call::CopyHost { stream, .. }
        | Call::CopyDevice { stream, .. }
        | Call::Memset { stream, .. }
        | Call::Launch { stream, .. }
        | Call::HostFunc { stream }
        | Call::LaunchOp { stream, .. }
        | Call::Collective { stream, .. } => st.stream_dev(*stream)?,
        Call::DestroyEvent { event }
        | Call::SynchronizeEvent { event }
        | Call::SynchronizeEventTimeout { event, .. } => *st
            .event_device
            .get(event)
            .ok_or_else(|| unknown("event", *event))?,
        Call::CreateContext { device, .. } => *device,
        Call::DestroyContext { ctx } => st.ctx_device(st.resolve_ctx(*ctx)?)?,
        Call::CommDestroy { comm, rank } => {
            let (devices, _) = st
                .comms
                .get(comm)
                .ok_or_else(|| unknown("communicator", *comm))?;
            devices[*rank as usize]
        }
        _ => st.current_device(thread)?,
    };
    for j in st.replicas_here(device) {
        st.calls += 1;
        if !matches!(call, Call::CreateContext { .. }) {
            st.enter(thread, device, j)?;
        }
        match call {
            Call::CreateContext { device, ctx } => {
                let c = st.rt.contexts().create(st.lane(*device, j))?;
                st.contexts.insert((*ctx, j), c);
                st.ctx_device.insert(*ctx, *device);
                st.applied = Some((CtxRef::Made(*ctx), j));
                if j + 1 == st.replicas_here(*device).end {
                    st.set_top(thread, CtxRef::Made(*ctx));
                }
            }
            Call::DestroyContext { ctx } => {
                let id = match st.resolve_ctx(*ctx)? {
                    CtxRef::Made(id) => id,
                    CtxRef::Primary(_) => *ctx,
                };
                let c = *st
                    .contexts
                    .get(&(id, j))
                    .ok_or_else(|| unknown("context", id))?;
                note(st.rt.contexts().destroy(c));
                st.applied = None;
            }
            Call::CreateStream {
                stream,
                priority,
                kind,
            } => {
                let kind = super::stream_kind(*kind)
                    .ok_or_else(|| NpuError::InvalidParam(format!("trace: stream kind {kind}")))?;
                let s = st.rt.streams().create_with(StreamConfig {
                    priority: *priority,
                    kind,
                })?;
                st.streams.insert((*stream, j), (s, device));
                st.stream_device.insert(*stream, device);
            }
            Call::DefaultStream { stream } => {
                let s = st.rt.contexts().default_stream()?;
                st.streams.insert((*stream, j), (s, device));
                st.stream_device.insert(*stream, device);
            }
            Call::DestroyStream { stream } => note(st.rt.streams().destroy(st.stream(*stream, j)?)),
            Call::SynchronizeStream { stream, timeout_ns } => {
                let s = st.stream(*stream, j)?;
                note(match timeout_ns {
                    Some(t) => st.rt.streams().synchronize_timeout(s, SimTime(*t)),
                    None => st.rt.streams().synchronize(s),
                })
            }
            Call::SynchronizeDevice => note(st.rt.synchronize_device()),
            Call::CreateEvent { event } => {
                let e = st.rt.events().create()?;
                st.events.insert((*event, j), e);
                st.event_device.insert(*event, device);
            }
            Call::DestroyEvent { event } => note(st.rt.events().destroy(st.event(*event, j)?)),
            Call::RecordEvent { event, stream } => note(
                st.rt
                    .events()
                    .record(st.event(*event, j)?, st.stream(*stream, j)?),
            ),
            Call::StreamWaitEvent { stream, event } => note(
                st.rt
                    .events()
                    .stream_wait(st.stream(*stream, j)?, st.event(*event, j)?),
            ),
            Call::SynchronizeEvent { event } => {
                note(st.rt.events().synchronize(st.event(*event, j)?))
            }
            Call::Malloc { size, policy, ptr } => {
                let policy = super::policy(*policy).ok_or_else(|| {
                    NpuError::InvalidParam(format!("trace: allocation policy {policy}"))
                })?;
                match st.rt.memory().malloc_with_policy(*size, policy) {
                    Ok(p) => {
                        st.allocs
                            .entry((device, j))
                            .or_default()
                            .insert(*ptr, (*size, p.0));
                    }
                    Err(e) => note(Err(e)),
                }
            }
            Call::Free { ptr, stream } => {
                let p = DevicePtr(st.ptr(device, j, *ptr));
                if let Some(map) = st.allocs.get_mut(&(device, j)) {
                    map.remove(ptr);
                }
                note(match stream {
                    Some(s) => st.rt.memory().free_async(p, st.stream(*s, j)?),
                    None => st.rt.memory().free(p),
                })
            }
            Call::CopyHost {
                to_device,
                device: addr,
                host,
                offset,
                bytes,
                stream,
                data,
            } => {
                let buffer = match host {
                    HostSide::Pinned(id) => st
                        .hosts
                        .get(id)
                        .cloned()
                        .ok_or_else(|| unknown("host buffer", *id))?,
                    HostSide::Staged(len) => HostBuffer::new(*len as usize, false),
                };
                if let Some(h) = data
                    && let Some(b) = trace.blobs.get(h)
                {
                    buffer.write_at(*offset as usize, b)?;
                }
                let p = DevicePtr(st.ptr(device, j, *addr));
                let s = st.stream(*stream, j)?;
                note(if *to_device {
                    st.rt
                        .memory()
                        .memcpy_htod_async_at(p, &buffer, *offset, *bytes, s)
                } else {
                    st.rt
                        .memory()
                        .memcpy_dtoh_async_at(&buffer, *offset, p, *bytes, s)
                })
            }
            Call::CopyDevice {
                dst,
                src,
                bytes,
                stream,
            } => note(st.rt.memory().memcpy_dtod_async(
                DevicePtr(st.ptr(device, j, *dst)),
                DevicePtr(st.ptr(device, j, *src)),
                *bytes,
                st.stream(*stream, j)?,
            )),
            Call::Memset {
                dst,
                value,
                bytes,
                stream,
            } => note(st.rt.memory().memset_async(
                DevicePtr(st.ptr(device, j, *dst)),
                *value,
                *bytes,
                st.stream(*stream, j)?,
            )),
            Call::LoadBinary { binary, hash } => {
                let bytes = trace.blobs.get(hash).ok_or_else(|| {
                    NpuError::InvalidParam(format!("trace: binary {binary} has no content"))
                })?;
                let b = st.rt.binaries().load(bytes)?;
                st.binaries.insert((*binary, j), b);
            }
            Call::GetFunction {
                binary,
                name,
                function,
            } => {
                let b = *st
                    .binaries
                    .get(&(*binary, j))
                    .ok_or_else(|| unknown("binary", *binary))?;
                let k = st.rt.binaries().get_function(b, name)?;
                st.functions.insert((*function, j), k);
            }
            Call::UnloadBinary { binary } => {
                let b = *st
                    .binaries
                    .get(&(*binary, j))
                    .ok_or_else(|| unknown("binary", *binary))?;
                note(st.rt.binaries().unload(b))
            }
            Call::Launch {
                kernel,
                block_dim,
                args,
                tiling,
                stream,
                timeout_ns,
                cost,
                binary,
            } => {
                let k = match kernel {
                    KernelRef::Native(id) => st.kernel(kernel_name(trace, *id)?)?,
                    KernelRef::Function(f) => *st
                        .functions
                        .get(&(*f, j))
                        .ok_or_else(|| unknown("function", *f))?,
                };
                let args: Vec<Arg> = args.iter().map(|a| st.arg(device, j, *a)).collect();
                if let (KernelRef::Native(id), Some(c)) = (kernel, cost)
                    && st.stand_ins.contains(kernel_name(trace, *id)?)
                {
                    let words = args.iter().map(|a| a.word()).collect();
                    st.stand_in_costs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert((words, *block_dim), *c);
                }
                let s = st.stream(*stream, j)?;
                // The typed launch builder's access set, its addresses in this replica.
                let access = st.declared.get(&thread).map(|(ranges, exact)| {
                    Box::new(declared_access(ranges, *exact, |a| st.ptr(device, j, a)))
                });
                if j + 1 == st.replicas_here(device).end {
                    st.declared.remove(&thread);
                }
                let timeout = timeout_ns.map(SimTime);
                let launched = match (timeout, access) {
                    (Some(SimTime(0)), _) => Err(NpuError::InvalidParam(
                        "trace: a launch timeout of 0".into(),
                    )),
                    (timeout, access) => st
                        .rt
                        .submit(
                            Launch::new(k, *block_dim, &args, s)
                                .tiling(tiling)
                                .timeout(timeout)
                                .declared(access),
                        )
                        .map(drop),
                };
                // Timing-only: the binary launch is priced from what it did when recorded.
                if let (true, Ok(()), Some(b)) = (st.timing_only, &launched, binary) {
                    let run = npusim_components::mode::BinaryRun {
                        block_cycles: b.block_cycles.clone(),
                        hbm_bytes: b.hbm_bytes,
                        access: b
                            .access
                            .iter()
                            .map(|&(a, n)| (st.ptr(device, j, a), n))
                            .collect(),
                    };
                    st.rt.price_next_from(s, run)?;
                }
                note(launched)
            }
            Call::HostFunc { stream } => {
                let s = st.stream(*stream, j)?;
                let cb = st.callbacks.clone();
                let calls = cb.ids.get(&index).and_then(|id| cb.calls.get(id));
                match (calls, &cb.trace) {
                    (Some(calls), Some(trace)) => {
                        // The callback makes the calls the recorded one made, on its thread.
                        let ctx = st.top(thread).unwrap_or(CtxRef::Primary(0));
                        let mut local = st.for_callback(j, ctx, calls);
                        let (calls, trace, shared) = (calls.clone(), trace.clone(), cb.clone());
                        note(
                            st.rt
                                .submit(HostFunc::new(s, move || {
                                    // Gone: nothing to replay into.
                                    let Some(rt) = std::mem::replace(
                                        &mut local.rt,
                                        Rt::Weak(Default::default()),
                                    )
                                    .into_runtime() else {
                                        return;
                                    };
                                    local.rt = Rt::Strong(rt);
                                    let mut errors = Vec::new();
                                    for (i, t, call) in calls.iter() {
                                        if let Err(e) = replay_entry(
                                            &mut local,
                                            &trace,
                                            *t,
                                            call,
                                            *i,
                                            &mut errors,
                                        ) {
                                            errors.push((*i, e));
                                        }
                                    }
                                    shared
                                        .errors
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .extend(errors);
                                }))
                                .map(drop),
                        )
                    }
                    _ => note(st.rt.submit(HostFunc::new(s, || {})).map(drop)),
                }
            }
            Call::CreateShape { shape } => {
                let h = st.rt.ops().create_shape()?;
                st.shapes.insert((*shape, j), h);
            }
            Call::FreeShape { shape } => {
                let h = st
                    .shapes
                    .remove(&(*shape, j))
                    .ok_or_else(|| unknown("shape", *shape))?;
                note(st.rt.ops().free_shape(h))
            }
            Call::LaunchOp {
                op,
                inputs,
                outputs,
                attrs,
                stream,
                published,
            } => {
                let k = st.rt.ops().get(op)?;
                let tensor = |t: &TensorRecord| -> NpuResult<TensorArg> {
                    let p = DevicePtr(st.ptr(device, j, t.ptr));
                    Ok(match &t.shape {
                        ShapeRecord::Static(d) => TensorArg::new(p, d),
                        ShapeRecord::Dynamic(id) => TensorArg::dynamic(
                            p,
                            *st.shapes
                                .get(&(*id, j))
                                .ok_or_else(|| unknown("shape", *id))?,
                        ),
                        ShapeRecord::Inferred => TensorArg::output(p),
                    })
                };
                let ins = inputs.iter().map(tensor).collect::<NpuResult<Vec<_>>>()?;
                let outs = outputs.iter().map(tensor).collect::<NpuResult<Vec<_>>>()?;
                let attrs: Vec<Arg> = attrs.iter().map(|a| st.arg(device, j, *a)).collect();
                let s = st.stream(*stream, j)?;
                let launched = st.rt.submit(LaunchOp::new(k, &ins, &outs, &attrs, s));
                // Timing-only: the data-dependent output's shape is the recorded one.
                if let (true, Ok(_), Some(bytes)) = (st.timing_only, &launched, published) {
                    st.rt.publish_next_from(s, bytes.clone())?;
                }
                note(launched.map(drop))
            }
            Call::CommDestroy { comm, rank } => {
                let (devices, by_device) = st
                    .comms
                    .get(comm)
                    .ok_or_else(|| unknown("communicator", *comm))?;
                let lane = st.lane(devices[*rank as usize], j);
                if let Some(c) = by_device.get(&lane) {
                    note(st.rt.collectives().destroy(*c))
                }
            }
            Call::Collective {
                kind,
                dtype,
                op,
                count,
                peer,
                send,
                recv,
                comm,
                rank,
                stream,
            } => {
                let (devices, by_device) = st
                    .comms
                    .get(comm)
                    .ok_or_else(|| unknown("communicator", *comm))?;
                let lane = st.lane(devices[*rank as usize], j);
                let c = by_device
                    .get(&lane)
                    .cloned()
                    .ok_or_else(|| unknown("communicator", *comm))?;
                let bad = |what: &str, v: u32| NpuError::InvalidParam(format!("trace: {what} {v}"));
                let kind =
                    CollectiveKind::from_u32(*kind).ok_or_else(|| bad("collective", *kind))?;
                // A point-to-point partner is the same replica's; a root is replica 0's (every
                // rank of a collective names the same root).
                let replica = if kind.is_p2p() { j } else { 0 };
                let peer_lane = devices.get(*peer as usize).map_or(0, |&d| {
                    st.lane(d, replica.min(st.replicas(d).saturating_sub(1)))
                });
                let peer = by_device.keys().position(|&d| d == peer_lane).unwrap_or(0) as u32;
                let side = |s: &CommSide| -> NpuResult<Option<CommBuffer>> {
                    Ok(match s {
                        CommSide::None => None,
                        CommSide::Device(a) => {
                            Some(CommBuffer::Device(DevicePtr(st.ptr(device, j, *a))))
                        }
                        CommSide::Host(id) => Some(CommBuffer::Host(
                            st.hosts
                                .get(id)
                                .cloned()
                                .ok_or_else(|| unknown("host buffer", *id))?,
                        )),
                    })
                };
                let dtype = DataType::from_u32(*dtype).ok_or_else(|| bad("data type", *dtype))?;
                let op = ReduceOp::from_u32(*op).ok_or_else(|| bad("reduction", *op))?;
                let (send, recv) = (side(send)?, side(recv)?);
                let s = st.stream(*stream, j)?;
                let what = crate::collective::CollectiveOp {
                    kind,
                    dtype,
                    op,
                    count: *count,
                    peer,
                    send,
                    recv,
                };
                note(st.rt.enqueue_collective(&c, s, what).map(drop))
            }
            Call::StreamWaitEventRecord {
                stream,
                event,
                record,
                timeout_ns,
            } => note(st.rt.events().stream_wait_record(
                st.stream(*stream, j)?,
                st.event(*event, j)?,
                *record,
                timeout_ns.map(SimTime),
            )),
            Call::CopyPeer {
                dst,
                dst_device,
                src,
                src_device,
                bytes,
                stream,
            } => {
                // The peer's replica is this one's (or its last, on fewer devices).
                let lane_of = |d: u32| (d, j.min(st.replicas(d).saturating_sub(1)));
                let (dd, dj) = lane_of(*dst_device);
                let (sd, sj) = lane_of(*src_device);
                note(st.rt.collectives().memcpy_peer_async(
                    DevicePtr(st.ptr(dd, dj, *dst)),
                    st.lane(dd, dj),
                    DevicePtr(st.ptr(sd, sj, *src)),
                    st.lane(sd, sj),
                    *bytes,
                    st.stream(*stream, j)?,
                ))
            }
            Call::RecordStream { ptr, stream } => note(
                st.rt
                    .memory()
                    .record_stream(DevicePtr(st.ptr(device, j, *ptr)), st.stream(*stream, j)?),
            ),
            Call::TrimMemory => note(st.rt.memory().trim().map(drop)),
            Call::SetFailureMode { mode } => {
                let mode = super::failure_mode(*mode)
                    .ok_or_else(|| NpuError::InvalidParam(format!("trace: failure mode {mode}")))?;
                note(st.rt.contexts().set_failure_mode(mode))
            }
            Call::SynchronizeEventTimeout {
                event, timeout_ns, ..
            } => note(
                st.rt
                    .events()
                    .synchronize_timeout(st.event(*event, j)?, SimTime(*timeout_ns)),
            ),
            Call::SynchronizeDeviceTimeout { timeout_ns, .. } => {
                note(st.rt.synchronize_device_timeout(SimTime(*timeout_ns)))
            }
            // Handled above (and, inside callbacks, by the replayed callback).
            Call::InCallback { .. }
            | Call::DeclaredAccess { .. }
            | Call::RegisterOp { .. }
            | Call::RegisterNpuOps { .. }
            | Call::SetCoreLimits { .. }
            | Call::SetKernelTimeout { .. }
            | Call::SetKernelWallLimit { .. }
            | Call::SetEventWaitTimeout { .. }
            | Call::SetCallbackTimeout { .. }
            | Call::SetDevice { .. }
            | Call::CurrentContext { .. }
            | Call::SetCurrentContext { .. }
            | Call::PushContext { .. }
            | Call::PopContext
            | Call::HostWork { .. }
            | Call::ReadShape { .. }
            | Call::RegisterKernel { .. }
            | Call::MallocHost { .. }
            | Call::FreeHost { .. }
            | Call::CommInit { .. } => {}
        }
    }
    Ok(())
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
