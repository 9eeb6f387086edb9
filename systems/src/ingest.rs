//! Ingest: submissions rung on the doorbell since the last frame become task entities at the
//! back of their streams. API calls only push a descriptor; this is where the device sees it.
//! Entities of retired tasks are reused from the task pool, so steady-state submission neither
//! spawns nor despawns.

use bevy_ecs::prelude::*;
use npusim_components::resources::{Doorbell, FrameStats, TaskPool};
use npusim_components::task::{NewTask, copy_dir};
use npusim_components::{DeviceState, StreamState, Task, TaskKind};

/// Turns each doorbell entry into a task entity, in submission order.
pub fn ingest(
    world: &mut World,
    tasks: &mut QueryState<&mut Task>,
    streams: &mut QueryState<&mut StreamState>,
    devices: &mut QueryState<&mut DeviceState>,
) {
    crate::zone!("npusim::ingest");
    let mut pending = std::mem::take(&mut world.resource_mut::<Doorbell>().tasks);
    if pending.is_empty() {
        world.resource_mut::<Doorbell>().tasks = pending;
        return;
    }
    let count = pending.len() as u64;
    let mut pool = std::mem::take(&mut world.resource_mut::<TaskPool>().free);
    for new in pending.drain(..) {
        let stream = new.stream;
        note_uses(world, devices, &new);
        let task = match pool.pop() {
            Some(e) => match tasks.get_mut(world, e) {
                Ok(mut t) => {
                    *t = Task::from_new(new);
                    e
                }
                Err(_) => world.spawn(Task::from_new(new)).id(),
            },
            None => world.spawn(Task::from_new(new)).id(),
        };
        match streams.get_mut(world, stream) {
            Ok(mut s) => s.queue.push_back(task),
            // The API only submits to live streams and destroys a stream after draining it,
            // so this cannot happen; dropping the task is the safe answer if it ever does.
            Err(_) => {
                world.despawn(task);
            }
        }
    }
    world.resource_mut::<TaskPool>().free = pool;
    // Give the (now empty) vector back so its capacity is reused next frame.
    world.resource_mut::<Doorbell>().tasks = pending;
    let mut stats = world.resource_mut::<FrameStats>();
    stats.tasks_ingested += count;
    stats.last_frame_progressed = true;
}

/// Records, for deferred free, that this task's stream position uses the blocks its pointers
/// name (kernel arguments that are not floats, copy and memset addresses).
fn note_uses(world: &mut World, devices: &mut QueryState<&mut DeviceState>, new: &NewTask) {
    let d = &new.desc;
    let words: &[u64] = match d.task_kind() {
        Some(TaskKind::Kernel) => d.arg_words(),
        Some(TaskKind::Memcpy) => match d.flags {
            copy_dir::H2D => &d.args[..1],
            copy_dir::D2H => &d.args[1..2],
            _ => &d.args[..2],
        },
        Some(TaskKind::Memset) => &d.args[..1],
        // Send and receive buffers (the words of `collective::word`).
        Some(TaskKind::Collective) => &d.args[1..3],
        _ => return,
    };
    let Ok(mut device) = devices.get_mut(world, new.device) else {
        return;
    };
    for (i, &w) in words.iter().enumerate() {
        if d.task_kind() == Some(TaskKind::Kernel) && d.float_mask & (1 << i) != 0 {
            continue;
        }
        device
            .memory
            .note_use(new.context, w, (new.stream, new.seq));
    }
}
