//! 01 — quickstart: vector add on a simulated NPU.
//!
//! What happens: the host allocates three device buffers, copies two input vectors in, launches
//! the built-in `vector_add_f32` kernel on a stream (the call returns at once: the task only
//! sits on the doorbell), synchronizes (frames run: ingest → dependencies → dispatch → tick →
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
    let bytes = 4 * n as u64;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (n - i) as f32 * 0.5).collect();

    // 1. Device memory and a stream.
    let stream = rt.create_stream()?;
    let (da, db, dc) = (rt.malloc(bytes)?, rt.malloc(bytes)?, rt.malloc(bytes)?);

    // 2. Inputs in: pinned host buffers and asynchronous copies on the stream.
    let (ha, hb, hc) = (
        rt.malloc_host(bytes)?,
        rt.malloc_host(bytes)?,
        rt.malloc_host(bytes)?,
    );
    ha.write(&a)?;
    hb.write(&b)?;
    rt.memcpy_htod_async(da, &ha, bytes, stream)?;
    rt.memcpy_htod_async(db, &hb, bytes, stream)?;

    // 3. The launch returns before anything runs.
    let add = rt.kernel("vector_add_f32")?;
    rt.launch(
        add,
        cfg.ai_cores,
        &[da.into(), db.into(), dc.into(), n.into()],
        stream,
    )?;
    rt.memcpy_dtoh_async(&hc, dc, bytes, stream)?;
    println!("queued 4 tasks; stream idle? {}", rt.query_stream(stream)?);

    // 4. Synchronize: the device runs, the host clock moves to the stream's end.
    rt.synchronize_stream(stream)?;
    println!(
        "after synchronize: stream idle? {}",
        rt.query_stream(stream)?
    );

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
    for p in [da, db, dc] {
        rt.free(p)?;
    }
    for h in [&ha, &hb, &hc] {
        rt.free_host(h)?;
    }
    if wrong != 0 {
        std::process::exit(1);
    }
    Ok(())
}
