//! Events as a user sees them: the only order between streams, with ACL / CUDA semantics — a
//! wait captures the record that was latest when it was enqueued, a never-recorded event does
//! not block, and elapsed time is the modeled time between two records.

use npusim::Launch;
use npusim::prelude::*;
use npusim::{TaskRecord, codes};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

/// The kernel records of `stream` named `name`, in stream order.
fn kernels_on(rt: &Runtime, stream: Stream, name: &str) -> Vec<TaskRecord> {
    let mut v: Vec<TaskRecord> = rt
        .timeline()
        .into_iter()
        .filter(|r| r.stream == stream.entity() && r.name == name)
        .collect();
    v.sort_by_key(|r| r.seq);
    v
}

/// A producer on `a` fills `x` (slowly: one block over many elements), a consumer on `b`
/// computes `y = x + x`; with `join`, `b` waits on an event recorded on `a` after the producer.
/// Returns the runtime, the streams and the consumer's output.
fn producer_consumer(join: bool) -> (Runtime, Stream, Stream, Vec<f32>) {
    let rt = runtime();
    let (a, b) = (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    );
    let n = 1 << 18;
    let bytes = 4 * n as u64;
    let (x, y) = (
        rt.memory().malloc(bytes).unwrap(),
        rt.memory().malloc(bytes).unwrap(),
    );
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), n.into(), 1.25f32.into()],
        a,
    ))
    .unwrap();
    if join {
        let produced = rt.events().create().unwrap();
        rt.events().record(produced, a).unwrap();
        rt.events().stream_wait(b, produced).unwrap();
    }
    rt.submit(Launch::new(
        rt.kernel("vector_add_f32").unwrap(),
        8,
        &[x.into(), x.into(), y.into(), n.into()],
        b,
    ))
    .unwrap();
    let out = rt.memory().malloc_host(bytes).unwrap();
    rt.memory().memcpy_dtoh_async(&out, y, bytes, b).unwrap();
    rt.streams().synchronize(a).unwrap();
    rt.streams().synchronize(b).unwrap();
    let y_host = out.read().unwrap();
    (rt, a, b, y_host)
}

#[test]
fn a_consumer_waiting_on_an_event_never_starts_before_the_producer_ends() {
    let (rt, a, b, y) = producer_consumer(true);
    let producer = &kernels_on(&rt, a, "fill_f32")[0];
    let consumer = &kernels_on(&rt, b, "vector_add_f32")[0];
    assert!(
        consumer.start >= producer.end,
        "consumer started at {} before the producer ended at {}",
        consumer.start,
        producer.end
    );
    assert!(
        y.iter().all(|&v| v == 2.5),
        "the consumer saw the producer's data"
    );
}

#[test]
fn without_an_event_two_streams_overlap() {
    let (rt, a, b, y) = producer_consumer(false);
    let producer = &kernels_on(&rt, a, "fill_f32")[0];
    let consumer = &kernels_on(&rt, b, "vector_add_f32")[0];
    assert!(
        consumer.start < producer.end,
        "with nothing joining them the streams run concurrently"
    );
    assert!(
        consumer.end < producer.end,
        "the short consumer finishes first"
    );
    assert!(
        y.iter().all(|&v| v == 0.0),
        "so it read memory the producer had not written yet"
    );
}

#[test]
fn a_wait_captures_the_record_that_was_latest_when_it_was_enqueued() {
    let rt = runtime();
    let (a, b) = (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    );
    let n = 1 << 18;
    let (x, y, z) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(16 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let fill = rt.kernel("fill_f32").unwrap();
    let ev = rt.events().create().unwrap();
    // Kernel 1, record; B waits (on record 1); then a much longer kernel 2 and a second record.
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), n.into(), 1.0f32.into()],
        a,
    ))
    .unwrap();
    rt.events().record(ev, a).unwrap();
    rt.events().stream_wait(b, ev).unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[y.into(), (4 * n).into(), 2.0f32.into()],
        a,
    ))
    .unwrap();
    rt.events().record(ev, a).unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[z.into(), n.into(), 3.0f32.into()],
        b,
    ))
    .unwrap();
    rt.streams().synchronize(a).unwrap();
    rt.streams().synchronize(b).unwrap();

    let on_a = kernels_on(&rt, a, "fill_f32");
    let (k1, k2) = (&on_a[0], &on_a[1]);
    let consumer = &kernels_on(&rt, b, "fill_f32")[0];
    assert!(
        k2.end > k1.end + (k1.end - k1.start),
        "kernel 2 is the long one"
    );
    assert_eq!(
        consumer.start, k1.end,
        "B's task starts when kernel 1 (the record it captured) ends"
    );
    assert!(
        consumer.end < k2.end,
        "and does not wait for the later record"
    );
}

#[test]
fn waiting_on_a_never_recorded_event_does_not_block() {
    let rt = runtime();
    let (a, b) = (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    );
    let n = 1 << 18;
    let (x, y) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let fill = rt.kernel("fill_f32").unwrap();
    let ev = rt.events().create().unwrap();
    assert!(
        rt.events().query(ev).unwrap(),
        "a never-recorded event is complete"
    );
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), n.into(), 1.0f32.into()],
        a,
    ))
    .unwrap();
    rt.events().stream_wait(b, ev).unwrap();
    // Recording after the wait was enqueued does not affect it.
    rt.events().record(ev, a).unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[y.into(), 1024usize.into(), 2.0f32.into()],
        b,
    ))
    .unwrap();
    rt.streams().synchronize(b).unwrap();
    rt.events().synchronize(ev).unwrap();

    let on_a = &kernels_on(&rt, a, "fill_f32")[0];
    let on_b = &kernels_on(&rt, b, "fill_f32")[0];
    assert!(
        on_b.end < on_a.end,
        "B ran while A's long kernel was still running"
    );
}

/// A kernel whose cost the test knows: pure vector work, `args[0]` flops.
fn timed_kernel(rt: &Runtime) -> Kernel {
    rt.kernels().register(NativeKernel::new(
        "timed",
        |_| Ok(()),
        |args, _| KernelCost::vector(args[0] as f64, 0.0),
    ))
}

#[test]
fn elapsed_time_between_two_events_is_the_modeled_kernel_duration() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let timed = timed_kernel(&rt);
    let (start, end) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    // A long first kernel makes sure every later call was submitted before the device reaches
    // them, so the timed kernel starts exactly when the start event fires.
    rt.submit(Launch::new(timed, 1, &[1_000_000_000u64.into()], s))
        .unwrap();
    rt.events().record(start, s).unwrap();
    let (flops, block_dim) = (3_000_000_000u64, 12u32);
    rt.submit(Launch::new(timed, block_dim, &[flops.into()], s))
        .unwrap();
    rt.events().record(end, s).unwrap();
    rt.streams().synchronize(s).unwrap();

    let cfg = rt.device_config(0).unwrap();
    let modeled = cfg.kernel_duration_ns(
        &KernelCost::vector(flops as f64, 0.0),
        block_dim,
        block_dim.min(cfg.ai_cores),
    );
    let t0 = rt.events().timestamp(start).unwrap();
    let t1 = rt.events().timestamp(end).unwrap();
    assert_eq!((t1 - t0).as_ns(), modeled);
    let ms = rt.events().elapsed_ms(start, end).unwrap();
    assert_eq!(ms, (modeled as f64 / 1e6) as f32);
    let k = &kernels_on(&rt, s, "timed")[1];
    assert_eq!((k.start, k.end), (t0, t1), "the events bracket the kernel");
}

#[test]
fn elapsed_time_before_the_events_complete_is_not_complete() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let timed = timed_kernel(&rt);
    let (start, end) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    rt.events().record(start, s).unwrap();
    rt.submit(Launch::new(timed, 1, &[1_000_000u64.into()], s))
        .unwrap();
    rt.events().record(end, s).unwrap();

    let err = rt.events().elapsed_ms(start, end).unwrap_err();
    assert_eq!(err.code(), codes::RT_EVENT_NOT_COMPLETE, "{err}");
    assert_eq!(err.code(), 507006);
    assert!(!rt.events().query(end).unwrap());

    rt.events().synchronize(end).unwrap();
    assert!(rt.events().query(end).unwrap());
    assert!(rt.events().elapsed_ms(start, end).unwrap() > 0.0);
}

#[test]
fn elapsed_time_with_a_never_recorded_event_is_an_error() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let (recorded, never) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    rt.events().record(recorded, s).unwrap();
    rt.streams().synchronize(s).unwrap();
    for err in [
        rt.events().elapsed_ms(recorded, never).unwrap_err(),
        rt.events().elapsed_ms(never, recorded).unwrap_err(),
        rt.events().timestamp(never).unwrap_err(),
    ] {
        assert_eq!(err.code(), codes::RT_EVENT_TIMESTAMP_INVALID, "{err}");
        assert!(matches!(err, NpuError::EventNotRecorded(_)));
    }
}

#[test]
fn synchronizing_an_event_moves_the_host_clock_to_its_timestamp() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let timed = timed_kernel(&rt);
    let ev = rt.events().create().unwrap();
    rt.submit(Launch::new(timed, 1, &[100_000_000u64.into()], s))
        .unwrap();
    rt.events().record(ev, s).unwrap();
    rt.events().synchronize(ev).unwrap();
    let stamp = rt.events().timestamp(ev).unwrap();
    assert!(
        stamp > SimTime::from_us(100),
        "the record fired after the kernel"
    );
    assert!(rt.host_now() >= stamp);
}

#[test]
fn an_event_wait_past_the_wait_timeout_fails_its_stream_and_releases_it() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    rt.limits()
        .set_event_wait_timeout(Some(SimTime::from_ms(5)));
    let (a, b) = (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    );
    let e = rt.events().create().unwrap();
    let spin = rt.kernel("fault_spin").unwrap();
    // The record comes after a kernel that runs far longer than the wait may wait.
    rt.submit(Launch::new(spin, 1, &[], a)).unwrap();
    rt.events().record(e, a).unwrap();
    rt.events().stream_wait(b, e).unwrap();
    let err = rt.streams().synchronize(b).unwrap_err();
    assert_eq!(err.code(), 107019, "{err}");
    let waited = rt
        .timeline()
        .into_iter()
        .find(|r| r.name == "event_wait")
        .expect("the wait is on the timeline");
    assert!(!waited.ok);
    assert_eq!(waited.end, waited.submit + SimTime::from_ms(5));
}

#[test]
fn without_a_wait_timeout_a_long_wait_just_waits() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let (a, b) = (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    );
    let e = rt.events().create().unwrap();
    let gemm = rt.kernel("gemm_f32").unwrap();
    let (x, y, z) = (
        rt.memory().malloc(1 << 22).unwrap(),
        rt.memory().malloc(1 << 22).unwrap(),
        rt.memory().malloc(1 << 22).unwrap(),
    );
    rt.submit(Launch::new(
        gemm,
        1,
        &[
            x.into(),
            y.into(),
            z.into(),
            128u64.into(),
            128u64.into(),
            128u64.into(),
        ],
        a,
    ))
    .unwrap();
    rt.events().record(e, a).unwrap();
    rt.events().stream_wait(b, e).unwrap();
    rt.streams().synchronize(b).unwrap();
}

#[test]
fn a_wait_with_its_own_timeout_for_a_record_that_never_comes_fails_and_its_stream_goes_on() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let s = rt.streams().create().unwrap();
    let e = rt.events().create().unwrap();
    // Record 1 of `e` is never enqueued.
    rt.events()
        .stream_wait_record(s, e, 1, Some(SimTime::from_ms(3)))
        .unwrap();
    let buf = rt.memory().malloc(64).unwrap();
    rt.memory().memset_async(buf, 9, 64, s).unwrap();
    assert_eq!(rt.streams().synchronize(s).unwrap_err().code(), 107019);
    let mut out = [0u8; 64];
    rt.memory().memcpy_dtoh(&mut out, buf).unwrap();
    assert_eq!(out, [9u8; 64], "the work after the wait ran");
}
