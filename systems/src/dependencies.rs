//! Dependency resolution: a stream's head task becomes ready when its predecessor in the stream
//! is done, the host has actually submitted it (its submit time has come), and — for an event
//! wait — the record it captured has fired. Cross-stream order comes only from events.
//! Heads aborted by an earlier failure leave their stream here, in order.
//!
//! Event records and satisfied event waits take no unit and no time, so they complete here, at
//! the moment they become ready, instead of waiting for dispatch and the next hardware tick: a
//! record fires (other streams see it within this same pass or the next frame), and the stream
//! moves on to its next head in the same frame.

use bevy_ecs::prelude::*;
use npusim_components::resources::{Finished, FrameStats, ReadyQueue, Running, SimClock};
use npusim_components::{
    DeviceState, EventState, SimTime, StreamState, Task, TaskKind, TaskStatus,
};

/// Makes ready every stream head whose dependencies are met.
#[allow(clippy::too_many_arguments)]
pub fn resolve_dependencies(
    clock: Res<SimClock>,
    mut streams: Query<&mut StreamState>,
    mut tasks: Query<&mut Task>,
    mut events: Query<&mut EventState>,
    mut ready: ResMut<ReadyQueue>,
    mut running: ResMut<Running>,
    mut finished: ResMut<Finished>,
    mut stats: ResMut<FrameStats>,
    mut devices: Query<&mut DeviceState>,
) {
    crate::zone!("npusim::dependencies");
    let now = clock.now;
    let mut wake = None::<SimTime>;
    // A record fired in this pass may release a wait on a stream visited before it: pass again
    // until no record fires, so the whole chain resolves at this instant.
    ready.new_ops = 0;
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
                    // Finish aborted tasks in stream order so synchronize sees them complete.
                    stream.queue.pop_front();
                    stream.completed = task.seq;
                    finished.tasks.push(head);
                    if let Ok(mut d) = devices.get_mut(task.device) {
                        d.finished += 1;
                    }
                    stats.last_frame_progressed = true;
                    continue;
                }
                if task.status != TaskStatus::Queued {
                    break;
                }
                if task.submit > now {
                    wake = Some(wake.map_or(task.submit, |w| w.min(task.submit)));
                    break;
                }
                if task.kind() == TaskKind::EventWait {
                    let event = Entity::try_from_bits(task.desc.args[0]);
                    let record = task.desc.args[1];
                    // A destroyed event can never fire again: its waiters do not block.
                    let done = event
                        .and_then(|e| events.get(e).ok())
                        .is_none_or(|ev| ev.record_done(record));
                    if !done {
                        break;
                    }
                }
                if matches!(task.kind(), TaskKind::EventRecord | TaskKind::EventWait) {
                    if task.kind() == TaskKind::EventRecord
                        && let Some(event) = Entity::try_from_bits(task.desc.args[0])
                        && let Ok(mut ev) = events.get_mut(event)
                    {
                        ev.fire(task.desc.args[1], now);
                        fired = true;
                    }
                    task.status = TaskStatus::Done;
                    task.start = now;
                    task.end = now;
                    task.executed = true;
                    stream.queue.pop_front();
                    stream.completed = task.seq;
                    stream.last_end = now;
                    finished.tasks.push(head);
                    if let Ok(mut d) = devices.get_mut(task.device) {
                        d.finished += 1;
                    }
                    stats.tasks_completed += 1;
                    stats.last_frame_progressed = true;
                    continue;
                }
                task.status = TaskStatus::Ready;
                stream.head_active = true;
                if task.desc.tensors != 0 {
                    ready.new_ops += 1;
                }
                ready
                    .tasks
                    .push(((task.priority, task.stream_order, task.seq), head));
                stats.last_frame_progressed = true;
                break;
            }
        }
    }
    running.next_wake = wake;
}
