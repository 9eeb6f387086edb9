//! 08 — kernels compiled from C, running on the simulated RISC-V AI core.
//!
//! The objects in `examples/kernels/` were compiled by clang for `rv64imf` (see
//! `scripts/build-kernels.sh`; they are committed, so no compiler is needed). Loading one
//! parses the ELF, places `.text` in instruction memory (decoded once), maps its module data
//! into the current context's address space and applies the relocations. A launch is an
//! ordinary task: in the frame it is dispatched, each block runs on an AI core with its block
//! index in a CSR and its arguments in registers (LP64F), and the cycles the core counts become
//! the task's simulated duration. A module (`NpuModule`) owns its loaded binary, and each
//! function taken from it (`NpuFunction`) holds the module: the binary is unloaded when the
//! last of them is dropped, after the launches queued on the device have run.
//!
//! Run: `cargo run --release --example 08_binary_kernels`

use npusim::prelude::*;

fn object(ctx: &NpuContext, name: &str) -> Result<NpuModule, NpuError> {
    let path = format!("{}/examples/kernels/{name}", env!("CARGO_MANIFEST_DIR"));
    ctx.load_module_file(path)
}

fn report(rt: &Runtime) {
    for launch in rt.binaries().take_launch_stats() {
        let blocks: Vec<String> = launch
            .blocks
            .iter()
            .map(|b| format!("{} instr / {} cyc", b.instructions, b.cycles))
            .collect();
        println!("  {:<16} per block: {}", launch.kernel, blocks.join(", "));
    }
}

fn main() -> Result<(), NpuError> {
    let rt = &Runtime::new(RuntimeConfig::with_device(DeviceConfig::small()))?;
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;

    // Vector add over 4 blocks, from a module loaded into `ctx`.
    let vadd_mod = object(&ctx, "vector_add.o")?;
    println!(
        "vector_add.o exports {:?}",
        vadd_mod
            .functions()?
            .iter()
            .map(|f| &f.0)
            .collect::<Vec<_>>()
    );
    let vadd = vadd_mod.function("vadd_f32")?;
    let n = 4096usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.25 * i as f32).collect();
    let (da, db) = (s.clone_htod(&a)?, s.clone_htod(&b)?);
    let mut dc = ctx.alloc::<f32>(n)?;
    // A binary kernel declares no parameter list: the builder passes what it is given, each
    // argument in the register its kind calls for (buffers and integers in a0.., floats in fa0..).
    s.launch_builder(&vadd)
        .arg(&da)
        .arg(&db)
        .arg(&mut dc)
        .arg(n)
        .grid(4)
        .launch()?;
    let mut c = s.clone_dtoh(&dc)?;
    let ok = c.iter().enumerate().all(|(i, &v)| v == a[i] + b[i]);
    println!(
        "vadd_f32 on {n} elements: {}",
        if ok { "correct" } else { "WRONG" }
    );
    report(rt);

    // saxpy: a float argument travels in fa0.
    // (The module value is not kept: the function holds it.)
    let saxpy = object(&ctx, "saxpy.o")?.function("saxpy")?;
    s.launch_builder(&saxpy)
        .arg(n)
        .arg(3.0f32)
        .arg(&da)
        .arg(&mut dc)
        .grid(2)
        .launch()?;
    s.memcpy_dtoh(&dc, &mut c)?;
    let ok2 = c
        .iter()
        .enumerate()
        .all(|(i, &v)| (v - (3.0 * a[i] + a[i] + b[i])).abs() <= 1e-3 * v.abs().max(1.0));
    println!(
        "saxpy (y = 3x + y): {}",
        if ok2 { "correct" } else { "WRONG" }
    );
    report(rt);

    // Reduction: partial sums per block, then a final pass.
    let red = object(&ctx, "reduce.o")?;
    let (partial_k, final_k) = (
        red.function("reduce_sum_f32")?,
        red.function("reduce_final_f32")?,
    );
    let (mut partial, mut out) = (ctx.alloc::<f32>(8)?, ctx.alloc::<f32>(1)?);
    s.launch_builder(&partial_k)
        .arg(&da)
        .arg(&mut partial)
        .arg(n)
        .grid(8)
        .launch()?;
    s.launch_builder(&final_k)
        .arg(&partial)
        .arg(&mut out)
        .arg(8u64)
        .launch()?;
    let sum = s.clone_dtoh(&out)?;
    println!(
        "reduce_sum_f32: {} (CPU: {})",
        sum[0],
        a.iter().sum::<f32>()
    );
    report(rt);

    // Integer sort (one block, a gap table in .rodata).
    let sort = object(&ctx, "sort.o")?.function("sort_i32")?;
    let mut v: Vec<i32> = (0..512).map(|i| (i * 7919 % 1009) - 500).collect();
    let mut dv = s.clone_htod(&v)?;
    s.launch_builder(&sort).arg(&mut dv).arg(v.len()).launch()?;
    let sorted = s.clone_dtoh(&dv)?;
    v.sort();
    println!(
        "sort_i32 on {} integers: {}",
        v.len(),
        if sorted == v { "correct" } else { "WRONG" }
    );
    report(rt);

    // A kernel that prints and then aborts: its message reaches the host log, the task fails.
    // In a context of its own, so the fault leaves the first context alone.
    let ctx2 = rt.new_context(0)?;
    let abort = object(&ctx2, "faults.o")?.function("call_abort")?;
    let s2 = ctx2.stream()?;
    s2.launch_builder(&abort).arg(42i64).launch()?;
    let err = s2.synchronize().unwrap_err();
    println!(
        "call_abort(42) in a second context -> code {}: {err}",
        err.code()
    );
    for line in rt.binaries().take_kernel_log() {
        println!("  kernel log: {line}");
    }
    println!(
        "the first context is untouched: sort's buffer still reads {} .. {}",
        s.clone_dtoh(&dv)?[0],
        s.clone_dtoh(&dv)?[v.len() - 1]
    );
    let m = rt.memory().stats()?;
    let translations = m.tlb.hits + m.tlb.misses;
    println!(
        "\nsoftware TLB: {} page translations by kernels and copies, {} misses -> {} driver calls ({:.3}% fewer than without the TLB)",
        translations,
        m.tlb.misses,
        m.driver.calls.translate,
        100.0 * (1.0 - m.driver.calls.translate as f64 / translations.max(1) as f64)
    );
    println!("\ntimeline (simulated):");
    for r in rt
        .timeline()
        .iter()
        .filter(|r| r.kind == npusim::components::TaskKind::Kernel)
    {
        println!(
            "  {:<16} {:>12} .. {:>12}  ({} cores)",
            r.name,
            r.start.to_string(),
            r.end.to_string(),
            r.cores
        );
    }
    Ok(())
}
