//! What an adversarial user cannot do any more: abort the process with a size, leak with a
//! create/destroy loop, walk one context's addresses into another's, or get a different answer
//! for the same mistake depending on what else was queued. Each test is one such guarantee; the
//! docs that define it are named beside it.

use npusim::Launch;
use npusim::codes;
use npusim::prelude::*;

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::default()).unwrap()
}

fn kernel_object(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/kernels")
            .join(name),
    )
    .unwrap()
}

fn code(r: NpuResult<impl std::fmt::Debug>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e.code(),
    }
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

// -- Sizes are checked before anything is allocated (components/src/host.rs, kernels). ------

#[test]
fn fill_with_two_to_the_33_elements_faults_instead_of_aborting() {
    let rt = rt();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(4096).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), (1u64 << 33).into(), 1.0f32.into()],
        s,
    ))
    .unwrap();
    assert_eq!(
        code(rt.streams().synchronize(s)),
        codes::RT_AICORE_EXCEPTION,
        "the count runs past the 4 KiB buffer"
    );
}

#[test]
fn fill_of_a_whole_buffer_still_writes_every_element() {
    let rt = rt();
    let n = 200_000usize;
    let x = rt.memory().malloc(4 * n as u64).unwrap();
    let s = rt.streams().create().unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[x.into(), n.into(), 2.5f32.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut out = vec![0.0f32; n];
    rt.memory().memcpy_dtoh(&mut out, x).unwrap();
    assert!(out.iter().all(|&v| v == 2.5));
}

#[test]
fn malloc_host_of_16_gib_is_a_memory_allocation_error() {
    let rt = rt();
    assert_eq!(
        code(rt.memory().malloc_host(16 << 30)),
        codes::RT_MEMORY_ALLOCATION
    );
    assert_eq!(
        code(rt.memory().malloc_host(u64::MAX)),
        codes::RT_MEMORY_ALLOCATION
    );
    // The failure left nothing behind: a normal allocation still works.
    let h = rt.memory().malloc_host(4096).unwrap();
    rt.memory().free_host(&h).unwrap();
}

#[test]
fn pinned_memory_returns_to_the_budget_at_free_host() {
    let rt = rt();
    let limit = npusim::components::host::PINNED_HOST_LIMIT;
    // Untouched pinned pages cost no resident memory, so this is cheap.
    let a = rt.memory().malloc_host(limit - (1 << 30)).unwrap();
    assert_eq!(
        code(rt.memory().malloc_host(2 << 30)),
        codes::RT_MEMORY_ALLOCATION
    );
    rt.memory().free_host(&a).unwrap();
    let b = rt.memory().malloc_host(2 << 30).unwrap();
    rt.memory().free_host(&b).unwrap();
}

// -- Nothing leaks (components/src/memory.rs, engine/src/context.rs). ------------------------

#[test]
fn loading_and_unloading_never_runs_out_of_instruction_memory() {
    let rt = rt();
    let object = kernel_object("vector_add.o");
    // The instruction-memory window holds 65,536 pages: before unload returned them, load
    // number 65,536 failed with ACL_ERROR_RT_DEVICE_OOM.
    for i in 0..66_000 {
        let b = rt
            .binaries()
            .load(&object)
            .unwrap_or_else(|e| panic!("load {i}: {e}"));
        rt.binaries().unload(b).unwrap();
    }
    let g = rt.lock_world();
    let device = g.world().resource::<npusim::components::Devices>().entities[0];
    let memory = &g
        .world()
        .get::<npusim::components::DeviceState>(device)
        .unwrap()
        .memory;
    assert_eq!(memory.code_bytes(), 0);
}

#[test]
fn destroying_a_context_releases_its_binaries() {
    let rt = rt();
    let object = kernel_object("sort.o");
    let mut binaries = Vec::new();
    for _ in 0..50 {
        let ctx = rt.contexts().create(0).unwrap();
        binaries.push(rt.binaries().load(&object).unwrap());
        rt.contexts().destroy(ctx).unwrap();
    }
    rt.contexts().set_device(0).unwrap();
    let g = rt.lock_world();
    let world = g.world();
    let device = world.resource::<npusim::components::Devices>().entities[0];
    let memory = &world
        .get::<npusim::components::DeviceState>(device)
        .unwrap()
        .memory;
    assert_eq!(memory.code_bytes(), 0, "instruction memory came back");
    drop(g);
    for b in binaries {
        assert_eq!(
            code(rt.binaries().functions(b)),
            codes::RT_INVALID_HANDLE,
            "a binary of a destroyed context is a destroyed handle"
        );
    }
}

#[test]
fn a_dropped_runtime_leaves_nothing_on_any_thread() {
    let base = npusim::context::thread_stack_len();
    for _ in 0..20 {
        let rt = rt();
        rt.contexts().set_device(0).unwrap();
        let ctx = rt.contexts().create(0).unwrap();
        rt.contexts().push(ctx).unwrap();
        assert_eq!(npusim::context::thread_stack_len(), base + 2);
    }
    assert_eq!(npusim::context::thread_stack_len(), base);

    // Another thread's entries go at its next call.
    let rt1 = rt();
    let rt2 = rt();
    let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
    let (to_main, from_worker) = std::sync::mpsc::channel::<usize>();
    let worker = {
        let (rt1, rt2) = (rt1.clone(), rt2.clone());
        std::thread::spawn(move || {
            rt1.contexts().set_device(0).unwrap();
            rt2.contexts().set_device(0).unwrap();
            drop(rt1);
            to_main.send(npusim::context::thread_stack_len()).unwrap();
            from_main.recv().unwrap();
            rt2.contexts().current_device().unwrap();
            to_main.send(npusim::context::thread_stack_len()).unwrap();
        })
    };
    assert_eq!(from_worker.recv().unwrap(), 2);
    drop(rt1);
    to_worker.send(()).unwrap();
    assert_eq!(
        from_worker.recv().unwrap(),
        1,
        "only the live runtime's entry"
    );
    worker.join().unwrap();
}

#[test]
fn churn_never_walks_a_context_into_anothers_addresses() {
    let rt = rt();
    let other = rt.contexts().create(0).unwrap();
    let theirs: Vec<(u64, u64)> = (0..4)
        .map(|i| {
            let size = 1u64 << (20 + 4 * i);
            (rt.memory().malloc(size).unwrap().0, size)
        })
        .collect();
    rt.contexts().set_device(0).unwrap();
    // 30 GiB blocks with a trim between them: each takes fresh addresses, 9 fill the slice.
    for round in 0..24 {
        let size = 30u64 << 30;
        let p = rt.memory().malloc(size).unwrap();
        for &(b, n) in &theirs {
            assert!(
                p.0 + size <= b || b + n <= p.0,
                "round {round}: [{:#x}, +{size}) overlaps the other context's [{b:#x}, +{n})",
                p.0
            );
        }
        rt.memory().free(p).unwrap();
        rt.memory().trim().unwrap();
    }
    rt.contexts().set_current(other).unwrap();
    for &(b, _) in &theirs {
        rt.memory().free(DevicePtr(b)).unwrap();
    }
}

// -- Codes and documented limits. ------------------------------------------------------------

#[test]
fn twenty_tiling_words_are_accepted_and_twenty_one_refused() {
    let rt = rt();
    let s = rt.streams().create().unwrap();
    let noop = rt.kernel("noop").unwrap();
    assert_eq!(npusim::components::task::MAX_TILING, 20);
    rt.submit(Launch::new(noop, 1, &[], s).tiling(&[7; 20]))
        .unwrap();
    assert_eq!(
        code(rt.submit(Launch::new(noop, 1, &[], s).tiling(&[7; 21]))),
        codes::RT_PARAM_INVALID
    );
    rt.streams().synchronize(s).unwrap();
}

/// The same use after free, with and without other work on the block queued at the free:
/// the launch enqueued after `free` faults both times (docs/architecture.md, Memory).
#[test]
fn a_launch_on_a_freed_pointer_faults_whatever_else_is_queued() {
    let fill = |rt: &Runtime| rt.kernel("fill_f32").unwrap();
    let n = 1usize << 16;
    let outcome = |queue_before: bool| {
        let rt = rt();
        let s = rt.streams().create().unwrap();
        let p = rt.memory().malloc(4 * n as u64).unwrap();
        if queue_before {
            // A kernel ahead on the same stream still uses the block when it is freed.
            let gemm = rt.kernel("gemm_f32").unwrap();
            let q = rt.memory().malloc(4 * 64 * 64).unwrap();
            let args: [Arg; 6] = [
                q.into(),
                q.into(),
                p.into(),
                64u64.into(),
                64u64.into(),
                64u64.into(),
            ];
            rt.submit(Launch::new(gemm, 1, &args, s)).unwrap();
        }
        rt.memory().free(p).unwrap();
        rt.submit(Launch::new(
            fill(&rt),
            1,
            &[p.into(), n.into(), 1.0f32.into()],
            s,
        ))
        .unwrap();
        rt.streams().synchronize(s).err().map(|e| e.code())
    };
    assert_eq!(outcome(false), Some(codes::RT_AICORE_EXCEPTION));
    assert_eq!(outcome(true), Some(codes::RT_AICORE_EXCEPTION));
}

#[test]
fn work_enqueued_before_a_free_still_runs_on_the_block() {
    let rt = rt();
    let s = rt.streams().create().unwrap();
    let n = 1024usize;
    let p = rt.memory().malloc(4 * n as u64).unwrap();
    let out = rt.memory().malloc(4 * n as u64).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    rt.submit(Launch::new(
        fill,
        1,
        &[p.into(), n.into(), 3.0f32.into()],
        s,
    ))
    .unwrap();
    rt.memory()
        .memcpy_dtod_async(out, p, 4 * n as u64, s)
        .unwrap();
    rt.memory().free(p).unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut host = vec![0.0f32; n];
    rt.memory().memcpy_dtoh(&mut host, out).unwrap();
    assert!(host.iter().all(|&v| v == 3.0));
}

#[test]
fn a_200_mib_bss_costs_no_resident_memory_at_load() {
    // sort.o (2.7 KB) with its .sbss grown to 200 MiB.
    let mut bytes = kernel_object("sort.o");
    let get = |b: &[u8], at: usize, n: usize| {
        let mut v = 0u64;
        for i in (0..n).rev() {
            v = v << 8 | b[at + i] as u64;
        }
        v
    };
    let shoff = get(&bytes, 0x28, 8) as usize;
    let count = get(&bytes, 0x3c, 2) as usize;
    let strtab = shoff + get(&bytes, 0x3e, 2) as usize * 64;
    let strings = get(&bytes, strtab + 0x18, 8) as usize;
    let sbss = (0..count)
        .map(|i| shoff + i * 64)
        .find(|&h| {
            let at = strings + get(&bytes, h, 4) as usize;
            bytes[at..].starts_with(b".sbss\0")
        })
        .expect("sort.o has .sbss");
    bytes[sbss + 0x20..sbss + 0x28].copy_from_slice(&(200u64 << 20).to_le_bytes());

    let rt = rt();
    let before = (rss(), rt.stats().backed_bytes[0]);
    let b = rt.binaries().load(&bytes).unwrap();
    let after = (rss(), rt.stats().backed_bytes[0]);
    assert!(
        after.1 - before.1 <= 64 << 10,
        "device pages backed at load: {} bytes",
        after.1 - before.1
    );
    assert!(
        after.0.saturating_sub(before.0) < 64 << 20,
        "resident memory grew by {} bytes",
        after.0.saturating_sub(before.0)
    );
    rt.binaries().unload(b).unwrap();
}
