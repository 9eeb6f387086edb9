//! Builders for the systems' unit tests: a world with npusim's resources and just the entities
//! a test needs (a device on the small preset, its contexts and streams, tasks), assembled the
//! way the runtime assembles its world, so each system can be run alone and its writes read
//! back.

use bevy_ecs::prelude::*;
use bevy_ecs::system::RunSystemOnce;
use npusim_components::resources::{Devices, ReadyQueue, Running};
use npusim_components::task::{NewTask, TaskDescriptor};
use npusim_components::{
    ContextState, DeviceMemory, DeviceState, Kernel, KernelCtx, KernelFault, KernelRegistry,
    NativeKernel, SimTime, StreamKind, StreamState, Task, TaskExtra, TaskStatus, Units,
};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

/// A world with every resource the systems read, and nothing else.
pub(crate) fn world() -> World {
    let mut world = World::new();
    crate::init_resources(&mut world);
    world
}

/// Spawns device `index` on the small preset (all units free), listed in `Devices`.
pub(crate) fn spawn_device(world: &mut World) -> Entity {
    let config = DeviceConfig::small();
    let index = world.resource::<Devices>().entities.len() as u32;
    let device = world
        .spawn(DeviceState {
            index,
            units: Units {
                free_cores: config.ai_cores,
                free_dma: config.dma_engines,
                ..Units::default()
            },
            memory: DeviceMemory::new(config.hbm_bytes).expect("small preset memory"),
            config,
            default_context: Entity::PLACEHOLDER,
            limits: Default::default(),
        })
        .id();
    world.resource_mut::<Devices>().entities.push(device);
    device
}

/// Spawns a context on `device`, with its own address space, and no streams yet.
pub(crate) fn spawn_context(world: &mut World, device: Entity) -> Entity {
    let device_index = world.get::<DeviceState>(device).map_or(0, |d| d.index);
    let ctx = world
        .spawn(ContextState::new(device, device_index, false))
        .id();
    world
        .get_mut::<DeviceState>(device)
        .expect("device")
        .memory
        .create_space(ctx)
        .expect("address space");
    ctx
}

/// Spawns a stream of `ctx` with `priority`; streams are ordered by creation, as the runtime
/// orders them.
pub(crate) fn spawn_stream(world: &mut World, ctx: Entity, priority: i32) -> Entity {
    let order = world.query::<&StreamState>().iter(world).count() as u64;
    let device = world.get::<ContextState>(ctx).expect("context").device;
    let device_index = world.get::<DeviceState>(device).map_or(0, |d| d.index);
    let stream = world
        .spawn(StreamState::new(
            ctx,
            device,
            device_index,
            priority,
            StreamKind::Compute,
            order,
        ))
        .id();
    let mut c = world.get_mut::<ContextState>(ctx).expect("context");
    c.streams.push(stream);
    if c.default_stream == Entity::PLACEHOLDER {
        c.default_stream = stream;
    }
    stream
}

/// A device, a context on it and one stream of priority 0.
pub(crate) struct Setup {
    pub world: World,
    pub device: Entity,
    pub ctx: Entity,
    pub stream: Entity,
}

/// The smallest world a task can run in.
pub(crate) fn setup() -> Setup {
    let mut world = world();
    let device = spawn_device(&mut world);
    let ctx = spawn_context(&mut world, device);
    let stream = spawn_stream(&mut world, ctx, 0);
    Setup {
        world,
        device,
        ctx,
        stream,
    }
}

/// Rings `desc` on `stream`'s doorbell, as an API call does; returns its sequence number.
pub(crate) fn submit(world: &mut World, stream: Entity, desc: TaskDescriptor) -> u64 {
    submit_with(world, stream, desc, TaskExtra::None, SimTime::ZERO)
}

/// [`submit`] with the cold parts and the host time of the call.
pub(crate) fn submit_with(
    world: &mut World,
    stream: Entity,
    desc: TaskDescriptor,
    extra: TaskExtra,
    submit: SimTime,
) -> u64 {
    let mut s = world.get_mut::<StreamState>(stream).expect("stream");
    s.submitted += 1;
    let seq = s.submitted;
    s.doorbell.push(NewTask {
        stream,
        seq,
        submit,
        desc,
        extra,
    });
    seq
}

/// Puts a task straight at the back of `stream`'s queue, as ingest would have (for the
/// systems after ingest); returns its entity.
pub(crate) fn enqueue(world: &mut World, stream: Entity, desc: TaskDescriptor) -> Entity {
    enqueue_with(world, stream, desc, TaskExtra::None, SimTime::ZERO)
}

/// [`enqueue`] with the cold parts and the host time of the call.
pub(crate) fn enqueue_with(
    world: &mut World,
    stream: Entity,
    desc: TaskDescriptor,
    extra: TaskExtra,
    submit: SimTime,
) -> Entity {
    let (context, device, seq) = {
        let mut s = world.get_mut::<StreamState>(stream).expect("stream");
        s.submitted += 1;
        (s.context, s.device, s.submitted)
    };
    let new = NewTask {
        stream,
        seq,
        submit,
        desc,
        extra,
    };
    let task = world.spawn(Task::from_new(new, context, device)).id();
    world
        .get_mut::<StreamState>(stream)
        .expect("stream")
        .queue
        .push_back(task);
    task
}

/// Makes the queued head `task` ready, as dependency resolution does: its dispatch key from its
/// stream, its stream's head active.
pub(crate) fn make_ready(world: &mut World, task: Entity) {
    let (stream, seq) = {
        let mut t = world.get_mut::<Task>(task).expect("task");
        t.status = TaskStatus::Ready;
        (t.stream, t.seq)
    };
    let key = {
        let mut s = world.get_mut::<StreamState>(stream).expect("stream");
        s.head_active = true;
        (s.priority, s.order, seq)
    };
    world.resource_mut::<ReadyQueue>().tasks.push((key, task));
}

/// Puts `task` on its units from `start` until `end`, as dispatch does (taking the units from
/// its device).
pub(crate) fn start_running(
    world: &mut World,
    task: Entity,
    cores: u32,
    dma: u32,
    start: u64,
    end: u64,
) {
    let stream = {
        let mut t = world.get_mut::<Task>(task).expect("task");
        t.status = TaskStatus::Running;
        t.cores = cores;
        t.dma = dma;
        t.start = SimTime(start);
        t.end = SimTime(end);
        t.stream
    };
    let device = {
        let mut s = world.get_mut::<StreamState>(stream).expect("stream");
        s.head_active = true;
        s.device
    };
    {
        let mut d = world.get_mut::<DeviceState>(device).expect("device");
        d.units.free_cores -= cores;
        d.units.free_dma -= dma;
    }
    let mut running = world.resource_mut::<Running>();
    let order = running.next_order;
    running.next_order += 1;
    running
        .heap
        .push(std::cmp::Reverse((SimTime(end), order, task)));
}

/// Registers a native kernel `name` with body `run` and a vector cost of `flops` operations.
pub(crate) fn register_kernel(
    world: &mut World,
    name: &str,
    flops: f64,
    run: impl Fn(&mut KernelCtx<'_>) -> Result<(), KernelFault> + Send + Sync + 'static,
) -> Kernel {
    world
        .resource_mut::<KernelRegistry>()
        .register(NativeKernel::new(name, run, move |_, _| {
            KernelCost::vector(flops, 0.0)
        }))
}

/// A launch of `kernel` with `block_dim` blocks and integer argument words `args`.
pub(crate) fn launch(kernel: Kernel, block_dim: u32, args: &[u64]) -> TaskDescriptor {
    TaskDescriptor::kernel(
        kernel.slot(),
        block_dim,
        args.iter().map(|&w| (w, false)),
        &[],
    )
}

/// Runs `system` once on `world`.
pub(crate) fn run<Out, Marker>(world: &mut World, system: impl IntoSystem<(), Out, Marker>) -> Out {
    world.run_system_once(system).expect("system runs")
}

/// The task `e`.
pub(crate) fn task(world: &World, e: Entity) -> &Task {
    world.get::<Task>(e).expect("task")
}

/// The stream `e`.
pub(crate) fn stream(world: &World, e: Entity) -> &StreamState {
    world.get::<StreamState>(e).expect("stream")
}

/// The device `e`.
pub(crate) fn device(world: &World, e: Entity) -> &DeviceState {
    world.get::<DeviceState>(e).expect("device")
}

/// Allocates `bytes` of device memory for `ctx` on `device`.
pub(crate) fn alloc(world: &mut World, device: Entity, ctx: Entity, bytes: u64) -> u64 {
    world
        .get_mut::<DeviceState>(device)
        .expect("device")
        .memory
        .alloc(bytes, ctx)
        .expect("alloc")
}

/// Reads `len` bytes of device memory of `ctx` at `addr`.
pub(crate) fn read(
    world: &mut World,
    device: Entity,
    ctx: Entity,
    addr: u64,
    len: usize,
) -> Vec<u8> {
    let mut buf = vec![0; len];
    world
        .get_mut::<DeviceState>(device)
        .expect("device")
        .memory
        .read(addr, &mut buf, ctx)
        .expect("readable");
    buf
}

/// Registers the op `add`: `z = x + y` over f32 tensors of one shape (inference rejects
/// different shapes). Its tiling uses one block per 8 elements, at most 4, unless attribute 0
/// asks for a block dim; its words are the element count. Its cost is one flop per element.
pub(crate) fn register_add_op(world: &mut World) -> Kernel {
    use npusim_components::shape::{OpDef, OpRegistry, TensorSpec, Tiling};
    let kernel = register_kernel(world, "add", 1.0, |_| Ok(()));
    let f32_tensor = |name: &str| TensorSpec {
        name: name.into(),
        elem_bytes: 4,
        data_dependent: false,
    };
    world.resource_mut::<OpRegistry>().insert(OpDef {
        name: "add".into(),
        kernel,
        inputs: vec![f32_tensor("x"), f32_tensor("y")],
        outputs: vec![f32_tensor("z")],
        attrs: vec!["block_dim".into()],
        infer: std::sync::Arc::new(|inputs, _, outputs| {
            if inputs[0] != inputs[1] {
                return Err(format!("x is {} but y is {}", inputs[0], inputs[1]));
            }
            outputs[0] = inputs[0];
            Ok(())
        }),
        tiling: std::sync::Arc::new(|shapes, _| {
            let n = shapes.inputs[0].numel();
            let block_dim = match shapes.attr_u64(0) {
                0 => n.div_ceil(8).clamp(1, 4) as u32,
                asked => asked as u32,
            };
            Ok(Tiling::new(block_dim, 7).push_u64(n))
        }),
        cost: std::sync::Arc::new(|shapes, _| {
            let n = shapes.inputs[0].numel() as f64;
            KernelCost::vector(n, 12.0 * n)
        }),
    });
    kernel
}

/// The handle of a binary function whose binary was then unloaded: its registry slot moved on
/// to a new generation, so launches made with it name nothing.
pub(crate) fn unloaded_kernel(world: &mut World) -> Kernel {
    let binary = world.spawn_empty().id();
    let mut registry = world.resource_mut::<KernelRegistry>();
    let kernel =
        registry.register_function(binary, "gone", || npusim_components::binary::BinaryCode {
            program: std::sync::Arc::new(npusim_device::core::Program::decode(0, &[])),
            entry: 0,
            binary,
            context: Entity::PLACEHOLDER,
            kind: Default::default(),
        });
    assert_eq!(registry.remove_binary(binary), 1);
    kernel
}
