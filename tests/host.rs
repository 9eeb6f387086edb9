//! The host side: callbacks run on the host in stream order, and the host's simulated clock
//! moves with API calls, `host_work` and synchronization, so CPU work overlapping device work
//! shows on the timeline.

use npusim::{HostFunc, Launch};
use std::sync::{Arc, Mutex};

use npusim::TaskRecord;
use npusim::prelude::*;

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

fn records_of(rt: &Runtime, stream: Stream) -> Vec<TaskRecord> {
    let mut v: Vec<TaskRecord> = rt
        .timeline()
        .into_iter()
        .filter(|r| r.stream == stream.entity())
        .collect();
    v.sort_by_key(|r| r.seq);
    v
}

#[test]
fn host_callbacks_run_in_stream_order_between_the_tasks_around_them() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 14;
    let x = rt.memory().malloc(4 * n as u64).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    // Each callback notes its number and how many fills had finished when it ran.
    let log: Arc<Mutex<Vec<(u32, usize)>>> = Arc::default();
    for i in 0..4u32 {
        rt.submit(Launch::new(
            fill,
            2,
            &[x.into(), n.into(), (i as f32).into()],
            s,
        ))
        .unwrap();
        let (rt2, log2) = (rt.clone(), log.clone());
        rt.submit(HostFunc::new(s, move || {
            let fills = rt2
                .timeline()
                .iter()
                .filter(|r| r.name == "fill_f32")
                .count();
            log2.lock().unwrap().push((i, fills));
        }))
        .unwrap();
    }
    assert!(log.lock().unwrap().is_empty(), "callbacks wait their turn");
    rt.streams().synchronize(s).unwrap();

    assert_eq!(
        *log.lock().unwrap(),
        vec![(0, 1), (1, 2), (2, 3), (3, 4)],
        "callback i ran after fill i and before fill i+1"
    );
    let records = records_of(&rt, s);
    let kinds: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(kinds, ["fill_f32", "host_callback"].repeat(4));
    for w in records.windows(2) {
        assert!(
            w[1].start >= w[0].end,
            "{} overlaps {}",
            w[1].name,
            w[0].name
        );
    }
}

#[test]
fn a_host_callback_may_call_the_runtime() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(4096).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (rt2, seen2) = (rt.clone(), seen.clone());
    rt.submit(HostFunc::new(s, move || {
        let mut seen = seen2.lock().unwrap();
        // The fill behind this callback has not run yet: the stream is busy.
        seen.push(format!("busy={}", !rt2.streams().query(s).unwrap()));
        // Submitting from a callback works too; the new task goes to the back of the stream.
        let ev = rt2.events().create().unwrap();
        rt2.events().record(ev, s).unwrap();
        seen.push("recorded".into());
    }))
    .unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 1024usize.into(), 9.0f32.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    // The record submitted by the callback came after the sync's target; finish it too.
    rt.streams().synchronize(s).unwrap();

    assert_eq!(*seen.lock().unwrap(), ["busy=true", "recorded"]);
    let names: Vec<String> = records_of(&rt, s).into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["host_callback", "fill_f32", "event_record"]);
    let mut back = vec![0.0f32; 1024];
    rt.memory().memcpy_dtoh(&mut back, x).unwrap();
    assert!(back.iter().all(|&v| v == 9.0));
}

#[test]
fn host_work_moves_the_host_clock_and_not_the_device_clock() {
    let rt = runtime();
    let (h0, d0) = (rt.host_now(), rt.device_now());
    rt.host_work(SimTime::from_ms(3));
    assert_eq!(rt.host_now(), h0 + SimTime::from_ms(3));
    assert_eq!(rt.device_now(), d0);
}

#[test]
fn device_work_never_starts_before_the_host_submitted_it() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(4096).unwrap();
    rt.host_work(SimTime::from_ms(2));
    let before_launch = rt.host_now();
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), 1024usize.into(), 1.0f32.into()],
        s,
    ))
    .unwrap();
    let submitted = rt.host_now();
    rt.streams().synchronize(s).unwrap();

    let k = &records_of(&rt, s)[0];
    assert_eq!(
        k.submit, submitted,
        "the record carries the host submit time"
    );
    assert!(k.submit > before_launch, "launching costs host time");
    assert!(
        k.start >= k.submit,
        "started at {} before it was submitted at {}",
        k.start,
        k.submit
    );
}

#[test]
fn device_work_overlaps_host_work_submitted_after_it() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 20;
    let x = rt.memory().malloc(4 * n as u64).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), n.into(), 1.0f32.into()],
        s,
    ))
    .unwrap();
    let work_start = rt.host_now();
    rt.host_work(SimTime::from_us(50));
    let work_end = rt.host_now();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), n.into(), 2.0f32.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();

    let r = records_of(&rt, s);
    assert!(
        r[0].start < work_end && r[0].end > work_start,
        "the first kernel ran while the host worked"
    );
    assert!(r[1].submit > work_end);
    assert!(r[1].start >= r[1].submit.max(r[0].end));
}

#[test]
fn synchronize_moves_the_host_clock_to_the_end_of_the_stream() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 20;
    let x = rt.memory().malloc(4 * n as u64).unwrap();
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), n.into(), 1.0f32.into()],
        s,
    ))
    .unwrap();
    let submitted = rt.host_now();
    rt.streams().synchronize(s).unwrap();
    let end = records_of(&rt, s)[0].end;
    assert!(end > submitted, "the kernel outlasts its submission");
    assert!(rt.host_now() >= end, "host {} < end {}", rt.host_now(), end);

    // Host work after the sync starts from there: the host never goes back in time.
    let after_sync = rt.host_now();
    rt.host_work(SimTime::from_us(1));
    assert_eq!(rt.host_now(), after_sync + SimTime::from_us(1));
}
