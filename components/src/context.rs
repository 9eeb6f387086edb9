//! The context entity: an isolated set of streams, events and memory on one device. A fault in
//! one context leaves a sticky error here and stops only this context's work.

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;

use crate::error::NpuError;

/// Whether a context can be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextStatus {
    /// Working normally.
    Active,
    /// A task faulted; calls return the sticky error until the context is reset or destroyed.
    Faulted,
}

/// What happens to a stream's remaining tasks after one of its tasks fails
/// (as `aclrtSetStreamFailureMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailureMode {
    /// Stop: the context's queued tasks fail with `ACL_ERROR_RT_STREAM_ABORT` (the default).
    #[default]
    StopOnFailure,
    /// Continue: only the failing task fails; the stream goes on, the error is reported at
    /// synchronize.
    Continue,
}

/// A context.
#[derive(Component, Debug)]
pub struct ContextState {
    /// The device entity it lives on.
    pub device: Entity,
    /// The device's index.
    pub device_index: u32,
    /// Active or faulted.
    pub status: ContextStatus,
    /// The error that faulted it, returned by its calls until reset.
    pub sticky_error: Option<NpuError>,
    /// What a failing task does to the rest of the work.
    pub failure_mode: FailureMode,
    /// Its streams (the default stream first).
    pub streams: Vec<Entity>,
    /// Its events.
    pub events: Vec<Entity>,
    /// The stream used where none is given.
    pub default_stream: Entity,
    /// Whether this is the device's primary context (it cannot be destroyed).
    pub is_default: bool,
}

impl ContextState {
    /// A new, active context on `device` (index `device_index`), with no streams or events yet.
    pub fn new(device: Entity, device_index: u32, is_default: bool) -> Self {
        Self {
            device,
            device_index,
            status: ContextStatus::Active,
            sticky_error: None,
            failure_mode: FailureMode::default(),
            streams: Vec::new(),
            events: Vec::new(),
            default_stream: Entity::PLACEHOLDER,
            is_default,
        }
    }
}
