use super::index::mapping;
use super::*;
use crate::memory::Driver;

const MIB: u64 = 1 << 20;

fn setup(capacity: u64) -> (Driver, Pool) {
    let mut driver = Driver::new(capacity).unwrap();
    let asid = driver.create_address_space();
    (driver, Pool::new(asid))
}

#[test]
fn churn_with_trim_never_leaves_the_pools_slice() {
    let mut driver = Driver::new(1 << 30).unwrap();
    let asid = driver.create_address_space();
    let base = HEAP_BASE + (1 << 38);
    let span = 64 * MIB;
    let mut pool = Pool::with_config(
        asid,
        PoolConfig {
            heap_base: base,
            heap_span: span,
            ..PoolConfig::default()
        },
    );
    let keep = pool
        .alloc(&mut driver, 100, AllocPolicy::HugeFirst)
        .unwrap();
    for i in 0..200 {
        let a = pool
            .alloc(&mut driver, 3 * MIB, AllocPolicy::HugeFirst)
            .unwrap();
        assert!(
            a.va >= base && a.va + a.size <= base + span,
            "round {i}: {:#x} outside the slice",
            a.va
        );
        assert!(a.va + a.size <= keep.va || a.va >= keep.va + keep.size);
        pool.free(a.va).unwrap();
        pool.trim(&mut driver);
    }
    assert_eq!(pool.block_containing(keep.va), Some((keep.va, 100)));
}

#[test]
fn a_pool_can_live_in_a_component() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Pool>();
}

#[test]
fn start_bitmap_finds_predecessors_across_levels() {
    let mut bm = StartBitmap::new(1 << 20);
    assert_eq!(bm.pred(12345), None);
    bm.set(5);
    bm.set(70_000);
    bm.set(1 << 19);
    assert_eq!(bm.pred(4), None);
    assert_eq!(bm.pred(5), Some(5));
    assert_eq!(bm.pred(69_999), Some(5));
    assert_eq!(bm.pred(70_000), Some(70_000));
    assert_eq!(bm.pred((1 << 20) - 1), Some(1 << 19));
    bm.clear(70_000);
    assert_eq!(bm.pred((1 << 19) - 1), Some(5));
    bm.clear(5);
    assert_eq!(bm.pred((1 << 19) - 1), None);
}

#[test]
fn live_map_matches_a_btree_map() {
    let mut m = LiveMap::new();
    let mut model = std::collections::BTreeMap::new();
    let mut x = 0x1234_5678u64;
    for i in 0..20_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Clustered keys, to exercise long probe runs and wrap-around.
        let va = HEAP_BASE + (x % 512) * 64 * if i % 3 == 0 { 4096 } else { 1 };
        match model.entry(va) {
            std::collections::btree_map::Entry::Occupied(e) => {
                assert_eq!(m.remove(va), Some(e.remove()));
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                m.insert(va, i);
                e.insert(i);
            }
        }
        assert_eq!(m.len, model.len());
    }
    for (&k, &v) in &model {
        assert_eq!(m.get(k), Some(v));
    }
    assert_eq!(
        m.get(HEAP_BASE + 7 * 64 * 4096 + 64),
        model.get(&(HEAP_BASE + 7 * 64 * 4096 + 64)).copied()
    );
}

#[test]
fn tlsf_mapping_is_monotonic_and_rounding_fits() {
    let mut last = (0, 0);
    for units in 1..100_000u64 {
        let m = mapping(units);
        assert!(m >= last, "{units}");
        last = m;
    }
}

#[test]
fn small_and_large_requests_use_separate_chunks() {
    let (mut d, mut p) = setup(1 << 30);
    let small = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
    let large = p.alloc(&mut d, 3 * MIB, AllocPolicy::HugeFirst).unwrap();
    let s = p.stats();
    assert_eq!(s.chunks, 2);
    assert_eq!(s.reserved_bytes, SMALL_CHUNK + 16 * MIB);
    assert_eq!(small.va % ALIGN, 0);
    assert_eq!(large.va % ALIGN, 0);
    assert_eq!(p.free(small.va), Ok(100));
    assert_eq!(p.free(large.va), Ok(3 * MIB));
    assert_eq!(p.stats().cached_chunks, 2);
    assert_eq!(p.trim(&mut d), SMALL_CHUNK + 16 * MIB);
    assert_eq!(d.stats().reserved_bytes, 0);
}

#[test]
fn freeing_everything_coalesces_to_one_block_per_chunk() {
    let (mut d, mut p) = setup(1 << 30);
    let blocks: Vec<_> = (0..100)
        .map(|i| {
            p.alloc(&mut d, 1000 + i * 64, AllocPolicy::HugeFirst)
                .unwrap()
        })
        .collect();
    for b in blocks
        .iter()
        .step_by(2)
        .chain(blocks.iter().skip(1).step_by(2))
    {
        p.free(b.va).unwrap();
    }
    let s = p.stats();
    assert_eq!(s.free_bytes, s.reserved_bytes);
    assert_eq!(s.largest_free_block, SMALL_CHUNK);
    assert_eq!(s.fragmentation, 0.0);
}

#[test]
fn zero_absurd_and_foreign_requests_are_errors() {
    let (mut d, mut p) = setup(1 << 30);
    assert_eq!(
        p.alloc(&mut d, 0, AllocPolicy::HugeFirst),
        Err(PoolError::ZeroSize)
    );
    for size in [u64::MAX, u64::MAX - 63, (1 << 30) + 1, 1 << 62] {
        assert!(matches!(
            p.alloc(&mut d, size, AllocPolicy::HugeFirst),
            Err(PoolError::OutOfMemory { .. })
        ));
    }
    let a = p.alloc(&mut d, 256, AllocPolicy::HugeFirst).unwrap();
    assert_eq!(
        p.free(a.va + 64),
        Err(PoolError::NotAllocated { va: a.va + 64 })
    );
    assert_eq!(p.free(0), Err(PoolError::NotAllocated { va: 0 }));
    assert_eq!(p.free(a.va), Ok(256));
    assert_eq!(p.free(a.va), Err(PoolError::NotAllocated { va: a.va }));
    let s = p.stats();
    assert_eq!(
        (s.allocs, s.frees, s.live_bytes, s.failed_allocs),
        (1, 1, 0, 4)
    );
}

#[test]
fn policies_choose_the_page_size() {
    let (mut d, mut p) = setup(1 << 30);
    for (policy, page) in [
        (AllocPolicy::HugeFirst, PageSize::Huge2M),
        (AllocPolicy::HugeOnly, PageSize::Huge2M),
        (AllocPolicy::NormalOnly, PageSize::Normal4K),
    ] {
        for size in [64, 5 * MIB] {
            let a = p.alloc(&mut d, size, policy).unwrap();
            assert_eq!(a.page, page, "{policy:?} {size}");
            assert_eq!(p.allocation(a.va), Some(a));
        }
    }
    let s = p.stats();
    assert_eq!(s.reserved_normal_bytes, SMALL_CHUNK + 16 * MIB);
    assert_eq!(s.reserved_huge_bytes, SMALL_CHUNK + 16 * MIB);
}

/// Leaves exactly `[1 MiB, 3 MiB)` of a 4 MiB device free: 2 MiB, but not 2 MiB aligned.
fn unaligned_free_space(d: &mut Driver) {
    let _x = d.reserve(MIB, PageSize::Normal4K).unwrap();
    let y = d.reserve(2 * MIB, PageSize::Normal4K).unwrap();
    let _z = d.reserve(MIB, PageSize::Normal4K).unwrap();
    d.release(y).unwrap();
}

#[test]
fn huge_first_falls_back_to_normal_pages() {
    let (mut d, mut p) = setup(4 * MIB);
    unaligned_free_space(&mut d);
    assert!(matches!(
        p.alloc(&mut d, 100, AllocPolicy::HugeOnly),
        Err(PoolError::OutOfMemory { .. })
    ));
    let a = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
    assert_eq!(a.page, PageSize::Normal4K);
    // Cached normal memory does not serve huge-only requests.
    p.free(a.va).unwrap();
    assert!(p.alloc(&mut d, 100, AllocPolicy::HugeOnly).is_err());
}

#[test]
fn exhaustion_releases_cached_chunks_and_retries() {
    let (mut d, mut p) = setup(32 * MIB);
    let small = p.alloc(&mut d, MIB, AllocPolicy::HugeFirst).unwrap();
    p.free(small.va).unwrap();
    let big = p.alloc(&mut d, 31 * MIB, AllocPolicy::HugeFirst).unwrap();
    let s = p.stats();
    assert_eq!(s.released_chunks, 1);
    assert_eq!(s.reserved_bytes, 32 * MIB);
    assert_eq!(s.chunks, 1);
    // Now truly full: refused, and nothing changed.
    let before = p.stats();
    assert!(p.alloc(&mut d, 64, AllocPolicy::HugeFirst).is_err());
    let after = p.stats();
    assert_eq!(after.live_bytes, before.live_bytes);
    assert_eq!(after.reserved_bytes, before.reserved_bytes);
    assert_eq!(p.block_containing(big.va), Some((big.va, 31 * MIB)));
    // After a free the same request succeeds.
    p.free(big.va).unwrap();
    assert!(p.alloc(&mut d, 64, AllocPolicy::HugeFirst).is_ok());
}

#[test]
fn a_destroyed_address_space_is_a_driver_error_not_oom() {
    let (mut d, mut p) = setup(1 << 30);
    d.destroy_address_space(p.address_space()).unwrap();
    assert!(matches!(
        p.alloc(&mut d, 100, AllocPolicy::HugeFirst),
        Err(PoolError::Driver(DriverError::UnknownAddressSpace(_)))
    ));
    assert_eq!(
        d.stats().reserved_bytes,
        0,
        "the chunk reserved for it was released"
    );
}

#[test]
fn bounds_lookup_respects_the_requested_size() {
    let (mut d, mut p) = setup(1 << 30);
    let a = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
    let b = p
        .alloc(&mut d, 3 * MIB + 1, AllocPolicy::HugeFirst)
        .unwrap();
    assert_eq!(p.block_containing(a.va), Some((a.va, 100)));
    assert_eq!(p.block_containing(a.va + 99), Some((a.va, 100)));
    assert_eq!(
        p.block_containing(a.va + 100),
        None,
        "rounding slack is out of bounds"
    );
    assert_eq!(
        p.block_containing(b.va + 3 * MIB),
        Some((b.va, 3 * MIB + 1))
    );
    assert_eq!(p.block_containing(b.va + 3 * MIB + 1), None);
    assert_eq!(p.block_containing(a.va - 1), None);
    assert_eq!(p.block_containing(0), None);
    assert_eq!(p.block_containing(u64::MAX), None);
    p.free(a.va).unwrap();
    assert_eq!(p.block_containing(a.va), None);
}

#[test]
fn steady_state_reuses_without_driver_calls() {
    let (mut d, mut p) = setup(1 << 30);
    let warm: Vec<_> = [64, 4096, 100_000, 2 * MIB, 20 * MIB]
        .iter()
        .map(|&s| p.alloc(&mut d, s, AllocPolicy::HugeFirst).unwrap())
        .collect();
    for a in &warm {
        p.free(a.va).unwrap();
    }
    let calls = d.stats().calls.total();
    for _ in 0..1000 {
        for &s in &[64, 4096, 100_000, 2 * MIB, 20 * MIB] {
            let a = p.alloc(&mut d, s, AllocPolicy::HugeFirst).unwrap();
            p.free(a.va).unwrap();
        }
    }
    assert_eq!(d.stats().calls.total(), calls);
    assert_eq!(p.stats().chunks, 3);
}

#[test]
fn release_all_returns_everything_to_the_driver() {
    let (mut d, mut p) = setup(1 << 30);
    let a = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
    p.alloc(&mut d, 50 * MIB, AllocPolicy::NormalOnly).unwrap();
    p.release_all(&mut d);
    assert_eq!(d.stats().reserved_bytes, 0);
    assert_eq!(d.stats().mapped_bytes, 0);
    let s = p.stats();
    assert_eq!((s.live_bytes, s.reserved_bytes, s.chunks), (0, 0, 0));
    assert_eq!(p.free(a.va), Err(PoolError::NotAllocated { va: a.va }));
    let b = p.alloc(&mut d, 100, AllocPolicy::HugeFirst).unwrap();
    assert_ne!(a.va, b.va, "released virtual addresses are not reused");
    // Only cached chunks left: released too, and the pool works afterwards.
    p.free(b.va).unwrap();
    p.alloc(&mut d, 5 * MIB, AllocPolicy::HugeFirst).unwrap();
    p.release_all(&mut d);
    assert_eq!(d.stats().reserved_bytes, 0);
    for size in [64, 100_000, 3 * MIB] {
        let a = p.alloc(&mut d, size, AllocPolicy::HugeFirst).unwrap();
        assert_eq!(p.block_containing(a.va + size - 1), Some((a.va, size)));
    }
    assert_eq!(p.stats().chunks, 2);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Alloc(u64, AllocPolicy),
        Free(usize),
        Trim,
        ReleaseAll,
    }

    fn size() -> impl Strategy<Value = u64> {
        prop_oneof![
            8 => 1u64..=4096,
            4 => 4097u64..=SMALL_MAX,
            2 => SMALL_MAX + 1..=8 * MIB,
            1 => 8 * MIB..=40 * MIB,
        ]
    }

    fn policy() -> impl Strategy<Value = AllocPolicy> {
        prop_oneof![
            Just(AllocPolicy::HugeFirst),
            Just(AllocPolicy::HugeOnly),
            Just(AllocPolicy::NormalOnly)
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (size(), policy()).prop_map(|(s, p)| Op::Alloc(s, p)),
            5 => any::<usize>().prop_map(Op::Free),
            1 => Just(Op::Trim),
            1 => Just(Op::ReleaseAll),
        ]
    }

    /// Tags the first and last byte of a block with its index, to catch blocks that share
    /// physical memory.
    fn tag(d: &mut Driver, asid: AsId, a: &Allocation, t: u8) {
        d.write_virt(asid, a.va, &[t]).unwrap();
        d.write_virt(asid, a.va + a.size - 1, &[t]).unwrap();
    }

    fn check_tag(d: &Driver, asid: AsId, a: &Allocation, t: u8) {
        let mut b = [0u8; 1];
        d.read_virt(asid, a.va, &mut b).unwrap();
        assert_eq!(b[0], t);
        d.read_virt(asid, a.va + a.size - 1, &mut b).unwrap();
        assert_eq!(b[0], t);
    }

    /// Replays `ops` against a model of the live set, checking the invariants after each.
    fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
        // 96 MiB: large requests exhaust it regularly.
        let (mut d, mut p) = setup(96 * MIB);
        let asid = p.address_space();
        let mut live: Vec<(Allocation, u8)> = Vec::new();
        let mut next_tag = 0u8;
        for op in ops {
            match op {
                Op::Alloc(size, policy) => {
                    let before = p.stats();
                    match p.alloc(&mut d, size, policy) {
                        Ok(a) => {
                            prop_assert_eq!(a.size, size);
                            prop_assert_eq!(a.va % ALIGN, 0);
                            match policy {
                                AllocPolicy::HugeOnly => {
                                    prop_assert_eq!(a.page, PageSize::Huge2M)
                                }
                                AllocPolicy::NormalOnly => {
                                    prop_assert_eq!(a.page, PageSize::Normal4K)
                                }
                                AllocPolicy::HugeFirst => {}
                            }
                            next_tag = next_tag.wrapping_add(1);
                            tag(&mut d, asid, &a, next_tag);
                            live.push((a, next_tag));
                        }
                        Err(e) => {
                            let oom = matches!(e, PoolError::OutOfMemory { .. });
                            prop_assert!(oom, "{:?}", e);
                            let after = p.stats();
                            prop_assert_eq!(after.live_bytes, before.live_bytes);
                            prop_assert_eq!(after.live_blocks, before.live_blocks);
                            // Recovery: a pool holding nothing gets any request that
                            // the empty device could hold.
                            if live.is_empty() && size <= 64 * MIB {
                                prop_assert!(false, "empty pool refused {} bytes", size);
                            }
                        }
                    }
                }
                Op::Free(i) if !live.is_empty() => {
                    let (a, t) = live.swap_remove(i % live.len());
                    check_tag(&d, asid, &a, t);
                    prop_assert_eq!(p.free(a.va), Ok(a.size));
                    prop_assert_eq!(p.free(a.va), Err(PoolError::NotAllocated { va: a.va }));
                }
                Op::Free(_) => {}
                Op::Trim => {
                    p.trim(&mut d);
                    prop_assert_eq!(p.stats().cached_chunks, 0);
                }
                Op::ReleaseAll => {
                    p.release_all(&mut d);
                    prop_assert_eq!(d.stats().reserved_bytes, 0);
                    for (a, _) in live.drain(..) {
                        prop_assert_eq!(p.block_containing(a.va), None);
                        prop_assert_eq!(p.free(a.va), Err(PoolError::NotAllocated { va: a.va }));
                    }
                }
            }
            // Invariants.
            let s = p.stats();
            let mut sorted: Vec<_> = live.iter().map(|(a, _)| (a.va, a.size)).collect();
            sorted.sort_unstable();
            for w in sorted.windows(2) {
                prop_assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {:?}", w);
            }
            prop_assert_eq!(s.live_bytes, sorted.iter().map(|x| x.1).sum::<u64>());
            prop_assert_eq!(s.live_blocks, sorted.len() as u64);
            prop_assert!(s.reserved_bytes >= s.live_bytes);
            prop_assert_eq!(s.reserved_bytes, d.stats().reserved_bytes);
            prop_assert_eq!(
                s.reserved_bytes,
                s.reserved_huge_bytes + s.reserved_normal_bytes
            );
            prop_assert!(s.peak_live_bytes >= s.live_bytes);
            prop_assert!(s.peak_reserved_bytes >= s.reserved_bytes);
            prop_assert!(s.largest_free_block <= s.free_bytes);
            for &(va, size) in &sorted {
                prop_assert_eq!(p.block_containing(va), Some((va, size)));
                prop_assert_eq!(p.block_containing(va + size - 1), Some((va, size)));
                prop_assert!(p.block_containing(va + size) != Some((va, size)));
            }
        }
        for (a, t) in &live {
            check_tag(&d, asid, a, *t);
            p.free(a.va).unwrap();
        }
        let s = p.stats();
        prop_assert_eq!(s.free_bytes, s.reserved_bytes);
        prop_assert_eq!(s.cached_chunks, s.chunks);
        p.trim(&mut d);
        prop_assert_eq!(d.stats().reserved_bytes, 0);
        prop_assert_eq!(d.stats().mapped_bytes, 0);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_alloc_free_keeps_the_invariants(
            ops in proptest::collection::vec(op(), 1..200)
        ) {
            run(ops)?;
        }
    }
}
