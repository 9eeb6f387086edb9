//! Tiling at dispatch, through the public API: for shapes from one element to well past one
//! core's unified buffer, the tiling chosen stays within the preset's cores and buffers, the
//! kernels still compute the CPU's results, dispatch uses the tiled block dim, and the tiling
//! changes when the shape does.

use npusim::LaunchOp;
use npusim::prelude::*;
use npusim::{TilingRecord, components::shape::tiling_word};

fn upload<T: bytemuck::Pod>(rt: &Runtime, data: &[T]) -> DevicePtr {
    let p = rt
        .memory()
        .malloc((std::mem::size_of_val(data) as u64).max(4))
        .unwrap();
    if !data.is_empty() {
        rt.memory().memcpy_htod(p, data).unwrap();
    }
    p
}

fn download<T: bytemuck::Pod>(rt: &Runtime, p: DevicePtr, n: usize) -> Vec<T> {
    let mut v = vec![T::zeroed(); n];
    if n > 0 {
        rt.memory().memcpy_dtoh(&mut v, p).unwrap();
    }
    v
}

fn presets() -> Vec<DeviceConfig> {
    let tiny = DeviceConfig {
        name: "tiny".into(),
        ai_cores: 2,
        ub_bytes: 8 << 10,
        l1_bytes: 32 << 10,
        l0a_bytes: 8 << 10,
        l0b_bytes: 8 << 10,
        l0c_bytes: 16 << 10,
        ..DeviceConfig::small()
    };
    vec![DeviceConfig::ascend_910b(), DeviceConfig::small(), tiny]
}

fn runtime(cfg: &DeviceConfig) -> Runtime {
    let rt = Runtime::new(RuntimeConfig::with_device(cfg.clone())).unwrap();
    rt.ops().set_tiling_log_enabled(true);
    rt
}

fn check_fits(r: &TilingRecord, cfg: &DeviceConfig) {
    let t = &r.tiling;
    assert!(
        (1..=cfg.ai_cores).contains(&t.block_dim),
        "{}: block dim {} on {} cores",
        r.op,
        t.block_dim,
        cfg.ai_cores
    );
    assert!(t.ub_bytes <= cfg.ub_bytes as u64, "{}: {t:?}", r.op);
    assert!(t.l1_bytes <= cfg.l1_bytes as u64, "{}: {t:?}", r.op);
}

/// Elements of one core's unified buffer for an f32-in, f32-out pass.
fn one_core_buffer(cfg: &DeviceConfig) -> u64 {
    cfg.ub_bytes as u64 / 8
}

#[test]
fn elementwise_tiling_fits_every_preset_from_one_element_to_past_one_core() {
    for cfg in presets() {
        let rt = runtime(&cfg);
        let s = rt.streams().create().unwrap();
        let sig = rt.ops().get("sigmoid_f32").unwrap();
        let ub = one_core_buffer(&cfg);
        let sizes = [
            1,
            2,
            7,
            8,
            1000,
            ub - 1,
            ub,
            ub + 1,
            ub * cfg.ai_cores as u64 * 3 + 5,
        ];
        for &n in &sizes {
            let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32 / 10.0 - 4.0).collect();
            let (px, py) = (upload(&rt, &x), rt.memory().malloc(4 * n).unwrap());
            let h = rt.ops().create_shape().unwrap();
            // The shape arrives on the device, in stream order, as a producer's would.
            rt.ops().set_shape_async(h, &[n as i64], s).unwrap();
            rt.submit(LaunchOp::new(
                sig,
                &[TensorArg::dynamic(px, h)],
                &[TensorArg::output(py)],
                &[],
                s,
            ))
            .unwrap();
            rt.streams().synchronize(s).unwrap();
            let y = download::<f32>(&rt, py, n as usize);
            let want: Vec<f32> = x.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
            assert_eq!(y, want, "{} n={n}", cfg.name);
            let log = rt.ops().take_tiling_log();
            let r = log.last().unwrap();
            check_fits(r, &cfg);
            assert_eq!(r.inputs[0].dims(), &[n]);
            // per-core range × cores covers every element; tiles cover the range.
            let w = r.tiling.words();
            let per_core = w[2] as u64 | (w[3] as u64) << 32;
            let tile = w[4] as u64;
            assert!(per_core * r.tiling.block_dim as u64 >= n);
            assert!(tile >= 1 && tile <= per_core);
            if n > ub {
                assert!(
                    r.tiling.block_dim > 1 || tile < n,
                    "{} n={n}: past one core's buffer, the work is split",
                    cfg.name
                );
            }
        }
    }
}

#[test]
fn every_builtin_op_tiles_within_the_preset() {
    for cfg in presets() {
        let rt = runtime(&cfg);
        let s = rt.streams().create().unwrap();
        let ub = one_core_buffer(&cfg) as usize;
        for n in [1usize, 33, ub + 1, 4 * ub] {
            // nonzero → gather → box ops → nms on n boxes.
            let x: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
            let boxes: Vec<f32> = (0..n)
                .flat_map(|i| {
                    let o = (i % 50) as f32 * 0.02;
                    [o, o, o + 0.1, o + 0.05 + (i % 7) as f32 * 0.01]
                })
                .collect();
            let scores: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 / 100.0).collect();
            let (px, pb, ps) = (upload(&rt, &x), upload(&rt, &boxes), upload(&rt, &scores));
            let alloc = |b: usize| rt.memory().malloc(b.max(4) as u64).unwrap();
            let (idx, vals, area, keep) = (alloc(4 * n), alloc(4 * n), alloc(4 * n), alloc(4 * n));
            let (hc, hk) = (
                rt.ops().create_shape().unwrap(),
                rt.ops().create_shape().unwrap(),
            );
            let op = |name: &str| rt.ops().get(name).unwrap();
            let nn = n as i64;
            rt.submit(LaunchOp::new(
                op("nonzero_f32"),
                &[TensorArg::new(px, &[nn])],
                &[TensorArg::dynamic(idx, hc)],
                &[],
                s,
            ))
            .unwrap();
            rt.submit(LaunchOp::new(
                op("gather_rows"),
                &[TensorArg::new(px, &[nn]), TensorArg::dynamic(idx, hc)],
                &[TensorArg::output(vals)],
                &[],
                s,
            ))
            .unwrap();
            rt.submit(LaunchOp::new(
                op("box_area_f32"),
                &[TensorArg::new(pb, &[nn, 4])],
                &[TensorArg::output(area)],
                &[],
                s,
            ))
            .unwrap();
            rt.submit(LaunchOp::new(
                op("nms_f32"),
                &[TensorArg::new(pb, &[nn, 4]), TensorArg::new(ps, &[nn])],
                &[TensorArg::dynamic(keep, hk)],
                &[0.5f32.into(), 0.05f32.into(), (n as u64).into()],
                s,
            ))
            .unwrap();
            rt.submit(LaunchOp::new(
                op("softmax_f32"),
                &[TensorArg::new(ps, &[1, nn])],
                &[TensorArg::output(vals)],
                &[],
                s,
            ))
            .unwrap();
            rt.streams().synchronize(s).unwrap();
            let want: Vec<i32> = (0..n as i32).filter(|i| i % 3 != 0).collect();
            assert_eq!(
                rt.ops().read_shape(hc).unwrap().dims(),
                &[want.len() as u64]
            );
            assert_eq!(download::<i32>(&rt, idx, want.len()), want);
            let areas = download::<f32>(&rt, area, n);
            for (i, a) in areas.iter().enumerate() {
                let b = &boxes[i * 4..i * 4 + 4];
                assert_eq!(*a, (b[2] - b[0]).abs() * (b[3] - b[1]).abs());
            }
            let log = rt.ops().take_tiling_log();
            assert_eq!(log.len(), 5);
            for r in &log {
                check_fits(r, &cfg);
            }
        }
    }
}

#[test]
fn tiling_changes_when_the_shape_does() {
    let cfg = DeviceConfig::default();
    let rt = runtime(&cfg);
    let s = rt.streams().create().unwrap();
    let sig = rt.ops().get("sigmoid_f32").unwrap();
    let max = 3usize << 20;
    let (px, py) = (
        rt.memory().malloc(4 * max as u64).unwrap(),
        rt.memory().malloc(4 * max as u64).unwrap(),
    );
    rt.memory().memset(px, 0, 4 * max as u64).unwrap();
    let h = rt.ops().create_shape().unwrap();
    let sizes = [10i64, 5_000, 100_000, max as i64];
    rt.take_timeline();
    // One handle, four shapes in stream order, all queued before anything runs.
    for &n in &sizes {
        rt.ops().set_shape_async(h, &[n], s).unwrap();
        rt.submit(LaunchOp::new(
            sig,
            &[TensorArg::dynamic(px, h)],
            &[TensorArg::output(py)],
            &[],
            s,
        ))
        .unwrap();
    }
    rt.streams().synchronize(s).unwrap();
    let log = rt.ops().take_tiling_log();
    assert_eq!(log.len(), sizes.len());
    let chosen: Vec<_> = log
        .iter()
        .map(|r| (r.tiling.block_dim, r.tiling.key, r.tiling.words().to_vec()))
        .collect();
    for (r, &n) in log.iter().zip(&sizes) {
        assert_eq!(r.inputs[0].dims(), &[n as u64]);
    }
    for w in chosen.windows(2) {
        assert_ne!(w[0], w[1], "a new shape, a new tiling");
    }
    assert_eq!(chosen[0].0, 1, "ten elements stay on one core");
    assert_eq!(chosen[3].0, cfg.ai_cores, "three million use every core");
    assert_eq!(chosen[3].1, 2, "and loop over tiles");
    // Dispatch used the tiled block dim and priced the actual shape.
    let kernels: Vec<_> = rt
        .timeline()
        .into_iter()
        .filter(|r| r.name == "sigmoid_f32")
        .collect();
    assert_eq!(kernels.len(), sizes.len());
    for (k, c) in kernels.iter().zip(&chosen) {
        assert_eq!(k.cores, c.0);
    }
    let durations: Vec<_> = kernels.iter().map(|k| (k.end - k.start).as_ns()).collect();
    assert!(durations.windows(2).all(|w| w[0] < w[1]), "{durations:?}");
}

#[test]
fn softmax_rows_longer_than_the_buffer_take_the_three_pass_path() {
    let cfg = DeviceConfig::default();
    let rt = runtime(&cfg);
    let s = rt.streams().create().unwrap();
    let cols = 30_000usize;
    for rows in [1usize, 3] {
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 31) % 1000) as f32 / 250.0)
            .collect();
        let (px, py) = (
            upload(&rt, &x),
            rt.memory().malloc(4 * x.len() as u64).unwrap(),
        );
        let h = rt.ops().create_shape().unwrap();
        rt.ops()
            .set_shape_async(h, &[rows as i64, cols as i64], s)
            .unwrap();
        rt.submit(LaunchOp::new(
            rt.ops().get("softmax_f32").unwrap(),
            &[TensorArg::dynamic(px, h)],
            &[TensorArg::output(py)],
            &[],
            s,
        ))
        .unwrap();
        rt.streams().synchronize(s).unwrap();
        let r = &rt.ops().take_tiling_log()[0];
        assert_eq!(r.tiling.key, 3);
        check_fits(r, &cfg);
        let y = download::<f32>(&rt, py, x.len());
        for (row_x, row_y) in x.chunks(cols).zip(y.chunks(cols)) {
            let max = row_x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut e: Vec<f32> = row_x.iter().map(|v| (v - max).exp()).collect();
            let sum: f32 = e.iter().fold(0.0, |a, b| a + b);
            e.iter_mut().for_each(|v| *v /= sum);
            assert_eq!(row_y, &e[..]);
        }
    }
}

#[test]
fn gather_rows_longer_than_the_buffer_copy_in_column_tiles() {
    let cfg = DeviceConfig::small();
    let rt = runtime(&cfg);
    let s = rt.streams().create().unwrap();
    let (rows, width) = (5usize, 70_000usize);
    let table: Vec<f32> = (0..rows * width).map(|i| i as f32).collect();
    let ids = [4i32, 0, 4, 2];
    let (pt, pi) = (upload(&rt, &table), upload(&rt, &ids));
    let out = rt.memory().malloc(4 * (ids.len() * width) as u64).unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("gather_rows").unwrap(),
        &[
            TensorArg::new(pt, &[rows as i64, width as i64]),
            TensorArg::new(pi, &[4]),
        ],
        &[TensorArg::output(out)],
        &[],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let r = &rt.ops().take_tiling_log()[0];
    assert_eq!(r.tiling.key, 3);
    check_fits(r, &cfg);
    let got = download::<f32>(&rt, out, ids.len() * width);
    for (i, &id) in ids.iter().enumerate() {
        let id = id as usize;
        assert_eq!(
            &got[i * width..(i + 1) * width],
            &table[id * width..(id + 1) * width]
        );
    }
}

#[test]
fn nms_past_one_core_sweeps_over_all_cores() {
    let cfg = DeviceConfig::default();
    let rt = runtime(&cfg);
    let s = rt.streams().create().unwrap();
    let n = 6000usize;
    let boxes: Vec<f32> = (0..n)
        .flat_map(|i| {
            let (x, y) = ((i % 80) as f32, (i / 80) as f32);
            [x, y, x + 1.3, y + 1.3]
        })
        .collect();
    let scores: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let (pb, ps, pk) = (
        upload(&rt, &boxes),
        upload(&rt, &scores),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let h = rt.ops().create_shape().unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("nms_f32").unwrap(),
        &[
            TensorArg::new(pb, &[n as i64, 4]),
            TensorArg::new(ps, &[n as i64]),
        ],
        &[TensorArg::dynamic(pk, h)],
        &[0.3f32.into(), 0.2f32.into(), 1000u64.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let r = &rt.ops().take_tiling_log()[0];
    assert_eq!(r.tiling.key, 2);
    assert!(r.tiling.block_dim > 1);
    assert!(r.tiling.workspace_bytes >= 8 * n as u64);
    check_fits(r, &cfg);
    // CPU reference.
    let iou = |a: &[f32], b: &[f32]| {
        let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
        let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
        let inter = iw * ih;
        let (aa, ab) = ((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]));
        inter / (aa + ab - inter)
    };
    let mut order: Vec<usize> = (0..n).filter(|&i| scores[i] > 0.2).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut keep: Vec<usize> = Vec::new();
    for i in order {
        if keep.len() == 1000 {
            break;
        }
        if keep
            .iter()
            .all(|&j| iou(&boxes[i * 4..i * 4 + 4], &boxes[j * 4..j * 4 + 4]) <= 0.3)
        {
            keep.push(i);
        }
    }
    let k = rt.ops().read_shape(h).unwrap().dims()[0] as usize;
    assert_eq!(k, keep.len());
    let got = download::<i32>(&rt, pk, k);
    assert_eq!(got, keep.iter().map(|&i| i as i32).collect::<Vec<_>>());
}

#[test]
fn matmul_blocks_fit_l0_and_l1_for_every_m() {
    for cfg in presets() {
        let rt = runtime(&cfg);
        let s = rt.streams().create().unwrap();
        let (k, n) = (96usize, 200usize);
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 13) % 17) as f32 - 8.0).collect();
        let pb = upload(&rt, &b);
        let mut blocks = Vec::new();
        for m in [1usize, 17, 130, 600] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
            let (pa, pc) = (
                upload(&rt, &a),
                rt.memory().malloc(4 * (m * n) as u64).unwrap(),
            );
            let hm = rt.ops().create_shape().unwrap();
            rt.ops()
                .set_shape_async(hm, &[m as i64, k as i64], s)
                .unwrap();
            rt.submit(LaunchOp::new(
                rt.ops().get("matmul_f32").unwrap(),
                &[
                    TensorArg::dynamic(pa, hm),
                    TensorArg::new(pb, &[k as i64, n as i64]),
                ],
                &[TensorArg::output(pc)],
                &[],
                s,
            ))
            .unwrap();
            rt.streams().synchronize(s).unwrap();
            let r = rt.ops().take_tiling_log().remove(0);
            check_fits(&r, &cfg);
            let w = r.tiling.words();
            let (bm, bn, bk) = (w[3] as u64, w[4] as u64, w[5] as u64);
            assert!(bm * bk * 4 <= cfg.l0a_bytes as u64, "{r:?}");
            assert!(bk * bn * 4 <= cfg.l0b_bytes as u64, "{r:?}");
            assert!(bm * bn * 4 <= cfg.l0c_bytes as u64, "{r:?}");
            blocks.push((r.tiling.block_dim, r.tiling.key));
            let c = download::<f32>(&rt, pc, m * n);
            let mut want = vec![0.0f32; m * n];
            for i in 0..m {
                for p in 0..k {
                    for j in 0..n {
                        want[i * n + j] += a[i * k + p] * b[p * n + j];
                    }
                }
            }
            assert_eq!(c, want, "{} m={m}", cfg.name);
        }
        blocks.dedup();
        assert!(blocks.len() > 1, "{}: {blocks:?}", cfg.name);
    }
}

#[test]
fn the_kernel_reads_the_tiling_words_the_frame_wrote() {
    let rt = runtime(&DeviceConfig::small());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let probe = rt
        .ops()
        .register(
            OpBuilder::new("tiling_probe")
                .input("x", 4)
                .output("y", 4)
                .infer(|i, _, o| {
                    o[0] = i[0];
                    Ok(())
                })
                .tiling(|s, cfg| {
                    let n = s.inputs[0].numel();
                    Ok(Tiling::new((n as u32).clamp(1, cfg.ai_cores), 7).push_u64(n))
                })
                .cost(|s, _| KernelCost::vector(s.inputs[0].numel() as f64, 0.0))
                .kernel(move |k, t| {
                    seen2.lock().unwrap().push((
                        k.block_dim,
                        t.key(),
                        t.u64_at(0),
                        k.tiling[tiling_word::KEY],
                    ));
                    Ok(())
                }),
        )
        .unwrap();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(4 * 64).unwrap();
    let h = rt.ops().create_shape().unwrap();
    for n in [2i64, 64] {
        rt.ops().set_shape_async(h, &[n], s).unwrap();
        rt.submit(LaunchOp::new(
            probe,
            &[TensorArg::dynamic(x, h)],
            &[TensorArg::output(x)],
            &[],
            s,
        ))
        .unwrap();
    }
    rt.streams().synchronize(s).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(2, 7, 2, 7), (4, 7, 64, 7)]);
}
