//! 07 — two tenants on one device, one with a faulty kernel.
//!
//! Tenant A and tenant B each get their own context (their own streams, events and memory) and
//! run on their own host thread against the same simulated device. Midway, A launches a kernel
//! that reads memory it does not own. In the frame whose hardware tick completes that kernel,
//! the fault is raised: A's queued tasks are aborted (`ACL_ERROR_RT_STREAM_ABORT`), A's memory
//! is released, A's context keeps a sticky `ACL_ERROR_RT_AICORE_EXCEPTION` for its next calls,
//! and the exception callback is told. B's frames carry on as if nothing happened.
//!
//! Run: `cargo run --release --example 07_multi_tenant`

use npusim::Launch;
use std::sync::{Arc, Barrier};
use std::thread;

use npusim::prelude::*;
use npusim::{ExceptionInfo, Stats};

fn counts(label: &str, s: &Stats) {
    println!(
        "  {label:<7} contexts {:>2}  streams {:>2}  events {:>2}  live tasks {:>3}  blocks {:>2}  live bytes {:>8}",
        s.contexts, s.streams, s.events, s.live_tasks, s.live_blocks[0], s.live_bytes[0]
    );
}

fn main() -> Result<(), NpuError> {
    let rt = Runtime::new(RuntimeConfig::with_device(DeviceConfig::small()))?;
    rt.contexts()
        .set_exception_callback(Some(Arc::new(|e: &ExceptionInfo| {
            println!(
                "  [exception callback] device {} {} {} task #{}: code {} — {}",
                e.device, e.context, e.stream, e.task_seq, e.error_code, e.error
            );
        })));
    println!("device resources:");
    counts("before", &rt.stats());

    let midway = Arc::new(Barrier::new(2));
    let (rt_a, mid_a) = (rt.clone(), midway.clone());
    let tenant_a = thread::spawn(move || -> Result<(), NpuError> {
        let ctx = rt_a.contexts().create(0)?;
        let s = rt_a.streams().create()?;
        let buf = rt_a.memory().malloc(1 << 20)?;
        let fill = rt_a.kernel("fill_f32")?;
        let bad = rt_a.kernel("fault_bad_address")?;
        rt_a.submit(Launch::new(
            fill,
            4,
            &[buf.into(), (1usize << 18).into(), 1.0f32.into()],
            s,
        ))?;
        mid_a.wait();
        rt_a.submit(Launch::new(bad, 1, &[Arg::Ptr(DevicePtr(0x1234_5678))], s))?;
        rt_a.submit(Launch::new(
            fill,
            4,
            &[buf.into(), (1usize << 18).into(), 2.0f32.into()],
            s,
        ))?;
        let r = rt_a.streams().synchronize(s);
        println!(
            "tenant A: synchronize -> {:?}",
            r.as_ref().map_err(|e| e.code())
        );
        let again = rt_a.memory().malloc(64);
        println!(
            "tenant A: next call (malloc) -> {:?}",
            again.map_err(|e| e.code())
        );
        rt_a.contexts().destroy(ctx)?;
        println!("tenant A: context destroyed");
        Ok(())
    });

    let (rt_b, mid_b) = (rt.clone(), midway.clone());
    let tenant_b = thread::spawn(move || -> Result<f32, NpuError> {
        let ctx = rt_b.contexts().create(0)?;
        let s = rt_b.streams().create()?;
        let n = 1usize << 16;
        let (x, y) = (
            rt_b.memory().malloc(4 * n as u64)?,
            rt_b.memory().malloc(4 * n as u64)?,
        );
        rt_b.memory().memcpy_htod(x, &vec![1.0f32; n])?;
        rt_b.memory().memcpy_htod(y, &vec![0.5f32; n])?;
        let axpy = rt_b.kernel("axpy_f32")?;
        for round in 0..8 {
            if round == 4 {
                mid_b.wait();
            }
            rt_b.submit(Launch::new(
                axpy,
                8,
                &[n.into(), 2.0f32.into(), x.into(), y.into()],
                s,
            ))?;
        }
        rt_b.streams().synchronize(s)?;
        let mut out = vec![0f32; n];
        rt_b.memory().memcpy_dtoh(&mut out, y)?;
        println!(
            "tenant B: all calls succeeded; y[0] = {} (expected {})",
            out[0],
            0.5 + 8.0 * 2.0
        );
        rt_b.contexts().destroy(ctx)?;
        println!("tenant B: context destroyed");
        Ok(out[0])
    });

    tenant_a.join().expect("tenant A thread")?;
    let y0 = tenant_b.join().expect("tenant B thread")?;
    println!("device resources:");
    counts("after", &rt.stats());
    assert_eq!(y0, 16.5);
    Ok(())
}
