//! [`NpuEvent`]: an event as a value — recorded into streams, waited on by streams and the
//! host, and timed against another.

use std::sync::Arc;

use npusim_components::{Event, NpuResult, SimTime};

use super::NpuContext;

struct EventInner {
    ctx: NpuContext,
    raw: Event,
}

impl Drop for EventInner {
    fn drop(&mut self) {
        if self.ctx.epoch().is_none() {
            return; // the context, and its events, are gone
        }
        // Waits enqueued on the event keep their meaning: its latest record fires first.
        let result = self.ctx.with(|rt| {
            let synced = rt.events().synchronize(self.raw);
            rt.events().destroy(self.raw).and(synced)
        });
        if let Err(e) = result {
            self.ctx.runtime().keep_drop_error(e);
        }
    }
}

/// An event of a context (from [`NpuContext::event`]). Cheap to clone (clones share it),
/// `Send + Sync`. The last clone, dropped, waits for the event's latest record, then destroys
/// it.
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig::default())?;
/// let ctx = rt.device_context(0)?;
/// let stream = ctx.stream()?;
/// let (start, end) = (ctx.event()?, ctx.event()?);
/// let mut x = ctx.alloc::<f32>(1 << 16)?;
/// stream.record(&start)?;
/// stream.memset_zeros(&mut x)?;
/// stream.record(&end)?;
/// end.synchronize()?;
/// assert!(end.elapsed_since(&start)? > 0.0);
/// # Ok::<(), NpuError>(())
/// ```
#[derive(Clone)]
pub struct NpuEvent {
    inner: Arc<EventInner>,
}

impl std::fmt::Debug for NpuEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NpuEvent({})", self.inner.raw)
    }
}

impl NpuEvent {
    pub(crate) fn new(ctx: NpuContext, raw: Event) -> Self {
        Self {
            inner: Arc::new(EventInner { ctx, raw }),
        }
    }

    /// The raw handle, for the ACL-style methods of [`Runtime`](crate::Runtime).
    pub fn raw(&self) -> Event {
        self.inner.raw
    }

    /// The event's context.
    pub fn context(&self) -> &NpuContext {
        &self.inner.ctx
    }

    /// Waits until the latest record (as of now) fires.
    #[track_caller]
    pub fn synchronize(&self) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        let e = self.inner.raw;
        self.inner.ctx.with(|rt| rt.events().synchronize(e))
    }

    /// Whether the latest record has fired (true if never recorded).
    #[track_caller]
    pub fn query(&self) -> NpuResult<bool> {
        let _site = crate::sanitizer::SiteGuard::here();
        let e = self.inner.raw;
        self.inner.ctx.with(|rt| rt.events().query(e))
    }

    /// Simulated milliseconds from `start`'s latest record to this event's; both must have
    /// fired.
    pub fn elapsed_since(&self, start: &NpuEvent) -> NpuResult<f32> {
        let (s, e) = (start.inner.raw, self.inner.raw);
        self.inner.ctx.with(|rt| rt.events().elapsed_ms(s, e))
    }

    /// The simulated time the latest record fired.
    pub fn timestamp(&self) -> NpuResult<SimTime> {
        let e = self.inner.raw;
        self.inner.ctx.with(|rt| rt.events().timestamp(e))
    }
}
