//! Recording and replay through the public API: a recorded program replayed on a fresh runtime
//! gives the identical timeline; a timing-only replay gives the same times as a functional
//! one; traces that are truncated, corrupted or from a newer format are refused with a clear
//! error; a what-if variant with twice the HBM bandwidth never slows a memory-bound kernel;
//! and random API programs replay to identical timelines.

use npusim::prelude::*;
use npusim::record::{Recording, ReplayOptions, Trace, Variant, replay, whatif};
use npusim::{Collective, HostFunc, Launch, LaunchOp};
use npusim::{DataType, HostCosts, LinkConfig, ReduceOp, StreamKind, TaskRecord, TopologyConfig};
use proptest::prelude::*;

mod common;
use common::times;

fn recording_config(devices: u32) -> RuntimeConfig {
    RuntimeConfig {
        devices,
        device: DeviceConfig::small(),
        topology: TopologyConfig::ring(LinkConfig::hccs()),
        recording: Some(Recording {
            path: None,
            data: true,
        }),
        ..RuntimeConfig::default()
    }
}

/// Two devices, each: copies in, a broadcast from rank 0, kernels on two streams joined by an event, a gradient
/// all-reduce on a communication stream, host work, a copy out, a free.
fn data_parallel_program(rt: &Runtime, n: usize) -> NpuResult<Vec<Vec<f32>>> {
    let comms = rt.collectives().init_all(&[0, 1])?;
    let add = rt.kernel("vector_add_f32")?;
    let axpy = rt.kernel("axpy_f32")?;
    let mut ranks = Vec::new();
    for (r, comm) in comms.iter().enumerate() {
        rt.contexts().set_device(r as u32)?;
        let s = rt.streams().create()?;
        let c = rt.streams().create_with(StreamConfig {
            kind: StreamKind::Communication,
            ..StreamConfig::default()
        })?;
        let bytes = 4 * n as u64;
        let (x, y, g) = (
            rt.memory().malloc(bytes)?,
            rt.memory().malloc(bytes)?,
            rt.memory().malloc(bytes)?,
        );
        let data: Vec<f32> = (0..n).map(|i| (i + r) as f32).collect();
        rt.memory().memcpy_htod(x, &data)?;
        rt.memory().memcpy_htod(y, &data)?;
        rt.submit(Collective::broadcast(y, n as u64, DataType::F32, 0).on(comm, s))?;
        rt.submit(Launch::new(
            add,
            4,
            &[x.into(), y.into(), g.into(), n.into()],
            s,
        ))?;
        let ready = rt.events().create()?;
        rt.events().record(ready, s)?;
        rt.events().stream_wait(c, ready)?;
        rt.submit(
            Collective::all_reduce(g, g, n as u64, DataType::F32, ReduceOp::Sum).on(comm, c),
        )?;
        rt.host_work(SimTime(5_000));
        let done = rt.events().create()?;
        rt.events().record(done, c)?;
        rt.events().stream_wait(s, done)?;
        rt.submit(Launch::new(
            axpy,
            4,
            &[n.into(), 0.5f32.into(), g.into(), x.into()],
            s,
        ))?;
        ranks.push((s, x, y, g));
    }
    let mut out = Vec::new();
    for (r, (s, x, y, g)) in ranks.into_iter().enumerate() {
        rt.contexts().set_device(r as u32)?;
        rt.streams().synchronize(s)?;
        let mut v = vec![0f32; n];
        rt.memory().memcpy_dtoh(&mut v, x)?;
        out.push(v);
        rt.memory().free(y)?;
        rt.memory().free(g)?;
    }
    Ok(out)
}

#[test]
fn a_recorded_program_replays_to_the_identical_timeline_and_results() {
    let rt = Runtime::new(recording_config(2)).unwrap();
    let results = data_parallel_program(&rt, 4096).unwrap();
    let trace = rt.take_trace().unwrap();
    assert!(trace.entries.len() > 30, "{} calls", trace.entries.len());
    let replayed = replay(&trace, ReplayOptions::default()).unwrap();
    assert!(replayed.errors.is_empty(), "{:?}", replayed.errors);
    assert_eq!(times(&replayed.runtime.timeline()), times(&rt.timeline()));
    assert_eq!(replayed.runtime.host_now(), rt.host_now());
    // With host data recorded, the replay computes the same values: read them where the
    // replay put the program's buffers (the same addresses, same preset, same pool).
    let x0 = match &trace.entries.iter().find_map(|e| match &e.call {
        npusim::record::Call::Malloc { ptr, .. } => Some(*ptr),
        _ => None,
    }) {
        Some(p) => DevicePtr(*p),
        None => unreachable!("the program allocates"),
    };
    let rr = &replayed.runtime;
    rr.contexts().set_device(0).unwrap();
    let mut v = vec![0f32; 4096];
    rr.memory().memcpy_dtoh(&mut v, x0).unwrap();
    assert_eq!(v, results[0]);
}

/// Two devices: run-time limits, timeouts and a failure mode; a numbered event wait enqueued
/// before its record; a peer copy; `record_stream` and a trim; one timed wait that gives up and
/// one that does not. Returns what the peer copy delivered.
fn settings_program(rt: &Runtime) -> NpuResult<Vec<f32>> {
    rt.limits().set_kernel_timeout(SimTime::from_ms(50))?;
    rt.limits()
        .set_kernel_wall_limit(std::time::Duration::from_secs(60));
    rt.limits()
        .set_event_wait_timeout(Some(SimTime::from_ms(20)));
    rt.set_callback_timeout(std::time::Duration::from_secs(30));
    rt.limits().set_core_limits(0, Some(4), None)?;
    rt.contexts().set_device(1)?;
    let dst = rt.memory().malloc(4 << 20)?;
    rt.contexts().set_device(0)?;
    rt.contexts()
        .set_failure_mode(npusim::FailureMode::Continue)?;
    let (a, b) = (rt.streams().create()?, rt.streams().create()?);
    let ev = rt.events().create()?;
    let big = rt.memory().malloc(64 << 20)?;
    let src = rt.memory().malloc(4 << 20)?;
    let data: Vec<f32> = (0..1 << 20).map(|i| i as f32).collect();
    rt.memory().memcpy_htod(src, &data)?;
    // b waits for the first record, which a enqueues only after a long memset.
    rt.events()
        .stream_wait_record(b, ev, 1, Some(SimTime::from_ms(10)))?;
    rt.collectives()
        .memcpy_peer_async(dst, 1, src, 0, 4 << 20, b)?;
    rt.memory().memset_async(big, 3, 64 << 20, a)?;
    rt.events().record(ev, a)?;
    rt.memory().record_stream(big, b)?;
    // Gives up: the memset takes longer than a microsecond.
    let early = rt.events().synchronize_timeout(ev, SimTime::from_us(1));
    assert_eq!(early.unwrap_err().code(), 107019);
    rt.events()
        .synchronize_timeout(ev, SimTime::from_ms(1000))?;
    rt.synchronize_device_timeout(SimTime::from_ms(1000))?;
    rt.memory().free(big)?;
    rt.memory().trim()?;
    rt.contexts().set_device(1)?;
    let mut out = vec![0f32; 1 << 20];
    rt.memory().memcpy_dtoh(&mut out, dst)?;
    Ok(out)
}

#[test]
fn limits_timeouts_peer_copies_and_timed_waits_replay_to_the_same_timeline_and_outcomes() {
    let rt = Runtime::new(recording_config(2)).unwrap();
    let delivered = settings_program(&rt).unwrap();
    assert_eq!(delivered[12345], 12345.0);
    let trace = rt.take_trace().unwrap();
    let names: Vec<&str> = trace.entries.iter().map(|e| e.call.name()).collect();
    for call in [
        "set_kernel_timeout",
        "set_kernel_wall_limit",
        "set_event_wait_timeout",
        "set_callback_timeout",
        "set_core_limits",
        "set_failure_mode",
        "stream_wait_event_record",
        "memcpy_peer",
        "record_stream",
        "trim_memory",
        "synchronize_event_timeout",
        "synchronize_device_timeout",
    ] {
        assert!(
            names.contains(&call),
            "{call} is not in the trace: {names:?}"
        );
    }
    let timed_out: Vec<bool> = trace
        .entries
        .iter()
        .filter_map(|e| match e.call {
            npusim::record::Call::SynchronizeEventTimeout { timed_out, .. } => Some(timed_out),
            _ => None,
        })
        .collect();
    assert_eq!(timed_out, [true, false]);
    let replayed = replay(&trace, ReplayOptions::default()).unwrap();
    // The one error the program saw, the early timed wait, is the replay's one error too.
    let codes: Vec<(usize, i32)> = replayed
        .errors
        .iter()
        .map(|(i, e)| (*i, e.code()))
        .collect();
    let early = names
        .iter()
        .position(|&n| n == "synchronize_event_timeout")
        .unwrap();
    assert_eq!(codes, [(early, 107019)]);
    assert_eq!(times(&replayed.runtime.timeline()), times(&rt.timeline()));
    assert_eq!(replayed.runtime.host_now(), rt.host_now());
    let rr = &replayed.runtime;
    assert_eq!(
        rr.limits().device(0).unwrap(),
        rt.limits().device(0).unwrap()
    );
    assert_eq!(
        rr.limits().device(1).unwrap(),
        rt.limits().device(1).unwrap()
    );
    assert_eq!(rr.callback_timeout(), rt.callback_timeout());
    // The peer copy delivered the same data in the replay.
    let dst = trace
        .entries
        .iter()
        .find_map(|e| match e.call {
            npusim::record::Call::CopyPeer { dst, .. } => Some(DevicePtr(dst)),
            _ => None,
        })
        .unwrap();
    rr.contexts().set_device(1).unwrap();
    let mut v = vec![0f32; 1 << 20];
    rr.memory().memcpy_dtoh(&mut v, dst).unwrap();
    assert_eq!(v, delivered);
}

/// The program's own op: `y = 2x`, on one block.
fn double_op() -> OpBuilder {
    OpBuilder::new("double_f32")
        .input("x", 4)
        .output("y", 4)
        .attr("n")
        .infer(|i, _, o| {
            o[0] = i[0];
            Ok(())
        })
        .tiling(|_, _| Ok(Tiling::new(1, 0)))
        .cost(|s, _| {
            KernelCost::vector(s.inputs[0].numel() as f64, 8.0 * s.inputs[0].numel() as f64)
        })
        .kernel(|k, _| {
            let (x, y, n) = (k.ptr(0)?, k.ptr(1)?, k.u64(2)?);
            let v: Vec<f32> = k.load::<f32>(x, n as usize)?;
            let v: Vec<f32> = v.iter().map(|e| 2.0 * e).collect();
            k.store(y, &v)
        })
}

/// Registers its own op and the Ascend-style ops, and runs both: `z = x + 2x`.
fn ops_program(rt: &Runtime, n: usize) -> NpuResult<Vec<f32>> {
    let double = rt.ops().register(double_op())?;
    let npu = rt
        .ops()
        .register_npu(format!("{}/examples/kernels", env!("CARGO_MANIFEST_DIR")))?;
    let s = rt.streams().create()?;
    let bytes = 4 * n as u64;
    let (x, y, z) = (
        rt.memory().malloc(bytes)?,
        rt.memory().malloc(bytes)?,
        rt.memory().malloc(bytes)?,
    );
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    rt.memory().memcpy_htod(x, &data)?;
    let dims = [n as i64];
    rt.submit(LaunchOp::new(
        double,
        &[TensorArg::new(x, &dims)],
        &[TensorArg::new(y, &dims)],
        &[(n as u64).into()],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        npu.vadd,
        &[TensorArg::new(x, &dims), TensorArg::new(y, &dims)],
        &[TensorArg::new(z, &dims)],
        &[],
        s,
    ))?;
    rt.streams().synchronize(s)?;
    let mut out = vec![0f32; n];
    rt.memory().memcpy_dtoh(&mut out, z)?;
    Ok(out)
}

#[test]
fn registered_ops_replay_by_name_and_a_missing_one_is_refused_by_name() {
    let rt = Runtime::new(recording_config(1)).unwrap();
    let n = 8192;
    let z = ops_program(&rt, n).unwrap();
    assert_eq!(z[100], 300.0);
    let trace = rt.take_trace().unwrap();
    let names: Vec<&str> = trace.entries.iter().map(|e| e.call.name()).collect();
    assert!(names.contains(&"register_op"), "{names:?}");
    assert!(names.contains(&"register_npu_ops"), "{names:?}");
    let replayed = replay(
        &trace,
        ReplayOptions {
            ops: vec![double_op()],
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert!(replayed.errors.is_empty(), "{:?}", replayed.errors);
    assert_eq!(times(&replayed.runtime.timeline()), times(&rt.timeline()));
    assert_eq!(replayed.runtime.host_now(), rt.host_now());
    let zp = common::recorded_malloc(&trace, 2);
    let mut v = vec![0f32; n];
    replayed.runtime.memory().memcpy_dtoh(&mut v, zp).unwrap();
    assert_eq!(v, z);
    // Without the program's op, the replay says which op it needs.
    let err = replay(&trace, ReplayOptions::default()).unwrap_err();
    assert!(err.to_string().contains("double_f32"), "{err}");
    assert!(err.to_string().contains("ReplayOptions::ops"), "{err}");
}

/// A host callback that enqueues work: when stream `a`'s copy is done, the callback spends
/// host time, sets a buffer on stream `b`, adds into it and records an event the program's
/// stream `a` then waits for.
fn callback_program(rt: &Runtime, n: usize) -> NpuResult<Vec<f32>> {
    let add = rt.kernel("vector_add_f32")?;
    let (a, b) = (rt.streams().create()?, rt.streams().create()?);
    let bytes = 4 * n as u64;
    let (x, y, z) = (
        rt.memory().malloc(bytes)?,
        rt.memory().malloc(bytes)?,
        rt.memory().malloc(bytes)?,
    );
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    rt.memory().memcpy_htod(x, &data)?;
    let ready = rt.events().create()?;
    let inner = rt.clone();
    rt.submit(HostFunc::new(a, move || {
        inner.host_work(SimTime(7_000));
        inner.memory().memset_async(y, 0, bytes, b).unwrap();
        inner
            .submit(Launch::new(
                add,
                2,
                &[x.into(), x.into(), y.into(), n.into()],
                b,
            ))
            .unwrap();
        inner.events().record(ready, b).unwrap();
    }))?;
    rt.events().stream_wait(a, ready)?;
    rt.submit(Launch::new(
        add,
        2,
        &[x.into(), y.into(), z.into(), n.into()],
        a,
    ))?;
    rt.streams().synchronize(a)?;
    rt.streams().synchronize(b)?;
    let mut out = vec![0f32; n];
    rt.memory().memcpy_dtoh(&mut out, z)?;
    Ok(out)
}

#[test]
fn calls_made_inside_a_host_callback_are_replayed_when_the_replayed_callback_runs() {
    let rt = Runtime::new(recording_config(1)).unwrap();
    let n = 4096;
    let z = callback_program(&rt, n).unwrap();
    assert_eq!(z[10], 30.0);
    let trace = rt.take_trace().unwrap();
    let inside: Vec<&str> = trace
        .entries
        .iter()
        .filter_map(|e| match &e.call {
            npusim::record::Call::InCallback { callback: 0, call } => Some(call.name()),
            _ => None,
        })
        .collect();
    assert_eq!(inside, ["host_work", "memset", "launch", "record_event"]);
    let replayed = replay(&trace, ReplayOptions::default()).unwrap();
    assert!(replayed.errors.is_empty(), "{:?}", replayed.errors);
    let (got, want) = (times(&replayed.runtime.timeline()), times(&rt.timeline()));
    assert_eq!(got, want);
    assert!(got.iter().filter(|t| t.0 == "vector_add_f32").count() == 2);
    assert_eq!(replayed.runtime.host_now(), rt.host_now());
    let zp = common::recorded_malloc(&trace, 2);
    let mut v = vec![0f32; n];
    replayed.runtime.memory().memcpy_dtoh(&mut v, zp).unwrap();
    assert_eq!(v, z);
}

/// The declared access sets of the tasks still queued, as (address, bytes) per range.
fn declared_ranges(rt: &Runtime) -> Vec<Vec<(u64, u64, bool)>> {
    let mut g = rt.lock_world();
    g.run_frame();
    let world = g.world_mut();
    let mut q = world.query::<&npusim::components::task::Task>();
    q.iter(world)
        .filter_map(|t| t.extra.declared_access())
        .map(|a| {
            a.ranges()
                .iter()
                .map(|r| (r.addr, r.bytes, r.mode.writes()))
                .collect()
        })
        .collect()
}

#[test]
fn the_launch_builders_declared_access_sets_are_recorded_and_replayed() {
    let rt = Runtime::new(recording_config(1)).unwrap();
    let ctx = rt.device_context(0).unwrap();
    let s = ctx.stream().unwrap();
    let (a, b) = (
        s.clone_htod(&[1.0f32; 1024]).unwrap(),
        s.clone_htod(&[2.0f32; 1024]).unwrap(),
    );
    let mut c = s.alloc_zeros::<f32>(1024).unwrap();
    let add = rt.kernel("vector_add_f32").unwrap();
    s.launch_builder(&add)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(1024)
        .launch()
        .unwrap();
    assert_eq!(s.clone_dtoh(&c).unwrap(), [3.0; 1024]);
    // A second launch held behind a record that never comes: it stays queued with its set.
    let never = rt.events().create().unwrap();
    rt.events()
        .stream_wait_record(s.raw(), never, 1, None)
        .unwrap();
    let mut d = s.alloc_zeros::<f32>(512).unwrap();
    s.launch_builder(&add)
        .arg(&c)
        .arg(&b)
        .arg(&mut d)
        .arg(512)
        .launch()
        .unwrap();
    let recorded = declared_ranges(&rt);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let trace = rt.take_trace().unwrap();
    let declared: Vec<usize> = trace
        .entries
        .iter()
        .filter_map(|e| match &e.call {
            npusim::record::Call::DeclaredAccess {
                ranges,
                exact: true,
            } => Some(ranges.len()),
            _ => None,
        })
        .collect();
    assert_eq!(declared.len(), 2, "one set per typed launch");
    let replayed = replay(&trace, ReplayOptions::default()).unwrap();
    assert_eq!(times(&replayed.runtime.timeline()), times(&rt.timeline()));
    assert_eq!(declared_ranges(&replayed.runtime), recorded);
}

#[test]
fn a_timing_only_replay_has_every_task_at_the_functional_replays_times() {
    let rt = Runtime::new(recording_config(2)).unwrap();
    data_parallel_program(&rt, 4096).unwrap();
    let trace = rt.take_trace().unwrap();
    let functional = replay(&trace, ReplayOptions::default()).unwrap();
    let timing = replay(
        &trace,
        ReplayOptions {
            timing_only: true,
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert!(timing.errors.is_empty(), "{:?}", timing.errors);
    assert_eq!(
        times(&timing.runtime.timeline()),
        times(&functional.runtime.timeline())
    );
    // Nothing moved: no device page was ever backed.
    let stats = timing.runtime.stats();
    assert!(stats.backed_bytes.iter().all(|&b| b == 0), "{stats:?}");
    assert!(functional.runtime.stats().backed_bytes[0] > 0);
}

#[test]
fn a_trace_file_written_when_the_runtime_ends_reads_back_and_replays() {
    let dir = std::env::temp_dir().join(format!("npusim-rr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("program.npt");
    let timeline = {
        let rt = Runtime::new(
            RuntimeConfig {
                devices: 2,
                device: DeviceConfig::small(),
                ..RuntimeConfig::default()
            }
            .record(&path),
        )
        .unwrap();
        data_parallel_program(&rt, 1024).unwrap();
        times(&rt.timeline())
    };
    let trace = Trace::read(&path).unwrap();
    assert!(!trace.header.with_data);
    let replayed = replay(&trace, ReplayOptions::default()).unwrap();
    assert_eq!(times(&replayed.runtime.timeline()), timeline);
    assert!(trace.to_json().contains("\"Launch\""));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn truncated_corrupted_and_future_traces_are_refused_with_a_clear_error() {
    let rt = Runtime::new(recording_config(2)).unwrap();
    data_parallel_program(&rt, 256).unwrap();
    let bytes = rt.take_trace().unwrap().to_bytes().unwrap();
    let half = Trace::from_bytes(&bytes[..bytes.len() / 2]).unwrap_err();
    assert!(half.to_string().contains("truncated"), "{half}");
    let mut flipped = bytes.clone();
    let at = bytes.len() - 10;
    flipped[at] ^= 1;
    let bad = Trace::from_bytes(&flipped).unwrap_err();
    assert!(bad.to_string().contains("corrupted"), "{bad}");
    let mut future = bytes.clone();
    future[8..12].copy_from_slice(&99u32.to_le_bytes());
    let newer = Trace::from_bytes(&future).unwrap_err();
    assert!(newer.to_string().contains("version 99"), "{newer}");
    // Through the runtime's error type: ACL_ERROR_INVALID_PARAM.
    let as_npu: NpuError = half.into();
    assert_eq!(as_npu.code(), npusim::codes::RT_PARAM_INVALID);
}

#[test]
fn twice_the_hbm_bandwidth_never_slows_a_memory_bound_kernel() {
    let rt = Runtime::new(recording_config(1)).unwrap();
    let n = 1 << 20;
    let (x, y) = (
        rt.memory().malloc(4 * n).unwrap(),
        rt.memory().malloc(4 * n).unwrap(),
    );
    let s = rt.streams().create().unwrap();
    let axpy = rt.kernel("axpy_f32").unwrap();
    for blocks in [1, 4, 8] {
        rt.submit(Launch::new(
            axpy,
            blocks,
            &[n.into(), 2.0f32.into(), x.into(), y.into()],
            s,
        ))
        .unwrap();
    }
    rt.streams().synchronize(s).unwrap();
    let trace = rt.take_trace().unwrap();
    let base = Variant {
        name: "recorded".into(),
        ..Variant::default()
    };
    let fast = Variant {
        name: "2x HBM".into(),
        ..Variant::default()
    }
    .set("hbm_bandwidth=2x")
    .unwrap();
    let runs = whatif(&trace, &[base, fast], |_, _, _| {}).unwrap();
    let kernels = |i: usize| -> Vec<u64> {
        runs[i]
            .1
            .runtime
            .timeline()
            .iter()
            .filter(|r| r.name == "axpy_f32")
            .map(|r| r.end.as_ns() - r.start.as_ns())
            .collect()
    };
    let (slow, quick) = (kernels(0), kernels(1));
    assert_eq!(slow.len(), 3);
    for (a, b) in slow.iter().zip(&quick) {
        assert!(b <= a, "{b} ns with 2x bandwidth vs {a} ns");
    }
    assert!(quick.iter().sum::<u64>() < slow.iter().sum::<u64>());
    assert!(runs[1].0.time < runs[0].0.time);
}

#[test]
fn a_data_parallel_trace_replays_on_more_devices_with_a_bigger_ring() {
    let rt = Runtime::new(recording_config(2)).unwrap();
    data_parallel_program(&rt, 1 << 16).unwrap();
    let trace = rt.take_trace().unwrap();
    let wide = replay(
        &trace,
        ReplayOptions {
            devices: Some(8),
            timing_only: true,
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert!(wide.errors.is_empty(), "{:?}", wide.errors);
    let tl = wide.runtime.timeline();
    let per_device = |d: u32| tl.iter().filter(|r| r.device == d).count();
    assert_eq!(per_device(7), per_device(1));
    let ar = |tl: &[TaskRecord]| {
        tl.iter()
            .filter(|r| r.kind == npusim::components::TaskKind::Collective)
            .map(|r| r.end.as_ns() - r.start.as_ns())
            .max()
            .unwrap()
    };
    // A ring all-reduce of the same size over 8 ranks takes longer than over 2.
    assert!(ar(&tl) > ar(&rt.timeline()));
}

#[test]
fn binary_kernels_replay_timing_only_at_their_recorded_cycles_scaled_by_the_clock() {
    let rt = Runtime::new(recording_config(1)).unwrap();
    let object = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/kernels/vector_add.o"
    ))
    .unwrap();
    let bin = rt.binaries().load(&object).unwrap();
    let vadd = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let s = rt.streams().create().unwrap();
    for (n, blocks) in [(1000u64, 3u32), (40_000, 8), (4099, 1)] {
        let (a, b, c) = (
            rt.memory().malloc(4 * n).unwrap(),
            rt.memory().malloc(4 * n).unwrap(),
            rt.memory().malloc(4 * n).unwrap(),
        );
        rt.memory().memset(a, 1, 4 * n).unwrap();
        rt.submit(Launch::new(
            vadd,
            blocks,
            &[a.into(), b.into(), c.into(), n.into()],
            s,
        ))
        .unwrap();
        rt.memory().free_async(c, s).unwrap();
    }
    rt.streams().synchronize(s).unwrap();
    let trace = rt.take_trace().unwrap();
    let recorded = trace
        .entries
        .iter()
        .filter(|e| {
            matches!(
                &e.call,
                npusim::record::Call::Launch {
                    binary: Some(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(recorded, 3, "every binary launch carries its cycles");
    let timing = replay(
        &trace,
        ReplayOptions {
            timing_only: true,
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert!(timing.errors.is_empty(), "{:?}", timing.errors);
    assert_eq!(times(&timing.runtime.timeline()), times(&rt.timeline()));
    // Priced, not run: the kernels wrote nothing, so no page was backed.
    assert!(timing.runtime.stats().backed_bytes.iter().all(|&b| b == 0));
    assert!(rt.stats().backed_bytes[0] > 0);
    // Half the clock: every binary launch takes about twice as long, from the same cycles.
    let mut slow = DeviceConfig::small();
    slow.core_clock_hz /= 2;
    let halved = replay(
        &trace,
        ReplayOptions {
            timing_only: true,
            device: Some(slow.clone()),
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    let kernels = |tl: Vec<TaskRecord>| -> Vec<u64> {
        tl.iter()
            .filter(|r| r.name == "vadd_f32")
            .map(|r| r.end.as_ns() - r.start.as_ns() - slow.kernel_launch_ns)
            .collect()
    };
    for (fast, slow) in kernels(rt.timeline())
        .iter()
        .zip(kernels(halved.runtime.timeline()))
    {
        assert!(
            slow >= 2 * fast - 1 && slow <= 2 * fast + 1,
            "{fast} ns, then {slow} ns"
        );
    }
}

#[test]
fn dynamic_shapes_replay_timing_only_from_the_shapes_the_recording_saw() {
    let rt = Runtime::new(recording_config(1)).unwrap();
    let s = rt.streams().create().unwrap();
    let (nonzero, gather) = (
        rt.ops().get("nonzero_f32").unwrap(),
        rt.ops().get("gather_rows").unwrap(),
    );
    let n = 4000usize;
    let mut counts = Vec::new();
    for density in [1usize, 7, 2] {
        let x: Vec<f32> = (0..n)
            .map(|i| {
                if i % density == 0 {
                    i as f32 + 1.0
                } else {
                    0.0
                }
            })
            .collect();
        let xd = rt.memory().malloc(4 * n as u64).unwrap();
        rt.memory().memcpy_htod(xd, &x).unwrap();
        let (idx, vals) = (
            rt.memory().malloc(4 * n as u64).unwrap(),
            rt.memory().malloc(4 * n as u64).unwrap(),
        );
        let (count, vshape) = (
            rt.ops().create_shape().unwrap(),
            rt.ops().create_shape().unwrap(),
        );
        rt.submit(LaunchOp::new(
            nonzero,
            &[TensorArg::new(xd, &[n as i64])],
            &[TensorArg::dynamic(idx, count)],
            &[],
            s,
        ))
        .unwrap();
        rt.submit(LaunchOp::new(
            gather,
            &[
                TensorArg::new(xd, &[n as i64]),
                TensorArg::dynamic(idx, count),
            ],
            &[TensorArg::dynamic(vals, vshape)],
            &[],
            s,
        ))
        .unwrap();
        counts.push(count);
    }
    rt.streams().synchronize(s).unwrap();
    let k: Vec<u64> = counts
        .iter()
        .map(|&c| rt.ops().read_shape(c).unwrap().dims()[0])
        .collect();
    assert_eq!(k, vec![4000, 572, 2000]);
    // The host data was not recorded: only the shapes the producers published tell the
    // consumers how much work they have.
    let mut trace = rt.take_trace().unwrap();
    trace.header.with_data = false;
    for e in &mut trace.entries {
        if let npusim::record::Call::CopyHost { data, bytes, .. } = &mut e.call
            && *bytes > 256
        {
            *data = None;
        }
    }
    let timing = replay(
        &trace,
        ReplayOptions {
            timing_only: true,
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert!(timing.errors.is_empty(), "{:?}", timing.errors);
    assert_eq!(times(&timing.runtime.timeline()), times(&rt.timeline()));
    assert_eq!(timing.runtime.host_now(), rt.host_now());
}

/// One call of a random program.
#[derive(Clone, Debug)]
enum Op {
    Launch { stream: usize, n: u64, blocks: u32 },
    Copy { stream: usize, kib: u64 },
    Record { stream: usize, event: usize },
    Wait { stream: usize, event: usize },
    HostWork { us: u64 },
    Sync { stream: usize },
    Free,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, 1..200_000u64, 1..8u32).prop_map(|(stream, n, blocks)| Op::Launch {
            stream,
            n,
            blocks
        }),
        (0..3usize, 1..512u64).prop_map(|(stream, kib)| Op::Copy { stream, kib }),
        (0..3usize, 0..2usize).prop_map(|(stream, event)| Op::Record { stream, event }),
        (0..3usize, 0..2usize).prop_map(|(stream, event)| Op::Wait { stream, event }),
        (1..50u64).prop_map(|us| Op::HostWork { us }),
        (0..3usize).prop_map(|stream| Op::Sync { stream }),
        Just(Op::Free),
    ]
}

fn run_random(rt: &Runtime, ops: &[Op]) -> NpuResult<()> {
    let streams = [
        rt.streams().create()?,
        rt.streams().create()?,
        rt.contexts().default_stream()?,
    ];
    let events = [rt.events().create()?, rt.events().create()?];
    let k = rt.kernel("vector_add_f32")?;
    let mut live = Vec::new();
    for op in ops {
        match *op {
            Op::Launch { stream, n, blocks } => {
                let b = rt.memory().malloc(4 * n)?;
                rt.submit(Launch::new(
                    k,
                    blocks,
                    &[b.into(), b.into(), b.into(), n.into()],
                    streams[stream],
                ))?;
                live.push((b, stream));
            }
            Op::Copy { stream, kib } => {
                let b = rt.memory().malloc(kib * 1024)?;
                let data = vec![7u8; (kib * 1024) as usize];
                rt.memory()
                    .memcpy_htod_async_pageable(b, &data, streams[stream])?;
                live.push((b, stream));
            }
            Op::Record { stream, event } => rt.events().record(events[event], streams[stream])?,
            Op::Wait { stream, event } => {
                rt.events().stream_wait(streams[stream], events[event])?
            }
            Op::HostWork { us } => rt.host_work(SimTime(us * 1000)),
            Op::Sync { stream } => rt.streams().synchronize(streams[stream])?,
            Op::Free => {
                if let Some((b, s)) = live.pop() {
                    rt.memory().free_async(b, streams[s])?;
                }
            }
        }
    }
    rt.synchronize_device()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_recorded_and_replayed_give_identical_timelines(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        let rt = Runtime::new(RuntimeConfig {
            device: DeviceConfig::small(),
            host: HostCosts::default(),
            recording: Some(Recording { path: None, data: false }),
            ..RuntimeConfig::default()
        }).unwrap();
        run_random(&rt, &ops).unwrap();
        let trace = rt.take_trace().unwrap();
        let replayed = replay(&trace, ReplayOptions::default()).unwrap();
        prop_assert!(replayed.errors.is_empty(), "{:?}", replayed.errors);
        prop_assert_eq!(times(&replayed.runtime.timeline()), times(&rt.timeline()));
        prop_assert_eq!(replayed.runtime.host_now(), rt.host_now());
        let timing = replay(&trace, ReplayOptions { timing_only: true, ..ReplayOptions::default() }).unwrap();
        prop_assert_eq!(times(&timing.runtime.timeline()), times(&rt.timeline()));
    }
}
