//! Streams as a user sees them: tasks of one stream run one after another in submission order,
//! submission returns before anything runs, and a timed synchronize gives up without losing
//! the work.

use npusim::{HostFunc, Launch};
use std::sync::{Arc, Mutex};

use npusim::prelude::*;
use npusim::{TaskRecord, codes};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

/// The timeline records of `stream`, in stream order.
fn records_of(rt: &Runtime, stream: Stream) -> Vec<TaskRecord> {
    let mut v: Vec<TaskRecord> = rt
        .timeline()
        .into_iter()
        .filter(|r| r.stream == stream.entity())
        .collect();
    v.sort_by_key(|r| r.seq);
    v
}

fn f32_bytes(n: usize) -> u64 {
    4 * n as u64
}

#[test]
fn tasks_of_one_stream_run_in_submission_order_one_after_another() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 16;
    let bytes = f32_bytes(n);
    let (x, y, z) = (
        rt.memory().malloc(bytes).unwrap(),
        rt.memory().malloc(bytes).unwrap(),
        rt.memory().malloc(bytes).unwrap(),
    );
    let k = |name: &str| rt.kernel(name).unwrap();
    // Big launches and tiny ones alternate, so a later task would finish first if the stream
    // did not keep them in order; every kernel reads what the one before it wrote.
    rt.submit(Launch::new(
        k("fill_f32"),
        24,
        &[x.into(), n.into(), 2.0f32.into()],
        s,
    ))
    .unwrap();
    rt.submit(Launch::new(
        k("fill_f32"),
        1,
        &[y.into(), n.into(), 3.0f32.into()],
        s,
    ))
    .unwrap();
    rt.submit(Launch::new(
        k("vector_add_f32"),
        24,
        &[x.into(), y.into(), z.into(), n.into()],
        s,
    ))
    .unwrap(); // z = 5
    rt.submit(Launch::new(
        k("vector_mul_f32"),
        2,
        &[z.into(), z.into(), x.into(), n.into()],
        s,
    ))
    .unwrap(); // x = 25
    rt.submit(Launch::new(
        k("axpy_f32"),
        8,
        &[n.into(), (-0.5f32).into(), x.into(), y.into()],
        s,
    ))
    .unwrap(); // y = 3 - 12.5 = -9.5
    rt.submit(Launch::new(
        k("relu_f32"),
        1,
        &[y.into(), z.into(), n.into()],
        s,
    ))
    .unwrap(); // z = 0
    rt.memory().memset_async(x, 0, bytes / 2, s).unwrap();
    rt.submit(Launch::new(
        k("vector_add_f32"),
        4,
        &[x.into(), y.into(), x.into(), n.into()],
        s,
    ))
    .unwrap(); // x = [-9.5; n/2] ++ [25 - 9.5; n/2]
    let out = rt.memory().malloc_host(bytes).unwrap();
    rt.memory().memcpy_dtoh_async(&out, x, bytes, s).unwrap();
    rt.streams().synchronize(s).unwrap();

    let records = records_of(&rt, s);
    assert_eq!(records.len(), 9, "every task is on the timeline once");
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.seq, i as u64 + 1, "sequence numbers follow submission");
        assert!(r.ok, "{} failed", r.name);
        assert!(r.end >= r.start);
    }
    for w in records.windows(2) {
        assert!(w[1].start >= w[0].start, "starts are non-decreasing");
        assert!(
            w[1].start >= w[0].end,
            "{} (seq {}) started at {} before {} (seq {}) ended at {}",
            w[1].name,
            w[1].seq,
            w[1].start,
            w[0].name,
            w[0].seq,
            w[0].end
        );
    }

    let x_host: Vec<f32> = out.read().unwrap();
    assert!(x_host[..n / 2].iter().all(|&v| v == -9.5));
    assert!(x_host[n / 2..].iter().all(|&v| v == 15.5));
    let mut z_host = vec![1.0f32; n];
    rt.memory().memcpy_dtoh(&mut z_host, z).unwrap();
    assert!(z_host.iter().all(|&v| v == 0.0), "relu of -9.5 is 0");
}

#[test]
fn a_launch_returns_before_anything_executes() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1024;
    let bytes = f32_bytes(n);
    let x = rt.memory().malloc(bytes).unwrap();
    let out = rt.memory().malloc_host(bytes).unwrap();
    out.write(&vec![7.0f32; n]).unwrap();
    let before = rt.stats();

    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        4,
        &[x.into(), n.into(), 1.5f32.into()],
        s,
    ))
    .unwrap();
    rt.memory().memcpy_dtoh_async(&out, x, bytes, s).unwrap();

    assert!(!rt.streams().query(s).unwrap(), "the stream still has work");
    assert!(rt.timeline().is_empty(), "nothing has run");
    let after = rt.stats();
    assert_eq!(
        after.frames, before.frames,
        "no frame ran during submission"
    );
    assert_eq!(after.device_now, before.device_now);
    assert!(
        after.host_now > before.host_now,
        "submitting costs host time"
    );
    assert_eq!(
        out.read::<f32>().unwrap(),
        vec![7.0f32; n],
        "the copy back has not happened yet"
    );

    rt.streams().synchronize(s).unwrap();
    assert!(rt.streams().query(s).unwrap());
    assert_eq!(out.read::<f32>().unwrap(), vec![1.5f32; n]);
    assert_eq!(records_of(&rt, s).len(), 2);
}

#[test]
fn synchronize_with_a_tiny_timeout_fails_and_a_later_synchronize_succeeds() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 20;
    let x = rt.memory().malloc(f32_bytes(n)).unwrap();
    // One block over a million elements: hundreds of microseconds of simulated time.
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), n.into(), 4.0f32.into()],
        s,
    ))
    .unwrap();

    let host_before = rt.host_now();
    let err = rt
        .streams()
        .synchronize_timeout(s, SimTime::from_ns(1))
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_WAIT_TIMEOUT, "{err}");
    assert_eq!(err.code(), 107019);
    assert!(!rt.streams().query(s).unwrap(), "the work is still queued");
    assert!(rt.host_now() >= host_before + SimTime::from_ns(1));
    assert!(
        rt.device_now() <= rt.host_now(),
        "the device did not run past the deadline"
    );

    rt.streams().synchronize(s).unwrap();
    assert!(rt.streams().query(s).unwrap());
    let mut back = vec![0.0f32; n];
    rt.memory().memcpy_dtoh(&mut back, x).unwrap();
    assert!(back.iter().all(|&v| v == 4.0));
}

#[test]
fn synchronize_with_an_ample_timeout_succeeds() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 12;
    let x = rt.memory().malloc(f32_bytes(n)).unwrap();
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), n.into(), 4.0f32.into()],
        s,
    ))
    .unwrap();
    rt.streams()
        .synchronize_timeout(s, SimTime::from_ms(1000))
        .unwrap();
    assert!(rt.streams().query(s).unwrap());
}

#[test]
fn synchronizing_an_idle_stream_returns_at_once() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let frames = rt.stats().frames.frames;
    rt.streams().synchronize(s).unwrap();
    assert!(rt.streams().query(s).unwrap());
    assert_eq!(rt.stats().frames.frames, frames);
}

#[test]
fn a_callback_destroying_its_own_stream_gets_an_error_and_the_stream_goes_on() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(4096).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 1024usize.into(), 1.0f32.into()],
        s,
    ))
    .unwrap();
    let rt2 = rt.clone();
    let code = Arc::new(Mutex::new(None));
    let code2 = code.clone();
    rt.submit(HostFunc::new(s, move || {
        // Destroying waits for the stream's work, this callback included: it cannot finish.
        *code2.lock().unwrap() = Some(rt2.streams().destroy(s).map_err(|e| e.code()));
    }))
    .unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 1024usize.into(), 2.0f32.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    assert_eq!(*code.lock().unwrap(), Some(Err(codes::RT_WAIT_TIMEOUT)));
    // The stream stayed and all its work ran.
    let mut back = vec![0.0f32; 1024];
    rt.memory().memcpy_dtoh(&mut back, x).unwrap();
    assert!(back.iter().all(|&v| v == 2.0));
    assert!(rt.timeline().iter().all(|r| r.ok));
    rt.streams().destroy(s).unwrap();
}
