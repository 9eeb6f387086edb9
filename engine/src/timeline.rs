//! The simulated timeline, exported as Chrome trace-event JSON (opens in Perfetto and
//! `chrome://tracing`), and — with the `tracy` feature — streamed to Tracy.
//!
//! The JSON has one process per device and one for the host:
//!
//! - per device: a track per stream (every task that ran on it, once, as a complete event of
//!   category `task`), a track per core group (one AI core with its cube and vector units: the
//!   kernels it ran, cores assigned lowest-free-first), and a track per link leaving the device
//!   (the collectives and peer copies that held it);
//! - the host: a track of API submissions (an instant at each task's host submit time) and a
//!   track of host work and waits on the host's simulated clock;
//! - flows from each event record to the waits it released.
//!
//! With `tracy`, each stream is a Tracy GPU context whose zones carry the simulated start and
//! end of its tasks, and every frame plots the ready tasks and the bytes in live allocations.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bevy_ecs::prelude::*;
use npusim_components::collective::{Interconnect, LinkTimeline};
use npusim_components::resources::{Devices, Timeline};
use npusim_components::{DeviceState, NpuError, NpuResult, SimTime, TaskKind, TaskRecord};
use npusim_device::link::Node;

use crate::runtime::Runtime;

/// A span of the host's simulated clock: modeled CPU work, or a wait for the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpan {
    /// What the host did.
    pub name: String,
    /// Start on the host clock.
    pub start: SimTime,
    /// End on the host clock.
    pub end: SimTime,
}

/// Microseconds with nanosecond precision, exactly (`ts` and `dur` of the trace format).
fn us(t: SimTime) -> String {
    format!("{}.{:03}", t.0 / 1000, t.0 % 1000)
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

const HOST_PID: u32 = 0;
const HOST_API_TID: u32 = 1;
const HOST_CLOCK_TID: u32 = 2;
const CORE_TID: u32 = 100;
const LINK_TID: u32 = 5_000;
const STREAM_TID: u32 = 100_000;

fn device_pid(device: u32) -> u32 {
    device + 1
}

fn stream_tid(stream: Entity) -> u32 {
    STREAM_TID + stream.index_u32()
}

struct Writer {
    out: String,
    first: bool,
}

impl Writer {
    fn event(&mut self, body: std::fmt::Arguments) {
        if !self.first {
            self.out.push_str(",\n");
        }
        self.first = false;
        let _ = self.out.write_fmt(body);
    }

    fn meta(&mut self, what: &str, pid: u32, tid: u32, name: &str) {
        self.event(format_args!(
            r#"{{"ph":"M","name":"{what}","pid":{pid},"tid":{tid},"args":{{"name":{}}}}}"#,
            json_str(name)
        ));
    }

    fn sort(&mut self, what: &str, pid: u32, tid: u32, index: u32) {
        self.event(format_args!(
            r#"{{"ph":"M","name":"{what}","pid":{pid},"tid":{tid},"args":{{"sort_index":{index}}}}}"#
        ));
    }
}

impl Runtime {
    /// The recorded timeline as Chrome trace-event JSON (see the [module docs](self)). What an
    /// embedder removed from the world (the timeline, the link timeline, the interconnect, the
    /// device list) is left out.
    pub fn timeline_json(&self) -> String {
        let g = self.lock();
        let world = &g.world;
        let records: &[TaskRecord] = world.get_resource::<Timeline>().map_or(&[], |t| &t.records);
        let links: &[_] = world
            .get_resource::<LinkTimeline>()
            .map_or(&[], |t| &t.records);
        let topology_links = world
            .get_resource::<Interconnect>()
            .map_or(&[][..], |ic| ic.topology.links());
        let devices: Vec<&DeviceState> = world
            .get_resource::<Devices>()
            .map_or(&[][..], |d| &d.entities)
            .iter()
            .filter_map(|&e| world.get::<DeviceState>(e))
            .collect();
        let mut w = Writer {
            out: String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"),
            first: true,
        };

        // Processes and their fixed tracks.
        w.meta("process_name", HOST_PID, 0, "host");
        w.sort("process_sort_index", HOST_PID, 0, 0);
        w.meta("thread_name", HOST_PID, HOST_API_TID, "API submissions");
        w.meta(
            "thread_name",
            HOST_PID,
            HOST_CLOCK_TID,
            "host clock: work and waits",
        );
        for d in &devices {
            let pid = device_pid(d.index);
            w.meta(
                "process_name",
                pid,
                0,
                &format!("device {} ({})", d.index, d.config.name),
            );
            w.sort("process_sort_index", pid, 0, pid);
        }
        for (id, l) in topology_links.iter().enumerate() {
            let owner = match (l.from, l.to) {
                (Node::Device(d), _) | (Node::Switch, Node::Device(d)) => d,
                _ => continue,
            };
            let tid = LINK_TID + id as u32;
            w.meta(
                "thread_name",
                device_pid(owner),
                tid,
                &format!(
                    "link {}→{} ({:.0} GB/s, {} ns)",
                    l.from,
                    l.to,
                    l.config.bandwidth / 1e9,
                    l.config.latency_ns
                ),
            );
            w.sort("thread_sort_index", device_pid(owner), tid, tid);
        }

        // Stream tracks, named once each.
        let mut streams: BTreeMap<(u32, u32), (Entity, String)> = BTreeMap::new();
        for r in records {
            streams
                .entry((r.device, stream_tid(r.stream)))
                .or_insert_with(|| {
                    (
                        r.stream,
                        format!(
                            "stream {} ({:?}, context {})",
                            r.stream, r.stream_kind, r.context
                        ),
                    )
                });
        }
        for (&(device, tid), (_, name)) in &streams {
            w.meta("thread_name", device_pid(device), tid, name);
            w.sort("thread_sort_index", device_pid(device), tid, tid);
        }

        // Every task once, on its stream's track; its submission on the host's.
        for (i, r) in records.iter().enumerate() {
            let (pid, tid) = (device_pid(r.device), stream_tid(r.stream));
            w.event(format_args!(
                r#"{{"ph":"X","cat":"task","name":{},"pid":{pid},"tid":{tid},"ts":{},"dur":{},"args":{{"task":{i},"kind":"{}","stream":"{}","seq":{},"submit_us":{},"cores":{},"bytes":{},"ok":{}}}}}"#,
                json_str(&r.name),
                us(r.start),
                us(r.end.saturating_sub(r.start)),
                r.kind.name(),
                r.stream,
                r.seq,
                us(r.submit),
                r.cores,
                r.bytes,
                r.ok
            ));
            w.event(format_args!(
                r#"{{"ph":"i","s":"t","cat":"submit","name":{},"pid":{HOST_PID},"tid":{HOST_API_TID},"ts":{},"args":{{"task":{i},"device":{}}}}}"#,
                json_str(&format!("enqueue {}", r.name)),
                us(r.submit),
                r.device
            ));
        }

        // Kernels on core groups: each kernel takes the lowest-numbered cores free at its start.
        for d in &devices {
            let mut kernels: Vec<&TaskRecord> = records
                .iter()
                .filter(|r| r.device == d.index && r.kind == TaskKind::Kernel && r.cores > 0)
                .collect();
            kernels.sort_by_key(|r| (r.start, r.end, r.seq));
            let mut free_at = vec![SimTime::ZERO; d.config.ai_cores as usize];
            let mut used = vec![false; free_at.len()];
            for r in kernels {
                let mut taken = 0;
                for (core, f) in free_at.iter_mut().enumerate() {
                    if taken == r.cores {
                        break;
                    }
                    if *f <= r.start {
                        *f = r.end;
                        taken += 1;
                        used[core] = true;
                        w.event(format_args!(
                            r#"{{"ph":"X","cat":"core","name":{},"pid":{},"tid":{},"ts":{},"dur":{}}}"#,
                            json_str(&r.name),
                            device_pid(d.index),
                            CORE_TID + core as u32,
                            us(r.start),
                            us(r.end.saturating_sub(r.start))
                        ));
                    }
                }
            }
            for (core, u) in used.iter().enumerate() {
                if *u {
                    let tid = CORE_TID + core as u32;
                    w.meta(
                        "thread_name",
                        device_pid(d.index),
                        tid,
                        &format!("core group {core} (AI core: cube + vector)"),
                    );
                    w.sort("thread_sort_index", device_pid(d.index), tid, tid);
                }
            }
        }

        // Link uses.
        for l in links {
            let Some(link) = topology_links.get(l.link as usize) else {
                continue;
            };
            let owner = match (link.from, link.to) {
                (Node::Device(d), _) | (Node::Switch, Node::Device(d)) => d,
                _ => continue,
            };
            w.event(format_args!(
                r#"{{"ph":"X","cat":"link","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"bytes":{}}}}}"#,
                l.name,
                device_pid(owner),
                LINK_TID + l.link,
                us(l.start),
                us(l.end.saturating_sub(l.start)),
                l.bytes
            ));
        }

        // The host clock.
        for s in &g.host_spans {
            w.event(format_args!(
                r#"{{"ph":"X","cat":"host","name":{},"pid":{HOST_PID},"tid":{HOST_CLOCK_TID},"ts":{},"dur":{}}}"#,
                json_str(&s.name),
                us(s.start),
                us(s.end.saturating_sub(s.start))
            ));
        }

        // Flows: event record → the waits it released.
        let mut fired: BTreeMap<(Entity, u64), &TaskRecord> = BTreeMap::new();
        for r in records {
            if r.kind == TaskKind::EventRecord
                && let Some(key) = r.event
            {
                fired.insert(key, r);
            }
        }
        let mut flow = 0u64;
        for r in records {
            if r.kind != TaskKind::EventWait {
                continue;
            }
            let Some(key) = r.event.filter(|(_, n)| *n > 0) else {
                continue;
            };
            let Some(rec) = fired.get(&key) else { continue };
            flow += 1;
            w.event(format_args!(
                r#"{{"ph":"s","cat":"event","name":"event","id":{flow},"pid":{},"tid":{},"ts":{}}}"#,
                device_pid(rec.device),
                stream_tid(rec.stream),
                us(rec.start)
            ));
            w.event(format_args!(
                r#"{{"ph":"f","bp":"e","cat":"event","name":"event","id":{flow},"pid":{},"tid":{},"ts":{}}}"#,
                device_pid(r.device),
                stream_tid(r.stream),
                us(r.start)
            ));
        }
        // Stream-sanitizer reports: a marker on the later side's stream (the host's API track
        // for a free).
        if let Some(san) = crate::sanitizer::sanitizer_ref(world) {
            for r in san.reports() {
                let (pid, tid) = match r.later.stream {
                    Some(s) => (device_pid(r.later.device), stream_tid(s.entity())),
                    None => (HOST_PID, HOST_API_TID),
                };
                w.event(format_args!(
                    r#"{{"ph":"i","s":"p","cat":"sanitizer","name":{},"pid":{pid},"tid":{tid},"ts":{},"args":{{"report":{}}}}}"#,
                    json_str(&format!("sanitizer: {}", r.kind.name())),
                    us(r.at),
                    json_str(&r.to_string())
                ));
            }
        }
        w.out.push_str("\n]}\n");
        w.out
    }

    /// Writes [`Runtime::timeline_json`] to `path`.
    pub fn export_timeline(&self, path: impl AsRef<std::path::Path>) -> NpuResult<()> {
        let json = self.timeline_json();
        std::fs::write(path.as_ref(), json).map_err(|e| {
            NpuError::InvalidParam(format!(
                "cannot write the timeline to {}: {e}",
                path.as_ref().display()
            ))
        })
    }

    /// Host-side spans recorded so far (host work and waits).
    pub fn host_spans(&self) -> Vec<HostSpan> {
        self.lock().host_spans.clone()
    }
}

/// Adds the Tracy system: GPU zones for finished tasks (one GPU context per stream) and plots.
#[cfg(feature = "tracy")]
pub(crate) fn install_tracy(schedule: &mut bevy_ecs::schedule::Schedule) {
    schedule.add_systems(
        tracy::gpu_zones
            .in_set(npusim_systems::NpuSet::Retire)
            .before(npusim_systems::retire::retire),
    );
}

#[cfg(feature = "tracy")]
mod tracy {
    use std::collections::BTreeMap;

    use bevy_ecs::prelude::*;
    use npusim_components::resources::{Finished, ReadyQueue};
    use npusim_components::{DeviceState, StreamState, Task, TaskKind};
    use tracy_client::{Client, GpuContext, GpuContextType, plot_name};

    /// Per stream, its GPU context (`None` once Tracy's 255 contexts ran out).
    #[derive(Default)]
    pub(super) struct Contexts(BTreeMap<Entity, Option<GpuContext>>);

    pub(super) fn gpu_zones(
        finished: Res<Finished>,
        ready: Res<ReadyQueue>,
        tasks: Query<&Task>,
        streams: Query<&StreamState>,
        devices: Query<&DeviceState>,
        mut contexts: Local<Contexts>,
    ) {
        let Some(client) = Client::running() else {
            return;
        };
        client.plot(plot_name!("npusim ready tasks"), ready.tasks.len() as f64);
        let live: u64 = devices.iter().map(|d| d.memory.live_bytes()).sum();
        client.plot(plot_name!("npusim pool bytes in use"), live as f64);
        for &e in &finished.tasks {
            let Ok(task) = tasks.get(e) else { continue };
            let ctx = contexts.0.entry(task.stream).or_insert_with(|| {
                let name = streams.get(task.stream).map_or_else(
                    |_| format!("stream {}", task.stream),
                    |s| {
                        format!(
                            "npu{} stream {} ({:?})",
                            s.device_index, task.stream, s.kind
                        )
                    },
                );
                client
                    .clone()
                    .new_gpu_context(
                        Some(&name),
                        GpuContextType::Invalid,
                        task.start.0 as i64,
                        1.0,
                    )
                    .ok()
            });
            let Some(ctx) = ctx else { continue };
            let name = match task.kind() {
                TaskKind::Kernel => "kernel",
                k => k.name(),
            };
            if let Ok(mut span) = ctx.span_alloc(name, "npusim", file!(), line!()) {
                span.end_zone();
                span.upload_timestamp_start(task.start.0 as i64);
                span.upload_timestamp_end(task.end.0 as i64);
            }
        }
    }
}
