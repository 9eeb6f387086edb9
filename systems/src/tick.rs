//! Hardware tick: the discrete-event clock jumps to the next moment something happens (the
//! earliest end of a running task, or the submit time of a waiting stream head), never by fixed
//! steps. Tasks ending then execute functionally — kernels compute, copies move bytes, event
//! records fire, collectives move data across devices — release their units and complete in
//! their streams. A task that faults fails here, and by its context's failure mode the
//! context's queued work is aborted.
//!
//! Devices advance side by side: the device-local tasks (kernels, copies, memsets) ending at
//! this moment execute first, one device per worker job, each device's tasks in completion
//! order; then every task ending now completes in order (and cross-device work — collectives,
//! peer copies — moves its data), exactly as one by one. Devices share no memory, so this is
//! what task-by-task execution computes, and the split never depends on the thread count.

use std::cmp::Reverse;

use bevy_ecs::prelude::*;
use npusim_components::collective::Rendezvous;
use npusim_components::resources::{
    AbortRequests, Devices, FaultRecord, Faults, Finished, FrameStats, PendingCallbacks, Running,
    SimClock,
};
use npusim_components::task::copy_dir;
use npusim_components::{
    ContextState, ContextStatus, DeviceState, EventState, FailureMode, Kernel, KernelCtx,
    KernelRegistry, NpuError, StreamState, Task, TaskExtra, TaskKind, TaskStatus,
};

/// Everything a finishing task may touch.
#[derive(bevy_ecs::system::SystemParam)]
pub struct TickWorld<'w, 's> {
    tasks: Query<'w, 's, &'static mut Task>,
    streams: Query<'w, 's, &'static mut StreamState>,
    events: Query<'w, 's, &'static mut EventState>,
    devices: Query<'w, 's, &'static mut DeviceState>,
    contexts: Query<'w, 's, &'static mut ContextState>,
    registry: Res<'w, KernelRegistry>,
    finished: ResMut<'w, Finished>,
    faults: ResMut<'w, Faults>,
    aborts: ResMut<'w, AbortRequests>,
    callbacks: ResMut<'w, PendingCallbacks>,
    stats: ResMut<'w, FrameStats>,
    rendezvous: ResMut<'w, Rendezvous>,
    device_entities: Res<'w, Devices>,
    workers: Res<'w, Workers>,
}

/// The worker threads that execute independent devices' work side by side (a rayon pool), or
/// none: everything on the frame's thread. Results are the same either way: work is split
/// by device and into fixed chunks, never by thread.
#[derive(Resource, Clone, Default)]
pub struct Workers {
    pool: Option<std::sync::Arc<rayon::ThreadPool>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Workers({})", self.threads())
    }
}

impl Workers {
    /// `threads` worker threads (0: one per available core); 1 means none.
    pub fn new(threads: usize) -> Result<Self, String> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        if threads <= 1 {
            return Ok(Self { pool: None });
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("npusim-worker-{i}"))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            pool: Some(std::sync::Arc::new(pool)),
        })
    }

    /// Threads that run work (1 without a pool).
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| p.current_num_threads())
    }

    /// Whether work is split over several threads.
    pub fn is_parallel(&self) -> bool {
        self.pool.is_some()
    }

    /// Runs `f` inside the pool (so its rayon iterators use the pool's threads).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

/// Advances the clock to the next event and completes the tasks that end then.
pub fn hardware_tick(
    mut clock: ResMut<SimClock>,
    mut running: ResMut<Running>,
    mut w: TickWorld,
    mut batch: Local<Vec<Entity>>,
) {
    crate::zone!("npusim::hardware_tick");
    for (ctx, err) in std::mem::take(&mut w.aborts.contexts) {
        abort_context(&mut w, ctx, &err);
    }
    let Some(next) = running.next_event() else {
        return;
    };
    if clock.horizon.is_some_and(|h| next > h) {
        return;
    }
    if next > clock.now {
        clock.now = next;
        w.stats.last_frame_progressed = true;
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
    // Device-local work ending now runs first, devices side by side.
    execute_local_batch(&mut w, &batch);
    for &entity in batch.iter() {
        complete(&mut w, entity, now);
    }
}

/// Whether a task touches only its own device's memory (and host buffers).
fn is_device_local(task: &Task) -> bool {
    match task.kind() {
        TaskKind::Kernel | TaskKind::Memset => true,
        TaskKind::Memcpy => task.desc.flags != copy_dir::PEER,
        _ => false,
    }
}

/// Executes the device-local tasks of `batch` (tasks ending now, in completion order): on the
/// worker threads, one device per job, each device's tasks in batch order. Outcomes are kept
/// on the tasks for their completion.
fn execute_local_batch(w: &mut TickWorld, pending: &[Entity]) {
    if pending.is_empty() {
        return;
    }
    let registry: &KernelRegistry = &w.registry;
    if !w.workers.is_parallel() {
        for &e in pending {
            let Ok(task) = w.tasks.get(e) else { continue };
            if task.executed || !is_device_local(task) {
                continue;
            }
            let result = match w.devices.get_mut(task.device) {
                Ok(mut d) => execute_local(task, &mut d, registry),
                Err(_) => Err(NpuError::Internal("task on a missing device".into())),
            };
            if let Ok(mut task) = w.tasks.get_mut(e) {
                task.executed = true;
                task.error = result.err().map(Box::new);
            }
        }
        return;
    }
    let mut outcomes: Vec<(Entity, Result<(), NpuError>)> = Vec::new();
    {
        use rayon::prelude::*;
        // Group by device index; a device's tasks stay in completion order.
        let count = w.device_entities.entities.len();
        let mut groups: Vec<Vec<(Entity, &Task)>> = (0..count).map(|_| Vec::new()).collect();
        for &e in pending {
            let Ok(task) = w.tasks.get(e) else { continue };
            if task.executed || !is_device_local(task) {
                continue;
            }
            if let Ok(d) = w.devices.get(task.device)
                && let Some(g) = groups.get_mut(d.index as usize)
            {
                g.push((e, task));
            }
        }
        let mut devices: Vec<&mut DeviceState> =
            w.devices.iter_mut().map(|d| d.into_inner()).collect();
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
            task.executed = true;
            task.error = result.err().map(Box::new);
        }
    }
}

fn complete(w: &mut TickWorld, entity: Entity, now: npusim_components::SimTime) {
    // Applied ahead (a parallel batch, or a collective refused at the rendezvous)?
    let ahead = match w.tasks.get_mut(entity) {
        Ok(mut t) if t.executed => {
            t.executed = false;
            Some(t.error.take().map_or(Ok(()), |e| Err(*e)))
        }
        _ => None,
    };
    let result = match ahead {
        Some(r) => r,
        None => execute(w, entity, now),
    };
    let Ok(mut task) = w.tasks.get_mut(entity) else {
        return;
    };
    if let Ok(mut device) = w.devices.get_mut(task.device) {
        let busy = (task.end - task.start).as_ns();
        device.units.free_cores += task.cores;
        device.units.free_dma += task.dma;
        device.units.core_busy_ns += busy * task.cores as u64;
        device.units.dma_busy_ns += busy * task.dma as u64;
        device.finished += 1;
    }
    let (stream_e, context_e, seq) = (task.stream, task.context, task.seq);
    match result {
        Ok(()) => {
            task.status = TaskStatus::Done;
            w.stats.tasks_completed += 1;
        }
        Err(err) => {
            task.status = TaskStatus::Failed;
            task.error = Some(Box::new(err.clone()));
            w.stats.tasks_failed += 1;
            let device = w.devices.get(task.device).map_or(0, |d| d.index);
            w.faults.pending.push(FaultRecord {
                device,
                context: context_e,
                stream: stream_e,
                seq,
                error: err.clone(),
            });
            fail(w, stream_e, context_e, err);
        }
    }
    if let Ok(mut stream) = w.streams.get_mut(stream_e) {
        if stream.queue.front() == Some(&entity) {
            stream.queue.pop_front();
        }
        stream.completed = seq;
        stream.head_active = false;
        stream.last_end = now;
    }
    w.finished.tasks.push(entity);
    w.stats.last_frame_progressed = true;
}

/// Records a failure on its stream and applies the context's failure mode.
fn fail(w: &mut TickWorld, stream_e: Entity, context_e: Entity, err: NpuError) {
    if let Ok(mut stream) = w.streams.get_mut(stream_e) {
        stream.error.get_or_insert_with(|| err.clone());
    }
    let Ok(mut ctx) = w.contexts.get_mut(context_e) else {
        return;
    };
    if ctx.failure_mode == FailureMode::Continue {
        return;
    }
    ctx.status = ContextStatus::Faulted;
    ctx.sticky_error.get_or_insert(err.clone());
    let device = ctx.device;
    abort_context(w, context_e, &err);
    // A faulted context's memory is released: nothing of it may be read again.
    if let Ok(mut d) = w.devices.get_mut(device) {
        d.memory.free_all_of(context_e);
    }
}

/// Aborts every queued (not yet running) task of the context's streams: they fail with
/// `ACL_ERROR_RT_STREAM_ABORT`, and their event records never fire (waiters stop waiting).
fn abort_context(w: &mut TickWorld, context_e: Entity, _cause: &NpuError) {
    let Ok(ctx) = w.contexts.get(context_e) else {
        return;
    };
    let streams = ctx.streams.clone();
    for s in streams {
        let Ok(mut stream) = w.streams.get_mut(s) else {
            continue;
        };
        let stream_name = format!("stream {s}");
        let mut first_abort = None;
        for &t in stream.queue.iter() {
            let Ok(mut task) = w.tasks.get_mut(t) else {
                continue;
            };
            if matches!(task.status, TaskStatus::Queued | TaskStatus::Ready) {
                task.status = TaskStatus::Aborted;
                let abort = NpuError::StreamAbort {
                    stream: stream_name.clone(),
                    seq: task.seq,
                };
                first_abort.get_or_insert_with(|| abort.clone());
                task.error = Some(Box::new(abort));
                w.stats.tasks_aborted += 1;
                if task.kind() == TaskKind::EventRecord
                    && let Some(event) = Entity::try_from_bits(task.desc.args[0])
                    && let Ok(mut ev) = w.events.get_mut(event)
                {
                    ev.cancel(task.desc.args[1]);
                }
            }
        }
        if let Some(abort) = first_abort {
            stream.error.get_or_insert(abort);
        }
        // A ready head was aborted: let dependency resolution retire it in order.
        if let Some(&head) = stream.queue.front()
            && w.tasks
                .get(head)
                .is_ok_and(|t| t.status == TaskStatus::Aborted)
        {
            stream.head_active = false;
        }
    }
}

/// Performs the task's effect on device (and host) memory.
fn execute(
    w: &mut TickWorld,
    entity: Entity,
    now: npusim_components::SimTime,
) -> Result<(), NpuError> {
    let Ok(task) = w.tasks.get(entity) else {
        return Ok(());
    };
    let desc = task.desc;
    match task.kind() {
        TaskKind::Memcpy if desc.flags == copy_dir::PEER => {
            crate::collective::execute_peer_copy(&mut w.devices, &w.device_entities, &desc)
        }
        TaskKind::Kernel | TaskKind::Memcpy | TaskKind::Memset => {
            let mut device = w
                .devices
                .get_mut(task.device)
                .map_err(|_| NpuError::Internal("task on a missing device".into()))?;
            execute_local(task, &mut device, &w.registry)
        }
        TaskKind::Collective => crate::collective::execute_collective(
            &w.tasks,
            &mut w.devices,
            &mut w.rendezvous,
            &w.workers,
            task,
        ),
        TaskKind::EventRecord => {
            if let Some(event) = Entity::try_from_bits(desc.args[0])
                && let Ok(mut ev) = w.events.get_mut(event)
            {
                ev.fire(desc.args[1], now);
            }
            Ok(())
        }
        TaskKind::HostCallback => {
            if let TaskExtra::Callback(slot) = &task.extra
                && let Some(f) = slot.lock().unwrap_or_else(|p| p.into_inner()).take()
            {
                w.callbacks
                    .calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(f);
            }
            Ok(())
        }
        TaskKind::EventWait => Ok(()),
    }
}

/// The effect of a task that touches only its own device's memory (and host buffers): a
/// kernel, a copy that does not leave the device, a memset. Safe to run for several devices
/// at once.
fn execute_local(
    task: &Task,
    device: &mut DeviceState,
    registry: &KernelRegistry,
) -> Result<(), NpuError> {
    let desc = task.desc;
    let context = task.context;
    match task.kind() {
        TaskKind::Kernel => {
            let id = Kernel(desc.kernel);
            let Some(kernel) = registry.get(id) else {
                return Err(NpuError::KernelNotFound(format!(
                    "kernel id {}",
                    desc.kernel
                )));
            };
            // A binary kernel already ran on the AI cores at dispatch; its fault, if any, is
            // raised now, at its end.
            if kernel.code.is_some() {
                return match &task.error {
                    Some(e) => Err((**e).clone()),
                    None => Ok(()),
                };
            }
            let mut ctx = KernelCtx::new(
                desc.arg_words(),
                desc.block_dim,
                desc.tiling_words(),
                &device.config,
                context,
                &mut device.memory,
            );
            (kernel.run)(&mut ctx).map_err(|f| f.into_error(&kernel.name))
        }
        TaskKind::Memcpy => {
            let (dst, src, bytes) = (desc.args[0], desc.args[1], desc.args[2]);
            let fault = |f: npusim_components::memory::AccessFault| NpuError::AicoreException {
                kernel: "memcpy".into(),
                detail: f.to_string(),
            };
            let len = usize::try_from(bytes)
                .map_err(|_| NpuError::InvalidParam("copy too large".into()))?;
            match (desc.flags, &task.extra) {
                (copy_dir::H2D, TaskExtra::Host { buffer, offset }) => {
                    let data = buffer.bytes()?;
                    let start = *offset as usize;
                    let chunk = data.get(start..start + len).ok_or_else(|| {
                        NpuError::InvalidParam("host range past the buffer".into())
                    })?;
                    device.memory.write(dst, chunk, context).map_err(fault)
                }
                (copy_dir::D2H, TaskExtra::Host { buffer, offset }) => {
                    let mut tmp = vec![0u8; len];
                    device.memory.read(src, &mut tmp, context).map_err(fault)?;
                    let mut data = buffer.bytes()?;
                    let start = *offset as usize;
                    data.get_mut(start..start + len)
                        .ok_or_else(|| NpuError::InvalidParam("host range past the buffer".into()))?
                        .copy_from_slice(&tmp);
                    Ok(())
                }
                (copy_dir::D2D, _) => {
                    let mut tmp = vec![0u8; len];
                    device.memory.read(src, &mut tmp, context).map_err(fault)?;
                    device.memory.write(dst, &tmp, context).map_err(fault)
                }
                _ => Err(NpuError::Internal("malformed copy descriptor".into())),
            }
        }
        TaskKind::Memset => device
            .memory
            .fill(desc.args[0], desc.args[2], desc.args[1] as u8, context)
            .map_err(|f| NpuError::AicoreException {
                kernel: "memset".into(),
                detail: f.to_string(),
            }),
        _ => Err(NpuError::Internal("not a device-local task".into())),
    }
}
