//! How the frame treats the work it times: functionally (kernels compute, copies and
//! collectives move bytes) or timing-only (every task takes its modelled time and nothing
//! else happens). The hardware tick reads it where a task's effect would be applied; dispatch,
//! the cost model and the memory pool do not look at it, so timing-only runs keep every
//! start and end, allocation, fragmentation and out-of-memory of a functional run.

use bevy_ecs::resource::Resource;

/// The frame's execution mode (a resource; functional by default).
#[derive(Resource, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExecutionMode {
    /// Kernels, copies, memsets and collectives take their time but move no data, so device
    /// memory is never backed (allocation still goes through the pool).
    pub timing_only: bool,
}
