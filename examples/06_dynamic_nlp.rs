//! 06 — dynamic NLP: batches of different sequence lengths through embedding → matmul → softmax,
//! where the length is found on the device and each launch is tiled for it.
//!
//! Each batch arrives as token ids padded to a fixed length with the pad id 0. On the device:
//!
//! ```text
//! ids [padded] ─ nonzero ─▶ positions [s]        (s: data-dependent, the real length)
//!              ─ gather(positions) ─▶ tokens [s]
//! table [vocab, hidden] ─ gather(tokens) ─▶ x [s, hidden]      (embedding lookup)
//! x · w [hidden, classes] ─ matmul ─▶ logits [s, classes] ─ softmax ─▶ probs [s, classes]
//! ```
//!
//! All batches are queued up front on one stream. What happens each frame: ingest and
//! dependency resolution bring the next launch to the head of the stream; **shape propagation**
//! reads its input shapes from the shape buffer in device memory — `[s]` as `nonzero` wrote it
//! — and writes the shapes it infers (`[s, hidden]`, `[s, classes]`) for the launches after
//! it; **tiling** then picks, for that `s` on this device, how many AI cores to use, how many
//! rows a core's 192 KiB unified buffer holds, and the cube's base blocks that fit L0A/L0B/L0C;
//! dispatch prices the launch from the actual shapes; the hardware tick runs it. The host reads
//! nothing until the end, when it prints the tiling chosen per batch and checks the results.
//!
//! Run: `cargo run --release --example 06_dynamic_nlp`

use npusim::LaunchOp;
use npusim::prelude::*;

const VOCAB: usize = 8000;
const HIDDEN: usize = 128;
const CLASSES: usize = 256;
const PADDED: usize = 2048;

/// A deterministic pseudo-random generator (same run, same numbers).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32) / (1u64 << 24) as f32
    }
}

struct Batch {
    ids: Vec<i32>,
    len: ShapeHandle,
    probs: HostBuffer,
}

fn queue_batch(
    rt: &Runtime,
    s: Stream,
    ids: Vec<i32>,
    (table, w): (DevicePtr, DevicePtr),
) -> NpuResult<Batch> {
    let dev = |floats: usize| rt.memory().malloc(4 * floats as u64);
    let (d_ids, pos, tokens) = (dev(PADDED)?, dev(PADDED)?, dev(PADDED)?);
    let (x, logits, probs) = (
        dev(PADDED * HIDDEN)?,
        dev(PADDED * CLASSES)?,
        dev(PADDED * CLASSES)?,
    );
    let [len, tok_shape, x_shape, logits_shape] = [
        rt.ops().create_shape()?,
        rt.ops().create_shape()?,
        rt.ops().create_shape()?,
        rt.ops().create_shape()?,
    ];
    let p = PADDED as i64;
    rt.memory().memcpy_htod_async_pageable(d_ids, &ids, s)?;
    rt.submit(LaunchOp::new(
        rt.ops().get("nonzero_i32")?,
        &[TensorArg::new(d_ids, &[p])],
        &[TensorArg::dynamic(pos, len)],
        &[],
        s,
    ))?;
    let gather = rt.ops().get("gather_rows")?;
    rt.submit(LaunchOp::new(
        gather,
        &[TensorArg::new(d_ids, &[p]), TensorArg::dynamic(pos, len)],
        &[TensorArg::dynamic(tokens, tok_shape)],
        &[],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        gather,
        &[
            TensorArg::new(table, &[VOCAB as i64, HIDDEN as i64]),
            TensorArg::dynamic(tokens, tok_shape),
        ],
        &[TensorArg::dynamic(x, x_shape)],
        &[],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        rt.ops().get("matmul_f32")?,
        &[
            TensorArg::dynamic(x, x_shape),
            TensorArg::new(w, &[HIDDEN as i64, CLASSES as i64]),
        ],
        &[TensorArg::dynamic(logits, logits_shape)],
        &[],
        s,
    ))?;
    rt.submit(LaunchOp::new(
        rt.ops().get("softmax_f32")?,
        &[TensorArg::dynamic(logits, logits_shape)],
        &[TensorArg::output(probs)],
        &[],
        s,
    ))?;
    // The host does not know s yet: it copies back the padded bound.
    let out = rt.memory().malloc_host(4 * (PADDED * CLASSES) as u64)?;
    rt.memory()
        .memcpy_dtoh_async(&out, probs, 4 * (PADDED * CLASSES) as u64, s)?;
    Ok(Batch {
        ids,
        len,
        probs: out,
    })
}

/// The CPU's probabilities for one batch, to check the device's.
fn cpu_probs(ids: &[i32], table: &[f32], w: &[f32]) -> Vec<f32> {
    let tokens: Vec<usize> = ids
        .iter()
        .filter(|&&t| t != 0)
        .map(|&t| t as usize)
        .collect();
    let mut out = vec![0.0f32; tokens.len() * CLASSES];
    for (i, &t) in tokens.iter().enumerate() {
        let row = &mut out[i * CLASSES..(i + 1) * CLASSES];
        for p in 0..HIDDEN {
            let a = table[t * HIDDEN + p];
            for (c, wv) in row.iter_mut().zip(&w[p * CLASSES..(p + 1) * CLASSES]) {
                *c += a * wv;
            }
        }
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for e in row.iter_mut() {
            *e = (*e - max).exp();
            sum += *e;
        }
        row.iter_mut().for_each(|e| *e /= sum);
    }
    out
}

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::default())?;
    rt.ops().set_tiling_log_enabled(true);
    let cfg = rt.device_config(0)?;
    let s = rt.streams().create()?;
    let mut r = Lcg(2024);

    // 1. The model: an embedding table and a classifier, uploaded once.
    let table: Vec<f32> = (0..VOCAB * HIDDEN).map(|_| r.next() - 0.5).collect();
    let w: Vec<f32> = (0..HIDDEN * CLASSES).map(|_| r.next() - 0.5).collect();
    let (d_table, d_w) = (
        rt.memory().malloc(4 * table.len() as u64)?,
        rt.memory().malloc(4 * w.len() as u64)?,
    );
    rt.memory().memcpy_htod(d_table, &table)?;
    rt.memory().memcpy_htod(d_w, &w)?;

    // 2. Batches of different lengths, right-padded with 0; all queued without waiting.
    let lengths = [5usize, 48, 300, 1024, 2048, 130, 17];
    let frames_before = rt.stats().frames.frames;
    let mut batches = Vec::new();
    for &len in &lengths {
        let ids: Vec<i32> = (0..PADDED)
            .map(|i| {
                if i < len {
                    1 + (r.next() * (VOCAB - 1) as f32) as i32
                } else {
                    0
                }
            })
            .collect();
        batches.push(queue_batch(&rt, s, ids, (d_table, d_w))?);
    }
    println!(
        "{} batches queued ({} tasks); frames run while queueing: {}",
        batches.len(),
        batches.len() * 7,
        rt.stats().frames.frames - frames_before
    );
    let frames_before = rt.stats().frames.frames;
    rt.streams().synchronize(s)?;
    println!(
        "device done at {} after {} frames; shapes the host read meanwhile: {}",
        rt.device_now(),
        rt.stats().frames.frames - frames_before,
        rt.ops().shape_stats().host_shape_reads
    );

    // 3. The tiling the device chose for each batch's actual length.
    let log = rt.ops().take_tiling_log();
    let of = |op: &str, skip_tokens: bool| -> Vec<_> {
        log.iter()
            .filter(|r| r.op == op && (!skip_tokens || r.inputs[0].rank() == 2))
            .cloned()
            .collect()
    };
    let (embed, matmul, softmax) = (
        of("gather_rows", true),
        of("matmul_f32", false),
        of("softmax_f32", false),
    );
    println!(
        "\n{} AI cores, {} KiB unified buffer, {} KiB L0A/L0B, {} KiB L0C per core",
        cfg.ai_cores,
        cfg.ub_bytes >> 10,
        cfg.l0a_bytes >> 10,
        cfg.l0c_bytes >> 10
    );
    println!(
        "{:>5} {:>7} | {:^23} | {:^42} | {:^22} | {:>9}",
        "batch", "seq len", "embedding lookup", "matmul (cube)", "softmax", "max |err|"
    );
    let mut worst = 0.0f32;
    for (i, b) in batches.iter().enumerate() {
        let seq = rt.ops().read_shape(b.len)?.dims()[0] as usize;
        let (e, m, sm) = (&embed[i].tiling, &matmul[i].tiling, &softmax[i].tiling);
        let mw = m.words();
        let got: Vec<f32> = b.probs.read()?;
        let want = cpu_probs(&b.ids, &table, &w);
        let err = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        worst = worst.max(err);
        println!(
            "{:>5} {:>7} | {:>2} cores {:>4} rows/tile | {:>2} cores key {} {:>3}x{:>3}x{:>2} base, {:>3} blocks | {:>2} cores {:>3} rows/tile | {:>9.1e}",
            i,
            seq,
            e.block_dim,
            e.word(4),
            m.block_dim,
            m.key,
            mw[3],
            mw[4],
            mw[5],
            mw[6] * mw[7],
            sm.block_dim,
            sm.word(4),
            err
        );
    }
    let st = rt.ops().shape_stats();
    println!(
        "\nshape reads by the host: {} (the {} above, after the run); device-side input shape reads: {}",
        st.host_shape_reads,
        batches.len(),
        st.dynamic_inputs_read
    );
    if worst > 1e-6 {
        eprintln!("results differ from the CPU");
        std::process::exit(1);
    }
    Ok(())
}
