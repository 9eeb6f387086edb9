//! 02 — streams and events: a copy stream feeds a compute stream while the CPU prepares the next
//! batch.
//!
//! What happens: for each of four batches the host first does some CPU work (`host_work`:
//! decoding, say) on its simulated clock, then enqueues, without waiting for anything:
//!
//! - on stream `load` (the producer): the input copy host → device and a `relu_f32`, then a
//!   record of event `loaded`;
//! - on stream `compute` (the consumer): a wait on `loaded` (it captures this batch's record), a
//!   record of `t0`, a `gemm_f32` with the weights, a record of `t1`, and the copy back.
//!
//! Nothing runs at submission. Frames run only when the host synchronizes at the end; each frame
//! makes stream heads ready (the consumer's wait only once the producer's record has fired),
//! dispatches them to DMA engines and AI cores, and jumps the device clock to the next
//! completion. Because every task remembers the host time it was submitted at, the timeline shows
//! what a real run would: the CPU preparing batch N+1 while the NPU still works on batch N, and
//! the consumer of each batch starting exactly when its producer ends.
//!
//! Run: `cargo run --release --example 02_streams_events`

use npusim::TaskRecord;
use npusim::prelude::*;

/// Rows of a batch, and the width of the input and of the output.
const M: usize = 512;
const K: usize = 256;
const N: usize = 256;
const BATCHES: usize = 4;

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::default())?;
    let ctx = rt.device_context(0)?;
    let load = ctx.stream()?;
    let compute = ctx.stream()?;
    let (relu, gemm) = (rt.kernel("relu_f32")?, rt.kernel("gemm_f32")?);

    // Weights, uploaded once (then waited for, so the printed timeline is the pipeline alone).
    let w: Vec<f32> = (0..K * N)
        .map(|i| ((i * 7) % 13) as f32 * 0.01 - 0.06)
        .collect();
    let dw = compute.clone_htod(&w)?;
    compute.synchronize()?;
    rt.take_timeline();

    let loaded = ctx.event()?;
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let mut timers = Vec::new();
    let mut host_spans = Vec::new();
    let t_begin = rt.host_now();

    for batch in 0..BATCHES {
        // 1. CPU work on the host clock: the device keeps running whatever is queued.
        let prep_start = rt.host_now();
        rt.host_work(SimTime::from_us(40));
        let x: Vec<f32> = (0..M * K)
            .map(|i| ((i + batch * 31) % 17) as f32 - 8.0)
            .collect();
        let hx = ctx.alloc_host::<f32>(M * K)?;
        hx.write(&x)?;
        host_spans.push((prep_start, rt.host_now()));

        // 2. Producer, on `load`: copy in, relu in place, record `loaded`.
        let mut dx = ctx.alloc::<f32>(M * K)?;
        let mut dy = ctx.alloc::<f32>(M * N)?;
        load.memcpy_htod_pinned(&hx, &mut dx)?;
        load.launch_builder(&relu)
            .arg(&dx)
            .arg(&dx)
            .arg(M * K)
            .grid(8)
            .launch()?;
        load.record(&loaded)?;

        // 3. Consumer, on `compute`: wait for this batch's record, time the gemm, copy out.
        let (t0, t1) = (ctx.event()?, ctx.event()?);
        compute.wait(&loaded)?;
        compute.record(&t0)?;
        compute
            .launch_builder(&gemm)
            .arg(&dx)
            .arg(&dw)
            .arg(&mut dy)
            .arg(M)
            .arg(N)
            .arg(K)
            .grid(2)
            .launch()?;
        compute.record(&t1)?;
        let hy = ctx.alloc_host::<f32>(M * N)?;
        compute.memcpy_dtoh_pinned(&dy, &hy)?;
        // `dx` and `dy` are dropped here, with their work still queued: their memory is
        // released only once that work has run.

        inputs.push(x);
        outputs.push(hy);
        timers.push((t0, t1));
    }
    let submitted = rt.host_now();
    println!(
        "submitted {BATCHES} batches by host time {submitted}; none of it has run yet: \
         {} tasks on the timeline, device clock still {} (where the weight upload left it)",
        rt.timeline().len(),
        rt.device_now()
    );

    // 4. One synchronize runs the frames; the host clock moves to the end of the work.
    compute.synchronize()?;
    println!(
        "after synchronize: host clock {}, device clock {}\n",
        rt.host_now(),
        rt.device_now()
    );

    // 5. Results against the CPU.
    let mut worst = 0.0f32;
    for (x, hy) in inputs.iter().zip(&outputs) {
        let y: Vec<f32> = hy.read()?;
        for i in 0..M {
            for j in 0..N {
                let want: f32 = (0..K).map(|p| x[i * K + p].max(0.0) * w[p * N + j]).sum();
                worst = worst.max((y[i * N + j] - want).abs());
            }
        }
    }
    println!("results: worst difference from the CPU {worst:.2e}");

    // 6. The timeline, the event join and the overlap.
    let timeline = rt.timeline();
    let label = |r: &TaskRecord| {
        if r.stream == load.raw().entity() {
            "load"
        } else {
            "compute"
        }
    };
    println!(
        "\n{:<8} {:<14} {:>12} {:>12} {:>12}",
        "stream", "task", "submitted", "start", "end"
    );
    let mut by_start = timeline.clone();
    by_start.sort_by_key(|r| (r.start, r.end));
    for r in by_start.iter().filter(|r| r.start != r.end) {
        println!(
            "{:<8} {:<14} {:>12} {:>12} {:>12}",
            label(r),
            r.name,
            r.submit.to_string(),
            r.start.to_string(),
            r.end.to_string()
        );
    }

    println!("\nthe join: each consumer starts when its producer ends");
    let relus: Vec<&TaskRecord> = timeline.iter().filter(|r| r.name == "relu_f32").collect();
    let gemms: Vec<&TaskRecord> = timeline.iter().filter(|r| r.name == "gemm_f32").collect();
    for (batch, ((p, c), (t0, t1))) in relus.iter().zip(&gemms).zip(&timers).enumerate() {
        let ms = t1.elapsed_since(t0)?;
        println!(
            "  batch {batch}: relu ends {:>11}, gemm starts {:>11} ({}), \
             gemm timed by events {ms:.6} ms = timeline {:.6} ms",
            p.end.to_string(),
            c.start.to_string(),
            if c.start >= p.end { "ok" } else { "TOO EARLY" },
            (c.end - c.start).as_ms_f64()
        );
    }

    let end = timeline.iter().map(|r| r.end).max().unwrap_or_default();
    println!(
        "\nhost work vs device work, from {t_begin} to {end} ('#' = busy, one column = {}):",
        SimTime((end - t_begin).as_ns().div_ceil(COLUMNS as u64))
    );
    let device_busy = |stream: &NpuStream| -> Vec<(SimTime, SimTime)> {
        timeline
            .iter()
            .filter(|r| r.stream == stream.raw().entity() && r.start != r.end)
            .map(|r| (r.start, r.end))
            .collect()
    };
    println!("  host    |{}|", bar(&host_spans, t_begin, end));
    println!("  load    |{}|", bar(&device_busy(&load), t_begin, end));
    println!("  compute |{}|", bar(&device_busy(&compute), t_begin, end));
    let overlap: u64 = host_spans
        .iter()
        .map(|&(h0, h1)| {
            let mut busy: Vec<(SimTime, SimTime)> = device_busy(&load);
            busy.extend(device_busy(&compute));
            covered(h0, h1, &busy)
        })
        .sum();
    let host_total: u64 = host_spans.iter().map(|(a, b)| (*b - *a).as_ns()).sum();
    println!(
        "  {} of the host's {} of CPU work ran while the device was busy",
        SimTime(overlap),
        SimTime(host_total)
    );

    if worst > 1e-3 || gemms.iter().zip(&relus).any(|(c, p)| c.start < p.end) {
        std::process::exit(1);
    }
    Ok(())
}

const COLUMNS: usize = 72;

/// A row of `COLUMNS` characters: `#` where any span covers the column.
fn bar(spans: &[(SimTime, SimTime)], from: SimTime, to: SimTime) -> String {
    let width = (to - from).as_ns().max(1) as f64;
    (0..COLUMNS)
        .map(|c| {
            let a = from.as_ns() + (width * c as f64 / COLUMNS as f64) as u64;
            let b = from.as_ns() + (width * (c + 1) as f64 / COLUMNS as f64) as u64;
            let hit = spans.iter().any(|(s, e)| s.as_ns() < b && e.as_ns() > a);
            if hit { '#' } else { '.' }
        })
        .collect()
}

/// Nanoseconds of `[from, to)` covered by the union of `spans`.
fn covered(from: SimTime, to: SimTime, spans: &[(SimTime, SimTime)]) -> u64 {
    let mut clipped: Vec<(u64, u64)> = spans
        .iter()
        .map(|(s, e)| (s.as_ns().max(from.as_ns()), e.as_ns().min(to.as_ns())))
        .filter(|(s, e)| s < e)
        .collect();
    clipped.sort_unstable();
    let (mut total, mut reach) = (0, from.as_ns());
    for (s, e) in clipped {
        let s = s.max(reach);
        if e > s {
            total += e - s;
            reach = e;
        }
    }
    total
}
