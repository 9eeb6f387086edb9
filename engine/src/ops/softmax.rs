//! `softmax_f32`: softmax over the last dimension, for any number of rows (a dynamic sequence
//! length). Rows go to cores; a core holds a tile of whole rows in its unified buffer (key 1 or
//! 2). A row too long for the buffer is done in three passes over column tiles — max, sum of
//! exponentials, normalize (key 3). Both paths sum in the same order, so they agree exactly.

use npusim_components::shape::{OpTiling, Tiling};
use npusim_components::{KernelCtx, KernelFault, KernelRegistry, NpuResult, OpRegistry, OpShapes};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use super::OpBuilder;
use super::elementwise::same_shape;
use super::split::{MIN_ELEMS_PER_CORE, SPLIT_WORDS, Split};

/// Key of the three-pass path for rows longer than the unified buffer.
pub const KEY_LONG_ROWS: u32 = 3;

fn rows_cols(s: &OpShapes<'_>) -> (u64, u64) {
    let x = s.inputs[0];
    let cols = x.dims().last().copied().unwrap_or(1);
    let rows = x.numel().checked_div(cols).unwrap_or(0);
    (rows, cols)
}

fn tiling(s: &OpShapes<'_>, cfg: &DeviceConfig) -> Result<Tiling, String> {
    let (rows, cols) = rows_cols(s);
    // A row in and a row out.
    let row_ub = cols * 8;
    let (split, key, col_tile, ub) = if row_ub * 2 <= cfg.ub_bytes as u64 {
        let split = Split::new(
            rows,
            row_ub,
            1,
            (MIN_ELEMS_PER_CORE / cols.max(1)).max(1),
            cfg,
        )?;
        (split, split.key(), cols, split.ub_bytes(row_ub))
    } else {
        let col_tile = (cfg.ub_bytes as u64 / 16) / 8 * 8;
        let split = Split::new(rows, 1, 1, 1, cfg)?;
        let split = Split {
            tile: split.tile.min(1),
            ..split
        };
        (
            split,
            if rows == 0 { 0 } else { KEY_LONG_ROWS },
            col_tile,
            col_tile * 16,
        )
    };
    Ok(split
        .encode(Tiling::new(split.block_dim, key))
        .push_u64(cols)
        .push(col_tile.min(u32::MAX as u64) as u32)
        .with_buffers(ub, 0))
}

/// Softmax of one row in place: the reference order of operations.
fn softmax_row(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for e in row.iter_mut() {
        *e = (*e - max).exp();
        sum += *e;
    }
    for e in row.iter_mut() {
        *e /= sum;
    }
}

fn softmax(k: &mut KernelCtx<'_>, t: &OpTiling<'_>) -> Result<(), KernelFault> {
    let (x, y) = (k.ptr(0)?, k.ptr(1)?);
    let split = Split::decode(t, 0, k.block_dim);
    let cols = t.u64_at(SPLIT_WORDS);
    let col_tile = (t.word(SPLIT_WORDS + 2) as u64).max(1);
    let row_bytes = cols * 4;
    for b in 0..k.block_dim {
        for (start, len) in split.tiles(b) {
            if t.key() != KEY_LONG_ROWS {
                let mut v = k.load::<f32>(x + start * row_bytes, (len * cols) as usize)?;
                for row in v.chunks_mut(cols.max(1) as usize) {
                    softmax_row(row);
                }
                k.store(y + start * row_bytes, &v)?;
                continue;
            }
            for r in start..start + len {
                let (src, dst) = (x + r * row_bytes, y + r * row_bytes);
                let chunks = || {
                    (0..cols)
                        .step_by(col_tile as usize)
                        .map(move |c| (c, col_tile.min(cols - c)))
                };
                let mut max = f32::NEG_INFINITY;
                for (c, n) in chunks() {
                    max = k
                        .load::<f32>(src + c * 4, n as usize)?
                        .into_iter()
                        .fold(max, f32::max);
                }
                let mut sum = 0.0f32;
                for (c, n) in chunks() {
                    for e in k.load::<f32>(src + c * 4, n as usize)? {
                        sum += (e - max).exp();
                    }
                }
                for (c, n) in chunks() {
                    let mut v = k.load::<f32>(src + c * 4, n as usize)?;
                    for e in &mut v {
                        *e = (*e - max).exp() / sum;
                    }
                    k.store(dst + c * 4, &v)?;
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn register(kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<()> {
    OpBuilder::new("softmax_f32")
        .input("x", 4)
        .output("y", 4)
        .infer(|inputs, attrs, out| {
            if inputs[0].rank() == 0 {
                return Err("x must have at least one dimension".into());
            }
            same_shape(inputs, attrs, out)
        })
        .tiling(tiling)
        .cost(|s, t| {
            let n = s.inputs[0].numel() as f64;
            let passes = if t.key == KEY_LONG_ROWS { 3.0 } else { 1.0 };
            KernelCost::vector(5.0 * n, 4.0 * n * (passes + 1.0))
        })
        .kernel(softmax)
        .register(kernels, ops)?;
    Ok(())
}
