//! The data of the npusim world: components on device, context, stream, task, event and memory
//! entities, the resources the frame shares, and the typed handles users hold. Small methods only;
//! the logic that changes this data lives in `npusim-systems` and `npusim-engine`.
#![warn(missing_docs)]

pub mod access;
pub mod binary;
pub mod collective;
pub mod context;
pub mod descriptor;
pub mod device;
pub mod doorbell;
pub mod error;
pub mod event;
pub mod handle;
pub mod host;
pub mod kernel;
pub mod limits;
pub mod memory;
pub mod mode;
pub mod resources;
pub mod sanitizer;
pub mod shape;
pub mod stream;
pub mod task;
pub mod time;

pub use access::{Access, AccessMode, AccessSet};
pub use collective::{
    CollectiveCall, CollectiveKind, CommConfig, CommState, DataType, Interconnect, LinkTimeline,
    ReduceOp, Rendezvous,
};
pub use context::{ContextState, ContextStatus, FailureMode};
pub use device::{DeviceState, Units};
pub use error::{NpuError, NpuResult};
pub use event::EventState;
pub use handle::{Binary, Context, DevicePtr, Event, Kernel, Stream};
pub use host::HostBuffer;
pub use kernel::{
    Arg, KernelBody, KernelCtx, KernelEntry, KernelFault, KernelRegistry, NativeKernel, Param,
};
pub use memory::{BlockInfo, DeviceMemory};
pub use mode::ExecutionMode;
pub use resources::{
    AbortRequests, Devices, FaultRecord, Faults, Finished, FrameStats, PendingCallbacks,
    ReadyQueue, ReleasedCallback, Running, SimClock, TaskPool, TaskRecord, Timeline,
    WorldResources,
};
pub use sanitizer::{ReportSide, Sanitizer, SanitizerReport};
pub use shape::{
    OpDef, OpRegistry, OpShapes, OpTiling, Shape, ShapeBuffer, ShapeHandle, ShapeStats, Tiling,
    TilingLog, TilingRecord,
};
pub use stream::{StreamKind, StreamState};
pub use task::{
    CopyDir, CopyView, EventView, MemsetView, NewTask, Task, TaskDescriptor, TaskExtra, TaskKind,
    TaskStatus,
};
pub use time::SimTime;
