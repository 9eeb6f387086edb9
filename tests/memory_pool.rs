//! The memory system as a user sees it: allocations from the pool never overlap, a freed
//! block is never handed out again while queued work can still touch it, statistics stay
//! consistent, and exhaustion is a clean error that frees cure.

use npusim::Launch;
use npusim::prelude::*;
use npusim::{AllocPolicy, codes};
use proptest::prelude::*;

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Malloc(u64),
    Free(usize),
    FreeAsync(usize),
    Fill(usize),
    Sync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![1u64..256, 256u64..65_536, 65_536u64..(3 << 20)].prop_map(Op::Malloc),
        2 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::FreeAsync),
        3 => any::<usize>().prop_map(Op::Fill),
        1 => Just(Op::Sync),
    ]
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.0 + b.1 && b.0 < a.0 + a.1
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn blocks_never_overlap_live_or_queued_memory_and_data_survives(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = rt();
        let s = rt.streams().create().unwrap();
        let fill = rt.kernel("fill_f32").unwrap();
        // Live blocks: (ptr, size, the value its fills wrote last).
        let mut live: Vec<(u64, u64, Option<f32>)> = Vec::new();
        // Freed blocks that queued work named since the last synchronize.
        let mut queued_freed: Vec<(u64, u64)> = Vec::new();
        let mut used_since_sync: Vec<u64> = Vec::new();
        let mut next_value = 1.0f32;
        for op in ops {
            match op {
                Op::Malloc(size) => {
                    let p = rt.memory().malloc(size).unwrap().addr();
                    prop_assert_eq!(p % 64, 0, "64-byte aligned");
                    for &(q, qs, _) in &live {
                        prop_assert!(!overlaps((p, size), (q, qs)), "overlaps a live block");
                    }
                    for &b in &queued_freed {
                        prop_assert!(!overlaps((p, size), b), "reuses memory queued work may touch");
                    }
                    live.push((p, size, None));
                }
                Op::Free(i) | Op::FreeAsync(i) if !live.is_empty() => {
                    let (p, size, _) = live.remove(i % live.len());
                    if matches!(op, Op::FreeAsync(_)) {
                        rt.memory().free_async(DevicePtr(p), s).unwrap();
                    } else {
                        rt.memory().free(DevicePtr(p)).unwrap();
                    }
                    if used_since_sync.contains(&p) {
                        queued_freed.push((p, size));
                    }
                    prop_assert_eq!(rt.memory().free(DevicePtr(p)).unwrap_err().code(), codes::RT_MEMORY_FREE);
                }
                Op::Fill(i) if !live.is_empty() => {
                    let k = i % live.len();
                    let (p, size, _) = live[k];
                    let n = (size / 4) as usize;
                    if n > 0 {
                        rt.submit(Launch::new(fill, 2, &[DevicePtr(p).into(), n.into(), next_value.into()], s)).unwrap();
                        live[k].2 = Some(next_value);
                        next_value += 1.0;
                        used_since_sync.push(p);
                    }
                }
                Op::Sync => {
                    rt.streams().synchronize(s).unwrap();
                    queued_freed.clear();
                    used_since_sync.clear();
                }
                _ => {}
            }
            let m = rt.memory().stats().unwrap();
            prop_assert!(m.pool.reserved_bytes >= m.pool.live_bytes);
            prop_assert_eq!(m.pool.live_blocks, live.len() as u64 + m.pending_frees);
        }
        rt.streams().synchronize(s).unwrap();
        for &(p, size, value) in &live {
            if let Some(v) = value {
                let n = (size / 4) as usize;
                let mut back = vec![0f32; n];
                rt.memory().memcpy_dtoh(&mut back, DevicePtr(p)).unwrap();
                prop_assert!(back.iter().all(|&x| x == v), "a live block kept its data");
            }
        }
        rt.run_until_idle().unwrap();
        let m = rt.memory().stats().unwrap();
        prop_assert_eq!(m.pending_frees, 0);
        prop_assert_eq!(m.pool.live_blocks, live.len() as u64);
    }
}

#[test]
fn exhaustion_is_a_clean_out_of_memory_and_frees_cure_it() {
    let rt = rt();
    let capacity = rt.device_config(0).unwrap().hbm_bytes;
    let chunk = 64 << 20;
    let mut blocks = Vec::new();
    loop {
        match rt.memory().malloc(chunk) {
            Ok(p) => blocks.push(p),
            Err(e) => {
                assert_eq!(e.code(), codes::RT_DEVICE_OOM, "{e}");
                break;
            }
        }
        assert!(
            blocks.len() as u64 * chunk <= capacity,
            "never more than the device has"
        );
    }
    assert!(!blocks.is_empty());
    let before = rt.memory().stats().unwrap();
    assert_eq!(
        rt.memory().malloc(chunk).unwrap_err().code(),
        codes::RT_DEVICE_OOM
    );
    assert_eq!(
        rt.memory().stats().unwrap().pool.live_blocks,
        before.pool.live_blocks,
        "nothing changed"
    );
    // Absurd sizes are the same clean error, not an overflow.
    assert_eq!(
        rt.memory().malloc(u64::MAX).unwrap_err().code(),
        codes::RT_DEVICE_OOM
    );
    assert_eq!(
        rt.memory().malloc(0).unwrap_err().code(),
        codes::RT_PARAM_INVALID
    );
    for p in blocks.drain(..2) {
        rt.memory().free(p).unwrap();
    }
    rt.memory().malloc(chunk).unwrap();
}

#[test]
fn frees_still_waiting_for_their_stream_are_completed_before_out_of_memory() {
    let rt = rt();
    let s = rt.streams().create().unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    let big = 256 << 20;
    let mut held = Vec::new();
    while let Ok(p) = rt.memory().malloc(big) {
        held.push(p);
    }
    // Queue work on every block, then free them all behind it.
    for &p in &held {
        rt.submit(Launch::new(
            fill,
            4,
            &[p.into(), (1usize << 16).into(), 1.0f32.into()],
            s,
        ))
        .unwrap();
        rt.memory().free(p).unwrap();
    }
    assert!(rt.memory().stats().unwrap().pending_frees > 0);
    // The allocation drives the device until the pending frees are released, then succeeds.
    rt.memory().malloc(big).unwrap();
    assert!(rt.streams().query(s).unwrap());
}

#[test]
fn page_policies_choose_the_page_size() {
    let rt = rt();
    for policy in [
        AllocPolicy::HugeFirst,
        AllocPolicy::HugeOnly,
        AllocPolicy::NormalOnly,
    ] {
        let p = rt.memory().malloc_with_policy(4 << 20, policy).unwrap();
        rt.memory().memcpy_htod(p, &[7u8; 64]).unwrap();
        rt.memory().free(p).unwrap();
    }
    let m = rt.memory().stats().unwrap();
    assert!(
        m.pool.reserved_huge_bytes > 0 && m.pool.reserved_normal_bytes > 0,
        "{m:?}"
    );
}

#[test]
fn record_stream_makes_a_free_wait_for_another_stream() {
    let rt = rt();
    let a = rt.streams().create().unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    let other = rt.memory().malloc(4 << 20).unwrap();
    let x = rt.memory().malloc(1 << 20).unwrap();
    // Work on `a` that does not name `x` (say it reads it through a pointer in device memory).
    rt.submit(Launch::new(
        fill,
        1,
        &[other.into(), (1usize << 20).into(), 1.0f32.into()],
        a,
    ))
    .unwrap();
    rt.step();
    // Without a declaration nothing queued names `x`: its free is immediate.
    let z = rt.memory().malloc(1 << 20).unwrap();
    rt.memory().free(z).unwrap();
    assert_eq!(rt.memory().stats().unwrap().pending_frees, 0);
    // Declared: the free waits for `a`'s position.
    rt.memory().record_stream(x, a).unwrap();
    rt.memory().free(x).unwrap();
    assert_eq!(rt.memory().stats().unwrap().pending_frees, 1);
    assert!(!rt.streams().query(a).unwrap());
    rt.streams().synchronize(a).unwrap();
    rt.run_until_idle().unwrap();
    assert_eq!(rt.memory().stats().unwrap().pending_frees, 0);
}

/// A kernel reading two adjacent blocks gets one access range spanning both (the access set
/// joins a range that continues the previous one): freeing both behind the kernel must keep
/// both reserved until it has run, not only the first.
#[test]
fn freeing_adjacent_blocks_behind_a_kernel_keeps_both_until_it_has_run() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let s = rt.streams().create().unwrap();
    let n = 1usize << 16;
    let bytes = 4 * n as u64;
    let (a, b, c) = (
        rt.memory().malloc(bytes).unwrap(),
        rt.memory().malloc(bytes).unwrap(),
        rt.memory().malloc(bytes).unwrap(),
    );
    assert_eq!(b.addr(), a.addr() + bytes, "the blocks are adjacent");
    rt.memory()
        .memcpy_htod_async_pageable(a, &vec![1.0f32; n], s)
        .unwrap();
    rt.memory()
        .memcpy_htod_async_pageable(b, &vec![2.0f32; n], s)
        .unwrap();
    let add = rt.kernel("vector_add_f32").unwrap();
    rt.submit(Launch::new(
        add,
        1,
        &[a.into(), b.into(), c.into(), n.into()],
        s,
    ))
    .unwrap();
    rt.memory().free(a).unwrap();
    rt.memory().free(b).unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut out = vec![0.0f32; n];
    rt.memory().memcpy_dtoh(&mut out, c).unwrap();
    assert!(out.iter().all(|&x| x == 3.0));
}
