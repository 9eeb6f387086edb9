//! The safe API (`npusim::safe`): typed buffers freed in stream order, streams and events that
//! clean up after themselves, the launch builder's checks, and what each drop does; devices,
//! modules and functions, communicators and stream callbacks as values. Random programs of
//! safe calls (native and binary kernels, module reloads, callbacks) never see a use after free
//! or two live buffers sharing memory.

use npusim::Launch;
use std::collections::BTreeMap;

use npusim::prelude::*;
use npusim::{FailureMode, codes};
use proptest::prelude::*;

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

#[track_caller]
fn assert_code<T: std::fmt::Debug>(result: NpuResult<T>, code: i32) {
    match result {
        Ok(v) => panic!("expected error {code}, got Ok({v:?})"),
        Err(e) => assert_eq!(e.code(), code, "{e}"),
    }
}

/// What the compile-fail doctests of `DeviceBuffer` forbid, written correctly, compiles: they
/// fail for the reason they name, not for a typo.
#[test]
fn the_compile_fail_examples_compile_once_corrected() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let stream = ctx.stream()?;
    let mut halves = ctx.alloc::<u16>(4)?;
    let more = ctx.alloc::<u16>(4)?;
    stream.memcpy_dtod(&more, &mut halves)?;
    let mut buf = ctx.alloc::<f32>(4)?;
    stream.memcpy_htod(&[1.0f32; 4], &mut buf)?;
    drop(buf);
    stream.synchronize()
}

#[test]
fn safe_handles_are_send_sync_and_cheap_to_clone() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<NpuContext>();
    send_sync::<NpuStream>();
    send_sync::<NpuEvent>();
    send_sync::<DeviceBuffer<f32>>();
    send_sync::<PinnedBuffer<u8>>();
    fn clone<T: Clone>() {}
    clone::<NpuContext>();
    clone::<NpuStream>();
    clone::<NpuEvent>();
}

#[test]
fn a_buffer_knows_its_length_element_type_and_device() -> NpuResult<()> {
    let rt = Runtime::new(RuntimeConfig {
        devices: 2,
        ..RuntimeConfig::default()
    })?;
    let ctx = rt.device_context(1)?;
    let buf = ctx.alloc::<u64>(10)?;
    assert_eq!((buf.len(), buf.byte_len(), buf.device()), (10, 80, 1));
    let view = buf.slice(2..5)?;
    assert_eq!((view.len(), view.byte_len()), (3, 24));
    assert_eq!(view.device_ptr(), buf.device_ptr().offset(16));
    assert_eq!(view.slice(1..)?.device_ptr(), buf.device_ptr().offset(24));
    assert_code(buf.slice(5..11), codes::RT_PARAM_INVALID);
    assert_code(view.slice(..4), codes::RT_PARAM_INVALID);
    assert_code(ctx.alloc::<u64>(0), codes::RT_PARAM_INVALID);
    Ok(())
}

#[test]
fn copies_check_lengths_and_land_in_the_view_they_name() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let mut buf = s.alloc_zeros::<i32>(8)?;
    assert_code(s.memcpy_htod(&[1i32; 9], &mut buf), codes::RT_PARAM_INVALID);
    s.memcpy_htod(&[7i32; 3], &mut buf.slice_mut(5..)?)?;
    assert_eq!(s.clone_dtoh(&buf)?, [0, 0, 0, 0, 0, 7, 7, 7]);
    assert_eq!(s.clone_dtoh(&buf.slice(4..6)?)?, [0, 7]);
    let mut short = [0i32; 2];
    assert_code(
        s.memcpy_dtoh(&buf.slice(..1)?, &mut short),
        codes::RT_PARAM_INVALID,
    );
    let pinned = ctx.alloc_host::<i32>(8)?;
    s.memcpy_dtoh_pinned(&buf, &pinned)?;
    s.synchronize()?;
    assert_eq!(pinned.read()?, [0, 0, 0, 0, 0, 7, 7, 7]);
    Ok(())
}

#[test]
fn objects_work_in_their_own_context_whatever_the_thread_has_current() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let buf = s.clone_htod(&[1.0f32, 2.0, 3.0])?;
    let other = rt.contexts().create(0)?; // now current on this thread
    assert_eq!(s.clone_dtoh(&buf)?, [1.0, 2.0, 3.0]);
    assert_eq!(
        rt.contexts().current()?,
        other,
        "the thread's context is left as it was"
    );
    // From another thread, which never chose a context.
    let handle = std::thread::spawn(move || s.clone_dtoh(&buf));
    assert_eq!(handle.join().unwrap()?, [1.0, 2.0, 3.0]);
    Ok(())
}

#[test]
fn a_buffer_of_another_context_is_refused_before_anything_is_queued() -> NpuResult<()> {
    let rt = runtime();
    let a = rt.device_context(0)?;
    let b = rt.context_of(rt.contexts().create(0)?)?;
    let (sa, sb) = (a.stream()?, b.stream()?);
    let mut x = a.alloc::<f32>(16)?;
    assert_code(
        sb.memcpy_htod(&[0.0f32; 16], &mut x),
        codes::RT_STREAM_CONTEXT,
    );
    let fill = rt.kernel("fill_f32")?;
    let r = sb
        .launch_builder(&fill)
        .arg(&mut x)
        .arg(16usize)
        .arg(1.0f32)
        .launch();
    assert!(r.is_err());
    assert!(sb.query()? && sa.query()?, "nothing was queued");
    Ok(())
}

#[test]
fn a_launch_with_the_wrong_arguments_is_refused_before_anything_is_queued() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let (a, b) = (s.clone_htod(&[1.0f32; 4])?, s.clone_htod(&[2.0f32; 4])?);
    let mut c = s.alloc_zeros::<f32>(4)?;
    s.synchronize()?;
    let before = rt.timeline().len();
    let add = rt.kernel("vector_add_f32")?;
    let too_few = s.launch_builder(&add).arg(&a).arg(&b).arg(&mut c).launch();
    assert_code(too_few, codes::RT_PARAM_INVALID);
    let float_count = s
        .launch_builder(&add)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(4.0f32)
        .launch();
    assert_code(float_count, codes::RT_PARAM_INVALID);
    let count_for_buffer = s
        .launch_builder(&add)
        .arg(4usize)
        .arg(&b)
        .arg(&mut c)
        .arg(4usize)
        .launch();
    assert_code(count_for_buffer, codes::RT_PARAM_INVALID);
    let negative = s
        .launch_builder(&add)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(-1i32)
        .launch();
    assert_code(negative, codes::RT_PARAM_INVALID);
    assert!(s.query()?, "nothing was queued");
    s.synchronize()?;
    assert_eq!(rt.timeline().len(), before);
    // A literal integer is fine where a count goes.
    s.launch_builder(&add)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(4)
        .grid(2)
        .launch()?;
    assert_eq!(s.clone_dtoh(&c)?, [3.0; 4]);
    Ok(())
}

#[test]
fn a_kernel_without_a_declared_signature_takes_any_arguments() -> NpuResult<()> {
    let rt = runtime();
    let k = rt.kernels().register(NativeKernel::new(
        "store_index",
        |k| {
            let (p, v) = (k.ptr(0)?, k.u64(1)?);
            k.store(p, &[v as u32])
        },
        |_, _| KernelCost::default(),
    ));
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let mut x = s.alloc_zeros::<u32>(1)?;
    s.launch_builder(&k).arg(&mut x).arg(9u32).launch()?;
    assert_eq!(s.clone_dtoh(&x)?, [9]);
    Ok(())
}

#[test]
fn a_buffer_dropped_behind_a_queued_kernel_is_not_reused_until_the_kernel_has_run() -> NpuResult<()>
{
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let (s, t) = (ctx.stream()?, ctx.stream()?);
    let n = 1 << 16;
    let a = s.clone_htod(&vec![1.0f32; n])?;
    let b = s.clone_htod(&vec![2.0f32; n])?;
    let mut c = ctx.alloc::<f32>(n)?;
    let add = rt.kernel("vector_add_f32")?;
    s.launch_builder(&add)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(n)
        .launch()?;
    let (a_at, b_at) = (a.device_ptr(), b.device_ptr());
    drop(a);
    drop(b);
    // New buffers filled on another stream at once: they must not be where `a` and `b` are.
    let fresh: Vec<DeviceBuffer<f32>> = (0..4)
        .map(|_| t.clone_htod(&vec![-5.0f32; n]))
        .collect::<NpuResult<_>>()?;
    for f in &fresh {
        assert!(f.device_ptr() != a_at && f.device_ptr() != b_at);
    }
    assert_eq!(s.clone_dtoh(&c)?, vec![3.0f32; n]);
    Ok(())
}

#[test]
fn dropping_a_stream_with_work_queued_runs_the_work_first() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let mut x = ctx.alloc::<f32>(1024)?;
    let s = ctx.stream()?;
    let fill = rt.kernel("fill_f32")?;
    s.launch_builder(&fill)
        .arg(&mut x)
        .arg(1024usize)
        .arg(4.0f32)
        .launch()?;
    let streams = rt.stats().streams;
    let clone = s.clone();
    drop(s);
    assert_eq!(rt.stats().streams, streams, "a clone keeps the stream");
    drop(clone);
    assert_eq!(
        rt.stats().streams,
        streams - 1,
        "the last clone destroys it"
    );
    let other = ctx.default_stream()?;
    assert!(other.query()?);
    assert_eq!(other.clone_dtoh(&x)?, vec![4.0f32; 1024]);
    assert!(rt.take_drop_errors().is_empty());
    drop(other);
    assert_eq!(
        rt.stats().streams,
        streams - 1,
        "a default stream is never destroyed"
    );
    Ok(())
}

#[test]
fn dropping_a_stream_whose_work_failed_keeps_the_error() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    rt.contexts().set_failure_mode(FailureMode::Continue)?;
    let s = ctx.stream()?;
    s.launch(&rt.kernel("fault_div_zero")?, 1, &[0u64.into()])?;
    drop(s);
    let errors = rt.take_drop_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].code(), codes::RT_AICORE_TRAP_EXCEPTION);
    Ok(())
}

#[test]
fn dropping_an_event_a_stream_waits_on_keeps_the_wait() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let (s1, s2) = (ctx.stream()?, ctx.stream()?);
    let n = 1 << 18;
    let mut x = s1.alloc_zeros::<f32>(n)?;
    let fill = rt.kernel("fill_f32")?;
    s1.launch_builder(&fill)
        .arg(&mut x)
        .arg(n)
        .arg(1.5f32)
        .launch()?;
    let e = ctx.event()?;
    s1.record(&e)?;
    s2.wait(&e)?;
    let pinned = ctx.alloc_host::<f32>(n)?;
    s2.memcpy_dtoh_pinned(&x, &pinned)?;
    drop(e);
    s2.synchronize()?;
    assert!(pinned.read()?.iter().all(|&v| v == 1.5));
    Ok(())
}

#[test]
fn dropping_the_runtime_first_leaves_the_objects_working() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let x = s.clone_htod(&[1u8, 2, 3])?;
    drop(rt);
    assert_eq!(s.clone_dtoh(&x)?, [1, 2, 3]);
    Ok(())
}

#[test]
fn dropping_everything_with_work_queued_neither_hangs_nor_panics() -> NpuResult<()> {
    for order in 0..3 {
        let rt = runtime();
        let ctx = rt.device_context(0)?;
        let s = ctx.stream()?;
        let e = ctx.event()?;
        let n = 1 << 16;
        let mut x = ctx.alloc::<f32>(n)?;
        let fill = rt.kernel("fill_f32")?;
        for _ in 0..8 {
            s.launch_builder(&fill)
                .arg(&mut x)
                .arg(n)
                .arg(1.0f32)
                .launch()?;
        }
        s.record(&e)?;
        let raw = rt.streams().create()?;
        rt.submit(Launch::new(
            fill,
            1,
            &[x.device_ptr().into(), n.into(), 2.0f32.into()],
            raw,
        ))?;
        match order {
            0 => drop((rt, ctx, s, e, x)),
            1 => drop((x, e, s, ctx, rt)),
            _ => drop((s, x, rt, e, ctx)),
        }
    }
    Ok(())
}

#[test]
fn a_buffer_whose_memory_a_fault_released_is_dead_and_its_drop_frees_nothing() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let old = s.clone_htod(&[1u32; 256])?;
    s.launch(
        &rt.kernel("fault_bad_address")?,
        1,
        &[DevicePtr(0xdead_0000).into()],
    )?;
    assert!(s.synchronize().is_err());
    rt.contexts().set_current(ctx.raw())?;
    rt.contexts().reset()?;
    let new = s.clone_htod(&[2u32; 256])?;
    assert_code(s.clone_dtoh(&old), codes::RT_INVALID_HANDLE);
    let fill = rt.kernel("fill_f32")?;
    let mut old = old;
    let launch = s
        .launch_builder(&fill)
        .arg(&mut old)
        .arg(256usize)
        .arg(0.0f32)
        .launch();
    assert_code(launch, codes::RT_INVALID_HANDLE);
    let live = rt.stats().live_blocks[0];
    drop(old);
    assert_eq!(rt.stats().live_blocks[0], live, "the drop freed nothing");
    assert!(rt.take_drop_errors().is_empty());
    assert_eq!(
        s.clone_dtoh(&new)?,
        vec![2u32; 256],
        "the new buffer is untouched"
    );
    Ok(())
}

#[test]
fn a_buffer_goes_to_the_raw_api_and_back() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let buf = s.clone_htod(&[1.0f32, 2.0])?;
    let (ptr, len) = buf.into_raw();
    let live = rt.stats().live_blocks[0];
    let mut host = [0.0f32; 2];
    rt.memory().memcpy_dtoh(&mut host, ptr)?;
    assert_eq!(host, [1.0, 2.0]);
    // SAFETY: `ptr` came from `into_raw` and has no other owner.
    let back = unsafe { DeviceBuffer::<f32>::from_raw(&ctx, ptr, len)? };
    // SAFETY: refused (too long), so nothing takes ownership.
    assert!(unsafe { DeviceBuffer::<f32>::from_raw(&ctx, ptr, 3) }.is_err());
    drop(back);
    s.synchronize()?;
    assert_eq!(rt.stats().live_blocks[0], live - 1, "dropping it freed it");
    Ok(())
}

#[test]
fn events_time_the_work_between_them() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let (start, end) = (ctx.event()?, ctx.event()?);
    let mut x = ctx.alloc::<f32>(1 << 20)?;
    s.record(&start)?;
    s.memset_zeros(&mut x)?;
    s.record(&end)?;
    assert_code(end.elapsed_since(&start), codes::RT_EVENT_NOT_COMPLETE);
    end.synchronize()?;
    assert!(end.query()?);
    let ms = end.elapsed_since(&start)?;
    assert!(ms > 0.0);
    assert_eq!(
        end.timestamp()? - start.timestamp()?,
        SimTime((ms as f64 * 1e6).round() as u64)
    );
    Ok(())
}

// Random programs: a shadow of every live buffer's contents; after every step that reads back,
// the device must agree, and no two live buffers may overlap.

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize),
    Fill(usize, u8),
    Add(usize, usize, usize),
    /// As `Add`, through a binary kernel's function (at most its first 2048 elements).
    AddBinary(usize, usize, usize),
    /// Drops the function (its module goes with the launches queued) and loads the binary anew.
    Reload,
    /// A host callback on the step's stream: it logs the step, in program order.
    Callback,
    CopyRange(usize, usize),
    Drop(usize),
    Check(usize),
    DropStream,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Whole 64-byte multiples, so blocks lie back to back and one access range can span two.
        2 => (1usize..128).prop_map(|k| Op::Alloc(16 * k)),
        // Large ones get chunks of their own, which go back to the driver when freed.
        1 => (1usize..8).prop_map(|k| Op::Alloc(16384 * k)),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Op::Fill(i, v)),
        3 => (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(a, b, c)| Op::Add(a, b, c)),
        1 => (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(a, b, c)| Op::AddBinary(a, b, c)),
        1 => Just(Op::Reload),
        1 => Just(Op::Callback),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::CopyRange(a, b)),
        3 => any::<usize>().prop_map(Op::Drop),
        2 => any::<usize>().prop_map(Op::Check),
        1 => Just(Op::DropStream),
    ]
}

fn run(ops: &[Op]) -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let fill = rt.kernel("fill_f32")?;
    let add = rt.kernel("vector_add_f32")?;
    let mut streams = vec![ctx.stream()?, ctx.stream()?];
    let mut live: Vec<(DeviceBuffer<f32>, Vec<f32>)> = Vec::new();
    let mut k = 0usize;
    // Each step runs on the next stream, after the previous step (an event joins them): the
    // program is ordered, as the shadow is, while its work moves between streams.
    let join = ctx.event()?;
    let mut last: Option<NpuStream> = None;
    // New buffers are filled on a stream of their own that waits for nothing: a new block is
    // free of queued work, so its fill may run at once, beside the queued steps. Were a block
    // handed out while queued work still touched it, the two would collide and a shadow differ.
    let side = ctx.stream()?;
    let filled = ctx.event()?;
    let load = || {
        ctx.load_module_file(kernel_object("vector_add.o"))?
            .function("vadd_f32")
    };
    let mut vadd = load()?;
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    for op in ops {
        k += 1;
        let s = streams[k % streams.len()].clone();
        if let Some(prev) = last.replace(s.clone()) {
            prev.record(&join)?;
            s.wait(&join)?;
        }
        s.wait(&filled)?;
        let pick = |i: usize, n: usize| i % n.max(1);
        match *op {
            Op::Alloc(n) => {
                let mut b = ctx.alloc::<f32>(n)?;
                let v = vec![k as f32; n];
                side.memcpy_htod(&v, &mut b)?;
                side.record(&filled)?;
                live.push((b, v));
            }
            Op::Fill(i, v) if !live.is_empty() => {
                let i = pick(i, live.len());
                let (b, shadow) = &mut live[i];
                let n = b.len();
                s.launch_builder(&fill)
                    .arg(&mut *b)
                    .arg(n)
                    .arg(v as f32)
                    .launch()?;
                shadow.fill(v as f32);
            }
            Op::AddBinary(a, b, c) | Op::Add(a, b, c) if live.len() >= 3 => {
                let binary = matches!(op, Op::AddBinary(..));
                let (a, b, c) = (
                    pick(a, live.len()),
                    pick(b, live.len()),
                    pick(c, live.len()),
                );
                if a == c || b == c {
                    continue;
                }
                let mut n = live[a].0.len().min(live[b].0.len()).min(live[c].0.len());
                if binary {
                    n = n.min(2048);
                }
                // Borrow three entries at once through raw indices: split the vector.
                let sum: Vec<f32> = (0..n).map(|j| live[a].1[j] + live[b].1[j]).collect();
                let (xa, xb) = (
                    &live[a].0 as *const DeviceBuffer<f32>,
                    &live[b].0 as *const DeviceBuffer<f32>,
                );
                // SAFETY: `a` and `b` differ from `c`; the shared borrows do not alias the
                // mutable one, and all end before `live` is touched again.
                let (xa, xb) = unsafe { (&*xa, &*xb) };
                let xc = &mut live[c].0;
                if binary {
                    s.launch_builder(&vadd)
                        .arg(xa)
                        .arg(xb)
                        .arg(&mut *xc)
                        .arg(n)
                        .launch()?;
                } else {
                    s.launch_builder(&add)
                        .arg(xa)
                        .arg(xb)
                        .arg(&mut *xc)
                        .arg(n)
                        .launch()?;
                }
                live[c].1[..n].copy_from_slice(&sum);
            }
            Op::CopyRange(a, b) if live.len() >= 2 => {
                let (a, b) = (pick(a, live.len()), pick(b, live.len()));
                if a == b {
                    continue;
                }
                let n = live[a].0.len().min(live[b].0.len()) / 2;
                if n == 0 {
                    continue;
                }
                let src = &live[a].0 as *const DeviceBuffer<f32>;
                // SAFETY: `a != b`.
                let src = unsafe { &*src };
                let view = src.slice(..n)?;
                s.memcpy_dtod(&view, &mut live[b].0.slice_mut(n..2 * n)?)?;
                let part: Vec<f32> = live[a].1[..n].to_vec();
                live[b].1[n..2 * n].copy_from_slice(&part);
            }
            Op::Drop(i) if !live.is_empty() => {
                let i = pick(i, live.len());
                live.swap_remove(i);
            }
            Op::Check(i) if !live.is_empty() => {
                let i = pick(i, live.len());
                let got = s.clone_dtoh(&live[i].0)?;
                assert!(
                    got == live[i].1,
                    "buffer {i} differs from its shadow after {k} steps"
                );
            }
            Op::Reload => vadd = load()?,
            Op::Callback => {
                let log = log.clone();
                s.launch_host_func(move || log.lock().unwrap().push(k))?;
            }
            Op::DropStream => {
                // Dropped with its work queued (the last step may be on it): the work runs.
                let gone = streams.remove(0);
                last = last.filter(|l| l.raw() != gone.raw());
                drop(gone);
                streams.push(ctx.stream()?);
            }
            _ => {}
        }
        // No two live buffers share a byte.
        let mut ranges: BTreeMap<u64, u64> = BTreeMap::new();
        for (b, _) in &live {
            ranges.insert(b.device_ptr().addr(), b.byte_len());
        }
        let mut end = 0;
        for (&start, &len) in &ranges {
            assert!(start >= end, "live buffers overlap at {start:#x}");
            end = start + len;
        }
    }
    ctx.synchronize()?;
    let s = ctx.default_stream()?;
    for (i, (b, shadow)) in live.iter().enumerate() {
        assert!(
            &s.clone_dtoh(b)? == shadow,
            "buffer {i} differs from its shadow at the end"
        );
    }
    let log = log.lock().unwrap();
    assert!(
        log.windows(2).all(|w| w[0] < w[1]),
        "callbacks ran out of order: {log:?}"
    );
    drop(vadd);
    assert!(rt.take_drop_errors().is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("NPUSIM_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    ))]

    #[test]
    fn random_safe_programs_never_use_freed_memory_or_share_it(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops).unwrap();
    }
}

#[test]
fn a_new_context_goes_with_the_last_object_made_from_it_even_with_work_queued() -> NpuResult<()> {
    let rt = runtime();
    let before = rt.stats().contexts;
    let current = rt.contexts().current()?;
    let ctx = rt.new_context(0)?;
    assert_eq!(
        rt.contexts().current()?,
        current,
        "no thread's context changed"
    );
    let s = ctx.stream()?;
    let mut x = ctx.alloc::<f32>(1 << 16)?;
    let fill = rt.kernel("fill_f32")?;
    for _ in 0..4 {
        s.launch_builder(&fill)
            .arg(&mut x)
            .arg(1usize << 16)
            .arg(1.0f32)
            .launch()?;
    }
    drop(ctx);
    assert_eq!(rt.stats().contexts, before + 1);
    drop((s, x));
    assert_eq!(rt.stats().contexts, before, "the context is gone");
    assert!(rt.take_drop_errors().is_empty());
    Ok(())
}

#[test]
fn threads_share_a_runtime_each_with_a_context_of_its_own() -> NpuResult<()> {
    let rt = runtime();
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let rt = rt.clone();
            std::thread::spawn(move || -> NpuResult<Vec<f32>> {
                let ctx = rt.new_context(0)?;
                let s = ctx.stream()?;
                let mut acc = s.alloc_zeros::<f32>(4096)?;
                let one = s.clone_htod(&vec![1.0f32 + t as f32; 4096])?;
                let add = rt.kernel("vector_add_f32")?;
                for _ in 0..10 {
                    // acc += one, through a copy dropped while the add is queued.
                    let mut prev = ctx.alloc::<f32>(4096)?;
                    s.memcpy_dtod(&acc, &mut prev)?;
                    s.launch_builder(&add)
                        .arg(&one)
                        .arg(&prev)
                        .arg(&mut acc)
                        .arg(4096)
                        .launch()?;
                }
                s.clone_dtoh(&acc.slice(..2)?)
            })
        })
        .collect();
    for (t, w) in workers.into_iter().enumerate() {
        assert_eq!(w.join().unwrap()?, [10.0 * (1.0 + t as f32); 2]);
    }
    assert_eq!(
        rt.stats().contexts,
        1,
        "each thread's context went with its objects"
    );
    assert!(rt.take_drop_errors().is_empty());
    Ok(())
}

// Devices, modules, communicators and stream callbacks as values.

fn kernel_object(name: &str) -> String {
    format!("{}/examples/kernels/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn two_devices() -> Runtime {
    Runtime::new(RuntimeConfig {
        devices: 2,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// A runtime of two devices, a stream on each, and a communicator of one rank per stream.
fn two_ranks() -> NpuResult<(Runtime, Vec<NpuStream>, Vec<NpuComm>)> {
    let rt = two_devices();
    let streams = vec![
        rt.device_context(0)?.stream()?,
        rt.device_context(1)?.stream()?,
    ];
    let comms = NpuComm::from_streams(&streams)?;
    Ok((rt, streams, comms))
}

#[test]
fn new_safe_values_are_send_sync_and_cheap_to_clone() {
    fn send_sync_clone<T: Send + Sync + Clone>() {}
    send_sync_clone::<NpuDevice>();
    send_sync_clone::<NpuModule>();
    send_sync_clone::<NpuFunction>();
    send_sync_clone::<NpuComm>();
}

#[test]
fn a_device_reports_its_datasheet_memory_utilisation_and_contexts() -> NpuResult<()> {
    let rt = two_devices();
    assert_code(rt.device(2), codes::RT_INVALID_DEVICEID);
    let (d0, d1) = (rt.device(0)?, rt.device(1)?);
    assert_eq!(rt.devices().len(), 2);
    assert_eq!(d1.config()?, rt.device_config(1)?);
    let ctx = d1.context()?;
    assert_eq!(ctx.device(), 1);
    let idle = d1.memory_info()?;
    assert_eq!(idle.total, d1.config()?.hbm_bytes);
    let n = 1 << 18;
    let mut x = ctx.alloc::<f32>(n)?;
    assert!(idle.free - d1.memory_info()?.free >= x.byte_len());
    assert_eq!(d0.memory_info()?, rt.device(0)?.memory_info()?);
    let s = ctx.stream()?;
    let fill = rt.kernel("fill_f32")?;
    s.launch_builder(&fill)
        .arg(&mut x)
        .arg(n)
        .arg(1.0f32)
        .grid(4)
        .launch()?;
    s.synchronize()?;
    let busy = d1.utilisation()?;
    assert!(busy.cores > 0.0 && busy.cores <= 1.0, "{busy:?}");
    assert!(busy.units.core_busy_ns > 0);
    assert_eq!(d0.utilisation()?.cores, 0.0, "device 0 ran nothing");
    // Its contexts: the primary, then any other, which goes with its last object.
    let other = d1.new_context()?;
    let listed: Vec<Context> = d1.contexts()?.iter().map(NpuContext::raw).collect();
    assert_eq!(listed, [ctx.raw(), other.raw()]);
    drop(other);
    assert_eq!(d1.contexts()?.len(), 1);
    assert_eq!(d0.contexts()?[0].raw(), rt.device_context(0)?.raw());
    Ok(())
}

#[test]
fn a_function_keeps_its_module_loaded_and_the_last_drop_unloads_it() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let module = ctx.load_module_file(kernel_object("vector_add.o"))?;
    assert!(
        module
            .functions()?
            .iter()
            .any(|(name, _)| name == "vadd_f32")
    );
    assert_code(module.function("no_such_symbol"), codes::RT_PARAM_INVALID);
    let vadd = module.function("vadd_f32")?;
    let raw = vadd.raw();
    let spare = vadd.clone();
    drop(module);
    let n = 4096;
    let (a, b) = (
        s.clone_htod(&vec![1.0f32; n])?,
        s.clone_htod(&vec![2.0f32; n])?,
    );
    let mut c = ctx.alloc::<f32>(n)?;
    s.launch_builder(&vadd)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(n)
        .grid(4)
        .launch()?;
    drop(vadd);
    // The clone still holds the module: a raw launch of the handle works.
    rt.contexts().set_current(ctx.raw())?;
    rt.submit(Launch::new(
        raw,
        2,
        &[
            a.device_ptr().into(),
            b.device_ptr().into(),
            c.device_ptr().into(),
            n.into(),
        ],
        s.raw(),
    ))?;
    // The last function goes with the launches queued: the drop returns at once, and they
    // run with the code in place.
    drop(spare);
    assert!(!s.query()?, "the drop did not wait");
    assert_eq!(binaries(&rt), 1, "loaded while launches are queued");
    assert!(s.clone_dtoh(&c)?.iter().all(|&x| x == 3.0));
    assert_eq!(binaries(&rt), 0, "unloaded behind them");
    assert!(rt.take_drop_errors().is_empty());
    // ... and then the binary is gone: its raw handle is stale.
    let stale = rt.submit(Launch::new(
        raw,
        1,
        &[
            a.device_ptr().into(),
            b.device_ptr().into(),
            c.device_ptr().into(),
            n.into(),
        ],
        s.raw(),
    ));
    assert_code(stale, codes::RT_INVALID_HANDLE);
    Ok(())
}

/// Binaries loaded in the runtime.
fn binaries(rt: &Runtime) -> usize {
    let mut g = rt.lock_world();
    let world = g.world_mut();
    world
        .query::<&npusim::components::binary::BinaryState>()
        .iter(world)
        .count()
}

#[test]
fn modules_dropped_with_work_queued_go_in_stream_order_without_waiting() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let (s, t) = (ctx.stream()?, ctx.stream()?);
    let n = 1024;
    let (a, b) = (
        s.clone_htod(&vec![1.0f32; n])?,
        s.clone_htod(&vec![2.0f32; n])?,
    );
    let mut c = ctx.alloc::<f32>(n)?;
    let mut d = ctx.alloc::<f32>(n)?;
    s.synchronize()?;
    // Nothing queued: the last drop unloads at once.
    drop(ctx.load_module_file(kernel_object("vector_add.o"))?);
    assert_eq!(binaries(&rt), 0);
    // Loaded, launched on two streams and dropped, many times over, with nothing synchronized:
    // each goes once both streams have run what was queued before its drop.
    for _ in 0..32 {
        let vadd = ctx
            .load_module_file(kernel_object("vector_add.o"))?
            .function("vadd_f32")?;
        s.launch_builder(&vadd)
            .arg(&a)
            .arg(&b)
            .arg(&mut c)
            .arg(n)
            .launch()?;
        t.launch_builder(&vadd)
            .arg(&a)
            .arg(&b)
            .arg(&mut d)
            .arg(n)
            .launch()?;
    }
    assert!(binaries(&rt) > 0, "still loaded behind the queued launches");
    ctx.synchronize()?;
    rt.run_until_idle()?;
    assert_eq!(binaries(&rt), 0, "every binary went");
    assert!(s.clone_dtoh(&c)?.iter().all(|&x| x == 3.0));
    assert!(t.clone_dtoh(&d)?.iter().all(|&x| x == 3.0));
    assert!(rt.take_drop_errors().is_empty());
    Ok(())
}

#[test]
fn a_module_dropped_behind_work_that_faults_its_context_is_still_unloaded() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let n = 1024;
    let a = s.clone_htod(&vec![1.0f32; n])?;
    let mut c = ctx.alloc::<f32>(n)?;
    let vadd = ctx
        .load_module_file(kernel_object("vector_add.o"))?
        .function("vadd_f32")?;
    // A fault first, then a launch of the module's function, then the last drop: the binary
    // is to go behind the launch, which the fault stops.
    s.launch(&rt.kernel("fault_div_zero")?, 1, &[0u64.into()])?;
    s.launch_builder(&vadd)
        .arg(&a)
        .arg(&a)
        .arg(&mut c)
        .arg(n)
        .launch()?;
    drop(vadd);
    assert_eq!(binaries(&rt), 1, "still loaded behind the queued launch");
    let err = s.synchronize().unwrap_err();
    assert_eq!(err.code(), codes::RT_AICORE_TRAP_EXCEPTION);
    let _ = rt.run_until_idle();
    assert_eq!(
        binaries(&rt),
        0,
        "the fault does not keep the binary loaded"
    );
    Ok(())
}

#[test]
fn a_function_is_launched_only_on_streams_of_its_modules_context() -> NpuResult<()> {
    let rt = runtime();
    let ctx = rt.device_context(0)?;
    let other = rt.new_context(0)?;
    let module = other.load_module_file(kernel_object("vector_add.o"))?;
    let vadd = module.function("vadd_f32")?;
    let s = ctx.stream()?;
    let r = s
        .launch_builder(&vadd)
        .arg(0u64)
        .arg(0u64)
        .arg(0u64)
        .arg(0u64)
        .launch();
    assert_code(r, codes::RT_STREAM_CONTEXT);
    assert!(s.query()?, "nothing was queued");
    // The context goes with its last object, the module and its function included.
    let before = rt.stats().contexts;
    drop((other, module));
    assert_eq!(rt.stats().contexts, before, "the function holds it");
    drop(vadd);
    assert_eq!(rt.stats().contexts, before - 1);
    assert!(rt.take_drop_errors().is_empty());
    Ok(())
}

#[test]
fn collectives_on_typed_buffers_take_their_counts_from_the_buffers() -> NpuResult<()> {
    use npusim::ReduceOp;
    let (rt, streams, comms) = two_ranks()?;
    let twice = NpuComm::from_streams(&[streams[0].clone(), streams[0].clone()]);
    assert_code(twice, codes::RT_PARAM_INVALID); // one rank per device
    assert_code(NpuComm::from_streams(&[]), codes::RT_PARAM_INVALID);
    // From devices: a communication stream of each primary context.
    let by_device = NpuComm::from_devices(&rt.devices())?;
    assert_eq!(
        by_device[1].stream().context().raw(),
        rt.device_context(1)?.raw()
    );
    let mut ones = Vec::new();
    for c in &by_device {
        let mut x = c.stream().clone_htod(&[1i32; 4])?;
        c.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        ones.push(x);
    }
    assert_eq!(by_device[0].stream().clone_dtoh(&ones[0])?, [2; 4]);
    assert_eq!(
        comms
            .iter()
            .map(|c| (c.rank(), c.world_size()))
            .collect::<Vec<_>>(),
        [(0, 2), (1, 2)]
    );
    let n = 8;
    let mut out = Vec::new();
    for c in &comms {
        let s = c.stream();
        let ctx = s.context();
        let r = c.rank() as i32;
        let send = s.clone_htod(&vec![r + 1; n])?;
        let mut sum = ctx.alloc::<i32>(n)?;
        c.all_reduce(&send, &mut sum, ReduceOp::Sum)?;
        let mut gathered = ctx.alloc::<i32>(2 * n)?;
        c.all_gather(&send, &mut gathered)?;
        let mut scattered = ctx.alloc::<i32>(n / 2)?;
        c.reduce_scatter(&send.slice(..)?, &mut scattered, ReduceOp::Max)?;
        let mut root = s.clone_htod(&[10 * (r + 1); 3])?;
        c.broadcast(&mut root, 1)?;
        let mut inplace = s.clone_htod(&[r + 5; 2])?;
        c.all_reduce_in_place(&mut inplace, ReduceOp::Prod)?;
        out.push((sum, gathered, scattered, root, inplace));
    }
    for (c, (sum, gathered, scattered, root, inplace)) in comms.iter().zip(&out) {
        let s = c.stream();
        assert_eq!(s.clone_dtoh(sum)?, vec![3; n]);
        assert_eq!(s.clone_dtoh(gathered)?, [vec![1; n], vec![2; n]].concat());
        assert_eq!(s.clone_dtoh(scattered)?, vec![2; n / 2]);
        assert_eq!(s.clone_dtoh(root)?, [20; 3]);
        assert_eq!(s.clone_dtoh(inplace)?, [30; 2]);
    }
    // A device-to-device clone of a view.
    let s0 = comms[0].stream();
    let half = s0.clone_dtod(&out[0].1.slice(n..)?)?;
    assert_eq!(s0.clone_dtoh(&half)?, vec![2; n]);
    // Send and receive pair in order; counts come from the buffers.
    let (s0, s1) = (comms[0].stream(), comms[1].stream());
    let msg = s0.clone_htod(&[1.5f32, 2.5, 3.5])?;
    let mut got = s1.context().alloc::<f32>(3)?;
    comms[0].send(&msg, 1)?;
    comms[1].recv(&mut got, 0)?;
    assert_eq!(s1.clone_dtoh(&got)?, [1.5, 2.5, 3.5]);
    // Pinned host memory on either side (RDMA).
    let host_out = s0.context().alloc_host::<f32>(3)?;
    host_out.write(&[7.0, 8.0, 9.0])?;
    let host_in = s1.context().alloc_host::<f32>(3)?;
    comms[0].send_pinned(&host_out, 1)?;
    comms[1].recv_pinned(&host_in, 0)?;
    s1.synchronize()?;
    assert_eq!(host_in.read()?, [7.0, 8.0, 9.0]);
    // What does not fit, or is not the rank's, is refused before anything is queued.
    let short = s0.context().alloc::<f32>(2)?;
    let mut short = short;
    assert_code(
        comms[0].all_reduce(&msg, &mut short, ReduceOp::Sum),
        codes::RT_PARAM_INVALID,
    );
    let mut small = s0.context().alloc::<f32>(5)?;
    assert_code(
        comms[0].all_gather(&msg, &mut small),
        codes::RT_PARAM_INVALID,
    );
    assert_code(
        comms[0].all_reduce(&msg, &mut got, ReduceOp::Sum),
        codes::RT_STREAM_CONTEXT,
    );
    assert!(s0.query()?, "nothing was queued");
    assert!(comms[0].error()?.is_none());
    Ok(())
}

#[test]
fn dropping_a_communicator_and_its_buffers_with_collectives_queued_runs_them() -> NpuResult<()> {
    use npusim::ReduceOp;
    let (rt, streams, comms) = two_ranks()?;
    let n = 1 << 16;
    let mut results = Vec::new();
    for c in &comms {
        let s = c.stream();
        let send = s.clone_htod(&vec![c.rank() as f32 + 1.0; n])?;
        let mut recv = s.context().alloc::<f32>(n)?;
        c.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        drop(send); // freed in stream order: the all-reduce still reads it
        results.push(recv);
    }
    drop(comms);
    // Buffers allocated now must not land on the dropped send buffers while they are read.
    let fresh: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .map(|s| s.context().default_stream()?.clone_htod(&vec![-7.0f32; n]))
        .collect::<NpuResult<_>>()?;
    for (s, r) in streams.iter().zip(&results) {
        assert_eq!(s.clone_dtoh(r)?, vec![3.0f32; n]);
    }
    drop(fresh);
    assert!(rt.take_drop_errors().is_empty());
    Ok(())
}

#[test]
fn a_stream_host_callback_runs_in_stream_order_in_the_streams_context() -> NpuResult<()> {
    use std::sync::{Arc, Mutex};
    let rt = runtime();
    let ctx = rt.new_context(0)?;
    let s = ctx.stream()?;
    let n = 1 << 16;
    let mut x = ctx.alloc::<f32>(n)?;
    let fill = rt.kernel("fill_f32")?;
    s.launch_builder(&fill)
        .arg(&mut x)
        .arg(n)
        .arg(1.0f32)
        .launch()?;
    let filled = s.record_event()?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (log, rt2, e) = (seen.clone(), rt.clone(), filled.clone());
    s.launch_host_func(move || {
        // Its context is current, and the fill before it has run (its event has fired).
        log.lock()
            .unwrap()
            .push((rt2.contexts().current(), e.query()));
    })?;
    s.launch_builder(&fill)
        .arg(&mut x)
        .arg(n)
        .arg(2.0f32)
        .launch()?;
    s.synchronize()?;
    assert_eq!(*seen.lock().unwrap(), [(Ok(ctx.raw()), Ok(true))]);
    assert_eq!(s.clone_dtoh(&x.slice(..1)?)?, [2.0]);
    // A panic fails the callback's task; the stream's later work still runs.
    s.launch_host_func(|| panic!("a callback that panics"))?;
    s.memset_zeros(&mut x)?;
    assert_code(s.synchronize(), codes::RT_INTERNAL_ERROR);
    assert_eq!(s.clone_dtoh(&x.slice(..1)?)?, [0.0]);
    Ok(())
}

/// The launch builder's ranges are the access set of a kernel that declares none: exactly the
/// bytes of each buffer argument, read for `&`, read and written for `&mut`, written for
/// `arg_out`, and nothing for a small integer — so a pending free waits for exactly those
/// blocks, and a block no argument names is released at once.
#[test]
fn a_builder_launch_declares_exactly_its_buffer_ranges() -> NpuResult<()> {
    use bevy_ecs::prelude::*;
    use npusim::components::access::{Access, AccessMode};
    use npusim::components::{Task, TaskKind, TaskStatus};
    use std::sync::mpsc;
    #[derive(Resource, Default)]
    struct Seen(BTreeMap<(Entity, u64), (Vec<Access>, bool)>);
    // Before a kernel runs: after ingest, before dispatch.
    fn record(tasks: Query<&Task>, mut seen: ResMut<Seen>) {
        for t in &tasks {
            if t.kind() == TaskKind::Kernel
                && matches!(t.status, TaskStatus::Queued | TaskStatus::Ready)
            {
                seen.0
                    .entry((t.stream, t.seq))
                    .or_insert_with(|| (t.access.ranges().to_vec(), t.access.exact()));
            }
        }
    }
    let rt = runtime();
    {
        let mut g = rt.lock_world();
        g.world_mut().init_resource::<Seen>();
        g.schedule_mut()
            .add_systems(record.in_set(NpuSet::ShapePropagation));
    }
    let touch = rt.kernels().register(NativeKernel::new(
        "touch_nothing_declared",
        |_| Ok(()),
        |_, _| KernelCost::default(),
    ));
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let a = s.clone_htod(&[1.0f32; 64])?;
    let mut b = s.alloc_zeros::<u32>(32)?;
    let c = s.clone_htod(&[0u8; 256])?; // named by no argument
    let mut d = ctx.alloc::<u16>(8)?;
    s.synchronize()?;
    // Hold the stream in a callback, so the launch is queued while the buffers are dropped.
    let (go, wait) = mpsc::channel::<()>();
    s.launch_host_func(move || {
        let _ = wait.recv();
    })?;
    let window = a.slice(4..12)?;
    s.launch_builder(&touch)
        .arg(&window)
        .arg(&mut b)
        .arg(256usize) // an integer, not a buffer
        .arg_out(&mut d)
        .launch()?;
    rt.step();
    let seen = rt.lock_world().world().resource::<Seen>().0.clone();
    let (ranges, exact) = seen
        .values()
        .last()
        .expect("the launch was ingested")
        .clone();
    assert!(exact);
    assert_eq!(
        ranges,
        [
            Access::read(a.device_ptr().addr() + 16, 32),
            Access {
                mode: AccessMode::ReadWrite,
                ..Access::write(b.device_ptr().addr(), 128)
            },
            Access::write(d.device_ptr().addr(), 16),
        ]
    );
    // A block no argument names is not held by the launch; the buffers it names are.
    let pending = |rt: &Runtime| rt.memory().stats().map(|m| m.pending_frees);
    drop(c);
    assert_eq!(pending(&rt)?, 0, "freed at once");
    drop((a, b, d));
    assert_eq!(pending(&rt)?, 3, "behind the queued launch");
    go.send(()).unwrap();
    s.synchronize()?;
    rt.run_until_idle()?;
    assert_eq!(pending(&rt)?, 0);
    Ok(())
}

#[test]
fn a_binary_kernel_launched_by_the_builder_declares_its_buffers_before_it_runs() -> NpuResult<()> {
    use bevy_ecs::prelude::*;
    use npusim::components::access::{Access, AccessMode};
    use npusim::components::{Task, TaskKind, TaskStatus};
    #[derive(Resource, Default)]
    struct Seen(Vec<(Vec<Access>, bool)>);
    fn record(tasks: Query<&Task>, mut seen: ResMut<Seen>) {
        for t in &tasks {
            if t.kind() == TaskKind::Kernel && t.status == TaskStatus::Ready {
                seen.0.push((t.access.ranges().to_vec(), t.access.exact()));
            }
        }
    }
    let rt = runtime();
    {
        let mut g = rt.lock_world();
        g.world_mut().init_resource::<Seen>();
        g.schedule_mut().add_systems(record.in_set(NpuSet::Tiling));
    }
    let ctx = rt.device_context(0)?;
    let s = ctx.stream()?;
    let vadd = ctx
        .load_module_file(kernel_object("vector_add.o"))?
        .function("vadd_f32")?;
    let n = 100;
    let (a, b) = (
        s.clone_htod(&vec![1.0f32; n])?,
        s.clone_htod(&vec![2.0f32; n])?,
    );
    let mut c = ctx.alloc::<f32>(n)?;
    s.launch_builder(&vadd)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(n)
        .launch()?;
    s.synchronize()?;
    let seen = rt.lock_world().world().resource::<Seen>().0.clone();
    let (ranges, exact) = seen.last().expect("the launch was ready").clone();
    assert!(exact, "exact ranges, not blocks");
    let bytes = 4 * n as u64;
    assert_eq!(
        ranges,
        [
            Access::read(a.device_ptr().addr(), bytes),
            Access::read(b.device_ptr().addr(), bytes),
            Access {
                mode: AccessMode::ReadWrite,
                ..Access::write(c.device_ptr().addr(), bytes)
            },
        ]
    );
    assert!(s.clone_dtoh(&c)?.iter().all(|&x| x == 3.0));
    Ok(())
}

/// The compile-fail doctests of `NpuComm` and `NpuModule`, written correctly, compile and run.
#[test]
fn the_new_compile_fail_examples_compile_and_run_once_corrected() -> NpuResult<()> {
    use npusim::ReduceOp;
    use npusim::half::f16;
    let (rt, _streams, comms) = two_ranks()?;
    let mut outs = Vec::new();
    for c in &comms {
        let halves = c.stream().clone_htod(&[f16::from_f32(0.5); 4])?;
        let mut sum = c.stream().context().alloc::<f16>(4)?;
        c.all_reduce(&halves, &mut sum, ReduceOp::Sum)?; // f16 with f16
        let ints = c.stream().clone_htod(&[2i32; 4])?;
        let mut prod = c.stream().context().alloc::<i32>(4)?;
        c.all_reduce(&ints, &mut prod, ReduceOp::Prod)?; // i32, a collective's type
        outs.push((sum, prod));
    }
    for (c, (sum, prod)) in comms.iter().zip(&outs) {
        assert_eq!(c.stream().clone_dtoh(sum)?, [f16::from_f32(1.0); 4]);
        assert_eq!(c.stream().clone_dtoh(prod)?, [4; 4]);
    }
    let ctx = rt.device_context(0)?;
    let module = ctx.load_module_file(kernel_object("vector_add.o"))?;
    let vadd = module.function("vadd_f32")?; // before the module moves
    drop(module);
    let s = ctx.stream()?;
    let (a, b) = (s.clone_htod(&[1.0f32; 8])?, s.clone_htod(&[2.0f32; 8])?);
    let mut c = ctx.alloc::<f32>(8)?;
    let launch = s
        .launch_builder(&vadd)
        .arg(&a)
        .arg(&b)
        .arg(&mut c)
        .arg(8usize);
    launch.launch()?; // before the function is dropped
    drop(vadd);
    assert_eq!(s.clone_dtoh(&c)?, [3.0; 8]);
    Ok(())
}

#[test]
fn dropping_everything_with_modules_and_collectives_queued_neither_hangs_nor_panics()
-> NpuResult<()> {
    use npusim::ReduceOp;
    for order in 0..3 {
        let rt = two_devices();
        // Default streams: their drops do not synchronize, so the ranks' destroys stay queued.
        let streams = vec![
            rt.device_context(0)?.default_stream()?,
            rt.device_context(1)?.default_stream()?,
        ];
        let comms = NpuComm::from_streams(&streams)?;
        let mut bufs = Vec::new();
        for c in &comms {
            let mut b = c.stream().clone_htod(&vec![1.0f32; 1 << 14])?;
            c.all_reduce_in_place(&mut b, ReduceOp::Sum)?;
            bufs.push(b);
        }
        let ctx = rt.device_context(0)?;
        let module = ctx.load_module_file(kernel_object("vector_add.o"))?;
        let vadd = module.function("vadd_f32")?;
        let s = ctx.stream()?;
        let (a, b) = (s.clone_htod(&[1.0f32; 64])?, s.clone_htod(&[2.0f32; 64])?);
        let mut c = ctx.alloc::<f32>(64)?;
        s.launch_builder(&vadd)
            .arg(&a)
            .arg(&b)
            .arg(&mut c)
            .arg(64usize)
            .launch()?;
        match order {
            0 => drop((rt, comms, module, vadd, streams, s, bufs, a, b, c, ctx)),
            1 => drop((bufs, a, b, c, vadd, s, ctx, module, comms, streams, rt)),
            _ => drop((comms, streams, bufs, rt, vadd, module, a, b, c, s, ctx)),
        }
    }
    Ok(())
}

/// An integer argument that holds a heap address (one taken with `device_ptr()`) may be
/// dereferenced by the kernel: the launch holds the whole block behind it, so the buffer's drop
/// cannot release it under the queued kernel.
#[test]
fn a_builder_launch_holds_the_block_behind_an_address_passed_as_an_integer() -> NpuResult<()> {
    use std::sync::mpsc;
    let rt = runtime();
    let store = rt.kernels().register(NativeKernel::new(
        "store_through_an_integer",
        |k| {
            let p = k.u64(0)?;
            k.store(p, &[5u32])
        },
        |_, _| KernelCost::default(),
    ));
    let ctx = rt.device_context(0)?;
    let (s, t) = (ctx.stream()?, ctx.stream()?);
    let (go, wait) = mpsc::channel::<()>();
    s.launch_host_func(move || {
        let _ = wait.recv();
    })?;
    let target = ctx.alloc::<u32>(16)?;
    let at = target.device_ptr();
    s.launch_builder(&store).arg(at.addr()).launch()?;
    rt.step();
    drop(target);
    assert_eq!(
        rt.memory().stats()?.pending_frees,
        1,
        "held by the queued launch"
    );
    // Memory allocated meanwhile on another stream is not the held block.
    let other = t.clone_htod(&[0u32; 16])?;
    assert_ne!(other.device_ptr(), at);
    go.send(()).unwrap();
    s.synchronize()?;
    assert_eq!(t.clone_dtoh(&other)?, [0u32; 16]);
    Ok(())
}
