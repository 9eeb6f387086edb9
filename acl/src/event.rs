//! Events. A record captures the work already submitted to its stream; a wait
//! (`aclrtStreamWaitEvent`) makes a stream's later work wait for the record that was latest
//! when the wait was enqueued; an event never recorded (or reset) does not block.
//!
//! ACL lets a program destroy or reset an event whose record is still pending, and waits
//! already enqueued on it keep waiting. Here the C handle lets go at once, and the runtime
//! event lives on, retired, until its record fires; retired events are collected on later
//! event calls of their context (and with the context).

use npusim_engine::{Event, NpuError, SimTime};

use crate::error::{AclError, AclResult, call, non_null};
use crate::handles::{Kind, lookup, to_ptr};
use crate::state::{Session, session};
use crate::types::*;

fn event(s: &Session, p: aclrtEvent, what: &str) -> AclResult<(u64, Event, u64)> {
    let t = s.tables();
    let (key, e) = lookup(&t.events, Kind::Event, p, what)?;
    Ok((key, e.event, e.ctx))
}

/// Destroys `ev` of context `ctx` (current) now if its latest record has fired, else retires
/// it; then collects the context's retired events whose records have fired.
pub(crate) fn release(s: &Session, ctx: u64, ev: Event) -> AclResult<()> {
    if s.rt.events().query(ev)? {
        s.rt.events().destroy(ev)?;
    } else if let Some(c) = s.tables().contexts.get_mut(&ctx) {
        c.retired_events.push(ev);
    }
    let retired = match s.tables().contexts.get_mut(&ctx) {
        Some(c) => std::mem::take(&mut c.retired_events),
        None => return Ok(()),
    };
    let mut pending = Vec::new();
    for ev in retired {
        match s.rt.events().query(ev) {
            Ok(true) => {
                let _ = s.rt.events().destroy(ev);
            }
            Ok(false) => pending.push(ev),
            // Gone with a fault or a reset: nothing left to release.
            Err(_) => {}
        }
    }
    if let Some(c) = s.tables().contexts.get_mut(&ctx) {
        c.retired_events.extend(pending);
    }
    Ok(())
}

/// `aclError aclrtCreateEvent(aclrtEvent *event)`: an event in the current context.
///
/// # Safety
/// `event` is NULL or points to an `aclrtEvent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEvent(event: *mut aclrtEvent) -> aclError {
    call("aclrtCreateEvent", || {
        non_null(event, "event")?;
        // SAFETY: as this function's.
        unsafe { create(event) }
    })
}

/// `aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)`: as
/// `aclrtCreateEvent`. Every npusim event synchronizes streams and keeps timestamps, so the
/// flags (ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE, ...) change nothing.
///
/// # Safety
/// `event` is NULL or points to an `aclrtEvent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    let _ = flag;
    call("aclrtCreateEventWithFlag", || {
        non_null(event, "event")?;
        // SAFETY: as this function's.
        unsafe { create(event) }
    })
}

/// # Safety
/// `out` is non-NULL and writable.
unsafe fn create(out: *mut aclrtEvent) -> AclResult<()> {
    let s = session()?;
    let (ctx, _) = s.current_ctx()?;
    let ev = s.rt.events().create()?;
    let key = crate::handles::new_key(Kind::Event);
    s.tables()
        .events
        .insert(key, crate::handles::EventEntry { event: ev, ctx });
    // SAFETY: the caller checked `out`.
    unsafe { out.write(to_ptr(key)) };
    Ok(())
}

/// `aclError aclrtDestroyEvent(aclrtEvent event)`: destroys an event. It does not wait for a
/// pending record; waits already enqueued on it still wait for that record.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyEvent(event: aclrtEvent) -> aclError {
    call("aclrtDestroyEvent", || {
        let s = session()?;
        let (key, ev, ctx) = match event_checked(&s, event) {
            Ok(e) => e,
            // After a fault under ACL_STOP_ON_FAILURE destroying is cleanup, and succeeds; the
            // runtime event goes with the context (or the reset that clears its fault).
            Err(e) if matches!(s.rt.contexts().error(), Ok(Some(_))) => {
                let (key, ev, ctx) = self::event(&s, event, "event").map_err(|_| e)?;
                let mut t = s.tables();
                t.events.remove(&key);
                if let Some(c) = t.contexts.get_mut(&ctx) {
                    c.retired_events.push(ev);
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        s.tables().events.remove(&key);
        release(&s, ctx, ev)
    })
}

/// The event `p` names, checked against the current context.
fn event_checked(s: &Session, p: aclrtEvent) -> AclResult<(u64, Event, u64)> {
    let (key, ev, ctx) = event(s, p, "event")?;
    s.rt.events().query(ev)?;
    Ok((key, ev, ctx))
}

/// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`: records `event` on
/// `stream` (NULL: the default stream): it fires when the work submitted so far is done.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    call("aclrtRecordEvent", || {
        let s = session()?;
        let (_, ev, _) = self::event(&s, event, "event")?;
        let st = s.stream_or_default(stream)?;
        s.rt.events().record(ev, st)?;
        s.note_latest(st);
        Ok(())
    })
}

/// `aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)`: returns `event` to its
/// initial, never-recorded state, so it can be reused: waits enqueued from now on do not
/// block until it is recorded again. Waits enqueued before keep the record they captured.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    call("aclrtResetEvent", || {
        let s = session()?;
        let (key, old, ctx) = event_checked(&s, event)?;
        s.rt.streams().query(s.stream_or_default(stream)?)?;
        let fresh = s.rt.events().create()?;
        match s.tables().events.get_mut(&key) {
            Some(e) => e.event = fresh,
            None => {
                return Err(AclError::new(
                    ACL_ERROR_RT_PARAM_INVALID,
                    "the event was destroyed during the reset",
                ));
            }
        }
        release(&s, ctx, old)
    })
}

/// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`: `stream`'s later work
/// waits until the latest record of `event` (as of now) fires.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError {
    call("aclrtStreamWaitEvent", || {
        let s = session()?;
        let (_, ev, _) = self::event(&s, event, "event")?;
        s.rt.events()
            .stream_wait(s.stream_or_default(stream)?, ev)?;
        Ok(())
    })
}

/// `aclError aclrtSynchronizeEvent(aclrtEvent event)`: waits until the latest record of
/// `event` fires.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError {
    call("aclrtSynchronizeEvent", || {
        let s = session()?;
        let (_, ev, _) = self::event(&s, event, "event")?;
        let result = s.rt.events().synchronize(ev);
        s.flush_prints();
        Ok(result?)
    })
}

/// `aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)`: as
/// `aclrtSynchronizeEvent`, giving up after `timeout` milliseconds (-1: never) of *simulated*
/// device time with ACL_ERROR_RT_EVENT_SYNC_TIMEOUT; the record stays queued.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeEventWithTimeout(event: aclrtEvent, timeout: i32) -> aclError {
    call("aclrtSynchronizeEventWithTimeout", || {
        let s = session()?;
        let (_, ev, _) = self::event(&s, event, "event")?;
        if timeout != -1 && timeout <= 0 {
            return Err(AclError::param(format!(
                "timeout {timeout}: expected -1 (for ever) or a positive number of milliseconds"
            )));
        }
        let result = if timeout > 0 {
            s.rt.events()
                .synchronize_timeout(ev, SimTime::from_ms(timeout as u64))
        } else {
            s.rt.events().synchronize(ev)
        };
        s.flush_prints();
        match result {
            Err(e @ NpuError::WaitTimeout { .. }) => Err(AclError::new(
                ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                format!("{e} (the event's record did not fire within {timeout} ms)"),
            )),
            other => Ok(other?),
        }
    })
}

/// `aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)`:
/// ACL_EVENT_RECORDED_STATUS_COMPLETE once the latest record fired, else
/// ACL_EVENT_RECORDED_STATUS_NOT_READY (and the device advances by one frame). An event never
/// recorded (or reset) is NOT_READY, as ACL reports it.
///
/// # Safety
/// `status` is NULL or points to an `aclrtEventRecordedStatus`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEventStatus(event: aclrtEvent, status: *mut u32) -> aclError {
    call("aclrtQueryEventStatus", || {
        non_null(status, "status")?;
        let s = session()?;
        let (_, ev, _) = self::event(&s, event, "event")?;
        let fired = s.rt.events().query(ev)?;
        if !fired {
            s.rt.step();
        }
        let recorded = !matches!(
            s.rt.events().timestamp(ev),
            Err(NpuError::EventNotRecorded(_))
        );
        let v = if fired && recorded {
            ACL_EVENT_RECORDED_STATUS_COMPLETE
        } else {
            ACL_EVENT_RECORDED_STATUS_NOT_READY
        };
        // SAFETY: checked non-NULL; the caller passes a writable aclrtEventRecordedStatus.
        unsafe { status.write(v) };
        Ok(())
    })
}

/// `aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)`:
/// simulated milliseconds between the latest records of the two events, both fired.
///
/// # Safety
/// `ms` is NULL or points to a `float`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    startEvent: aclrtEvent,
    endEvent: aclrtEvent,
) -> aclError {
    call("aclrtEventElapsedTime", || {
        non_null(ms, "ms")?;
        let s = session()?;
        let (_, a, _) = event(&s, startEvent, "startEvent")?;
        let (_, b, _) = event(&s, endEvent, "endEvent")?;
        let v = s.rt.events().elapsed_ms(a, b)?;
        // SAFETY: checked non-NULL; the caller passes a writable float.
        unsafe { ms.write(v) };
        Ok(())
    })
}

/// `aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp)`: when the latest
/// record of `event` fired, in microseconds of simulated device time since `aclInit` (real
/// hardware gives its system counter; npusim's counter is the simulated clock).
/// ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID if never recorded, ACL_ERROR_RT_EVENT_NOT_COMPLETE if
/// the record has not fired yet.
///
/// # Safety
/// `timestamp` is NULL or points to a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventGetTimestamp(
    event: aclrtEvent,
    timestamp: *mut u64,
) -> aclError {
    call("aclrtEventGetTimestamp", || {
        non_null(timestamp, "timestamp")?;
        let s = session()?;
        let (_, ev, _) = self::event(&s, event, "event")?;
        let t = s.rt.events().timestamp(ev)?;
        // SAFETY: checked non-NULL; the caller passes a writable uint64_t.
        unsafe { timestamp.write(t.as_ns() / 1000) };
        Ok(())
    })
}
