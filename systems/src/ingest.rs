//! Ingest: submissions rung on each stream's doorbell since the last frame become task entities
//! at the back of that stream. API calls only push a descriptor onto their stream's doorbell;
//! this is where the device sees it. Each task gets what its stream knows (its context and
//! device) and its access set — the device memory it reads and writes
//! ([`npusim_components::access`]) — computed once, here; every block an access names then
//! waits for the task's stream position before a pending free may release it. Entities of
//! retired tasks are reused from the task pool, so steady-state submission neither spawns nor
//! despawns.

use bevy_ecs::prelude::*;
use bevy_ecs::system::SystemState;
use npusim_components::access::{Access, AccessMode, Space};
use npusim_components::collective::{CollectiveCall, PeerCopy};
use npusim_components::memory::StreamPosition;
use npusim_components::resources::{Devices, FrameStats, TaskPool};
use npusim_components::task::CopyDir;
use npusim_components::{DeviceState, KernelRegistry, StreamState, Task, TaskKind};

/// (device, context, address, bytes, position): a range a task's access set names.
type Use = (Entity, Entity, u64, u64, StreamPosition);

/// Scratch buffers of [`ingest`], kept between frames so steady state allocates nothing.
#[derive(Default)]
pub struct IngestScratch {
    /// Tasks with no pooled entity to reuse, and their places: (stream, index in its queue).
    fresh: Vec<Task>,
    places: Vec<(Entity, usize)>,
    uses: Vec<Use>,
}

/// What ingest's pass over the doorbells reads and writes.
pub type IngestParams = (
    Query<'static, 'static, (Entity, &'static mut StreamState)>,
    Query<'static, 'static, &'static mut Task>,
    Option<ResMut<'static, TaskPool>>,
    Option<Res<'static, KernelRegistry>>,
    Option<Res<'static, Devices>>,
);

/// Turns each stream's doorbell entries into task entities, in call order per stream.
pub fn ingest(
    world: &mut World,
    params: &mut SystemState<IngestParams>,
    devices: &mut QueryState<&'static mut DeviceState>,
    mut scratch: Local<IngestScratch>,
) {
    crate::zone!("npusim::ingest");
    let scratch = &mut *scratch;
    scratch.fresh.clear();
    scratch.places.clear();
    scratch.uses.clear();
    let mut count = 0u64;
    {
        // One pass over the streams: each rung entry takes a retired task entity from the pool
        // (or waits for a new one, spawned after the pass) and joins the back of its stream's
        // queue. Streams are visited in a fixed order, so entity assignment is deterministic.
        let Ok((mut streams, mut tasks, Some(pool), Some(registry), Some(peers))) =
            params.get_mut(world)
        else {
            // A resource is missing: nothing can be ingested.
            return;
        };
        // Marked changed once, not at every entity taken from it.
        let pool: &mut TaskPool = pool.into_inner();
        let registry: &KernelRegistry = &registry;
        let peers = peers.entities.as_slice();
        for (stream, mut s) in streams.iter_mut() {
            if s.doorbell.is_empty() {
                continue;
            }
            let StreamState {
                doorbell,
                queue,
                context,
                device,
                ..
            } = &mut *s;
            let (context, device) = (*context, *device);
            // An entry is unpacked once, into its task.
            doorbell.drain(|rung, extra| {
                count += 1;
                if let Some(e) = pool.free.pop()
                    && let Ok(mut t) = tasks.get_mut(e)
                {
                    t.reuse(stream, rung, extra, context, device);
                    declare_access(&mut t, registry);
                    note_uses(&t, peers, &mut scratch.uses);
                    queue.push_back(e);
                    return;
                }
                // No pooled entity (or someone despawned a pooled one by hand): a new one takes
                // this place once the pass is over.
                let mut t = Task::from_rung(stream, rung, extra, context, device);
                declare_access(&mut t, registry);
                note_uses(&t, peers, &mut scratch.uses);
                scratch.fresh.push(t);
                scratch.places.push((stream, queue.len()));
                queue.push_back(Entity::PLACEHOLDER);
            });
        }
    }
    if count == 0 {
        return;
    }
    if !scratch.fresh.is_empty() {
        let spawned: Vec<Entity> = world.spawn_batch(scratch.fresh.drain(..)).collect();
        let Ok((mut q, ..)) = params.get_mut(world) else {
            return;
        };
        for (&(stream, place), e) in scratch.places.iter().zip(spawned) {
            if let Ok((_, mut s)) = q.get_mut(stream)
                && let Some(slot) = s.queue.get_mut(place)
            {
                *slot = e;
            }
        }
    }
    if !scratch.uses.is_empty() {
        let mut q = devices.query_mut(&mut *world);
        for &(device, context, addr, bytes, pos) in &scratch.uses {
            if let Ok(mut d) = q.get_mut(device) {
                d.memory.note_use_range(context, addr, bytes, pos);
            }
        }
    }
    // Without the counters (an embedder removed them) the work is done all the same.
    if let Some(mut stats) = world.get_resource_mut::<FrameStats>() {
        stats.tasks_ingested += count;
        stats.last_frame_progressed = true;
    }
}

/// The access set a task declares before it runs, from its kind's words (see
/// [`npusim_components::access`] for what each kind knows).
// Once per task ingested: inlined there.
#[inline(always)]
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
            } else if let Some(k) = registry.resolve(desc.kernel_slot()) {
                match task.extra.declared_access() {
                    // The typed launch builder's exact ranges, where the kernel declares none.
                    Some(declared) if !k.declares_access() => out.clone_from(declared),
                    _ => k.accesses(desc.arg_words(), desc.float_mask, desc.block_dim, out),
                }
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
#[inline]
fn note_uses(task: &Task, devices: &[Entity], out: &mut Vec<Use>) {
    if task.access.is_empty() {
        return;
    }
    note_ranges(task, devices, out);
}

fn note_ranges(task: &Task, devices: &[Entity], out: &mut Vec<Use>) {
    let pos = (task.stream, task.seq);
    for a in task.access.ranges() {
        if a.addr < npusim_device::abi::HEAP_BASE {
            continue;
        }
        match a.space {
            Space::Local => out.push((task.device, task.context, a.addr, a.bytes, pos)),
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
                    out.push((d, ctx, a.addr, a.bytes, pos));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::resources::TaskPool;
    use npusim_components::task::{CopyView, MemsetView, TaskDescriptor};
    use npusim_components::{NativeKernel, SimTime, TaskStatus};
    use npusim_device::cost::KernelCost;

    fn copy(dir: CopyDir, dst: u64, src: u64, bytes: u64) -> TaskDescriptor {
        TaskDescriptor::copy(CopyView {
            dst,
            src,
            bytes,
            dir,
        })
    }

    fn callback() -> TaskDescriptor {
        TaskDescriptor::new(TaskKind::HostCallback)
    }

    fn seqs(world: &World, stream: Entity) -> Vec<u64> {
        let s = crate::test_support::stream(world, stream);
        s.queue.iter().map(|&t| task(world, t).seq).collect()
    }

    #[test]
    fn doorbell_entries_join_the_back_of_their_streams_in_submission_order() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let already = enqueue(&mut s.world, s.stream, callback());
        submit(&mut s.world, s.stream, callback());
        submit(&mut s.world, other, callback());
        submit(&mut s.world, s.stream, callback());
        run(&mut s.world, ingest);

        assert_eq!(seqs(&s.world, s.stream), vec![1, 2, 3]);
        assert_eq!(
            crate::test_support::stream(&s.world, s.stream).queue[0],
            already
        );
        assert_eq!(seqs(&s.world, other), vec![1]);
        for &t in &crate::test_support::stream(&s.world, s.stream).queue {
            let t = task(&s.world, t);
            assert_eq!(t.status, TaskStatus::Queued);
            assert_eq!((t.context, t.device), (s.ctx, s.device));
        }
        assert!(
            crate::test_support::stream(&s.world, s.stream)
                .doorbell
                .is_empty()
        );
        assert!(
            crate::test_support::stream(&s.world, other)
                .doorbell
                .is_empty()
        );
        assert_eq!(s.world.resource::<FrameStats>().tasks_ingested, 3);
    }

    #[test]
    fn a_task_keeps_its_submit_time_and_its_cold_parts() {
        let mut s = setup();
        let buffer = npusim_components::HostBuffer::new(16, true);
        submit_with(
            &mut s.world,
            s.stream,
            copy(CopyDir::DeviceToHost, 0, 0, 16),
            npusim_components::TaskExtra::Host { buffer, offset: 4 },
            SimTime(1_234),
        );
        run(&mut s.world, ingest);
        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        let t = task(&s.world, t);
        assert_eq!(t.submit, SimTime(1_234));
        assert!(matches!(
            t.extra,
            npusim_components::TaskExtra::Host { offset: 4, .. }
        ));
    }

    #[test]
    fn an_entry_whose_stream_is_gone_is_dropped() {
        let mut s = setup();
        let gone = spawn_stream(&mut s.world, s.ctx, 0);
        submit(&mut s.world, gone, callback());
        submit(&mut s.world, s.stream, callback());
        s.world.despawn(gone);
        run(&mut s.world, ingest);

        let tasks: Vec<Entity> = s
            .world
            .query_filtered::<Entity, With<Task>>()
            .iter(&s.world)
            .collect();
        assert_eq!(tasks.len(), 1, "only the live stream's entry became a task");
        assert_eq!(
            crate::test_support::stream(&s.world, s.stream).queue,
            [tasks[0]]
        );
        assert_eq!(task(&s.world, tasks[0]).stream, s.stream);
    }

    #[test]
    fn retired_task_entities_are_reused_before_new_ones_are_spawned() {
        let mut s = setup();
        let old = enqueue(&mut s.world, s.stream, copy(CopyDir::HostToDevice, 1, 0, 8));
        {
            let mut st = s.world.get_mut::<StreamState>(s.stream).unwrap();
            st.queue.clear();
            st.completed = 1;
        }
        {
            let mut t = s.world.get_mut::<Task>(old).unwrap();
            t.status = TaskStatus::Retired;
            t.error = Some(Box::new(npusim_components::NpuError::Internal("x".into())));
        }
        s.world.resource_mut::<TaskPool>().free.push(old);
        submit(&mut s.world, s.stream, callback());
        submit(&mut s.world, s.stream, callback());
        run(&mut s.world, ingest);

        let queue = &crate::test_support::stream(&s.world, s.stream).queue;
        assert_eq!(queue.len(), 2);
        assert_eq!(queue[0], old, "the first entry took the pooled entity");
        assert_ne!(queue[1], old);
        assert!(s.world.resource::<TaskPool>().free.is_empty());
        let reused = task(&s.world, old);
        assert_eq!(reused.seq, 2);
        assert_eq!(reused.status, TaskStatus::Queued);
        assert_eq!(reused.kind(), TaskKind::HostCallback);
        assert!(reused.error.is_none() && reused.access.is_empty());
        let count = s.world.query::<&Task>().iter(&s.world).count();
        assert_eq!(count, 2);
    }

    #[test]
    fn a_pooled_entity_despawned_by_hand_is_replaced_without_breaking_order() {
        let mut s = setup();
        let lost = s.world.spawn_empty().id();
        s.world.despawn(lost);
        s.world.resource_mut::<TaskPool>().free.push(lost);
        submit(&mut s.world, s.stream, callback());
        submit(&mut s.world, s.stream, callback());
        run(&mut s.world, ingest);

        assert_eq!(seqs(&s.world, s.stream), vec![1, 2]);
        assert!(s.world.resource::<TaskPool>().free.is_empty());
    }

    #[test]
    fn a_copys_access_set_is_exactly_the_ranges_it_moves() {
        let mut s = setup();
        let a = alloc(&mut s.world, s.device, s.ctx, 256);
        let b = alloc(&mut s.world, s.device, s.ctx, 256);
        submit(
            &mut s.world,
            s.stream,
            copy(CopyDir::HostToDevice, a, 0, 64),
        );
        submit(
            &mut s.world,
            s.stream,
            copy(CopyDir::DeviceToHost, 0, b, 32),
        );
        submit(
            &mut s.world,
            s.stream,
            copy(CopyDir::DeviceToDevice, a + 64, b + 8, 16),
        );
        submit(
            &mut s.world,
            s.stream,
            TaskDescriptor::memset(MemsetView {
                dst: b,
                value: 7,
                bytes: 100,
            }),
        );
        run(&mut s.world, ingest);

        let queue = crate::test_support::stream(&s.world, s.stream)
            .queue
            .clone();
        let access = |i: usize| task(&s.world, queue[i]).access.clone();
        assert_eq!(access(0).ranges(), &[Access::write(a, 64)]);
        assert_eq!(access(1).ranges(), &[Access::read(b, 32)]);
        assert_eq!(
            access(2).ranges(),
            &[Access::read(b + 8, 16), Access::write(a + 64, 16)]
        );
        assert_eq!(access(3).ranges(), &[Access::write(b, 100)]);
        assert!((0..4).all(|i| access(i).exact()));
    }

    #[test]
    fn events_and_callbacks_touch_no_memory() {
        let mut s = setup();
        submit(&mut s.world, s.stream, callback());
        run(&mut s.world, ingest);
        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        assert!(task(&s.world, t).access.is_empty());
    }

    #[test]
    fn a_kernel_with_declared_accesses_gets_exactly_them() {
        let mut s = setup();
        // y = f(x): reads n floats of x, writes n floats of y.
        let k = s.world.resource_mut::<KernelRegistry>().register(
            NativeKernel::new("map", |_| Ok(()), |_, _| KernelCost::vector(1.0, 0.0)).with_access(
                |args, _, out| {
                    out.push(Access::read(args[0], args[2] * 4));
                    out.push(Access::write(args[1], args[2] * 4));
                },
            ),
        );
        let (x, y) = (
            alloc(&mut s.world, s.device, s.ctx, 4096),
            alloc(&mut s.world, s.device, s.ctx, 4096),
        );
        submit(&mut s.world, s.stream, launch(k, 2, &[x, y, 100]));
        run(&mut s.world, ingest);

        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        let access = &task(&s.world, t).access;
        assert_eq!(
            access.ranges(),
            &[Access::read(x, 400), Access::write(y, 400)]
        );
        assert!(access.exact());
    }

    #[test]
    fn a_kernel_declaring_nothing_gets_the_blocks_behind_its_pointer_words() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "opaque", 1.0, |_| Ok(()));
        let p = alloc(&mut s.world, s.device, s.ctx, 64);
        let float_word = u64::from(2.5f32.to_bits()) | npusim_device::abi::HEAP_BASE;
        let desc = TaskDescriptor::kernel(
            k.slot(),
            1,
            [(p, false), (100, false), (float_word, true)],
            &[],
        );
        submit(&mut s.world, s.stream, desc);
        run(&mut s.world, ingest);

        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        let access = &task(&s.world, t).access;
        assert!(!access.exact(), "an upper bound by blocks");
        let named: Vec<(u64, AccessMode)> =
            access.ranges().iter().map(|a| (a.addr, a.mode)).collect();
        assert_eq!(
            named,
            vec![(p, AccessMode::ReadWrite)],
            "a small integer and a float are not pointers"
        );
    }

    /// The typed launch builder's set: (x read, 40 bytes in; y written) for the launch of
    /// `x + 40`, `y`, 100.
    fn builder_set(x: u64, y: u64) -> npusim_components::TaskExtra {
        let mut set = npusim_components::access::AccessSet::new();
        set.push(Access::read(x + 40, 400));
        set.push(Access::write(y, 400));
        npusim_components::TaskExtra::Access(Box::new(set))
    }

    #[test]
    fn a_kernel_declaring_nothing_takes_the_ranges_its_launch_declares() {
        let mut s = setup();
        let k = register_kernel(&mut s.world, "opaque", 1.0, |_| Ok(()));
        let (x, y) = (
            alloc(&mut s.world, s.device, s.ctx, 4096),
            alloc(&mut s.world, s.device, s.ctx, 4096),
        );
        let extra = builder_set(x, y);
        submit_with(
            &mut s.world,
            s.stream,
            launch(k, 1, &[x + 40, y, 100]),
            extra,
            SimTime::ZERO,
        );
        run(&mut s.world, ingest);

        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        let access = &task(&s.world, t).access;
        assert!(access.exact(), "exact ranges, not blocks");
        assert_eq!(
            access.ranges(),
            &[Access::read(x + 40, 400), Access::write(y, 400)]
        );
    }

    #[test]
    fn a_kernels_own_declaration_wins_over_its_launchs() {
        let mut s = setup();
        let k = s.world.resource_mut::<KernelRegistry>().register(
            NativeKernel::new("map", |_| Ok(()), |_, _| KernelCost::vector(1.0, 0.0))
                .with_access(|args, _, out| out.push(Access::write(args[1], 8))),
        );
        let (x, y) = (
            alloc(&mut s.world, s.device, s.ctx, 4096),
            alloc(&mut s.world, s.device, s.ctx, 4096),
        );
        let extra = builder_set(x, y);
        submit_with(
            &mut s.world,
            s.stream,
            launch(k, 1, &[x + 40, y, 100]),
            extra,
            SimTime::ZERO,
        );
        run(&mut s.world, ingest);

        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        assert_eq!(task(&s.world, t).access.ranges(), &[Access::write(y, 8)]);
    }

    #[test]
    fn a_launch_of_an_unloaded_kernel_names_no_memory() {
        let mut s = setup();
        let p = alloc(&mut s.world, s.device, s.ctx, 64);
        let stale = unloaded_kernel(&mut s.world);
        submit(&mut s.world, s.stream, launch(stale, 1, &[p]));
        run(&mut s.world, ingest);
        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        assert!(task(&s.world, t).access.is_empty());
    }

    #[test]
    fn a_free_after_submission_waits_for_the_queued_task_that_names_the_block() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let a = alloc(&mut s.world, s.device, s.ctx, 1024);
        let untouched = alloc(&mut s.world, s.device, s.ctx, 1024);
        submit(&mut s.world, s.stream, callback());
        // Names `a` through an address inside it, not its base.
        let seq = submit(
            &mut s.world,
            s.stream,
            copy(CopyDir::HostToDevice, a + 512, 0, 64),
        );
        submit(&mut s.world, other, copy(CopyDir::DeviceToHost, 0, a, 8));
        run(&mut s.world, ingest);

        let mem = &mut s.world.get_mut::<DeviceState>(s.device).unwrap().memory;
        mem.begin_free(a, s.ctx, &[]).unwrap();
        mem.begin_free(untouched, s.ctx, &[]).unwrap();
        let mut waits = mem.pending_positions(a, s.ctx).to_vec();
        waits.sort();
        let mut want = vec![(s.stream, seq), (other, 1)];
        want.sort();
        assert_eq!(waits, want);
        assert!(mem.pending_positions(untouched, s.ctx).is_empty());
    }

    #[test]
    fn a_free_before_ingest_joins_the_wait_of_work_already_rung() {
        // The API frees right after submitting, before the frame ingests the submission.
        let mut s = setup();
        let a = alloc(&mut s.world, s.device, s.ctx, 1024);
        let seq = submit(
            &mut s.world,
            s.stream,
            TaskDescriptor::memset(MemsetView {
                dst: a,
                value: 0,
                bytes: 1024,
            }),
        );
        s.world
            .get_mut::<DeviceState>(s.device)
            .unwrap()
            .memory
            .begin_free(a, s.ctx, &[])
            .unwrap();
        run(&mut s.world, ingest);

        let mem = &crate::test_support::device(&s.world, s.device).memory;
        assert_eq!(
            mem.pending_positions(a, s.ctx).as_slice(),
            &[(s.stream, seq)]
        );
        assert!(
            mem.check(a, 1024, s.ctx).is_ok(),
            "the block stays reserved for the memset"
        );
    }

    #[test]
    fn a_peer_copy_holds_back_a_free_on_the_other_device() {
        let mut s = setup();
        let far = spawn_device(&mut s.world);
        let far_ctx = spawn_context(&mut s.world, far);
        let src = alloc(&mut s.world, s.device, s.ctx, 256);
        let dst = alloc(&mut s.world, far, far_ctx, 256);
        let copy = PeerCopy {
            dst,
            src,
            bytes: 256,
            src_device: 0,
            dst_device: 1,
            src_ctx: s.ctx,
            dst_ctx: far_ctx,
        };
        let seq = submit(&mut s.world, s.stream, copy.encode());
        run(&mut s.world, ingest);

        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        let ranges = task(&s.world, t).access.ranges().to_vec();
        assert_eq!(ranges.len(), 2);
        assert_eq!((ranges[0].addr, ranges[0].space), (src, Space::Local));
        assert_eq!(
            (ranges[1].addr, ranges[1].mode, ranges[1].space),
            (dst, AccessMode::Write, Space::Peer)
        );
        let mem = &mut s.world.get_mut::<DeviceState>(far).unwrap().memory;
        mem.begin_free(dst, far_ctx, &[]).unwrap();
        assert_eq!(
            mem.pending_positions(dst, far_ctx).as_slice(),
            &[(s.stream, seq)]
        );
    }

    #[test]
    fn an_op_launch_names_the_blocks_of_its_inputs_and_outputs_until_its_shapes_resolve() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let [x, y, z] = [0; 3].map(|_| alloc(&mut s.world, s.device, s.ctx, 4096));
        let op = npusim_components::shape::OpLaunch::new(2, 1);
        submit_with(
            &mut s.world,
            s.stream,
            launch(k, 1, &[x, y, z, 0]),
            npusim_components::TaskExtra::Op(Box::new(op)),
            SimTime::ZERO,
        );
        run(&mut s.world, ingest);

        let t = crate::test_support::stream(&s.world, s.stream).queue[0];
        let access = &task(&s.world, t).access;
        assert!(!access.exact());
        let named: Vec<(u64, AccessMode)> =
            access.ranges().iter().map(|a| (a.addr, a.mode)).collect();
        assert_eq!(
            named,
            vec![
                (x, AccessMode::Read),
                (y, AccessMode::Read),
                (z, AccessMode::Write)
            ],
            "the attribute word is not a tensor"
        );
    }
}
