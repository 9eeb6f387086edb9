//! Same program, same timeline: every simulated start and end, every result, and both clocks
//! are identical from run to run — also when runs happen at the same time on several threads.

use npusim::{HostFunc, Launch};
use std::sync::{Arc, Mutex};

use bevy_ecs::entity::Entity;
use npusim::TaskRecord;
use npusim::prelude::*;

/// What a run of [`program`] produced.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Timeline records with the stream entity replaced by the stream's creation index.
    timeline: Vec<(usize, TaskRecord)>,
    results: Vec<Vec<f32>>,
    callbacks: Vec<u32>,
    host_now: SimTime,
    device_now: SimTime,
    elapsed_ms: f32,
}

/// A program with everything that could make runs differ: several streams competing for
/// cores and DMA engines, events across streams, host work, callbacks, copies both ways.
fn program() -> Outcome {
    program_with(false)
}

/// [`program`]; with `take_schedule`, on a runtime whose schedule an embedder took with
/// `schedule_mut` (every frame runs that one schedule either way).
fn program_with(take_schedule: bool) -> Outcome {
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap();
    if take_schedule {
        rt.lock_world().schedule_mut();
    }
    let streams: Vec<Stream> = (0..3).map(|_| rt.streams().create().unwrap()).collect();
    let n = 50_000;
    let bytes = 4 * n as u64;
    let bufs: Vec<DevicePtr> = (0..6).map(|_| rt.memory().malloc(bytes).unwrap()).collect();
    let hosts: Vec<HostBuffer> = (0..3)
        .map(|_| rt.memory().malloc_host(bytes).unwrap())
        .collect();
    let input: Vec<f32> = (0..n).map(|i| (i % 97) as f32 - 40.0).collect();
    hosts[0].write(&input).unwrap();
    let k = |name: &str| rt.kernel(name).unwrap();
    let (start, done) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    // B's reads of a round's output are over before A writes the next round's.
    let read = rt.events().create().unwrap();
    let log: Arc<Mutex<Vec<u32>>> = Arc::default();

    for round in 0..4u32 {
        let (a, b, c) = (streams[0], streams[1], streams[2]);
        let x = bufs[(round % 2) as usize];
        let y = bufs[2 + (round % 2) as usize];
        rt.events().stream_wait(a, read).unwrap();
        rt.events().record(start, a).unwrap();
        rt.memory()
            .memcpy_htod_async(x, &hosts[0], bytes, a)
            .unwrap();
        rt.submit(Launch::new(
            k("relu_f32"),
            6,
            &[x.into(), y.into(), n.into()],
            a,
        ))
        .unwrap();
        rt.events().record(done, a).unwrap();
        // B and C compete for the 4 cores of the small device.
        rt.submit(Launch::new(
            k("fill_f32"),
            5,
            &[bufs[4].into(), n.into(), (round as f32).into()],
            b,
        ))
        .unwrap();
        rt.events().stream_wait(b, done).unwrap();
        rt.submit(Launch::new(
            k("axpy_f32"),
            3,
            &[n.into(), 0.5f32.into(), y.into(), bufs[4].into()],
            b,
        ))
        .unwrap();
        rt.submit(Launch::new(
            k("gemm_f32"),
            4,
            &[
                bufs[5].into(),
                bufs[5].into(),
                bufs[5].into(),
                64usize.into(),
                64usize.into(),
                64usize.into(),
            ],
            c,
        ))
        .unwrap();
        let log2 = log.clone();
        rt.submit(HostFunc::new(b, move || log2.lock().unwrap().push(round)))
            .unwrap();
        rt.memory()
            .memcpy_dtoh_async(&hosts[1], bufs[4], bytes, b)
            .unwrap();
        rt.events().record(read, b).unwrap();
        rt.host_work(SimTime::from_us(7 + round as u64));
        if round == 2 {
            rt.streams().synchronize(b).unwrap();
        }
    }
    rt.memory()
        .memcpy_dtoh_async(&hosts[2], bufs[5], 4 * 64 * 64, streams[2])
        .unwrap();
    rt.synchronize_device().unwrap();

    let order: Vec<Entity> = streams.iter().map(|s| s.entity()).collect();
    let default = rt.contexts().default_stream().unwrap().entity();
    let timeline = rt
        .timeline()
        .into_iter()
        .map(|mut r| {
            let index = order
                .iter()
                .position(|&e| e == r.stream)
                .unwrap_or_else(|| {
                    assert_eq!(r.stream, default, "a record of an unknown stream");
                    order.len()
                });
            r.stream = Entity::PLACEHOLDER;
            (index, r)
        })
        .collect();
    let results = hosts.iter().map(|h| h.read::<f32>().unwrap()).collect();
    let callbacks = log.lock().unwrap().clone();
    Outcome {
        timeline,
        results,
        callbacks,
        host_now: rt.host_now(),
        device_now: rt.device_now(),
        elapsed_ms: rt.events().elapsed_ms(start, done).unwrap(),
    }
}

#[test]
fn the_same_program_gives_the_same_timeline_and_results_every_run() {
    let first = program();
    assert!(first.timeline.len() > 40, "the program did something");
    assert!(
        first.timeline.iter().any(|(s, _)| *s == 1) && first.timeline.iter().any(|(s, _)| *s == 2)
    );
    assert_eq!(first.callbacks, [0, 1, 2, 3]);
    let second = program();
    assert_eq!(first, second);
}

#[test]
fn concurrent_runs_on_several_threads_agree() {
    let reference = program();
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3).map(|_| scope.spawn(program)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in outcomes {
        assert_eq!(o, reference);
    }
}

#[test]
fn taking_the_schedule_to_add_systems_leaves_a_program_s_outcome_as_it_was() {
    // Every frame runs the runtime's one bevy schedule; an embedder taking it (to add its own
    // systems, or to profile it) must not change what the frames do.
    let untouched = program_with(false);
    let taken = program_with(true);
    assert_eq!(untouched, taken);
}
