//! What a runtime is built from: how many devices, their preset and topology, the modelled
//! cost of host calls, and the options a runtime starts with (threads, timeline, sanitizer,
//! recording, timing-only mode).

use npusim_device::config::DeviceConfig;
use npusim_device::link::TopologyConfig;

/// Modeled host-side cost of API calls, in nanoseconds of the host's simulated clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCosts {
    /// A light call: create, query, record, wait.
    pub call_ns: u64,
    /// Enqueueing a kernel launch.
    pub launch_ns: u64,
    /// Enqueueing a copy or memset.
    pub copy_call_ns: u64,
    /// Returning from a synchronize once the device is done (wake-up latency).
    pub sync_ns: u64,
    /// Staging pageable host memory, per byte (for async copies from pageable memory).
    pub stage_ns_per_kib: u64,
}

impl HostCosts {
    /// No host cost at all: every call happens at the host's current time. Useful when the
    /// device alone should bound a simulated run.
    pub fn zero() -> Self {
        Self {
            call_ns: 0,
            launch_ns: 0,
            copy_call_ns: 0,
            sync_ns: 0,
            stage_ns_per_kib: 0,
        }
    }
}

impl Default for HostCosts {
    fn default() -> Self {
        Self {
            call_ns: 200,
            launch_ns: 1_500,
            copy_call_ns: 1_000,
            sync_ns: 1_000,
            stage_ns_per_kib: 100,
        }
    }
}

/// How to build a [`Runtime`].
///
/// [`Runtime`]: super::Runtime
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Number of devices.
    pub devices: u32,
    /// The preset every device uses.
    pub device: DeviceConfig,
    /// Host-side API costs.
    pub host: HostCosts,
    /// Whether finished tasks are recorded on the timeline (off for very long runs).
    pub timeline: bool,
    /// How the devices are connected to each other.
    pub topology: TopologyConfig,
    /// Worker threads that run independent devices' work side by side: 0 picks one per
    /// available core (at most one per device), 1 runs everything on the calling thread.
    /// Results and timelines are the same for every value.
    pub threads: usize,
    /// How long (wall time) a wait gives a host callback that has not returned before it gives
    /// up with `ACL_ERROR_RT_REPORT_TIMEOUT` (a timed wait: at most its own timeout). Default
    /// 60 s, or `NPUSIM_CALLBACK_TIMEOUT_MS` (see [`crate::callback`]).
    pub callback_timeout: std::time::Duration,
    /// The stream sanitizer ([`crate::sanitizer`]): off by default (and then it costs
    /// nothing), or what `NPUSIM_SANITIZE` says.
    pub sanitizer: npusim_device::sanitizer::SanitizerConfig,
    /// Record every API call to a trace (see [`crate::record`]). `None` (the default): record
    /// only if `NPUSIM_RECORD` names a file.
    pub recording: Option<crate::record::Recording>,
    /// Timing-only mode: kernels, copies and collectives take their modelled time but move no
    /// data, so device memory is never backed; allocations still go through the pool, so
    /// fragmentation and out-of-memory stay as they are. For replays at scale and what-if
    /// runs (see [`crate::record`]).
    pub timing_only: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            devices: 1,
            device: DeviceConfig::default(),
            host: HostCosts::default(),
            timeline: true,
            topology: TopologyConfig::default(),
            threads: 0,
            callback_timeout: crate::callback::default_callback_timeout(),
            sanitizer: crate::sanitizer::default_config(),
            recording: None,
            timing_only: false,
        }
    }
}

impl RuntimeConfig {
    /// One device of preset `device`.
    pub fn with_device(device: DeviceConfig) -> Self {
        Self {
            device,
            ..Self::default()
        }
    }

    /// This configuration, recording every API call to the trace file `path` (written when
    /// the runtime ends, or at [`Runtime::finish_recording`]).
    ///
    /// [`Runtime::finish_recording`]: super::Runtime::finish_recording
    pub fn record(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.recording = Some(crate::record::Recording {
            path: Some(path.into()),
            data: false,
        });
        self
    }
}
