//! Resources shared by the systems of a frame: the clocks, the doorbell, the ready and running
//! sets, the timeline and the frame statistics.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use bevy_ecs::change_detection::Mut;
use bevy_ecs::component::Mutable;
use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;
use bevy_ecs::world::World;

use crate::error::{NpuError, NpuResult};
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
    /// Min-queue of (end, dispatch order, task).
    pub heap: RunningQueue,
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

/// A running task's place in [`Running`]: (end, dispatch order, task).
pub type RunningKey = (SimTime, u64, Entity);

/// The running tasks' keys as a min-queue: it answers `push`, `pop`, `peek` and `iter` as a
/// `BinaryHeap<Reverse<RunningKey>>` would, and pops exactly in key order. It is made for how
/// dispatch fills it: tasks dispatched at one instant with one duration push their keys in
/// nondecreasing order, and such a key goes to the back of a sorted run and comes out of its
/// front, each in (amortized) constant time. A key smaller than the run's last goes to a binary
/// heap beside it; the smaller of the two fronts comes out first.
#[derive(Clone, Debug, Default)]
pub struct RunningQueue {
    /// Keys pushed in nondecreasing order, smallest first; those before `head` are taken.
    sorted: Vec<Reverse<RunningKey>>,
    /// The first key of `sorted` not taken yet.
    head: usize,
    /// The keys that came out of order.
    heap: BinaryHeap<Reverse<RunningKey>>,
}

impl RunningQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a key.
    // Once per task dispatched: inlined at every call site.
    #[inline(always)]
    pub fn push(&mut self, key: Reverse<RunningKey>) {
        if self.head == self.sorted.len() {
            // The run is empty: start it again at the front of its memory.
            self.sorted.clear();
            self.head = 0;
        } else if key.0 < self.sorted[self.sorted.len() - 1].0 {
            self.heap.push(key);
            return;
        } else if self.head >= Self::COMPACT_AT && self.head * 2 >= self.sorted.len() {
            // Mostly taken: drop the taken keys (amortized: at most once per as many pops).
            self.sorted.drain(..self.head);
            self.head = 0;
        }
        self.sorted.push(key);
    }

    /// Taken keys the sorted run keeps at its front before they are dropped.
    const COMPACT_AT: usize = 1024;

    /// The sorted run's first key not taken yet.
    #[inline]
    fn sorted_front(&self) -> Option<&Reverse<RunningKey>> {
        self.sorted.get(self.head)
    }

    /// Whether the next key comes from the sorted run (rather than the heap).
    #[inline]
    fn next_is_sorted(&self) -> Option<bool> {
        match (self.sorted_front(), self.heap.peek()) {
            (Some(a), Some(b)) => Some(a.0 <= b.0),
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }

    /// The smallest key, if any.
    #[inline]
    pub fn peek(&self) -> Option<&Reverse<RunningKey>> {
        match self.next_is_sorted()? {
            true => self.sorted_front(),
            false => self.heap.peek(),
        }
    }

    /// Takes the smallest key out, if any.
    #[inline]
    pub fn pop(&mut self) -> Option<Reverse<RunningKey>> {
        match self.next_is_sorted()? {
            true => {
                let key = self.sorted[self.head];
                self.head += 1;
                Some(key)
            }
            false => self.heap.pop(),
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.sorted.len() - self.head + self.heap.len()
    }

    /// Whether no key is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == self.sorted.len() && self.heap.is_empty()
    }

    /// Every key, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Reverse<RunningKey>> {
        self.sorted[self.head..].iter().chain(self.heap.iter())
    }

    /// Forgets every key.
    pub fn clear(&mut self) {
        self.sorted.clear();
        self.head = 0;
        self.heap.clear();
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

/// Resources looked up in a world an embedder may have changed through a `RuntimeGuard`: one it
/// removed is [`NpuError::MissingResource`] naming it, where `World::resource` would panic.
/// (The launch and frame paths find theirs by cached id instead, and handle a miss there.)
pub trait WorldResources {
    /// Resource `T`.
    fn res<T: Resource>(&self) -> NpuResult<&T>;
    /// Resource `T`, mutably.
    fn res_mut<T: Resource<Mutability = Mutable>>(&mut self) -> NpuResult<Mut<'_, T>>;
}

impl WorldResources for World {
    #[inline]
    fn res<T: Resource>(&self) -> NpuResult<&T> {
        self.get_resource::<T>()
            .ok_or_else(NpuError::missing_resource::<T>)
    }

    #[inline]
    fn res_mut<T: Resource<Mutability = Mutable>>(&mut self) -> NpuResult<Mut<'_, T>> {
        self.get_resource_mut::<T>()
            .ok_or_else(NpuError::missing_resource::<T>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(end: u64, order: u64) -> Reverse<RunningKey> {
        Reverse((
            SimTime(end),
            order,
            Entity::from_raw_u32(order as u32 + 1).unwrap(),
        ))
    }

    proptest! {
        /// Any mix of pushes (ends in any order; dispatch order numbers unique, as dispatch
        /// gives them) and pops comes out exactly as a binary heap of the same keys gives it.
        #[test]
        fn the_running_queue_pops_as_a_binary_heap_does(
            ops in proptest::collection::vec((any::<bool>(), 0u64..40), 0..200)
        ) {
            let mut queue = RunningQueue::new();
            let mut heap = BinaryHeap::new();
            for (order, (push, end)) in ops.into_iter().enumerate() {
                if push {
                    queue.push(key(end, order as u64));
                    heap.push(key(end, order as u64));
                } else {
                    prop_assert_eq!(queue.pop(), heap.pop());
                }
                prop_assert_eq!(queue.peek(), heap.peek());
                prop_assert_eq!(queue.len(), heap.len());
                prop_assert_eq!(queue.is_empty(), heap.is_empty());
            }
            let mut held: Vec<_> = queue.iter().copied().collect();
            let mut expected: Vec<_> = heap.iter().copied().collect();
            held.sort();
            expected.sort();
            prop_assert_eq!(held, expected);
            while let Some(k) = heap.pop() {
                prop_assert_eq!(queue.pop(), Some(k));
            }
            prop_assert!(queue.pop().is_none() && queue.is_empty());
        }
    }

    #[test]
    fn a_long_run_drops_its_taken_keys_and_still_pops_in_order() {
        let mut queue = RunningQueue::new();
        let mut heap = BinaryHeap::new();
        for order in 0..5000u64 {
            // Mostly in order, now and then a key below the run's last.
            let end = if order % 97 == 0 { order / 2 } else { order };
            queue.push(key(end, order));
            heap.push(key(end, order));
            if order >= 10 {
                assert_eq!(queue.pop(), heap.pop());
            }
        }
        assert!(
            queue.head < RunningQueue::COMPACT_AT * 2,
            "taken keys were dropped"
        );
        while let Some(k) = heap.pop() {
            assert_eq!(queue.pop(), Some(k));
        }
        assert!(queue.is_empty());
    }

    #[test]
    fn keys_pushed_in_order_stay_in_the_sorted_run_and_a_late_smaller_one_still_comes_first() {
        let mut queue = RunningQueue::new();
        for order in 0..4 {
            queue.push(key(10, order));
        }
        assert!(queue.heap.is_empty(), "in order: no heap work");
        queue.push(key(5, 4));
        assert_eq!(queue.heap.len(), 1);
        assert_eq!(queue.pop(), Some(key(5, 4)));
        assert_eq!(queue.pop(), Some(key(10, 0)));
        queue.clear();
        assert!(queue.is_empty() && queue.peek().is_none());
    }

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
