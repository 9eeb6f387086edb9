//! 11 — the stream sanitizer: a missing event wait, found and explained; the fixed program,
//! clean; a use after free.
//!
//! What happens: three small programs run on runtimes built with the sanitizer in report mode
//! (`RuntimeConfig::sanitizer`; `NPUSIM_SANITIZE=report` turns it on for any program without a
//! change). Each frame completes tasks as usual; as each task completes, the sanitizer gives it
//! a vector clock (stream order, the event records its waits captured, what the host thread
//! that enqueued the task had synchronized with) and checks the bytes it touched against the
//! shadow of earlier accesses.
//!
//! 1. A producer stream fills a buffer with `fill_f32`; a consumer stream runs `relu_f32` on it.
//!    Nobody recorded an event, so nothing orders the two: the report names both kernels, the
//!    argument of each, the lines that enqueued them and the event that would order them.
//! 2. The same program with `record_event` on the producer and `stream_wait_event` on the
//!    consumer: no report.
//! 3. The host frees a buffer while a kernel that writes it is still queued. npusim's free waits
//!    for the kernel, but ACL's `aclrtFree` frees at once: on hardware the kernel would write
//!    memory that may already belong to someone else. Reported as a use after free.
//! 4. Two host threads: a loader thread uploads `x` and tells the main thread over a channel;
//!    the main thread then runs `relu_f32` on `x`. Each host thread has its own clock, and the
//!    channel is invisible to the sanitizer, so the loader's copy and the kernel are reported
//!    as a race naming both threads. The same program with the hand-off told to the sanitizer
//!    (`sanitizer_release` before the send, `sanitizer_acquire` after the receive): no report.
//!
//! Run: `cargo run --release --example 11_sanitizer`

use npusim::Launch;
use npusim::prelude::*;
use npusim::{Arg, SanitizerConfig, SanitizerReport};

const N: u64 = 1 << 16;

fn runtime() -> Result<Runtime, NpuError> {
    Runtime::new(RuntimeConfig {
        sanitizer: SanitizerConfig::report(),
        ..RuntimeConfig::default()
    })
}

/// Producer fills `x`, consumer runs relu on it into `y`; `ordered` puts an event between.
fn pipeline(rt: &Runtime, ordered: bool) -> Result<Vec<SanitizerReport>, NpuError> {
    let (producer, consumer) = (rt.streams().create()?, rt.streams().create()?);
    let (fill, relu) = (rt.kernel("fill_f32")?, rt.kernel("relu_f32")?);
    let x = rt.memory().malloc(N * 4)?;
    let y = rt.memory().malloc(N * 4)?;
    rt.submit(Launch::new(
        fill,
        8,
        &[Arg::Ptr(x), Arg::U64(N), Arg::F32(-1.5)],
        producer,
    ))?;
    if ordered {
        let ready = rt.events().create()?;
        rt.events().record(ready, producer)?;
        rt.events().stream_wait(consumer, ready)?;
    }
    rt.submit(Launch::new(
        relu,
        8,
        &[Arg::Ptr(x), Arg::Ptr(y), Arg::U64(N)],
        consumer,
    ))?;
    rt.synchronize_device()?;
    Ok(rt.sanitizer().take_reports())
}

/// A loader thread uploads `x`; the main thread, told over a channel, runs relu on it.
/// `annotated` tells the sanitizer of the hand-off.
fn loader(rt: &Runtime, annotated: bool) -> Result<Vec<SanitizerReport>, NpuError> {
    // The main thread makes its first call (and so is known to the sanitizer) before the
    // loader exists; the loader starts ordered after it, as a spawned thread is.
    let s = rt.streams().create()?;
    let relu = rt.kernel("relu_f32")?;
    let (x, y) = (rt.memory().malloc(N * 4)?, rt.memory().malloc(N * 4)?);
    let (loaded, done) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("loader".into())
            .spawn_scoped(scope, move || -> Result<(), NpuError> {
                rt.memory().memcpy_htod(x, &vec![-2.0f32; N as usize])?;
                if annotated {
                    // The send below is a hand-off the runtime cannot see: publish what this
                    // thread did so far (its copy included) under key 1 ...
                    rt.sanitizer().release(1);
                }
                loaded.send(()).expect("the main thread waits");
                Ok(())
            })
            .expect("the loader starts");
        done.recv().expect("the loader sends");
        if annotated {
            // ... and order this thread after it, now that the message has arrived.
            rt.sanitizer().acquire(1);
        }
        rt.submit(Launch::new(
            relu,
            8,
            &[Arg::Ptr(x), Arg::Ptr(y), Arg::U64(N)],
            s,
        ))
    })?;
    rt.synchronize_device()?;
    Ok(rt.sanitizer().take_reports())
}

fn print(title: &str, reports: &[SanitizerReport]) {
    println!("== {title}: {} report(s)", reports.len());
    for r in reports {
        println!("{r}\n");
    }
}

fn main() -> Result<(), NpuError> {
    // 1. The missing wait.
    let rt = runtime()?;
    let racy = pipeline(&rt, false)?;
    print("two streams, no event", &racy);
    assert_eq!(racy.len(), 1);
    assert_eq!(racy[0].kind, npusim::ReportKind::Race);

    // 2. Fixed.
    let rt = runtime()?;
    let fixed = pipeline(&rt, true)?;
    print("the same with record_event + stream_wait_event", &fixed);
    assert!(fixed.is_empty());

    // 3. A use after free.
    let rt = runtime()?;
    let s = rt.streams().create()?;
    let fill = rt.kernel("fill_f32")?;
    let buf = rt.memory().malloc(N * 4)?;
    rt.submit(Launch::new(
        fill,
        8,
        &[Arg::Ptr(buf), Arg::U64(N), Arg::F32(0.0)],
        s,
    ))?;
    rt.memory().free(buf)?; // the kernel is still queued
    rt.synchronize_device()?;
    let freed = rt.sanitizer().take_reports();
    print("free while a kernel still writes the buffer", &freed);
    assert_eq!(freed.len(), 1);
    assert_eq!(freed[0].kind, npusim::ReportKind::UseAfterFree);

    // 4. Two host threads, a hand-off through a channel.
    let rt = runtime()?;
    let unannotated = loader(&rt, false)?;
    print(
        "a loader thread hands x over through a channel",
        &unannotated,
    );
    assert_eq!(unannotated.len(), 1);
    assert!(unannotated[0].earlier.thread.is_some());
    let rt = runtime()?;
    let annotated = loader(&rt, true)?;
    print(
        "the same with sanitizer_release + sanitizer_acquire",
        &annotated,
    );
    assert!(annotated.is_empty());

    let shadow = rt.sanitizer().shadow();
    println!(
        "shadow memory: {} intervals, {} accesses, {} bytes",
        shadow.intervals, shadow.accesses, shadow.bytes
    );
    Ok(())
}
