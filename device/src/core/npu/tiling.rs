//! Tiling for the extension's example kernels (`examples/kernels/ext_*.c`): the tiling words
//! each kernel reads through `CSR_TILING`, as `#[repr(C)]` structs laid out exactly like the C
//! structs in the kernels' headers (pass `bytemuck::bytes_of(&tiling)` to the launch), and the
//! functions that choose them for a shape, a block count and a core configuration.
//!
//! All kernels split their work over `npu_block_range`: contiguous, nearly equal runs, the
//! first `n % block_dim` blocks one item longer.

use bytemuck::{Pod, Zeroable};

use super::config::{NpuConfig, NpuTiming};
use super::layout::{Buffer, pitch};

/// Entry symbol of the single-buffered vector add.
pub const EXT_VADD_SINGLE: &str = "ext_vadd_single";
/// Entry symbol of the double-buffered vector add.
pub const EXT_VADD_DOUBLE: &str = "ext_vadd_double";
/// Entry symbol of the row softmax.
pub const EXT_SOFTMAX: &str = "ext_softmax";
/// Entry symbol of the layer norm.
pub const EXT_LAYERNORM: &str = "ext_layernorm";
/// Entry symbol of the f16 matmul.
pub const EXT_MATMUL_F16: &str = "ext_matmul_f16";

/// Why a shape cannot be tiled for a kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TilingError {
    /// A row does not fit in (half of) the unified buffer.
    #[error("rows of {cols} f32 do not fit in UB; at most {max} columns")]
    RowTooLong {
        /// Columns asked for.
        cols: u64,
        /// The most this core's UB allows.
        max: u64,
    },
    /// A dimension is past what the kernel's tiling words can hold.
    #[error("dimension {what} = {value} is too large (at most {max})")]
    TooLarge {
        /// Which dimension.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The limit.
        max: u64,
    },
    /// No tile fits in the local buffers (they are configured too small).
    #[error("no matmul tile fits in this core's local buffers")]
    NoFit,
}

/// Tiling words of `ext_vadd_single` / `ext_vadd_double` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct VaddTiling {
    /// Elements in x, y and z.
    pub total: u64,
    /// Elements per tile, a multiple of 8.
    pub tile: u32,
    /// Zero.
    pub reserved: u32,
}

/// How many UB slots a vector kernel cycles through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffering {
    /// One tile in flight (`ext_vadd_single`).
    Single,
    /// Two tiles in flight (`ext_vadd_double`).
    Double,
}

/// Tiling words of `ext_softmax` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SoftmaxTiling {
    /// Rows.
    pub rows: u32,
    /// Columns (elements per row).
    pub cols: u32,
    /// Rows per UB tile, at least 1.
    pub rows_per_tile: u32,
    /// UB row pitch in elements: `cols` rounded up to 8.
    pub pitch: u32,
    /// Zero.
    pub reserved: [u32; 2],
}

/// Tiling words of `ext_layernorm` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct LayerNormTiling {
    /// Rows.
    pub rows: u32,
    /// Columns (the normalized axis).
    pub cols: u32,
    /// Rows per UB tile, at least 1.
    pub rows_per_tile: u32,
    /// UB row pitch in elements: `cols` rounded up to 8.
    pub pitch: u32,
    /// Added to the variance.
    pub eps: f32,
    /// Zero.
    pub reserved: u32,
}

/// Tiling words of `ext_matmul_f16` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct MatmulTiling {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Output tile rows, a multiple of 16.
    pub tm: u32,
    /// Output tile columns, a multiple of 16.
    pub tn: u32,
    /// K per L1 stage, a multiple of `tk0`.
    pub tk1: u32,
    /// K per cube instruction, a multiple of 16.
    pub tk0: u32,
    /// 1: the A panel of a tile row stays in L1.
    pub a_resident: u32,
    /// L0C tiles in flight: 1 or 2.
    pub l0c_buffers: u32,
    /// Zero.
    pub reserved: [u32; 3],
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

fn check_u32(what: &'static str, value: u64) -> Result<u32, TilingError> {
    u32::try_from(value).map_err(|_| TilingError::TooLarge {
        what,
        value,
        max: u32::MAX as u64,
    })
}

/// Tiling of the vector add for `total` elements over `blocks` blocks. Single buffering
/// takes the largest tile (fewest round trips); double buffering aims for at least four tiles
/// per block so loads, adds and stores overlap, with tiles no smaller than 512 elements.
pub fn vadd(total: u64, blocks: u32, buffering: Buffering, cfg: &NpuConfig) -> VaddTiling {
    let slots = match buffering {
        Buffering::Single => 1,
        Buffering::Double => 2,
    };
    let ub = cfg.buffers.of(Buffer::Ub) as u64;
    let max_tile = (ub / (12 * slots) / 8 * 8).clamp(8, u32::MAX as u64 / 8 * 8);
    let per_block = round_up(total.div_ceil(8).div_ceil(blocks.max(1) as u64) * 8, 8).max(8);
    let tile = match buffering {
        Buffering::Single => per_block.min(max_tile),
        Buffering::Double => round_up(per_block.div_ceil(4), 8).clamp(512.min(max_tile), max_tile),
    };
    VaddTiling {
        total,
        tile: tile as u32,
        reserved: 0,
    }
}

/// Rows per tile for a row-wise kernel: about a quarter of a block's rows (so the double
/// buffering has tiles to overlap), at most what fits.
fn rows_per_tile(rows: u64, blocks: u32, max_fit: u64) -> u64 {
    rows.div_ceil(blocks.max(1) as u64)
        .div_ceil(4)
        .clamp(1, max_fit.max(1))
}

/// Tiling of the row softmax of a `rows × cols` matrix over `blocks` blocks.
pub fn softmax(rows: u64, cols: u64, blocks: u32, cfg: &NpuConfig) -> Result<SoftmaxTiling, TilingError> {
    let ub = cfg.buffers.of(Buffer::Ub) as u64;
    let pitch = round_up(cols.max(1), 8);
    let per_row = 2 * pitch * 4 + 32;
    let max_fit = ub / per_row;
    if max_fit == 0 {
        return Err(TilingError::RowTooLong {
            cols,
            max: (ub - 32) / 8 / 8 * 8,
        });
    }
    Ok(SoftmaxTiling {
        rows: check_u32("rows", rows)?,
        cols: check_u32("cols", cols)?,
        rows_per_tile: rows_per_tile(rows, blocks, max_fit) as u32,
        pitch: pitch as u32,
        reserved: [0; 2],
    })
}

/// Tiling of the layer norm of a `rows × cols` matrix over `blocks` blocks.
pub fn layernorm(
    rows: u64,
    cols: u64,
    eps: f32,
    blocks: u32,
    cfg: &NpuConfig,
) -> Result<LayerNormTiling, TilingError> {
    let ub = cfg.buffers.of(Buffer::Ub) as u64;
    let pitch = round_up(cols.max(1), 8);
    let fixed = 3 * pitch * 4;
    let per_row = 2 * pitch * 4 + 32;
    let max_fit = ub.saturating_sub(fixed) / per_row;
    if max_fit == 0 {
        return Err(TilingError::RowTooLong {
            cols,
            max: (ub - 32) / 20 / 8 * 8,
        });
    }
    Ok(LayerNormTiling {
        rows: check_u32("rows", rows)?,
        cols: check_u32("cols", cols)?,
        rows_per_tile: rows_per_tile(rows, blocks, max_fit) as u32,
        pitch: pitch as u32,
        eps,
        reserved: 0,
    })
}

/// The block's tile range under `npu_block_range`.
fn block_range(items: u64, blocks: u64, b: u64) -> (u64, u64) {
    let base = items / blocks;
    let extra = items % blocks;
    let start = b * base + b.min(extra);
    (start, start + base + (b < extra) as u64)
}

/// Estimated cycles of one tile of a matmul with tiling `t` (rows × cols of output), on the
/// pipe that bounds it, following the kernel's loop and the unit costs of `timing`.
fn matmul_tile_cycles(t: &MatmulTiling, rows: u64, cols: u64, load_a: bool, timing: &NpuTiming) -> u64 {
    let (k, tk1, tk0) = (t.k as u64, t.tk1 as u64, t.tk0 as u64);
    let gm = |bytes: u64| timing.mte_setup as u64 + timing.gm_bytes_per_cycle.cycles_for(bytes);
    let l1 = |bytes: u64| timing.mte1_setup as u64 + timing.l1_bytes_per_cycle.cycles_for(bytes);
    let pad = |x: u64| round_up(x.max(1), 16);
    let (mut cube, mut mte1, mut mte2) = (0, 0, 0);
    let mut kc = 0;
    while kc < k {
        let kk = tk1.min(k - kc);
        if load_a {
            mte2 += gm(rows * pitch(2 * kk));
        }
        mte2 += gm(kk * pitch(2 * cols));
        let mut ks = 0;
        while ks < kk {
            let k0 = tk0.min(kk - ks);
            mte1 += l1(rows * pitch(2 * k0)) + l1(k0 * pitch(2 * cols));
            cube += timing.cube_startup as u64
                + (pad(rows) * pad(cols) * pad(k0) * 2).div_ceil(timing.cube_f16_flops_per_cycle as u64);
            ks += k0;
        }
        kc += kk;
    }
    let out = gm(rows * pitch(4 * cols)) + timing.gm_latency as u64;
    let steady = cube.max(mte1).max(mte2);
    if t.l0c_buffers >= 2 {
        steady.max(out)
    } else {
        steady + out
    }
}

/// Estimated cycles of the slowest block.
fn matmul_estimate(t: &MatmulTiling, blocks: u64, timing: &NpuTiming) -> u64 {
    let (m, n) = (t.m as u64, t.n as u64);
    let (tm, tn) = (t.tm as u64, t.tn as u64);
    let tiles_n = n.div_ceil(tn);
    let tiles = m.div_ceil(tm) * tiles_n;
    let blocks = blocks.clamp(1, tiles.max(1));
    // Large tile counts: the first and last blocks stand for the rest.
    let which: Vec<u64> = if tiles > 4096 {
        vec![0, blocks - 1]
    } else {
        (0..blocks).collect()
    };
    // Ramp: the first stage's load and latency, and the last tile's write-out.
    let ramp = 2 * timing.gm_latency as u64
        + timing.gm_bytes_per_cycle.cycles_for((tm + t.tk1 as u64 / 2) * pitch(2 * tn));
    which
        .into_iter()
        .map(|b| {
            let (t0, t1) = block_range(tiles, blocks, b);
            let mut prev = u64::MAX;
            let mut sum = if t0 < t1 { ramp } else { 0 };
            for tile in t0..t1 {
                let (mi, ni) = (tile / tiles_n, tile % tiles_n);
                let rows = tm.min(m - mi * tm);
                let cols = tn.min(n - ni * tn);
                let load_a = t.a_resident == 0 || mi != prev;
                prev = mi;
                sum += matmul_tile_cycles(t, rows, cols, load_a, timing);
            }
            sum
        })
        .max()
        .unwrap_or(0)
}

/// Tiling of `C (m × n, f32) = A (m × k, f16) × B (k × n, f16)` over `blocks` blocks: the
/// candidate tile shapes that fit the local buffers, each estimated with the unit costs of
/// `cfg` (per-tile time on the bounding pipe, summed over the slowest block), the fastest
/// kept.
pub fn matmul(m: u64, n: u64, k: u64, blocks: u32, cfg: &NpuConfig) -> Result<MatmulTiling, TilingError> {
    for (what, v) in [("m", m), ("n", n), ("k", k)] {
        if v > u32::MAX as u64 / 2 {
            return Err(TilingError::TooLarge {
                what,
                value: v,
                max: u32::MAX as u64 / 2,
            });
        }
    }
    let size = |b| cfg.buffers.of(b) as u64;
    let (l1, l0a, l0b, l0c) = (size(Buffer::L1), size(Buffer::L0a), size(Buffer::L0b), size(Buffer::L0c));
    let pad = |x: u64| round_up(x.max(1), 16);
    let limit = |full: u64, list: &[u64]| -> Vec<u64> {
        let mut v: Vec<u64> = list.iter().copied().filter(|&x| x < pad(full)).collect();
        if pad(full) <= *list.last().unwrap_or(&0) {
            v.push(pad(full));
        }
        v
    };
    let tms = limit(m, &[16, 32, 64, 96, 128, 192, 256]);
    let tns = limit(n, &[16, 32, 64, 96, 128, 160, 176, 192, 256]);
    let tk0s = limit(k, &[32, 64, 128, 256]);
    let mut best: Option<(u64, MatmulTiling)> = None;
    for &tm in &tms {
        for &tn in &tns {
            for &tk0 in &tk0s {
                if 2 * tm * tk0 * 2 > l0a || 2 * tk0 * tn * 2 > l0b || tm * tn * 4 > l0c {
                    continue;
                }
                for mult in [1, 2, 4] {
                    let tk1 = tk0 * mult;
                    if mult > 1 && tk1 > pad(k) + tk0 {
                        continue;
                    }
                    let stages = k.div_ceil(tk1).max(1);
                    let b_bytes = 2 * tk1 * tn * 2;
                    let resident = stages * tm * tk1 * 2 + b_bytes <= l1;
                    if !resident && 2 * tm * tk1 * 2 + b_bytes > l1 {
                        continue;
                    }
                    let t = MatmulTiling {
                        m: m as u32,
                        n: n as u32,
                        k: k as u32,
                        tm: tm as u32,
                        tn: tn as u32,
                        tk1: tk1 as u32,
                        tk0: tk0 as u32,
                        a_resident: resident as u32,
                        l0c_buffers: if 2 * tm * tn * 4 <= l0c { 2 } else { 1 },
                        reserved: [0; 3],
                    };
                    let est = matmul_estimate(&t, blocks as u64, &cfg.timing);
                    if best.is_none_or(|(b, _)| est < b) {
                        best = Some((est, t));
                    }
                }
            }
        }
    }
    best.map(|(_, t)| t).ok_or(TilingError::NoFit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_match_the_c_layouts() {
        assert_eq!(std::mem::size_of::<VaddTiling>(), 16);
        assert_eq!(std::mem::size_of::<SoftmaxTiling>(), 24);
        assert_eq!(std::mem::size_of::<LayerNormTiling>(), 24);
        assert_eq!(std::mem::size_of::<MatmulTiling>(), 48);
    }

    #[test]
    fn vadd_tiles_fit_ub() {
        let cfg = NpuConfig::default();
        let s = vadd(1 << 20, 24, Buffering::Single, &cfg);
        let d = vadd(1 << 20, 24, Buffering::Double, &cfg);
        assert_eq!(s.tile, 16384);
        assert!(d.tile <= 8192 && d.tile % 8 == 0 && d.tile >= 512);
        assert_eq!(vadd(10, 4, Buffering::Single, &cfg).tile, 8);
    }

    #[test]
    fn row_kernels_reject_rows_that_cannot_fit() {
        let cfg = NpuConfig::default();
        assert!(softmax(4, 24_000, 1, &cfg).is_ok());
        assert!(matches!(softmax(4, 30_000, 1, &cfg), Err(TilingError::RowTooLong { .. })));
        let t = layernorm(1000, 1024, 1e-5, 24, &cfg).unwrap();
        assert_eq!(t.pitch, 1024);
        assert!(t.rows_per_tile >= 1);
    }

    #[test]
    fn matmul_tiles_fit_every_buffer() {
        let cfg = NpuConfig::default();
        for &(m, n, k) in &[(1024, 1024, 1024), (100, 60, 1000), (1, 1, 1), (4096, 16, 8)] {
            let t = matmul(m, n, k, 24, &cfg).unwrap();
            let stages = (k as u32).div_ceil(t.tk1);
            let a_slots = if t.a_resident == 1 { stages } else { 2 };
            assert!(a_slots * t.tm * t.tk1 * 2 + 2 * t.tk1 * t.tn * 2 <= 512 << 10, "{t:?}");
            assert!(2 * t.tm * t.tk0 * 2 <= 64 << 10);
            assert!(2 * t.tk0 * t.tn * 2 <= 64 << 10);
            assert!(t.l0c_buffers * t.tm * t.tn * 4 <= 128 << 10);
            assert_eq!(t.tk1 % t.tk0, 0);
        }
    }
}
