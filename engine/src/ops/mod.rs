//! Ops with dynamic shapes (DESIGN §5): kernels registered with shape inference, a tiling
//! function and a cost function, launched with tensors whose shapes may be known only on the
//! device.
//!
//! Using them, step by step:
//!
//! 1. **Shape handles.** [`Ops::create_shape`](crate::Ops::create_shape) takes a slot in the current context's shape
//!    buffer (device memory). A handle stands for a shape that a producer will write on the
//!    device — the count of `nonzero`, the boxes kept by NMS.
//! 2. **Launch.** [`LaunchOp`] takes the op, its input and output tensors
//!    ([`TensorArg`]: a device pointer plus a static shape, a shape handle, or — for outputs —
//!    nothing) and its attributes. Buffers are sized for an upper bound; the op processes the
//!    actual shape. The call only rings the doorbell: nothing about shapes happens yet, except
//!    that static dims are checked (negative, overflowing or past their buffer is an `Err`).
//! 3. **Shape propagation** (frame stage 3), when the launch is ready: input shapes come from
//!    the descriptor or the shape buffer; inferred output shapes go back to the buffer.
//! 4. **Tiling** (stage 4): the op's tiling function picks block dim, tile sizes that fit a
//!    core's unified buffer / L1, a tiling key and a workspace size, from the actual shapes.
//! 5. **Execution** (hardware tick): the kernel reads its tiling words; a data-dependent
//!    producer writes its actual output shape into its slot, for the next consumer.
//!
//! The host never reads a shape to keep this going. [`Ops::read_shape`](crate::Ops::read_shape) exists for the end
//! of a pipeline (or debugging); each call is counted in [`ShapeStats::host_shape_reads`].
//!
//! ```
//! use npusim_engine::prelude::*;
//!
//! let rt = Runtime::new(RuntimeConfig::default())?;
//! let s = rt.streams().create()?;
//! let x = rt.memory().malloc(4 * 8)?;
//! let idx = rt.memory().malloc(4 * 8)?;
//! rt.memory().memcpy_htod(x, &[0.0f32, 1.5, 0.0, -2.0, 0.0, 0.0, 3.0, 0.0])?;
//! let count = rt.ops().create_shape()?;
//! let nonzero = rt.ops().get("nonzero_f32")?;
//! rt.submit(LaunchOp::new(nonzero, &[TensorArg::new(x, &[8])], &[TensorArg::dynamic(idx, count)], &[], s))?;
//! rt.streams().synchronize(s)?;
//! assert_eq!(rt.ops().read_shape(count)?.dims(), &[3]);
//! # Ok::<(), NpuError>(())
//! ```
//!
//! Built-in ops (tensor element types in brackets; indices are `i32`):
//!
//! | op | inputs → outputs | attributes |
//! |---|---|---|
//! | `sigmoid_f32` | `x` → `y` (same shape) | |
//! | `threshold_f32` | `x` → `y`: `x` where `x > t`, else 0 | `t: f32` |
//! | `nonzero_f32`, `nonzero_i32` | `x` → `indices [k]`, flat indices of nonzero elements (data-dependent) | |
//! | `gather_rows` | `table [r, ...]`, `indices [...]` → `out [indices..., ...]` (4-byte elements; embedding lookup) | |
//! | `nms_f32` | `boxes [n, 4]`, `scores [n]` → `keep [k]`, indices by descending score (data-dependent) | `iou_threshold: f32`, `score_threshold: f32`, `max_outputs: u64` |
//! | `box_area_f32` | `boxes [n, 4]` → `area [n]` | |
//! | `box_scale_f32` | `boxes [n, 4]` → `scaled [n, 4]` | `sx: f32`, `sy: f32` |
//! | `matmul_f32` | `a [m, k]`, `b [k, n]` → `c [m, n]` | |
//! | `softmax_f32` | `x [..., c]` → `y` (softmax over the last dim) | |

mod boxes;
mod elementwise;
mod gather;
mod handles;
mod matmul;
mod nms;
mod nonzero;
pub mod npu;
mod softmax;
pub mod split;

use std::sync::Arc;

use bevy_ecs::prelude::*;
use npusim_components::binary::BinaryCode;
use npusim_components::shape::{
    InferFn, MAX_RANK, OpCostFn, OpDef, OpKernelFn, OpLaunch, OpRegistry, OpTiling, Shape,
    ShapeHandle, TensorSource, TensorSpec, Tiling, TilingFn,
};
use npusim_components::task::{MAX_ARGS, MAX_TENSORS, TaskExtra};
use npusim_components::{
    Arg, ContextState, DevicePtr, DeviceState, Kernel, KernelCtx, KernelFault, KernelRegistry,
    NativeKernel, NpuError, NpuResult, OpShapes, Stream, WorldResources,
};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use crate::launch::Submission;
use crate::runtime::Runtime;

pub use npusim_components::shape::{ShapeStats, TilingLog, TilingRecord};

/// A new op: its signature and its four functions. Register it with
/// [`Ops::register`](crate::Ops::register) (or [`OpBuilder::register`] on registries of your own).
///
/// Arguments of a launch are laid out as: input pointers, output pointers, attributes — so a
/// kernel reads input `i` with `k.ptr(i)` and attribute `j` at `inputs + outputs + j`.
pub struct OpBuilder {
    name: String,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    attrs: Vec<String>,
    infer: Option<Arc<InferFn>>,
    tiling: Option<Arc<TilingFn>>,
    cost: Option<Arc<OpCostFn>>,
    kernel: Option<Arc<OpKernelFn>>,
    binary: Option<Kernel>,
}

impl std::fmt::Debug for OpBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpBuilder({})", self.name)
    }
}

impl OpBuilder {
    /// The op's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An op named `name`, with no tensors yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            attrs: Vec::new(),
            infer: None,
            tiling: None,
            cost: None,
            kernel: None,
            binary: None,
        }
    }

    fn spec(name: &str, elem_bytes: u32, data_dependent: bool) -> TensorSpec {
        TensorSpec {
            name: name.to_string(),
            elem_bytes,
            data_dependent,
        }
    }

    /// Adds an input of `elem_bytes`-byte elements.
    pub fn input(mut self, name: &str, elem_bytes: u32) -> Self {
        self.inputs.push(Self::spec(name, elem_bytes, false));
        self
    }

    /// Adds an output whose shape inference computes exactly.
    pub fn output(mut self, name: &str, elem_bytes: u32) -> Self {
        self.outputs.push(Self::spec(name, elem_bytes, false));
        self
    }

    /// Adds an output whose shape depends on the data: inference gives an upper bound and the
    /// kernel publishes the actual shape ([`npusim_components::shape::publish_shape`]). It must
    /// be the op's first output, and launches must give it a shape handle.
    pub fn data_dependent_output(mut self, name: &str, elem_bytes: u32) -> Self {
        self.outputs.push(Self::spec(name, elem_bytes, true));
        self
    }

    /// Adds an attribute (a scalar argument after the tensors).
    pub fn attr(mut self, name: &str) -> Self {
        self.attrs.push(name.to_string());
        self
    }

    /// Sets shape inference: input shapes and attribute words → output shapes.
    pub fn infer(
        mut self,
        f: impl Fn(&[Shape], &[u64], &mut [Shape]) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.infer = Some(Arc::new(f));
        self
    }

    /// Sets the tiling function: actual shapes and the device → [`Tiling`].
    pub fn tiling(
        mut self,
        f: impl Fn(&OpShapes<'_>, &DeviceConfig) -> Result<Tiling, String> + Send + Sync + 'static,
    ) -> Self {
        self.tiling = Some(Arc::new(f));
        self
    }

    /// Sets the cost function: shapes and tiling → modeled work.
    pub fn cost(
        mut self,
        f: impl Fn(&OpShapes<'_>, &Tiling) -> KernelCost + Send + Sync + 'static,
    ) -> Self {
        self.cost = Some(Arc::new(f));
        self
    }

    /// Sets the kernel body.
    pub fn kernel(
        mut self,
        f: impl Fn(&mut KernelCtx<'_>, &OpTiling<'_>) -> Result<(), KernelFault> + Send + Sync + 'static,
    ) -> Self {
        self.kernel = Some(Arc::new(f));
        self
    }

    /// Sets the kernel body to a function of a loaded binary ([`Binaries::get_function`](crate::Binaries::get_function)): the
    /// op then runs on the AI cores, with its arguments laid out as for a Rust body (inputs,
    /// outputs, attributes) and its tiling function's words at the address in the `npu.tiling`
    /// CSR. Its duration is the cycles the cores count.
    pub fn binary_kernel(mut self, kernel: Kernel) -> Self {
        self.binary = Some(kernel);
        self
    }

    /// Registers the op's kernel in `kernels` and the op in `ops`; returns the kernel id that
    /// launches it.
    pub fn register(self, kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<Kernel> {
        let bad = |why: String| NpuError::InvalidParam(format!("op {:?}: {why}", self.name));
        let code = match self.binary {
            Some(k) => Some(
                kernels
                    .get(k)
                    .ok()
                    .and_then(|k| k.code().cloned())
                    .ok_or_else(|| bad(format!("{k} is not a function of a loaded binary")))?,
            ),
            None => None,
        };
        let body = match (&self.kernel, &code) {
            (Some(b), _) => Some(b.clone()),
            (None, Some(_)) => Some(Arc::new(|_: &mut KernelCtx<'_>, _: &OpTiling<'_>| {
                Err(KernelFault::Trap("a binary op runs on the AI core".into()))
            }) as Arc<OpKernelFn>),
            (None, None) => None,
        };
        let (Some(infer), Some(tiling), Some(cost), Some(body)) = (
            self.infer.clone(),
            self.tiling.clone(),
            self.cost.clone(),
            body,
        ) else {
            return Err(bad(
                "needs shape inference, tiling, cost and a kernel".into()
            ));
        };
        let tensors = self.inputs.len() + self.outputs.len();
        if tensors > MAX_TENSORS {
            return Err(bad(format!("{tensors} tensors; at most {MAX_TENSORS}")));
        }
        if tensors + self.attrs.len() > MAX_ARGS {
            return Err(bad(format!(
                "{tensors} tensors and {} attributes need more than the {MAX_ARGS} argument \
                 words a launch has",
                self.attrs.len(),
            )));
        }
        let all = self.inputs.iter().chain(&self.outputs);
        if let Some(t) = all.clone().find(|t| t.elem_bytes == 0) {
            return Err(bad(format!("tensor {} has 0-byte elements", t.name)));
        }
        if self.outputs.iter().skip(1).any(|t| t.data_dependent) {
            return Err(bad("only the first output may be data-dependent".into()));
        }
        let name = self.name.clone();
        let run = move |k: &mut KernelCtx<'_>| {
            let Some(t) = OpTiling::parse(k.tiling) else {
                return Err(KernelFault::BadArgs(format!(
                    "op {name} ran without shapes or tiling: launch it with \
                     Runtime::submit(LaunchOp) (in a world that keeps the shape and tiling stages' \
                     resources)"
                )));
            };
            body(k, &t)
        };
        // The cost comes from the op launch (priced by the tiling stage), not from the words.
        let native = NativeKernel::new(self.name.clone(), run, |_, _| Default::default());
        let kernel = match code {
            Some(code) => {
                let k = kernels.register_function(code.binary, &self.name, || BinaryCode {
                    program: code.program.clone(),
                    entry: code.entry,
                    binary: code.binary,
                    context: code.context,
                    kind: code.kind,
                });
                kernels.alias(&self.name, k);
                k
            }
            None => kernels.register(native),
        };
        ops.insert(OpDef {
            name: self.name,
            kernel,
            inputs: self.inputs,
            outputs: self.outputs,
            attrs: self.attrs,
            infer,
            tiling,
            cost,
        });
        Ok(kernel)
    }
}

/// A tensor argument of [`LaunchOp`]: where its data is and what its shape is.
#[derive(Clone, Copy, Debug)]
pub struct TensorArg {
    ptr: DevicePtr,
    shape: TensorShape,
}

#[derive(Clone, Copy, Debug)]
enum TensorShape {
    /// Known at submission (`rank` may exceed `MAX_RANK`: refused at launch).
    Static { rank: usize, dims: [i64; MAX_RANK] },
    /// In a shape-buffer slot.
    Dynamic(ShapeHandle),
    /// An output whose shape is inferred and not published.
    Inferred,
}

impl TensorArg {
    /// A tensor at `ptr` whose shape `dims` is known at submission. Negative or overflowing
    /// dims, or a shape past the buffer, make the launch fail.
    pub fn new(ptr: DevicePtr, dims: &[i64]) -> Self {
        let mut d = [0i64; MAX_RANK];
        for (x, y) in d.iter_mut().zip(dims) {
            *x = *y;
        }
        Self {
            ptr,
            shape: TensorShape::Static {
                rank: dims.len(),
                dims: d,
            },
        }
    }

    /// A tensor at `ptr` whose shape is in `shape`'s slot: for an input, written there by its
    /// producer on the device; for an output, written there by this launch.
    pub fn dynamic(ptr: DevicePtr, shape: ShapeHandle) -> Self {
        Self {
            ptr,
            shape: TensorShape::Dynamic(shape),
        }
    }

    /// An output at `ptr` whose shape is inferred on the device and not published.
    pub fn output(ptr: DevicePtr) -> Self {
        Self {
            ptr,
            shape: TensorShape::Inferred,
        }
    }

    /// The device pointer.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Its shape, for the recorder.
    pub(crate) fn record_shape(&self) -> RecordedShape<'_> {
        match &self.shape {
            TensorShape::Static { rank, dims } => {
                RecordedShape::Static(&dims[..(*rank).min(MAX_RANK)])
            }
            TensorShape::Dynamic(h) => RecordedShape::Dynamic(*h),
            TensorShape::Inferred => RecordedShape::Inferred,
        }
    }
}

/// A tensor's shape as a trace records it.
pub(crate) enum RecordedShape<'a> {
    Static(&'a [i64]),
    Dynamic(ShapeHandle),
    Inferred,
}

impl Runtime {
    /// [`Ops::register`](crate::Ops::register), unrecorded (for ops a recorded call of its own registers).
    pub(crate) fn add_op(&self, op: OpBuilder) -> NpuResult<Kernel> {
        with_registries(&mut self.lock().world, |kernels, ops| {
            op.register(kernels, ops)
        })
    }

    /// An op launch, checked (static shapes too) and rung.
    #[track_caller]
    fn enqueue_op(&self, launch: LaunchOp<'_>) -> NpuResult<Submission> {
        let LaunchOp {
            op,
            inputs,
            outputs,
            attrs,
            stream,
        } = launch;
        let mut g = self.lock();
        let (s, ctx) = self.check_stream(&g, stream)?;
        // The launch is built in its box (a retired launch's, from the task pool); a launch
        // its checks refuse gives the box back.
        let (n_in, n_out) = (inputs.len() as u8, outputs.len() as u8);
        let mut launch = match g.task_pool_mut() {
            Some(mut pool) => pool.op_launch(n_in, n_out),
            None => Box::new(OpLaunch::new(n_in, n_out)),
        };
        let mut words: smallvec::SmallVec<[(u64, bool); MAX_ARGS]> = smallvec::SmallVec::new();
        let filled = self.fill_op_launch(
            &g.world,
            ctx,
            op,
            (inputs, outputs, attrs),
            &mut launch,
            &mut words,
        );
        if let Err(e) = filled {
            if let Some(mut pool) = g.task_pool_mut() {
                pool.give_back_op_launch(launch);
            }
            return Err(e);
        }
        let cost = g.costs.launch_ns;
        // Block dim and tiling come from the tiling stage, once the shapes are known.
        let seq = crate::launch::submit_with(&mut g, s, TaskExtra::Op(launch), cost, |d| {
            d.encode_kernel(op.slot(), 1, words.iter().copied(), &[])
        });
        // The name is looked up again for the recorder only (the op was found above).
        if g.recorder.is_some()
            && let Some(name) = g
                .world
                .get_resource::<OpRegistry>()
                .and_then(|ops| ops.get(op))
                .map(|def| def.name.clone())
        {
            g.record(|r, _| r.launch_op(name, inputs, outputs, attrs, s, seq));
        }
        Ok(Submission::new(stream, seq))
    }

    /// Checks an op launch's tensors and attributes (inputs, outputs, attributes) against `op`
    /// in context `ctx`, fills `launch` with its tensors' shape sources and `words` with its
    /// argument words (tensor addresses, then attributes).
    #[inline]
    fn fill_op_launch(
        &self,
        world: &World,
        ctx: Entity,
        op: Kernel,
        (inputs, outputs, attrs): (&[TensorArg], &[TensorArg], &[Arg]),
        launch: &mut OpLaunch,
        words: &mut smallvec::SmallVec<[(u64, bool); MAX_ARGS]>,
    ) -> NpuResult<()> {
        let def = world
            .res::<OpRegistry>()?
            .get(op)
            .ok_or_else(|| NpuError::KernelNotFound(format!("no op has {op}")))?;
        let name = &def.name;
        if inputs.len() != def.inputs.len()
            || outputs.len() != def.outputs.len()
            || attrs.len() != def.attrs.len()
        {
            return Err(NpuError::InvalidParam(format!(
                "{name} takes {} inputs, {} outputs and {} attributes; got {}, {} and {}",
                def.inputs.len(),
                def.outputs.len(),
                def.attrs.len(),
                inputs.len(),
                outputs.len(),
                attrs.len()
            )));
        }
        let device = world.get::<ContextState>(ctx).expect("checked").device;
        let memory = &world.get::<DeviceState>(device).expect("device").memory;
        let n_in = inputs.len();
        let mut buffer_checked = false;
        for (i, t) in inputs.iter().chain(outputs).enumerate() {
            let spec = def.tensor(i).expect("counts checked");
            let is_input = i < n_in;
            if t.ptr.is_null() {
                return Err(NpuError::NullPointer("op tensor"));
            }
            let block = memory
                .block_containing(t.ptr.0, ctx)
                .ok_or(NpuError::InvalidPointer { ptr: t.ptr.0 })?;
            let capacity = block.base + block.size - t.ptr.0;
            words.push((t.ptr.0, false));
            let source = match t.shape {
                TensorShape::Static { rank, dims } => {
                    if spec.data_dependent {
                        return Err(NpuError::InvalidParam(format!(
                            "output {} of {name} depends on the data: give it a shape handle",
                            spec.name
                        )));
                    }
                    if rank > MAX_RANK {
                        return Err(NpuError::InvalidShape(format!(
                            "{} of {name}: rank {rank} exceeds the maximum {MAX_RANK}",
                            spec.name
                        )));
                    }
                    let shape = Shape::from_signed(&dims[..rank]).map_err(|e| match e {
                        NpuError::InvalidShape(m) => {
                            NpuError::InvalidShape(format!("{} of {name}: {m}", spec.name))
                        }
                        other => other,
                    })?;
                    let needed = shape.bytes(spec.elem_bytes as u64);
                    if needed.is_none_or(|b| b > capacity) {
                        return Err(NpuError::InvalidShape(format!(
                            "{} of {name}: shape {shape} needs {} bytes but its buffer holds {capacity}",
                            spec.name,
                            needed.map_or("more than 2^64".to_string(), |b| b.to_string())
                        )));
                    }
                    TensorSource::Static(shape)
                }
                TensorShape::Dynamic(h) => {
                    // The buffer's own liveness is checked once per launch.
                    if !buffer_checked {
                        self.check_shape_handle_in(world, ctx, Some(memory), h)?;
                        buffer_checked = true;
                    } else {
                        self.check_shape_handle_fast(world, ctx, h)?;
                    }
                    TensorSource::Slot(h.slot())
                }
                TensorShape::Inferred => {
                    if is_input {
                        return Err(NpuError::InvalidParam(format!(
                            "input {} of {name} needs a shape (static or a shape handle)",
                            spec.name
                        )));
                    }
                    if spec.data_dependent {
                        return Err(NpuError::InvalidParam(format!(
                            "output {} of {name} depends on the data: give it a shape handle",
                            spec.name
                        )));
                    }
                    TensorSource::Inferred
                }
            };
            launch.set_tensor(i, source);
        }
        words.extend(attrs.iter().map(|a| (a.word(), a.is_float())));
        Ok(())
    }
}

/// An op launch: `op` on `stream` with its `inputs`, `outputs` and `attrs` (in the op's order),
/// for [`Runtime::submit`]. Shapes are resolved and tiling chosen on the device when the
/// launch's dependencies are met; static shapes are checked at submission.
#[derive(Clone, Copy, Debug)]
#[must_use = "an op launch does nothing until it is submitted"]
pub struct LaunchOp<'a> {
    op: Kernel,
    inputs: &'a [TensorArg],
    outputs: &'a [TensorArg],
    attrs: &'a [Arg],
    stream: Stream,
}

impl<'a> LaunchOp<'a> {
    /// `op` with its tensors and attributes, on `stream`.
    pub fn new(
        op: Kernel,
        inputs: &'a [TensorArg],
        outputs: &'a [TensorArg],
        attrs: &'a [Arg],
        stream: Stream,
    ) -> Self {
        Self {
            op,
            inputs,
            outputs,
            attrs,
            stream,
        }
    }
}

impl crate::launch::sealed::Sealed for LaunchOp<'_> {}

impl crate::launch::Command for LaunchOp<'_> {
    #[track_caller]
    fn enqueue(self, rt: &Runtime) -> NpuResult<Submission> {
        rt.enqueue_op(self)
    }
}

/// Ops (kernels with shape inference, tiling and cost functions) and the dynamic shapes their
/// launches read and write.
/// Reached through [`Runtime::ops`].
#[derive(Clone, Copy)]
pub struct Ops<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Ops and the dynamic shapes their launches read and write.
    pub fn ops(&self) -> Ops<'_> {
        Ops { rt: self }
    }
}

impl Ops<'_> {
    /// Registers an op; launches find it by the returned id or with [`Ops::get`](crate::Ops::get).
    pub fn register(&self, op: OpBuilder) -> NpuResult<Kernel> {
        let name = op.name.clone();
        let k = self.rt.add_op(op)?;
        self.rt
            .lock()
            .record(|_, _| crate::record::Call::RegisterOp { name });
        Ok(k)
    }

    /// The op registered as `name`.
    pub fn get(&self, name: &str) -> NpuResult<Kernel> {
        let g = self.rt.lock();
        let k = g.world.res::<KernelRegistry>()?.lookup(name)?;
        g.world
            .res::<OpRegistry>()?
            .get(k)
            .map(|_| k)
            .ok_or_else(|| NpuError::KernelNotFound(format!("{name} (a kernel, but not an op)")))
    }

    /// Names of the registered ops (none if an embedder removed the op registry).
    pub fn names(&self) -> Vec<String> {
        self.rt
            .lock()
            .world
            .get_resource::<OpRegistry>()
            .map_or_else(Vec::new, |ops| ops.names().map(str::to_string).collect())
    }
}

/// Registers every built-in op (the table in the module docs) into `world`'s registries (an
/// error naming the one it lacks).
pub fn register_builtin_ops(world: &mut World) -> NpuResult<()> {
    with_registries(world, register_builtin_ops_into)
}

/// `f` on `world`'s kernel and op registries, or the error naming the one it lacks.
fn with_registries<T>(
    world: &mut World,
    f: impl FnOnce(&mut KernelRegistry, &mut OpRegistry) -> NpuResult<T>,
) -> NpuResult<T> {
    world
        .try_resource_scope(|world, mut ops: Mut<OpRegistry>| {
            f(&mut *world.res_mut::<KernelRegistry>()?, &mut ops)
        })
        .unwrap_or_else(|| Err(NpuError::missing_resource::<OpRegistry>()))
}

/// Registers the built-in ops into registries of your own (embedding npusim's systems in your
/// own world).
pub fn register_builtin_ops_into(
    kernels: &mut KernelRegistry,
    ops: &mut OpRegistry,
) -> NpuResult<()> {
    elementwise::register(kernels, ops)?;
    nonzero::register(kernels, ops)?;
    gather::register(kernels, ops)?;
    nms::register(kernels, ops)?;
    boxes::register(kernels, ops)?;
    matmul::register(kernels, ops)?;
    softmax::register(kernels, ops)
}

/// The error a kernel raises when its data-dependent output does not fit its buffer.
pub(crate) fn exceeds(
    op: &str,
    tensor: &str,
    shape: &Shape,
    elem_bytes: u64,
    capacity: u64,
) -> KernelFault {
    KernelFault::Raised(Box::new(NpuError::ShapeExceedsBuffer {
        op: op.to_string(),
        tensor: tensor.to_string(),
        shape: shape.to_string(),
        needed: shape.bytes(elem_bytes).unwrap_or(u64::MAX),
        capacity,
    }))
}

/// Turns a shape-constructor error into an inference message.
pub(crate) fn msg(e: NpuError) -> String {
    match e {
        NpuError::InvalidShape(m) => m,
        other => other.to_string(),
    }
}
