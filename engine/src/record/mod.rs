//! Recording, replay and what-if. With recording on ([`RuntimeConfig::record`], or
//! `NPUSIM_RECORD=path` in the environment, which C programs set for `aclInit`), every API
//! call that changes the runtime is appended to a [`Trace`] as it takes effect: the call with
//! trace-local handles, sizes, kernel identity, arguments and tiling words, the host thread
//! that made it and the host's simulated clock after it. A [`replay`] rebuilds the calls on a
//! fresh runtime; on the same machine model it reproduces the timeline exactly, and in
//! timing-only mode ([`RuntimeConfig::timing_only`]) on any other. [`whatif`] compares
//! variants of the machine in one table.
//!
//! The recorder lives beside the world in the runtime's state: an API call whose recording is
//! off pays one branch on an `Option`. Queries (stream or event status, memory statistics)
//! change nothing and are not recorded; waits are, since they move the host clock.
//!
//! **Host callbacks.** A call made inside a host callback is recorded on the callback's thread,
//! at the point it was made, as made inside that callback ([`Call::InCallback`]); a replay
//! makes it when the replayed callback runs, so a callback that enqueues work replays it. A
//! replayed callback resolves handles as they are when it is launched; a handle it makes is
//! its own (the program's later calls cannot name it in a replay). Like the recorded program,
//! a callback whose calls race the program's own (neither waits for the other) may interleave
//! with them differently in a replay.
//!
//! Out of scope: the bodies of native kernels and ops are code, not data — a replay gets the
//! native kernels the program registered from [`ReplayOptions::kernels`] (or replays them by
//! their recorded cost) and its ops from [`ReplayOptions::ops`]; what a callback computes on
//! the host, besides its API calls, is not replayed.
//!
//! [`RuntimeConfig::record`]: crate::RuntimeConfig::record
//! [`RuntimeConfig::timing_only`]: crate::RuntimeConfig::timing_only

mod format;
mod replay;
mod summary;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use bevy_ecs::entity::Entity;
use bevy_ecs::world::World;
use npusim_components::ExecutionMode;
use npusim_components::ShapeHandle;
use npusim_components::WorldResources;
use npusim_components::collective::CollectiveCall;
use npusim_components::mode::{BinaryLog, ShapeLog};
use npusim_components::task::CopyDir;
use npusim_components::{Arg, HostBuffer, Kernel, KernelBody, KernelRegistry, SimTime, StreamKind};
use npusim_device::memory::pool::AllocPolicy;

pub use format::{
    AccessRecord, ArgRecord, BinaryRecord, Call, CommSide, Entry, FORMAT_VERSION, HostCostsRecord,
    HostSide, KernelRef, MAGIC, ShapeRecord, TensorRecord, Trace, TraceError, TraceHeader, fnv1a64,
};
pub use replay::{ReplayOptions, Replayed, StandInCosts, replay, stand_in_kernel};
pub use summary::{SETTABLE, Summary, TaskShare, Variant, VariantError, whatif};

use crate::runtime::Inner;

/// Where and how a runtime records its API calls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recording {
    /// The file the trace is written to when the runtime ends (or at
    /// [`Runtime::finish_recording`](crate::Runtime::finish_recording)); `None` keeps it in
    /// memory for [`Runtime::take_trace`](crate::Runtime::take_trace).
    pub path: Option<PathBuf>,
    /// Also record the host data sent to the devices (content-addressed: a buffer sent twice
    /// is stored once), so a functional replay computes the same results.
    pub data: bool,
}

/// Process-unique thread numbers (a `ThreadId` is not ordered).
static NEXT_THREAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// Runtimes made in this process with `NPUSIM_RECORD` set (the second writes `path.2`, …).
static ENV_RECORDINGS: AtomicU32 = AtomicU32::new(0);

impl Recording {
    /// `NPUSIM_RECORD=path` (with `NPUSIM_RECORD_DATA=1`: host data too). Every runtime the
    /// process makes records: the first to `path`, the n-th to `path.n`.
    pub fn from_env() -> Option<Self> {
        let path = std::env::var_os("NPUSIM_RECORD").filter(|p| !p.is_empty())?;
        let data = std::env::var("NPUSIM_RECORD_DATA").is_ok_and(|v| v.trim() == "1");
        let n = ENV_RECORDINGS.fetch_add(1, Ordering::Relaxed) + 1;
        let mut path = PathBuf::from(path);
        if n > 1 {
            let mut name = path.clone().into_os_string();
            name.push(format!(".{n}"));
            path = name.into();
        }
        Some(Self {
            path: Some(path),
            data,
        })
    }
}

/// The recorder of one runtime: the trace so far and the maps from the runtime's handles to
/// trace-local ids.
pub(crate) struct Recorder {
    target: Recording,
    trace: Trace,
    threads: BTreeMap<u64, u32>,
    streams: BTreeMap<Entity, u32>,
    events: BTreeMap<Entity, u32>,
    contexts: BTreeMap<Entity, u32>,
    binaries: BTreeMap<Entity, u32>,
    comms: BTreeMap<Entity, u32>,
    functions: BTreeMap<(u32, u32), u32>,
    /// Pinned host buffers (held, so the identity stays unique until `free_host`).
    hosts: Vec<(HostBuffer, u32)>,
    next_host: u32,
    next_function: u32,
    /// Binary launches as the frame runs them (shared with [`ExecutionMode::binary_log`]).
    pub(crate) binary_log: BinaryLog,
    /// Binary launches recorded but not yet run: (stream, sequence number) → entry.
    pending_binary: BTreeMap<(Entity, u64), usize>,
    /// Shapes data-dependent ops published (shared with [`ExecutionMode::shape_log`]).
    pub(crate) shape_log: ShapeLog,
    /// Op launches recorded but not yet run: (stream, sequence number) → entry.
    pending_ops: BTreeMap<(Entity, u64), usize>,
    shapes: BTreeMap<(Entity, u32, u32), u32>,
    kernel_ids: BTreeMap<(u32, u32), u32>,
    program_kernels: std::collections::BTreeSet<(u32, u32)>,
    /// Host callbacks launched, by (stream, sequence number) → trace-local callback id (the
    /// order of their launches).
    callbacks: BTreeMap<(Entity, u64), u32>,
    /// An entry that goes right before the call being recorded, with its host time (a
    /// launch's declared access set).
    before: Option<(SimTime, Call)>,
    /// The thread whose calls are part of a call being recorded as one (a timed wait's plain
    /// wait), and so not recorded themselves.
    muted: Option<u64>,
}

/// Where a call is made: on a program's thread, or inside the host callback of this id.
#[derive(Clone, Copy)]
struct Inside(Option<u32>);

impl Inside {
    /// The call as recorded where it was made.
    fn wrap(self, call: Call) -> Call {
        match self.0 {
            None => call,
            Some(callback) => Call::InCallback {
                callback,
                call: Box::new(call),
            },
        }
    }
}

/// A kernel argument, as recorded.
fn arg_record(a: Arg) -> ArgRecord {
    match a {
        Arg::Ptr(p) => ArgRecord::Ptr(p.0),
        Arg::U64(v) => ArgRecord::U64(v),
        Arg::I64(v) => ArgRecord::I64(v),
        Arg::F32(v) => ArgRecord::F32(v.to_bits()),
    }
}

/// A declared access set, as recorded.
fn access_record(set: &npusim_components::AccessSet) -> Call {
    use npusim_components::AccessMode;
    use npusim_components::access::Space;
    Call::DeclaredAccess {
        ranges: set
            .ranges()
            .iter()
            .map(|a| AccessRecord {
                addr: a.addr,
                bytes: a.bytes,
                mode: match a.mode {
                    AccessMode::Read => 0,
                    AccessMode::Write => 1,
                    AccessMode::ReadWrite => 2,
                },
                peer: a.space == Space::Peer,
            })
            .collect(),
        exact: set.exact(),
    }
}

/// Gives `e` the next id of its kind if it has none; returns (id, whether new).
fn id_of(map: &mut BTreeMap<Entity, u32>, e: Entity) -> (u32, bool) {
    let next = map.len() as u32;
    let mut new = false;
    let id = *map.entry(e).or_insert_with(|| {
        new = true;
        next
    });
    (id, new)
}

impl Recorder {
    pub(crate) fn new(target: Recording, header: TraceHeader) -> Self {
        let mut trace = Trace {
            header,
            ..Trace::default()
        };
        trace.header.with_data = target.data;
        Self {
            target,
            trace,
            threads: BTreeMap::new(),
            streams: BTreeMap::new(),
            events: BTreeMap::new(),
            contexts: BTreeMap::new(),
            binaries: BTreeMap::new(),
            comms: BTreeMap::new(),
            functions: BTreeMap::new(),
            hosts: Vec::new(),
            next_host: 0,
            next_function: 0,
            binary_log: Default::default(),
            pending_binary: BTreeMap::new(),
            shape_log: Default::default(),
            pending_ops: BTreeMap::new(),
            shapes: BTreeMap::new(),
            kernel_ids: BTreeMap::new(),
            program_kernels: Default::default(),
            callbacks: BTreeMap::new(),
            before: None,
            muted: None,
        }
    }

    /// The shape handle's id (a new one for a handle the trace has not seen).
    pub(crate) fn shape(&mut self, h: ShapeHandle) -> u32 {
        let next = self.shapes.len() as u32;
        *self
            .shapes
            .entry((h.context(), h.slot(), h.generation()))
            .or_insert(next)
    }

    /// An op launch of `op` on `stream` at `seq`, as recorded.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_op(
        &mut self,
        op: String,
        inputs: &[crate::TensorArg],
        outputs: &[crate::TensorArg],
        attrs: &[Arg],
        stream: Entity,
        seq: u64,
    ) -> Call {
        self.pending_ops
            .insert((stream, seq), self.trace.entries.len());
        let mut tensor = |t: &crate::TensorArg| TensorRecord {
            ptr: t.ptr().0,
            shape: match t.record_shape() {
                crate::ops::RecordedShape::Static(d) => ShapeRecord::Static(d.to_vec()),
                crate::ops::RecordedShape::Dynamic(h) => ShapeRecord::Dynamic(self.shape(h)),
                crate::ops::RecordedShape::Inferred => ShapeRecord::Inferred,
            },
        };
        let inputs = inputs.iter().map(&mut tensor).collect();
        let outputs = outputs.iter().map(&mut tensor).collect();
        Call::LaunchOp {
            op,
            inputs,
            outputs,
            attrs: attrs.iter().map(|&a| arg_record(a)).collect(),
            stream: self.stream(stream),
            published: None,
        }
    }

    /// Puts what the binary launches that ran since the last call did into their entries.
    fn settle(&mut self) {
        let runs = std::mem::take(&mut *self.binary_log.lock().unwrap_or_else(|p| p.into_inner()));
        for (stream, seq, run) in runs {
            let Some(i) = self.pending_binary.remove(&(stream, seq)) else {
                continue;
            };
            if let Some(Entry {
                call: Call::Launch { binary, .. },
                ..
            }) = self.trace.entries.get_mut(i)
            {
                *binary = Some(Box::new(BinaryRecord {
                    block_cycles: run.block_cycles,
                    hbm_bytes: run.hbm_bytes,
                    access: run.access,
                }));
            }
        }
        let shapes = std::mem::take(&mut *self.shape_log.lock().unwrap_or_else(|p| p.into_inner()));
        for (stream, seq, bytes) in shapes {
            let Some(i) = self.pending_ops.remove(&(stream, seq)) else {
                continue;
            };
            if let Some(Entry {
                call: Call::LaunchOp { published, .. },
                ..
            }) = self.trace.entries.get_mut(i)
            {
                *published = Some(bytes);
            }
        }
    }

    /// Whether the calling thread's calls are recorded, and where: `None` when muted (see
    /// [`Recorder::muted`]) or inside a callback the trace did not see launched.
    fn admit(&self, runtime: u32) -> Option<Inside> {
        if self.muted.is_some_and(|t| THREAD.with(|me| *me == t)) {
            return None;
        }
        match crate::callback::current_callback() {
            Some((rt, stream, seq)) if rt == runtime => self
                .callbacks
                .get(&(stream, seq))
                .map(|&id| Inside(Some(id))),
            _ => Some(Inside(None)),
        }
    }

    fn push(&mut self, host_now: SimTime, call: Call) {
        let next = self.threads.len() as u32;
        let thread = *self.threads.entry(THREAD.with(|t| *t)).or_insert(next);
        self.trace.entries.push(Entry {
            thread,
            host_ns: host_now.as_ns(),
            call,
        });
    }

    /// The stream's id; a stream the trace has not seen is one the program got without a
    /// recorded call, which only a context's default stream can be.
    pub(crate) fn stream(&mut self, e: Entity) -> u32 {
        id_of(&mut self.streams, e).0
    }

    pub(crate) fn new_stream(&mut self, e: Entity) -> u32 {
        // A destroyed stream's entity may come back with another generation: a new id.
        self.streams.remove(&e);
        id_of(&mut self.streams, e).0
    }

    /// The stream's id and whether the trace sees it for the first time.
    pub(crate) fn seen_stream(&mut self, e: Entity) -> (u32, bool) {
        id_of(&mut self.streams, e)
    }

    pub(crate) fn event(&mut self, e: Entity) -> u32 {
        id_of(&mut self.events, e).0
    }

    pub(crate) fn context(&mut self, e: Entity) -> (u32, bool) {
        id_of(&mut self.contexts, e)
    }

    pub(crate) fn binary(&mut self, e: Entity) -> u32 {
        id_of(&mut self.binaries, e).0
    }

    pub(crate) fn comm(&mut self, e: Entity) -> u32 {
        id_of(&mut self.comms, e).0
    }

    pub(crate) fn new_function(&mut self, kernel: Kernel) -> u32 {
        let id = self.next_function;
        self.next_function += 1;
        self.functions
            .insert((kernel.index(), kernel.generation()), id);
        id
    }

    /// The launch of a host callback at `seq` on `stream`, as recorded; the calls its body
    /// makes are recorded as made inside it.
    pub(crate) fn host_func(&mut self, stream: Entity, seq: u64) -> Call {
        let id = self.callbacks.len() as u32;
        self.callbacks.insert((stream, seq), id);
        Call::HostFunc {
            stream: self.stream(stream),
        }
    }

    /// The trace-local id of a loaded binary's function.
    pub(crate) fn function(&self, kernel: Kernel) -> Option<u32> {
        self.functions
            .get(&(kernel.index(), kernel.generation()))
            .copied()
    }

    pub(crate) fn new_host(&mut self, buffer: &HostBuffer) -> u32 {
        let id = self.next_host;
        self.next_host += 1;
        self.hosts.push((buffer.clone(), id));
        id
    }

    pub(crate) fn host(&self, buffer: &HostBuffer) -> Option<u32> {
        self.hosts
            .iter()
            .find(|(b, _)| b.same_as(buffer))
            .map(|(_, id)| *id)
    }

    pub(crate) fn forget_host(&mut self, buffer: &HostBuffer) -> Option<u32> {
        let i = self.hosts.iter().position(|(b, _)| b.same_as(buffer))?;
        Some(self.hosts.swap_remove(i).1)
    }

    /// The trace-local id of native kernel `key` named `name`.
    fn kernel_id(&mut self, key: (u32, u32), name: &str) -> u32 {
        let names = &mut self.trace.kernels;
        *self.kernel_ids.entry(key).or_insert_with(|| {
            names.push(name.to_string());
            names.len() as u32 - 1
        })
    }

    /// Notes a kernel the program registered (its launches record their cost).
    pub(crate) fn program_kernel(&mut self, kernel: Kernel) {
        self.program_kernels
            .insert((kernel.index(), kernel.generation()));
    }

    /// Stores `bytes` in the trace's blobs; returns its hash.
    pub(crate) fn blob(&mut self, bytes: &[u8]) -> u64 {
        let h = fnv1a64(bytes);
        self.trace.blobs.entry(h).or_insert_with(|| bytes.to_vec());
        h
    }

    /// Whether host data is recorded.
    pub(crate) fn with_data(&self) -> bool {
        self.target.data
    }

    /// The launch of `kernel`, as recorded: its identity and, for a native kernel, its cost.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch(
        &mut self,
        world: &World,
        kernel: Kernel,
        block_dim: u32,
        args: &[Arg],
        tiling: &[u32],
        stream: Entity,
        timeout: Option<SimTime>,
    ) -> Call {
        // The launch is the stream's latest submission, its access set (from the typed launch
        // builder) in the task just submitted.
        let st = world.get::<npusim_components::StreamState>(stream);
        let seq = st.map_or(0, |st| st.submitted);
        let declared = st
            .and_then(|st| Some((st.doorbell.last()?, st.doorbell.last_extra())))
            .filter(|(t, _)| t.seq == seq)
            .and_then(|(t, extra)| {
                extra
                    .declared_access()
                    .map(|a| (t.submit, access_record(a)))
            });
        self.before = declared;
        let key = (kernel.index(), kernel.generation());
        let entry = world
            .res::<KernelRegistry>()
            .and_then(|registry| registry.get(kernel));
        let (kref, cost) = match entry {
            Ok(entry) => match &entry.body {
                KernelBody::Native(k) => {
                    // A replay has the built-in kernels; a program's own may need standing in for.
                    let cost = self.program_kernels.contains(&key).then(|| {
                        let words: smallvec::SmallVec<[u64; 8]> =
                            args.iter().map(|a| a.word()).collect();
                        (k.cost)(&words, block_dim)
                    });
                    (KernelRef::Native(self.kernel_id(key, &entry.name)), cost)
                }
                KernelBody::Binary(_) => {
                    // Its entry is pushed next: what it did is filled in once it has run.
                    self.pending_binary
                        .insert((stream, seq), self.trace.entries.len());
                    match self.functions.get(&(kernel.index(), kernel.generation())) {
                        Some(&f) => (KernelRef::Function(f), None),
                        None => (KernelRef::Native(self.kernel_id(key, &entry.name)), None),
                    }
                }
            },
            Err(_) => {
                let name = format!("kernel {}", kernel.index());
                (KernelRef::Native(self.kernel_id(key, &name)), None)
            }
        };
        Call::Launch {
            kernel: kref,
            block_dim,
            args: args.iter().map(|&a| arg_record(a)).collect(),
            tiling: tiling.to_vec(),
            stream: self.stream(stream),
            timeout_ns: timeout.map(SimTime::as_ns),
            cost,
            binary: None,
        }
    }

    /// The trace so far.
    pub(crate) fn trace(&mut self) -> &Trace {
        self.settle();
        &self.trace
    }
}

/// `record!(g, |r, w| call)`: [`Inner::record`] for the API's hot paths, with the closure built
/// only when recording is on (a closure built before the branch costs its captures' stores on
/// every call, recording or not).
macro_rules! record {
    ($g:ident, $f:expr) => {
        if $g.recorder.is_some() {
            $g.record($f)
        }
    };
}
pub(crate) use record;

impl Inner {
    /// Records the call `f` describes, if recording is on (one branch when it is off). A call
    /// made inside a host callback is recorded as made there (see the module docs).
    #[inline]
    pub(crate) fn record(&mut self, f: impl FnOnce(&mut Recorder, &World) -> Call) {
        if self.recorder.is_some() {
            self.record_now(|r, w| Some(f(r, w)));
        }
    }

    /// As [`Inner::record`], for a call that is recorded only sometimes (a handle the trace
    /// sees for the first time).
    #[inline]
    pub(crate) fn record_new(&mut self, f: impl FnOnce(&mut Recorder, &World) -> Option<Call>) {
        if self.recorder.is_some() {
            self.record_now(f);
        }
    }

    fn record_now(&mut self, f: impl FnOnce(&mut Recorder, &World) -> Option<Call>) {
        let Some(r) = self.recorder.as_deref_mut() else {
            return;
        };
        let Some(inside) = r.admit(self.runtime_id) else {
            return;
        };
        let Some(call) = f(r, &self.world) else {
            return;
        };
        let call = inside.wrap(call);
        if let Some((at, before)) = r.before.take() {
            r.push(at, inside.wrap(before));
        }
        let now = self.host_now();
        if let Some(r) = self.recorder.as_deref_mut() {
            r.push(now, call);
        }
    }

    /// Mutes (or unmutes) recording of the calling thread's calls while it makes a call that
    /// is recorded as one entry of its own.
    pub(crate) fn mute_recording(&mut self, on: bool) {
        if let Some(r) = self.recorder.as_deref_mut() {
            r.muted = on.then(|| THREAD.with(|t| *t));
        }
    }
}

/// A stream kind's code in a trace.
pub(crate) fn stream_kind_code(kind: StreamKind) -> u8 {
    match kind {
        StreamKind::Compute => 0,
        StreamKind::Copy => 1,
        StreamKind::Communication => 2,
    }
}

/// The stream kind a trace's code names.
pub(crate) fn stream_kind(code: u8) -> Option<StreamKind> {
    Some(match code {
        0 => StreamKind::Compute,
        1 => StreamKind::Copy,
        2 => StreamKind::Communication,
        _ => return None,
    })
}

/// A failure mode's code in a trace.
pub(crate) fn failure_mode_code(mode: crate::FailureMode) -> u8 {
    match mode {
        crate::FailureMode::StopOnFailure => 0,
        crate::FailureMode::Continue => 1,
    }
}

/// The failure mode a trace's code names.
pub(crate) fn failure_mode(code: u8) -> Option<crate::FailureMode> {
    Some(match code {
        0 => crate::FailureMode::StopOnFailure,
        1 => crate::FailureMode::Continue,
        _ => return None,
    })
}

/// An allocation policy's code in a trace.
pub(crate) fn policy_code(policy: AllocPolicy) -> u8 {
    match policy {
        AllocPolicy::HugeFirst => 0,
        AllocPolicy::HugeOnly => 1,
        AllocPolicy::NormalOnly => 2,
    }
}

/// The allocation policy a trace's code names.
pub(crate) fn policy(code: u8) -> Option<AllocPolicy> {
    Some(match code {
        0 => AllocPolicy::HugeFirst,
        1 => AllocPolicy::HugeOnly,
        2 => AllocPolicy::NormalOnly,
        _ => return None,
    })
}

/// Host data sent to the device of at most this many bytes is recorded even without
/// [`Recording::data`]: shapes set from the host, small parameters a replay needs.
pub const SMALL_DATA: u64 = 256;

/// A copy between the host and device address `device`, as recorded.
pub(crate) fn host_copy(
    r: &mut Recorder,
    dir: CopyDir,
    device: u64,
    host: &HostBuffer,
    offset: u64,
    bytes: u64,
    stream: Entity,
) -> Call {
    let to_device = dir == CopyDir::HostToDevice;
    let side = match r.host(host) {
        Some(id) => HostSide::Pinned(id),
        None => HostSide::Staged(host.len() as u64),
    };
    let data = if to_device && (r.with_data() || bytes <= SMALL_DATA) {
        host.bytes().ok().map(|b| {
            let (lo, hi) = (offset as usize, (offset + bytes) as usize);
            let bytes = b.get(lo..hi).unwrap_or(&[]).to_vec();
            drop(b);
            r.blob(&bytes)
        })
    } else {
        None
    };
    Call::CopyHost {
        to_device,
        device,
        host: side,
        offset,
        bytes,
        stream: r.stream(stream),
        data,
    }
}

/// One rank's collective, as recorded; `hosts` are its host sides (send, receive).
pub(crate) fn collective(
    r: &mut Recorder,
    call: &CollectiveCall,
    hosts: Option<(Option<HostBuffer>, Option<HostBuffer>)>,
    comm: &crate::Communicator,
    stream: Entity,
) -> Call {
    let (send_host, recv_host) = hosts.unwrap_or_default();
    let side = |addr: u64, host: Option<HostBuffer>| match host {
        Some(h) => r.host(&h).map_or(CommSide::None, CommSide::Host),
        None if addr != 0 => CommSide::Device(addr),
        None => CommSide::None,
    };
    let send = side(call.send, send_host);
    let recv = side(call.recv, recv_host);
    Call::Collective {
        kind: call.kind as u32,
        dtype: call.dtype as u32,
        op: call.op as u32,
        count: call.count,
        peer: call.peer,
        send,
        recv,
        comm: r.comm(comm.entity),
        rank: comm.rank(),
        stream: r.stream(stream),
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // A runtime ending without `finish_recording` still leaves its trace.
        self.settle();
        if let Some(path) = self.target.path.take()
            && let Err(e) = self.trace.write(&path)
        {
            eprintln!("npusim: the recording could not be written: {e}");
        }
    }
}

impl crate::Runtime {
    /// Whether this runtime records its API calls.
    pub fn is_recording(&self) -> bool {
        self.lock().recorder.is_some()
    }

    /// The trace recorded so far (a copy; recording goes on). `None` when not recording.
    pub fn trace_snapshot(&self) -> Option<Trace> {
        self.lock().recorder.as_mut().map(|r| r.trace().clone())
    }

    /// Stops recording and returns the trace (nothing is written). `None` when not recording.
    pub fn take_trace(&self) -> Option<Trace> {
        let mut r = *self.stop_recording()?;
        r.target.path = None;
        r.settle();
        Some(std::mem::take(&mut r.trace))
    }

    /// Takes the recorder out: the frame logs binary launches no more.
    fn stop_recording(&self) -> Option<Box<Recorder>> {
        let mut g = self.lock();
        let r = g.recorder.take()?;
        if let Some(mut mode) = g.world.get_resource_mut::<ExecutionMode>() {
            mode.binary_log = None;
            mode.shape_log = None;
        }
        Some(r)
    }

    /// Stops recording and writes the trace to its file; returns the path (`None` when not
    /// recording, or recording in memory only). A runtime that ends while recording writes
    /// its trace itself, but cannot report a failure.
    pub fn finish_recording(&self) -> crate::NpuResult<Option<PathBuf>> {
        let Some(r) = self.stop_recording() else {
            return Ok(None);
        };
        let mut r = *r;
        r.settle();
        let path = r.target.path.take();
        let trace = std::mem::take(&mut r.trace);
        if let Some(p) = &path {
            trace.write(p)?;
        }
        Ok(path)
    }
}
