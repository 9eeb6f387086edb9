//! `matmul_f32`: `c [m, n] = a [m, k] · b [k, n]` on the cube unit, for an `m` known only on the
//! device (a sequence length, a box count).
//!
//! Tiling: the output is cut into `bm × bn` base blocks, the reduction into `bk` slices, sized
//! so an `a` slice fits L0A, a `b` slice L0B and the accumulator L0C, with both operand slices
//! double-buffered in L1. Base blocks go round-robin to up to all cores. Keys: 1 one block,
//! 2 blocks along `n` only, 3 along `m` only, 4 both (0: empty output).

use npusim_components::shape::{OpTiling, Shape, Tiling};
use npusim_components::{KernelCtx, KernelFault, KernelRegistry, NpuResult, OpRegistry, OpShapes};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::KernelCost;

use super::OpBuilder;

fn infer(inputs: &[Shape], _: &[u64], out: &mut [Shape]) -> Result<(), String> {
    let (a, b) = (inputs[0], inputs[1]);
    if a.rank() != 2 || b.rank() != 2 {
        return Err(format!("a and b must be matrices, got {a} and {b}"));
    }
    if a.dims()[1] != b.dims()[0] {
        return Err(format!("inner dims differ: {a} · {b}"));
    }
    out[0] = Shape::new(&[a.dims()[0], b.dims()[1]]).map_err(super::msg)?;
    Ok(())
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// The base block sizes `(bm, bn, bk)` for an `m × n × k` product on `cfg`.
pub fn base_blocks(m: u64, n: u64, k: u64, cfg: &DeviceConfig) -> (u64, u64, u64) {
    let mut bm = round_up(m.max(1), 16).min(128);
    let mut bn = round_up(n.max(1), 16).min(128);
    let mut bk = round_up(k.max(1), 8).min(64);
    let fits = |bm: u64, bn: u64, bk: u64| {
        bm * bk * 4 <= cfg.l0a_bytes as u64
            && bk * bn * 4 <= cfg.l0b_bytes as u64
            && bm * bn * 4 <= cfg.l0c_bytes as u64
            && 2 * (bm * bk + bk * bn) * 4 <= cfg.l1_bytes as u64
    };
    // Presets with small L0 buffers: halve the largest dimension until the blocks fit.
    while !fits(bm, bn, bk) && (bm > 16 || bn > 16 || bk > 8) {
        if bk >= bm.max(bn) / 2 && bk > 8 {
            bk /= 2;
        } else if bm >= bn && bm > 16 {
            bm /= 2;
        } else if bn > 16 {
            bn /= 2;
        } else {
            bk = (bk / 2).max(8);
        }
    }
    (bm, bn, bk)
}

fn tiling(s: &OpShapes<'_>, cfg: &DeviceConfig) -> Result<Tiling, String> {
    let (a, b) = (s.inputs[0], s.inputs[1]);
    let (m, k, n) = (a.dims()[0], a.dims()[1], b.dims()[1]);
    if m.max(n).max(k) > u32::MAX as u64 {
        return Err(format!("{m}×{k}·{k}×{n}: dims past 2^32 are not supported"));
    }
    let (bm, bn, bk) = base_blocks(m, n, k, cfg);
    let (mb, nb) = (m.div_ceil(bm), n.div_ceil(bn));
    let blocks = mb * nb;
    let key = match (mb, nb) {
        _ if blocks == 0 => 0,
        (1, 1) => 1,
        (1, _) => 2,
        (_, 1) => 3,
        _ => 4,
    };
    let block_dim = blocks.clamp(1, cfg.ai_cores as u64) as u32;
    let l1 = 2 * (bm * bk + bk * bn) * 4;
    Ok(Tiling::new(block_dim, key)
        .push(m as u32)
        .push(n as u32)
        .push(k as u32)
        .push(bm as u32)
        .push(bn as u32)
        .push(bk as u32)
        .push(mb as u32)
        .push(nb as u32)
        .with_buffers(0, l1))
}

fn matmul(kc: &mut KernelCtx<'_>, t: &OpTiling<'_>) -> Result<(), KernelFault> {
    let (a, b, c) = (kc.ptr(0)?, kc.ptr(1)?, kc.ptr(2)?);
    let [m, n, k, bm, bn, bk, mb, nb] = std::array::from_fn(|i| t.word(i) as usize);
    let bv = kc.load::<f32>(b, k * n)?;
    let blocks = mb * nb;
    let cores = kc.block_dim as usize;
    let mut tile = Vec::new();
    for core in 0..cores {
        for blk in (core..blocks).step_by(cores.max(1)) {
            let (m0, n0) = ((blk / nb) * bm, (blk % nb) * bn);
            let (m1, n1) = ((m0 + bm).min(m), (n0 + bn).min(n));
            let av = kc.load::<f32>(a + (m0 * k * 4) as u64, (m1 - m0) * k)?;
            let w = n1 - n0;
            tile.clear();
            tile.resize((m1 - m0) * w, 0.0f32);
            // Accumulate over bk slices, as the cube does in L0C.
            for k0 in (0..k).step_by(bk.max(1)) {
                let k1 = (k0 + bk).min(k);
                for i in 0..m1 - m0 {
                    let row = &mut tile[i * w..(i + 1) * w];
                    for p in k0..k1 {
                        let aip = av[i * k + p];
                        for (cj, bj) in row.iter_mut().zip(&bv[p * n + n0..p * n + n1]) {
                            *cj += aip * bj;
                        }
                    }
                }
            }
            for i in 0..m1 - m0 {
                kc.store(
                    c + (((m0 + i) * n + n0) * 4) as u64,
                    &tile[i * w..(i + 1) * w],
                )?;
            }
        }
    }
    Ok(())
}

pub(crate) fn register(kernels: &mut KernelRegistry, ops: &mut OpRegistry) -> NpuResult<()> {
    OpBuilder::new("matmul_f32")
        .input("a", 4)
        .input("b", 4)
        .output("c", 4)
        .infer(infer)
        .tiling(tiling)
        .cost(|s, _| {
            let (m, k) = (s.inputs[0].dims()[0] as f64, s.inputs[0].dims()[1] as f64);
            let n = s.inputs[1].dims()[1] as f64;
            KernelCost::cube_f32(2.0 * m * n * k, 4.0 * (m * k + k * n + m * n))
        })
        .kernel(matmul)
        .register(kernels, ops)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_blocks_fit_l0_and_l1_of_small_presets() {
        let tiny = DeviceConfig {
            l0a_bytes: 4 << 10,
            l0b_bytes: 4 << 10,
            l0c_bytes: 8 << 10,
            l1_bytes: 16 << 10,
            ..DeviceConfig::small()
        };
        for cfg in [DeviceConfig::default(), tiny] {
            for (m, n, k) in [(1, 1, 1), (5, 300, 77), (4096, 4096, 4096)] {
                let (bm, bn, bk) = base_blocks(m, n, k, &cfg);
                assert!(bm * bk * 4 <= cfg.l0a_bytes as u64);
                assert!(bk * bn * 4 <= cfg.l0b_bytes as u64);
                assert!(bm * bn * 4 <= cfg.l0c_bytes as u64);
                assert!(2 * (bm * bk + bk * bn) * 4 <= cfg.l1_bytes as u64);
            }
        }
    }
}
