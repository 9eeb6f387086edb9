//! Dependency resolution: a stream's head task becomes ready when its predecessor in the stream
//! is done, the host has actually submitted it (its submit time has come), and — for an event
//! wait — the record it captured has fired. Cross-stream order comes only from events.
//!
//! Tasks that need no unit and no time complete here, through [`Completion`], at the moment
//! they become ready: event records (other streams see them within this same pass or the next
//! frame), satisfied event waits, and heads aborted by an earlier failure (in stream order, so a
//! synchronize sees them finish). The stream then moves on to its next head in the same frame.

use bevy_ecs::prelude::*;
use npusim_components::resources::{ReadyQueue, Running, SimClock};
use npusim_components::{SimTime, StreamState, Task, TaskKind, TaskStatus};

use crate::complete::{Completion, Outcome};

/// Makes ready every stream head whose dependencies are met.
pub fn resolve_dependencies(
    clock: Res<SimClock>,
    mut streams: Query<&mut StreamState>,
    mut tasks: Query<&mut Task>,
    mut ready: ResMut<ReadyQueue>,
    mut running: ResMut<Running>,
    mut completion: Completion,
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
                completion.progressed();
                break;
            }
        }
    }
    running.next_wake = wake;
}
