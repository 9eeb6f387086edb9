//! Soak: a long mixed workload — allocations and frees of many sizes, copies both ways, kernel
//! launches, event records and waits, synchronizes, streams and events created and destroyed,
//! binaries loaded and unloaded, contexts (with a binary loaded) created and destroyed, whole
//! runtimes created and dropped — and the process's resident memory stays flat.
//!
//! `cargo test --test soak -- --ignored --nocapture` runs 10⁶ operations (`NPUSIM_SOAK_OPS`
//! changes the count) and prints the resident-memory samples; BENCHMARKS.md has the figure.
//! The test that always runs does the same with 60,000 operations.

use npusim::Launch;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use npusim::prelude::*;

/// The system allocator, counting the bytes live on the heap: a leak shows in this count
/// exactly, whatever the allocator keeps cached (which is what makes resident memory noisy).
struct Counting;

static HEAP_LIVE: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to `System` with the same arguments; only counts are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            HEAP_LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            HEAP_LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        HEAP_LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            HEAP_LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
            HEAP_LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn kernel_object(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/kernels")
            .join(name),
    )
    .unwrap()
}

/// A tiny deterministic generator (xorshift), so every run does the same work.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Runs `ops` API calls of the mixed workload, sampling memory `samples` times.
fn soak(ops: u64, samples: usize) -> Samples {
    let object = kernel_object("vector_add.o");
    let config = RuntimeConfig {
        timeline: false,
        ..RuntimeConfig::default()
    };
    let rt = Runtime::new(config.clone()).unwrap();
    let seed = 0x9e37_79b9_7f4a_7c15;
    let mut done = 0u64;
    let mut rss_samples = Vec::new();
    let every = (ops / samples as u64).max(1);
    let mut next_sample = every;
    let mut interval_low = u64::MAX;
    let mut heap_samples = Vec::new();
    let host = rt.memory().malloc_host(64 << 10).unwrap();
    let sizes = [64u64, 256, 4096, 60_000, 1 << 20, 3 << 20];
    while done < ops {
        // One round: a working set of streams, an event and blocks, then teardown. Every round
        // does the same work (the same random sequence), so once the runtime's pools and
        // tables have grown to fit one round, a flat heap is exact: anything more is a leak.
        let mut rng = Rng(seed);
        let streams = [
            rt.streams().create().unwrap(),
            rt.streams().create().unwrap(),
        ];
        let event = rt.events().create().unwrap();
        let fill = rt.kernel("fill_f32").unwrap();
        let noop = rt.kernel("noop").unwrap();
        done += 5;
        let mut live: Vec<(DevicePtr, u64)> = Vec::new();
        for i in 0..2_000u64 {
            let s = streams[(i % 2) as usize];
            match rng.next() % 16 {
                0..=2 => {
                    let size = sizes[(rng.next() % sizes.len() as u64) as usize];
                    live.push((rt.memory().malloc(size).unwrap(), size));
                }
                3 | 4 if !live.is_empty() => {
                    let (p, _) = live.swap_remove((rng.next() % live.len() as u64) as usize);
                    rt.memory().free(p).unwrap();
                }
                5 | 6 if !live.is_empty() => {
                    let (p, size) = live[(rng.next() % live.len() as u64) as usize];
                    let n = size.min(64 << 10);
                    rt.memory().memcpy_htod_async(p, &host, n, s).unwrap();
                }
                7 if !live.is_empty() => {
                    let (p, size) = live[(rng.next() % live.len() as u64) as usize];
                    rt.memory()
                        .memcpy_dtoh_async(&host, p, size.min(64 << 10), s)
                        .unwrap();
                }
                8 | 9 if !live.is_empty() => {
                    let (p, size) = live[(rng.next() % live.len() as u64) as usize];
                    rt.submit(Launch::new(
                        fill,
                        1,
                        &[p.into(), (size / 4).into(), 1.5f32.into()],
                        s,
                    ))
                    .unwrap();
                }
                10 => {
                    rt.submit(Launch::new(noop, 1, &[], s)).unwrap();
                }
                11 => rt.events().record(event, s).unwrap(),
                12 => rt.events().stream_wait(s, event).unwrap(),
                13 => rt.streams().synchronize(s).unwrap(),
                14 => {
                    let b = rt.binaries().load(&object).unwrap();
                    rt.binaries().unload(b).unwrap();
                    done += 1;
                }
                _ => {
                    let x = rt.streams().create().unwrap();
                    rt.streams().destroy(x).unwrap();
                    done += 1;
                }
            }
            done += 1;
        }
        for s in streams {
            rt.streams().synchronize(s).unwrap();
            rt.streams().destroy(s).unwrap();
        }
        for (p, _) in live.drain(..) {
            rt.memory().free(p).unwrap();
            done += 1;
        }
        rt.events().destroy(event).unwrap();
        rt.memory().trim().unwrap();
        // A context of its own with a binary loaded, destroyed with it.
        let ctx = rt.contexts().create(0).unwrap();
        rt.binaries().load(&object).unwrap();
        rt.contexts().destroy(ctx).unwrap();
        rt.contexts().set_device(0).unwrap();
        done += 10;
        // A whole runtime made, used and dropped on this thread: it must leave nothing.
        {
            let other = Runtime::new(config.clone()).unwrap();
            other.contexts().set_device(0).unwrap();
            let p = other.memory().malloc(1 << 20).unwrap();
            other.memory().memset(p, 7, 1 << 20).unwrap();
            other.memory().free(p).unwrap();
            done += 5;
        }
        // A round ends with everything freed and trimmed; what the allocator still holds from
        // the round's working set varies, so each sample is the lowest end-of-round figure of
        // its interval: a leak raises it, a transient working set does not.
        let now = rss();
        interval_low = interval_low.min(now);
        if done >= next_sample {
            rss_samples.push(interval_low);
            heap_samples.push(HEAP_LIVE.load(Ordering::Relaxed));
            interval_low = u64::MAX;
            next_sample += every;
        }
    }
    let stats = rt.stats();
    assert_eq!(stats.live_tasks, 0);
    assert_eq!(stats.contexts, 1);
    assert_eq!(stats.live_blocks, vec![0]);
    Samples {
        done,
        rss: rss_samples,
        heap: heap_samples,
    }
}

/// What a soak run measured.
struct Samples {
    /// Operations done.
    done: u64,
    /// Resident memory, bytes: the lowest end-of-round figure of each interval.
    rss: Vec<u64>,
    /// Heap bytes live at the end of a round, one per interval.
    heap: Vec<u64>,
}

/// Flat: after the first fifth (allocator and pools warmed up), every sample is within 5% of
/// the first warm one.
fn assert_flat(what: &str, samples: &[u64]) {
    let warm = samples.len() / 5;
    let base = samples[warm] as f64;
    for (i, &s) in samples.iter().enumerate().skip(warm) {
        let ratio = s as f64 / base;
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{what} sample {i}: {ratio:.3}× the warm level; samples: {samples:?}"
        );
    }
}

#[test]
fn sixty_thousand_mixed_operations_keep_resident_memory_flat() {
    let s = soak(60_000, 20);
    assert!(s.done >= 60_000);
    assert_flat("heap", &s.heap);
    assert_flat("resident", &s.rss);
}

#[test]
#[ignore = "long (about 2 minutes): run with -- --ignored --nocapture (BENCHMARKS.md)"]
fn a_million_mixed_operations_keep_resident_memory_flat() {
    let ops = std::env::var("NPUSIM_SOAK_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let start = std::time::Instant::now();
    let s = soak(ops, 50);
    let mib = |v: &[u64]| {
        v.iter()
            .map(|s| format!("{:.1}", *s as f64 / (1 << 20) as f64))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "{} operations in {:.1} s\nresident MiB: {}\nheap MiB: {}",
        s.done,
        start.elapsed().as_secs_f64(),
        mib(&s.rss),
        mib(&s.heap)
    );
    let spread = |v: &[u64]| {
        let warm = &v[v.len() / 5..];
        let (lo, hi) = (*warm.iter().min().unwrap(), *warm.iter().max().unwrap());
        format!(
            "{lo}..{hi} bytes ({:+.2}%)",
            100.0 * (hi as f64 / lo as f64 - 1.0)
        )
    };
    println!(
        "after warm-up: resident {}, heap {}",
        spread(&s.rss),
        spread(&s.heap)
    );
    assert_flat("heap", &s.heap);
    assert_flat("resident", &s.rss);
}
