//! The interconnect between devices: a topology of directed, full-duplex links (ring, full mesh
//! or a switch), each with its own bandwidth and latency, and the α–β cost of moving bytes over
//! it — point to point, and for the collective algorithms the communication engine runs.
//!
//! The model, in one paragraph: a transfer of `m` bytes over a path of hops is cut into chunks of
//! at most [`TopologyConfig::chunk_bytes`]; the first chunk pays every hop's latency (α) and its
//! bytes over every hop's bandwidth (β), the others follow it through the pipeline one
//! bottleneck-chunk time apart, so a large message over several hops costs about
//! `Σα + m/β_min`, not `hops·(α + m/β)`. A ring collective is a sequence of synchronous steps in
//! which every rank sends one segment to its ring successor at once; a step costs the slowest
//! rank's path time. Ring all-reduce is therefore `2(N−1)` steps of `S/N` bytes:
//! `2(N−1)·α + 2(N−1)/N·S/β` on a uniform ring. The direct ("mesh") algorithms send to every
//! peer at once and cost one latency plus the most loaded link's bytes over its bandwidth.
//!
//! Plain Rust, no ECS: the systems reserve the links a plan names; this module only does the
//! arithmetic.

use std::fmt;

/// Bandwidth and latency of one direction of a link.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LinkConfig {
    /// Bytes per second, per direction.
    pub bandwidth: f64,
    /// Latency per traversal (α), in nanoseconds.
    pub latency_ns: u64,
}

impl LinkConfig {
    /// An HCCS-like device-to-device link: 56 GB/s per direction, 1.5 µs.
    pub fn hccs() -> Self {
        Self {
            bandwidth: 56.0e9,
            latency_ns: 1_500,
        }
    }

    /// A RoCE-like network port: 25 GB/s (200 Gb/s) per direction, 5 µs.
    pub fn roce_200g() -> Self {
        Self {
            bandwidth: 25.0e9,
            latency_ns: 5_000,
        }
    }
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self::hccs()
    }
}

/// How devices are wired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum TopologyKind {
    /// Device `i` has a link to `i+1` and to `i−1` (mod N), in each direction. A transfer to a
    /// farther device is forwarded along the shorter way round.
    Ring,
    /// Every pair of devices has its own link in each direction (an 8-NPU HCCS board).
    #[default]
    FullMesh,
    /// Every device has one up-link to a switch and one down-link from it; a transfer crosses
    /// the sender's up-link, the switch and the receiver's down-link.
    Switch,
}

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Node {
    /// A device, by index.
    Device(u32),
    /// The switch of a [`TopologyKind::Switch`] topology.
    Switch,
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Device(i) => write!(f, "npu{i}"),
            Node::Switch => write!(f, "switch"),
        }
    }
}

/// A per-link exception to [`TopologyConfig::link`]: the directed link `from → to` gets
/// `link` (a slow cable, a degraded port).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LinkOverride {
    /// Sending end.
    pub from: Node,
    /// Receiving end.
    pub to: Node,
    /// Its bandwidth and latency.
    pub link: LinkConfig,
}

/// How the devices of a runtime are connected.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TopologyConfig {
    /// The wiring.
    pub kind: TopologyKind,
    /// Every link's bandwidth and latency, unless overridden.
    pub link: LinkConfig,
    /// Links that differ from [`TopologyConfig::link`].
    pub overrides: Vec<LinkOverride>,
    /// Extra latency of crossing the switch (switch topology only), in nanoseconds.
    pub switch_latency_ns: u64,
    /// Pipelining granule: messages are moved in chunks of at most this many bytes, so a chunk
    /// can cross the next hop while the following one crosses this one.
    pub chunk_bytes: u64,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        Self {
            kind: TopologyKind::FullMesh,
            link: LinkConfig::hccs(),
            overrides: Vec::new(),
            switch_latency_ns: 500,
            chunk_bytes: 1 << 20,
        }
    }
}

impl TopologyConfig {
    /// A ring of uniform links.
    pub fn ring(link: LinkConfig) -> Self {
        Self {
            kind: TopologyKind::Ring,
            link,
            ..Self::default()
        }
    }

    /// A full mesh of uniform links.
    pub fn full_mesh(link: LinkConfig) -> Self {
        Self {
            kind: TopologyKind::FullMesh,
            link,
            ..Self::default()
        }
    }

    /// A switch with uniform up- and down-links.
    pub fn switch(link: LinkConfig) -> Self {
        Self {
            kind: TopologyKind::Switch,
            link,
            ..Self::default()
        }
    }
}

/// A directed link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Sending end.
    pub from: Node,
    /// Receiving end.
    pub to: Node,
    /// Bandwidth and latency.
    pub config: LinkConfig,
}

/// Which algorithm a collective uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CollectiveAlgorithm {
    /// The direct algorithm on a full mesh, the ring everywhere else.
    #[default]
    Auto,
    /// Ring: `N−1` (or `2(N−1)`) synchronous steps of `S/N` bytes to the ring successor.
    Ring,
    /// Direct: every rank sends its share to every peer at once.
    Mesh,
}

/// The communication pattern of a collective, for the cost model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Every rank ends with the reduction of all ranks' `S` bytes.
    AllReduce,
    /// Every rank contributes `S` bytes and ends with the reduction of its `S/N` share.
    ReduceScatter,
    /// Every rank contributes `S/N` bytes and ends with all `S`.
    AllGather,
    /// Rank `root`'s `S` bytes end up on every rank.
    Broadcast {
        /// The rank that has the data.
        root: usize,
    },
    /// Rank `from` sends `S` bytes to rank `to`.
    PointToPoint {
        /// Sender rank.
        from: usize,
        /// Receiver rank.
        to: usize,
    },
}

/// The cost of one collective on one topology: how long it takes and which links it holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Simulated duration, in nanoseconds.
    pub duration_ns: u64,
    /// The algorithm actually used.
    pub algorithm: Option<CollectiveAlgorithm>,
    /// Synchronous steps (1 for the direct algorithms and point to point).
    pub steps: u32,
    /// Links held for the whole duration, ascending, with the bytes each carries.
    pub links: Vec<(u32, u64)>,
}

/// An extra hop outside the device interconnect (the host link when an RDMA buffer is pinned
/// host memory): latency in nanoseconds and bandwidth in bytes per second.
pub type ExtraHop = (u64, f64);

/// The links between the devices of a runtime, with routing and costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    config: TopologyConfig,
    devices: u32,
    links: Vec<Link>,
    /// `direct[from * n + to]`: the link between two devices, if wired directly.
    direct: Vec<Option<u32>>,
    /// Switch up-link of each device.
    up: Vec<u32>,
    /// Switch down-link to each device.
    down: Vec<u32>,
}

/// Why a topology cannot be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// A bandwidth that is not a positive number.
    #[error("link {from}→{to}: bandwidth must be positive, got {bandwidth}")]
    Bandwidth {
        /// Sending end.
        from: Node,
        /// Receiving end.
        to: Node,
        /// The value given.
        bandwidth: f64,
    },
    /// An override names a link the topology does not have.
    #[error("the {kind:?} topology of {devices} devices has no link {from}→{to}")]
    NoSuchLink {
        /// The wiring.
        kind: TopologyKind,
        /// Device count.
        devices: u32,
        /// Sending end.
        from: Node,
        /// Receiving end.
        to: Node,
    },
    /// A zero chunk size.
    #[error("chunk_bytes must be positive")]
    Chunk,
}

/// Whole nanoseconds, rounding up.
fn ns(seconds: f64) -> u64 {
    let v = (seconds * 1e9).ceil();
    if v.is_finite() && v > 0.0 {
        v.min(u64::MAX as f64 / 4.0) as u64
    } else {
        0
    }
}

impl Topology {
    /// Wires `devices` devices as `config` says.
    pub fn new(config: TopologyConfig, devices: u32) -> Result<Self, TopologyError> {
        if config.chunk_bytes == 0 {
            return Err(TopologyError::Chunk);
        }
        let n = devices as usize;
        let mut t = Topology {
            devices,
            links: Vec::new(),
            direct: vec![None; n * n],
            up: Vec::new(),
            down: Vec::new(),
            config,
        };
        let link = t.config.link;
        let add = |t: &mut Topology, from: Node, to: Node| {
            let id = t.links.len() as u32;
            t.links.push(Link {
                from,
                to,
                config: link,
            });
            id
        };
        match t.config.kind {
            TopologyKind::Ring => {
                for i in 0..devices {
                    for j in [(i + 1) % devices, (i + devices - 1) % devices] {
                        if j != i && t.direct[i as usize * n + j as usize].is_none() {
                            let id = add(&mut t, Node::Device(i), Node::Device(j));
                            t.direct[i as usize * n + j as usize] = Some(id);
                        }
                    }
                }
            }
            TopologyKind::FullMesh => {
                for i in 0..devices {
                    for j in 0..devices {
                        if i != j {
                            let id = add(&mut t, Node::Device(i), Node::Device(j));
                            t.direct[i as usize * n + j as usize] = Some(id);
                        }
                    }
                }
            }
            TopologyKind::Switch => {
                for i in 0..devices {
                    let u = add(&mut t, Node::Device(i), Node::Switch);
                    let d = add(&mut t, Node::Switch, Node::Device(i));
                    t.up.push(u);
                    t.down.push(d);
                }
            }
        }
        for o in t.config.overrides.clone() {
            let Some(l) = t
                .links
                .iter_mut()
                .find(|l| l.from == o.from && l.to == o.to)
            else {
                return Err(TopologyError::NoSuchLink {
                    kind: t.config.kind,
                    devices,
                    from: o.from,
                    to: o.to,
                });
            };
            l.config = o.link;
        }
        for l in &t.links {
            if !(l.config.bandwidth > 0.0 && l.config.bandwidth.is_finite()) {
                return Err(TopologyError::Bandwidth {
                    from: l.from,
                    to: l.to,
                    bandwidth: l.config.bandwidth,
                });
            }
        }
        Ok(t)
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &TopologyConfig {
        &self.config
    }

    /// Number of devices.
    pub fn devices(&self) -> u32 {
        self.devices
    }

    /// Every directed link; a link's id is its index here.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The links a transfer from device `src` to device `dst` crosses, in order (empty when
    /// they are the same device).
    pub fn route(&self, src: u32, dst: u32) -> Vec<u32> {
        let n = self.devices;
        if src == dst || src >= n || dst >= n {
            return Vec::new();
        }
        match self.config.kind {
            TopologyKind::FullMesh => self.direct[(src * n + dst) as usize].into_iter().collect(),
            TopologyKind::Switch => vec![self.up[src as usize], self.down[dst as usize]],
            TopologyKind::Ring => {
                let forward = (dst + n - src) % n;
                let step: i64 = if forward <= n - forward { 1 } else { -1 };
                let mut path = Vec::new();
                let mut at = src as i64;
                while at != dst as i64 {
                    let next = (at + step).rem_euclid(n as i64);
                    if let Some(id) = self.direct[(at as u32 * n + next as u32) as usize] {
                        path.push(id);
                    }
                    at = next;
                }
                path
            }
        }
    }

    fn hop_latency(&self, path: &[u32]) -> u64 {
        let mut lat: u64 = path
            .iter()
            .map(|&l| self.links[l as usize].config.latency_ns)
            .sum();
        if self.config.kind == TopologyKind::Switch && !path.is_empty() {
            lat += self.config.switch_latency_ns;
        }
        lat
    }

    /// Nanoseconds to move `bytes` along `path` (link ids, in order) plus `extra` hops
    /// (pinned host memory on either end), chunked and pipelined. Zero for an empty path with
    /// no extra hops.
    pub fn path_ns(&self, path: &[u32], extra: &[ExtraHop], bytes: u64) -> u64 {
        if path.is_empty() && extra.is_empty() {
            return 0;
        }
        let hops: Vec<(u64, f64)> = path
            .iter()
            .map(|&l| {
                let c = self.links[l as usize].config;
                (c.latency_ns, c.bandwidth)
            })
            .chain(extra.iter().copied())
            .collect();
        let latency = self.hop_latency(path) + extra.iter().map(|h| h.0).sum::<u64>();
        if bytes == 0 {
            return latency;
        }
        let chunks = bytes.div_ceil(self.config.chunk_bytes).max(1);
        let chunk = bytes as f64 / chunks as f64;
        let min_bw = hops.iter().map(|h| h.1).fold(f64::INFINITY, f64::min);
        // The first chunk crosses every hop; the rest follow one bottleneck-chunk apart.
        let first: f64 = hops.iter().map(|h| chunk / h.1).sum();
        let rest = (chunks - 1) as f64 * chunk / min_bw;
        latency + ns(first + rest)
    }

    /// Nanoseconds to move `bytes` from device `src` to device `dst`.
    pub fn transfer_ns(&self, src: u32, dst: u32, bytes: u64) -> u64 {
        self.path_ns(&self.route(src, dst), &[], bytes)
    }

    /// The algorithm `algorithm` stands for on this topology.
    pub fn resolve(&self, algorithm: CollectiveAlgorithm) -> CollectiveAlgorithm {
        match algorithm {
            CollectiveAlgorithm::Auto if self.config.kind == TopologyKind::FullMesh => {
                CollectiveAlgorithm::Mesh
            }
            CollectiveAlgorithm::Auto => CollectiveAlgorithm::Ring,
            a => a,
        }
    }

    /// The cost of `pattern` over ranks on devices `ranks` (rank `r` on device `ranks[r]`),
    /// moving a message of `bytes` bytes (`S`: the all-reduce buffer, the reduce-scatter input,
    /// the all-gather output, the broadcast or point-to-point buffer). `extra` adds hops
    /// outside the interconnect (host memory) to a point-to-point transfer.
    pub fn plan(
        &self,
        pattern: Pattern,
        ranks: &[u32],
        bytes: u64,
        algorithm: CollectiveAlgorithm,
        extra: &[ExtraHop],
    ) -> Plan {
        let n = ranks.len();
        let mut load: Vec<u64> = vec![0; self.links.len()];
        let mut plan = Plan::default();
        if let Pattern::PointToPoint { from, to } = pattern {
            let (Some(&a), Some(&b)) = (ranks.get(from), ranks.get(to)) else {
                return plan;
            };
            let path = self.route(a, b);
            for &l in &path {
                load[l as usize] += bytes;
            }
            plan.duration_ns = self.path_ns(&path, extra, bytes);
            plan.steps = 1;
            plan.links = collect_load(&load);
            return plan;
        }
        if n <= 1 {
            return plan;
        }
        let algorithm = self.resolve(algorithm);
        plan.algorithm = Some(algorithm);
        let seg = bytes.div_ceil(n as u64);
        match (algorithm, pattern) {
            (CollectiveAlgorithm::Ring, Pattern::Broadcast { root }) => {
                // A pipelined chain root → root+1 → … along the ring order.
                let mut path = Vec::new();
                for i in 0..n - 1 {
                    let a = ranks[(root + i) % n];
                    let b = ranks[(root + i + 1) % n];
                    path.extend(self.route(a, b));
                }
                for &l in &path {
                    load[l as usize] += bytes;
                }
                plan.steps = (n - 1) as u32;
                plan.duration_ns = self.path_ns(&path, &[], bytes);
            }
            (CollectiveAlgorithm::Ring, _) => {
                let steps = match pattern {
                    Pattern::AllReduce => 2 * (n - 1),
                    _ => n - 1,
                } as u64;
                let mut step_ns = 0;
                for r in 0..n {
                    let path = self.route(ranks[r], ranks[(r + 1) % n]);
                    for &l in &path {
                        load[l as usize] += steps * seg;
                    }
                    step_ns = step_ns.max(self.path_ns(&path, &[], seg));
                }
                plan.steps = steps as u32;
                plan.duration_ns = steps * step_ns;
            }
            (_, pattern) => {
                // Direct: each phase every sender sends its share to every peer at once.
                let (phases, share, senders): (u64, u64, Vec<usize>) = match pattern {
                    Pattern::AllReduce => (2, seg, (0..n).collect()),
                    Pattern::ReduceScatter | Pattern::AllGather => (1, seg, (0..n).collect()),
                    Pattern::Broadcast { root } => (1, bytes, vec![root % n]),
                    Pattern::PointToPoint { .. } => unreachable!("handled above"),
                };
                let mut latency = 0;
                for &s in &senders {
                    for d in 0..n {
                        if d == s {
                            continue;
                        }
                        let path = self.route(ranks[s], ranks[d]);
                        latency = latency.max(self.hop_latency(&path));
                        for &l in &path {
                            load[l as usize] += share;
                        }
                    }
                }
                let busiest = load
                    .iter()
                    .enumerate()
                    .map(|(l, &b)| b as f64 / self.links[l].config.bandwidth)
                    .fold(0.0, f64::max);
                plan.steps = phases as u32;
                plan.duration_ns = phases * (latency + ns(busiest));
                for b in load.iter_mut() {
                    *b *= phases;
                }
            }
        }
        plan.links = collect_load(&load);
        plan
    }
}

fn collect_load(load: &[u64]) -> Vec<(u32, u64)> {
    load.iter()
        .enumerate()
        .filter(|(_, b)| **b > 0)
        .map(|(l, b)| (l as u32, *b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform(kind: TopologyKind, n: u32) -> Topology {
        Topology::new(
            TopologyConfig {
                kind,
                link: LinkConfig {
                    bandwidth: 50e9,
                    latency_ns: 2_000,
                },
                ..TopologyConfig::default()
            },
            n,
        )
        .unwrap()
    }

    #[test]
    fn ring_all_reduce_matches_the_closed_form() {
        for n in [2u32, 4, 8] {
            let t = uniform(TopologyKind::Ring, n);
            let ranks: Vec<u32> = (0..n).collect();
            for s in [4096u64, 1 << 20, 64 << 20] {
                let p = t.plan(
                    Pattern::AllReduce,
                    &ranks,
                    s,
                    CollectiveAlgorithm::Ring,
                    &[],
                );
                let n = n as f64;
                let closed = 2.0 * (n - 1.0) * 2_000.0 + 2.0 * (n - 1.0) / n * s as f64 / 50.0;
                let err = (p.duration_ns as f64 - closed).abs() / closed;
                assert!(err < 0.01, "n={n} s={s}: {} vs {closed}", p.duration_ns);
            }
        }
    }

    #[test]
    fn chunking_pipelines_a_multi_hop_transfer() {
        let t = uniform(TopologyKind::Ring, 8);
        let path = t.route(0, 4);
        assert_eq!(path.len(), 4);
        let bytes = 64 << 20;
        let piped = t.transfer_ns(0, 4, bytes);
        let store_and_forward = 4 * t.transfer_ns(0, 1, bytes);
        assert!(
            piped * 3 < store_and_forward,
            "{piped} vs {store_and_forward}"
        );
    }

    #[test]
    fn ring_routes_take_the_shorter_way() {
        let t = uniform(TopologyKind::Ring, 8);
        assert_eq!(t.route(0, 7).len(), 1);
        assert_eq!(t.route(1, 6).len(), 3);
        assert_eq!(t.links().len(), 16);
        let two = uniform(TopologyKind::Ring, 2);
        assert_eq!(two.links().len(), 2);
    }

    #[test]
    fn switch_routes_cross_up_and_down_links() {
        let t = uniform(TopologyKind::Switch, 4);
        let r = t.route(1, 3);
        assert_eq!(t.links()[r[0] as usize].from, Node::Device(1));
        assert_eq!(t.links()[r[1] as usize].to, Node::Device(3));
        assert_eq!(t.transfer_ns(1, 3, 0), 2 * 2_000 + 500);
    }

    #[test]
    fn mesh_all_reduce_uses_every_link_at_once() {
        let t = uniform(TopologyKind::FullMesh, 8);
        let ranks: Vec<u32> = (0..8).collect();
        let s = 8 << 20;
        let mesh = t.plan(
            Pattern::AllReduce,
            &ranks,
            s,
            CollectiveAlgorithm::Auto,
            &[],
        );
        let ring = t.plan(
            Pattern::AllReduce,
            &ranks,
            s,
            CollectiveAlgorithm::Ring,
            &[],
        );
        assert_eq!(mesh.algorithm, Some(CollectiveAlgorithm::Mesh));
        assert_eq!(mesh.links.len(), 56);
        assert!(mesh.duration_ns * 4 < ring.duration_ns);
    }

    #[test]
    fn overrides_change_one_link_and_bad_ones_are_refused() {
        let slow = LinkConfig {
            bandwidth: 1e9,
            latency_ns: 10_000,
        };
        let mut c = TopologyConfig::ring(LinkConfig::hccs());
        c.overrides.push(LinkOverride {
            from: Node::Device(0),
            to: Node::Device(1),
            link: slow,
        });
        let t = Topology::new(c.clone(), 4).unwrap();
        assert!(t.transfer_ns(0, 1, 1 << 20) > 10 * t.transfer_ns(1, 2, 1 << 20));
        c.overrides[0].to = Node::Device(2);
        assert!(matches!(
            Topology::new(c, 4),
            Err(TopologyError::NoSuchLink { .. })
        ));
    }
}
