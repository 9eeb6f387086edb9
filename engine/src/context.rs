//! Contexts and the current context of each host thread. As in ACL, the current context is
//! thread-local: `set_device` makes a device's primary context current, `create_context` makes
//! the new context current, and push / pop keep a stack. A thread that never chose one uses
//! the primary context of device 0, as the CUDA runtime does.
//!
//! This module also holds the checks every call makes on the handles it is given: the handle
//! is of this runtime, names a live object, belongs to the current context, and that context
//! has not faulted.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bevy_ecs::prelude::*;
use npusim_components::binary::BinaryState;
use npusim_components::resources::{AbortRequests, FaultRecord};
use npusim_components::{
    Context, ContextState, ContextStatus, DeviceState, Event, FailureMode, NpuError, NpuResult,
    Stream, StreamState, WorldResources,
};

use crate::runtime::{Inner, Runtime, Shared, device_entity, spawn_context};

/// One entry of a thread's context stack.
struct Entry {
    runtime: u32,
    ctx: Entity,
    shared: Weak<Shared>,
}

/// A thread's context stack. When the thread ends, its entries stop counting as users of their
/// contexts, so those contexts can be destroyed by other threads.
struct ThreadStack(Vec<Entry>);

impl Drop for ThreadStack {
    fn drop(&mut self) {
        forget_top();
        for e in self.0.drain(..) {
            if let Some(shared) = e.shared.upgrade() {
                let rt = Runtime::from_shared(shared);
                rt.lock().release_user(e.ctx);
            }
        }
    }
}

thread_local! {
    /// This thread's current contexts, innermost last (entries of several runtimes mix).
    static STACK: RefCell<ThreadStack> = const { RefCell::new(ThreadStack(Vec::new())) };
    /// The value of [`RUNTIMES_DROPPED`] when this thread last pruned its stack.
    static SEEN_DROPS: Cell<u64> = const { Cell::new(0) };
    /// The last answer of `top_for` (runtime, [`RUNTIMES_DROPPED`] when it was worked out, the
    /// current context): every call that names a stream or event asks it, so it is kept in
    /// one plain cell (no borrow of the stack, no search, no look at the callback the thread
    /// runs). Every change of the stack goes through `stack_mut` or `try_stack_mut`, and every
    /// change of the callback a thread runs through `callback::set_running`, which forget it;
    /// a runtime dropped since makes it stale.
    static TOP: Cell<Option<(u32, u64, Option<Entity>)>> = const { Cell::new(None) };
}

/// Forgets `top_for`'s cached answer: the thread's stack, or the callback it runs, is about to
/// change.
pub(crate) fn forget_top() {
    let _ = TOP.try_with(|t| t.set(None));
}

/// Changes this thread's stack with `f`: the one way to change it while the thread runs (the
/// cached answer of `top_for` is forgotten first).
///
/// A thread whose locals are already torn down (an exit handler: `exit` destroys the exiting
/// thread's locals before it runs the handlers) has no stack: `f` sees an empty one and what
/// it pushes does not last — on such a thread no context is current, and calls that need one
/// say so instead of failing inside.
fn stack_mut<R>(f: impl FnOnce(&mut Vec<Entry>) -> R) -> R {
    forget_top();
    let mut f = Some(f);
    match STACK.try_with(|s| (f.take().expect("called once"))(&mut s.borrow_mut().0)) {
        Ok(r) => r,
        Err(_) => (f.take().expect("not called"))(&mut Vec::new()),
    }
}

/// As [`stack_mut`], where the thread's locals may be torn down or the stack already borrowed
/// (a drop): `None` when it cannot be reached.
fn try_stack_mut<R>(f: impl FnOnce(&mut Vec<Entry>) -> R) -> Option<R> {
    forget_top();
    STACK
        .try_with(|s| s.try_borrow_mut().ok().map(|mut s| f(&mut s.0)))
        .ok()
        .flatten()
}

/// How many runtimes have been dropped in this process. A thread whose stack has seen fewer
/// drops prunes the entries of dead runtimes on its next call, so a dropped runtime leaves
/// nothing on any thread that goes on using npusim (and the dropping thread's own entries go
/// at once, see `Drop for Runtime`).
static RUNTIMES_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Drops this thread's entries of runtimes that no longer exist, if any runtime was dropped
/// since the last look (one atomic load otherwise).
fn prune_dead_runtimes() {
    let dropped = RUNTIMES_DROPPED.load(Ordering::Acquire);
    if SEEN_DROPS.try_with(Cell::get).ok() == Some(dropped) {
        return;
    }
    let _ = SEEN_DROPS.try_with(|c| c.set(dropped));
    try_stack_mut(|s| s.retain(|e| e.shared.strong_count() > 0));
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // The last handle: the world goes with it. Its entries on this thread go now; other
        // threads prune theirs on their next call (they cannot be reached from here).
        if self.weak().strong_count() == 1 {
            RUNTIMES_DROPPED.fetch_add(1, Ordering::AcqRel);
            let id = self.id();
            // `try_`: this may run while the thread's locals are being torn down.
            try_stack_mut(|s| s.retain(|e| e.runtime != id));
        }
    }
}

/// Number of entries on the calling thread's context stack, over every runtime (after pruning
/// the entries of dropped runtimes): a dropped runtime leaves none behind.
pub fn thread_stack_len() -> usize {
    prune_dead_runtimes();
    STACK.try_with(|s| s.borrow().0.len()).unwrap_or(0)
}

/// The current context of `runtime` on this thread: its innermost stack entry, else the
/// context of the host callback the thread runs for it, if any.
///
/// Every call that takes a handle asks this, so the answer cached in `TOP` is read where it is
/// asked; only a change of runtime or of the stack reaches the slow part.
#[inline(always)]
fn top_for(runtime: u32) -> Option<Entity> {
    let dropped = RUNTIMES_DROPPED.load(Ordering::Acquire);
    if let Ok(Some((r, seen, top))) = TOP.try_with(Cell::get)
        && r == runtime
        && seen == dropped
    {
        return top;
    }
    top_for_uncached(runtime, dropped)
}

/// `top_for` without its cached answer: prunes, walks the stack, caches.
#[cold]
#[inline(never)]
fn top_for_uncached(runtime: u32, dropped: u64) -> Option<Entity> {
    prune_dead_runtimes();
    // (A thread whose locals are torn down has no stack: see `stack_mut`.)
    let top = STACK
        .try_with(|s| {
            s.borrow()
                .0
                .iter()
                .rev()
                .find(|e| e.runtime == runtime)
                .map(|e| e.ctx)
        })
        .ok()
        .flatten()
        // A host callback runs with its context current (without counting as a user of it).
        .or_else(|| crate::callback::context_of(runtime));
    let _ = TOP.try_with(|t| t.set(Some((runtime, dropped, top))));
    top
}

/// Drops this thread's stack entries of `runtime` (a callback thread, after each callback:
/// the contexts one callback made current do not leak into the next).
pub(crate) fn clear_thread_entries(runtime: u32) {
    let removed: Vec<Entry> = stack_mut(|s| {
        let (mine, rest): (Vec<Entry>, Vec<Entry>) =
            s.drain(..).partition(|e| e.runtime == runtime);
        *s = rest;
        mine
    });
    for e in removed {
        if let Some(shared) = e.shared.upgrade() {
            Runtime::from_shared(shared).lock().release_user(e.ctx);
        }
    }
}

/// How many of this thread's stack entries name `ctx` of `runtime`.
fn own_uses(runtime: u32, ctx: Entity) -> u32 {
    STACK
        .try_with(|s| {
            s.borrow()
                .0
                .iter()
                .filter(|e| e.runtime == runtime && e.ctx == ctx)
                .count() as u32
        })
        .unwrap_or(0)
}

impl Inner {
    fn add_user(&mut self, ctx: Entity) {
        if ctx == Entity::PLACEHOLDER {
            return;
        }
        *self.ctx_users.entry(ctx).or_insert(0) += 1;
    }

    pub(crate) fn release_user(&mut self, ctx: Entity) {
        if let Some(n) = self.ctx_users.get_mut(&ctx) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.ctx_users.remove(&ctx);
            }
        }
    }
}

/// Information about a faulted task, given to the exception callback
/// (as ACL's `aclrtExceptionInfo`).
#[derive(Clone, Debug, PartialEq)]
pub struct ExceptionInfo {
    /// Device index.
    pub device: u32,
    /// The faulting task's context.
    pub context: Context,
    /// Its stream.
    pub stream: Stream,
    /// Its sequence number on the stream (1-based).
    pub task_seq: u64,
    /// The ACL error code.
    pub error_code: i32,
    /// The error.
    pub error: NpuError,
}

/// The exception callback type.
pub type ExceptionCallback = Arc<dyn Fn(&ExceptionInfo) + Send + Sync>;

impl Runtime {
    /// Replaces this thread's current context (the top of its stack) with `ctx`.
    fn stack_set_top(&self, inner: &mut Inner, ctx: Entity) {
        crate::sanitizer::thread_seen(inner);
        let id = self.id();
        let shared = self.weak();
        let old = stack_mut(|s| match s.iter().rposition(|e| e.runtime == id) {
            Some(i) => Some(std::mem::replace(&mut s[i].ctx, ctx)),
            None => {
                s.push(Entry {
                    runtime: id,
                    ctx,
                    shared,
                });
                None
            }
        });
        inner.add_user(ctx);
        if let Some(old) = old {
            inner.release_user(old);
        }
    }

    /// Delivers faults raised by the last frames to the exception callback (outside the lock).
    pub(crate) fn take_faults(&self, inner: &mut Inner) -> Vec<(ExceptionCallback, ExceptionInfo)> {
        let pending: Vec<FaultRecord> = match inner.bound.frame.faults.get_mut(&mut inner.world) {
            Some(mut faults) => std::mem::take(&mut faults.pending),
            None => Vec::new(),
        };
        let Some(cb) = inner.exception_callback.clone() else {
            return Vec::new();
        };
        pending
            .into_iter()
            .map(|f| {
                let info = ExceptionInfo {
                    device: f.device,
                    context: Context::new(self.id(), f.context),
                    stream: Stream::new(self.id(), f.stream),
                    task_seq: f.seq,
                    error_code: f.error.code(),
                    error: f.error,
                };
                (cb.clone(), info)
            })
            .collect()
    }

    /// The context entity current on this thread, checked live (not necessarily healthy).
    pub(crate) fn current_ctx_entity(&self, inner: &Inner) -> NpuResult<Entity> {
        let ctx = match top_for(self.id()) {
            Some(c) => c,
            None => inner.default_contexts[0],
        };
        if inner.context(ctx).is_none() {
            return Err(NpuError::ContextNull(format!(
                "context {ctx} current on this thread was destroyed; set another"
            )));
        }
        Ok(ctx)
    }

    /// The current context, which must not have faulted (else its sticky error).
    pub(crate) fn current_ctx(&self, inner: &Inner) -> NpuResult<Entity> {
        let world = &inner.world;
        let ctx = self.current_ctx_entity(inner)?;
        healthy(world, ctx)?;
        Ok(ctx)
    }

    /// Checks a stream handle against the current context; returns (stream, context).
    pub(crate) fn check_stream(
        &self,
        inner: &Inner,
        stream: Stream,
    ) -> NpuResult<(Entity, Entity)> {
        let (s, ctx) = self.check_stream_of(inner, stream, || {
            top_for(self.id()).unwrap_or(inner.default_contexts[0])
        })?;
        // The stream is the current context's, so that context is there; healthy unless some
        // context may have faulted (see `Inner::maybe_faulted`).
        if inner.maybe_faulted {
            healthy_ctx(inner.context(ctx), ctx)?;
        }
        Ok((s, ctx))
    }

    /// As `check_stream`, for a call that then writes to the stream: the stream is looked up
    /// once, mutably, last. `more` checks the call's other handles against the current context
    /// first, but its error is reported after the stream's, as if checked after `check_stream`.
    /// Returns the stream and the current context.
    #[inline(always)]
    pub(crate) fn check_stream_for_write<'a>(
        &self,
        inner: &'a mut Inner,
        stream: Stream,
        more: impl FnOnce(&Inner, Entity) -> NpuResult<()>,
    ) -> NpuResult<(bevy_ecs::change_detection::Mut<'a, StreamState>, Entity)> {
        if stream.runtime() != self.id() {
            return Err(handle_error(NpuError::ForeignHandle, stream));
        }
        let ctx = top_for(self.id()).unwrap_or(inner.default_contexts[0]);
        // While no context is faulted, the stream being the current context's is all there
        // is to check about that context (see `Inner::maybe_faulted`).
        let health = if inner.maybe_faulted {
            healthy_ctx(inner.context(ctx), ctx)
        } else {
            Ok(())
        };
        let others = more(inner, ctx);
        let inner: *mut Inner = inner;
        // SAFETY: `inner` came from a `&'a mut Inner`; the stream borrowed from it here is either
        // returned (and `inner` not used again) or no longer used when `inner` is read below.
        let Some(st) = (unsafe { &mut *inner }).stream_mut(stream.entity()) else {
            return Err(handle_error(NpuError::Destroyed, stream));
        };
        if st.context != ctx {
            let owner = st.context;
            // SAFETY: the stream borrowed above is not used again.
            return Err(self.stream_outside(unsafe { &*inner }, stream, owner, ctx));
        }
        health?;
        others?;
        Ok((st, ctx))
    }

    /// Checks a stream handle against the current context, which `current` names (asked only
    /// once the stream is found); whether that context is there and healthy is the caller's to
    /// check. Returns (stream, context).
    #[inline(always)]
    fn check_stream_of(
        &self,
        inner: &Inner,
        stream: Stream,
        current: impl FnOnce() -> Entity,
    ) -> NpuResult<(Entity, Entity)> {
        if stream.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(stream.to_string()));
        }
        let s = inner
            .stream(stream.entity())
            .ok_or_else(|| NpuError::Destroyed(stream.to_string()))?;
        let ctx = current();
        if s.context != ctx {
            return Err(self.stream_outside(inner, stream, s.context, ctx));
        }
        Ok((stream.entity(), ctx))
    }

    /// The error for a stream of context `owner` used with current context `ctx`.
    #[cold]
    fn stream_outside(
        &self,
        inner: &Inner,
        stream: Stream,
        owner: Entity,
        ctx: Entity,
    ) -> NpuError {
        if let Err(e) = self.current_ctx_entity(inner) {
            return e;
        }
        NpuError::WrongContext {
            handle: stream.to_string(),
            owner: format!("context {owner}"),
            current: format!("context {ctx}"),
        }
    }

    /// Checks an event handle, then a stream handle, against the current context, as
    /// `check_event` and then `check_stream` would (the same errors),
    /// looking at the context once; returns (event, stream).
    pub(crate) fn check_event_and_stream(
        &self,
        inner: &Inner,
        event: Event,
        stream: Stream,
    ) -> NpuResult<(Entity, Entity)> {
        let (e, ctx) = self.check_event(inner, event)?;
        let (s, _) = self.check_stream_of(inner, stream, || ctx)?;
        Ok((e, s))
    }

    /// Checks an event handle against the current context; returns (event, context).
    pub(crate) fn check_event(&self, inner: &Inner, event: Event) -> NpuResult<(Entity, Entity)> {
        if event.runtime() != self.id() {
            return Err(handle_error(NpuError::ForeignHandle, event));
        }
        let e = inner
            .event(event.entity())
            .ok_or_else(|| handle_error(NpuError::Destroyed, event))?;
        let ctx = top_for(self.id()).unwrap_or(inner.default_contexts[0]);
        if e.context != ctx {
            self.current_ctx_entity(inner)?;
            return Err(NpuError::WrongContext {
                handle: event.to_string(),
                owner: format!("context {}", e.context),
                current: format!("context {ctx}"),
            });
        }
        // The event is the current context's, so that context is there; healthy unless some
        // context may have faulted (see `Inner::maybe_faulted`).
        if inner.maybe_faulted {
            healthy_ctx(inner.context(ctx), ctx)?;
        }
        Ok((event.entity(), ctx))
    }

    pub(crate) fn check_context(&self, inner: &Inner, ctx: Context) -> NpuResult<Entity> {
        let world = &inner.world;
        if ctx.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(ctx.to_string()));
        }
        world
            .get::<ContextState>(ctx.entity())
            .ok_or_else(|| NpuError::Destroyed(ctx.to_string()))?;
        Ok(ctx.entity())
    }
}

/// Devices and contexts: the thread's current device and context, the context stack, failure
/// modes and sticky errors (`aclrtSetDevice`, `aclrtCreateContext` …).
/// Reached through [`Runtime::contexts`].
#[derive(Clone, Copy)]
pub struct Contexts<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Devices and contexts: the thread's current ones and the context stack.
    pub fn contexts(&self) -> Contexts<'_> {
        Contexts { rt: self }
    }
}

impl Contexts<'_> {
    /// Registers the callback that is told about every faulting task (device, context, stream,
    /// task and error code), as `aclrtSetExceptionInfoCallback`. It runs on the host thread that
    /// drove the frame, outside the runtime's lock; a panic in it is caught there (it never
    /// reaches that thread's caller). `None` removes it.
    pub fn set_exception_callback(&self, callback: Option<ExceptionCallback>) {
        self.rt.lock().exception_callback = callback;
    }

    /// Clears the current context's sticky error after a fault, so it can be used again
    /// (its streams and events remain; its memory was released by the fault).
    pub fn reset(&self) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx_entity(&g)?;
        let streams = {
            let mut c = g.world.get_mut::<ContextState>(ctx).expect("checked");
            c.status = ContextStatus::Active;
            c.sticky_error = None;
            c.streams.clone()
        };
        g.recheck_faults();
        for s in streams {
            if let Some(mut st) = g.world.get_mut::<StreamState>(s) {
                st.error = None;
            }
        }
        Ok(())
    }

    /// Makes the primary context of device `index` current on this thread (`aclrtSetDevice`).
    pub fn set_device(&self, index: u32) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let device = device_entity(&g.world, index)?;
        let ctx = g
            .world
            .get::<DeviceState>(device)
            .expect("device entity")
            .default_context;
        self.rt.stack_set_top(&mut g, ctx);
        g.record(|_, _| crate::record::Call::SetDevice { device: index });
        Ok(())
    }

    /// The index of the current context's device.
    pub fn current_device(&self) -> NpuResult<u32> {
        let g = self.rt.lock();
        let ctx = self.rt.current_ctx_entity(&g)?;
        Ok(g.world
            .get::<ContextState>(ctx)
            .expect("checked")
            .device_index)
    }

    /// The index of context `ctx`'s device.
    pub fn device_of(&self, ctx: Context) -> NpuResult<u32> {
        let g = self.rt.lock();
        let c = self.rt.check_context(&g, ctx)?;
        Ok(g.world
            .get::<ContextState>(c)
            .expect("checked")
            .device_index)
    }

    /// Creates a context on device `index` and makes it current on this thread.
    pub fn create(&self, index: u32) -> NpuResult<Context> {
        let mut g = self.rt.lock();
        let device = device_entity(&g.world, index)?;
        let cost = g.costs.call_ns;
        g.charge(cost);
        let ctx = spawn_context(&mut g, device, index, false);
        self.rt.stack_set_top(&mut g, ctx);
        g.record(|r, _| crate::record::Call::CreateContext {
            device: index,
            ctx: r.context(ctx).0,
        });
        Ok(Context::new(self.rt.id(), ctx))
    }

    /// The context current on this thread.
    pub fn current(&self) -> NpuResult<Context> {
        let mut g = self.rt.lock();
        let e = self.rt.current_ctx_entity(&g)?;
        g.record_new(|r, _| {
            let (ctx, new) = r.context(e);
            new.then_some(crate::record::Call::CurrentContext { ctx })
        });
        Ok(Context::new(self.rt.id(), e))
    }

    /// Replaces the current context of this thread (`aclrtSetCurrentContext`).
    pub fn set_current(&self, ctx: Context) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let e = self.rt.check_context(&g, ctx)?;
        self.rt.stack_set_top(&mut g, e);
        g.record(|r, _| crate::record::Call::SetCurrentContext {
            ctx: r.context(e).0,
        });
        Ok(())
    }

    /// Makes `ctx` current on this thread, remembering the previous one for [`Contexts::pop`](crate::Contexts::pop).
    pub fn push(&self, ctx: Context) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let e = self.rt.check_context(&g, ctx)?;
        crate::sanitizer::thread_seen(&mut g);
        let (runtime, shared) = (self.rt.id(), self.rt.weak());
        stack_mut(|s| {
            s.push(Entry {
                runtime,
                ctx: e,
                shared,
            })
        });
        g.add_user(e);
        g.record(|r, _| crate::record::Call::PushContext {
            ctx: r.context(e).0,
        });
        Ok(())
    }

    /// Removes this thread's current context (the latest [`Contexts::push`](crate::Contexts::push), or the
    /// one `create_context` / `set_device` / `set_current_context` made current) and returns it;
    /// the one below becomes current. `None` when the stack is empty.
    pub fn pop(&self) -> Option<Context> {
        let id = self.rt.id();
        let popped = stack_mut(|s| {
            let i = s.iter().rposition(|e| e.runtime == id)?;
            Some(s.remove(i).ctx)
        })?;
        let mut g = self.rt.lock();
        g.release_user(popped);
        g.record(|_, _| crate::record::Call::PopContext);
        Some(Context::new(id, popped))
    }

    /// The default stream of the current context.
    pub fn default_stream(&self) -> NpuResult<Stream> {
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx_entity(&g)?;
        let s = g
            .world
            .get::<ContextState>(ctx)
            .expect("checked")
            .default_stream;
        g.record_new(|r, _| {
            let (stream, new) = r.seen_stream(s);
            new.then_some(crate::record::Call::DefaultStream { stream })
        });
        Ok(Stream::new(self.rt.id(), s))
    }

    /// Sets what a failing task does to the rest of the current context's work
    /// (`aclrtSetStreamFailureMode`).
    pub fn set_failure_mode(&self, mode: FailureMode) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        g.world
            .get_mut::<ContextState>(ctx)
            .expect("checked")
            .failure_mode = mode;
        g.record(|_, _| crate::record::Call::SetFailureMode {
            mode: crate::record::failure_mode_code(mode),
        });
        Ok(())
    }

    /// The sticky error of the current context, if it faulted.
    pub fn error(&self) -> NpuResult<Option<NpuError>> {
        let g = self.rt.lock();
        let ctx = self.rt.current_ctx_entity(&g)?;
        Ok(g.world
            .get::<ContextState>(ctx)
            .expect("checked")
            .sticky_error
            .clone())
    }

    /// Destroys a context: its queued tasks are aborted (running ones finish), then its
    /// streams, events and memory are released. Refused for a device's primary context and
    /// for a context that another thread still has current.
    pub fn destroy(&self, ctx: Context) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let e = self.rt.check_context(&g, ctx)?;
        if g.world.get::<ContextState>(e).expect("checked").is_default {
            return Err(NpuError::ContextRelease(format!(
                "{ctx}: the primary context of a device"
            )));
        }
        let users = g.ctx_users.get(&e).copied().unwrap_or(0);
        if users > own_uses(self.rt.id(), e) {
            return Err(NpuError::ContextRelease(format!(
                "{ctx}: another thread still has it as its current context"
            )));
        }
        let streams = g
            .world
            .get::<ContextState>(e)
            .expect("checked")
            .streams
            .clone();
        g.world
            .res_mut::<AbortRequests>()?
            .contexts
            .push((e, NpuError::ContextRelease(format!("{ctx} destroyed"))));
        let what = || format!("{ctx} teardown");
        let done = |i: &Inner| {
            streams
                .iter()
                .all(|s| i.world.get::<StreamState>(*s).is_none_or(|s| s.is_idle()))
        };
        let (mut g, result) = self.rt.drive(g, &what, &done, None);
        // Even if its work can never finish, the context goes: its tasks are dropped with it.
        teardown_context(&mut g, e);
        let id = self.rt.id();
        // Like ACL, the thread is left with no current context (calls fail with
        // ACL_ERROR_RT_CONTEXT_NULL) until it sets one.
        let removed = stack_mut(|s| {
            let mut n = 0;
            for x in s.iter_mut().filter(|x| x.runtime == id && x.ctx == e) {
                x.ctx = Entity::PLACEHOLDER;
                n += 1;
            }
            n
        });
        for _ in 0..removed {
            g.release_user(e);
        }
        g.ctx_users.remove(&e);
        g.record(|r, _| crate::record::Call::DestroyContext {
            ctx: r.context(e).0,
        });
        result.or(Ok(()))
    }
}

fn healthy(world: &World, ctx: Entity) -> NpuResult<()> {
    healthy_ctx(world.get::<ContextState>(ctx), ctx)
}

/// `make`'s error naming `handle`: built out of line, so the checks' hot paths carry no
/// formatting.
#[cold]
#[inline(never)]
fn handle_error(make: fn(String) -> NpuError, handle: impl std::fmt::Display) -> NpuError {
    make(handle.to_string())
}

fn healthy_ctx(c: Option<&ContextState>, ctx: Entity) -> NpuResult<()> {
    let Some(c) = c else {
        return Err(NpuError::ContextNull(format!(
            "context {ctx} current on this thread was destroyed; set another"
        )));
    };
    if c.status == ContextStatus::Faulted {
        return Err(c
            .sticky_error
            .clone()
            .unwrap_or_else(|| NpuError::Internal("faulted without an error".into())));
    }
    Ok(())
}

/// Despawns a context and everything it owns.
pub(crate) fn teardown_context(inner: &mut Inner, ctx: Entity) {
    let Some(c) = inner.world.get::<ContextState>(ctx) else {
        return;
    };
    let device = c.device;
    let streams = c.streams.clone();
    let events = c.events.clone();
    crate::sanitizer::context_destroyed(inner, ctx, &streams);
    for s in streams {
        let tasks: Vec<Entity> = inner
            .world
            .get::<StreamState>(s)
            .map(|s| s.queue.iter().copied().collect())
            .unwrap_or_default();
        for t in tasks {
            inner.world.despawn(t);
        }
        inner.world.despawn(s);
    }
    for e in events {
        inner.world.despawn(e);
    }
    // Binaries go with their context: their instruction memory returns to the device, their
    // module data with the address space below; a handle to one is then destroyed (107017).
    let binaries: Vec<Entity> = inner
        .world
        .query::<(Entity, &BinaryState)>()
        .iter(&inner.world)
        .filter(|(_, b)| b.context == ctx)
        .map(|(e, _)| e)
        .collect();
    for b in binaries {
        crate::binary::release_binary(inner, b);
    }
    if let Some(mut d) = inner.world.get_mut::<DeviceState>(device) {
        d.memory.destroy_space(ctx);
    }
    inner.world.despawn(ctx);
    // Its callback thread ends once the callbacks it has are done.
    inner.callbacks.forget_context(ctx);
}

/// The context of a safe-API object made current on this thread while one raw call runs
/// (`crate::safe`): those objects know their context, the raw calls read the thread's. Pushed
/// only when it is not current already, and removed on drop (the entry it pushed, even if the
/// call pushed others on top).
pub(crate) struct ContextScope<'a> {
    rt: &'a Runtime,
    pushed: Option<Entity>,
}

impl Runtime {
    /// Makes `ctx` current on this thread until the returned scope is dropped. `fallback` says
    /// that `ctx` is what a thread with no context of this runtime uses (device 0's primary
    /// context): such a thread needs nothing pushed.
    pub(crate) fn enter_context(&self, ctx: Entity, fallback: bool) -> ContextScope<'_> {
        let id = self.id();
        let top = top_for(id);
        if top == Some(ctx) || (top.is_none() && fallback) {
            return ContextScope {
                rt: self,
                pushed: None,
            };
        }
        let mut g = self.lock();
        let shared = self.weak();
        stack_mut(|s| {
            s.push(Entry {
                runtime: id,
                ctx,
                shared,
            })
        });
        g.add_user(ctx);
        ContextScope {
            rt: self,
            pushed: Some(ctx),
        }
    }
}

impl Drop for ContextScope<'_> {
    fn drop(&mut self) {
        let Some(ctx) = self.pushed else {
            return;
        };
        let id = self.rt.id();
        // `try_`: a scope may end while the thread's locals are torn down.
        let removed = try_stack_mut(|s| {
            let i = s.iter().rposition(|e| e.runtime == id && e.ctx == ctx)?;
            s.remove(i);
            Some(())
        })
        .flatten();
        if removed.is_some() {
            self.rt.lock().release_user(ctx);
        }
    }
}

impl Runtime {
    /// Creates a context on device `index` without making it current anywhere (the safe API's
    /// contexts are values, not thread state).
    pub(crate) fn create_context_detached(&self, index: u32) -> NpuResult<Entity> {
        let mut g = self.lock();
        let device = device_entity(&g.world, index)?;
        let cost = g.costs.call_ns;
        g.charge(cost);
        Ok(spawn_context(&mut g, device, index, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::RuntimeConfig;

    #[test]
    fn the_current_context_follows_every_change_of_the_threads_stack() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        let other = Runtime::new(RuntimeConfig::default()).unwrap();
        assert_eq!(top_for(rt.id()), None, "nothing made current yet");
        let a = rt.contexts().create(0).unwrap();
        assert_eq!(top_for(rt.id()), Some(a.entity()));
        assert_eq!(
            top_for(other.id()),
            None,
            "another runtime's answer is its own"
        );
        let b = rt.contexts().create(0).unwrap();
        assert_eq!(
            top_for(rt.id()),
            Some(b.entity()),
            "create replaces the top"
        );
        rt.contexts().push(a).unwrap();
        assert_eq!(top_for(rt.id()), Some(a.entity()));
        rt.contexts().set_current(b).unwrap();
        assert_eq!(top_for(rt.id()), Some(b.entity()));
        assert_eq!(rt.contexts().pop(), Some(b));
        assert_eq!(top_for(rt.id()), Some(b.entity()), "the one below");
        assert_eq!(rt.contexts().pop(), Some(b));
        assert_eq!(top_for(rt.id()), None);
        // Entries of a dropped runtime go, and its id answers nothing.
        let gone = other.id();
        other.contexts().create(0).unwrap();
        assert!(top_for(gone).is_some());
        drop(other);
        assert_eq!(top_for(gone), None);
    }
}
