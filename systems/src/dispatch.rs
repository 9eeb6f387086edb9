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
use npusim_components::binary::HostLog;
use npusim_components::collective::{Interconnect, LinkTimeline, PeerCopy, Rendezvous};
use npusim_components::resources::{FrameStats, ReadyQueue, Running, SimClock, Timeline};

use npusim_components::{
    DeviceState, KernelBody, KernelRegistry, NpuError, SimTime, Task, TaskKind, TaskStatus,
};

/// The interconnect side of dispatch: links for peer copies, the rendezvous for collectives
/// (looked up only when a peer copy or a collective is dispatched).
#[derive(bevy_ecs::system::SystemParam)]
pub struct CommUnits<'w> {
    interconnect: Option<ResMut<'w, Interconnect>>,
    rendezvous: Option<ResMut<'w, Rendezvous>>,
    timeline: Option<Res<'w, Timeline>>,
    link_timeline: Option<ResMut<'w, LinkTimeline>>,
}

/// What only a binary kernel's dispatch reads: the host log its `printf`s go to and the
/// execution mode (a timing-only replay's recorded runs, the binary log).
#[derive(bevy_ecs::system::SystemParam)]
pub struct BinaryUnits<'w> {
    log: Option<ResMut<'w, HostLog>>,
    mode: Option<ResMut<'w, npusim_components::ExecutionMode>>,
}

/// Assigns units, start and end times to ready tasks.
#[allow(clippy::too_many_arguments)]
pub fn dispatch(
    clock: Option<Res<SimClock>>,
    mut ready: Option<ResMut<ReadyQueue>>,
    mut running: Option<ResMut<Running>>,
    mut tasks: Query<&mut Task>,
    mut devices: Query<&mut DeviceState>,
    registry: Option<Res<KernelRegistry>>,
    mut stats: Option<ResMut<FrameStats>>,
    mut comm: CommUnits,
    mut core_cache: Local<crate::binary::CoreCache>,
    mut binary: BinaryUnits,
) {
    crate::zone!("npusim::dispatch");
    let Some(ready) = ready.as_deref_mut() else {
        return;
    };
    if ready.tasks.is_empty() {
        return;
    }
    let (Some(clock), Some(running), Some(registry), Some(stats)) = (
        clock.as_deref(),
        running.as_deref_mut(),
        registry.as_deref(),
        stats.as_deref_mut(),
    ) else {
        return;
    };
    let now = clock.now;
    ready.tasks.sort_unstable_by_key(|(key, _)| *key);
    let running = &mut *running;
    let mut dispatched = 0u64;
    let mut queue = std::mem::take(&mut ready.tasks);
    let mut device: Option<(Entity, Mut<DeviceState>)> = None;
    let mut kept = 0;
    for i in 0..queue.len() {
        let (key, e) = queue[i];
        let keep = 'one: {
            let Ok(mut task) = tasks.get_mut(e) else {
                break 'one false;
            };
            if task.status != TaskStatus::Ready {
                break 'one false;
            }
            // Ready tasks are mostly of one device: look it up again only when it changes.
            if device.as_ref().is_none_or(|(d, _)| *d != task.device) {
                device = None;
                match devices.get_mut(task.device) {
                    Ok(d) => device = Some((task.device, d)),
                    Err(_) => break 'one false,
                }
            }
            let device = &mut *device.as_mut().expect("looked up above").1;
            let task = &mut *task;
            let (cores, dma, duration) = match task.kind() {
                TaskKind::Kernel => {
                    if device.units.free_cores == 0 {
                        break 'one true;
                    }
                    let block_dim = task.desc.block_dim.max(1);
                    let cap = device.limits.core_cap(&device.config);
                    let cores = block_dim.min(device.units.free_cores).min(cap);
                    let entry = registry.resolve(task.desc.kernel_slot());
                    let duration = match entry.map(|k| (&k.name, &k.body)) {
                        // Rejected by a shape stage, or its kernel is gone: costs only the launch,
                        // fails at its end.
                        _ if task.error.is_some() => {
                            task.applied = true;
                            device.config.kernel_launch_ns
                        }
                        None => device.config.kernel_launch_ns,
                        Some((name, KernelBody::Binary(code))) => {
                            let mut mode = binary.mode.as_deref_mut();
                            let recorded = match mode.as_deref_mut() {
                                Some(m) if m.timing_only && !m.recorded.is_empty() => {
                                    m.recorded.remove(&(task.stream, task.seq))
                                }
                                _ => None,
                            };
                            task.applied = true;
                            if let Some(run) = recorded {
                                // Timing-only, recorded: priced from the recording, not run.
                                crate::binary::price_recorded(device, task, code, cores, &run)
                            } else if let Some(log) = binary.log.as_deref_mut() {
                                let (d, outcome) = crate::binary::run_binary(
                                    &mut core_cache,
                                    device,
                                    task,
                                    name,
                                    code,
                                    cores,
                                    log,
                                    mode.as_ref().and_then(|m| m.binary_log.as_ref()),
                                );
                                // Raised when the task completes, like any fault.
                                task.error = outcome.err().map(Box::new);
                                d
                            } else {
                                // No host log in this world: its output would be lost.
                                fail_at_end(task, NpuError::missing_resource::<HostLog>())
                            }
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
                        break 'one true;
                    }
                    let duration = if let Some(m) = task.desc.as_memset() {
                        crate::copy::memset_duration_ns(&device.config, &m)
                    } else if let Some(c) = task.desc.as_copy() {
                        crate::copy::copy_duration_ns(&device.config, &c)
                    } else if let Some(p) = PeerCopy::decode(&task.desc) {
                        // Over the interconnect: waits while a link of its route is held.
                        let timeline_on = comm.timeline.as_deref().is_some_and(|t| t.enabled);
                        match (
                            comm.interconnect.as_deref_mut(),
                            comm.link_timeline.as_deref_mut(),
                        ) {
                            (Some(links), link_timeline) => {
                                let tl = link_timeline.filter(|_| timeline_on);
                                match crate::collective::reserve_peer_copy(
                                    links,
                                    tl,
                                    &p,
                                    device.config.dma_setup_ns,
                                    now,
                                ) {
                                    Some(d) => d,
                                    None => break 'one true,
                                }
                            }
                            // No interconnect in this world: nothing can carry it.
                            (None, _) => {
                                fail_at_end(task, NpuError::missing_resource::<Interconnect>())
                            }
                        }
                    } else {
                        // Corrupt words: fails at its end (the tick cannot decode it either).
                        0
                    };
                    (0, 1, duration)
                }
                TaskKind::HostCallback => (0, 0, device.config.callback_ns),
                // Waits at the rendezvous for the other ranks (still `Ready`, off this queue).
                TaskKind::Collective => match comm.rendezvous.as_deref_mut() {
                    Some(r) => {
                        r.arriving.push(e);
                        break 'one false;
                    }
                    // No rendezvous in this world: it cannot meet its peers.
                    None => (
                        0,
                        0,
                        fail_at_end(task, NpuError::missing_resource::<Rendezvous>()),
                    ),
                },
                // Completed by dependency resolution; never queued here.
                TaskKind::EventRecord | TaskKind::EventWait => break 'one false,
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
        };
        if keep {
            queue[kept] = (key, e);
            kept += 1;
        }
    }
    queue.truncate(kept);
    ready.tasks = queue;
    if dispatched > 0 {
        stats.tasks_dispatched += dispatched;
        stats.last_frame_progressed = true;
    }
}

/// Marks `task` to fail at its end with `err` (what it needs is not in this world: a resource
/// an embedder removed); it takes no time.
fn fail_at_end(task: &mut Task, err: NpuError) -> u64 {
    task.error = Some(Box::new(err));
    task.applied = true;
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::task::{CopyDir, CopyView, MemsetView, TaskDescriptor};
    use npusim_components::{NpuError, TaskExtra};
    use npusim_device::cost::KernelCost;

    fn ready_task(world: &mut World, stream: Entity, desc: TaskDescriptor) -> Entity {
        let t = enqueue(world, stream, desc);
        make_ready(world, t);
        t
    }

    /// Dispatch order of each running task (its place in the running queue's tie-break).
    fn dispatch_order(world: &World, t: Entity) -> Option<u64> {
        world
            .resource::<Running>()
            .heap
            .iter()
            .find(|Reverse((_, _, e))| *e == t)
            .map(|Reverse((_, order, _))| *order)
    }

    fn waiting(world: &World) -> Vec<Entity> {
        world
            .resource::<ReadyQueue>()
            .tasks
            .iter()
            .map(|&(_, e)| e)
            .collect()
    }

    #[test]
    fn higher_priority_first_then_the_older_stream_then_the_earlier_task() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "k", 1e3, |_| Ok(()));
        // Created in this order: low (priority 1), old (0), young (0).
        let low = spawn_stream(&mut s.world, s.ctx, 1);
        let old = spawn_stream(&mut s.world, s.ctx, 0);
        let young = spawn_stream(&mut s.world, s.ctx, 0);
        // Ready in the opposite of the order dispatch should pick them.
        let l = ready_task(&mut s.world, low, launch(k, 1, &[]));
        let y = ready_task(&mut s.world, young, launch(k, 1, &[]));
        let earlier = enqueue(&mut s.world, old, launch(k, 1, &[]));
        let later = enqueue(&mut s.world, old, launch(k, 1, &[]));
        make_ready(&mut s.world, later);
        make_ready(&mut s.world, earlier);
        run(&mut s.world, dispatch);

        let order: Vec<Option<u64>> = [earlier, later, y, l]
            .iter()
            .map(|&t| dispatch_order(&s.world, t))
            .collect();
        assert_eq!(order, vec![Some(0), Some(1), Some(2), Some(3)]);
    }

    #[test]
    fn with_a_resource_missing_dispatch_leaves_its_work_alone() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "k", 1e3, |_| Ok(()));
        let t = ready_task(&mut s.world, s.stream, launch(k, 1, &[]));
        // An embedder removed the frame counters: no task is half dispatched.
        let stats = s.world.remove_resource::<FrameStats>().unwrap();
        run(&mut s.world, dispatch);
        assert_eq!(task(&s.world, t).status, TaskStatus::Ready);
        assert_eq!(waiting(&s.world), vec![t]);
        // Without the ready queue there is nothing to look at.
        let ready = s.world.remove_resource::<ReadyQueue>().unwrap();
        run(&mut s.world, dispatch);
        // Put back, the work goes on.
        s.world.insert_resource(stats);
        s.world.insert_resource(ready);
        run(&mut s.world, dispatch);
        assert_eq!(task(&s.world, t).status, TaskStatus::Running);
        assert!(waiting(&s.world).is_empty());
    }

    #[test]
    fn when_cores_run_out_the_lower_priority_task_waits() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "k", 1e3, |_| Ok(()));
        let low = spawn_stream(&mut s.world, s.ctx, 5);
        let high = spawn_stream(&mut s.world, s.ctx, -5);
        let cores = device(&s.world, s.device).config.ai_cores;
        let l = ready_task(&mut s.world, low, launch(k, cores, &[]));
        let h = ready_task(&mut s.world, high, launch(k, cores, &[]));
        run(&mut s.world, dispatch);

        assert_eq!(task(&s.world, h).status, TaskStatus::Running);
        assert_eq!(task(&s.world, l).status, TaskStatus::Ready);
        assert_eq!(waiting(&s.world), vec![l]);
    }

    #[test]
    fn a_kernel_takes_at_most_the_free_cores_and_waits_when_none_are_free() {
        let mut s = setup();
        s.world.resource_mut::<SimClock>().now = SimTime(1_000);
        let flops = 1e9;
        let k = register_kernel(&mut s.world, "k", flops, |_| Ok(()));
        let (a, b, c) = (
            spawn_stream(&mut s.world, s.ctx, 0),
            spawn_stream(&mut s.world, s.ctx, 0),
            spawn_stream(&mut s.world, s.ctx, 0),
        );
        // 4 cores: 3 for the first, the last 1 for the second (asking 8), none for the third.
        let first = ready_task(&mut s.world, a, launch(k, 3, &[]));
        let second = ready_task(&mut s.world, b, launch(k, 8, &[]));
        let third = ready_task(&mut s.world, c, launch(k, 1, &[]));
        run(&mut s.world, dispatch);

        let config = device(&s.world, s.device).config.clone();
        let cost = KernelCost::vector(flops, 0.0);
        let t1 = task(&s.world, first);
        assert_eq!((t1.cores, t1.status), (3, TaskStatus::Running));
        assert_eq!(t1.start, SimTime(1_000));
        assert_eq!(
            t1.end - t1.start,
            SimTime(config.kernel_duration_ns(&cost, 3, 3))
        );
        let t2 = task(&s.world, second);
        assert_eq!(t2.cores, 1);
        assert_eq!(
            t2.end - t2.start,
            SimTime(config.kernel_duration_ns(&cost, 8, 1)),
            "8 blocks in waves on one core"
        );
        assert_eq!(task(&s.world, third).status, TaskStatus::Ready);
        assert_eq!(waiting(&s.world), vec![third]);
        assert_eq!(device(&s.world, s.device).units.free_cores, 0);
        assert_eq!(s.world.resource::<FrameStats>().tasks_dispatched, 2);
    }

    #[test]
    fn copies_and_memsets_take_a_dma_engine_and_wait_when_none_is_free() {
        let mut s = setup();
        let a = alloc(&mut s.world, s.device, s.ctx, 4096);
        let copy = TaskDescriptor::copy(CopyView {
            dst: a,
            src: a + 2048,
            bytes: 1024,
            dir: CopyDir::DeviceToDevice,
        });
        let memset = TaskDescriptor::memset(MemsetView {
            dst: a,
            value: 1,
            bytes: 4096,
        });
        let streams: Vec<Entity> = (0..3)
            .map(|_| spawn_stream(&mut s.world, s.ctx, 0))
            .collect();
        let c = ready_task(&mut s.world, streams[0], copy);
        let m = ready_task(&mut s.world, streams[1], memset);
        let late = ready_task(&mut s.world, streams[2], copy);
        run(&mut s.world, dispatch);

        let config = device(&s.world, s.device).config.clone();
        assert_eq!(config.dma_engines, 2);
        let tc = task(&s.world, c);
        assert_eq!((tc.dma, tc.cores, tc.status), (1, 0, TaskStatus::Running));
        assert_eq!(
            tc.end - tc.start,
            SimTime(
                config.copy_duration_ns(1024, npusim_device::cost::CopyDirection::DeviceToDevice)
            )
        );
        let tm = task(&s.world, m);
        assert_eq!(tm.dma, 1);
        assert_eq!(tm.end - tm.start, SimTime(config.memset_duration_ns(4096)));
        assert_eq!(task(&s.world, late).status, TaskStatus::Ready);
        let units = &device(&s.world, s.device).units;
        assert_eq!((units.free_dma, units.free_cores), (0, config.ai_cores));
    }

    #[test]
    fn a_host_callback_needs_no_unit() {
        let mut s = setup();
        {
            let mut d = s.world.get_mut::<DeviceState>(s.device).unwrap();
            d.units.free_cores = 0;
            d.units.free_dma = 0;
        }
        let t = ready_task(
            &mut s.world,
            s.stream,
            TaskDescriptor::new(TaskKind::HostCallback),
        );
        run(&mut s.world, dispatch);
        let callback_ns = device(&s.world, s.device).config.callback_ns;
        let t = task(&s.world, t);
        assert_eq!(t.status, TaskStatus::Running);
        assert_eq!(t.end - t.start, SimTime(callback_ns));
    }

    #[test]
    fn a_task_a_shape_stage_rejected_is_applied_and_costs_only_the_launch() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "heavy", 1e15, |_| Ok(()));
        let t = enqueue(&mut s.world, s.stream, launch(k, 2, &[]));
        let err = NpuError::InvalidShape("rank 3 where 2 was expected".into());
        s.world.get_mut::<Task>(t).unwrap().error = Some(Box::new(err.clone()));
        make_ready(&mut s.world, t);
        run(&mut s.world, dispatch);

        let launch_ns = device(&s.world, s.device).config.kernel_launch_ns;
        let t = task(&s.world, t);
        assert!(t.applied, "it will not run");
        assert_eq!(t.error.as_deref(), Some(&err), "and fails with its error");
        assert_eq!(t.status, TaskStatus::Running);
        assert_eq!(t.end - t.start, SimTime(launch_ns));
    }

    #[test]
    fn work_whose_unit_is_missing_from_the_world_fails_at_its_end_instead_of_waiting() {
        use npusim_components::collective::{CollectiveCall, CollectiveKind, DataType, ReduceOp};
        let mut s = setup();
        s.world.remove_resource::<Interconnect>();
        s.world.remove_resource::<Rendezvous>();
        // Of another context: the copy's fault stops its own context only.
        let other_ctx = spawn_context(&mut s.world, s.device);
        let other = spawn_stream(&mut s.world, other_ctx, 0);
        let copy = PeerCopy {
            dst: 0x1000,
            src: 0x2000,
            bytes: 64,
            src_device: 0,
            dst_device: 1,
            src_ctx: s.ctx,
            dst_ctx: s.ctx,
        };
        let collective = CollectiveCall {
            kind: CollectiveKind::AllReduce,
            dtype: DataType::F32,
            op: ReduceOp::Sum,
            comm: Entity::PLACEHOLDER,
            send: 0x1000,
            recv: 0x2000,
            count: 4,
            rank: 0,
            peer: 0,
            seq: 1,
            bytes: 16,
        };
        // A binary kernel with nowhere to print.
        s.world
            .remove_resource::<npusim_components::binary::HostLog>();
        let binary = s.world.spawn_empty().id();
        let k = s
            .world
            .resource_mut::<KernelRegistry>()
            .register_function(binary, "k", || npusim_components::binary::BinaryCode {
                program: std::sync::Arc::new(npusim_device::core::Program::decode(0, &[])),
                entry: 0,
                binary,
                context: Entity::PLACEHOLDER,
                kind: Default::default(),
            });
        let third_ctx = spawn_context(&mut s.world, s.device);
        let third = spawn_stream(&mut s.world, third_ctx, 0);
        let c = ready_task(&mut s.world, s.stream, copy.encode());
        let r = ready_task(&mut s.world, other, collective.encode());
        let b = ready_task(&mut s.world, third, launch(k, 1, &[]));
        run(&mut s.world, dispatch);
        for (t, missing) in [(c, "Interconnect"), (r, "Rendezvous"), (b, "HostLog")] {
            let t = task(&s.world, t);
            assert!(t.applied);
            assert_eq!(
                t.error.as_deref(),
                Some(&NpuError::MissingResource(missing))
            );
            assert_eq!((t.status, t.end), (TaskStatus::Running, t.start));
        }
        run(&mut s.world, crate::tick::hardware_tick);
        assert_eq!(task(&s.world, c).status, TaskStatus::Failed);
        assert_eq!(task(&s.world, r).status, TaskStatus::Failed);
        assert_eq!(task(&s.world, b).status, TaskStatus::Failed);
        assert!(waiting(&s.world).is_empty(), "nothing is left waiting");
    }

    #[test]
    fn a_launch_of_an_unloaded_kernel_costs_only_the_launch() {
        let mut s = setup();
        let stale = unloaded_kernel(&mut s.world);
        let t = ready_task(&mut s.world, s.stream, launch(stale, 1, &[]));
        run(&mut s.world, dispatch);
        let launch_ns = device(&s.world, s.device).config.kernel_launch_ns;
        let t = task(&s.world, t);
        assert_eq!(t.end - t.start, SimTime(launch_ns));
        assert!(!t.applied, "the tick reports the missing kernel");
    }

    #[test]
    fn a_ready_task_aborted_before_dispatch_leaves_the_queue_without_running() {
        let mut s = setup();
        let t = ready_task(
            &mut s.world,
            s.stream,
            TaskDescriptor::new(TaskKind::HostCallback),
        );
        s.world.get_mut::<Task>(t).unwrap().status = TaskStatus::Aborted;
        run(&mut s.world, dispatch);
        assert!(waiting(&s.world).is_empty());
        assert!(s.world.resource::<Running>().heap.is_empty());
        assert_eq!(task(&s.world, t).status, TaskStatus::Aborted);
    }

    #[test]
    fn a_copy_with_its_host_buffer_dispatches_like_any_copy() {
        let mut s = setup();
        let a = alloc(&mut s.world, s.device, s.ctx, 64);
        let t = enqueue_with(
            &mut s.world,
            s.stream,
            TaskDescriptor::copy(CopyView {
                dst: a,
                src: 0,
                bytes: 64,
                dir: CopyDir::HostToDevice,
            }),
            TaskExtra::Host {
                buffer: npusim_components::HostBuffer::new(64, true),
                offset: 0,
            },
            SimTime::ZERO,
        );
        make_ready(&mut s.world, t);
        run(&mut s.world, dispatch);
        let config = device(&s.world, s.device).config.clone();
        let t = task(&s.world, t);
        assert_eq!(
            t.end - t.start,
            SimTime(config.copy_duration_ns(64, npusim_device::cost::CopyDirection::HostToDevice))
        );
    }

    #[test]
    fn an_op_launch_is_priced_by_its_tiled_cost_not_its_kernels() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "op_kernel", 1e15, |_| Ok(()));
        let cost = KernelCost::vector(1e6, 4e6);
        let mut op = npusim_components::shape::OpLaunch::new(1, 1);
        op.cost = cost;
        let t = enqueue_with(
            &mut s.world,
            s.stream,
            launch(k, 2, &[0, 0]),
            TaskExtra::Op(Box::new(op)),
            SimTime::ZERO,
        );
        make_ready(&mut s.world, t);
        run(&mut s.world, dispatch);
        let config = device(&s.world, s.device).config.clone();
        let t = task(&s.world, t);
        assert_eq!(
            t.end - t.start,
            SimTime(config.kernel_duration_ns(&cost, 2, 2))
        );
    }

    #[test]
    fn tasks_of_two_devices_interleaved_by_priority_each_take_their_own_devices_units() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "k", 1e3, |_| Ok(()));
        let far = spawn_device(&mut s.world);
        let far_ctx = spawn_context(&mut s.world, far);
        let a0 = spawn_stream(&mut s.world, s.ctx, 0);
        let b = spawn_stream(&mut s.world, far_ctx, 1);
        let a1 = spawn_stream(&mut s.world, s.ctx, 2);
        let cores = device(&s.world, s.device).config.ai_cores;
        let first = ready_task(&mut s.world, a0, launch(k, cores, &[]));
        let other = ready_task(&mut s.world, b, launch(k, cores, &[]));
        let last = ready_task(&mut s.world, a1, launch(k, 1, &[]));
        run(&mut s.world, dispatch);

        assert_eq!(task(&s.world, first).status, TaskStatus::Running);
        assert_eq!(task(&s.world, other).status, TaskStatus::Running);
        // Its device's cores are all taken; the other device's being free does not help it.
        assert_eq!(task(&s.world, last).status, TaskStatus::Ready);
        assert_eq!(waiting(&s.world), vec![last]);
        assert_eq!(device(&s.world, s.device).units.free_cores, 0);
        assert_eq!(device(&s.world, far).units.free_cores, 0);
    }
}
