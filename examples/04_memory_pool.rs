//! 04 — the memory pool: free behind running kernels, reallocate, and watch the pool.
//!
//! Each batch allocates its buffers, queues kernels on a stream, and drops the buffers right
//! away — while the kernels are still queued. A drop frees in stream order and returns at once: the block is only marked
//! pending behind the stream positions whose tasks name it. In every frame, after the hardware
//! tick, the deferred-free stage hands back to the pool the blocks whose positions have
//! completed; the next batch's allocations are then served from the pool's cache, without a
//! driver call. A queued kernel never sees its memory reused under it.
//!
//! Run: `cargo run --release --example 04_memory_pool`

use npusim::prelude::*;

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small()))?;
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let gemm = rt.kernel("gemm_f32")?;
    let softmax = rt.kernel("softmax_rows_f32")?;
    let mut previous: Vec<DevicePtr> = Vec::new();
    println!(
        "{:>5} {:>10} {:>11} {:>11} {:>8} {:>8} {:>9} {:>6}",
        "batch", "live MiB", "reserved", "peak live", "frag", "pending", "released", "driver"
    );
    for batch in 0..8usize {
        // Sequence lengths vary per batch, so buffer sizes do too.
        let seq = 128 + 96 * (batch % 4);
        let (d, h) = (256usize, 512usize);
        let mut x = ctx.alloc::<f32>(seq * d)?;
        let mut w = ctx.alloc::<f32>(d * h)?;
        let mut y = ctx.alloc::<f32>(seq * h)?;
        let mut p = ctx.alloc::<f32>(seq * h)?;
        let addrs = [
            x.device_ptr(),
            w.device_ptr(),
            y.device_ptr(),
            p.device_ptr(),
        ];
        for q in addrs {
            assert!(
                !previous.contains(&q) || s.query()?,
                "no aliasing of queued memory"
            );
        }
        s.memset_zeros(&mut x)?;
        s.memset_zeros(&mut w)?;
        s.launch_builder(&gemm)
            .arg(&x)
            .arg(&w)
            .arg(&mut y)
            .arg(seq)
            .arg(h)
            .arg(d)
            .grid(4)
            .launch()?;
        s.launch_builder(&softmax)
            .arg(&y)
            .arg(&mut p)
            .arg(seq)
            .arg(h)
            .grid(4)
            .launch()?;
        // Free behind the queued kernels: dropping a buffer returns at once.
        drop((x, w, y, p));
        previous = addrs.to_vec();
        rt.host_work(SimTime::from_us(20));
        if batch % 2 == 1 {
            s.synchronize()?;
        }
        let m = rt.memory().stats()?;
        println!(
            "{:>5} {:>10.2} {:>11.2} {:>11.2} {:>8.3} {:>8} {:>9} {:>6}",
            batch,
            m.pool.live_bytes as f64 / (1 << 20) as f64,
            m.pool.reserved_bytes as f64 / (1 << 20) as f64,
            m.pool.peak_live_bytes as f64 / (1 << 20) as f64,
            m.pool.fragmentation,
            m.pending_frees,
            m.deferred_releases,
            m.driver.calls.reserve
                + m.driver.calls.map
                + m.driver.calls.release
                + m.driver.calls.unmap,
        );
    }
    s.synchronize()?;
    let m = rt.memory().stats()?;
    let translations = m.tlb.hits + m.tlb.misses;
    println!(
        "\nafter the last synchronize: {} pending frees, {} released behind their streams",
        m.pending_frees, m.deferred_releases
    );
    println!(
        "pool: {} allocations, {} frees, {} chunks reserved from the driver ({} cached)",
        m.pool.allocs, m.pool.frees, m.pool.chunks, m.pool.cached_chunks
    );
    println!(
        "TLB: {} page translations, {} hits ({:.2}%), {} misses -> driver translate calls",
        translations,
        m.tlb.hits,
        100.0 * m.tlb.hits as f64 / translations.max(1) as f64,
        m.tlb.misses
    );
    println!(
        "without the TLB every translation would be a driver call: {} instead of {} ({:.2}% fewer)",
        translations,
        m.driver.calls.translate,
        100.0 * (1.0 - m.driver.calls.translate as f64 / translations.max(1) as f64)
    );
    let trimmed = rt.memory().trim()?;
    println!(
        "trim released {:.1} MiB of cached memory to the driver",
        trimmed as f64 / (1 << 20) as f64
    );
    Ok(())
}
