//! Per-box ops on `boxes [n, 4]` (`x1, y1, x2, y2`): `box_area_f32` → `area [n]` and
//! `box_scale_f32` (`sx`, `sy`) → boxes in another coordinate frame (normalized → pixels).
//! They run on however many boxes the producer (NMS, gather) actually left.

use npusim_components::shape::{OpTiling, Shape, Tiling};
use npusim_components::{KernelCtx, KernelFault, KernelRegistry, NpuResult, OpRegistry, OpShapes};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use super::OpBuilder;
use super::split::Split;

fn check_boxes(b: &Shape) -> Result<u64, String> {
    if b.rank() != 2 || b.dim(1) != Some(4) {
        return Err(format!("boxes must be [n, 4], got {b}"));
    }
    Ok(b.dims()[0])
}

fn box_tiling(s: &OpShapes<'_>, cfg: &DeviceConfig, ub_per_box: u64) -> Result<Tiling, String> {
    let n = check_boxes(&s.inputs[0])?;
    let split = Split::new(n, ub_per_box, 8, 512, cfg)?;
    Ok(split
        .encode(Tiling::new(split.block_dim, split.key()))
        .with_buffers(split.ub_bytes(ub_per_box), 0))
}

fn per_box(
    k: &mut KernelCtx<'_>,
    t: &OpTiling<'_>,
    out_per_box: usize,
    f: impl Fn(&[f32], &mut Vec<f32>),
) -> Result<(), KernelFault> {
    let (boxes, out) = (k.ptr(0)?, k.ptr(1)?);
    let split = Split::decode(t, 0, k.block_dim);
    let mut res = Vec::new();
    for b in 0..k.block_dim {
        for (start, len) in split.tiles(b) {
            let v = k.load::<f32>(boxes + start * 16, len as usize * 4)?;
            res.clear();
            for bx in v.chunks_exact(4) {
                f(bx, &mut res);
            }
            k.store(out + start * 4 * out_per_box as u64, &res)?;
        }
    }
    Ok(())
}

pub(crate) fn register(kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<()> {
    OpBuilder::new("box_area_f32")
        .input("boxes", 4)
        .output("area", 4)
        .infer(|inputs, _, out| {
            let n = check_boxes(&inputs[0])?;
            out[0] = Shape::new(&[n]).map_err(super::msg)?;
            Ok(())
        })
        .tiling(|s, cfg| box_tiling(s, cfg, 20))
        .cost(|s, _| {
            let n = s.inputs[0].numel() as f64 / 4.0;
            KernelCost::vector(5.0 * n, 20.0 * n)
        })
        .kernel(|k, t| {
            per_box(k, t, 1, |b, out| {
                out.push((b[2] - b[0]).abs() * (b[3] - b[1]).abs());
            })
        })
        .register(kernels, ops)?;
    OpBuilder::new("box_scale_f32")
        .input("boxes", 4)
        .output("scaled", 4)
        .attr("sx")
        .attr("sy")
        .infer(|inputs, _, out| {
            check_boxes(&inputs[0])?;
            out[0] = inputs[0];
            Ok(())
        })
        .tiling(|s, cfg| box_tiling(s, cfg, 32))
        .cost(|s, _| {
            let n = s.inputs[0].numel() as f64 / 4.0;
            KernelCost::vector(4.0 * n, 32.0 * n)
        })
        .kernel(|k, t| {
            let (sx, sy) = (k.f32(2)?, k.f32(3)?);
            per_box(k, t, 4, |b, out| {
                out.extend_from_slice(&[b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy]);
            })
        })
        .register(kernels, ops)?;
    Ok(())
}
