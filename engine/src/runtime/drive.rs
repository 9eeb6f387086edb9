//! Waits that drive frames: [`Runtime::step`], [`Runtime::run_until_idle`] and `drive`, which
//! every synchronize and timed wait runs on. Each runs frames until what it waits for is done,
//! holds the device clock for host callbacks still out, gives other threads a moment to join a
//! rendezvous, and fails, rather than hangs, when nothing can finish.

use std::sync::{Arc, MutexGuard};

use npusim_components::resources::{ReadyQueue, Running, SimClock};
use npusim_components::{NpuError, NpuResult, SimTime, WorldResources};

use super::{Inner, Runtime};

impl Runtime {
    /// Runs one frame; returns whether anything changed.
    /// When nothing changes but host callbacks are still out on other threads, waits briefly
    /// (at most [`STEP_CALLBACK_WAIT`] of wall time) for one to return and runs the frame that
    /// takes it in; a callback that takes longer leaves this `false` (polling queries stay
    /// quick). [`Runtime::run_until_idle`] and the synchronizes wait for callbacks in full.
    pub fn step(&self) -> bool {
        let g = self.lock();
        let (g, progressed) = self.held_frame(g);
        if progressed || !g.callbacks.any_out() {
            return progressed;
        }
        let wait = g.callbacks.timeout.min(STEP_CALLBACK_WAIT);
        let (g, returned) = self.await_return(g, Some(wait));
        if !returned {
            return false;
        }
        let (_g, progressed) = self.held_frame(g);
        progressed
    }

    /// One frame whose clock does not pass a host callback out on the host that a wait of the
    /// calling thread would hold for (see [`crate::callback`]).
    fn held_frame<'a>(&'a self, mut g: MutexGuard<'a, Inner>) -> (MutexGuard<'a, Inner>, bool) {
        if !g.callbacks.any_out() {
            return self.frame(g);
        }
        let me = crate::callback::context_of(self.id());
        let scope = self.current_ctx_entity(&g).ok();
        let hold = g.callbacks.hold(scope, me);
        g.set_horizon(hold);
        let (mut g, progressed) = self.frame(g);
        g.set_horizon(None);
        (g, progressed)
    }

    /// Runs frames until nothing is left to do (host callbacks out on other threads included);
    /// the host clock moves to the device's time. A callback that does not return within the
    /// callback timeout makes it fail with `ACL_ERROR_RT_REPORT_TIMEOUT`.
    pub fn run_until_idle(&self) -> NpuResult<()> {
        let mut g = self.lock();
        let me = crate::callback::context_of(self.id());
        loop {
            let (g2, progressed) = self.held_frame(g);
            g = g2;
            if progressed {
                continue;
            }
            if !g.callbacks.others_out(me) {
                break;
            }
            let (g2, returned) = self.await_return(g, None);
            g = g2;
            // A callback can go without a return to wait for (it destroyed its own context):
            // then there is nothing left to time out on.
            if !returned && g.callbacks.others_out(me) {
                let limit = g.callbacks.timeout;
                return Err(NpuError::CallbackTimeout {
                    what: "run_until_idle".into(),
                    limit,
                });
            }
        }
        // Work left that nothing moves: without one of npusim's resources (an embedder removed
        // it) the stages that need it do nothing, and the error says so.
        if !g.streams_idle(None)
            && let Some(missing) = npusim_systems::missing_resource(&g.world)
        {
            return Err(missing);
        }
        let now = g.world.res::<SimClock>()?.now;
        let t = g.host_now().max(now);
        g.set_host_now(t);
        crate::sanitizer::synchronized_device(&mut g, None);
        Ok(())
    }

    /// With host callbacks out on other threads, sleeps (lock released) until one returns or
    /// something is submitted, at most `limit` (default: the callback timeout). Returns
    /// whether there is something for a frame to do. A return another thread's frame took in
    /// meanwhile counts: that frame completed the callback's task, and what follows it (the
    /// next callback of its stream, say) may be past that thread's hold but not this one's.
    fn await_return<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        limit: Option<std::time::Duration>,
    ) -> (MutexGuard<'a, Inner>, bool) {
        let me = crate::callback::context_of(self.id());
        let limit = limit.unwrap_or(g.callbacks.timeout);
        let start = std::time::Instant::now();
        let hub = g.callbacks.hub();
        let taken = g.callbacks.returns_taken();
        loop {
            if hub.has_returns() || g.doorbell_rung() || g.callbacks.returns_taken() != taken {
                return (g, true);
            }
            if !g.callbacks.others_out(me) {
                return (g, false);
            }
            let elapsed = start.elapsed();
            if elapsed >= limit {
                return (g, false);
            }
            drop(g);
            // Woken by a return; a callback may also submit work without returning yet.
            hub.wait((limit - elapsed).min(CALLBACK_POLL));
            g = self.lock_quiet();
        }
    }

    /// Drives frames until `done` holds. With a `timeout` (simulated), the device clock is not
    /// advanced past the deadline and the wait fails with a timeout; without one, a wait that
    /// nothing can finish fails instead of hanging. Host callbacks out on their threads are
    /// waited for (lock released), at most the callback timeout of wall time without progress
    /// (a timed wait: at most its timeout); see [`crate::callback`].
    pub(crate) fn drive<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        what: &dyn Fn() -> String,
        done: &dyn Fn(&Inner) -> bool,
        timeout: Option<SimTime>,
    ) -> (MutexGuard<'a, Inner>, NpuResult<()>) {
        let deadline = timeout.map(|t| g.host_now() + t);
        // The callback this thread runs, if any (its context's callbacks cannot return while
        // it waits), and the context the wait is for.
        let me = crate::callback::context_of(self.id());
        let scope = self.current_ctx_entity(&g).ok();
        if g.timeline_on() && me.is_none() {
            let start = g.host_now();
            g.open_wait = Some((format!("wait: {}", what()), start));
        }
        let mut stuck_since: Option<std::time::Instant> = None;
        // When the rendezvous grace (below) began, if it runs.
        let mut grace_since: Option<std::time::Instant> = None;
        loop {
            if done(&g) {
                g.set_horizon(None);
                return (g, Ok(()));
            }
            // Only ranks waiting at a rendezvous are left, so the next frame would jump to their
            // timeout. If another handle of this runtime exists (a thread per rank), give the
            // other threads up to RENDEZVOUS_GRACE of wall time to enqueue the missing ranks:
            // the wait sleeps until one enqueues a collective's part (it pokes the hub), not
            // by the millisecond.
            if !only_rendezvous_left(&g) {
                grace_since = None;
            } else if Arc::strong_count(&self.shared) > 1 {
                let since = *grace_since.get_or_insert_with(std::time::Instant::now);
                let left = RENDEZVOUS_GRACE.saturating_sub(since.elapsed());
                if !left.is_zero() {
                    let hub = g.callbacks.hub();
                    let seen = hub.pokes();
                    drop(g);
                    hub.wait_poke(seen, left);
                    g = self.lock_quiet();
                    continue;
                }
            }
            // The device clock does not pass a callback out on the host that this wait holds
            // for: it may still enqueue work, and it ends when it returns.
            let hold = g.callbacks.hold(scope, me);
            let horizon = match (deadline, hold) {
                (Some(d), Some(h)) => Some(d.min(h)),
                (d, h) => d.or(h),
            };
            g.set_horizon(horizon);
            let (g2, progressed) = self.frame(g);
            g = g2;
            if progressed {
                stuck_since = None;
                continue;
            }
            if done(&g) {
                continue;
            }
            // Nothing more happens until a callback out on another thread returns.
            let held_before_deadline = hold.is_some_and(|h| deadline.is_none_or(|d| h <= d));
            // A callback's own wait waits only while the clock is held for another callback
            // (the rest of its context's callbacks are queued behind it; another context's
            // cannot finish its wait, and two callbacks waiting for each other would hang).
            let wait_for_callbacks = match (deadline, me) {
                (Some(_), _) => held_before_deadline,
                (None, Some(_)) => hold.is_some(),
                (None, None) => g.callbacks.others_out(me),
            };
            if wait_for_callbacks {
                let limit =
                    g.callbacks
                        .timeout
                        .min(timeout.map_or(std::time::Duration::MAX, |t| {
                            std::time::Duration::from_nanos(t.as_ns())
                        }));
                let since = *stuck_since.get_or_insert_with(std::time::Instant::now);
                let left = limit.saturating_sub(since.elapsed());
                if !left.is_zero() {
                    // Until a callback returns, or another context's callback leaves its grace.
                    let wake = g
                        .callbacks
                        .next_grace_end(scope, me)
                        .map_or(left, |d| d.max(CALLBACK_POLL).min(left));
                    let (g2, _) = self.await_return(g, Some(wake));
                    g = g2;
                    continue;
                }
                g.set_horizon(None);
                if let (Some(deadline), Some(timeout)) = (deadline, timeout) {
                    let t = g.host_now().max(deadline);
                    g.set_host_now(t);
                    return (
                        g,
                        Err(NpuError::WaitTimeout {
                            what: what(),
                            timeout,
                        }),
                    );
                }
                return (
                    g,
                    Err(NpuError::CallbackTimeout {
                        what: what(),
                        limit,
                    }),
                );
            }
            g.set_horizon(None);
            // Nothing more can happen. Without one of npusim's resources (an embedder removed
            // it) the stages that need it do nothing: that is why, and the error says so.
            if let Some(missing) = npusim_systems::missing_resource(&g.world) {
                return (g, Err(missing));
            }
            let pending = g
                .world
                .get_resource::<Running>()
                .is_some_and(|r| r.next_event().is_some());
            if let (Some(deadline), Some(timeout), true) = (deadline, timeout, pending) {
                let t = g.host_now().max(deadline);
                g.set_host_now(t);
                return (
                    g,
                    Err(NpuError::WaitTimeout {
                        what: what(),
                        timeout,
                    }),
                );
            }
            if g.callbacks.mine_out(me) {
                return (
                    g,
                    Err(NpuError::NeverCompletes(format!(
                        "{} (from a host callback: it waits for itself, or for a callback \
                         queued behind it on its context's callback thread)",
                        what()
                    ))),
                );
            }
            return (g, Err(NpuError::NeverCompletes(what())));
        }
    }
}

/// The longest [`Runtime::step`] waits for a host callback to return when nothing else changes.
pub const STEP_CALLBACK_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// How often a wait for a host callback looks for work submitted meanwhile.
const CALLBACK_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// How long (wall time) a wait gives other host threads to join a rendezvous before letting
/// the ranks already there time out; it ends as soon as one enqueues a collective's part.
pub(crate) const RENDEZVOUS_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether the next thing to happen is ranks at a rendezvous timing out: nothing is queued,
/// ready or running, and no stream head waits for a submit time before the deadline.
fn only_rendezvous_left(inner: &Inner) -> bool {
    let w = &inner.world;
    // Without these (an embedder removed one), no rendezvous to give a moment to.
    let Some(rendezvous) = w.get_resource::<npusim_components::Rendezvous>() else {
        return false;
    };
    let waiting = rendezvous
        .ops
        .iter()
        .any(|op| op.phase == npusim_components::collective::OpPhase::Waiting);
    let Some(running) = w.get_resource::<Running>() else {
        return false;
    };
    waiting
        && !inner.doorbell_rung()
        && w.get_resource::<ReadyQueue>()
            .is_none_or(|r| r.tasks.is_empty())
        && running.heap.is_empty()
        && running
            .next_wake
            .is_none_or(|t| rendezvous.next_deadline.is_none_or(|d| t >= d))
}
