//! Ingest: submissions rung on the doorbell since the last frame become task entities at the
//! back of their streams. API calls only push a descriptor; this is where the device sees it.
//! Each task gets what its stream knows (its context and device) and its access set — the
//! device memory it reads and writes ([`npusim_components::access`]) — computed once, here;
//! every block an access names then waits for the task's stream position before a pending free
//! may release it. Entities of retired tasks are reused from the task pool, so steady-state
//! submission neither spawns nor despawns.

use bevy_ecs::prelude::*;
use npusim_components::access::{Access, AccessMode, Space};
use npusim_components::collective::{CollectiveCall, PeerCopy};
use npusim_components::memory::StreamPosition;
use npusim_components::resources::{Devices, Doorbell, FrameStats, TaskPool};
use npusim_components::task::CopyDir;
use npusim_components::{DeviceState, KernelRegistry, StreamState, Task, TaskKind};

/// A block use to note: (device entity, context, address, stream position).
type Use = (Entity, Entity, u64, StreamPosition);

/// Scratch buffers of [`ingest`], kept between frames so steady state allocates nothing.
#[derive(Default)]
pub struct IngestScratch {
    placed: Vec<(Entity, Entity, Entity)>,
    entities: Vec<Entity>,
    missing: Vec<(usize, Task)>,
    uses: Vec<Use>,
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
    if world.resource::<Doorbell>().tasks.is_empty() {
        return;
    }
    let mut pending = std::mem::take(&mut world.resource_mut::<Doorbell>().tasks);
    let scratch = &mut *scratch;
    let count = pending.len() as u64;
    // What each stream knows: its context and device. The API only submits to live streams
    // and destroys a stream after draining it; an entry whose stream is gone is dropped.
    scratch.placed.clear();
    {
        let q = streams.query_mut(&mut *world);
        pending.retain(|n| match q.get(n.stream) {
            Ok(s) => {
                scratch.placed.push((n.stream, s.context, s.device));
                true
            }
            Err(_) => false,
        });
    }
    world.resource_scope(|world, registry: Mut<KernelRegistry>| {
        let peers = std::mem::take(&mut world.resource_mut::<Devices>().entities);
        let mut pool = std::mem::take(&mut world.resource_mut::<TaskPool>().free);
        scratch.entities.clear();
        scratch.uses.clear();
        let mut placed = scratch.placed.iter();
        let mut rest = pending.drain(..);
        // Reuse retired task entities first (one archetype update for the whole batch) ...
        {
            let mut q = tasks.query_mut(&mut *world);
            while !pool.is_empty() {
                let Some(new) = rest.next() else { break };
                let &(_, context, device) = placed.next().expect("one per entry");
                let e = pool.pop().expect("not empty");
                match q.get_mut(e) {
                    Ok(mut t) => {
                        t.reuse(new, context, device);
                        declare_access(&mut t, &registry);
                        note_uses(&t, &peers, &mut scratch.uses);
                        scratch.entities.push(e);
                    }
                    // Someone despawned a pooled entity by hand: spawn a new one below.
                    Err(_) => {
                        let mut t = Task::from_new(new, context, device);
                        declare_access(&mut t, &registry);
                        note_uses(&t, &peers, &mut scratch.uses);
                        scratch.missing.push((scratch.entities.len(), t));
                        scratch.entities.push(Entity::PLACEHOLDER);
                    }
                }
            }
        }
        // ... then spawn the rest in one batch.
        let uses = &mut scratch.uses;
        let fresh = rest.zip(placed).map(|(new, &(_, context, device))| {
            let mut t = Task::from_new(new, context, device);
            declare_access(&mut t, &registry);
            note_uses(&t, &peers, uses);
            t
        });
        scratch.entities.extend(world.spawn_batch(fresh));
        for (i, t) in scratch.missing.drain(..) {
            scratch.entities[i] = world.spawn(t).id();
        }
        world.resource_mut::<TaskPool>().free = pool;
        world.resource_mut::<Devices>().entities = peers;
    });
    {
        let mut q = streams.query_mut(&mut *world);
        for (&task, &(stream, _, _)) in scratch.entities.iter().zip(&scratch.placed) {
            if let Ok(mut s) = q.get_mut(stream) {
                s.queue.push_back(task);
            }
        }
    }
    if !scratch.uses.is_empty() {
        let mut q = devices.query_mut(&mut *world);
        for &(device, context, addr, pos) in &scratch.uses {
            if let Ok(mut d) = q.get_mut(device) {
                d.memory.note_use(context, addr, pos);
            }
        }
    }
    // Give the (now empty) vector back so its capacity is reused next frame.
    world.resource_mut::<Doorbell>().tasks = pending;
    let mut stats = world.resource_mut::<FrameStats>();
    stats.tasks_ingested += count;
    stats.last_frame_progressed = true;
}

/// The access set a task declares before it runs, from its kind's words (see
/// [`npusim_components::access`] for what each kind knows).
pub fn declare_access(task: &mut Task, registry: &KernelRegistry) {
    let kind = task.kind();
    let desc = &task.desc;
    let out = &mut task.access;
    out.clear();
    match kind {
        TaskKind::Kernel => {
            if let Some(op) = task.extra.op() {
                // Until shape propagation resolves the shapes: the blocks behind the tensors.
                out.mark_inexact();
                for (i, &addr) in desc.arg_words().iter().take(op.tensor_count()).enumerate() {
                    let mode = if i < op.n_in as usize {
                        AccessMode::Read
                    } else {
                        AccessMode::Write
                    };
                    out.push(block_of(addr, mode));
                }
            } else if let Some(k) = registry.resolve(desc.kernel, desc.kernel_generation) {
                k.accesses(desc.arg_words(), desc.float_mask, desc.block_dim, out);
            }
        }
        TaskKind::Memcpy => {
            if let Some(c) = desc.as_copy() {
                match c.dir {
                    CopyDir::HostToDevice => out.push(Access::write(c.dst, c.bytes)),
                    CopyDir::DeviceToHost => out.push(Access::read(c.src, c.bytes)),
                    _ => {
                        out.push(Access::read(c.src, c.bytes));
                        out.push(Access::write(c.dst, c.bytes));
                    }
                }
            } else if let Some(p) = PeerCopy::decode(desc) {
                let (src_space, dst_space) = if p.src_ctx == task.context {
                    (Space::Local, Space::Peer)
                } else {
                    (Space::Peer, Space::Local)
                };
                out.push(Access {
                    space: src_space,
                    ..Access::read(p.src, p.bytes)
                });
                out.push(Access {
                    space: dst_space,
                    ..Access::write(p.dst, p.bytes)
                });
            }
        }
        TaskKind::Memset => {
            if let Some(m) = desc.as_memset() {
                out.push(Access::write(m.dst, m.bytes));
            }
        }
        TaskKind::Collective => {
            if let Some(c) = CollectiveCall::decode(desc) {
                c.accesses(out);
            }
        }
        TaskKind::EventRecord | TaskKind::EventWait | TaskKind::HostCallback => {}
    }
}

fn block_of(addr: u64, mode: AccessMode) -> Access {
    Access {
        addr,
        bytes: 0,
        mode,
        space: Space::Local,
    }
}

/// The block uses a task's access set implies, with the device and context each is in.
fn note_uses(task: &Task, devices: &[Entity], out: &mut Vec<Use>) {
    let pos = (task.stream, task.seq);
    for a in task.access.ranges() {
        if a.addr < npusim_device::abi::HEAP_BASE {
            continue;
        }
        match a.space {
            Space::Local => out.push((task.device, task.context, a.addr, pos)),
            Space::Peer => {
                let Some(p) = PeerCopy::decode(&task.desc) else {
                    continue;
                };
                let (index, ctx) = if p.src_ctx == task.context {
                    (p.dst_device, p.dst_ctx)
                } else {
                    (p.src_device, p.src_ctx)
                };
                if let Some(&d) = devices.get(index as usize) {
                    out.push((d, ctx, a.addr, pos));
                }
            }
        }
    }
}
