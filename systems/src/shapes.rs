//! Shape propagation (DESIGN §3, stage 3): an op launch that became ready reads its input shapes
//! — static ones from its descriptor, dynamic ones from its context's shape buffer in device
//! memory, where their producers wrote them — checks that every tensor fits its buffer, runs
//! the op's shape inference, and writes the output shapes it can infer back to the buffer.
//! Nothing here goes through the host: a consumer is ready only once its producer completed
//! (stream order or an event), so the producer's shape is already in device memory.
//!
//! A launch whose shapes are unusable (a negative dim, a shape past its buffer, a slot nobody
//! wrote) does not run: its `error` is set and its op launch marked faulted, and it fails with
//! that error at its end, through the frame's usual completion.
//!
//! Once resolved, a launch's access set becomes exact: each input's shape in bytes, read; each
//! output's shape (a data-dependent one: its whole buffer), written.

use bevy_ecs::prelude::*;

use bytemuck::Zeroable;
use npusim_components::access::Access;
use npusim_components::memory::DeviceMemory;
use npusim_components::resources::ReadyQueue;
use npusim_components::shape::{
    OpDef, OpLaunch, OpRegistry, OpState, ResolvedLaunch, ResolvedShapes, Shape, ShapeBuffer,
    ShapeSlot, ShapeStats, TensorSource,
};
use npusim_components::task::MAX_TENSORS;
use npusim_components::{DeviceState, NpuError, Task, TaskDescriptor, TaskKind, TaskStatus};

/// Resolves the shapes of every ready op launch not resolved yet.
pub fn propagate_shapes(
    If(ready): If<Res<ReadyQueue>>,
    mut tasks: Query<&mut Task>,
    buffers: Query<&ShapeBuffer>,
    mut devices: Query<&mut DeviceState>,
    If(ops): If<Res<OpRegistry>>,
    If(mut resolved): If<ResMut<ResolvedShapes>>,
    // Counters only: without them (an embedder removed them) the stage runs uncounted.
    mut stats: Option<ResMut<ShapeStats>>,
) {
    crate::zone!("npusim::shape_propagation");
    let mut uncounted = ShapeStats::default();
    let stats = stats.as_deref_mut().unwrap_or(&mut uncounted);
    for &(_, e) in &ready.tasks {
        let Ok(mut task) = tasks.get_mut(e) else {
            continue;
        };
        if task.status != TaskStatus::Ready
            || task.kind() != TaskKind::Kernel
            || task
                .extra
                .op()
                .is_none_or(|l| l.state != OpState::Submitted)
        {
            continue;
        }
        let Some(op) = ops.resolve(task.desc.kernel_slot()) else {
            continue;
        };
        let Ok(mut device) = devices.get_mut(task.device) else {
            continue;
        };
        let buffer = buffers.get(task.context).ok();
        let context = task.context;
        resolved.launches.push(ResolvedLaunch::EMPTY);
        let launch = resolved.launches.last_mut().expect("just pushed");
        launch.task = e;
        let task = &mut *task;
        let op_launch = task.extra.op_mut().expect("checked");
        match resolve_launch(
            &task.desc,
            op_launch,
            op,
            buffer,
            &mut device.memory,
            context,
            stats,
            launch,
        ) {
            Ok(()) => {
                op_launch.state = OpState::Resolved;
                stats.launches_resolved += 1;
                exact_access(task, op, launch);
            }
            Err(err) => {
                resolved.launches.pop();
                stats.shape_faults += 1;
                reject(task, err);
            }
        }
    }
}

/// Marks an op launch as rejected by a shape stage: it will not run, and fails with `err` at its
/// end (holding one core for the launch overhead).
pub(crate) fn reject(task: &mut Task, err: NpuError) {
    if let Some(op) = task.extra.op_mut() {
        op.state = OpState::Faulted;
        op.cost = Default::default();
    }
    task.desc.block_dim = 1;
    task.error = Some(Box::new(err));
}

/// The exact access set of a resolved launch: inputs read as far as their shapes reach,
/// outputs written as far as theirs (a data-dependent output: its whole buffer).
fn exact_access(task: &mut Task, op: &OpDef, launch: &ResolvedLaunch) {
    let n_in = launch.n_in as usize;
    let n = n_in + launch.n_out as usize;
    let mut addrs = [0u64; MAX_TENSORS];
    for (a, &w) in addrs.iter_mut().zip(task.desc.arg_words()) {
        *a = w;
    }
    task.access.clear();
    for (i, &addr) in addrs.iter().enumerate().take(n) {
        let Some(spec) = op.tensor(i) else { continue };
        let bytes = if spec.data_dependent {
            launch.capacities[i]
        } else {
            launch.shapes[i].bytes(spec.elem_bytes as u64).unwrap_or(0)
        };
        let access = if i < n_in {
            Access::read(addr, bytes)
        } else {
            Access::write(addr, bytes)
        };
        task.access.push(access);
    }
}

/// Bytes from `ptr` to the end of its allocation in `context`, or why there are none.
fn capacity(
    memory: &DeviceMemory,
    ptr: u64,
    context: Entity,
    op: &OpDef,
    i: usize,
) -> Result<u64, NpuError> {
    memory
        .block_containing(ptr, context)
        .map(|b| b.base + b.size - ptr)
        .ok_or_else(|| NpuError::AicoreException {
            kernel: op.name.clone(),
            detail: format!(
                "{} at {ptr:#x} is not inside a live allocation of its context",
                op.tensor_name(i)
            ),
        })
}

fn exceeds(op: &OpDef, i: usize, shape: &Shape, needed: Option<u64>, cap: u64) -> NpuError {
    NpuError::ShapeExceedsBuffer {
        op: op.name.clone(),
        tensor: op.tensor_name(i).to_string(),
        shape: shape.to_string(),
        needed: needed.unwrap_or(u64::MAX),
        capacity: cap,
    }
}

/// Resolves one launch into `launch`: input shapes from the descriptor and the shape buffer,
/// their buffers checked, output shapes inferred, checked and written to their slots. Public
/// so benches and embedders can run the stage's core on a descriptor of their own.
#[allow(clippy::too_many_arguments)]
pub fn resolve_launch(
    desc: &TaskDescriptor,
    op_launch: &OpLaunch,
    op: &OpDef,
    buffer: Option<&ShapeBuffer>,
    memory: &mut DeviceMemory,
    context: Entity,
    stats: &mut ShapeStats,
    launch: &mut ResolvedLaunch,
) -> Result<(), NpuError> {
    let (n_in, n_out) = (op_launch.n_in as usize, op_launch.n_out as usize);
    let tensors = desc.arg_words();
    if tensors.len() < n_in + n_out {
        return Err(NpuError::InvalidShape(format!(
            "{}: launch has {} argument words for {} tensors",
            op.name,
            tensors.len(),
            n_in + n_out
        )));
    }
    let n = n_in + n_out;
    if n_in != op.inputs.len() || n_out != op.outputs.len() || n > MAX_TENSORS {
        return Err(NpuError::InvalidShape(format!(
            "{}: launch describes {n_in} inputs and {n_out} outputs; the op has {} and {}",
            op.name,
            op.inputs.len(),
            op.outputs.len()
        )));
    }
    launch.n_in = n_in as u8;
    launch.n_out = n_out as u8;
    launch.out_slot = 0;
    let slot_addr = |slot: u32, i: usize| -> Result<u64, NpuError> {
        buffer.and_then(|b| b.slot_addr(slot)).ok_or_else(|| {
            NpuError::InvalidShape(format!(
                "{}: {} names shape slot {slot}, but its context has no such slot",
                op.name,
                op.tensor_name(i)
            ))
        })
    };
    for (i, spec) in op.inputs.iter().enumerate() {
        launch.capacities[i] = capacity(memory, tensors[i], context, op, i)?;
        let source = op_launch.tensor(i);
        let shape = if let TensorSource::Slot(slot) = source {
            let addr = slot_addr(slot, i)?;
            let mut raw = ShapeSlot::zeroed();
            memory
                .read(addr, bytemuck::bytes_of_mut(&mut raw), context)
                .map_err(|f| {
                    NpuError::InvalidShape(format!(
                        "{}: shape buffer of {} is gone ({f})",
                        op.name, spec.name
                    ))
                })?;
            stats.dynamic_inputs_read += 1;
            raw.decode().map_err(|why| {
                NpuError::InvalidShape(format!(
                    "{}: the shape of input {} (slot {slot}) {why}",
                    op.name, spec.name
                ))
            })?
        } else {
            static_shape(source, op, i)?
        };
        let needed = shape.bytes(spec.elem_bytes as u64);
        if needed.is_none_or(|b| b > launch.capacities[i]) {
            return Err(exceeds(op, i, &shape, needed, launch.capacities[i]));
        }
        launch.shapes[i] = shape;
    }
    let (inputs, outputs) = launch.shapes.split_at_mut(n_in);
    (op.infer)(inputs, op_launch.attrs(desc), &mut outputs[..n_out])
        .map_err(|m| NpuError::InvalidShape(format!("{}: {m}", op.name)))?;
    for (j, spec) in op.outputs.iter().enumerate() {
        let i = n_in + j;
        let shape = launch.shapes[i];
        launch.capacities[i] = capacity(memory, tensors[i], context, op, i)?;
        let source = op_launch.tensor(i);
        if let TensorSource::Static(declared) = source
            && declared != shape
        {
            return Err(NpuError::InvalidShape(format!(
                "{}: output {} was declared {declared} but its inferred shape is {shape}",
                op.name, spec.name
            )));
        }
        if !spec.data_dependent {
            let needed = shape.bytes(spec.elem_bytes as u64);
            if needed.is_none_or(|b| b > launch.capacities[i]) {
                return Err(exceeds(op, i, &shape, needed, launch.capacities[i]));
            }
        }
        if let TensorSource::Slot(slot) = source {
            let addr = slot_addr(slot, i)?;
            // A data-dependent output's slot says "pending" until its kernel publishes the
            // actual shape, so a consumer can never read last batch's shape by mistake.
            let value = if spec.data_dependent {
                ShapeSlot::zeroed()
            } else {
                stats.outputs_written += 1;
                ShapeSlot::written(&shape)
            };
            memory
                .write(addr, bytemuck::bytes_of(&value), context)
                .map_err(|f| {
                    NpuError::InvalidShape(format!(
                        "{}: shape buffer of {} is gone ({f})",
                        op.name, spec.name
                    ))
                })?;
            if j == 0 && spec.data_dependent {
                launch.out_slot = addr;
            }
        }
    }
    Ok(())
}

fn static_shape(source: TensorSource, op: &OpDef, i: usize) -> Result<Shape, NpuError> {
    match source {
        TensorSource::Static(shape) => Ok(shape),
        _ => Err(NpuError::InvalidShape(format!(
            "{}: {} has neither a static shape nor a shape handle",
            op.name,
            op.tensor_name(i)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::shape::{SLOT_BYTES, ShapeSlot};
    use npusim_components::{Kernel, TaskExtra};

    fn shape(dims: &[u64]) -> Shape {
        Shape::new(dims).unwrap()
    }

    /// An `add` launch on `x, y, z` with these tensor sources (inputs, then the output).
    fn add_launch(
        s: &mut Setup,
        k: Kernel,
        tensors: [u64; 3],
        sources: [TensorSource; 3],
    ) -> Entity {
        let mut op = OpLaunch::new(2, 1);
        for (i, source) in sources.into_iter().enumerate() {
            op.set_tensor(i, source);
        }
        let t = enqueue_with(
            &mut s.world,
            s.stream,
            launch(k, 1, &tensors),
            TaskExtra::Op(Box::new(op)),
            npusim_components::SimTime::ZERO,
        );
        make_ready(&mut s.world, t);
        t
    }

    fn op_state(world: &World, t: Entity) -> OpState {
        task(world, t).extra.op().unwrap().state
    }

    fn buffers(s: &mut Setup, bytes: [u64; 3]) -> [u64; 3] {
        bytes.map(|b| alloc(&mut s.world, s.device, s.ctx, b))
    }

    #[test]
    fn a_ready_op_launch_infers_its_output_and_gets_an_exact_access_set() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let [x, y, z] = buffers(&mut s, [4096; 3]);
        let t = add_launch(
            &mut s,
            k,
            [x, y, z],
            [
                TensorSource::Static(shape(&[4, 8])),
                TensorSource::Static(shape(&[4, 8])),
                TensorSource::Inferred,
            ],
        );
        run(&mut s.world, propagate_shapes);

        assert_eq!(op_state(&s.world, t), OpState::Resolved);
        let resolved = &s.world.resource::<ResolvedShapes>().launches;
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].task, t);
        assert_eq!(resolved[0].shapes[2], shape(&[4, 8]));
        assert_eq!(resolved[0].capacities[..3], [4096; 3]);
        let access = &task(&s.world, t).access;
        assert!(access.exact());
        assert_eq!(
            access.ranges(),
            &[
                Access::read(x, 128),
                Access::read(y, 128),
                Access::write(z, 128)
            ]
        );
        assert_eq!(s.world.resource::<ShapeStats>().launches_resolved, 1);
    }

    #[test]
    fn dynamic_shapes_are_read_from_and_written_to_the_contexts_shape_buffer() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let base = alloc(&mut s.world, s.device, s.ctx, ShapeBuffer::BYTES);
        s.world.entity_mut(s.ctx).insert(ShapeBuffer::new(base));
        let slot = |i: u64| base + i * SLOT_BYTES;
        // A producer wrote x's shape into slot 3.
        let produced = ShapeSlot::written(&shape(&[2, 3]));
        s.world
            .get_mut::<DeviceState>(s.device)
            .unwrap()
            .memory
            .write(slot(3), bytemuck::bytes_of(&produced), s.ctx)
            .unwrap();
        let [x, y, z] = buffers(&mut s, [64; 3]);
        let t = add_launch(
            &mut s,
            k,
            [x, y, z],
            [
                TensorSource::Slot(3),
                TensorSource::Static(shape(&[2, 3])),
                TensorSource::Slot(4),
            ],
        );
        run(&mut s.world, propagate_shapes);

        assert_eq!(op_state(&s.world, t), OpState::Resolved);
        let raw = read(&mut s.world, s.device, s.ctx, slot(4), SLOT_BYTES as usize);
        let written: ShapeSlot = bytemuck::pod_read_unaligned(&raw);
        assert_eq!(
            written.decode(),
            Ok(shape(&[2, 3])),
            "z's shape for its consumers"
        );
        let stats = s.world.resource::<ShapeStats>();
        assert_eq!((stats.dynamic_inputs_read, stats.outputs_written), (1, 1));
    }

    #[test]
    fn a_slot_nobody_wrote_rejects_the_launch() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let base = alloc(&mut s.world, s.device, s.ctx, ShapeBuffer::BYTES);
        s.world.entity_mut(s.ctx).insert(ShapeBuffer::new(base));
        let [x, y, z] = buffers(&mut s, [64; 3]);
        let t = add_launch(
            &mut s,
            k,
            [x, y, z],
            [
                TensorSource::Slot(9),
                TensorSource::Static(shape(&[2])),
                TensorSource::Inferred,
            ],
        );
        run(&mut s.world, propagate_shapes);

        assert_eq!(op_state(&s.world, t), OpState::Faulted);
        assert!(matches!(
            task(&s.world, t).error.as_deref(),
            Some(NpuError::InvalidShape(m)) if m.contains("never written")
        ));
    }

    #[test]
    fn a_shape_past_its_buffer_rejects_the_launch_which_then_holds_one_block() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        // 4x8 f32 is 128 bytes; y holds 64.
        let [x, y, z] = buffers(&mut s, [4096, 64, 4096]);
        let t = add_launch(
            &mut s,
            k,
            [x, y, z],
            [
                TensorSource::Static(shape(&[4, 8])),
                TensorSource::Static(shape(&[4, 8])),
                TensorSource::Inferred,
            ],
        );
        s.world.get_mut::<Task>(t).unwrap().desc.block_dim = 4;
        run(&mut s.world, propagate_shapes);

        let task = task(&s.world, t);
        assert!(matches!(
            task.error.as_deref(),
            Some(NpuError::ShapeExceedsBuffer {
                needed: 128,
                capacity: 64,
                ..
            })
        ));
        assert_eq!(task.extra.op().unwrap().state, OpState::Faulted);
        assert_eq!(task.desc.block_dim, 1);
        assert_eq!(
            task.status,
            TaskStatus::Ready,
            "it still goes through dispatch and fails at its end"
        );
        assert!(s.world.resource::<ResolvedShapes>().launches.is_empty());
        assert_eq!(s.world.resource::<ShapeStats>().shape_faults, 1);
    }

    #[test]
    fn inference_that_refuses_the_inputs_rejects_the_launch() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let [x, y, z] = buffers(&mut s, [4096; 3]);
        let t = add_launch(
            &mut s,
            k,
            [x, y, z],
            [
                TensorSource::Static(shape(&[4, 8])),
                TensorSource::Static(shape(&[8, 4])),
                TensorSource::Inferred,
            ],
        );
        run(&mut s.world, propagate_shapes);
        assert!(matches!(
            task(&s.world, t).error.as_deref(),
            Some(NpuError::InvalidShape(m)) if m.starts_with("add:")
        ));
    }

    #[test]
    fn a_declared_output_shape_that_inference_contradicts_rejects_the_launch() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let [x, y, z] = buffers(&mut s, [4096; 3]);
        let t = add_launch(
            &mut s,
            k,
            [x, y, z],
            [
                TensorSource::Static(shape(&[4, 8])),
                TensorSource::Static(shape(&[4, 8])),
                TensorSource::Static(shape(&[32])),
            ],
        );
        run(&mut s.world, propagate_shapes);
        assert_eq!(op_state(&s.world, t), OpState::Faulted);
    }

    #[test]
    fn launches_not_ready_or_already_resolved_are_left_alone() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let [x, y, z] = buffers(&mut s, [4096; 3]);
        let sources = [
            TensorSource::Static(shape(&[4])),
            TensorSource::Static(shape(&[4])),
            TensorSource::Inferred,
        ];
        let done = add_launch(&mut s, k, [x, y, z], sources);
        s.world
            .get_mut::<Task>(done)
            .unwrap()
            .extra
            .op_mut()
            .unwrap()
            .state = OpState::Resolved;
        let queued = add_launch(&mut s, k, [x, y, z], sources);
        s.world.get_mut::<Task>(queued).unwrap().status = TaskStatus::Queued;
        run(&mut s.world, propagate_shapes);

        assert!(s.world.resource::<ResolvedShapes>().launches.is_empty());
        assert_eq!(op_state(&s.world, queued), OpState::Submitted);
    }
}
