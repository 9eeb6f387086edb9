//! The stream sanitizer on a corpus of seeded bugs: each program has one bug and must get the
//! report of the right kind on the right bytes; each has a fixed twin (or a disjoint case)
//! that must get none. Then random well-synchronized programs, which must never be reported.

use npusim::prelude::*;
use npusim::{
    Arg, DataType, ReduceOp, ReportKind, SanitizerConfig, SanitizerMode, SanitizerReport,
};
use npusim::{Collective, HostFunc, Launch};
use proptest::prelude::*;

const N: u64 = 4096;

fn runtime(devices: u32, config: SanitizerConfig) -> Runtime {
    Runtime::new(RuntimeConfig {
        devices,
        sanitizer: config,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn report_mode() -> Runtime {
    runtime(1, SanitizerConfig::report())
}

/// The one report, of `kind`, on `[addr, addr + bytes)`.
fn one(rt: &Runtime, kind: ReportKind, addr: u64, bytes: u64) -> SanitizerReport {
    let reports = rt.sanitizer().reports();
    assert_eq!(reports.len(), 1, "expected one report, got {reports:#?}");
    let r = reports[0].clone();
    assert_eq!(r.kind, kind, "{r}");
    assert_eq!((r.addr, r.bytes), (addr, bytes), "{r}");
    r
}

fn none(rt: &Runtime) {
    let reports = rt.sanitizer().reports();
    assert!(reports.is_empty(), "expected no report, got {reports:#?}");
}

fn streams(rt: &Runtime) -> (Stream, Stream) {
    (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    )
}

/// A consumer on `b` reads what a producer on `a` wrote (a device-to-device copy).
fn produce_consume(rt: &Runtime, a: Stream, b: Stream, sync: impl FnOnce(&Runtime)) -> u64 {
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    sync(rt);
    rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap();
    rt.synchronize_device().unwrap();
    buf.0
}

#[test]
fn a_consumer_with_no_event_wait_races_with_its_producer() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = produce_consume(&rt, a, b, |_| {});
    let r = one(&rt, ReportKind::Race, buf, N);
    assert_eq!(r.block, Some((buf, N)));
    assert_eq!(r.earlier.stream, Some(a));
    assert_eq!(r.later.stream, Some(b));
    assert_eq!((r.earlier.position, r.later.position), (1, 1));
    assert_eq!(r.earlier.operand, npusim::Operand::Destination);
    assert_eq!(r.later.operand, npusim::Operand::Source);
    assert!(r.fix.contains("record an event"), "{}", r.fix);
}

#[test]
fn the_same_program_with_the_event_wait_reports_nothing() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let ev = rt.events().create().unwrap();
    produce_consume(&rt, a, b, |rt| {
        rt.events().record(ev, a).unwrap();
        rt.events().stream_wait(b, ev).unwrap();
    });
    none(&rt);
}

#[test]
fn a_report_names_the_lines_that_enqueued_both_tasks() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    let first = line!() + 1;
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    let second = line!() + 1;
    rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::Race, buf.0, N);
    let here = |line| npusim::EnqueueSite::Rust {
        file: file!(),
        line,
    };
    assert_eq!(r.earlier.site, here(first));
    assert_eq!(r.later.site, here(second));
    let text = r.to_string();
    assert!(text.contains(&format!("{}:{first}", file!())), "{text}");
}

#[test]
fn waiting_on_the_wrong_event_is_a_race() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let (right, wrong) = (rt.events().create().unwrap(), rt.events().create().unwrap());
    rt.events().record(wrong, a).unwrap();
    let buf = produce_consume(&rt, a, b, |rt| {
        rt.events().record(right, a).unwrap();
        rt.events().stream_wait(b, wrong).unwrap();
    });
    let r = one(&rt, ReportKind::Race, buf, N);
    // The fix names the event that does follow the write.
    assert!(r.fix.contains("wait for event"), "{}", r.fix);
}

#[test]
fn a_record_placed_before_the_write_does_not_order_it() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let ev = rt.events().create().unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    rt.events().record(ev, a).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    rt.events().stream_wait(b, ev).unwrap();
    rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap();
    rt.synchronize_device().unwrap();
    one(&rt, ReportKind::Race, buf.0, N);
}

#[test]
fn a_wait_on_a_never_recorded_event_orders_nothing() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let ev = rt.events().create().unwrap();
    let buf = produce_consume(&rt, a, b, |rt| rt.events().stream_wait(b, ev).unwrap());
    one(&rt, ReportKind::Race, buf, N);
}

#[test]
fn a_wait_captures_the_record_that_was_latest_when_it_was_enqueued() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let ev = rt.events().create().unwrap();
    let (first, second, out) = (
        rt.memory().malloc(N).unwrap(),
        rt.memory().malloc(N).unwrap(),
        rt.memory().malloc(N).unwrap(),
    );
    rt.memory().memset_async(first, 1, N, a).unwrap();
    rt.events().record(ev, a).unwrap();
    rt.events().stream_wait(b, ev).unwrap();
    // Recorded again after the wait was enqueued: the wait still means the first record.
    rt.memory().memset_async(second, 2, N, a).unwrap();
    rt.events().record(ev, a).unwrap();
    rt.memory().memcpy_dtod_async(out, first, N, b).unwrap();
    rt.memory().memcpy_dtod_async(out, second, N, b).unwrap();
    rt.synchronize_device().unwrap();
    one(&rt, ReportKind::Race, second.0, N);
}

#[test]
fn two_readers_of_the_same_bytes_do_not_race() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    let (o1, o2) = (
        rt.memory().malloc(N).unwrap(),
        rt.memory().malloc(N).unwrap(),
    );
    rt.memory().memset(buf, 3, N).unwrap();
    rt.memory().memcpy_dtod_async(o1, buf, N, a).unwrap();
    rt.memory().memcpy_dtod_async(o2, buf, N, b).unwrap();
    rt.synchronize_device().unwrap();
    none(&rt);
}

#[test]
fn writes_to_disjoint_halves_of_a_buffer_are_not_reported() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, N / 2, a).unwrap();
    rt.memory()
        .memset_async(DevicePtr(buf.0 + N / 2), 2, N / 2, b)
        .unwrap();
    rt.synchronize_device().unwrap();
    none(&rt);
}

#[test]
fn a_race_on_part_of_a_buffer_is_reported_on_exactly_the_overlap() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, 3 * N / 4, a).unwrap();
    rt.memory()
        .memset_async(DevicePtr(buf.0 + N / 2), 2, N / 2, b)
        .unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::Race, buf.0 + N / 2, N / 4);
    assert_eq!(r.offset(), Some(N / 2));
}

#[test]
fn the_host_reading_after_synchronizing_the_wrong_stream_races() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let host = rt.memory().malloc_host(N).unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    let copy = rt.streams().create().unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    rt.streams().synchronize(b).unwrap(); // the wrong one
    rt.memory().memcpy_dtoh_async(&host, buf, N, copy).unwrap();
    rt.streams().synchronize(copy).unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::Race, buf.0, N);
    assert_eq!(r.later.name, "memcpy device to host");
}

#[test]
fn synchronizing_the_right_stream_orders_the_host_and_its_later_calls() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    produce_consume(&rt, a, b, |rt| rt.streams().synchronize(a).unwrap());
    let ev = rt.events().create().unwrap();
    produce_consume(&rt, a, b, |rt| {
        rt.events().record(ev, a).unwrap();
        rt.events().synchronize(ev).unwrap();
    });
    produce_consume(&rt, a, b, |rt| rt.synchronize_device().unwrap());
    produce_consume(&rt, a, b, |rt| {
        while !rt.streams().query(a).unwrap() {
            rt.step();
        }
    });
    none(&rt);
}

#[test]
fn stepping_the_device_without_a_synchronize_orders_nothing() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = produce_consume(&rt, a, b, |rt| {
        rt.run_until_idle().unwrap();
    });
    // run_until_idle is the host waiting for everything: ordered.
    assert!(rt.sanitizer().reports().is_empty(), "{buf}");
    let buf = produce_consume(&rt, a, b, |rt| {
        for _ in 0..5 {
            rt.step();
        }
    });
    one(&rt, ReportKind::Race, buf, N);
}

#[test]
fn a_host_callback_that_writes_device_memory_races_with_another_stream() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let side = rt.streams().create().unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    let rt2 = rt.clone();
    rt.submit(HostFunc::new(a, move || {
        rt2.memory().memset_async(buf, 9, N, side).unwrap();
    }))
    .unwrap();
    rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap();
    rt.synchronize_device().unwrap();
    rt.run_until_idle().unwrap();
    let r = one(&rt, ReportKind::Race, buf.0, N);
    assert_eq!(
        [r.earlier.stream, r.later.stream]
            .iter()
            .filter(|s| **s == Some(side))
            .count(),
        1,
        "{r}"
    );
}

#[test]
fn work_a_callback_enqueues_is_ordered_after_what_its_stream_did() {
    let rt = report_mode();
    let a = rt.streams().create().unwrap();
    let side = rt.streams().create().unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    let rt2 = rt.clone();
    rt.submit(HostFunc::new(a, move || {
        rt2.memory().memcpy_dtod_async(out, buf, N, side).unwrap();
    }))
    .unwrap();
    rt.streams().synchronize(a).unwrap();
    rt.synchronize_device().unwrap();
    rt.run_until_idle().unwrap();
    none(&rt);
}

#[test]
fn freeing_a_buffer_a_queued_task_still_writes_is_a_use_after_free() {
    let rt = report_mode();
    let a = rt.streams().create().unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    rt.memory().free(buf).unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::UseAfterFree, buf.0, N);
    assert_eq!(r.earlier.name, "free");
    assert_eq!(r.later.stream, Some(a));
}

#[test]
fn freeing_after_work_that_finished_but_was_never_synchronized_is_a_use_after_free() {
    let rt = report_mode();
    let a = rt.streams().create().unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    for _ in 0..5 {
        rt.step();
    }
    rt.memory().free(buf).unwrap();
    let r = one(&rt, ReportKind::UseAfterFree, buf.0, N);
    assert_eq!(r.later.name, "free");
    assert_eq!(r.earlier.stream, Some(a));
}

#[test]
fn freeing_after_a_synchronize_is_clean_and_so_is_free_async_on_the_same_stream() {
    let rt = report_mode();
    let a = rt.streams().create().unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    rt.streams().synchronize(a).unwrap();
    rt.memory().free(buf).unwrap();
    let buf = rt.memory().malloc_async(N, a).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    rt.memory().free_async(buf, a).unwrap();
    rt.synchronize_device().unwrap();
    none(&rt);
}

#[test]
fn free_async_on_one_stream_while_another_still_uses_the_block_is_a_use_after_free() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    rt.memory().memset(buf, 1, N).unwrap();
    rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap(); // b still reads it ...
    rt.memory().free_async(buf, a).unwrap(); // ... when a frees it
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::UseAfterFree, buf.0, N);
    // a had nothing queued: the free happened at once, and b's read came after it.
    assert_eq!(r.earlier.name, "free_async");
    assert_eq!(r.earlier.stream, Some(a));
    assert_eq!(r.later.stream, Some(b));
}

#[test]
fn a_kernel_launched_after_a_free_async_uses_freed_memory() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    rt.memory().memset(buf, 0, N).unwrap();
    // Long work queued on a keeps the block mapped until a gets there (so the kernel does not
    // fault); the kernel on b is not ordered before that position.
    let other = rt.memory().malloc(64 << 20).unwrap();
    rt.memory().memset_async(other, 0, 64 << 20, a).unwrap();
    rt.memory().free_async(buf, a).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[Arg::Ptr(buf), Arg::U64(N / 4), Arg::F32(1.0)],
        b,
    ))
    .unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::UseAfterFree, buf.0, N);
    // The kernel ran first; the free's position came after it, unordered.
    assert_eq!(r.earlier.name, "fill_f32");
    assert_eq!(r.earlier.operand, npusim::Operand::Arg(0));
    assert_eq!(r.later.name, "free_async");
}

#[test]
fn a_stream_ordered_allocation_used_on_another_stream_unordered_is_reported() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    rt.memory()
        .memset_async(rt.memory().malloc(N).unwrap(), 0, N, a)
        .unwrap();
    let buf = rt.memory().malloc_async(N, a).unwrap();
    rt.memory().memset_async(buf, 1, N, b).unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::UnorderedReuse, buf.0, N);
    assert_eq!(r.earlier.name, "malloc_async");
    // Ordered by an event: clean.
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let ev = rt.events().create().unwrap();
    rt.memory()
        .memset_async(rt.memory().malloc(N).unwrap(), 0, N, a)
        .unwrap();
    let buf = rt.memory().malloc_async(N, a).unwrap();
    rt.events().record(ev, a).unwrap();
    rt.events().stream_wait(b, ev).unwrap();
    rt.memory().memset_async(buf, 1, N, b).unwrap();
    rt.synchronize_device().unwrap();
    none(&rt);
}

#[test]
fn memory_freed_on_one_stream_and_reused_on_another_without_an_event_is_reported() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc_async(N, a).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    rt.memory().free_async(buf, a).unwrap();
    // The device gets there on its own; nothing orders b after it.
    for _ in 0..5 {
        rt.step();
    }
    let again = rt.memory().malloc_async(N, b).unwrap();
    assert_eq!(again, buf, "the pool hands the block out again");
    rt.memory().memset_async(again, 2, N, b).unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::UnorderedReuse, buf.0, N);
    assert_eq!(r.earlier.stream, Some(a));
    assert_eq!(r.later.stream, Some(b));
}

#[test]
fn uninitialised_reads_are_reported_only_when_asked_for() {
    let check = |uninitialized: bool, init_first: bool| {
        let rt = runtime(
            1,
            SanitizerConfig {
                uninitialized,
                ..SanitizerConfig::report()
            },
        );
        let a = rt.streams().create().unwrap();
        let buf = rt.memory().malloc(N).unwrap();
        let out = rt.memory().malloc(N).unwrap();
        if init_first {
            rt.memory().memset_async(buf, 0, N / 2, a).unwrap();
        }
        rt.memory().memcpy_dtod_async(out, buf, N, a).unwrap();
        rt.synchronize_device().unwrap();
        (rt, buf)
    };
    let (rt, _) = check(false, false);
    none(&rt);
    let (rt, buf) = check(true, false);
    let r = one(&rt, ReportKind::UninitializedRead, buf.0, N);
    assert_eq!(r.earlier.name, "malloc");
    let (rt, buf) = check(true, true);
    one(&rt, ReportKind::UninitializedRead, buf.0 + N / 2, N / 2);
}

fn uninit_check(devices: u32) -> Runtime {
    runtime(
        devices,
        SanitizerConfig {
            uninitialized: true,
            ..SanitizerConfig::report()
        },
    )
}

/// A broadcast from rank 0 on two devices, rank 0's buffer written first when `root_written`.
/// Returns each rank's buffer.
fn broadcast_program(rt: &Runtime, root_written: bool) -> Vec<DevicePtr> {
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let mut bufs = Vec::new();
    for (d, c) in comms.iter().enumerate() {
        rt.contexts().set_device(d as u32).unwrap();
        let s = rt.streams().create().unwrap();
        let buf = rt.memory().malloc(N).unwrap();
        if d == 0 && root_written {
            rt.memory().memset_async(buf, 1, N, s).unwrap();
        }
        rt.submit(Collective::broadcast(buf, N / 4, DataType::F32, 0).on(c, s))
            .unwrap();
        bufs.push(buf);
    }
    rt.run_until_idle().unwrap();
    bufs
}

#[test]
fn a_broadcast_reads_only_the_root_s_buffer() {
    // Rank 1's buffer is uninitialised until the broadcast writes it: not a read.
    let rt = uninit_check(2);
    broadcast_program(&rt, true);
    none(&rt);
    // The root's own buffer is read: uninitialised there is a real bug.
    let rt = uninit_check(2);
    let bufs = broadcast_program(&rt, false);
    let r = one(&rt, ReportKind::UninitializedRead, bufs[0].0, N);
    assert_eq!(
        (r.later.name.as_str(), r.owner),
        ("broadcast", Some(0)),
        "{r}"
    );
}

#[test]
fn a_gemm_writes_its_output_without_reading_it() {
    let rt = uninit_check(1);
    let s = rt.streams().create().unwrap();
    let gemm = rt.kernel("gemm_f32").unwrap();
    let (m, k, n) = (4usize, 8usize, 16usize);
    let a = rt.memory().malloc((m * k * 4) as u64).unwrap();
    let b = rt.memory().malloc((k * n * 4) as u64).unwrap();
    let c = rt.memory().malloc((m * n * 4) as u64).unwrap();
    rt.memory()
        .memset_async(a, 0, (m * k * 4) as u64, s)
        .unwrap();
    let args = [a.into(), b.into(), c.into(), m.into(), n.into(), k.into()];
    rt.submit(Launch::new(gemm, 1, &args, s)).unwrap();
    rt.streams().synchronize(s).unwrap();
    // Only B, an input nothing wrote, is reported; C (never written before) is not.
    one(&rt, ReportKind::UninitializedRead, b.0, (k * n * 4) as u64);
}

/// Two devices, a buffer on each; the current device is `d` afterwards.
fn two_devices(rt: &Runtime) -> [(Stream, DevicePtr); 2] {
    [0, 1].map(|d| {
        rt.contexts().set_device(d).unwrap();
        (
            rt.streams().create().unwrap(),
            rt.memory().malloc(N).unwrap(),
        )
    })
}

#[test]
fn a_race_on_the_second_device_s_buffer_names_that_device_as_the_owner() {
    // Both devices' first blocks are at the same address: only the owner tells them apart.
    let rt = runtime(2, SanitizerConfig::report());
    let [(_, b0), (s1, b1)] = two_devices(&rt);
    assert_eq!(b0.0, b1.0, "both first blocks at one address");
    let other = rt.streams().create().unwrap();
    let out = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(b1, 1, N, s1).unwrap();
    rt.memory().memcpy_dtod_async(out, b1, N, other).unwrap();
    rt.run_until_idle().unwrap();
    let r = one(&rt, ReportKind::Race, b1.0, N);
    assert_eq!(r.owner, Some(1), "{r}");
    assert!(r.to_string().contains("memory of device 1"), "{r}");
}

#[test]
fn a_peer_copy_out_of_a_buffer_still_being_written_on_its_device_races() {
    let rt = runtime(2, SanitizerConfig::report());
    let [(s0, b0), (s1, b1)] = two_devices(&rt);
    rt.contexts().set_device(0).unwrap();
    rt.memory().memset_async(b0, 1, N, s0).unwrap();
    rt.contexts().set_device(1).unwrap();
    rt.collectives()
        .memcpy_peer_async(b1, 1, b0, 0, N, s1)
        .unwrap();
    rt.run_until_idle().unwrap();
    let r = one(&rt, ReportKind::Race, b0.0, N);
    assert_eq!((r.earlier.device, r.later.device), (0, 1));
    assert_eq!(r.later.name, "memcpy_peer");
    // The bytes are device 0's, although the copy that found the race ran on device 1.
    assert_eq!(r.owner, Some(0), "{r}");
    assert!(r.to_string().contains("memory of device 0"), "{r}");
    // Ordered through the host (it synchronized device 0's stream first): clean.
    let rt = runtime(2, SanitizerConfig::report());
    let [(s0, b0), (s1, b1)] = two_devices(&rt);
    rt.contexts().set_device(0).unwrap();
    rt.memory().memset_async(b0, 1, N, s0).unwrap();
    rt.streams().synchronize(s0).unwrap();
    rt.contexts().set_device(1).unwrap();
    rt.collectives()
        .memcpy_peer_async(b1, 1, b0, 0, N, s1)
        .unwrap();
    rt.run_until_idle().unwrap();
    none(&rt);
}

fn all_reduce_program(rt: &Runtime, ordered: bool) -> DevicePtr {
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let mut first_send = DevicePtr(0);
    for d in 0..2u32 {
        rt.contexts().set_device(d).unwrap();
        let compute = rt.streams().create().unwrap();
        let comm_stream = rt.streams().create().unwrap();
        let (send, recv) = (
            rt.memory().malloc(N).unwrap(),
            rt.memory().malloc(N).unwrap(),
        );
        if d == 0 {
            first_send = send;
        }
        rt.memory().memset_async(send, 0, N, compute).unwrap();
        if ordered {
            let ev = rt.events().create().unwrap();
            rt.events().record(ev, compute).unwrap();
            rt.events().stream_wait(comm_stream, ev).unwrap();
        }
        rt.submit(
            Collective::all_reduce(send, recv, N / 4, DataType::F32, ReduceOp::Sum)
                .on(&comms[d as usize], comm_stream),
        )
        .unwrap();
    }
    rt.run_until_idle().unwrap();
    first_send
}

#[test]
fn a_collective_on_a_buffer_still_being_written_races() {
    let rt = runtime(2, SanitizerConfig::report());
    all_reduce_program(&rt, false);
    // One bug (the same two calls, in a loop over the ranks), found on both ranks.
    let reports = rt.sanitizer().reports();
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let r = &reports[0];
    assert_eq!((r.kind, r.bytes, r.count), (ReportKind::Race, N, 2));
    assert_eq!(r.later.name, "all_reduce");
    assert_eq!(r.later.operand, npusim::Operand::Send);
    let rt = runtime(2, SanitizerConfig::report());
    all_reduce_program(&rt, true);
    none(&rt);
}

/// Rank 0 writes a buffer `x` on its communicator stream; with `collective`, every rank then
/// runs an all-reduce on its own; then rank 1 peer-copies `x`. Returns `x`.
fn cross_rank_read_program(rt: &Runtime, collective: bool) -> DevicePtr {
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let mut streams = Vec::new();
    let mut bufs = Vec::new();
    for d in 0..2u32 {
        rt.contexts().set_device(d).unwrap();
        let s = rt.streams().create().unwrap();
        let (send, recv) = (
            rt.memory().malloc(N).unwrap(),
            rt.memory().malloc(N).unwrap(),
        );
        rt.memory().memset_async(send, 0, N, s).unwrap();
        rt.memory().memset_async(recv, 0, N, s).unwrap();
        streams.push(s);
        bufs.push((send, recv));
    }
    rt.contexts().set_device(0).unwrap();
    let x = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(x, 7, N, streams[0]).unwrap();
    if collective {
        for d in 0..2usize {
            rt.contexts().set_device(d as u32).unwrap();
            rt.submit(
                Collective::all_reduce(bufs[d].0, bufs[d].1, N / 4, DataType::F32, ReduceOp::Sum)
                    .on(&comms[d], streams[d]),
            )
            .unwrap();
        }
    }
    rt.contexts().set_device(1).unwrap();
    let copy = rt.memory().malloc(N).unwrap();
    rt.collectives()
        .memcpy_peer_async(copy, 1, x, 0, N, streams[1])
        .unwrap();
    rt.run_until_idle().unwrap();
    x
}

#[test]
fn a_collective_orders_every_rank_after_every_rank_s_earlier_work() {
    // Rank 0's write, then the all-reduce on both ranks, then rank 1's peer copy of what rank 0
    // wrote: the collective orders the copy after the write (every rank's earlier work before
    // every rank's later work), whichever rank's part of it completes first.
    let rt = runtime(2, SanitizerConfig::report());
    cross_rank_read_program(&rt, true);
    none(&rt);
    // Without the collective nothing orders them: the same copy races with the write.
    let rt = runtime(2, SanitizerConfig::report());
    let x = cross_rank_read_program(&rt, false);
    let r = one(&rt, ReportKind::Race, x.0, N);
    assert_eq!((r.earlier.device, r.later.device), (0, 1));
    assert_eq!(r.later.name, "memcpy_peer");
}

#[test]
fn error_mode_fails_the_later_task_with_the_documented_code() {
    let rt = runtime(1, SanitizerConfig::error());
    assert_eq!(rt.sanitizer().config().mode, SanitizerMode::Error);
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    rt.memory().memset_async(buf, 1, N, a).unwrap();
    rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap();
    rt.streams().synchronize(a).unwrap();
    let err = rt.streams().synchronize(b).unwrap_err();
    assert_eq!(err.code(), 507053);
    assert_eq!(err.code(), npusim::codes::RT_DEVICE_MEM_ERROR);
    assert!(err.to_string().contains("race"), "{err}");
}

#[test]
fn with_the_sanitizer_off_nothing_is_tracked() {
    let rt = runtime(1, SanitizerConfig::default());
    let (a, b) = streams(&rt);
    produce_consume(&rt, a, b, |_| {});
    assert!(rt.sanitizer().reports().is_empty());
    assert_eq!(rt.sanitizer().shadow(), npusim::ShadowStats::default());
}

#[test]
fn a_gigabyte_copied_whole_is_one_interval_of_shadow() {
    let rt = runtime(
        1,
        SanitizerConfig {
            mode: SanitizerMode::Report,
            ..SanitizerConfig::default()
        },
    );
    let a = rt.streams().create().unwrap();
    let big = 1u64 << 30;
    let (src, dst) = (
        rt.memory().malloc(big).unwrap(),
        rt.memory().malloc(big).unwrap(),
    );
    rt.memory().memset_async(src, 0, big, a).unwrap();
    rt.memory().memcpy_dtod_async(dst, src, big, a).unwrap();
    rt.streams().synchronize(a).unwrap();
    let shadow = rt.sanitizer().shadow();
    assert_eq!(shadow.intervals, 2, "{shadow:?}");
    assert!(shadow.bytes < 4096, "{shadow:?}");
}

#[test]
fn reports_are_markers_on_the_exported_timeline() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    produce_consume(&rt, a, b, |_| {});
    let json = rt.timeline_json();
    assert!(json.contains("sanitizer: race"), "{json}");
}

/// One step of a random program: a write or read of part of a buffer on a stream.
#[derive(Clone, Debug)]
struct Step {
    stream: usize,
    buffer: usize,
    write: bool,
    part: (u64, u64),
    host_sync: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..3usize,
        0..2usize,
        any::<bool>(),
        0..4u64,
        1..4u64,
        0..8u8,
    )
        .prop_map(|(stream, buffer, write, start, len, sync)| Step {
            stream,
            buffer,
            write,
            part: (start, len.min(4 - start).max(1)),
            host_sync: sync == 0,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every conflicting pair is ordered by an event recorded after the earlier access (or by
    /// a host synchronize): the sanitizer must stay silent.
    #[test]
    fn random_well_synchronized_programs_get_no_report(steps in proptest::collection::vec(step(), 1..24)) {
        let rt = report_mode();
        let s: Vec<Stream> = (0..3).map(|_| rt.streams().create().unwrap()).collect();
        let bufs: Vec<DevicePtr> = (0..2).map(|_| rt.memory().malloc(N).unwrap()).collect();
        let scratch = rt.memory().malloc(N).unwrap();
        // Per buffer: (stream, write) of every access since the last host synchronize.
        let mut seen: Vec<Vec<(usize, bool)>> = vec![Vec::new(); 2];
        for st in &steps {
            if st.host_sync {
                rt.synchronize_device().unwrap();
                seen.iter_mut().for_each(Vec::clear);
            }
            // Order after every earlier conflicting access on another stream.
            let others: Vec<usize> = seen[st.buffer]
                .iter()
                .filter(|(o, w)| *o != st.stream && (*w || st.write))
                .map(|(o, _)| *o)
                .collect();
            for o in others {
                let ev = rt.events().create().unwrap();
                rt.events().record(ev, s[o]).unwrap();
                rt.events().stream_wait(s[st.stream], ev).unwrap();
            }
            let q = N / 4;
            let at = DevicePtr(bufs[st.buffer].0 + st.part.0 * q);
            let len = st.part.1 * q;
            if st.write {
                rt.memory().memset_async(at, 1, len, s[st.stream]).unwrap();
            } else {
                let out = DevicePtr(scratch.0 + st.stream as u64 * (N / 3 / 64 * 64));
                rt.memory().memcpy_dtod_async(out, at, len.min(N / 3 / 64 * 64), s[st.stream]).unwrap();
            }
            seen[st.buffer].push((st.stream, st.write));
        }
        rt.synchronize_device().unwrap();
        let reports = rt.sanitizer().reports();
        prop_assert!(reports.is_empty(), "{:#?}", reports);
    }
}

#[test]
fn a_binary_kernel_writing_past_its_buffer_races_on_the_buffer_it_hits() {
    // vadd_f32(a, b, c, n) with n twice what c holds: the core writes past c into the block
    // after it (mapped, so no fault), while another stream writes that block.
    let rt = runtime(1, SanitizerConfig::report());
    let path = format!(
        "{}/examples/kernels/vector_add.o",
        env!("CARGO_MANIFEST_DIR")
    );
    let bin = rt.binaries().load(&std::fs::read(path).unwrap()).unwrap();
    let vadd = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let (a, b) = streams(&rt);
    let (x, y) = (
        rt.memory().malloc(2 * N).unwrap(),
        rt.memory().malloc(2 * N).unwrap(),
    );
    rt.memory().memset(x, 0, 2 * N).unwrap();
    rt.memory().memset(y, 0, 2 * N).unwrap();
    let c = rt.memory().malloc(N).unwrap();
    let victim = rt.memory().malloc(N).unwrap();
    assert_eq!(
        victim.0,
        c.0 + N,
        "the pool places the victim right after c"
    );
    rt.memory().memset_async(victim, 7, N, b).unwrap();
    let n = 2 * N / 4;
    rt.submit(Launch::new(
        vadd,
        2,
        &[x.into(), y.into(), c.into(), (n as usize).into()],
        a,
    ))
    .unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::Race, victim.0, N);
    assert_eq!(r.block, Some((victim.0, N)), "the block it hit, not c's");
    let kernel = if r.later.stream == Some(a) {
        &r.later
    } else {
        &r.earlier
    };
    assert_eq!(kernel.name, "vadd_f32");
    assert_eq!(kernel.mode, Some(npusim::components::AccessMode::Write));
}

#[test]
fn the_c_api_names_the_acl_function_and_call_number_as_the_site() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    {
        let _site = npusim::sanitizer::SiteGuard::enter(npusim::EnqueueSite::Acl {
            function: "aclrtMemsetAsync",
            call: 41,
        });
        rt.memory().memset_async(buf, 1, N, a).unwrap();
    }
    rt.memory().memset_async(buf, 2, N, b).unwrap();
    rt.synchronize_device().unwrap();
    let r = one(&rt, ReportKind::Race, buf.0, N);
    assert_eq!(
        r.earlier.site,
        npusim::EnqueueSite::Acl {
            function: "aclrtMemsetAsync",
            call: 41
        }
    );
    assert!(r.to_string().contains("aclrtMemsetAsync (ACL call #41)"));
    assert!(matches!(r.later.site, npusim::EnqueueSite::Rust { .. }));
}

#[test]
fn a_bug_in_a_loop_is_one_report_that_counts_its_repeats() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    for _ in 0..10 {
        rt.memory().memset_async(buf, 1, N, a).unwrap();
        rt.memory().memset_async(buf, 2, N, b).unwrap();
    }
    rt.synchronize_device().unwrap();
    let reports = rt.sanitizer().reports();
    // Each memset races with the other stream's before and after it: two directions of one
    // pair of calls.
    assert!(reports.len() <= 2, "{reports:#?}");
    let total: u64 = reports.iter().map(|r| r.count).sum();
    assert!(total >= 10, "{reports:#?}");
    assert!(
        reports[0]
            .to_string()
            .contains("times (the first is shown)")
    );
}

#[test]
fn streams_made_after_a_destroyed_one_are_ordered_after_its_work_and_no_further() {
    let rt = report_mode();
    let old = rt.streams().create().unwrap();
    let other = rt.streams().create().unwrap();
    let (buf, out) = (
        rt.memory().malloc(N).unwrap(),
        rt.memory().malloc(N).unwrap(),
    );
    rt.memory().memset_async(buf, 1, N, old).unwrap();
    rt.streams().destroy(old).unwrap(); // waits for it: the host is ordered after its work
    let new = rt.streams().create().unwrap(); // may take the old stream's clock slot
    rt.memory().memcpy_dtod_async(out, buf, N, new).unwrap();
    rt.synchronize_device().unwrap();
    none(&rt);
    // The new stream's own work is still unordered with another stream's.
    rt.memory().memset_async(buf, 3, N, new).unwrap();
    rt.memory().memcpy_dtod_async(out, buf, N, other).unwrap();
    rt.synchronize_device().unwrap();
    one(&rt, ReportKind::Race, buf.0, N);
}

#[test]
fn a_report_through_the_safe_api_names_the_user_s_lines_not_the_api_s() {
    let rt = report_mode();
    let ctx = rt.device_context(0).unwrap();
    let (s1, s2) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let fill = rt.kernel("fill_f32").unwrap();
    let mut x = ctx.alloc::<f32>(1024).unwrap();
    let mut y = ctx.alloc::<f32>(1024).unwrap();
    let launch = s1.launch_builder(&fill).arg(&mut x).arg(1024usize);
    let first = line!() + 1;
    launch.arg(7.0f32).launch().unwrap();
    let second = line!() + 1;
    s2.memcpy_dtod(&x, &mut y).unwrap(); // no event between the fill and the copy
    s2.synchronize().unwrap();
    s1.synchronize().unwrap();
    let r = one(&rt, ReportKind::Race, x.device_ptr().0, 4096);
    let here = |line| npusim::EnqueueSite::Rust {
        file: file!(),
        line,
    };
    assert_eq!(r.earlier.site, here(first), "{r}");
    assert_eq!(r.later.site, here(second), "{r}");
}

/// A runtime with two streams, a device buffer of `n` threes written on the first, and a
/// pinned buffer as long.
struct PinnedProgram {
    rt: Runtime,
    s1: NpuStream,
    s2: NpuStream,
    dev: DeviceBuffer<f32>,
    host: PinnedBuffer<f32>,
}

fn pinned_program(config: SanitizerConfig, n: usize) -> PinnedProgram {
    let rt = runtime(1, config);
    let ctx = rt.device_context(0).unwrap();
    let (s1, s2) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let dev = s1.clone_htod(&vec![3.0f32; n]).unwrap();
    let host = ctx.alloc_host::<f32>(n).unwrap();
    PinnedProgram {
        rt,
        s1,
        s2,
        dev,
        host,
    }
}

#[test]
fn the_host_reading_a_pinned_buffer_after_synchronizing_the_wrong_stream_races_with_the_copy() {
    let PinnedProgram {
        rt,
        s1,
        s2,
        dev,
        host,
    } = pinned_program(SanitizerConfig::report(), 1024);
    let copy = line!() + 1;
    s1.memcpy_dtoh_pinned(&dev, &host).unwrap();
    s2.synchronize().unwrap(); // the wrong stream
    let read = line!() + 1;
    let _ = host.read().unwrap();
    let r = one(&rt, ReportKind::Race, 0, 4096);
    assert_eq!(r.host_buffer, Some(host.as_raw().id()));
    assert_eq!((r.block, r.offset()), (Some((0, 4096)), Some(0)));
    assert_eq!(r.earlier.name, "memcpy device to host");
    assert_eq!(r.earlier.stream, Some(s1.raw()));
    assert_eq!(r.earlier.operand, npusim::Operand::Destination);
    assert_eq!(r.later.stream, None);
    assert_eq!(r.later.operand, npusim::Operand::HostBuffer);
    assert_eq!(r.later.mode, Some(npusim::components::AccessMode::Read));
    let here = |line| npusim::EnqueueSite::Rust {
        file: file!(),
        line,
    };
    assert_eq!((r.earlier.site, r.later.site), (here(copy), here(read)));
    assert!(
        r.fix.contains(&format!("synchronize {}", s1.raw())),
        "{}",
        r.fix
    );
    assert!(r.to_string().contains("pinned host buffer"), "{r}");
}

#[test]
fn the_host_reading_a_pinned_buffer_after_synchronizing_the_copy_s_stream_or_event_is_clean() {
    let PinnedProgram {
        rt,
        s1,
        s2,
        dev,
        host,
    } = pinned_program(SanitizerConfig::report(), 1024);
    s1.memcpy_dtoh_pinned(&dev, &host).unwrap();
    s1.synchronize().unwrap();
    assert_eq!(host.read().unwrap(), vec![3.0f32; 1024]);
    s2.memcpy_dtoh_pinned(&dev, &host).unwrap();
    let done = s2.record_event().unwrap();
    done.synchronize().unwrap();
    assert_eq!(host.read().unwrap(), vec![3.0f32; 1024]);
    none(&rt);
}

#[test]
fn overwriting_a_pinned_buffer_while_its_host_to_device_copy_is_queued_races() {
    let PinnedProgram {
        rt,
        s1: s,
        mut dev,
        host,
        ..
    } = pinned_program(SanitizerConfig::report(), 1024);
    host.write(&[1.0f32; 1024]).unwrap();
    s.memcpy_htod_pinned(&host, &mut dev).unwrap();
    host.write(&[2.0f32; 256]).unwrap(); // the copy may not have read the buffer yet
    s.synchronize().unwrap();
    let r = one(&rt, ReportKind::Race, 0, 1024);
    assert_eq!(r.earlier.name, "memcpy host to device");
    assert_eq!(r.earlier.operand, npusim::Operand::Source);
    assert_eq!(r.later.mode, Some(npusim::components::AccessMode::Write));
    // The fixed twin: wait for the copy before writing the buffer again.
    let PinnedProgram {
        rt,
        s1: s,
        mut dev,
        host,
        ..
    } = pinned_program(SanitizerConfig::report(), 1024);
    host.write(&[1.0f32; 1024]).unwrap();
    s.memcpy_htod_pinned(&host, &mut dev).unwrap();
    s.synchronize().unwrap();
    host.write(&[2.0f32; 256]).unwrap();
    // Reading a buffer a queued host-to-device copy also reads is no race.
    s.memcpy_htod_pinned(&host, &mut dev).unwrap();
    let _ = host.read().unwrap();
    s.synchronize().unwrap();
    none(&rt);
}

#[test]
fn in_error_mode_the_racing_host_read_of_a_pinned_buffer_fails() {
    let PinnedProgram {
        s1, s2, dev, host, ..
    } = pinned_program(SanitizerConfig::error(), 64);
    s1.memcpy_dtoh_pinned(&dev, &host).unwrap();
    s2.synchronize().unwrap();
    let err = host.read().unwrap_err();
    assert!(matches!(err, NpuError::SanitizerViolation(_)), "{err:?}");
    s1.synchronize().unwrap();
    assert_eq!(host.read().unwrap(), vec![3.0f32; 64]);
}

// Several host threads. Each test fixes the order of the threads' calls with a barrier the
// sanitizer cannot see, so each program is as unsynchronized as it looks to the sanitizer and
// runs the same way every time. Each thread chooses its device first, before the barrier: the
// sanitizer numbers a thread at its first call and starts it after what every thread did
// until then (as if spawned then), so a thread known early inherits nothing of later work.

/// Runs `first` on host thread "a", then `second` on host thread "b" (both already known to
/// the sanitizer), ordered only by a barrier.
fn two_threads(
    rt: &Runtime,
    first: impl FnOnce(&Runtime) + Send,
    second: impl FnOnce(&Runtime) + Send,
) {
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let a = std::thread::Builder::new()
            .name("a".into())
            .spawn_scoped(s, || {
                rt.contexts().set_device(0).unwrap();
                barrier.wait();
                first(rt);
                barrier.wait();
            })
            .expect("thread a");
        let b = std::thread::Builder::new()
            .name("b".into())
            .spawn_scoped(s, || {
                rt.contexts().set_device(0).unwrap();
                barrier.wait();
                barrier.wait();
                second(rt);
            })
            .expect("thread b");
        a.join().expect("thread a");
        b.join().expect("thread b");
    });
}

fn thread_name(side: &npusim::ReportSide) -> Option<&str> {
    side.thread.as_ref().and_then(|t| t.name.as_deref())
}

#[test]
fn synchronous_copies_from_two_threads_into_overlapping_bytes_race_and_name_both_threads() {
    let rt = report_mode();
    let buf = rt.memory().malloc(N).unwrap();
    let half = DevicePtr(buf.0 + N / 2);
    two_threads(
        &rt,
        |rt| rt.memory().memcpy_htod(buf, &[1u8; N as usize]).unwrap(),
        |rt| {
            rt.memory()
                .memcpy_htod(half, &[2u8; N as usize / 2])
                .unwrap()
        },
    );
    let r = one(&rt, ReportKind::Race, half.0, N / 2);
    assert_eq!(
        (thread_name(&r.earlier), thread_name(&r.later)),
        (Some("a"), Some("b")),
        "{r}"
    );
    assert_eq!((r.earlier.stream, r.later.stream), (None, None), "{r}");
    assert_eq!(r.block, Some((buf.0, N)));
    assert_eq!(r.later.name, "memcpy host to device");
    let text = r.to_string();
    assert!(
        text.contains("by host thread") && text.contains("(\"b\")"),
        "{text}"
    );
    assert!(r.fix.contains("sanitizer_release"), "{}", r.fix);
}

#[test]
fn the_same_copies_with_a_release_and_an_acquire_or_a_host_sync_are_clean() {
    let rt = report_mode();
    let buf = rt.memory().malloc(N).unwrap();
    two_threads(
        &rt,
        |rt| {
            rt.memory().memcpy_htod(buf, &[1u8; N as usize]).unwrap();
            rt.sanitizer().release(42);
        },
        |rt| {
            rt.sanitizer().acquire(42);
            rt.memory().memcpy_htod(buf, &[2u8; N as usize]).unwrap();
        },
    );
    none(&rt);
    two_threads(
        &rt,
        |rt| rt.memory().memset(buf, 3, N).unwrap(),
        |rt| {
            rt.sanitizer().host_sync();
            rt.memory().memset(buf, 4, N).unwrap();
        },
    );
    none(&rt);
}

#[test]
fn copies_from_two_threads_into_disjoint_halves_are_not_reported() {
    let rt = report_mode();
    let buf = rt.memory().malloc(N).unwrap();
    two_threads(
        &rt,
        |rt| {
            rt.memory()
                .memcpy_htod(buf, &[1u8; N as usize / 2])
                .unwrap()
        },
        |rt| {
            rt.memory()
                .memcpy_htod(DevicePtr(buf.0 + N / 2), &[2u8; N as usize / 2])
                .unwrap()
        },
    );
    none(&rt);
}

/// Thread a fills `buf` (`N` bytes of floats) with a kernel on `a`; thread b reads it with
/// a synchronous copy after `sync`.
fn kernel_then_read(rt: &Runtime, sync: impl FnOnce(&Runtime, Stream, Stream) + Send) -> u64 {
    let (a, b) = streams(rt);
    let buf = rt.memory().malloc(N).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    let n = (N / 4) as usize;
    two_threads(
        rt,
        |rt| {
            rt.submit(Launch::new(
                fill,
                2,
                &[buf.into(), n.into(), 1.5f32.into()],
                a,
            ))
            .unwrap();
        },
        |rt| {
            sync(rt, a, b);
            let mut out = vec![0f32; n];
            rt.memory().memcpy_dtoh(&mut out, buf).unwrap();
            assert_eq!(
                out[n - 1],
                1.5,
                "the device ran the kernel first either way"
            );
        },
    );
    buf.0
}

#[test]
fn a_thread_reading_after_synchronizing_another_stream_races_with_another_thread_s_kernel() {
    let rt = report_mode();
    let buf = kernel_then_read(&rt, |rt, _, b| rt.streams().synchronize(b).unwrap());
    let r = one(&rt, ReportKind::Race, buf, N);
    assert_eq!(r.earlier.name, "fill_f32");
    assert!(r.earlier.stream.is_some(), "{r}");
    assert_eq!(thread_name(&r.earlier), Some("a"), "enqueued by a: {r}");
    assert_eq!(thread_name(&r.later), Some("b"), "{r}");
    assert_eq!(r.later.name, "memcpy device to host");
    assert!(r.fix.contains("synchronize"), "{}", r.fix);
}

#[test]
fn a_thread_that_synchronizes_the_kernel_s_stream_reads_clean() {
    let rt = report_mode();
    kernel_then_read(&rt, |rt, a, _| rt.streams().synchronize(a).unwrap());
    none(&rt);
}

#[test]
fn a_wait_on_an_event_another_thread_recorded_after_its_write_orders_the_reader() {
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let ev = rt.events().create().unwrap();
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    let n = (N / 4) as usize;
    two_threads(
        &rt,
        |rt| {
            rt.submit(Launch::new(
                fill,
                2,
                &[buf.into(), n.into(), 1.0f32.into()],
                a,
            ))
            .unwrap();
            rt.events().record(ev, a).unwrap();
        },
        |rt| {
            rt.events().stream_wait(b, ev).unwrap();
            rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap();
            rt.streams().synchronize(b).unwrap();
            // And the host thread, ordered after b, reads what b wrote.
            let mut host = vec![0f32; n];
            rt.memory().memcpy_dtoh(&mut host, out).unwrap();
        },
    );
    none(&rt);
}

#[test]
fn a_thread_s_synchronize_does_not_order_another_thread() {
    // Thread a synchronizes the stream that wrote; thread b, never told, reads it on its own
    // stream: with the host as one thread this was hidden.
    let rt = report_mode();
    let (a, b) = streams(&rt);
    let buf = rt.memory().malloc(N).unwrap();
    let out = rt.memory().malloc(N).unwrap();
    two_threads(
        &rt,
        |rt| {
            rt.memory().memset_async(buf, 1, N, a).unwrap();
            rt.streams().synchronize(a).unwrap();
        },
        |rt| {
            rt.memory().memcpy_dtod_async(out, buf, N, b).unwrap();
            rt.streams().synchronize(b).unwrap();
        },
    );
    let r = one(&rt, ReportKind::Race, buf.0, N);
    assert_eq!((r.earlier.stream, r.later.stream), (Some(a), Some(b)));
}

#[test]
fn after_joining_threads_a_host_sync_orders_the_main_thread_after_their_work() {
    let rt = report_mode();
    let buf = rt.memory().malloc(N).unwrap();
    let read = |rt: &Runtime| {
        let mut out = vec![0u8; N as usize];
        rt.memory().memcpy_dtoh(&mut out, buf).unwrap();
    };
    let work = |rt: &Runtime, half: u64| {
        let s = rt.streams().create().unwrap();
        rt.memory()
            .memset_async(DevicePtr(buf.0 + half * N / 2), 1, N / 2, s)
            .unwrap();
        rt.streams().synchronize(s).unwrap();
    };
    two_threads(&rt, |rt| work(rt, 0), |rt| work(rt, 1));
    // The joins are invisible to the sanitizer: the main thread's read is not ordered after
    // the threads' writes ...
    read(&rt);
    // (One bug: both writes were enqueued by the same line, so one report counts the two.)
    let reports = rt.sanitizer().take_reports();
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let r = &reports[0];
    assert_eq!(
        (r.kind, r.bytes, r.count),
        (ReportKind::Race, N / 2, 2),
        "{r}"
    );
    assert!(
        r.earlier.stream.is_some() && r.later.thread.is_some(),
        "{r}"
    );
    // ... until it says so.
    two_threads(&rt, |rt| work(rt, 0), |rt| work(rt, 1));
    rt.sanitizer().host_sync();
    read(&rt);
    none(&rt);
}

#[test]
fn a_thread_started_after_the_main_thread_s_work_is_ordered_after_it() {
    let rt = report_mode();
    let buf = rt.memory().malloc(N).unwrap();
    rt.memory().memcpy_htod(buf, &[7u8; N as usize]).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let a = rt.streams().create().unwrap();
            rt.memory().memset_async(buf, 1, N, a).unwrap();
            rt.streams().synchronize(a).unwrap();
        });
    });
    none(&rt);
}

#[test]
fn annotations_are_no_ops_with_the_sanitizer_off() {
    let rt = runtime(1, SanitizerConfig::default());
    rt.sanitizer().release(1);
    rt.sanitizer().acquire(1);
    rt.sanitizer().host_sync();
    assert!(rt.sanitizer().reports().is_empty());
    assert_eq!(rt.sanitizer().shadow(), npusim::ShadowStats::default());
}

#[test]
fn a_pinned_buffer_one_thread_writes_and_another_copies_from_unordered_races() {
    let PinnedProgram {
        rt,
        s2,
        mut dev,
        host,
        ..
    } = pinned_program(SanitizerConfig::report(), 1024);
    two_threads(
        &rt,
        |_| host.write(&[1.0f32; 256]).unwrap(),
        |_| {
            s2.memcpy_htod_pinned(&host, &mut dev).unwrap();
            s2.synchronize().unwrap();
        },
    );
    let r = one(&rt, ReportKind::Race, 0, 1024);
    assert!(r.host_buffer.is_some(), "{r}");
    assert_eq!(
        (thread_name(&r.earlier), thread_name(&r.later)),
        (Some("a"), Some("b")),
        "{r}"
    );
    assert_eq!(r.earlier.operand, npusim::Operand::HostBuffer);
    assert_eq!(r.later.name, "memcpy host to device");
}

#[test]
fn two_threads_writing_a_pinned_buffer_race_unless_the_hand_off_is_annotated() {
    let PinnedProgram { rt, host, .. } = pinned_program(SanitizerConfig::report(), 1024);
    two_threads(
        &rt,
        |_| host.write(&[1.0f32; 1024]).unwrap(),
        |_| host.write(&[2.0f32; 512]).unwrap(),
    );
    let r = one(&rt, ReportKind::Race, 0, 2048);
    assert_eq!(
        (thread_name(&r.earlier), thread_name(&r.later)),
        (Some("a"), Some("b")),
        "{r}"
    );
    rt.sanitizer().take_reports();
    two_threads(
        &rt,
        |rt| {
            host.write(&[1.0f32; 1024]).unwrap();
            rt.sanitizer().release(9);
        },
        |rt| {
            rt.sanitizer().acquire(9);
            host.write(&[2.0f32; 512]).unwrap();
            assert_eq!(host.read().unwrap()[1023], 1.0);
        },
    );
    none(&rt);
}
