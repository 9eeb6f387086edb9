//! Dynamic shapes through the public API: data-dependent producers (`nonzero`, `nms`) and the
//! consumers that use their counts, checked against CPU references across batches whose shapes
//! differ — with no host round trip between a producer and its consumers — and the errors a
//! bad shape gives.

use npusim::components::shape::{SLOT_WRITTEN, ShapeSlot};
use npusim::prelude::*;
use npusim::{FailureMode, HostCosts};
use npusim::{Launch, LaunchOp};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).unwrap()
}

fn upload<T: bytemuck::Pod>(rt: &Runtime, data: &[T]) -> DevicePtr {
    let bytes = (std::mem::size_of_val(data) as u64).max(4);
    let p = rt.memory().malloc(bytes).unwrap();
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

/// A small deterministic generator (no wall clock, no global state).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32) / (1u64 << 24) as f32
    }
}

fn frames(rt: &Runtime) -> u64 {
    rt.stats().frames.frames
}

// ---- CPU references ------------------------------------------------------------------------

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn iou(a: &[f32], b: &[f32]) -> f32 {
    let n = |r: &[f32]| {
        (
            r[0].min(r[2]),
            r[1].min(r[3]),
            r[0].max(r[2]),
            r[1].max(r[3]),
        )
    };
    let (ax1, ay1, ax2, ay2) = n(a);
    let (bx1, by1, bx2, by2) = n(b);
    let (aa, ab) = ((ax2 - ax1) * (ay2 - ay1), (bx2 - bx1) * (by2 - by1));
    if aa <= 0.0 || ab <= 0.0 {
        return 0.0;
    }
    let iw = (ax2.min(bx2) - ax1.max(bx1)).max(0.0);
    let ih = (ay2.min(by2) - ay1.max(by1)).max(0.0);
    let inter = iw * ih;
    inter / (aa + ab - inter)
}

fn nms_ref(boxes: &[f32], scores: &[f32], iou_th: f32, score_th: f32, max: usize) -> Vec<i32> {
    let mut order: Vec<usize> = (0..scores.len())
        .filter(|&i| scores[i] > score_th)
        .collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut keep: Vec<usize> = Vec::new();
    for i in order {
        if keep.len() >= max {
            break;
        }
        if keep
            .iter()
            .all(|&j| iou(&boxes[i * 4..i * 4 + 4], &boxes[j * 4..j * 4 + 4]) <= iou_th)
        {
            keep.push(i);
        }
    }
    keep.into_iter().map(|i| i as i32).collect()
}

// ---- detection ----------------------------------------------------------------------------

/// One image: anchors around a few objects (high logits) among background (low logits).
fn image(seed: u64, anchors: usize) -> (Vec<f32>, Vec<f32>) {
    let mut r = Lcg(seed);
    let objects: Vec<(f32, f32)> = (0..3 + seed as usize % 4)
        .map(|_| (0.1 + 0.8 * r.next(), 0.1 + 0.8 * r.next()))
        .collect();
    let (mut boxes, mut logits) = (Vec::new(), Vec::new());
    for _ in 0..anchors {
        let on_object = r.next() < 0.15;
        let (cx, cy) = if on_object {
            let o = objects[(r.next() * objects.len() as f32) as usize % objects.len()];
            (o.0 + 0.02 * (r.next() - 0.5), o.1 + 0.02 * (r.next() - 0.5))
        } else {
            (r.next(), r.next())
        };
        let (w, h) = (0.05 + 0.1 * r.next(), 0.05 + 0.1 * r.next());
        boxes.extend_from_slice(&[cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0]);
        logits.push(if on_object {
            1.0 + 3.0 * r.next()
        } else {
            -4.0 + 4.5 * r.next()
        });
    }
    (boxes, logits)
}

const SCORE_TH: f32 = 0.6;
const IOU_TH: f32 = 0.45;
const MAX_DETS: u64 = 50;

struct Queued {
    cand: ShapeHandle,
    keep: ShapeHandle,
    cand_idx: DevicePtr,
    keep_idx: DevicePtr,
    areas: DevicePtr,
}

/// Queues one image's detection head: scores, candidate filter, NMS, per-box area.
fn queue_detection(
    rt: &Runtime,
    s: Stream,
    boxes: DevicePtr,
    logits: DevicePtr,
    a: usize,
) -> Queued {
    let n = a as i64;
    let alloc = |bytes: usize| rt.memory().malloc(bytes.max(4) as u64).unwrap();
    let (scores, masked) = (alloc(4 * a), alloc(4 * a));
    let (cand_idx, cand_boxes, cand_scores) = (alloc(4 * a), alloc(16 * a), alloc(4 * a));
    let (keep_idx, dets, areas) = (alloc(4 * a), alloc(16 * a), alloc(4 * a));
    let (cand, keep) = (
        rt.ops().create_shape().unwrap(),
        rt.ops().create_shape().unwrap(),
    );
    let cb_shape = rt.ops().create_shape().unwrap();
    let cs_shape = rt.ops().create_shape().unwrap();
    let det_shape = rt.ops().create_shape().unwrap();
    let op = |name: &str| rt.ops().get(name).unwrap();
    rt.submit(LaunchOp::new(
        op("sigmoid_f32"),
        &[TensorArg::new(logits, &[n])],
        &[TensorArg::output(scores)],
        &[],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        op("threshold_f32"),
        &[TensorArg::new(scores, &[n])],
        &[TensorArg::output(masked)],
        &[SCORE_TH.into()],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        op("nonzero_f32"),
        &[TensorArg::new(masked, &[n])],
        &[TensorArg::dynamic(cand_idx, cand)],
        &[],
        s,
    ))
    .unwrap();
    let gather = op("gather_rows");
    rt.submit(LaunchOp::new(
        gather,
        &[
            TensorArg::new(boxes, &[n, 4]),
            TensorArg::dynamic(cand_idx, cand),
        ],
        &[TensorArg::dynamic(cand_boxes, cb_shape)],
        &[],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        gather,
        &[
            TensorArg::new(scores, &[n]),
            TensorArg::dynamic(cand_idx, cand),
        ],
        &[TensorArg::dynamic(cand_scores, cs_shape)],
        &[],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        op("nms_f32"),
        &[
            TensorArg::dynamic(cand_boxes, cb_shape),
            TensorArg::dynamic(cand_scores, cs_shape),
        ],
        &[TensorArg::dynamic(keep_idx, keep)],
        &[IOU_TH.into(), SCORE_TH.into(), MAX_DETS.into()],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        gather,
        &[
            TensorArg::dynamic(cand_boxes, cb_shape),
            TensorArg::dynamic(keep_idx, keep),
        ],
        &[TensorArg::dynamic(dets, det_shape)],
        &[],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        op("box_area_f32"),
        &[TensorArg::dynamic(dets, det_shape)],
        &[TensorArg::output(areas)],
        &[],
        s,
    ))
    .unwrap();
    Queued {
        cand,
        keep,
        cand_idx,
        keep_idx,
        areas,
    }
}

#[test]
fn detection_pipeline_matches_the_cpu_for_images_with_different_box_counts() {
    let rt = runtime();
    let streams = [
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    ];
    let sizes = [300usize, 1200, 2500, 700, 4000, 64];
    let images: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &a)| image(i as u64 + 1, a))
        .collect();
    let inputs: Vec<_> = images
        .iter()
        .map(|(b, l)| (upload(&rt, b), upload(&rt, l)))
        .collect();
    let before = frames(&rt);
    let queued: Vec<_> = inputs
        .iter()
        .zip(&sizes)
        .enumerate()
        .map(|(i, (&(b, l), &a))| queue_detection(&rt, streams[i % 2], b, l, a))
        .collect();
    assert_eq!(
        frames(&rt),
        before,
        "queueing ran no frame: nothing waited on the device"
    );
    rt.synchronize_device().unwrap();
    assert_eq!(rt.ops().shape_stats().host_shape_reads, 0);

    let mut kept_counts = Vec::new();
    for ((q, (boxes, logits)), &a) in queued.iter().zip(&images).zip(&sizes) {
        let scores: Vec<f32> = logits.iter().map(|&x| sigmoid(x)).collect();
        let cand: Vec<i32> = (0..a as i32)
            .filter(|&i| scores[i as usize] > SCORE_TH)
            .collect();
        let cb: Vec<f32> = cand
            .iter()
            .flat_map(|&i| boxes[i as usize * 4..i as usize * 4 + 4].to_vec())
            .collect();
        let cs: Vec<f32> = cand.iter().map(|&i| scores[i as usize]).collect();
        let keep = nms_ref(&cb, &cs, IOU_TH, SCORE_TH, MAX_DETS as usize);
        let areas: Vec<f32> = keep
            .iter()
            .map(|&k| {
                let b = &cb[k as usize * 4..k as usize * 4 + 4];
                (b[2] - b[0]).abs() * (b[3] - b[1]).abs()
            })
            .collect();

        assert_eq!(
            rt.ops().read_shape(q.cand).unwrap().dims(),
            &[cand.len() as u64]
        );
        assert_eq!(
            rt.ops().read_shape(q.keep).unwrap().dims(),
            &[keep.len() as u64]
        );
        assert_eq!(download::<i32>(&rt, q.cand_idx, cand.len()), cand);
        assert_eq!(download::<i32>(&rt, q.keep_idx, keep.len()), keep);
        assert_eq!(download::<f32>(&rt, q.areas, keep.len()), areas);
        kept_counts.push(keep.len());
    }
    // The images really differ in what the device found.
    kept_counts.sort_unstable();
    kept_counts.dedup();
    assert!(kept_counts.len() > 1, "{kept_counts:?}");
    assert_eq!(
        rt.ops().shape_stats().host_shape_reads,
        2 * sizes.len() as u64
    );
}

#[test]
fn nonzero_and_gather_match_the_cpu_across_batches_of_different_counts() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let (nonzero, gather) = (
        rt.ops().get("nonzero_f32").unwrap(),
        rt.ops().get("gather_rows").unwrap(),
    );
    let n = 5000usize;
    let batches: Vec<Vec<f32>> = (0..5)
        .map(|b| {
            let mut r = Lcg(b + 7);
            let density = [0.0, 0.01, 0.3, 0.9, 1.0][b as usize];
            (0..n)
                .map(|i| {
                    if r.next() < density {
                        i as f32 - 100.0
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let bufs: Vec<_> = batches
        .iter()
        .map(|x| {
            let idx = rt.memory().malloc(4 * n as u64).unwrap();
            let vals = rt.memory().malloc(4 * n as u64).unwrap();
            (
                upload(&rt, x),
                idx,
                vals,
                rt.ops().create_shape().unwrap(),
                rt.ops().create_shape().unwrap(),
            )
        })
        .collect();
    let before = frames(&rt);
    for &(x, idx, vals, count, vshape) in &bufs {
        rt.submit(LaunchOp::new(
            nonzero,
            &[TensorArg::new(x, &[n as i64])],
            &[TensorArg::dynamic(idx, count)],
            &[],
            s,
        ))
        .unwrap();
        rt.submit(LaunchOp::new(
            gather,
            &[
                TensorArg::new(x, &[n as i64]),
                TensorArg::dynamic(idx, count),
            ],
            &[TensorArg::dynamic(vals, vshape)],
            &[],
            s,
        ))
        .unwrap();
    }
    assert_eq!(frames(&rt), before);
    rt.streams().synchronize(s).unwrap();
    assert_eq!(rt.ops().shape_stats().host_shape_reads, 0);
    for (x, &(_, idx, vals, count, vshape)) in batches.iter().zip(&bufs) {
        let want: Vec<i32> = (0..n as i32).filter(|&i| x[i as usize] != 0.0).collect();
        let k = want.len();
        assert_eq!(rt.ops().read_shape(count).unwrap().dims(), &[k as u64]);
        assert_eq!(rt.ops().read_shape(vshape).unwrap().dims(), &[k as u64]);
        assert_eq!(download::<i32>(&rt, idx, k), want);
        let wv: Vec<f32> = want.iter().map(|&i| x[i as usize]).collect();
        assert_eq!(download::<f32>(&rt, vals, k), wv);
    }
}

#[test]
fn consumers_start_when_their_producer_ends_with_no_host_in_between() {
    let cfg = RuntimeConfig {
        host: HostCosts::zero(),
        ..RuntimeConfig::default()
    };
    let rt = Runtime::new(cfg).unwrap();
    let s = rt.streams().create().unwrap();
    let n = 4096usize;
    let x: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
    let x = upload(&rt, &x);
    let idx = rt.memory().malloc(4 * n as u64).unwrap();
    let y = rt.memory().malloc(4 * n as u64).unwrap();
    let h = rt.ops().create_shape().unwrap();
    rt.take_timeline();
    rt.submit(LaunchOp::new(
        rt.ops().get("nonzero_f32").unwrap(),
        &[TensorArg::new(x, &[n as i64])],
        &[TensorArg::dynamic(idx, h)],
        &[],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("sigmoid_f32").unwrap(),
        &[TensorArg::dynamic(idx, h)],
        &[TensorArg::output(y)],
        &[],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let t = rt.take_timeline();
    assert_eq!(t.len(), 2);
    assert_eq!(
        t[1].start, t[0].end,
        "the consumer's shape came from device memory"
    );
    let stats = rt.ops().shape_stats();
    assert_eq!(stats.host_shape_reads, 0);
    assert_eq!(stats.dynamic_inputs_read, 1);
    assert_eq!(stats.launches_resolved, 2);
}

#[test]
fn a_consumer_on_another_stream_follows_an_event_not_the_host() {
    let rt = runtime();
    let (s1, s2) = (
        rt.streams().create().unwrap(),
        rt.streams().create().unwrap(),
    );
    let n = 3000usize;
    let xv: Vec<f32> = (0..n).map(|i| if i % 7 == 0 { 1.0 } else { 0.0 }).collect();
    let x = upload(&rt, &xv);
    let (idx, out) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let (h, ho) = (
        rt.ops().create_shape().unwrap(),
        rt.ops().create_shape().unwrap(),
    );
    let ev = rt.events().create().unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("nonzero_f32").unwrap(),
        &[TensorArg::new(x, &[n as i64])],
        &[TensorArg::dynamic(idx, h)],
        &[],
        s1,
    ))
    .unwrap();
    rt.events().record(ev, s1).unwrap();
    rt.events().stream_wait(s2, ev).unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("gather_rows").unwrap(),
        &[TensorArg::new(x, &[n as i64]), TensorArg::dynamic(idx, h)],
        &[TensorArg::dynamic(out, ho)],
        &[],
        s2,
    ))
    .unwrap();
    rt.synchronize_device().unwrap();
    assert_eq!(rt.ops().shape_stats().host_shape_reads, 0);
    let k = n.div_ceil(7);
    assert_eq!(rt.ops().read_shape(ho).unwrap().dims(), &[k as u64]);
    assert_eq!(download::<f32>(&rt, out, k), vec![1.0; k]);
}

#[test]
fn a_static_shape_launch_needs_no_shape_handle() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let a: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..12).map(|i| (i % 5) as f32).collect();
    let (pa, pb) = (upload(&rt, &a), upload(&rt, &b));
    let pc = rt.memory().malloc(4 * 8).unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("matmul_f32").unwrap(),
        &[TensorArg::new(pa, &[2, 3]), TensorArg::new(pb, &[3, 4])],
        &[TensorArg::new(pc, &[2, 4])],
        &[],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut want = vec![0.0f32; 8];
    for i in 0..2 {
        for p in 0..3 {
            for j in 0..4 {
                want[i * 4 + j] += a[i * 3 + p] * b[p * 4 + j];
            }
        }
    }
    assert_eq!(download::<f32>(&rt, pc, 8), want);
}

// ---- errors -------------------------------------------------------------------------------

#[test]
fn a_count_past_the_output_buffer_faults_and_writes_nothing() {
    let rt = runtime();
    rt.contexts()
        .set_failure_mode(FailureMode::Continue)
        .unwrap();
    let s = rt.streams().create().unwrap();
    let x = upload(&rt, &vec![1.0f32; 100]);
    // Room for 4 indices; 100 are nonzero.
    let out = upload(&rt, &[-7i32; 4]);
    let h = rt.ops().create_shape().unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("nonzero_f32").unwrap(),
        &[TensorArg::new(x, &[100])],
        &[TensorArg::dynamic(out, h)],
        &[],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert!(
        matches!(
            &err,
            NpuError::ShapeExceedsBuffer {
                needed: 400,
                capacity: 16,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.code(), 507015);
    assert_eq!(download::<i32>(&rt, out, 4), vec![-7; 4]);
    // The producer failed: its slot says so, and a consumer is refused rather than misled.
    assert!(matches!(
        rt.ops().read_shape(h),
        Err(NpuError::InvalidShape(_))
    ));
}

#[test]
fn a_dynamic_shape_past_its_buffer_faults_the_consumer() {
    let rt = runtime();
    rt.contexts()
        .set_failure_mode(FailureMode::Continue)
        .unwrap();
    let s = rt.streams().create().unwrap();
    let x = upload(&rt, &vec![0.5f32; 100]);
    let y = upload(&rt, &vec![9.0f32; 100]);
    let h = rt.ops().create_shape().unwrap();
    rt.ops().set_shape_async(h, &[1000], s).unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("sigmoid_f32").unwrap(),
        &[TensorArg::dynamic(x, h)],
        &[TensorArg::output(y)],
        &[],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert!(
        matches!(
            &err,
            NpuError::ShapeExceedsBuffer {
                needed: 4000,
                capacity: 400,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(download::<f32>(&rt, y, 100), vec![9.0; 100]);
    assert_eq!(rt.ops().shape_stats().shape_faults, 1);
}

#[test]
fn negative_or_overflowing_static_dims_are_refused_at_submission() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    let y = rt.memory().malloc(64).unwrap();
    let sig = rt.ops().get("sigmoid_f32").unwrap();
    let launch = |dims: &[i64]| {
        rt.submit(LaunchOp::new(
            sig,
            &[TensorArg::new(x, dims)],
            &[TensorArg::output(y)],
            &[],
            s,
        ))
    };
    let e = launch(&[-1]).unwrap_err();
    assert!(matches!(e, NpuError::InvalidShape(_)), "{e}");
    assert_eq!(e.code(), 107000);
    assert!(matches!(
        launch(&[1 << 40, 1 << 40]),
        Err(NpuError::InvalidShape(_))
    ));
    assert!(matches!(launch(&[1; 9]), Err(NpuError::InvalidShape(_))));
    assert!(
        matches!(launch(&[17]), Err(NpuError::InvalidShape(_))),
        "17 floats > 64 bytes"
    );
    let h = rt.ops().create_shape().unwrap();
    assert!(matches!(
        rt.ops().set_shape_async(h, &[3, -2], s),
        Err(NpuError::InvalidShape(_))
    ));
    assert_eq!(rt.stats().frames.tasks_ingested, 0, "nothing was queued");
    launch(&[16]).unwrap();
    rt.streams().synchronize(s).unwrap();
}

#[test]
fn a_negative_dim_written_on_the_device_is_refused_at_propagation() {
    let rt = runtime();
    rt.contexts()
        .set_failure_mode(FailureMode::Continue)
        .unwrap();
    // A faulty producer: it publishes a shape with a negative dim.
    let bad = rt
        .ops()
        .register(
            OpBuilder::new("bad_producer")
                .input("x", 4)
                .data_dependent_output("y", 4)
                .infer(|i, _, o| {
                    o[0] = i[0];
                    Ok(())
                })
                .tiling(|_, _| Ok(Tiling::new(1, 1)))
                .cost(|_, _| KernelCost::default())
                .kernel(|k, t| {
                    let mut slot = ShapeSlot {
                        tag: SLOT_WRITTEN,
                        rank: 1,
                        dims: [0; 8],
                    };
                    slot.dims[0] = -5;
                    k.store(t.out_slot(), &[slot])
                }),
        )
        .unwrap();
    let s = rt.streams().create().unwrap();
    let x = upload(&rt, &[1.0f32; 8]);
    let y = upload(&rt, &[2.0f32; 8]);
    let z = upload(&rt, &[3.0f32; 8]);
    let h = rt.ops().create_shape().unwrap();
    rt.submit(LaunchOp::new(
        bad,
        &[TensorArg::new(x, &[8])],
        &[TensorArg::dynamic(y, h)],
        &[],
        s,
    ))
    .unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("sigmoid_f32").unwrap(),
        &[TensorArg::dynamic(y, h)],
        &[TensorArg::output(z)],
        &[],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert!(
        matches!(&err, NpuError::InvalidShape(m) if m.contains("-5")),
        "{err}"
    );
    assert_eq!(err.code(), 107000);
    assert_eq!(
        download::<f32>(&rt, z, 8),
        vec![3.0; 8],
        "the consumer never ran"
    );
}

#[test]
fn a_shape_nobody_wrote_is_an_error_not_a_guess() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    let y = rt.memory().malloc(64).unwrap();
    let h = rt.ops().create_shape().unwrap();
    assert!(matches!(
        rt.ops().read_shape(h),
        Err(NpuError::InvalidShape(_))
    ));
    rt.submit(LaunchOp::new(
        rt.ops().get("sigmoid_f32").unwrap(),
        &[TensorArg::dynamic(x, h)],
        &[TensorArg::output(y)],
        &[],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert!(
        matches!(&err, NpuError::InvalidShape(m) if m.contains("never written")),
        "{err}"
    );
}

#[test]
fn stale_foreign_and_other_context_shape_handles_are_refused() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    let y = rt.memory().malloc(64).unwrap();
    let sig = rt.ops().get("sigmoid_f32").unwrap();
    let h = rt.ops().create_shape().unwrap();
    rt.ops().free_shape(h).unwrap();
    let stale = rt.submit(LaunchOp::new(
        sig,
        &[TensorArg::dynamic(x, h)],
        &[TensorArg::output(y)],
        &[],
        s,
    ));
    assert!(matches!(stale, Err(NpuError::Destroyed(_))), "{stale:?}");
    assert!(matches!(
        rt.ops().free_shape(h),
        Err(NpuError::Destroyed(_))
    ));
    // The slot is reused under a new generation.
    let h2 = rt.ops().create_shape().unwrap();
    assert_eq!(h2.slot(), h.slot());
    assert_ne!(h2.generation(), h.generation());

    let other = runtime();
    let foreign = other.ops().create_shape().unwrap();
    let r = rt.submit(LaunchOp::new(
        sig,
        &[TensorArg::dynamic(x, foreign)],
        &[TensorArg::output(y)],
        &[],
        s,
    ));
    assert!(matches!(r, Err(NpuError::ForeignHandle(_))), "{r:?}");

    let first = rt.contexts().current().unwrap();
    rt.contexts().create(0).unwrap();
    let s2 = rt.streams().create().unwrap();
    let (x2, y2) = (
        rt.memory().malloc(64).unwrap(),
        rt.memory().malloc(64).unwrap(),
    );
    let r = rt.submit(LaunchOp::new(
        sig,
        &[TensorArg::dynamic(x2, h2)],
        &[TensorArg::output(y2)],
        &[],
        s2,
    ));
    assert!(matches!(r, Err(NpuError::WrongContext { .. })), "{r:?}");
    rt.contexts().set_current(first).unwrap();
}

#[test]
fn an_op_launched_as_a_plain_kernel_fails_cleanly() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    rt.submit(Launch::new(
        rt.ops().get("sigmoid_f32").unwrap(),
        1,
        &[x.into(), x.into()],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert!(err.to_string().contains("LaunchOp"), "{err}");
}

#[test]
fn wrong_op_signatures_are_refused_at_submission() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = rt.memory().malloc(64).unwrap();
    let y = rt.memory().malloc(64).unwrap();
    let nz = rt.ops().get("nonzero_f32").unwrap();
    // A data-dependent output needs a handle.
    let r = rt.submit(LaunchOp::new(
        nz,
        &[TensorArg::new(x, &[4])],
        &[TensorArg::output(y)],
        &[],
        s,
    ));
    assert!(matches!(r, Err(NpuError::InvalidParam(_))), "{r:?}");
    // Wrong tensor count.
    let r = rt.submit(LaunchOp::new(nz, &[], &[TensorArg::output(y)], &[], s));
    assert!(matches!(r, Err(NpuError::InvalidParam(_))), "{r:?}");
    // A plain kernel is not an op.
    assert!(rt.ops().get("vector_add_f32").is_err());
    // Incompatible shapes are found by inference on the device.
    rt.contexts()
        .set_failure_mode(FailureMode::Continue)
        .unwrap();
    rt.submit(LaunchOp::new(
        rt.ops().get("matmul_f32").unwrap(),
        &[TensorArg::new(x, &[2, 3]), TensorArg::new(x, &[2, 3])],
        &[TensorArg::output(y)],
        &[],
        s,
    ))
    .unwrap();
    let err = rt.streams().synchronize(s).unwrap_err();
    assert!(
        matches!(&err, NpuError::InvalidShape(m) if m.contains("inner dims")),
        "{err}"
    );
}

#[test]
fn a_refused_op_launch_gives_its_pooled_box_back() {
    use npusim::components::TaskPool;
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let x = upload(&rt, &[1.0f32, -2.0, 3.0, -4.0]);
    let y = rt.memory().malloc(16).unwrap();
    let threshold = rt.ops().get("threshold_f32").unwrap();
    let t = [Arg::F32(0.0)];
    let pooled = || {
        rt.lock_world()
            .world()
            .resource::<TaskPool>()
            .op_launches
            .len()
    };
    // A launch that runs and retires leaves its box in the pool.
    rt.submit(LaunchOp::new(
        threshold,
        &[TensorArg::new(x, &[4])],
        &[TensorArg::output(y)],
        &t,
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    assert_eq!(download::<f32>(&rt, y, 4), vec![1.0, 0.0, 3.0, 0.0]);
    let before = pooled();
    assert!(before >= 1);
    // Refused launches, each by a different check, take a box and give it back.
    let r = rt.submit(LaunchOp::new(
        threshold,
        &[],
        &[TensorArg::output(y)],
        &t,
        s,
    ));
    assert!(matches!(r, Err(NpuError::InvalidParam(_))), "{r:?}");
    let r = rt.submit(LaunchOp::new(
        threshold,
        &[TensorArg::new(DevicePtr(0), &[4])],
        &[TensorArg::output(y)],
        &t,
        s,
    ));
    assert!(matches!(r, Err(NpuError::NullPointer(_))), "{r:?}");
    let r = rt.submit(LaunchOp::new(
        threshold,
        &[TensorArg::new(x, &[1 << 20])],
        &[TensorArg::output(y)],
        &t,
        s,
    ));
    assert!(matches!(r, Err(NpuError::InvalidShape(_))), "{r:?}");
    assert_eq!(pooled(), before);
    // And the stream is untouched by them.
    rt.streams().synchronize(s).unwrap();
}

// ---- NLP ----------------------------------------------------------------------------------

#[test]
fn nlp_pipeline_with_a_device_side_sequence_length_matches_the_cpu() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let (vocab, hidden, classes, padded) = (500usize, 32usize, 48usize, 256usize);
    let mut r = Lcg(99);
    let emb: Vec<f32> = (0..vocab * hidden).map(|_| r.next() - 0.5).collect();
    let w: Vec<f32> = (0..hidden * classes).map(|_| r.next() - 0.5).collect();
    let (pe, pw) = (upload(&rt, &emb), upload(&rt, &w));
    let lengths = [1usize, 17, 200, 256, 64];
    let op = |name: &str| rt.ops().get(name).unwrap();
    let mut batches = Vec::new();
    for &len in &lengths {
        // Real tokens (1..vocab) with padding (0) sprinkled in, up to the padded length.
        let mut ids = vec![0i32; padded];
        let mut placed = 0;
        for (i, id) in ids.iter_mut().enumerate() {
            if placed < len && (padded - i <= len - placed || r.next() < 0.7) {
                *id = 1 + (r.next() * (vocab - 1) as f32) as i32;
                placed += 1;
            }
        }
        let pids = upload(&rt, &ids);
        let alloc = |n: usize| rt.memory().malloc(4 * n as u64).unwrap();
        let (pos, tok, x, logits, probs) = (
            alloc(padded),
            alloc(padded),
            alloc(padded * hidden),
            alloc(padded * classes),
            alloc(padded * classes),
        );
        let [hs, ht, hx, hl] = [(); 4].map(|_| rt.ops().create_shape().unwrap());
        let p = padded as i64;
        rt.submit(LaunchOp::new(
            op("nonzero_i32"),
            &[TensorArg::new(pids, &[p])],
            &[TensorArg::dynamic(pos, hs)],
            &[],
            s,
        ))
        .unwrap();
        rt.submit(LaunchOp::new(
            op("gather_rows"),
            &[TensorArg::new(pids, &[p]), TensorArg::dynamic(pos, hs)],
            &[TensorArg::dynamic(tok, ht)],
            &[],
            s,
        ))
        .unwrap();
        rt.submit(LaunchOp::new(
            op("gather_rows"),
            &[
                TensorArg::new(pe, &[vocab as i64, hidden as i64]),
                TensorArg::dynamic(tok, ht),
            ],
            &[TensorArg::dynamic(x, hx)],
            &[],
            s,
        ))
        .unwrap();
        rt.submit(LaunchOp::new(
            op("matmul_f32"),
            &[
                TensorArg::dynamic(x, hx),
                TensorArg::new(pw, &[hidden as i64, classes as i64]),
            ],
            &[TensorArg::dynamic(logits, hl)],
            &[],
            s,
        ))
        .unwrap();
        rt.submit(LaunchOp::new(
            op("softmax_f32"),
            &[TensorArg::dynamic(logits, hl)],
            &[TensorArg::output(probs)],
            &[],
            s,
        ))
        .unwrap();
        batches.push((ids, probs, hl));
    }
    rt.streams().synchronize(s).unwrap();
    assert_eq!(rt.ops().shape_stats().host_shape_reads, 0);
    for ((ids, probs, hl), &len) in batches.iter().zip(&lengths) {
        let tokens: Vec<usize> = ids
            .iter()
            .filter(|&&t| t != 0)
            .map(|&t| t as usize)
            .collect();
        assert_eq!(tokens.len(), len);
        let mut want = vec![0.0f32; len * classes];
        for (i, &t) in tokens.iter().enumerate() {
            let row = &mut want[i * classes..(i + 1) * classes];
            for p in 0..hidden {
                let a = emb[t * hidden + p];
                for (c, wv) in row.iter_mut().zip(&w[p * classes..(p + 1) * classes]) {
                    *c += a * wv;
                }
            }
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for e in row.iter_mut() {
                *e = (*e - max).exp();
                sum += *e;
            }
            row.iter_mut().for_each(|e| *e /= sum);
        }
        assert_eq!(
            rt.ops().read_shape(*hl).unwrap().dims(),
            &[len as u64, classes as u64]
        );
        assert_eq!(
            download::<f32>(&rt, *probs, len * classes),
            want,
            "length {len}"
        );
    }
}

#[test]
fn a_fault_takes_the_shape_buffer_with_it_and_a_reset_context_gets_a_fresh_one() {
    let rt = runtime();
    let s = rt.streams().create().unwrap();
    let old = rt.ops().create_shape().unwrap();
    // A fault: the context's memory, shape buffer included, is released.
    rt.submit(Launch::new(
        rt.kernel("fault_bad_address").unwrap(),
        1,
        &[Arg::U64(0x10)],
        s,
    ))
    .unwrap();
    assert!(rt.streams().synchronize(s).is_err());
    rt.contexts().reset().unwrap();
    let x = upload(&rt, &[1.0f32, 0.0, 2.0, 0.0]);
    let idx = rt.memory().malloc(16).unwrap();
    let nz = rt.ops().get("nonzero_f32").unwrap();
    let r = rt.submit(LaunchOp::new(
        nz,
        &[TensorArg::new(x, &[4])],
        &[TensorArg::dynamic(idx, old)],
        &[],
        s,
    ));
    assert!(matches!(r, Err(NpuError::Destroyed(_))), "{r:?}");
    let fresh = rt.ops().create_shape().unwrap();
    rt.submit(LaunchOp::new(
        nz,
        &[TensorArg::new(x, &[4])],
        &[TensorArg::dynamic(idx, fresh)],
        &[],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    assert_eq!(rt.ops().read_shape(fresh).unwrap().dims(), &[2]);
    assert_eq!(download::<i32>(&rt, idx, 2), vec![0, 2]);
}
