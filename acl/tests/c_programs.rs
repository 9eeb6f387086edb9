//! The C programs under `tests/c/` (and `examples/c/quickstart.c`), compiled with the system C
//! compiler (`$CC`, else `cc`) against `acl/include/acl/acl.h`, linked against the library
//! this package built, and run. Each checks its results and return codes itself and prints
//! `<name>: ok`; here each must exit 0 and say so.
//!
//! The library is the one `cargo test` built for this package, beside the test binary in
//! `target/<profile>/deps/` (`libnpusim_acl.so` and `libnpusim_acl.a`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a program may run before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(300);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("acl/ is inside the workspace")
        .to_path_buf()
}

/// The directory of this package's shared and static libraries: `cargo test` leaves them in
/// `target/<profile>/deps/`, beside the test binary (`cargo build` also copies them one level
/// up, but those may be older).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("test binary directory");
    let candidates = [Some(deps), deps.parent()];
    candidates
        .into_iter()
        .flatten()
        .find(|d| d.join(shared_lib_name()).exists())
        .unwrap_or_else(|| {
            panic!(
                "{} is not in {} nor its parent: cargo builds it with this package's tests \
                 (crate-type cdylib)",
                shared_lib_name(),
                deps.display()
            )
        })
        .to_path_buf()
}

fn shared_lib_name() -> String {
    format!(
        "{}npusim_acl{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("npusim-acl-c");
    std::fs::create_dir_all(&dir).expect("create the output directory");
    dir
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

/// How a program is linked.
#[derive(Clone, Copy)]
enum Link {
    Shared,
    Static,
}

/// Compiles `source` (relative to the workspace) into an executable named after `name`;
/// returns it. Each compile writes its own file: tests run side by side, and one test's
/// compiler rewriting a program another is starting makes that start fail (`ETXTBSY`).
fn compile(source: &str, name: &str, link: Link) -> PathBuf {
    static COMPILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let root = workspace();
    let lib = lib_dir();
    let n = COMPILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let exe = out_dir().join(format!("{name}-{n}"));
    let mut cmd = Command::new(cc());
    cmd.arg("-std=c11")
        .args(["-Wall", "-Wextra", "-O1"])
        .arg(format!("-I{}", root.join("acl/include").display()))
        .arg(root.join(source))
        .arg("-o")
        .arg(&exe);
    match link {
        Link::Shared => {
            cmd.arg(format!("-L{}", lib.display()))
                .arg("-lnpusim_acl")
                .arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        Link::Static => {
            cmd.arg(lib.join("libnpusim_acl.a"));
            if cfg!(target_os = "linux") {
                cmd.args(["-ldl", "-lrt"]);
            }
        }
    }
    cmd.args(["-lpthread", "-lm"]);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", cc()));
    assert!(
        out.status.success(),
        "compiling {source} failed:\n{:?}\n{}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `exe` with `args` in the workspace, with a small simulated device unless `env` says
/// otherwise; returns its standard output. Fails if it fails, or hangs.
fn run(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    run_full(exe, args, env).0
}

/// As [`run`], returning standard output and standard error.
fn run_full(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(workspace())
        .env_remove("NPUSIM_DEVICES")
        .env_remove("NPUSIM_TRACE")
        .env_remove("NPUSIM_RECORD")
        .env("NPUSIM_PRESET", "small")
        // cargo's LD_LIBRARY_PATH may name an older copy of the library (`cargo build` puts
        // one in target/<profile>/): the one this test built comes first.
        .env("LD_LIBRARY_PATH", lib_dir())
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("{} did not finish within {TIMEOUT:?}", exe.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}{stderr}",
        exe.display(),
        out.status
    );
    (stdout, stderr)
}

/// Compiles and runs `tests/c/<name>.c` with the kernels directory as its argument; returns
/// its standard output.
fn program(name: &str) -> String {
    program_with(name, &[])
}

/// As [`program`], with environment variables.
fn program_with(name: &str, env: &[(&str, &str)]) -> String {
    program_full(name, env).0
}

/// As [`program_with`], returning standard output and standard error.
fn program_full(name: &str, env: &[(&str, &str)]) -> (String, String) {
    let exe = compile(&format!("tests/c/{name}.c"), name, Link::Shared);
    let kernels = workspace().join("examples/kernels");
    let (stdout, stderr) = run_full(&exe, &[kernels.to_str().expect("utf-8 path")], env);
    assert!(
        stdout.contains(&format!("{name}: ok")),
        "{name} did not report ok:\n{stdout}"
    );
    (stdout, stderr)
}

#[test]
fn npusim_sanitize_report_prints_the_race_of_a_c_program_with_its_acl_calls() {
    let (_, stderr) = program_full("sanitizer", &[("NPUSIM_SANITIZE", "report")]);
    assert_eq!(
        stderr.matches("npusim sanitizer: race").count(),
        1,
        "{stderr}"
    );
    for call in [
        "aclrtMemcpyAsync (ACL call #",
        "aclrtLaunchKernel (ACL call #",
    ] {
        assert!(stderr.contains(call), "{call} missing:\n{stderr}");
    }
    assert!(
        stderr.contains("npusim sanitizer: 1 report(s)"),
        "aclFinalize prints the count:\n{stderr}"
    );
}

#[test]
fn a_race_between_two_c_threads_names_both_and_the_annotations_fix_its_twin() {
    let (_, stderr) = program_full("sanitizer_threads", &[("NPUSIM_SANITIZE", "report")]);
    assert_eq!(
        stderr.matches("npusim sanitizer: race").count(),
        1,
        "{stderr}"
    );
    for text in [
        "first:  written by memcpy host to device on device 0 by host thread 1, called at \
         aclrtMemcpy (ACL call #",
        "then:   written by memcpy host to device on device 0 by host thread 2, called at \
         aclrtMemcpy (ACL call #",
        "npusimSanitizerRelease",
        "npusim sanitizer: 1 report(s)",
    ] {
        assert!(stderr.contains(text), "{text} missing:\n{stderr}");
    }
    // In error mode the racing copy fails; without the sanitizer every call succeeds.
    program_with("sanitizer_threads", &[("NPUSIM_SANITIZE", "error")]);
    program("sanitizer_threads");
}

#[test]
fn npusim_sanitize_error_fails_the_racing_kernel_with_device_mem_error() {
    program_with("sanitizer", &[("NPUSIM_SANITIZE", "error")]);
}

#[test]
fn the_c_test_programs_run_clean_under_npusim_sanitize_report() {
    for (name, env) in [
        ("vector_add", None),
        ("streams_events", None),
        ("mem_pool", None),
        ("threads", None),
        ("faults", None),
        ("callbacks", None),
        (
            "callback_timeouts",
            Some(("NPUSIM_CALLBACK_TIMEOUT_MS", "300")),
        ),
        ("errors", None),
        ("device_queries", None),
        ("res_limits", None),
        ("events_notifies", None),
        ("host_funcs", None),
        ("kernel_args", Some(("NPUSIM_DEVICES", "2"))),
        ("fault_cleanup", None),
        ("timeouts_prints", None),
    ] {
        let mut vars = vec![("NPUSIM_SANITIZE", "report")];
        vars.extend(env);
        let (_, stderr) = program_full(name, &vars);
        assert!(
            stderr.contains("npusim sanitizer: 0 report(s)"),
            "{name} was reported:\n{stderr}"
        );
    }
}

#[test]
fn vector_add_with_a_committed_binary_kernel() {
    program("vector_add");
}

#[test]
fn npusim_profile_summary_prints_a_row_per_binary_launch_at_acl_finalize() {
    let out = program_with("vector_add", &[("NPUSIM_PROFILE", "summary")]);
    let table = out
        .find("npusim profile: ")
        .map(|i| &out[i..])
        .unwrap_or_else(|| panic!("no profile table:\n{out}"));
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.split_whitespace().next() == Some("vadd_f32"))
        .collect();
    // The program's two launches (8 blocks, then 3), each with its time and the scalar
    // unit's busy time (vadd_f32 is a scalar loop: its loads and stores are not MTE traffic).
    assert_eq!(rows.len(), 2, "{table}");
    for (row, blocks) in rows.iter().zip(["8", "3"]) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols.len(), 11, "{row}");
        assert_eq!(cols[1], blocks, "{row}");
        let time: f64 = cols[2].parse().unwrap();
        let scalar: f64 = cols[7].parse().unwrap();
        assert!(time > 0.0 && scalar > 0.0, "{row}");
    }
    // Without the variable, no table.
    assert!(!program("vector_add").contains("npusim profile"));
}

#[test]
fn two_streams_joined_by_an_event() {
    program("streams_events");
}

#[test]
fn memory_pool_free_behind_a_running_kernel() {
    program("mem_pool");
}

#[test]
fn two_threads_with_their_own_contexts() {
    program("threads");
}

#[test]
fn faulting_kernel_in_one_context_while_another_finishes() {
    program("faults");
}

#[test]
fn callbacks_run_on_the_subscribed_report_thread() {
    program("callbacks");
}

#[test]
fn callbacks_nobody_serves_time_out_and_a_callback_waiting_for_itself_is_told() {
    program_with(
        "callback_timeouts",
        &[("NPUSIM_CALLBACK_TIMEOUT_MS", "300")],
    );
}

#[test]
fn acl_calls_from_an_exit_handler_return_codes_and_finalize_succeeds() {
    let (stdout, stderr) = program_full("exit_handler", &[]);
    assert!(
        stdout.contains("aclFinalize 0"),
        "the exit handler's aclFinalize:\n{stdout}{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn misuse_returns_error_codes_and_never_crashes() {
    program("errors");
}

#[test]
fn device_queries_answer_for_the_simulated_device() {
    program("device_queries");
}

#[test]
fn a_core_limit_slows_a_kernel_down_in_proportion() {
    program("res_limits");
}

#[test]
fn events_report_status_and_timestamps_and_notifies_join_streams() {
    program("events_notifies");
}

#[test]
fn host_functions_run_in_stream_order_on_their_thread() {
    program("host_funcs");
}

#[test]
fn kernel_arguments_built_one_by_one_launch_with_config() {
    program_with("kernel_args", &[("NPUSIM_DEVICES", "2")]);
}

#[test]
fn cleanup_after_a_kernel_fault_succeeds_as_in_the_vendor_sample() {
    let out = program("fault_cleanup");
    assert!(
        out.contains("Run the callback_exception sample successfully"),
        "{out}"
    );
}

#[test]
fn kernel_timeouts_are_simulated_time_and_kernel_prints_reach_stdout() {
    let out = program("timeouts_prints");
    let before = out.find("before the synchronize").expect("first line");
    let print = out
        .find("[div_zero block 0] 100\n")
        .expect("the kernel's print");
    let after = out.find("after the synchronize").expect("last line");
    assert!(before < print && print < after, "out of order:\n{out}");
}

/// The public headers, relative to `acl/include`.
const HEADERS: [&str; 5] = [
    "acl/acl.h",
    "acl/acl_rt.h",
    "acl/acl_base.h",
    "acl/acl_rt_allocator.h",
    "acl/error_codes/rt_error_codes.h",
];

#[test]
fn each_public_header_compiles_alone_in_c_and_cpp() {
    let root = workspace();
    let dir = out_dir();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let have_cxx = Command::new(&cxx).arg("--version").output().is_ok();
    for header in HEADERS {
        for (compiler, lang, std) in [(cc(), "c", "-std=c99"), (cxx.clone(), "c++", "-std=c++11")] {
            if lang == "c++" && !have_cxx {
                continue;
            }
            let src = dir.join(format!(
                "header_{}.{}",
                header.replace(['/', '.'], "_"),
                if lang == "c" { "c" } else { "cpp" }
            ));
            std::fs::write(
                &src,
                format!("#include \"{header}\"\nint main(void) {{ return 0; }}\n"),
            )
            .expect("write the probe");
            let out = Command::new(&compiler)
                .arg(std)
                .args(["-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only"])
                .arg(format!("-I{}", root.join("acl/include").display()))
                .arg(&src)
                .output()
                .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
            assert!(
                out.status.success(),
                "{header} alone does not compile as {lang}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn every_function_the_headers_declare_is_in_the_library() {
    let root = workspace();
    let header = std::fs::read_to_string(root.join("acl/include/acl/acl_rt.h")).expect("header");
    let base = std::fs::read_to_string(root.join("acl/include/acl/acl_base.h")).expect("header");
    let names: Vec<String> = header
        .lines()
        .chain(base.lines())
        .filter_map(|l| l.strip_prefix("ACL_FUNC_VISIBILITY "))
        .filter_map(|l| {
            let open = l.find('(')?;
            let name = l[..open].rsplit([' ', '*']).next()?;
            Some(name.to_string())
        })
        .collect();
    assert!(names.len() > 90, "found only {} declarations", names.len());
    let mut src = String::from("#include \"acl/acl.h\"\n#include <stdio.h>\nint main(void) {\n");
    for n in &names {
        src.push_str(&format!("    printf(\"%p\\n\", (void *)(size_t){n});\n"));
    }
    src.push_str("    return 0;\n}\n");
    let path = out_dir().join("every_function.c");
    std::fs::write(&path, src).expect("write the probe");
    let exe = compile(
        path.to_str().expect("utf-8 path"),
        "every_function",
        Link::Shared,
    );
    run(&exe, &[], &[]);
}

#[test]
fn quickstart_example_links_statically_and_writes_a_trace() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let exe = compile("examples/c/quickstart.c", "quickstart", Link::Static);
    let trace = out_dir().join("quickstart-trace.json");
    let _ = std::fs::remove_file(&trace);
    let stdout = run(
        &exe,
        &[],
        &[("NPUSIM_TRACE", trace.to_str().expect("utf-8 path"))],
    );
    assert!(stdout.contains("all correct"), "{stdout}");
    let json = std::fs::read_to_string(&trace).expect("NPUSIM_TRACE written at aclFinalize");
    assert!(
        json.contains("vadd_f32") && json.contains("memcpy"),
        "{json}"
    );
}

/// `npusim-acl-config`, as cargo built it for this test.
fn config_tool() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_npusim-acl-config"))
}

#[test]
fn the_config_tool_prints_flags_that_build_a_program_wherever_the_target_directory_is() {
    if !cfg!(target_os = "linux") {
        return;
    }
    // Another target directory: the tool and the library this test built, side by side.
    let target = out_dir().join("other-target").join("release");
    std::fs::create_dir_all(&target).expect("mkdir");
    let tool = target.join("npusim-acl-config");
    let _ = std::fs::remove_file(&tool);
    std::fs::copy(config_tool(), &tool).expect("copy the tool");
    let so = target.join(shared_lib_name());
    let _ = std::fs::remove_file(&so);
    #[cfg(unix)]
    std::os::unix::fs::symlink(lib_dir().join(shared_lib_name()), &so).expect("link the library");
    let out = Command::new(&tool)
        .args(["--cflags", "--libs"])
        .output()
        .expect("run the tool");
    assert!(out.status.success(), "{out:?}");
    let flags = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dir = target.canonicalize().expect("canonical directory");
    assert!(
        flags.contains(&format!("-L{} ", dir.display()))
            && flags.contains(&format!("-I{}", workspace().join("acl/include").display())),
        "{flags}"
    );
    let exe = out_dir().join("quickstart-config");
    let built = Command::new(cc())
        .arg(workspace().join("examples/c/quickstart.c"))
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run the compiler");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let mut cmd = Command::new(&exe);
    // The rpath the tool gave must find the library by itself.
    cmd.current_dir(workspace())
        .env_remove("LD_LIBRARY_PATH")
        .env("NPUSIM_PRESET", "small");
    let ran = cmd.output().expect("run the program");
    assert!(ran.status.success(), "{ran:?}");
    assert!(String::from_utf8_lossy(&ran.stdout).contains("all correct"));
    let pc = Command::new(&tool)
        .arg("--pc")
        .output()
        .expect("run the tool");
    assert!(String::from_utf8_lossy(&pc.stdout).contains("Libs: -L${libdir} -lnpusim_acl"));
}

#[test]
fn the_config_tool_says_so_when_the_library_is_not_beside_it() {
    // A copy elsewhere stands for a tool in a target directory where the library was not built.
    let copy = out_dir().join("lonely").join("npusim-acl-config");
    std::fs::create_dir_all(copy.parent().expect("dir")).expect("mkdir");
    std::fs::copy(config_tool(), &copy).expect("copy the tool");
    let out = Command::new(&copy)
        .arg("--libs")
        .output()
        .expect("run the copy");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cargo build --release -p npusim-acl"), "{err}");
    let bad = Command::new(config_tool())
        .arg("--frobnicate")
        .output()
        .expect("run the tool");
    assert!(!bad.status.success());
}

/// The Chrome trace's task spans, as (name, start, duration), sorted.
fn spans(json: &str) -> Vec<(String, String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).expect("timeline JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let mut out: Vec<(String, String, String)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            (
                e["name"].to_string(),
                e["ts"].to_string(),
                e["dur"].to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn c_programs_recorded_with_npusim_record_replay_to_their_timelines() {
    use npusim_engine::record::{ReplayOptions, Trace, replay};
    for name in ["vector_add", "streams_events"] {
        let dir = out_dir();
        let trace = dir.join(format!("{name}.npt"));
        let timeline = dir.join(format!("{name}.json"));
        let _ = std::fs::remove_file(&trace);
        program_with(
            name,
            &[
                ("NPUSIM_RECORD", trace.to_str().unwrap()),
                ("NPUSIM_RECORD_DATA", "1"),
                ("NPUSIM_TRACE", timeline.to_str().unwrap()),
            ],
        );
        let t = Trace::read(&trace).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            t.entries.iter().any(|e| e.call.name() == "launch"),
            "{name}: no launch recorded"
        );
        let replayed = replay(&t, ReplayOptions::default()).unwrap();
        let recorded = std::fs::read_to_string(&timeline).unwrap();
        let spans_recorded = spans(&recorded);
        assert!(!spans_recorded.is_empty());
        assert_eq!(
            spans(&replayed.runtime.timeline_json()),
            spans_recorded,
            "{name}: the replay's timeline differs"
        );
    }
}

/// Whether `tool --version` runs.
fn installed(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

#[test]
fn a_cann_sample_s_own_cmake_build_runs_in_both_modes_against_npusim_as_its_cann_package() {
    if !installed("cmake") || !installed("clang++-16") || !installed("c++") {
        eprintln!("cmake, clang++-16 or c++ not installed (.ci/run installs them): skipped");
        return;
    }
    let root = workspace();
    for mode in ["npu", "cpu"] {
        let build = out_dir().join(format!("cmake-sample-{mode}"));
        let _ = std::fs::remove_dir_all(&build);
        let configure = Command::new("cmake")
            .arg("-S")
            .arg(root.join("examples/ascendc/cmake"))
            .arg("-B")
            .arg(&build)
            .arg(format!(
                "-DASCEND_CANN_PACKAGE_PATH={}",
                root.join("acl/cann").display()
            ))
            .arg(format!("-DRUN_MODE={mode}"))
            .arg(format!("-DNPUSIM_ACL_LIBRARY_DIR={}", lib_dir().display()))
            .output()
            .unwrap();
        let log = |o: &std::process::Output| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        };
        assert!(configure.status.success(), "{mode}: {}", log(&configure));
        let make = Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .output()
            .unwrap();
        assert!(make.status.success(), "{mode}: {}", log(&make));
        let run = Command::new(build.join("ascendc_kernels_bbit"))
            .env("LD_LIBRARY_PATH", lib_dir())
            .output()
            .unwrap();
        let out = log(&run);
        assert!(run.status.success(), "{mode}: {out}");
        let want = if mode == "npu" {
            "<<<>>> launch): correct"
        } else {
            "ICPU_RUN_KF): correct"
        };
        assert!(out.contains(want), "{mode}: {out}");
    }
}

#[test]
fn a_matmul_api_kernel_with_host_tiling_matches_the_cpu_bit_for_bit_on_ragged_shapes() {
    if !installed("clang++-16") || !installed("c++") {
        eprintln!("clang++-16 or c++ not installed (.ci/run installs them): skipped");
        return;
    }
    let root = workspace();
    let out = out_dir().join("matmul-api");
    let tool = Command::new("bash")
        .arg(root.join("scripts/npusim-ascendc.sh"))
        .arg(root.join("examples/ascendc/matmul_api.cpp"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        tool.status.success(),
        "{}",
        String::from_utf8_lossy(&tool.stderr)
    );
    // The Matmul kernel is a mix kernel: its launcher runs two AIV blocks per AI core.
    let launcher = std::fs::read_to_string(out.join("aclrtlaunch_matmul_api.cpp")).unwrap();
    assert!(launcher.contains("blockDim * 2u"), "{launcher}");
    let exe = out.join("matmul_api_host");
    let lib = lib_dir();
    let build = Command::new("c++")
        .args(["-std=c++17", "-O2", "-Wall", "-Werror", "-I"])
        .arg(&out)
        .arg(format!("-I{}", root.join("acl/include").display()))
        .arg(root.join("examples/c/ascendc_matmul.cpp"))
        .arg(out.join("aclrtlaunch_matmul_api.cpp"))
        .arg(format!("-L{}", lib.display()))
        .arg("-lnpusim_acl")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    // The 910B: the sample's 512 x 1024 x 512 on 2 x 2 blocks of 256 x 512 (2 x 2 base blocks
    // each, 8 K steps), 512 x 512 x 512 one block per AI core (a block runs on a whole AI core,
    // so more blocks than cores would run in two waves), and 100 x 72 x 200 with a tail on
    // every side (M, N, the cores' split and K's last step of 8). The small preset's 4 cores.
    for (preset, args, cores) in [
        ("910b", &["512", "1024", "512", "256", "512"][..], "4 cores"),
        ("910b", &["512", "512", "512"][..], "24 cores"),
        // 1024^3: 8 x 3 blocks of 128 x 352 (A's rows kept in L1 for the three 128-wide base
        // blocks), the deepest step two of which fit L0A and L0B, two C blocks in L0C.
        (
            "910b",
            &["1024", "1024", "1024"][..],
            "24 cores, single 128 x 352 x 1024, base 128 x 128 x 128",
        ),
        ("910b", &["100", "72", "200", "48", "48"][..], "6 cores"),
        ("small", &["100", "72", "200"][..], "4 cores"),
    ] {
        let stdout = run(&exe, args, &[("NPUSIM_PRESET", preset)]);
        assert!(stdout.contains(cores), "{preset} {args:?}: {stdout}");
        assert!(
            stdout.contains("float and half C bit for bit"),
            "{preset} {args:?}: {stdout}"
        );
    }
    // What npusim's Matmul does not offer is refused by the tiling, naming it.
    let (stdout, stderr) = run_full_status(&exe, &["100", "72", "200", "48", "48"], "small");
    assert!(stdout.contains("gen tiling failed"), "{stdout}");
    assert!(
        stderr.contains("need more cores than SetDim gives"),
        "{stderr}"
    );
}

/// Runs `exe` on a preset, expecting it to fail; returns its standard output and error.
fn run_full_status(exe: &Path, args: &[&str], preset: &str) -> (String, String) {
    let out = Command::new(exe)
        .args(args)
        .current_dir(workspace())
        .env("NPUSIM_PRESET", preset)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{} succeeded", exe.display());
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
