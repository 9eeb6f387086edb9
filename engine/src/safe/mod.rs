//! The Rust idiom over [`Runtime`]: objects that know their context, typed device buffers that
//! free themselves in stream order, methods on streams and events, and a launch builder that
//! checks a kernel's arguments before anything is queued. The raw `Runtime` methods (which
//! mirror ACL one to one, and on which the C API sits) stay as they are; everything here is
//! built on them, so the two can be mixed (see [`DeviceBuffer::into_raw`]).
//!
//! A tour, in the order a program meets the types:
//!
//! 1. [`NpuDevice`] — `rt.device(0)`: its datasheet, limits, free and total memory,
//!    utilisation and contexts. [`NpuContext`] — a device's context (`rt.device_context(0)`,
//!    `dev.context()`). Cheap to clone; every object made from it works in it, whatever context
//!    the calling thread has current.
//! 2. [`DeviceBuffer<T>`] — `ctx.alloc::<T>(n)`. Knows its length and element type; slices
//!    ([`DeviceView`], [`DeviceViewMut`]) are bounds-checked; dropping it frees it in stream
//!    order. [`PinnedBuffer<T>`] is the same for pinned host memory.
//! 3. [`NpuStream`] — `ctx.stream()`. Copies (`memcpy_htod`, `memcpy_dtoh`, `memcpy_dtod`),
//!    launches (`launch_builder`), host callbacks (`launch_host_func`), event records and
//!    waits, `synchronize`.
//! 4. [`LaunchBuilder`] — `stream.launch_builder(&kernel)`, then `.arg(&a).arg(n).grid(8)` and
//!    `.launch()`. It checks the arguments against the kernel's declared parameters, and the
//!    launch carries the exact byte ranges of its buffer arguments as its access set.
//! 5. [`NpuModule`] and [`NpuFunction`] — `ctx.load_module_file(path)?.function("vadd_f32")`: a
//!    loaded kernel binary and its functions, launched like any kernel; a function keeps its
//!    module loaded.
//! 6. [`NpuEvent`] — `ctx.event()`, `stream.record(&e)`, `e.elapsed_since(&start)`.
//! 7. [`NpuComm`] — `NpuComm::from_streams(&streams)` (or `from_devices`): one rank per
//!    stream, with the collectives (`all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`,
//!    `send`, `recv`) on typed buffers.
//!
//! ```
//! use npusim_engine::prelude::*;
//!
//! let rt = Runtime::new(RuntimeConfig::default())?;
//! let ctx = rt.device_context(0)?;
//! let stream = ctx.stream()?;
//! let n = 1024;
//! let a = stream.clone_htod(&vec![1.0f32; n])?;
//! let b = stream.clone_htod(&vec![2.0f32; n])?;
//! let mut c = ctx.alloc::<f32>(n)?;
//! let add = rt.kernel("vector_add_f32")?;
//! stream.launch_builder(&add).arg(&a).arg(&b).arg(&mut c).arg(n).grid(8).launch()?;
//! let out = stream.clone_dtoh(&c)?; // synchronizes the stream
//! assert!(out.iter().all(|&x| x == 3.0));
//! # Ok::<(), NpuError>(())
//! ```
//!
//! # Drop order
//!
//! Every object holds a [`Runtime`] handle, so the runtime lives as long as anything made from
//! it; dropping the program's own `Runtime` first changes nothing. What each drop does:
//!
//! - a [`DeviceBuffer`]: returns at once; the block is released when every task enqueued
//!   before the drop that names it has completed ([`Memory::free`](crate::Memory::free)). A queued kernel that
//!   reads or writes it never sees it reused.
//! - the last clone of an [`NpuStream`] made by [`NpuContext::stream`]: runs the stream's queued
//!   work to completion, then destroys the stream ([`Streams::destroy`](crate::Streams::destroy)). A wait that
//!   can never finish is reported, not waited for. A context's default stream is never
//!   destroyed.
//! - the last clone of an [`NpuEvent`]: waits for its latest record (so waits enqueued on it
//!   keep their meaning), then destroys it.
//! - the last clone of an [`NpuModule`] or of a function taken from it (each holds the
//!   module): returns at once; the binary is unloaded in stream order, once every stream of
//!   its context has run what was enqueued before the drop (a host callback behind each busy
//!   stream's work; at once when none is busy). The function's raw [`Kernel`](crate::Kernel)
//!   handle is stale from then on.
//! - the last clone of an [`NpuComm`]: enqueues the destruction of the rank's handle on its
//!   stream (a host callback; at once when the stream is idle), so the collectives already
//!   enqueued there still run; the communicator goes with its last rank. A buffer a queued
//!   collective uses stays allocated until it has run, as for a kernel.
//! - an [`NpuDevice`]: nothing (it is an index).
//! - the last object made from a context of [`Runtime::new_context`] (its clones, streams,
//!   events, buffers, modules and functions each hold it): destroys the context, as
//!   [`Contexts::destroy`](crate::Contexts::destroy) does. A device's primary context is never destroyed by a
//!   drop.
//! - in a context that faulted (stop-on-failure): buffers find their memory already released
//!   and do nothing; a stream or event reports the context's error (kept, see below) and is
//!   not destroyed: it stays until its context is (for a primary context, as long as the
//!   runtime).
//! - the last handle of the runtime (whatever holds it last): the world goes, with any work
//!   still queued, which never runs.
//!
//! A drop cannot return an error: what goes wrong in one (a stream whose queued work failed,
//! say) is kept and read back with [`Runtime::take_drop_errors`]. A drop that finds its memory
//! already gone (its context destroyed, or its blocks released by a fault) does nothing.

mod buffer;
mod comm;
mod context;
mod device;
mod event;
mod launch_builder;
mod module;
mod stream;

pub use buffer::{
    DeviceBuffer, DeviceSlice, DeviceSliceMut, DeviceView, DeviceViewMut, PinnedBuffer,
};
pub use comm::{CommElement, NpuComm};
pub use context::NpuContext;
pub use device::{MemoryInfo, NpuDevice, Utilisation};
pub use event::NpuEvent;
pub use launch_builder::{KernelArg, LaunchBuilder, Launchable};
pub use module::{NpuFunction, NpuModule};
pub use stream::NpuStream;

use bevy_ecs::resource::Resource;
use npusim_components::NpuError;

use crate::Runtime;

/// Errors raised in drops, kept until [`Runtime::take_drop_errors`].
#[derive(Resource, Default)]
pub(crate) struct DropErrors(Vec<NpuError>);

impl Runtime {
    /// Takes the errors that drops of safe-API objects ran into (a stream whose queued work
    /// failed as the stream was dropped, say), oldest first.
    pub fn take_drop_errors(&self) -> Vec<NpuError> {
        let mut g = self.lock();
        g.world
            .get_resource_mut::<DropErrors>()
            .map(|mut e| std::mem::take(&mut e.0))
            .unwrap_or_default()
    }

    pub(crate) fn keep_drop_error(&self, e: NpuError) {
        let mut g = self.lock();
        g.world
            .get_resource_or_insert_with(DropErrors::default)
            .0
            .push(e);
    }
}
