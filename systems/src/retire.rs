//! Retire: finished tasks are written to the timeline (when it is on) and go back to the task
//! pool for reuse (or are despawned when the pool is full), so memory stays flat however many
//! tasks run.

use bevy_ecs::prelude::*;
use bevy_ecs::system::SystemState;
use npusim_components::resources::{Finished, FrameStats, TaskPool, Timeline};
use npusim_components::{
    DeviceState, KernelRegistry, StreamKind, StreamState, Task, TaskExtra, TaskKind, TaskRecord,
    TaskStatus,
};

/// What retire writes once it has finished tasks: the finished list, the task pool, the
/// counters and the tasks.
pub type RetireParams = (
    Option<ResMut<'static, Finished>>,
    Option<ResMut<'static, TaskPool>>,
    Option<ResMut<'static, FrameStats>>,
    Query<'static, 'static, &'static mut Task>,
);

/// Records and recycles the tasks that finished this frame.
pub fn retire(world: &mut World, params: &mut SystemState<RetireParams>) {
    crate::zone!("npusim::retire");
    // Retire runs every frame (no run condition: evaluating one costs more than this look at
    // the finished list, and a busy frame would pay both).
    let any = world
        .get_resource::<Finished>()
        .is_some_and(|f| !f.tasks.is_empty());
    if !any {
        return;
    }
    if world.get_resource::<Timeline>().is_some_and(|t| t.enabled) {
        record_finished(world);
    }
    let overflow = {
        let Ok((Some(mut finished), Some(pool), Some(stats), mut q)) = params.get_mut(world) else {
            return;
        };
        // Each marked changed once, not at every task.
        let pool: &mut TaskPool = pool.into_inner();
        let stats: &mut FrameStats = stats.into_inner();
        // Not empty (checked above; recording it to the timeline does not empty it).
        let finished: &mut Vec<Entity> = &mut finished.tasks;
        stats.tasks_retired += finished.len() as u64;
        let mut overflow = Vec::new();
        for e in finished.drain(..) {
            if pool.free.len() < TaskPool::CAPACITY
                && let Ok(mut task) = q.get_mut(e)
            {
                // Drop what the task held (host buffers, a callback, an error) now, not at reuse;
                // an op launch's box goes back to the pool.
                match task.extra {
                    // Nothing held: no call to drop it.
                    TaskExtra::None => {}
                    TaskExtra::Op(_) => {
                        if let TaskExtra::Op(op) = std::mem::take(&mut task.extra) {
                            TaskPool::keep_op_launch(&mut pool.op_launches, op);
                        }
                    }
                    _ => task.extra = TaskExtra::None,
                }
                task.error = None;
                task.access.clear();
                task.status = TaskStatus::Retired;
                pool.free.push(e);
            } else {
                overflow.push(e);
            }
        }
        overflow
    };
    for e in overflow {
        world.despawn(e);
    }
}

/// Writes the finished tasks to the timeline (when the world has both; a kernel is named
/// from the registry, or "unknown kernel" without it).
fn record_finished(world: &mut World) {
    let Some(finished) = world.get_resource::<Finished>().map(|f| &f.tasks) else {
        return;
    };
    let registry = world.get_resource::<KernelRegistry>();
    let mut records = Vec::with_capacity(finished.len());
    for &e in finished {
        let Some(task) = world.get::<Task>(e) else {
            continue;
        };
        let kind = task.kind();
        let name = match kind {
            TaskKind::Kernel => registry
                .and_then(|r| r.resolve(task.desc.kernel_slot()))
                .map_or_else(|| "unknown kernel".to_string(), |k| k.name.clone()),
            TaskKind::Collective => npusim_components::CollectiveCall::decode(&task.desc)
                .map_or("collective", |c| c.kind.name())
                .to_string(),
            TaskKind::Memcpy if task.desc.is_peer_copy() => "memcpy_peer".to_string(),
            other => other.name().to_string(),
        };
        let device = world.get::<DeviceState>(task.device).map_or(0, |d| d.index);
        let stream_kind = world
            .get::<StreamState>(task.stream)
            .map_or(StreamKind::default(), |s| s.kind);
        let event = task.desc.as_event().map(|ev| (ev.event, ev.record));
        let bytes = task.desc.bytes_moved();
        records.push(TaskRecord {
            kind,
            name,
            stream: task.stream,
            device,
            seq: task.seq,
            submit: task.submit,
            start: task.start,
            end: task.end,
            cores: task.cores,
            ok: task.status == TaskStatus::Done,
            stream_kind,
            context: task.context,
            event,
            bytes,
        });
    }
    if let Some(mut timeline) = world.get_resource_mut::<Timeline>() {
        timeline.records.extend(records);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::task::{MemsetView, TaskDescriptor};
    use npusim_components::{NpuError, SimTime};

    /// A task that ran on `stream` from `start` to `end` and finished with `status`.
    fn finished(
        world: &mut World,
        stream: Entity,
        desc: TaskDescriptor,
        start: u64,
        end: u64,
        status: TaskStatus,
    ) -> Entity {
        let t = enqueue(world, stream, desc);
        world.get_mut::<StreamState>(stream).unwrap().queue.clear();
        {
            let mut task = world.get_mut::<Task>(t).unwrap();
            task.start = SimTime(start);
            task.end = SimTime(end);
            task.cores = 2;
            task.status = status;
            if status != TaskStatus::Done {
                task.error = Some(Box::new(NpuError::Internal("fault".into())));
            }
        }
        world.resource_mut::<Finished>().tasks.push(t);
        t
    }

    /// A host callback task on the setup's stream that ran from 0 to 10 and finished with
    /// `status`.
    fn finished_callback(s: &mut Setup, status: TaskStatus) -> Entity {
        let desc = TaskDescriptor::new(TaskKind::HostCallback);
        finished(&mut s.world, s.stream, desc, 0, 10, status)
    }

    #[test]
    fn finished_tasks_are_recorded_on_the_timeline_when_enabled() {
        let mut s = setup();
        s.world.resource_mut::<Timeline>().enabled = true;
        let k = register_kernel(&mut s.world, "softmax", 1.0, |_| Ok(()));
        let a = alloc(&mut s.world, s.device, s.ctx, 64);
        let kt = finished(
            &mut s.world,
            s.stream,
            launch(k, 2, &[]),
            100,
            250,
            TaskStatus::Done,
        );
        let memset = TaskDescriptor::memset(MemsetView {
            dst: a,
            value: 0,
            bytes: 64,
        });
        finished(&mut s.world, s.stream, memset, 250, 300, TaskStatus::Failed);
        run(&mut s.world, retire);

        let records = &s.world.resource::<Timeline>().records;
        assert_eq!(records.len(), 2);
        let r = &records[0];
        assert_eq!((r.kind, r.name.as_str()), (TaskKind::Kernel, "softmax"));
        assert_eq!((r.start, r.end), (SimTime(100), SimTime(250)));
        assert_eq!((r.stream, r.seq, r.cores), (s.stream, 1, 2));
        assert_eq!((r.context, r.device), (s.ctx, 0));
        assert!(r.ok);
        let r = &records[1];
        assert_eq!((r.name.as_str(), r.bytes), ("memset", 64));
        assert!(!r.ok, "a failed task is recorded as not ok");
        assert_eq!(task(&s.world, kt).status, TaskStatus::Retired);
    }

    #[test]
    fn a_kernel_unloaded_before_retire_is_recorded_as_unknown() {
        let mut s = setup();
        s.world.resource_mut::<Timeline>().enabled = true;
        let stale = unloaded_kernel(&mut s.world);
        finished(
            &mut s.world,
            s.stream,
            launch(stale, 1, &[]),
            0,
            10,
            TaskStatus::Failed,
        );
        run(&mut s.world, retire);
        assert_eq!(
            s.world.resource::<Timeline>().records[0].name,
            "unknown kernel"
        );
    }

    #[test]
    fn nothing_is_recorded_when_the_timeline_is_off() {
        let mut s = setup();
        finished_callback(&mut s, TaskStatus::Done);
        run(&mut s.world, retire);
        assert!(s.world.resource::<Timeline>().records.is_empty());
    }

    #[test]
    fn finished_tasks_go_back_to_the_pool_as_retired_holding_nothing() {
        let mut s = setup();
        let t = finished_callback(&mut s, TaskStatus::Failed);
        {
            let mut task = s.world.get_mut::<Task>(t).unwrap();
            task.extra = TaskExtra::Host {
                buffer: npusim_components::HostBuffer::new(8, true),
                offset: 0,
            };
            task.access
                .push(npusim_components::Access::read(0x10_0000_0000, 8));
        }
        run(&mut s.world, retire);

        let task = task(&s.world, t);
        assert_eq!(task.status, TaskStatus::Retired);
        assert!(matches!(task.extra, TaskExtra::None));
        assert!(task.error.is_none() && task.access.is_empty());
        assert_eq!(s.world.resource::<TaskPool>().free, vec![t]);
        assert!(s.world.resource::<Finished>().tasks.is_empty());
        assert_eq!(s.world.resource::<FrameStats>().tasks_retired, 1);
    }

    #[test]
    fn a_retired_op_launch_leaves_its_box_for_the_next_op_launch() {
        let mut s = setup();
        let t = finished_callback(&mut s, TaskStatus::Done);
        let mut op = npusim_components::shape::OpLaunch::new(2, 1);
        op.workspace_bytes = 64;
        op.set_tensor(0, npusim_components::shape::TensorSource::Slot(3));
        let op = Box::new(op);
        let addr = &*op as *const _;
        s.world.get_mut::<Task>(t).unwrap().extra = TaskExtra::Op(op);
        run(&mut s.world, retire);

        assert!(matches!(task(&s.world, t).extra, TaskExtra::None));
        let mut pool = s.world.resource_mut::<TaskPool>();
        assert_eq!(pool.op_launches.len(), 1);
        let next = pool.op_launch(1, 1);
        assert_eq!(&*next as *const _, addr, "the same allocation");
        assert_eq!(
            *next,
            npusim_components::shape::OpLaunch::new(1, 1),
            "holding a new launch, nothing of the old"
        );
        assert!(pool.op_launches.is_empty());
    }

    #[test]
    fn op_launch_boxes_beyond_the_pool_capacity_are_freed() {
        let mut s = setup();
        let boxes = (0..TaskPool::OP_LAUNCH_CAPACITY)
            .map(|_| Box::new(npusim_components::shape::OpLaunch::new(1, 1)));
        s.world.resource_mut::<TaskPool>().op_launches.extend(boxes);
        let t = finished_callback(&mut s, TaskStatus::Done);
        s.world.get_mut::<Task>(t).unwrap().extra =
            TaskExtra::Op(Box::new(npusim_components::shape::OpLaunch::new(2, 1)));
        run(&mut s.world, retire);

        assert!(matches!(task(&s.world, t).extra, TaskExtra::None));
        assert_eq!(
            s.world.resource::<TaskPool>().op_launches.len(),
            TaskPool::OP_LAUNCH_CAPACITY
        );
        assert_eq!(s.world.resource::<TaskPool>().free, vec![t]);
    }

    #[test]
    fn beyond_the_pool_capacity_finished_tasks_are_despawned() {
        let mut s = setup();
        let kept = finished_callback(&mut s, TaskStatus::Done);
        run(&mut s.world, retire);
        // Fill the pool to its capacity (the entries need not be live for this test).
        s.world
            .resource_mut::<TaskPool>()
            .free
            .resize(TaskPool::CAPACITY, Entity::PLACEHOLDER);
        let dropped = finished(
            &mut s.world,
            s.stream,
            TaskDescriptor::new(TaskKind::HostCallback),
            10,
            20,
            TaskStatus::Done,
        );
        run(&mut s.world, retire);

        assert!(s.world.get_entity(dropped).is_err(), "despawned");
        assert!(s.world.get::<Task>(kept).is_some(), "the pooled one stays");
        assert_eq!(
            s.world.resource::<TaskPool>().free.len(),
            TaskPool::CAPACITY
        );
        assert_eq!(s.world.resource::<FrameStats>().tasks_retired, 2);
    }
}
