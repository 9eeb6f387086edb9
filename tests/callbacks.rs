//! Host callbacks have a home: they run on a callback thread of their context, never on the
//! thread of whoever drives the device, so one tenant's slow or panicking callback cannot touch
//! another's calls. A callback's task completes when the callback has returned: later work on
//! its stream, and any thread's synchronize of it, come after. A panic fails that task only; a
//! callback that never returns makes waits give up, never hang.

use npusim::{HostFunc, Launch};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use npusim::prelude::*;
use npusim::{ExceptionInfo, TaskRecord, codes};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

/// A kernel launch that keeps the device busy for a while (simulated).
fn busy_work(rt: &Runtime, s: Stream) -> DevicePtr {
    let n = 1usize << 16;
    let x = rt.memory().malloc(4 * n as u64).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), n.into(), 3.0f32.into()],
        s,
    ))
    .unwrap();
    x
}

#[test]
fn a_panicking_callback_of_one_tenant_does_not_panic_another_tenants_call() {
    let rt = runtime();
    let launched = Arc::new(Barrier::new(2));
    let a = {
        let (rt, launched) = (rt.clone(), launched.clone());
        std::thread::spawn(move || {
            rt.contexts().create(0).unwrap();
            let s = rt.streams().create().unwrap();
            rt.submit(HostFunc::new(s, || panic!("tenant A's callback fails")))
                .unwrap();
            launched.wait();
            // B's synchronize drives the device past A's callback first.
            launched.wait();
            rt.streams().synchronize(s).map_err(|e| e.code())
        })
    };
    let b = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            rt.contexts().create(0).unwrap();
            let s = rt.streams().create().unwrap();
            launched.wait();
            let x = busy_work(&rt, s);
            let result = rt.streams().synchronize(s).map_err(|e| e.code());
            launched.wait();
            let mut back = vec![0.0f32; 4];
            rt.memory().memcpy_dtoh(&mut back, x).unwrap();
            (result, back)
        })
    };
    let (b_result, back) = b.join().expect("tenant B's thread did not panic");
    assert_eq!(b_result, Ok(()));
    assert_eq!(back, [3.0; 4]);
    assert_eq!(
        a.join().unwrap(),
        Err(codes::RT_INTERNAL_ERROR),
        "A's synchronize reports its callback's panic"
    );
}

#[test]
fn a_slow_callback_of_one_tenant_does_not_delay_another_tenants_synchronize() {
    let rt = runtime();
    let started = Arc::new(AtomicBool::new(false));
    let release = Arc::new(Barrier::new(2));
    let launched = Arc::new(Barrier::new(2));
    let a = {
        let (rt, started, release, launched) = (
            rt.clone(),
            started.clone(),
            release.clone(),
            launched.clone(),
        );
        std::thread::spawn(move || {
            rt.contexts().create(0).unwrap();
            let s = rt.streams().create().unwrap();
            let started2 = started.clone();
            rt.submit(HostFunc::new(s, move || {
                started2.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(1500));
            }))
            .unwrap();
            launched.wait();
            release.wait();
            rt.streams().synchronize(s).map_err(|e| e.code())
        })
    };
    rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    launched.wait();
    let t0 = Instant::now();
    // B's work: this synchronize drives the device, A's callback comes due on the way.
    busy_work(&rt, s);
    rt.streams().synchronize(s).unwrap();
    let elapsed = t0.elapsed();
    assert!(
        elapsed < Duration::from_millis(1000),
        "B's synchronize took {elapsed:?}: it waited for A's callback"
    );
    release.wait();
    assert_eq!(a.join().unwrap(), Ok(()));
    assert!(started.load(Ordering::SeqCst));
}

#[test]
fn a_tenant_s_callbacks_go_on_while_another_tenant_waits_on_a_blocked_callback() {
    // Tenant A's callback blocks until B is done; A's thread synchronizes meanwhile, so it
    // too runs frames and may take B's callback returns in. B's synchronize must still run
    // B's next callback (which comes due past A's hold) and return, not sleep until A's
    // callback returns.
    let rt = Runtime::new(RuntimeConfig {
        devices: 2,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let a = {
        let (rt, gate) = (rt.clone(), gate.clone());
        std::thread::spawn(move || {
            rt.contexts().create(0).unwrap();
            let s = rt.streams().create().unwrap();
            let buf = rt.memory().malloc(4096).unwrap();
            rt.memory().memset_async(buf, 1, 4096, s).unwrap();
            rt.submit(HostFunc::new(s, move || {
                let open = gate.0.lock().unwrap();
                let _ = gate
                    .1
                    .wait_timeout_while(open, Duration::from_secs(5), |open| !*open)
                    .unwrap();
            }))
            .unwrap();
            rt.submit(HostFunc::new(s, || {})).unwrap();
            rt.streams().synchronize(s).map_err(|e| e.code())
        })
    };
    // A's callback is out (past its grace) before B starts. (Two devices, as in
    // tests/callback_tenants.rs, which found the case.)
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    // B's work comes due after A's callback was released (past A's hold).
    let buf = rt.memory().malloc(4096).unwrap();
    rt.memory().memset_async(buf, 1, 4096, s).unwrap();
    let ran = Arc::new(AtomicU32::new(0));
    for ms in [0, 1] {
        let ran = ran.clone();
        rt.submit(HostFunc::new(s, move || {
            std::thread::sleep(Duration::from_millis(ms));
            ran.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    }
    let result = rt.streams().synchronize(s);
    let elapsed = t0.elapsed();
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    assert_eq!(result.map_err(|e| e.code()), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert!(
        elapsed < Duration::from_secs(2),
        "B's synchronize took {elapsed:?}: it waited for A's blocked callback"
    );
    assert_eq!(a.join().unwrap(), Ok(()));
}

#[test]
fn a_callback_synchronizing_its_own_stream_gets_an_error_and_the_next_callback_waits_for_it() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    busy_work(&rt, s);
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let (rt2, log1) = (rt.clone(), log.clone());
    rt.submit(HostFunc::new(s, move || {
        log1.lock().unwrap().push("1 begins".into());
        let r = rt2.streams().synchronize(s).map_err(|e| e.code());
        log1.lock().unwrap().push(format!("1 synchronized: {r:?}"));
        // A wait that does not involve the callback itself works.
        let other = rt2.streams().create().unwrap();
        busy_work(&rt2, other);
        let r = rt2.streams().synchronize(other).map_err(|e| e.code());
        log1.lock()
            .unwrap()
            .push(format!("1 synchronized another stream: {r:?}"));
    }))
    .unwrap();
    let log2 = log.clone();
    rt.submit(HostFunc::new(s, move || {
        log2.lock().unwrap().push("2".into())
    }))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "1 begins".to_string(),
            format!("1 synchronized: Err({})", codes::RT_WAIT_TIMEOUT),
            "1 synchronized another stream: Ok(())".to_string(),
            "2".to_string(),
        ]
    );
}

#[test]
fn another_threads_synchronize_returns_only_after_the_callback_of_its_stream_returned() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let returned = Arc::new(AtomicBool::new(false));
    let (st, rd) = (started.clone(), returned.clone());
    rt.submit(HostFunc::new(s, move || {
        st.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        rd.store(true, Ordering::SeqCst);
    }))
    .unwrap();
    let driver = {
        let rt = rt.clone();
        std::thread::spawn(move || rt.streams().synchronize(s).unwrap())
    };
    while !started.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    rt.streams().synchronize(s).unwrap();
    assert!(
        returned.load(Ordering::SeqCst),
        "synchronize returned while the stream's callback still ran"
    );
    driver.join().unwrap();
}

#[test]
fn a_panicking_callback_fails_its_task_only_and_every_other_callback_still_runs() {
    let rt = runtime();
    let streams: Vec<Stream> = (0..4).map(|_| rt.streams().create().unwrap()).collect();
    let ran = Arc::new(AtomicU32::new(0));
    // All four come due at the same instant; the first panics.
    rt.submit(HostFunc::new(streams[0], || panic!("callback fails")))
        .unwrap();
    for &s in &streams[1..] {
        let ran = ran.clone();
        rt.submit(HostFunc::new(s, move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    }
    // Work behind the failed callback still runs; the context is not faulted.
    let x = busy_work(&rt, streams[0]);
    let err = rt.streams().synchronize(streams[0]).unwrap_err();
    assert_eq!(err.code(), codes::RT_INTERNAL_ERROR, "{err}");
    assert!(err.to_string().contains("callback fails"), "{err}");
    for &s in &streams[1..] {
        rt.streams().synchronize(s).unwrap();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    let mut back = vec![0.0f32; 4];
    rt.memory().memcpy_dtoh(&mut back, x).unwrap();
    assert_eq!(back, [3.0; 4]);
    assert_eq!(rt.contexts().error().unwrap(), None);
    // Reported once: the next synchronize is clean.
    rt.streams().synchronize(streams[0]).unwrap();
}

#[test]
fn a_callback_that_never_returns_makes_synchronize_time_out_instead_of_hanging() {
    let rt = runtime();
    rt.set_callback_timeout(Duration::from_millis(200));
    let s = rt.streams().create().unwrap();
    let gate = Arc::new(Barrier::new(2));
    let g2 = gate.clone();
    rt.submit(HostFunc::new(s, move || {
        g2.wait();
    }))
    .unwrap();
    let t0 = Instant::now();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(err.code(), codes::RT_REPORT_TIMEOUT, "{err}");
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert!(
        !rt.streams().query(s).unwrap(),
        "the callback's task is pending"
    );
    // A timed wait gives up with its own timeout code.
    let err = rt
        .streams()
        .synchronize_timeout(s, SimTime::from_ms(50))
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_WAIT_TIMEOUT, "{err}");
    // Once it returns, the stream finishes.
    gate.wait();
    rt.streams().synchronize(s).unwrap();
    assert!(rt.streams().query(s).unwrap());
}

#[test]
fn a_callback_runs_on_its_own_host_clock_from_the_instant_it_came_due() {
    let run = || {
        let rt = runtime();
        let s = rt.streams().create().unwrap();
        busy_work(&rt, s);
        let rt2 = rt.clone();
        rt.submit(HostFunc::new(s, move || {
            rt2.host_work(SimTime::from_us(40))
        }))
        .unwrap();
        busy_work(&rt, s);
        rt.streams().synchronize(s).unwrap();
        let mut records: Vec<TaskRecord> = rt
            .timeline()
            .into_iter()
            .filter(|r| r.stream == s.entity())
            .collect();
        records.sort_by_key(|r| r.seq);
        (records, rt.host_now())
    };
    let (records, host) = run();
    let names: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["fill_f32", "host_callback", "fill_f32"]);
    let cb = &records[1];
    let callback_ns = DeviceConfig::default().callback_ns;
    assert_eq!(
        cb.end - cb.start,
        SimTime(callback_ns) + SimTime::from_us(40),
        "the callback's task lasts its dispatch plus the host work it did"
    );
    assert!(records[2].start >= cb.end, "the next kernel waits for it");
    assert_eq!(run(), (records, host), "the same timeline every run");
}

#[test]
fn a_callback_may_destroy_its_own_context() {
    let rt = runtime();
    let ctx = rt.contexts().create(0).unwrap();
    let s = rt.streams().create().unwrap();
    let result = Arc::new(Mutex::new(None));
    let (rt2, r2) = (rt.clone(), result.clone());
    rt.submit(HostFunc::new(s, move || {
        *r2.lock().unwrap() = Some(rt2.contexts().destroy(ctx).map_err(|e| e.code()));
    }))
    .unwrap();
    // No thread has the context current any more; the device's work drives the callback.
    rt.contexts().set_device(0).unwrap();
    rt.run_until_idle().unwrap();
    assert_eq!(*result.lock().unwrap(), Some(Ok(())));
    assert_eq!(rt.stats().contexts, 1);
    assert_eq!(rt.stats().streams, 1);
    assert!(rt.is_idle());
}

#[test]
fn a_callback_unloading_a_binary_of_its_device_gets_an_error_not_a_panic() {
    let rt = runtime();
    let object = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernels/vector_add.o"),
    )
    .unwrap();
    let b = rt.binaries().load(&object).unwrap();
    let s = rt.streams().create().unwrap();
    let result = Arc::new(Mutex::new(None));
    let (rt2, r2) = (rt.clone(), result.clone());
    rt.submit(HostFunc::new(s, move || {
        // Unloading waits for the device's work, this callback included.
        *r2.lock().unwrap() = Some(rt2.binaries().unload(b).map_err(|e| e.code()));
    }))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    assert_eq!(*result.lock().unwrap(), Some(Err(codes::RT_WAIT_TIMEOUT)));
    // Still loaded; the program unloads it.
    rt.binaries().get_function(b, "vadd_f32").unwrap();
    rt.binaries().unload(b).unwrap();
}

#[test]
fn a_panicking_exception_callback_does_not_panic_the_call_that_drove_the_fault() {
    let rt = runtime();
    rt.contexts()
        .set_exception_callback(Some(Arc::new(|_: &ExceptionInfo| {
            panic!("the exception callback fails")
        })));
    let s = rt.streams().create().unwrap();
    let bad = rt.kernel("fault_bad_address").unwrap();
    rt.submit(Launch::new(bad, 1, &[Arg::Ptr(DevicePtr(0xdead_0000))], s))
        .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(err.code(), codes::RT_AICORE_EXCEPTION, "{err}");
}
