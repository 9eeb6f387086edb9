//! The task entity: one unit of work in a stream. Its descriptor ([`TaskDescriptor`], defined
//! with its views in the `descriptor` module) is a plain-old-data struct, the same bytes a real
//! runtime would write into the device's submission queue; everything that cannot be plain data
//! (an op launch's shapes, a host buffer, a host callback) rides beside it ([`TaskExtra`]).

use std::sync::Mutex;

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;

use crate::access::AccessSet;
use crate::collective::{CollectiveCall, PeerCopy};
use crate::error::NpuError;
use crate::host::HostBuffer;
use crate::time::SimTime;

pub use crate::descriptor::{
    CopyDir, CopyView, EventView, MAX_ARGS, MAX_TENSORS, MAX_TILING, MemsetView, TaskDescriptor,
    TaskKind,
};

// Here, above the kinds it sums over: the descriptor's module cannot decode collectives.
impl TaskDescriptor {
    /// Bytes a copy, memset or collective moves (0 for other kinds).
    pub fn bytes_moved(&self) -> u64 {
        match self.task_kind() {
            Some(TaskKind::Memset) => self.as_memset().map_or(0, |m| m.bytes),
            Some(TaskKind::Memcpy) if self.is_peer_copy() => {
                PeerCopy::decode(self).map_or(0, |p| p.bytes)
            }
            Some(TaskKind::Memcpy) => self.as_copy().map_or(0, |c| c.bytes),
            Some(TaskKind::Collective) => CollectiveCall::decode(self).map_or(0, |c| c.bytes),
            _ => 0,
        }
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

/// The parts of a task that are not fixed-size plain data (cold: most tasks have none).
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
    /// An op launch: its tensors' shapes and what the shape and tiling stages made of them.
    Op(Box<crate::shape::OpLaunch>),
    /// A kernel launch whose caller knows the exact ranges of its buffer arguments and their
    /// directions (the typed launch builder): its access set when the kernel declares none.
    Access(Box<crate::access::AccessSet>),
}

impl TaskExtra {
    /// The op launch, if this task is one.
    pub fn op(&self) -> Option<&crate::shape::OpLaunch> {
        match self {
            TaskExtra::Op(op) => Some(op),
            _ => None,
        }
    }

    /// The op launch, mutably.
    pub fn op_mut(&mut self) -> Option<&mut crate::shape::OpLaunch> {
        match self {
            TaskExtra::Op(op) => Some(op),
            _ => None,
        }
    }

    /// The access set the launch's caller declared, if it did.
    pub fn declared_access(&self) -> Option<&crate::access::AccessSet> {
        match self {
            TaskExtra::Access(a) => Some(a),
            _ => None,
        }
    }
}

impl std::fmt::Debug for TaskExtra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskExtra::None => write!(f, "None"),
            TaskExtra::Host { offset, .. } => write!(f, "Host(+{offset})"),
            TaskExtra::Callback(_) => write!(f, "Callback"),
            TaskExtra::Op(op) => write!(f, "Op({:?})", op.state),
            TaskExtra::Access(a) => write!(f, "Access({:?})", a.ranges()),
        }
    }
}

/// A submission as one value: what the API call knew. `Doorbell::push` packs
/// it (the doorbell keeps only the words in use); it becomes a [`Task`] at ingest, which adds
/// what the stream knows (its context and device).
#[derive(Debug)]
pub struct NewTask {
    /// The stream.
    pub stream: Entity,
    /// Sequence number on the stream.
    pub seq: u64,
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
    /// Its stream's context (whose address space its addresses are in).
    pub context: Entity,
    /// Its stream's device entity.
    pub device: Entity,
    /// Sequence number on the stream (1-based).
    pub seq: u64,
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
    /// Whether its effect has already been applied, ahead of its completion: device-local
    /// work executed in a parallel batch, a binary kernel that ran at dispatch, a collective
    /// refused at the rendezvous. Its outcome is then `error`.
    pub applied: bool,
    /// The device memory it reads and writes ([`crate::access`]).
    pub access: AccessSet,
    /// Non-plain-data parts.
    pub extra: TaskExtra,
    /// Why it failed or was aborted (boxed: rare, and it keeps the component small).
    pub error: Option<Box<NpuError>>,
}

impl Task {
    /// The task for a doorbell entry of a stream in `context` on `device`.
    pub fn from_new(n: NewTask, context: Entity, device: Entity) -> Self {
        Self {
            desc: n.desc,
            stream: n.stream,
            context,
            device,
            seq: n.seq,
            status: TaskStatus::Queued,
            submit: n.submit,
            start: SimTime::ZERO,
            end: SimTime::ZERO,
            cores: 0,
            dma: 0,
            applied: false,
            access: AccessSet::new(),
            extra: n.extra,
            error: None,
        }
    }

    /// The kind (a corrupt descriptor word reads as a kernel, which then fails cleanly).
    #[inline]
    pub fn kind(&self) -> TaskKind {
        self.desc.task_kind().unwrap_or(TaskKind::Kernel)
    }

    /// Whether it ends in failure (a fault, or an abort).
    #[inline]
    pub fn failed(&self) -> bool {
        matches!(self.status, TaskStatus::Failed | TaskStatus::Aborted)
    }
}
