//! Physical memory: sparse backing, zero reads, bounds.

use npusim_device::memory::{FRAME_SIZE, MemFault, PhysMem};

const GIB: u64 = 1 << 30;

#[test]
fn a_64_gib_device_costs_nothing_until_written() {
    let mut hbm = PhysMem::new(64 * GIB).unwrap();
    assert_eq!(hbm.capacity(), 64 * GIB);
    assert_eq!(hbm.backed_bytes(), 0);
    // Touch the first and the last byte and one in the middle: three frames, nothing else.
    hbm.write(0, &[1]).unwrap();
    hbm.write(32 * GIB + 5, &[2]).unwrap();
    hbm.write(64 * GIB - 1, &[3]).unwrap();
    assert_eq!(hbm.backed_bytes(), 3 * FRAME_SIZE);
}

#[test]
fn never_written_memory_reads_as_zeros() {
    let hbm = PhysMem::new(64 * GIB).unwrap();
    let mut buf = vec![0xAAu8; 3 * FRAME_SIZE as usize + 17];
    hbm.read(17 * GIB - 9, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    assert_eq!(hbm.read_pod::<u64>(12345).unwrap(), 0);
}

#[test]
fn pod_values_round_trip_unaligned_across_a_frame_boundary() {
    let mut hbm = PhysMem::new(GIB).unwrap();
    let pa = FRAME_SIZE - 3;
    hbm.write_pod(pa, &0x0102_0304_0506_0708u64).unwrap();
    assert_eq!(hbm.read_pod::<u64>(pa).unwrap(), 0x0102_0304_0506_0708);
    assert_eq!(hbm.backed_bytes(), 2 * FRAME_SIZE);
}

#[test]
fn fill_and_copy_work_page_by_page() {
    let mut hbm = PhysMem::new(GIB).unwrap();
    hbm.fill(100, 10_000, 0x5A).unwrap();
    hbm.copy(100, 1 << 20, 10_000).unwrap();
    let mut out = vec![0u8; 10_002];
    hbm.read((1 << 20) - 1, &mut out).unwrap();
    assert_eq!(out[0], 0);
    assert!(out[1..10_001].iter().all(|&b| b == 0x5A));
    assert_eq!(out[10_001], 0);
}

#[test]
fn accesses_past_the_end_fault_without_panicking() {
    let mut hbm = PhysMem::new(GIB).unwrap();
    let fault = hbm.write(GIB - 2, &[0; 4]).unwrap_err();
    assert!(matches!(fault, MemFault::OutOfRange { pa, len: 4, .. } if pa == GIB - 2));
    assert!(hbm.read(u64::MAX, &mut [0; 2]).is_err());
    assert!(hbm.fill(u64::MAX - 1, u64::MAX, 1).is_err());
    assert!(hbm.copy(0, 1, u64::MAX).is_err());
    assert!(hbm.discard(1, u64::MAX).is_err());
    assert!(hbm.frame_mut(GIB).is_err());
    assert!(hbm.frame(u64::MAX).is_none());
    assert_eq!(hbm.backed_bytes(), 0, "refused accesses back nothing");
}

#[test]
fn absurd_capacity_is_refused() {
    assert!(PhysMem::new(u64::MAX).is_err());
    // Capacity is rounded down to whole frames; zero is a valid (empty) device.
    assert_eq!(PhysMem::new(FRAME_SIZE + 1).unwrap().capacity(), FRAME_SIZE);
    assert!(PhysMem::new(0).unwrap().read(0, &mut [0]).is_err());
}
