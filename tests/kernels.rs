//! The built-in kernels compute what their table in `npusim::kernels` says, checked against CPU
//! references on awkward sizes (not multiples of anything, non-square matrices), and every
//! launch shows on the timeline with a positive modeled duration.

use npusim::Launch;
use npusim::prelude::*;

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

/// Deterministic inputs in `[-4, 4)` (a small LCG: no dependency, same values every run).
fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

/// Copies `data` to a fresh device buffer.
fn upload(rt: &Runtime, data: &[f32]) -> DevicePtr {
    let p = rt.memory().malloc(4 * data.len().max(1) as u64).unwrap();
    rt.memory().memcpy_htod(p, data).unwrap();
    p
}

fn download(rt: &Runtime, p: DevicePtr, n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n];
    rt.memory().memcpy_dtoh(&mut out, p).unwrap();
    out
}

/// Launches `name` on a fresh stream and waits; checks it ran and took modeled time.
fn run(rt: &Runtime, name: &str, block_dim: u32, args: &[Arg]) {
    let s = rt.streams().create().unwrap();
    rt.submit(Launch::new(rt.kernel(name).unwrap(), block_dim, args, s))
        .unwrap();
    rt.streams().synchronize(s).unwrap();
    let r = rt
        .timeline()
        .into_iter()
        .find(|r| r.stream == s.entity())
        .expect("the launch is on the timeline");
    assert_eq!(r.name, name);
    assert!(r.ok);
    assert!(r.end > r.start, "{name} took no simulated time");
    assert!(r.cores >= 1 && r.cores <= block_dim);
}

const SIZES: [usize; 5] = [1, 7, 1000, 4099, 65_537];

#[test]
fn fill_f32_sets_every_element() {
    let rt = runtime();
    for n in SIZES {
        let x = upload(&rt, &inputs(n + 1, 1));
        run(&rt, "fill_f32", 5, &[x.into(), n.into(), (-2.5f32).into()]);
        let out = download(&rt, x, n + 1);
        assert!(out[..n].iter().all(|&v| v == -2.5), "n = {n}");
        assert_eq!(
            out[n],
            inputs(n + 1, 1)[n],
            "the element past n is untouched"
        );
    }
}

#[test]
fn vector_add_f32_and_vector_mul_f32_match_the_cpu() {
    let rt = runtime();
    for n in SIZES {
        let (a, b) = (inputs(n, 2), inputs(n, 3));
        let (da, db, dc) = (upload(&rt, &a), upload(&rt, &b), upload(&rt, &vec![0.0; n]));
        run(
            &rt,
            "vector_add_f32",
            24,
            &[da.into(), db.into(), dc.into(), n.into()],
        );
        let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(download(&rt, dc, n), sum, "add, n = {n}");
        run(
            &rt,
            "vector_mul_f32",
            3,
            &[da.into(), db.into(), dc.into(), n.into()],
        );
        let prod: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        assert_eq!(download(&rt, dc, n), prod, "mul, n = {n}");
    }
}

#[test]
fn vector_add_f32_may_write_in_place() {
    let rt = runtime();
    let n = 333;
    let a = inputs(n, 4);
    let da = upload(&rt, &a);
    run(
        &rt,
        "vector_add_f32",
        2,
        &[da.into(), da.into(), da.into(), n.into()],
    );
    let twice: Vec<f32> = a.iter().map(|x| x + x).collect();
    assert_eq!(download(&rt, da, n), twice);
}

#[test]
fn axpy_f32_matches_the_cpu() {
    let rt = runtime();
    for n in SIZES {
        let (x, y) = (inputs(n, 5), inputs(n, 6));
        let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
        let alpha = 0.75f32;
        run(
            &rt,
            "axpy_f32",
            7,
            &[n.into(), alpha.into(), dx.into(), dy.into()],
        );
        let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| y + alpha * x).collect();
        assert_eq!(download(&rt, dy, n), want, "n = {n}");
        assert_eq!(download(&rt, dx, n), x, "x is only read");
    }
}

#[test]
fn relu_f32_matches_the_cpu() {
    let rt = runtime();
    for n in SIZES {
        let x = inputs(n, 7);
        let (dx, dy) = (upload(&rt, &x), upload(&rt, &vec![9.0; n]));
        run(&rt, "relu_f32", 4, &[dx.into(), dy.into(), n.into()]);
        let want: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(download(&rt, dy, n), want, "n = {n}");
    }
}

/// `C = A·B` in f64, row-major `A: m×k`, `B: k×n`.
fn gemm_reference(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
        }
    }
    c
}

#[test]
fn gemm_f32_matches_the_cpu_on_square_and_non_square_shapes() {
    let rt = runtime();
    for (m, n, k) in [
        (1, 1, 1),
        (4, 4, 4),
        (3, 5, 7),
        (7, 5, 3),
        (17, 1, 9),
        (1, 33, 2),
        (64, 48, 80),
        (128, 3, 1),
    ] {
        let (a, b) = (inputs(m * k, 8), inputs(k * n, 9));
        let (da, db) = (upload(&rt, &a), upload(&rt, &b));
        // C starts as garbage: gemm overwrites, it does not accumulate.
        let dc = upload(&rt, &inputs(m * n, 10));
        run(
            &rt,
            "gemm_f32",
            8,
            &[
                da.into(),
                db.into(),
                dc.into(),
                m.into(),
                n.into(),
                k.into(),
            ],
        );
        let got = download(&rt, dc, m * n);
        let want = gemm_reference(&a, &b, m, n, k);
        for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
            // f32 accumulation over k products of magnitude <= 16.
            let tol = 1e-6 * 16.0 * k as f64 + 1e-6 * w.abs();
            assert!(
                (*g as f64 - w).abs() <= tol,
                "{m}x{n}x{k}: C[{}][{}] = {g}, want {w}",
                idx / n,
                idx % n
            );
        }
    }
}

#[test]
fn softmax_rows_f32_matches_the_cpu_to_one_part_in_a_million() {
    let rt = runtime();
    for (rows, cols) in [(1, 1), (1, 10), (3, 7), (16, 128), (5, 1000)] {
        let x = inputs(rows * cols, 11);
        let (dx, dy) = (upload(&rt, &x), upload(&rt, &vec![0.0; rows * cols]));
        run(
            &rt,
            "softmax_rows_f32",
            4,
            &[dx.into(), dy.into(), rows.into(), cols.into()],
        );
        let got = download(&rt, dy, rows * cols);
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let exps: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
            let sum: f64 = exps.iter().sum();
            let mut total = 0.0f64;
            for c in 0..cols {
                let want = exps[c] / sum;
                let g = got[r * cols + c] as f64;
                total += g;
                assert!(
                    (g - want).abs() <= 1e-6 * want,
                    "{rows}x{cols}: y[{r}][{c}] = {g}, want {want}"
                );
            }
            assert!((total - 1.0).abs() < 1e-5, "row {r} sums to {total}");
        }
    }
}

#[test]
fn noop_runs_and_changes_nothing() {
    let rt = runtime();
    let x = upload(&rt, &[1.0, 2.0, 3.0]);
    run(&rt, "noop", 1, &[]);
    assert_eq!(download(&rt, x, 3), [1.0, 2.0, 3.0]);
}

#[test]
fn every_kernel_in_the_table_is_registered() {
    let rt = runtime();
    let names = rt.kernels().names();
    for name in [
        "noop",
        "fill_f32",
        "vector_add_f32",
        "vector_mul_f32",
        "axpy_f32",
        "relu_f32",
        "gemm_f32",
        "softmax_rows_f32",
        "fault_bad_address",
        "fault_div_zero",
        "fault_spin",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} is missing");
        rt.kernel(name).unwrap();
    }
}

#[test]
fn a_native_kernel_registered_by_the_user_runs_like_a_builtin() {
    let rt = runtime();
    let k = rt.kernels().register(NativeKernel::new(
        "scale_i32",
        |ctx| {
            let (p, n, by) = (ctx.ptr(0)?, ctx.usize(1)?, ctx.u64(2)? as i32);
            let v: Vec<i32> = ctx.load::<i32>(p, n)?.iter().map(|x| x * by).collect();
            ctx.store(p, &v)
        },
        |args, _| KernelCost::vector(args[1] as f64, 8.0 * args[1] as f64),
    ));
    assert_eq!(rt.kernel("scale_i32").unwrap(), k);
    let p = rt.memory().malloc(400).unwrap();
    let data: Vec<i32> = (0..100).collect();
    rt.memory().memcpy_htod(p, &data).unwrap();
    let s = rt.streams().create().unwrap();
    rt.submit(Launch::new(
        k,
        2,
        &[p.into(), 100usize.into(), 3u64.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut back = vec![0i32; 100];
    rt.memory().memcpy_dtoh(&mut back, p).unwrap();
    assert_eq!(back, data.iter().map(|x| x * 3).collect::<Vec<_>>());
}
