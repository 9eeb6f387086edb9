//! 08 — kernels compiled from C, running on the simulated RISC-V AI core.
//!
//! The objects in `examples/kernels/` were compiled by clang for `rv64imf` (see
//! `scripts/build-kernels.sh`; they are committed, so no compiler is needed). Loading one
//! parses the ELF, places `.text` in instruction memory (decoded once), maps its module data
//! into the current context's address space and applies the relocations. A launch is an
//! ordinary task: in the frame it is dispatched, each block runs on an AI core with its block
//! index in a CSR and its arguments in registers (LP64F), and the cycles the core counts become
//! the task's simulated duration.
//!
//! Run: `cargo run --release --example 08_binary_kernels`

use npusim::prelude::*;

fn object(rt: &Runtime, name: &str) -> Result<Binary, NpuError> {
    let path = format!("{}/examples/kernels/{name}", env!("CARGO_MANIFEST_DIR"));
    rt.load_binary_file(path)
}

fn report(rt: &Runtime) {
    for launch in rt.take_binary_launch_stats() {
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
    let s = rt.create_stream()?;

    // Vector add over 4 blocks.
    let vadd_bin = object(rt, "vector_add.o")?;
    println!(
        "vector_add.o exports {:?}",
        rt.binary_functions(vadd_bin)?
            .iter()
            .map(|f| &f.0)
            .collect::<Vec<_>>()
    );
    let vadd = rt.get_function(vadd_bin, "vadd_f32")?;
    let n = 4096usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.25 * i as f32).collect();
    let (da, db, dc) = (
        rt.malloc(4 * n as u64)?,
        rt.malloc(4 * n as u64)?,
        rt.malloc(4 * n as u64)?,
    );
    rt.memcpy_htod(da, &a)?;
    rt.memcpy_htod(db, &b)?;
    rt.launch(vadd, 4, &[da.into(), db.into(), dc.into(), n.into()], s)?;
    rt.synchronize_stream(s)?;
    let mut c = vec![0f32; n];
    rt.memcpy_dtoh(&mut c, dc)?;
    let ok = c.iter().enumerate().all(|(i, &v)| v == a[i] + b[i]);
    println!(
        "vadd_f32 on {n} elements: {}",
        if ok { "correct" } else { "WRONG" }
    );
    report(rt);

    // saxpy: a float argument travels in fa0.
    let saxpy_bin = object(rt, "saxpy.o")?;
    let saxpy = rt.get_function(saxpy_bin, "saxpy")?;
    rt.launch(
        saxpy,
        2,
        &[n.into(), 3.0f32.into(), da.into(), dc.into()],
        s,
    )?;
    rt.synchronize_stream(s)?;
    rt.memcpy_dtoh(&mut c, dc)?;
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
    let red = object(rt, "reduce.o")?;
    let (partial_k, final_k) = (
        rt.get_function(red, "reduce_sum_f32")?,
        rt.get_function(red, "reduce_final_f32")?,
    );
    let (partial, out) = (rt.malloc(4 * 8)?, rt.malloc(4)?);
    rt.launch(partial_k, 8, &[da.into(), partial.into(), n.into()], s)?;
    rt.launch(final_k, 1, &[partial.into(), out.into(), 8u64.into()], s)?;
    rt.synchronize_stream(s)?;
    let mut sum = [0f32];
    rt.memcpy_dtoh(&mut sum, out)?;
    println!(
        "reduce_sum_f32: {} (CPU: {})",
        sum[0],
        a.iter().sum::<f32>()
    );
    report(rt);

    // Integer sort (one block, a gap table in .rodata).
    let sort_bin = object(rt, "sort.o")?;
    let sort = rt.get_function(sort_bin, "sort_i32")?;
    let mut v: Vec<i32> = (0..512).map(|i| (i * 7919 % 1009) - 500).collect();
    let dv = rt.malloc(4 * v.len() as u64)?;
    rt.memcpy_htod(dv, &v)?;
    rt.launch(sort, 1, &[dv.into(), v.len().into()], s)?;
    rt.synchronize_stream(s)?;
    let mut sorted = vec![0i32; v.len()];
    rt.memcpy_dtoh(&mut sorted, dv)?;
    v.sort();
    println!(
        "sort_i32 on {} integers: {}",
        v.len(),
        if sorted == v { "correct" } else { "WRONG" }
    );
    report(rt);

    // A kernel that prints and then aborts: its message reaches the host log, the task fails.
    // In a context of its own, so the fault leaves the first context alone.
    rt.create_context(0)?;
    let faults = object(rt, "faults.o")?;
    let abort = rt.get_function(faults, "call_abort")?;
    let s2 = rt.create_stream()?;
    rt.launch(abort, 1, &[Arg::I64(42)], s2)?;
    let err = rt.synchronize_stream(s2).unwrap_err();
    println!(
        "call_abort(42) in a second context -> code {}: {err}",
        err.code()
    );
    for line in rt.take_kernel_log() {
        println!("  kernel log: {line}");
    }
    let m = rt.memory_stats()?;
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
