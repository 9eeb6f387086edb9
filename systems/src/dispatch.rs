//! Dispatch: ready tasks go to free execution units — AI cores for kernels (up to block dim of
//! them), DMA engines for copies and memsets; event records and waits and host callbacks need
//! none. Higher-priority streams (lower numbers) go first; ties go to the older stream, then to
//! the earlier task, so the timeline never depends on iteration order.

use std::cmp::Reverse;

use bevy_ecs::prelude::*;
use npusim_components::collective::{Interconnect, LinkTimeline, Rendezvous};
use npusim_components::resources::{FrameStats, ReadyQueue, Running, SimClock, Timeline};
use npusim_components::task::copy_dir;
use npusim_components::{DeviceState, KernelRegistry, SimTime, Task, TaskKind, TaskStatus};
use npusim_device::cost::CopyDirection;

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
    ops: Res<npusim_components::shape::OpRegistry>,
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
        let (cores, dma, duration) = match task.kind() {
            TaskKind::Kernel => {
                if device.units.free_cores == 0 {
                    return true;
                }
                let block_dim = task.desc.block_dim.max(1);
                let cap = device.limits.core_cap(device.config.ai_cores);
                let cores = block_dim.min(device.units.free_cores).min(cap);
                let duration = match registry.get(npusim_components::Kernel(task.desc.kernel)) {
                    Some(k) if k.code.is_some() => {
                        let code = k.code.as_ref().expect("checked");
                        let (d, outcome) = crate::binary::run_binary(
                            &mut core_cache,
                            device,
                            task.context,
                            &task.desc,
                            &k.name,
                            code,
                            cores,
                            0,
                            &mut log,
                            ops.faults(),
                        );
                        // Raised when the task completes, like any fault.
                        if let Err(e) = outcome {
                            task.error = Some(Box::new(e));
                        }
                        d
                    }
                    Some(k) => {
                        let cost = (k.cost)(task.desc.arg_words(), block_dim);
                        device.config.kernel_duration_ns(&cost, block_dim, cores)
                    }
                    // Fails at completion with a clear error; costs only the launch.
                    None => device.config.kernel_launch_ns,
                };
                (cores, 0, duration)
            }
            TaskKind::Memcpy | TaskKind::Memset => {
                if device.units.free_dma == 0 {
                    return true;
                }
                let bytes = task.desc.args[2];
                let duration = if task.kind() == TaskKind::Memset {
                    device.config.memset_duration_ns(bytes)
                } else if task.desc.flags == copy_dir::PEER {
                    // Over the interconnect: waits while a link of its route is held.
                    let tl = comm.timeline.enabled.then_some(&mut *comm.link_timeline);
                    match crate::collective::reserve_peer_copy(
                        &mut comm.interconnect,
                        tl,
                        &task.desc,
                        device.config.dma_setup_ns,
                        now,
                    ) {
                        Some(d) => d,
                        None => return true,
                    }
                } else {
                    let dir = match task.desc.flags {
                        copy_dir::H2D => CopyDirection::HostToDevice,
                        copy_dir::D2H => CopyDirection::DeviceToHost,
                        _ => CopyDirection::DeviceToDevice,
                    };
                    device.config.copy_duration_ns(bytes, dir)
                };
                (0, 1, duration)
            }
            TaskKind::HostCallback => (0, 0, device.config.callback_ns),
            // Waits at the rendezvous for the other ranks (still `Ready`, off this queue).
            TaskKind::Collective => {
                comm.rendezvous.arriving.push(e);
                return false;
            }
            TaskKind::EventRecord | TaskKind::EventWait => (0, 0, 0),
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
