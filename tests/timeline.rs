//! The Chrome trace-event export: parsed back with serde_json, every task is there once, on
//! its own stream's track of its device's process, with start ≤ end; links, core groups, the
//! host clock and event flows have their tracks.

use npusim::{Collective, Launch};
use std::collections::BTreeMap;

use npusim::prelude::*;
use npusim::{DataType, HostCosts, ReduceOp, StreamKind, TopologyConfig};
use serde_json::Value;

fn program() -> Runtime {
    let rt = Runtime::new(RuntimeConfig {
        devices: 2,
        device: DeviceConfig::small(),
        host: HostCosts::default(),
        topology: TopologyConfig::default(),
        threads: 2,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let fill = rt.kernel("fill_f32").unwrap();
    let relu = rt.kernel("relu_f32").unwrap();
    let n = 1u64 << 16;
    let mut bufs = Vec::new();
    for d in 0..2u32 {
        rt.contexts().set_device(d).unwrap();
        let compute = rt.streams().create().unwrap();
        let comm = rt
            .streams()
            .create_with(StreamConfig {
                kind: StreamKind::Communication,
                ..StreamConfig::default()
            })
            .unwrap();
        let (x, y) = (
            rt.memory().malloc(4 * n).unwrap(),
            rt.memory().malloc(4 * n).unwrap(),
        );
        let ready = rt.events().create().unwrap();
        rt.submit(Launch::new(
            fill,
            4,
            &[x.into(), n.into(), 1.5f32.into()],
            compute,
        ))
        .unwrap();
        rt.events().record(ready, compute).unwrap();
        rt.events().stream_wait(comm, ready).unwrap();
        rt.submit(
            Collective::all_reduce(x, x, n, DataType::F32, ReduceOp::Sum)
                .on(&comms[d as usize], comm),
        )
        .unwrap();
        // The compute stream reads the reduced buffer: it waits for the all-reduce.
        let reduced = rt.events().create().unwrap();
        rt.events().record(reduced, comm).unwrap();
        rt.events().stream_wait(compute, reduced).unwrap();
        rt.submit(Launch::new(
            relu,
            4,
            &[x.into(), y.into(), n.into()],
            compute,
        ))
        .unwrap();
        bufs.push((x, compute, comm));
    }
    rt.contexts().set_device(0).unwrap();
    rt.host_work(SimTime::from_us(20));
    rt.contexts().set_device(1).unwrap();
    let dst = rt.memory().malloc(4 * n).unwrap();
    rt.contexts().set_device(0).unwrap();
    rt.collectives()
        .memcpy_peer_async(dst, 1, bufs[0].0, 0, 4 * n, bufs[0].1)
        .unwrap();
    for (d, (_, compute, comm)) in bufs.iter().enumerate() {
        rt.contexts().set_device(d as u32).unwrap();
        rt.streams().synchronize(*compute).unwrap();
        rt.streams().synchronize(*comm).unwrap();
    }
    rt
}

#[test]
fn every_task_appears_once_on_its_stream_track() {
    let rt = program();
    let records = rt.timeline();
    let json: Value = serde_json::from_str(&rt.timeline_json()).expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");

    let mut names: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut processes: BTreeMap<u64, String> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "M") {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let name = e["args"]["name"].as_str().map(str::to_string);
        match (e["name"].as_str().unwrap(), name) {
            ("thread_name", Some(n)) => {
                names.insert((pid, tid), n);
            }
            ("process_name", Some(n)) => {
                processes.insert(pid, n);
            }
            _ => {}
        }
    }
    assert_eq!(processes[&0], "host");
    assert!(processes[&1].starts_with("device 0"));
    assert!(processes[&2].starts_with("device 1"));

    let tasks: Vec<&Value> = events.iter().filter(|e| e["cat"] == "task").collect();
    assert_eq!(tasks.len(), records.len());
    for (i, r) in records.iter().enumerate() {
        let mine: Vec<&&Value> = tasks
            .iter()
            .filter(|e| e["args"]["task"].as_u64() == Some(i as u64))
            .collect();
        assert_eq!(mine.len(), 1, "task {i} ({}) appears once", r.name);
        let e = mine[0];
        assert_eq!(e["ph"], "X");
        assert_eq!(e["name"], r.name.as_str());
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert_eq!(pid, r.device as u64 + 1, "on its device's process");
        let track = &names[&(pid, tid)];
        assert!(
            track.starts_with(&format!("stream {} ", r.stream)),
            "task {i} is on track {track:?}, not its stream {}",
            r.stream
        );
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(dur >= 0.0, "start <= end");
        assert!((ts - r.start.as_ns() as f64 / 1e3).abs() < 1e-6);
        assert!((ts + dur - r.end.as_ns() as f64 / 1e3).abs() < 1e-6);
    }

    // Links, core groups, the host clock and flows have their tracks.
    let on_track = |prefix: &str| {
        events
            .iter()
            .filter(|e| matches!(e["ph"].as_str(), Some("X")))
            .filter(|e| {
                let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                names.get(&key).is_some_and(|n| n.starts_with(prefix))
            })
            .count()
    };
    assert!(
        on_track("link ") >= 2,
        "the collective and the peer copy hold links"
    );
    assert!(on_track("core group ") >= 4, "kernels on core groups");
    assert!(on_track("host clock") >= 3, "host work and waits");
    let starts: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "s")
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    let ends: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "f")
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(starts.len(), 4, "one flow per event wait (two a device)");
    assert_eq!(starts, ends);
}

#[test]
fn export_writes_the_same_json_to_a_file() {
    let rt = program();
    let path = std::env::temp_dir().join(format!("npusim-timeline-{}.json", std::process::id()));
    rt.export_timeline(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(text, rt.timeline_json());
    let _: Value = serde_json::from_str(&text).unwrap();
}
