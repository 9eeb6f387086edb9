//! How the frame treats the work it times: functionally (kernels compute, copies and
//! collectives move bytes) or timing-only (every task takes its modelled time and nothing
//! else happens). The hardware tick reads it where a task's effect would be applied, and
//! dispatch where a binary kernel would run; the cost model and the memory pool do not look at
//! it, so timing-only runs keep every start and end, allocation, fragmentation and
//! out-of-memory of a functional run.
//!
//! A binary kernel's time is what its blocks did, which only running it tells. So a recording
//! run logs each binary launch's per-block cycles ([`ExecutionMode::binary_log`]), and a
//! timing-only replay hands them back ([`ExecutionMode::recorded`]): the launch is priced
//! from them on the replay's preset (its clock, cores and HBM bandwidth) without running.
//! Likewise the shapes data-dependent ops publish: logged when recorded, published again at
//! the launch's end in a timing-only replay, so their consumers see the recorded shapes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;

/// What one binary kernel launch did, for pricing it again without running it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BinaryRun {
    /// Each block's cycles, in block order (what the launch model sums per core).
    pub block_cycles: Vec<u64>,
    /// Distinct bytes the launch read plus wrote in global memory (its HBM floor).
    pub hbm_bytes: u64,
    /// The byte ranges it touched, `(address, bytes)`.
    pub access: Vec<(u64, u64)>,
}

/// Binary launches as they ran: (stream, sequence number, what the launch did).
pub type BinaryLog = Arc<Mutex<Vec<(Entity, u64, BinaryRun)>>>;

/// Shapes data-dependent op launches published: (stream, sequence number, the slot's bytes).
pub type ShapeLog = Arc<Mutex<Vec<(Entity, u64, Vec<u8>)>>>;

/// The frame's execution mode (a resource; functional by default).
#[derive(Resource, Debug, Default, Clone)]
pub struct ExecutionMode {
    /// Kernels, copies, memsets and collectives take their time but move no data, so device
    /// memory is never backed (allocation still goes through the pool).
    pub timing_only: bool,
    /// When set, every binary launch that runs is logged here (a recording runtime's).
    pub binary_log: Option<BinaryLog>,
    /// Timing-only: binary launches to price from what they did when recorded, by (stream,
    /// sequence number); one without an entry runs.
    pub recorded: BTreeMap<(Entity, u64), BinaryRun>,
    /// When set, the shape every data-dependent op launch publishes is logged here.
    pub shape_log: Option<ShapeLog>,
    /// Timing-only: the shapes data-dependent op launches published when recorded (the
    /// slot's bytes), by (stream, sequence number), published again at their end.
    pub recorded_shapes: BTreeMap<(Entity, u64), Vec<u8>>,
}
