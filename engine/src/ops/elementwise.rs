//! Element-wise ops on f32: `sigmoid_f32` (detection scores from logits) and `threshold_f32`
//! (keep values above a threshold, zero the rest — a mask for `nonzero`). Both take any shape;
//! the tiling splits the elements over cores and into unified-buffer tiles.

use npusim_components::shape::{OpTiling, Shape, Tiling};
use npusim_components::{KernelCtx, KernelFault, KernelRegistry, NpuResult, OpRegistry, OpShapes};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use super::OpBuilder;
use super::split::{MIN_ELEMS_PER_CORE, Split};

/// Unified-buffer bytes per element: one f32 in, one f32 out.
const UB_PER_ELEM: u64 = 8;

/// The output has the input's shape.
pub(crate) fn same_shape(inputs: &[Shape], _: &[u64], out: &mut [Shape]) -> Result<(), String> {
    out[0] = inputs[0];
    Ok(())
}

/// Tiling of an element-wise pass over the first input.
pub(crate) fn unary_tiling(s: &OpShapes<'_>, cfg: &DeviceConfig) -> Result<Tiling, String> {
    let split = Split::new(s.inputs[0].numel(), UB_PER_ELEM, 8, MIN_ELEMS_PER_CORE, cfg)?;
    Ok(split
        .encode(Tiling::new(split.block_dim, split.key()))
        .with_buffers(split.ub_bytes(UB_PER_ELEM), 0))
}

fn unary(
    k: &mut KernelCtx<'_>,
    t: &OpTiling<'_>,
    f: impl Fn(f32) -> f32,
) -> Result<(), KernelFault> {
    let (x, y) = (k.ptr(0)?, k.ptr(1)?);
    let split = Split::decode(t, 0, k.block_dim);
    for b in 0..k.block_dim {
        for (start, len) in split.tiles(b) {
            let mut v = k.load::<f32>(x + start * 4, len as usize)?;
            for e in &mut v {
                *e = f(*e);
            }
            k.store(y + start * 4, &v)?;
        }
    }
    Ok(())
}

pub(crate) fn register(kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<()> {
    OpBuilder::new("sigmoid_f32")
        .input("x", 4)
        .output("y", 4)
        .infer(same_shape)
        .tiling(unary_tiling)
        .cost(|s, _| {
            let n = s.inputs[0].numel() as f64;
            KernelCost::vector(4.0 * n, 8.0 * n)
        })
        .kernel(|k, t| unary(k, t, |v| 1.0 / (1.0 + (-v).exp())))
        .register(kernels, ops)?;
    OpBuilder::new("threshold_f32")
        .input("x", 4)
        .output("y", 4)
        .attr("threshold")
        .infer(same_shape)
        .tiling(unary_tiling)
        .cost(|s, _| {
            let n = s.inputs[0].numel() as f64;
            KernelCost::vector(n, 8.0 * n)
        })
        .kernel(|k, t| {
            let th = k.f32(2)?;
            unary(k, t, |v| if v > th { v } else { 0.0 })
        })
        .register(kernels, ops)?;
    Ok(())
}
