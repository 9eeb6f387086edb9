//! `nms_f32`: greedy non-maximum suppression of `boxes [n, 4]` (corners `x1, y1, x2, y2`, in
//! either order) with `scores [n]`. Boxes scoring at most `score_threshold` are dropped; the
//! rest are visited by descending score (ties: lower index first); a visited box is kept unless
//! an already kept box overlaps it with IoU above `iou_threshold`; at most `max_outputs` are
//! kept. The output is the kept indices (`i32`), best first — a data-dependent count the kernel
//! publishes into the output's shape slot.
//!
//! Tiling: when every box (corners, score, area, flag) fits one core's unified buffer, one
//! core does it all (key 1). Otherwise the suppression sweep of each kept box runs over box
//! tiles spread across cores (key 2). The sorted order and the suppression flags live in the
//! workspace.

use npusim_components::shape::{OpTiling, Shape, Tiling, publish_shape};
use npusim_components::{KernelCtx, KernelFault, KernelRegistry, NpuResult, OpRegistry, OpShapes};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use super::split::Split;
use super::{OpBuilder, exceeds};

/// Unified-buffer bytes per box: 4 corners, score, area, suppression flag.
const UB_PER_BOX: u64 = 28;
/// Key when all boxes fit one core.
pub const KEY_ONE_CORE: u32 = 1;
/// Key when the sweep is tiled over cores.
pub const KEY_TILED: u32 = 2;

/// Intersection over union of two boxes (0 when either is empty).
pub fn iou(a: &[f32], b: &[f32]) -> f32 {
    let norm = |r: &[f32]| {
        (
            r[0].min(r[2]),
            r[1].min(r[3]),
            r[0].max(r[2]),
            r[1].max(r[3]),
        )
    };
    let (ax1, ay1, ax2, ay2) = norm(a);
    let (bx1, by1, bx2, by2) = norm(b);
    let area_a = (ax2 - ax1) * (ay2 - ay1);
    let area_b = (bx2 - bx1) * (by2 - by1);
    if area_a <= 0.0 || area_b <= 0.0 {
        return 0.0;
    }
    let iw = (ax2.min(bx2) - ax1.max(bx1)).max(0.0);
    let ih = (ay2.min(by2) - ay1.max(by1)).max(0.0);
    let inter = iw * ih;
    inter / (area_a + area_b - inter)
}

fn infer(inputs: &[Shape], attrs: &[u64], out: &mut [Shape]) -> Result<(), String> {
    let (boxes, scores) = (inputs[0], inputs[1]);
    if boxes.rank() != 2 || boxes.dim(1) != Some(4) {
        return Err(format!("boxes must be [n, 4], got {boxes}"));
    }
    let n = boxes.dims()[0];
    if scores.numel() != n || scores.rank() != 1 {
        return Err(format!("scores must be [{n}], got {scores}"));
    }
    if n > i32::MAX as u64 {
        return Err(format!("{n} boxes: indices are i32"));
    }
    let max_out = attrs.get(2).copied().unwrap_or(0);
    out[0] = Shape::new(&[n.min(max_out)]).map_err(super::msg)?;
    Ok(())
}

fn tiling(s: &OpShapes<'_>, cfg: &DeviceConfig) -> Result<Tiling, String> {
    let n = s.inputs[0].dims()[0];
    let (split, key) = if n * UB_PER_BOX * 2 <= cfg.ub_bytes as u64 {
        (
            Split::single_core(n, n),
            if n == 0 { 0 } else { KEY_ONE_CORE },
        )
    } else {
        let split = Split::new(n, UB_PER_BOX, 8, 1024, cfg)?;
        (split, KEY_TILED)
    };
    // Sorted (score, index) pairs and one flag per box.
    let workspace = (n * 8 + n).div_ceil(32) * 32;
    Ok(split
        .encode(Tiling::new(split.block_dim, key))
        .with_buffers(split.ub_bytes(UB_PER_BOX), 0)
        .with_workspace(workspace))
}

fn nms(k: &mut KernelCtx<'_>, t: &OpTiling<'_>) -> Result<(), KernelFault> {
    let (boxes_p, scores_p, out) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?);
    let (iou_th, score_th, max_out) = (k.f32(3)?, k.f32(4)?, k.u64(5)?);
    let split = Split::decode(t, 0, k.block_dim);
    let n = split.n as usize;
    let boxes = k.load::<f32>(boxes_p, n * 4)?;
    let scores = k.load::<f32>(scores_p, n)?;
    let mut order: Vec<usize> = (0..n).filter(|&i| scores[i] > score_th).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut suppressed = vec![false; n];
    let mut keep: Vec<i32> = Vec::new();
    for &i in &order {
        if keep.len() as u64 >= max_out {
            break;
        }
        if suppressed[i] {
            continue;
        }
        keep.push(i as i32);
        let bi = &boxes[i * 4..i * 4 + 4];
        // The sweep, over the tiles the tiling gave each core.
        for b in 0..k.block_dim {
            for (start, len) in split.tiles(b) {
                for j in start as usize..(start + len) as usize {
                    if !suppressed[j] && j != i && iou(bi, &boxes[j * 4..j * 4 + 4]) > iou_th {
                        suppressed[j] = true;
                    }
                }
            }
        }
    }
    let shape = Shape::new(&[keep.len() as u64]).map_err(|e| KernelFault::Raised(Box::new(e)))?;
    if keep.len() as u64 * 4 > t.out_capacity() {
        return Err(exceeds("nms_f32", "keep", &shape, 4, t.out_capacity()));
    }
    k.store(out, &keep)?;
    publish_shape(k, t.out_slot(), &shape)
}

pub(crate) fn register(kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<()> {
    OpBuilder::new("nms_f32")
        .input("boxes", 4)
        .input("scores", 4)
        .data_dependent_output("keep", 4)
        .attr("iou_threshold")
        .attr("score_threshold")
        .attr("max_outputs")
        .infer(infer)
        .tiling(tiling)
        .cost(|s, _| {
            let n = s.inputs[0].dims()[0] as f64;
            let kept = s.outputs[0].numel() as f64;
            // Sort, then one IoU sweep (about 12 flops a pair) per kept box.
            let flops = 2.0 * n * n.max(2.0).log2() + 12.0 * n * kept;
            KernelCost::vector(flops, 20.0 * n + 4.0 * kept + 9.0 * n)
        })
        .kernel(nms)
        .register(kernels, ops)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_handles_overlap_disjoint_empty_and_flipped_boxes() {
        let a = [0.0, 0.0, 2.0, 2.0];
        assert_eq!(iou(&a, &a), 1.0);
        assert_eq!(iou(&a, &[1.0, 0.0, 3.0, 2.0]), 2.0 / 6.0);
        assert_eq!(iou(&a, &[5.0, 5.0, 6.0, 6.0]), 0.0);
        assert_eq!(iou(&a, &[1.0, 1.0, 1.0, 3.0]), 0.0);
        assert_eq!(iou(&a, &[2.0, 2.0, 0.0, 0.0]), 1.0);
    }
}
