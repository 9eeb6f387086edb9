//! Resources shared by the systems of a frame: the clocks, the doorbell, the ready and running
//! sets, the timeline and the frame statistics.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;

use crate::shape::OpLaunch;
use crate::task::{Callback, TaskKind};
use crate::time::SimTime;

/// The device-side simulated clock (one time axis for all devices).
#[derive(Resource, Debug, Default, Clone, Copy)]
pub struct SimClock {
    /// Now, on the device.
    pub now: SimTime,
    /// When set, the hardware tick does not advance past this time (a timed wait's deadline).
    pub horizon: Option<SimTime>,
}

/// Tasks whose dependencies are met, waiting for a unit.
#[derive(Resource, Debug, Default)]
pub struct ReadyQueue {
    /// The tasks with their dispatch key (priority, stream order, sequence number), in the
    /// order they became ready; dispatch sorts by the key.
    pub tasks: Vec<((i32, u64, u64), Entity)>,
    /// Op launches (tasks with tensors) made ready this frame: shape propagation runs only
    /// when there are some.
    pub new_ops: u32,
}

/// Retired task entities kept for reuse, so steady-state submission spawns and despawns nothing,
/// and retired op launches' boxes, so steady-state op launches allocate nothing.
#[derive(Resource, Debug, Default)]
pub struct TaskPool {
    /// Entities with a `Task` in status `Retired`.
    pub free: Vec<Entity>,
    /// Boxes of retired op launches (`TaskExtra::Op`), at most
    /// [`TaskPool::OP_LAUNCH_CAPACITY`], for the next op launches to reuse.
    pub op_launches: Vec<Box<OpLaunch>>,
}

impl TaskPool {
    /// Most retired entities kept; beyond this they are despawned, so a burst's memory returns.
    pub const CAPACITY: usize = 1 << 16;

    /// Most op launch boxes kept (each under 200 bytes).
    pub const OP_LAUNCH_CAPACITY: usize = 1 << 12;

    /// A box holding a new launch of `n_in` inputs and `n_out` outputs
    /// ([`OpLaunch::new`]), to be filled in place: a retired launch's box when there is one
    /// (its static dims' allocation kept), a new one otherwise.
    pub fn op_launch(&mut self, n_in: u8, n_out: u8) -> Box<OpLaunch> {
        match self.op_launches.pop() {
            Some(mut b) => {
                b.reset(n_in, n_out);
                b
            }
            None => Box::new(OpLaunch::new(n_in, n_out)),
        }
    }

    /// Takes back an op launch's box that no task holds any more (a retired launch's, or one
    /// whose launch was refused), kept for reuse while fewer than
    /// [`TaskPool::OP_LAUNCH_CAPACITY`] are kept.
    pub fn give_back_op_launch(&mut self, launch: Box<OpLaunch>) {
        Self::keep_op_launch(&mut self.op_launches, launch);
    }

    /// [`TaskPool::give_back_op_launch`] into `boxes` (the pool's list, taken out of it).
    pub fn keep_op_launch(boxes: &mut Vec<Box<OpLaunch>>, launch: Box<OpLaunch>) {
        if boxes.len() < Self::OP_LAUNCH_CAPACITY {
            boxes.push(launch);
        }
    }
}

/// Tasks occupying units, ordered by end time (then by dispatch order, for determinism).
#[derive(Resource, Debug, Default)]
pub struct Running {
    /// Min-heap of (end, dispatch order, task).
    pub heap: BinaryHeap<Reverse<(SimTime, u64, Entity)>>,
    /// Next dispatch order number.
    pub next_order: u64,
    /// The earliest future submit time of a stream head that is otherwise ready to go.
    pub next_wake: Option<SimTime>,
}

impl Running {
    /// When the next thing happens on the device, if anything is pending.
    #[inline]
    pub fn next_event(&self) -> Option<SimTime> {
        let done = self.heap.peek().map(|Reverse((t, _, _))| *t);
        match (done, self.next_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Tasks that finished this frame, for the retire system.
#[derive(Resource, Debug, Default)]
pub struct Finished {
    /// The tasks.
    pub tasks: Vec<Entity>,
    /// The stream sanitizer, which completion feeds each finishing task (`None`: off). It
    /// rides here, in a resource completion fetches anyway, so that off it costs a frame no
    /// fetch.
    pub sanitizer: Option<Box<crate::sanitizer::Sanitizer>>,
}

/// A host callback whose turn came: its task has reached the head of its stream and waits,
/// running, until the callback has returned on the host.
pub struct ReleasedCallback {
    /// The callback's task.
    pub task: Entity,
    /// Its stream.
    pub stream: Entity,
    /// Its sequence number on the stream (with `stream`, tells a recycled task entity apart).
    pub seq: u64,
    /// Its context (whose callback thread runs it).
    pub context: Entity,
    /// The simulated instant it was released: the callback's host clock starts there.
    pub release: SimTime,
    /// The body.
    pub body: Callback,
}

/// Host callbacks whose turn came this frame; the runtime hands them to their context's
/// callback thread after the frame. Their tasks stay running until the runtime hears they
/// returned.
#[derive(Resource, Default)]
pub struct PendingCallbacks {
    /// The callbacks, in the order their tasks were released. Behind a mutex only so the
    /// resource is `Sync`; the frame is single-threaded when it touches it.
    pub calls: std::sync::Mutex<Vec<ReleasedCallback>>,
}

/// Device entities by index.
#[derive(Resource, Debug, Default)]
pub struct Devices {
    /// Entity of device `i` at index `i`.
    pub entities: Vec<Entity>,
}

/// One finished task on the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRecord {
    /// What it was.
    pub kind: TaskKind,
    /// Kernel name or kind name.
    pub name: String,
    /// The stream entity.
    pub stream: Entity,
    /// The device index.
    pub device: u32,
    /// Sequence number on the stream.
    pub seq: u64,
    /// Host time of submission.
    pub submit: SimTime,
    /// Simulated start.
    pub start: SimTime,
    /// Simulated end.
    pub end: SimTime,
    /// AI cores it held.
    pub cores: u32,
    /// Whether it finished normally.
    pub ok: bool,
    /// The kind of its stream.
    pub stream_kind: crate::stream::StreamKind,
    /// Its context.
    pub context: Entity,
    /// For an event record or wait: the event and the record number (flows in timelines).
    pub event: Option<(Entity, u64)>,
    /// Bytes a copy, memset or collective moved (0 otherwise).
    pub bytes: u64,
}

/// The recorded timeline (when enabled).
#[derive(Resource, Debug, Default)]
pub struct Timeline {
    /// Whether finished tasks are recorded.
    pub enabled: bool,
    /// Records in finish order.
    pub records: Vec<TaskRecord>,
}

/// Counters over the life of the runtime.
#[derive(Resource, Debug, Default, Clone, PartialEq, Eq)]
pub struct FrameStats {
    /// Frames run.
    pub frames: u64,
    /// Tasks turned into entities.
    pub tasks_ingested: u64,
    /// Tasks dispatched to units.
    pub tasks_dispatched: u64,
    /// Tasks finished normally.
    pub tasks_completed: u64,
    /// Tasks that faulted.
    pub tasks_failed: u64,
    /// Tasks aborted after a failure.
    pub tasks_aborted: u64,
    /// Tasks retired (recorded, then recycled into the task pool or despawned).
    pub tasks_retired: u64,
    /// Whether the last frame changed anything.
    pub last_frame_progressed: bool,
}

/// A task that faulted, for the exception callback (ACL's exception info).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRecord {
    /// Device index.
    pub device: u32,
    /// The faulting task's context.
    pub context: Entity,
    /// Its stream.
    pub stream: Entity,
    /// Its sequence number on the stream.
    pub seq: u64,
    /// What went wrong.
    pub error: crate::error::NpuError,
}

/// Faults raised since the runtime last delivered them to the exception callback.
#[derive(Resource, Debug, Default)]
pub struct Faults {
    /// Undelivered faults, in the order they happened.
    pub pending: Vec<FaultRecord>,
}

/// Contexts whose queued work must be aborted (they are being destroyed); handled by the
/// hardware tick at its start.
#[derive(Resource, Debug, Default)]
pub struct AbortRequests {
    /// (context, the error its aborted tasks report).
    pub contexts: Vec<(Entity, crate::error::NpuError)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_pool_reuses_a_kept_op_launch_box_or_allocates_one() {
        let mut pool = TaskPool::default();
        pool.op_launches.push(Box::new(OpLaunch::new(1, 1)));
        pool.op_launches.push(Box::new(OpLaunch::new(1, 1)));

        let kept = &**pool.op_launches.last().unwrap() as *const OpLaunch;
        let reused = pool.op_launch(2, 1);
        assert_eq!(&*reused as *const OpLaunch, kept);
        assert_eq!(*reused, OpLaunch::new(2, 1));
        pool.op_launches.clear();
        assert_eq!(*pool.op_launch(3, 0), OpLaunch::new(3, 0));
    }

    #[test]
    fn a_given_back_op_launch_box_is_kept_up_to_the_capacity_only() {
        let mut pool = TaskPool::default();
        let first = Box::new(OpLaunch::new(1, 1));
        let kept = &*first as *const OpLaunch;
        pool.give_back_op_launch(first);
        assert_eq!(pool.op_launches.len(), 1);
        assert_eq!(&*pool.op_launch(1, 1) as *const OpLaunch, kept);
        for _ in 0..TaskPool::OP_LAUNCH_CAPACITY + 3 {
            pool.give_back_op_launch(Box::new(OpLaunch::new(1, 1)));
        }
        assert_eq!(pool.op_launches.len(), TaskPool::OP_LAUNCH_CAPACITY);
    }
}
