//! How big an AI core's local buffers are and how fast its units run. Everything comes from a
//! [`DeviceConfig`] preset ([`NpuConfig::from_device`]) except the few figures the preset does
//! not carry yet (data-mover setup and latency, the core's port to global memory, the L1→L0
//! bandwidth); those are documented constants here and in `docs/isa.md`.

use super::layout::Buffer;
use crate::abi;
use crate::config::DeviceConfig;

/// A throughput in units (bytes, elements) per cycle, stored as 48.16 fixed point so that
/// configurations stay `Eq` and every derived cycle count is exact integer arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PerCycle(u64);

impl PerCycle {
    /// `v` units per cycle (at least 1/65536).
    pub fn from_f64(v: f64) -> PerCycle {
        let q = (v * 65536.0).round();
        PerCycle(if q.is_finite() && q >= 1.0 {
            q.min(1e18) as u64
        } else {
            1
        })
    }

    /// Whole units per cycle.
    pub const fn whole(v: u32) -> PerCycle {
        PerCycle((v as u64) << 16)
    }

    /// The rate as a float, units per cycle.
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / 65536.0
    }

    /// Cycles to move `amount` units, rounded up.
    pub fn cycles_for(self, amount: u64) -> u64 {
        ((amount as u128 * 65536).div_ceil(self.0.max(1) as u128)).min(u64::MAX as u128) as u64
    }
}

/// The size in bytes of each local buffer. Sizes are rounded down to a multiple of 32 and
/// capped at the 16 MiB window (`abi::LOCAL_BUFFER_WINDOW`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferSizes {
    /// Unified buffer.
    pub ub: u32,
    /// L1 buffer.
    pub l1: u32,
    /// L0A buffer.
    pub l0a: u32,
    /// L0B buffer.
    pub l0b: u32,
    /// L0C buffer.
    pub l0c: u32,
    /// BT buffer (bias table); not in the preset: [`BT_BYTES`] by default.
    pub bt: u32,
}

/// Bytes of the bias table (BT) per core: the Ascend 910B's 1 KiB, 256 f32 bias values.
pub const BT_BYTES: u32 = 1024;

impl BufferSizes {
    /// The preset's sizes (`ub_bytes`, `l1_bytes`, `l0a_bytes`, `l0b_bytes`, `l0c_bytes`).
    pub fn from_device(cfg: &DeviceConfig) -> BufferSizes {
        BufferSizes {
            ub: cfg.ub_bytes,
            l1: cfg.l1_bytes,
            l0a: cfg.l0a_bytes,
            l0b: cfg.l0b_bytes,
            l0c: cfg.l0c_bytes,
            bt: BT_BYTES,
        }
    }

    /// The usable size of `buffer`, after rounding and capping.
    pub fn of(&self, buffer: Buffer) -> u32 {
        let raw = match buffer {
            Buffer::Ub => self.ub,
            Buffer::L1 => self.l1,
            Buffer::L0a => self.l0a,
            Buffer::L0b => self.l0b,
            Buffer::L0c => self.l0c,
            Buffer::Bt => self.bt,
        };
        raw.min(abi::LOCAL_BUFFER_WINDOW as u32) & !(abi::LOCAL_BUFFER_ALIGN as u32 - 1)
    }
}

/// Bytes per cycle of one core's port to global memory (through the device's L2), per data
/// mover. Not in the preset: 128 B/cycle is a 1024-bit port, which is what lets a cube kernel
/// that re-reads its operand panels from L2 keep the cube busy. The device-wide HBM bandwidth
/// still bounds a whole launch: see [`launch`](super::launch).
pub const GM_PORT_BYTES_PER_CYCLE: u32 = 128;
/// Cycles from a global-memory transfer's start until its first data arrives.
pub const GM_LATENCY_CYCLES: u32 = 200;
/// Cycles a data mover spends on each transfer's descriptor before moving data.
pub const MTE_SETUP_CYCLES: u32 = 16;
/// Bytes per cycle of the L1 → L0A/L0B mover.
pub const L1_BYTES_PER_CYCLE: u32 = 256;
/// Cycles the L1 → L0A/L0B mover spends per transfer before moving data.
pub const MTE1_SETUP_CYCLES: u32 = 8;
/// Pipeline fill of every vector instruction, in cycles.
pub const VECTOR_STARTUP_CYCLES: u32 = 4;
/// Pipeline fill of every cube instruction, in cycles.
pub const CUBE_STARTUP_CYCLES: u32 = 8;
/// Instructions each pipe's queue holds before the scalar unit stalls on issuing another.
pub const PIPE_QUEUE_DEPTH: u32 = 32;

/// The timing of the asynchronous units. An instruction occupies its pipe for its
/// *occupancy*; its results become visible *latency* cycles after it starts (occupancy plus
/// the global-memory latency for transfers that touch global memory, occupancy otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NpuTiming {
    /// Each GM data mover's bandwidth (MTE2 in, MTE3 out), bytes per cycle.
    pub gm_bytes_per_cycle: PerCycle,
    /// Extra cycles until a GM transfer's data has landed ([`GM_LATENCY_CYCLES`]).
    pub gm_latency: u32,
    /// Fixed occupancy of each GM transfer ([`MTE_SETUP_CYCLES`]).
    pub mte_setup: u32,
    /// The L1 → L0 mover's bandwidth (MTE1), bytes per cycle.
    pub l1_bytes_per_cycle: PerCycle,
    /// Fixed occupancy of each L1 → L0 transfer ([`MTE1_SETUP_CYCLES`]).
    pub mte1_setup: u32,
    /// f32 elements the vector unit processes per cycle (the preset's
    /// `vector_flops_per_cycle`).
    pub vector_lanes: u32,
    /// Fixed occupancy of each vector instruction ([`VECTOR_STARTUP_CYCLES`]).
    pub vector_startup: u32,
    /// Cube throughput with f16 inputs, flops per cycle (`cube_f16_flops_per_cycle`).
    pub cube_f16_flops_per_cycle: u32,
    /// Cube throughput with f32 inputs, flops per cycle (`cube_f32_flops_per_cycle`).
    pub cube_f32_flops_per_cycle: u32,
    /// Fixed occupancy of each cube instruction ([`CUBE_STARTUP_CYCLES`]).
    pub cube_startup: u32,
    /// Instructions a pipe's queue holds ([`PIPE_QUEUE_DEPTH`], 1..=64).
    pub queue_depth: u32,
}

impl NpuTiming {
    /// Timing for one core of `cfg`, with this module's constants for the figures the preset
    /// does not carry.
    pub fn from_device(cfg: &DeviceConfig) -> NpuTiming {
        NpuTiming {
            gm_bytes_per_cycle: PerCycle::whole(GM_PORT_BYTES_PER_CYCLE),
            gm_latency: GM_LATENCY_CYCLES,
            mte_setup: MTE_SETUP_CYCLES,
            l1_bytes_per_cycle: PerCycle::whole(L1_BYTES_PER_CYCLE),
            mte1_setup: MTE1_SETUP_CYCLES,
            vector_lanes: cfg.vector_flops_per_cycle.max(1),
            vector_startup: VECTOR_STARTUP_CYCLES,
            cube_f16_flops_per_cycle: cfg.cube_f16_flops_per_cycle.max(1),
            cube_f32_flops_per_cycle: cfg.cube_f32_flops_per_cycle.max(1),
            cube_startup: CUBE_STARTUP_CYCLES,
            queue_depth: PIPE_QUEUE_DEPTH,
        }
    }

    /// Like [`NpuTiming::from_device`], but each GM data mover gets only this core's equal
    /// share of the HBM bandwidth (`hbm_bandwidth / ai_cores / core_clock_hz` bytes per
    /// cycle), as if the device had no L2 to serve repeated reads.
    pub fn hbm_share(cfg: &DeviceConfig) -> NpuTiming {
        NpuTiming {
            gm_bytes_per_cycle: PerCycle::from_f64(hbm_share_bytes_per_cycle(cfg)),
            ..NpuTiming::from_device(cfg)
        }
    }
}

/// One core's equal share of the HBM bandwidth, in bytes per core cycle.
pub fn hbm_share_bytes_per_cycle(cfg: &DeviceConfig) -> f64 {
    cfg.hbm_bandwidth / cfg.ai_cores.max(1) as f64 / cfg.core_clock_hz.max(1) as f64
}

/// The NPU extension's configuration: buffer sizes and unit timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NpuConfig {
    /// Sizes of the local buffers.
    pub buffers: BufferSizes,
    /// Timing of the asynchronous units.
    pub timing: NpuTiming,
}

impl NpuConfig {
    /// The configuration of one AI core of `cfg`.
    pub fn from_device(cfg: &DeviceConfig) -> NpuConfig {
        NpuConfig {
            buffers: BufferSizes::from_device(cfg),
            timing: NpuTiming::from_device(cfg),
        }
    }
}

impl Default for NpuConfig {
    fn default() -> Self {
        NpuConfig::from_device(&DeviceConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_round_cycles_up() {
        let r = PerCycle::whole(128);
        assert_eq!(r.cycles_for(0), 0);
        assert_eq!(r.cycles_for(1), 1);
        assert_eq!(r.cycles_for(128), 1);
        assert_eq!(r.cycles_for(129), 2);
        let share = PerCycle::from_f64(hbm_share_bytes_per_cycle(&DeviceConfig::ascend_910b()));
        assert!((share.to_f64() - 36.036).abs() < 0.01, "{}", share.to_f64());
        assert_eq!(share.cycles_for(36_036), 1000);
    }

    #[test]
    fn the_preset_sizes_the_buffers() {
        let c = NpuConfig::from_device(&DeviceConfig::ascend_910b());
        assert_eq!(c.buffers.of(Buffer::Ub), 192 << 10);
        assert_eq!(c.buffers.of(Buffer::L1), 512 << 10);
        assert_eq!(c.buffers.of(Buffer::L0a), 64 << 10);
        assert_eq!(c.buffers.of(Buffer::L0b), 64 << 10);
        assert_eq!(c.buffers.of(Buffer::L0c), 128 << 10);
        assert_eq!(c.timing.vector_lanes, 128);
        assert_eq!(c.timing.cube_f16_flops_per_cycle, 8192);
    }

    #[test]
    fn sizes_are_capped_and_aligned() {
        let mut s = BufferSizes::from_device(&DeviceConfig::default());
        s.ub = 1000;
        s.l1 = u32::MAX;
        assert_eq!(s.of(Buffer::Ub), 992);
        assert_eq!(s.of(Buffer::L1), abi::LOCAL_BUFFER_WINDOW as u32);
    }
}
