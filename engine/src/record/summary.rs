//! What-if: a trace replayed (timing-only) under variants of the machine, each summed up in
//! the figures a person compares at a glance — simulated time, how busy the cores, DMA
//! engines and links were, how much communication hid behind compute, peak memory, and the
//! tasks on the critical path.

use npusim_components::{SimTime, TaskKind, TaskRecord};
use npusim_device::config::DeviceConfig;
use npusim_device::link::TopologyConfig;

use super::format::Trace;
use super::replay::{ReplayOptions, Replayed, replay};
use crate::{NpuResult, Runtime};

/// A variant of the recorded machine: settings (`hbm_bandwidth=2x`, `ai_cores=48`) and a
/// device count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Variant {
    /// Shown in the table.
    pub name: String,
    /// `(field, value)`: an absolute value, or a factor of the recorded one (`2x`, `0.5x`).
    pub sets: Vec<(String, String)>,
    /// Devices (default: as recorded).
    pub devices: Option<u32>,
}

/// Why a variant's setting is unusable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct VariantError(pub String);

/// The fields a variant may set.
pub const SETTABLE: &[&str] = &[
    "ai_cores",
    "dma_engines",
    "core_clock_hz",
    "hbm_bytes",
    "hbm_bandwidth",
    "host_link_bandwidth",
    "vector_flops_per_cycle",
    "cube_f16_flops_per_cycle",
    "cube_f32_flops_per_cycle",
    "kernel_launch_ns",
    "link_bandwidth",
    "link_latency_ns",
];

impl Variant {
    /// Parses `field=value` (`value`: a number, or a factor such as `2x`).
    pub fn set(mut self, spec: &str) -> Result<Self, VariantError> {
        let (k, v) = spec.split_once('=').ok_or_else(|| {
            VariantError(format!(
                "{spec:?}: expected field=value, e.g. hbm_bandwidth=2x"
            ))
        })?;
        let (k, v) = (k.trim(), v.trim());
        if !SETTABLE.contains(&k) {
            return Err(VariantError(format!(
                "{k:?} cannot be set; settable: {}",
                SETTABLE.join(", ")
            )));
        }
        parse_value(v, 1.0).map_err(|e| VariantError(format!("{k}={v}: {e}")))?;
        self.sets.push((k.to_string(), v.to_string()));
        Ok(self)
    }

    /// The preset and interconnect of this variant of `device` and `topology`.
    pub fn apply(
        &self,
        device: &DeviceConfig,
        topology: &TopologyConfig,
    ) -> Result<(DeviceConfig, TopologyConfig), VariantError> {
        let (mut d, mut t) = (device.clone(), topology.clone());
        for (k, v) in &self.sets {
            let err = |e: String| VariantError(format!("{k}={v}: {e}"));
            let int = |old: u64| -> Result<u64, VariantError> {
                let x = parse_value(v, old as f64).map_err(err)?;
                if x < 1.0 || x > u64::MAX as f64 / 2.0 {
                    return Err(err(format!("{x} is out of range")));
                }
                Ok(x.round() as u64)
            };
            let small = |old: u32| -> Result<u32, VariantError> {
                let x = int(old as u64)?;
                u32::try_from(x).map_err(|_| err(format!("{x} is out of range")))
            };
            let real = |old: f64| -> Result<f64, VariantError> {
                let x = parse_value(v, old).map_err(err)?;
                if !(x > 0.0 && x.is_finite()) {
                    return Err(err(format!("{x} must be positive")));
                }
                Ok(x)
            };
            match k.as_str() {
                "ai_cores" => d.ai_cores = small(d.ai_cores)?,
                "dma_engines" => d.dma_engines = small(d.dma_engines)?,
                "core_clock_hz" => d.core_clock_hz = int(d.core_clock_hz)?,
                "hbm_bytes" => d.hbm_bytes = int(d.hbm_bytes)?,
                "hbm_bandwidth" => d.hbm_bandwidth = real(d.hbm_bandwidth)?,
                "host_link_bandwidth" => d.host_link_bandwidth = real(d.host_link_bandwidth)?,
                "vector_flops_per_cycle" => {
                    d.vector_flops_per_cycle = small(d.vector_flops_per_cycle)?
                }
                "cube_f16_flops_per_cycle" => {
                    d.cube_f16_flops_per_cycle = small(d.cube_f16_flops_per_cycle)?
                }
                "cube_f32_flops_per_cycle" => {
                    d.cube_f32_flops_per_cycle = small(d.cube_f32_flops_per_cycle)?
                }
                "kernel_launch_ns" => d.kernel_launch_ns = int(d.kernel_launch_ns)?,
                "link_bandwidth" => {
                    t.link.bandwidth = real(t.link.bandwidth)?;
                    for o in &mut t.overrides {
                        o.link.bandwidth = real(o.link.bandwidth)?;
                    }
                }
                "link_latency_ns" => t.link.latency_ns = int(t.link.latency_ns)?,
                other => return Err(VariantError(format!("{other:?} cannot be set"))),
            }
        }
        Ok((d, t))
    }
}

fn parse_value(v: &str, old: f64) -> Result<f64, String> {
    let v = v.trim();
    let x = if let Some(f) = v.strip_suffix(['x', 'X']) {
        f.trim()
            .parse::<f64>()
            .map(|f| f * old)
            .map_err(|_| format!("{f:?} is not a factor"))?
    } else {
        v.replace('_', "")
            .parse::<f64>()
            .map_err(|_| format!("{v:?} is not a number (or a factor like 2x)"))?
    };
    if x.is_finite() {
        Ok(x)
    } else {
        Err(format!("{v:?} is not finite"))
    }
}

/// A task name's share of the critical path.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskShare {
    /// The task's name (kernel, copy, collective).
    pub name: String,
    /// Its time on the critical path.
    pub time: SimTime,
    /// How many of its tasks lie on the path.
    pub count: u64,
}

/// The figures of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The variant's name.
    pub name: String,
    /// Devices.
    pub devices: u32,
    /// From the first task's start to the last task's end.
    pub time: SimTime,
    /// Busy fraction of the AI cores (core-time used over core-time available).
    pub core_busy: f64,
    /// Busy fraction of the DMA engines.
    pub dma_busy: f64,
    /// Busy fraction of the interconnect's links (mean over links).
    pub link_busy: f64,
    /// The fraction of collective time that overlapped with a kernel on the same device.
    pub comm_hidden: f64,
    /// The highest live device memory of any device, in bytes.
    pub peak_memory: u64,
    /// Tasks on the critical path (the chain of latest-finishing predecessors from the last
    /// task back), by name, longest first (at most five).
    pub critical: Vec<TaskShare>,
    /// Tasks run.
    pub tasks: u64,
}

impl Summary {
    /// Sums up `runtime`'s timeline.
    pub fn of(name: &str, runtime: &Runtime) -> Self {
        let tl = runtime.timeline();
        let devices = runtime.device_count();
        let config = runtime.device_config(0).unwrap_or_default();
        let start = tl.iter().map(|r| r.start).min().unwrap_or(SimTime::ZERO);
        let end = tl.iter().map(|r| r.end).max().unwrap_or(SimTime::ZERO);
        let span = end.as_ns().saturating_sub(start.as_ns()).max(1) as f64;
        let dur = |r: &TaskRecord| r.end.as_ns().saturating_sub(r.start.as_ns());
        let core_time: u64 = tl
            .iter()
            .filter(|r| r.kind == TaskKind::Kernel)
            .map(|r| dur(r) * r.cores as u64)
            .sum();
        let dma_time: u64 = tl
            .iter()
            .filter(|r| matches!(r.kind, TaskKind::Memcpy | TaskKind::Memset))
            .map(dur)
            .sum();
        let links = runtime.collectives().link_stats();
        let link_busy = if links.is_empty() {
            0.0
        } else {
            links.iter().map(|l| l.busy.as_ns() as f64).sum::<f64>() / (links.len() as f64 * span)
        };
        let peak_memory = {
            let g = runtime.lock_world();
            let world = g.world();
            world
                .get_resource::<npusim_components::resources::Devices>()
                .map_or(&[][..], |d| &d.entities)
                .iter()
                .filter_map(|&d| world.get::<npusim_components::DeviceState>(d))
                .map(|d| d.memory.stats().pool.peak_live_bytes)
                .max()
                .unwrap_or(0)
        };
        Summary {
            name: name.to_string(),
            devices,
            time: SimTime(end.as_ns().saturating_sub(start.as_ns())),
            core_busy: core_time as f64 / (span * (config.ai_cores * devices) as f64),
            dma_busy: dma_time as f64 / (span * (config.dma_engines * devices) as f64),
            link_busy,
            comm_hidden: comm_hidden(&tl, devices),
            peak_memory,
            critical: critical_path(&tl),
            tasks: tl.len() as u64,
        }
    }
}

/// The share of collective time that overlapped kernels on the same device.
fn comm_hidden(tl: &[TaskRecord], devices: u32) -> f64 {
    let mut kernels: Vec<Vec<(u64, u64)>> = vec![Vec::new(); devices as usize];
    for r in tl.iter().filter(|r| r.kind == TaskKind::Kernel) {
        if let Some(v) = kernels.get_mut(r.device as usize) {
            v.push((r.start.as_ns(), r.end.as_ns()));
        }
    }
    // Each device's kernel time as disjoint intervals.
    for v in &mut kernels {
        v.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for &(s, e) in v.iter() {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        *v = merged;
    }
    let (mut total, mut hidden) = (0u64, 0u64);
    for r in tl.iter().filter(|r| r.kind == TaskKind::Collective) {
        let (s, e) = (r.start.as_ns(), r.end.as_ns());
        total += e - s;
        let Some(v) = kernels.get(r.device as usize) else {
            continue;
        };
        let first = v.partition_point(|&(_, ke)| ke <= s);
        for &(ks, ke) in &v[first..] {
            if ks >= e {
                break;
            }
            hidden += ke.min(e) - ks.max(s);
        }
    }
    if total == 0 {
        0.0
    } else {
        hidden as f64 / total as f64
    }
}

/// The chain of latest-finishing predecessors from the last task back, by task name.
fn critical_path(tl: &[TaskRecord]) -> Vec<TaskShare> {
    let mut by_end: Vec<&TaskRecord> = tl
        .iter()
        .filter(|r| !matches!(r.kind, TaskKind::EventRecord | TaskKind::EventWait))
        .collect();
    by_end.sort_by_key(|r| (r.end, r.start));
    let mut shares: Vec<TaskShare> = Vec::new();
    let mut at = by_end.len();
    while at > 0 {
        let r = by_end[at - 1];
        let d = SimTime(r.end.as_ns().saturating_sub(r.start.as_ns()));
        match shares.iter_mut().find(|s| s.name == r.name) {
            Some(s) => {
                s.time += d;
                s.count += 1;
            }
            None => shares.push(TaskShare {
                name: r.name.clone(),
                time: d,
                count: 1,
            }),
        }
        // The latest task that ended by this one's start.
        at = by_end.partition_point(|x| x.end <= r.start);
        if r.start == r.end && at > 0 && std::ptr::eq(by_end[at - 1], r) {
            at -= 1;
        }
    }
    shares.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.name.cmp(&b.name)));
    shares.truncate(5);
    shares
}

/// Replays `trace` timing-only under each variant; returns each variant's summary and
/// replay (its runtime holds the timeline).
pub fn whatif(
    trace: &Trace,
    variants: &[Variant],
    mut progress: impl FnMut(usize, usize, usize),
) -> NpuResult<Vec<(Summary, Replayed)>> {
    let mut out = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let (device, topology) = v
            .apply(&trace.header.device, &trace.header.topology)
            .map_err(|e| crate::NpuError::InvalidParam(e.0))?;
        let p = &mut progress;
        // Progress of this variant, through a boxed callback the replay owns.
        let (tx, rx) = std::sync::mpsc::channel::<(usize, usize)>();
        let replayed = replay(
            trace,
            ReplayOptions {
                devices: v.devices,
                device: Some(device),
                topology: Some(topology),
                timing_only: true,
                progress: Some(Box::new(move |a, b| {
                    let _ = tx.send((a, b));
                })),
                ..ReplayOptions::default()
            },
        )?;
        for (a, b) in rx.try_iter() {
            p(i, a, b);
        }
        out.push((Summary::of(&v.name, &replayed.runtime), replayed));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_factor_scales_the_recorded_value_and_a_number_replaces_it() {
        let d = DeviceConfig::small();
        let v = Variant::default()
            .set("hbm_bandwidth=2x")
            .unwrap()
            .set("ai_cores=48")
            .unwrap();
        let (d2, _) = v.apply(&d, &TopologyConfig::default()).unwrap();
        assert_eq!(d2.hbm_bandwidth, 2.0 * d.hbm_bandwidth);
        assert_eq!(d2.ai_cores, 48);
    }

    #[test]
    fn an_unknown_field_or_a_bad_value_is_refused_with_the_fields_that_exist() {
        let e = Variant::default().set("warp_drive=2x").unwrap_err();
        assert!(e.0.contains("hbm_bandwidth"), "{e}");
        assert!(Variant::default().set("ai_cores=many").is_err());
        assert!(Variant::default().set("ai_cores").is_err());
        let v = Variant::default().set("ai_cores=0").unwrap();
        assert!(
            v.apply(&DeviceConfig::small(), &TopologyConfig::default())
                .is_err()
        );
    }
}
