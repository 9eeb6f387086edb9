//! Device limits set by the host (ACL's `aclrtSetDeviceResLimit` and `aclrtSetOpExecuteTimeOut`):
//! the most AI cores one kernel may occupy on a device, the simulated time a kernel may run
//! before it fails with an AI-core timeout, and the wall-clock guard against runaway binary
//! kernels. The rule lives in `npusim_components::limits`; dispatch and the binary-kernel
//! runner apply it each frame. Also here: kernel prints, written where a program wants them.

use std::time::Duration;

/// The per-device limits [`Limits::device`] reports.
pub use npusim_components::limits::DeviceLimits;
use npusim_components::{DeviceState, NpuError, NpuResult, SimTime};

use crate::runtime::{Inner, Runtime};

impl Runtime {
    fn device_limits_mut<'a>(
        &self,
        inner: &'a mut Inner,
        device: u32,
    ) -> NpuResult<bevy_ecs::world::Mut<'a, DeviceState>> {
        let invalid = NpuError::InvalidDevice {
            index: device,
            count: inner.devices.len() as u32,
        };
        let e = *inner.devices.get(device as usize).ok_or(invalid.clone())?;
        inner.world.get_mut::<DeviceState>(e).ok_or(invalid)
    }
}

/// Per-device limits: cores, kernel timeouts and wall-clock limits, event-wait timeouts, the
/// kernel log.
/// Reached through [`Runtime::limits`].
#[derive(Clone, Copy)]
pub struct Limits<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Per-device limits and timeouts.
    pub fn limits(&self) -> Limits<'_> {
        Limits { rt: self }
    }
}

impl Limits<'_> {
    /// The limits of device `device`.
    pub fn device(&self, device: u32) -> NpuResult<DeviceLimits> {
        let mut g = self.rt.lock();
        Ok(self.rt.device_limits_mut(&mut g, device)?.limits.clone())
    }

    /// Caps the AI cores one kernel may occupy on `device`: at most `cube` cube cores (npusim's
    /// AI cores) and `vector` vector cores ([`DeviceConfig::vector_cores`](crate::DeviceConfig::vector_cores): two per AI core on the
    /// 910B); `None` lifts a cap. A cap applies
    /// to kernels dispatched from now on. A cap of 0 or above the device's cores is refused.
    pub fn set_core_limits(
        &self,
        device: u32,
        cube: Option<u32>,
        vector: Option<u32>,
    ) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let mut d = self.rt.device_limits_mut(&mut g, device)?;
        let cores = d.config.ai_cores;
        let vectors = d.config.vector_cores();
        for (what, v, max) in [("cube", cube, cores), ("vector", vector, vectors)] {
            if let Some(v) = v
                && !(1..=max).contains(&v)
            {
                return Err(NpuError::InvalidParam(format!(
                    "a {what} core limit of {v} on device {device}: expected 1..={max}"
                )));
            }
        }
        d.limits.cube_cores = cube;
        d.limits.vector_cores = vector;
        g.record(|_, _| crate::record::Call::SetCoreLimits {
            device,
            cube,
            vector,
        });
        Ok(())
    }

    /// Sets how long one kernel may run, in simulated time, on every device; past it the kernel
    /// fails with an AI-core timeout (ACL_ERROR_RT_AICORE_TIMEOUT). Zero is refused.
    pub fn set_kernel_timeout(&self, timeout: SimTime) -> NpuResult<()> {
        if timeout == SimTime::ZERO {
            return Err(NpuError::InvalidParam("a kernel timeout of 0".into()));
        }
        let mut g = self.rt.lock();
        for d in 0..g.devices.len() as u32 {
            self.rt.device_limits_mut(&mut g, d)?.limits.kernel_timeout = timeout;
        }
        g.record(|_, _| crate::record::Call::SetKernelTimeout {
            ns: timeout.as_ns(),
        });
        Ok(())
    }

    /// Sets the wall-clock guard of every device: a binary kernel launch the simulator has
    /// executed for this long fails with an AI-core timeout, whatever its simulated time.
    /// `Duration::ZERO` turns the guard off. Results never depend on it unless it fires.
    pub fn set_kernel_wall_limit(&self, limit: Duration) {
        let mut g = self.rt.lock();
        for d in 0..g.devices.len() as u32 {
            if let Ok(mut s) = self.rt.device_limits_mut(&mut g, d) {
                s.limits.kernel_wall_limit = limit;
            }
        }
        g.record(|_, _| crate::record::Call::SetKernelWallLimit {
            ns: limit.as_nanos().min(u64::MAX as u128) as u64,
        });
    }

    /// Sets how long an event wait may block its stream, in simulated time, on every device
    /// (`aclrtSetOpWaitTimeout`); past it the wait fails with `ACL_ERROR_RT_WAIT_TIMEOUT` (its
    /// stream reports it at the next synchronize) and the stream goes on. `None` (the default)
    /// waits for ever.
    pub fn set_event_wait_timeout(&self, timeout: Option<SimTime>) {
        let mut g = self.rt.lock();
        for d in 0..g.devices.len() as u32 {
            if let Ok(mut s) = self.rt.device_limits_mut(&mut g, d) {
                s.limits.event_wait_timeout = timeout;
            }
        }
        g.record(|_, _| crate::record::Call::SetEventWaitTimeout {
            ns: timeout.map(SimTime::as_ns),
        });
    }

    /// Writes the lines kernels printed since the last call (see [`Binaries::take_kernel_log`](crate::Binaries::take_kernel_log))
    /// to `out`, one per line, as a device's printf reaches the host at a synchronize; returns
    /// how many.
    pub fn write_kernel_log(&self, out: &mut dyn std::io::Write) -> std::io::Result<usize> {
        let lines = self.rt.binaries().take_kernel_log();
        for l in &lines {
            writeln!(out, "{l}")?;
        }
        out.flush()?;
        Ok(lines.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RuntimeConfig;

    #[test]
    fn core_limits_are_checked_and_kept_per_device() {
        let rt = Runtime::new(RuntimeConfig {
            devices: 2,
            ..RuntimeConfig::default()
        })
        .unwrap();
        rt.limits().set_core_limits(1, Some(4), None).unwrap();
        assert_eq!(rt.limits().device(1).unwrap().cube_cores, Some(4));
        assert_eq!(rt.limits().device(0).unwrap().cube_cores, None);
        assert!(rt.limits().set_core_limits(0, Some(0), None).is_err());
        assert!(rt.limits().set_core_limits(0, Some(1000), None).is_err());
        assert!(rt.limits().set_core_limits(5, Some(1), None).is_err());
    }

    #[test]
    fn a_kernel_timeout_of_zero_is_refused() {
        let rt = Runtime::new(RuntimeConfig::default()).unwrap();
        assert!(rt.limits().set_kernel_timeout(SimTime::ZERO).is_err());
        rt.limits().set_kernel_timeout(SimTime::from_ms(5)).unwrap();
        assert_eq!(
            rt.limits().device(0).unwrap().kernel_timeout,
            SimTime::from_ms(5)
        );
    }
}
