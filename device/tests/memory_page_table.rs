//! Page tables: mapping, translation and unmapping with 4 KiB and 2 MiB pages.

use npusim_device::abi::HEAP_BASE;
use npusim_device::memory::{
    AddressSpace, DriverError, HUGE_PAGE_SIZE, MemFault, NORMAL_PAGE_SIZE, PageSize,
};

const MIB: u64 = 1 << 20;

#[test]
fn normal_pages_translate_page_by_page() {
    let mut s = AddressSpace::new();
    s.map(HEAP_BASE, 0x8000_0000, 64 * 1024, PageSize::Normal4K)
        .unwrap();
    let t = s.translate(HEAP_BASE + 5 * NORMAL_PAGE_SIZE + 123).unwrap();
    assert_eq!(t.pa, 0x8000_0000 + 5 * NORMAL_PAGE_SIZE + 123);
    assert_eq!(t.page_base_va, HEAP_BASE + 5 * NORMAL_PAGE_SIZE);
    assert_eq!(t.page_pa, 0x8000_0000 + 5 * NORMAL_PAGE_SIZE);
    assert_eq!(t.page_size, PageSize::Normal4K);
    assert_eq!(t.page_remaining(), NORMAL_PAGE_SIZE - 123);
}

#[test]
fn huge_pages_translate_with_a_2_mib_page_base() {
    let mut s = AddressSpace::new();
    s.map(HEAP_BASE, 0x4000_0000, 8 * MIB, PageSize::Huge2M)
        .unwrap();
    let t = s.translate(HEAP_BASE + 3 * MIB).unwrap();
    assert_eq!(t.pa, 0x4000_0000 + 3 * MIB);
    assert_eq!(t.page_base_va, HEAP_BASE + 2 * MIB);
    assert_eq!(t.page_size, PageSize::Huge2M);
    assert_eq!(t.page_remaining(), MIB);
}

#[test]
fn unmapped_pages_fault_with_their_address() {
    let mut s = AddressSpace::new();
    for page in [PageSize::Normal4K, PageSize::Huge2M] {
        s.map(HEAP_BASE, 0, 2 * page.bytes(), page).unwrap();
        s.unmap(HEAP_BASE, 2 * page.bytes()).unwrap();
        assert_eq!(
            s.translate(HEAP_BASE + page.bytes()),
            Err(MemFault::PageFault {
                va: HEAP_BASE + page.bytes()
            })
        );
        assert!(s.is_empty());
        assert_eq!(s.mapped_bytes(), 0);
    }
    assert!(s.translate(0).is_err());
    assert!(s.translate(u64::MAX).is_err());
}

#[test]
fn overlapping_maps_are_refused_for_every_page_size_mix() {
    let mut s = AddressSpace::new();
    s.map(
        HEAP_BASE + HUGE_PAGE_SIZE,
        0,
        HUGE_PAGE_SIZE,
        PageSize::Huge2M,
    )
    .unwrap();
    let overlap = |r| matches!(r, Err(DriverError::Overlap { .. }));
    // A 4 KiB page inside the huge page, a huge page over it, a range ending inside it.
    assert!(overlap(s.map(
        HEAP_BASE + HUGE_PAGE_SIZE + 4096,
        1 << 30,
        4096,
        PageSize::Normal4K
    )));
    assert!(overlap(s.map(
        HEAP_BASE + HUGE_PAGE_SIZE,
        1 << 30,
        HUGE_PAGE_SIZE,
        PageSize::Huge2M
    )));
    assert!(overlap(s.map(
        HEAP_BASE,
        1 << 30,
        HUGE_PAGE_SIZE + 4096,
        PageSize::Normal4K
    )));
    // Right next to it on both sides is fine.
    s.map(HEAP_BASE, 1 << 30, HUGE_PAGE_SIZE, PageSize::Normal4K)
        .unwrap();
    s.map(
        HEAP_BASE + 2 * HUGE_PAGE_SIZE,
        1 << 31,
        4096,
        PageSize::Normal4K,
    )
    .unwrap();
    assert_eq!(s.mapped_bytes(), 2 * HUGE_PAGE_SIZE + 4096);
}

#[test]
fn misaligned_maps_are_refused() {
    let mut s = AddressSpace::new();
    let bad = |r| matches!(r, Err(DriverError::BadAlignment { .. }));
    assert!(bad(s.map(
        HEAP_BASE + 4096,
        0,
        HUGE_PAGE_SIZE,
        PageSize::Huge2M
    )));
    assert!(bad(s.map(
        HEAP_BASE,
        4096,
        HUGE_PAGE_SIZE,
        PageSize::Huge2M
    )));
    assert!(bad(s.map(HEAP_BASE, 0, 4096, PageSize::Huge2M)));
    assert!(bad(s.map(HEAP_BASE + 1, 0, 4096, PageSize::Normal4K)));
    assert!(bad(s.unmap(HEAP_BASE + 1, 4096)));
    assert!(s.is_empty());
}

#[test]
fn absurd_ranges_are_errors_not_panics() {
    let mut s = AddressSpace::new();
    let top = !(HUGE_PAGE_SIZE - 1);
    assert!(matches!(
        s.map(top, 0, HUGE_PAGE_SIZE, PageSize::Huge2M),
        Err(DriverError::AddressOverflow { .. })
    ));
    assert!(matches!(
        s.map(HEAP_BASE, top, HUGE_PAGE_SIZE, PageSize::Huge2M),
        Err(DriverError::AddressOverflow { .. })
    ));
    assert_eq!(
        s.map(HEAP_BASE, 0, 0, PageSize::Normal4K),
        Err(DriverError::ZeroLength)
    );
    assert!(matches!(
        s.map(0, 0, 4096, PageSize::Normal4K),
        Err(DriverError::NullGuard { va: 0 })
    ));
    assert!(s.unmap(top, top).is_err());
    assert!(s.unmap(HEAP_BASE, 4096).is_err());
    assert!(s.check_mapped(u64::MAX, u64::MAX).is_err());
    assert!(s.is_empty());
}

#[test]
fn unmapping_part_of_a_normal_mapping_keeps_the_rest() {
    let mut s = AddressSpace::new();
    s.map(HEAP_BASE, 0x10_0000, 10 * 4096, PageSize::Normal4K)
        .unwrap();
    s.unmap(HEAP_BASE + 4096, 8 * 4096).unwrap();
    assert!(s.translate(HEAP_BASE).is_ok());
    assert!(s.translate(HEAP_BASE + 4096).is_err());
    assert_eq!(
        s.translate(HEAP_BASE + 9 * 4096).unwrap().pa,
        0x10_0000 + 9 * 4096
    );
    assert_eq!(s.mapped_bytes(), 2 * 4096);
}
