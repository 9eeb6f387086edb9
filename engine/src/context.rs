//! Contexts and the current context of each host thread. As in ACL, the current context is
//! thread-local: `set_device` makes a device's primary context current, `create_context` makes
//! the new context current, and push / pop keep a stack. A thread that never chose one uses
//! the primary context of device 0, as the CUDA runtime does.
//!
//! This module also holds the checks every call makes on the handles it is given: the handle
//! is of this runtime, names a live object, belongs to the current context, and that context
//! has not faulted.

use std::cell::RefCell;

use bevy_ecs::prelude::*;
use npusim_components::{
    Context, ContextState, ContextStatus, DeviceState, Event, EventState, FailureMode, NpuError,
    NpuResult, Stream, StreamState,
};

use crate::runtime::{Inner, Runtime, device_entity, spawn_context};

thread_local! {
    /// (runtime id, context entity), innermost last.
    static STACK: RefCell<Vec<(u32, Entity)>> = const { RefCell::new(Vec::new()) };
}

fn top_for(runtime: u32) -> Option<Entity> {
    STACK.with(|s| {
        s.borrow()
            .iter()
            .rev()
            .find(|(r, _)| *r == runtime)
            .map(|(_, e)| *e)
    })
}

fn set_top(runtime: u32, ctx: Entity) {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        match s.iter().rposition(|(r, _)| *r == runtime) {
            Some(i) => s[i].1 = ctx,
            None => s.push((runtime, ctx)),
        }
    });
}

impl Runtime {
    /// The context entity current on this thread, checked live (not necessarily healthy).
    pub(crate) fn current_ctx_entity(&self, inner: &Inner) -> NpuResult<Entity> {
        let world = &inner.world;
        let ctx = match top_for(self.id()) {
            Some(c) => c,
            None => inner.default_contexts[0],
        };
        if world.get::<ContextState>(ctx).is_none() {
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
        let world = &inner.world;
        if stream.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(stream.to_string()));
        }
        let s = world
            .get::<StreamState>(stream.entity())
            .ok_or_else(|| NpuError::Destroyed(stream.to_string()))?;
        let ctx = top_for(self.id()).unwrap_or(inner.default_contexts[0]);
        if s.context != ctx {
            self.current_ctx_entity(inner)?;
            return Err(NpuError::WrongContext {
                handle: stream.to_string(),
                owner: format!("context {}", s.context),
                current: format!("context {ctx}"),
            });
        }
        healthy(world, ctx)?;
        Ok((stream.entity(), ctx))
    }

    /// Checks an event handle against the current context; returns (event, context).
    pub(crate) fn check_event(&self, inner: &Inner, event: Event) -> NpuResult<(Entity, Entity)> {
        let world = &inner.world;
        if event.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(event.to_string()));
        }
        let e = world
            .get::<EventState>(event.entity())
            .ok_or_else(|| NpuError::Destroyed(event.to_string()))?;
        let ctx = self.current_ctx_entity(inner)?;
        if e.context != ctx {
            return Err(NpuError::WrongContext {
                handle: event.to_string(),
                owner: format!("context {}", e.context),
                current: format!("context {ctx}"),
            });
        }
        healthy(world, ctx)?;
        Ok((event.entity(), ctx))
    }

    fn check_context(&self, inner: &Inner, ctx: Context) -> NpuResult<Entity> {
        let world = &inner.world;
        if ctx.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(ctx.to_string()));
        }
        world
            .get::<ContextState>(ctx.entity())
            .ok_or_else(|| NpuError::Destroyed(ctx.to_string()))?;
        Ok(ctx.entity())
    }

    /// Makes the primary context of device `index` current on this thread (`aclrtSetDevice`).
    pub fn set_device(&self, index: u32) -> NpuResult<()> {
        let g = self.lock();
        let device = device_entity(&g.world, index)?;
        let ctx = g
            .world
            .get::<DeviceState>(device)
            .expect("device entity")
            .default_context;
        set_top(self.id(), ctx);
        Ok(())
    }

    /// The index of the current context's device.
    pub fn current_device(&self) -> NpuResult<u32> {
        let g = self.lock();
        let ctx = self.current_ctx_entity(&g)?;
        Ok(g.world
            .get::<ContextState>(ctx)
            .expect("checked")
            .device_index)
    }

    /// Creates a context on device `index` and makes it current on this thread.
    pub fn create_context(&self, index: u32) -> NpuResult<Context> {
        let mut g = self.lock();
        let device = device_entity(&g.world, index)?;
        let cost = g.costs.call_ns;
        g.charge(cost);
        let ctx = spawn_context(&mut g, device, index, false);
        set_top(self.id(), ctx);
        Ok(Context::new(self.id(), ctx))
    }

    /// The context current on this thread.
    pub fn current_context(&self) -> NpuResult<Context> {
        let g = self.lock();
        Ok(Context::new(self.id(), self.current_ctx_entity(&g)?))
    }

    /// Replaces the current context of this thread (`aclrtSetCurrentContext`).
    pub fn set_current_context(&self, ctx: Context) -> NpuResult<()> {
        let g = self.lock();
        let e = self.check_context(&g, ctx)?;
        set_top(self.id(), e);
        Ok(())
    }

    /// Makes `ctx` current on this thread, remembering the previous one for [`Runtime::pop_context`].
    pub fn push_context(&self, ctx: Context) -> NpuResult<()> {
        let g = self.lock();
        let e = self.check_context(&g, ctx)?;
        STACK.with(|s| s.borrow_mut().push((self.id(), e)));
        Ok(())
    }

    /// Undoes the latest [`Runtime::push_context`] (or `create_context`) of this thread and
    /// returns the context it removed; `None` when nothing was pushed.
    pub fn pop_context(&self) -> Option<Context> {
        let id = self.id();
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().rposition(|(r, _)| *r == id)?;
            Some(Context::new(id, s.remove(i).1))
        })
    }

    /// The default stream of the current context.
    pub fn default_stream(&self) -> NpuResult<Stream> {
        let g = self.lock();
        let ctx = self.current_ctx_entity(&g)?;
        Ok(Stream::new(
            self.id(),
            g.world
                .get::<ContextState>(ctx)
                .expect("checked")
                .default_stream,
        ))
    }

    /// Sets what a failing task does to the rest of the current context's work
    /// (`aclrtSetStreamFailureMode`).
    pub fn set_failure_mode(&self, mode: FailureMode) -> NpuResult<()> {
        let mut g = self.lock();
        let ctx = self.current_ctx(&g)?;
        g.world
            .get_mut::<ContextState>(ctx)
            .expect("checked")
            .failure_mode = mode;
        Ok(())
    }

    /// The sticky error of the current context, if it faulted.
    pub fn context_error(&self) -> NpuResult<Option<NpuError>> {
        let g = self.lock();
        let ctx = self.current_ctx_entity(&g)?;
        Ok(g.world
            .get::<ContextState>(ctx)
            .expect("checked")
            .sticky_error
            .clone())
    }

    /// Destroys a context: waits for its queued work, frees its memory, events and streams.
    /// A device's primary context cannot be destroyed.
    pub fn destroy_context(&self, ctx: Context) -> NpuResult<()> {
        let g = self.lock();
        let e = self.check_context(&g, ctx)?;
        if g.world.get::<ContextState>(e).expect("checked").is_default {
            return Err(NpuError::ContextRelease(format!(
                "{ctx}: the primary context of a device"
            )));
        }
        let streams = g
            .world
            .get::<ContextState>(e)
            .expect("checked")
            .streams
            .clone();
        let what = || format!("{ctx} teardown");
        let done = |i: &Inner| {
            streams
                .iter()
                .all(|s| i.world.get::<StreamState>(*s).is_none_or(|s| s.is_idle()))
        };
        let (mut g, result) = self.drive(g, &what, &done, None);
        // Even if its work can never finish, the context goes: its tasks are dropped with it.
        teardown_context(&mut g, e);
        STACK.with(|s| {
            s.borrow_mut()
                .retain(|(r, c)| !(*r == self.id() && *c == e))
        });
        result.or(Ok(()))
    }
}

fn healthy(world: &World, ctx: Entity) -> NpuResult<()> {
    let Some(c) = world.get::<ContextState>(ctx) else {
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
    for s in streams {
        let tasks: Vec<Entity> = inner
            .world
            .get::<StreamState>(s)
            .map(|s| s.queue.iter().copied().collect())
            .unwrap_or_default();
        let dropped = tasks.len() as u64;
        for t in tasks {
            inner.world.despawn(t);
        }
        if let Some(mut d) = inner.world.get_mut::<DeviceState>(device) {
            d.finished += dropped;
        }
        inner.world.despawn(s);
    }
    for e in events {
        inner.world.despawn(e);
    }
    if let Some(mut d) = inner.world.get_mut::<DeviceState>(device) {
        d.memory.free_all_of(ctx);
    }
    inner.world.despawn(ctx);
}
