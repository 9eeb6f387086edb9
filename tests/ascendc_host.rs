//! The host path of Ascend C kernels: `scripts/npusim-ascendc.sh` compiles a kernel source
//! unchanged (its `<<<...>>>` wrapper is host code, left out of the device object), generates the
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
fn a_struct_the_launcher_cannot_pass_by_value_fails_the_tool_and_a_large_one_goes_by_reference() {
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
    // A struct over 16 bytes goes by reference to a copy (LP64F): the launcher passes it as
    // a placeholder argument, which the runtime copies to device memory at each launch.
    assert!(!stderr.contains("kernel big"), "{stderr}");
    let code = std::fs::read_to_string(dir.join("out/aclrtlaunch_refused.cpp")).unwrap();
    assert!(
        code.contains("aclrtKernelArgsGetPlaceHolderBuffer(h, ph[1], 24, &buf)"),
        "{code}"
    );
    // The kernels it can launch still get their launchers.
    assert!(dir.join("out/aclrtlaunch_fine.h").exists());
    assert!(dir.join("out/aclrtlaunch_big.h").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_kernel_with_unnamed_parameters_gets_a_launcher_naming_them_by_place() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("unnamed");
    let src = dir.join("unnamed.cpp");
    std::fs::write(
        &src,
        "#include \"kernel_operator.h\"\n\
         extern \"C\" __global__ __aicore__ void unnamed(GM_ADDR x, GM_ADDR, __gm__ uint8_t *,\n\
                                                        unsigned int, float) { (void)x; }\n",
    )
    .unwrap();
    let out = tool(&[], &src, &dir.join("out"), &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let header = std::fs::read_to_string(dir.join("out/aclrtlaunch_unnamed.h")).unwrap();
    assert!(
        header.contains("void *x, void *arg1, void *arg2, unsigned int arg3, float arg4"),
        "{header}"
    );
    assert!(
        host_compiles(&dir.join("out"), "unnamed"),
        "the launcher compiles for the host"
    );
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

#[test]
fn a_top_level_chevron_wrapper_outside_any_guard_is_host_code_as_in_cann_s_mixed_compile() {
    if !have("clang++-16") || !have("c++") {
        eprintln!("clang++-16 or c++ not installed (.ci/run installs them): skipped");
        return;
    }
    let dir = scratch("bare-chevron");
    // The shape of CANN's newer samples (hello_world.cpp): the host wrapper is a plain
    // function after the kernel, in no `#ifndef __CCE_KT_TEST__` block; a comment and a
    // string holding braces and a launch are neither code nor a launch.
    let src = dir.join("bare.cpp");
    std::fs::write(
        &src,
        "#include \"kernel_operator.h\"\n\
         extern \"C\" __global__ __aicore__ void k(GM_ADDR x) {\n\
         \x20   AscendC::printf(\"} k<<<1, nullptr, s>>>() {\\n\");\n    (void)x;\n}\n\
         // k<<<1, nullptr, s>>>(x);\n\
         void k_do(uint32_t b, void *s, uint8_t *x)\n{\n    k<<<b, nullptr, s>>>(x);\n}\n",
    )
    .unwrap();
    // The device compile takes the file (the wrapper blanked, line numbers kept).
    let obj = compile(&[], &src, &dir).unwrap();
    assert!(obj.exists());
    // The tool compiles the wrapper for the host, its launch through the launcher.
    let out = dir.join("out");
    let run = tool(&[], &src, &out, &dir);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let code = std::fs::read_to_string(out.join("aclrtlaunch_bare.cpp")).unwrap();
    assert!(
        code.contains("void k_do(uint32_t b, void *s, uint8_t *x)"),
        "{code}"
    );
    assert!(
        code.contains("(void)(nullptr), aclrtlaunch_k(b, s, x);"),
        "{code}"
    );
    assert!(!code.contains("<<<"), "{code}");
    assert!(
        host_compiles(&out, "bare"),
        "the wrapper compiles for the host"
    );

    // A launch of a kernel the file does not define: the tool fails, naming line and kernel.
    let other = dir.join("other.cpp");
    std::fs::write(
        &other,
        "#include \"kernel_operator.h\"\n\
         extern \"C\" __global__ __aicore__ void k(GM_ADDR x) { (void)x; }\n\
         void j_do(uint32_t b, void *s, uint8_t *x) {\n    j<<<b, nullptr, s>>>(x);\n}\n",
    )
    .unwrap();
    let run = tool(&[], &other, &dir.join("out2"), &dir);
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains(
            "other.cpp:4: j<<<...>>>: j is not an extern \"C\" __global__ __aicore__ kernel"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Compiles `src` with `scripts/ascendc-compile.sh FLAGS... src out.o` (in `dir`); the object's
/// path, or the compiler's messages.
fn compile(flags: &[&str], src: &Path, dir: &Path) -> Result<PathBuf, String> {
    let obj = dir.join(format!(
        "{}-{}.o",
        src.file_stem().unwrap().to_string_lossy(),
        flags.join("").replace(['-', '=', ' '], "")
    ));
    let run = Command::new("bash")
        .arg(root().join("scripts/ascendc-compile.sh"))
        .args(flags)
        .arg(src)
        .arg(&obj)
        .current_dir(dir)
        .output()
        .unwrap();
    if run.status.success() {
        Ok(obj)
    } else {
        Err(format!(
            "exit {:?}: {}",
            run.status.code(),
            String::from_utf8_lossy(&run.stderr)
        ))
    }
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("npusim-ascendc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The words `compile_env` (examples/ascendc/compile_env.cpp) writes from the object `obj` on
/// two blocks: `__CCE_AICORE__` (-1 if undefined), then 1 where `__DAV_C220_VEC__`,
/// `__DAV_C220_CUBE__`, `__CCE_KT_TEST__`, `ASCENDC_CPU_DEBUG` are defined.
fn mode_macros(obj: &Path) -> [i32; 5] {
    use npusim::prelude::*;
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let bin = rt.binaries().load_file(obj).unwrap();
    let k = rt.binaries().get_function(bin, "compile_env").unwrap();
    let s = rt.streams().create().unwrap();
    let out = rt.memory().malloc(256).unwrap();
    rt.memory().memcpy_htod(out, &[0i32; 64]).unwrap();
    rt.submit(Launch::new(k, 2, &[out.into()], s)).unwrap();
    rt.streams().synchronize(s).unwrap();
    let mut w = [0i32; 10];
    rt.memory().memcpy_dtoh(&mut w, out).unwrap();
    assert_eq!(&w[8..], &[1, 2], "each block's get_block_idx() + 1");
    [w[0], w[1], w[2], w[3], w[4]]
}

#[test]
fn one_kernel_file_builds_in_both_of_cann_s_modes_with_their_macros() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("modes");
    let src = root().join("examples/ascendc/compile_env.cpp");
    let build = |flags: &[&str]| compile(flags, &src, &dir).unwrap_or_else(|e| panic!("{e}"));
    // The NPU build (the file's <<<>>> wrapper is host code, left out of the object); the
    // default architecture is the 910B's vector core.
    assert_eq!(mode_macros(&build(&[])), [220, 1, 0, 0, 0]);
    // CANN's twin-debug build: __CCE_KT_TEST__ and ASCENDC_CPU_DEBUG, no core macro.
    assert_eq!(mode_macros(&build(&["--cpu-debug"])), [220, 0, 0, 1, 1]);
    // The architecture flags of CANN's compile.
    let cube = build(&["--cce-aicore-arch=dav-c220-cube"]);
    assert_eq!(mode_macros(&cube), [220, 0, 1, 0, 0]);
    assert_eq!(
        mode_macros(&build(&["--npu-arch=dav-2201"])),
        [220, 1, 1, 0, 0]
    );
    let core = build(&["--cce-aicore-arch=dav-c220", "--cce-soc-core-type=VecCore"]);
    assert_eq!(mode_macros(&core), [220, 1, 0, 0, 0]);
    assert_eq!(mode_macros(&build(&["--cce-aicore-arch=dav-m200"]))[0], 200);
    // Flags of CANN's compile that mean nothing here are taken.
    build(&["-xcce", "-fPIC", "--cce-soc-version=Ascend910B3", "-O3"]);
    // An architecture it does not know is named.
    let err = compile(&["--cce-aicore-arch=dav-x999"], &src, &dir).unwrap_err();
    assert!(
        err.starts_with("exit Some(2)") && err.contains("unknown AI-core architecture 'dav-x999'"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_the_device_compile_cannot_take_is_named_not_buried_in_errors() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("refusals");
    let file = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, format!("#include \"kernel_operator.h\"\n{body}")).unwrap();
        p
    };
    // A std header the core does not have: the compiler names it.
    let vector = file("vector.cpp", "#include <vector>\n");
    let err = compile(&[], &vector, &dir).unwrap_err();
    assert!(err.contains("'vector' file not found"), "{err}");
    // <cmath> on a double: the core has no double arithmetic, and the message says so.
    let double = file(
        "double.cpp",
        "#include <cmath>\n\
         extern \"C\" __global__ __aicore__ void k(GM_ADDR x) { *(__gm__ float *)x = (float)std::exp(1.0); }\n",
    );
    let err = compile(&[], &double, &dir).unwrap_err();
    assert!(
        err.contains("std::exp(double): the AI core has no double arithmetic"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cube_api_the_layer_does_not_offer_stops_the_compile_naming_it() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("cube-refusals");
    let cases = [
        (
            "gm_queue.cpp",
            "TQue<TPosition::GM, 1> q;",
            "TQue: this TPosition is not offered by npusim's layer",
        ),
        (
            "half_bias.cpp",
            "LocalTensor<float> c; LocalTensor<half> a, b, bias; Mmad(c, a, b, bias, MmadParams());",
            "Mmad: the bias table holds float",
        ),
        (
            "int8.cpp",
            "LocalTensor<int32_t> c; LocalTensor<int32_t> a, b; Mmad(c, a, b, MmadParams());",
            "Mmad: npusim's cube accumulates in float",
        ),
        (
            "load3d.cpp",
            "LoadData3DParamsV2<half> p; (void)p;",
            "LoadData3DParamsV2 (LoadData Load3Dv2, im2col) is not offered",
        ),
        (
            "enhanced.cpp",
            "DataCopyEnhancedParams p; (void)p;",
            "DataCopyEnhancedParams (DataCopy CO1 -> CO2, the Atlas inference path) is not offered",
        ),
        (
            "gm_load.cpp",
            "LocalTensor<half> a; GlobalTensor<half> g; LoadData(a, g, LoadData2DParams());",
            "LoadData(LocalTensor, GlobalTensor, LoadData2DParams) (GM -> A2 / B2) is not offered",
        ),
        (
            "fixpipe_nz.cpp",
            "GlobalTensor<float> g; LocalTensor<float> c; \
             Fixpipe<float, float, CFG_NZ>(g, c, FixpipeParamsV220());",
            "Fixpipe: only the ND (CFG_ROW_MAJOR) output is offered",
        ),
    ];
    assert_refused(&dir, &cases);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Compiles each `(file, kernel body, message)` case in `dir` (the body inside a kernel with
/// `using namespace AscendC`) and asserts the compile fails printing the message.
fn assert_refused(dir: &std::path::Path, cases: &[(&str, &str, &str)]) {
    for (name, body, message) in cases {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                "#include \"kernel_operator.h\"\nusing namespace AscendC;\n\
                 extern \"C\" __global__ __aicore__ void k(GM_ADDR x) {{ (void)x; {body} }}\n"
            ),
        )
        .unwrap();
        let err = compile(&[], &p, dir).unwrap_err();
        assert!(err.contains(message), "{name}: {err}");
    }
}

#[test]
fn an_atomic_or_barrier_api_the_layer_does_not_offer_stops_the_compile_naming_it() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("atomic-refusals");
    let cases = [
        (
            "atomic_i16.cpp",
            "SetAtomicAdd<int16_t>();",
            "SetAtomicAdd: npusim's layer adds float, half and int32_t",
        ),
        (
            "atomic_max.cpp",
            "SetAtomicMax<float>();",
            "SetAtomicMax is not offered by npusim's layer",
        ),
        (
            "init_gm_i8.cpp",
            "GlobalTensor<int8_t> g; InitGlobalMemory(g, 8, (int8_t)0);",
            "InitGlobalMemory: 16- and 32-bit element types",
        ),
    ];
    assert_refused(&dir, &cases);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_twin_debug_build_gives_each_kernel_a_host_definition_for_icpu_run_kf() {
    if !have("clang++-16") || !have("c++") {
        eprintln!("clang++-16 or c++ not installed (.ci/run installs them): skipped");
        return;
    }
    let dir = scratch("cpu-debug");
    let out = dir.join("out");
    let run = tool(
        &["--cpu-debug"],
        &root().join("examples/ascendc/add_chevron.cpp"),
        &out,
        &root(),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let code = std::fs::read_to_string(out.join("aclrtlaunch_add_chevron.cpp")).unwrap();
    // The kernel, callable from the host as ICPU_RUN_KF calls it, launching with GmAlloc
    // pointers as their device addresses; the <<<>>> wrapper is compiled out, as with CANN.
    assert!(
        code.contains("extern \"C\" void add_chevron(void *x, void *y, void *z, uint32_t n) {")
    );
    assert!(code.contains("npusim_icpu::device(x)"));
    assert!(!code.contains("add_chevron_do"));
    // The sample-shaped main builds in its twin-debug form against tikicpulib.h, with the
    // generated code (`.ci/run` runs it: make ... RUN_MODE=cpu run).
    let syntax = |file: &Path| {
        Command::new("c++")
            .args(["-std=c++17", "-fsyntax-only", "-Wall", "-Werror"])
            .args(["-DASCENDC_CPU_DEBUG", "-D__CCE_KT_TEST__", "-I"])
            .arg(&out)
            .arg("-I")
            .arg(root().join("acl/include"))
            .arg(file)
            .status()
            .unwrap()
            .success()
    };
    assert!(syntax(&out.join("aclrtlaunch_add_chevron.cpp")));
    assert!(syntax(&root().join("examples/c/ascendc_chevron.cpp")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_matmul_api_feature_the_layer_does_not_offer_stops_the_compile_naming_it() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("matmul-refusals");
    let half = "MatmulType<TPosition::GM, CubeFormat::ND, half>";
    let out = "MatmulType<TPosition::GM, CubeFormat::ND, float>";
    let cases = [
        (
            "float_in.cpp",
            format!(
                "Matmul<MatmulType<TPosition::GM, CubeFormat::ND, float>, \
                 MatmulType<TPosition::GM, CubeFormat::ND, float>, {out}> mm; (void)mm;"
            ),
            "Matmul: A and B must be half",
        ),
        (
            "nz.cpp",
            format!(
                "Matmul<MatmulType<TPosition::GM, CubeFormat::NZ, half>, {half}, {out}> mm; (void)mm;"
            ),
            "Matmul: CubeFormat other than ND is not offered",
        ),
        (
            "trans.cpp",
            format!(
                "Matmul<{half}, MatmulType<TPosition::GM, CubeFormat::ND, half, true>, {out}> mm; \
                 (void)mm;"
            ),
            "Matmul: a transposed A or B (MatmulType ISTRANS) is not offered",
        ),
        (
            "l1_a.cpp",
            format!(
                "Matmul<MatmulType<TPosition::A1, CubeFormat::ND, half>, {half}, {out}> mm; (void)mm;"
            ),
            "Matmul: A and B outside TPosition::GM are not offered",
        ),
        (
            "bias_ub.cpp",
            format!(
                "Matmul<{half}, {half}, {out}, MatmulType<TPosition::VECIN, CubeFormat::ND, float>> \
                 mm; (void)mm;"
            ),
            "Matmul: a bias outside TPosition::GM is not offered",
        ),
        (
            "bias_int.cpp",
            format!(
                "Matmul<{half}, {half}, {out}, MatmulType<TPosition::GM, CubeFormat::ND, int32_t>> \
                 mm; (void)mm;"
            ),
            "Matmul: the bias must be float or half",
        ),
        (
            "bias_type.cpp",
            format!("Matmul<{half}, {half}, {out}> mm; GlobalTensor<half> b; mm.SetBias(b);"),
            "Matmul::SetBias: the bias tensor's type must be BIAS_TYPE's",
        ),
        (
            "gm_c_to_ub.cpp",
            format!("Matmul<{half}, {half}, {out}> mm; LocalTensor<float> c; mm.GetTensorC(c);"),
            "Matmul::GetTensorC to a LocalTensor: C's MatmulType must be in UB",
        ),
        (
            "co1_c.cpp",
            format!(
                "Matmul<{half}, {half}, MatmulType<TPosition::CO1, CubeFormat::ND, float>> mm; \
                 (void)mm;"
            ),
            "C in TPosition::CO1 (the user-managed L0C form) is not offered",
        ),
    ];
    for (name, body, message) in cases {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                "#include \"kernel_operator.h\"\n#include \"lib/matmul_intf.h\"\n\
                 using namespace matmul;\n\
                 extern \"C\" __global__ __aicore__ void k(GM_ADDR x) {{ (void)x; {body} }}\n"
            ),
        )
        .unwrap();
        let err = compile(&[], &p, &dir).unwrap_err();
        assert!(err.contains(message), "{name}: {err}");
    }
    // What a Matmul sample's own code uses beside it compiles: DEFAULT_C0_SIZE, the
    // DataCopyParams unit, found through `using namespace matmul` as with CANN.
    let p = dir.join("c0.cpp");
    std::fs::write(
        &p,
        "#include \"kernel_operator.h\"\n#include \"lib/matmul_intf.h\"\n\
         using namespace matmul;\n\
         static_assert(AscendC::DEFAULT_C0_SIZE == 32 && DEFAULT_C0_SIZE == 32, \"C0\");\n\
         extern \"C\" __global__ __aicore__ void k(GM_ADDR x) { (void)x; (void)GetBlockIdx(); }\n",
    )
    .unwrap();
    compile(&[], &p, &dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reduction_or_gather_on_a_type_the_layer_does_not_offer_stops_the_compile_naming_it() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("masked-types");
    let cases = [
        (
            "WholeReduceSum<int32_t>(d, s, 8, 1, 1, 1, 8);",
            "int32_t",
            "WholeReduceSum: half or float tensors only",
        ),
        (
            "WholeReduceMax<int16_t>(d, s, 8, 1, 1, 1, 8);",
            "int16_t",
            "WholeReduceMax: half or float tensors only",
        ),
        (
            "BlockReduceSum<int32_t>(d, s, 1, 8, 1, 1, 8);",
            "int32_t",
            "BlockReduceSum: half or float tensors only",
        ),
        (
            "WholeReduceSum<float, false>(d, s, 8, 1, 1, 1, 8);",
            "float",
            "WholeReduceSum: isSetMask = false is not supported",
        ),
        (
            "uint64_t n; GatherMask(d, s, s.ReinterpretCast<uint16_t>(), false, 0, GatherMaskParams(), n);",
            "float",
            "GatherMask: src1Pattern is uint16_t for 16-bit tensors, uint32_t for 32-bit",
        ),
    ];
    for (i, (call, ty, message)) in cases.iter().enumerate() {
        let src = dir.join(format!("bad{i}.cpp"));
        std::fs::write(
            &src,
            format!(
                "#include \"kernel_operator.h\"\nusing namespace AscendC;\n\
                 extern \"C\" __global__ __aicore__ void k() {{\n\
                 TPipe pipe; TBuf<TPosition::VECCALC> b; pipe.InitBuffer(b, 1024);\n\
                 LocalTensor<{ty}> d = b.Get<{ty}>(), s = b.Get<{ty}>();\n{call}\n}}\n"
            ),
        )
        .unwrap();
        let err = compile(&[], &src, &dir).expect_err(call);
        assert!(err.contains(message), "{call}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Builds the host program `src` against `acl/include` (C++17, warnings as errors) into `exe`,
/// runs it and returns what it printed (standard output, standard error); a failed build or run
/// fails the test.
fn host_program_output(src: &Path, exe: &Path) -> (String, String) {
    let build = Command::new("c++")
        .args(["-std=c++17", "-Wall", "-Werror", "-I"])
        .arg(root().join("acl/include"))
        .arg(src)
        .arg("-o")
        .arg(exe)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let run = Command::new(exe).output().unwrap();
    assert!(run.status.success());
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (text(&run.stdout), text(&run.stderr))
}

#[test]
fn the_pad_and_unpad_host_tiling_fills_the_shape_and_the_aligned_width_plan() {
    if !have("c++") {
        eprintln!("c++ not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("pad-tiling");
    let src = dir.join("pad_tiling.cpp");
    std::fs::write(
        &src,
        r#"#include <cstdio>
#include "graph/tensor.h"
#include "kernel_tiling/kernel_tiling.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
static void words(const char *what, const void *p, size_t n) {
    std::printf("%s", what);
    for (size_t i = 0; i < n / 4; i++) std::printf(" %u", ((const uint32_t *)p)[i]);
    std::printf("\n");
}
int main() {
    // The AbsPad sample's calls: 16 x 16 in UB, 16 x 7 of data, half.
    uint32_t maxSize = 7, minSize = 7;
    AscendC::GetPadMaxMinTmpSize(ge::Shape({16, 16}), sizeof(int16_t), maxSize, minSize);
    optiling::PadTiling pad;
    AscendC::PadTilingFunc(ge::Shape({16, 16}), ge::Shape({16, 7}), maxSize, sizeof(int16_t), pad);
    uint8_t buf[sizeof(PadTiling)];
    pad.SaveToBuffer(buf, pad.GetDataSize());
    std::printf("pad %u %u %zu\n", maxSize, minSize, pad.GetDataSize());
    words("padwords", buf, sizeof buf);
    // The AbsUnPad sample's: 16 x 16 half.
    auto *platform = platform_ascendc::PlatformAscendCManager::GetInstance("Ascend910B3");
    maxSize = minSize = 7;
    AscendC::GetUnPadMaxMinTmpSize(*platform, ge::Shape({16, 16}), sizeof(int16_t), maxSize, minSize);
    optiling::UnPadTiling unpad;
    AscendC::UnPadTilingFunc(ge::Shape({16, 16}), maxSize, sizeof(int16_t), unpad);
    uint8_t ubuf[sizeof(UnPadTiling)];
    unpad.SaveToBuffer(ubuf, unpad.GetDataSize());
    std::printf("unpad %u %u %zu\n", maxSize, minSize, unpad.GetDataSize());
    words("unpadwords", ubuf, sizeof ubuf);
    // More rows than one repeat takes, float, into the struct itself.
    AscendC::tiling::PadTiling raw;
    AscendC::PadTilingFunc(ge::Shape({600, 32}), ge::Shape({600, 20}), 0, sizeof(float), raw);
    words("rawwords", &raw, sizeof raw);
    // Refused: a 3-D shape and a 1-byte type leave the tiling as it was.
    optiling::PadTiling bad;
    bad.set_srcHeight(99);
    AscendC::PadTilingFunc(ge::Shape({2, 3, 4}), ge::Shape({2, 3, 4}), 0, 2, bad);
    AscendC::UnPadTilingFunc(ge::Shape({2, 32}), 0, 1, unpad);
    std::printf("bad %u %u\n", bad.get_srcHeight(), unpad.get_srcWidth());
    return 0;
}
"#,
    )
    .unwrap();
    let (out, err) = host_program_output(&src, &dir.join("pad_tiling"));
    let line = |key: &str| -> Vec<u64> {
        out.lines()
            .find(|l| l.split(' ').next() == Some(key))
            .unwrap_or_else(|| panic!("{key}: {out}"))
            .split(' ')
            .skip(1)
            .map(|w| w.parse().unwrap())
            .collect()
    };
    // No temporary space; CANN's 26 words.
    assert_eq!(line("pad"), [0, 0, 104]);
    let mut want = vec![16, 16, 7, 0, 1, 255, 0, 16, 255 * 16, 0];
    want.resize(26, 0);
    assert_eq!(line("padwords"), want);
    assert_eq!(line("unpad"), [0, 0, 32]);
    assert_eq!(line("unpadwords"), [16, 16, 0, 0, 0, 0, 0, 0]);
    // The pad columns' last block starts 24 floats in; 600 rows are 255 + 255 + 90.
    let mut want = vec![600, 32, 20, 24, 4, 255, 2, 90, 255 * 32, 2 * 255 * 32 + 24];
    want.resize(26, 0);
    assert_eq!(line("rawwords"), want);
    assert_eq!(line("bad"), [99, 16]);
    assert!(
        err.contains("PadTilingFunc (npusim): the shape has 3 dimensions"),
        "{err}"
    );
    assert!(
        err.contains(
            "UnPadTilingFunc (npusim): typeSize is 1; Pad and UnPad take 2- and 4-byte types"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_advanced_api_form_the_layer_does_not_offer_stops_the_compile_naming_it() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("advanced-refusals");
    let cases = [
        (
            "dup_mask_i8.cpp",
            "LocalTensor<int8_t> t; uint64_t m[2] = {1, 0}; Duplicate(t, (int8_t)1, m, 1, 1, 8);",
            "Duplicate: the bit-wise mask form takes 16- and 32-bit tensors",
        ),
        (
            "dup_mask_unset.cpp",
            "LocalTensor<half> t; uint64_t m[2] = {1, 0}; \
             Duplicate<half, false>(t, half(1.0f), m, 1, 1, 8);",
            "Duplicate: isSetMask = false (a mask set by SetVectorMask) is not offered",
        ),
        (
            "pad_bf16.cpp",
            "LocalTensor<bfloat16_t> a, b; PadParams p; PadTiling t; Pad(a, b, p, t);",
            "Pad: int16_t, uint16_t, half, int32_t, uint32_t and float tensors",
        ),
        (
            "unpad_i8.cpp",
            "LocalTensor<int8_t> a, b; UnPadParams p; UnPadTiling t; UnPad(a, b, p, t);",
            "UnPad: int16_t, uint16_t, half, int32_t, uint32_t and float tensors",
        ),
        (
            "broadcast_3d.cpp",
            "LocalTensor<float> a, b; uint32_t d[3] = {2, 2, 2}, s[3] = {2, 2, 1}; \
             Broadcast<float, 3, 2>(a, b, d, s);",
            "Broadcast: dim is 1 or 2",
        ),
        (
            "broadcast_axis.cpp",
            "LocalTensor<float> a, b; uint32_t d[1] = {8}, s[1] = {1}; \
             Broadcast<float, 1, 1>(a, b, d, s);",
            "Broadcast: axis is 0 or 1, and less than dim",
        ),
    ];
    assert_refused(&dir, &cases);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cast_outside_ascend_c_s_910b_table_stops_the_compile_naming_it() {
    if !have("clang++-16") {
        eprintln!("clang++-16 not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("cast-refusals");
    let cases = [
        (
            "float_int8.cpp",
            "LocalTensor<int8_t> d; LocalTensor<float> s; Cast(d, s, RoundMode::CAST_RINT, 64);",
            "Cast from float: Ascend C's Cast table for the 910B goes to half, bfloat16_t",
        ),
        (
            "int4_float.cpp",
            "LocalTensor<float> d; LocalTensor<int4b_t> s; Cast(d, s, RoundMode::CAST_NONE, 64);",
            "Cast from int8_t / uint8_t / int4b_t: Ascend C's Cast table for the 910B goes to half only",
        ),
        (
            "int32_half.cpp",
            "LocalTensor<half> d; LocalTensor<int32_t> s; Cast(d, s, RoundMode::CAST_NONE, 64);",
            "Cast int32_t -> half: Ascend C scales by SetDeqScale(half)",
        ),
        (
            "uint16.cpp",
            "LocalTensor<half> d; LocalTensor<uint16_t> s; Cast(d, s, RoundMode::CAST_NONE, 64);",
            "Cast: this source type is not in Ascend C's Cast table for the 910B",
        ),
        (
            "odd_mode.cpp",
            "LocalTensor<int8_t> d; LocalTensor<half> s; Cast(d, s, RoundMode::CAST_ODD, 64);",
            "Cast: this RoundMode is not in Ascend C's Cast table for this source -> destination pair",
        ),
        (
            "widening_mode.cpp",
            "LocalTensor<half> d; LocalTensor<int4b_t> s; Cast(d, s, RoundMode::CAST_FLOOR, 64);",
            "Cast: this RoundMode is not in Ascend C's Cast table for this source -> destination pair",
        ),
        (
            "int4_get.cpp",
            "LocalTensor<int4b_t> t; (void)t.GetValue(0);",
            "LocalTensor<int4b_t>::GetValue is not offered by npusim's layer",
        ),
    ];
    assert_refused(&dir, &cases);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tiling_data_class_from_cann_s_macros_saves_the_bytes_of_the_kernel_s_plain_struct() {
    if !have("c++") {
        eprintln!("c++ not installed (.ci/run installs it): skipped");
        return;
    }
    let dir = scratch("tilingdata-base");
    let src = dir.join("tilingdata.cpp");
    std::fs::write(
        &src,
        r#"#include <cstddef>
#include <cstdio>
#include "register/tilingdata_base.h"
#include "tiling/tiling_api.h"
namespace optiling {
BEGIN_TILING_DATA_DEF(MyTilingData)
  TILING_DATA_FIELD_DEF(uint8_t, flag);
  TILING_DATA_FIELD_DEF(uint32_t, totalLength);
  TILING_DATA_FIELD_DEF_ARR(uint16_t, 3, tiles);
  TILING_DATA_FIELD_DEF(uint64_t, big);
  TILING_DATA_FIELD_DEF_STRUCT(TCubeTiling, cubeTilingData);
END_TILING_DATA_DEF;
REGISTER_TILING_DATA_CLASS(MyOp, MyTilingData)
}
// What the kernel file declares and reads with GET_TILING_DATA_WITH_STRUCT.
struct MyKernelTiling {
    uint8_t flag;
    uint32_t totalLength;
    uint16_t tiles[3];
    uint64_t big;
    TCubeTiling cubeTilingData;
};
static_assert(sizeof(optiling::MyTilingData) == sizeof(MyKernelTiling), "size");
static_assert(offsetof(optiling::MyTilingData, big) == offsetof(MyKernelTiling, big), "big");
static_assert(offsetof(optiling::MyTilingData, cubeTilingData) ==
              offsetof(MyKernelTiling, cubeTilingData), "struct");
int main() {
    optiling::MyTilingData t;
    t.set_flag(7);
    t.set_totalLength(8 * 2048);
    const uint16_t tiles[3] = {3, 5, 9};
    t.set_tiles(tiles);
    t.set_big(1ull << 40);
    t.cubeTilingData.set_M(1024);
    t.cubeTilingData.set_baseK(64);
    MyKernelTiling k{};
    t.SaveToBuffer(&k, t.GetDataSize());
    std::printf("%u %u %u %u %u %llu %d %d %zu %u\n", k.flag, k.totalLength, k.tiles[0], k.tiles[1],
                k.tiles[2], (unsigned long long)k.big, k.cubeTilingData.M, k.cubeTilingData.baseK,
                t.GetDataSize(), t.get_tiles()[2] + t.get_totalLength());
    // A capacity below the data's size copies that many bytes only.
    uint8_t two[4] = {0xee, 0xee, 0xee, 0xee};
    t.SaveToBuffer(two, 1);
    std::printf("%u %u\n", two[0], two[1]);
    return 0;
}
"#,
    )
    .unwrap();
    let (out, _) = host_program_output(&src, &dir.join("tilingdata"));
    let size = 24 + 200; // flag, length, tiles, big at 16, then TCubeTiling's 50 int32 fields
    assert_eq!(
        out,
        format!("7 16384 3 5 9 1099511627776 1024 64 {size} 16393\n7 238\n"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
