//! From blocks to a launch: how long a kernel launch takes once each of its blocks has run on
//! a core. Blocks go to cores round-robin (block `b` on core `b % cores`), a core runs its
//! blocks back to back, and the launch ends when the busiest core does — unless the device's
//! HBM cannot deliver the launch's traffic that fast. That traffic is the union of the blocks'
//! global-memory footprints: bytes several blocks read come from L2 after the first time.
//!
//! ```
//! use npusim_device::config::DeviceConfig;
//! use npusim_device::core::npu::launch::LaunchModel;
//! use npusim_device::core::{Footprint, RunStats};
//!
//! let model = LaunchModel::from_device(&DeviceConfig::ascend_910b());
//! let block = RunStats { block_cycles: 1000, ..RunStats::default() };
//! let fp = Footprint::default();
//! let est = model.estimate([(&block, &fp), (&block, &fp)]);
//! assert_eq!(est.cycles, 1000); // two blocks on two of the 24 cores
//! ```

use super::config::PerCycle;
use super::footprint::Footprint;
use super::isa::{CopyDir, OPCODE_CUBE, OPCODE_MOVE};
use super::pipes::PipeCycles;
use crate::config::DeviceConfig;
use crate::core::Program;
use crate::core::RunStats;

/// Whether `program` has no cube-side instruction (no cube op, no copy into L0A / L0B / BT,
/// none out of L0C): a vector-only kernel, which the 910B runs on its AIV cores.
pub fn is_vector_only(program: &Program) -> bool {
    // GM -> L1 alone does not need the cube: Ascend C's DataCopy picks UB or L1 by the
    // tensor's position at run time, so every vector kernel carries a GM -> L1 copy it never
    // runs. A kernel that really feeds the cube also moves L1 -> L0A / L0B.
    let cube_side = [
        CopyDir::L1ToL0a,
        CopyDir::L1ToL0b,
        CopyDir::L0cToGm,
        CopyDir::L1ToBt,
        CopyDir::L0cToUb,
    ];
    let mut pc = program.base();
    while pc < program.end() {
        let w = program.word_at(pc);
        let f3 = (w >> 12) & 7;
        match w & 0x7f {
            OPCODE_CUBE => return false,
            OPCODE_MOVE if cube_side.iter().any(|d| *d as u32 == f3) => return false,
            _ => {}
        }
        pc += 4;
    }
    true
}

/// The cores a binary launch's blocks are spread over when the scheduler gave it `ai_cores`
/// AI cores: a vector-only kernel on a device with AIV cores gets the AIVs of those AI cores
/// ([`DeviceConfig::vector_cores_per_ai_core`] each); anything else the AI cores themselves.
pub fn launch_cores(cfg: &DeviceConfig, ai_cores: u32, vector_only: bool) -> u32 {
    if vector_only && cfg.vector_cores_per_ai_core > 0 {
        ai_cores.saturating_mul(cfg.vector_cores_per_ai_core)
    } else {
        ai_cores
    }
}

/// The cycles a `sync_all` costs once the last of its blocks has arrived: a round trip through
/// global memory (the barrier's flag written by the last block and read by the others).
pub const SYNC_ALL_CYCLES: u64 = 2 * super::GM_LATENCY_CYCLES as u64;

/// What the launch-level estimate needs of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchModel {
    /// AI cores the blocks are spread over.
    pub cores: u32,
    /// Blocks that run side by side on one AI core, taking as long as the slowest of them:
    /// 1, or a split mix kernel's cube block and its vector blocks (consecutive in block
    /// order).
    pub group: u32,
    /// The whole device's HBM bandwidth, bytes per core cycle.
    pub hbm_bytes_per_cycle: PerCycle,
    /// Core clock, to turn cycles into seconds.
    pub clock_hz: u64,
}

/// A launch's simulated time and where it went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchEstimate {
    /// The launch's time in core cycles: the larger of the two below.
    pub cycles: u64,
    /// The busiest core's sum of block cycles.
    pub busiest_core_cycles: u64,
    /// The distinct bytes the launch moved (reads plus writes) over the HBM bandwidth.
    pub hbm_floor_cycles: u64,
    /// Distinct bytes read plus distinct bytes written.
    pub hbm_bytes: u64,
    /// Blocks.
    pub blocks: u32,
    /// Busy cycles per pipe, summed over blocks.
    pub pipe_busy: PipeCycles,
    /// The launch's time in seconds.
    pub seconds: f64,
}

impl LaunchModel {
    /// All of `cfg`'s cores and its HBM.
    pub fn from_device(cfg: &DeviceConfig) -> LaunchModel {
        LaunchModel {
            cores: cfg.ai_cores.max(1),
            group: 1,
            hbm_bytes_per_cycle: PerCycle::from_f64(
                cfg.hbm_bandwidth / cfg.core_clock_hz.max(1) as f64,
            ),
            clock_hz: cfg.core_clock_hz.max(1),
        }
    }

    /// The estimate for blocks `0, 1, …` with these statistics and footprints.
    pub fn estimate<'a>(
        &self,
        blocks: impl IntoIterator<Item = (&'a RunStats, &'a Footprint)>,
    ) -> LaunchEstimate {
        let mut union = Footprint::default();
        let mut est = LaunchEstimate::default();
        let mut block_cycles = Vec::new();
        for (stats, fp) in blocks {
            block_cycles.push(stats.block_cycles);
            union.merge(fp);
            est.pipe_busy.add(&stats.pipe_busy);
            est.blocks += 1;
        }
        est.busiest_core_cycles = self.busiest_core(&block_cycles);
        est.hbm_bytes = union.read_bytes() + union.write_bytes();
        est.hbm_floor_cycles = self.hbm_bytes_per_cycle.cycles_for(est.hbm_bytes);
        est.cycles = est.busiest_core_cycles.max(est.hbm_floor_cycles);
        est.seconds = est.cycles as f64 / self.clock_hz as f64;
        est
    }

    /// The launch's cycles from its blocks' cycles (in block order) and its distinct HBM
    /// bytes, as [`LaunchModel::estimate`] reckons them: the busiest core's blocks or the HBM
    /// floor. A replay without data prices a recorded launch with it.
    pub fn cycles_from(&self, block_cycles: &[u64], hbm_bytes: u64) -> u64 {
        self.busiest_core(block_cycles)
            .max(self.hbm_bytes_per_cycle.cycles_for(hbm_bytes))
    }

    /// The busiest AI core's cycles: group `g` of [`LaunchModel::group`] consecutive blocks
    /// runs on core `g % cores` and takes as long as its slowest block.
    fn busiest_core(&self, block_cycles: &[u64]) -> u64 {
        let cores = self.cores.max(1) as usize;
        let mut per_core = vec![0u64; cores];
        for (g, blocks) in block_cycles.chunks(self.group.max(1) as usize).enumerate() {
            per_core[g % cores] += blocks.iter().copied().max().unwrap_or(0);
        }
        per_core.into_iter().max().unwrap_or(0)
    }
}
