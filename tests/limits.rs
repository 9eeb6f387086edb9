//! Device limits through the Rust API: a core cap slows a kernel down in proportion, a binary
//! kernel's timeout is simulated time (a runaway stops exactly there; an honest kernel longer
//! than the watchdog's check interval finishes with the right result), the wall-clock guard
//! stops a runaway whatever its simulated timeout, and kernel prints can be written out.

use npusim::Launch;
use std::time::{Duration, Instant};

use npusim::prelude::*;

fn kernel_object(name: &str) -> Vec<u8> {
    let path = format!("{}/examples/kernels/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap()
}

/// Simulated milliseconds `launch` takes on `s`, between two events.
fn timed(rt: &Runtime, s: Stream, launch: impl FnOnce()) -> f32 {
    let (a, b) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    rt.events().record(a, s).unwrap();
    launch();
    rt.events().record(b, s).unwrap();
    let _ = rt.streams().synchronize(s);
    rt.events().elapsed_ms(a, b).unwrap()
}

#[test]
fn a_core_cap_of_one_makes_a_four_block_kernel_take_four_times_as_long() {
    let rt = rt();
    let bin = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let vadd = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let s = rt.streams().create().unwrap();
    let n = 1usize << 18;
    let (a, c) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    rt.memory().memset(a, 0, 4 * n as u64).unwrap();
    let args = [a.into(), a.into(), c.into(), n.into()];
    let full = timed(&rt, s, || {
        rt.submit(Launch::new(vadd, 4, &args, s)).unwrap();
    });
    rt.limits().set_core_limits(0, Some(1), None).unwrap();
    let capped = timed(&rt, s, || {
        rt.submit(Launch::new(vadd, 4, &args, s)).unwrap();
    });
    assert!(capped > 3.0 * full, "4 cores {full} ms, 1 core {capped} ms");
    rt.limits().set_core_limits(0, None, None).unwrap();
    let again = timed(&rt, s, || {
        rt.submit(Launch::new(vadd, 4, &args, s)).unwrap();
    });
    assert!((again - full).abs() < 0.1 * full, "{again} vs {full}");
}

#[test]
fn a_runaway_kernel_stops_at_its_simulated_timeout() {
    let rt = rt();
    // The task fails alone, so the record after it still fires.
    rt.contexts()
        .set_failure_mode(npusim::FailureMode::Continue)
        .unwrap();
    rt.limits().set_kernel_timeout(SimTime::from_ms(5)).unwrap();
    let bin = rt.binaries().load(&kernel_object("faults.o")).unwrap();
    let spin = rt.binaries().get_function(bin, "spin_forever").unwrap();
    let s = rt.streams().create().unwrap();
    let (a, b) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    rt.events().record(a, s).unwrap();
    rt.submit(Launch::new(spin, 1, &[], s)).unwrap();
    rt.events().record(b, s).unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(err.code(), 507014, "{err}");
    assert!(
        err.to_string()
            .contains("ran past the kernel timeout of 5.000 ms simulated"),
        "{err}"
    );
    let ms = rt.events().elapsed_ms(a, b).unwrap();
    assert!((5.0..5.1).contains(&ms), "stopped after {ms} simulated ms");
}

#[test]
fn a_launch_with_its_own_timeout_stops_there_whatever_the_devices_timeout() {
    let rt = rt();
    rt.contexts()
        .set_failure_mode(npusim::FailureMode::Continue)
        .unwrap();
    rt.limits()
        .set_kernel_timeout(SimTime::from_ms(50))
        .unwrap();
    let bin = rt.binaries().load(&kernel_object("faults.o")).unwrap();
    let spin = rt.binaries().get_function(bin, "spin_forever").unwrap();
    let s = rt.streams().create().unwrap();
    let (a, b) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    rt.events().record(a, s).unwrap();
    rt.submit(
        Launch::new(spin, 1, &[], s)
            .tiling(&[])
            .timeout(Some(SimTime::from_ms(2))),
    )
    .unwrap();
    rt.events().record(b, s).unwrap();
    assert_eq!(rt.streams().synchronize(s).unwrap_err().code(), 507014);
    let ms = rt.events().elapsed_ms(a, b).unwrap();
    assert!((2.0..2.1).contains(&ms), "stopped after {ms} simulated ms");
    assert_eq!(
        rt.submit(
            Launch::new(spin, 1, &[], s)
                .tiling(&[])
                .timeout(Some(SimTime::ZERO))
        )
        .unwrap_err()
        .code(),
        107000
    );
}

#[test]
fn an_honest_kernel_longer_than_the_watchdog_interval_finishes_correctly() {
    let rt = rt();
    let bin = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let vadd = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let s = rt.streams().create().unwrap();
    // One block over 2M elements: tens of millions of instructions, several watchdog chunks.
    let n = 2usize << 20;
    let x: Vec<f32> = (0..n).map(|i| (i % 977) as f32).collect();
    let (a, c) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    rt.memory().memcpy_htod(a, &x).unwrap();
    rt.submit(Launch::new(
        vadd,
        1,
        &[a.into(), a.into(), c.into(), n.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut out = vec![0.0f32; n];
    rt.memory().memcpy_dtoh(&mut out, c).unwrap();
    assert!(out.iter().zip(&x).all(|(o, x)| *o == 2.0 * x));
}

#[test]
fn the_wall_clock_guard_stops_a_runaway_whatever_its_simulated_timeout() {
    let rt = rt();
    rt.limits()
        .set_kernel_wall_limit(Duration::from_millis(200));
    let bin = rt.binaries().load(&kernel_object("faults.o")).unwrap();
    let spin = rt.binaries().get_function(bin, "spin_forever").unwrap();
    let s = rt.streams().create().unwrap();
    let started = Instant::now();
    rt.submit(Launch::new(spin, 1, &[], s)).unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert_eq!(err.code(), 507014, "{err}");
    assert!(err.to_string().contains("wall-clock guard"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn kernel_prints_are_written_where_the_program_wants_them() {
    let rt = rt();
    let bin = rt.binaries().load(&kernel_object("faults.o")).unwrap();
    let div = rt.binaries().get_function(bin, "div_zero").unwrap();
    let s = rt.streams().create().unwrap();
    rt.submit(Launch::new(div, 1, &[Arg::I64(10)], s)).unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut out = Vec::new();
    assert_eq!(rt.limits().write_kernel_log(&mut out).unwrap(), 1);
    assert_eq!(String::from_utf8(out).unwrap(), "[div_zero block 0] 100\n");
    assert_eq!(
        rt.limits().write_kernel_log(&mut Vec::new()).unwrap(),
        0,
        "taken"
    );
}
