//! The `npusim` binary as a user runs it: a trace recorded by a program replays, converts to a
//! Chrome trace and compares under variants; bad, truncated and future-version traces, and bad
//! settings, are refused with a message and exit code 1, never a panic; `--help` shows examples.

use npusim_engine::Launch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npusim_engine::record::{FORMAT_VERSION, Trace};
use npusim_engine::{DeviceConfig, Runtime, RuntimeConfig};

fn npusim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npusim"))
        .args(args)
        .env_remove("NPUSIM_RECORD")
        .output()
        .expect("npusim runs")
}

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("npusim-cli");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small program's trace, written where `path` says.
fn record(path: &Path) {
    let rt = Runtime::new(
        RuntimeConfig {
            device: DeviceConfig::small(),
            ..RuntimeConfig::default()
        }
        .record(path),
    )
    .unwrap();
    let s = rt.streams().create().unwrap();
    let n = 1usize << 16;
    let (x, y) = (
        rt.memory().malloc(4 * n as u64).unwrap(),
        rt.memory().malloc(4 * n as u64).unwrap(),
    );
    let axpy = rt.kernel("axpy_f32").unwrap();
    rt.memory().memset_async(x, 1, 4 * n as u64, s).unwrap();
    rt.submit(Launch::new(
        axpy,
        2,
        &[n.into(), 2.0f32.into(), x.into(), y.into()],
        s,
    ))
    .unwrap();
    rt.streams().synchronize(s).unwrap();
    rt.finish_recording().unwrap();
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_recorded_trace_replays_converts_and_compares_from_the_command_line() {
    let trace = dir().join("axpy.npt");
    record(&trace);
    let t = trace.to_str().unwrap();
    let (out, err) = text(&npusim(&["replay", t]));
    assert!(
        out.contains("replayed") && out.contains("axpy_f32"),
        "{out}{err}"
    );
    let json = dir().join("axpy.json");
    let o = npusim(&["timeline", t, "-o", json.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        std::fs::read_to_string(&json)
            .unwrap()
            .contains("traceEvents")
    );
    let (out, err) = text(&npusim(&[
        "whatif",
        t,
        "--set",
        "hbm_bandwidth=2x",
        "--devices",
        "4",
    ]));
    assert!(
        out.contains("hbm_bandwidth=2x") && out.contains("recorded"),
        "{out}{err}"
    );
    let o = npusim(&["dump", t]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"Launch\""));
}

#[test]
fn bad_truncated_and_future_traces_and_bad_settings_are_refused_without_a_panic() {
    let good = dir().join("good.npt");
    record(&good);
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir().join("truncated.npt");
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let future = dir().join("future.npt");
    let mut f = bytes.clone();
    f[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    std::fs::write(&future, &f).unwrap();
    let junk = dir().join("junk.npt");
    std::fs::write(&junk, b"{\"traceEvents\": []}").unwrap();
    for (path, says) in [
        (truncated.to_str().unwrap(), "truncated"),
        (future.to_str().unwrap(), "newer"),
        (junk.to_str().unwrap(), "not an npusim trace"),
        ("/nonexistent/trace.npt", "No such file"),
    ] {
        let o = npusim(&["replay", path]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{path}: {err}");
        assert!(err.contains(says), "{path}: {err}");
        assert!(!err.contains("panicked"), "{path}: {err}");
    }
    let o = npusim(&["whatif", good.to_str().unwrap(), "--set", "warp=2x"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("hbm_bandwidth"), "{err}");
    assert!(Trace::read(&good).is_ok());
}

#[test]
fn help_shows_working_examples() {
    let (out, _) = text(&npusim(&["--help"]));
    for cmd in [
        "npusim record",
        "npusim replay",
        "npusim whatif",
        "npusim timeline",
        "npusim info",
    ] {
        assert!(out.contains(cmd), "{out}");
    }
    let (out, _) = text(&npusim(&["info"]));
    assert!(
        out.contains("AI cores") && out.contains("hbm_bandwidth"),
        "{out}"
    );
}

/// A two-rank Chakra workload: a GEMM-sized compute node, then an all-reduce.
fn chakra_workload(dir: &Path) -> String {
    use npusim_chakra::schema::{AttributeProto, CollectiveCommType, Node, NodeType};
    for r in 0..2 {
        let mut f = npusim_chakra::EtFile::new();
        f.nodes.push(Node {
            id: 0,
            name: "gemm".into(),
            r#type: NodeType::CompNode as i32,
            attr: vec![
                AttributeProto::int64("num_ops", 1 << 40),
                AttributeProto::uint64("tensor_size", 1 << 26),
            ],
            ..Node::default()
        });
        f.nodes.push(Node {
            id: 1,
            name: "grad".into(),
            r#type: NodeType::CommCollNode as i32,
            data_deps: vec![0],
            attr: vec![
                AttributeProto::int64("comm_type", CollectiveCommType::AllReduce as i64),
                AttributeProto::int64("comm_size", 1 << 26),
            ],
            ..Node::default()
        });
        f.write(dir.join(format!("w.{r}.et.gz"))).unwrap();
    }
    dir.join("w.%d.et.gz").to_str().unwrap().to_string()
}

#[test]
fn a_chakra_workload_replays_from_the_command_line_and_bad_files_are_refused() {
    let d = dir().join("chakra");
    std::fs::create_dir_all(&d).unwrap();
    let pattern = chakra_workload(&d);
    let o = npusim(&["replay", &pattern, "--chakra", "--devices", "2"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("2 ranks, 4 nodes")
            && out.contains("chakra_comp")
            && out.contains("all_reduce"),
        "{out}"
    );
    // Without --devices: every consecutive rank's file.
    let (out, _) = text(&npusim(&["replay", &pattern, "--chakra"]));
    assert!(out.contains("2 ranks"), "{out}");
    let truncated = d.join("t.0.et");
    let bytes = npusim_chakra::EtFile::read(d.join("w.0.et.gz"))
        .unwrap()
        .encode();
    std::fs::write(&truncated, &bytes[..bytes.len() - 2]).unwrap();
    // A recorded trace exported and replayed back.
    let npt = d.join("axpy.npt");
    record(&npt);
    let out_pattern = d.join("axpy.%d.et");
    let o = npusim(&[
        "export",
        "--chakra",
        npt.to_str().unwrap(),
        "-o",
        out_pattern.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(
        o.status.success() && out.contains("1 ranks, 2 nodes"),
        "{out}{err}"
    );
    let (out, err) = text(&npusim(&[
        "replay",
        out_pattern.to_str().unwrap(),
        "--chakra",
        "--start-times",
    ]));
    assert!(out.contains("1 ranks, 2 nodes"), "{out}{err}");
    for (args, says) in [
        (vec![truncated.to_str().unwrap()], "truncated"),
        (vec![&pattern, "--devices", "3"], "w.2.et.gz"),
        (vec!["/nonexistent/x.%d.et"], "no such file"),
    ] {
        let mut a = vec!["replay", "--chakra"];
        a.extend(args);
        let o = npusim(&a);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{a:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{a:?}: {err}"
        );
    }
}
