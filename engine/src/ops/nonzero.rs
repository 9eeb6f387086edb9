//! `nonzero_f32` / `nonzero_i32`: the flat indices (as `i32`) of an input's nonzero elements —
//! the canonical op whose output shape only the data decides. Its output buffer is sized for
//! an upper bound; the kernel counts, checks the count against the buffer, writes the indices
//! and publishes `[count]` into the output's shape slot.
//!
//! Like a real NPU implementation it runs in two phases: each core counts the nonzeros of its
//! range (the per-core counts live in the workspace), then an exclusive scan of those counts
//! gives each core the offset where it writes its indices.

use npusim_components::shape::{OpTiling, Shape, Tiling, publish_shape};
use npusim_components::{KernelCtx, KernelFault, KernelRegistry, NpuResult, OpRegistry};
use npusim_device::cost::KernelCost;

use super::split::{MIN_ELEMS_PER_CORE, Split};
use super::{OpBuilder, exceeds};

/// Unified-buffer bytes per element: the input word and (at worst) one index out.
const UB_PER_ELEM: u64 = 8;

fn nonzero(
    k: &mut KernelCtx<'_>,
    t: &OpTiling<'_>,
    name: &str,
    is_nonzero: fn(u32) -> bool,
) -> Result<(), KernelFault> {
    let (x, out) = (k.ptr(0)?, k.ptr(1)?);
    let split = Split::decode(t, 0, k.block_dim);
    // Phase 1: every core gathers the indices of its range, tile by tile.
    let mut per_core: Vec<Vec<i32>> = Vec::with_capacity(k.block_dim as usize);
    for b in 0..k.block_dim {
        let mut found = Vec::new();
        for (start, len) in split.tiles(b) {
            let v = k.load::<u32>(x + start * 4, len as usize)?;
            found.extend(
                v.iter()
                    .enumerate()
                    .filter(|(_, w)| is_nonzero(**w))
                    .map(|(i, _)| (start + i as u64) as i32),
            );
        }
        per_core.push(found);
    }
    // Phase 2: the scan of the counts; nothing is written unless all of it fits.
    let count: u64 = per_core.iter().map(|v| v.len() as u64).sum();
    let shape = Shape::new(&[count]).map_err(|e| KernelFault::Raised(Box::new(e)))?;
    if count * 4 > t.out_capacity() {
        return Err(exceeds(name, "indices", &shape, 4, t.out_capacity()));
    }
    let mut offset = 0u64;
    for found in &per_core {
        k.store(out + offset * 4, found)?;
        offset += found.len() as u64;
    }
    publish_shape(k, t.out_slot(), &shape)
}

fn register_one(
    kernels: &mut KernelRegistry,
    ops: &mut OpRegistry,
    name: &'static str,
    is_nonzero: fn(u32) -> bool,
) -> NpuResult<()> {
    OpBuilder::new(name)
        .input("x", 4)
        .data_dependent_output("indices", 4)
        .infer(|inputs, _, out| {
            let n = inputs[0].numel();
            if n > i32::MAX as u64 {
                return Err(format!("{n} elements: indices are i32"));
            }
            out[0] = Shape::new(&[n]).map_err(super::msg)?;
            Ok(())
        })
        .tiling(|s, cfg| {
            let split = Split::new(s.inputs[0].numel(), UB_PER_ELEM, 8, MIN_ELEMS_PER_CORE, cfg)?;
            Ok(split
                .encode(Tiling::new(split.block_dim, split.key()))
                .with_buffers(split.ub_bytes(UB_PER_ELEM), 0)
                // Per-core counts for the scan.
                .with_workspace(split.block_dim as u64 * 8))
        })
        .cost(|s, _| {
            let n = s.inputs[0].numel() as f64;
            // Count pass and write pass over the input; indices out at most once.
            KernelCost::vector(2.0 * n, 12.0 * n)
        })
        .kernel(move |k, t| nonzero(k, t, name, is_nonzero))
        .register(kernels, ops)?;
    Ok(())
}

pub(crate) fn register(kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<()> {
    register_one(kernels, ops, "nonzero_f32", |w| f32::from_bits(w) != 0.0)?;
    register_one(kernels, ops, "nonzero_i32", |w| w != 0)
}
