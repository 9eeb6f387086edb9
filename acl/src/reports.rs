//! The callback-report hub: which thread serves which stream, and the callbacks due for each
//! thread. The callback tasks hand their reports in here, the subscribed threads take them out
//! in their `aclrtProcessReport` (or `aclrtProcessHostFunc`) loops; the `callback` module has the
//! C functions and the whole story.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use npusim_engine::Stream;
use npusim_engine::callback::CallbackScope;

use crate::error::{AclError, AclResult};
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
    pub(crate) fn new(
        f: unsafe extern "C" fn(*mut c_void),
        user_data: usize,
        stream: Stream,
    ) -> Self {
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
    pub(crate) fn deliver_from_task(self: Arc<Self>, reports: &Reports, block: bool) {
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

    /// Whether `stream` has a subscribed thread.
    pub fn is_subscribed(&self, stream: Stream) -> bool {
        self.lock().subscribers.contains_key(&stream)
    }

    /// Makes `thread` serve `stream` (of context `ctx`); ACL_ERROR_REPEAT_SUBSCRIBE if a
    /// thread already does.
    pub fn subscribe(&self, stream: Stream, thread: u64, ctx: u64) -> AclResult<()> {
        let mut state = self.lock();
        if let Some((t, _)) = state.subscribers.get(&stream) {
            return Err(AclError::new(
                ACL_ERROR_REPEAT_SUBSCRIBE,
                format!("{stream} is already subscribed by thread {t:#x}"),
            ));
        }
        state.subscribers.insert(stream, (thread, ctx));
        Ok(())
    }

    /// `thread` no longer serves `stream`; the stream's callbacks still queued run here.
    pub fn unsubscribe(&self, stream: Stream, thread: u64) -> AclResult<()> {
        let orphans = {
            let mut state = self.lock();
            if state.subscribers.get(&stream).map(|(t, _)| *t) != Some(thread) {
                return Err(AclError::new(
                    ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                    format!("{stream} is not subscribed by thread {thread:#x}"),
                ));
            }
            state.subscribers.remove(&stream);
            take_stream(&mut state, stream)
        };
        for r in orphans {
            r.run();
        }
        Ok(())
    }

    /// On a subscribed thread: waits up to `deadline` (none: for ever) for one of its
    /// callbacks to come due and runs it; `timeout` (its milliseconds) names it in the error.
    pub fn process(&self, deadline: Option<Instant>, timeout: i32) -> AclResult<()> {
        let me = thread_id();
        let mut st = self.lock();
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
                None => self.cv.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(AclError::new(
                            ACL_ERROR_RT_REPORT_TIMEOUT,
                            format!("nothing came due within {timeout} ms"),
                        ));
                    }
                    self.cv
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
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
