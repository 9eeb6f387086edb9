//! Streams: create, destroy, query, synchronize. A stream runs its tasks one after another;
//! different streams run concurrently and are ordered only by events.

use bevy_ecs::prelude::*;
use npusim_components::{
    ContextState, NpuError, NpuResult, SimTime, Stream, StreamKind, StreamState,
};

use crate::runtime::{Inner, Runtime, spawn_stream};

/// How to create a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamConfig {
    /// Priority: lower numbers are dispatched first (0 is the default and the highest of the
    /// usual range 0..=7, as ACL numbers them).
    pub priority: i32,
    /// What the stream is for.
    pub kind: StreamKind,
}

impl Runtime {
    fn sync_stream(&self, stream: Stream, timeout: Option<SimTime>) -> NpuResult<()> {
        let g = self.lock();
        let (s, _) = self.check_stream(&g, stream)?;
        let target = g.world.get::<StreamState>(s).expect("checked").submitted;
        let what = || stream.to_string();
        let done = |i: &Inner| {
            i.world
                .get::<StreamState>(s)
                .is_none_or(|st| st.completed >= target)
        };
        let (mut g, result) = self.drive(g, &what, &done, timeout);
        crate::record::record!(g, |r, _| crate::record::Call::SynchronizeStream {
            stream: r.stream(s),
            timeout_ns: timeout.map(SimTime::as_ns),
        });
        result?;
        let sync = SimTime(g.costs.sync_ns);
        // A host callback run during the wait may have destroyed the stream (after draining it).
        let Some(mut st) = g.world.get_mut::<StreamState>(s) else {
            return Err(NpuError::Destroyed(stream.to_string()));
        };
        let end = st.last_end;
        let err = st.error.take();
        let t = g.host_now().max(end) + sync;
        g.set_host_now(t);
        crate::sanitizer::synchronized_stream(&mut g, s);
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every stream of the current context's device has finished its work
    /// (`aclrtSynchronizeDevice`); returns the first error of the current context's streams.
    pub fn synchronize_device(&self) -> NpuResult<()> {
        let g = self.lock();
        let ctx = self.current_ctx_entity(&g)?;
        let device = g.world.get::<ContextState>(ctx).expect("checked").device;
        let device_index = g
            .world
            .get::<ContextState>(ctx)
            .expect("checked")
            .device_index;
        let what = || format!("device of context {ctx}");
        let done = |i: &Inner| i.device_idle(device_index);
        let (mut g, result) = self.drive(g, &what, &done, None);
        crate::record::record!(g, |_, _| crate::record::Call::SynchronizeDevice);
        result?;
        let mut end = SimTime::ZERO;
        let mut first_err = None;
        let mut q = g.world.query::<&mut StreamState>();
        for mut s in q.iter_mut(&mut g.world) {
            if s.device != device {
                continue;
            }
            end = end.max(s.last_end);
            if s.context == ctx
                && let Some(e) = s.error.take()
            {
                first_err.get_or_insert(e);
            }
        }
        let sync = SimTime(g.costs.sync_ns);
        let t = g.host_now().max(end) + sync;
        g.set_host_now(t);
        crate::sanitizer::synchronized_device(&mut g, Some(device_index));
        // A faulted context reports its sticky error.
        self.current_ctx(&g)?;
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Streams of the current context: create, destroy, query, synchronize (`aclrtCreateStream` …).
/// Reached through [`Runtime::streams`].
#[derive(Clone, Copy)]
pub struct Streams<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Streams of the current context.
    pub fn streams(&self) -> Streams<'_> {
        Streams { rt: self }
    }
}

impl Streams<'_> {
    /// Creates a stream in the current context, with default priority.
    pub fn create(&self) -> NpuResult<Stream> {
        self.create_with(StreamConfig::default())
    }

    /// Creates a stream in the current context with `config`.
    pub fn create_with(&self, config: StreamConfig) -> NpuResult<Stream> {
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        let device = g.world.get::<ContextState>(ctx).expect("checked").device;
        let cost = g.costs.call_ns;
        g.charge(cost);
        let s = spawn_stream(&mut g, ctx, device, config.priority, config.kind);
        g.record(|r, _| crate::record::Call::CreateStream {
            stream: r.new_stream(s),
            priority: config.priority,
            kind: crate::record::stream_kind_code(config.kind),
        });
        Ok(Stream::new(self.rt.id(), s))
    }

    /// How many tasks have been submitted to `stream` so far: the sequence number of its latest
    /// task (0 before the first).
    pub fn submitted(&self, stream: Stream) -> NpuResult<u64> {
        let g = self.rt.lock();
        let (s, _) = self.rt.check_stream(&g, stream)?;
        Ok(g.world.get::<StreamState>(s).expect("checked").submitted)
    }

    /// Waits for the stream's queued work, then destroys it. The default stream of a context
    /// cannot be destroyed.
    pub fn destroy(&self, stream: Stream) -> NpuResult<()> {
        let g = self.rt.lock();
        let (s, ctx) = self.rt.check_stream(&g, stream)?;
        if g.world
            .get::<ContextState>(ctx)
            .expect("checked")
            .default_stream
            == s
        {
            return Err(NpuError::InvalidParam(format!(
                "{stream} is its context's default stream"
            )));
        }
        let what = || stream.to_string();
        let done = |i: &Inner| i.world.get::<StreamState>(s).is_none_or(|st| st.is_idle());
        let (mut g, result) = self.rt.drive(g, &what, &done, None);
        // From a host callback that the stream's work waits for (its own, or one queued
        // behind it): the wait can never finish, and the stream stays.
        let me = crate::callback::context_of(self.rt.id());
        if result.is_err() && g.callbacks.mine_out(me) {
            return result;
        }
        g.callbacks.forget_stream(s);
        crate::sanitizer::synchronized_stream(&mut g, s);
        crate::sanitizer::stream_destroyed(&mut g, s);
        if let Some(mut c) = g.world.get_mut::<ContextState>(ctx) {
            c.streams.retain(|x| *x != s);
        }
        let tasks: Vec<Entity> = g
            .world
            .get::<StreamState>(s)
            .map(|st| st.queue.iter().copied().collect())
            .unwrap_or_default();
        for t in tasks {
            g.world.despawn(t);
        }
        g.world.despawn(s);
        g.record(|r, _| crate::record::Call::DestroyStream {
            stream: r.stream(s),
        });
        result
    }

    /// Whether every task submitted to the stream has finished (`aclrtStreamQuery`). Does not
    /// advance the device: a task stays pending until the frames that run it.
    pub fn query(&self, stream: Stream) -> NpuResult<bool> {
        let mut g = self.rt.lock();
        let (s, _) = self.rt.check_stream(&g, stream)?;
        let idle = g.world.get::<StreamState>(s).expect("checked").is_idle();
        // A query that finds the work done orders the host after it, as a synchronize does.
        if idle {
            crate::sanitizer::synchronized_stream(&mut g, s);
        }
        Ok(idle)
    }

    /// Waits until every task submitted to the stream so far has finished; the host clock moves
    /// to the stream's completion time. Returns the first error of a task on the stream since
    /// the last synchronize.
    pub fn synchronize(&self, stream: Stream) -> NpuResult<()> {
        self.rt.sync_stream(stream, None)
    }

    /// As [`Streams::synchronize`](crate::Streams::synchronize), but gives up after `timeout` of simulated time with
    /// `ACL_ERROR_RT_WAIT_TIMEOUT`; the work stays queued.
    pub fn synchronize_timeout(&self, stream: Stream, timeout: SimTime) -> NpuResult<()> {
        self.rt.sync_stream(stream, Some(timeout))
    }
}
