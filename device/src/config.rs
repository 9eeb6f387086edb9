//! Device presets: the numbers that make one simulated NPU differ from another. Every duration
//! the cost model produces comes from these fields, so a preset is the whole "hardware datasheet".

/// The datasheet of one simulated NPU.
///
/// The default preset, [`DeviceConfig::ascend_910b`], follows public Ascend 910B (A2) figures.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DeviceConfig {
    /// Human-readable preset name, shown in timelines.
    pub name: String,
    /// Number of AI cores; a kernel with block dim `b` occupies up to `b` of them.
    pub ai_cores: u32,
    /// Number of DMA engines; each copy or memset occupies one.
    pub dma_engines: u32,
    /// AI-core clock in Hz.
    pub core_clock_hz: u64,
    /// Device memory (HBM) capacity in bytes.
    pub hbm_bytes: u64,
    /// HBM bandwidth in bytes per second, shared by all cores.
    pub hbm_bandwidth: f64,
    /// Host link (PCIe) bandwidth in bytes per second, per direction.
    pub host_link_bandwidth: f64,
    /// Host link latency per transfer in nanoseconds.
    pub host_link_latency_ns: u64,
    /// Fixed device-side cost of starting a DMA transfer, in nanoseconds.
    pub dma_setup_ns: u64,
    /// Fixed device-side cost of starting a kernel (task scheduler, block dispatch), in nanoseconds.
    pub kernel_launch_ns: u64,
    /// Cost of a host callback round trip (device → host → device), in nanoseconds.
    pub callback_ns: u64,
    /// Vector-unit throughput per core, in f32 operations per cycle.
    pub vector_flops_per_cycle: u32,
    /// Cube-unit throughput per core, in f16 multiply-accumulate flops (2 per MAC) per cycle.
    pub cube_f16_flops_per_cycle: u32,
    /// Cube-unit throughput per core, in f32 flops per cycle.
    pub cube_f32_flops_per_cycle: u32,
    /// Scalar-unit throughput per core, in operations per cycle.
    pub scalar_ops_per_cycle: u32,
    /// Unified buffer (vector unit's local memory) per core, in bytes.
    pub ub_bytes: u32,
    /// L1 buffer per core, in bytes.
    pub l1_bytes: u32,
    /// L0A (cube left operand) buffer per core, in bytes.
    pub l0a_bytes: u32,
    /// L0B (cube right operand) buffer per core, in bytes.
    pub l0b_bytes: u32,
    /// L0C (cube accumulator) buffer per core, in bytes.
    pub l0c_bytes: u32,
    /// Vector (AIV) cores per AI (cube, AIC) core. `0`: one core type runs every block (the
    /// `small` preset). On the 910B, 2: a kernel with no cube-side instructions runs its
    /// blocks on the AIV cores — `2 × ai_cores` of them, each with its own UB, vector unit and
    /// data movers (the per-core figures above) — so its `blockDim` counts vector cores.
    pub vector_cores_per_ai_core: u32,
}

impl DeviceConfig {
    /// An Ascend 910B-like preset: 24 AI cores at 1.85 GHz, 64 GiB HBM at 1.6 TB/s,
    /// PCIe 4.0 x16 to the host, a 192 KiB unified buffer and 512 KiB L1 per core.
    pub fn ascend_910b() -> Self {
        Self {
            name: "ascend-910b".to_string(),
            ai_cores: 24,
            dma_engines: 4,
            core_clock_hz: 1_850_000_000,
            hbm_bytes: 64 << 30,
            hbm_bandwidth: 1.6e12,
            host_link_bandwidth: 25.0e9,
            host_link_latency_ns: 1_500,
            dma_setup_ns: 300,
            kernel_launch_ns: 1_000,
            callback_ns: 5_000,
            vector_flops_per_cycle: 128,
            cube_f16_flops_per_cycle: 8192,
            cube_f32_flops_per_cycle: 2048,
            scalar_ops_per_cycle: 1,
            ub_bytes: 192 << 10,
            l1_bytes: 512 << 10,
            l0a_bytes: 64 << 10,
            l0b_bytes: 64 << 10,
            l0c_bytes: 128 << 10,
            vector_cores_per_ai_core: 2,
        }
    }

    /// A small preset for tests and teaching: 4 AI cores, 2 DMA engines, 1 GiB of memory.
    /// Same per-core figures as [`DeviceConfig::ascend_910b`].
    pub fn small() -> Self {
        Self {
            name: "small".to_string(),
            ai_cores: 4,
            dma_engines: 2,
            hbm_bytes: 1 << 30,
            hbm_bandwidth: 200.0e9,
            vector_cores_per_ai_core: 0,
            ..Self::ascend_910b()
        }
    }

    /// Vector cores on the device: `ai_cores × vector_cores_per_ai_core`, or the AI cores
    /// themselves where one core type runs every block (`vector_cores_per_ai_core == 0`). What
    /// ACL reports as the device's vector cores and what a vector-core limit counts.
    pub fn vector_cores(&self) -> u32 {
        self.ai_cores
            .saturating_mul(self.vector_cores_per_ai_core.max(1))
    }

    /// Peak f32 vector throughput of the whole device, in flops per second.
    pub fn peak_vector_flops(&self) -> f64 {
        self.ai_cores as f64 * self.vector_flops_per_cycle as f64 * self.core_clock_hz as f64
    }

    /// Peak f16 cube throughput of the whole device, in flops per second.
    pub fn peak_cube_f16_flops(&self) -> f64 {
        self.ai_cores as f64 * self.cube_f16_flops_per_cycle as f64 * self.core_clock_hz as f64
    }
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self::ascend_910b()
    }
}
