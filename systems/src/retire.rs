//! Retire: finished tasks are written to the timeline (when it is on) and go back to the task
//! pool for reuse (or are despawned when the pool is full), so memory stays flat however many
//! tasks run.

use bevy_ecs::prelude::*;
use npusim_components::resources::{Finished, FrameStats, TaskPool, Timeline};
use npusim_components::{
    DeviceState, KernelRegistry, StreamKind, StreamState, Task, TaskExtra, TaskKind, TaskRecord,
    TaskStatus,
};

/// Records and recycles the tasks that finished this frame.
pub fn retire(world: &mut World, tasks: &mut QueryState<&mut Task>) {
    crate::zone!("npusim::retire");
    let mut finished = std::mem::take(&mut world.resource_mut::<Finished>().tasks);
    if finished.is_empty() {
        world.resource_mut::<Finished>().tasks = finished;
        return;
    }
    if world.resource::<Timeline>().enabled {
        let mut records = Vec::with_capacity(finished.len());
        for &e in &finished {
            let Some(task) = world.get::<Task>(e) else {
                continue;
            };
            let kind = task.kind();
            let name = match kind {
                TaskKind::Kernel => world
                    .resource::<KernelRegistry>()
                    .resolve(task.desc.kernel, task.desc.kernel_generation)
                    .map_or_else(|| "unknown kernel".to_string(), |k| k.name.clone()),
                TaskKind::Collective => npusim_components::CollectiveCall::decode(&task.desc)
                    .map_or("collective", |c| c.kind.name())
                    .to_string(),
                TaskKind::Memcpy if task.desc.is_peer_copy() => "memcpy_peer".to_string(),
                other => other.name().to_string(),
            };
            let device = world.get::<DeviceState>(task.device).map_or(0, |d| d.index);
            let stream_kind = world
                .get::<StreamState>(task.stream)
                .map_or(StreamKind::default(), |s| s.kind);
            let event = task.desc.as_event().map(|ev| (ev.event, ev.record));
            let bytes = task.desc.bytes_moved();
            records.push(TaskRecord {
                kind,
                name,
                stream: task.stream,
                device,
                seq: task.seq,
                submit: task.submit,
                start: task.start,
                end: task.end,
                cores: task.cores,
                ok: task.status == TaskStatus::Done,
                stream_kind,
                context: task.context,
                event,
                bytes,
            });
        }
        world.resource_mut::<Timeline>().records.extend(records);
    }
    let count = finished.len() as u64;
    let mut pool = std::mem::take(&mut world.resource_mut::<TaskPool>().free);
    for e in finished.drain(..) {
        if pool.len() < TaskPool::CAPACITY
            && let Ok(mut task) = tasks.get_mut(world, e)
        {
            // Drop what the task held (host buffers, a callback, an error) now, not at reuse.
            task.extra = TaskExtra::None;
            task.error = None;
            task.access.clear();
            task.status = TaskStatus::Retired;
            pool.push(e);
        } else {
            world.despawn(e);
        }
    }
    world.resource_mut::<TaskPool>().free = pool;
    world.resource_mut::<Finished>().tasks = finished;
    world.resource_mut::<FrameStats>().tasks_retired += count;
}
