//! Communicators, collectives and peer copies: the HCCL-style API over the devices of a
//! runtime.
//!
//! 1. [`Collectives::init_all`](crate::Collectives::init_all) makes one communicator rank per device (as `HcclCommInitAll`)
//!    and returns a handle per rank.
//! 2. For each rank, the host makes that rank's device current ([`Contexts::set_device`](crate::Contexts::set_device)) and
//!    enqueues the rank's call on one of its streams — usually a
//!    [`StreamKind::Communication`](crate::StreamKind) stream that waits on an event recorded
//!    after the kernels producing the data. Calls return at once.
//! 3. On the device, each rank's task waits at the head of its stream for its events, then at
//!    the rendezvous for the other ranks; when all are there and the links are free, the
//!    operation runs on every rank at once, for the time the α–β model of its algorithm gives,
//!    and the data moves through the devices' memories. Compute streams keep running meanwhile.
//! 4. A rank that never joins makes the others fail with `ACL_ERROR_RT_WAIT_TIMEOUT` after the
//!    communicator's `exec_timeout` of simulated time, so their synchronize returns an error
//!    instead of hanging.
//!
//! [`Collectives::memcpy_peer_async`](crate::Collectives::memcpy_peer_async) copies between two devices' memories over the links of its
//! route. Buffers handed to the interconnect (RDMA) must be device memory or pinned host memory
//! from [`Memory::malloc_host`](crate::Memory::malloc_host); pageable host memory is refused.

use bevy_ecs::prelude::*;
use npusim_components::collective::{
    CollectiveCall, CollectiveKind, CommConfig, CommState, DataType, Interconnect, PeerCopy,
    ReduceOp,
};
use npusim_components::task::{CopyDir, CopyView, TaskDescriptor, TaskExtra};
use npusim_components::{
    ContextState, DevicePtr, DeviceState, HostBuffer, NpuError, NpuResult, SimTime, Stream,
    StreamState,
};
use npusim_device::link::{LinkConfig, Node, Topology};

use crate::launch::Submission;
use crate::runtime::{Inner, Runtime, device_entity};

/// One rank's handle on a communicator (`HcclComm`). Copyable; checked on every use.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Communicator {
    runtime: u32,
    pub(crate) entity: Entity,
    id: u32,
    rank: u32,
    size: u32,
    device: u32,
}

impl Communicator {
    /// This handle's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The device this rank lives on.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The communicator's display id (the same for all its ranks).
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "communicator {} rank {}/{} (device {})",
            self.id, self.rank, self.size, self.device
        )
    }
}

impl std::fmt::Display for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A buffer for a send or receive: device memory, or pinned host memory (read or written by
/// the interconnect directly, as RDMA does).
#[derive(Clone, Debug)]
pub enum CommBuffer {
    /// Device memory of the calling rank's context.
    Device(DevicePtr),
    /// Host memory; must be pinned ([`Memory::malloc_host`](crate::Memory::malloc_host)).
    Host(HostBuffer),
}

impl From<DevicePtr> for CommBuffer {
    fn from(p: DevicePtr) -> Self {
        CommBuffer::Device(p)
    }
}

impl From<HostBuffer> for CommBuffer {
    fn from(b: HostBuffer) -> Self {
        CommBuffer::Host(b)
    }
}

impl From<&HostBuffer> for CommBuffer {
    fn from(b: &HostBuffer) -> Self {
        CommBuffer::Host(b.clone())
    }
}

/// What a link has done so far.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkStats {
    /// Link id (its index in [`Topology::links`]).
    pub id: u32,
    /// Sending end.
    pub from: Node,
    /// Receiving end.
    pub to: Node,
    /// Its bandwidth and latency.
    pub config: LinkConfig,
    /// Simulated time it was held.
    pub busy: SimTime,
    /// Bytes it carried.
    pub bytes: u64,
    /// Collectives and peer copies that used it.
    pub transfers: u64,
}

/// One side of a call, checked.
struct Buffer {
    addr: u64,
    host: Option<HostBuffer>,
}

impl Runtime {
    fn check_comm<'a>(&self, g: &'a Inner, comm: &Communicator) -> NpuResult<&'a CommState> {
        if comm.runtime != self.id() {
            return Err(NpuError::ForeignHandle(comm.to_string()));
        }
        let state = g
            .world
            .get::<CommState>(comm.entity)
            .filter(|c| c.id == comm.id)
            .ok_or_else(|| NpuError::Destroyed(comm.to_string()))?;
        if state
            .destroyed
            .get(comm.rank as usize)
            .copied()
            .unwrap_or(true)
        {
            return Err(NpuError::Destroyed(comm.to_string()));
        }
        Ok(state)
    }

    /// Every collective, checked and rung.
    #[track_caller]
    pub(crate) fn enqueue_collective(
        &self,
        comm: &Communicator,
        stream: Stream,
        what: CollectiveOp,
    ) -> NpuResult<Submission> {
        let CollectiveOp {
            kind,
            dtype,
            op,
            count,
            peer,
            send,
            recv,
        } = what;
        let mut g = self.lock();
        let state = self.check_comm(&g, comm)?;
        if let Some(err) = &state.broken {
            return Err(err.clone());
        }
        let n = state.devices.len() as u64;
        let (s, ctx) = self.check_stream(&g, stream)?;
        let stream_device = g.world.get::<StreamState>(s).expect("checked").device_index;
        if stream_device != comm.device {
            return Err(NpuError::InvalidParam(format!(
                "{stream} is on device {stream_device}, but {comm} is on device {}",
                comm.device
            )));
        }
        if peer >= comm.size {
            return Err(NpuError::InvalidParam(format!(
                "rank {peer} does not exist in {comm}"
            )));
        }
        if kind.is_p2p() && peer == comm.rank {
            return Err(NpuError::InvalidParam(format!(
                "{comm} cannot {} to itself",
                kind.name()
            )));
        }
        let bytes = count
            .checked_mul(dtype.size())
            .ok_or_else(|| NpuError::InvalidParam(format!("{count} elements overflow")))?;
        let (send_len, recv_len, message) = match kind {
            CollectiveKind::AllReduce | CollectiveKind::Broadcast => (bytes, bytes, bytes),
            CollectiveKind::Send | CollectiveKind::Recv => (bytes, bytes, bytes),
            CollectiveKind::AllGather => {
                let total = bytes.checked_mul(n).ok_or_else(|| {
                    NpuError::InvalidParam(format!("{count} x {n} elements overflow"))
                })?;
                (bytes, total, total)
            }
            CollectiveKind::ReduceScatter => {
                let total = bytes.checked_mul(n).ok_or_else(|| {
                    NpuError::InvalidParam(format!("{count} x {n} elements overflow"))
                })?;
                (total, bytes, total)
            }
        };
        let check = |buf: Option<CommBuffer>, len: u64, what: &'static str| -> NpuResult<Buffer> {
            match buf {
                None => Ok(Buffer {
                    addr: 0,
                    host: None,
                }),
                Some(CommBuffer::Device(p)) => {
                    self.check_range(&g, ctx, p, len, what)?;
                    Ok(Buffer {
                        addr: p.0,
                        host: None,
                    })
                }
                Some(CommBuffer::Host(h)) => {
                    if !h.is_pinned() {
                        return Err(NpuError::InvalidMemoryType(format!(
                            "the {what} is pageable host memory; the interconnect reads and \
                             writes it directly (RDMA), which needs device memory or pinned host \
                             memory from malloc_host"
                        )));
                    }
                    let have = h.bytes()?.len() as u64;
                    if len > have {
                        return Err(NpuError::InvalidParam(format!(
                            "{len} bytes do not fit the {what}, a host buffer of {have} bytes"
                        )));
                    }
                    Ok(Buffer {
                        addr: 0,
                        host: Some(h),
                    })
                }
            }
        };
        let send = check(send, send_len, "send buffer")?;
        let recv = check(recv, recv_len, "receive buffer")?;
        let state = g.world.get_mut::<CommState>(comm.entity).expect("checked");
        let mut state = state;
        let (r, p, size) = (comm.rank as usize, peer as usize, n as usize);
        let counter = match kind {
            CollectiveKind::Send => &mut state.sends[r * size + p],
            CollectiveKind::Recv => &mut state.recvs[p * size + r],
            _ => &mut state.next_seq[r],
        };
        let seq = *counter;
        *counter += 1;
        let call = CollectiveCall {
            kind,
            dtype,
            op,
            comm: comm.entity,
            send: send.addr,
            recv: recv.addr,
            count,
            rank: comm.rank,
            peer,
            seq,
            bytes: message,
        };
        // The host sides, for the recorder only.
        let hosts = g
            .recorder
            .is_some()
            .then(|| (send.host.clone(), recv.host.clone()));
        let extra = match send.host.or(recv.host) {
            Some(buffer) => TaskExtra::Host { buffer, offset: 0 },
            None => TaskExtra::None,
        };
        let cost = g.costs.launch_ns;
        let position = crate::launch::submit(&mut g, s, call.encode(), extra, cost);
        if let Some(mut state) = g.world.get_mut::<CommState>(comm.entity) {
            state.enqueued(s, position);
        }
        // A wait of another thread may sleep at the rendezvous for this part.
        g.callbacks.hub().poke();
        g.record(|r, _| crate::record::collective(r, &call, hosts, comm, s));
        Ok(Submission::new(stream, position))
    }
}

/// Communicators and collectives across devices, peer copies, the topology and its links
/// (HCCL's `HcclCommInitAll`, `HcclAllReduce` …).
/// Reached through [`Runtime::collectives`].
#[derive(Clone, Copy)]
pub struct Collectives<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Communicators, collectives, peer copies and the topology.
    pub fn collectives(&self) -> Collectives<'_> {
        Collectives { rt: self }
    }
}

impl Collectives<'_> {
    /// Makes a communicator with one rank per device in `devices` (rank `r` on device
    /// `devices[r]`), as `HcclCommInitAll`; returns the ranks' handles in rank order.
    pub fn init_all(&self, devices: &[u32]) -> NpuResult<Vec<Communicator>> {
        self.init_all_with(devices, CommConfig::default())
    }

    /// As [`Collectives::init_all`](crate::Collectives::init_all), with an algorithm and a rendezvous timeout.
    pub fn init_all_with(
        &self,
        devices: &[u32],
        config: CommConfig,
    ) -> NpuResult<Vec<Communicator>> {
        if devices.is_empty() {
            return Err(NpuError::InvalidParam(
                "a communicator needs at least one device".into(),
            ));
        }
        let mut g = self.rt.lock();
        for (i, &d) in devices.iter().enumerate() {
            device_entity(&g.world, d)?;
            if devices[..i].contains(&d) {
                return Err(NpuError::InvalidParam(format!(
                    "device {d} is listed twice: a communicator has one rank per device"
                )));
            }
        }
        let n = devices.len();
        let cost = g.costs.call_ns * n as u64;
        g.charge(cost);
        let id = g.next_comm_id;
        g.next_comm_id += 1;
        let entity = g
            .world
            .spawn(CommState {
                id,
                devices: devices.to_vec(),
                config,
                next_seq: vec![0; n],
                sends: vec![0; n * n],
                recvs: vec![0; n * n],
                destroyed: vec![false; n],
                broken: None,
                queued: Vec::new(),
            })
            .id();
        g.record(|r, _| crate::record::Call::CommInit {
            devices: devices.to_vec(),
            comm: r.comm(entity),
        });
        Ok(devices
            .iter()
            .enumerate()
            .map(|(rank, &device)| Communicator {
                runtime: self.rt.id(),
                entity,
                id,
                rank: rank as u32,
                size: n as u32,
                device,
            })
            .collect())
    }

    /// Destroys this rank's handle (`HcclCommDestroy`); the communicator goes when every rank's
    /// handle is destroyed. Operations already enqueued still run: a communicator whose last
    /// handle goes while some are queued goes once they have run.
    pub fn destroy(&self, comm: Communicator) -> NpuResult<()> {
        let mut g = self.rt.lock();
        self.rt.check_comm(&g, &comm)?;
        let mut state = g.world.get_mut::<CommState>(comm.entity).expect("checked");
        state.destroyed[comm.rank as usize] = true;
        if state.destroyed.iter().all(|d| *d) {
            g.closing_comms.push(comm.entity);
            close_drained_comms(&mut g);
        }
        g.record(|r, _| crate::record::Call::CommDestroy {
            comm: r.comm(comm.entity),
            rank: comm.rank,
        });
        Ok(())
    }

    /// The error that broke the communicator (a rank that timed out at a rendezvous), if any.
    pub fn error(&self, comm: &Communicator) -> NpuResult<Option<NpuError>> {
        let g = self.rt.lock();
        Ok(self.rt.check_comm(&g, comm)?.broken.clone())
    }

    /// Enqueues a copy of `bytes` bytes from `src` on device `src_device` to `dst` on device
    /// `dst_device`, over the links between them (`cudaMemcpyPeerAsync`). `stream` is in the
    /// current context, on one of the two devices; memory on that device belongs to the current
    /// context, memory on the other to that device's primary context.
    #[track_caller]
    pub fn memcpy_peer_async(
        &self,
        dst: DevicePtr,
        dst_device: u32,
        src: DevicePtr,
        src_device: u32,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let (s, ctx) = self.rt.check_stream(&g, stream)?;
        let here = g
            .world
            .get::<ContextState>(ctx)
            .expect("checked")
            .device_index;
        let primary = |g: &Inner, d: u32| -> NpuResult<Entity> {
            let e = device_entity(&g.world, d)?;
            Ok(g.world
                .get::<DeviceState>(e)
                .expect("device entity")
                .default_context)
        };
        let ctx_of = |g: &Inner, d: u32| -> NpuResult<Entity> {
            if d == here { Ok(ctx) } else { primary(g, d) }
        };
        let (src_ctx, dst_ctx) = (ctx_of(&g, src_device)?, ctx_of(&g, dst_device)?);
        if here != src_device && here != dst_device {
            return Err(NpuError::InvalidParam(format!(
                "{stream} is on device {here}, neither the source device {src_device} nor the \
                 destination device {dst_device}"
            )));
        }
        self.rt
            .check_range(&g, src_ctx, src, bytes, "peer copy source")?;
        self.rt
            .check_range(&g, dst_ctx, dst, bytes, "peer copy destination")?;
        let desc = if src_device == dst_device {
            TaskDescriptor::copy(CopyView {
                dst: dst.0,
                src: src.0,
                bytes,
                dir: CopyDir::DeviceToDevice,
            })
        } else {
            PeerCopy {
                dst: dst.0,
                src: src.0,
                bytes,
                src_device,
                dst_device,
                src_ctx,
                dst_ctx,
            }
            .encode()
        };
        let cost = g.costs.copy_call_ns;
        crate::launch::submit(&mut g, s, desc, TaskExtra::None, cost);
        g.record(|r, _| crate::record::Call::CopyPeer {
            dst: dst.0,
            dst_device,
            src: src.0,
            src_device,
            bytes,
            stream: r.stream(s),
        });
        Ok(())
    }

    /// As [`Collectives::memcpy_peer_async`](crate::Collectives::memcpy_peer_async) on the current context's default stream, waiting for
    /// the copy.
    #[track_caller]
    pub fn memcpy_peer(
        &self,
        dst: DevicePtr,
        dst_device: u32,
        src: DevicePtr,
        src_device: u32,
        bytes: u64,
    ) -> NpuResult<()> {
        let stream = self.rt.contexts().default_stream()?;
        self.memcpy_peer_async(dst, dst_device, src, src_device, bytes, stream)?;
        self.rt.streams().synchronize(stream)
    }

    /// The interconnect: its links, their bandwidths and latencies, and routing. (If an
    /// embedder removed it: the default topology of the runtime's devices.)
    pub fn topology(&self) -> Topology {
        let g = self.rt.lock();
        match g.world.get_resource::<Interconnect>() {
            Some(ic) => ic.topology.clone(),
            None => Topology::new(Default::default(), g.devices.len() as u32)
                .unwrap_or_else(|_| Interconnect::default().topology),
        }
    }

    /// What each link has carried so far (nothing if an embedder removed the interconnect).
    pub fn link_stats(&self) -> Vec<LinkStats> {
        let g = self.rt.lock();
        let Some(ic) = g.world.get_resource::<Interconnect>() else {
            return Vec::new();
        };
        ic.topology
            .links()
            .iter()
            .zip(&ic.links)
            .enumerate()
            .map(|(id, (l, u))| LinkStats {
                id: id as u32,
                from: l.from,
                to: l.to,
                config: l.config,
                busy: SimTime(u.busy_ns),
                bytes: u.bytes,
                transfers: u.transfers,
            })
            .collect()
    }

    /// Per device: simulated time its communication engine ran collectives (nothing if an
    /// embedder removed the interconnect).
    pub fn engine_busy(&self) -> Vec<SimTime> {
        let g = self.rt.lock();
        g.world
            .get_resource::<Interconnect>()
            .map_or_else(Vec::new, |ic| {
                ic.engines.iter().map(|e| SimTime(e.busy_ns)).collect()
            })
    }
}

/// Despawns each communicator of [`Inner::closing_comms`] whose queued operations have all run
/// (or failed); the others stay closing. Called when the last handle goes and after each frame
/// while any is closing.
pub(crate) fn close_drained_comms(inner: &mut Inner) {
    let world = &mut inner.world;
    inner.closing_comms.retain(|&comm| {
        let drained = world.get::<CommState>(comm).is_none_or(|state| {
            state.drained(|s| world.get::<StreamState>(s).map(|st| st.completed))
        });
        if drained {
            world.despawn(comm);
        }
        !drained
    });
}

/// What one rank's part of a collective does, before it has a communicator and a stream:
/// made by [`Collective::all_reduce`] and its siblings, enqueued with [`CollectiveOp::on`].
#[derive(Clone, Debug)]
#[must_use = "a collective does nothing until it is submitted"]
pub struct CollectiveOp {
    pub(crate) kind: CollectiveKind,
    pub(crate) dtype: DataType,
    pub(crate) op: ReduceOp,
    pub(crate) count: u64,
    /// The peer of a send or receive, the root of a broadcast.
    pub(crate) peer: u32,
    pub(crate) send: Option<CommBuffer>,
    pub(crate) recv: Option<CommBuffer>,
}

impl CollectiveOp {
    /// This rank's part on `comm`, enqueued on `stream` (a stream of the rank's device) by
    /// [`Runtime::submit`].
    pub fn on(self, comm: &Communicator, stream: Stream) -> Collective<'_> {
        Collective {
            comm,
            stream,
            what: self,
        }
    }
}

/// One rank's part of a collective on a communicator and a stream, for [`Runtime::submit`]
/// (HCCL's `HcclAllReduce`, `HcclAllGather`, `HcclReduceScatter`, `HcclBroadcast`, `HcclSend`,
/// `HcclRecv`). Every rank of the communicator submits its part; the parts meet on the device.
///
/// ```
/// # use npusim_engine::prelude::*;
/// # use npusim_engine::{DataType, ReduceOp};
/// # let rt = Runtime::new(RuntimeConfig { devices: 2, ..Default::default() })?;
/// let comms = rt.collectives().init_all(&[0, 1])?;
/// for comm in &comms {
///     rt.contexts().set_device(comm.device())?;
///     let s = rt.contexts().default_stream()?;
///     let buf = rt.memory().malloc(4 * 256)?;
///     rt.memory().memset(buf, 0, 4 * 256)?;
///     rt.submit(Collective::all_reduce(buf, buf, 256, DataType::F32, ReduceOp::Sum).on(comm, s))?;
/// }
/// rt.synchronize_device()?;
/// # Ok::<(), NpuError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a collective does nothing until it is submitted"]
pub struct Collective<'a> {
    comm: &'a Communicator,
    stream: Stream,
    what: CollectiveOp,
}

impl Collective<'_> {
    /// This rank's part of an all-reduce (`HcclAllReduce`): every rank's `recv` gets the
    /// element-wise `op` of every rank's `send` (`count` elements; in place is allowed).
    pub fn all_reduce(
        send: DevicePtr,
        recv: DevicePtr,
        count: u64,
        dtype: DataType,
        op: ReduceOp,
    ) -> CollectiveOp {
        CollectiveOp::device(CollectiveKind::AllReduce, send, recv, count, dtype, op)
    }

    /// This rank's part of an all-gather (`HcclAllGather`): every rank's `recv`
    /// (`send_count × size` elements) gets every rank's `send_count` elements in rank order.
    pub fn all_gather(
        send: DevicePtr,
        recv: DevicePtr,
        send_count: u64,
        dtype: DataType,
    ) -> CollectiveOp {
        CollectiveOp::device(
            CollectiveKind::AllGather,
            send,
            recv,
            send_count,
            dtype,
            ReduceOp::Sum,
        )
    }

    /// This rank's part of a reduce-scatter (`HcclReduceScatter`): rank `r`'s `recv`
    /// (`recv_count` elements) gets block `r` of the element-wise `op` of every rank's `send`
    /// (`recv_count × size` elements).
    pub fn reduce_scatter(
        send: DevicePtr,
        recv: DevicePtr,
        recv_count: u64,
        dtype: DataType,
        op: ReduceOp,
    ) -> CollectiveOp {
        CollectiveOp::device(
            CollectiveKind::ReduceScatter,
            send,
            recv,
            recv_count,
            dtype,
            op,
        )
    }

    /// This rank's part of a broadcast (`HcclBroadcast`): every rank's `buf` gets rank
    /// `root`'s `count` elements.
    pub fn broadcast(buf: DevicePtr, count: u64, dtype: DataType, root: u32) -> CollectiveOp {
        CollectiveOp {
            peer: root,
            ..CollectiveOp::device(
                CollectiveKind::Broadcast,
                buf,
                buf,
                count,
                dtype,
                ReduceOp::Sum,
            )
        }
    }

    /// Sending `count` elements of `buf` to rank `peer` (`HcclSend`); it pairs with the peer's
    /// matching [`Collective::recv`] (the k-th send to a peer with its k-th receive from this
    /// rank). `buf` is device memory or pinned host memory.
    pub fn send(
        buf: impl Into<CommBuffer>,
        count: u64,
        dtype: DataType,
        peer: u32,
    ) -> CollectiveOp {
        CollectiveOp::point_to_point(CollectiveKind::Send, buf.into(), count, dtype, peer)
    }

    /// Receiving `count` elements from rank `peer` into `buf` (`HcclRecv`); device memory or
    /// pinned host memory.
    pub fn recv(
        buf: impl Into<CommBuffer>,
        count: u64,
        dtype: DataType,
        peer: u32,
    ) -> CollectiveOp {
        CollectiveOp::point_to_point(CollectiveKind::Recv, buf.into(), count, dtype, peer)
    }
}

impl CollectiveOp {
    /// A send or a receive (`kind`) of `buf` with rank `peer`.
    fn point_to_point(
        kind: CollectiveKind,
        buf: CommBuffer,
        count: u64,
        dtype: DataType,
        peer: u32,
    ) -> Self {
        let (send, recv) = match kind {
            CollectiveKind::Send => (Some(buf), None),
            _ => (None, Some(buf)),
        };
        Self {
            kind,
            dtype,
            op: ReduceOp::Sum,
            count,
            peer,
            send,
            recv,
        }
    }

    /// A collective from `send` to `recv` in device memory.
    fn device(
        kind: CollectiveKind,
        send: DevicePtr,
        recv: DevicePtr,
        count: u64,
        dtype: DataType,
        op: ReduceOp,
    ) -> Self {
        Self {
            kind,
            dtype,
            op,
            count,
            peer: 0,
            send: Some(send.into()),
            recv: Some(recv.into()),
        }
    }
}

impl crate::launch::sealed::Sealed for Collective<'_> {}

impl crate::launch::Command for Collective<'_> {
    #[track_caller]
    fn enqueue(self, rt: &Runtime) -> NpuResult<Submission> {
        rt.enqueue_collective(self.comm, self.stream, self.what)
    }
}
