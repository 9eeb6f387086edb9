//! Collectives across devices: the data of communicators (one rank per device, as
//! `HcclCommInitAll` makes them), the words a collective task carries in its descriptor, the
//! interconnect's links and communication engines with what holds them, and the rendezvous
//! table where each rank's task waits until every rank of the same operation has arrived.
//!
//! A collective is one task per rank, each on that rank's stream. When a rank's task reaches
//! the head of its stream with its event waits met, dispatch parks it in [`Rendezvous`]; the
//! operation starts when the last rank arrives and its links and engines are free, and every
//! rank's task then runs from the same start to the same end. The data moves once, when the
//! first of them completes in the hardware tick.

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;
use npusim_device::link::{CollectiveAlgorithm, Topology, TopologyConfig};

use crate::descriptor::TaskDescriptor;
use crate::error::NpuError;
use crate::time::SimTime;

/// Element type of a collective's buffers (`HcclDataType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DataType {
    /// 32-bit float.
    F32 = 1,
    /// IEEE 754 half precision (reductions accumulate in f32 and round once).
    F16 = 2,
    /// 32-bit signed integer (sums and products wrap).
    I32 = 3,
}

impl DataType {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            DataType::F32 | DataType::I32 => 4,
            DataType::F16 => 2,
        }
    }

    /// From a descriptor byte.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => DataType::F32,
            2 => DataType::F16,
            3 => DataType::I32,
            _ => return None,
        })
    }
}

/// Reduction of a collective (`HcclReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ReduceOp {
    /// Sum.
    Sum = 1,
    /// Product.
    Prod = 2,
    /// Maximum.
    Max = 3,
    /// Minimum.
    Min = 4,
}

impl ReduceOp {
    /// From a descriptor byte.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => ReduceOp::Sum,
            2 => ReduceOp::Prod,
            3 => ReduceOp::Max,
            4 => ReduceOp::Min,
            _ => return None,
        })
    }
}

/// Which collective a task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CollectiveKind {
    /// Every rank gets the reduction of every rank's buffer.
    AllReduce = 1,
    /// Every rank gets every rank's buffer, concatenated in rank order.
    AllGather = 2,
    /// Rank `r` gets block `r` of the reduction of every rank's buffer.
    ReduceScatter = 3,
    /// Every rank gets the root's buffer.
    Broadcast = 4,
    /// This rank sends its buffer to a peer.
    Send = 5,
    /// This rank receives a peer's buffer.
    Recv = 6,
}

impl CollectiveKind {
    /// From a descriptor byte.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => CollectiveKind::AllReduce,
            2 => CollectiveKind::AllGather,
            3 => CollectiveKind::ReduceScatter,
            4 => CollectiveKind::Broadcast,
            5 => CollectiveKind::Send,
            6 => CollectiveKind::Recv,
            _ => return None,
        })
    }

    /// The name shown in timelines.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::Broadcast => "broadcast",
            CollectiveKind::Send => "send",
            CollectiveKind::Recv => "recv",
        }
    }

    /// Whether this is half of a point-to-point pair.
    pub fn is_p2p(self) -> bool {
        matches!(self, CollectiveKind::Send | CollectiveKind::Recv)
    }
}

/// Argument words of a collective task's descriptor (`desc.args[...]`). Its `flags` word holds
/// the [`CollectiveKind`] in bits 0–7, the [`DataType`] in bits 8–15 and the [`ReduceOp`] in
/// bits 16–23.
mod word {
    /// The communicator entity's bits.
    pub const COMM: usize = 0;
    /// Send buffer device address (0: the task's host buffer, or none).
    pub const SEND: usize = 1;
    /// Receive buffer device address (0: the task's host buffer, or none).
    pub const RECV: usize = 2;
    /// Element count: all-reduce and broadcast buffers, all-gather send buffer, reduce-scatter
    /// receive buffer, send / recv buffer.
    pub const COUNT: usize = 3;
    /// The calling rank.
    pub const RANK: usize = 4;
    /// Broadcast root, or the peer of a send / recv.
    pub const PEER: usize = 5;
    /// Which operation of the communicator this is (matches the ranks' tasks).
    pub const SEQ: usize = 6;
    /// Message size `S` in bytes, as the cost model counts it.
    pub const BYTES: usize = 7;
    /// Words used.
    pub const COUNT_WORDS: u32 = 8;
}

/// The collective fields of a descriptor, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveCall {
    /// Which collective.
    pub kind: CollectiveKind,
    /// Element type.
    pub dtype: DataType,
    /// Reduction (ignored by non-reducing collectives).
    pub op: ReduceOp,
    /// The communicator entity.
    pub comm: Entity,
    /// Send buffer address (0 for host memory or in-place broadcast).
    pub send: u64,
    /// Receive buffer address.
    pub recv: u64,
    /// Element count: all-reduce and broadcast buffers, all-gather send buffer, reduce-scatter
    /// receive buffer, send / recv buffer.
    pub count: u64,
    /// Calling rank.
    pub rank: u32,
    /// Root or peer rank.
    pub peer: u32,
    /// Operation sequence number.
    pub seq: u64,
    /// Message size for the cost model.
    pub bytes: u64,
}

impl CollectiveCall {
    /// Which operation of its communicator this rank's call belongs to (the rendezvous key): a
    /// send and the receive that matches it share one.
    pub fn op_key(&self) -> OpKey {
        match self.kind {
            CollectiveKind::Send => OpKey::PointToPoint {
                from: self.rank,
                to: self.peer,
                seq: self.seq,
            },
            CollectiveKind::Recv => OpKey::PointToPoint {
                from: self.peer,
                to: self.rank,
                seq: self.seq,
            },
            _ => OpKey::Collective(self.seq),
        }
    }

    /// Encodes into a collective task descriptor.
    pub fn encode(&self) -> TaskDescriptor {
        let mut d = TaskDescriptor::new(crate::descriptor::TaskKind::Collective);
        d.flags = self.kind as u32 | (self.dtype as u32) << 8 | (self.op as u32) << 16;
        d.arg_count = word::COUNT_WORDS;
        d.args[word::COMM] = self.comm.to_bits();
        d.args[word::SEND] = self.send;
        d.args[word::RECV] = self.recv;
        d.args[word::COUNT] = self.count;
        d.args[word::RANK] = self.rank as u64;
        d.args[word::PEER] = self.peer as u64;
        d.args[word::SEQ] = self.seq;
        d.args[word::BYTES] = self.bytes;
        d
    }

    /// Decodes a collective task descriptor (`None` if the words are corrupt).
    pub fn decode(d: &TaskDescriptor) -> Option<Self> {
        Some(Self {
            kind: CollectiveKind::from_u32(d.flags & 0xff)?,
            dtype: DataType::from_u32((d.flags >> 8) & 0xff)?,
            op: ReduceOp::from_u32((d.flags >> 16) & 0xff)?,
            comm: Entity::try_from_bits(d.args[word::COMM])?,
            send: d.args[word::SEND],
            recv: d.args[word::RECV],
            count: d.args[word::COUNT],
            rank: d.args[word::RANK] as u32,
            peer: d.args[word::PEER] as u32,
            seq: d.args[word::SEQ],
            bytes: d.args[word::BYTES],
        })
    }

    /// What the collective reads and writes on its rank: its send buffer and its receive
    /// buffer, by block (their extents depend on the communicator's size). A broadcast's root
    /// only reads its buffer and every other rank only writes its own: a non-root rank's
    /// buffer may be uninitialised before the broadcast fills it.
    pub fn accesses(&self, out: &mut crate::access::AccessSet) {
        use crate::access::{Access, AccessMode, Space};
        out.mark_inexact();
        let (send, recv) = match self.kind {
            CollectiveKind::Broadcast if self.rank == self.peer => (self.send, 0),
            CollectiveKind::Broadcast => (0, self.recv),
            _ => (self.send, self.recv),
        };
        for (addr, mode) in [(send, AccessMode::Read), (recv, AccessMode::Write)] {
            if addr != 0 {
                out.push(Access {
                    addr,
                    bytes: 0,
                    mode,
                    space: Space::Local,
                });
            }
        }
    }
}

/// A copy from one device to another over the interconnect: a memcpy task whose direction is
/// [`crate::descriptor::CopyDir::Peer`]. Its words are encoded and decoded only here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCopy {
    /// Destination address (on the destination device).
    pub dst: u64,
    /// Source address (on the source device).
    pub src: u64,
    /// Bytes.
    pub bytes: u64,
    /// Source device index.
    pub src_device: u32,
    /// Destination device index.
    pub dst_device: u32,
    /// Context owning the source memory.
    pub src_ctx: Entity,
    /// Context owning the destination memory.
    pub dst_ctx: Entity,
}

impl PeerCopy {
    /// Encodes into a memcpy descriptor.
    pub fn encode(&self) -> TaskDescriptor {
        let mut d = TaskDescriptor::new(crate::descriptor::TaskKind::Memcpy);
        d.flags = crate::descriptor::CopyDir::Peer as u32;
        d.args[..7].copy_from_slice(&[
            self.dst,
            self.src,
            self.bytes,
            self.src_device as u64,
            self.dst_device as u64,
            self.src_ctx.to_bits(),
            self.dst_ctx.to_bits(),
        ]);
        d.arg_count = 7;
        d
    }

    /// Decodes a peer-copy descriptor (`None` for anything else, or corrupt words).
    pub fn decode(d: &TaskDescriptor) -> Option<Self> {
        if !d.is_peer_copy() {
            return None;
        }
        Some(Self {
            dst: d.args[0],
            src: d.args[1],
            bytes: d.args[2],
            src_device: d.args[3] as u32,
            dst_device: d.args[4] as u32,
            src_ctx: Entity::try_from_bits(d.args[5])?,
            dst_ctx: Entity::try_from_bits(d.args[6])?,
        })
    }
}

/// How a communicator behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommConfig {
    /// Algorithm of its collectives.
    pub algorithm: CollectiveAlgorithm,
    /// How long a rank's task waits at the rendezvous for the other ranks before it fails with
    /// `ACL_ERROR_RT_WAIT_TIMEOUT` (simulated time; HCCL's `HCCL_EXEC_TIMEOUT`, 1836 s by
    /// default).
    pub exec_timeout: SimTime,
}

impl Default for CommConfig {
    fn default() -> Self {
        Self {
            algorithm: CollectiveAlgorithm::Auto,
            exec_timeout: SimTime::from_ms(1_836_000),
        }
    }
}

/// A communicator: one rank per device.
#[derive(Component, Debug)]
pub struct CommState {
    /// Small number shown in messages and timelines.
    pub id: u32,
    /// Device index of each rank.
    pub devices: Vec<u32>,
    /// Its configuration.
    pub config: CommConfig,
    /// Per rank: collectives (not send / recv) enqueued so far.
    pub next_seq: Vec<u64>,
    /// Per (sender, receiver) rank pair, row-major: sends enqueued so far.
    pub sends: Vec<u64>,
    /// Per (sender, receiver) rank pair, row-major: receives enqueued so far.
    pub recvs: Vec<u64>,
    /// Per rank: whether its handle was destroyed.
    pub destroyed: Vec<bool>,
    /// Set when an operation timed out: the communicator cannot be used any more.
    pub broken: Option<NpuError>,
    /// Per stream its operations were enqueued on: the stream position of the latest one.
    /// Once every one of these positions has completed, none of its operations is left to run.
    pub queued: Vec<(Entity, u64)>,
}

impl CommState {
    /// Notes that an operation was enqueued at position `seq` of `stream`.
    pub fn enqueued(&mut self, stream: Entity, seq: u64) {
        match self.queued.iter_mut().find(|(s, _)| *s == stream) {
            Some(q) => q.1 = q.1.max(seq),
            None => self.queued.push((stream, seq)),
        }
    }

    /// Whether every operation enqueued on it has run (or failed): `completed` gives a
    /// stream's completed position, `None` for a destroyed stream (nothing left to run there).
    pub fn drained(&self, completed: impl Fn(Entity) -> Option<u64>) -> bool {
        self.queued
            .iter()
            .all(|&(s, seq)| completed(s).is_none_or(|done| done >= seq))
    }
}

/// Which operation of a communicator a rank's task belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKey {
    /// The `seq`-th collective of the communicator.
    Collective(u64),
    /// The `seq`-th send from rank `from` to rank `to` (and the matching receive).
    PointToPoint {
        /// Sender rank.
        from: u32,
        /// Receiver rank.
        to: u32,
        /// Sequence number of the pair.
        seq: u64,
    },
}

/// One rank's task at the rendezvous.
#[derive(Clone, Debug)]
pub struct Arrival {
    /// The task.
    pub task: Entity,
    /// Its stream and sequence number (to notice a recycled entity).
    pub stream: Entity,
    /// Sequence number on the stream.
    pub seq: u64,
    /// When it arrived.
    pub at: SimTime,
    /// Its call.
    pub call: CollectiveCall,
}

/// Where an operation is.
#[derive(Clone, Debug, PartialEq)]
pub enum OpPhase {
    /// Waiting for ranks, or for links and engines.
    Waiting,
    /// Moving data until `end`; `left` rank tasks have yet to complete; the data moved (with
    /// this result) when the first completed.
    Running {
        /// When it ends.
        end: SimTime,
        /// Rank tasks not yet completed.
        left: u32,
        /// The outcome, once the data moved.
        result: Option<Result<(), NpuError>>,
    },
}

/// One operation of a communicator, from its first rank's arrival to its last rank's
/// completion.
#[derive(Clone, Debug)]
pub struct CommOp {
    /// The communicator.
    pub comm: Entity,
    /// Its display id.
    pub comm_id: u32,
    /// Which operation.
    pub key: OpKey,
    /// Device index of every rank of the communicator.
    pub devices: Vec<u32>,
    /// The communicator's configuration.
    pub config: CommConfig,
    /// Arrived tasks: one slot per rank for a collective; sender then receiver for send / recv.
    pub slots: Vec<Option<Arrival>>,
    /// Where it is.
    pub phase: OpPhase,
}

impl CommOp {
    /// Ranks arrived so far.
    pub fn arrived(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

/// Operations whose ranks are arriving or whose data is moving.
#[derive(Resource, Debug, Default)]
pub struct Rendezvous {
    /// Rank tasks dispatch found ready this frame, in dispatch order.
    pub arriving: Vec<Entity>,
    /// In order of first arrival.
    pub ops: Vec<CommOp>,
    /// The earliest moment a waiting rank times out, if any waits.
    pub next_deadline: Option<SimTime>,
}

/// What one directed link has carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkUse {
    /// Held until then.
    pub busy_until: SimTime,
    /// Simulated nanoseconds held.
    pub busy_ns: u64,
    /// Bytes carried.
    pub bytes: u64,
    /// Transfers (collectives and peer copies) that used it.
    pub transfers: u64,
}

/// What one device's communication engine has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineUse {
    /// Held until then.
    pub busy_until: SimTime,
    /// Simulated nanoseconds held.
    pub busy_ns: u64,
    /// Collectives run.
    pub ops: u64,
}

/// The links between devices and each device's communication engine, with who holds them.
/// A collective holds every link of its plan and the engine of every rank's device from its
/// start to its end; a peer copy holds the links of its route.
#[derive(Resource, Debug)]
pub struct Interconnect {
    /// Wiring and costs.
    pub topology: Topology,
    /// Per link id.
    pub links: Vec<LinkUse>,
    /// Per device index.
    pub engines: Vec<EngineUse>,
}

impl Interconnect {
    /// The interconnect of `topology`, idle.
    pub fn new(topology: Topology) -> Self {
        Self {
            links: vec![LinkUse::default(); topology.links().len()],
            engines: vec![EngineUse::default(); topology.devices() as usize],
            topology,
        }
    }

    /// Whether every link in `links` is free at `now`.
    pub fn links_free(&self, links: &[(u32, u64)], now: SimTime) -> bool {
        links.iter().all(|(l, _)| {
            self.links
                .get(*l as usize)
                .is_none_or(|u| u.busy_until <= now)
        })
    }

    /// Holds `links` from `start` to `end`.
    pub fn hold_links(&mut self, links: &[(u32, u64)], start: SimTime, end: SimTime) {
        for &(l, bytes) in links {
            if let Some(u) = self.links.get_mut(l as usize) {
                u.busy_until = end;
                u.busy_ns += (end - start).as_ns();
                u.bytes += bytes;
                u.transfers += 1;
            }
        }
    }
}

impl Default for Interconnect {
    fn default() -> Self {
        Self::new(Topology::new(TopologyConfig::default(), 1).expect("default topology"))
    }
}

/// One use of a link, for the timeline's link tracks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRecord {
    /// Link id.
    pub link: u32,
    /// Start.
    pub start: SimTime,
    /// End.
    pub end: SimTime,
    /// Bytes it carried.
    pub bytes: u64,
    /// What used it (`all_reduce`, `memcpy_peer`, …).
    pub name: &'static str,
}

/// Link uses, recorded when the timeline is on.
#[derive(Resource, Debug, Default)]
pub struct LinkTimeline {
    /// In start order.
    pub records: Vec<LinkRecord>,
}

/// IEEE half-precision conversions: the AI core's, so a collective reduces f16 exactly as a
/// kernel would.
pub use npusim_device::core::npu::{f16_to_f32, f32_to_f16};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_round_trips_and_rounds_to_even() {
        for h in [
            0u16, 0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x7c00, 0xfc00,
        ] {
            assert_eq!(f32_to_f16(f16_to_f32(h)), h, "{h:#x}");
        }
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        // 1 + 2^-11 is halfway between 1 and the next half: ties go to even (1).
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02);
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    }

    #[test]
    fn collective_words_round_trip() {
        let call = CollectiveCall {
            kind: CollectiveKind::ReduceScatter,
            dtype: DataType::F16,
            op: ReduceOp::Max,
            comm: Entity::from_raw_u32(7).unwrap(),
            send: 0x1000,
            recv: 0x2000,
            count: 12,
            rank: 3,
            peer: 0,
            seq: 9,
            bytes: 96,
        };
        assert_eq!(CollectiveCall::decode(&call.encode()), Some(call));
    }

    #[test]
    fn a_send_and_its_matching_receive_share_an_operation_key_and_ranks_of_a_collective_do_too() {
        let call = |kind, rank, peer, seq| CollectiveCall {
            kind,
            dtype: DataType::F32,
            op: ReduceOp::Sum,
            comm: Entity::from_raw_u32(7).unwrap(),
            send: 0x1000,
            recv: 0x2000,
            count: 4,
            rank,
            peer,
            seq,
            bytes: 16,
        };
        let send = call(CollectiveKind::Send, 0, 1, 3).op_key();
        assert_eq!(send, call(CollectiveKind::Recv, 1, 0, 3).op_key());
        assert_ne!(send, call(CollectiveKind::Recv, 0, 1, 3).op_key());
        assert_ne!(send, call(CollectiveKind::Send, 0, 1, 4).op_key());
        assert_eq!(
            call(CollectiveKind::AllReduce, 0, 0, 5).op_key(),
            call(CollectiveKind::AllReduce, 2, 0, 5).op_key()
        );
        assert_eq!(
            send,
            OpKey::PointToPoint {
                from: 0,
                to: 1,
                seq: 3
            }
        );
    }
}
