//! Memory-system benches: the device memory pool against peer allocators, its fragmentation on
//! a transformer training step, and the software TLB's hit path.
//!
//! 1. `alloc_free_trace` — alloc+free pairs on one deterministic random size trace (mostly
//!    small 64 B–1 MiB, some large up to 64 MiB, a live window of 128 so frees come out of
//!    order), replayed by the npusim pool, by `rlsf` (a TLSF implementation) over a host arena,
//!    and by the system allocator. After criterion's runs, an interleaved timing of the three
//!    prints the pool/rlsf ratio.
//! 2. `gpt2_step` — the allocation trace of two training steps of GPT-2 small (12 layers,
//!    d_model 768, 12 heads, d_ff 3072, vocab 50257, batch 8, sequence 1024, f32), replayed by
//!    the pool and by a naive first-fit pool without coalescing; prints peak reserved / peak
//!    live for both, and times the pool's replay.
//! 3. `tlb` — software-TLB translations: a hit on the last page, hits spread over 512 pages,
//!    and, as the baseline, the page-table walk every access would need without a TLB.
//!
//! Run with `cargo bench --bench pool`.

use std::alloc::Layout;
use std::hint::black_box;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use npusim::device::memory::pool::{AllocPolicy, Pool};
use npusim::device::memory::tlb::Tlb;
use npusim::device::memory::{AsId, Driver, PageSize};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// xorshift64*: a fixed seed makes every trace identical across runs and allocators.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform in `[lo, hi]`: as many 100-byte buffers as 100 KiB ones.
    fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        ((l + (h - l) * self.unit()).exp() as u64).clamp(lo, hi)
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Random size trace
// ---------------------------------------------------------------------------------------------

const WINDOW: usize = 128;
const STEPS: usize = 20_000;

struct SizeTrace {
    initial: Vec<u64>,
    /// (slot to free and refill, size of the new allocation)
    steps: Vec<(usize, u64)>,
}

fn size_trace() -> SizeTrace {
    let mut rng = Rng(0x5EED_F00D);
    let size = |rng: &mut Rng| {
        if rng.unit() < 0.95 {
            rng.log_uniform(64, MIB)
        } else {
            rng.log_uniform(MIB, 64 * MIB)
        }
    };
    let initial = (0..WINDOW).map(|_| size(&mut rng)).collect();
    let steps = (0..STEPS)
        .map(|_| ((rng.next() % WINDOW as u64) as usize, size(&mut rng)))
        .collect();
    SizeTrace { initial, steps }
}

/// The allocators under test, reduced to what the trace needs.
trait Allocator {
    type Ptr: Copy;
    fn alloc(&mut self, size: u64) -> Self::Ptr;
    fn free(&mut self, ptr: Self::Ptr, size: u64);
}

struct NpuPool {
    driver: Driver,
    pool: Pool,
}

impl NpuPool {
    fn new(capacity: u64) -> Self {
        let mut driver = Driver::new(capacity).expect("device size");
        let asid = driver.create_address_space();
        Self {
            driver,
            pool: Pool::new(asid),
        }
    }
}

impl Allocator for NpuPool {
    type Ptr = u64;
    #[inline]
    fn alloc(&mut self, size: u64) -> u64 {
        self.pool
            .alloc(&mut self.driver, size, AllocPolicy::HugeFirst)
            .expect("trace fits the device")
            .va
    }
    #[inline]
    fn free(&mut self, va: u64, _size: u64) {
        self.pool.free(va).expect("live block");
    }
}

/// rlsf with 32 first-level and 32 second-level classes (max block 8 GiB), over a 2 GiB host
/// arena that is reserved but only touched where rlsf writes its block headers.
struct Rlsf {
    tlsf: rlsf::Tlsf<'static, u32, u32, 28, 32>,
}

impl Rlsf {
    fn new(arena: u64) -> Self {
        let arena: &'static mut [MaybeUninit<u8>] =
            Box::leak(Box::new_uninit_slice(arena as usize));
        let mut tlsf = rlsf::Tlsf::new();
        tlsf.insert_free_block(arena);
        Self { tlsf }
    }
}

impl Allocator for Rlsf {
    type Ptr = NonNull<u8>;
    #[inline]
    fn alloc(&mut self, size: u64) -> NonNull<u8> {
        let layout = Layout::from_size_align(size as usize, 64).expect("layout");
        self.tlsf.allocate(layout).expect("arena fits the trace")
    }
    #[inline]
    fn free(&mut self, ptr: NonNull<u8>, _size: u64) {
        // Safety: `ptr` came from this `tlsf` with alignment 64 and is freed once.
        unsafe { self.tlsf.deallocate(ptr, 64) }
    }
}

struct System;

impl Allocator for System {
    type Ptr = *mut u8;
    #[inline]
    fn alloc(&mut self, size: u64) -> *mut u8 {
        let layout = Layout::from_size_align(size as usize, 64).expect("layout");
        // Safety: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null());
        ptr
    }
    #[inline]
    fn free(&mut self, ptr: *mut u8, size: u64) {
        let layout = Layout::from_size_align(size as usize, 64).expect("layout");
        // Safety: `ptr` came from `alloc` with this layout and is freed once.
        unsafe { std::alloc::dealloc(ptr, layout) }
    }
}

/// An allocator with the trace's live window in place.
struct Replay<A: Allocator> {
    alloc: A,
    slots: Vec<(A::Ptr, u64)>,
}

impl<A: Allocator> Replay<A> {
    fn new(mut alloc: A, trace: &SizeTrace) -> Self {
        let slots = trace.initial.iter().map(|&s| (alloc.alloc(s), s)).collect();
        let mut replay = Self { alloc, slots };
        // One pass to warm caches (the pool reserves its chunks here, not while timed).
        replay.run(trace);
        replay
    }

    #[inline]
    fn run(&mut self, trace: &SizeTrace) {
        for &(slot, size) in &trace.steps {
            let (ptr, old) = self.slots[slot];
            self.alloc.free(ptr, old);
            self.slots[slot] = (self.alloc.alloc(size), size);
        }
    }

    /// Nanoseconds per alloc+free pair for one pass.
    fn time_pass(&mut self, trace: &SizeTrace) -> f64 {
        let start = Instant::now();
        self.run(trace);
        start.elapsed().as_nanos() as f64 / trace.steps.len() as f64
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench_trace(c: &mut Criterion) {
    let trace = size_trace();
    let mut pool = Replay::new(NpuPool::new(64 * GIB), &trace);
    let mut tlsf = Replay::new(Rlsf::new(2 * GIB), &trace);
    let mut system = Replay::new(System, &trace);

    let mut g = c.benchmark_group("alloc_free_trace");
    g.throughput(Throughput::Elements(trace.steps.len() as u64));
    g.bench_function("npusim_pool", |b| b.iter(|| pool.run(black_box(&trace))));
    g.bench_function("rlsf", |b| b.iter(|| tlsf.run(black_box(&trace))));
    g.bench_function("system", |b| b.iter(|| system.run(black_box(&trace))));
    g.finish();

    // The hot path alone: one size freed and reallocated, everything in cache.
    let mut g = c.benchmark_group("alloc_free_same_size");
    g.bench_function("npusim_pool", |b| {
        b.iter(|| {
            let va = pool.alloc.alloc(black_box(4096));
            pool.alloc.free(va, 4096);
        })
    });
    g.bench_function("rlsf", |b| {
        b.iter(|| {
            let ptr = tlsf.alloc.alloc(black_box(4096));
            tlsf.alloc.free(ptr, 4096);
        })
    });
    g.finish();

    // Interleaved passes, so that machine noise hits all three alike.
    let (mut p, mut r, mut s) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..31 {
        p.push(pool.time_pass(&trace));
        r.push(tlsf.time_pass(&trace));
        s.push(system.time_pass(&trace));
    }
    let (p, r, s) = (median(p), median(r), median(s));
    let calls = pool.alloc.pool.stats().driver_calls;
    println!(
        "alloc_free_trace medians (ns per alloc+free pair): npusim_pool {p:.1}, rlsf {r:.1}, \
         system {s:.1}; pool/rlsf = {:.2}, pool/system = {:.2}; pool driver calls {calls}",
        p / r,
        p / s
    );
}

// ---------------------------------------------------------------------------------------------
// 2. GPT-2 small training step
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Ev {
    Alloc(usize, u64),
    Free(usize),
}

#[derive(Default)]
struct TraceBuilder {
    evs: Vec<Ev>,
    next: usize,
}

impl TraceBuilder {
    fn alloc(&mut self, size: u64) -> usize {
        let id = self.next;
        self.next += 1;
        self.evs.push(Ev::Alloc(id, size));
        id
    }
    fn free(&mut self, id: usize) {
        self.evs.push(Ev::Free(id));
    }
    /// A temporary (matmul workspace, weight-gradient partial): allocated and freed at once.
    fn temp(&mut self, size: u64) {
        let id = self.alloc(size);
        self.free(id);
    }
}

/// The allocations of `steps` training steps of GPT-2 small, shaped after llm.c's layout with
/// a caching allocator's lifetimes: parameters, gradients and Adam moments live throughout;
/// forward activations are kept for backward; backward allocates each gradient just before
/// its inputs' activations are freed, in reverse layer order, with matmul workspaces and
/// weight-gradient temporaries in between.
fn gpt2_trace(steps: usize) -> Vec<Ev> {
    const B: u64 = 8;
    const S: u64 = 1024;
    const D: u64 = 768;
    const H: u64 = 12;
    const F: u64 = 3072;
    const V: u64 = 50257;
    const L: usize = 12;
    const F32: u64 = 4;
    let act = B * S * D * F32;
    let stat = B * S * F32;
    let qkv = 3 * act;
    let att = B * H * S * S * F32;
    let ff = B * S * F * F32;
    let logits = B * S * V * F32;
    let workspace = 32 * MIB;

    let mut t = TraceBuilder::default();
    let mut params = vec![V * D, S * D];
    for _ in 0..L {
        params.extend([D, D, D * 3 * D, 3 * D, D * D, D, D, D, D * F, F, F * D, D]);
    }
    params.extend([D, D]);
    // Parameters, gradients, Adam m and v.
    for _ in 0..4 {
        for &p in &params {
            t.alloc(p * F32);
        }
    }

    struct Saved {
        ln1: [usize; 3],
        qkv: usize,
        preatt: usize,
        att: usize,
        atty: usize,
        attproj: usize,
        res2: usize,
        ln2: [usize; 3],
        fch: usize,
        fch_gelu: usize,
        fcproj: usize,
        res3: usize,
    }

    for _ in 0..steps {
        let tokens = t.alloc(B * S * 4);
        let targets = t.alloc(B * S * 4);
        let enc = t.alloc(act);
        let mut saved = Vec::with_capacity(L);
        for _ in 0..L {
            let ln1 = [t.alloc(act), t.alloc(stat), t.alloc(stat)];
            let qkv_a = t.alloc(qkv);
            t.temp(workspace);
            let preatt = t.alloc(att);
            let att_a = t.alloc(att);
            let atty = t.alloc(act);
            let attproj = t.alloc(act);
            t.temp(workspace);
            let res2 = t.alloc(act);
            let ln2 = [t.alloc(act), t.alloc(stat), t.alloc(stat)];
            let fch = t.alloc(ff);
            t.temp(workspace);
            let fch_gelu = t.alloc(ff);
            let fcproj = t.alloc(act);
            t.temp(workspace);
            let res3 = t.alloc(act);
            saved.push(Saved {
                ln1,
                qkv: qkv_a,
                preatt,
                att: att_a,
                atty,
                attproj,
                res2,
                ln2,
                fch,
                fch_gelu,
                fcproj,
                res3,
            });
        }
        let lnf = [t.alloc(act), t.alloc(stat), t.alloc(stat)];
        let logits_a = t.alloc(logits);
        let probs = t.alloc(logits);
        let losses = t.alloc(B * S * F32);

        // Backward.
        let dlogits = t.alloc(logits);
        t.free(probs);
        t.free(losses);
        let dlnf = t.alloc(act);
        t.temp(V * D * F32);
        t.free(dlogits);
        t.free(logits_a);
        let mut dres = t.alloc(act);
        t.free(dlnf);
        lnf.into_iter().for_each(|id| t.free(id));
        for s in saved.into_iter().rev() {
            let d_fch_gelu = t.alloc(ff);
            t.temp(F * D * F32);
            t.free(s.fcproj);
            t.free(s.res3);
            let d_fch = t.alloc(ff);
            t.free(d_fch_gelu);
            t.free(s.fch_gelu);
            let d_ln2 = t.alloc(act);
            t.temp(D * F * F32);
            t.free(d_fch);
            t.free(s.fch);
            let dres2 = t.alloc(act);
            t.free(d_ln2);
            s.ln2.into_iter().for_each(|id| t.free(id));
            t.free(dres);
            let d_atty = t.alloc(act);
            t.temp(D * D * F32);
            t.free(s.attproj);
            t.free(s.res2);
            let d_att = t.alloc(att);
            t.free(d_atty);
            t.free(s.atty);
            let d_preatt = t.alloc(att);
            t.free(d_att);
            t.free(s.att);
            let d_qkv = t.alloc(qkv);
            t.free(d_preatt);
            t.free(s.preatt);
            let d_ln1 = t.alloc(act);
            t.temp(D * 3 * D * F32);
            t.free(d_qkv);
            t.free(s.qkv);
            dres = t.alloc(act);
            t.free(d_ln1);
            s.ln1.into_iter().for_each(|id| t.free(id));
            t.free(dres2);
        }
        t.free(dres);
        t.free(enc);
        t.free(tokens);
        t.free(targets);
        // Optimizer: a small scratch for the gradient norm.
        t.temp(4 * KIB);
    }
    t.evs
}

/// First fit over one address-ordered free list, splitting, never coalescing: what a pool
/// without the neighbour merge and size classes does. Chunks are sized like the npusim pool's.
#[derive(Default)]
struct NaivePool {
    free: Vec<(u64, u64)>,
    next_va: u64,
    reserved: u64,
    peak_reserved: u64,
    live: u64,
    peak_live: u64,
}

impl NaivePool {
    fn alloc(&mut self, size: u64) -> (u64, u64) {
        let len = size.next_multiple_of(if size <= MIB { 64 } else { 512 });
        let i = match self.free.iter().position(|&(_, l)| l >= len) {
            Some(i) => i,
            None => {
                let chunk = if size <= MIB {
                    2 * MIB
                } else {
                    len.next_multiple_of(2 * MIB).max(16 * MIB)
                };
                let va = self.next_va;
                self.next_va += chunk;
                self.reserved += chunk;
                self.peak_reserved = self.peak_reserved.max(self.reserved);
                let at = self.free.partition_point(|&(a, _)| a < va);
                self.free.insert(at, (va, chunk));
                at
            }
        };
        let (va, l) = self.free[i];
        if l > len {
            self.free[i] = (va + len, l - len);
        } else {
            self.free.remove(i);
        }
        self.live += size;
        self.peak_live = self.peak_live.max(self.live);
        (va, len)
    }

    fn free(&mut self, (va, len): (u64, u64), size: u64) {
        let at = self.free.partition_point(|&(a, _)| a < va);
        self.free.insert(at, (va, len));
        self.live -= size;
    }
}

struct Gpt2Result {
    peak_live: u64,
    peak_reserved: u64,
    driver_calls: u64,
}

fn replay_pool(evs: &[Ev], slots: &mut [(u64, u64)]) -> Gpt2Result {
    let mut p = NpuPool::new(64 * GIB);
    for ev in evs {
        match *ev {
            Ev::Alloc(id, size) => slots[id] = (p.alloc(size), size),
            Ev::Free(id) => p.free(slots[id].0, slots[id].1),
        }
    }
    let s = p.pool.stats();
    Gpt2Result {
        peak_live: s.peak_live_bytes,
        peak_reserved: s.peak_reserved_bytes,
        driver_calls: s.driver_calls,
    }
}

fn bench_gpt2(c: &mut Criterion) {
    let evs = gpt2_trace(2);
    let ids = evs.iter().filter(|e| matches!(e, Ev::Alloc(..))).count();
    let mut slots = vec![(0u64, 0u64); ids];

    let ours = replay_pool(&evs, &mut slots);
    let mut naive = NaivePool::default();
    let mut naive_slots = vec![((0u64, 0u64), 0u64); ids];
    for ev in &evs {
        match *ev {
            Ev::Alloc(id, size) => naive_slots[id] = (naive.alloc(size), size),
            Ev::Free(id) => naive.free(naive_slots[id].0, naive_slots[id].1),
        }
    }
    let gib = |b: u64| b as f64 / GIB as f64;
    println!(
        "gpt2_step ({} events, 2 steps): peak live {:.2} GiB; npusim pool peak reserved {:.2} GiB \
         (ratio {:.3}, {} driver calls); naive first-fit peak reserved {:.2} GiB (ratio {:.3})",
        evs.len(),
        gib(ours.peak_live),
        gib(ours.peak_reserved),
        ours.peak_reserved as f64 / ours.peak_live as f64,
        ours.driver_calls,
        gib(naive.peak_reserved),
        naive.peak_reserved as f64 / naive.peak_live as f64,
    );

    let mut g = c.benchmark_group("gpt2_step");
    g.throughput(Throughput::Elements(evs.len() as u64));
    g.sample_size(20);
    g.bench_function("npusim_pool_replay_from_empty", |b| {
        b.iter(|| replay_pool(black_box(&evs), &mut slots))
    });
    g.finish();
}

// ---------------------------------------------------------------------------------------------
// 3. Software TLB
// ---------------------------------------------------------------------------------------------

const VA: u64 = 0x10_0000_0000;

/// 32 huge-page chunks of 2 MiB and 32 normal-page chunks of 64 KiB (512 pages), each mapped
/// on its own, as a pool that grew a few dozen chunks would map them.
fn tlb_setup() -> (Driver, AsId) {
    let mut d = Driver::new(GIB).expect("device size");
    let asid = d.create_address_space();
    for i in 0..32 {
        let huge = d.reserve(2 * MIB, PageSize::Huge2M).expect("memory");
        d.map(asid, VA + i * 4 * MIB, huge).expect("map");
        let normal = d.reserve(64 * KIB, PageSize::Normal4K).expect("memory");
        d.map(asid, VA + GIB + i * 4 * MIB, normal).expect("map");
    }
    (d, asid)
}

fn bench_tlb(c: &mut Criterion) {
    let (d, asid) = tlb_setup();
    let mut rng = Rng(7);
    // Same page: consecutive accesses of a kernel streaming through a buffer.
    let same: Vec<u64> = (0..1024).map(|i| VA + 4096 + (i * 8) % 4096).collect();
    // Spread over the 512 normal pages, so the last-translation register rarely helps.
    let spread: Vec<u64> = (0..1024)
        .map(|_| VA + GIB + (rng.next() % 32) * 4 * MIB + rng.next() % (64 * KIB))
        .collect();
    let mut tlb = Tlb::new();
    for &va in same.iter().chain(&spread) {
        tlb.translate(&d, asid, va).expect("mapped");
    }

    let mut g = c.benchmark_group("tlb");
    g.throughput(Throughput::Elements(1024));
    g.bench_function("hit_same_page", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for &va in black_box(&same) {
                acc = acc.wrapping_add(tlb.translate(&d, asid, va).unwrap_or(0));
            }
            acc
        })
    });
    g.bench_function("hit_512_pages", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for &va in black_box(&spread) {
                acc = acc.wrapping_add(tlb.translate(&d, asid, va).unwrap_or(0));
            }
            acc
        })
    });
    // Baseline: what every access would cost without the TLB, a driver translate (a walk of
    // the 64-mapping page table plus the call accounting).
    g.bench_function("baseline_driver_translate_512_pages", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for &va in black_box(&spread) {
                acc = acc.wrapping_add(d.translate(asid, va).map(|t| t.pa).unwrap_or(0));
            }
            acc
        })
    });
    g.finish();
    let s = tlb.stats();
    println!(
        "tlb: {} hits, {} misses, {} entries",
        s.hits, s.misses, s.entries
    );
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
        .configure_from_args();
    bench_trace(&mut c);
    bench_gpt2(&mut c);
    bench_tlb(&mut c);
    c.final_summary();
}
