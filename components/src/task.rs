//! The task entity: one unit of work in a stream. Its descriptor is a plain-old-data struct, the
//! same bytes a real runtime would write into the device's submission queue; everything that
//! cannot be plain data (a host buffer, a host callback) rides beside it.

use std::sync::Mutex;

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;
use bytemuck::{Pod, Zeroable};

use crate::error::NpuError;
use crate::host::HostBuffer;
use crate::time::SimTime;

/// Most argument words a launch carries.
pub const MAX_ARGS: usize = 16;
/// Most tiling words a launch carries.
pub const MAX_TILING: usize = 20;
/// Most tensors (inputs and outputs) an op launch describes ([`crate::shape`]).
pub const MAX_TENSORS: usize = 8;
/// Most dimensions the static shapes of one op launch have together.
pub const MAX_STATIC_DIMS: usize = 10;

/// What a task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TaskKind {
    /// A kernel launch.
    Kernel = 1,
    /// A copy.
    Memcpy = 2,
    /// A memset.
    Memset = 3,
    /// An event record.
    EventRecord = 4,
    /// A wait for an event record.
    EventWait = 5,
    /// A host callback.
    HostCallback = 6,
    /// A collective.
    Collective = 7,
}

impl TaskKind {
    /// From the descriptor's `kind` word.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => TaskKind::Kernel,
            2 => TaskKind::Memcpy,
            3 => TaskKind::Memset,
            4 => TaskKind::EventRecord,
            5 => TaskKind::EventWait,
            6 => TaskKind::HostCallback,
            7 => TaskKind::Collective,
            _ => return None,
        })
    }

    /// A short name for timelines.
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Kernel => "kernel",
            TaskKind::Memcpy => "memcpy",
            TaskKind::Memset => "memset",
            TaskKind::EventRecord => "event_record",
            TaskKind::EventWait => "event_wait",
            TaskKind::HostCallback => "host_callback",
            TaskKind::Collective => "collective",
        }
    }
}

/// Copy directions, in the descriptor's `flags` word of a memcpy.
pub mod copy_dir {
    /// Host to device.
    pub const H2D: u32 = 1;
    /// Device to host.
    pub const D2H: u32 = 2;
    /// Device to device.
    pub const D2D: u32 = 3;
    /// Device to another device, over the interconnect (see
    /// [`crate::collective::peer_word`] for its argument words).
    pub const PEER: u32 = 4;
}

/// The task descriptor, as written to the submission queue.
///
/// Word use by kind: a kernel has `kernel`, `block_dim`, `args[..arg_count]` (bit `i` of
/// `float_mask` set when argument `i` is an `f32`) and `tiling[..tiling_len]`; a memcpy has
/// `args = [dst, src, bytes]` and its direction in `flags`; a memset `args = [dst, value, bytes]`;
/// an event record or wait `args = [event entity bits, record number]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct TaskDescriptor {
    /// [`TaskKind`] as a number.
    pub kind: u32,
    /// Blocks of a kernel launch.
    pub block_dim: u32,
    /// Kernel id.
    pub kernel: u32,
    /// Kind-specific flags.
    pub flags: u32,
    /// Entry PC of a binary kernel (0 for native kernels).
    pub pc: u64,
    /// Argument words used.
    pub arg_count: u32,
    /// Bit `i` set when argument `i` is a float.
    pub float_mask: u32,
    /// Tiling words used.
    pub tiling_len: u32,
    /// Tiling key chosen by the tiling function.
    pub tiling_key: u32,
    /// Argument words.
    pub args: [u64; MAX_ARGS],
    /// Tiling words.
    pub tiling: [u32; MAX_TILING],
    /// Tensors of an op launch: inputs in the low 16 bits, outputs in the high 16 (0 for a
    /// plain kernel). See [`crate::shape`].
    pub tensors: u32,
    /// How far shape propagation and tiling got ([`crate::shape::shape_state`]).
    pub shape_state: u32,
    /// Per tensor: its slot in the context's shape buffer, or [`crate::shape::NO_SLOT`].
    pub shape_slots: [u32; MAX_TENSORS],
    /// Per tensor without a slot: the rank of its static shape in `static_dims`, or
    /// [`crate::shape::NO_STATIC_SHAPE`].
    pub static_ranks: [u8; MAX_TENSORS],
    /// The static shapes' dimensions, concatenated in tensor order.
    pub static_dims: [u64; MAX_STATIC_DIMS],
    /// Device workspace the tiling asked for, in bytes.
    pub workspace_bytes: u64,
}

impl TaskDescriptor {
    /// An all-zero descriptor of `kind`.
    pub fn new(kind: TaskKind) -> Self {
        Self {
            kind: kind as u32,
            ..Zeroable::zeroed()
        }
    }

    /// The kind, if the word is valid.
    pub fn task_kind(&self) -> Option<TaskKind> {
        TaskKind::from_u32(self.kind)
    }

    /// The argument words in use.
    pub fn arg_words(&self) -> &[u64] {
        &self.args[..(self.arg_count as usize).min(MAX_ARGS)]
    }

    /// The tiling words in use.
    pub fn tiling_words(&self) -> &[u32] {
        &self.tiling[..(self.tiling_len as usize).min(MAX_TILING)]
    }

    /// Input and output tensor counts of an op launch (both 0 for a plain kernel).
    pub fn tensor_counts(&self) -> (usize, usize) {
        (
            (self.tensors & 0xffff) as usize,
            (self.tensors >> 16) as usize,
        )
    }
}

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// In its stream, waiting for its turn or its events.
    Queued,
    /// Its dependencies are met; waiting for a free unit.
    Ready,
    /// Occupying units until its end time.
    Running,
    /// Finished normally.
    Done,
    /// Faulted.
    Failed,
    /// Never ran: an earlier failure aborted it.
    Aborted,
    /// Retired: the entity waits in the task pool to be reused by a later submission.
    Retired,
}

/// A host callback body.
pub type Callback = Box<dyn FnOnce() + Send>;

/// The parts of a task that are not plain data.
#[derive(Default)]
pub enum TaskExtra {
    /// Nothing beyond the descriptor.
    #[default]
    None,
    /// The host side of a copy: a buffer and a byte offset in it.
    Host {
        /// The buffer.
        buffer: HostBuffer,
        /// Byte offset.
        offset: u64,
    },
    /// The body of a host callback (taken when it runs).
    Callback(Mutex<Option<Callback>>),
}

impl std::fmt::Debug for TaskExtra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskExtra::None => write!(f, "None"),
            TaskExtra::Host { offset, .. } => write!(f, "Host(+{offset})"),
            TaskExtra::Callback(_) => write!(f, "Callback"),
        }
    }
}

/// A submission rung on the doorbell: becomes a task entity at ingest.
#[derive(Debug)]
pub struct NewTask {
    /// The stream.
    pub stream: Entity,
    /// Its context.
    pub context: Entity,
    /// Its device entity.
    pub device: Entity,
    /// Sequence number on the stream.
    pub seq: u64,
    /// Stream priority.
    pub priority: i32,
    /// Stream creation order (priority tie-break).
    pub stream_order: u64,
    /// Host time of the call.
    pub submit: SimTime,
    /// The descriptor.
    pub desc: TaskDescriptor,
    /// Non-plain-data parts.
    pub extra: TaskExtra,
}

/// A task.
#[derive(Component, Debug)]
pub struct Task {
    /// The descriptor.
    pub desc: TaskDescriptor,
    /// Its stream.
    pub stream: Entity,
    /// Its context.
    pub context: Entity,
    /// Its device entity.
    pub device: Entity,
    /// Sequence number on the stream (1-based).
    pub seq: u64,
    /// Stream priority at submission.
    pub priority: i32,
    /// Stream creation order.
    pub stream_order: u64,
    /// Where it is in its life.
    pub status: TaskStatus,
    /// Host time of submission; it cannot start earlier.
    pub submit: SimTime,
    /// Simulated start.
    pub start: SimTime,
    /// Simulated end.
    pub end: SimTime,
    /// AI cores held while running.
    pub cores: u32,
    /// DMA engines held while running.
    pub dma: u32,
    /// Non-plain-data parts.
    pub extra: TaskExtra,
    /// Why it failed or was aborted (boxed: rare, and it keeps the component small).
    pub error: Option<Box<NpuError>>,
    /// Whether its effect was already applied (device-local work executed with the other
    /// devices' in a parallel batch, or a collective refused at the rendezvous); its outcome is
    /// then `error`.
    pub executed: bool,
}

impl Task {
    /// The task for a doorbell entry.
    pub fn from_new(n: NewTask) -> Self {
        Self {
            desc: n.desc,
            stream: n.stream,
            context: n.context,
            device: n.device,
            seq: n.seq,
            priority: n.priority,
            stream_order: n.stream_order,
            status: TaskStatus::Queued,
            submit: n.submit,
            start: SimTime::ZERO,
            end: SimTime::ZERO,
            cores: 0,
            dma: 0,
            extra: n.extra,
            error: None,
            executed: false,
        }
    }

    /// The kind (a corrupt descriptor word reads as a kernel, which then fails cleanly).
    pub fn kind(&self) -> TaskKind {
        self.desc.task_kind().unwrap_or(TaskKind::Kernel)
    }
}
