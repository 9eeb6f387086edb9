//! Faults: a kernel that faults fails its synchronize with the AI-core error, leaves a sticky
//! error that the context's later calls return, aborts that context's queued work — and leaves
//! every other context, on the same device at the same time, untouched.

use npusim::Launch;
use npusim::prelude::*;
use npusim::{FailureMode, codes};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

#[track_caller]
fn assert_code<T: std::fmt::Debug>(result: NpuResult<T>, code: i32) {
    match result {
        Ok(v) => panic!("expected error {code}, got Ok({v:?})"),
        Err(e) => assert_eq!(e.code(), code, "{e}"),
    }
}

/// An address no context ever allocated.
const WILD: DevicePtr = DevicePtr(0xdead_0000);

#[test]
fn a_bad_address_fails_the_synchronize_with_an_aicore_exception() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    rt.submit(Launch::new(
        rt.kernel("fault_bad_address").unwrap(),
        1,
        &[WILD.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(err.code(), codes::RT_AICORE_EXCEPTION, "{err}");
    assert_eq!(err.code(), 507015);
    assert!(
        matches!(err, NpuError::AicoreException { ref kernel, .. } if kernel == "fault_bad_address")
    );
    let r = &rt.timeline()[0];
    assert!(!r.ok, "the timeline shows the failed task");
}

#[test]
fn a_faulted_context_returns_its_sticky_error_and_aborts_its_queued_work() {
    let rt = runtime();
    let (s, other) = (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    );
    let x = rt.memory().malloc(4096).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    // A long kernel on another stream of the same context is still running when the fault
    // hits, and more work is queued behind the faulting kernel.
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 1024usize.into(), 1.0f32.into()],
        other,
    ))
    .unwrap();
    rt.submit(Launch::new(
        rt.kernel("fault_bad_address").unwrap(),
        1,
        &[WILD.into()],
        s,
    ))
    .unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 1024usize.into(), 2.0f32.into()],
        s,
    ))
    .unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 1024usize.into(), 3.0f32.into()],
        other,
    ))
    .unwrap();

    assert_code(rt.streams().synchronize(s), codes::RT_AICORE_EXCEPTION);
    let sticky = rt.contexts().error().unwrap().expect("the context faulted");
    assert_eq!(sticky.code(), codes::RT_AICORE_EXCEPTION);

    // Every later call of the context returns the sticky error.
    assert_code(rt.streams().create(), codes::RT_AICORE_EXCEPTION);
    assert_code(rt.memory().malloc(64), codes::RT_AICORE_EXCEPTION);
    assert_code(rt.events().create(), codes::RT_AICORE_EXCEPTION);
    assert_code(
        rt.submit(Launch::new(fill, 1, &[], s)),
        codes::RT_AICORE_EXCEPTION,
    );
    assert_code(rt.streams().query(other), codes::RT_AICORE_EXCEPTION);
    assert_code(rt.streams().synchronize(other), codes::RT_AICORE_EXCEPTION);
    assert_code(rt.synchronize_device(), codes::RT_AICORE_EXCEPTION);

    // The work queued behind the fault never ran.
    let stats = rt.stats();
    assert_eq!(stats.frames.tasks_failed, 1);
    assert!(stats.frames.tasks_aborted >= 2, "{:?}", stats.frames);
    let fills_done = rt
        .timeline()
        .iter()
        .filter(|r| r.name == "fill_f32" && r.ok)
        .count();
    assert!(fills_done <= 1, "at most the fill already running finished");
}

#[test]
fn another_context_on_the_same_device_is_unaffected_by_a_fault() {
    let rt = runtime();
    let victim = rt.contexts().current().unwrap();
    let bad = rt.streams().create().unwrap();

    let healthy = rt.contexts().create(0).unwrap();
    let good = rt.streams().create().unwrap();
    let n = 1 << 16;
    let (a, b, c) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let fill = rt.kernel("fill_f32").unwrap();
    let add = rt.kernel("vector_add_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        2,
        &[a.into(), n.into(), 1.5f32.into()],
        good,
    ))
    .unwrap();
    rt.submit(Launch::new(
        fill,
        2,
        &[b.into(), n.into(), 2.0f32.into()],
        good,
    ))
    .unwrap();

    // The fault happens while the healthy context's work is queued and running.
    rt.contexts().set_current(victim).unwrap();
    // It even aims at the healthy context's memory: another context's memory is unmapped.
    rt.submit(Launch::new(
        rt.kernel("fault_bad_address").unwrap(),
        1,
        &[a.into()],
        bad,
    ))
    .unwrap();
    assert_code(rt.streams().synchronize(bad), codes::RT_AICORE_EXCEPTION);
    assert_code(rt.memory().malloc(64), codes::RT_AICORE_EXCEPTION);

    rt.contexts().set_current(healthy).unwrap();
    assert_eq!(rt.contexts().error().unwrap(), None);
    rt.submit(Launch::new(
        add,
        4,
        &[a.into(), b.into(), c.into(), n.into()],
        good,
    ))
    .unwrap();
    rt.streams().synchronize(good).unwrap();
    rt.synchronize_device().unwrap();
    let mut out = vec![0.0f32; n];
    rt.memory().memcpy_dtoh(&mut out, c).unwrap();
    assert!(out.iter().all(|&v| v == 3.5));
    let s2 = rt.streams().create().unwrap();
    rt.streams().destroy(s2).unwrap();

    // The victim stays faulted.
    rt.contexts().set_current(victim).unwrap();
    assert_code(rt.streams().create(), codes::RT_AICORE_EXCEPTION);
}

#[test]
fn a_divide_by_zero_traps_and_in_continue_mode_the_stream_carries_on() {
    let rt = runtime();
    rt.contexts()
        .set_failure_mode(FailureMode::Continue)
        .unwrap();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    rt.submit(Launch::new(
        rt.kernel("fault_div_zero").unwrap(),
        1,
        &[0u64.into()],
        s,
    ))
    .unwrap();
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), 16usize.into(), 4.0f32.into()],
        s,
    ))
    .unwrap();
    assert_code(rt.streams().synchronize(s), codes::RT_AICORE_TRAP_EXCEPTION);
    // The error was reported once; the context and the rest of the stream carry on.
    rt.streams().synchronize(s).unwrap();
    let mut back = [0.0f32; 16];
    rt.memory().memcpy_dtoh(&mut back, x).unwrap();
    assert_eq!(back, [4.0; 16]);
    assert_eq!(rt.contexts().error().unwrap(), None);
}

#[test]
fn a_kernel_that_never_finishes_is_stopped_by_the_watchdog() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    rt.submit(Launch::new(rt.kernel("fault_spin").unwrap(), 1, &[], s))
        .unwrap();
    assert_code(rt.streams().synchronize(s), codes::RT_AICORE_TIMEOUT);
}

#[test]
fn stream_and_event_calls_see_a_fault_at_once_and_work_again_after_a_reset() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let ev = rt.events().create().unwrap();
    let noop = rt.kernel("noop").unwrap();
    // Healthy: every call of the hot path goes through.
    rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
    rt.events().record(ev, s).unwrap();
    rt.events().stream_wait(s, ev).unwrap();
    rt.streams().synchronize(s).unwrap();

    rt.submit(Launch::new(
        rt.kernel("fault_bad_address").unwrap(),
        1,
        &[WILD.into()],
        s,
    ))
    .unwrap();
    assert_code(rt.streams().synchronize(s), codes::RT_AICORE_EXCEPTION);
    // The first calls after the fault already return the sticky error.
    assert_code(
        rt.submit(Launch::new(noop, 1, &[], s)),
        codes::RT_AICORE_EXCEPTION,
    );
    assert_code(rt.events().record(ev, s), codes::RT_AICORE_EXCEPTION);
    assert_code(rt.events().stream_wait(s, ev), codes::RT_AICORE_EXCEPTION);
    assert_code(
        rt.memory().memset_async(WILD, 0, 0, s),
        codes::RT_AICORE_EXCEPTION,
    );

    rt.contexts().reset().unwrap();
    rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
    rt.events().record(ev, s).unwrap();
    rt.events().stream_wait(s, ev).unwrap();
    rt.streams().synchronize(s).unwrap();
}

#[test]
fn a_context_an_embedder_marks_faulted_by_hand_refuses_launches() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let noop = rt.kernel("noop").unwrap();
    rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
    rt.streams().synchronize(s).unwrap();
    {
        let mut g = rt.lock_world();
        let world = g.world_mut();
        let mut q = world.query::<&mut npusim::components::ContextState>();
        for mut c in q.iter_mut(world) {
            c.status = npusim::components::ContextStatus::Faulted;
            c.sticky_error = Some(NpuError::AicoreException {
                kernel: "by hand".into(),
                detail: "marked faulted by an embedder".into(),
            });
        }
    }
    assert_code(
        rt.submit(Launch::new(noop, 1, &[], s)),
        codes::RT_AICORE_EXCEPTION,
    );
}
