//! Device memory through the public API: data round-trips, every call checks the device range
//! it names before queueing anything (null, unknown, past the end, another context's memory),
//! free refuses what it must and waits for queued work, and a refused call changes nothing.

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
    let s = rt.default_stream().unwrap();
    let host = rt.malloc_host(bytes.max(1)).unwrap();
    let before = rt.stats();
    assert_code(rt.memcpy_htod_async(ptr, &host, bytes, s), code);
    assert_code(rt.memcpy_dtoh_async(&host, ptr, bytes, s), code);
    assert_code(rt.memcpy_dtod_async(ptr, good, bytes, s), code);
    assert_code(rt.memcpy_dtod_async(good, ptr, bytes, s), code);
    assert_code(rt.memset_async(ptr, 1, bytes, s), code);
    assert_code(
        rt.memcpy_htod_async_pageable(ptr, &vec![0u8; bytes as usize], s),
        code,
    );
    assert_eq!(
        rt.stats(),
        before,
        "refused calls queue nothing and cost nothing"
    );
    // The synchronous forms refuse it too (they may synchronize first, which is harmless).
    let mut out = vec![0u8; bytes as usize];
    assert_code(rt.memcpy_htod(ptr, &out), code);
    assert_code(rt.memcpy_dtoh(&mut out, ptr), code);
    assert_code(rt.memset(ptr, 0, bytes), code);
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
        rt.malloc(4 * n as u64).unwrap(),
        rt.malloc(4 * n as u64).unwrap(),
    );
    rt.memcpy_htod(a, &data).unwrap();
    rt.memcpy_dtod(b, a, 4 * n as u64).unwrap();
    rt.memset(a, 0, 4 * n as u64).unwrap();
    let (mut from_a, mut from_b) = (vec![1.0f32; n], vec![0.0f32; n]);
    rt.memcpy_dtoh(&mut from_a, a).unwrap();
    rt.memcpy_dtoh(&mut from_b, b).unwrap();
    assert!(from_a.iter().all(|&v| v == 0.0));
    assert_eq!(from_b, data);

    // Asynchronous copies through pinned buffers, at an offset into an allocation.
    let s = rt.create_stream().unwrap();
    let (hin, hout) = (rt.malloc_host(400).unwrap(), rt.malloc_host(400).unwrap());
    hin.write(&[3u32; 100]).unwrap();
    rt.memcpy_htod_async(b.offset(800), &hin, 400, s).unwrap();
    rt.memcpy_dtoh_async(&hout, b.offset(800), 400, s).unwrap();
    rt.synchronize_stream(s).unwrap();
    assert_eq!(hout.read::<u32>().unwrap(), vec![3u32; 100]);
}

#[test]
fn a_null_device_pointer_is_refused() {
    let rt = runtime();
    let good = rt.malloc(256).unwrap();
    every_range_call_fails(&rt, DevicePtr::NULL, good, 64, codes::RT_PARAM_INVALID);
    assert!(matches!(
        rt.free(DevicePtr::NULL),
        Err(NpuError::NullPointer(_))
    ));
    assert_code(rt.free(DevicePtr::NULL), 107000);
}

#[test]
fn an_address_outside_every_live_allocation_is_refused() {
    let rt = runtime();
    let good = rt.malloc(256).unwrap();
    // Far past the only allocation, and an allocation that was freed.
    let nowhere = good.offset(1 << 30);
    every_range_call_fails(&rt, nowhere, good, 64, codes::RT_PARAM_INVALID);
    let freed = rt.malloc(256).unwrap();
    rt.free(freed).unwrap();
    every_range_call_fails(&rt, freed, good, 64, codes::RT_PARAM_INVALID);
    let s = rt.default_stream().unwrap();
    assert!(matches!(
        rt.memset_async(nowhere, 0, 8, s),
        Err(NpuError::InvalidPointer { .. })
    ));
}

#[test]
fn a_copy_past_the_end_of_its_allocation_is_refused() {
    let rt = runtime();
    let a = rt.malloc(1000).unwrap();
    let good = rt.malloc(4096).unwrap();
    every_range_call_fails(&rt, a, good, 1001, codes::RT_PARAM_INVALID);
    every_range_call_fails(&rt, a.offset(900), good, 101, codes::RT_PARAM_INVALID);
    let s = rt.default_stream().unwrap();
    let err = rt.memset_async(a.offset(900), 0, 101, s).unwrap_err();
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
    rt.memset_async(a.offset(900), 0, 100, s).unwrap();
    rt.synchronize_stream(s).unwrap();
}

#[test]
fn memory_of_another_context_is_not_reachable() {
    let rt = runtime();
    let primary = rt.current_context().unwrap();
    let theirs = rt.malloc(256).unwrap();
    rt.memcpy_htod(theirs, &[5u8; 256]).unwrap();
    rt.create_context(0).unwrap();
    let mine = rt.malloc(256).unwrap();
    every_range_call_fails(&rt, theirs, mine, 64, codes::RT_PARAM_INVALID);

    let before = rt.stats();
    let err = rt.free(theirs).unwrap_err();
    assert_eq!(err.code(), codes::RT_MEMORY_FREE, "{err}");
    assert_eq!(rt.stats(), before, "the refused free changed nothing");

    // The owner still has it, intact.
    rt.set_current_context(primary).unwrap();
    let mut back = [0u8; 256];
    rt.memcpy_dtoh(&mut back, theirs).unwrap();
    assert_eq!(back, [5u8; 256]);
    rt.free(theirs).unwrap();
}

#[test]
fn a_double_free_is_refused_and_changes_nothing() {
    let rt = runtime();
    let keep = rt.malloc(128).unwrap();
    let p = rt.malloc(128).unwrap();
    rt.free(p).unwrap();
    let before = rt.stats();
    assert_code(rt.free(p), codes::RT_MEMORY_FREE);
    assert_code(rt.free(p), 207002);
    // An interior pointer and an unknown address are refused the same way.
    assert_code(rt.free(keep.offset(64)), codes::RT_MEMORY_FREE);
    assert_code(rt.free(keep.offset(1 << 30)), codes::RT_MEMORY_FREE);
    assert_eq!(rt.stats(), before);
    rt.memcpy_htod(keep, &[1u8; 128]).unwrap();
    rt.free(keep).unwrap();
    assert_eq!(rt.stats().live_blocks, vec![0]);
}

#[test]
fn free_waits_for_queued_kernel() {
    let rt = runtime();
    let s = rt.create_stream().unwrap();
    let n = 1 << 20;
    let x = rt.malloc(4 * n as u64).unwrap();
    let out = rt.malloc_host(4 * n as u64).unwrap();
    rt.launch(
        rt.kernel("fill_f32").unwrap(),
        1,
        &[x.into(), n.into(), 8.0f32.into()],
        s,
    )
    .unwrap();
    rt.memcpy_dtoh_async(&out, x, 4 * n as u64, s).unwrap();
    // Free returns at once, with the work that uses the block still queued.
    rt.free(x).unwrap();
    assert!(
        !rt.query_stream(s).unwrap(),
        "free did not wait for the stream"
    );
    assert_code(rt.memset_async(x, 0, 4, s), codes::RT_PARAM_INVALID);
    // A new allocation of the same size cannot alias the block while the kernel is queued.
    let y = rt.malloc(4 * n as u64).unwrap();
    assert_ne!(y, x);
    assert_eq!(
        rt.stats().live_blocks,
        vec![2],
        "the freed block is still reserved"
    );
    rt.synchronize_stream(s).unwrap();
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
    assert_eq!(rt.memory_stats().unwrap().deferred_releases, 1);
}

#[test]
fn freed_host_memory_is_refused() {
    let rt = runtime();
    let s = rt.default_stream().unwrap();
    let d = rt.malloc(64).unwrap();
    let h = rt.malloc_host(64).unwrap();
    rt.free_host(&h).unwrap();
    assert_code(rt.free_host(&h), codes::RT_INVALID_MEMORY_TYPE);
    assert_code(
        rt.memcpy_htod_async(d, &h, 64, s),
        codes::RT_INVALID_MEMORY_TYPE,
    );
    assert_code(
        rt.memcpy_dtoh_async(&h, d, 64, s),
        codes::RT_INVALID_MEMORY_TYPE,
    );
    assert_code(h.read::<u8>(), codes::RT_INVALID_MEMORY_TYPE);
    // Pageable memory is not malloc_host's to free.
    assert_code(
        rt.free_host(&HostBuffer::new(64, false)),
        codes::RT_INVALID_MEMORY_TYPE,
    );
}

#[test]
fn a_host_buffer_too_small_for_the_copy_is_refused() {
    let rt = runtime();
    let s = rt.default_stream().unwrap();
    let d = rt.malloc(128).unwrap();
    let h = rt.malloc_host(64).unwrap();
    let before = rt.stats();
    assert_code(rt.memcpy_htod_async(d, &h, 128, s), codes::RT_PARAM_INVALID);
    assert_code(rt.memcpy_dtoh_async(&h, d, 128, s), codes::RT_PARAM_INVALID);
    assert_eq!(rt.stats(), before);
}

#[test]
fn free_host_waits_for_queued_copies_of_the_buffer() {
    let rt = runtime();
    let s = rt.create_stream().unwrap();
    let n = 1 << 18;
    let d = rt.malloc(4 * n as u64).unwrap();
    let (hin, hout) = (
        rt.malloc_host(4 * n as u64).unwrap(),
        rt.malloc_host(4 * n as u64).unwrap(),
    );
    hin.write(&vec![2.5f32; n]).unwrap();
    let keep = hout.clone();
    rt.memcpy_htod_async(d, &hin, 4 * n as u64, s).unwrap();
    rt.memcpy_dtoh_async(&hout, d, 4 * n as u64, s).unwrap();
    // Like cudaFreeHost: freeing waits until no queued copy can still touch the buffer.
    rt.free_host(&hin).unwrap();
    rt.free_host(&hout).unwrap();
    assert!(
        rt.query_stream(s).unwrap(),
        "the copies ran before the free"
    );
    rt.synchronize_stream(s).unwrap();
    assert_eq!(rt.context_error().unwrap(), None, "the context is healthy");
    assert!(rt.timeline().iter().all(|r| r.ok));
    assert_code(keep.read::<f32>(), codes::RT_INVALID_MEMORY_TYPE);
    rt.malloc(64).unwrap();
}

#[test]
fn a_zero_byte_copy_or_memset_of_a_block_freed_behind_it_succeeds() {
    // Zero bytes touch nothing: the free need not wait for them, and they do not fault.
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let s = rt.create_stream().unwrap();
    let p = rt.malloc(64).unwrap();
    rt.memcpy_dtod_async(p, p, 0, s).unwrap();
    rt.memset_async(p, 7, 0, s).unwrap();
    rt.free(p).unwrap();
    rt.synchronize_stream(s).unwrap();
}
