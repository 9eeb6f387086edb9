//! The host path of Ascend C kernels: `scripts/npusim-ascendc.sh` compiles a kernel source
//! unchanged (its `<<<...>>>` launch skipped under `__CCE_KT_TEST__`), generates the
//! `aclrtlaunch_<kernel>.h` headers with `ACLRT_LAUNCH_KERNEL`, and launch code that
//! compiles against `acl/acl.h`; a parameter it cannot pass makes it exit 1 naming the kernel,
//! the parameter and why. (`.ci/run` also links and runs the C++ host program with
//! `make -f examples/c/ascendc.mk run`, which launches a kernel with a by-value tiling struct.)

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

/// Runs `scripts/npusim-ascendc.sh FLAGS... SRC OUT` in `dir`.
fn tool(flags: &[&str], src: &Path, out: &Path, dir: &Path) -> std::process::Output {
    Command::new("bash")
        .arg(root().join("scripts/npusim-ascendc.sh"))
        .args(flags)
        .arg(src)
        .arg(out)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Runs the tool on `examples/ascendc/STEM.cpp` into a fresh directory and returns it; `None`
/// (the test skips) where clang++-16 or c++ is not installed.
fn tool_on_example(stem: &str) -> Option<PathBuf> {
    if !have("clang++-16") || !have("c++") {
        eprintln!("clang++-16 or c++ not installed (.ci/run installs them): skipped");
        return None;
    }
    let out = std::env::temp_dir().join(format!("npusim-ascendc-{stem}-{}", std::process::id()));
    let run = tool(
        &[],
        &root().join(format!("examples/ascendc/{stem}.cpp")),
        &out,
        &root(),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    Some(out)
}

/// Whether the generated launch code `out/aclrtlaunch_STEM.cpp` compiles for the host.
fn host_compiles(out: &Path, stem: &str) -> bool {
    Command::new("c++")
        .args(["-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-I"])
        .arg(out)
        .arg("-I")
        .arg(root().join("acl/include"))
        .arg(out.join(format!("aclrtlaunch_{stem}.cpp")))
        .status()
        .unwrap()
        .success()
}

#[test]
fn the_tool_generates_the_launch_header_and_code_for_every_kernel_of_a_source() {
    let Some(out) = tool_on_example("add_custom") else {
        return;
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let header = read(&out.join("aclrtlaunch_add_custom.h"));
    assert!(header.contains(
        "uint32_t aclrtlaunch_add_custom(uint32_t blockDim, aclrtStream stream, void *x, \
         void *y, void *z);"
    ));
    assert!(header.contains("#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func"));
    let tiled = read(&out.join("aclrtlaunch_add_custom_tiling.h"));
    assert!(tiled.contains("void *z, void *tiling);"));
    // A struct by value: the launcher takes a pointer to the host's struct (`&tiling`, as
    // CANN's generated launcher does) and packs its 8 bytes into one argument slot.
    let by_value = read(&out.join("aclrtlaunch_add_custom_tiling_f32.h"));
    assert!(by_value.contains("void *z, const void *tiling);"));
    assert!(
        read(&out.join("aclrtlaunch_add_custom.cpp"))
            .contains("memcpy(&slots[3], tiling, 8); // struct AddTiling by value")
    );
    // The object is the committed one (the build is reproducible) and is embedded.
    let object = std::fs::read(out.join("add_custom.o")).unwrap();
    assert_eq!(
        object,
        std::fs::read(root().join("examples/ascendc/add_custom.o")).unwrap()
    );
    let code = read(&out.join("aclrtlaunch_add_custom.cpp"));
    assert!(code.contains("aclrtBinaryLoadFromData"));
    assert!(code.contains("npusimLaunchKernel(f, blockDim, slots, sizeof slots, 0u, stream)"));
    assert!(
        host_compiles(&out, "add_custom"),
        "the generated launch code compiles"
    );

    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_struct_the_launcher_cannot_pass_by_value_fails_the_tool_naming_kernel_and_parameter() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("npusim-ascendc-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("refused.cpp");
    std::fs::write(
        &src,
        "#include \"kernel_operator.h\"\n\
         struct Scale { float alpha; uint32_t n; };\n\
         struct Big { uint32_t w[6]; };\n\
         extern \"C\" __global__ __aicore__ void scaled(GM_ADDR x, Scale s) { (void)x; (void)s; }\n\
         extern \"C\" __global__ __aicore__ void big(GM_ADDR x, Big b) { (void)x; (void)b; }\n\
         extern \"C\" __global__ __aicore__ void fine(GM_ADDR x) { (void)x; }\n",
    )
    .unwrap();
    let out = tool(&[], &src, &dir.join("out"), &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("kernel scaled, parameter 'Scale s'")
            && stderr.contains("floating-point fields"),
        "{stderr}"
    );
    assert!(
        stderr.contains("kernel big, parameter 'Big b'") && stderr.contains("24 bytes"),
        "{stderr}"
    );
    // The kernel it can launch still gets its launcher.
    assert!(dir.join("out/aclrtlaunch_fine.h").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_tool_takes_a_sample_s_defines_include_directories_and_arch_flags() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("npusim-ascendc-flags-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("inc")).unwrap();
    // The struct's size depends on a define, so the launcher is right only if the layout was
    // taken with the same flags as the object.
    std::fs::write(
        dir.join("inc/tiling.h"),
        "struct Tiling { uint32_t w[WORDS]; };\n",
    )
    .unwrap();
    let src = dir.join("flags.cpp");
    std::fs::write(
        &src,
        "#include \"kernel_operator.h\"\n\
         #include \"tiling.h\"\n\
         #ifndef NEEDED\n#error NEEDED is not defined\n#endif\n\
         extern \"C\" __global__ __aicore__ void k(GM_ADDR x, Tiling t) { (void)x; (void)t; }\n",
    )
    .unwrap();
    let run = |flags: &[&str]| tool(flags, &src, &dir.join("out"), &dir);
    let ok = run(&[
        "-DNEEDED",
        "-DWORDS=4",
        "-I",
        "inc",
        "-O2",
        "--cce-aicore-arch=dav-c220-vec",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let code = std::fs::read_to_string(dir.join("out/aclrtlaunch_flags.cpp")).unwrap();
    assert!(code.contains("memcpy(&slots[1], t, 16); // struct Tiling by value"));
    // Without the define the kernel's own #error stops the build, and the tool fails.
    assert!(!run(&["-DWORDS=4", "-Iinc"]).status.success());
    // A flag it does not know is named, with the usage.
    let unknown = run(&["-fwhatever"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown flag '-fwhatever'"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_kernel_file_s_chevron_wrapper_is_compiled_for_the_host_as_a_launch() {
    let Some(out) = tool_on_example("add_chevron") else {
        return;
    };
    let code = std::fs::read_to_string(out.join("aclrtlaunch_add_chevron.cpp")).unwrap();
    // The wrapper as the file defines it, its launch now through the generated launcher.
    assert!(code.contains("void add_chevron_do(uint32_t blockDim, void *l2ctrl, void *stream,"));
    assert!(
        code.contains("(void)(l2ctrl), aclrtlaunch_add_chevron(blockDim, stream, x, y, z, n);")
    );
    assert!(!code.contains("<<<"));
    assert!(
        host_compiles(&out, "add_chevron"),
        "the wrapper compiles for the host"
    );

    std::fs::remove_dir_all(&out).unwrap();
}
