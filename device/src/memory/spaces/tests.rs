use super::*;

/// Contexts and streams by number (the runtime keys them by entity).
fn ctx(i: u32) -> u32 {
    i
}

fn mem() -> DeviceMemory<u32> {
    let mut m = DeviceMemory::new(1 << 30).unwrap();
    m.create_space(ctx(1)).unwrap();
    m.create_space(ctx(2)).unwrap();
    m
}

#[test]
fn a_block_is_found_at_its_base_only_while_it_is_live_and_not_being_freed() {
    let mut m = mem();
    let a = m.alloc(4096, ctx(1)).unwrap();
    assert_eq!(m.block_at(a, ctx(1)).map(|b| b.size), Some(4096));
    assert!(
        m.block_at(a + 64, ctx(1)).is_none(),
        "inside, not at its base"
    );
    assert!(m.block_at(a, ctx(2)).is_none(), "another context's");
    m.free(a, ctx(1)).unwrap();
    assert!(m.block_at(a, ctx(1)).is_none());
}

#[test]
fn never_written_memory_reads_zero_and_costs_nothing() {
    let mut m = DeviceMemory::new(64 << 30).unwrap();
    m.create_space(ctx(1)).unwrap();
    let p = m.alloc(1 << 30, ctx(1)).unwrap();
    let mut buf = [7u8; 16];
    m.read(p + 12345, &mut buf, ctx(1)).unwrap();
    assert_eq!(buf, [0; 16]);
    assert_eq!(m.backed_bytes(), 0);
}

#[test]
fn other_contexts_memory_is_unmapped() {
    let mut m = mem();
    let a = m.alloc(256, ctx(1)).unwrap();
    m.write(a, &[1, 2, 3], ctx(1)).unwrap();
    let mut buf = [0u8; 3];
    assert_eq!(
        m.read(a, &mut buf, ctx(2)),
        Err(AccessFault::Unmapped { addr: a })
    );
    assert!(
        m.read_virt(ctx(2), a, &mut buf).is_err(),
        "not even mapped in the other space"
    );
    assert!(matches!(
        m.read(a + 250, &mut [0u8; 8], ctx(1)),
        Err(AccessFault::PastEnd { .. })
    ));
    assert!(m.free(a, ctx(2)).is_err());
    m.free(a, ctx(1)).unwrap();
    assert!(matches!(
        m.free(a, ctx(1)),
        Err(MemoryError::BadFree { .. })
    ));
}

#[test]
fn a_pending_free_waits_for_every_use() {
    let mut m = mem();
    let a = m.alloc(4096, ctx(1)).unwrap();
    let (s1, s2) = (ctx(10), ctx(11));
    m.note_use(ctx(1), a + 100, (s1, 3));
    m.note_use(ctx(1), a, (s2, 7));
    m.begin_free(a, ctx(1), &[]).unwrap();
    assert!(
        m.block_containing(a, ctx(1)).is_none(),
        "new work cannot name a freed block"
    );
    assert!(m.check(a, 4, ctx(1)).is_ok(), "queued work still may");
    assert_eq!(m.release_completed(|(s, seq)| s == s1 && seq <= 3), 0);
    assert_eq!(m.live_blocks(), 1);
    assert_eq!(m.release_completed(|_| true), 1);
    assert_eq!(m.live_blocks(), 0);
}

#[test]
fn a_use_of_a_range_across_adjacent_blocks_holds_each_of_their_frees() {
    let mut m = mem();
    let a = m.alloc(4096, ctx(1)).unwrap();
    let b = m.alloc(4096, ctx(1)).unwrap();
    let c = m.alloc(4096, ctx(1)).unwrap();
    assert_eq!((b - a, c - b), (4096, 4096), "adjacent");
    let s = ctx(10);
    // From inside `a` to inside `b`: `a` and `b` are used, `c` is not.
    m.note_use_range(ctx(1), a + 8, 4096 + 8, (s, 5));
    for p in [a, b, c] {
        m.begin_free(p, ctx(1), &[]).unwrap();
    }
    assert_eq!(m.pending_positions(a, ctx(1)).as_slice(), &[(s, 5)]);
    assert_eq!(m.pending_positions(b, ctx(1)).as_slice(), &[(s, 5)]);
    assert!(m.pending_positions(c, ctx(1)).is_empty());
    // Outside the heap, nothing is noted.
    m.note_use_range(ctx(1), 0x10, 1 << 40, (s, 6));
    assert_eq!(m.release_completed(|(_, seq)| seq < 5), 1, "only `c`");
    assert_eq!(m.release_completed(|(_, seq)| seq <= 5), 2);
}

#[test]
fn instruction_memory_and_module_data_come_back_for_reuse() {
    let mut m = mem();
    for _ in 0..70_000 {
        let code = m.alloc_code(4096).unwrap();
        let data = m.map_module_data(ctx(1), 4096).unwrap();
        m.free_code(code);
        m.unmap_module_data(ctx(1), data);
    }
    assert_eq!(m.code_bytes(), 0);
    let a = m.alloc_code(10_000).unwrap();
    let b = m.alloc_code(4096).unwrap();
    assert_eq!(b, a + 12_288, "first fit after the rounded first range");
    m.free_code(a);
    assert_eq!(m.alloc_code(8192).unwrap(), a, "a freed range is reused");
    assert!(!m.claim_code(b, 4096), "code in use is not taken twice");
    let before = m.code_bytes();
    assert!(
        m.claim_code(b + (1 << 20), 4096),
        "a free fixed range is taken"
    );
    assert_eq!(m.code_bytes(), before + 4096);
}

#[test]
fn destroying_a_space_returns_every_page() {
    let mut m = mem();
    let a = m.alloc(3 << 20, ctx(1)).unwrap();
    m.write(a, &[9; 8192], ctx(1)).unwrap();
    assert!(m.backed_bytes() > 0);
    m.destroy_space(ctx(1));
    assert_eq!(m.driver().stats().reserved_bytes, 0);
    assert_eq!(m.backed_bytes(), 0);
}
