//! 01 — quickstart: vector add on a simulated NPU.
//!
//! What happens: the host takes device 0's context, allocates three typed device buffers, copies
//! two input vectors in, launches the built-in `vector_add_f32` kernel on a stream with the launch
//! builder (the call returns at once: the task only sits on the doorbell), synchronizes (frames run: ingest → dependencies → dispatch → tick →
//! retire), copies the result back and checks it against a CPU reference. Then it prints the
//! simulated timeline: each task's start and end on the device clock.
//!
//! Run: `cargo run --release --example 01_quickstart`

use npusim::prelude::*;

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::default())?;
    let cfg = rt.device_config(0)?;
    println!(
        "device 0: {} — {} AI cores, {} GiB HBM",
        cfg.name,
        cfg.ai_cores,
        cfg.hbm_bytes >> 30
    );

    let n: usize = 1 << 20;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (n - i) as f32 * 0.5).collect();

    // 1. The device's context, a stream, and typed device buffers (each knows its length).
    let ctx = rt.device_context(0)?;
    let stream = ctx.stream()?;
    let (mut da, mut db, mut dc) = (
        ctx.alloc::<f32>(n)?,
        ctx.alloc::<f32>(n)?,
        ctx.alloc::<f32>(n)?,
    );

    // 2. Inputs in: pinned host buffers and asynchronous copies on the stream.
    let (ha, hb, hc) = (
        ctx.alloc_host::<f32>(n)?,
        ctx.alloc_host::<f32>(n)?,
        ctx.alloc_host::<f32>(n)?,
    );
    ha.write(&a)?;
    hb.write(&b)?;
    stream.memcpy_htod_pinned(&ha, &mut da)?;
    stream.memcpy_htod_pinned(&hb, &mut db)?;

    // 3. The launch returns before anything runs. The kernel declares its parameters
    //    (buffer, buffer, buffer, count): a wrong argument is an error here, not a fault later.
    let add = rt.kernel("vector_add_f32")?;
    stream
        .launch_builder(&add)
        .arg(&da)
        .arg(&db)
        .arg(&mut dc)
        .arg(n)
        .grid(cfg.ai_cores)
        .launch()?;
    stream.memcpy_dtoh_pinned(&dc, &hc)?;
    println!("queued 4 tasks; stream idle? {}", stream.query()?);

    // 4. Synchronize: the device runs, the host clock moves to the stream's end.
    stream.synchronize()?;
    println!("after synchronize: stream idle? {}", stream.query()?);

    // 5. Verify against the CPU.
    let c: Vec<f32> = hc.read()?;
    let wrong = c
        .iter()
        .zip(a.iter().zip(&b))
        .filter(|(c, (a, b))| **c != **a + **b)
        .count();
    println!(
        "verified {n} elements: {}",
        if wrong == 0 {
            "all correct".to_string()
        } else {
            format!("{wrong} wrong")
        }
    );

    println!("\nsimulated timeline:");
    println!(
        "{:<16} {:>12} {:>12} {:>12} {:>6}",
        "task", "start", "end", "duration", "cores"
    );
    for r in rt.timeline() {
        println!(
            "{:<16} {:>12} {:>12} {:>12} {:>6}",
            r.name,
            r.start.to_string(),
            r.end.to_string(),
            (r.end - r.start).to_string(),
            r.cores
        );
    }
    println!(
        "host clock: {}   device clock: {}",
        rt.host_now(),
        rt.device_now()
    );
    // 6. Nothing to free by hand: buffers free themselves (in stream order) when dropped.
    if wrong != 0 {
        std::process::exit(1);
    }
    Ok(())
}
