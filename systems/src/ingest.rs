//! Ingest: submissions rung on the doorbell since the last frame become task entities at the
//! back of their streams. API calls only push a descriptor; this is where the device sees it.
//! Entities of retired tasks are reused from the task pool, so steady-state submission neither
//! spawns nor despawns.

use bevy_ecs::prelude::*;
use npusim_components::resources::{Doorbell, FrameStats, TaskPool};
use npusim_components::task::{NewTask, copy_dir};
use npusim_components::{DeviceState, StreamState, Task, TaskKind};

/// Scratch buffers of [`ingest`], kept between frames so steady state allocates nothing.
#[derive(Default)]
pub struct IngestScratch {
    entities: Vec<Entity>,
    streams: Vec<Entity>,
    missing: Vec<(usize, NewTask)>,
}

/// Turns each doorbell entry into a task entity, in submission order.
pub fn ingest(
    world: &mut World,
    tasks: &mut QueryState<&mut Task>,
    streams: &mut QueryState<&mut StreamState>,
    devices: &mut QueryState<&mut DeviceState>,
    mut scratch: Local<IngestScratch>,
) {
    crate::zone!("npusim::ingest");
    let mut pending = std::mem::take(&mut world.resource_mut::<Doorbell>().tasks);
    if pending.is_empty() {
        world.resource_mut::<Doorbell>().tasks = pending;
        return;
    }
    let scratch = &mut *scratch;
    let count = pending.len() as u64;
    // Deferred free needs to know which stream positions name which blocks.
    {
        let mut devices = devices.query_mut(&mut *world);
        for new in &pending {
            let words = address_words(new);
            if words.iter().any(|&w| w >= npusim_device::abi::HEAP_BASE)
                && let Ok(mut device) = devices.get_mut(new.device)
            {
                for w in words {
                    device
                        .memory
                        .note_use(new.context, w, (new.stream, new.seq));
                }
            }
        }
    }
    scratch.entities.clear();
    scratch.streams.clear();
    scratch.streams.extend(pending.iter().map(|n| n.stream));
    let mut pool = std::mem::take(&mut world.resource_mut::<TaskPool>().free);
    let mut rest = pending.drain(..);
    // Reuse retired task entities first (one archetype update for the whole batch) ...
    {
        let mut q = tasks.query_mut(&mut *world);
        while !pool.is_empty() {
            let Some(new) = rest.next() else { break };
            let e = pool.pop().expect("not empty");
            match q.get_mut(e) {
                Ok(mut t) => {
                    *t = Task::from_new(new);
                    scratch.entities.push(e);
                }
                // Someone despawned a pooled entity by hand: spawn a new one below.
                Err(_) => {
                    scratch.missing.push((scratch.entities.len(), new));
                    scratch.entities.push(Entity::PLACEHOLDER);
                }
            }
        }
    }
    // ... then spawn the rest in one batch.
    scratch
        .entities
        .extend(world.spawn_batch(rest.map(Task::from_new)));
    for (i, new) in scratch.missing.drain(..) {
        scratch.entities[i] = world.spawn(Task::from_new(new)).id();
    }
    let mut orphans = Vec::new();
    {
        let mut q = streams.query_mut(&mut *world);
        for (&task, &stream) in scratch.entities.iter().zip(&scratch.streams) {
            match q.get_mut(stream) {
                Ok(mut s) => s.queue.push_back(task),
                // The API only submits to live streams and destroys a stream after draining
                // it, so this cannot happen; dropping the task is the safe answer if it does.
                Err(_) => orphans.push(task),
            }
        }
    }
    for task in orphans {
        world.despawn(task);
    }
    world.resource_mut::<TaskPool>().free = pool;
    // Give the (now empty) vector back so its capacity is reused next frame.
    world.resource_mut::<Doorbell>().tasks = pending;
    let mut stats = world.resource_mut::<FrameStats>();
    stats.tasks_ingested += count;
    stats.last_frame_progressed = true;
}

/// The words of a task that may be device addresses of its context: kernel arguments that are
/// not floats, copy and memset addresses, collective buffers.
fn address_words(new: &NewTask) -> smallvec::SmallVec<[u64; 8]> {
    let d = &new.desc;
    match d.task_kind() {
        Some(TaskKind::Kernel) => d
            .arg_words()
            .iter()
            .enumerate()
            .filter(|(i, _)| d.float_mask & (1 << i) == 0)
            .map(|(_, &w)| w)
            .collect(),
        Some(TaskKind::Memcpy) => match d.flags {
            copy_dir::H2D => d.args[..1].into(),
            copy_dir::D2H => d.args[1..2].into(),
            _ => d.args[..2].into(),
        },
        Some(TaskKind::Memset) => d.args[..1].into(),
        // Send and receive buffers (the words of `collective::word`).
        Some(TaskKind::Collective) => d.args[1..3].into(),
        _ => smallvec::SmallVec::new(),
    }
}
