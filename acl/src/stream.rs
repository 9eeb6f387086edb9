//! Streams. A NULL `aclrtStream` names the current context's default stream wherever ACL
//! allows it (synchronize, query, copies, launches, records, waits, callbacks).
//!
//! Waiting (`aclrtSynchronizeStream`) drives the simulated device until the stream's work is
//! done and returns the first error of a task on the stream since the last synchronize.
//! Polling (`aclrtStreamQuery`) advances the device by one frame each time it answers "not
//! ready", so a polling loop ends as it would on hardware.

use npusim_engine::{FailureMode, NpuError, SimTime, StreamConfig};

use crate::error::{AclError, call, non_null};
use crate::handles::{Kind, lookup, to_ptr};
use crate::state::session;
use crate::types::*;

/// `aclError aclrtCreateStream(aclrtStream *stream)`: a stream in the current context.
///
/// # Safety
/// `stream` is NULL or points to an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    call("aclrtCreateStream", || {
        non_null(stream, "stream")?;
        // SAFETY: as this function's.
        unsafe { create(stream, StreamConfig::default()) }
    })
}

/// `aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t
/// flag)`: as `aclrtCreateStream`, with a priority (lower is dispatched first; ACL reserves it,
/// npusim honours it). The flags (ACL_STREAM_FAST_LAUNCH, ...) change nothing in the model.
///
/// # Safety
/// `stream` is NULL or points to an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStreamWithConfig(
    stream: *mut aclrtStream,
    priority: u32,
    flag: u32,
) -> aclError {
    let _ = flag;
    call("aclrtCreateStreamWithConfig", || {
        non_null(stream, "stream")?;
        let config = StreamConfig {
            priority: priority.min(i32::MAX as u32) as i32,
            ..StreamConfig::default()
        };
        // SAFETY: as this function's.
        unsafe { create(stream, config) }
    })
}

/// # Safety
/// `out` is non-NULL and writable.
unsafe fn create(out: *mut aclrtStream, config: StreamConfig) -> crate::error::AclResult<()> {
    let s = session()?;
    let (ctx, _) = s.current_ctx()?;
    let st = s.rt.streams().create_with(config)?;
    let key = s.tables().add_stream(st, ctx);
    // SAFETY: the caller checked `out`.
    unsafe { out.write(to_ptr(key)) };
    Ok(())
}

/// Writes the kernel prints when dropped (the synchronizes' every way out).
pub(crate) struct FlushOnDrop<'a>(pub &'a crate::state::Session);

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        self.0.flush_prints();
    }
}

/// Destroys the stream `stream` names; with `force`, whatever its work's outcome.
fn destroy(stream: aclrtStream, force: bool) -> crate::error::AclResult<()> {
    let s = session()?;
    let (key, st, default, ctx) = {
        let t = s.tables();
        let (key, e) = lookup(&t.streams, Kind::Stream, stream, "stream")?;
        (key, e.stream, e.default, e.ctx)
    };
    if default {
        return Err(AclError::param(
            "the default stream (aclrtCtxGetCurrentDefaultStream) cannot be destroyed",
        ));
    }
    let result = s.rt.streams().destroy(st);
    s.flush_prints();
    // After a fault under ACL_STOP_ON_FAILURE the runtime refuses the context's streams, but
    // destroying one is cleanup and succeeds, as in ACL: the runtime stream goes with the
    // context (or the reset that clears its fault).
    let faulted = result.is_err() && matches!(s.rt.contexts().error(), Ok(Some(_)));
    // A wait that can never finish still destroys the stream; so does anything, forced.
    let gone = match &result {
        Ok(()) | Err(NpuError::NeverCompletes(_)) => true,
        Err(NpuError::Destroyed(_)) | Err(NpuError::ForeignHandle(_)) => false,
        Err(_) => force || faulted,
    };
    if gone {
        let mut t = s.tables();
        if result.is_err()
            && !matches!(result, Err(NpuError::NeverCompletes(_)))
            && let Some(c) = t.contexts.get_mut(&ctx)
        {
            c.retired_streams.push(st);
        }
        t.remove_stream(key);
        drop(t);
        s.reports.forget(st);
        s.host_funcs.forget(st);
    }
    match result {
        Err(NpuError::NeverCompletes(_)) if !force => Ok(result?),
        Err(_) if gone => Ok(()),
        r => Ok(r?),
    }
}

/// `aclError aclrtDestroyStream(aclrtStream stream)`: waits for the stream's work, then
/// destroys it. The default stream (NULL) cannot be destroyed.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    call("aclrtDestroyStream", || destroy(stream, false))
}

/// `aclError aclrtDestroyStreamForce(aclrtStream stream)`: destroys a stream made by
/// `aclrtCreateStream*` whatever became of its work: the stream goes even when a task on it
/// failed, its context faulted or a wait on it can never finish. npusim lets queued work that
/// can still run finish first (real hardware may drop it); nothing else observable differs.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    call("aclrtDestroyStreamForce", || destroy(stream, true))
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)`: waits until the stream's work is
/// done; returns the first error of its tasks since the last synchronize.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    call("aclrtSynchronizeStream", || {
        let s = session()?;
        let result = s.rt.streams().synchronize(s.stream_or_default(stream)?);
        s.flush_prints();
        Ok(result?)
    })
}

/// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`: as
/// `aclrtSynchronizeStream`, giving up after `timeout` milliseconds (-1: never) of *simulated*
/// time with ACL_ERROR_RT_STREAM_SYNC_TIMEOUT; the work stays queued.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32) -> aclError {
    call("aclrtSynchronizeStreamWithTimeout", || {
        let s = session()?;
        let st = s.stream_or_default(stream)?;
        let _flush = FlushOnDrop(&s);
        match timeout {
            -1 => s.rt.streams().synchronize(st)?,
            t if t > 0 => match s
                .rt
                .streams()
                .synchronize_timeout(st, SimTime::from_ms(t as u64))
            {
                Err(e @ NpuError::WaitTimeout { .. }) => {
                    return Err(AclError::new(
                        ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                        e.to_string(),
                    ));
                }
                other => other?,
            },
            t => {
                return Err(AclError::param(format!(
                    "timeout {t}: expected -1 (for ever) or a positive number of milliseconds"
                )));
            }
        }
        Ok(())
    })
}

/// `aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)`:
/// ACL_STREAM_STATUS_COMPLETE when every task on the stream is done, else
/// ACL_STREAM_STATUS_NOT_READY (and the device advances by one frame).
///
/// # Safety
/// `status` is NULL or points to an `aclrtStreamStatus`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamQuery(stream: aclrtStream, status: *mut u32) -> aclError {
    call("aclrtStreamQuery", || {
        non_null(status, "status")?;
        let s = session()?;
        let done = s.rt.streams().query(s.stream_or_default(stream)?)?;
        if !done {
            s.rt.step();
        }
        let v = if done {
            ACL_STREAM_STATUS_COMPLETE
        } else {
            ACL_STREAM_STATUS_NOT_READY
        };
        // SAFETY: checked non-NULL; the caller passes a writable aclrtStreamStatus.
        unsafe { status.write(v) };
        Ok(())
    })
}

/// `aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)`: what a failing
/// task does to the rest of the work. As ACL documents, the mode applies to every stream of
/// the stream's context: ACL_CONTINUE_ON_FAILURE (the default) fails the task alone;
/// ACL_STOP_ON_FAILURE aborts the context's queued work and leaves a sticky error.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetStreamFailureMode(stream: aclrtStream, mode: u64) -> aclError {
    call("aclrtSetStreamFailureMode", || {
        let mode = match mode {
            ACL_CONTINUE_ON_FAILURE => FailureMode::Continue,
            ACL_STOP_ON_FAILURE => FailureMode::StopOnFailure,
            other => {
                return Err(AclError::param(format!(
                    "mode {other}: expected ACL_CONTINUE_ON_FAILURE or ACL_STOP_ON_FAILURE"
                )));
            }
        };
        let s = session()?;
        // The stream must be of the current context, whose mode this sets.
        s.rt.streams().query(s.stream_or_default(stream)?)?;
        s.rt.contexts().set_failure_mode(mode)?;
        Ok(())
    })
}
