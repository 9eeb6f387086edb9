//! The event entity. Semantics follow ACL and CUDA: a record is a task in a stream; a wait
//! captures the record that was latest when the wait was enqueued; waiting on a never-recorded
//! event does not block.

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;
use std::collections::VecDeque;

use crate::time::SimTime;

/// An event.
#[derive(Component, Debug)]
pub struct EventState {
    /// Owning context.
    pub context: Entity,
    /// Records enqueued so far: the latest record's number (0 = never recorded).
    pub recorded: u64,
    /// Records enqueued but not finished, ascending (records are numbered in enqueue order;
    /// on one stream they also finish in that order, so removal is almost always at the front).
    pub pending: VecDeque<u64>,
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
            pending: VecDeque::new(),
            last_done: 0,
            timestamp: None,
        }
    }

    /// Whether record number `record` has finished (record 0, "never recorded", always has).
    #[inline]
    pub fn record_done(&self, record: u64) -> bool {
        record == 0 || (record <= self.recorded && self.pending.binary_search(&record).is_err())
    }

    /// Whether the latest record has finished (what `query_event` reports).
    pub fn is_complete(&self) -> bool {
        self.record_done(self.recorded)
    }

    /// Notes that record `record` fired at `now`.
    #[inline]
    pub fn fire(&mut self, record: u64, now: SimTime) {
        self.remove_pending(record);
        if record >= self.last_done {
            self.last_done = record;
            self.timestamp = Some(now);
        }
    }

    /// Notes that record `record` will never fire (its stream was aborted): waiters stop waiting.
    #[inline]
    pub fn cancel(&mut self, record: u64) {
        self.remove_pending(record);
    }

    /// Notes a new record enqueued; returns its number.
    #[inline]
    pub fn push_record(&mut self) -> u64 {
        self.recorded += 1;
        self.pending.push_back(self.recorded);
        self.recorded
    }

    fn remove_pending(&mut self, record: u64) {
        if self.pending.front() == Some(&record) {
            self.pending.pop_front();
        } else if let Ok(i) = self.pending.binary_search(&record) {
            self.pending.remove(i);
        }
    }
}
