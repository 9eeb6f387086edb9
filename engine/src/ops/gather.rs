//! `gather_rows`: `out[i, ...] = table[indices[i], ...]` for 4-byte elements — embedding lookup,
//! and the consumer that takes a dynamic count (the indices from `nonzero` or `nms`) and moves
//! exactly that many rows. `out`'s shape is `indices`' shape followed by `table`'s row shape.
//! An index outside the table faults the task.
//!
//! Tiling: rows are split over cores; a core loads a tile of indices and the rows they name
//! into its unified buffer (key 1 or 2). A row too long for the buffer is copied in column
//! tiles instead (key 3).

use npusim_components::shape::{MAX_RANK, OpTiling, Shape, Tiling};
use npusim_components::{KernelCtx, KernelFault, KernelRegistry, NpuResult, OpRegistry, OpShapes};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use super::OpBuilder;
use super::split::{MIN_ELEMS_PER_CORE, SPLIT_WORDS, Split};

/// Key of the column-tiled path (a row does not fit the unified buffer).
pub const KEY_COLUMN_TILES: u32 = 3;

fn infer(inputs: &[Shape], _: &[u64], out: &mut [Shape]) -> Result<(), String> {
    let (table, idx) = (inputs[0], inputs[1]);
    if table.rank() == 0 {
        return Err("table must have at least one dimension".into());
    }
    let rank = idx.rank() + table.rank() - 1;
    if rank > MAX_RANK {
        return Err(format!("output rank {rank} exceeds {MAX_RANK}"));
    }
    let dims: Vec<u64> = idx
        .dims()
        .iter()
        .chain(&table.dims()[1..])
        .copied()
        .collect();
    out[0] = Shape::new(&dims).map_err(super::msg)?;
    Ok(())
}

fn tiling(s: &OpShapes<'_>, cfg: &DeviceConfig) -> Result<Tiling, String> {
    let (table, idx) = (s.inputs[0], s.inputs[1]);
    let rows = idx.numel();
    let width = table.row_len();
    if width > u32::MAX as u64 {
        return Err(format!(
            "rows of {width} elements are too long for this op's tiling"
        ));
    }
    let row_ub = width * 4 + 4;
    let min_rows = (MIN_ELEMS_PER_CORE / width.max(1)).max(1);
    let (split, key, col_tile, ub) = if row_ub * 2 <= cfg.ub_bytes as u64 {
        let split = Split::new(rows, row_ub, 1, min_rows, cfg)?;
        (split, split.key(), width, split.ub_bytes(row_ub))
    } else {
        // One row at a time per core, copied in column tiles (double-buffered).
        let col_tile = (cfg.ub_bytes as u64).saturating_sub(64) / 8 / 8 * 8;
        let split = Split::new(rows, 1, 1, 1, cfg)?;
        let split = Split {
            tile: split.tile.min(1),
            ..split
        };
        let key = if rows == 0 { 0 } else { KEY_COLUMN_TILES };
        (split, key, col_tile, col_tile * 4 * 2)
    };
    Ok(split
        .encode(Tiling::new(split.block_dim, key))
        .push(width as u32)
        .push_u64(table.dim(0).unwrap_or(0))
        .push(col_tile as u32)
        .with_buffers(ub, 0))
}

fn gather(k: &mut KernelCtx<'_>, t: &OpTiling<'_>) -> Result<(), KernelFault> {
    let (table, idx, out) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?);
    let split = Split::decode(t, 0, k.block_dim);
    let width = t.word(SPLIT_WORDS) as u64;
    let rows = t.u64_at(SPLIT_WORDS + 1);
    let col_tile = (t.word(SPLIT_WORDS + 3) as u64).max(1);
    let row_bytes = width * 4;
    for b in 0..k.block_dim {
        for (start, len) in split.tiles(b) {
            let ids = k.load::<i32>(idx + start * 4, len as usize)?;
            for (r, &id) in ids.iter().enumerate() {
                let pos = start + r as u64;
                if id < 0 || id as u64 >= rows {
                    return Err(KernelFault::BadArgs(format!(
                        "gather_rows: index {id} at position {pos} is outside the table's {rows} rows"
                    )));
                }
                let (src, dst) = (table + id as u64 * row_bytes, out + pos * row_bytes);
                let mut c = 0;
                while c < width {
                    let n = col_tile.min(width - c);
                    let v = k.load::<u32>(src + c * 4, n as usize)?;
                    k.store(dst + c * 4, &v)?;
                    c += n;
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn register(kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<()> {
    OpBuilder::new("gather_rows")
        .input("table", 4)
        .input("indices", 4)
        .output("out", 4)
        .infer(infer)
        .tiling(tiling)
        .cost(|s, _| {
            let rows = s.inputs[1].numel() as f64;
            let width = s.inputs[0].row_len() as f64;
            KernelCost::vector(0.0, rows * (8.0 * width + 4.0))
        })
        .kernel(gather)
        .register(kernels, ops)?;
    Ok(())
}
