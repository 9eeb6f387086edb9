//! One frame: the frame schedule (npusim's systems in their sets, and any an embedder added
//! beside them), then what the runtime does around every frame: host callbacks that
//! returned go back on the device, released callbacks go out, binaries let go inside a frame
//! are released, faults reach the exception callback.

use std::sync::MutexGuard;

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::SingleThreadedExecutor;
use npusim_components::SimTime;
use npusim_components::resources::{Running, SimClock};

use super::{Inner, Runtime};

/// Runs the frame schedule once: npusim's systems in their sets ([`npusim_systems::install`])
/// and whatever an embedder added beside them, on bevy's single-threaded executor. Should it
/// not return — a user system panicked (bevy hands the panic on) — the runtime is made whole
/// on the way out: the interrupted executor would skip the systems it had run before the panic
/// in every later frame, so the schedule gets a fresh one (an embedder's own executor is
/// replaced by the runtime's), and the system may have swapped the world, so [`Bound`] is made
/// again. The lock the caller held is poisoned by the panic; later calls take it all the same
/// (`Runtime::lock_quiet`).
///
/// [`Bound`]: super::Bound
fn run_systems(inner: &mut Inner) {
    struct Recover<'a> {
        inner: &'a mut Inner,
        returned: bool,
    }
    impl Drop for Recover<'_> {
        fn drop(&mut self) {
            if !self.returned {
                self.inner
                    .schedule
                    .set_executor(SingleThreadedExecutor::new());
                self.inner.rebind();
            }
        }
    }
    let mut run = Recover {
        inner,
        returned: false,
    };
    let i = &mut *run.inner;
    // `Schedule::run` checks the world's change ticks but not its own systems' (it is not in
    // the world's `Schedules`): both, here, before they can wrap.
    if let Some(check) = i.world.check_change_ticks() {
        i.schedule.check_change_ticks(check);
    }
    i.schedule.run(&mut i.world);
    run.returned = true;
}

pub(super) fn run_schedule(inner: &mut Inner) -> bool {
    // Run by an embedder's guard, the world may have been swapped.
    inner.rebind();
    if let Some(mut stats) = inner.bound.frame.stats.get_mut(&mut inner.world) {
        stats.last_frame_progressed = false;
    }
    run_systems(inner);
    // A user system may have replaced the kernel registry, or even the world.
    inner.rebind();
    inner.known_natives.forget();
    inner.refresh_queries();
    if inner.sanitize {
        crate::sanitizer::flush(inner);
    }
    let Some(mut stats) = inner.bound.frame.stats.get_mut(&mut inner.world) else {
        // An embedder removed the counters: no progress is reported, so a wait that nothing
        // else moves ends in an error rather than looping.
        return false;
    };
    stats.frames += 1;
    let failed = stats.tasks_failed != inner.failures_seen;
    #[cfg(feature = "tracy")]
    if let Some(client) = tracy_client::Client::running() {
        client.frame_mark();
    }
    let (frames, progressed) = (stats.frames, stats.last_frame_progressed);
    if failed {
        inner.recheck_faults();
    }
    // The world's removed-component trackers grow with every despawn (streams, events,
    // binaries, contexts) until they are cleared, as bevy's App does each update; nothing here
    // reads them, so every 64 frames is enough to keep them small.
    if frames.is_multiple_of(64) {
        inner.world.clear_trackers();
    }
    progressed
}

impl Runtime {
    /// Runs a frame, then the host callbacks it released (outside the lock, so they may call
    /// the runtime).
    pub(crate) fn frame<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
    ) -> (MutexGuard<'a, Inner>, bool) {
        let returned = take_callback_returns(&mut g);
        let progressed = run_schedule(&mut g) || returned;
        if !g.closing_comms.is_empty() {
            crate::collective::close_drained_comms(&mut g);
        }
        if self
            .shared
            .releases_pending
            .swap(false, std::sync::atomic::Ordering::Acquire)
        {
            let releases = std::mem::take(
                &mut *self
                    .shared
                    .releases
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            for b in releases {
                crate::binary::release_binary(&mut g, b);
            }
        }
        let faults = self.take_faults(&mut g);
        let inner = &mut *g;
        // Exclusive access to the world: the list's mutex is not locked (no atomic a frame).
        let released = inner
            .bound
            .frame
            .callbacks
            .get_mut(&mut inner.world)
            .map(|mut c| {
                let calls = c.bypass_change_detection().calls.get_mut();
                std::mem::take(calls.unwrap_or_else(|p| p.into_inner()))
            })
            .unwrap_or_default();
        let released_any = !released.is_empty();
        // Each callback goes to its context's thread; none runs on this one.
        for r in released {
            g.callbacks.dispatch(r);
        }
        if faults.is_empty() {
            return (g, progressed || released_any);
        }
        drop(g);
        // The exception callback runs on this thread; a panic in it stays there (the fault is
        // reported by the failed task's synchronize all the same).
        for (callback, info) in faults {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(&info)));
        }
        (self.lock_quiet(), true)
    }
}

/// Puts the host callbacks that returned back on the device: each task ends at its callback's
/// clock (never before the device's now), with its outcome, and the hardware tick completes
/// it in order. Returns whether any came back. A return for a task that is gone (its stream
/// or context was destroyed meanwhile) is dropped.
fn take_callback_returns(g: &mut Inner) -> bool {
    let returns = g.callbacks.take_returns();
    if returns.is_empty() {
        return false;
    }
    let now = g
        .world
        .get_resource::<SimClock>()
        .map_or(SimTime::ZERO, |c| c.now);
    let mut any = false;
    for (entity, stream, seq, end, panic) in returns {
        let Some(mut task) = g.world.get_mut::<npusim_components::Task>(entity) else {
            continue;
        };
        if task.stream != stream
            || task.seq != seq
            || task.applied
            || task.status != npusim_components::TaskStatus::Running
        {
            continue;
        }
        let end = end.max(now).max(task.start);
        task.applied = true;
        task.end = end;
        task.error = panic.map(|m| Box::new(crate::callback::panicked(stream, m)));
        // Without the running set (an embedder removed it, and with it the end of every task
        // that was running) the task cannot end either.
        let Some(mut running) = g.world.get_resource_mut::<Running>() else {
            break;
        };
        let order = running.next_order;
        running.next_order += 1;
        running.heap.push(std::cmp::Reverse((end, order, entity)));
        any = true;
    }
    any
}
