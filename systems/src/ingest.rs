//! Ingest: submissions rung on the doorbell since the last frame become task entities at the
//! back of their streams. API calls only push a descriptor; this is where the device sees it.

use bevy_ecs::prelude::*;
use npusim_components::resources::{Doorbell, FrameStats};
use npusim_components::{StreamState, Task};

/// Spawns a task entity per doorbell entry, in submission order.
pub fn ingest(world: &mut World) {
    crate::zone!("npusim::ingest");
    let mut pending = std::mem::take(&mut world.resource_mut::<Doorbell>().tasks);
    if pending.is_empty() {
        world.resource_mut::<Doorbell>().tasks = pending;
        return;
    }
    let count = pending.len() as u64;
    for new in pending.drain(..) {
        let stream = new.stream;
        let task = world.spawn(Task::from_new(new)).id();
        match world.get_mut::<StreamState>(stream) {
            Some(mut s) => s.queue.push_back(task),
            // The API only submits to live streams and destroys a stream after draining it,
            // so this cannot happen; dropping the task is the safe answer if it ever does.
            None => {
                world.despawn(task);
            }
        }
    }
    // Give the (now empty) vector back so its capacity is reused next frame.
    world.resource_mut::<Doorbell>().tasks = pending;
    let mut stats = world.resource_mut::<FrameStats>();
    stats.tasks_ingested += count;
    stats.last_frame_progressed = true;
}
