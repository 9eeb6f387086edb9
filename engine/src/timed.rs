//! Timed waits on events and devices (ACL's `aclrtSynchronizeEventWithTimeout` and
//! `aclrtSynchronizeDeviceWithTimeout`), beside the stream's: the wait drives frames with the
//! device clock held at the deadline (simulated time), and fails with
//! [`NpuError::WaitTimeout`] if what it waits for is not done by then; the work stays queued.
//! Once done in time, the plain synchronize finishes the job (host clock, errors).

use npusim_components::{ContextState, NpuError, NpuResult, SimTime};

use crate::event::Events;
use crate::runtime::{Inner, Runtime};
use npusim_components::Event;

impl Runtime {
    /// As [`Runtime::synchronize_device`], giving up after `timeout` of simulated time.
    pub fn synchronize_device_timeout(&self, timeout: SimTime) -> NpuResult<()> {
        let g = self.lock();
        let ctx = self.current_ctx_entity(&g)?;
        let index = g
            .world
            .get::<ContextState>(ctx)
            .ok_or_else(|| NpuError::Destroyed(format!("context {ctx}")))?
            .device_index;
        let what = || format!("device {index}");
        let done = |i: &Inner| i.device_idle(index);
        let (mut g, result) = self.drive(g, &what, &done, Some(timeout));
        let timed_out = matches!(result, Err(NpuError::WaitTimeout { .. }));
        g.mute_recording(true);
        drop(g);
        let out = match result {
            Err(e @ NpuError::WaitTimeout { .. }) => Err(e),
            _ => self.synchronize_device(),
        };
        let mut g = self.lock_quiet();
        g.mute_recording(false);
        g.record(|_, _| crate::record::Call::SynchronizeDeviceTimeout {
            timeout_ns: timeout.as_ns(),
            timed_out,
        });
        out
    }
}

impl Events<'_> {
    /// As [`Events::synchronize`](crate::Events::synchronize), giving up after `timeout` of simulated time.
    pub fn synchronize_timeout(&self, event: Event, timeout: SimTime) -> NpuResult<()> {
        let g = self.rt.lock();
        let (e, _) = self.rt.check_event(&g, event)?;
        let record = g.event(e).map_or(0, |ev| ev.recorded);
        let what = || event.to_string();
        let done = |i: &Inner| i.event(e).is_none_or(|ev| ev.record_done(record));
        let (mut g, result) = self.rt.drive(g, &what, &done, Some(timeout));
        let timed_out = matches!(result, Err(NpuError::WaitTimeout { .. }));
        // The plain wait below is part of this call: it is recorded as this call, once.
        g.mute_recording(true);
        drop(g);
        let out = match result {
            Err(e @ NpuError::WaitTimeout { .. }) => Err(e),
            // Done, or a record that can never fire: the plain wait reports it.
            _ => self.synchronize(event),
        };
        let mut g = self.rt.lock_quiet();
        g.mute_recording(false);
        g.record(|r, _| crate::record::Call::SynchronizeEventTimeout {
            event: r.event(e),
            timeout_ns: timeout.as_ns(),
            timed_out,
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::{Runtime, RuntimeConfig, SimTime};

    #[test]
    fn a_timed_event_wait_gives_up_at_its_deadline_and_succeeds_later() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let s = rt.streams().create().unwrap();
        let ev = rt.events().create().unwrap();
        let p = rt.memory().malloc(256 << 20).unwrap();
        rt.memory().memset_async(p, 1, 256 << 20, s).unwrap();
        rt.events().record(ev, s).unwrap();
        let err = rt
            .events()
            .synchronize_timeout(ev, SimTime::from_us(1))
            .unwrap_err();
        assert_eq!(err.code(), 107019, "{err}");
        assert!(!rt.events().query(ev).unwrap(), "the record stays queued");
        rt.events()
            .synchronize_timeout(ev, SimTime::from_ms(1000))
            .unwrap();
        assert!(rt.events().query(ev).unwrap());
        rt.memory().memset_async(p, 2, 256 << 20, s).unwrap();
        assert!(rt.synchronize_device_timeout(SimTime::from_us(1)).is_err());
        rt.synchronize_device_timeout(SimTime::from_ms(1000))
            .unwrap();
    }
}
