//! Dispatch: ready tasks go to free execution units — AI cores for kernels (up to block dim of
//! them), DMA engines for copies and memsets; event records and waits and host callbacks need
//! none. Higher-priority streams (lower numbers) go first; ties go to the older stream, then to
//! the earlier task, so the timeline never depends on iteration order.

use std::cmp::Reverse;

use bevy_ecs::prelude::*;
use npusim_components::resources::{FrameStats, ReadyQueue, Running, SimClock};
use npusim_components::task::copy_dir;
use npusim_components::{DeviceState, KernelRegistry, SimTime, Task, TaskKind, TaskStatus};
use npusim_device::cost::CopyDirection;

/// Assigns units, start and end times to ready tasks.
pub fn dispatch(
    clock: Res<SimClock>,
    mut ready: ResMut<ReadyQueue>,
    mut running: ResMut<Running>,
    mut tasks: Query<&mut Task>,
    mut devices: Query<&mut DeviceState>,
    registry: Res<KernelRegistry>,
    mut stats: ResMut<FrameStats>,
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
        let config = &device.config;
        let (cores, dma, duration) = match task.kind() {
            TaskKind::Kernel => {
                if device.units.free_cores == 0 {
                    return true;
                }
                let block_dim = task.desc.block_dim.max(1);
                let cores = block_dim.min(device.units.free_cores);
                let duration = match registry.get(npusim_components::Kernel(task.desc.kernel)) {
                    Some(k) => {
                        let cost = (k.cost)(task.desc.arg_words(), block_dim);
                        config.kernel_duration_ns(&cost, block_dim, cores)
                    }
                    // Fails at completion with a clear error; costs only the launch.
                    None => config.kernel_launch_ns,
                };
                (cores, 0, duration)
            }
            TaskKind::Memcpy | TaskKind::Memset => {
                if device.units.free_dma == 0 {
                    return true;
                }
                let bytes = task.desc.args[2];
                let duration = if task.kind() == TaskKind::Memset {
                    config.memset_duration_ns(bytes)
                } else {
                    let dir = match task.desc.flags {
                        copy_dir::H2D => CopyDirection::HostToDevice,
                        copy_dir::D2H => CopyDirection::DeviceToHost,
                        _ => CopyDirection::DeviceToDevice,
                    };
                    config.copy_duration_ns(bytes, dir)
                };
                (0, 1, duration)
            }
            TaskKind::HostCallback => (0, 0, config.callback_ns),
            TaskKind::EventRecord | TaskKind::EventWait | TaskKind::Collective => (0, 0, 0),
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
