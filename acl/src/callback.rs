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
use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use npusim_engine::Stream;
use npusim_engine::callback::CallbackScope;

use crate::error::{AclError, call};
use crate::session::{Session, session};
use crate::types::*;

/// The calling thread's id, as `pthread_self()` gives it to C (and C to `aclrtSubscribeReport`).
pub(crate) fn thread_id() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

/// One callback on its way to its thread.
pub(crate) struct Report {
    f: unsafe extern "C" fn(*mut c_void),
    user_data: usize,
    stream: Stream,
    done: Mutex<bool>,
    cv: Condvar,
    /// The scope of the callback task waiting for this report (blocking reports only).
    scope: Mutex<Option<CallbackScope>>,
}

impl Report {
    fn new(f: unsafe extern "C" fn(*mut c_void), user_data: usize, stream: Stream) -> Self {
        Self {
            f,
            user_data,
            stream,
            done: Mutex::new(false),
            cv: Condvar::new(),
            scope: Mutex::new(None),
        }
    }

    pub(crate) fn run(&self) {
        let scope = self.scope.lock().unwrap_or_else(|p| p.into_inner()).take();
        // SAFETY: a callback C registered, with the user data C gave for it.
        let call = || unsafe { (self.f)(self.user_data as *mut c_void) };
        match scope {
            Some(mut scope) => {
                scope.run(call);
                *self.scope.lock().unwrap_or_else(|p| p.into_inner()) = Some(scope);
            }
            None => call(),
        }
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    /// On the callback task's thread: runs the report (here or on its thread), waiting for it
    /// if `block`, inside the task's scope.
    fn deliver_from_task(self: Arc<Self>, reports: &Reports, block: bool) {
        let scope = if block {
            CallbackScope::current()
        } else {
            None
        };
        *self.scope.lock().unwrap_or_else(|p| p.into_inner()) = scope;
        reports.deliver(self.clone(), block);
        if block && let Some(scope) = *self.scope.lock().unwrap_or_else(|p| p.into_inner()) {
            scope.resume();
        }
    }

    pub(crate) fn wait(&self) {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let _done = self
            .cv
            .wait_while(done, |d| !*d)
            .unwrap_or_else(|p| p.into_inner());
    }
}

#[derive(Default)]
struct State {
    /// Stream → the thread that runs its callbacks, and the stream's context handle.
    subscribers: BTreeMap<Stream, (u64, u64)>,
    /// Thread → callbacks due, oldest first.
    queues: BTreeMap<u64, VecDeque<Arc<Report>>>,
    /// Set by `aclFinalize`: waiting threads return.
    closed: bool,
}

/// The subscriptions and the callbacks due, shared by the callback tasks and the report threads.
#[derive(Default)]
pub(crate) struct Reports {
    state: Mutex<State>,
    cv: Condvar,
}

impl Reports {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `report` to its stream's thread (or runs it here, see the module docs).
    fn deliver(&self, report: Arc<Report>, block: bool) {
        self.deliver_or(report, block, |r| r.run());
    }

    /// Hands `report` to its stream's subscribed thread; with none (or when that thread is
    /// this one), gives it to `otherwise`.
    fn deliver_or(&self, report: Arc<Report>, block: bool, otherwise: impl FnOnce(Arc<Report>)) {
        let me = thread_id();
        let mut st = self.lock();
        match st.subscribers.get(&report.stream).copied() {
            Some((thread, _)) if thread != me && !st.closed => {
                st.queues
                    .entry(thread)
                    .or_default()
                    .push_back(report.clone());
                drop(st);
                self.cv.notify_all();
                if block {
                    report.wait();
                }
            }
            _ => {
                drop(st);
                otherwise(report);
            }
        }
    }

    /// Forgets `stream`'s subscription; callbacks of it still queued run on this thread.
    pub fn forget(&self, stream: Stream) {
        let orphans = {
            let mut st = self.lock();
            st.subscribers.remove(&stream);
            take_stream(&mut st, stream)
        };
        for r in orphans {
            r.run();
        }
    }

    /// Forgets the subscriptions of every stream of context `ctx` (destroyed or reset).
    pub fn forget_context(&self, ctx: u64) {
        let streams: Vec<Stream> = {
            let st = self.lock();
            st.subscribers
                .iter()
                .filter(|(_, (_, c))| *c == ctx)
                .map(|(s, _)| *s)
                .collect()
        };
        for s in streams {
            self.forget(s);
        }
    }

    /// Wakes every waiting thread for good, and runs the callbacks still queued here.
    pub fn close(&self) {
        let orphans: Vec<Arc<Report>> = {
            let mut st = self.lock();
            st.closed = true;
            st.subscribers.clear();
            std::mem::take(&mut st.queues)
                .into_values()
                .flatten()
                .collect()
        };
        self.cv.notify_all();
        for r in orphans {
            r.run();
        }
    }
}

fn take_stream(st: &mut State, stream: Stream) -> Vec<Arc<Report>> {
    let mut taken = Vec::new();
    for q in st.queues.values_mut() {
        let (mine, rest): (VecDeque<_>, VecDeque<_>) =
            q.drain(..).partition(|r| r.stream == stream);
        *q = rest;
        taken.extend(mine);
    }
    taken
}

/// Which hub a call serves: the callback reports or the host functions.
type Hub = fn(&Session) -> &Arc<Reports>;

fn reports_hub(s: &Session) -> &Arc<Reports> {
    &s.reports
}

fn host_func_hub(s: &Session) -> &Arc<Reports> {
    &s.host_funcs
}

fn subscribe(hub: Hub, thread: u64, stream: aclrtStream) -> crate::error::AclResult<()> {
    let s = session()?;
    let st = s.stream_or_default(stream)?;
    // Checks the stream belongs to the current context.
    s.rt.streams().query(st)?;
    let (ctx, _) = s.current_ctx()?;
    let mut state = hub(&s).lock();
    if let Some((t, _)) = state.subscribers.get(&st) {
        return Err(AclError::new(
            ACL_ERROR_REPEAT_SUBSCRIBE,
            format!("{st} is already subscribed by thread {t:#x}"),
        ));
    }
    state.subscribers.insert(st, (thread, ctx));
    Ok(())
}

fn unsubscribe(hub: Hub, thread: u64, stream: aclrtStream) -> crate::error::AclResult<()> {
    let s = session()?;
    let st = s.stream_or_default(stream)?;
    let orphans = {
        let mut state = hub(&s).lock();
        if state.subscribers.get(&st).map(|(t, _)| *t) != Some(thread) {
            return Err(AclError::new(
                ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                format!("{st} is not subscribed by thread {thread:#x}"),
            ));
        }
        state.subscribers.remove(&st);
        take_stream(&mut state, st)
    };
    for r in orphans {
        r.run();
    }
    Ok(())
}

fn process(hub: Hub, timeout: i32) -> crate::error::AclResult<()> {
    if timeout == 0 || timeout < -1 {
        return Err(AclError::param(format!(
            "timeout {timeout}: expected -1 (for ever) or a positive number of milliseconds"
        )));
    }
    // Only the hub is kept while waiting: aclFinalize must not wait for this thread.
    let reports = hub(&*session()?).clone();
    let me = thread_id();
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    let mut st = reports.lock();
    loop {
        if st.closed {
            return Err(AclError::new(
                ACL_ERROR_UNINITIALIZE,
                "aclFinalize was called",
            ));
        }
        if let Some(r) = st.queues.get_mut(&me).and_then(VecDeque::pop_front) {
            drop(st);
            r.run();
            return Ok(());
        }
        if !st.subscribers.values().any(|&(t, _)| t == me) {
            return Err(AclError::new(
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
                format!("thread {me:#x} is not subscribed to any stream"),
            ));
        }
        st = match deadline {
            None => reports.cv.wait(st).unwrap_or_else(|p| p.into_inner()),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Err(AclError::new(
                        ACL_ERROR_RT_REPORT_TIMEOUT,
                        format!("nothing came due within {timeout} ms"),
                    ));
                }
                reports
                    .cv
                    .wait_timeout(st, d - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
    }
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
        if !s.reports.lock().subscribers.contains_key(&st) {
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
