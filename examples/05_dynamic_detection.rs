//! 05 — dynamic detection: a detector's post-processing, where every count depends on the data.
//!
//! Seven images, each with a different number of anchor boxes, go through the same head:
//!
//! ```text
//! logits [a] ─ sigmoid ─ threshold ─ nonzero ─▶ candidates [c]          (c: data-dependent)
//! boxes [a,4] ─────────────── gather(candidates) ─▶ boxes [c,4], scores [c]
//!                             nms(iou, score, max) ─▶ keep [k]          (k: data-dependent)
//!                             gather(keep) ─ box_scale(to pixels) ─ box_area ─▶ [k,4], [k]
//! ```
//!
//! Everything — the uploads, 9 op launches per image, the downloads — is queued up front on
//! two streams; the host never learns `c` or `k` until the end. What happens each frame:
//! ingest turns the doorbell into tasks; dependency resolution makes each stream's head ready;
//! **shape propagation** reads a ready op's input shapes from the context's shape buffer in
//! device memory (where `nonzero` and `nms` wrote `[c]` and `[k]` when they ran) and writes the
//! inferred output shapes back; **tiling** picks block dim and tile sizes for those actual
//! shapes on this device; dispatch prices the launch from them; the hardware tick runs the
//! kernels. Only after one synchronize does the host read the counts, to print them.
//!
//! Run: `cargo run --release --example 05_dynamic_detection`

use npusim::LaunchOp;
use npusim::prelude::*;

const SCORE_THRESHOLD: f32 = 0.6;
const IOU_THRESHOLD: f32 = 0.45;
const MAX_DETECTIONS: u64 = 32;
/// Two uploads, nine op launches, two downloads.
const TASKS_PER_IMAGE: usize = 13;

/// A deterministic pseudo-random generator (same run, same numbers).
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

/// A synthetic image: `objects` objects, each hit by a cluster of anchors (boxes close to the
/// object's, high logits), among background anchors with low logits. Boxes are normalized
/// corners.
fn image(seed: u64, anchors: usize, objects: usize) -> (Vec<f32>, Vec<f32>) {
    let mut r = Lcg(seed);
    let objs: Vec<[f32; 4]> = (0..objects)
        .map(|_| {
            let (cx, cy) = (0.1 + 0.8 * r.next(), 0.1 + 0.8 * r.next());
            let (w, h) = (0.05 + 0.1 * r.next(), 0.05 + 0.1 * r.next());
            [cx, cy, w, h]
        })
        .collect();
    let (mut boxes, mut logits) = (Vec::new(), Vec::new());
    for _ in 0..anchors {
        let hit = r.next() < 0.12;
        let [cx, cy, w, h] = if hit {
            let o = objs[(r.next() * objects as f32) as usize % objects];
            let j = |v: f32, r: &mut Lcg| v * (1.0 + 0.1 * (r.next() - 0.5));
            [
                o[0] + 0.01 * (r.next() - 0.5),
                o[1] + 0.01 * (r.next() - 0.5),
                j(o[2], &mut r),
                j(o[3], &mut r),
            ]
        } else {
            [
                r.next(),
                r.next(),
                0.04 + 0.1 * r.next(),
                0.04 + 0.1 * r.next(),
            ]
        };
        boxes.extend_from_slice(&[cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0]);
        logits.push(if hit {
            1.0 + 3.0 * r.next()
        } else {
            -5.0 + 5.0 * r.next()
        });
    }
    (boxes, logits)
}

/// What a CPU finds for the same image: (candidates, kept), to check the device.
fn cpu_counts((boxes, logits): &(Vec<f32>, Vec<f32>)) -> (usize, usize) {
    let scores: Vec<f32> = logits.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect();
    let mut cand: Vec<usize> = (0..scores.len())
        .filter(|&i| scores[i] > SCORE_THRESHOLD)
        .collect();
    let count = cand.len();
    cand.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let b = |i: usize| &boxes[i * 4..i * 4 + 4];
    let iou = |p: &[f32], q: &[f32]| {
        let iw = (p[2].min(q[2]) - p[0].max(q[0])).max(0.0);
        let ih = (p[3].min(q[3]) - p[1].max(q[1])).max(0.0);
        let inter = iw * ih;
        let area = |r: &[f32]| (r[2] - r[0]) * (r[3] - r[1]);
        inter / (area(p) + area(q) - inter)
    };
    let mut kept: Vec<usize> = Vec::new();
    for i in cand {
        if kept.len() as u64 == MAX_DETECTIONS {
            break;
        }
        if kept.iter().all(|&j| iou(b(i), b(j)) <= IOU_THRESHOLD) {
            kept.push(i);
        }
    }
    (count, kept.len())
}

/// Device buffers and shape handles of one image.
struct Image {
    anchors: usize,
    size: (f32, f32),
    candidates: ShapeHandle,
    kept: ShapeHandle,
    boxes_out: HostBuffer,
    areas_out: HostBuffer,
}

fn queue_image(
    rt: &Runtime,
    s: Stream,
    (boxes, logits): &(Vec<f32>, Vec<f32>),
    size: (f32, f32),
) -> NpuResult<Image> {
    let a = logits.len();
    let n = a as i64;
    let dev = |bytes: usize| rt.memory().malloc(bytes.max(4) as u64);
    let op = |name: &str| rt.ops().get(name);
    // Buffers are sized for the upper bound (every anchor survives); ops use the actual count.
    let (d_boxes, d_logits, scores, masked) = (dev(16 * a)?, dev(4 * a)?, dev(4 * a)?, dev(4 * a)?);
    let (cand, cand_boxes, cand_scores) = (dev(4 * a)?, dev(16 * a)?, dev(4 * a)?);
    let (keep, dets, pixels, areas) = (dev(4 * a)?, dev(16 * a)?, dev(16 * a)?, dev(4 * a)?);
    let candidates = rt.ops().create_shape()?;
    let cand_boxes_shape = rt.ops().create_shape()?;
    let cand_scores_shape = rt.ops().create_shape()?;
    let kept = rt.ops().create_shape()?;
    let dets_shape = rt.ops().create_shape()?;
    let pixels_shape = rt.ops().create_shape()?;

    rt.memory().memcpy_htod_async_pageable(d_boxes, boxes, s)?;
    rt.memory()
        .memcpy_htod_async_pageable(d_logits, logits, s)?;
    rt.submit(LaunchOp::new(
        op("sigmoid_f32")?,
        &[TensorArg::new(d_logits, &[n])],
        &[TensorArg::output(scores)],
        &[],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        op("threshold_f32")?,
        &[TensorArg::new(scores, &[n])],
        &[TensorArg::output(masked)],
        &[SCORE_THRESHOLD.into()],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        op("nonzero_f32")?,
        &[TensorArg::new(masked, &[n])],
        &[TensorArg::dynamic(cand, candidates)],
        &[],
        s,
    ))?;
    let gather = op("gather_rows")?;
    rt.submit(LaunchOp::new(
        gather,
        &[
            TensorArg::new(d_boxes, &[n, 4]),
            TensorArg::dynamic(cand, candidates),
        ],
        &[TensorArg::dynamic(cand_boxes, cand_boxes_shape)],
        &[],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        gather,
        &[
            TensorArg::new(scores, &[n]),
            TensorArg::dynamic(cand, candidates),
        ],
        &[TensorArg::dynamic(cand_scores, cand_scores_shape)],
        &[],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        op("nms_f32")?,
        &[
            TensorArg::dynamic(cand_boxes, cand_boxes_shape),
            TensorArg::dynamic(cand_scores, cand_scores_shape),
        ],
        &[TensorArg::dynamic(keep, kept)],
        &[
            IOU_THRESHOLD.into(),
            SCORE_THRESHOLD.into(),
            MAX_DETECTIONS.into(),
        ],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        gather,
        &[
            TensorArg::dynamic(cand_boxes, cand_boxes_shape),
            TensorArg::dynamic(keep, kept),
        ],
        &[TensorArg::dynamic(dets, dets_shape)],
        &[],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        op("box_scale_f32")?,
        &[TensorArg::dynamic(dets, dets_shape)],
        &[TensorArg::dynamic(pixels, pixels_shape)],
        &[size.0.into(), size.1.into()],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        op("box_area_f32")?,
        &[TensorArg::dynamic(pixels, pixels_shape)],
        &[TensorArg::output(areas)],
        &[],
        s,
    ))?;
    // The host does not know k: it copies back the bound and reads k at the end.
    let max = MAX_DETECTIONS as usize;
    let (boxes_out, areas_out) = (
        rt.memory().malloc_host(16 * max as u64)?,
        rt.memory().malloc_host(4 * max as u64)?,
    );
    rt.memory()
        .memcpy_dtoh_async(&boxes_out, pixels, 16 * max.min(a) as u64, s)?;
    rt.memory()
        .memcpy_dtoh_async(&areas_out, areas, 4 * max.min(a) as u64, s)?;
    Ok(Image {
        anchors: a,
        size,
        candidates,
        kept,
        boxes_out,
        areas_out,
    })
}

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::default())?;
    rt.ops().set_tiling_log_enabled(true);
    let streams = [rt.streams().create()?, rt.streams().create()?];
    let specs = [
        (1200, 3, (640.0, 480.0)),
        (4800, 7, (1280.0, 720.0)),
        (300, 1, (320.0, 240.0)),
        (9000, 12, (1920.0, 1080.0)),
        (2400, 5, (800.0, 600.0)),
        (64, 2, (128.0, 128.0)),
        (40000, 20, (3840.0, 2160.0)),
    ];
    let images: Vec<_> = specs
        .iter()
        .enumerate()
        .map(|(i, &(a, o, _))| image(100 + i as u64, a, o))
        .collect();

    // 1. Queue everything: no synchronization, no shape ever read.
    let frames_before = rt.stats().frames.frames;
    let mut queued = Vec::new();
    for (i, (img, spec)) in images.iter().zip(&specs).enumerate() {
        queued.push(queue_image(&rt, streams[i % 2], img, spec.2)?);
    }
    println!(
        "queued {} tasks ({TASKS_PER_IMAGE} per image) for {} images on 2 streams; frames run so far: {}",
        TASKS_PER_IMAGE * images.len(),
        images.len(),
        rt.stats().frames.frames - frames_before
    );

    // 2. One synchronize: the device runs every frame it needs.
    rt.synchronize_device()?;
    let during = rt.ops().shape_stats();
    println!(
        "device done at {}; shapes read by the host so far: {}; input shapes read on the device: {}",
        rt.device_now(),
        during.host_shape_reads,
        during.dynamic_inputs_read
    );

    // 3. Now the host looks at what the device found.
    println!(
        "\n{:<6} {:>7} {:>11} {:>10} {:>6} {:>4}   first detections (pixels, area)",
        "image", "anchors", "size", "candidates", "kept", "cpu"
    );
    let mut all_match = true;
    for (i, img) in queued.iter().enumerate() {
        let c = rt.ops().read_shape(img.candidates)?.dims()[0] as usize;
        let k = rt.ops().read_shape(img.kept)?.dims()[0] as usize;
        let cpu = cpu_counts(&images[i]);
        all_match &= cpu == (c, k);
        let boxes: Vec<f32> = img.boxes_out.read()?;
        let areas: Vec<f32> = img.areas_out.read()?;
        let first: Vec<String> = (0..k.min(2))
            .map(|d| {
                let b = &boxes[d * 4..d * 4 + 4];
                format!(
                    "({:.0},{:.0})-({:.0},{:.0}) {:.0}",
                    b[0], b[1], b[2], b[3], areas[d]
                )
            })
            .collect();
        println!(
            "{:<6} {:>7} {:>11} {:>10} {:>6} {:>4}   {}",
            i,
            img.anchors,
            format!("{}x{}", img.size.0, img.size.1),
            c,
            k,
            if cpu == (c, k) { "same" } else { "DIFF" },
            first.join("  ")
        );
    }

    // 4. The NMS tiling the device chose for each image's candidate count.
    println!("\nNMS tiling per image (chosen at dispatch from the actual candidate count):");
    for r in rt
        .ops()
        .take_tiling_log()
        .iter()
        .filter(|r| r.op == "nms_f32")
    {
        println!(
            "  {} boxes → key {} on {} core(s), workspace {} B",
            r.inputs[0].dims()[0],
            r.tiling.key,
            r.tiling.block_dim,
            r.tiling.workspace_bytes
        );
    }
    let s = rt.ops().shape_stats();
    println!(
        "\nop launches resolved on the device: {}, tilings: {}, host shape reads: {} (all after the pipeline)",
        s.launches_resolved, s.tilings, s.host_shape_reads
    );
    if !all_match {
        eprintln!("the device's counts differ from the CPU's");
        std::process::exit(1);
    }
    Ok(())
}
