//! Per-device limits the frame honours, set through the runtime (ACL's device resource limits
//! and op execute timeout): how many AI cores one kernel may occupy, how long a kernel may run
//! in *simulated* time, and a wall-clock guard that stops a runaway loop in a binary kernel.
//! Dispatch reads the core cap; the binary-kernel runner reads the two time limits.

use std::time::Duration;

use npusim_device::config::DeviceConfig;

use crate::time::SimTime;

/// The limits of one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Most cube cores (npusim's AI cores) one kernel gets; `None`: all of them.
    pub cube_cores: Option<u32>,
    /// Most vector cores one kernel gets; `None`: all of them. Each AI core carries the device's
    /// vector cores per AI core (one where the AI core runs vector code itself), so this caps
    /// the AI cores too ([`DeviceLimits::core_cap`]).
    pub vector_cores: Option<u32>,
    /// Longest simulated time one kernel may run before it fails with an AI-core timeout.
    pub kernel_timeout: SimTime,
    /// Longest wall-clock time the simulator spends executing one binary kernel launch before
    /// it fails it with an AI-core timeout: a guard against runaway loops only, far above what
    /// honest kernels need. `Duration::ZERO` turns it off.
    pub kernel_wall_limit: Duration,
    /// Longest simulated time an event wait may block its stream before it fails with
    /// `ACL_ERROR_RT_WAIT_TIMEOUT` (`aclrtSetOpWaitTimeout`); `None`: for ever.
    pub event_wait_timeout: Option<SimTime>,
}

impl DeviceLimits {
    /// The default kernel timeout: 1091 s, the AI-core default of Ascend A2 devices.
    pub const DEFAULT_KERNEL_TIMEOUT: SimTime = SimTime::from_ms(1_091_000);
    /// The default wall-clock guard per binary kernel launch.
    pub const DEFAULT_WALL_LIMIT: Duration = Duration::from_secs(120);
    /// The most AI cores one kernel may occupy on a device (at least 1): its AI cores, capped
    /// by the cube limit and by the vector limit over the vector cores each AI core carries
    /// ([`DeviceConfig::vector_cores`]: two on the 910B, the AI core itself on `small`).
    #[inline]
    pub fn core_cap(&self, config: &DeviceConfig) -> u32 {
        let mut cap = config.ai_cores;
        if let Some(c) = self.cube_cores {
            cap = cap.min(c);
        }
        if let Some(v) = self.vector_cores {
            cap = cap.min(v / config.vector_cores_per_ai_core.max(1));
        }
        cap.max(1)
    }

    /// The kernel timeout in cycles of a core clocked at `clock_hz`.
    pub fn timeout_cycles(&self, clock_hz: u64) -> u64 {
        (self.kernel_timeout.as_ns() as u128 * clock_hz as u128 / 1_000_000_000)
            .min(u64::MAX as u128) as u64
    }
}

impl Default for DeviceLimits {
    fn default() -> Self {
        Self {
            cube_cores: None,
            vector_cores: None,
            kernel_timeout: Self::DEFAULT_KERNEL_TIMEOUT,
            kernel_wall_limit: Self::DEFAULT_WALL_LIMIT,
            event_wait_timeout: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_cap_is_the_tightest_limit_and_never_zero() {
        let big = DeviceConfig::ascend_910b();
        let mut l = DeviceLimits::default();
        assert_eq!(l.core_cap(&big), 24);
        l.cube_cores = Some(4);
        assert_eq!(l.core_cap(&big), 4);
        l.vector_cores = Some(4);
        assert_eq!(l.core_cap(&big), 2, "two vector cores per AI core");
        l.vector_cores = Some(1);
        assert_eq!(l.core_cap(&big), 1);
    }

    #[test]
    fn where_ai_cores_run_vector_code_themselves_a_vector_limit_counts_ai_cores() {
        let small = DeviceConfig::small();
        assert_eq!(small.vector_cores(), small.ai_cores);
        let l = DeviceLimits {
            vector_cores: Some(3),
            ..DeviceLimits::default()
        };
        assert_eq!(l.core_cap(&small), 3);
        assert_eq!(l.core_cap(&DeviceConfig::ascend_910b()), 1);
    }

    #[test]
    fn the_timeout_converts_to_cycles_of_the_core_clock() {
        let l = DeviceLimits {
            kernel_timeout: SimTime::from_ms(2),
            ..DeviceLimits::default()
        };
        assert_eq!(l.timeout_cycles(1_000_000_000), 2_000_000);
    }
}
