//! Collectives and peer copies: the rendezvous, link and engine reservation, and the data
//! movement across devices' memories.
//!
//! In the frame: dispatch hands every ready collective task to [`Rendezvous::arriving`]; then
//! [`start_collectives`] (in [`crate::NpuSet::Dispatch`], after dispatch) files each under its
//! operation, and starts an operation once every rank has arrived and its links and engines are
//! free: all its rank tasks get the same start and end from the α–β plan. A rank left waiting
//! past its communicator's `exec_timeout` fails with `ACL_ERROR_RT_WAIT_TIMEOUT` instead of
//! hanging, and the communicator is broken from then on. In the hardware tick, the first rank
//! task of a running operation to complete moves the data for all ranks
//! (`execute_collective`); reductions are split over the worker threads in fixed chunks, each
//! element reduced in rank order, so results do not depend on the thread count.

use std::cmp::Reverse;

use bevy_ecs::prelude::*;
use npusim_components::collective::{
    Arrival, CollectiveCall, CollectiveKind, CommOp, CommState, DataType, Interconnect, LinkRecord,
    LinkTimeline, OpKey, OpPhase, PeerCopy, ReduceOp, Rendezvous, f16_to_f32, f32_to_f16,
};
use npusim_components::memory::AccessFault;
use npusim_components::resources::{FrameStats, Running, SimClock, Timeline};
use npusim_components::{DeviceState, NpuError, SimTime, Task, TaskExtra, TaskStatus};
use npusim_device::link::{ExtraHop, Pattern};

use crate::workers::Workers;

/// Everything the rendezvous touches.
#[derive(bevy_ecs::system::SystemParam)]
pub struct RendezvousWorld<'w, 's> {
    clock: If<Res<'w, SimClock>>,
    rendezvous: If<ResMut<'w, Rendezvous>>,
    interconnect: If<ResMut<'w, Interconnect>>,
    comms: Query<'w, 's, &'static mut CommState>,
    tasks: Query<'w, 's, &'static mut Task>,
    devices: Query<'w, 's, &'static DeviceState>,
    running: If<ResMut<'w, Running>>,
    // Without them (an embedder removed them), nothing is recorded, as with the timeline off.
    timeline: Option<Res<'w, Timeline>>,
    link_timeline: Option<ResMut<'w, LinkTimeline>>,
    stats: If<ResMut<'w, FrameStats>>,
}

/// Files arriving collective tasks under their operations and starts every operation whose
/// ranks have all arrived and whose links and engines are free; fails ranks that waited past
/// their timeout.
pub fn start_collectives(mut w: RendezvousWorld) {
    crate::zone!("npusim::collectives");
    let now = w.clock.now;
    let arriving = std::mem::take(&mut w.rendezvous.arriving);
    // Operations joined this frame do not set a timeout wake yet: the frame after gives the
    // host a turn (other threads may be enqueuing the missing ranks).
    let mut fresh: Vec<(Entity, OpKey)> = Vec::new();
    for &e in &arriving {
        if let Some(key) = arrive(&mut w, e, now) {
            fresh.push(key);
        }
    }
    let mut arriving = arriving;
    arriving.clear();
    w.rendezvous.arriving = arriving;
    w.rendezvous.next_deadline = None;
    if w.rendezvous.ops.is_empty() {
        return;
    }

    let mut ops = std::mem::take(&mut w.rendezvous.ops);
    let mut wake: Option<SimTime> = None;
    let mut earliest: Option<SimTime> = None;
    for op in ops.iter_mut() {
        if op.phase != OpPhase::Waiting {
            continue;
        }
        let joined_now = fresh.contains(&(op.comm, op.key));
        // A rank task aborted by its context's failure left the rendezvous: it never joins.
        for slot in op.slots.iter_mut() {
            let stale = slot.as_ref().is_some_and(|a| {
                w.tasks.get(a.task).is_ok_and(|t| {
                    t.stream != a.stream || t.seq != a.seq || t.status != TaskStatus::Ready
                }) || w.tasks.get(a.task).is_err()
            });
            if stale {
                *slot = None;
            }
        }
        if op.slots.iter().all(|s| s.is_some()) {
            start_op(&mut w, op, now);
            continue;
        }
        // Someone is missing: fail whoever has waited too long.
        let missing: Vec<usize> = op
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_none())
            .map(|(r, _)| r)
            .collect();
        for i in 0..op.slots.len() {
            let Some(a) = &op.slots[i] else { continue };
            let deadline = a.at + op.config.exec_timeout;
            if deadline > now {
                earliest = Some(earliest.map_or(deadline, |x| x.min(deadline)));
                if !joined_now {
                    wake = Some(wake.map_or(deadline, |x| x.min(deadline)));
                }
                continue;
            }
            let err = NpuError::WaitTimeout {
                what: format!(
                    "{} #{} of communicator {} (rank {} waited for {} {:?})",
                    a.call.kind.name(),
                    a.call.seq,
                    op.comm_id,
                    a.call.rank,
                    if a.call.kind.is_p2p() {
                        "its peer"
                    } else {
                        "ranks"
                    },
                    if a.call.kind.is_p2p() {
                        vec![a.call.peer as usize]
                    } else {
                        missing.clone()
                    },
                ),
                timeout: op.config.exec_timeout,
            };
            if let Ok(mut comm) = w.comms.get_mut(op.comm) {
                comm.broken.get_or_insert_with(|| err.clone());
            }
            let (task, at) = (a.task, a.at);
            op.slots[i] = None;
            fail_at(&mut w, task, err, now, Some(at));
        }
    }
    ops.retain(|op| op.phase != OpPhase::Waiting || op.slots.iter().any(|s| s.is_some()));
    w.rendezvous.ops = ops;
    w.rendezvous.next_deadline = earliest;
    if let Some(t) = wake {
        w.running.next_wake = Some(w.running.next_wake.map_or(t, |x| x.min(t)));
    }
}

/// Files a rank's task under its operation; returns the operation's key.
fn arrive(w: &mut RendezvousWorld, e: Entity, now: SimTime) -> Option<(Entity, OpKey)> {
    let Ok(task) = w.tasks.get(e) else {
        return None;
    };
    if task.status != TaskStatus::Ready {
        return None;
    }
    let (stream, seq) = (task.stream, task.seq);
    let Some(call) = CollectiveCall::decode(&task.desc) else {
        fail_at(
            w,
            e,
            NpuError::Internal("corrupt collective descriptor".into()),
            now,
            None,
        );
        return None;
    };
    let Ok(comm) = w.comms.get(call.comm) else {
        let err = NpuError::Destroyed(format!("communicator {}", call.comm));
        fail_at(w, e, err, now, None);
        return None;
    };
    if let Some(err) = &comm.broken {
        let err = err.clone();
        fail_at(w, e, err, now, None);
        return None;
    }
    let key = call.op_key();
    let (slot, slots) = match call.kind {
        CollectiveKind::Send => (0, 2),
        CollectiveKind::Recv => (1, 2),
        _ => (call.rank as usize, comm.devices.len()),
    };
    let index = match w
        .rendezvous
        .ops
        .iter()
        .position(|op| op.comm == call.comm && op.key == key)
    {
        Some(i) => i,
        None => {
            let op = CommOp {
                comm: call.comm,
                comm_id: comm.id,
                key,
                devices: comm.devices.clone(),
                config: comm.config,
                slots: vec![None; slots],
                phase: OpPhase::Waiting,
            };
            w.rendezvous.ops.push(op);
            w.rendezvous.ops.len() - 1
        }
    };
    let op = &mut w.rendezvous.ops[index];
    if op.phase != OpPhase::Waiting || op.slots.get(slot).is_none_or(|s| s.is_some()) {
        let err = NpuError::Internal(format!(
            "rank {} arrived twice at {:?} of communicator {}",
            call.rank, key, op.comm_id
        ));
        fail_at(w, e, err, now, None);
        return None;
    }
    op.slots[slot] = Some(Arrival {
        task: e,
        stream,
        seq,
        at: now,
        call,
    });
    w.stats.last_frame_progressed = true;
    Some((call.comm, key))
}

/// Ends a rank's task at `now` with `err` (it goes through the running set, so completion,
/// stream order and failure modes are the usual ones).
/// A rank that timed out spans its wait, from `since` (its arrival).
fn fail_at(
    w: &mut RendezvousWorld,
    e: Entity,
    err: NpuError,
    now: SimTime,
    since: Option<SimTime>,
) {
    let Ok(mut task) = w.tasks.get_mut(e) else {
        return;
    };
    task.error = Some(Box::new(err));
    task.applied = true;
    task.start = since.unwrap_or(now);
    task.end = now;
    task.status = TaskStatus::Running;
    let order = w.running.next_order;
    w.running.next_order += 1;
    w.running.heap.push(Reverse((now, order, e)));
    w.stats.tasks_dispatched += 1;
    w.stats.last_frame_progressed = true;
}

/// Checks that every rank called the same thing.
fn validate(op: &CommOp) -> Result<(), String> {
    let calls: Vec<&CollectiveCall> = op.slots.iter().flatten().map(|a| &a.call).collect();
    let first = calls[0];
    if first.kind.is_p2p() {
        let (s, r) = (calls[0], calls[1]);
        if s.dtype != r.dtype || s.count != r.count {
            return Err(format!(
                "send of {} {:?} from rank {} does not match recv of {} {:?} on rank {}",
                s.count, s.dtype, s.rank, r.count, r.dtype, r.rank
            ));
        }
        return Ok(());
    }
    for c in &calls[1..] {
        let reduces = matches!(
            first.kind,
            CollectiveKind::AllReduce | CollectiveKind::ReduceScatter
        );
        if c.kind != first.kind
            || c.dtype != first.dtype
            || c.count != first.count
            || (reduces && c.op != first.op)
            || (first.kind == CollectiveKind::Broadcast && c.peer != first.peer)
        {
            return Err(format!(
                "collective #{} of communicator {} does not match across ranks: rank {} called \
                 {}({} x {:?}, {:?}, root/peer {}), rank {} called {}({} x {:?}, {:?}, root/peer {})",
                first.seq,
                op.comm_id,
                first.rank,
                first.kind.name(),
                first.count,
                first.dtype,
                first.op,
                first.peer,
                c.rank,
                c.kind.name(),
                c.count,
                c.dtype,
                c.op,
                c.peer
            ));
        }
    }
    Ok(())
}

/// Starts `op` if its links and engines are free.
fn start_op(w: &mut RendezvousWorld, op: &mut CommOp, now: SimTime) {
    let arrivals: Vec<Arrival> = op.slots.iter().flatten().cloned().collect();
    if let Err(msg) = validate(op) {
        for a in &arrivals {
            fail_at(w, a.task, NpuError::InvalidParam(msg.clone()), now, None);
        }
        op.slots.iter_mut().for_each(|s| *s = None);
        return;
    }
    let call = arrivals[0].call;
    let (pattern, ranks, engines): (Pattern, Vec<u32>, Vec<u32>) = match op.key {
        OpKey::PointToPoint { from, to, .. } => (
            Pattern::PointToPoint { from: 0, to: 1 },
            vec![op.devices[from as usize], op.devices[to as usize]],
            vec![op.devices[from as usize], op.devices[to as usize]],
        ),
        OpKey::Collective(_) => {
            let pattern = match call.kind {
                CollectiveKind::AllReduce => Pattern::AllReduce,
                CollectiveKind::AllGather => Pattern::AllGather,
                CollectiveKind::ReduceScatter => Pattern::ReduceScatter,
                _ => Pattern::Broadcast {
                    root: call.peer as usize,
                },
            };
            (pattern, op.devices.clone(), op.devices.clone())
        }
    };
    // Pinned host memory on either end of a send / recv crosses that device's host link too.
    let mut extra: Vec<ExtraHop> = Vec::new();
    for a in &arrivals {
        if let Ok(t) = w.tasks.get(a.task)
            && matches!(t.extra, TaskExtra::Host { .. })
            && let Ok(d) = w.devices.get(t.device)
        {
            extra.push((d.config.host_link_latency_ns, d.config.host_link_bandwidth));
        }
    }
    let plan =
        w.interconnect
            .topology
            .plan(pattern, &ranks, call.bytes, op.config.algorithm, &extra);
    let engines_free = engines.iter().all(|&d| {
        w.interconnect
            .engines
            .get(d as usize)
            .is_none_or(|e| e.busy_until <= now)
    });
    if !engines_free || !w.interconnect.links_free(&plan.links, now) {
        // Whoever holds them is running; its completion wakes a later frame.
        return;
    }
    let end = now + SimTime(plan.duration_ns);
    w.interconnect.hold_links(&plan.links, now, end);
    for &d in &engines {
        if let Some(e) = w.interconnect.engines.get_mut(d as usize) {
            e.busy_until = end;
            e.busy_ns += plan.duration_ns;
            e.ops += 1;
        }
    }
    if w.timeline.as_ref().is_some_and(|t| t.enabled)
        && let Some(link_timeline) = w.link_timeline.as_mut()
    {
        let name = call.kind.name();
        for &(link, bytes) in &plan.links {
            link_timeline.records.push(LinkRecord {
                link,
                start: now,
                end,
                bytes,
                name,
            });
        }
    }
    for a in &arrivals {
        let Ok(mut task) = w.tasks.get_mut(a.task) else {
            continue;
        };
        task.start = now;
        task.end = end;
        task.status = TaskStatus::Running;
        let order = w.running.next_order;
        w.running.next_order += 1;
        w.running.heap.push(Reverse((end, order, a.task)));
        w.stats.tasks_dispatched += 1;
    }
    w.stats.last_frame_progressed = true;
    op.phase = OpPhase::Running {
        end,
        left: arrivals.len() as u32,
        result: None,
    };
}

/// Reserves the route of a peer copy if its links are free: returns its duration (DMA setup
/// plus the pipelined transfer), or `None` to wait.
pub(crate) fn reserve_peer_copy(
    interconnect: &mut Interconnect,
    link_timeline: Option<&mut LinkTimeline>,
    copy: &PeerCopy,
    setup_ns: u64,
    now: SimTime,
) -> Option<u64> {
    let (src, dst, bytes) = (copy.src_device, copy.dst_device, copy.bytes);
    let route: Vec<(u32, u64)> = interconnect
        .topology
        .route(src, dst)
        .into_iter()
        .map(|l| (l, bytes))
        .collect();
    if !interconnect.links_free(&route, now) {
        return None;
    }
    let path: Vec<u32> = route.iter().map(|r| r.0).collect();
    let duration = setup_ns + interconnect.topology.path_ns(&path, &[], bytes);
    let end = now + SimTime(duration);
    interconnect.hold_links(&route, now, end);
    if let Some(tl) = link_timeline {
        for &(link, bytes) in &route {
            tl.records.push(LinkRecord {
                link,
                start: now,
                end,
                bytes,
                name: "memcpy_peer",
            });
        }
    }
    Some(duration)
}

/// A byte buffer aligned for any element type.
struct Buf {
    words: Vec<u64>,
    len: usize,
}

impl Buf {
    fn zeroed(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }

    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

fn fault(kind: CollectiveKind) -> impl Fn(AccessFault) -> NpuError {
    move |f| NpuError::AicoreException {
        kernel: format!("hccl_{}", kind.name()),
        detail: f.to_string(),
    }
}

/// Where one rank's side of a collective lives.
struct Side<'a> {
    task: &'a Task,
    addr: u64,
}

fn read_side(
    devices: &mut Query<&mut DeviceState>,
    side: &Side,
    len: usize,
    kind: CollectiveKind,
) -> Result<Buf, NpuError> {
    let mut buf = Buf::zeroed(len);
    if let TaskExtra::Host { buffer, offset } = &side.task.extra {
        let data = buffer.bytes()?;
        let start = *offset as usize;
        let src = data
            .get(start..start + len)
            .ok_or_else(|| NpuError::InvalidParam("host range past the buffer".into()))?;
        buf.bytes_mut().copy_from_slice(src);
        return Ok(buf);
    }
    let mut device = devices
        .get_mut(side.task.device)
        .map_err(|_| NpuError::Internal("collective on a missing device".into()))?;
    device
        .memory
        .read(side.addr, buf.bytes_mut(), side.task.context)
        .map_err(fault(kind))?;
    Ok(buf)
}

fn write_side(
    devices: &mut Query<&mut DeviceState>,
    side: &Side,
    data: &[u8],
    kind: CollectiveKind,
) -> Result<(), NpuError> {
    if let TaskExtra::Host { buffer, offset } = &side.task.extra {
        let mut bytes = buffer.bytes()?;
        let start = *offset as usize;
        bytes
            .get_mut(start..start + data.len())
            .ok_or_else(|| NpuError::InvalidParam("host range past the buffer".into()))?
            .copy_from_slice(data);
        return Ok(());
    }
    let mut device = devices
        .get_mut(side.task.device)
        .map_err(|_| NpuError::Internal("collective on a missing device".into()))?;
    device
        .memory
        .write(side.addr, data, side.task.context)
        .map_err(fault(kind))
}

/// Elements per chunk of a parallel reduction (fixed, so chunking never depends on threads).
const REDUCE_CHUNK: usize = 1 << 14;

fn reduce_typed<T: bytemuck::Pod + Send + Sync>(
    out: &mut [T],
    inputs: &[&[T]],
    f: impl Fn(T, T) -> T + Sync,
    workers: &Workers,
) {
    let body = |(ci, chunk): (usize, &mut [T])| {
        let off = ci * REDUCE_CHUNK;
        let n = chunk.len();
        chunk.copy_from_slice(&inputs[0][off..off + n]);
        for input in &inputs[1..] {
            for (o, x) in chunk.iter_mut().zip(&input[off..off + n]) {
                *o = f(*o, *x);
            }
        }
    };
    if workers.is_parallel() && out.len() > REDUCE_CHUNK {
        use rayon::prelude::*;
        workers.install(|| out.par_chunks_mut(REDUCE_CHUNK).enumerate().for_each(body));
    } else {
        out.chunks_mut(REDUCE_CHUNK).enumerate().for_each(body);
    }
}

/// Reduces equal-length buffers element-wise, in rank order.
fn reduce(inputs: &[Buf], dtype: DataType, op: ReduceOp, workers: &Workers) -> Buf {
    let len = inputs[0].len;
    let mut out = Buf::zeroed(len);
    match dtype {
        DataType::F32 => {
            let ins: Vec<&[f32]> = inputs
                .iter()
                .map(|b| bytemuck::cast_slice(b.bytes()))
                .collect();
            let o: &mut [f32] = bytemuck::cast_slice_mut(out.bytes_mut());
            match op {
                ReduceOp::Sum => reduce_typed(o, &ins, |a, b| a + b, workers),
                ReduceOp::Prod => reduce_typed(o, &ins, |a, b| a * b, workers),
                ReduceOp::Max => reduce_typed(o, &ins, f32::max, workers),
                ReduceOp::Min => reduce_typed(o, &ins, f32::min, workers),
            }
        }
        DataType::I32 => {
            let ins: Vec<&[i32]> = inputs
                .iter()
                .map(|b| bytemuck::cast_slice(b.bytes()))
                .collect();
            let o: &mut [i32] = bytemuck::cast_slice_mut(out.bytes_mut());
            match op {
                ReduceOp::Sum => reduce_typed(o, &ins, i32::wrapping_add, workers),
                ReduceOp::Prod => reduce_typed(o, &ins, i32::wrapping_mul, workers),
                ReduceOp::Max => reduce_typed(o, &ins, i32::max, workers),
                ReduceOp::Min => reduce_typed(o, &ins, i32::min, workers),
            }
        }
        DataType::F16 => {
            // Accumulate in f32, round to half once.
            let ins: Vec<Vec<f32>> = inputs
                .iter()
                .map(|b| {
                    bytemuck::cast_slice::<u8, u16>(b.bytes())
                        .iter()
                        .map(|&h| f16_to_f32(h))
                        .collect()
                })
                .collect();
            let refs: Vec<&[f32]> = ins.iter().map(Vec::as_slice).collect();
            let mut acc = vec![0f32; len / 2];
            match op {
                ReduceOp::Sum => reduce_typed(&mut acc, &refs, |a, b| a + b, workers),
                ReduceOp::Prod => reduce_typed(&mut acc, &refs, |a, b| a * b, workers),
                ReduceOp::Max => reduce_typed(&mut acc, &refs, f32::max, workers),
                ReduceOp::Min => reduce_typed(&mut acc, &refs, f32::min, workers),
            }
            let o: &mut [u16] = bytemuck::cast_slice_mut(out.bytes_mut());
            for (h, f) in o.iter_mut().zip(&acc) {
                *h = f32_to_f16(*f);
            }
        }
    }
    out
}

/// Moves the data of the running operation that rank task `entity` belongs to (once, for all
/// its ranks) and returns its outcome.
pub(crate) fn execute_collective(
    tasks: &Query<&mut Task>,
    devices: &mut Query<&mut DeviceState>,
    rendezvous: &mut Rendezvous,
    workers: &Workers,
    task: &Task,
    timing_only: bool,
) -> Result<(), NpuError> {
    let call = CollectiveCall::decode(&task.desc)
        .ok_or_else(|| NpuError::Internal("corrupt collective descriptor".into()))?;
    let key = call.op_key();
    let Some(index) = rendezvous
        .ops
        .iter()
        .position(|op| op.comm == call.comm && op.key == key)
    else {
        return Err(NpuError::Internal(format!(
            "collective {key:?} is not running"
        )));
    };
    let needs_data = matches!(
        rendezvous.ops[index].phase,
        OpPhase::Running { result: None, .. }
    );
    if needs_data {
        // Timing-only: the op took its modelled time; no bytes move.
        let result = if timing_only {
            Ok(())
        } else {
            move_data(tasks, devices, &rendezvous.ops[index], workers)
        };
        if let OpPhase::Running { result: r, .. } = &mut rendezvous.ops[index].phase {
            *r = Some(result);
        }
    }
    let op = &mut rendezvous.ops[index];
    let OpPhase::Running { left, result, .. } = &mut op.phase else {
        return Err(NpuError::Internal(
            "collective completed before it started".into(),
        ));
    };
    *left = left.saturating_sub(1);
    let out = result.clone().unwrap_or(Ok(()));
    if *left == 0 {
        rendezvous.ops.remove(index);
    }
    out
}

fn move_data(
    tasks: &Query<&mut Task>,
    devices: &mut Query<&mut DeviceState>,
    op: &CommOp,
    workers: &Workers,
) -> Result<(), NpuError> {
    let arrivals: Vec<&Arrival> = op.slots.iter().flatten().collect();
    let mut sides = Vec::with_capacity(arrivals.len());
    for a in &arrivals {
        let task = tasks
            .get(a.task)
            .map_err(|_| NpuError::Internal("collective rank task vanished".into()))?;
        sides.push((a.call, task));
    }
    let call = sides[0].0;
    let kind = call.kind;
    let size = call.dtype.size() as usize;
    let count = call.count as usize;
    let n = sides.len();
    if kind.is_p2p() {
        // Slot 0 is the sender, slot 1 the receiver; either may be pinned host memory.
        let side = |i: usize, addr: u64| Side {
            task: sides[i].1,
            addr,
        };
        let data = read_side(devices, &side(0, sides[0].0.send), count * size, kind)?;
        return write_side(devices, &side(1, sides[1].0.recv), data.bytes(), kind);
    }
    // One rank per device: every rank's device memory at once, so ranks read and write side
    // by side.
    let mut devs = rank_devices(devices, &op.devices)?;
    let read = |i: usize, d: &mut DeviceState, len: usize| -> Result<Buf, NpuError> {
        let mut buf = Buf::zeroed(len);
        d.memory
            .read(sides[i].0.send, buf.bytes_mut(), sides[i].1.context)
            .map_err(fault(kind))?;
        Ok(buf)
    };
    let write = |i: usize, d: &mut DeviceState, data: &[u8]| -> Result<(), NpuError> {
        d.memory
            .write(sides[i].0.recv, data, sides[i].1.context)
            .map_err(fault(kind))
    };
    let first_error = |results: Vec<Result<(), NpuError>>| results.into_iter().collect();
    match kind {
        CollectiveKind::Broadcast => {
            let root = call.peer as usize;
            let data = read(root, devs[root], count * size)?;
            first_error(for_ranks(workers, &mut devs, |i, d| {
                if i == root {
                    Ok(())
                } else {
                    write(i, d, data.bytes())
                }
            }))
        }
        CollectiveKind::AllGather => {
            let parts: Vec<Buf> = for_ranks(workers, &mut devs, |i, d| read(i, d, count * size))
                .into_iter()
                .collect::<Result<_, _>>()?;
            let mut out = Buf::zeroed(n * count * size);
            for (i, part) in parts.iter().enumerate() {
                out.bytes_mut()[i * count * size..(i + 1) * count * size]
                    .copy_from_slice(part.bytes());
            }
            first_error(for_ranks(workers, &mut devs, |i, d| {
                write(i, d, out.bytes())
            }))
        }
        _ => {
            let all = kind == CollectiveKind::AllReduce;
            let total = if all { count } else { count * n };
            let inputs: Vec<Buf> = for_ranks(workers, &mut devs, |i, d| read(i, d, total * size))
                .into_iter()
                .collect::<Result<_, _>>()?;
            let out = reduce(&inputs, call.dtype, call.op, workers);
            first_error(for_ranks(workers, &mut devs, |i, d| {
                let bytes = if all {
                    out.bytes()
                } else {
                    &out.bytes()[i * count * size..(i + 1) * count * size]
                };
                write(i, d, bytes)
            }))
        }
    }
}

/// The device state of each rank, in rank order (ranks are on distinct devices).
fn rank_devices<'a>(
    devices: &'a mut Query<&mut DeviceState>,
    ranks: &[u32],
) -> Result<Vec<&'a mut DeviceState>, NpuError> {
    let mut by_index: Vec<Option<&'a mut DeviceState>> = Vec::new();
    for d in devices.iter_mut() {
        let d = d.into_inner();
        let i = d.index as usize;
        if by_index.len() <= i {
            by_index.resize_with(i + 1, || None);
        }
        by_index[i] = Some(d);
    }
    ranks
        .iter()
        .map(|&r| by_index.get_mut(r as usize).and_then(Option::take))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| NpuError::Internal("collective rank on a missing device".into()))
}

/// `f(rank, device)` for every rank, on the worker threads when there are several; results in
/// rank order.
fn for_ranks<T: Send>(
    workers: &Workers,
    devs: &mut [&mut DeviceState],
    f: impl Fn(usize, &mut DeviceState) -> T + Sync + Send,
) -> Vec<T> {
    if workers.is_parallel() {
        use rayon::prelude::*;
        workers.install(|| {
            devs.par_iter_mut()
                .enumerate()
                .map(|(i, d)| f(i, d))
                .collect()
        })
    } else {
        devs.iter_mut().enumerate().map(|(i, d)| f(i, d)).collect()
    }
}
