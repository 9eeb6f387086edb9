//! Host callbacks and where they run. A callback task that reaches its end is *released*: the
//! hardware tick hands its body to the runtime, and its task stays running. After the frame,
//! the runtime sends the body to the callback thread of the task's context (one per context,
//! started on first use), never running it on the thread that drove the frame. When the body
//! returns (or panics), the thread reports it; the next frame puts the task back on the device
//! with its end time, and the tick completes it there, in stream order. So later work on the
//! stream starts only after the callback returned, and a synchronize of the stream returns only
//! after it, from whichever thread it is called.
//!
//! **Time.** A callback has a host clock of its own, which starts at the instant its task was
//! released: the calls it makes charge that clock (not the program's), `host_work` moves it,
//! a synchronize moves it to the device's completion time. The task ends at that clock's time
//! when the callback returns. While a callback runs, the device clock does not pass its
//! release instant for a wait of the same context (the callback may still enqueue work there),
//! nor, for a short wall-time grace ([`OTHER_CONTEXT_GRACE`]), for waits of other contexts:
//! a one-thread program gets the same timeline on every run. After the grace, other contexts
//! go on without it, so one tenant's slow callback does not hold up another.
//!
//! **Failures.** A panicking callback fails its task with [`NpuError::CallbackPanicked`]
//! (`ACL_ERROR_RT_INTERNAL_ERROR`), reported by the stream's next synchronize; the stream's
//! later work still runs and the context is not faulted. A wait that needs a callback gives it
//! [`RuntimeConfig::callback_timeout`](crate::RuntimeConfig::callback_timeout) of wall time;
//! past it the wait returns [`NpuError::CallbackTimeout`] (`ACL_ERROR_RT_REPORT_TIMEOUT`), or a
//! timed wait its own timeout, and the callback's task stays pending. A wait made *from* a
//! callback that needs that callback (or one queued behind it on the same thread) to finish
//! can never finish: it returns [`NpuError::NeverCompletes`] (`ACL_ERROR_RT_WAIT_TIMEOUT`) at
//! once — synchronizing its own stream or device, destroying its own stream, unloading a
//! binary of its device.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bevy_ecs::prelude::*;
use npusim_components::task::Callback;
use npusim_components::{NpuError, SimTime};

/// How long a wait of one context holds the device clock for a callback of another context
/// before going on without it (wall time).
pub const OTHER_CONTEXT_GRACE: Duration = Duration::from_millis(20);

/// The default of [`RuntimeConfig::callback_timeout`](crate::RuntimeConfig::callback_timeout):
/// 60 s, or `NPUSIM_CALLBACK_TIMEOUT_MS` milliseconds when that variable is set.
pub fn default_callback_timeout() -> Duration {
    std::env::var("NPUSIM_CALLBACK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(60), Duration::from_millis)
}

thread_local! {
    /// Set while this thread runs a host callback: (runtime id, the callback's context, the
    /// callback's host clock).
    static RUNNING: Cell<Option<(u32, Entity, SimTime)>> = const { Cell::new(None) };
    /// The host callback task this thread runs, as the sanitizer and the recorder name it:
    /// (runtime id, its stream, its position).
    static CALLBACK: Cell<Option<(u32, Entity, u64)>> = const { Cell::new(None) };
}

/// Marks this thread as running the host callback at `seq` on `stream` of runtime `runtime`
/// (or none) and returns what it ran before.
pub(crate) fn enter_callback(task: Option<(u32, Entity, u64)>) -> Option<(u32, Entity, u64)> {
    CALLBACK.with(|c| c.replace(task))
}

/// The callback this thread runs, if any.
pub(crate) fn current_callback() -> Option<(u32, Entity, u64)> {
    CALLBACK.try_with(|c| c.get()).ok().flatten()
}

/// Makes `running` the callback this thread runs (`None`: none), returning the one it ran: the
/// one way to change which callback a thread runs (the current context depends on it, and
/// `context::top_for` keeps its answer until this forgets it). `None` too if the thread's
/// locals are gone.
fn set_running(running: Option<(u32, Entity, SimTime)>) -> Option<(u32, Entity, SimTime)> {
    crate::context::forget_top();
    RUNNING.try_with(|r| r.replace(running)).ok().flatten()
}

/// The host clock of the callback this thread runs for runtime `runtime`, if it runs one.
#[inline]
pub(crate) fn clock_of(runtime: u32) -> Option<SimTime> {
    RUNNING
        .try_with(|r| r.get())
        .ok()
        .flatten()
        .and_then(|(rt, _, t)| (rt == runtime).then_some(t))
}

/// Sets the clock of the callback this thread runs for `runtime`; false if it runs none.
#[inline]
pub(crate) fn set_clock_of(runtime: u32, t: SimTime) -> bool {
    RUNNING
        .try_with(|r| match r.get() {
            Some((rt, ctx, _)) if rt == runtime => {
                r.set(Some((rt, ctx, t)));
                true
            }
            _ => false,
        })
        .unwrap_or(false)
}

/// Moves the clock of the callback this thread runs for `runtime` on by `d` and returns it;
/// `None` (and nothing changed) if the thread runs none.
#[inline]
pub(crate) fn advance_clock_of(runtime: u32, d: SimTime) -> Option<SimTime> {
    RUNNING
        .try_with(|r| match r.get() {
            Some((rt, ctx, t)) if rt == runtime => {
                let t = t + d;
                r.set(Some((rt, ctx, t)));
                Some(t)
            }
            _ => None,
        })
        .ok()
        .flatten()
}

/// The context of the callback this thread runs for `runtime`, if it runs one.
pub(crate) fn context_of(runtime: u32) -> Option<Entity> {
    RUNNING
        .try_with(|r| r.get())
        .ok()
        .flatten()
        .and_then(|(rt, ctx, _)| (rt == runtime).then_some(ctx))
}

/// A callback that returned: which task, when on its clock, and how.
struct Returned {
    task: Entity,
    stream: Entity,
    seq: u64,
    end: SimTime,
    panic: Option<String>,
}

/// Where callback threads report returns, and where waits sleep until one comes; also where
/// a wait at a rendezvous sleeps until another thread enqueues a rank's part (a *poke*).
#[derive(Default)]
pub(crate) struct Hub {
    returns: Mutex<Vec<Returned>>,
    cv: Condvar,
    /// Pokes so far.
    pokes: Mutex<u64>,
    poked: Condvar,
}

impl Hub {
    fn push(&self, r: Returned) {
        self.returns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(r);
        self.cv.notify_all();
    }

    /// Whether a return waits to be taken.
    pub(crate) fn has_returns(&self) -> bool {
        !self
            .returns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Wakes the waits sleeping in [`Hub::wait_poke`]: a collective's part was enqueued.
    pub(crate) fn poke(&self) {
        *self.pokes.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.poked.notify_all();
    }

    /// Pokes so far (what [`Hub::wait_poke`] compares with).
    pub(crate) fn pokes(&self) -> u64 {
        *self.pokes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps until the count of pokes differs from `seen` or `for_` has passed.
    pub(crate) fn wait_poke(&self, seen: u64, for_: Duration) {
        let g = self.pokes.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .poked
            .wait_timeout_while(g, for_, |pokes| *pokes == seen);
    }

    /// Sleeps until a return is queued or `for_` has passed.
    pub(crate) fn wait(&self, for_: Duration) {
        let g = self.returns.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_empty() {
            let _ = self.cv.wait_timeout(g, for_);
        }
    }
}

/// One callback out on the host.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InFlight {
    pub context: Entity,
    pub release: SimTime,
    pub started: Instant,
}

/// One callback on its way to its thread.
struct Job {
    task: Entity,
    stream: Entity,
    seq: u64,
    context: Entity,
    release: SimTime,
    body: Callback,
}

/// The runtime's callback threads and the callbacks out on them.
pub(crate) struct Callbacks {
    runtime: u32,
    hub: Arc<Hub>,
    threads: BTreeMap<Entity, Sender<Job>>,
    /// By (stream, sequence number).
    pub in_flight: BTreeMap<(Entity, u64), InFlight>,
    /// How long a wait gives a callback that has not returned (wall time).
    pub timeout: Duration,
    /// Frames so far that took returns in: a wait sleeping for a return that another thread's
    /// frame took compares this to see that the world moved on without it.
    returns_taken: u64,
}

impl Callbacks {
    pub(crate) fn new(runtime: u32, timeout: Duration) -> Self {
        Self {
            runtime,
            hub: Arc::default(),
            threads: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            timeout,
            returns_taken: 0,
        }
    }

    /// How many frames so far took returns in (see [`Callbacks::take_returns`]).
    pub(crate) fn returns_taken(&self) -> u64 {
        self.returns_taken
    }

    pub(crate) fn hub(&self) -> Arc<Hub> {
        self.hub.clone()
    }

    /// Sends a released callback to its context's thread (started on first use).
    pub(crate) fn dispatch(&mut self, released: npusim_components::ReleasedCallback) {
        let npusim_components::ReleasedCallback {
            task,
            stream,
            seq,
            context,
            release,
            body,
        } = released;
        self.in_flight.insert(
            (stream, seq),
            InFlight {
                context,
                release,
                started: Instant::now(),
            },
        );
        let job = Job {
            task,
            stream,
            seq,
            context,
            release,
            body,
        };
        let job = match self.sender(context) {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(e) => {
                    self.threads.remove(&context);
                    e.0
                }
            },
            None => job,
        };
        // No thread could be started: the task fails rather than waiting for ever.
        drop(job.body);
        self.hub.push(Returned {
            task: job.task,
            stream: job.stream,
            seq: job.seq,
            end: job.release,
            panic: Some("no callback thread could be started".into()),
        });
    }

    fn sender(&mut self, context: Entity) -> Option<&Sender<Job>> {
        if !self.threads.contains_key(&context) {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let hub = self.hub.clone();
            let runtime = self.runtime;
            std::thread::Builder::new()
                .name(format!("npusim-callback-{context}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        run_job(runtime, &hub, job);
                    }
                })
                .ok()?;
            self.threads.insert(context, tx);
        }
        self.threads.get(&context)
    }

    /// Ends the callback thread of a context that is gone (after the callbacks it has).
    pub(crate) fn forget_context(&mut self, context: Entity) {
        self.threads.remove(&context);
        self.in_flight.retain(|_, f| f.context != context);
    }

    /// Forgets the callbacks of a stream that is gone.
    pub(crate) fn forget_stream(&mut self, stream: Entity) {
        self.in_flight.retain(|(s, _), _| *s != stream);
    }

    /// The instant the device clock may not pass for a wait of context `scope` made on a
    /// thread running a callback of context `me` (if any): the earliest release of a callback
    /// out on another thread that the wait holds for.
    pub(crate) fn hold(&self, scope: Option<Entity>, me: Option<Entity>) -> Option<SimTime> {
        self.in_flight
            .values()
            .filter(|f| Some(f.context) != me)
            .filter(|f| Some(f.context) == scope || f.started.elapsed() < OTHER_CONTEXT_GRACE)
            .map(|f| f.release)
            .min()
    }

    /// How long until the grace of a callback of another context than `scope` runs out (the
    /// hold of [`Callbacks::hold`] then moves), if one is still in its grace.
    pub(crate) fn next_grace_end(
        &self,
        scope: Option<Entity>,
        me: Option<Entity>,
    ) -> Option<Duration> {
        self.in_flight
            .values()
            .filter(|f| Some(f.context) != me && Some(f.context) != scope)
            .filter_map(|f| OTHER_CONTEXT_GRACE.checked_sub(f.started.elapsed()))
            .min()
    }

    /// Whether a callback is out on a thread other than this one's (`me`: the context of the
    /// callback this thread runs).
    /// Whether any callback is out (the fast path of every frame: usually none).
    #[inline]
    pub(crate) fn any_out(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Whether a callback of another context than `me` is out.
    pub(crate) fn others_out(&self, me: Option<Entity>) -> bool {
        self.in_flight.values().any(|f| Some(f.context) != me)
    }

    /// Whether a callback of context `me` is out (this thread's, or queued behind it).
    pub(crate) fn mine_out(&self, me: Option<Entity>) -> bool {
        me.is_some() && self.in_flight.values().any(|f| Some(f.context) == me)
    }

    /// Takes the returns the callback threads reported, each as (task, stream, seq, end,
    /// outcome).
    pub(crate) fn take_returns(&mut self) -> Vec<(Entity, Entity, u64, SimTime, Option<String>)> {
        // A return is reported only for a callback in flight.
        if self.in_flight.is_empty() {
            return Vec::new();
        }
        let returns =
            std::mem::take(&mut *self.hub.returns.lock().unwrap_or_else(|p| p.into_inner()));
        if !returns.is_empty() {
            self.returns_taken += 1;
        }
        returns
            .into_iter()
            .map(|r| {
                self.in_flight.remove(&(r.stream, r.seq));
                (r.task, r.stream, r.seq, r.end, r.panic)
            })
            .collect()
    }
}

/// Runs one callback on this (its context's callback) thread, with its own host clock and its
/// context current, and reports how it returned.
fn run_job(runtime: u32, hub: &Hub, job: Job) {
    let Job {
        task,
        stream,
        seq,
        context,
        release,
        body,
    } = job;
    let previous = set_running(Some((runtime, context, release)));
    let outer = enter_callback(Some((runtime, stream, seq)));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    enter_callback(outer);
    let end = set_running(previous).map_or(release, |(_, _, t)| t);
    crate::context::clear_thread_entries(runtime);
    let panic = result.err().map(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into())
    });
    hub.push(Returned {
        task,
        stream,
        seq,
        end,
        panic,
    });
}

/// The error a panicking callback's task fails with.
pub(crate) fn panicked(stream: Entity, message: String) -> NpuError {
    NpuError::CallbackPanicked {
        stream: format!("stream {stream}"),
        message,
    }
}

/// The host callback the calling thread runs, as a scope another thread can act in: a thread
/// that runs part of the callback on its behalf (as a C program's report thread runs a
/// callback's function while the callback waits for it) enters the scope, so its calls charge
/// the callback's clock, its context is current, and its waits know they are inside the
/// callback (a wait for the callback itself fails at once instead of hanging).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallbackScope {
    runtime: u32,
    context: Entity,
    clock: SimTime,
    /// The callback's task, for the stream sanitizer: (runtime, stream, position).
    task: Option<(u32, Entity, u64)>,
}

impl CallbackScope {
    /// The callback this thread runs (of any runtime), if any.
    pub fn current() -> Option<Self> {
        RUNNING
            .try_with(|r| r.get())
            .ok()
            .flatten()
            .map(|(runtime, context, clock)| Self {
                runtime,
                context,
                clock,
                task: current_callback(),
            })
    }

    /// Runs `f` on this thread inside the scope; the scope's clock moves with what `f` did.
    pub fn run<R>(&mut self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<(u32, Entity, SimTime)>, Option<(u32, Entity, u64)>);
        impl Drop for Restore {
            fn drop(&mut self) {
                set_running(self.0);
                enter_callback(self.1);
            }
        }
        let previous = set_running(Some((self.runtime, self.context, self.clock)));
        let restore = Restore(previous, enter_callback(self.task));
        let out = f();
        if let Some((_, _, t)) = RUNNING.with(|r| r.get()) {
            self.clock = t;
        }
        drop(restore);
        out
    }

    /// On the callback's own thread, after another thread ran part of it in this scope: the
    /// callback's clock moves on to where that part left it.
    pub fn resume(&self) {
        let _ = RUNNING.try_with(|r| {
            if let Some((rt, ctx, t)) = r.get()
                && rt == self.runtime
                && ctx == self.context
            {
                r.set(Some((rt, ctx, t.max(self.clock))));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Runtime, RuntimeConfig};

    #[test]
    fn the_current_context_follows_the_callback_the_thread_runs() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let primary = rt.contexts().current().unwrap();
        let other = rt.contexts().create(0).unwrap();
        rt.contexts().pop().unwrap();
        assert_eq!(rt.contexts().current().unwrap(), primary, "asked, and kept");
        let mut scope = CallbackScope {
            runtime: rt.id(),
            context: other.entity(),
            clock: SimTime::ZERO,
            task: None,
        };
        let inside = scope.run(|| rt.contexts().current().unwrap());
        assert_eq!(inside, other, "a callback runs with its context current");
        assert_eq!(
            rt.contexts().current().unwrap(),
            primary,
            "and only while it runs"
        );
    }
}
