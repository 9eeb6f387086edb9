//! The trace format: what a recording holds and how it is stored. A trace is a header (the
//! machine it was recorded on) and the API calls in the order they took effect, each with the
//! host thread that made it and the host's simulated time after it; host data and kernel
//! binaries ride beside them in a content-addressed store, so a buffer sent twice is stored once.
//!
//! Handles are trace-local numbers: streams, events, contexts, host buffers, binaries,
//! functions and communicators are numbered in the order the trace first saw them, per kind.
//! Device addresses are recorded as the program saw them; a replay maps them through the
//! allocations it makes (an address inside a recorded allocation becomes the same offset in
//! the replayed one), so a replay on another preset, whose pool places blocks elsewhere,
//! still names the right memory.
//!
//! On disk: the 8 bytes `NPUSIMTR`, the format version (u32, little endian), the payload's
//! length (u64) and its FNV-1a 64 checksum (u64), then the payload: the [`Trace`] in
//! `postcard` encoding. [`Trace::to_json`] gives the same content as JSON for reading.
//!
//! Version history: 1 — the first format; 2 — adds (at the end of [`Call`], so version 1
//! traces still read) numbered event waits, peer copies, `record_stream`, `trim_memory`,
//! failure modes, core limits, run-time timeouts, timed event and device waits, op
//! registrations, calls made inside host callbacks and the launch builder's access sets.

use std::collections::BTreeMap;
use std::path::Path;

use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;
use npusim_device::link::TopologyConfig;
use serde::{Deserialize, Serialize};

/// The magic bytes a trace file starts with.
pub const MAGIC: &[u8; 8] = b"NPUSIMTR";

/// The format version this build writes (and the newest it reads).
pub const FORMAT_VERSION: u32 = 2;

/// The bytes before the payload: magic, version, payload length, checksum.
const PREFIX: usize = 8 + 4 + 8 + 8;

/// A recorded program.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The machine it ran on.
    pub header: TraceHeader,
    /// The API calls, in the order they took effect.
    pub entries: Vec<Entry>,
    /// Host data and kernel binaries by content hash (FNV-1a 64).
    pub blobs: BTreeMap<u64, Vec<u8>>,
    /// Names of the native kernels launched, by trace-local kernel id.
    pub kernels: Vec<String>,
}

/// The machine a trace was recorded on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Number of devices.
    pub devices: u32,
    /// The preset every device used.
    pub device: DeviceConfig,
    /// How the devices were connected.
    pub topology: TopologyConfig,
    /// The modelled host costs of API calls.
    pub host: HostCostsRecord,
    /// Whether host data sent to the devices was recorded (else copies from the host replay
    /// zeroes in a functional replay).
    pub with_data: bool,
}

impl Default for TraceHeader {
    fn default() -> Self {
        Self {
            devices: 1,
            device: DeviceConfig::default(),
            topology: TopologyConfig::default(),
            host: HostCostsRecord::from(&crate::HostCosts::default()),
            with_data: false,
        }
    }
}

/// [`crate::HostCosts`], as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCostsRecord {
    /// See [`crate::HostCosts::call_ns`].
    pub call_ns: u64,
    /// See [`crate::HostCosts::launch_ns`].
    pub launch_ns: u64,
    /// See [`crate::HostCosts::copy_call_ns`].
    pub copy_call_ns: u64,
    /// See [`crate::HostCosts::sync_ns`].
    pub sync_ns: u64,
    /// See [`crate::HostCosts::stage_ns_per_kib`].
    pub stage_ns_per_kib: u64,
}

impl From<&crate::HostCosts> for HostCostsRecord {
    fn from(c: &crate::HostCosts) -> Self {
        Self {
            call_ns: c.call_ns,
            launch_ns: c.launch_ns,
            copy_call_ns: c.copy_call_ns,
            sync_ns: c.sync_ns,
            stage_ns_per_kib: c.stage_ns_per_kib,
        }
    }
}

impl From<&HostCostsRecord> for crate::HostCosts {
    fn from(c: &HostCostsRecord) -> Self {
        Self {
            call_ns: c.call_ns,
            launch_ns: c.launch_ns,
            copy_call_ns: c.copy_call_ns,
            sync_ns: c.sync_ns,
            stage_ns_per_kib: c.stage_ns_per_kib,
        }
    }
}

/// One API call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The host thread that made it (trace-local: 0 is the first thread seen).
    pub thread: u32,
    /// The host's simulated clock after the call, in nanoseconds.
    pub host_ns: u64,
    /// The call.
    pub call: Call,
}

/// Which kernel a launch names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KernelRef {
    /// A native kernel (built in, or registered by the program), by its index in
    /// [`Trace::kernels`].
    Native(u32),
    /// A function of a loaded binary (the trace-local function id).
    Function(u32),
}

/// A kernel argument, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum ArgRecord {
    /// A device pointer (mapped through the replay's allocations).
    Ptr(u64),
    /// An unsigned integer.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A float (its bits).
    F32(u32),
}

/// A tensor argument of an op launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorRecord {
    /// Where its data is.
    pub ptr: u64,
    /// Its shape.
    pub shape: ShapeRecord,
}

/// How an op launch's tensor gets its shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ShapeRecord {
    /// Known at the launch.
    Static(Vec<i64>),
    /// In a shape handle's slot (its trace-local id).
    Dynamic(u32),
    /// An output inferred on the device.
    Inferred,
}

/// What a binary kernel launch did when it ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryRecord {
    /// Each block's cycles, in block order.
    pub block_cycles: Vec<u64>,
    /// Distinct bytes read plus written in global memory.
    pub hbm_bytes: u64,
    /// The byte ranges it touched, `(address, bytes)`.
    pub access: Vec<(u64, u64)>,
}

/// The host side of a copy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HostSide {
    /// A pinned buffer from `malloc_host` (its trace-local id).
    Pinned(u32),
    /// Pageable memory staged for the call, of this many bytes.
    Staged(u64),
}

/// One side of a collective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CommSide {
    /// No buffer.
    None,
    /// Device memory.
    Device(u64),
    /// A pinned host buffer (its trace-local id).
    Host(u32),
}

/// A recorded API call. Ids are trace-local (see the module docs); `u64` addresses are as the
/// program saw them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Call {
    /// `set_device`: the thread's current context becomes the device's primary one.
    SetDevice {
        /// Device index.
        device: u32,
    },
    /// `create_context` on `device`, which becomes current.
    CreateContext {
        /// Device index.
        device: u32,
        /// The new context.
        ctx: u32,
    },
    /// `set_current_context`.
    SetCurrentContext {
        /// The context.
        ctx: u32,
    },
    /// `push_context`.
    PushContext {
        /// The context.
        ctx: u32,
    },
    /// `pop_context`.
    PopContext,
    /// `destroy_context`.
    DestroyContext {
        /// The context.
        ctx: u32,
    },
    /// `create_stream_with`.
    CreateStream {
        /// The new stream.
        stream: u32,
        /// Its priority.
        priority: i32,
        /// Its kind: 0 compute, 1 copy, 2 communication.
        kind: u8,
    },
    /// `default_stream`, the first time the trace sees that stream.
    DefaultStream {
        /// The current context's default stream.
        stream: u32,
    },
    /// `current_context`, the first time the trace sees that context.
    CurrentContext {
        /// The thread's current context.
        ctx: u32,
    },
    /// `destroy_stream`.
    DestroyStream {
        /// The stream.
        stream: u32,
    },
    /// `synchronize_stream` (with a timeout: `synchronize_stream_timeout`).
    SynchronizeStream {
        /// The stream.
        stream: u32,
        /// The timeout, in ns.
        timeout_ns: Option<u64>,
    },
    /// `synchronize_device`.
    SynchronizeDevice,
    /// `create_event`.
    CreateEvent {
        /// The new event.
        event: u32,
    },
    /// `destroy_event`.
    DestroyEvent {
        /// The event.
        event: u32,
    },
    /// `record_event`.
    RecordEvent {
        /// The event.
        event: u32,
        /// The stream.
        stream: u32,
    },
    /// `stream_wait_event`.
    StreamWaitEvent {
        /// The waiting stream.
        stream: u32,
        /// The event.
        event: u32,
    },
    /// `synchronize_event`.
    SynchronizeEvent {
        /// The event.
        event: u32,
    },
    /// `malloc_with_policy`.
    Malloc {
        /// Bytes requested.
        size: u64,
        /// Page policy: 0 huge first, 1 huge only, 2 normal only.
        policy: u8,
        /// The address returned.
        ptr: u64,
    },
    /// `free` (`stream`: `free_async`).
    Free {
        /// The block's address.
        ptr: u64,
        /// The stream a stream-ordered free follows.
        stream: Option<u32>,
    },
    /// `malloc_host`.
    MallocHost {
        /// Bytes.
        size: u64,
        /// The new buffer.
        host: u32,
    },
    /// `free_host`.
    FreeHost {
        /// The buffer.
        host: u32,
    },
    /// A copy between the host and the device (`memcpy_htod_async_at`, `memcpy_dtoh_async_at`
    /// and the calls built on them). Small staged values sent to the device (at most
    /// [`super::SMALL_DATA`] bytes, such as `set_shape_async`'s shapes) carry their data
    /// always: a replay without data needs them.
    CopyHost {
        /// To the device (else to the host).
        to_device: bool,
        /// The device address.
        device: u64,
        /// The host side.
        host: HostSide,
        /// Byte offset into the host side.
        offset: u64,
        /// Bytes.
        bytes: u64,
        /// The stream.
        stream: u32,
        /// What a copy to the device sent, in [`Trace::blobs`], when host data is recorded.
        data: Option<u64>,
    },
    /// `memcpy_dtod_async`.
    CopyDevice {
        /// Destination.
        dst: u64,
        /// Source.
        src: u64,
        /// Bytes.
        bytes: u64,
        /// The stream.
        stream: u32,
    },
    /// `memset_async`.
    Memset {
        /// Destination.
        dst: u64,
        /// The byte value.
        value: u8,
        /// Bytes.
        bytes: u64,
        /// The stream.
        stream: u32,
    },
    /// `register_kernel`: a native kernel the program registered (its body is code, not data:
    /// a replay gets it from [`super::ReplayOptions::kernels`] or stands in for it).
    RegisterKernel {
        /// Its name.
        name: String,
    },
    /// `load_binary` (and `load_binary_file`).
    LoadBinary {
        /// The new binary.
        binary: u32,
        /// Its content, in [`Trace::blobs`].
        hash: u64,
    },
    /// `get_function`.
    GetFunction {
        /// The binary.
        binary: u32,
        /// The function's name.
        name: String,
        /// The new function.
        function: u32,
    },
    /// `unload_binary`.
    UnloadBinary {
        /// The binary.
        binary: u32,
    },
    /// A kernel launch (`launch`, `launch_with_tiling`, `launch_with_timeout`).
    Launch {
        /// The kernel.
        kernel: KernelRef,
        /// Blocks.
        block_dim: u32,
        /// Arguments.
        args: Vec<ArgRecord>,
        /// Tiling words.
        tiling: Vec<u32>,
        /// The stream.
        stream: u32,
        /// The launch's own timeout, in ns.
        timeout_ns: Option<u64>,
        /// A native kernel's cost as its cost function gave it at the launch (so a replay
        /// without the kernel's code still knows its work).
        cost: Option<KernelCost>,
        /// A binary kernel's run: what its blocks did (so a replay without data prices it).
        /// Boxed: most launches have none, and entries stay small.
        binary: Option<Box<BinaryRecord>>,
    },
    /// `create_shape`.
    CreateShape {
        /// The new shape handle.
        shape: u32,
    },
    /// `free_shape`.
    FreeShape {
        /// The shape handle.
        shape: u32,
    },
    /// `read_shape`, after its synchronize: the host time the read cost.
    ReadShape {
        /// Nanoseconds.
        ns: u64,
    },
    /// `launch_op`.
    LaunchOp {
        /// The op, by name.
        op: String,
        /// Input tensors.
        inputs: Vec<TensorRecord>,
        /// Output tensors.
        outputs: Vec<TensorRecord>,
        /// Attributes.
        attrs: Vec<ArgRecord>,
        /// The stream.
        stream: u32,
        /// The shape slot a data-dependent output published when it ran (so a replay
        /// without data knows it).
        published: Option<Vec<u8>>,
    },
    /// `launch_host_func`: a host callback (its body is not recorded; a replay runs none).
    HostFunc {
        /// The stream.
        stream: u32,
    },
    /// `host_work`.
    HostWork {
        /// Simulated CPU time, in ns.
        ns: u64,
    },
    /// `comm_init_all_with`.
    CommInit {
        /// The ranks' devices, in rank order.
        devices: Vec<u32>,
        /// The new communicator.
        comm: u32,
    },
    /// `comm_destroy` of one rank's handle.
    CommDestroy {
        /// The communicator.
        comm: u32,
        /// The rank.
        rank: u32,
    },
    /// A collective or point-to-point operation of one rank.
    Collective {
        /// The operation (`CollectiveKind` code).
        kind: u32,
        /// Element type (`DataType` code).
        dtype: u32,
        /// Reduction (`ReduceOp` code).
        op: u32,
        /// Elements, as the call gave them.
        count: u64,
        /// Root or peer rank.
        peer: u32,
        /// Send side.
        send: CommSide,
        /// Receive side.
        recv: CommSide,
        /// The communicator.
        comm: u32,
        /// This rank.
        rank: u32,
        /// The stream.
        stream: u32,
    },
    /// `stream_wait_event_record`: a wait for one numbered record of an event.
    StreamWaitEventRecord {
        /// The waiting stream.
        stream: u32,
        /// The event.
        event: u32,
        /// The record's number (1-based).
        record: u64,
        /// The wait's own timeout, in ns.
        timeout_ns: Option<u64>,
    },
    /// `memcpy_peer_async`.
    CopyPeer {
        /// Destination.
        dst: u64,
        /// The destination's device.
        dst_device: u32,
        /// Source.
        src: u64,
        /// The source's device.
        src_device: u32,
        /// Bytes.
        bytes: u64,
        /// The stream.
        stream: u32,
    },
    /// `record_stream`.
    RecordStream {
        /// An address inside the block.
        ptr: u64,
        /// The stream.
        stream: u32,
    },
    /// `trim_memory` of the current context's pool.
    TrimMemory,
    /// `set_failure_mode` of the current context: 0 stop on failure, 1 continue.
    SetFailureMode {
        /// The mode's code.
        mode: u8,
    },
    /// `set_core_limits`.
    SetCoreLimits {
        /// Device index.
        device: u32,
        /// Cube cores, `None` for no cap.
        cube: Option<u32>,
        /// Vector cores, `None` for no cap.
        vector: Option<u32>,
    },
    /// `set_kernel_timeout` (every device).
    SetKernelTimeout {
        /// Simulated nanoseconds.
        ns: u64,
    },
    /// `set_kernel_wall_limit` (every device).
    SetKernelWallLimit {
        /// Wall-clock nanoseconds (0: off).
        ns: u64,
    },
    /// `set_event_wait_timeout` (every device).
    SetEventWaitTimeout {
        /// Simulated nanoseconds; `None` waits for ever.
        ns: Option<u64>,
    },
    /// `set_callback_timeout`.
    SetCallbackTimeout {
        /// Wall-clock nanoseconds.
        ns: u64,
    },
    /// `synchronize_event_timeout`, with its outcome.
    SynchronizeEventTimeout {
        /// The event.
        event: u32,
        /// The timeout, in ns.
        timeout_ns: u64,
        /// Whether it gave up at its deadline (`ACL_ERROR_RT_WAIT_TIMEOUT`).
        timed_out: bool,
    },
    /// `synchronize_device_timeout`, with its outcome.
    SynchronizeDeviceTimeout {
        /// The timeout, in ns.
        timeout_ns: u64,
        /// Whether it gave up at its deadline (`ACL_ERROR_RT_WAIT_TIMEOUT`).
        timed_out: bool,
    },
    /// `register_op`: an op the program registered, by name (its shape inference, tiling and
    /// kernel are code: a replay gets it from [`super::ReplayOptions::ops`]).
    RegisterOp {
        /// The op's name.
        name: String,
    },
    /// `register_npu_ops`: the Ascend-style ops over the functions of the binaries the call
    /// loaded (recorded before it), in `NpuOps` order; a replay registers them itself.
    RegisterNpuOps {
        /// The functions (trace-local ids): vadd, softmax, layernorm, matmul.
        functions: Vec<u32>,
    },
    /// A call made inside a host callback, on its thread, at the point it was made (the
    /// entry's host time is the callback's own clock); a replay makes it when the replayed
    /// callback runs.
    InCallback {
        /// The callback: the n-th `launch_host_func` of the trace (0-based).
        callback: u32,
        /// The call.
        call: Box<Call>,
    },
    /// The access set the typed launch builder declared for the thread's next launch (the
    /// entry right after this one).
    DeclaredAccess {
        /// The ranges, as declared.
        ranges: Vec<AccessRecord>,
        /// Whether every range is exact (else some stand for their whole block).
        exact: bool,
    },
}

/// One range of a declared access set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRecord {
    /// Device address of the first byte (as the program saw it).
    pub addr: u64,
    /// Bytes (0: the whole block behind `addr`).
    pub bytes: u64,
    /// Direction: 0 read, 1 write, 2 both.
    pub mode: u8,
    /// In the peer's address space (else the task's own context).
    pub peer: bool,
}

impl Call {
    /// The call's API name, for progress and summaries.
    pub fn name(&self) -> &'static str {
        match self {
            Call::SetDevice { .. } => "set_device",
            Call::CreateContext { .. } => "create_context",
            Call::SetCurrentContext { .. } => "set_current_context",
            Call::PushContext { .. } => "push_context",
            Call::PopContext => "pop_context",
            Call::DestroyContext { .. } => "destroy_context",
            Call::CreateStream { .. } => "create_stream",
            Call::DefaultStream { .. } => "default_stream",
            Call::CurrentContext { .. } => "current_context",
            Call::DestroyStream { .. } => "destroy_stream",
            Call::SynchronizeStream { .. } => "synchronize_stream",
            Call::SynchronizeDevice => "synchronize_device",
            Call::CreateEvent { .. } => "create_event",
            Call::DestroyEvent { .. } => "destroy_event",
            Call::RecordEvent { .. } => "record_event",
            Call::StreamWaitEvent { .. } => "stream_wait_event",
            Call::SynchronizeEvent { .. } => "synchronize_event",
            Call::Malloc { .. } => "malloc",
            Call::Free { .. } => "free",
            Call::MallocHost { .. } => "malloc_host",
            Call::FreeHost { .. } => "free_host",
            Call::CopyHost { .. } => "memcpy_host",
            Call::CopyDevice { .. } => "memcpy_dtod",
            Call::Memset { .. } => "memset",
            Call::RegisterKernel { .. } => "register_kernel",
            Call::LoadBinary { .. } => "load_binary",
            Call::GetFunction { .. } => "get_function",
            Call::UnloadBinary { .. } => "unload_binary",
            Call::Launch { .. } => "launch",
            Call::HostFunc { .. } => "launch_host_func",
            Call::CreateShape { .. } => "create_shape",
            Call::FreeShape { .. } => "free_shape",
            Call::LaunchOp { .. } => "launch_op",
            Call::ReadShape { .. } => "read_shape",
            Call::HostWork { .. } => "host_work",
            Call::CommInit { .. } => "comm_init",
            Call::CommDestroy { .. } => "comm_destroy",
            Call::Collective { .. } => "collective",
            Call::StreamWaitEventRecord { .. } => "stream_wait_event_record",
            Call::CopyPeer { .. } => "memcpy_peer",
            Call::RecordStream { .. } => "record_stream",
            Call::TrimMemory => "trim_memory",
            Call::SetFailureMode { .. } => "set_failure_mode",
            Call::SetCoreLimits { .. } => "set_core_limits",
            Call::SetKernelTimeout { .. } => "set_kernel_timeout",
            Call::SetKernelWallLimit { .. } => "set_kernel_wall_limit",
            Call::SetEventWaitTimeout { .. } => "set_event_wait_timeout",
            Call::SetCallbackTimeout { .. } => "set_callback_timeout",
            Call::SynchronizeEventTimeout { .. } => "synchronize_event_timeout",
            Call::SynchronizeDeviceTimeout { .. } => "synchronize_device_timeout",
            Call::RegisterOp { .. } => "register_op",
            Call::RegisterNpuOps { .. } => "register_npu_ops",
            Call::InCallback { call, .. } => call.name(),
            Call::DeclaredAccess { .. } => "declared_access",
        }
    }
}

/// Why a trace could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file does not start with the trace magic.
    #[error("not an npusim trace (it does not start with \"NPUSIMTR\")")]
    NotATrace,
    /// The file ends before its header or payload does.
    #[error("the trace is truncated: {have} bytes of {need}")]
    Truncated {
        /// Bytes present.
        have: u64,
        /// Bytes the header announces.
        need: u64,
    },
    /// Written by a newer npusim.
    #[error(
        "trace format version {found} is newer than this npusim reads (up to {FORMAT_VERSION}); \
         replay it with a newer npusim"
    )]
    FutureVersion {
        /// The file's version.
        found: u32,
    },
    /// The payload does not match its checksum.
    #[error("the trace is corrupted (checksum mismatch)")]
    Corrupted,
    /// The payload does not decode (its checksum matched: another build's format).
    #[error(
        "the trace does not decode ({0}): it was written by an npusim build whose format \
         differs from this one's"
    )]
    Decode(String),
}

impl From<TraceError> for crate::NpuError {
    fn from(e: TraceError) -> Self {
        match e {
            TraceError::Io { .. } => crate::NpuError::InvalidParam(e.to_string()),
            other => crate::NpuError::InvalidParam(format!("trace: {other}")),
        }
    }
}

/// FNV-1a, 64 bits: the content hash of blobs and the payload checksum.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Trace {
    /// The trace in its file format.
    pub fn to_bytes(&self) -> Result<Vec<u8>, TraceError> {
        let payload = postcard::to_allocvec(self).map_err(|e| TraceError::Decode(e.to_string()))?;
        let mut out = Vec::with_capacity(PREFIX + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&fnv1a64(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Reads a trace from its file format, checking magic, version, length and checksum.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TraceError> {
        if bytes.len() < 8 || &bytes[..8] != MAGIC {
            if bytes.len() < 8 && MAGIC.starts_with(bytes) {
                return Err(TraceError::Truncated {
                    have: bytes.len() as u64,
                    need: PREFIX as u64,
                });
            }
            return Err(TraceError::NotATrace);
        }
        if bytes.len() < PREFIX {
            return Err(TraceError::Truncated {
                have: bytes.len() as u64,
                need: PREFIX as u64,
            });
        }
        let word = |at: usize, n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&bytes[at..at + n]);
            u64::from_le_bytes(b)
        };
        let version = word(8, 4) as u32;
        if version > FORMAT_VERSION {
            return Err(TraceError::FutureVersion { found: version });
        }
        let len = word(12, 8);
        let sum = word(20, 8);
        let need = (PREFIX as u64).saturating_add(len);
        if (bytes.len() as u64) < need {
            return Err(TraceError::Truncated {
                have: bytes.len() as u64,
                need,
            });
        }
        let payload = &bytes[PREFIX..need as usize];
        if fnv1a64(payload) != sum {
            return Err(TraceError::Corrupted);
        }
        postcard::from_bytes(payload).map_err(|e| TraceError::Decode(e.to_string()))
    }

    /// Writes the trace to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), TraceError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_bytes()?).map_err(|source| TraceError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Reads the trace at `path`.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes)
    }

    /// The trace as pretty JSON (blobs as their lengths only).
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct View<'a> {
            format_version: u32,
            header: &'a TraceHeader,
            kernels: &'a [String],
            entries: &'a [Entry],
            blobs: BTreeMap<String, usize>,
        }
        let view = View {
            format_version: FORMAT_VERSION,
            header: &self.header,
            kernels: &self.kernels,
            entries: &self.entries,
            blobs: self
                .blobs
                .iter()
                .map(|(h, b)| (format!("{h:016x}"), b.len()))
                .collect(),
        };
        serde_json::to_string_pretty(&view).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Trace {
        Trace {
            entries: vec![
                Entry {
                    thread: 0,
                    host_ns: 200,
                    call: Call::CreateStream {
                        stream: 1,
                        priority: 0,
                        kind: 0,
                    },
                },
                Entry {
                    thread: 0,
                    host_ns: 1700,
                    call: Call::HostWork { ns: 1500 },
                },
            ],
            ..Trace::default()
        }
    }

    #[test]
    fn a_trace_reads_back_as_written() {
        let t = sample();
        assert_eq!(Trace::from_bytes(&t.to_bytes().unwrap()).unwrap(), t);
    }

    #[test]
    fn every_truncation_of_a_trace_is_reported_as_truncated() {
        let bytes = sample().to_bytes().unwrap();
        for cut in 0..bytes.len() {
            let err = Trace::from_bytes(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(err, TraceError::Truncated { .. }),
                "cut at {cut}: {err}"
            );
        }
    }

    #[test]
    fn a_flipped_payload_byte_is_reported_as_corrupted() {
        let mut bytes = sample().to_bytes().unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        assert!(matches!(
            Trace::from_bytes(&bytes),
            Err(TraceError::Corrupted)
        ));
    }

    #[test]
    fn a_newer_format_version_is_refused_by_name() {
        let mut bytes = sample().to_bytes().unwrap();
        bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let err = Trace::from_bytes(&bytes).unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
    }

    #[test]
    fn a_file_of_something_else_is_not_a_trace() {
        assert!(matches!(
            Trace::from_bytes(b"{\"traceEvents\": []}"),
            Err(TraceError::NotATrace)
        ));
    }
}
