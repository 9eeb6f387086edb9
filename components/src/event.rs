//! The event entity. Semantics follow ACL and CUDA: a record is a task in a stream; a wait
//! captures the record that was latest when the wait was enqueued; waiting on a never-recorded
//! event does not block.

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;
use smallvec::SmallVec;

use crate::time::SimTime;

/// An event.
#[derive(Component, Debug)]
pub struct EventState {
    /// Owning context.
    pub context: Entity,
    /// Records enqueued so far: the latest record's number (0 = never recorded).
    pub recorded: u64,
    /// Records enqueued but not finished.
    pub pending: SmallVec<[u64; 4]>,
    /// The highest record number that has finished.
    pub last_done: u64,
    /// When the latest finished record fired.
    pub timestamp: Option<SimTime>,
}

impl EventState {
    /// A never-recorded event of `context`.
    pub fn new(context: Entity) -> Self {
        Self {
            context,
            recorded: 0,
            pending: SmallVec::new(),
            last_done: 0,
            timestamp: None,
        }
    }

    /// Whether record number `record` has finished (record 0, "never recorded", always has).
    pub fn record_done(&self, record: u64) -> bool {
        record == 0 || (record <= self.recorded && !self.pending.contains(&record))
    }

    /// Whether the latest record has finished (what `query_event` reports).
    pub fn is_complete(&self) -> bool {
        self.record_done(self.recorded)
    }

    /// Notes that record `record` fired at `now`.
    pub fn fire(&mut self, record: u64, now: SimTime) {
        self.pending.retain(|r| *r != record);
        if record >= self.last_done {
            self.last_done = record;
            self.timestamp = Some(now);
        }
    }

    /// Notes that record `record` will never fire (its stream was aborted): waiters stop waiting.
    pub fn cancel(&mut self, record: u64) {
        self.pending.retain(|r| *r != record);
    }
}
