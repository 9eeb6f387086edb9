//! Ingest: submissions rung on the doorbell since the last frame become task entities at the
//! back of their streams. API calls only push a descriptor; this is where the device sees it.
//! Entities of retired tasks are reused from the task pool, so steady-state submission neither
//! spawns nor despawns.

use bevy_ecs::prelude::*;
use npusim_components::resources::{Doorbell, FrameStats, TaskPool};
use npusim_components::{StreamState, Task};

/// Turns each doorbell entry into a task entity, in submission order.
pub fn ingest(
    world: &mut World,
    tasks: &mut QueryState<&mut Task>,
    streams: &mut QueryState<&mut StreamState>,
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
