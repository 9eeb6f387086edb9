//! The npusim runtime API. A host program drives a simulated NPU through [`Runtime`] the way it
//! drives ACL or the CUDA runtime: contexts, streams, device memory, copies, kernel launches,
//! events, host callbacks and synchronization. Submission never blocks; the device advances one
//! frame at a time when the host synchronizes (or calls [`Runtime::step`]).
//!
//! Two ways to drive it. The Rust idiom, in [`safe`]: contexts, streams and events as values,
//! typed device buffers freed in stream order, a launch builder:
//!
//! ```
//! use npusim_engine::prelude::*;
//!
//! let rt = Runtime::new(RuntimeConfig::default())?;
//! let ctx = rt.device_context(0)?;
//! let stream = ctx.stream()?;
//! let n = 1024;
//! let (a, b) = (stream.clone_htod(&vec![1.0f32; n])?, stream.clone_htod(&vec![2.0f32; n])?);
//! let mut c = ctx.alloc::<f32>(n)?;
//! let add = rt.kernel("vector_add_f32")?;
//! stream.launch_builder(&add).arg(&a).arg(&b).arg(&mut c).arg(n).grid(8).launch()?;
//! assert!(stream.clone_dtoh(&c)?.iter().all(|&x| x == 3.0));
//! # Ok::<(), NpuError>(())
//! ```
//!
//! And the ACL-style calls, one per ACL call (the C API sits on them), grouped by concept in
//! services ([`Runtime::memory`], [`Runtime::streams`], [`Runtime::events`] …), with the work a
//! stream runs as typed commands ([`Launch`], [`HostFunc`], [`LaunchOp`], [`Collective`]) given
//! to [`Runtime::submit`]:
//!
//! ```
//! use npusim_engine::prelude::*;
//!
//! let rt = Runtime::new(RuntimeConfig::default())?;
//! let stream = rt.streams().create()?;
//! let n = 1024usize;
//! let mem = rt.memory();
//! let (a, b, c) = (mem.malloc(4 * n as u64)?, mem.malloc(4 * n as u64)?, mem.malloc(4 * n as u64)?);
//! mem.memcpy_htod(a, &vec![1.0f32; n])?;
//! mem.memcpy_htod(b, &vec![2.0f32; n])?;
//! let add = rt.kernel("vector_add_f32")?;
//! rt.submit(Launch::new(add, 8, &[a.into(), b.into(), c.into(), n.into()], stream))?;
//! rt.streams().synchronize(stream)?;
//! let mut out = vec![0.0f32; n];
//! mem.memcpy_dtoh(&mut out, c)?;
//! assert!(out.iter().all(|&x| x == 3.0));
//! # Ok::<(), NpuError>(())
//! ```
#![warn(missing_docs)]

pub mod binary;
pub mod callback;
pub mod collective;
pub mod context;
pub mod event;
pub mod kernels;
pub mod launch;
pub mod limits;
pub mod loader;
pub mod memory;
pub mod notify;
pub mod ops;
pub mod record;
pub mod runtime;
pub mod safe;
pub mod sanitizer;
pub mod stream;
pub mod timed;
pub mod timeline;

pub use collective::{Collective, CollectiveOp, CommBuffer, Communicator, LinkStats};
pub use context::{ExceptionCallback, ExceptionInfo};
/// IEEE half precision (`half::f16`), the element type of `f16` collectives.
pub use half;
pub use launch::{Command, HostFunc, Launch, Submission};
pub use npusim_components as components;
pub use npusim_components::collective::{CommConfig, DataType, ReduceOp};
pub use npusim_components::context::FailureMode;
pub use npusim_components::error::codes;
pub use npusim_components::sanitizer::{ReportSide, SanitizerReport};
pub use npusim_components::shape::{
    OpShapes, OpTiling, Shape, ShapeHandle, ShapeStats, Tiling, TilingRecord,
};
pub use npusim_components::{
    Arg, Binary, Context, DevicePtr, Event, HostBuffer, Kernel, KernelCtx, KernelFault,
    NativeKernel, NpuError, NpuResult, Param, SimTime, Stream, StreamKind, TaskRecord,
};
pub use npusim_device as device;
pub use npusim_device::config::DeviceConfig;
pub use npusim_device::cost::{ComputeUnit, KernelCost};
pub use npusim_device::link::{
    CollectiveAlgorithm, LinkConfig, LinkOverride, Node, Topology, TopologyConfig, TopologyKind,
};
pub use npusim_device::memory::pool::AllocPolicy;
pub use npusim_device::memory::spaces::MemoryStats;
pub use npusim_device::sanitizer::{
    EnqueueSite, HostThread, Operand, ReportKind, SanitizerConfig, SanitizerMode, ShadowStats,
};
pub use npusim_systems as systems;
pub use npusim_systems::NpuSet;
pub use ops::{LaunchOp, OpBuilder, TensorArg};
pub use runtime::{HostCosts, Runtime, RuntimeConfig, RuntimeGuard, Stats};
pub use safe::{
    CommElement, DeviceBuffer, DeviceSlice, DeviceSliceMut, DeviceView, DeviceViewMut, KernelArg,
    LaunchBuilder, Launchable, MemoryInfo, NpuComm, NpuContext, NpuDevice, NpuEvent, NpuFunction,
    NpuModule, NpuStream, PinnedBuffer, Utilisation,
};
pub use stream::StreamConfig;
pub use timeline::HostSpan;
/// The runtime's services, one per concept, each reached through the [`Runtime`] method of
/// its name ([`Runtime::memory`], [`Runtime::streams`] …).
pub use {
    binary::Binaries, collective::Collectives, context::Contexts, event::Events, launch::Kernels,
    limits::Limits, memory::Memory, ops::Ops, sanitizer::StreamSanitizer, stream::Streams,
};

/// The names most programs need.
pub mod prelude {
    pub use crate::{
        Arg, Binary, Collective, ComputeUnit, Context, DeviceConfig, DevicePtr, Event, HostBuffer,
        HostFunc, Kernel, KernelCost, KernelCtx, KernelFault, Launch, LaunchOp, NativeKernel,
        NpuError, NpuResult, NpuSet, OpBuilder, Runtime, RuntimeConfig, Shape, ShapeHandle,
        SimTime, Stream, StreamConfig, Submission, TensorArg, Tiling,
    };
    pub use crate::{
        DeviceBuffer, DeviceSlice, DeviceSliceMut, DeviceView, DeviceViewMut, LaunchBuilder,
        NpuComm, NpuContext, NpuDevice, NpuEvent, NpuFunction, NpuModule, NpuStream, Param,
        PinnedBuffer,
    };
}
