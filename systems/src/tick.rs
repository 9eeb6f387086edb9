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
use npusim_components::collective::{PeerCopy, Rendezvous};
use npusim_components::resources::{AbortRequests, Devices, PendingCallbacks, Running, SimClock};
use npusim_components::{
    ContextState, ContextStatus, DeviceState, FailureMode, KernelBody, KernelCtx, KernelRegistry,
    NpuError, StreamState, Task, TaskExtra, TaskKind, TaskStatus,
};

use crate::complete::{Completion, Outcome};

/// Everything a finishing task may touch.
#[derive(bevy_ecs::system::SystemParam)]
pub struct TickWorld<'w, 's> {
    tasks: Query<'w, 's, &'static mut Task>,
    streams: Query<'w, 's, &'static mut StreamState>,
    contexts: Query<'w, 's, &'static mut ContextState>,
    completion: Completion<'w, 's>,
    registry: Res<'w, KernelRegistry>,
    aborts: ResMut<'w, AbortRequests>,
    callbacks: ResMut<'w, PendingCallbacks>,
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
    for (ctx, _) in std::mem::take(&mut w.aborts.contexts) {
        abort_context(&mut w, ctx);
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
    // Device-local work ending now runs first, devices side by side.
    execute_local_batch(&mut w, &batch);
    for &entity in batch.iter() {
        finish(&mut w, entity, now);
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
            if task.applied || !is_device_local(task) {
                continue;
            }
            let result = match w.completion.devices().get_mut(task.device) {
                Ok(mut d) => execute_local(task, &mut d, registry),
                Err(_) => Err(NpuError::Internal("task on a missing device".into())),
            };
            if let Ok(mut task) = w.tasks.get_mut(e) {
                task.applied = true;
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
            if task.applied || !is_device_local(task) {
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

/// Executes (unless applied ahead) and completes one task ending now; a fault then gets its
/// context's failure mode.
fn finish(w: &mut TickWorld, entity: Entity, now: npusim_components::SimTime) {
    let applied = match w.tasks.get_mut(entity) {
        Ok(mut t) if t.applied => t.error.take().map_or(Ok(()), |e| Err(*e)),
        Ok(_) => execute(w, entity, now),
        Err(_) => return,
    };
    let Ok(mut task) = w.tasks.get_mut(entity) else {
        return;
    };
    let Ok(mut stream) = w.streams.get_mut(task.stream) else {
        return;
    };
    let outcome = Outcome::from(applied);
    let failure = match &outcome {
        Outcome::Failed(err) => Some((task.context, err.clone())),
        _ => None,
    };
    w.completion
        .complete(entity, &mut task, &mut stream, outcome, now);
    if let Some((context, err)) = failure {
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
    abort_context(w, context_e);
    if let Ok(mut d) = w.completion.devices().get_mut(device) {
        d.memory.free_all_of(context_e);
    }
}

/// Aborts every queued (not yet running) task of the context's streams: they fail with
/// `ACL_ERROR_RT_STREAM_ABORT` when dependency resolution completes them, in stream order
/// (their event records never fire, so waiters stop waiting).
fn abort_context(w: &mut TickWorld, context_e: Entity) {
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
                task.error = Some(Box::new(NpuError::StreamAbort {
                    stream: format!("stream {s}"),
                    seq: task.seq,
                }));
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

/// Performs the effect of a task that was not applied ahead: cross-device work (peer copies,
/// collectives), host callbacks, and device-local work outside a parallel batch.
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
            crate::copy::execute_peer_copy(w.completion.devices(), &w.device_entities, &copy)
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
            &mut w.rendezvous,
            &w.workers,
            task,
        ),
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
            let Some(kernel) = registry.resolve(desc.kernel, desc.kernel_generation) else {
                return Err(NpuError::KernelNotFound(format!(
                    "kernel {}v{}",
                    desc.kernel, desc.kernel_generation
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
