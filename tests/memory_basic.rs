//! Device memory through the public API: data round-trips, every call checks the device range
//! it names before queueing anything (null, unknown, past the end, another context's memory),
//! free refuses what it must and waits for queued work, and a refused call changes nothing.

use npusim::Launch;
use npusim::prelude::*;
use npusim::{HostBuffer, codes};

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

/// Every call that names a device range, on `[ptr, ptr + bytes)`, expected to fail with `code`
/// and change nothing.
#[track_caller]
fn every_range_call_fails(rt: &Runtime, ptr: DevicePtr, good: DevicePtr, bytes: u64, code: i32) {
    let s = rt.contexts().default_stream().unwrap();
    let host = rt.memory().malloc_host(bytes.max(1)).unwrap();
    let before = rt.stats();
    assert_code(rt.memory().memcpy_htod_async(ptr, &host, bytes, s), code);
    assert_code(rt.memory().memcpy_dtoh_async(&host, ptr, bytes, s), code);
    assert_code(rt.memory().memcpy_dtod_async(ptr, good, bytes, s), code);
    assert_code(rt.memory().memcpy_dtod_async(good, ptr, bytes, s), code);
    assert_code(rt.memory().memset_async(ptr, 1, bytes, s), code);
    assert_code(
        rt.memory()
            .memcpy_htod_async_pageable(ptr, &vec![0u8; bytes as usize], s),
        code,
    );
    assert_eq!(
        rt.stats(),
        before,
        "refused calls queue nothing and cost nothing"
    );
    // The synchronous forms refuse it too (they may synchronize first, which is harmless).
    let mut out = vec![0u8; bytes as usize];
    assert_code(rt.memory().memcpy_htod(ptr, &out), code);
    assert_code(rt.memory().memcpy_dtoh(&mut out, ptr), code);
    assert_code(rt.memory().memset(ptr, 0, bytes), code);
    let after = rt.stats();
    assert_eq!(after.frames.tasks_ingested, before.frames.tasks_ingested);
    assert_eq!(after.live_blocks, before.live_blocks);
}

#[test]
fn data_round_trips_through_device_memory() {
    let rt = runtime();
    let n = 10_000;
    let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
    let (a, b) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    rt.memory().memcpy_htod(a, &data).unwrap();
    rt.memory().memcpy_dtod(b, a, 4 * n as u64).unwrap();
    rt.memory().memset(a, 0, 4 * n as u64).unwrap();
    let (mut from_a, mut from_b) = (vec![1.0f32; n], vec![0.0f32; n]);
    rt.memory().memcpy_dtoh(&mut from_a, a).unwrap();
    rt.memory().memcpy_dtoh(&mut from_b, b).unwrap();
    assert!(from_a.iter().all(|&v| v == 0.0));
    assert_eq!(from_b, data);

    // Asynchronous copies through pinned buffers, at an offset into an allocation.
    let s = rt.streams().create().unwrap();
    let (hin, hout) = (
        rt.memory().malloc_host(400).unwrap(),
        rt.memory().malloc_host(400).unwrap(),
    );
    hin.write(&[3u32; 100]).unwrap();
    rt.memory()
        .memcpy_htod_async(b.offset(800), &hin, 400, s)
        .unwrap();
    rt.memory()
        .memcpy_dtoh_async(&hout, b.offset(800), 400, s)
        .unwrap();
    rt.streams().synchronize(s).unwrap();
    assert_eq!(hout.read::<u32>().unwrap(), vec![3u32; 100]);
}

#[test]
fn a_null_device_pointer_is_refused() {
    let rt = runtime();
    let good = rt.memory().malloc(256).unwrap();
    every_range_call_fails(&rt, DevicePtr::NULL, good, 64, codes::RT_PARAM_INVALID);
    assert!(matches!(
        rt.memory().free(DevicePtr::NULL),
        Err(NpuError::NullPointer(_))
    ));
    assert_code(rt.memory().free(DevicePtr::NULL), 107000);
}

#[test]
fn an_address_outside_every_live_allocation_is_refused() {
    let rt = runtime();
    let good = rt.memory().malloc(256).unwrap();
    // Far past the only allocation, and an allocation that was freed.
    let nowhere = good.offset(1 << 30);
    every_range_call_fails(&rt, nowhere, good, 64, codes::RT_PARAM_INVALID);
    let freed = rt.memory().malloc(256).unwrap();
    rt.memory().free(freed).unwrap();
    every_range_call_fails(&rt, freed, good, 64, codes::RT_PARAM_INVALID);
    let s = rt.contexts().default_stream().unwrap();
    assert!(matches!(
        rt.memory().memset_async(nowhere, 0, 8, s),
        Err(NpuError::InvalidPointer { .. })
    ));
}

#[test]
fn a_copy_past_the_end_of_its_allocation_is_refused() {
    let rt = runtime();
    let a = rt.memory().malloc(1000).unwrap();
    let good = rt.memory().malloc(4096).unwrap();
    every_range_call_fails(&rt, a, good, 1001, codes::RT_PARAM_INVALID);
    every_range_call_fails(&rt, a.offset(900), good, 101, codes::RT_PARAM_INVALID);
    let s = rt.contexts().default_stream().unwrap();
    let err = rt
        .memory()
        .memset_async(a.offset(900), 0, 101, s)
        .unwrap_err();
    assert!(
        matches!(
            err,
            NpuError::OutOfBounds {
                len: 101,
                size: 1000,
                ..
            }
        ),
        "{err:?}"
    );
    // Exactly up to the end is fine.
    rt.memory().memset_async(a.offset(900), 0, 100, s).unwrap();
    rt.streams().synchronize(s).unwrap();
}

#[test]
fn memory_of_another_context_is_not_reachable() {
    let rt = runtime();
    let primary = rt.contexts().current().unwrap();
    let theirs = rt.memory().malloc(256).unwrap();
    rt.memory().memcpy_htod(theirs, &[5u8; 256]).unwrap();
    rt.contexts().create(0).unwrap();
    let mine = rt.memory().malloc(256).unwrap();
    every_range_call_fails(&rt, theirs, mine, 64, codes::RT_PARAM_INVALID);

    let before = rt.stats();
    let err = rt.memory().free(theirs).unwrap_err();
    assert_eq!(err.code(), codes::RT_MEMORY_FREE, "{err}");
    assert_eq!(rt.stats(), before, "the refused free changed nothing");

    // The owner still has it, intact.
    rt.contexts().set_current(primary).unwrap();
    let mut back = [0u8; 256];
    rt.memory().memcpy_dtoh(&mut back, theirs).unwrap();
    assert_eq!(back, [5u8; 256]);
    rt.memory().free(theirs).unwrap();
}

#[test]
fn a_double_free_is_refused_and_changes_nothing() {
    let rt = runtime();
    let keep = rt.memory().malloc(128).unwrap();
    let p = rt.memory().malloc(128).unwrap();
    rt.memory().free(p).unwrap();
    let before = rt.stats();
    assert_code(rt.memory().free(p), codes::RT_MEMORY_FREE);
    assert_code(rt.memory().free(p), 207002);
    // An interior pointer and an unknown address are refused the same way.
    assert_code(rt.memory().free(keep.offset(64)), codes::RT_MEMORY_FREE);
    assert_code(
        rt.memory().free(keep.offset(1 << 30)),
        codes::RT_MEMORY_FREE,
    );
    assert_eq!(rt.stats(), before);
    rt.memory().memcpy_htod(keep, &[1u8; 128]).unwrap();
    rt.memory().free(keep).unwrap();
    assert_eq!(rt.stats().live_blocks, vec![0]);
}

#[test]
fn free_waits_for_queued_kernel() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 20;
    let x = rt.memory().malloc(4 * n as u64).unwrap();
    let out = rt.memory().malloc_host(4 * n as u64).unwrap();
    rt.submit(Launch::new(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), n.into(), 8.0f32.into()],
        s,
    ))
    .unwrap();
    rt.memory()
        .memcpy_dtoh_async(&out, x, 4 * n as u64, s)
        .unwrap();
    // Free returns at once, with the work that uses the block still queued.
    rt.memory().free(x).unwrap();
    assert!(
        !rt.streams().query(s).unwrap(),
        "free did not wait for the stream"
    );
    assert_code(
        rt.memory().memset_async(x, 0, 4, s),
        codes::RT_PARAM_INVALID,
    );
    // A new allocation of the same size cannot alias the block while the kernel is queued.
    let y = rt.memory().malloc(4 * n as u64).unwrap();
    assert_ne!(y, x);
    assert_eq!(
        rt.stats().live_blocks,
        vec![2],
        "the freed block is still reserved"
    );
    rt.streams().synchronize(s).unwrap();
    assert!(
        rt.timeline().iter().all(|r| r.ok),
        "no queued task touched freed memory"
    );
    assert!(out.read::<f32>().unwrap().iter().all(|&v| v == 8.0));
    assert_eq!(
        rt.stats().live_blocks,
        vec![1],
        "released once its stream position completed"
    );
    assert_eq!(rt.memory().stats().unwrap().deferred_releases, 1);
}

#[test]
fn freed_host_memory_is_refused() {
    let rt = runtime();
    let s = rt.contexts().default_stream().unwrap();
    let d = rt.memory().malloc(64).unwrap();
    let h = rt.memory().malloc_host(64).unwrap();
    rt.memory().free_host(&h).unwrap();
    assert_code(rt.memory().free_host(&h), codes::RT_INVALID_MEMORY_TYPE);
    assert_code(
        rt.memory().memcpy_htod_async(d, &h, 64, s),
        codes::RT_INVALID_MEMORY_TYPE,
    );
    assert_code(
        rt.memory().memcpy_dtoh_async(&h, d, 64, s),
        codes::RT_INVALID_MEMORY_TYPE,
    );
    assert_code(h.read::<u8>(), codes::RT_INVALID_MEMORY_TYPE);
    // Pageable memory is not malloc_host's to free.
    assert_code(
        rt.memory().free_host(&HostBuffer::new(64, false)),
        codes::RT_INVALID_MEMORY_TYPE,
    );
}

#[test]
fn a_host_buffer_too_small_for_the_copy_is_refused() {
    let rt = runtime();
    let s = rt.contexts().default_stream().unwrap();
    let d = rt.memory().malloc(128).unwrap();
    let h = rt.memory().malloc_host(64).unwrap();
    let before = rt.stats();
    assert_code(
        rt.memory().memcpy_htod_async(d, &h, 128, s),
        codes::RT_PARAM_INVALID,
    );
    assert_code(
        rt.memory().memcpy_dtoh_async(&h, d, 128, s),
        codes::RT_PARAM_INVALID,
    );
    assert_eq!(rt.stats(), before);
}

#[test]
fn free_host_waits_for_queued_copies_of_the_buffer() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let n = 1 << 18;
    let d = rt.memory().malloc(4 * n as u64).unwrap();
    let (hin, hout) = (
        rt.memory().malloc_host(4 * n as u64).unwrap(),
        rt.memory().malloc_host(4 * n as u64).unwrap(),
    );
    hin.write(&vec![2.5f32; n]).unwrap();
    let keep = hout.clone();
    rt.memory()
        .memcpy_htod_async(d, &hin, 4 * n as u64, s)
        .unwrap();
    rt.memory()
        .memcpy_dtoh_async(&hout, d, 4 * n as u64, s)
        .unwrap();
    // Like cudaFreeHost: freeing waits until no queued copy can still touch the buffer.
    rt.memory().free_host(&hin).unwrap();
    rt.memory().free_host(&hout).unwrap();
    assert!(
        rt.streams().query(s).unwrap(),
        "the copies ran before the free"
    );
    rt.streams().synchronize(s).unwrap();
    assert_eq!(
        rt.contexts().error().unwrap(),
        None,
        "the context is healthy"
    );
    assert!(rt.timeline().iter().all(|r| r.ok));
    assert_code(keep.read::<f32>(), codes::RT_INVALID_MEMORY_TYPE);
    rt.memory().malloc(64).unwrap();
}

#[test]
fn a_zero_byte_copy_or_memset_of_a_block_freed_behind_it_succeeds() {
    // Zero bytes touch nothing: the free need not wait for them, and they do not fault.
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let s = rt.streams().create().unwrap();
    let p = rt.memory().malloc(64).unwrap();
    rt.memory().memcpy_dtod_async(p, p, 0, s).unwrap();
    rt.memory().memset_async(p, 7, 0, s).unwrap();
    rt.memory().free(p).unwrap();
    rt.streams().synchronize(s).unwrap();
}
