//! Host callbacks the ACL way: `aclrtLaunchCallback` puts a callback in a stream; when the
//! stream reaches it, the callback is handed to the thread subscribed to that stream
//! (`aclrtSubscribeReport`), which runs it inside its `aclrtProcessReport` loop.
//!
//! Under the hood the callback task is an npusim host function (`launch_host_func`): it runs on
//! the callback thread of the stream's context (never on the thread that drove the device),
//! and its job is to queue the callback for the subscribed thread. With `ACL_CALLBACK_BLOCK`
//! it then waits until that thread has run the callback; the task completes only then, so the
//! stream's later tasks start after the callback, and a synchronize of the stream, from any
//! thread, returns after it. The subscribed thread runs a blocking callback inside the
//! callback's scope (`CallbackScope`): its calls charge the callback's host clock, and a wait
//! for its own stream fails at once (`ACL_ERROR_RT_WAIT_TIMEOUT`) instead of hanging. A
//! callback whose stream lost its subscriber before it was delivered runs on the context's
//! callback thread instead. A subscription nobody serves (a thread that never calls
//! `aclrtProcessReport`, or has exited) leaves the callback pending: a synchronize gives up
//! after the runtime's callback timeout (`NPUSIM_CALLBACK_TIMEOUT_MS`, default 60 s) with
//! `ACL_ERROR_RT_REPORT_TIMEOUT`, `aclrtSynchronizeStreamWithTimeout` after its timeout with
//! `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`; unsubscribing runs the callback on the calling thread.
//!
//! Like every npusim wait, the device advances only while some host thread waits on it:
//! `aclrtProcessReport` waits for callbacks, not for the device, so a program must still
//! synchronize (or poll a stream or event) for its callbacks to come due.

use npusim_engine::HostFunc;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{AclError, AclResult, call};
use crate::reports::{Report, Reports};
use crate::state::{Session, session};
use crate::types::*;

/// Which hub a call serves: the callback reports or the host functions.
type Hub = fn(&Session) -> &Arc<Reports>;

fn reports_hub(s: &Session) -> &Arc<Reports> {
    &s.reports
}

fn host_func_hub(s: &Session) -> &Arc<Reports> {
    &s.host_funcs
}

fn subscribe(hub: Hub, thread: u64, stream: aclrtStream) -> AclResult<()> {
    let s = session()?;
    let st = s.stream_or_default(stream)?;
    // Checks the stream belongs to the current context.
    s.rt.streams().query(st)?;
    let (ctx, _) = s.current_ctx()?;
    hub(&s).subscribe(st, thread, ctx)
}

fn unsubscribe(hub: Hub, thread: u64, stream: aclrtStream) -> AclResult<()> {
    let s = session()?;
    let st = s.stream_or_default(stream)?;
    hub(&s).unsubscribe(st, thread)
}

fn process(hub: Hub, timeout: i32) -> AclResult<()> {
    if timeout == 0 || timeout < -1 {
        return Err(AclError::param(format!(
            "timeout {timeout}: expected -1 (for ever) or a positive number of milliseconds"
        )));
    }
    // Only the hub is kept while waiting: aclFinalize must not wait for this thread.
    let reports = hub(&*session()?).clone();
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    reports.process(deadline, timeout)
}

/// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`: makes thread
/// `threadId` (its `pthread_t`) run the callbacks launched on `stream` (NULL: the default
/// stream), from its `aclrtProcessReport` loop. A thread may serve several streams; a stream
/// has one thread (ACL_ERROR_REPEAT_SUBSCRIBE otherwise).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSubscribeReport(threadId: u64, stream: aclrtStream) -> aclError {
    call("aclrtSubscribeReport", || {
        subscribe(reports_hub, threadId, stream)
    })
}

/// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`: `threadId` no
/// longer serves `stream`. Callbacks of the stream already due but not yet run are run by the
/// calling thread before this returns.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtUnSubscribeReport(threadId: u64, stream: aclrtStream) -> aclError {
    call("aclrtUnSubscribeReport", || {
        unsubscribe(reports_hub, threadId, stream)
    })
}

/// `aclError aclrtProcessReport(int32_t timeout)`: on a subscribed thread, waits up to
/// `timeout` milliseconds of wall-clock time (-1: for ever) for a callback of one of its
/// streams to come due, and runs it. ACL_ERROR_RT_REPORT_TIMEOUT if none came;
/// ACL_ERROR_RT_THREAD_SUBSCRIBE if the thread serves no stream. (CANN's runtime returns these;
/// its documentation lists ACL_ERROR_WAIT_CALLBACK_TIMEOUT and ACL_ERROR_THREAD_NOT_SUBSCRIBE
/// as deprecated in their favour.)
#[unsafe(no_mangle)]
pub extern "C" fn aclrtProcessReport(timeout: i32) -> aclError {
    call("aclrtProcessReport", || process(reports_hub, timeout))
}

/// `aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)`: makes
/// thread `hostFuncThreadId` (its `pthread_t`) run the host functions launched on `exeStream`
/// (NULL: the default stream), from its `aclrtProcessHostFunc` loop.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSubscribeHostFunc(
    hostFuncThreadId: u64,
    exeStream: aclrtStream,
) -> aclError {
    call("aclrtSubscribeHostFunc", || {
        subscribe(host_func_hub, hostFuncThreadId, exeStream)
    })
}

/// `aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)`: the
/// thread no longer serves the stream; host functions of it already due run on the calling
/// thread before this returns.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtUnSubscribeHostFunc(
    hostFuncThreadId: u64,
    exeStream: aclrtStream,
) -> aclError {
    call("aclrtUnSubscribeHostFunc", || {
        unsubscribe(host_func_hub, hostFuncThreadId, exeStream)
    })
}

/// `aclError aclrtProcessHostFunc(int32_t timeout)`: on a thread subscribed with
/// `aclrtSubscribeHostFunc`, waits up to `timeout` wall-clock milliseconds (-1: for ever) for
/// a host function to come due, and runs it (ACL_ERROR_RT_REPORT_TIMEOUT if none came,
/// ACL_ERROR_RT_THREAD_SUBSCRIBE on a thread that serves no stream).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtProcessHostFunc(timeout: i32) -> aclError {
    call("aclrtProcessHostFunc", || process(host_func_hub, timeout))
}

/// `aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args)`: enqueues
/// `fn(args)` on `stream` (NULL: the default stream); the stream's later work waits for it. On
/// a stream subscribed with `aclrtSubscribeHostFunc` it runs on that thread; otherwise on a
/// thread of the runtime's own, as ACL's does, when the stream reaches it.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtLaunchHostFunc(
    stream: aclrtStream,
    fn_: aclrtHostFunc,
    args: *mut c_void,
) -> aclError {
    call("aclrtLaunchHostFunc", || {
        let f = fn_.ok_or_else(|| AclError::null("fn"))?;
        let s = session()?;
        let st = s.stream_or_default(stream)?;
        let report = Arc::new(Report::new(f, args as usize, st));
        let hub = s.host_funcs.clone();
        // Unsubscribed, it runs on the context's callback thread (the runtime's own thread,
        // as ACL's); the stream waits meanwhile.
        let sub = s.rt.submit(HostFunc::new(st, move || {
            report.deliver_from_task(&hub, true)
        }))?;
        s.note_task(sub);
        Ok(())
    })
}

/// `aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType
/// blockType, aclrtStream stream)`: enqueues `fn(userData)` on `stream` (NULL: the default
/// stream), to run on the stream's subscribed thread when the stream reaches it. With
/// ACL_CALLBACK_BLOCK (1) the stream's later work waits for it; ACL_CALLBACK_NO_BLOCK (0) does
/// not wait. The stream must be subscribed (ACL_ERROR_RT_STREAM_NO_CB_REG otherwise).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtLaunchCallback(
    fn_: aclrtCallback,
    userData: *mut c_void,
    blockType: u32,
    stream: aclrtStream,
) -> aclError {
    call("aclrtLaunchCallback", || {
        let f = fn_.ok_or_else(|| AclError::null("fn"))?;
        let block = match blockType {
            ACL_CALLBACK_NO_BLOCK => false,
            ACL_CALLBACK_BLOCK => true,
            other => {
                return Err(AclError::param(format!(
                    "blockType {other}: expected ACL_CALLBACK_NO_BLOCK or ACL_CALLBACK_BLOCK"
                )));
            }
        };
        let s = session()?;
        let st = s.stream_or_default(stream)?;
        if !s.reports.is_subscribed(st) {
            return Err(AclError::new(
                ACL_ERROR_RT_STREAM_NO_CB_REG,
                format!("{st} has no subscribed thread (aclrtSubscribeReport)"),
            ));
        }
        let report = Arc::new(Report::new(f, userData as usize, st));
        let reports = s.reports.clone();
        let sub = s.rt.submit(HostFunc::new(st, move || {
            report.deliver_from_task(&reports, block)
        }))?;
        s.note_task(sub);
        Ok(())
    })
}
