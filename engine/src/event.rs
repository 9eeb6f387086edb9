//! Events: markers recorded into streams. A wait captures the record that was latest when the
//! wait was enqueued; waiting on a never-recorded event does not block; elapsed time is the
//! difference of the two records' simulated timestamps.

use crate::runtime::Inner;
use bevy_ecs::prelude::*;
use npusim_components::task::{EventView, TaskExtra};
use npusim_components::{ContextState, Event, EventState, NpuError, NpuResult, SimTime, Stream};

use crate::runtime::Runtime;

/// Events: records, waits, queries, timestamps (`aclrtCreateEvent`, `aclrtRecordEvent`,
/// `aclrtStreamWaitEvent` …).
/// Reached through [`Runtime::events`].
#[derive(Clone, Copy)]
pub struct Events<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Events: records, waits, queries, timestamps.
    pub fn events(&self) -> Events<'_> {
        Events { rt: self }
    }
}

impl Events<'_> {
    /// Creates an event in the current context.
    pub fn create(&self) -> NpuResult<Event> {
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        let cost = g.costs.call_ns;
        g.charge(cost);
        let e = g.world.spawn(EventState::new(ctx)).id();
        g.world
            .get_mut::<ContextState>(ctx)
            .expect("checked")
            .events
            .push(e);
        g.record(|r, _| crate::record::Call::CreateEvent { event: r.event(e) });
        Ok(Event::new(self.rt.id(), e))
    }

    /// Destroys an event. Waits already enqueued on it no longer block.
    pub fn destroy(&self, event: Event) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let (e, ctx) = self.rt.check_event(&g, event)?;
        g.world
            .get_mut::<ContextState>(ctx)
            .expect("checked")
            .events
            .retain(|x| *x != e);
        g.world.despawn(e);
        g.record(|r, _| crate::record::Call::DestroyEvent { event: r.event(e) });
        crate::sanitizer::event_destroyed(&mut g, e);
        Ok(())
    }

    /// Enqueues a record of `event` on `stream`: it fires when the stream's earlier work is done.
    #[track_caller]
    pub fn record(&self, event: Event, stream: Stream) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let (e, s) = self.rt.check_event_and_stream(&g, event, stream)?;
        let mut ev = g.event_mut(e).expect("checked");
        let record = ev.push_record();
        let cost = g.costs.call_ns;
        crate::launch::submit_with(&mut g, s, TaskExtra::None, cost, |d| {
            d.encode_event(EventView { event: e, record }, false)
        });
        crate::record::record!(g, |r, _| crate::record::Call::RecordEvent {
            event: r.event(e),
            stream: r.stream(s),
        });
        Ok(())
    }

    /// Makes `stream`'s later work wait until the latest record of `event` (as of now) fires.
    /// If the event was never recorded, nothing waits.
    #[track_caller]
    pub fn stream_wait(&self, stream: Stream, event: Event) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let (e, s) = self.rt.check_event_and_stream(&g, event, stream)?;
        let record = g.event(e).expect("checked").recorded;
        let cost = g.costs.call_ns;
        crate::launch::submit_with(&mut g, s, TaskExtra::None, cost, |d| {
            d.encode_event(EventView { event: e, record }, true)
        });
        crate::record::record!(g, |r, _| crate::record::Call::StreamWaitEvent {
            stream: r.stream(s),
            event: r.event(e),
        });
        Ok(())
    }

    /// Whether the latest record of `event` has fired (true if never recorded).
    pub fn query(&self, event: Event) -> NpuResult<bool> {
        let mut g = self.rt.lock();
        let (e, _) = self.rt.check_event(&g, event)?;
        let ev = g.event(e).expect("checked");
        let (done, record) = (ev.is_complete(), ev.recorded);
        // A query that finds the record fired orders the host after it.
        if done {
            crate::sanitizer::synchronized_event(&mut g, e, record);
        }
        Ok(done)
    }

    /// Waits until the latest record of `event` (as of now) fires; the host clock moves to its
    /// timestamp.
    pub fn synchronize(&self, event: Event) -> NpuResult<()> {
        let g = self.rt.lock();
        let (e, _) = self.rt.check_event(&g, event)?;
        let record = g.event(e).expect("checked").recorded;
        let what = || event.to_string();
        let done = |i: &Inner| i.event(e).is_none_or(|ev| ev.record_done(record));
        let (mut g, result) = self.rt.drive(g, &what, &done, None);
        crate::record::record!(g, |r, _| crate::record::Call::SynchronizeEvent {
            event: r.event(e)
        });
        result?;
        let stamp = g
            .event(e)
            .and_then(|ev| ev.timestamp)
            .unwrap_or(SimTime::ZERO);
        let sync = SimTime(g.costs.sync_ns);
        let t = g.host_now().max(stamp) + sync;
        g.set_host_now(t);
        crate::sanitizer::synchronized_event(&mut g, e, record);
        // A fault that aborted the record is reported here.
        self.rt.current_ctx(&g)?;
        Ok(())
    }

    /// Simulated milliseconds between the latest records of `start` and `end`. Both must have
    /// been recorded and have fired.
    pub fn elapsed_ms(&self, start: Event, end: Event) -> NpuResult<f32> {
        let g = self.rt.lock();
        let (s, _) = self.rt.check_event(&g, start)?;
        let (e, _) = self.rt.check_event(&g, end)?;
        let stamp = |h: Event, x: Entity| -> NpuResult<SimTime> {
            let ev = g.event(x).expect("checked");
            if ev.recorded == 0 {
                return Err(NpuError::EventNotRecorded(h.to_string()));
            }
            if !ev.is_complete() {
                return Err(NpuError::EventNotComplete(h.to_string()));
            }
            ev.timestamp
                .ok_or_else(|| NpuError::EventNotRecorded(h.to_string()))
        };
        let (t0, t1) = (stamp(start, s)?, stamp(end, e)?);
        Ok(((t1.0 as f64 - t0.0 as f64) / 1e6) as f32)
    }

    /// The simulated time at which the latest record of `event` fired.
    pub fn timestamp(&self, event: Event) -> NpuResult<SimTime> {
        let g = self.rt.lock();
        let (e, _) = self.rt.check_event(&g, event)?;
        let ev = g.event(e).expect("checked");
        if ev.recorded == 0 {
            return Err(NpuError::EventNotRecorded(event.to_string()));
        }
        if !ev.is_complete() {
            return Err(NpuError::EventNotComplete(event.to_string()));
        }
        ev.timestamp
            .ok_or_else(|| NpuError::EventNotRecorded(event.to_string()))
    }
}
