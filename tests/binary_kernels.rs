//! Kernel binaries compiled from C (`examples/kernels/*.o`, rebuilt by
//! `scripts/build-kernels.sh`) load, link and run on the simulated AI core through the normal
//! launch API, and compute what their CPU references compute.

use npusim::Launch;
use npusim::prelude::*;

fn kernel_object(name: &str) -> Vec<u8> {
    let path = format!("{}/examples/kernels/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::with_device(DeviceConfig::small())).unwrap()
}

fn upload<T: bytemuck::Pod>(rt: &Runtime, data: &[T]) -> DevicePtr {
    let p = rt
        .memory()
        .malloc((std::mem::size_of_val(data) as u64).max(1))
        .unwrap();
    rt.memory().memcpy_htod(p, data).unwrap();
    p
}

fn download<T: bytemuck::Pod + Default + Clone>(rt: &Runtime, p: DevicePtr, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    rt.memory().memcpy_dtoh(&mut out, p).unwrap();
    out
}

#[test]
fn vector_add_binary_matches_the_cpu_on_several_block_dims() {
    let rt = rt();
    let bin = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let vadd = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let s = rt.streams().create().unwrap();
    for (n, blocks) in [(1usize, 1u32), (1000, 3), (4099, 8)] {
        let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
        let (da, db, dc) = (
            upload(&rt, &a),
            upload(&rt, &b),
            rt.memory().malloc(4 * n as u64).unwrap(),
        );
        rt.submit(Launch::new(
            vadd,
            blocks,
            &[da.into(), db.into(), dc.into(), n.into()],
            s,
        ))
        .unwrap();
        rt.streams().synchronize(s).unwrap();
        let c: Vec<f32> = download(&rt, dc, n);
        for i in 0..n {
            assert_eq!(c[i], a[i] + b[i], "n={n} i={i}");
        }
    }
    let rec = rt
        .timeline()
        .into_iter()
        .rfind(|r| r.name == "vadd_f32")
        .unwrap();
    assert!(
        rec.end > rec.start,
        "a binary kernel takes the time its cycles take"
    );
}

#[test]
fn saxpy_gets_its_float_argument_in_a_float_register() {
    let rt = rt();
    let bin = rt.binaries().load(&kernel_object("saxpy.o")).unwrap();
    let saxpy = rt.binaries().get_function(bin, "saxpy").unwrap();
    let s = rt.streams().create().unwrap();
    let n = 777usize;
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| 1.0 + i as f32).collect();
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    rt.submit(Launch::new(
        saxpy,
        4,
        &[n.into(), 2.5f32.into(), dx.into(), dy.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let out: Vec<f32> = download(&rt, dy, n);
    for i in 0..n {
        assert!((out[i] - (2.5 * x[i] + y[i])).abs() <= 1e-5 * out[i].abs().max(1.0));
    }
}

#[test]
fn reduction_in_two_launches_matches_the_cpu() {
    let rt = rt();
    let bin = rt.binaries().load(&kernel_object("reduce.o")).unwrap();
    let partial_k = rt.binaries().get_function(bin, "reduce_sum_f32").unwrap();
    let final_k = rt.binaries().get_function(bin, "reduce_final_f32").unwrap();
    let s = rt.streams().create().unwrap();
    let n = 10_000usize;
    let x: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 / 8.0).collect();
    let dx = upload(&rt, &x);
    let blocks = 8u32;
    let partial = rt.memory().malloc(4 * blocks as u64).unwrap();
    let out = rt.memory().malloc(4).unwrap();
    rt.submit(Launch::new(
        partial_k,
        blocks,
        &[dx.into(), partial.into(), n.into()],
        s,
    ))
    .unwrap();
    rt.submit(Launch::new(
        final_k,
        1,
        &[partial.into(), out.into(), (blocks as u64).into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let got: Vec<f32> = download(&rt, out, 1);
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    assert!(
        (got[0] as f64 - want).abs() / want < 1e-5,
        "{} vs {want}",
        got[0]
    );
}

#[test]
fn integer_sort_uses_its_rodata_table_in_both_code_models() {
    for object in ["sort.o", "sort_medlow.o"] {
        let rt = rt();
        let bin = rt.binaries().load(&kernel_object(object)).unwrap();
        let sort = rt.binaries().get_function(bin, "sort_i32").unwrap();
        let s = rt.streams().create().unwrap();
        let mut v: Vec<i32> = (0..1000).map(|i| ((i * 7919) % 2003) - 1000).collect();
        let dv = upload(&rt, &v);
        rt.submit(Launch::new(sort, 1, &[dv.into(), v.len().into()], s))
            .unwrap();
        rt.streams().synchronize(s).unwrap();
        v.sort();
        assert_eq!(download::<i32>(&rt, dv, v.len()), v, "{object}");
    }
}

#[test]
fn kernel_traps_fail_the_task_with_their_codes() {
    let cases = [
        ("null_deref", vec![], 507015),
        ("div_zero", vec![Arg::I64(0)], 507016),
        ("spin_forever", vec![], 507014),
        ("call_abort", vec![Arg::I64(7)], 507016),
    ];
    for (name, args, code) in cases {
        let rt = rt();
        // A short simulated timeout ends spin_forever quickly.
        rt.limits()
            .set_kernel_timeout(SimTime::from_ms(20))
            .unwrap();
        let bin = rt.binaries().load(&kernel_object("faults.o")).unwrap();
        let k = rt.binaries().get_function(bin, name).unwrap();
        let s = rt.streams().create().unwrap();
        rt.submit(Launch::new(k, 1, &args, s)).unwrap();
        let err = rt.streams().synchronize(s).unwrap_err();
        assert_eq!(err.code(), code, "{name}: {err}");
    }
}

#[test]
fn a_kernel_given_another_contexts_pointer_faults_instead_of_reading_it() {
    let rt = rt();
    let secret = upload(&rt, &[7.0f32; 64]);
    let _tenant = rt.contexts().create(0).unwrap();
    let bin = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let vadd = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let s = rt.streams().create().unwrap();
    let out = rt.memory().malloc(256).unwrap();
    rt.submit(Launch::new(
        vadd,
        1,
        &[secret.into(), secret.into(), out.into(), 64usize.into()],
        s,
    ))
    .unwrap();
    assert_eq!(rt.streams().synchronize(s).unwrap_err().code(), 507015);
}

#[test]
fn malformed_binaries_are_parse_errors_and_unloaded_kernels_cannot_launch() {
    let rt = rt();
    let good = kernel_object("vector_add.o");
    for bad in [&b""[..], &b"\x7fELF"[..], &good[..good.len() / 2]] {
        assert_eq!(rt.binaries().load(bad).unwrap_err().code(), 100006);
    }
    let mut wrong_machine = good.clone();
    wrong_machine[18] = 0x3e; // EM_X86_64
    assert_eq!(
        rt.binaries().load(&wrong_machine).unwrap_err().code(),
        100006
    );
    assert_eq!(
        rt.binaries()
            .load_file("/nonexistent/k.o")
            .unwrap_err()
            .code(),
        100003
    );
    let bin = rt.binaries().load(&good).unwrap();
    assert_eq!(
        rt.binaries().get_function(bin, "nope").unwrap_err().code(),
        107000
    );
    let k = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    rt.binaries().unload(bin).unwrap();
    let s = rt.streams().create().unwrap();
    assert_eq!(
        rt.submit(Launch::new(k, 1, &[], s)).unwrap_err().code(),
        107017
    );
    assert_eq!(
        rt.binaries()
            .get_function(bin, "vadd_f32")
            .unwrap_err()
            .code(),
        107017
    );
}

#[test]
fn a_function_looked_up_again_is_the_same_kernel_and_the_registry_does_not_grow() {
    let rt = rt();
    let bin = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let first = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let registered = |rt: &Runtime| {
        rt.lock_world()
            .world()
            .resource::<npusim::components::KernelRegistry>()
            .len()
    };
    let before = registered(&rt);
    for _ in 0..10_000 {
        assert_eq!(rt.binaries().get_function(bin, "vadd_f32").unwrap(), first);
    }
    assert_eq!(registered(&rt), before);
    rt.binaries().unload(bin).unwrap();
    assert_eq!(registered(&rt), before - 1, "unload removes its functions");
}

#[test]
fn an_old_kernel_handle_never_runs_the_kernel_that_reuses_its_slot() {
    let rt = rt();
    let a = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let old = rt.binaries().get_function(a, "vadd_f32").unwrap();
    rt.binaries().unload(a).unwrap();
    let b = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let new = rt.binaries().get_function(b, "vadd_f32").unwrap();
    assert_eq!(new.index(), old.index(), "the slot is reused");
    let s = rt.streams().create().unwrap();
    let n = 64usize;
    let (x, y, z) = (
        upload(&rt, &vec![1.0f32; n]),
        upload(&rt, &vec![2.0f32; n]),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let args = [x.into(), y.into(), z.into(), n.into()];
    assert_eq!(
        rt.submit(Launch::new(old, 1, &args, s)).unwrap_err().code(),
        107017
    );
    rt.submit(Launch::new(new, 1, &args, s)).unwrap();
    rt.streams().synchronize(s).unwrap();
    assert!(download::<f32>(&rt, z, n).iter().all(|&v| v == 3.0));
}

#[test]
fn another_runtimes_kernel_handle_is_refused() {
    let (a, b) = (rt(), rt());
    let noop_a = a.kernel("noop").unwrap();
    let s = b.streams().create().unwrap();
    let err = b.submit(Launch::new(noop_a, 1, &[], s)).unwrap_err();
    assert_eq!(err.code(), 107017, "{err}");
    assert_eq!(b.streams().synchronize(s), Ok(()));
}

#[test]
fn a_binary_kernels_access_set_is_the_bytes_its_blocks_touched() {
    use bevy_ecs::prelude::*;
    use npusim::components::access::{Access, AccessMode};
    use npusim::components::resources::Finished;
    use npusim::components::{Task, TaskKind};
    #[derive(Resource, Default)]
    struct Seen(Vec<Vec<Access>>);
    fn record(finished: Res<Finished>, tasks: Query<&Task>, mut seen: ResMut<Seen>) {
        for &e in &finished.tasks {
            if let Ok(t) = tasks.get(e)
                && t.kind() == TaskKind::Kernel
            {
                seen.0.push(t.access.ranges().to_vec());
            }
        }
    }
    let rt = rt();
    {
        let mut g = rt.lock_world();
        g.world_mut().init_resource::<Seen>();
        g.schedule_mut()
            .add_systems(record.in_set(NpuSet::DeferredFree));
    }
    let bin = rt.binaries().load(&kernel_object("vector_add.o")).unwrap();
    let vadd = rt.binaries().get_function(bin, "vadd_f32").unwrap();
    let s = rt.streams().create().unwrap();
    let n = 1000usize;
    // Buffers larger than what the kernel touches: the set names the touched bytes only.
    let (x, y, z) = (
        rt.memory().malloc(8192).unwrap(),
        rt.memory().malloc(8192).unwrap(),
        rt.memory().malloc(8192).unwrap(),
    );
    rt.submit(Launch::new(
        vadd,
        3,
        &[x.into(), y.into(), z.into(), n.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let seen = rt.lock_world().world().resource::<Seen>().0.clone();
    let set = seen.last().expect("the launch finished");
    let bytes = 4 * n as u64;
    for (ptr, mode) in [
        (x, AccessMode::Read),
        (y, AccessMode::Read),
        (z, AccessMode::Write),
    ] {
        assert!(
            set.iter()
                .any(|a| a.addr == ptr.addr() && a.bytes == bytes && a.mode == mode),
            "{ptr:?} {mode:?} in {set:?}"
        );
    }
    let heap = set
        .iter()
        .filter(|a| a.addr >= x.addr().min(y.addr()).min(z.addr()));
    assert_eq!(heap.count(), 3, "nothing else of the buffers: {set:?}");
}
