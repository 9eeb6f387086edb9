//! [`NpuContext`]: a context as a value that knows its runtime and device. Objects made from it
//! (streams, events, buffers) work in it from any thread, whatever context the thread has
//! current: each call makes it current for its duration.

use std::sync::Arc;

use bevy_ecs::entity::Entity;
use npusim_components::{
    Context, ContextState, DevicePtr, DeviceState, HostBuffer, Kernel, NpuError, NpuResult,
};

use super::{DeviceBuffer, NpuEvent, NpuStream, PinnedBuffer};
use crate::runtime::device_entity;
use crate::{DeviceConfig, MemoryStats, Runtime, StreamConfig};

/// A context of a device: the root of the safe API. Cheap to clone, `Send + Sync`; dropping it
/// destroys nothing (the primary context lives as long as its runtime).
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig::default())?;
/// let ctx = rt.device_context(0)?;
/// let buf = ctx.alloc::<u16>(100)?;
/// assert_eq!((buf.len(), buf.byte_len()), (100, 200));
/// assert_eq!(ctx.device(), 0);
/// # Ok::<(), NpuError>(())
/// ```
#[derive(Clone)]
pub struct NpuContext {
    rt: Runtime,
    ctx: Entity,
    device: u32,
    /// Whether this is device 0's primary context, which a thread that never chose a context
    /// uses: calls from such a thread need not make it current.
    fallback: bool,
    /// For a context made by [`Runtime::new_context`]: destroys it with the last clone.
    _owner: Option<Arc<Owner>>,
}

/// Destroys a context made by [`Runtime::new_context`] when the last object made from it
/// (clones, streams, events, buffers) is gone.
struct Owner {
    rt: Runtime,
    ctx: Entity,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let raw = Context::new(self.rt.id(), self.ctx);
        if let Err(e) = self.rt.contexts().destroy(raw) {
            self.rt.keep_drop_error(e);
        }
    }
}

impl std::fmt::Debug for NpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NpuContext({}, device {})", self.ctx, self.device)
    }
}

impl Runtime {
    /// The primary context of device `index`, for the safe API (as cudarc's
    /// `CudaContext::new(ordinal)`). Does not change the calling thread's current context.
    pub fn device_context(&self, index: u32) -> NpuResult<NpuContext> {
        let g = self.lock();
        let device = device_entity(&g.world, index)?;
        let ctx = g
            .world
            .get::<DeviceState>(device)
            .expect("device entity")
            .default_context;
        drop(g);
        Ok(NpuContext {
            rt: self.clone(),
            ctx,
            device: index,
            fallback: index == 0,
            _owner: None,
        })
    }

    /// A new context on device `index` (`aclrtCreateContext`), as a value: no thread's current
    /// context changes. It is destroyed when the last object made from it is dropped — its
    /// clones, streams, events and buffers (each holds it) — after its queued work has been
    /// aborted or has finished, as [`Contexts::destroy`](crate::Contexts::destroy) does.
    ///
    /// ```
    /// use npusim_engine::prelude::*;
    ///
    /// let rt = Runtime::new(RuntimeConfig::default())?;
    /// let before = rt.stats().contexts;
    /// let ctx = rt.new_context(0)?;
    /// let buf = ctx.default_stream()?.clone_htod(&[1u8, 2, 3])?;
    /// drop(ctx);
    /// assert_eq!(rt.stats().contexts, before + 1, "the buffer keeps it");
    /// drop(buf);
    /// assert_eq!(rt.stats().contexts, before);
    /// # Ok::<(), NpuError>(())
    /// ```
    pub fn new_context(&self, index: u32) -> NpuResult<NpuContext> {
        let ctx = self.create_context_detached(index)?;
        Ok(NpuContext {
            rt: self.clone(),
            ctx,
            device: index,
            fallback: false,
            _owner: Some(Arc::new(Owner {
                rt: self.clone(),
                ctx,
            })),
        })
    }

    /// The safe-API view of a raw context handle (one from [`Contexts::create`](crate::Contexts::create), say).
    /// Dropping it does not destroy the context.
    pub fn context_of(&self, ctx: Context) -> NpuResult<NpuContext> {
        if ctx.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(ctx.to_string()));
        }
        let g = self.lock();
        let device = g
            .world
            .get::<ContextState>(ctx.entity())
            .ok_or_else(|| NpuError::Destroyed(ctx.to_string()))?
            .device_index;
        let fallback = g.default_contexts.first() == Some(&ctx.entity());
        drop(g);
        Ok(NpuContext {
            rt: self.clone(),
            ctx: ctx.entity(),
            device,
            fallback,
            _owner: None,
        })
    }
}

impl NpuContext {
    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The raw handle, for the ACL-style methods of [`Runtime`].
    pub fn raw(&self) -> Context {
        Context::new(self.rt.id(), self.ctx)
    }

    /// The device's index.
    pub fn device(&self) -> u32 {
        self.device
    }

    pub(crate) fn entity(&self) -> Entity {
        self.ctx
    }

    /// Runs `f` with this context current on the calling thread.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Runtime) -> R) -> R {
        let _scope = self.rt.enter_context(self.ctx, self.fallback);
        f(&self.rt)
    }

    /// The context's memory epoch (see `DeviceMemory::epoch`): `None` when the context is gone.
    pub(crate) fn epoch(&self) -> Option<u64> {
        let g = self.rt.lock();
        let c = g.world.get::<ContextState>(self.ctx)?;
        g.world.get::<DeviceState>(c.device)?.memory.epoch(self.ctx)
    }

    /// A new stream in this context, destroyed when its last clone is dropped (after its queued
    /// work has run).
    #[track_caller]
    pub fn stream(&self) -> NpuResult<NpuStream> {
        let _site = crate::sanitizer::SiteGuard::here();
        self.stream_with(StreamConfig::default())
    }

    /// As [`NpuContext::stream`], with a priority and kind.
    #[track_caller]
    pub fn stream_with(&self, config: StreamConfig) -> NpuResult<NpuStream> {
        let _site = crate::sanitizer::SiteGuard::here();
        let raw = self.with(|rt| rt.streams().create_with(config))?;
        Ok(NpuStream::new(self.clone(), raw, true))
    }

    /// The context's default stream (never destroyed by a drop).
    #[track_caller]
    pub fn default_stream(&self) -> NpuResult<NpuStream> {
        let _site = crate::sanitizer::SiteGuard::here();
        let raw = self.with(|rt| rt.contexts().default_stream())?;
        Ok(NpuStream::new(self.clone(), raw, false))
    }

    /// A new event in this context, destroyed when its last clone is dropped.
    #[track_caller]
    pub fn event(&self) -> NpuResult<NpuEvent> {
        let _site = crate::sanitizer::SiteGuard::here();
        let raw = self.with(|rt| rt.events().create())?;
        Ok(NpuEvent::new(self.clone(), raw))
    }

    /// The kernel registered as `name` (a native kernel, or an op's kernel).
    pub fn kernel(&self, name: &str) -> NpuResult<Kernel> {
        self.rt.kernel(name)
    }

    /// `n` elements of device memory. Their contents are unspecified (the pool may hand back
    /// the bytes of an earlier allocation); [`NpuContext::alloc_zeros`] or
    /// [`NpuStream::alloc_zeros`] give zeros. `n` must be nonzero, and `n` elements of `T` must
    /// fit the device.
    #[track_caller]
    pub fn alloc<T: bytemuck::Pod>(&self, n: usize) -> NpuResult<DeviceBuffer<T>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let bytes = (n as u64)
            .checked_mul(std::mem::size_of::<T>() as u64)
            .ok_or_else(|| NpuError::InvalidParam(format!("{n} elements overflow")))?;
        if bytes == 0 {
            return Err(NpuError::InvalidParam(format!(
                "a device buffer of {n} elements of {} bytes",
                std::mem::size_of::<T>()
            )));
        }
        let ptr: DevicePtr = self.with(|rt| rt.memory().malloc(bytes))?;
        let epoch = self.epoch().unwrap_or(0);
        Ok(DeviceBuffer::wrap(self.clone(), ptr, n, epoch))
    }

    /// `n` zeroed elements of device memory, synchronously: the device's queued work finishes
    /// first, as a synchronous `memset` does.
    #[track_caller]
    pub fn alloc_zeros<T: bytemuck::Pod>(&self, n: usize) -> NpuResult<DeviceBuffer<T>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let buf = self.alloc::<T>(n)?;
        self.with(|rt| rt.memory().memset(buf.device_ptr(), 0, buf.byte_len()))?;
        Ok(buf)
    }

    /// `n` zeroed elements of pinned host memory (`malloc_host`), for asynchronous copies.
    #[track_caller]
    pub fn alloc_host<T: bytemuck::Pod>(&self, n: usize) -> NpuResult<PinnedBuffer<T>> {
        let _site = crate::sanitizer::SiteGuard::here();
        let bytes = (n as u64)
            .checked_mul(std::mem::size_of::<T>() as u64)
            .ok_or_else(|| NpuError::InvalidParam(format!("{n} elements overflow")))?;
        let raw: HostBuffer = self.rt.memory().malloc_host(bytes)?;
        Ok(PinnedBuffer::wrap(raw, n))
    }

    /// The device's datasheet.
    pub fn device_config(&self) -> NpuResult<DeviceConfig> {
        self.rt.device_config(self.device)
    }

    /// Memory counters of the device (pool, TLB, driver calls, deferred frees).
    pub fn memory_stats(&self) -> NpuResult<MemoryStats> {
        self.with(|rt| rt.memory().stats())
    }

    /// Waits for every stream of the device to finish its queued work
    /// ([`Runtime::synchronize_device`]); returns this context's first error.
    #[track_caller]
    pub fn synchronize(&self) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        self.with(|rt| rt.synchronize_device())
    }
}

impl Runtime {
    /// The sticky error of context `ctx`, if it faulted.
    pub(crate) fn context_error_of(&self, ctx: Entity) -> Option<NpuError> {
        self.lock()
            .world
            .get::<ContextState>(ctx)
            .and_then(|c| c.sticky_error.clone())
    }
}
