//! Random API programs: proptest generates, per host thread, a sequence of calls on the public
//! Rust API — allocations and frees, copies and memsets with random sizes and offsets (some
//! past the end on purpose), kernel launches with random arguments, faults in a throw-away
//! context, event records and waits, synchronizes with timeouts, host callbacks that call back
//! into the runtime, streams created and destroyed — and runs 1 to 3 threads at once, each in a
//! context of its own, on one runtime. A shadow copy of each thread's memory says what every
//! well-formed read must return. Checked:
//!
//! - no panic, and no hang: a watchdog fails the case after [`WATCHDOG`] of wall time;
//! - every error is one of the documented ACL codes, and the one the mistake calls for;
//! - reads return exactly the bytes the well-formed writes left (bit for bit);
//! - no two live allocations overlap, in any context;
//! - every callback ran, in stream order, by the synchronize after it;
//! - nothing is left after teardown: no context but the primary, no stream but its default,
//!   no event, no live block, no pending free, no live task.
//!
//! CI runs a modest number of cases; `NPUSIM_PROPTEST_CASES=N` runs N (e.g. 2000 for a long run).

use npusim::{HostFunc, Launch};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use npusim::codes;
use npusim::prelude::*;
use proptest::prelude::*;

/// Wall time a whole case may take before it counts as hung.
const WATCHDOG: Duration = Duration::from_secs(120);

/// Cases per run: `NPUSIM_PROPTEST_CASES`, else 256.
fn cases() -> u32 {
    std::env::var("NPUSIM_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// One API call of a thread's program. Indices pick among what exists at that point (modulo
/// the count), so every generated program is runnable.
#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: u64,
    },
    Free {
        block: usize,
    },
    FreeTwice {
        block: usize,
    },
    Write {
        block: usize,
        at: u64,
        len: u64,
        seed: u8,
    },
    Read {
        block: usize,
        at: u64,
        len: u64,
    },
    CopyAsync {
        dst: usize,
        src: usize,
        at: (u64, u64),
        len: u64,
    },
    MemsetAsync {
        block: usize,
        at: u64,
        len: u64,
        value: u8,
    },
    Fill {
        block: usize,
        at: u64,
        n: u64,
        value: f32,
    },
    PastTheEnd {
        block: usize,
        extra: u64,
    },
    LaunchRandomArgs {
        kernel: usize,
        args: Vec<u64>,
        stream: usize,
    },
    Fault {
        kind: usize,
    },
    Record {
        stream: usize,
    },
    Wait {
        stream: usize,
    },
    SyncTimeout {
        stream: usize,
        us: u64,
    },
    Sync {
        stream: usize,
    },
    Callback {
        stream: usize,
    },
    CreateStream,
    DestroyStream {
        stream: usize,
    },
    HostAlloc {
        size: u64,
    },
    Binary {
        unload: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![1u64..=256, 1u64..=8192, Just(65536u64), 1u64..=(1 << 20)];
    let at = 0u64..70_000;
    let len = prop_oneof![0u64..=64, 1u64..=9000];
    prop_oneof![
        4 => size.prop_map(|size| Op::Alloc { size }),
        1 => any::<usize>().prop_map(|block| Op::Free { block }),
        1 => any::<usize>().prop_map(|block| Op::FreeTwice { block }),
        4 => (any::<usize>(), at.clone(), len.clone(), any::<u8>())
            .prop_map(|(block, at, len, seed)| Op::Write { block, at, len, seed }),
        3 => (any::<usize>(), at.clone(), len.clone())
            .prop_map(|(block, at, len)| Op::Read { block, at, len }),
        2 => (any::<usize>(), any::<usize>(), (at.clone(), at.clone()), len.clone())
            .prop_map(|(dst, src, at, len)| Op::CopyAsync { dst, src, at, len }),
        2 => (any::<usize>(), at.clone(), len.clone(), any::<u8>())
            .prop_map(|(block, at, len, value)| Op::MemsetAsync { block, at, len, value }),
        2 => (any::<usize>(), at.clone(), 0u64..3000, any::<f32>())
            .prop_map(|(block, at, n, value)| Op::Fill { block, at, n, value }),
        1 => (any::<usize>(), 1u64..1 << 40).prop_map(|(block, extra)| Op::PastTheEnd { block, extra }),
        1 => (any::<usize>(), prop::collection::vec(any::<u64>(), 0..6), any::<usize>())
            .prop_map(|(kernel, args, stream)| Op::LaunchRandomArgs { kernel, args, stream }),
        1 => (0usize..3).prop_map(|kind| Op::Fault { kind }),
        2 => any::<usize>().prop_map(|stream| Op::Record { stream }),
        2 => any::<usize>().prop_map(|stream| Op::Wait { stream }),
        1 => (any::<usize>(), 0u64..50).prop_map(|(stream, us)| Op::SyncTimeout { stream, us }),
        1 => any::<usize>().prop_map(|stream| Op::Sync { stream }),
        2 => any::<usize>().prop_map(|stream| Op::Callback { stream }),
        1 => Just(Op::CreateStream),
        1 => any::<usize>().prop_map(|stream| Op::DestroyStream { stream }),
        1 => prop_oneof![1u64..=1 << 16, Just(16u64 << 30), Just(u64::MAX)]
            .prop_map(|size| Op::HostAlloc { size }),
        1 => any::<bool>().prop_map(|unload| Op::Binary { unload }),
    ]
}

/// Live allocations of every thread: base → (end, thread), to catch aliasing.
type Live = Arc<Mutex<BTreeMap<u64, (u64, usize)>>>;

struct Block {
    ptr: DevicePtr,
    size: u64,
    /// What each byte holds, where a well-formed write has said (None: unknown).
    shadow: Vec<Option<u8>>,
}

/// The error, checked to be documented and, when given, to be one of `want`.
fn expect_err(what: &str, r: NpuResult<()>, want: &[i32]) {
    let code = match r {
        Ok(()) => panic!("{what}: succeeded, but should have failed"),
        Err(e) => e.code(),
    };
    assert!(
        want.contains(&code),
        "{what}: code {code}, expected one of {want:?}"
    );
}

fn documented(code: i32) -> bool {
    use codes::*;
    [
        INVALID_FILE,
        PARSE_FILE,
        RT_PARAM_INVALID,
        RT_INVALID_DEVICEID,
        RT_CONTEXT_NULL,
        RT_STREAM_CONTEXT,
        RT_EVENT_TIMESTAMP_INVALID,
        RT_ADDR_UNALIGNED,
        RT_INVALID_MEMORY_TYPE,
        RT_INVALID_HANDLE,
        RT_WAIT_TIMEOUT,
        RT_STREAM_ABORT,
        RT_FEATURE_NOT_SUPPORT,
        RT_MEMORY_ALLOCATION,
        RT_MEMORY_FREE,
        RT_DEVICE_OOM,
        RT_EVENT_NOT_COMPLETE,
        RT_CONTEXT_RELEASE_ERROR,
        RT_AICORE_TIMEOUT,
        RT_AICORE_EXCEPTION,
        RT_AICORE_TRAP_EXCEPTION,
    ]
    .contains(&code)
}

fn pattern(seed: u8, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i as u8).wrapping_mul(31)))
        .collect()
}

/// Runs one thread's program in a context of its own and tears everything down.
fn run_thread(rt: Runtime, me: usize, ops: Vec<Op>, live: Live) {
    let ctx = rt.contexts().create(0).unwrap();
    // The data stream orders every write, so the shadow is exact; the others carry events,
    // callbacks and random launches.
    let data = rt.streams().create().unwrap();
    let mut streams = vec![data, rt.streams().create().unwrap()];
    let event = rt.events().create().unwrap();
    let mut blocks: Vec<Block> = Vec::new();
    let mut freed: Vec<DevicePtr> = Vec::new();
    let ran = Arc::new(AtomicU64::new(0));
    // (stream, enqueue number) of each callback, in the order they ran.
    let order: Arc<Mutex<Vec<(Stream, u64)>>> = Arc::default();
    let mut enqueued_callbacks = 0u64;
    let kernels: Vec<Kernel> = ["noop", "fill_f32", "vector_add_f32", "relu_f32"]
        .iter()
        .map(|k| rt.kernel(k).unwrap())
        .collect();
    let fill = kernels[1];
    let object = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernels/vector_add.o"),
    )
    .unwrap();

    for (step, op) in ops.into_iter().enumerate() {
        let what = format!("thread {me} step {step}: {op:?}");
        match op {
            Op::Alloc { size } => {
                let ptr = rt
                    .memory()
                    .malloc(size)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let mut l = live.lock().unwrap();
                if let Some((&base, &(end, owner))) = l.range(..ptr.0 + size).next_back() {
                    assert!(
                        end <= ptr.0,
                        "{what}: [{:#x}, +{size}) overlaps thread {owner}'s [{base:#x}, {end:#x})",
                        ptr.0
                    );
                }
                l.insert(ptr.0, (ptr.0 + size, me));
                // A freed address handed out again is live, no longer freed.
                freed.retain(|f| *f != ptr);
                blocks.push(Block {
                    ptr,
                    size,
                    shadow: vec![None; size as usize],
                });
            }
            Op::Free { block } if !blocks.is_empty() => {
                let b = blocks.swap_remove(block % blocks.len());
                live.lock().unwrap().remove(&b.ptr.0);
                rt.memory()
                    .free(b.ptr)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                freed.push(b.ptr);
            }
            Op::FreeTwice { block } if !freed.is_empty() => {
                let p = freed[block % freed.len()];
                expect_err(&what, rt.memory().free(p), &[codes::RT_MEMORY_FREE]);
            }
            Op::Write {
                block,
                at,
                len,
                seed,
            } if !blocks.is_empty() => {
                let n = blocks.len();
                let b = &mut blocks[block % n];
                let (at, len) = clamp(b.size, at, len);
                let bytes = pattern(seed, len);
                rt.memory()
                    .memcpy_htod(DevicePtr(b.ptr.0 + at), &bytes)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                for (i, v) in bytes.into_iter().enumerate() {
                    b.shadow[at as usize + i] = Some(v);
                }
            }
            Op::Read { block, at, len } if !blocks.is_empty() => {
                let b = &blocks[block % blocks.len()];
                let (at, len) = clamp(b.size, at, len);
                let mut out = vec![0u8; len as usize];
                rt.memory()
                    .memcpy_dtoh(&mut out, DevicePtr(b.ptr.0 + at))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                for (i, v) in out.iter().enumerate() {
                    if let Some(want) = b.shadow[at as usize + i] {
                        assert_eq!(*v, want, "{what}: byte {} of the block", at as usize + i);
                    }
                }
            }
            Op::CopyAsync { dst, src, at, len } if !blocks.is_empty() => {
                let (d, s) = (dst % blocks.len(), src % blocks.len());
                let len = len.min(blocks[d].size).min(blocks[s].size);
                let (da, _) = clamp(blocks[d].size, at.0, len);
                let (sa, _) = clamp(blocks[s].size, at.1, len);
                rt.memory()
                    .memcpy_dtod_async(
                        DevicePtr(blocks[d].ptr.0 + da),
                        DevicePtr(blocks[s].ptr.0 + sa),
                        len,
                        data,
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let moved: Vec<Option<u8>> =
                    blocks[s].shadow[sa as usize..(sa + len) as usize].to_vec();
                blocks[d].shadow[da as usize..(da + len) as usize].copy_from_slice(&moved);
            }
            Op::MemsetAsync {
                block,
                at,
                len,
                value,
            } if !blocks.is_empty() => {
                let n = blocks.len();
                let b = &mut blocks[block % n];
                let (at, len) = clamp(b.size, at, len);
                rt.memory()
                    .memset_async(DevicePtr(b.ptr.0 + at), value, len, data)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                b.shadow[at as usize..(at + len) as usize].fill(Some(value));
            }
            Op::Fill {
                block,
                at,
                n,
                value,
            } if !blocks.is_empty() => {
                let count = blocks.len();
                let b = &mut blocks[block % count];
                let n = n.min(b.size / 4);
                let (at, _) = clamp(b.size, at, 4 * n);
                rt.submit(Launch::new(
                    fill,
                    1,
                    &[DevicePtr(b.ptr.0 + at).into(), n.into(), value.into()],
                    data,
                ))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                let bytes = value.to_le_bytes();
                for i in 0..(4 * n) as usize {
                    b.shadow[at as usize + i] = Some(bytes[i % 4]);
                }
            }
            Op::PastTheEnd { block, extra } if !blocks.is_empty() => {
                let b = &blocks[block % blocks.len()];
                let too_long = b.size + extra;
                expect_err(
                    &what,
                    rt.memory().memset_async(b.ptr, 0, too_long, data),
                    &[codes::RT_PARAM_INVALID],
                );
                expect_err(
                    &what,
                    rt.memory().memcpy_dtod_async(b.ptr, b.ptr, too_long, data),
                    &[codes::RT_PARAM_INVALID],
                );
            }
            Op::LaunchRandomArgs {
                kernel,
                args,
                stream,
            } => {
                // Random words may name this thread's memory: run them in a throw-away
                // context, so the shadow stays exact, and check only the codes.
                let scratch = rt.contexts().create(0).unwrap();
                let s = rt.streams().create().unwrap();
                let k = kernels[kernel % kernels.len()];
                let words: Vec<Arg> = args.iter().map(|&w| Arg::U64(w)).collect();
                let _ = stream;
                match rt.submit(Launch::new(k, 1, &words, s)) {
                    Ok(_) => {
                        if let Err(e) = rt.streams().synchronize(s) {
                            assert!(documented(e.code()), "{what}: {e}");
                        }
                    }
                    Err(e) => assert!(documented(e.code()), "{what}: {e}"),
                }
                rt.contexts()
                    .destroy(scratch)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                rt.contexts().set_current(ctx).unwrap();
            }
            Op::Fault { kind } => {
                let scratch = rt.contexts().create(0).unwrap();
                let s = rt.streams().create().unwrap();
                let (name, args, code): (&str, Vec<Arg>, i32) = match kind {
                    0 => (
                        "fault_bad_address",
                        vec![Arg::U64(0xdead_0000)],
                        codes::RT_AICORE_EXCEPTION,
                    ),
                    1 => (
                        "fault_div_zero",
                        vec![Arg::U64(0)],
                        codes::RT_AICORE_TRAP_EXCEPTION,
                    ),
                    _ => (
                        // Another thread's pointers are unmapped here.
                        "fault_bad_address",
                        vec![blocks.first().map_or(Arg::U64(1 << 40), |b| b.ptr.into())],
                        codes::RT_AICORE_EXCEPTION,
                    ),
                };
                rt.submit(Launch::new(rt.kernel(name).unwrap(), 1, &args, s))
                    .unwrap();
                expect_err(&what, rt.streams().synchronize(s), &[code]);
                // The context is faulted: its next call returns the sticky error.
                expect_err(&what, rt.memory().malloc(64).map(|_| ()), &[code]);
                rt.contexts()
                    .destroy(scratch)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                expect_err(
                    &what,
                    rt.streams().synchronize(s),
                    &[codes::RT_INVALID_HANDLE, codes::RT_CONTEXT_NULL],
                );
                rt.contexts().set_current(ctx).unwrap();
            }
            Op::Record { stream } => {
                let s = streams[stream % streams.len()];
                rt.events()
                    .record(event, s)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
            }
            Op::Wait { stream } => {
                let s = streams[stream % streams.len()];
                rt.events()
                    .stream_wait(s, event)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
            }
            Op::SyncTimeout { stream, us } => {
                let s = streams[stream % streams.len()];
                match rt.streams().synchronize_timeout(s, SimTime::from_us(us)) {
                    Ok(()) => {}
                    Err(e) => assert_eq!(e.code(), codes::RT_WAIT_TIMEOUT, "{what}: {e}"),
                }
            }
            Op::Sync { stream } => {
                let s = streams[stream % streams.len()];
                rt.streams()
                    .synchronize(s)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
            }
            Op::Callback { stream } => {
                let s = streams[stream % streams.len()];
                let (ran, order, rt2) = (ran.clone(), order.clone(), rt.clone());
                let seq = enqueued_callbacks;
                rt.submit(HostFunc::new(s, move || {
                    // Calls back into the runtime, on its context's callback thread with its
                    // context current: its own stream is busy (with this callback), and
                    // waiting for it can never finish.
                    let _ = rt2.host_now();
                    assert!(rt2.device_count() == 1);
                    assert_eq!(rt2.streams().query(s), Ok(false));
                    let sync = rt2.streams().synchronize(s).map_err(|e| e.code());
                    assert_eq!(sync, Err(codes::RT_WAIT_TIMEOUT));
                    order.lock().unwrap().push((s, seq));
                    ran.fetch_add(1, Ordering::SeqCst);
                }))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                enqueued_callbacks += 1;
            }
            Op::CreateStream if streams.len() < 6 => {
                streams.push(rt.streams().create().unwrap());
            }
            Op::DestroyStream { stream } if streams.len() > 2 => {
                // The first two stay (the data stream, and one for events).
                let i = 2 + stream % (streams.len() - 2);
                let s = streams.swap_remove(i);
                rt.streams()
                    .synchronize(s)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                rt.streams()
                    .destroy(s)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                expect_err(
                    &what,
                    rt.events().record(event, s),
                    &[codes::RT_INVALID_HANDLE],
                );
            }
            Op::HostAlloc { size } => match rt.memory().malloc_host(size) {
                Ok(h) => {
                    assert!(size <= 1 << 16, "{what}: allocated");
                    h.write(&pattern(size as u8, size.min(64))).unwrap();
                    rt.memory()
                        .free_host(&h)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                }
                Err(e) => assert_eq!(e.code(), codes::RT_MEMORY_ALLOCATION, "{what}: {e}"),
            },
            Op::Binary { unload } => {
                // A binary in a context of its own: unloaded, or released with the context.
                let scratch = rt.contexts().create(0).unwrap();
                let b = rt
                    .binaries()
                    .load(&object)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let k = rt
                    .binaries()
                    .get_function(b, "vadd_f32")
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                if unload {
                    rt.binaries()
                        .unload(b)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let s = rt.streams().create().unwrap();
                    expect_err(
                        &what,
                        rt.submit(Launch::new(k, 1, &[], s)).map(drop),
                        &[codes::RT_INVALID_HANDLE],
                    );
                }
                rt.contexts()
                    .destroy(scratch)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                rt.contexts().set_current(ctx).unwrap();
                expect_err(
                    &what,
                    rt.binaries().functions(b).map(|_| ()),
                    &[codes::RT_INVALID_HANDLE],
                );
            }
            _ => {}
        }
    }

    // Teardown: everything this thread made goes, and every callback has run.
    for &s in &streams {
        rt.streams()
            .synchronize(s)
            .unwrap_or_else(|e| panic!("thread {me} teardown: {e}"));
    }
    // A synchronize returns only once the stream's callbacks have returned, whichever thread
    // drove the device.
    assert_eq!(
        ran.load(Ordering::SeqCst),
        enqueued_callbacks,
        "thread {me}: callbacks run"
    );
    // Callbacks of one stream ran in the order they were enqueued, however many threads.
    let order = order.lock().unwrap();
    for (i, &(s, seq)) in order.iter().enumerate() {
        if let Some(&(_, later)) = order[i + 1..].iter().find(|(t, _)| *t == s) {
            assert!(
                seq < later,
                "thread {me}: callbacks of one stream out of order: {order:?}"
            );
        }
    }
    drop(order);
    for b in blocks {
        live.lock().unwrap().remove(&b.ptr.0);
        rt.memory().free(b.ptr).unwrap();
    }
    rt.events().destroy(event).unwrap();
    for s in streams {
        rt.streams().destroy(s).unwrap();
    }
    rt.contexts().destroy(ctx).unwrap();
    rt.contexts().set_device(0).unwrap();
}

/// `[at, at + len)` moved inside a block of `size` bytes (len shortened if needed).
fn clamp(size: u64, at: u64, len: u64) -> (u64, u64) {
    let len = len.min(size);
    // A zero-length range still starts inside the block (a pointer one past the end names
    // no allocation).
    (at % (size - len).max(1), len)
}

fn run_program(threads: Vec<Vec<Op>>) {
    let rt = Runtime::new(RuntimeConfig {
        timeline: false,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let live: Live = Arc::default();
    let (done_tx, done_rx) = mpsc::channel();
    let count = threads.len();
    for (me, ops) in threads.into_iter().enumerate() {
        let (rt, live, done) = (rt.clone(), live.clone(), done_tx.clone());
        std::thread::Builder::new()
            .name(format!("program-{me}"))
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_thread(rt, me, ops, live)
                }));
                let _ = done.send(r.err().map(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                }));
            })
            .unwrap();
    }
    let deadline = std::time::Instant::now() + WATCHDOG;
    for _ in 0..count {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(None) => {}
            Ok(Some(panic)) => panic!("a thread panicked: {panic}"),
            Err(_) => panic!("hang: the program did not finish within {WATCHDOG:?}"),
        }
    }
    rt.synchronize_device().unwrap();
    let stats = rt.stats();
    assert_eq!(stats.contexts, 1, "only the primary context is left");
    assert_eq!(stats.streams, 1, "only its default stream is left");
    assert_eq!(stats.events, 0);
    assert_eq!(stats.live_tasks, 0);
    assert_eq!(stats.live_blocks, vec![0]);
    assert_eq!(rt.memory().stats().unwrap().pending_frees, 0);
    assert!(live.lock().unwrap().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_programs_on_several_threads_keep_every_guarantee(
        threads in prop::collection::vec(prop::collection::vec(op(), 1..60), 1..=3)
    ) {
        run_program(threads);
    }
}
