//! Completion: the one place a task finishes, whatever its kind and however it ends — it ran,
//! it faulted, or an earlier failure aborted it. Dependency resolution completes the tasks that
//! need no unit (event records, satisfied waits, aborted heads) and the hardware tick the rest,
//! both through [`Completion::complete`], which ends in one `settle`: it alone advances the
//! stream, fires or cancels event records, counts, and hands the task to retire.
//!
//! What a context does about a fault (its failure mode: stop aborts its queued work) is not
//! completion; the tick applies it after completing the faulting task.

use bevy_ecs::prelude::*;
use bevy_ecs::system::SystemParam;
use npusim_components::resources::{FaultRecord, Faults, Finished, FrameStats};
use npusim_components::{
    DeviceState, EventState, NpuError, SimTime, StreamState, Task, TaskKind, TaskStatus,
};

/// How a task ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// It did what it was for.
    Done,
    /// It faulted with this error.
    Failed(NpuError),
    /// It never ran: an earlier failure aborted it (its `error` says which).
    Aborted,
}

impl From<Result<(), NpuError>> for Outcome {
    fn from(r: Result<(), NpuError>) -> Self {
        match r {
            Ok(()) => Outcome::Done,
            Err(e) => Outcome::Failed(e),
        }
    }
}

/// What completing a task writes besides the task and its stream.
#[derive(SystemParam)]
pub struct Completion<'w, 's> {
    events: Query<'w, 's, &'static mut EventState>,
    devices: Query<'w, 's, &'static mut DeviceState>,
    finished: If<ResMut<'w, Finished>>,
    stats: If<ResMut<'w, FrameStats>>,
    // Written only when a task fails.
    faults: Option<ResMut<'w, Faults>>,
}

/// Gives a running task's units back to its device and counts their busy time.
fn release_units(task: &Task, device: &mut DeviceState) {
    let busy = (task.end - task.start).as_ns();
    let units = &mut device.units;
    units.free_cores += task.cores;
    units.free_dma += task.dma;
    units.core_busy_ns += busy * task.cores as u64;
    units.dma_busy_ns += busy * task.dma as u64;
}

impl<'w, 's> Completion<'w, 's> {
    /// Completes `task` (entity `entity`, the head of `stream`) at `now` with `outcome`.
    pub fn complete(
        &mut self,
        entity: Entity,
        task: &mut Task,
        stream: &mut StreamState,
        outcome: Outcome,
        now: SimTime,
    ) {
        let (devices, mut settle) = self.split();
        if task.status == TaskStatus::Running
            && let Ok(mut device) = devices.get_mut(task.device)
        {
            release_units(task, &mut device);
        }
        let device = task.device;
        let index = || devices.get(device).map_or(0, |d| d.index);
        settle.settle(entity, task, stream, outcome, now, index);
    }

    /// The devices, and the rest of completion borrowed beside them.
    fn split(
        &mut self,
    ) -> (
        &mut Query<'w, 's, &'static mut DeviceState>,
        Settle<'_, 'w, 's>,
    ) {
        (
            &mut self.devices,
            Settle {
                events: &mut self.events,
                finished: &mut self.finished,
                stats: &mut self.stats,
                faults: &mut self.faults,
            },
        )
    }

    /// The devices (their units and memory), for the stage that completes tasks.
    pub fn devices(&mut self) -> &mut Query<'w, 's, &'static mut DeviceState> {
        &mut self.devices
    }

    /// Notes that the frame changed something without completing a task.
    pub fn progressed(&mut self) {
        self.stats.last_frame_progressed = true;
    }

    /// When an event wait on `device` blocked since `since` times out, if its device has an
    /// event-wait timeout.
    pub fn wait_deadline(&self, device: Entity, since: SimTime) -> Option<SimTime> {
        let d = self.devices.get(device).ok()?;
        d.limits.event_wait_timeout.map(|t| since + t)
    }

    /// Whether the latest record `record` of `event` has fired (a destroyed event never fires
    /// again, so its waiters do not block).
    pub fn record_done(&self, event: Entity, record: u64) -> bool {
        self.events
            .get(event)
            .map_or(true, |ev| ev.record_done(record))
    }
}

/// Completion without the devices (see `Completion::split`): what completing a task writes
/// besides its device's units.
struct Settle<'a, 'w, 's> {
    events: &'a mut Query<'w, 's, &'static mut EventState>,
    finished: &'a mut If<ResMut<'w, Finished>>,
    stats: &'a mut If<ResMut<'w, FrameStats>>,
    faults: &'a mut Option<ResMut<'w, Faults>>,
}

impl Settle<'_, '_, '_> {
    /// Everything of completing but giving back the units; `device_index` names the task's
    /// device in a fault record (asked for only when the task failed).
    // On every task's path: inlined into its callers.
    #[inline(always)]
    fn settle(
        &mut self,
        entity: Entity,
        task: &mut Task,
        stream: &mut StreamState,
        mut outcome: Outcome,
        now: SimTime,
        device_index: impl FnOnce() -> u32,
    ) {
        // Read through `Deref` first: the test costs one load and branch when it is off.
        if self.finished.sanitizer.is_some() {
            self.sanitize(task, &mut outcome, now);
        }
        let ran = task.status == TaskStatus::Running;
        if !ran {
            // Completed at the instant it became ready (or never ran): no unit, no time.
            task.start = now;
            task.end = now;
        }
        let ok = outcome == Outcome::Done;
        match outcome {
            Outcome::Done => {
                task.status = TaskStatus::Done;
                self.stats.tasks_completed += 1;
            }
            Outcome::Failed(err) => {
                task.status = TaskStatus::Failed;
                self.stats.tasks_failed += 1;
                let device = device_index();
                if let Some(faults) = self.faults.as_deref_mut() {
                    faults.pending.push(FaultRecord {
                        device,
                        context: task.context,
                        stream: task.stream,
                        seq: task.seq,
                        error: err.clone(),
                    });
                }
                stream.error.get_or_insert_with(|| err.clone());
                task.error = Some(Box::new(err));
            }
            Outcome::Aborted => {
                task.status = TaskStatus::Aborted;
                self.stats.tasks_aborted += 1;
                if let Some(err) = &task.error {
                    stream.error.get_or_insert_with(|| (**err).clone());
                }
            }
        }
        if task.kind() == TaskKind::EventRecord
            && let Some(ev) = task.desc.as_event()
            && let Ok(mut event) = self.events.get_mut(ev.event)
        {
            // A record that did not happen never fires: its waiters stop waiting.
            if ok {
                event.fire(ev.record, now);
            } else {
                event.cancel(ev.record);
            }
        }
        if stream.queue.front() == Some(&entity) {
            stream.queue.pop_front();
        }
        stream.completed = task.seq;
        stream.head_active = false;
        if ok || ran {
            stream.last_end = now;
        }
        self.finished.tasks.push(entity);
        self.stats.last_frame_progressed = true;
    }

    /// Feeds the stream sanitizer the finishing task; in error mode a task it reports fails.
    #[cold]
    #[inline(never)]
    fn sanitize(&mut self, task: &Task, outcome: &mut Outcome, now: SimTime) {
        if let Some(san) = self.finished.sanitizer.as_deref_mut()
            && let Some(err) = san.completed(task, *outcome == Outcome::Done, now)
        {
            *outcome = Outcome::Failed(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npusim_components::task::{EventView, NewTask, TaskDescriptor};
    use npusim_components::{StreamKind, TaskExtra};

    fn world_with_stream() -> (World, Entity) {
        let mut world = World::new();
        world.init_resource::<Finished>();
        world.init_resource::<FrameStats>();
        world.init_resource::<Faults>();
        let stream = world
            .spawn(StreamState::new(
                Entity::PLACEHOLDER,
                Entity::PLACEHOLDER,
                0,
                0,
                StreamKind::Compute,
                0,
            ))
            .id();
        (world, stream)
    }

    fn task(world: &mut World, stream: Entity, seq: u64, desc: TaskDescriptor) -> Entity {
        let new = NewTask {
            stream,
            seq,
            submit: SimTime::ZERO,
            desc,
            extra: TaskExtra::None,
        };
        let t = world
            .spawn(Task::from_new(
                new,
                Entity::PLACEHOLDER,
                Entity::PLACEHOLDER,
            ))
            .id();
        world
            .get_mut::<StreamState>(stream)
            .unwrap()
            .queue
            .push_back(t);
        world.get_mut::<StreamState>(stream).unwrap().submitted = seq;
        t
    }

    fn complete(world: &mut World, stream: Entity, t: Entity, outcome: Outcome, now: u64) {
        let mut state: bevy_ecs::system::SystemState<(
            Completion,
            Query<&mut Task>,
            Query<&mut StreamState>,
        )> = bevy_ecs::system::SystemState::new(world);
        let (mut c, mut tasks, mut streams) = state.get_mut(world).unwrap();
        let mut task = tasks.get_mut(t).unwrap();
        let mut s = streams.get_mut(stream).unwrap();
        c.complete(t, &mut task, &mut s, outcome, SimTime(now));
    }

    #[test]
    fn completing_the_head_advances_its_stream_and_hands_it_to_retire() {
        let (mut world, stream) = world_with_stream();
        let t = task(
            &mut world,
            stream,
            1,
            TaskDescriptor::new(TaskKind::HostCallback),
        );
        complete(&mut world, stream, t, Outcome::Done, 5);
        let s = world.get::<StreamState>(stream).unwrap();
        assert!(s.queue.is_empty() && s.completed == 1 && s.is_idle());
        assert_eq!(world.resource::<Finished>().tasks, vec![t]);
        assert_eq!(world.get::<Task>(t).unwrap().status, TaskStatus::Done);
        assert_eq!(world.resource::<FrameStats>().tasks_completed, 1);
    }

    #[test]
    fn a_failed_task_records_its_error_on_the_stream_and_as_a_fault() {
        let (mut world, stream) = world_with_stream();
        let t = task(
            &mut world,
            stream,
            1,
            TaskDescriptor::new(TaskKind::HostCallback),
        );
        let err = NpuError::Internal("boom".into());
        complete(&mut world, stream, t, Outcome::Failed(err.clone()), 5);
        assert_eq!(
            world.get::<StreamState>(stream).unwrap().error,
            Some(err.clone())
        );
        assert_eq!(world.resource::<Faults>().pending[0].error, err);
        assert_eq!(world.get::<Task>(t).unwrap().status, TaskStatus::Failed);
    }

    #[test]
    fn with_the_sanitizer_in_error_mode_the_later_of_two_unordered_writes_fails() {
        use npusim_components::Sanitizer;
        use npusim_components::access::Access;
        use npusim_components::sanitizer::Actor;
        use npusim_components::task::MemsetView;
        use npusim_device::sanitizer::{EnqueueSite, SanitizerConfig};
        let (mut world, s1) = world_with_stream();
        let s2 = world
            .spawn(StreamState::new(
                Entity::PLACEHOLDER,
                Entity::PLACEHOLDER,
                0,
                0,
                StreamKind::Compute,
                1,
            ))
            .id();
        world.resource_mut::<Finished>().sanitizer =
            Some(Box::new(Sanitizer::new(SanitizerConfig::error(), 1)));
        let memset = TaskDescriptor::memset(MemsetView {
            dst: 0x1000,
            value: 0,
            bytes: 64,
        });
        let mut tasks = Vec::new();
        for s in [s1, s2] {
            let mut finished = world.resource_mut::<Finished>();
            finished.sanitizer.as_mut().unwrap().submitted(
                Actor::Host,
                s,
                0,
                1,
                None,
                None,
                "memset".into(),
                EnqueueSite::Unknown,
            );
            let t = task(&mut world, s, 1, memset);
            world
                .get_mut::<Task>(t)
                .unwrap()
                .access
                .push(Access::write(0x1000, 64));
            tasks.push(t);
        }
        complete(&mut world, s1, tasks[0], Outcome::Done, 5);
        complete(&mut world, s2, tasks[1], Outcome::Done, 6);
        assert_eq!(
            world.get::<Task>(tasks[0]).unwrap().status,
            TaskStatus::Done
        );
        let later = world.get::<Task>(tasks[1]).unwrap();
        assert_eq!(later.status, TaskStatus::Failed);
        assert_eq!(later.error.as_ref().unwrap().code(), 507053);
        let finished = world.resource::<Finished>();
        assert_eq!(finished.sanitizer.as_ref().unwrap().reports().len(), 1);
    }

    #[test]
    fn a_record_fires_when_done_and_is_cancelled_when_aborted() {
        let (mut world, stream) = world_with_stream();
        let ev = world.spawn(EventState::new(Entity::PLACEHOLDER)).id();
        let r1 = world.get_mut::<EventState>(ev).unwrap().push_record();
        let r2 = world.get_mut::<EventState>(ev).unwrap().push_record();
        let rec = |record| TaskDescriptor::event(EventView { event: ev, record }, false);
        let t1 = task(&mut world, stream, 1, rec(r1));
        let t2 = task(&mut world, stream, 2, rec(r2));
        complete(&mut world, stream, t1, Outcome::Done, 7);
        let e = world.get::<EventState>(ev).unwrap();
        assert!(e.record_done(r1) && !e.record_done(r2));
        assert_eq!(e.timestamp, Some(SimTime(7)));
        complete(&mut world, stream, t2, Outcome::Aborted, 9);
        let e = world.get::<EventState>(ev).unwrap();
        assert!(e.record_done(r2), "an aborted record releases its waiters");
        assert_eq!(e.timestamp, Some(SimTime(7)), "but it never fired");
    }
}
