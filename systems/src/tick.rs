//! Hardware tick: the discrete-event clock jumps to the next moment something happens (the
//! earliest end of a running task, or the submit time of a waiting stream head), never by fixed
//! steps. Tasks ending then execute functionally — kernels compute, copies move bytes, event
//! records fire, collectives move data across devices — release their units and complete in
//! their streams. A task that faults fails here, and by its context's failure mode the
//! context's queued work is aborted.
//!
//! One path for every task: the device-local tasks (kernels, copies, memsets) ending at this
//! moment execute first, each device's tasks in completion order — devices side by side, one
//! per worker job, when there are workers, else one after another; then every task ending now
//! completes in order (and cross-device work — collectives, peer copies — moves its data then).
//! Devices share no memory, so the results never depend on the thread count.

use std::cmp::Reverse;

use bevy_ecs::prelude::*;
use bevy_ecs::system::SystemState;
use npusim_components::ExecutionMode;
use npusim_components::collective::{PeerCopy, Rendezvous};
use npusim_components::resources::{
    AbortRequests, Devices, PendingCallbacks, ReleasedCallback, Running, SimClock,
};
use npusim_components::{
    ContextState, ContextStatus, DeviceState, FailureMode, KernelBody, KernelCtx, KernelRegistry,
    NpuError, StreamState, Task, TaskExtra, TaskKind, TaskStatus,
};

use crate::complete::{Completion, Outcome};
use crate::workers::Workers;

/// Everything a finishing task may touch.
#[derive(bevy_ecs::system::SystemParam)]
pub struct TickWorld<'w, 's> {
    tasks: Query<'w, 's, &'static mut Task>,
    streams: Query<'w, 's, &'static mut StreamState>,
    contexts: Query<'w, 's, &'static mut ContextState>,
    completion: Completion<'w, 's>,
    registry: If<Res<'w, KernelRegistry>>,
    aborts: If<ResMut<'w, AbortRequests>>,
    // Used only for host callbacks, collectives and peer copies, and with workers.
    callbacks: Option<ResMut<'w, PendingCallbacks>>,
    rendezvous: Option<ResMut<'w, Rendezvous>>,
    device_entities: Option<Res<'w, Devices>>,
    workers: If<Res<'w, Workers>>,
    mode: If<Res<'w, npusim_components::ExecutionMode>>,
}

/// What a tick with work fetches.
pub type TickParams = (
    ResMut<'static, SimClock>,
    ResMut<'static, Running>,
    TickWorld<'static, 'static>,
    Local<'static, Vec<Entity>>,
);

/// Advances the clock to the next event and completes the tasks that end then. A frame with
/// nothing running and no context to abort fetches nothing more than that: the stage runs in
/// every frame (no run condition to evaluate first) and looks for its work itself.
pub fn hardware_tick(world: &mut World, params: &mut SystemState<TickParams>) {
    crate::zone!("npusim::hardware_tick");
    let running = world
        .get_resource::<Running>()
        .is_some_and(|r| r.next_event().is_some());
    let aborting = || {
        world
            .get_resource::<AbortRequests>()
            .is_some_and(|a| !a.contexts.is_empty())
    };
    if !running && !aborting() {
        return;
    }
    // A resource the tick needs is missing: nothing it could do (a wait then ends in an
    // error, not a hang).
    let Ok((clock, running, w, batch)) = params.get_mut(world) else {
        return;
    };
    advance(clock, running, w, batch);
    params.apply(world);
}

/// The tick's work, once it has some.
fn advance(
    mut clock: ResMut<SimClock>,
    mut running: ResMut<Running>,
    mut w: TickWorld,
    mut batch: Local<Vec<Entity>>,
) {
    for (ctx, err) in std::mem::take(&mut w.aborts.contexts) {
        abort_context(&mut w, ctx, Some(err));
    }
    let Some(next) = running.next_event() else {
        return;
    };
    if clock.horizon.is_some_and(|h| next > h) {
        return;
    }
    if next > clock.now {
        clock.now = next;
        w.completion.progressed();
    }
    let now = clock.now;
    batch.clear();
    while let Some(&Reverse((end, _, entity))) = running.heap.peek() {
        if end > now {
            break;
        }
        running.heap.pop();
        batch.push(entity);
    }
    // Device-local work ending now executes first, then everything ending now completes.
    execute_local_batch(&mut w, &batch);
    // The context last seen healthy: tasks ending together are mostly of one context.
    let mut healthy = None;
    for &entity in batch.iter() {
        finish(&mut w, entity, now, &mut healthy);
    }
}

/// Whether a task touches only its own device's memory (and host buffers).
fn is_device_local(task: &Task) -> bool {
    match task.kind() {
        TaskKind::Kernel | TaskKind::Memset => true,
        TaskKind::Memcpy => !task.desc.is_peer_copy(),
        _ => false,
    }
}

/// Executes the device-local tasks of `batch` (tasks ending now, in completion order) ahead of
/// their completions: on the worker threads, one device per job, each device's tasks in batch
/// order; without workers, one by one (each device looked up once for the tasks in a row on
/// it). Work of a context that has faulted is left (it completes aborted). Outcomes are kept on
/// the tasks for their completion.
fn execute_local_batch(w: &mut TickWorld, batch: &[Entity]) {
    // Timing-only: nothing to execute (see `finish`).
    if batch.is_empty() || w.mode.timing_only {
        return;
    }
    let registry: &KernelRegistry = &w.registry;
    if !w.workers.is_parallel() {
        let TickWorld {
            tasks,
            contexts,
            completion,
            ..
        } = w;
        let mut healthy = None;
        let mut device: Option<(Entity, Mut<DeviceState>)> = None;
        for &e in batch {
            let Ok(mut task) = tasks.get_mut(e) else {
                continue;
            };
            if task.applied || !is_device_local(&task) || !is_healthy(contexts, &task, &mut healthy)
            {
                continue;
            }
            // Tasks ending together are mostly of one device: looked up again when it changes.
            if device.as_ref().is_none_or(|(d, _)| *d != task.device) {
                device = completion
                    .devices()
                    .get_mut(task.device)
                    .ok()
                    .map(|d| (task.device, d));
            }
            let result = match device.as_mut() {
                Some((_, d)) => execute_local(&task, d, registry),
                None => Err(NpuError::Internal("task on a missing device".into())),
            };
            task.applied = true;
            task.error = result.err().map(Box::new);
        }
        return;
    }
    let pending = batch;
    let mut outcomes: Vec<(Entity, Result<(), NpuError>)> = Vec::new();
    {
        use rayon::prelude::*;
        // Group by device index; a device's tasks stay in completion order.
        let count = w.device_entities.as_deref().map_or(0, |d| d.entities.len());
        let mut groups: Vec<Vec<(Entity, &Task)>> = (0..count).map(|_| Vec::new()).collect();
        let mut healthy = None;
        for &e in pending {
            let Ok(task) = w.tasks.get(e) else { continue };
            if task.applied
                || !is_device_local(task)
                || !is_healthy(&w.contexts, task, &mut healthy)
            {
                continue;
            }
            if let Ok(d) = w.completion.devices().get(task.device)
                && let Some(g) = groups.get_mut(d.index as usize)
            {
                g.push((e, task));
            }
        }
        let mut devices: Vec<&mut DeviceState> = w
            .completion
            .devices()
            .iter_mut()
            .map(|d| d.into_inner())
            .collect();
        devices.sort_by_key(|d| d.index);
        let jobs: Vec<(&mut DeviceState, &Vec<(Entity, &Task)>)> = devices
            .into_iter()
            .filter_map(|d| {
                let g = groups.get(d.index as usize)?;
                (!g.is_empty()).then_some((d, g))
            })
            .collect();
        let results: Vec<Vec<(Entity, Result<(), NpuError>)>> = w.workers.install(|| {
            jobs.into_par_iter()
                .map(|(device, group)| {
                    group
                        .iter()
                        .map(|&(e, task)| (e, execute_local(task, device, registry)))
                        .collect()
                })
                .collect()
        });
        outcomes.extend(results.into_iter().flatten());
    }
    for (e, result) in outcomes {
        if let Ok(mut task) = w.tasks.get_mut(e) {
            task.applied = true;
            task.error = result.err().map(Box::new);
        }
    }
}

/// Whether the task's context has not faulted; `healthy` caches the context last seen so.
fn is_healthy(
    contexts: &Query<&mut ContextState>,
    task: &Task,
    healthy: &mut Option<Entity>,
) -> bool {
    if *healthy == Some(task.context) {
        return true;
    }
    let faulted = contexts
        .get(task.context)
        .is_ok_and(|c| c.status == ContextStatus::Faulted);
    if !faulted {
        *healthy = Some(task.context);
    }
    !faulted
}

/// Executes (unless applied ahead) and completes one task ending now; a fault then gets its
/// context's failure mode. `healthy`: a context known not to have faulted (forgotten when a
/// task fails). Looks the task up once (twice for cross-device work).
// Once per task ending: inlined into the tick.
#[inline(always)]
fn finish(
    w: &mut TickWorld,
    entity: Entity,
    now: npusim_components::SimTime,
    healthy: &mut Option<Entity>,
) {
    let Ok(mut task) = w.tasks.get_mut(entity) else {
        return;
    };
    // Work of a context that faulted while it ran does not count (its memory is already
    // released): it ends aborted, like the context's queued work, not with a second fault.
    let faulted = !is_healthy(&w.contexts, &task, healthy);
    // A host callback reaching its end is released to the host: its task stays running until
    // the runtime hears the callback returned (then it comes back here, applied).
    if !faulted
        && !task.applied
        && task.kind() == TaskKind::HostCallback
        && let TaskExtra::Callback(slot) = &task.extra
        && let Some(callbacks) = w.callbacks.as_deref_mut()
        && let Some(body) = slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    {
        callbacks
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ReleasedCallback {
                task: entity,
                stream: task.stream,
                seq: task.seq,
                context: task.context,
                release: now,
                body,
            });
        w.completion.progressed();
        return;
    }
    let result = if faulted {
        let (stream, seq) = (task.stream, task.seq);
        task.error = Some(Box::new(NpuError::StreamAbort {
            stream: format!("stream {stream}"),
            seq,
        }));
        None
    } else if task.applied {
        Some(task.error.take().map_or(Ok(()), |e| Err(*e)))
    } else if w.mode.timing_only && task.kind() != TaskKind::Collective {
        // Timing-only: the task took its time; its effect (bytes moved, a kernel's results)
        // is not applied, but its pages are translated as the data path would. A collective
        // still leaves its rendezvous (below, without data).
        if let Ok(mut d) = w.completion.devices().get_mut(task.device) {
            published_shape(&mut d, &w.mode, &task);
            if is_device_local(&task) {
                for a in task.access.ranges() {
                    // A range that would fault is the functional run's fault: not modelled.
                    if a.space == npusim_components::access::Space::Local && a.bytes > 0 {
                        let _ = d.memory.translate_virt(task.context, a.addr, a.bytes);
                    }
                }
            }
        }
        Some(Ok(()))
    } else {
        // Cross-device work and host callbacks execute as they complete.
        let r = execute(w, entity, now);
        let Ok(t) = w.tasks.get_mut(entity) else {
            return;
        };
        task = t;
        Some(r)
    };
    // A recording runtime logs the shape a data-dependent op published.
    if w.mode.shape_log.is_some()
        && matches!(result, Some(Ok(())))
        && let Ok(mut d) = w.completion.devices().get_mut(task.device)
    {
        published_shape(&mut d, &w.mode, &task);
    }
    let Ok(mut stream) = w.streams.get_mut(task.stream) else {
        return;
    };
    let outcome = match result {
        None => Outcome::Aborted,
        Some(r) => Outcome::from(r),
    };
    // A failed host callback (it panicked) fails its task only; its context goes on.
    let failure = match &outcome {
        Outcome::Failed(err) if task.kind() != TaskKind::HostCallback => {
            Some((task.context, err.clone()))
        }
        _ => None,
    };
    w.completion
        .complete(entity, &mut task, &mut stream, outcome, now);
    if let Some((context, err)) = failure {
        *healthy = None;
        apply_failure_mode(w, context, err);
    }
}

/// A fault under the stop failure mode faults its context: its queued work is aborted and its
/// memory released (nothing of it may be read again). Under continue, nothing more happens.
fn apply_failure_mode(w: &mut TickWorld, context_e: Entity, err: NpuError) {
    let Ok(mut ctx) = w.contexts.get_mut(context_e) else {
        return;
    };
    if ctx.failure_mode == FailureMode::Continue {
        return;
    }
    ctx.status = ContextStatus::Faulted;
    ctx.sticky_error.get_or_insert(err);
    let device = ctx.device;
    abort_context(w, context_e, None);
    if let Ok(mut d) = w.completion.devices().get_mut(device) {
        d.memory.free_all_of(context_e);
    }
}

/// Aborts every queued (not yet running) task of the context's streams: they fail with `err`
/// (by default `ACL_ERROR_RT_STREAM_ABORT`) when dependency resolution completes them, in
/// stream order (their event records never fire, so waiters stop waiting).
fn abort_context(w: &mut TickWorld, context_e: Entity, err: Option<NpuError>) {
    let Ok(ctx) = w.contexts.get(context_e) else {
        return;
    };
    for &s in &ctx.streams {
        let Ok(mut stream) = w.streams.get_mut(s) else {
            continue;
        };
        for &t in stream.queue.iter() {
            let Ok(mut task) = w.tasks.get_mut(t) else {
                continue;
            };
            if matches!(task.status, TaskStatus::Queued | TaskStatus::Ready) {
                task.status = TaskStatus::Aborted;
                let abort = err.clone().unwrap_or_else(|| NpuError::StreamAbort {
                    stream: format!("stream {s}"),
                    seq: task.seq,
                });
                task.error = Some(Box::new(abort));
            }
        }
        // A ready head was aborted: let dependency resolution complete it in order.
        if let Some(&head) = stream.queue.front()
            && w.tasks
                .get(head)
                .is_ok_and(|t| t.status == TaskStatus::Aborted)
        {
            stream.head_active = false;
        }
    }
}

/// The shape a data-dependent op launch publishes, for recording and replay: logged (when
/// `mode` logs shapes) once its kernel has written it, or written from the recording (in a
/// timing-only replay) in place of its kernel.
fn published_shape(d: &mut DeviceState, mode: &ExecutionMode, task: &Task) {
    let Some(slot) = npusim_components::shape::OpTiling::parse(task.desc.tiling_words())
        .map(|t| t.out_slot())
        .filter(|&a| a != 0)
    else {
        return;
    };
    let key = (task.stream, task.seq);
    if mode.timing_only {
        if let Some(bytes) = mode.recorded_shapes.get(&key) {
            let _ = d.memory.write(slot, bytes, task.context);
        }
    } else if let Some(log) = &mode.shape_log {
        let mut bytes = vec![0u8; npusim_components::shape::SLOT_BYTES as usize];
        if d.memory.read(slot, &mut bytes, task.context).is_ok() {
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((key.0, key.1, bytes));
        }
    }
}

/// Performs the effect of a task that was not applied ahead and is not device-local:
/// cross-device work (peer copies, collectives) and host callbacks.
fn execute(
    w: &mut TickWorld,
    entity: Entity,
    _now: npusim_components::SimTime,
) -> Result<(), NpuError> {
    let Ok(task) = w.tasks.get(entity) else {
        return Ok(());
    };
    match task.kind() {
        TaskKind::Memcpy if task.desc.is_peer_copy() => {
            let copy = PeerCopy::decode(&task.desc)
                .ok_or_else(|| NpuError::Internal("corrupt peer copy".into()))?;
            let devices = w
                .device_entities
                .as_deref()
                .ok_or_else(NpuError::missing_resource::<Devices>)?;
            crate::copy::execute_peer_copy(w.completion.devices(), devices, &copy)
        }
        TaskKind::Kernel | TaskKind::Memcpy | TaskKind::Memset => {
            let mut device = w
                .completion
                .devices()
                .get_mut(task.device)
                .map_err(|_| NpuError::Internal("task on a missing device".into()))?;
            execute_local(task, &mut device, &w.registry)
        }
        TaskKind::Collective => crate::collective::execute_collective(
            &w.tasks,
            w.completion.devices(),
            &mut *w
                .rendezvous
                .as_deref_mut()
                .ok_or_else(NpuError::missing_resource::<Rendezvous>)?,
            &w.workers,
            task,
            w.mode.timing_only,
        ),
        // A callback without a body (released already, or none given) has nothing to do; one
        // that still holds its body could not be released (the world has no pending-callback
        // list): it fails rather than end as if it had run.
        TaskKind::HostCallback => match &task.extra {
            TaskExtra::Callback(slot)
                if slot.lock().unwrap_or_else(|p| p.into_inner()).is_some() =>
            {
                Err(NpuError::Internal(
                    "a host callback with no pending-callback list to go to".into(),
                ))
            }
            _ => Ok(()),
        },
        // Completed by dependency resolution; never dispatched.
        TaskKind::EventRecord | TaskKind::EventWait => Ok(()),
    }
}

/// The effect of a task that touches only its own device's memory (and host buffers): a
/// native kernel, a copy that does not leave the device, a memset. Safe to run for several
/// devices at once. (A binary kernel ran at dispatch and arrives here applied.)
fn execute_local(
    task: &Task,
    device: &mut DeviceState,
    registry: &KernelRegistry,
) -> Result<(), NpuError> {
    let desc = &task.desc;
    let context = task.context;
    match task.kind() {
        TaskKind::Kernel => {
            let Some(kernel) = registry.resolve(desc.kernel_slot()) else {
                return Err(NpuError::Destroyed(format!(
                    "{} (its binary was unloaded)",
                    desc.kernel_slot()
                )));
            };
            match &kernel.body {
                KernelBody::Native(k) => {
                    let mut ctx = KernelCtx::new(
                        desc.arg_words(),
                        desc.block_dim,
                        desc.tiling_words(),
                        &device.config,
                        context,
                        &mut device.memory,
                    );
                    (k.run)(&mut ctx).map_err(|f| f.into_error(&kernel.name))
                }
                KernelBody::Binary(_) => Err(NpuError::Internal(
                    "a binary kernel runs at dispatch".into(),
                )),
            }
        }
        TaskKind::Memcpy => match desc.as_copy() {
            Some(copy) => {
                crate::copy::execute_copy(&copy, &task.extra, &mut device.memory, context)
            }
            None => Err(NpuError::Internal("malformed copy descriptor".into())),
        },
        TaskKind::Memset => match desc.as_memset() {
            Some(m) => crate::copy::execute_memset(&m, &mut device.memory, context),
            None => Err(NpuError::Internal("malformed memset descriptor".into())),
        },
        _ => Err(NpuError::Internal("not a device-local task".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::resources::{Faults, Finished};
    use npusim_components::task::{CopyDir, CopyView, MemsetView, TaskDescriptor};
    use npusim_components::{HostBuffer, KernelFault, SimTime};

    fn callback() -> TaskDescriptor {
        TaskDescriptor::new(TaskKind::HostCallback)
    }

    fn now(world: &World) -> SimTime {
        world.resource::<SimClock>().now
    }

    fn status(world: &World, t: Entity) -> TaskStatus {
        task(world, t).status
    }

    #[test]
    fn the_clock_jumps_to_the_next_end_and_only_tasks_ending_then_complete() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let third = spawn_stream(&mut s.world, s.ctx, 0);
        let soon = enqueue(&mut s.world, s.stream, callback());
        let also_soon = enqueue(&mut s.world, third, callback());
        let later = enqueue(&mut s.world, other, callback());
        start_running(&mut s.world, later, 0, 0, 0, 700);
        start_running(&mut s.world, soon, 0, 0, 0, 300);
        start_running(&mut s.world, also_soon, 0, 0, 100, 300);
        run(&mut s.world, hardware_tick);

        assert_eq!(now(&s.world), SimTime(300));
        assert_eq!(status(&s.world, soon), TaskStatus::Done);
        assert_eq!(status(&s.world, also_soon), TaskStatus::Done);
        assert_eq!(status(&s.world, later), TaskStatus::Running);
        assert_eq!(s.world.resource::<Finished>().tasks, vec![soon, also_soon]);
        let st = stream(&s.world, s.stream);
        assert!(st.queue.is_empty() && st.completed == 1 && !st.head_active);
        assert_eq!(st.last_end, SimTime(300));

        run(&mut s.world, hardware_tick);
        assert_eq!(now(&s.world), SimTime(700));
        assert_eq!(status(&s.world, later), TaskStatus::Done);
    }

    #[test]
    fn with_nothing_running_the_clock_jumps_to_the_next_submit_time() {
        let mut s = setup();
        s.world.resource_mut::<Running>().next_wake = Some(SimTime(450));
        run(&mut s.world, hardware_tick);
        assert_eq!(now(&s.world), SimTime(450));
    }

    #[test]
    fn with_nothing_pending_the_clock_stands_still() {
        let mut s = setup();
        s.world.resource_mut::<SimClock>().now = SimTime(10);
        run(&mut s.world, hardware_tick);
        assert_eq!(now(&s.world), SimTime(10));
        assert!(
            !s.world
                .resource::<npusim_components::resources::FrameStats>()
                .last_frame_progressed
        );
    }

    #[test]
    fn with_a_resource_missing_the_tick_leaves_its_work_alone() {
        let mut s = setup();
        let t = enqueue(&mut s.world, s.stream, callback());
        start_running(&mut s.world, t, 0, 0, 0, 300);
        // An embedder removed the registry the tick runs kernels from: nothing half done.
        let registry = s.world.remove_resource::<KernelRegistry>().unwrap();
        run(&mut s.world, hardware_tick);
        assert_eq!(now(&s.world), SimTime::ZERO);
        assert_eq!(status(&s.world, t), TaskStatus::Running);
        // Without the running queue there is nothing to look at.
        let running = s.world.remove_resource::<Running>().unwrap();
        run(&mut s.world, hardware_tick);
        // Put back, the work goes on.
        s.world.insert_resource(registry);
        s.world.insert_resource(running);
        run(&mut s.world, hardware_tick);
        assert_eq!(now(&s.world), SimTime(300));
        assert_eq!(status(&s.world, t), TaskStatus::Done);
    }

    #[test]
    fn a_context_to_abort_is_work_with_nothing_running() {
        let mut s = setup();
        let t = enqueue(&mut s.world, s.stream, callback());
        s.world
            .resource_mut::<AbortRequests>()
            .contexts
            .push((s.ctx, NpuError::Internal("stop".into())));
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, t), TaskStatus::Aborted);
        assert!(s.world.resource::<AbortRequests>().contexts.is_empty());
    }

    #[test]
    fn the_clock_never_passes_the_horizon() {
        let mut s = setup();
        let t = enqueue(&mut s.world, s.stream, callback());
        start_running(&mut s.world, t, 0, 0, 0, 300);
        s.world.resource_mut::<SimClock>().horizon = Some(SimTime(299));
        run(&mut s.world, hardware_tick);
        assert_eq!(now(&s.world), SimTime::ZERO);
        assert_eq!(status(&s.world, t), TaskStatus::Running);

        s.world.resource_mut::<SimClock>().horizon = Some(SimTime(300));
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, t), TaskStatus::Done);
    }

    #[test]
    fn a_memset_really_writes_memory_and_returns_its_dma_engine() {
        let mut s = setup();
        let a = alloc(&mut s.world, s.device, s.ctx, 256);
        let t = enqueue(
            &mut s.world,
            s.stream,
            TaskDescriptor::memset(MemsetView {
                dst: a + 16,
                value: 0xab,
                bytes: 32,
            }),
        );
        start_running(&mut s.world, t, 0, 1, 0, 200);
        let busy_before = device(&s.world, s.device).units.dma_busy_ns;
        run(&mut s.world, hardware_tick);

        let bytes = read(&mut s.world, s.device, s.ctx, a, 64);
        assert_eq!(&bytes[..16], &[0; 16]);
        assert_eq!(&bytes[16..48], &[0xab; 32]);
        assert_eq!(&bytes[48..], &[0; 16]);
        assert_eq!(status(&s.world, t), TaskStatus::Done);
        let units = &device(&s.world, s.device).units;
        assert_eq!(units.free_dma, 2);
        assert_eq!(units.dma_busy_ns - busy_before, 200);
    }

    #[test]
    fn in_timing_only_mode_a_memset_takes_its_time_and_writes_nothing() {
        let mut s = setup();
        s.world
            .resource_mut::<npusim_components::ExecutionMode>()
            .timing_only = true;
        let a = alloc(&mut s.world, s.device, s.ctx, 256);
        let t = enqueue(
            &mut s.world,
            s.stream,
            TaskDescriptor::memset(MemsetView {
                dst: a,
                value: 0xab,
                bytes: 64,
            }),
        );
        // As ingest gives it.
        s.world
            .get_mut::<Task>(t)
            .unwrap()
            .access
            .record(npusim_components::Access::write(a, 64));
        start_running(&mut s.world, t, 0, 1, 0, 200);
        run(&mut s.world, hardware_tick);

        assert_eq!(status(&s.world, t), TaskStatus::Done);
        assert_eq!(now(&s.world), SimTime(200));
        let memory = &device(&s.world, s.device).memory;
        assert_eq!(memory.backed_bytes(), 0, "no page was backed");
        assert!(memory.stats().tlb.misses > 0, "its pages were translated");
        assert_eq!(read(&mut s.world, s.device, s.ctx, a, 64), vec![0; 64]);
    }

    #[test]
    fn a_copy_to_the_host_fills_the_host_buffer() {
        let mut s = setup();
        let a = alloc(&mut s.world, s.device, s.ctx, 64);
        s.world
            .get_mut::<DeviceState>(s.device)
            .unwrap()
            .memory
            .write(a, &[1, 2, 3, 4], s.ctx)
            .unwrap();
        let buffer = HostBuffer::new(8, true);
        let t = enqueue_with(
            &mut s.world,
            s.stream,
            TaskDescriptor::copy(CopyView {
                dst: 0,
                src: a,
                bytes: 4,
                dir: CopyDir::DeviceToHost,
            }),
            TaskExtra::Host {
                buffer: buffer.clone(),
                offset: 2,
            },
            SimTime::ZERO,
        );
        start_running(&mut s.world, t, 0, 1, 0, 50);
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, t), TaskStatus::Done);
        assert_eq!(
            buffer.bytes().unwrap().as_slice(),
            &[0, 0, 1, 2, 3, 4, 0, 0]
        );
    }

    #[test]
    fn a_native_kernel_ending_now_runs_and_returns_its_cores() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "iota", 1.0, |k| {
            let (p, n) = (k.ptr(0)?, k.usize(1)?);
            let values: Vec<u32> = (0..n as u32).collect();
            k.store(p, &values)
        });
        let a = alloc(&mut s.world, s.device, s.ctx, 64);
        let t = enqueue(&mut s.world, s.stream, launch(k, 2, &[a, 4]));
        start_running(&mut s.world, t, 2, 0, 0, 1_000);
        run(&mut s.world, hardware_tick);

        assert_eq!(status(&s.world, t), TaskStatus::Done);
        let bytes = read(&mut s.world, s.device, s.ctx, a, 16);
        let values: &[u32] = bytemuck::cast_slice(&bytes);
        assert_eq!(values, &[0, 1, 2, 3]);
        assert_eq!(device(&s.world, s.device).units.free_cores, 4);
        assert_eq!(device(&s.world, s.device).units.core_busy_ns, 2_000);
    }

    /// A host callback task with `body` on the setup's stream, running from 0 to 10.
    fn running_callback(s: &mut Setup, body: npusim_components::task::Callback) -> Entity {
        let t = enqueue_with(
            &mut s.world,
            s.stream,
            callback(),
            TaskExtra::Callback(std::sync::Mutex::new(Some(body))),
            SimTime::ZERO,
        );
        start_running(&mut s.world, t, 0, 0, 0, 10);
        t
    }

    #[test]
    fn a_host_callback_with_no_pending_callback_list_fails_instead_of_seeming_to_run() {
        let mut s = setup();
        s.world.remove_resource::<PendingCallbacks>();
        let t = running_callback(&mut s, Box::new(|| {}));
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, t), TaskStatus::Failed);
        assert!(matches!(
            s.world.get::<Task>(t).unwrap().error.as_deref(),
            Some(NpuError::Internal(_))
        ));
        assert_eq!(stream(&s.world, s.stream).completed, 1);
    }

    #[test]
    fn a_host_callback_is_handed_to_the_runtime_not_run_in_the_frame() {
        let mut s = setup();
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        let t = running_callback(
            &mut s,
            Box::new(move || flag.store(true, std::sync::atomic::Ordering::SeqCst)),
        );
        run(&mut s.world, hardware_tick);

        assert_eq!(
            status(&s.world, t),
            TaskStatus::Running,
            "the task waits for the callback to return"
        );
        assert_eq!(stream(&s.world, s.stream).completed, 0);
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
        let calls =
            std::mem::take(&mut *s.world.resource::<PendingCallbacks>().calls.lock().unwrap());
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].task, calls[0].release), (t, SimTime(10)));
        calls.into_iter().for_each(|c| (c.body)());
        assert!(ran.load(std::sync::atomic::Ordering::SeqCst));

        // The runtime reports it returned at 25: the task completes then, with its outcome.
        {
            let mut task = s.world.get_mut::<Task>(t).unwrap();
            task.applied = true;
            task.end = SimTime(25);
            task.error = Some(Box::new(NpuError::CallbackPanicked {
                stream: "s".into(),
                message: "boom".into(),
            }));
        }
        s.world
            .resource_mut::<Running>()
            .heap
            .push(Reverse((SimTime(25), 99, t)));
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, t), TaskStatus::Failed);
        assert_eq!(stream(&s.world, s.stream).completed, 1);
        assert_eq!(stream(&s.world, s.stream).last_end, SimTime(25));
        let ctx = s.world.get::<ContextState>(s.ctx).unwrap();
        assert_eq!(
            ctx.status,
            ContextStatus::Active,
            "a panicking callback does not fault its context"
        );
    }

    /// A context with two streams: a faulting kernel running on the first with a task behind
    /// it, and a ready task on the second; plus a bystander context with queued work.
    struct Faulting {
        s: Setup,
        faulty: Entity,
        behind: Entity,
        ready_elsewhere: Entity,
        second: Entity,
        bystander: Entity,
        block: u64,
    }

    fn faulting(mode: FailureMode) -> Faulting {
        let mut s = setup();
        s.world.get_mut::<ContextState>(s.ctx).unwrap().failure_mode = mode;
        let k = register_kernel(&mut s.world, "trap", 1.0, |_| {
            Err(KernelFault::Trap("illegal instruction".into()))
        });
        let block = alloc(&mut s.world, s.device, s.ctx, 64);
        let second = spawn_stream(&mut s.world, s.ctx, 0);
        let faulty = enqueue(&mut s.world, s.stream, launch(k, 1, &[]));
        let behind = enqueue(&mut s.world, s.stream, callback());
        let ready_elsewhere = enqueue(&mut s.world, second, callback());
        make_ready(&mut s.world, ready_elsewhere);
        start_running(&mut s.world, faulty, 1, 0, 0, 100);
        let other_ctx = spawn_context(&mut s.world, s.device);
        let other_stream = spawn_stream(&mut s.world, other_ctx, 0);
        let bystander = enqueue(&mut s.world, other_stream, callback());
        run(&mut s.world, hardware_tick);
        Faulting {
            s,
            faulty,
            behind,
            ready_elsewhere,
            second,
            bystander,
            block,
        }
    }

    #[test]
    fn a_fault_under_stop_aborts_the_contexts_queued_work_and_faults_the_context() {
        let f = faulting(FailureMode::StopOnFailure);
        let w = &f.s.world;
        let failed = task(w, f.faulty);
        assert_eq!(failed.status, TaskStatus::Failed);
        let err = failed.error.as_deref().cloned().expect("an error");
        assert!(matches!(err, NpuError::AicoreTrap { .. }), "{err:?}");

        let ctx = w.get::<ContextState>(f.s.ctx).unwrap();
        assert_eq!(ctx.status, ContextStatus::Faulted);
        assert_eq!(ctx.sticky_error.as_ref(), Some(&err));
        for t in [f.behind, f.ready_elsewhere] {
            assert_eq!(status(w, t), TaskStatus::Aborted);
            assert!(matches!(
                task(w, t).error.as_deref(),
                Some(NpuError::StreamAbort { .. })
            ));
        }
        assert!(
            !stream(w, f.second).head_active,
            "the aborted ready head is left for dependency resolution to complete"
        );
        assert_eq!(status(w, f.bystander), TaskStatus::Queued);
        let faults = &w.resource::<Faults>().pending;
        assert_eq!(faults.len(), 1);
        assert_eq!((faults[0].stream, faults[0].seq), (f.s.stream, 1));
        assert!(
            device(w, f.s.device)
                .memory
                .check(f.block, 1, f.s.ctx)
                .is_err(),
            "the faulted context's memory is released"
        );
    }

    #[test]
    fn a_fault_under_continue_fails_only_the_faulting_task() {
        let f = faulting(FailureMode::Continue);
        let w = &f.s.world;
        assert_eq!(status(w, f.faulty), TaskStatus::Failed);
        assert_eq!(status(w, f.behind), TaskStatus::Queued);
        assert_eq!(status(w, f.ready_elsewhere), TaskStatus::Ready);
        let ctx = w.get::<ContextState>(f.s.ctx).unwrap();
        assert_eq!(ctx.status, ContextStatus::Active);
        assert!(ctx.sticky_error.is_none());
        assert!(
            stream(w, f.s.stream).error.is_some(),
            "reported at synchronize"
        );
        assert_eq!(w.resource::<Faults>().pending.len(), 1);
        assert!(
            device(w, f.s.device)
                .memory
                .check(f.block, 1, f.s.ctx)
                .is_ok()
        );
    }

    #[test]
    fn an_abort_request_aborts_the_contexts_queued_work_but_not_what_runs() {
        let mut s = setup();
        let running = enqueue(&mut s.world, s.stream, callback());
        let queued = enqueue(&mut s.world, s.stream, callback());
        start_running(&mut s.world, running, 0, 0, 0, 100);
        s.world
            .resource_mut::<AbortRequests>()
            .contexts
            .push((s.ctx, NpuError::ContextRelease("destroyed".into())));
        run(&mut s.world, hardware_tick);

        assert_eq!(status(&s.world, running), TaskStatus::Done);
        assert_eq!(status(&s.world, queued), TaskStatus::Aborted);
        assert!(s.world.resource::<AbortRequests>().contexts.is_empty());
    }

    #[test]
    fn work_of_a_context_that_faulted_while_it_ran_ends_aborted_without_a_second_fault() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let buf = alloc(&mut s.world, s.device, s.ctx, 4096);
        let trap = register_kernel(&mut s.world, "trap", 1.0, |_| {
            Err(KernelFault::Trap("illegal instruction".into()))
        });
        let bad = enqueue(&mut s.world, s.stream, launch(trap, 1, &[]));
        let set = enqueue(
            &mut s.world,
            other,
            TaskDescriptor::memset(MemsetView {
                dst: buf,
                value: 1,
                bytes: 64,
            }),
        );
        start_running(&mut s.world, bad, 1, 0, 0, 100);
        start_running(&mut s.world, set, 0, 1, 0, 200);
        run(&mut s.world, hardware_tick);
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, bad), TaskStatus::Failed);
        assert_eq!(status(&s.world, set), TaskStatus::Aborted);
        assert_eq!(
            s.world.resource::<Faults>().pending.len(),
            1,
            "one fault, not two"
        );
    }

    #[test]
    fn a_launch_of_an_unloaded_kernel_fails_at_its_end() {
        let mut s = setup();
        let stale = unloaded_kernel(&mut s.world);
        let t = enqueue(&mut s.world, s.stream, launch(stale, 1, &[]));
        start_running(&mut s.world, t, 1, 0, 0, 100);
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, t), TaskStatus::Failed);
        // The same code a launch of the stale handle gets at the API: the kernel is destroyed.
        assert!(matches!(
            task(&s.world, t).error.as_deref(),
            Some(NpuError::Destroyed(_))
        ));
    }

    #[test]
    fn a_task_applied_ahead_completes_with_its_recorded_outcome_without_running_again() {
        let mut s = setup();
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = runs.clone();
        let k = register_kernel(&mut s.world, "count", 1.0, move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        });
        let t = enqueue(&mut s.world, s.stream, launch(k, 1, &[]));
        {
            let mut task = s.world.get_mut::<Task>(t).unwrap();
            task.applied = true;
            task.error = Some(Box::new(NpuError::InvalidShape("rejected".into())));
        }
        start_running(&mut s.world, t, 1, 0, 0, 100);
        run(&mut s.world, hardware_tick);
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(status(&s.world, t), TaskStatus::Failed);
        assert!(matches!(
            task(&s.world, t).error.as_deref(),
            Some(NpuError::InvalidShape(_))
        ));
    }

    /// A memset of `value` over a new 64-byte block of `ctx`, on a new stream of it, running
    /// from 0 to 100 on one DMA engine; returns the block.
    fn running_memset(world: &mut World, ctx: Entity, value: u8) -> u64 {
        let device = world.get::<ContextState>(ctx).expect("context").device;
        let stream = spawn_stream(world, ctx, 0);
        let a = alloc(world, device, ctx, 64);
        let t = enqueue(
            world,
            stream,
            TaskDescriptor::memset(MemsetView {
                dst: a,
                value,
                bytes: 64,
            }),
        );
        start_running(world, t, 0, 1, 0, 100);
        a
    }

    #[test]
    fn with_worker_threads_devices_compute_the_same_results() {
        let mut results = Vec::new();
        for threads in [1, 2] {
            let mut world = world();
            world.insert_resource(Workers::new(threads).unwrap());
            let mut blocks = Vec::new();
            for value in [3u8, 5] {
                let device = spawn_device(&mut world);
                let ctx = spawn_context(&mut world, device);
                let a = running_memset(&mut world, ctx, value);
                blocks.push((device, ctx, a));
            }
            run(&mut world, hardware_tick);
            let bytes: Vec<Vec<u8>> = blocks
                .iter()
                .map(|&(d, c, a)| read(&mut world, d, c, a, 64))
                .collect();
            results.push(bytes);
        }
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0], vec![vec![3; 64], vec![5; 64]]);
    }

    #[test]
    fn tasks_of_two_devices_ending_together_in_turn_each_run_on_and_return_units_to_their_own() {
        let mut world = world();
        let mut sides = Vec::new();
        for _ in 0..2 {
            let device = spawn_device(&mut world);
            let ctx = spawn_context(&mut world, device);
            sides.push((device, ctx));
        }
        // Running order: device 0, device 1, device 0, device 1 (one stream each, all ending at
        // 100): the device a task runs on changes at every task.
        let mut blocks = Vec::new();
        for (i, value) in [1u8, 2, 3, 4].into_iter().enumerate() {
            let (device, ctx) = sides[i % 2];
            let a = running_memset(&mut world, ctx, value);
            blocks.push((device, ctx, a, value));
        }
        run(&mut world, hardware_tick);
        for &(d, c, a, value) in &blocks {
            assert_eq!(read(&mut world, d, c, a, 64), vec![value; 64]);
        }
        for &(d, _) in &sides {
            let units = &device(&world, d).units;
            assert_eq!(
                units.free_dma,
                npusim_device::config::DeviceConfig::small().dma_engines
            );
            assert_eq!(units.dma_busy_ns, 2 * 100);
        }
    }

    #[test]
    fn a_peer_copy_ending_with_a_memset_listed_after_it_copies_what_the_memset_wrote() {
        for threads in [1, 2] {
            let mut s = setup();
            s.world.insert_resource(Workers::new(threads).unwrap());
            let far = spawn_device(&mut s.world);
            let far_ctx = spawn_context(&mut s.world, far);
            let other = spawn_stream(&mut s.world, s.ctx, 0);
            let src = alloc(&mut s.world, s.device, s.ctx, 64);
            let dst = alloc(&mut s.world, far, far_ctx, 64);
            let copy = PeerCopy {
                dst,
                src,
                bytes: 64,
                src_device: 0,
                dst_device: 1,
                src_ctx: s.ctx,
                dst_ctx: far_ctx,
            };
            // The copy is first in the running order; the memset of its source ends with it.
            let c = enqueue(&mut s.world, s.stream, copy.encode());
            let m = enqueue(
                &mut s.world,
                other,
                TaskDescriptor::memset(MemsetView {
                    dst: src,
                    value: 9,
                    bytes: 64,
                }),
            );
            start_running(&mut s.world, c, 0, 1, 0, 100);
            start_running(&mut s.world, m, 0, 1, 0, 100);
            run(&mut s.world, hardware_tick);

            assert_eq!(status(&s.world, c), TaskStatus::Done);
            assert_eq!(status(&s.world, m), TaskStatus::Done);
            assert_eq!(
                read(&mut s.world, far, far_ctx, dst, 64),
                vec![9; 64],
                "{threads} thread(s)"
            );
            // Completed in the running order all the same.
            assert_eq!(s.world.resource::<Finished>().tasks, vec![c, m]);
        }
    }

    #[test]
    fn a_fault_in_a_batch_aborts_the_later_tasks_of_its_context_ending_with_it() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let bad = register_kernel(&mut s.world, "bad", 1.0, |_| {
            Err(KernelFault::Trap("boom".into()))
        });
        let ok = register_kernel(&mut s.world, "ok", 1.0, |_| Ok(()));
        let first = enqueue(&mut s.world, s.stream, launch(bad, 1, &[]));
        let second = enqueue(&mut s.world, other, launch(ok, 1, &[]));
        start_running(&mut s.world, first, 1, 0, 0, 100);
        start_running(&mut s.world, second, 1, 0, 0, 100);
        run(&mut s.world, hardware_tick);
        assert_eq!(status(&s.world, first), TaskStatus::Failed);
        // Its context faulted (stop is the default mode): the task ending with it does not
        // count, whatever context was seen healthy before.
        assert_eq!(status(&s.world, second), TaskStatus::Aborted);
        assert_eq!(device(&s.world, s.device).units.free_cores, 4);
    }
}
