//! The cost model: how long a task takes on the simulated NPU. Kernels follow a roofline (the
//! slower of their compute at the unit's peak and their memory traffic at the HBM bandwidth),
//! split into waves when there are more blocks than cores; copies pay a setup latency plus bytes
//! over the link they cross. All results are whole nanoseconds, at least 1, so the simulated
//! timeline is exact integer arithmetic from here on.

use crate::config::DeviceConfig;

/// Which unit of an AI core bounds a kernel's compute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ComputeUnit {
    /// The vector unit (element-wise ops, reductions), f32.
    #[default]
    Vector,
    /// The cube unit with f16 inputs.
    CubeF16,
    /// The cube unit with f32 inputs.
    CubeF32,
    /// The scalar unit only.
    Scalar,
}

/// What a kernel launch does, for the cost model: total work over all its blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KernelCost {
    /// Floating-point (or scalar) operations over the whole launch.
    pub flops: f64,
    /// Bytes read from and written to device memory over the whole launch.
    pub bytes: f64,
    /// The unit that performs the operations.
    pub unit: ComputeUnit,
}

impl KernelCost {
    /// A vector-unit kernel doing `flops` operations and moving `bytes` bytes.
    pub fn vector(flops: f64, bytes: f64) -> Self {
        Self {
            flops,
            bytes,
            unit: ComputeUnit::Vector,
        }
    }

    /// A cube-unit kernel with f32 operands.
    pub fn cube_f32(flops: f64, bytes: f64) -> Self {
        Self {
            flops,
            bytes,
            unit: ComputeUnit::CubeF32,
        }
    }
}

/// Where a copy goes, which decides the link it crosses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyDirection {
    /// Host memory to device memory, over the host link.
    HostToDevice,
    /// Device memory to host memory, over the host link.
    DeviceToHost,
    /// Within one device's memory: read and write both use HBM.
    DeviceToDevice,
}

/// Converts seconds to whole nanoseconds, rounding up, never less than 1.
fn ns(seconds: f64) -> u64 {
    let v = (seconds * 1e9).ceil();
    if v.is_finite() && v >= 1.0 {
        // Saturates for absurd inputs rather than wrapping.
        v.min(u64::MAX as f64 / 2.0) as u64
    } else {
        1
    }
}

impl DeviceConfig {
    fn unit_flops_per_cycle(&self, unit: ComputeUnit) -> f64 {
        match unit {
            ComputeUnit::Vector => self.vector_flops_per_cycle as f64,
            ComputeUnit::CubeF16 => self.cube_f16_flops_per_cycle as f64,
            ComputeUnit::CubeF32 => self.cube_f32_flops_per_cycle as f64,
            ComputeUnit::Scalar => self.scalar_ops_per_cycle as f64,
        }
    }

    /// Simulated duration in nanoseconds of a kernel with `block_dim` blocks running on `cores`
    /// cores: `ceil(block_dim / cores)` waves of one block's roofline time each, plus the launch
    /// overhead. Each core gets an equal share of the HBM bandwidth.
    pub fn kernel_duration_ns(&self, cost: &KernelCost, block_dim: u32, cores: u32) -> u64 {
        if cost.flops <= 0.0 && cost.bytes <= 0.0 {
            // No work: the launch overhead alone (and no floating point on the hot path).
            return self.kernel_launch_ns;
        }
        let blocks = block_dim.max(1) as f64;
        let cores = cores.clamp(1, self.ai_cores.max(1)).min(block_dim.max(1));
        let waves = (blocks / cores as f64).ceil();
        let core_flops = self.unit_flops_per_cycle(cost.unit) * self.core_clock_hz as f64;
        let core_bw = self.hbm_bandwidth / self.ai_cores.max(1) as f64;
        let per_block = (cost.flops / blocks / core_flops).max(cost.bytes / blocks / core_bw);
        self.kernel_launch_ns + ns(waves * per_block)
    }

    /// Simulated duration in nanoseconds of copying `bytes` bytes in `direction` on one DMA engine.
    pub fn copy_duration_ns(&self, bytes: u64, direction: CopyDirection) -> u64 {
        match direction {
            CopyDirection::HostToDevice | CopyDirection::DeviceToHost => {
                self.host_link_latency_ns + ns(bytes as f64 / self.host_link_bandwidth)
            }
            CopyDirection::DeviceToDevice => {
                self.dma_setup_ns + ns(2.0 * bytes as f64 / self.hbm_bandwidth)
            }
        }
    }

    /// Simulated duration in nanoseconds of setting `bytes` bytes of device memory.
    pub fn memset_duration_ns(&self, bytes: u64) -> u64 {
        self.dma_setup_ns + ns(bytes as f64 / self.hbm_bandwidth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bound_kernel_takes_bytes_over_bandwidth() {
        let c = DeviceConfig::ascend_910b();
        // 1.6 GB over 1.6 TB/s = 1 ms, on all cores.
        let t = c.kernel_duration_ns(&KernelCost::vector(1.0, 1.6e9), 24, 24);
        assert_eq!(t, c.kernel_launch_ns + 1_000_000);
    }

    #[test]
    fn fewer_cores_means_more_waves() {
        let c = DeviceConfig::ascend_910b();
        let cost = KernelCost::vector(24.0 * 1e6, 0.0);
        let full = c.kernel_duration_ns(&cost, 24, 24);
        let half = c.kernel_duration_ns(&cost, 24, 12);
        assert_eq!(half - c.kernel_launch_ns, 2 * (full - c.kernel_launch_ns));
    }

    #[test]
    fn host_copy_pays_latency_plus_bandwidth() {
        let c = DeviceConfig::ascend_910b();
        let t = c.copy_duration_ns(25_000_000, CopyDirection::HostToDevice);
        assert_eq!(t, c.host_link_latency_ns + 1_000_000);
    }
}
