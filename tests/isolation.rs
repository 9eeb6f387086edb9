//! Contexts isolate tenants: a fault in one context stops only that context's work, releases
//! its resources and leaves a sticky error for its own calls; another context on the same
//! device, driven from another host thread at the same time, is unaffected.

use npusim::Launch;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use npusim::prelude::*;
use npusim::{ExceptionInfo, FailureMode};

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap()
}

/// Tenant B's workload: gemm → softmax → relu over a few rounds, results copied back.
fn tenant_b(rt: &Runtime, ctx: Option<Context>, barrier: Option<&Barrier>) -> Vec<f32> {
    if let Some(c) = ctx {
        rt.contexts().set_current(c).unwrap();
    }
    let (m, n, k) = (16usize, 24usize, 8usize);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5) % 11) as f32 * 0.125 - 0.5)
        .collect();
    let s = rt.streams().create().unwrap();
    let da = rt.memory().malloc((4 * m * k) as u64).unwrap();
    let db = rt.memory().malloc((4 * k * n) as u64).unwrap();
    let dc = rt.memory().malloc((4 * m * n) as u64).unwrap();
    let dy = rt.memory().malloc((4 * m * n) as u64).unwrap();
    rt.memory().memcpy_htod(da, &a).unwrap();
    rt.memory().memcpy_htod(db, &b).unwrap();
    let gemm = rt.kernel("gemm_f32").unwrap();
    let softmax = rt.kernel("softmax_rows_f32").unwrap();
    let relu = rt.kernel("relu_f32").unwrap();
    let mut out = Vec::new();
    for round in 0..4 {
        if round == 1
            && let Some(b) = barrier
        {
            b.wait();
        }
        rt.submit(Launch::new(
            gemm,
            4,
            &[
                da.into(),
                db.into(),
                dc.into(),
                m.into(),
                n.into(),
                k.into(),
            ],
            s,
        ))
        .unwrap();
        rt.submit(Launch::new(
            softmax,
            4,
            &[dc.into(), dy.into(), m.into(), n.into()],
            s,
        ))
        .unwrap();
        rt.submit(Launch::new(
            relu,
            4,
            &[dy.into(), da.into(), (m * k).into()],
            s,
        ))
        .unwrap();
        rt.streams().synchronize(s).unwrap();
        let mut y = vec![0f32; m * n];
        rt.memory().memcpy_dtoh(&mut y, dy).unwrap();
        out.extend(y);
    }
    for p in [da, db, dc, dy] {
        rt.memory().free(p).unwrap();
    }
    rt.streams().destroy(s).unwrap();
    out
}

#[test]
fn fault_in_one_context_leaves_a_concurrent_context_bit_identical() {
    let alone = {
        let rt = rt();
        let ctx = rt.contexts().create(0).unwrap();
        tenant_b(&rt, Some(ctx), None)
    };

    let rt = rt();
    let before = rt.stats();
    let seen: Arc<Mutex<Vec<ExceptionInfo>>> = Arc::default();
    let sink = seen.clone();
    rt.contexts()
        .set_exception_callback(Some(Arc::new(move |info: &ExceptionInfo| {
            sink.lock().unwrap().push(info.clone())
        })));

    let barrier = Arc::new(Barrier::new(2));
    let (rt_a, bar_a) = (rt.clone(), barrier.clone());
    let a = thread::spawn(move || {
        let ctx = rt_a.contexts().create(0).unwrap();
        let s = rt_a.streams().create().unwrap();
        let x = rt_a.memory().malloc(4096).unwrap();
        let fill = rt_a.kernel("fill_f32").unwrap();
        let bad = rt_a.kernel("fault_bad_address").unwrap();
        rt_a.submit(Launch::new(
            fill,
            2,
            &[x.into(), 1024usize.into(), 1.5f32.into()],
            s,
        ))
        .unwrap();
        bar_a.wait();
        // Midway: a kernel reading memory the context does not own.
        rt_a.submit(Launch::new(bad, 1, &[Arg::Ptr(DevicePtr(0xdead_0000))], s))
            .unwrap();
        rt_a.submit(Launch::new(
            fill,
            2,
            &[x.into(), 1024usize.into(), 2.5f32.into()],
            s,
        ))
        .unwrap();
        let sync = rt_a.streams().synchronize(s).unwrap_err();
        let sticky = rt_a.memory().malloc(64).unwrap_err();
        rt_a.contexts().destroy(ctx).unwrap();
        (sync.code(), sticky.code())
    });
    let (rt_b, bar_b) = (rt.clone(), barrier.clone());
    let b = thread::spawn(move || {
        let ctx = rt_b.contexts().create(0).unwrap();
        let out = tenant_b(&rt_b, Some(ctx), Some(&bar_b));
        rt_b.contexts().destroy(ctx).unwrap();
        out
    });
    let (sync_code, sticky_code) = a.join().unwrap();
    let out_b = b.join().unwrap();

    assert_eq!(
        sync_code, 507015,
        "A's synchronize reports the AI core exception"
    );
    assert_eq!(
        sticky_code, 507015,
        "A's next call returns the sticky error"
    );
    assert_eq!(out_b.len(), alone.len());
    assert!(
        out_b
            .iter()
            .zip(&alone)
            .all(|(x, y)| x.to_bits() == y.to_bits()),
        "B is bit-identical to B alone"
    );

    let faults = seen.lock().unwrap();
    assert_eq!(
        faults.len(),
        1,
        "exactly one exception reported: {faults:?}"
    );
    assert_eq!(faults[0].error_code, 507015);
    assert_eq!(faults[0].device, 0);
    assert_eq!(faults[0].task_seq, 2);

    let after = rt.stats();
    assert_eq!(after.contexts, before.contexts);
    assert_eq!(after.streams, before.streams);
    assert_eq!(after.events, before.events);
    assert_eq!(after.live_tasks, 0);
    assert_eq!(after.live_blocks, before.live_blocks);
    assert_eq!(after.live_bytes, before.live_bytes);

    // A new context works normally afterwards.
    let c = rt.contexts().create(0).unwrap();
    let again = tenant_b(&rt, Some(c), None);
    assert!(
        again
            .iter()
            .zip(&alone)
            .all(|(x, y)| x.to_bits() == y.to_bits())
    );
}

#[test]
fn continue_mode_fails_only_the_faulting_task() {
    let rt = rt();
    rt.contexts()
        .set_failure_mode(FailureMode::Continue)
        .unwrap();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    let div = rt.kernel("fault_div_zero").unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(div, 1, &[Arg::U64(0)], s)).unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 16usize.into(), 4.0f32.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(err.code(), 507016, "division by zero is an AI core trap");
    let mut out = [0f32; 16];
    rt.memory().memcpy_dtoh(&mut out, x).unwrap();
    assert_eq!(out, [4.0; 16], "the task after the fault still ran");
}

#[test]
fn stop_mode_aborts_the_rest_and_reset_makes_the_context_usable() {
    let rt = rt();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    let spin = rt.kernel("fault_spin").unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(spin, 1, &[], s)).unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), 16usize.into(), 4.0f32.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(
        err.code(),
        507014,
        "the watchdog reports an AI core timeout"
    );
    assert_eq!(
        rt.streams().create().unwrap_err().code(),
        507014,
        "sticky until reset"
    );
    rt.contexts().reset().unwrap();
    // The fault released the context's memory; new allocations work.
    assert!(rt.memory().free(x).is_err());
    let y = rt.memory().malloc(64).unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[y.into(), 16usize.into(), 1.0f32.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
}

#[test]
fn a_context_current_on_another_thread_cannot_be_destroyed() {
    let rt = rt();
    let ctx = rt.contexts().create(0).unwrap();
    let (rt2, holding, release) = (
        rt.clone(),
        Arc::new(Barrier::new(2)),
        Arc::new(Barrier::new(2)),
    );
    let (h2, r2) = (holding.clone(), release.clone());
    let t = thread::spawn(move || {
        rt2.contexts().set_current(ctx).unwrap();
        h2.wait();
        r2.wait();
    });
    holding.wait();
    let err = rt.contexts().destroy(ctx).unwrap_err();
    assert_eq!(err.code(), 507007);
    release.wait();
    t.join().unwrap();
    // The other thread ended: its claim is gone.
    rt.contexts().destroy(ctx).unwrap();
    assert_eq!(rt.contexts().current().unwrap_err().code(), 107002);
}

#[test]
fn a_kernel_cannot_read_another_contexts_memory() {
    let rt = rt();
    let b = rt.contexts().create(0).unwrap();
    let secret = rt.memory().malloc(64).unwrap();
    rt.memory().memcpy_htod(secret, &[42u32; 16]).unwrap();
    let a = rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    let out = rt.memory().malloc(64).unwrap();
    // A copies B's pointer: refused at the call, the address is not A's.
    assert_eq!(
        rt.memory()
            .memcpy_dtod_async(out, secret, 64, s)
            .unwrap_err()
            .code(),
        107000
    );
    // A kernel given B's pointer faults instead of reading B's data.
    let add = rt.kernel("vector_add_f32").unwrap();
    rt.submit(Launch::new(
        add,
        1,
        &[secret.into(), secret.into(), out.into(), 16usize.into()],
        s,
    ))
    .unwrap();
    assert_eq!(rt.streams().synchronize(s).unwrap_err().code(), 507015);
    rt.contexts().set_current(b).unwrap();
    let mut back = [0u32; 16];
    rt.memory().memcpy_dtoh(&mut back, secret).unwrap();
    assert_eq!(back, [42; 16]);
    rt.contexts().destroy(a).unwrap();
}
