//! The pipeline benchmark's program, shared by `pipeline.rs` (criterion) and `probe.rs`
//! (instruction counts): 1,000,000 trivial kernels on 16 streams, each stream waiting every 8
//! kernels on an event its neighbour recorded, and the same semantics as a hand-written loop.

use npusim::Launch;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use npusim::HostCosts;
use npusim::prelude::*;

#[allow(dead_code)] // the launch-only benches do not use it
pub mod skeleton;

/// Kernels the criterion bench launches.
#[allow(dead_code)] // the probe runs a tenth of it
pub const TASKS: u64 = 1_000_000;
/// Streams.
pub const STREAMS: usize = 16;
/// Each stream waits on its neighbour's event every this many kernels.
pub const WAIT_EVERY: u64 = 8;

/// The npusim program: submit everything, then synchronize.
pub fn run_npusim(tasks: u64) -> u64 {
    run_npusim_with(tasks, None).0
}

/// The npusim program with its API calls recorded (in memory): tasks completed, and the
/// trace.
#[allow(dead_code)]
pub fn run_npusim_recorded(tasks: u64) -> (u64, npusim::record::Trace) {
    let (done, trace) = run_npusim_with(
        tasks,
        Some(npusim::record::Recording {
            path: None,
            data: false,
        }),
    );
    (done, trace.expect("recording"))
}

fn run_npusim_with(
    tasks: u64,
    recording: Option<npusim::record::Recording>,
) -> (u64, Option<npusim::record::Trace>) {
    let host = HostCosts::zero();
    let rt = Runtime::new(RuntimeConfig {
        timeline: false,
        host,
        recording,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let noop = rt.kernel("noop").unwrap();
    let streams: Vec<Stream> = (0..STREAMS)
        .map(|_| rt.streams().create().unwrap())
        .collect();
    let events: Vec<Event> = (0..STREAMS)
        .map(|_| rt.events().create().unwrap())
        .collect();
    let per_stream = tasks / STREAMS as u64;
    for j in 0..per_stream {
        for (s, &stream) in streams.iter().enumerate() {
            rt.submit(Launch::new(noop, 1, &[], stream)).unwrap();
            if (j + 1) % WAIT_EVERY == 0 {
                rt.events().record(events[s], stream).unwrap();
                rt.events()
                    .stream_wait(stream, events[(s + 1) % STREAMS])
                    .unwrap();
            }
        }
        // Let the device make progress between submissions, as a real host loop overlaps them.
        rt.step();
    }
    rt.synchronize_device().unwrap();
    let stats = rt.stats();
    assert_eq!(stats.live_tasks, 0);
    (stats.frames.tasks_completed, rt.take_trace())
}

/// The same semantics by hand: no ECS, no handles, no checks.
pub mod plain {
    use super::*;

    #[derive(Clone, Copy)]
    enum Op {
        Kernel,
        Record(usize, u64),
        Wait(usize, u64),
    }

    struct Stream {
        queue: VecDeque<Op>,
        busy: bool,
    }

    #[derive(Default)]
    struct Event {
        recorded: u64,
        done: u64,
    }

    pub fn run(tasks: u64, cores: u32, kernel_ns: u64) -> u64 {
        let mut streams: Vec<Stream> = (0..STREAMS)
            .map(|_| Stream {
                queue: VecDeque::new(),
                busy: false,
            })
            .collect();
        let mut events: Vec<Event> = (0..STREAMS).map(|_| Event::default()).collect();
        let per_stream = tasks / STREAMS as u64;
        for j in 0..per_stream {
            for s in 0..STREAMS {
                streams[s].queue.push_back(Op::Kernel);
                if (j + 1) % WAIT_EVERY == 0 {
                    events[s].recorded += 1;
                    let r = events[s].recorded;
                    streams[s].queue.push_back(Op::Record(s, r));
                    let n = (s + 1) % STREAMS;
                    let captured = events[n].recorded;
                    streams[s].queue.push_back(Op::Wait(n, captured));
                }
            }
        }
        let mut now = 0u64;
        let mut free = cores;
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut completed = 0u64;
        loop {
            // Dependencies + dispatch.
            for (s, st) in streams.iter_mut().enumerate() {
                while !st.busy {
                    let Some(&op) = st.queue.front() else { break };
                    match op {
                        Op::Kernel => {
                            if free == 0 {
                                break;
                            }
                            free -= 1;
                            st.busy = true;
                            heap.push(Reverse((now + kernel_ns, s)));
                        }
                        Op::Record(e, r) => {
                            events[e].done = events[e].done.max(r);
                            st.queue.pop_front();
                            completed += 1;
                        }
                        Op::Wait(e, r) => {
                            if events[e].done < r {
                                break;
                            }
                            st.queue.pop_front();
                            completed += 1;
                        }
                    }
                }
            }
            // Tick.
            let Some(&Reverse((t, _))) = heap.peek() else {
                break;
            };
            now = t;
            while let Some(&Reverse((t, s))) = heap.peek() {
                if t > now {
                    break;
                }
                heap.pop();
                free += 1;
                streams[s].busy = false;
                streams[s].queue.pop_front();
                completed += 1;
            }
        }
        completed
    }
}
