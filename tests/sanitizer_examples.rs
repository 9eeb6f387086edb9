//! No false positives on whole programs: every example runs under `NPUSIM_SANITIZE=report`
//! without a single report, and example 11 (whose programs have seeded bugs) gets exactly the
//! reports it asserts. The examples are the binaries `cargo test` builds beside this test.

use std::path::PathBuf;
use std::process::Command;

/// `target/<profile>/examples/NAME`, built by `cargo test` (which builds the examples).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path = dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is not built: `cargo test` (with no target filter) builds the examples",
        path.display()
    );
    path
}

/// Starts example `name` under the sanitizer.
fn start(name: &str, args: &[&str]) -> std::process::Child {
    start_with(name, args, &[])
}

/// Starts example `name` under the sanitizer, with `env` set too.
fn start_with(name: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    Command::new(example(name))
        .args(args)
        .env("NPUSIM_SANITIZE", "report")
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the example starts")
}

/// Waits for a started example; returns its standard output and error.
fn finish(name: &str, child: std::process::Child) -> (String, String) {
    let out = child.wait_with_output().expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name} failed:\n{stderr}");
    (stdout, stderr)
}

#[test]
fn every_example_runs_clean_under_the_sanitizer() {
    let trace = std::env::temp_dir().join(format!("npusim-san-10-{}.json", std::process::id()));
    let trace = trace.to_string_lossy().into_owned();
    for (name, child) in [
        ("01_quickstart", &[][..]),
        ("02_streams_events", &[]),
        ("03_custom_system", &[]),
        ("04_memory_pool", &[]),
        ("05_dynamic_detection", &[]),
        ("06_dynamic_nlp", &[]),
        ("07_multi_tenant", &[]),
        ("08_binary_kernels", &[]),
        ("09_ascend_style_kernels", &[]),
        ("10_data_parallel", &[trace.as_str()]),
        ("12_ascend_c", &[]),
        ("13_data_parallel_step", &[]),
    ]
    .map(|(name, args)| (name, start(name, args)))
    {
        // All at once: the slow ones overlap.
        let (_, stderr) = finish(name, child);
        assert!(
            !stderr.contains("npusim sanitizer:"),
            "{name} was reported:\n{stderr}"
        );
    }
    let _ = std::fs::remove_file(&trace);
}

#[test]
fn data_parallel_training_has_no_uninitialised_read() {
    // Non-root ranks' broadcast buffers are only written by the broadcast, and the GEMM and
    // gradient kernels write their outputs without reading them first: none is a read of
    // bytes nothing wrote.
    let trace = std::env::temp_dir().join(format!("npusim-uninit-10-{}.json", std::process::id()));
    let trace = trace.to_string_lossy().into_owned();
    let child = start_with(
        "10_data_parallel",
        &[trace.as_str()],
        &[("NPUSIM_SANITIZE_UNINIT", "1")],
    );
    let (stdout, stderr) = finish("10_data_parallel", child);
    assert!(stdout.contains("identical on all 8 devices"), "{stdout}");
    assert!(
        !stderr.contains("npusim sanitizer:"),
        "example 10 was reported:\n{stderr}"
    );
    let _ = std::fs::remove_file(&trace);
}

#[test]
fn the_sanitizer_example_prints_its_three_reports_and_none_for_the_fixed_programs() {
    // It builds its runtimes with the sanitizer in report mode and prints the reports itself.
    let (stdout, _) = finish("11_sanitizer", start("11_sanitizer", &[]));
    assert_eq!(
        stdout.matches("npusim sanitizer: race").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("by host thread 1 (\"loader\")"),
        "the loader's copy: {stdout}"
    );
    assert_eq!(
        stdout.matches("npusim sanitizer: use after free").count(),
        1,
        "{stdout}"
    );
    assert!(stdout.contains("examples/11_sanitizer.rs:"), "{stdout}");
}
