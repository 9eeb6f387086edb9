//! The stream entity: a FIFO of tasks that run one after another on one device.

use std::collections::VecDeque;

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;

use crate::doorbell::Doorbell;
use crate::error::NpuError;
use crate::time::SimTime;

/// What a stream is for; it decides nothing yet but is shown in timelines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// Kernels and copies.
    #[default]
    Compute,
    /// Copies only.
    Copy,
    /// Collectives.
    Communication,
}

/// A stream.
#[derive(Component, Debug)]
pub struct StreamState {
    /// Owning context.
    pub context: Entity,
    /// The device entity.
    pub device: Entity,
    /// Priority: lower numbers are dispatched first (as ACL and CUDA).
    pub priority: i32,
    /// Kind.
    pub kind: StreamKind,
    /// Submissions rung on this stream's doorbell since the last frame, in call order (an API
    /// call only pushes here; ingest turns them into tasks at the back of `queue`).
    pub doorbell: Doorbell,
    /// Tasks ingested and not yet finished, head first.
    pub queue: VecDeque<Entity>,
    /// Tasks submitted so far (the sequence number of the last one).
    pub submitted: u64,
    /// Tasks finished so far, in order (the sequence number of the last finished one).
    pub completed: u64,
    /// Whether the head task has been made ready (dispatched or running).
    pub head_active: bool,
    /// When the last finished task ended.
    pub last_end: SimTime,
    /// The first error of a task on this stream since the last synchronize.
    pub error: Option<NpuError>,
    /// Position among all streams ever created, for deterministic ordering.
    pub order: u64,
    /// The device's index.
    pub device_index: u32,
}

impl StreamState {
    /// A new, empty stream of `context` on device `device` (index `device_index`), the
    /// `order`-th stream created.
    pub fn new(
        context: Entity,
        device: Entity,
        device_index: u32,
        priority: i32,
        kind: StreamKind,
        order: u64,
    ) -> Self {
        Self {
            context,
            device,
            priority,
            kind,
            doorbell: Doorbell::new(),
            queue: VecDeque::new(),
            submitted: 0,
            completed: 0,
            head_active: false,
            last_end: SimTime::ZERO,
            error: None,
            order,
            device_index,
        }
    }

    /// Whether every submitted task has finished.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.completed >= self.submitted
    }
}
