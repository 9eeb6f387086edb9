//! The pipeline program's semantics on a bare `bevy_ecs` world, with nothing of npusim: each
//! task an entity, one system per stage (ingest, dependencies and dispatch, tick, retire), one
//! schedule run per round of submissions, retired entities reused. No handles, no checks, no
//! descriptor, no memory, no timeline. It measures what the design's shape costs by itself
//! (tasks as entities moved through an ordered schedule each frame), so the runtime's figure
//! can be read against it as well as against the hand-written loop.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::SingleThreadedExecutor;

use super::{STREAMS, WAIT_EVERY};

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Kernel,
    Record(usize, u64),
    Wait(usize, u64),
}

#[derive(Component)]
struct TaskC {
    op: Op,
    stream: usize,
}

#[derive(Component, Default)]
struct StreamC {
    queue: VecDeque<Entity>,
    busy: bool,
}

/// Submissions rung since the last frame: (stream, op).
#[derive(Resource, Default)]
struct Doorbell(Vec<(usize, Op)>);

#[derive(Resource)]
struct Machine {
    streams: Vec<Entity>,
    events_done: Vec<u64>,
    now: u64,
    free: u32,
    kernel_ns: u64,
    heap: BinaryHeap<Reverse<(u64, Entity)>>,
    finished: Vec<Entity>,
    pool: Vec<Entity>,
    completed: u64,
}

fn ingest(
    mut bell: ResMut<Doorbell>,
    mut m: ResMut<Machine>,
    mut tasks: Query<&mut TaskC>,
    mut streams: Query<&mut StreamC>,
    mut commands: Commands,
) {
    let m = &mut *m;
    for (s, op) in bell.0.drain(..) {
        let e = match m.pool.pop() {
            Some(e) => {
                let mut t = tasks.get_mut(e).expect("pooled task");
                t.op = op;
                t.stream = s;
                e
            }
            None => commands.spawn(TaskC { op, stream: s }).id(),
        };
        streams
            .get_mut(m.streams[s])
            .expect("stream")
            .queue
            .push_back(e);
    }
}

fn dispatch(mut m: ResMut<Machine>, tasks: Query<&TaskC>, mut streams: Query<&mut StreamC>) {
    let m = &mut *m;
    for &se in &m.streams {
        let mut st = streams.get_mut(se).expect("stream");
        while !st.busy {
            let Some(&e) = st.queue.front() else { break };
            // A task spawned this frame is not visible until the commands apply: next frame.
            let Ok(t) = tasks.get(e) else { break };
            match t.op {
                Op::Kernel => {
                    if m.free == 0 {
                        break;
                    }
                    m.free -= 1;
                    st.busy = true;
                    m.heap.push(Reverse((m.now + m.kernel_ns, e)));
                }
                Op::Record(ev, r) => {
                    m.events_done[ev] = m.events_done[ev].max(r);
                    st.queue.pop_front();
                    m.finished.push(e);
                }
                Op::Wait(ev, r) => {
                    if m.events_done[ev] < r {
                        break;
                    }
                    st.queue.pop_front();
                    m.finished.push(e);
                }
            }
        }
    }
}

fn tick(mut m: ResMut<Machine>, tasks: Query<&TaskC>, mut streams: Query<&mut StreamC>) {
    let m = &mut *m;
    let Some(&Reverse((t, _))) = m.heap.peek() else {
        return;
    };
    m.now = t;
    while let Some(&Reverse((t, e))) = m.heap.peek() {
        if t > m.now {
            break;
        }
        m.heap.pop();
        m.free += 1;
        let s = tasks.get(e).expect("running task").stream;
        let mut st = streams.get_mut(m.streams[s]).expect("stream");
        st.busy = false;
        st.queue.pop_front();
        m.finished.push(e);
    }
}

fn retire(mut m: ResMut<Machine>) {
    let m = &mut *m;
    m.completed += m.finished.len() as u64;
    m.pool.append(&mut m.finished);
}

/// Runs the pipeline program (`tasks` kernels, a wait every `WAIT_EVERY`) on the skeleton;
/// returns the tasks completed.
pub fn run(tasks: u64, cores: u32, kernel_ns: u64) -> u64 {
    let mut world = World::new();
    let streams = (0..STREAMS)
        .map(|_| world.spawn(StreamC::default()).id())
        .collect();
    world.insert_resource(Doorbell::default());
    world.insert_resource(Machine {
        streams,
        events_done: vec![0; STREAMS],
        now: 0,
        free: cores,
        kernel_ns,
        heap: BinaryHeap::new(),
        finished: Vec::new(),
        pool: Vec::new(),
        completed: 0,
    });
    let mut schedule = Schedule::default();
    schedule.set_executor(SingleThreadedExecutor::new());
    schedule.add_systems((ingest, dispatch, tick, retire).chain());
    let mut recorded = [0u64; STREAMS];
    let per_stream = tasks / STREAMS as u64;
    for j in 0..per_stream {
        {
            let mut bell = world.resource_mut::<Doorbell>();
            for s in 0..STREAMS {
                bell.0.push((s, Op::Kernel));
                if (j + 1) % WAIT_EVERY == 0 {
                    recorded[s] += 1;
                    bell.0.push((s, Op::Record(s, recorded[s])));
                    let n = (s + 1) % STREAMS;
                    bell.0.push((s, Op::Wait(n, recorded[n])));
                }
            }
        }
        schedule.run(&mut world);
    }
    // Synchronize: frames until every stream is empty.
    loop {
        let busy = world.resource::<Machine>().streams.iter().any(|&s| {
            world
                .get::<StreamC>(s)
                .is_some_and(|st| !st.queue.is_empty())
        });
        if !busy {
            break;
        }
        schedule.run(&mut world);
    }
    world.resource::<Machine>().completed
}
