//! Import: a Chakra workload (one ET file per rank) becomes an npusim [`Trace`] that the
//! existing timing-only replay runs ([`npusim_engine::record::replay`]); nothing here models
//! time itself.
//!
//! Each rank is a device. Its nodes are enqueued in dependency order on streams of its own:
//! `COMP_NODE`s on a compute stream, as kernels priced by the preset's roofline from
//! `num_ops` (operations) and `tensor_size` (bytes of device memory moved) over all AI cores,
//! or from `duration_micros` ([`ImportOptions::durations`], and for a node with neither
//! figure); `COMM_COLL_NODE`s on a communication stream per process group, as collectives of
//! `comm_size` bytes on a communicator per `pg_name` (its ranks: those whose traces name it;
//! no `pg_name` is every rank); `COMM_SEND_NODE` / `COMM_RECV_NODE` on a stream per peer, as
//! point-to-point transfers paired by `comm_src`, `comm_dst` and `comm_tag`. A dependency
//! (`ctrl_deps`, `data_deps`) on a node of another stream is an event recorded after that
//! node and waited for before this one; on the same stream, stream order keeps it.
//! `METADATA_NODE`s and CPU ops (`is_cpu_op`) take no device time: what depends on them
//! depends on what they depend on.
//!
//! `comm_size` is each rank's input, as Chakra's PyTorch converter writes it: the buffer of an
//! all-reduce or broadcast, a rank's shard of an all-gather, the whole input of a
//! reduce-scatter. `MEM_LOAD_NODE` / `MEM_STORE_NODE` are copies of `tensor_size` bytes over
//! the host link, on the compute stream. The attributes npusim's export adds (`npusim_unit`,
//! `npusim_block_dim`) choose the unit and the blocks of a compute node. An all-to-all is modelled as an all-gather of `comm_size / N` per rank (the
//! same bytes in and out of every rank); a barrier as an all-reduce of 4 bytes. `REDUCE`,
//! `GATHER` and `SCATTER` are refused, naming the node.
//!
//! What cannot run is found before anything runs where it can be: a dependency on a node the
//! rank does not have, a dependency cycle, a receive no send matches (or the reverse), a group
//! whose ranks do not make the same collectives. A deadlock only the run shows (ranks waiting
//! on each other across streams) ends the replay with an error, not a hang.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use npusim_engine::record::{
    ArgRecord, Call, CommSide, Entry, HostCostsRecord, KernelRef, ReplayOptions, Replayed, Trace,
    TraceHeader,
};
use npusim_engine::{ComputeUnit, DeviceConfig, KernelCost, RuntimeConfig, TopologyConfig};

use crate::error::ChakraError;
use crate::file::EtFile;
use crate::schema::{CollectiveCommType, Node, NodeType};

/// The name of the kernel COMP_NODEs launch (a stand-in with each launch's own cost).
pub const COMP_KERNEL: &str = "chakra_comp";

/// A workload: one Chakra trace per rank, rank `r` at index `r`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    /// The ranks' traces.
    pub ranks: Vec<EtFile>,
}

impl Workload {
    /// Reads `pattern` with `%d` replaced by each rank, `0..devices`; without `devices`, every
    /// consecutive rank from 0 that has a file. A pattern without `%d` is one rank's file.
    pub fn read(pattern: &str, devices: Option<u32>) -> Result<Self, ChakraError> {
        if !pattern.contains("%d") {
            if devices.is_some_and(|d| d != 1) {
                return Err(ChakraError::Options(format!(
                    "{pattern}: a pattern for more than one rank needs %d (trace.%d.et)"
                )));
            }
            return Ok(Self {
                ranks: vec![EtFile::read(pattern)?],
            });
        }
        let name = |r: u32| pattern.replace("%d", &r.to_string());
        let n = match devices {
            Some(0) => return Err(ChakraError::Options("--devices 0: no ranks".into())),
            Some(n) => n,
            None => (0..).take_while(|&r| Path::new(&name(r)).exists()).count() as u32,
        };
        if n == 0 {
            return Err(ChakraError::Options(format!(
                "{}: no such file (rank 0 of {pattern})",
                name(0)
            )));
        }
        let ranks = (0..n)
            .map(|r| EtFile::read(name(r)))
            .collect::<Result<_, _>>()?;
        Ok(Self { ranks })
    }
}

/// How to import a workload.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// The preset every rank's device uses.
    pub device: DeviceConfig,
    /// How the devices are connected.
    pub topology: TopologyConfig,
    /// Price compute nodes by their recorded `duration_micros` instead of the roofline.
    pub durations: bool,
    /// The unit that does a compute node's operations (the cube, f16, by default).
    pub unit: ComputeUnit,
    /// Submit no node before its `start_time_micros` (the host's clock moves there first), so
    /// a trace npusim exported keeps the recorded host's submission times; off, every node is
    /// submitted at once and starts when its dependencies allow.
    pub start_times: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            device: DeviceConfig::ascend_910b(),
            topology: RuntimeConfig::default().topology,
            durations: false,
            unit: ComputeUnit::CubeF16,
            start_times: false,
        }
    }
}

/// Where a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Compute,
    /// Collectives of the group of this id.
    Group(u32),
    /// Point-to-point with this peer.
    Peer(u32),
}

/// What a node does, once read.
#[derive(Clone, Debug)]
enum Work {
    /// No device time (metadata, CPU ops).
    Pass,
    /// A kernel of this cost and block dim.
    Comp(KernelCost, u32),
    Coll {
        kind: u32,
        count: u64,
        group: String,
    },
    P2p {
        send: bool,
        peer: u32,
        tag: u64,
        bytes: u64,
    },
}

const F32: u64 = 4;
/// `CollectiveKind` codes (the trace's).
const ALL_REDUCE: u32 = 1;
const ALL_GATHER: u32 = 2;
const REDUCE_SCATTER: u32 = 3;
const BROADCAST: u32 = 4;
const SEND: u32 = 5;
const RECV: u32 = 6;

fn unit_code(u: ComputeUnit) -> u64 {
    match u {
        ComputeUnit::Vector => 0,
        ComputeUnit::CubeF16 => 1,
        ComputeUnit::CubeF32 => 2,
        ComputeUnit::Scalar => 3,
    }
}

/// The name of a unit in the `npusim_unit` attribute.
pub(crate) fn unit_name(u: ComputeUnit) -> &'static str {
    match u {
        ComputeUnit::Vector => "vector",
        ComputeUnit::CubeF16 => "cube_f16",
        ComputeUnit::CubeF32 => "cube_f32",
        ComputeUnit::Scalar => "scalar",
    }
}

/// A unit by the name export writes in the `npusim_unit` attribute.
pub(crate) fn unit_named(name: &str) -> Option<ComputeUnit> {
    Some(match name {
        "vector" => ComputeUnit::Vector,
        "cube_f16" => ComputeUnit::CubeF16,
        "cube_f32" => ComputeUnit::CubeF32,
        "scalar" => ComputeUnit::Scalar,
        _ => return None,
    })
}

/// The cost that makes a launch on all `d.ai_cores` cores take `ns` nanoseconds (at least the
/// launch overhead).
fn cost_of_duration(d: &DeviceConfig, ns: u64) -> KernelCost {
    let busy = ns.saturating_sub(d.kernel_launch_ns) as f64 * 1e-9;
    let per_core = d.vector_flops_per_cycle as f64 * d.core_clock_hz as f64;
    KernelCost::vector(busy * per_core * d.ai_cores.max(1) as f64, 0.0)
}

fn read_work(rank: u32, n: u32, node: &Node, o: &ImportOptions) -> Result<Work, ChakraError> {
    let bad = |what: String| {
        ChakraError::workload(rank, format!("node {} ({:?}): {what}", node.id, node.name))
    };
    let int = |name: &str| node.attr_u64(name).map_err(&bad);
    let kind = NodeType::try_from(node.r#type).map_err(|_| {
        bad(format!(
            "node type {} is not a Chakra node type",
            node.r#type
        ))
    })?;
    Ok(match kind {
        NodeType::MetadataNode => Work::Pass,
        NodeType::CompNode if node.attr_bool("is_cpu_op") => Work::Pass,
        NodeType::CompNode => {
            let ops = int("num_ops")?.unwrap_or(0);
            let bytes = int("tensor_size")?.unwrap_or(0);
            if o.durations || (ops == 0 && bytes == 0) {
                Work::Comp(
                    cost_of_duration(&o.device, node.duration_micros.saturating_mul(1000)),
                    o.device.ai_cores.max(1),
                )
            } else {
                let unit = match node.attr_str("npusim_unit") {
                    Some(u) => unit_named(u).ok_or_else(|| bad(format!("npusim_unit {u:?}")))?,
                    None => o.unit,
                };
                let blocks = match int("npusim_block_dim")? {
                    Some(b) => u32::try_from(b)
                        .ok()
                        .filter(|&b| b > 0)
                        .ok_or_else(|| bad(format!("npusim_block_dim {b}")))?,
                    None => o.device.ai_cores.max(1),
                };
                Work::Comp(
                    KernelCost {
                        flops: ops as f64,
                        bytes: bytes as f64,
                        unit,
                    },
                    blocks,
                )
            }
        }
        NodeType::CommCollNode => {
            let size = int("comm_size")?.ok_or_else(|| bad("no comm_size".into()))?;
            let ty = int("comm_type")?.ok_or_else(|| bad("no comm_type".into()))?;
            let ty = i32::try_from(ty)
                .ok()
                .and_then(|t| CollectiveCommType::try_from(t).ok())
                .ok_or_else(|| bad(format!("comm_type {ty} is not a Chakra collective")))?;
            let group = node.attr_str("pg_name").unwrap_or("").to_string();
            let elems = size.div_ceil(F32);
            let (kind, count) = match ty {
                CollectiveCommType::AllReduce => (ALL_REDUCE, elems),
                CollectiveCommType::AllGather => (ALL_GATHER, elems),
                CollectiveCommType::Broadcast => (BROADCAST, elems),
                // The per-rank counts are fixed once the group is known (below).
                CollectiveCommType::ReduceScatter | CollectiveCommType::ReduceScatterBlock => {
                    (REDUCE_SCATTER, elems)
                }
                CollectiveCommType::AllToAll => (ALL_GATHER + 100, elems),
                CollectiveCommType::Barrier => (ALL_REDUCE, 1),
                other => {
                    return Err(bad(format!(
                        "{} is not modelled (all-reduce, all-gather, reduce-scatter, \
                         all-to-all, broadcast and barrier are)",
                        other.as_str_name()
                    )));
                }
            };
            Work::Coll { kind, count, group }
        }
        NodeType::CommSendNode | NodeType::CommRecvNode => {
            let send = kind == NodeType::CommSendNode;
            let (side, name) = if send {
                ("comm_dst", "send")
            } else {
                ("comm_src", "receive")
            };
            let peer = int(side)?.ok_or_else(|| bad(format!("a {name} with no {side}")))?;
            if peer >= n as u64 || peer == rank as u64 {
                return Err(bad(format!(
                    "{side} {peer}: a peer is another of the {n} ranks"
                )));
            }
            let bytes = match int("comm_size")? {
                Some(b) => b,
                None => int("tensor_size")?.unwrap_or(0),
            };
            Work::P2p {
                send,
                peer: peer as u32,
                tag: int("comm_tag")?.unwrap_or(0),
                bytes,
            }
        }
        NodeType::MemLoadNode | NodeType::MemStoreNode => {
            // A copy over the host link, on the compute stream.
            let bytes = int("tensor_size")?.unwrap_or(0);
            let dir = npusim_engine::device::cost::CopyDirection::HostToDevice;
            Work::Comp(
                cost_of_duration(&o.device, o.device.copy_duration_ns(bytes, dir)),
                o.device.ai_cores.max(1),
            )
        }
        NodeType::InvalidNode => {
            return Err(bad(format!("{} is not modelled", kind.as_str_name())));
        }
    })
}

/// One rank, read and ordered.
struct Rank {
    /// Node indices in dependency order (ties in file order).
    order: Vec<usize>,
    work: Vec<Work>,
    /// Each node's dependencies on nodes with device time, as indices.
    deps: Vec<Vec<usize>>,
}

fn plan_rank(rank: u32, n: u32, f: &EtFile, o: &ImportOptions) -> Result<Rank, ChakraError> {
    let mut index = BTreeMap::new();
    for (i, node) in f.nodes.iter().enumerate() {
        if index.insert(node.id, i).is_some() {
            return Err(ChakraError::workload(
                rank,
                format!("two nodes have id {}", node.id),
            ));
        }
    }
    let work = f
        .nodes
        .iter()
        .map(|node| read_work(rank, n, node, o))
        .collect::<Result<Vec<_>, _>>()?;
    let mut preds: Vec<Vec<usize>> = Vec::with_capacity(f.nodes.len());
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        let mut p = Vec::new();
        for d in node.deps() {
            let &j = index.get(&d).ok_or_else(|| {
                ChakraError::workload(
                    rank,
                    format!(
                        "node {} ({:?}) depends on node {d}, which the trace does not have",
                        node.id, node.name
                    ),
                )
            })?;
            if !p.contains(&j) {
                p.push(j);
                succs[j].push(i);
            }
        }
        preds.push(p);
    }
    // Kahn's algorithm, the smallest file index first: deterministic.
    let mut missing: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: BTreeSet<usize> = (0..missing.len()).filter(|&i| missing[i] == 0).collect();
    let mut order = Vec::with_capacity(missing.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &s in &succs[i] {
            missing[s] -= 1;
            if missing[s] == 0 {
                ready.insert(s);
            }
        }
    }
    if order.len() < f.nodes.len() {
        let stuck: Vec<String> = (0..f.nodes.len())
            .filter(|&i| missing[i] > 0)
            .take(5)
            .map(|i| format!("{} ({:?})", f.nodes[i].id, f.nodes[i].name))
            .collect();
        return Err(ChakraError::workload(
            rank,
            format!(
                "a dependency cycle: {} of {} nodes can never start, among them {}",
                f.nodes.len() - order.len(),
                f.nodes.len(),
                stuck.join(", ")
            ),
        ));
    }
    // Dependencies through nodes without device time go to what those depend on.
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); f.nodes.len()];
    for &i in &order {
        let mut d = Vec::new();
        for &p in &preds[i] {
            if matches!(work[p], Work::Pass) {
                d.extend(deps[p].iter().copied());
            } else {
                d.push(p);
            }
        }
        d.sort_unstable();
        d.dedup();
        deps[i] = d;
    }
    Ok(Rank { order, work, deps })
}

/// A collective (kind, elements) or a transfer (tag, bytes), and its node's index.
type Posted = (u64, u64, usize);

/// Turns a workload into a trace for a timing-only replay (see the module docs).
pub fn import(w: &Workload, o: &ImportOptions) -> Result<Trace, ChakraError> {
    let n = w.ranks.len() as u32;
    if n == 0 {
        return Err(ChakraError::Options("a workload of no ranks".into()));
    }
    let ranks = w
        .ranks
        .iter()
        .enumerate()
        .map(|(r, f)| plan_rank(r as u32, n, f, o))
        .collect::<Result<Vec<_>, _>>()?;
    // Groups by name, with their ranks; each rank's collectives on each, in order.
    let mut groups: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut sequence: BTreeMap<(&str, u32), Vec<Posted>> = BTreeMap::new();
    let mut p2p: BTreeMap<(u32, u32, bool), Vec<Posted>> = BTreeMap::new();
    for (r, rank) in ranks.iter().enumerate() {
        let r = r as u32;
        for &i in &rank.order {
            match &rank.work[i] {
                Work::Coll { kind, count, group } => {
                    groups.entry(group.clone()).or_default().insert(r);
                    sequence.entry((group.as_str(), r)).or_default().push((
                        *kind as u64,
                        *count,
                        i,
                    ));
                }
                Work::P2p {
                    send,
                    peer,
                    tag,
                    bytes,
                } => {
                    let (src, dst) = if *send { (r, *peer) } else { (*peer, r) };
                    p2p.entry((src, dst, *send))
                        .or_default()
                        .push((*tag, *bytes, i));
                }
                _ => {}
            }
        }
    }
    if let Some(world) = groups.get_mut("") {
        *world = (0..n).collect();
    }
    let node_name = |r: u32, i: usize| {
        let node = &w.ranks[r as usize].nodes[i];
        format!("node {} ({:?})", node.id, node.name)
    };
    // Every rank of a group makes the same collectives, in the same order.
    for (name, members) in &groups {
        let first = *members.first().expect("a group has a rank");
        let empty = Vec::new();
        let want = sequence.get(&(name.as_str(), first)).unwrap_or(&empty);
        for &m in members {
            let have = sequence.get(&(name.as_str(), m)).unwrap_or(&empty);
            for k in 0..want.len().max(have.len()) {
                let (a, b) = (want.get(k), have.get(k));
                if a.map(|x| (x.0, x.1)) != b.map(|x| (x.0, x.1)) {
                    let show = |r: u32, x: Option<&Posted>| match x {
                        Some(x) => format!("{} of {} bytes", node_name(r, x.2), x.1 * F32),
                        None => "none (it never joins)".into(),
                    };
                    return Err(ChakraError::workload(
                        m,
                        format!(
                            "collective {k} of group {name:?} is {}, but rank {first}'s is {}: \
                             the group's ranks would wait for each other for ever",
                            show(m, b),
                            show(first, a)
                        ),
                    ));
                }
            }
        }
    }
    // Sends and receives pair in order, by tag and size.
    let pairs: BTreeSet<(u32, u32)> = p2p.keys().map(|&(s, d, _)| (s, d)).collect();
    for (s, d) in pairs {
        let empty = Vec::new();
        let sends = p2p.get(&(s, d, true)).unwrap_or(&empty);
        let recvs = p2p.get(&(s, d, false)).unwrap_or(&empty);
        for k in 0..sends.len().max(recvs.len()) {
            match (sends.get(k), recvs.get(k)) {
                (Some(a), Some(b)) if (a.0, a.1) == (b.0, b.1) => {}
                (a, b) => {
                    let (rank, what) = match (a, b) {
                        (_, Some(b)) => (
                            d,
                            format!(
                                "{} receives {} bytes with tag {} from rank {s}, which sends {}",
                                node_name(d, b.2),
                                b.1,
                                b.0,
                                a.map_or("nothing more".into(), |a| format!(
                                    "{} bytes with tag {} next",
                                    a.1, a.0
                                ))
                            ),
                        ),
                        (Some(a), None) => (
                            s,
                            format!(
                                "{} sends {} bytes with tag {} to rank {d}, which never \
                                 receives it",
                                node_name(s, a.2),
                                a.1,
                                a.0
                            ),
                        ),
                        (None, None) => unreachable!("k is below one of the lengths"),
                    };
                    return Err(ChakraError::workload(
                        rank,
                        format!(
                            "{what}: the receive is never matched (sends and receives between two ranks pair in order)"
                        ),
                    ));
                }
            }
        }
    }
    let world_needed = !p2p.is_empty() && !groups.contains_key("");
    if world_needed {
        groups.insert(String::new(), (0..n).collect());
    }
    let group_id: BTreeMap<&str, u32> = groups
        .keys()
        .enumerate()
        .map(|(i, g)| (g.as_str(), i as u32))
        .collect();
    let mut calls: Vec<Call> = Vec::new();
    for (name, members) in &groups {
        calls.push(Call::CommInit {
            devices: members.iter().copied().collect(),
            comm: group_id[name.as_str()],
        });
    }
    let (mut next_stream, mut next_event) = (0u32, 0u32);
    // Each node's calls, with the host time they are made at: (ns, rank, calls).
    let mut chunks: Vec<(u64, u32, Vec<Call>)> = Vec::new();
    for (r, rank) in ranks.iter().enumerate() {
        let r = r as u32;
        // Start times held along the rank's order, so no node is submitted before one it
        // depends on.
        let mut start = 0u64;
        let mut streams: BTreeMap<Lane, u32> = BTreeMap::new();
        let mut lane_of: Vec<Option<Lane>> = vec![None; rank.work.len()];
        // Nodes whose dependents on other streams wait for an event, and that event.
        let mut cross = vec![false; rank.work.len()];
        for &i in &rank.order {
            let lane = match &rank.work[i] {
                Work::Pass => continue,
                Work::Comp(..) => Lane::Compute,
                Work::Coll { group, .. } => Lane::Group(group_id[group.as_str()]),
                Work::P2p { peer, .. } => Lane::Peer(*peer),
            };
            lane_of[i] = Some(lane);
            for &p in &rank.deps[i] {
                if lane_of[p] != Some(lane) {
                    cross[p] = true;
                }
            }
        }
        let mut events: BTreeMap<usize, u32> = BTreeMap::new();
        for &i in &rank.order {
            let Some(lane) = lane_of[i] else { continue };
            if o.start_times {
                let at = w.ranks[r as usize].nodes[i].start_time_micros;
                start = start.max(at.saturating_mul(1000));
            }
            let mark = calls.len();
            let stream = *streams.entry(lane).or_insert_with(|| {
                let id = next_stream;
                next_stream += 1;
                calls.push(Call::CreateStream {
                    stream: id,
                    priority: 0,
                    kind: if lane == Lane::Compute { 0 } else { 2 },
                });
                id
            });
            for &p in &rank.deps[i] {
                if lane_of[p] != Some(lane) {
                    calls.push(Call::StreamWaitEvent {
                        stream,
                        event: events[&p],
                    });
                }
            }
            calls.push(match &rank.work[i] {
                Work::Pass => unreachable!("no lane"),
                Work::Comp(cost, block_dim) => Call::Launch {
                    kernel: KernelRef::Native(0),
                    block_dim: *block_dim,
                    // The stand-in's cost is looked up by its arguments: the cost itself.
                    args: vec![
                        ArgRecord::U64(cost.flops.to_bits()),
                        ArgRecord::U64(cost.bytes.to_bits()),
                        ArgRecord::U64(unit_code(cost.unit)),
                    ],
                    tiling: Vec::new(),
                    stream,
                    timeout_ns: None,
                    cost: Some(*cost),
                    binary: None,
                },
                Work::Coll { kind, count, group } => {
                    let members = &groups[group];
                    let size = members.len() as u64;
                    let (kind, count) = match *kind {
                        REDUCE_SCATTER => (REDUCE_SCATTER, (*count / size).max(1)),
                        k if k == ALL_GATHER + 100 => (ALL_GATHER, (*count / size).max(1)),
                        k => (k, *count),
                    };
                    Call::Collective {
                        kind,
                        dtype: 1,
                        op: 1,
                        count,
                        peer: 0,
                        send: CommSide::None,
                        recv: CommSide::None,
                        comm: group_id[group.as_str()],
                        rank: members.iter().position(|&m| m == r).unwrap_or(0) as u32,
                        stream,
                    }
                }
                Work::P2p {
                    send, peer, bytes, ..
                } => Call::Collective {
                    kind: if *send { SEND } else { RECV },
                    dtype: 1,
                    op: 1,
                    count: bytes.div_ceil(F32).max(1),
                    peer: *peer,
                    send: CommSide::None,
                    recv: CommSide::None,
                    comm: group_id[""],
                    rank: r,
                    stream,
                },
            });
            if cross[i] {
                let event = next_event;
                next_event += 1;
                calls.push(Call::CreateEvent { event });
                calls.push(Call::RecordEvent { event, stream });
                events.insert(i, event);
            }
            chunks.push((start, r, calls.drain(mark..).collect()));
        }
    }
    // Stable: ranks in order, each rank's nodes in its order, at equal times.
    chunks.sort_by_key(|c| c.0);
    let (mut now, mut device) = (0u64, None);
    for (at, r, body) in chunks {
        if at > now {
            calls.push(Call::HostWork { ns: at - now });
            now = at;
        }
        if device != Some(r) {
            calls.push(Call::SetDevice { device: r });
            device = Some(r);
        }
        calls.extend(body);
    }
    // Every rank waits for its work: a run that cannot finish fails these, never hangs.
    for r in 0..n {
        calls.push(Call::SetDevice { device: r });
        calls.push(Call::SynchronizeDevice);
    }
    let zero = HostCostsRecord {
        call_ns: 0,
        launch_ns: 0,
        copy_call_ns: 0,
        sync_ns: 0,
        stage_ns_per_kib: 0,
    };
    Ok(Trace {
        header: TraceHeader {
            devices: n,
            device: o.device.clone(),
            topology: o.topology.clone(),
            // A Chakra trace is the devices' work: no host time between submissions.
            host: zero,
            with_data: false,
        },
        entries: calls
            .into_iter()
            .map(|call| Entry {
                thread: 0,
                host_ns: 0,
                call,
            })
            .collect(),
        blobs: BTreeMap::new(),
        kernels: vec![COMP_KERNEL.to_string()],
    })
}

/// Imports `w` and replays it timing-only; a replay that stops with work that cannot finish
/// (a deadlock across ranks) is an error.
pub fn replay(w: &Workload, o: &ImportOptions) -> Result<Replayed, ChakraError> {
    let trace = import(w, o)?;
    let r = npusim_engine::record::replay(
        &trace,
        ReplayOptions {
            timing_only: true,
            ..ReplayOptions::default()
        },
    )?;
    if let Some((_, e)) = r.errors.first() {
        return Err(ChakraError::Replay(e.clone()));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::AttributeProto;
    use npusim_engine::SimTime;

    /// Builds one rank's nodes: each `(name, type, attrs, deps)` gets the next id.
    #[derive(Default)]
    struct Builder {
        file: EtFile,
    }

    impl Builder {
        fn node(
            &mut self,
            name: &str,
            ty: NodeType,
            attr: Vec<AttributeProto>,
            deps: &[u64],
        ) -> u64 {
            let id = self.file.nodes.len() as u64;
            self.file.nodes.push(Node {
                id,
                name: name.into(),
                r#type: ty as i32,
                data_deps: deps.to_vec(),
                attr,
                ..Node::default()
            });
            id
        }

        fn comp(&mut self, name: &str, ops: i64, bytes: u64, deps: &[u64]) -> u64 {
            let attr = vec![
                AttributeProto::int64("num_ops", ops),
                AttributeProto::uint64("tensor_size", bytes),
            ];
            self.node(name, NodeType::CompNode, attr, deps)
        }

        fn coll(
            &mut self,
            name: &str,
            ty: CollectiveCommType,
            bytes: i64,
            pg: &str,
            deps: &[u64],
        ) -> u64 {
            let attr = vec![
                AttributeProto::int64("comm_type", ty as i64),
                AttributeProto::int64("comm_size", bytes),
                AttributeProto::string("pg_name", pg),
            ];
            self.node(name, NodeType::CommCollNode, attr, deps)
        }

        fn p2p(
            &mut self,
            send: bool,
            me: u32,
            peer: u32,
            tag: i32,
            bytes: i64,
            deps: &[u64],
        ) -> u64 {
            let (src, dst, ty) = if send {
                (me, peer, NodeType::CommSendNode)
            } else {
                (peer, me, NodeType::CommRecvNode)
            };
            let attr = vec![
                AttributeProto::int32("comm_src", src as i32),
                AttributeProto::int32("comm_dst", dst as i32),
                AttributeProto::int32("comm_tag", tag),
                AttributeProto::int64("comm_size", bytes),
            ];
            self.node(if send { "send" } else { "recv" }, ty, attr, deps)
        }
    }

    const TP: u32 = 2;
    const PP: u32 = 2;
    const DP: u32 = 2;
    const FLOPS: i64 = 4_000_000_000_000; // per forward pass of a stage
    const WEIGHTS: u64 = 400_000_000; // bytes a pass reads
    const TP_BYTES: i64 = 64 << 20; // activations all-reduced in a tensor-parallel group
    const ACT: i64 = 32 << 20; // activations sent between stages
    const GRAD: i64 = 256 << 20; // gradients all-reduced in a data-parallel group
    const ITERATIONS: u64 = 2;

    /// A Megatron-style step, TP x PP x DP = 2 x 2 x 2: rank = dp * 4 + pp * 2 + tp. Stage 0
    /// runs forward, all-reduces over its TP group and sends to stage 1; stage 1 runs forward
    /// and backward (each with its TP all-reduce) and sends the gradient back; stage 0 runs
    /// backward; each stage then all-reduces its weight gradient over its DP group. The next
    /// iteration starts after that.
    fn megatron() -> Workload {
        let mut ranks = Vec::new();
        for r in 0..TP * PP * DP {
            let (dp, pp, tp) = (r / (TP * PP), r / TP % PP, r % TP);
            let tp_group = format!("tp{}", dp * PP + pp);
            let dp_group = format!("dp{}", pp * TP + tp);
            let (prev, next) = (r.wrapping_sub(TP), r + TP);
            let mut b = Builder::default();
            let mut last: Vec<u64> = Vec::new();
            for it in 0..ITERATIONS as i32 {
                if pp == 0 {
                    let f = b.comp("fwd", FLOPS, WEIGHTS, &last);
                    let a = b.coll(
                        "fwd_tp",
                        CollectiveCommType::AllReduce,
                        TP_BYTES,
                        &tp_group,
                        &[f],
                    );
                    let s = b.p2p(true, r, next, 2 * it, ACT, &[a]);
                    let g = b.p2p(false, r, next, 2 * it + 1, ACT, &[s]);
                    let bw = b.comp("bwd", 2 * FLOPS, WEIGHTS, &[g]);
                    let a = b.coll(
                        "bwd_tp",
                        CollectiveCommType::AllReduce,
                        TP_BYTES,
                        &tp_group,
                        &[bw],
                    );
                    last = vec![b.coll(
                        "grad_dp",
                        CollectiveCommType::AllReduce,
                        GRAD,
                        &dp_group,
                        &[a],
                    )];
                } else {
                    let x = b.p2p(false, r, prev, 2 * it, ACT, &last);
                    let f = b.comp("fwd", FLOPS, WEIGHTS, &[x]);
                    let a = b.coll(
                        "fwd_tp",
                        CollectiveCommType::AllReduce,
                        TP_BYTES,
                        &tp_group,
                        &[f],
                    );
                    let bw = b.comp("bwd", 2 * FLOPS, WEIGHTS, &[a]);
                    let a = b.coll(
                        "bwd_tp",
                        CollectiveCommType::AllReduce,
                        TP_BYTES,
                        &tp_group,
                        &[bw],
                    );
                    let s = b.p2p(true, r, prev, 2 * it + 1, ACT, &[a]);
                    last = vec![
                        b.coll(
                            "grad_dp",
                            CollectiveCommType::AllReduce,
                            GRAD,
                            &dp_group,
                            &[a],
                        ),
                        s,
                    ];
                }
            }
            ranks.push(b.file);
        }
        Workload { ranks }
    }

    fn end(r: &Replayed) -> SimTime {
        r.runtime
            .timeline()
            .iter()
            .map(|t| t.end)
            .max()
            .unwrap_or(SimTime::ZERO)
    }

    #[test]
    fn a_megatron_step_takes_its_closed_form_time() {
        let o = ImportOptions::default();
        let (d, link) = (&o.device, o.topology.link);
        // The roofline over all AI cores, plus the launch overhead.
        let core_flops = d.cube_f16_flops_per_cycle as f64 * d.core_clock_hz as f64;
        let kernel = |flops: f64| {
            d.kernel_launch_ns as f64
                + (flops / (d.ai_cores as f64 * core_flops)).max(WEIGHTS as f64 / d.hbm_bandwidth)
                    * 1e9
        };
        // Two ranks on a full mesh, the direct algorithm: two phases of one latency and half
        // the buffer over one link; a send is one latency and its bytes over one link.
        let all_reduce =
            |bytes: i64| 2.0 * (link.latency_ns as f64 + bytes as f64 / 2.0 / link.bandwidth * 1e9);
        let send = link.latency_ns as f64 + ACT as f64 / link.bandwidth * 1e9;
        // The critical path of an iteration runs through both stages and back, then stage 0's
        // gradient all-reduce.
        let iteration = kernel(FLOPS as f64)
            + all_reduce(TP_BYTES)
            + send
            + kernel(FLOPS as f64)
            + all_reduce(TP_BYTES)
            + kernel(2.0 * FLOPS as f64)
            + all_reduce(TP_BYTES)
            + send
            + kernel(2.0 * FLOPS as f64)
            + all_reduce(TP_BYTES)
            + all_reduce(GRAD);
        let closed = ITERATIONS as f64 * iteration;
        let r = replay(&megatron(), &o).unwrap();
        let t = end(&r).as_ns() as f64;
        let err = (t - closed).abs() / closed;
        assert!(
            err < 0.01,
            "simulated {t} ns, closed form {closed} ns ({:.3}%)",
            100.0 * err
        );
        // Every node ran: 14 per iteration per stage-0 rank and 14 per stage-1 rank.
        let kernels = r
            .runtime
            .timeline()
            .iter()
            .filter(|t| t.name == COMP_KERNEL)
            .count();
        assert_eq!(kernels as u64, 2 * ITERATIONS * (TP * PP * DP) as u64);
    }

    #[test]
    fn recorded_durations_price_compute_nodes_by_a_flag() {
        let mut b = Builder::default();
        let a = b.comp("a", 1, 1, &[]);
        b.file.nodes[a as usize].duration_micros = 700;
        let c = b.comp("b", 1, 1, &[a]);
        b.file.nodes[c as usize].duration_micros = 300;
        let w = Workload {
            ranks: vec![b.file],
        };
        let o = ImportOptions {
            durations: true,
            ..ImportOptions::default()
        };
        let t = end(&replay(&w, &o).unwrap()).as_ns();
        assert!((1_000_000..=1_000_002).contains(&t), "{t}");
        // Without the flag, a node of one operation takes the launch overhead.
        let t = end(&replay(&w, &ImportOptions::default()).unwrap()).as_ns();
        assert!(t < 1_000_000 / 10, "{t}");
    }

    fn error_of(ranks: Vec<EtFile>) -> String {
        match replay(&Workload { ranks }, &ImportOptions::default()) {
            Ok(_) => panic!("the workload ran"),
            Err(e) => {
                assert_eq!(e.code(), 107000, "{e}");
                e.to_string()
            }
        }
    }

    #[test]
    fn workloads_that_cannot_run_are_refused_naming_the_node() {
        let mut b = Builder::default();
        b.comp("a", 1, 1, &[9]);
        assert!(error_of(vec![b.file]).contains("depends on node 9"));
        let mut b = Builder::default();
        b.comp("a", 1, 1, &[1]);
        b.comp("b", 1, 1, &[0]);
        assert!(error_of(vec![b.file]).contains("a dependency cycle"));
        let mut b = Builder::default();
        b.coll("g", CollectiveCommType::Gather, 64, "", &[]);
        assert!(error_of(vec![b.file.clone(), b.file]).contains("GATHER is not modelled"));
        // A receive nothing sends.
        let mut r0 = Builder::default();
        r0.comp("a", 1, 1, &[]);
        let mut r1 = Builder::default();
        r1.p2p(false, 1, 0, 7, 64, &[]);
        let e = error_of(vec![r0.file, r1.file]);
        assert!(e.contains("rank 1") && e.contains("never matched"), "{e}");
        // A collective one rank of the group never makes.
        let mut r0 = Builder::default();
        r0.coll("ar", CollectiveCommType::AllReduce, 64, "g", &[]);
        r0.coll("ar2", CollectiveCommType::AllReduce, 64, "g", &[]);
        let mut r1 = Builder::default();
        r1.coll("ar", CollectiveCommType::AllReduce, 64, "g", &[]);
        let e = error_of(vec![r0.file, r1.file]);
        assert!(e.contains("never joins"), "{e}");
    }

    #[test]
    fn a_deadlock_across_ranks_is_an_error_not_a_hang() {
        // Each rank receives before it sends: both wait for ever.
        let mut ranks = Vec::new();
        for me in 0..2u32 {
            let mut b = Builder::default();
            let r = b.p2p(false, me, 1 - me, 0, 4096, &[]);
            b.p2p(true, me, 1 - me, 0, 4096, &[r]);
            ranks.push(b.file);
        }
        let e = replay(&Workload { ranks }, &ImportOptions::default()).unwrap_err();
        assert!(matches!(e, ChakraError::Replay(_)), "{e}");
    }
}
