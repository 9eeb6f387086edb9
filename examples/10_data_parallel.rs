//! 10 — data-parallel training of a small MLP on 4 and 8 simulated NPUs.
//!
//! What happens: every device holds the same 3-layer MLP (weights broadcast from rank 0 with
//! the `broadcast` collective) and its own slice of the global batch. Each step runs forward
//! and backward kernels on the device's compute stream; as soon as the backward kernel that
//! produces a layer's weight gradient finishes, an event fires and that gradient bucket is
//! all-reduced on the device's communication stream — while the compute stream goes on with
//! the next layer's backward. The optimizer step (SGD, `axpy_f32`) waits for the last bucket.
//! The same training runs a second time with everything serialized on the compute stream, so
//! the printout shows the step time with and without overlap and how much of the
//! communication the overlap hid. Finally every device's weights are checked to be identical,
//! and equal to a single-device run on the whole batch; the timeline is written as Chrome
//! trace-event JSON (open it in Perfetto).
//!
//! The devices are a scaled-down NPU preset (2 AI cores, a slower cube unit) on an HCCS-like
//! ring, so this toy-sized MLP has the compute / communication balance of a real model; the
//! host's modeled API costs are zero, so the devices (not one host thread enqueuing for all
//! ranks) bound the step.
//!
//! Run: `cargo run --release --example 10_data_parallel [timeline.json]`

use npusim::components::access::{Access, AccessMode, AccessSet};
use npusim::prelude::*;
use npusim::{Collective, Launch};
use npusim::{
    Communicator, DataType, HostCosts, KernelCost, LinkConfig, ReduceOp, StreamKind, TopologyConfig,
};

/// Layer widths: input, two hidden layers, output.
pub const DIMS: [usize; 4] = [256, 256, 256, 256];
/// Samples per device per step.
pub const LOCAL_BATCH: usize = 16;
/// SGD learning rate.
pub const LR: f32 = 0.05;

/// The simulated device: 2 AI cores with a slower cube unit than a 910B.
pub fn device() -> DeviceConfig {
    DeviceConfig {
        name: "edge-npu".into(),
        ai_cores: 2,
        cube_f32_flops_per_cycle: 64,
        ..DeviceConfig::small()
    }
}

/// How one training run is set up.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// Devices (ranks).
    pub devices: u32,
    /// Samples per device per step.
    pub local_batch: usize,
    /// Steps.
    pub steps: usize,
    /// Overlap gradient all-reduces with backward (else everything on the compute stream).
    pub overlap: bool,
    /// Worker threads of the simulator.
    pub threads: usize,
    /// Record the timeline.
    pub timeline: bool,
}

/// What a run produced.
pub struct TrainResult {
    /// The runtime (its timeline, stats).
    pub runtime: Runtime,
    /// Per device: the weights after the last step, layer by layer.
    pub weights: Vec<Vec<Vec<f32>>>,
    /// Simulated time per step (steady state, rank 0's compute stream).
    pub step_time: SimTime,
    /// Simulated all-reduce time per step (rank 0).
    pub comm_time: SimTime,
}

/// Deterministic pseudo-random numbers in [-1, 1).
fn lcg(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The global batch: inputs and targets, `rows` samples.
fn batch(rows: usize) -> (Vec<f32>, Vec<f32>) {
    let x = lcg(7, rows * DIMS[0]);
    let t = lcg(11, rows * DIMS[3]).iter().map(|v| v * 0.5).collect();
    (x, t)
}

fn initial_weights(layer: usize) -> Vec<f32> {
    let scale = 1.0 / (DIMS[layer] as f32).sqrt();
    lcg(100 + layer as u64, DIMS[layer] * DIMS[layer + 1])
        .iter()
        .map(|v| v * scale)
        .collect()
}

fn gemm_cost(a: &[u64], _: u32) -> KernelCost {
    let (m, n, k) = (a[3] as f64, a[4] as f64, a[5] as f64);
    KernelCost::cube_f32(2.0 * m * n * k, 4.0 * (m * k + k * n + m * n))
}

/// A kernel's access declaration: per buffer, its pointer argument, the arguments whose
/// product is its `f32` count, and whether it is read or written. Declared, not the default
/// (every buffer read and written), so that the uninitialised-read check
/// (`NPUSIM_SANITIZE_UNINIT=1`) does not take an output for an input.
fn buffers(
    list: &'static [(usize, &'static [usize], AccessMode)],
) -> impl Fn(&[u64], u32, &mut AccessSet) + Send + Sync + 'static {
    move |args, _, out| {
        let arg = |i: usize| args.get(i).copied().unwrap_or(0);
        for &(ptr, count, mode) in list {
            let n = count.iter().fold(4u64, |n, &i| n.saturating_mul(arg(i)));
            out.push(Access {
                mode,
                ..Access::read(arg(ptr), n)
            });
        }
    }
}

/// The backward kernels the built-ins lack.
fn register_kernels(rt: &Runtime) {
    use AccessMode::{Read as R, Write as W};
    // C (m×n) = Aᵀ·B with A stored k×m and B stored k×n (weight gradients: Xᵀ·dZ).
    rt.kernels().register(
        NativeKernel::new(
            "gemm_tn_f32",
            |k: &mut KernelCtx| {
                let (a, b, c) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?);
                let (m, n, kk) = (k.usize(3)?, k.usize(4)?, k.usize(5)?);
                let av = k.load::<f32>(a, kk * m)?;
                let bv = k.load::<f32>(b, kk * n)?;
                let mut cv = vec![0f32; m * n];
                for p in 0..kk {
                    let brow = &bv[p * n..(p + 1) * n];
                    for i in 0..m {
                        let api = av[p * m + i];
                        for (cj, bj) in cv[i * n..(i + 1) * n].iter_mut().zip(brow) {
                            *cj += api * bj;
                        }
                    }
                }
                k.store(c, &cv)
            },
            gemm_cost,
        )
        .with_access(buffers(&[
            (0, &[5, 3], R),
            (1, &[5, 4], R),
            (2, &[3, 4], W),
        ])),
    );
    // C (m×n) = A·Bᵀ with A stored m×k and B stored n×k (input gradients: dZ·Wᵀ).
    rt.kernels().register(
        NativeKernel::new(
            "gemm_nt_f32",
            |k: &mut KernelCtx| {
                let (a, b, c) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?);
                let (m, n, kk) = (k.usize(3)?, k.usize(4)?, k.usize(5)?);
                let av = k.load::<f32>(a, m * kk)?;
                let bv = k.load::<f32>(b, n * kk)?;
                let mut bt = vec![0f32; kk * n];
                for j in 0..n {
                    for p in 0..kk {
                        bt[p * n + j] = bv[j * kk + p];
                    }
                }
                let mut cv = vec![0f32; m * n];
                for i in 0..m {
                    let row = &mut cv[i * n..(i + 1) * n];
                    for p in 0..kk {
                        let aip = av[i * kk + p];
                        for (cj, bj) in row.iter_mut().zip(&bt[p * n..(p + 1) * n]) {
                            *cj += aip * bj;
                        }
                    }
                }
                k.store(c, &cv)
            },
            gemm_cost,
        )
        .with_access(buffers(&[
            (0, &[3, 5], R),
            (1, &[4, 5], R),
            (2, &[3, 4], W),
        ])),
    );
    // dx = dy where y > 0, else 0.
    rt.kernels().register(
        NativeKernel::new(
            "relu_backward_f32",
            |k: &mut KernelCtx| {
                let (dy, y, dx, n) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?, k.usize(3)?);
                let g = k.load::<f32>(dy, n)?;
                let yv = k.load::<f32>(y, n)?;
                let out: Vec<f32> = g
                    .iter()
                    .zip(&yv)
                    .map(|(g, y)| if *y > 0.0 { *g } else { 0.0 })
                    .collect();
                k.store(dx, &out)
            },
            |a, _| KernelCost::vector(a[3] as f64, 12.0 * a[3] as f64),
        )
        .with_access(buffers(&[(0, &[3], R), (1, &[3], R), (2, &[3], W)])),
    );
    // dy = (y − t) · scale: the gradient of ½·scale·‖y − t‖².
    rt.kernels().register(
        NativeKernel::new(
            "mse_grad_f32",
            |k: &mut KernelCtx| {
                let (y, t, dy, n, s) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?, k.usize(3)?, k.f32(4)?);
                let yv = k.load::<f32>(y, n)?;
                let tv = k.load::<f32>(t, n)?;
                let out: Vec<f32> = yv.iter().zip(&tv).map(|(y, t)| (y - t) * s).collect();
                k.store(dy, &out)
            },
            |a, _| KernelCost::vector(2.0 * a[3] as f64, 12.0 * a[3] as f64),
        )
        .with_access(buffers(&[(0, &[3], R), (1, &[3], R), (2, &[3], W)])),
    );
}

/// One rank's buffers.
struct Rank {
    compute: Stream,
    comm: Stream,
    comm_handle: Option<Communicator>,
    x: DevicePtr,
    t: DevicePtr,
    w: [DevicePtr; 3],
    g: [DevicePtr; 3],
    /// Activations: z1/h1, z2/h2, y (pre-activations are overwritten by relu in place).
    h: [DevicePtr; 3],
    /// Gradients of activations: dy, dh2, dh1.
    dh: [DevicePtr; 3],
    grad_ready: [Event; 3],
    reduced: Event,
}

/// Trains; returns the weights and the measured step and communication times.
pub fn train(cfg: &TrainConfig) -> NpuResult<TrainResult> {
    let rt = Runtime::new(RuntimeConfig {
        devices: cfg.devices,
        device: device(),
        host: HostCosts::zero(),
        topology: TopologyConfig::ring(LinkConfig::hccs()),
        threads: cfg.threads,
        timeline: cfg.timeline,
        ..RuntimeConfig::default()
    })?;
    register_kernels(&rt);
    let k = |name: &str| rt.kernel(name);
    let (gemm, gemm_tn, gemm_nt) = (k("gemm_f32")?, k("gemm_tn_f32")?, k("gemm_nt_f32")?);
    let (relu, relu_bwd, mse, axpy) = (
        k("relu_f32")?,
        k("relu_backward_f32")?,
        k("mse_grad_f32")?,
        k("axpy_f32")?,
    );
    let n = cfg.devices as usize;
    let b = cfg.local_batch;
    let (gx, gt) = batch(b * n);
    let devices: Vec<u32> = (0..cfg.devices).collect();
    let comms = if n > 1 {
        rt.collectives()
            .init_all(&devices)?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    };

    // Per rank: streams, events, the rank's slice of the batch, weights broadcast from rank 0.
    let mut ranks = Vec::new();
    for (r, comm_handle) in comms.into_iter().enumerate() {
        rt.contexts().set_device(r as u32)?;
        let compute = rt.streams().create()?;
        let comm = rt.streams().create_with(StreamConfig {
            kind: StreamKind::Communication,
            ..StreamConfig::default()
        })?;
        let bytes = |n: usize| 4 * n as u64;
        let x = rt.memory().malloc(bytes(b * DIMS[0]))?;
        let t = rt.memory().malloc(bytes(b * DIMS[3]))?;
        rt.memory()
            .memcpy_htod(x, &gx[r * b * DIMS[0]..(r + 1) * b * DIMS[0]])?;
        rt.memory()
            .memcpy_htod(t, &gt[r * b * DIMS[3]..(r + 1) * b * DIMS[3]])?;
        let mut w = [DevicePtr::NULL; 3];
        let mut g = [DevicePtr::NULL; 3];
        let mut h = [DevicePtr::NULL; 3];
        let mut dh = [DevicePtr::NULL; 3];
        for l in 0..3 {
            w[l] = rt.memory().malloc(bytes(DIMS[l] * DIMS[l + 1]))?;
            g[l] = rt.memory().malloc(bytes(DIMS[l] * DIMS[l + 1]))?;
            h[l] = rt.memory().malloc(bytes(b * DIMS[l + 1]))?;
            dh[l] = rt.memory().malloc(bytes(b * DIMS[3 - l]))?;
            if r == 0 {
                rt.memory().memcpy_htod(w[l], &initial_weights(l))?;
            }
        }
        let grad_ready = [
            rt.events().create()?,
            rt.events().create()?,
            rt.events().create()?,
        ];
        let reduced = rt.events().create()?;
        ranks.push(Rank {
            compute,
            comm,
            comm_handle,
            x,
            t,
            w,
            g,
            h,
            dh,
            grad_ready,
            reduced,
        });
    }
    for (r, rank) in ranks.iter().enumerate() {
        if let Some(c) = &rank.comm_handle {
            rt.contexts().set_device(r as u32)?;
            for l in 0..3 {
                let count = (DIMS[l] * DIMS[l + 1]) as u64;
                rt.submit(
                    Collective::broadcast(rank.w[l], count, DataType::F32, 0).on(c, rank.compute),
                )?;
            }
        }
    }

    let scale = 1.0 / (b * n) as f32;
    let step_marks: Vec<Event> = {
        rt.contexts().set_device(0)?;
        (0..=cfg.steps)
            .map(|_| rt.events().create())
            .collect::<NpuResult<_>>()?
    };
    for step in 0..cfg.steps {
        for (r, rank) in ranks.iter().enumerate() {
            rt.contexts().set_device(r as u32)?;
            let s = rank.compute;
            if r == 0 {
                rt.events().record(step_marks[step], s)?;
            }
            let launch_gemm = |kernel,
                               a: DevicePtr,
                               bm: DevicePtr,
                               c: DevicePtr,
                               m: usize,
                               n: usize,
                               kk: usize| {
                rt.submit(Launch::new(
                    kernel,
                    2,
                    &[a.into(), bm.into(), c.into(), m.into(), n.into(), kk.into()],
                    s,
                ))
            };
            // Forward: h1 = relu(x·W1), h2 = relu(h1·W2), y = h2·W3.
            let inputs = [rank.x, rank.h[0], rank.h[1]];
            for l in 0..3 {
                launch_gemm(
                    gemm,
                    inputs[l],
                    rank.w[l],
                    rank.h[l],
                    b,
                    DIMS[l + 1],
                    DIMS[l],
                )?;
                if l < 2 {
                    let len = b * DIMS[l + 1];
                    rt.submit(Launch::new(
                        relu,
                        2,
                        &[rank.h[l].into(), rank.h[l].into(), len.into()],
                        s,
                    ))?;
                }
            }
            // Backward, last layer first; each weight gradient is a bucket.
            let out = b * DIMS[3];
            rt.submit(Launch::new(
                mse,
                2,
                &[
                    rank.h[2].into(),
                    rank.t.into(),
                    rank.dh[0].into(),
                    out.into(),
                    scale.into(),
                ],
                s,
            ))?;
            for l in (0..3).rev() {
                let dout = rank.dh[2 - l]; // gradient w.r.t. this layer's output
                launch_gemm(gemm_tn, inputs[l], dout, rank.g[l], DIMS[l], DIMS[l + 1], b)?;
                if cfg.overlap
                    && let Some(c) = &rank.comm_handle
                {
                    rt.events().record(rank.grad_ready[l], s)?;
                    rt.events().stream_wait(rank.comm, rank.grad_ready[l])?;
                    let count = (DIMS[l] * DIMS[l + 1]) as u64;
                    rt.submit(
                        Collective::all_reduce(
                            rank.g[l],
                            rank.g[l],
                            count,
                            DataType::F32,
                            ReduceOp::Sum,
                        )
                        .on(c, rank.comm),
                    )?;
                }
                if l > 0 {
                    // Gradient w.r.t. the input of this layer, through the relu before it.
                    let din = rank.dh[3 - l];
                    launch_gemm(gemm_nt, dout, rank.w[l], din, b, DIMS[l], DIMS[l + 1])?;
                    let len = b * DIMS[l];
                    rt.submit(Launch::new(
                        relu_bwd,
                        2,
                        &[din.into(), rank.h[l - 1].into(), din.into(), len.into()],
                        s,
                    ))?;
                }
            }
            if let Some(c) = &rank.comm_handle {
                if cfg.overlap {
                    rt.events().record(rank.reduced, rank.comm)?;
                    rt.events().stream_wait(s, rank.reduced)?;
                } else {
                    for l in (0..3).rev() {
                        let count = (DIMS[l] * DIMS[l + 1]) as u64;
                        rt.submit(
                            Collective::all_reduce(
                                rank.g[l],
                                rank.g[l],
                                count,
                                DataType::F32,
                                ReduceOp::Sum,
                            )
                            .on(c, s),
                        )?;
                    }
                }
            }
            // SGD: W -= lr · g.
            for l in 0..3 {
                let count = DIMS[l] * DIMS[l + 1];
                rt.submit(Launch::new(
                    axpy,
                    2,
                    &[
                        count.into(),
                        (-LR).into(),
                        rank.g[l].into(),
                        rank.w[l].into(),
                    ],
                    s,
                ))?;
            }
            if r == 0 && step + 1 == cfg.steps {
                rt.events().record(step_marks[cfg.steps], s)?;
            }
        }
    }
    let mut weights = Vec::new();
    for (r, rank) in ranks.iter().enumerate() {
        rt.contexts().set_device(r as u32)?;
        rt.streams().synchronize(rank.compute)?;
        rt.streams().synchronize(rank.comm)?;
        let mut layers = Vec::new();
        for l in 0..3 {
            let mut v = vec![0f32; DIMS[l] * DIMS[l + 1]];
            rt.memory().memcpy_dtoh(&mut v, rank.w[l])?;
            layers.push(v);
        }
        weights.push(layers);
    }
    // Steady state: from the start of step 1 (after the broadcast) to the end.
    rt.contexts().set_device(0)?;
    let first = 1.min(cfg.steps.saturating_sub(1));
    let t0 = rt.events().timestamp(step_marks[first])?;
    let t1 = rt.events().timestamp(step_marks[cfg.steps])?;
    let step_time = SimTime((t1 - t0).as_ns() / (cfg.steps - first) as u64);
    let comm_ns: u64 = rt
        .timeline()
        .iter()
        .filter(|r| r.device == 0 && r.name == "all_reduce")
        .map(|r| (r.end - r.start).as_ns())
        .sum();
    Ok(TrainResult {
        runtime: rt,
        weights,
        step_time,
        comm_time: SimTime(comm_ns / cfg.steps as u64),
    })
}

#[allow(dead_code)]
fn main() -> Result<(), NpuError> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/10_data_parallel.json".to_string());
    let steps = 6;
    for devices in [4u32, 8] {
        let run = |overlap, timeline| {
            train(&TrainConfig {
                devices,
                local_batch: LOCAL_BATCH,
                steps,
                overlap,
                threads: 0,
                timeline,
            })
        };
        let overlapped = run(true, true)?;
        let serial = run(false, true)?;
        let reference = train(&TrainConfig {
            devices: 1,
            local_batch: LOCAL_BATCH * devices as usize,
            steps,
            overlap: false,
            threads: 1,
            timeline: false,
        })?;

        // Every device holds the same weights, bit for bit, in both runs.
        for run in [&overlapped, &serial] {
            for (d, w) in run.weights.iter().enumerate() {
                assert!(*w == run.weights[0], "device {d} diverged from device 0");
            }
        }
        // And they are the single-device weights, up to the order of the gradient sums.
        let mut max_diff = 0f32;
        for (a, b) in overlapped.weights[0].iter().zip(&reference.weights[0]) {
            for (x, y) in a.iter().zip(b) {
                max_diff = max_diff.max((x - y).abs());
            }
        }
        assert!(
            max_diff < 1e-5,
            "weights differ from the reference by {max_diff}"
        );

        let (t_o, t_s, t_c) = (overlapped.step_time, serial.step_time, overlapped.comm_time);
        let hidden =
            ((t_s.as_ns() as f64 - t_o.as_ns() as f64) / t_c.as_ns().max(1) as f64).clamp(0.0, 1.0);
        println!("{devices} devices, {steps} steps, local batch {LOCAL_BATCH}, MLP {DIMS:?}:");
        println!("  step time, overlapped:     {t_o}");
        println!("  step time, serialized:     {t_s}");
        println!("  all-reduce time per step:  {t_c} (3 buckets)");
        println!("  communication hidden:      {:.0}%", 100.0 * hidden);
        println!(
            "  weights: identical on all {devices} devices; max |Δ| vs single device = {max_diff:.2e}"
        );
        if devices == 8 {
            if let Some(dir) = std::path::Path::new(&path).parent() {
                std::fs::create_dir_all(dir).ok();
            }
            overlapped.runtime.export_timeline(&path)?;
            println!(
                "  timeline: {path} ({} tasks)",
                overlapped.runtime.timeline().len()
            );
        }
    }
    Ok(())
}
