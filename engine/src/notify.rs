//! Notifies (ACL's `aclrtNotify`) on the runtime's events: the k-th record of a notify's event is
//! the k-th `aclrtRecordNotify`, and the k-th `aclrtWaitAndResetNotify` waits for exactly that
//! record, whether or not it has been enqueued yet. The one thing events alone cannot say is a
//! wait for a record still to come; this file adds it. The wait is resolved by the dependency
//! stage like any event wait (a record not yet enqueued is simply not done).

use npusim_components::task::{EventView, TaskDescriptor, TaskExtra};
use npusim_components::{Event, NpuError, NpuResult, SimTime, Stream};

use crate::event::Events;

impl Events<'_> {
    /// Makes `stream`'s later work wait until record number `record` (1-based, in enqueue
    /// order) of `event` fires, even if that record is enqueued only later. With a `timeout`
    /// (simulated), a wait blocked longer fails with `ACL_ERROR_RT_WAIT_TIMEOUT` and the stream
    /// goes on; without one, the device's event-wait timeout applies, and a wait for a record
    /// that is never enqueued is reported by the next synchronize as never able to finish.
    pub fn stream_wait_record(
        &self,
        stream: Stream,
        event: Event,
        record: u64,
        timeout: Option<SimTime>,
    ) -> NpuResult<()> {
        if record == 0 {
            return Err(NpuError::InvalidParam(
                "record numbers start at 1 (0 is \"never recorded\")".into(),
            ));
        }
        let mut g = self.rt.lock();
        let (e, s) = self.rt.check_event_and_stream(&g, event, stream)?;
        debug_assert!(g.event(e).is_some());
        let mut desc = TaskDescriptor::event(EventView { event: e, record }, true);
        desc.set_timeout(timeout);
        let cost = g.costs.call_ns;
        crate::launch::submit(&mut g, s, desc, TaskExtra::None, cost);
        g.record(|r, _| crate::record::Call::StreamWaitEventRecord {
            stream: r.stream(s),
            event: r.event(e),
            record,
            timeout_ns: timeout.map(SimTime::as_ns),
        });
        Ok(())
    }

    /// How many times `event` has been recorded (its latest record's number; 0 if never).
    pub fn records(&self, event: Event) -> NpuResult<u64> {
        let g = self.rt.lock();
        let (e, _) = self.rt.check_event(&g, event)?;
        Ok(g.event(e).map_or(0, |ev| ev.recorded))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Runtime, RuntimeConfig};

    #[test]
    fn a_wait_enqueued_before_its_record_holds_the_stream_until_the_record_fires() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let (a, b) = (
            rt.streams().create().unwrap(),
            rt.streams().create().unwrap(),
        );
        let ev = rt.events().create().unwrap();
        let p = rt.memory().malloc(4096).unwrap();
        // b waits for the first record, which a enqueues only after a long memset.
        rt.events().stream_wait_record(b, ev, 1, None).unwrap();
        let after = rt.events().create().unwrap();
        rt.events().record(after, b).unwrap();
        rt.memory().memset_async(p, 1, 4096, a).unwrap();
        rt.events().record(ev, a).unwrap();
        rt.streams().synchronize(b).unwrap();
        assert_eq!(rt.events().records(ev).unwrap(), 1);
        let t_ev = rt.events().timestamp(ev).unwrap();
        let t_after = rt.events().timestamp(after).unwrap();
        assert!(
            t_after >= t_ev,
            "b went on at {t_after:?}, before the record at {t_ev:?}"
        );
        assert!(rt.events().stream_wait_record(b, ev, 0, None).is_err());
    }
}
