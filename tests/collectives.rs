//! Collectives and peer copies through the public API: real results in every rank's device
//! memory, α–β timing, rendezvous and timeouts, events, RDMA memory rules, and the same
//! results and timelines whatever the worker thread count.

use npusim::prelude::*;
use npusim::{Collective, Launch};
use npusim::{
    CollectiveAlgorithm, CommBuffer, CommConfig, Communicator, DataType, HostCosts, LinkConfig,
    ReduceOp, StreamKind, TaskRecord, TopologyConfig, TopologyKind, codes,
};

const ALPHA_NS: u64 = 2_000;
const BETA: f64 = 50e9;

fn link() -> LinkConfig {
    LinkConfig {
        bandwidth: BETA,
        latency_ns: ALPHA_NS,
    }
}

fn runtime(devices: u32, topology: TopologyConfig, threads: usize) -> Runtime {
    Runtime::new(RuntimeConfig {
        devices,
        device: DeviceConfig::small(),
        host: HostCosts::zero(),
        topology,
        threads,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// One communication stream per device, created in that device's primary context.
fn comm_streams(rt: &Runtime, n: u32) -> Vec<Stream> {
    (0..n)
        .map(|d| {
            rt.contexts().set_device(d).unwrap();
            rt.streams()
                .create_with(StreamConfig {
                    kind: StreamKind::Communication,
                    ..StreamConfig::default()
                })
                .unwrap()
        })
        .collect()
}

fn upload<T: bytemuck::Pod>(rt: &Runtime, device: u32, data: &[T]) -> DevicePtr {
    rt.contexts().set_device(device).unwrap();
    let p = rt
        .memory()
        .malloc(std::mem::size_of_val(data).max(1) as u64)
        .unwrap();
    rt.memory().memcpy_htod(p, data).unwrap();
    p
}

fn download<T: bytemuck::Pod>(rt: &Runtime, device: u32, p: DevicePtr, n: usize) -> Vec<T> {
    rt.contexts().set_device(device).unwrap();
    let mut out = vec![T::zeroed(); n];
    rt.memory().memcpy_dtoh(&mut out, p).unwrap();
    out
}

fn sync_all(rt: &Runtime, streams: &[Stream]) -> Vec<NpuResult<()>> {
    streams
        .iter()
        .enumerate()
        .map(|(d, &s)| {
            rt.contexts().set_device(d as u32).unwrap();
            rt.streams().synchronize(s)
        })
        .collect()
}

fn all_reduce_on(
    rt: &Runtime,
    comms: &[Communicator],
    streams: &[Stream],
    bufs: &[(DevicePtr, DevicePtr)],
    count: u64,
    dtype: DataType,
    op: ReduceOp,
) {
    for (r, c) in comms.iter().enumerate() {
        rt.contexts().set_device(c.device()).unwrap();
        rt.submit(Collective::all_reduce(bufs[r].0, bufs[r].1, count, dtype, op).on(c, streams[r]))
            .unwrap();
    }
}

#[test]
fn ring_all_reduce_time_matches_the_closed_form() {
    for n in [2u32, 4, 8] {
        for s in [64u64 << 10, 4 << 20, 32 << 20] {
            let rt = runtime(n, TopologyConfig::ring(link()), 1);
            let devices: Vec<u32> = (0..n).collect();
            let comms = rt.collectives().init_all(&devices).unwrap();
            let streams = comm_streams(&rt, n);
            let count = s / 4;
            let bufs: Vec<(DevicePtr, DevicePtr)> = (0..n)
                .map(|d| {
                    rt.contexts().set_device(d).unwrap();
                    (
                        rt.memory().malloc(s).unwrap(),
                        rt.memory().malloc(s).unwrap(),
                    )
                })
                .collect();
            all_reduce_on(
                &rt,
                &comms,
                &streams,
                &bufs,
                count,
                DataType::F32,
                ReduceOp::Sum,
            );
            assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
            let records: Vec<TaskRecord> = rt
                .timeline()
                .into_iter()
                .filter(|r| r.name == "all_reduce")
                .collect();
            assert_eq!(records.len(), n as usize);
            let nf = n as f64;
            let closed =
                2.0 * (nf - 1.0) * ALPHA_NS as f64 + 2.0 * (nf - 1.0) / nf * s as f64 / BETA * 1e9;
            for r in &records {
                assert_eq!(r.start, records[0].start, "ranks start together");
                let t = (r.end - r.start).as_ns() as f64;
                let err = (t - closed).abs() / closed;
                assert!(
                    err < 0.01,
                    "N={n} S={s}: simulated {t} ns, closed form {closed} ns"
                );
            }
        }
    }
}

#[test]
fn all_reduce_computes_every_op_and_type_on_every_rank() {
    let n = 4u32;
    let rt = runtime(n, TopologyConfig::ring(link()), 2);
    let comms = rt.collectives().init_all(&[0, 1, 2, 3]).unwrap();
    let streams = comm_streams(&rt, n);
    let count = 1000usize;
    let val = |r: u32, i: usize| ((i % 7) as f32 - 2.0) * (r as f32 + 1.0) * 0.5;
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
        let fold = |i: usize, f: &dyn Fn(f64, f64) -> f64| {
            (1..n).fold(val(0, i) as f64, |a, r| f(a, val(r, i) as f64))
        };
        let expect = |i: usize| match op {
            ReduceOp::Sum => fold(i, &|a, b| a + b),
            ReduceOp::Prod => fold(i, &|a, b| a * b),
            ReduceOp::Max => fold(i, &|a, b| a.max(b)),
            ReduceOp::Min => fold(i, &|a, b| a.min(b)),
        };
        // f32
        let bufs: Vec<(DevicePtr, DevicePtr)> = (0..n)
            .map(|d| {
                let data: Vec<f32> = (0..count).map(|i| val(d, i)).collect();
                let p = upload(&rt, d, &data);
                (p, p) // in place
            })
            .collect();
        all_reduce_on(
            &rt,
            &comms,
            &streams,
            &bufs,
            count as u64,
            DataType::F32,
            op,
        );
        assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
        for d in 0..n {
            let got: Vec<f32> = download(&rt, d, bufs[d as usize].1, count);
            for (i, g) in got.iter().enumerate() {
                assert_eq!(*g as f64, expect(i), "f32 {op:?} rank {d} element {i}");
            }
        }
        // i32
        let bufs: Vec<(DevicePtr, DevicePtr)> = (0..n)
            .map(|d| {
                let data: Vec<i32> = (0..count).map(|i| (val(d, i) * 2.0) as i32).collect();
                rt.contexts().set_device(d).unwrap();
                (
                    upload(&rt, d, &data),
                    rt.memory().malloc(4 * count as u64).unwrap(),
                )
            })
            .collect();
        all_reduce_on(
            &rt,
            &comms,
            &streams,
            &bufs,
            count as u64,
            DataType::I32,
            op,
        );
        assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
        let iv = |r: u32, i: usize| (val(r, i) * 2.0) as i32;
        for d in 0..n {
            let got: Vec<i32> = download(&rt, d, bufs[d as usize].1, count);
            for (i, g) in got.iter().enumerate() {
                let e = (1..n).fold(iv(0, i), |a, r| match op {
                    ReduceOp::Sum => a.wrapping_add(iv(r, i)),
                    ReduceOp::Prod => a.wrapping_mul(iv(r, i)),
                    ReduceOp::Max => a.max(iv(r, i)),
                    ReduceOp::Min => a.min(iv(r, i)),
                });
                assert_eq!(*g, e, "i32 {op:?} rank {d} element {i}");
            }
        }
        // f16: inputs are exact in half precision; the result is rounded once.
        let half = |x: f32| npusim::components::collective::f32_to_f16(x);
        let bufs: Vec<(DevicePtr, DevicePtr)> = (0..n)
            .map(|d| {
                let data: Vec<u16> = (0..count).map(|i| half(val(d, i))).collect();
                rt.contexts().set_device(d).unwrap();
                (
                    upload(&rt, d, &data),
                    rt.memory().malloc(2 * count as u64).unwrap(),
                )
            })
            .collect();
        all_reduce_on(
            &rt,
            &comms,
            &streams,
            &bufs,
            count as u64,
            DataType::F16,
            op,
        );
        assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
        for d in 0..n {
            let got: Vec<u16> = download(&rt, d, bufs[d as usize].1, count);
            for (i, g) in got.iter().enumerate() {
                assert_eq!(
                    *g,
                    half(expect(i) as f32),
                    "f16 {op:?} rank {d} element {i}"
                );
            }
        }
    }
}

#[test]
fn gather_scatter_broadcast_and_send_recv_move_real_data() {
    let n = 4u32;
    let rt = runtime(n, TopologyConfig::switch(link()), 1);
    let comms = rt.collectives().init_all(&[0, 1, 2, 3]).unwrap();
    let streams = comm_streams(&rt, n);
    let k = 256usize;
    let input = |r: u32| -> Vec<f32> {
        (0..k * n as usize)
            .map(|i| (r * 1000) as f32 + i as f32)
            .collect()
    };
    let sends: Vec<DevicePtr> = (0..n).map(|d| upload(&rt, d, &input(d))).collect();
    let outs: Vec<DevicePtr> = (0..n)
        .map(|d| {
            rt.contexts().set_device(d).unwrap();
            rt.memory().malloc(4 * (k * n as usize) as u64).unwrap()
        })
        .collect();

    // All-gather of each rank's first k elements.
    for (r, c) in comms.iter().enumerate() {
        rt.contexts().set_device(r as u32).unwrap();
        rt.submit(
            Collective::all_gather(sends[r], outs[r], k as u64, DataType::F32).on(c, streams[r]),
        )
        .unwrap();
    }
    assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
    for d in 0..n {
        let got: Vec<f32> = download(&rt, d, outs[d as usize], k * n as usize);
        for r in 0..n as usize {
            assert_eq!(&got[r * k..(r + 1) * k], &input(r as u32)[..k]);
        }
    }

    // Reduce-scatter: rank r gets block r of the sum.
    for (r, c) in comms.iter().enumerate() {
        rt.contexts().set_device(r as u32).unwrap();
        rt.submit(
            Collective::reduce_scatter(sends[r], outs[r], k as u64, DataType::F32, ReduceOp::Sum)
                .on(c, streams[r]),
        )
        .unwrap();
    }
    assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
    for (d, &out) in outs.iter().enumerate() {
        let got: Vec<f32> = download(&rt, d as u32, out, k);
        for (j, g) in got.iter().enumerate() {
            let e: f32 = (0..n).map(|r| input(r)[d * k + j]).sum();
            assert_eq!(*g, e);
        }
    }

    // Broadcast from rank 2, in place.
    for (r, c) in comms.iter().enumerate() {
        rt.contexts().set_device(r as u32).unwrap();
        rt.submit(
            Collective::broadcast(sends[r], (k * n as usize) as u64, DataType::F32, 2)
                .on(c, streams[r]),
        )
        .unwrap();
    }
    assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
    for d in 0..n {
        let got: Vec<f32> = download(&rt, d, sends[d as usize], k * n as usize);
        assert_eq!(got, input(2));
    }

    // Send 1 → 3, the receiver into pinned host memory.
    let host = rt.memory().malloc_host(4 * k as u64).unwrap();
    rt.contexts().set_device(1).unwrap();
    rt.submit(Collective::send(sends[1], k as u64, DataType::F32, 3).on(&comms[1], streams[1]))
        .unwrap();
    rt.contexts().set_device(3).unwrap();
    rt.submit(Collective::recv(&host, k as u64, DataType::F32, 1).on(&comms[3], streams[3]))
        .unwrap();
    assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
    assert_eq!(host.read::<f32>().unwrap(), input(2)[..k].to_vec());
}

#[test]
fn pageable_host_memory_is_refused_for_rdma() {
    let rt = runtime(2, TopologyConfig::default(), 1);
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let streams = comm_streams(&rt, 2);
    let pageable = HostBuffer::new(64, false);
    rt.contexts().set_device(0).unwrap();
    let err = rt
        .submit(
            Collective::send(CommBuffer::Host(pageable), 16, DataType::F32, 1)
                .on(&comms[0], streams[0]),
        )
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_INVALID_MEMORY_TYPE);
    assert!(err.to_string().contains("pageable"), "{err}");
    let pinned = rt.memory().malloc_host(64).unwrap();
    rt.submit(Collective::send(&pinned, 16, DataType::F32, 1).on(&comms[0], streams[0]))
        .unwrap();
}

#[test]
fn a_rank_that_never_joins_makes_the_others_time_out() {
    let n = 4u32;
    let rt = runtime(n, TopologyConfig::default(), 1);
    let config = CommConfig {
        exec_timeout: SimTime::from_ms(5),
        ..CommConfig::default()
    };
    let comms = rt
        .collectives()
        .init_all_with(&[0, 1, 2, 3], config)
        .unwrap();
    let streams = comm_streams(&rt, n);
    let bufs: Vec<(DevicePtr, DevicePtr)> = (0..n)
        .map(|d| {
            rt.contexts().set_device(d).unwrap();
            let p = rt.memory().malloc(4096).unwrap();
            (p, p)
        })
        .collect();
    // Rank 3 never calls.
    for r in 0..3usize {
        rt.contexts().set_device(r as u32).unwrap();
        rt.submit(
            Collective::all_reduce(bufs[r].0, bufs[r].1, 1024, DataType::F32, ReduceOp::Sum)
                .on(&comms[r], streams[r]),
        )
        .unwrap();
    }
    for r in 0..3u32 {
        rt.contexts().set_device(r).unwrap();
        let err = rt.streams().synchronize(streams[r as usize]).unwrap_err();
        assert_eq!(err.code(), codes::RT_WAIT_TIMEOUT, "{err}");
        assert!(
            err.to_string().contains("[3]"),
            "names the missing rank: {err}"
        );
    }
    assert!(rt.device_now() >= SimTime::from_ms(5));
    // The communicator is broken from then on.
    rt.contexts().set_device(3).unwrap();
    rt.contexts().reset().unwrap();
    let err = rt
        .submit(
            Collective::all_reduce(bufs[3].0, bufs[3].1, 1024, DataType::F32, ReduceOp::Sum)
                .on(&comms[3], streams[3]),
        )
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_WAIT_TIMEOUT);
}

/// How many communicators the world holds.
fn communicators(rt: &Runtime) -> usize {
    let mut g = rt.lock_world();
    let world = g.world_mut();
    world
        .query::<&npusim::components::CommState>()
        .iter(world)
        .count()
}

#[test]
fn destroying_every_handle_while_collectives_are_queued_lets_them_run_then_frees_the_communicator()
{
    let n = 2u32;
    let rt = runtime(n, TopologyConfig::default(), 1);
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let streams = comm_streams(&rt, n);
    let count = 1u64 << 16;
    let fill = rt.kernel("fill_f32").unwrap();
    let mut bufs = Vec::new();
    for d in 0..n {
        rt.contexts().set_device(d).unwrap();
        let p = rt.memory().malloc(4 * count).unwrap();
        // The all-reduce waits behind a kernel: still queued when the handles go.
        let args = [p.into(), count.into(), (d as f32 + 1.0).into()];
        rt.submit(Launch::new(fill, 4, &args, streams[d as usize]))
            .unwrap();
        let c = &comms[d as usize];
        rt.submit(
            Collective::all_reduce(p, p, count, DataType::F32, ReduceOp::Sum)
                .on(c, streams[d as usize]),
        )
        .unwrap();
        bufs.push(p);
    }
    rt.collectives().destroy(comms[0]).unwrap();
    rt.collectives().destroy(comms[1]).unwrap();
    assert_eq!(
        communicators(&rt),
        1,
        "kept while its operations are queued"
    );
    // A destroyed handle takes no new work.
    let err = rt
        .submit(
            Collective::all_reduce(bufs[0], bufs[0], count, DataType::F32, ReduceOp::Sum)
                .on(&comms[0], streams[0]),
        )
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_INVALID_HANDLE);
    for r in sync_all(&rt, &streams) {
        r.unwrap();
    }
    for d in 0..n {
        let got: Vec<f32> = download(&rt, d, bufs[d as usize], count as usize);
        assert!(
            got.iter().all(|&x| x == 3.0),
            "rank {d}: the queued all-reduce ran"
        );
    }
    assert_eq!(communicators(&rt), 0, "gone once its operations ran");
    // With nothing queued, the last handle frees it at once.
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    rt.collectives().destroy(comms[1]).unwrap();
    rt.collectives().destroy(comms[0]).unwrap();
    assert_eq!(communicators(&rt), 0);
}

#[test]
fn a_collective_waits_for_the_event_of_the_kernel_that_makes_its_data() {
    let n = 2u32;
    let rt = runtime(n, TopologyConfig::default(), 1);
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let comm_s = comm_streams(&rt, n);
    let count = 1 << 16;
    let fill = rt.kernel("fill_f32").unwrap();
    let mut bufs = Vec::new();
    let mut compute = Vec::new();
    for d in 0..n {
        rt.contexts().set_device(d).unwrap();
        let s = rt.streams().create().unwrap();
        let p = rt.memory().malloc(4 * count).unwrap();
        let ev = rt.events().create().unwrap();
        rt.submit(Launch::new(
            fill,
            4,
            &[p.into(), count.into(), (d as f32 + 1.0).into()],
            s,
        ))
        .unwrap();
        rt.events().record(ev, s).unwrap();
        rt.events().stream_wait(comm_s[d as usize], ev).unwrap();
        rt.submit(
            Collective::all_reduce(p, p, count, DataType::F32, ReduceOp::Sum)
                .on(&comms[d as usize], comm_s[d as usize]),
        )
        .unwrap();
        // Compute that does not depend on the collective overlaps it.
        let q = rt.memory().malloc(4 * count).unwrap();
        rt.submit(Launch::new(
            fill,
            4,
            &[q.into(), count.into(), 0.0f32.into()],
            s,
        ))
        .unwrap();
        bufs.push(p);
        compute.push(s);
    }
    assert!(sync_all(&rt, &comm_s).iter().all(Result::is_ok));
    for d in 0..n {
        let got: Vec<f32> = download(&rt, d, bufs[d as usize], count as usize);
        assert!(got.iter().all(|&x| x == 3.0));
    }
    let tl = rt.timeline();
    let ar: Vec<&TaskRecord> = tl.iter().filter(|r| r.name == "all_reduce").collect();
    let fills: Vec<&TaskRecord> = tl.iter().filter(|r| r.name == "fill_f32").collect();
    for a in &ar {
        let first = fills.iter().find(|f| f.device == a.device).unwrap();
        assert!(
            a.start >= first.end,
            "the collective starts after its data is made"
        );
        assert_eq!(a.stream_kind, StreamKind::Communication);
    }
    // The device whose data came last: its next kernel runs while the collective does.
    let second = fills.iter().filter(|f| f.device == n - 1).nth(1).unwrap();
    let a = ar.iter().find(|a| a.device == n - 1).unwrap();
    assert!(
        second.start < a.end && a.start < second.end,
        "compute overlaps communication"
    );
}

#[test]
fn mismatched_calls_fail_on_every_rank() {
    let rt = runtime(2, TopologyConfig::default(), 1);
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let streams = comm_streams(&rt, 2);
    let bufs: Vec<DevicePtr> = (0..2)
        .map(|d| {
            rt.contexts().set_device(d).unwrap();
            rt.memory().malloc(4096).unwrap()
        })
        .collect();
    rt.contexts().set_device(0).unwrap();
    rt.submit(
        Collective::all_reduce(bufs[0], bufs[0], 256, DataType::F32, ReduceOp::Sum)
            .on(&comms[0], streams[0]),
    )
    .unwrap();
    rt.contexts().set_device(1).unwrap();
    rt.submit(
        Collective::all_reduce(bufs[1], bufs[1], 128, DataType::F32, ReduceOp::Sum)
            .on(&comms[1], streams[1]),
    )
    .unwrap();
    for r in sync_all(&rt, &streams) {
        let err = r.unwrap_err();
        assert_eq!(err.code(), codes::RT_PARAM_INVALID);
        assert!(err.to_string().contains("does not match"), "{err}");
    }
}

#[test]
fn calls_on_the_wrong_device_or_with_bad_buffers_are_refused() {
    let rt = runtime(2, TopologyConfig::default(), 1);
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let streams = comm_streams(&rt, 2);
    rt.contexts().set_device(0).unwrap();
    let p = rt.memory().malloc(64).unwrap();
    // Rank 1's handle with device 0's stream.
    let err = rt
        .submit(
            Collective::all_reduce(p, p, 16, DataType::F32, ReduceOp::Sum)
                .on(&comms[1], streams[0]),
        )
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_PARAM_INVALID);
    // A buffer too small for the count.
    let err = rt
        .submit(
            Collective::all_reduce(p, p, 17, DataType::F32, ReduceOp::Sum)
                .on(&comms[0], streams[0]),
        )
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_PARAM_INVALID);
    assert!(rt.collectives().init_all(&[0, 0]).is_err());
    assert!(rt.collectives().init_all(&[0, 2]).is_err());
    rt.collectives().destroy(comms[0]).unwrap();
    let err = rt
        .submit(
            Collective::all_reduce(p, p, 16, DataType::F32, ReduceOp::Sum)
                .on(&comms[0], streams[0]),
        )
        .unwrap_err();
    assert_eq!(err.code(), codes::RT_INVALID_HANDLE);
}

#[test]
fn peer_copies_travel_over_the_links_of_their_route() {
    let rt = runtime(8, TopologyConfig::ring(link()), 1);
    let bytes = 8u64 << 20;
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let src = upload(&rt, 0, &data);
    rt.contexts().set_device(4).unwrap();
    let far = rt.memory().malloc(bytes).unwrap();
    rt.contexts().set_device(1).unwrap();
    let near = rt.memory().malloc(bytes).unwrap();
    rt.contexts().set_device(0).unwrap();
    let s = rt.streams().create().unwrap();
    rt.collectives()
        .memcpy_peer_async(far, 4, src, 0, bytes, s)
        .unwrap();
    rt.collectives()
        .memcpy_peer_async(near, 1, src, 0, bytes, s)
        .unwrap();
    rt.streams().synchronize(s).unwrap();
    assert_eq!(download::<u8>(&rt, 4, far, bytes as usize), data);
    assert_eq!(download::<u8>(&rt, 1, near, bytes as usize), data);
    let tl = rt.timeline();
    let copies: Vec<&TaskRecord> = tl.iter().filter(|r| r.name == "memcpy_peer").collect();
    let (t_far, t_near) = (
        (copies[0].end - copies[0].start).as_ns(),
        (copies[1].end - copies[1].start).as_ns(),
    );
    // Four hops, pipelined in chunks: a little more than one hop, far less than four.
    assert!(t_far > t_near && t_far < 2 * t_near, "{t_far} vs {t_near}");
    let used: u64 = rt
        .collectives()
        .link_stats()
        .iter()
        .filter(|l| l.bytes > 0)
        .count() as u64;
    assert_eq!(used, 4, "0→1→2→3→4 (the 0→1 link carries both copies)");
    // Pointers that are not live memory of the right device are refused at the call.
    assert!(
        rt.collectives()
            .memcpy_peer_async(src, 4, far, 0, 64, s)
            .is_err()
    );
}

/// A program that uses every kind of collective on 4 devices.
fn program(threads: usize) -> (Vec<TaskRecord>, Vec<Vec<f32>>) {
    let n = 4u32;
    let rt = runtime(
        n,
        TopologyConfig {
            kind: TopologyKind::Ring,
            ..TopologyConfig::default()
        },
        threads,
    );
    let comms = rt.collectives().init_all(&[0, 1, 2, 3]).unwrap();
    let streams = comm_streams(&rt, n);
    let count = 100_000usize;
    let gemm = rt.kernel("gemm_f32").unwrap();
    let mut bufs = Vec::new();
    for d in 0..n {
        let x: Vec<f32> = (0..count)
            .map(|i| ((i * (d as usize + 3)) % 17) as f32 * 0.1)
            .collect();
        let p = upload(&rt, d, &x);
        rt.contexts().set_device(d).unwrap();
        let s = rt.streams().create().unwrap();
        let c = rt.memory().malloc(4 * 64 * 64).unwrap();
        let ev = rt.events().create().unwrap();
        rt.submit(Launch::new(
            gemm,
            4,
            &[
                p.into(),
                p.into(),
                c.into(),
                64u64.into(),
                64u64.into(),
                64u64.into(),
            ],
            s,
        ))
        .unwrap();
        rt.events().record(ev, s).unwrap();
        rt.events().stream_wait(streams[d as usize], ev).unwrap();
        bufs.push((p, c));
    }
    for (r, c) in comms.iter().enumerate() {
        rt.contexts().set_device(r as u32).unwrap();
        rt.submit(
            Collective::all_reduce(bufs[r].1, bufs[r].1, 64 * 64, DataType::F32, ReduceOp::Sum)
                .on(c, streams[r]),
        )
        .unwrap();
        rt.submit(
            Collective::all_reduce(
                bufs[r].0,
                bufs[r].0,
                count as u64,
                DataType::F32,
                ReduceOp::Max,
            )
            .on(c, streams[r]),
        )
        .unwrap();
        rt.submit(Collective::broadcast(bufs[r].1, 64, DataType::F32, 1).on(c, streams[r]))
            .unwrap();
    }
    assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
    let results = (0..n)
        .flat_map(|d| {
            [
                download::<f32>(&rt, d, bufs[d as usize].0, count),
                download::<f32>(&rt, d, bufs[d as usize].1, 64 * 64),
            ]
        })
        .collect();
    (rt.timeline(), results)
}

#[test]
fn results_and_timelines_do_not_depend_on_the_thread_count() {
    let (t1, r1) = program(1);
    let (t4, r4) = program(4);
    assert_eq!(r1, r4);
    let strip = |t: Vec<TaskRecord>| -> Vec<_> {
        t.into_iter()
            .map(|r| (r.name, r.device, r.seq, r.start, r.end, r.ok))
            .collect()
    };
    assert_eq!(strip(t1), strip(t4));
}

#[test]
fn the_mesh_algorithm_beats_the_ring_on_a_full_mesh() {
    let time = |algorithm| {
        let rt = runtime(8, TopologyConfig::full_mesh(link()), 1);
        let devices: Vec<u32> = (0..8).collect();
        let comms = rt
            .collectives()
            .init_all_with(
                &devices,
                CommConfig {
                    algorithm,
                    ..CommConfig::default()
                },
            )
            .unwrap();
        let streams = comm_streams(&rt, 8);
        let bufs: Vec<(DevicePtr, DevicePtr)> = (0..8)
            .map(|d| {
                rt.contexts().set_device(d).unwrap();
                let p = rt.memory().malloc(1 << 20).unwrap();
                (p, p)
            })
            .collect();
        all_reduce_on(
            &rt,
            &comms,
            &streams,
            &bufs,
            1 << 18,
            DataType::F32,
            ReduceOp::Sum,
        );
        assert!(sync_all(&rt, &streams).iter().all(Result::is_ok));
        let r = &rt.timeline()[0];
        (r.end - r.start).as_ns()
    };
    assert!(time(CollectiveAlgorithm::Mesh) * 3 < time(CollectiveAlgorithm::Ring));
}

#[test]
fn a_thread_per_rank_can_enqueue_and_synchronize_on_its_own() {
    let n = 4u32;
    let rt = runtime(n, TopologyConfig::default(), 1);
    let comms = rt.collectives().init_all(&[0, 1, 2, 3]).unwrap();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|comm| {
            let rt = rt.clone();
            std::thread::spawn(move || {
                let d = comm.device();
                // Ranks arrive at different moments of wall-clock time.
                std::thread::sleep(std::time::Duration::from_millis(5 * d as u64));
                rt.contexts().set_device(d).unwrap();
                let s = rt
                    .streams()
                    .create_with(StreamConfig {
                        kind: StreamKind::Communication,
                        ..StreamConfig::default()
                    })
                    .unwrap();
                let data = vec![d as f32 + 1.0; 512];
                let p = upload(&rt, d, &data);
                rt.submit(
                    Collective::all_reduce(p, p, 512, DataType::F32, ReduceOp::Sum).on(&comm, s),
                )
                .unwrap();
                rt.streams().synchronize(s).unwrap();
                download::<f32>(&rt, d, p, 512)
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().iter().all(|&x| x == 10.0));
    }
}

#[test]
fn two_ranks_on_two_threads_meet_at_each_rendezvous_without_waiting_out_a_grace() {
    // Each thread enqueues its rank's all-reduce and synchronizes: the first to arrive waits
    // at the rendezvous until the other enqueues its part, woken by that enqueue (not by a
    // timer, and not after the 200 ms grace a wait gives other threads).
    const ROUNDS: u32 = 100;
    let rt = runtime(2, TopologyConfig::default(), 1);
    let comms = rt.collectives().init_all(&[0, 1]).unwrap();
    let start = std::time::Instant::now();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|comm| {
            let rt = rt.clone();
            std::thread::spawn(move || {
                let d = comm.device();
                rt.contexts().set_device(d).unwrap();
                let s = rt.streams().create().unwrap();
                let p = upload(&rt, d, &[1.0f32; 64]);
                for _ in 0..ROUNDS {
                    rt.submit(
                        Collective::all_reduce(p, p, 64, DataType::F32, ReduceOp::Sum).on(&comm, s),
                    )
                    .unwrap();
                    rt.streams().synchronize(s).unwrap();
                }
                download::<f32>(&rt, d, p, 64)
            })
        })
        .collect();
    for h in handles {
        let expected = 2f32.powi(ROUNDS as i32);
        assert!(h.join().unwrap().iter().all(|&x| x == expected));
    }
    let per_round = start.elapsed() / ROUNDS;
    println!("wall per round: {per_round:?}");
    assert!(
        per_round < std::time::Duration::from_millis(20),
        "{per_round:?} per round"
    );
}
