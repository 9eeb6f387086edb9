//! Dependency resolution: a stream's head task becomes ready when its predecessor in the stream
//! is done, the host has actually submitted it (its submit time has come), and — for an event
//! wait — the record it captured has fired. Cross-stream order comes only from events.
//!
//! An event wait blocked longer than its own timeout, or else its device's event-wait timeout
//! (`aclrtSetOpWaitTimeout`; simulated time, off by default), fails with
//! `ACL_ERROR_RT_WAIT_TIMEOUT`.
//!
//! Tasks that need no unit and no time complete here, through [`Completion`], at the moment
//! they become ready: event records (other streams see them within this same pass or the next
//! frame), satisfied event waits, and heads aborted by an earlier failure (in stream order, so a
//! synchronize sees them finish). The stream then moves on to its next head in the same frame.

use bevy_ecs::prelude::*;
use npusim_components::resources::{ReadyQueue, Running, SimClock};
use npusim_components::{NpuError, SimTime, StreamState, Task, TaskKind, TaskStatus};

use crate::complete::{Completion, Outcome};

/// Makes ready every stream head whose dependencies are met.
pub fn resolve_dependencies(
    If(clock): If<Res<SimClock>>,
    mut streams: Query<&mut StreamState>,
    mut tasks: Query<&mut Task>,
    If(mut ready): If<ResMut<ReadyQueue>>,
    If(mut running): If<ResMut<Running>>,
    mut completion: Completion,
) {
    crate::zone!("npusim::dependencies");
    let now = clock.now;
    let mut wake = None::<SimTime>;
    // A record fired in this pass may release a wait on a stream visited before it: pass again
    // until no record fires, so the whole chain resolves at this instant.
    ready.new_ops = 0;
    let mut made_ready = false;
    let mut fired = true;
    while fired {
        fired = false;
        wake = None;
        for mut stream in &mut streams {
            if stream.head_active {
                continue;
            }
            while let Some(&head) = stream.queue.front() {
                let Ok(mut task) = tasks.get_mut(head) else {
                    stream.queue.pop_front();
                    continue;
                };
                if task.status == TaskStatus::Aborted {
                    completion.complete(head, &mut task, &mut stream, Outcome::Aborted, now);
                    continue;
                }
                if task.status != TaskStatus::Queued {
                    break;
                }
                if task.submit > now {
                    wake = Some(wake.map_or(task.submit, |w| w.min(task.submit)));
                    break;
                }
                match task.kind() {
                    TaskKind::EventWait => {
                        let ev = task.desc.as_event();
                        if ev.is_some_and(|ev| !completion.record_done(ev.event, ev.record)) {
                            // Blocked since it became the head (its predecessor's end or its
                            // submission, whichever came later), for how long it may be.
                            let since = task.submit.max(stream.last_end);
                            let deadline = match task.desc.timeout() {
                                Some(t) => Some(since + t),
                                None => completion.wait_deadline(task.device, since),
                            };
                            match deadline {
                                Some(deadline) if deadline <= now => {
                                    let err = NpuError::WaitTimeout {
                                        what: format!("an event wait on stream {}", task.stream),
                                        timeout: deadline - since,
                                    };
                                    let failed = Outcome::Failed(err);
                                    completion.complete(head, &mut task, &mut stream, failed, now);
                                    continue;
                                }
                                Some(deadline) => {
                                    wake = Some(wake.map_or(deadline, |w| w.min(deadline)));
                                }
                                None => {}
                            }
                            break;
                        }
                        completion.complete(head, &mut task, &mut stream, Outcome::Done, now);
                        continue;
                    }
                    TaskKind::EventRecord => {
                        completion.complete(head, &mut task, &mut stream, Outcome::Done, now);
                        fired = true;
                        continue;
                    }
                    _ => {}
                }
                task.status = TaskStatus::Ready;
                stream.head_active = true;
                if task.extra.op().is_some() {
                    ready.new_ops += 1;
                }
                ready
                    .tasks
                    .push(((stream.priority, stream.order, task.seq), head));
                made_ready = true;
                break;
            }
        }
    }
    if made_ready {
        completion.progressed();
    }
    running.next_wake = wake;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::resources::{Finished, FrameStats};
    use npusim_components::task::{EventView, TaskDescriptor};
    use npusim_components::{EventState, NpuError, TaskExtra};

    fn callback() -> TaskDescriptor {
        TaskDescriptor::new(TaskKind::HostCallback)
    }

    fn record(event: Entity, record: u64) -> TaskDescriptor {
        TaskDescriptor::event(EventView { event, record }, false)
    }

    fn wait(event: Entity, record: u64) -> TaskDescriptor {
        TaskDescriptor::event(EventView { event, record }, true)
    }

    fn status(world: &World, t: Entity) -> TaskStatus {
        task(world, t).status
    }

    fn ready(world: &World) -> Vec<Entity> {
        world
            .resource::<ReadyQueue>()
            .tasks
            .iter()
            .map(|&(_, e)| e)
            .collect()
    }

    #[test]
    fn only_the_head_of_a_stream_becomes_ready() {
        let mut s = setup();
        let first = enqueue(&mut s.world, s.stream, callback());
        let second = enqueue(&mut s.world, s.stream, callback());
        run(&mut s.world, resolve_dependencies);

        assert_eq!(status(&s.world, first), TaskStatus::Ready);
        assert_eq!(status(&s.world, second), TaskStatus::Queued);
        assert_eq!(ready(&s.world), vec![first]);
        assert!(stream(&s.world, s.stream).head_active);
    }

    #[test]
    fn a_head_becomes_ready_only_after_its_predecessor_completed() {
        let mut s = setup();
        let first = enqueue(&mut s.world, s.stream, callback());
        let second = enqueue(&mut s.world, s.stream, callback());
        start_running(&mut s.world, first, 0, 0, 0, 100);
        run(&mut s.world, resolve_dependencies);
        assert_eq!(status(&s.world, second), TaskStatus::Queued);
        assert!(ready(&s.world).is_empty());

        // The predecessor completes (as the tick does, through the one completion path).
        {
            let mut st = s.world.get_mut::<StreamState>(s.stream).unwrap();
            st.queue.pop_front();
            st.completed = 1;
            st.head_active = false;
        }
        s.world.get_mut::<Task>(first).unwrap().status = TaskStatus::Done;
        run(&mut s.world, resolve_dependencies);
        assert_eq!(status(&s.world, second), TaskStatus::Ready);
        assert_eq!(ready(&s.world), vec![second]);
    }

    #[test]
    fn a_head_submitted_in_the_future_waits_and_sets_the_wake_time() {
        let mut s = setup();
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let late = enqueue_with(
            &mut s.world,
            s.stream,
            callback(),
            TaskExtra::None,
            SimTime(900),
        );
        let sooner = enqueue_with(
            &mut s.world,
            other,
            callback(),
            TaskExtra::None,
            SimTime(500),
        );
        run(&mut s.world, resolve_dependencies);
        assert_eq!(status(&s.world, late), TaskStatus::Queued);
        assert_eq!(status(&s.world, sooner), TaskStatus::Queued);
        assert_eq!(
            s.world.resource::<Running>().next_wake,
            Some(SimTime(500)),
            "the earliest submit time"
        );

        s.world.resource_mut::<SimClock>().now = SimTime(500);
        run(&mut s.world, resolve_dependencies);
        assert_eq!(status(&s.world, sooner), TaskStatus::Ready);
        assert_eq!(status(&s.world, late), TaskStatus::Queued);
        assert_eq!(s.world.resource::<Running>().next_wake, Some(SimTime(900)));

        s.world.resource_mut::<SimClock>().now = SimTime(900);
        run(&mut s.world, resolve_dependencies);
        assert_eq!(status(&s.world, late), TaskStatus::Ready);
        assert_eq!(s.world.resource::<Running>().next_wake, None);
    }

    #[test]
    fn a_record_completes_at_once_and_fires_its_event() {
        let mut s = setup();
        s.world.resource_mut::<SimClock>().now = SimTime(40);
        let ev = s.world.spawn(EventState::new(s.ctx)).id();
        let r = s.world.get_mut::<EventState>(ev).unwrap().push_record();
        let rec = enqueue(&mut s.world, s.stream, record(ev, r));
        let next = enqueue(&mut s.world, s.stream, callback());
        run(&mut s.world, resolve_dependencies);

        assert_eq!(status(&s.world, rec), TaskStatus::Done);
        let e = s.world.get::<EventState>(ev).unwrap();
        assert!(e.record_done(r));
        assert_eq!(e.timestamp, Some(SimTime(40)));
        assert_eq!(s.world.resource::<Finished>().tasks, vec![rec]);
        assert_eq!(
            status(&s.world, next),
            TaskStatus::Ready,
            "the stream moves on in the same frame"
        );
        assert!(
            ready(&s.world).iter().all(|&t| t != rec),
            "a record needs no unit"
        );
    }

    #[test]
    fn a_wait_is_released_by_a_record_on_a_stream_visited_after_it() {
        let mut s = setup();
        let ev = s.world.spawn(EventState::new(s.ctx)).id();
        let r = s.world.get_mut::<EventState>(ev).unwrap().push_record();
        // The waiting stream was created first, so it is visited first.
        let waiter = s.stream;
        let recorder = spawn_stream(&mut s.world, s.ctx, 0);
        let w = enqueue(&mut s.world, waiter, wait(ev, r));
        let after = enqueue(&mut s.world, waiter, callback());
        let rec = enqueue(&mut s.world, recorder, record(ev, r));
        run(&mut s.world, resolve_dependencies);

        assert_eq!(status(&s.world, rec), TaskStatus::Done);
        assert_eq!(status(&s.world, w), TaskStatus::Done);
        assert_eq!(status(&s.world, after), TaskStatus::Ready);
        assert_eq!(s.world.resource::<Finished>().tasks, vec![rec, w]);
    }

    #[test]
    fn a_wait_captures_its_record_and_not_a_later_one() {
        let mut s = setup();
        let ev = s.world.spawn(EventState::new(s.ctx)).id();
        let r1 = s.world.get_mut::<EventState>(ev).unwrap().push_record();
        s.world
            .get_mut::<EventState>(ev)
            .unwrap()
            .fire(r1, SimTime::ZERO);
        // Record 2 is enqueued behind running work and has not fired.
        let busy = spawn_stream(&mut s.world, s.ctx, 0);
        let blocker = enqueue(&mut s.world, busy, callback());
        let r2 = s.world.get_mut::<EventState>(ev).unwrap().push_record();
        enqueue(&mut s.world, busy, record(ev, r2));
        start_running(&mut s.world, blocker, 0, 0, 0, 1_000);

        let on_first = enqueue(&mut s.world, s.stream, wait(ev, r1));
        let third = spawn_stream(&mut s.world, s.ctx, 0);
        let on_second = enqueue(&mut s.world, third, wait(ev, r2));
        run(&mut s.world, resolve_dependencies);

        assert_eq!(
            status(&s.world, on_first),
            TaskStatus::Done,
            "a wait on record 1 does not wait for record 2"
        );
        assert_eq!(status(&s.world, on_second), TaskStatus::Queued);
    }

    #[test]
    fn a_wait_on_a_never_recorded_event_does_not_block() {
        let mut s = setup();
        let ev = s.world.spawn(EventState::new(s.ctx)).id();
        let w = enqueue(&mut s.world, s.stream, wait(ev, 0));
        let after = enqueue(&mut s.world, s.stream, callback());
        run(&mut s.world, resolve_dependencies);
        assert_eq!(status(&s.world, w), TaskStatus::Done);
        assert_eq!(status(&s.world, after), TaskStatus::Ready);
    }

    #[test]
    fn a_wait_on_a_destroyed_event_does_not_block() {
        let mut s = setup();
        let ev = s.world.spawn(EventState::new(s.ctx)).id();
        let r = s.world.get_mut::<EventState>(ev).unwrap().push_record();
        let w = enqueue(&mut s.world, s.stream, wait(ev, r));
        s.world.despawn(ev);
        run(&mut s.world, resolve_dependencies);
        assert_eq!(status(&s.world, w), TaskStatus::Done);
    }

    #[test]
    fn aborted_heads_complete_in_order_with_their_error() {
        let mut s = setup();
        let err = NpuError::StreamAbort {
            stream: "stream 1".into(),
            seq: 1,
        };
        let a = enqueue(&mut s.world, s.stream, callback());
        let b = enqueue(&mut s.world, s.stream, callback());
        // Submitted after the abort: it runs.
        let c = enqueue(&mut s.world, s.stream, callback());
        for t in [a, b] {
            let mut task = s.world.get_mut::<Task>(t).unwrap();
            task.status = TaskStatus::Aborted;
            task.error = Some(Box::new(err.clone()));
        }
        run(&mut s.world, resolve_dependencies);

        assert_eq!(s.world.resource::<Finished>().tasks, vec![a, b]);
        assert_eq!(status(&s.world, a), TaskStatus::Aborted);
        assert_eq!(task(&s.world, b).error.as_deref(), Some(&err));
        let st = stream(&s.world, s.stream);
        assert_eq!(st.completed, 2);
        assert_eq!(st.error, Some(err));
        assert_eq!(s.world.resource::<FrameStats>().tasks_aborted, 2);
        assert_eq!(status(&s.world, c), TaskStatus::Ready);
    }

    #[test]
    fn an_aborted_record_releases_its_waiters_without_firing() {
        let mut s = setup();
        let ev = s.world.spawn(EventState::new(s.ctx)).id();
        let r = s.world.get_mut::<EventState>(ev).unwrap().push_record();
        let rec = enqueue(&mut s.world, s.stream, record(ev, r));
        s.world.get_mut::<Task>(rec).unwrap().status = TaskStatus::Aborted;
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        let w = enqueue(&mut s.world, other, wait(ev, r));
        run(&mut s.world, resolve_dependencies);

        assert_eq!(status(&s.world, rec), TaskStatus::Aborted);
        assert_eq!(status(&s.world, w), TaskStatus::Done);
        assert_eq!(s.world.get::<EventState>(ev).unwrap().timestamp, None);
    }

    #[test]
    fn ready_keys_carry_the_stream_priority_order_and_sequence() {
        let mut s = setup();
        let urgent = spawn_stream(&mut s.world, s.ctx, -3);
        enqueue(&mut s.world, urgent, callback());
        enqueue(&mut s.world, urgent, callback());
        s.world
            .get_mut::<StreamState>(urgent)
            .unwrap()
            .queue
            .pop_front();
        s.world.get_mut::<StreamState>(urgent).unwrap().completed = 1;
        let head = stream(&s.world, urgent).queue[0];
        run(&mut s.world, resolve_dependencies);

        let order = stream(&s.world, urgent).order;
        assert_eq!(
            s.world.resource::<ReadyQueue>().tasks,
            vec![((-3, order, 2), head)]
        );
    }

    #[test]
    fn an_op_launch_made_ready_is_counted_for_shape_propagation() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        let op = npusim_components::shape::OpLaunch::new(2, 1);
        enqueue_with(
            &mut s.world,
            s.stream,
            launch(k, 1, &[0, 0, 0]),
            TaskExtra::Op(Box::new(op)),
            SimTime::ZERO,
        );
        let other = spawn_stream(&mut s.world, s.ctx, 0);
        enqueue(&mut s.world, other, launch(k, 1, &[]));
        run(&mut s.world, resolve_dependencies);
        assert_eq!(s.world.resource::<ReadyQueue>().new_ops, 1);

        run(&mut s.world, resolve_dependencies);
        assert_eq!(
            s.world.resource::<ReadyQueue>().new_ops,
            0,
            "counted once, in the frame it became ready"
        );
    }
}
