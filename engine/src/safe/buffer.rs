//! Typed memory: [`DeviceBuffer<T>`] owns a device allocation and frees it in stream order on
//! drop; [`DeviceView`] / [`DeviceViewMut`] are bounds-checked sub-ranges of one;
//! [`PinnedBuffer<T>`] is pinned host memory of `T`.
//!
//! A buffer remembers its context's memory epoch: if a fault released the context's memory
//! (stop-on-failure), the buffer is dead — every use is an error and its drop frees nothing —
//! even when its address has since been handed to a new allocation.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::panic::Location;

use bytemuck::Pod;
use npusim_components::{DevicePtr, HostBuffer, NpuError, NpuResult};

use super::NpuContext;

/// `n` elements of `T` in bytes (the caller checked it fits).
fn bytes_of<T>(n: usize) -> u64 {
    n as u64 * std::mem::size_of::<T>() as u64
}

/// The element range `range` of a slice of `len` elements, or an out-of-bounds error.
fn resolve(range: impl RangeBounds<usize>, len: usize) -> NpuResult<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e - s)),
        _ => Err(NpuError::InvalidParam(format!(
            "range {:?}..{:?} is outside a buffer of {len} elements",
            range.start_bound(),
            range.end_bound()
        ))),
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Device memory of `T` that a copy or launch may read: a [`DeviceBuffer`] or a view of one.
/// Sealed: only this crate's types, which are known to name live memory, implement it.
pub trait DeviceSlice<T: Pod>: sealed::Sealed {
    /// Number of elements.
    fn len(&self) -> usize;

    /// Whether it has no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes.
    fn byte_len(&self) -> u64 {
        bytes_of::<T>(self.len())
    }

    /// The device address of the first element (a raw address: keeping it does not keep the
    /// memory alive).
    fn device_ptr(&self) -> DevicePtr;

    /// The context whose memory this is.
    fn context(&self) -> &NpuContext;

    /// Checks that the memory is still the buffer's own (see the module docs).
    #[doc(hidden)]
    fn check_live(&self) -> NpuResult<()>;

    /// The context's memory epoch when the buffer was allocated.
    #[doc(hidden)]
    fn epoch(&self) -> u64;
}

/// Device memory of `T` that a copy or launch may write: a [`DeviceBuffer`] borrowed mutably, or
/// a [`DeviceViewMut`].
pub trait DeviceSliceMut<T: Pod>: DeviceSlice<T> {}

/// An allocation of `len` elements of `T` in a context's device memory (cudarc's
/// `CudaSlice<T>`). `Send + Sync`; not `Clone` (it owns the memory). Dropping it frees the
/// memory in stream order: work enqueued before the drop still sees it.
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig::default())?;
/// let ctx = rt.device_context(0)?;
/// let stream = ctx.stream()?;
/// let mut buf = ctx.alloc::<f32>(8)?;
/// stream.memcpy_htod(&[1.0f32; 8], &mut buf)?;
/// let mut tail = buf.slice_mut(4..)?;
/// stream.memcpy_htod(&[5.0f32; 4], &mut tail)?;
/// assert_eq!(stream.clone_dtoh(&buf)?, [1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0]);
/// assert!(buf.slice(4..9).is_err(), "slices are bounds-checked");
/// # Ok::<(), NpuError>(())
/// ```
///
/// The element type is checked at compile time:
///
/// ```compile_fail
/// use npusim_engine::prelude::*;
/// fn f(ctx: &NpuContext, stream: &NpuStream) -> NpuResult<()> {
///     let mut halves = ctx.alloc::<u16>(4)?;
///     let floats = ctx.alloc::<f32>(4)?;
///     stream.memcpy_dtod(&floats, &mut halves) // f32 where u16 is expected
/// }
/// ```
///
/// and a buffer cannot be used once it has moved (into a drop, say):
///
/// ```compile_fail
/// use npusim_engine::prelude::*;
/// fn f(ctx: &NpuContext, stream: &NpuStream) -> NpuResult<()> {
///     let mut buf = ctx.alloc::<f32>(4)?;
///     drop(buf);
///     stream.memcpy_htod(&[1.0f32; 4], &mut buf)
/// }
/// ```
pub struct DeviceBuffer<T: Pod> {
    ctx: NpuContext,
    ptr: DevicePtr,
    len: usize,
    epoch: u64,
    _t: PhantomData<T>,
}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>({} x {} at {})",
            std::any::type_name::<T>(),
            self.len,
            std::mem::size_of::<T>(),
            self.ptr
        )
    }
}

impl<T: Pod> DeviceBuffer<T> {
    pub(crate) fn wrap(ctx: NpuContext, ptr: DevicePtr, len: usize, epoch: u64) -> Self {
        Self {
            ctx,
            ptr,
            len,
            epoch,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements (never: allocations are nonempty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> u64 {
        bytes_of::<T>(self.len)
    }

    /// The device address of the first element. A raw address: it does not keep the memory
    /// alive; use it with the ACL-style methods while the buffer lives.
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &NpuContext {
        &self.ctx
    }

    /// The device's index.
    pub fn device(&self) -> u32 {
        self.ctx.device()
    }

    /// Elements `range` as a read-only view; an error when the range is outside the buffer.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> NpuResult<DeviceView<'_, T>> {
        let (offset, len) = resolve(range, self.len)?;
        Ok(DeviceView {
            buf: self,
            offset,
            len,
        })
    }

    /// Elements `range` as a writable view; an error when the range is outside the buffer.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> NpuResult<DeviceViewMut<'_, T>> {
        let (offset, len) = resolve(range, self.len)?;
        Ok(DeviceViewMut {
            buf: self,
            offset,
            len,
        })
    }

    /// Gives up ownership: the memory is no longer freed on drop; free it with
    /// [`Memory::free`](crate::Memory::free) (in its context) or turn it back into a buffer
    /// with [`DeviceBuffer::from_raw`]. Returns the address and the length in elements.
    pub fn into_raw(self) -> (DevicePtr, usize) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; the context handle is moved out once.
        let ctx = unsafe { std::ptr::read(&this.ctx) };
        drop(ctx);
        (this.ptr, this.len)
    }

    /// Takes ownership of `len` elements at `ptr`, the start of a live allocation of `ctx`
    /// (from [`Memory::malloc`](crate::Memory::malloc) in that context, or
    /// [`DeviceBuffer::into_raw`]). Checked: `ptr` must start a live allocation of the
    /// context, not being freed, of at least `len` elements.
    ///
    /// # Safety
    ///
    /// The allocation must have no other owner: nothing else may free it (a second
    /// `from_raw` of the same pointer, or a `free` through the raw API), or this buffer would
    /// name memory that has been handed to someone else.
    pub unsafe fn from_raw(ctx: &NpuContext, ptr: DevicePtr, len: usize) -> NpuResult<Self> {
        let bytes = (len as u64)
            .checked_mul(std::mem::size_of::<T>() as u64)
            .filter(|&b| b > 0)
            .ok_or_else(|| NpuError::InvalidParam(format!("{len} elements")))?;
        {
            let g = ctx.runtime().lock();
            let c = g
                .world
                .get::<npusim_components::ContextState>(ctx.entity())
                .ok_or_else(|| NpuError::Destroyed(format!("{:?}", ctx)))?;
            let memory = &g
                .world
                .get::<npusim_components::DeviceState>(c.device)
                .expect("device")
                .memory;
            let block = memory.check_free(ptr.0, ctx.entity())?;
            if block.size < bytes {
                return Err(NpuError::OutOfBounds {
                    ptr: ptr.0,
                    len: bytes,
                    base: block.base,
                    size: block.size,
                });
            }
        }
        let epoch = ctx
            .epoch()
            .ok_or_else(|| NpuError::Destroyed(format!("{:?}", ctx)))?;
        Ok(Self::wrap(ctx.clone(), ptr, len, epoch))
    }

    fn check(&self) -> NpuResult<()> {
        match self.ctx.epoch() {
            Some(e) if e == self.epoch => Ok(()),
            Some(_) => Err(NpuError::Destroyed(format!(
                "{self:?}: its context's memory was released by a fault"
            ))),
            None => Err(NpuError::Destroyed(format!(
                "{self:?}: its context was destroyed"
            ))),
        }
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.check().is_err() {
            return; // the memory went with its context, or with a fault
        }
        if let Err(e) = self.ctx.with(|rt| rt.memory().free_behind_uses(self.ptr)) {
            // A faulted context (its memory already released) is nothing to report.
            if self
                .ctx
                .runtime()
                .context_error_of(self.ctx.entity())
                .is_none()
            {
                self.ctx.runtime().keep_drop_error(e);
            }
        }
    }
}

impl<T: Pod> sealed::Sealed for DeviceBuffer<T> {}

impl<T: Pod> DeviceSlice<T> for DeviceBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }
    fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }
    fn context(&self) -> &NpuContext {
        &self.ctx
    }
    fn check_live(&self) -> NpuResult<()> {
        self.check()
    }
    fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl<T: Pod> DeviceSliceMut<T> for DeviceBuffer<T> {}

/// A read-only view of elements of a [`DeviceBuffer`] (from [`DeviceBuffer::slice`]). It
/// borrows the buffer, so the buffer cannot be dropped or written while it lives.
#[derive(Clone, Copy)]
pub struct DeviceView<'a, T: Pod> {
    buf: &'a DeviceBuffer<T>,
    offset: usize,
    len: usize,
}

impl<T: Pod> std::fmt::Debug for DeviceView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceView({}..{} of {:?})",
            self.offset,
            self.offset + self.len,
            self.buf
        )
    }
}

impl<'a, T: Pod> DeviceView<'a, T> {
    /// Elements `range` of this view; an error when the range is outside it.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> NpuResult<DeviceView<'a, T>> {
        let (offset, len) = resolve(range, self.len)?;
        Ok(DeviceView {
            buf: self.buf,
            offset: self.offset + offset,
            len,
        })
    }
}

/// A view's [`DeviceSlice`]: its elements `offset..offset + len` of its buffer (the same for
/// read-only and writable views).
macro_rules! view_slice {
    ($view:ident) => {
        impl<T: Pod> sealed::Sealed for $view<'_, T> {}

        impl<T: Pod> DeviceSlice<T> for $view<'_, T> {
            fn len(&self) -> usize {
                self.len
            }
            fn device_ptr(&self) -> DevicePtr {
                self.buf.ptr.offset(bytes_of::<T>(self.offset))
            }
            fn context(&self) -> &NpuContext {
                &self.buf.ctx
            }
            fn check_live(&self) -> NpuResult<()> {
                self.buf.check()
            }
            fn epoch(&self) -> u64 {
                self.buf.epoch
            }
        }
    };
}

view_slice!(DeviceView);

/// A writable view of elements of a [`DeviceBuffer`] (from [`DeviceBuffer::slice_mut`]). It
/// borrows the buffer mutably, so nothing else uses the buffer while it lives.
pub struct DeviceViewMut<'a, T: Pod> {
    buf: &'a mut DeviceBuffer<T>,
    offset: usize,
    len: usize,
}

impl<T: Pod> std::fmt::Debug for DeviceViewMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceViewMut({}..{} of {:?})",
            self.offset,
            self.offset + self.len,
            self.buf
        )
    }
}

impl<T: Pod> DeviceViewMut<'_, T> {
    /// Elements `range` of this view, writable; an error when the range is outside it.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> NpuResult<DeviceViewMut<'_, T>> {
        let (offset, len) = resolve(range, self.len)?;
        Ok(DeviceViewMut {
            offset: self.offset + offset,
            buf: self.buf,
            len,
        })
    }
}

view_slice!(DeviceViewMut);

impl<T: Pod> DeviceSliceMut<T> for DeviceViewMut<'_, T> {}

/// `len` elements of `T` in pinned host memory ([`NpuContext::alloc_host`]), the source or
/// destination of asynchronous copies ([`NpuStream::memcpy_htod_pinned`],
/// [`NpuStream::memcpy_dtoh_pinned`]). Queued copies share the memory, so dropping the buffer
/// while one is queued is safe: the memory goes when the last of them has run.
///
/// [`NpuStream::memcpy_htod_pinned`]: super::NpuStream::memcpy_htod_pinned
/// [`NpuStream::memcpy_dtoh_pinned`]: super::NpuStream::memcpy_dtoh_pinned
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig::default())?;
/// let ctx = rt.device_context(0)?;
/// let host = ctx.alloc_host::<u32>(4)?;
/// host.write(&[1, 2, 3, 4])?;
/// assert_eq!(host.read()?, [1, 2, 3, 4]);
/// # Ok::<(), NpuError>(())
/// ```
pub struct PinnedBuffer<T: Pod> {
    raw: HostBuffer,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PinnedBuffer<{}>({})",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

impl<T: Pod> PinnedBuffer<T> {
    pub(crate) fn wrap(raw: HostBuffer, len: usize) -> Self {
        Self {
            raw,
            len,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> u64 {
        bytes_of::<T>(self.len)
    }

    /// Copies `values` into the start of the buffer (at most [`PinnedBuffer::len`] of them).
    /// With the stream sanitizer on, writing bytes a queued copy still reads is reported.
    #[track_caller]
    pub fn write(&self, values: &[T]) -> NpuResult<()> {
        if values.len() > self.len {
            return Err(NpuError::InvalidParam(format!(
                "{} elements into a pinned buffer of {}",
                values.len(),
                self.len
            )));
        }
        let range = (0, bytes_of::<T>(values.len()));
        crate::sanitizer::host_accessed(&self.raw, range, true, Location::caller())?;
        self.raw.write(values)
    }

    /// The buffer's elements, copied out. With the stream sanitizer on, reading bytes a
    /// queued copy still writes (the host not yet ordered after it) is reported.
    #[track_caller]
    pub fn read(&self) -> NpuResult<Vec<T>> {
        let range = (0, self.byte_len());
        crate::sanitizer::host_accessed(&self.raw, range, false, Location::caller())?;
        self.raw.read()
    }

    /// The untyped buffer, for the ACL-style methods (`memcpy_htod_async`, ...).
    pub fn as_raw(&self) -> &HostBuffer {
        &self.raw
    }

    /// The untyped buffer.
    pub fn into_raw(self) -> HostBuffer {
        self.raw
    }

    /// A typed view of a pinned buffer from [`Memory::malloc_host`](crate::Memory::malloc_host):
    /// an error when it is not pinned, was freed, or is not a whole number of `T`.
    pub fn from_raw(raw: HostBuffer) -> NpuResult<Self> {
        if !raw.is_pinned() {
            return Err(NpuError::InvalidMemoryType(
                "not memory from malloc_host".into(),
            ));
        }
        let bytes = raw.bytes()?.len();
        let size = std::mem::size_of::<T>().max(1);
        if bytes % size != 0 {
            return Err(NpuError::InvalidParam(format!(
                "a host buffer of {bytes} bytes is not a whole number of {size}-byte values"
            )));
        }
        Ok(Self::wrap(raw, bytes / size))
    }
}
