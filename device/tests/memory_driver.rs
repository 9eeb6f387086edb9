//! The driver: chunks, address spaces, isolation, call counting and costs.

use npusim_device::abi::HEAP_BASE;
use npusim_device::memory::{
    Driver, DriverCalls, DriverCosts, DriverError, HUGE_PAGE_SIZE, MemFault, PageSize,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

#[test]
fn a_reserved_and_mapped_chunk_is_readable_and_writable_by_va() {
    let mut drv = Driver::new(64 * GIB).unwrap();
    let ctx = drv.create_address_space();
    for (i, page) in [PageSize::Normal4K, PageSize::Huge2M]
        .into_iter()
        .enumerate()
    {
        let va = HEAP_BASE + i as u64 * GIB;
        let chunk = drv.reserve(3 * MIB, page).unwrap();
        let info = drv.chunk(chunk).unwrap();
        assert_eq!(info.len, if i == 0 { 3 * MIB } else { 4 * MIB });
        assert_eq!(info.pa % page.bytes(), 0);
        drv.map(ctx, va, chunk).unwrap();
        let data: Vec<u8> = (0..3 * MIB).map(|b| (b % 253) as u8).collect();
        drv.write_virt(ctx, va + 7, &data[..2 * MIB as usize])
            .unwrap();
        let mut out = vec![0u8; 2 * MIB as usize];
        drv.read_virt(ctx, va + 7, &mut out).unwrap();
        assert_eq!(out, data[..2 * MIB as usize]);
        let t = drv.translate(ctx, va + MIB).unwrap();
        assert_eq!(t.pa, info.pa + MIB);
        assert_eq!(t.page_size, page);
    }
}

#[test]
fn address_spaces_are_isolated() {
    let mut drv = Driver::new(GIB).unwrap();
    let a = drv.create_address_space();
    let b = drv.create_address_space();
    let ca = drv.reserve(HUGE_PAGE_SIZE, PageSize::Huge2M).unwrap();
    let cb = drv.reserve(HUGE_PAGE_SIZE, PageSize::Huge2M).unwrap();
    drv.map(a, HEAP_BASE, ca).unwrap();
    drv.map(b, HEAP_BASE, cb).unwrap();
    drv.write_virt(a, HEAP_BASE, b"context a").unwrap();
    drv.write_virt(b, HEAP_BASE, b"context b").unwrap();
    let mut out = [0u8; 9];
    drv.read_virt(a, HEAP_BASE, &mut out).unwrap();
    assert_eq!(&out, b"context a");
    // Same VA, different physical memory; what `a` maps elsewhere, `b` cannot see.
    assert_ne!(
        drv.translate(a, HEAP_BASE).unwrap().pa,
        drv.translate(b, HEAP_BASE).unwrap().pa
    );
    let only_a = drv.reserve(HUGE_PAGE_SIZE, PageSize::Huge2M).unwrap();
    drv.map(a, HEAP_BASE + GIB, only_a).unwrap();
    assert_eq!(
        drv.translate(b, HEAP_BASE + GIB),
        Err(MemFault::PageFault {
            va: HEAP_BASE + GIB
        })
    );
    assert!(drv.read_virt(b, HEAP_BASE + GIB, &mut out).is_err());
}

#[test]
fn every_call_is_counted_and_costed() {
    let costs = DriverCosts {
        call_ns: 1000,
        map_page_ns: 10,
        unmap_page_ns: 20,
        translate_ns: 300,
    };
    let mut drv = Driver::with_costs(GIB, costs).unwrap();
    let ctx = drv.create_address_space();
    let normal = drv.reserve(MIB, PageSize::Normal4K).unwrap();
    let huge = drv.reserve(4 * MIB, PageSize::Huge2M).unwrap();
    drv.map(ctx, HEAP_BASE, normal).unwrap();
    drv.map(ctx, HEAP_BASE + GIB, huge).unwrap();
    drv.translate(ctx, HEAP_BASE).unwrap();
    assert!(drv.translate(ctx, 0).is_err());
    drv.unmap(ctx, HEAP_BASE).unwrap();
    assert!(drv.release(huge).is_err(), "still mapped");
    drv.release(normal).unwrap();
    drv.destroy_address_space(ctx).unwrap();
    drv.release(huge).unwrap();
    assert!(drv.reserve(0, PageSize::Normal4K).is_err());

    let stats = drv.stats();
    assert_eq!(
        stats.calls,
        DriverCalls {
            create_address_space: 1,
            destroy_address_space: 1,
            reserve: 3,
            release: 3,
            map: 2,
            unmap: 1,
            translate: 2,
        }
    );
    // 11 crossings and 2 translations; 256 + 2 pages mapped; 256 pages unmapped, then 2 torn
    // down with the space.
    let expected = 11 * 1000 + 2 * 300 + 258 * 10 + 258 * 20;
    assert_eq!(drv.take_host_cost_ns(), expected);
    assert_eq!(
        drv.take_host_cost_ns(),
        0,
        "draining resets the accumulator"
    );
    assert_eq!(drv.stats().host_cost_total_ns, expected);
    assert_eq!(stats.reserved_bytes, 0);
    assert_eq!(stats.mapped_bytes, 0);
    assert_eq!(stats.address_spaces, 0);
}

#[test]
fn virtual_accesses_count_translations_not_calls() {
    let mut drv = Driver::new(GIB).unwrap();
    let ctx = drv.create_address_space();
    let chunk = drv.reserve(MIB, PageSize::Normal4K).unwrap();
    drv.map(ctx, HEAP_BASE, chunk).unwrap();
    drv.take_host_cost_ns();
    let calls = drv.stats().calls.total();
    drv.fill_virt(ctx, HEAP_BASE + 100, 3 * 4096, 1).unwrap();
    assert_eq!(drv.stats().calls.total(), calls);
    assert_eq!(drv.stats().virt_translations, 4, "a fill over 4 pages");
    assert_eq!(drv.take_host_cost_ns(), 0);
}

#[test]
fn exhausting_memory_is_an_out_of_memory_error() {
    let mut drv = Driver::new(64 * MIB).unwrap();
    let a = drv.reserve(48 * MIB, PageSize::Huge2M).unwrap();
    let err = drv.reserve(32 * MIB, PageSize::Huge2M).unwrap_err();
    assert_eq!(
        err,
        DriverError::OutOfMemory {
            requested: 32 * MIB,
            available: 16 * MIB
        }
    );
    assert!(matches!(
        drv.reserve(u64::MAX, PageSize::Huge2M),
        Err(DriverError::OutOfMemory { .. })
    ));
    assert!(matches!(
        drv.reserve(u64::MAX - 4095, PageSize::Normal4K),
        Err(DriverError::OutOfMemory { .. })
    ));
    drv.reserve(16 * MIB, PageSize::Huge2M).unwrap();
    drv.release(a).unwrap();
    drv.reserve(32 * MIB, PageSize::Huge2M).unwrap();
    assert_eq!(drv.stats().reserved_bytes, 48 * MIB);
}

#[test]
fn released_memory_is_scrubbed_before_reuse() {
    let mut drv = Driver::new(16 * MIB).unwrap();
    let ctx = drv.create_address_space();
    let c = drv.reserve(16 * MIB, PageSize::Huge2M).unwrap();
    drv.map(ctx, HEAP_BASE, c).unwrap();
    drv.fill_virt(ctx, HEAP_BASE, 16 * MIB, 0xEE).unwrap();
    assert_eq!(drv.stats().backed_bytes, 16 * MIB);
    drv.unmap(ctx, HEAP_BASE).unwrap();
    drv.release(c).unwrap();
    assert_eq!(drv.stats().backed_bytes, 0);
    let c = drv.reserve(16 * MIB, PageSize::Huge2M).unwrap();
    drv.map(ctx, HEAP_BASE, c).unwrap();
    let mut out = [0xFFu8; 64];
    drv.read_virt(ctx, HEAP_BASE + 8 * MIB, &mut out).unwrap();
    assert_eq!(out, [0u8; 64]);
}

#[test]
fn stale_ids_and_bad_addresses_are_errors() {
    let mut drv = Driver::new(GIB).unwrap();
    let ctx = drv.create_address_space();
    let chunk = drv.reserve(HUGE_PAGE_SIZE, PageSize::Huge2M).unwrap();
    assert!(matches!(
        drv.map(ctx, HEAP_BASE + 4096, chunk),
        Err(DriverError::BadAlignment { .. })
    ));
    assert!(matches!(
        drv.unmap(ctx, HEAP_BASE),
        Err(DriverError::NotMapped { .. })
    ));
    drv.map(ctx, HEAP_BASE, chunk).unwrap();
    assert!(matches!(
        drv.map(ctx, HEAP_BASE, chunk),
        Err(DriverError::Overlap { .. })
    ));
    drv.destroy_address_space(ctx).unwrap();
    assert_eq!(
        drv.destroy_address_space(ctx),
        Err(DriverError::UnknownAddressSpace(ctx))
    );
    assert_eq!(
        drv.map(ctx, HEAP_BASE, chunk),
        Err(DriverError::UnknownAddressSpace(ctx))
    );
    assert!(drv.translate(ctx, HEAP_BASE).is_err());
    assert!(drv.mapping_epoch(ctx).is_none());
    drv.release(chunk).unwrap();
    assert_eq!(drv.release(chunk), Err(DriverError::UnknownChunk(chunk)));
    let ctx2 = drv.create_address_space();
    assert_eq!(
        drv.map(ctx2, HEAP_BASE, chunk),
        Err(DriverError::UnknownChunk(chunk))
    );
}

#[test]
fn a_faulting_write_changes_nothing() {
    let mut drv = Driver::new(GIB).unwrap();
    let ctx = drv.create_address_space();
    let chunk = drv.reserve(4096, PageSize::Normal4K).unwrap();
    drv.map(ctx, HEAP_BASE, chunk).unwrap();
    let err = drv
        .write_virt(ctx, HEAP_BASE + 4000, &[7u8; 200])
        .unwrap_err();
    assert_eq!(
        err,
        MemFault::PageFault {
            va: HEAP_BASE + 4096
        }
    );
    let mut out = [1u8; 96];
    drv.read_virt(ctx, HEAP_BASE + 4000, &mut out).unwrap();
    assert_eq!(out, [0u8; 96]);
    assert!(
        drv.copy_virt(ctx, HEAP_BASE, ctx, HEAP_BASE + 4000, 200)
            .is_err()
    );
    assert!(drv.fill_virt(ctx, u64::MAX - 5, 100, 1).is_err());
    assert!(drv.read_virt(ctx, u64::MAX - 5, &mut out).is_err());
}

#[test]
fn a_chunk_can_be_mapped_into_two_spaces() {
    let mut drv = Driver::new(GIB).unwrap();
    let a = drv.create_address_space();
    let b = drv.create_address_space();
    let shared = drv.reserve(HUGE_PAGE_SIZE, PageSize::Huge2M).unwrap();
    drv.map(a, HEAP_BASE, shared).unwrap();
    drv.map(b, HEAP_BASE + GIB, shared).unwrap();
    drv.write_virt(a, HEAP_BASE + 10, b"shared").unwrap();
    let mut out = [0u8; 6];
    drv.read_virt(b, HEAP_BASE + GIB + 10, &mut out).unwrap();
    assert_eq!(&out, b"shared");
    assert_eq!(drv.chunk(shared).unwrap().mappings, 2);
    let epoch = drv.mapping_epoch(a).unwrap();
    drv.unmap(a, HEAP_BASE).unwrap();
    assert_ne!(drv.mapping_epoch(a), Some(epoch), "unmap moves the epoch");
    assert_eq!(drv.release(shared), Err(DriverError::ChunkMapped(shared)));
    drv.destroy_address_space(b).unwrap();
    drv.release(shared).unwrap();
}

#[test]
fn overlapping_virtual_copies_behave_like_memmove() {
    let mut drv = Driver::new(GIB).unwrap();
    let ctx = drv.create_address_space();
    let chunk = drv.reserve(64 * 1024, PageSize::Normal4K).unwrap();
    drv.map(ctx, HEAP_BASE, chunk).unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
    drv.write_virt(ctx, HEAP_BASE + 10, &data).unwrap();
    drv.copy_virt(ctx, HEAP_BASE + 10, ctx, HEAP_BASE + 5000, 20_000)
        .unwrap();
    let mut out = vec![0u8; 20_000];
    drv.read_virt(ctx, HEAP_BASE + 5000, &mut out).unwrap();
    assert_eq!(out, data);
    drv.copy_virt(ctx, HEAP_BASE + 5000, ctx, HEAP_BASE + 1, 20_000)
        .unwrap();
    drv.read_virt(ctx, HEAP_BASE + 1, &mut out).unwrap();
    assert_eq!(out, data);
}

#[test]
fn a_driver_larger_than_the_model_is_refused() {
    assert!(matches!(
        Driver::new(u64::MAX),
        Err(DriverError::InvalidCapacity { .. })
    ));
}

#[test]
fn the_driver_can_live_in_a_shared_resource() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Driver>();
}
