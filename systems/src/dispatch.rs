//! Dispatch: ready tasks go to free execution units — AI cores for kernels (up to block dim of
//! them), DMA engines for copies and memsets; host callbacks need none. Higher-priority streams
//! (lower numbers) go first; ties go to the older stream, then to the earlier task, so the
//! timeline never depends on iteration order. (Event records and waits never come here: they
//! complete in dependency resolution.)
//!
//! A binary kernel runs on the AI cores here, because its cycles are its duration; its access
//! set becomes the byte ranges the cores touched. A kernel that a shape stage rejected (its
//! `error` is already set) does not run: it holds a core for the launch overhead and fails at
//! its end.

use std::cmp::Reverse;

use bevy_ecs::prelude::*;
use npusim_components::collective::{Interconnect, LinkTimeline, PeerCopy, Rendezvous};
use npusim_components::resources::{FrameStats, ReadyQueue, Running, SimClock, Timeline};
use npusim_components::{
    DeviceState, KernelBody, KernelRegistry, SimTime, Task, TaskKind, TaskStatus,
};

/// The interconnect side of dispatch: links for peer copies, the rendezvous for collectives.
#[derive(bevy_ecs::system::SystemParam)]
pub struct CommUnits<'w> {
    interconnect: ResMut<'w, Interconnect>,
    rendezvous: ResMut<'w, Rendezvous>,
    timeline: Res<'w, Timeline>,
    link_timeline: ResMut<'w, LinkTimeline>,
}

/// Assigns units, start and end times to ready tasks.
#[allow(clippy::too_many_arguments)]
pub fn dispatch(
    clock: Res<SimClock>,
    mut ready: ResMut<ReadyQueue>,
    mut running: ResMut<Running>,
    mut tasks: Query<&mut Task>,
    mut devices: Query<&mut DeviceState>,
    registry: Res<KernelRegistry>,
    mut stats: ResMut<FrameStats>,
    mut comm: CommUnits,
    mut core_cache: Local<crate::binary::CoreCache>,
    mut log: ResMut<npusim_components::binary::HostLog>,
) {
    crate::zone!("npusim::dispatch");
    if ready.tasks.is_empty() {
        return;
    }
    let now = clock.now;
    ready.tasks.sort_unstable_by_key(|(key, _)| *key);
    let running = &mut *running;
    let mut dispatched = 0u64;
    ready.tasks.retain(|&(_, e)| {
        let Ok(mut task) = tasks.get_mut(e) else {
            return false;
        };
        if task.status != TaskStatus::Ready {
            return false;
        }
        let Ok(mut device) = devices.get_mut(task.device) else {
            return false;
        };
        let device = &mut *device;
        let task = &mut *task;
        let (cores, dma, duration) = match task.kind() {
            TaskKind::Kernel => {
                if device.units.free_cores == 0 {
                    return true;
                }
                let block_dim = task.desc.block_dim.max(1);
                let cores = block_dim.min(device.units.free_cores);
                let entry = registry.resolve(task.desc.kernel, task.desc.kernel_generation);
                let duration = match entry.map(|k| (&k.name, &k.body)) {
                    // Rejected by a shape stage, or its kernel is gone: costs only the launch,
                    // fails at its end.
                    _ if task.error.is_some() => {
                        task.applied = true;
                        device.config.kernel_launch_ns
                    }
                    None => device.config.kernel_launch_ns,
                    Some((name, KernelBody::Binary(code))) => {
                        let (d, outcome) = crate::binary::run_binary(
                            &mut core_cache,
                            device,
                            task,
                            name,
                            code,
                            cores,
                            &mut log,
                        );
                        // Raised when the task completes, like any fault.
                        task.applied = true;
                        task.error = outcome.err().map(Box::new);
                        d
                    }
                    Some((_, KernelBody::Native(k))) => {
                        let cost = match task.extra.op() {
                            Some(op) => op.cost,
                            None => (k.cost)(task.desc.arg_words(), block_dim),
                        };
                        device.config.kernel_duration_ns(&cost, block_dim, cores)
                    }
                };
                (cores, 0, duration)
            }
            TaskKind::Memcpy | TaskKind::Memset => {
                if device.units.free_dma == 0 {
                    return true;
                }
                let duration = if let Some(m) = task.desc.as_memset() {
                    crate::copy::memset_duration_ns(&device.config, &m)
                } else if let Some(c) = task.desc.as_copy() {
                    crate::copy::copy_duration_ns(&device.config, &c)
                } else if let Some(p) = PeerCopy::decode(&task.desc) {
                    // Over the interconnect: waits while a link of its route is held.
                    let tl = comm.timeline.enabled.then_some(&mut *comm.link_timeline);
                    match crate::collective::reserve_peer_copy(
                        &mut comm.interconnect,
                        tl,
                        &p,
                        device.config.dma_setup_ns,
                        now,
                    ) {
                        Some(d) => d,
                        None => return true,
                    }
                } else {
                    // Corrupt words: fails at its end (the tick cannot decode it either).
                    0
                };
                (0, 1, duration)
            }
            TaskKind::HostCallback => (0, 0, device.config.callback_ns),
            // Waits at the rendezvous for the other ranks (still `Ready`, off this queue).
            TaskKind::Collective => {
                comm.rendezvous.arriving.push(e);
                return false;
            }
            // Completed by dependency resolution; never queued here.
            TaskKind::EventRecord | TaskKind::EventWait => return false,
        };
        device.units.free_cores -= cores;
        device.units.free_dma -= dma;
        task.cores = cores;
        task.dma = dma;
        task.start = now;
        task.end = now + SimTime(duration);
        task.status = TaskStatus::Running;
        running
            .heap
            .push(Reverse((task.end, running.next_order, e)));
        running.next_order += 1;
        dispatched += 1;
        false
    });
    if dispatched > 0 {
        stats.tasks_dispatched += dispatched;
        stats.last_frame_progressed = true;
    }
}
