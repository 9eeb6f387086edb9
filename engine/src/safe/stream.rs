//! [`NpuStream`]: a stream as a value, with the calls a reader looks for on it — copies,
//! launches, event records and waits, synchronize.

use crate::{HostFunc, Launch};
use std::sync::Arc;

use bytemuck::Pod;
use npusim_components::access::AccessSet;
use npusim_components::{Arg, HostBuffer, Kernel, NpuError, NpuResult, Stream};

use super::{
    DeviceBuffer, DeviceSlice, DeviceSliceMut, LaunchBuilder, Launchable, NpuContext, NpuEvent,
    PinnedBuffer,
};

struct StreamInner {
    ctx: NpuContext,
    raw: Stream,
    /// Whether the last drop destroys it (not a context's default stream).
    owned: bool,
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if !self.owned || self.ctx.epoch().is_none() {
            return; // a default stream, or the context (and its streams) is gone
        }
        // Synchronize first: destroying returns only whether the wait ended, and the error of
        // a task of the stream would go with it.
        let result = self.ctx.with(|rt| {
            let synced = rt.streams().synchronize(self.raw);
            rt.streams().destroy(self.raw).and(synced)
        });
        if let Err(e) = result {
            self.ctx.runtime().keep_drop_error(e);
        }
    }
}

/// A stream of a context: tasks run on it one after another, and it runs beside other
/// streams. Cheap to clone (clones share it), `Send + Sync`. The last clone of a stream from
/// [`NpuContext::stream`] runs its queued work and destroys it when dropped.
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig::default())?;
/// let ctx = rt.device_context(0)?;
/// let (s1, s2) = (ctx.stream()?, ctx.stream()?);
/// let mut x = s1.alloc_zeros::<f32>(256)?;
/// let fill = rt.kernel("fill_f32")?;
/// s1.launch_builder(&fill).arg(&mut x).arg(256usize).arg(7.0f32).launch()?;
/// let done = ctx.event()?;
/// s1.record(&done)?;
/// s2.wait(&done)?; // s2's later work starts after the fill
/// assert_eq!(s2.clone_dtoh(&x)?, vec![7.0f32; 256]);
/// # Ok::<(), NpuError>(())
/// ```
#[derive(Clone)]
pub struct NpuStream {
    inner: Arc<StreamInner>,
}

impl std::fmt::Debug for NpuStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NpuStream({})", self.inner.raw)
    }
}

/// Checks that `buf` is live memory of `ctx`.
pub(super) fn same_context<T: Pod>(
    ctx: &NpuContext,
    buf: &(impl DeviceSlice<T> + ?Sized),
) -> NpuResult<()> {
    buf.check_live()?;
    if buf.context().entity() != ctx.entity() || buf.context().runtime().id() != ctx.runtime().id()
    {
        return Err(NpuError::WrongContext {
            handle: format!("device buffer at {}", buf.device_ptr()),
            owner: format!("{:?}", buf.context()),
            current: format!("{ctx:?}"),
        });
    }
    Ok(())
}

fn fits(what: &str, src: usize, dst: usize) -> NpuResult<()> {
    if src > dst {
        return Err(NpuError::InvalidParam(format!(
            "{what}: {src} elements do not fit {dst}"
        )));
    }
    Ok(())
}

impl NpuStream {
    pub(crate) fn new(ctx: NpuContext, raw: Stream, owned: bool) -> Self {
        Self {
            inner: Arc::new(StreamInner { ctx, raw, owned }),
        }
    }

    /// The stream's context.
    pub fn context(&self) -> &NpuContext {
        &self.inner.ctx
    }

    /// The raw handle, for the ACL-style methods of [`Runtime`](crate::Runtime) (with the
    /// stream's context current).
    pub fn raw(&self) -> Stream {
        self.inner.raw
    }

    fn with<R>(&self, f: impl FnOnce(&crate::Runtime, Stream) -> R) -> R {
        self.inner.ctx.with(|rt| f(rt, self.inner.raw))
    }

    /// Enqueues a copy of `src` into the start of `dst`. `src` is staged at the call (as an
    /// asynchronous copy from pageable memory is), so it may be reused at once.
    #[track_caller]
    pub fn memcpy_htod<T: Pod>(
        &self,
        src: &[T],
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(&self.inner.ctx, dst)?;
        fits("memcpy_htod", src.len(), dst.len())?;
        let ptr = dst.device_ptr();
        self.with(|rt, s| rt.memory().memcpy_htod_async_pageable(ptr, src, s))
    }

    /// Copies the start of `src` into `dst` (all of `dst`), waiting for the stream: the copy
    /// is enqueued behind the stream's work, and the call returns once it has run.
    #[track_caller]
    pub fn memcpy_dtoh<T: Pod>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut [T],
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(&self.inner.ctx, src)?;
        fits("memcpy_dtoh", dst.len(), src.len())?;
        let out: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let staged = HostBuffer::try_new(out.len() as u64, false)?;
        let ptr = src.device_ptr();
        let bytes = out.len() as u64;
        self.with(|rt, s| {
            rt.memory().memcpy_dtoh_async(&staged, ptr, bytes, s)?;
            rt.streams().synchronize(s)
        })?;
        out.copy_from_slice(&staged.bytes()?);
        Ok(())
    }

    /// Enqueues a copy of all of `src` into the start of `dst` (device to device, same
    /// context).
    #[track_caller]
    pub fn memcpy_dtod<T: Pod>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(&self.inner.ctx, src)?;
        same_context(&self.inner.ctx, dst)?;
        fits("memcpy_dtod", src.len(), dst.len())?;
        let (d, sp, bytes) = (dst.device_ptr(), src.device_ptr(), src.byte_len());
        self.with(|rt, s| rt.memory().memcpy_dtod_async(d, sp, bytes, s))
    }

    /// Enqueues a copy of all of pinned `src` into the start of `dst`; the bytes are read when
    /// the copy runs (as a DMA engine reads pinned memory).
    #[track_caller]
    pub fn memcpy_htod_pinned<T: Pod>(
        &self,
        src: &PinnedBuffer<T>,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(&self.inner.ctx, dst)?;
        fits("memcpy_htod_pinned", src.len(), dst.len())?;
        let (ptr, bytes) = (dst.device_ptr(), src.byte_len());
        self.with(|rt, s| rt.memory().memcpy_htod_async(ptr, src.as_raw(), bytes, s))
    }

    /// Enqueues a copy of all of `src` into the start of pinned `dst`; read `dst` after the
    /// stream (or an event recorded after the copy) has been synchronized.
    #[track_caller]
    pub fn memcpy_dtoh_pinned<T: Pod>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &PinnedBuffer<T>,
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(&self.inner.ctx, src)?;
        fits("memcpy_dtoh_pinned", src.len(), dst.len())?;
        let (ptr, bytes) = (src.device_ptr(), src.byte_len());
        self.with(|rt, s| rt.memory().memcpy_dtoh_async(dst.as_raw(), ptr, bytes, s))
    }

    /// Enqueues zeroing all of `dst`.
    #[track_caller]
    pub fn memset_zeros<T: Pod>(
        &self,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        same_context(&self.inner.ctx, dst)?;
        let (ptr, bytes) = (dst.device_ptr(), dst.byte_len());
        self.with(|rt, s| rt.memory().memset_async(ptr, 0, bytes, s))
    }

    /// A new buffer holding a copy of `src` (allocated now, filled in stream order).
    #[track_caller]
    pub fn clone_htod<T: Pod>(&self, src: &[T]) -> NpuResult<DeviceBuffer<T>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let mut buf = self.inner.ctx.alloc::<T>(src.len())?;
        self.memcpy_htod(src, &mut buf)?;
        Ok(buf)
    }

    /// The elements of `src`, copied out once the stream's work before the copy has run.
    #[track_caller]
    pub fn clone_dtoh<T: Pod>(&self, src: &(impl DeviceSlice<T> + ?Sized)) -> NpuResult<Vec<T>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let mut out = vec![T::zeroed(); src.len()];
        self.memcpy_dtoh(src, &mut out)?;
        Ok(out)
    }

    /// A new buffer holding a copy of all of `src` (allocated now, copied in stream order).
    #[track_caller]
    pub fn clone_dtod<T: Pod>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
    ) -> NpuResult<DeviceBuffer<T>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let mut buf = self.inner.ctx.alloc::<T>(src.len())?;
        self.memcpy_dtod(src, &mut buf)?;
        Ok(buf)
    }

    /// A new buffer of `n` zeroed elements: allocated now, zeroed in stream order (work
    /// enqueued later on this stream sees zeros).
    #[track_caller]
    pub fn alloc_zeros<T: Pod>(&self, n: usize) -> NpuResult<DeviceBuffer<T>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let mut buf = self.inner.ctx.alloc::<T>(n)?;
        self.memset_zeros(&mut buf)?;
        Ok(buf)
    }

    /// A launch of `kernel` (a [`Kernel`] or an [`NpuFunction`](super::NpuFunction)) on this
    /// stream, to be given its arguments, grid and tiling. The builder borrows the function, so
    /// its module stays loaded until the launch is queued (and, once queued, until it has
    /// run).
    pub fn launch_builder<'a>(&'a self, kernel: &'a impl Launchable) -> LaunchBuilder<'a> {
        LaunchBuilder::new(self, kernel.kernel())
    }

    /// Enqueues `kernel` with `grid` blocks and untyped `args` (as
    /// [`Launch`](crate::Launch)). Prefer [`NpuStream::launch_builder`],
    /// which checks buffers and the kernel's declared parameters.
    #[track_caller]
    pub fn launch(&self, kernel: &Kernel, grid: u32, args: &[Arg]) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        let k = *kernel;
        self.with(|rt, s| rt.submit(Launch::new(k, grid, args, s)))
            .map(drop)
    }

    pub(crate) fn launch_declared(
        &self,
        kernel: Kernel,
        grid: u32,
        args: &[Arg],
        tiling: &[u32],
        access: Box<AccessSet>,
    ) -> NpuResult<()> {
        self.with(|rt, s| {
            rt.submit(
                Launch::new(kernel, grid, args, s)
                    .tiling(tiling)
                    .declared(Some(access)),
            )
        })
        .map(drop)
    }

    /// Enqueues a record of `event`: it fires when the stream's earlier work is done.
    #[track_caller]
    pub fn record(&self, event: &NpuEvent) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        let e = event.raw();
        self.with(|rt, s| rt.events().record(e, s))
    }

    /// Makes the stream's later work wait for the latest record of `event` (as of now).
    #[track_caller]
    pub fn wait(&self, event: &NpuEvent) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        let e = event.raw();
        self.with(|rt, s| rt.events().stream_wait(s, e))
    }

    /// Waits until everything enqueued so far has run; returns the first error of a task on
    /// the stream since the last synchronize.
    #[track_caller]
    pub fn synchronize(&self) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        self.with(|rt, s| rt.streams().synchronize(s))
    }

    /// Whether everything enqueued has run (does not advance the device).
    #[track_caller]
    pub fn query(&self) -> NpuResult<bool> {
        let _site = crate::sanitizer::SiteGuard::here();
        self.with(|rt, s| rt.streams().query(s))
    }

    /// A new event of the stream's context, recorded here: it fires when the stream's work
    /// enqueued so far is done (cudarc's `record_event`).
    #[track_caller]
    pub fn record_event(&self) -> NpuResult<NpuEvent> {
        let _site = crate::sanitizer::SiteGuard::here();
        let event = self.inner.ctx.event()?;
        self.record(&event)?;
        Ok(event)
    }

    /// Enqueues a host callback (`aclrtLaunchCallback` with `ACL_CALLBACK_BLOCK`,
    /// `cuLaunchHostFunc`): `f` runs on the host when the stream reaches it, after the
    /// stream's earlier work, on the callback thread of the stream's context with the context
    /// current; the stream's later work waits until it has returned. As with
    /// [`HostFunc`](crate::HostFunc) (README, "Host
    /// callbacks"): a panic fails the callback's task (the stream's next synchronize returns
    /// `ACL_ERROR_RT_INTERNAL_ERROR`) and later work still runs; `f` may call the runtime,
    /// launch work and wait for other streams, but synchronizing its own stream or device is
    /// `ACL_ERROR_RT_WAIT_TIMEOUT` at once (so a callback should not hold the last clone of
    /// its own stream: that drop would wait for itself, and is kept as a drop error).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use npusim_engine::prelude::*;
    ///
    /// let rt = Runtime::new(RuntimeConfig::default())?;
    /// let ctx = rt.device_context(0)?;
    /// let stream = ctx.stream()?;
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let mut x = ctx.alloc::<u32>(1024)?;
    /// stream.memset_zeros(&mut x)?;
    /// let l = log.clone();
    /// stream.launch_host_func(move || l.lock().unwrap().push("after the memset"))?;
    /// stream.synchronize()?;
    ///     /// assert_eq!(*log.lock().unwrap(), ["after the memset"]);
    /// # Ok::<(), NpuError>(())
    /// ```
    #[track_caller]
    pub fn launch_host_func(&self, f: impl FnOnce() + Send + 'static) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        self.with(|rt, s| rt.submit(HostFunc::new(s, f))).map(drop)
    }
}
