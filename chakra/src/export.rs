//! Export: a recorded npusim trace as Chakra ET, one file per device (rank), for ASTRA-sim or
//! for npusim's own import. The conversion reads the recorded calls; nothing is replayed.
//!
//! Each task a call enqueues is a node of its stream's device: a kernel launch is a
//! `COMP_NODE` with `num_ops` and `tensor_size` from its cost (the cost the launch recorded,
//! or the built-in kernel's cost function on its arguments; a binary launch gets
//! `duration_micros` from its recorded cycles only), `duration_micros` from the preset's
//! roofline, and `npusim_unit` / `npusim_block_dim` so npusim's import prices it as the
//! recording did. A collective is a `COMM_COLL_NODE` (`comm_size`: each rank's input bytes;
//! `pg_name` `comm<id>` unless the communicator spans every device), a send or receive a
//! `COMM_SEND_NODE` / `COMM_RECV_NODE` whose `comm_tag` counts the transfers between the pair,
//! a peer copy a send on the source device and a receive on the destination, a copy from or
//! to the host a `MEM_LOAD_NODE` / `MEM_STORE_NODE`, a device copy or memset a `COMP_NODE`
//! moving its bytes. A node depends on its stream's previous node (`ctrl_deps`) and on the
//! node an event it waits for recorded after (`data_deps`). Out of scope: a wait on an event
//! recorded on another device (the file of one rank cannot name another's node; the
//! transfer that carried the data orders it) and host callbacks. The host's clock when a task
//! was submitted is its node's `start_time_micros`, which the import honours on request
//! ([`ImportOptions::start_times`](crate::ImportOptions::start_times)).

use std::collections::BTreeMap;

use npusim_engine::components::{KernelBody, KernelRegistry};
use npusim_engine::record::{ArgRecord, Call, KernelRef, Trace};
use npusim_engine::{DataType, DeviceConfig, KernelCost};

use crate::error::ChakraError;
use crate::file::EtFile;
use crate::import::unit_name;
use crate::schema::{AttributeProto, CollectiveCommType, Node, NodeType};

/// Where the conversion is: devices of threads, streams and contexts, each stream's last
/// node and the nodes events were recorded after.
#[derive(Default)]
struct State {
    threads: BTreeMap<u32, Vec<u32>>,
    contexts: BTreeMap<u32, u32>,
    streams: BTreeMap<u32, u32>,
    last: BTreeMap<u32, u64>,
    waits: BTreeMap<u32, Vec<(u32, u64)>>,
    records: BTreeMap<u32, Vec<Option<(u32, u64)>>>,
    comms: BTreeMap<u32, Vec<u32>>,
    tags: BTreeMap<(u32, u32, bool), i32>,
}

impl State {
    fn device(&self, thread: u32) -> u32 {
        self.threads
            .get(&thread)
            .and_then(|s| s.last().copied())
            .unwrap_or(0)
    }

    fn set(&mut self, thread: u32, device: u32) {
        let s = self.threads.entry(thread).or_default();
        s.pop();
        s.push(device);
    }

    /// The next transfer's tag between `src` and `dst`, counted on the sending or the
    /// receiving side (the k-th send pairs with the k-th receive).
    fn next_tag(&mut self, src: u32, dst: u32, send: bool) -> i32 {
        let t = self.tags.entry((src, dst, send)).or_insert(0);
        *t += 1;
        *t - 1
    }
}

fn word(a: &ArgRecord) -> u64 {
    match *a {
        ArgRecord::Ptr(p) => p,
        ArgRecord::U64(v) => v,
        ArgRecord::I64(v) => v as u64,
        ArgRecord::F32(b) => b as u64,
    }
}

fn comp_attrs(cost: &KernelCost, block_dim: u32) -> Vec<AttributeProto> {
    vec![
        AttributeProto::boolean("is_cpu_op", false),
        AttributeProto::int64("num_ops", cost.flops.round() as i64),
        AttributeProto::uint64("tensor_size", cost.bytes.round() as u64),
        AttributeProto::string("npusim_unit", unit_name(cost.unit)),
        AttributeProto::int64("npusim_block_dim", block_dim as i64),
    ]
}

/// Writes `trace` as one Chakra trace per recorded device (see the module docs).
pub fn export(trace: &Trace) -> Result<Vec<EtFile>, ChakraError> {
    let n = trace.header.devices.max(1);
    let d: &DeviceConfig = &trace.header.device;
    let mut builtins = KernelRegistry::default();
    npusim_engine::kernels::register_builtins(&mut builtins);
    let mut files: Vec<EtFile> = (0..n).map(|_| EtFile::new()).collect();
    let mut st = State::default();
    let bad = |i: usize, what: String| ChakraError::Options(format!("trace entry {i}: {what}"));
    for (i, e) in trace.entries.iter().enumerate() {
        let call = match &e.call {
            Call::InCallback { call, .. } => call,
            c => c,
        };
        let t = e.thread;
        let here = st.device(t);
        // (stream, type, name, attrs, duration in ns) of the node this call adds, if any.
        let mut node: Option<(u32, NodeType, String, Vec<AttributeProto>, u64)> = None;
        // A second node, on another device: the receiving end of a peer copy.
        let mut mirror: Option<(u32, Node)> = None;
        match call {
            Call::SetDevice { device } => st.set(t, *device),
            Call::CreateContext { device, ctx } => {
                st.contexts.insert(*ctx, *device);
                st.set(t, *device);
            }
            Call::CurrentContext { ctx } => {
                st.contexts.insert(*ctx, here);
            }
            Call::SetCurrentContext { ctx } => {
                let dev = st.contexts.get(ctx).copied().unwrap_or(here);
                st.set(t, dev);
            }
            Call::PushContext { ctx } => {
                let dev = st.contexts.get(ctx).copied().unwrap_or(here);
                st.threads.entry(t).or_default().push(dev);
            }
            Call::PopContext => {
                st.threads.entry(t).or_default().pop();
            }
            Call::CreateStream { stream, .. } | Call::DefaultStream { stream } => {
                st.streams.insert(*stream, here);
            }
            Call::CommInit { devices, comm } => {
                st.comms.insert(*comm, devices.clone());
            }
            Call::RecordEvent { event, stream } => {
                let at = st.streams.get(stream).copied().unwrap_or(here);
                let last = st.last.get(stream).map(|&id| (at, id));
                st.records.entry(*event).or_default().push(last);
            }
            Call::StreamWaitEvent { stream, event } => {
                if let Some(Some(r)) = st.records.get(event).and_then(|r| r.last()) {
                    st.waits.entry(*stream).or_default().push(*r);
                }
            }
            Call::StreamWaitEventRecord {
                stream,
                event,
                record,
                ..
            } => {
                let r = st
                    .records
                    .get(event)
                    .and_then(|r| r.get(record.checked_sub(1)? as usize))
                    .copied()
                    .flatten();
                if let Some(r) = r {
                    st.waits.entry(*stream).or_default().push(r);
                }
            }
            Call::Launch {
                kernel,
                block_dim,
                args,
                stream,
                cost,
                binary,
                ..
            } => {
                let name = match kernel {
                    KernelRef::Native(k) => trace
                        .kernels
                        .get(*k as usize)
                        .cloned()
                        .ok_or_else(|| bad(i, format!("kernel {k} has no name")))?,
                    KernelRef::Function(f) => format!("function {f}"),
                };
                let words: Vec<u64> = args.iter().map(word).collect();
                let cost = cost.or_else(|| {
                    let k = builtins.lookup(&name).ok()?;
                    match &builtins.get(k).ok()?.body {
                        KernelBody::Native(k) => Some((k.cost)(&words, *block_dim)),
                        KernelBody::Binary(_) => None,
                    }
                });
                let (attrs, ns) = match (cost, binary) {
                    (Some(c), _) => (
                        comp_attrs(&c, *block_dim),
                        d.kernel_duration_ns(&c, *block_dim, d.ai_cores),
                    ),
                    (None, Some(b)) => {
                        let cores = d.ai_cores.clamp(1, (*block_dim).max(1)) as u64;
                        let cycles: u64 = b.block_cycles.iter().sum::<u64>().div_ceil(cores);
                        let ns = d.kernel_launch_ns
                            + (cycles as f64 / d.core_clock_hz as f64 * 1e9).ceil() as u64;
                        (vec![AttributeProto::boolean("is_cpu_op", false)], ns)
                    }
                    (None, None) => (vec![AttributeProto::boolean("is_cpu_op", false)], 0),
                };
                node = Some((*stream, NodeType::CompNode, name, attrs, ns));
            }
            Call::CopyDevice { bytes, stream, .. } | Call::Memset { bytes, stream, .. } => {
                let copy = matches!(call, Call::CopyDevice { .. });
                let moved = if copy { 2 * bytes } else { *bytes };
                let c = KernelCost::vector(0.0, moved as f64);
                let ns = d.kernel_duration_ns(&c, d.ai_cores, d.ai_cores);
                let name = if copy { "memcpy_dtod" } else { "memset" };
                node = Some((
                    *stream,
                    NodeType::CompNode,
                    name.into(),
                    comp_attrs(&c, d.ai_cores),
                    ns,
                ));
            }
            Call::CopyHost {
                to_device,
                bytes,
                stream,
                ..
            } => {
                let (ty, name) = if *to_device {
                    (NodeType::MemLoadNode, "memcpy_htod")
                } else {
                    (NodeType::MemStoreNode, "memcpy_dtoh")
                };
                let attrs = vec![AttributeProto::uint64("tensor_size", *bytes)];
                let dir = npusim_engine::device::cost::CopyDirection::HostToDevice;
                node = Some((
                    *stream,
                    ty,
                    name.into(),
                    attrs,
                    d.copy_duration_ns(*bytes, dir),
                ));
            }
            Call::Collective {
                kind,
                dtype,
                count,
                peer,
                comm,
                rank,
                stream,
                ..
            } => {
                let devices = st
                    .comms
                    .get(comm)
                    .ok_or_else(|| bad(i, format!("communicator {comm} was never made")))?;
                let size = devices.len() as u64;
                let elt = DataType::from_u32(*dtype).map_or(4, DataType::size);
                let bytes = count * elt;
                let me = devices.get(*rank as usize).copied().unwrap_or(here);
                let other = devices.get(*peer as usize).copied().unwrap_or(0);
                let world = devices.len() as u32 == n
                    && devices.iter().enumerate().all(|(i, &d)| i as u32 == d);
                let mut attrs = vec![AttributeProto::boolean("is_cpu_op", false)];
                let (ty, name) = match kind {
                    5 | 6 => {
                        let send = *kind == 5;
                        let (src, dst) = if send { (me, other) } else { (other, me) };
                        attrs.extend([
                            AttributeProto::int32("comm_src", src as i32),
                            AttributeProto::int32("comm_dst", dst as i32),
                            AttributeProto::int32("comm_tag", st.next_tag(src, dst, send)),
                            AttributeProto::int64("comm_size", bytes as i64),
                        ]);
                        if send {
                            (NodeType::CommSendNode, "send")
                        } else {
                            (NodeType::CommRecvNode, "recv")
                        }
                    }
                    k => {
                        let (ty, size) = match k {
                            1 => (CollectiveCommType::AllReduce, bytes),
                            2 => (CollectiveCommType::AllGather, bytes),
                            3 => (CollectiveCommType::ReduceScatter, bytes * size),
                            4 => (CollectiveCommType::Broadcast, bytes),
                            k => return Err(bad(i, format!("collective kind {k}"))),
                        };
                        attrs.extend([
                            AttributeProto::int64("comm_type", ty as i64),
                            AttributeProto::int64("comm_size", size as i64),
                        ]);
                        if !world {
                            attrs.push(AttributeProto::string("pg_name", &format!("comm{comm}")));
                        }
                        (NodeType::CommCollNode, ty.as_str_name())
                    }
                };
                node = Some((*stream, ty, name.to_lowercase(), attrs, 0));
            }
            Call::CopyPeer {
                dst_device,
                src_device,
                bytes,
                stream,
                ..
            } => {
                let (src, dst) = (*src_device, *dst_device);
                let tag = st.next_tag(src, dst, true);
                st.next_tag(src, dst, false);
                let attrs = || {
                    vec![
                        AttributeProto::boolean("is_cpu_op", false),
                        AttributeProto::int32("comm_src", src as i32),
                        AttributeProto::int32("comm_dst", dst as i32),
                        AttributeProto::int32("comm_tag", tag),
                        AttributeProto::int64("comm_size", *bytes as i64),
                    ]
                };
                let at = st.streams.get(stream).copied().unwrap_or(here);
                let send = at == src;
                let (ty, other_ty, other) = if send {
                    (NodeType::CommSendNode, NodeType::CommRecvNode, dst)
                } else {
                    (NodeType::CommRecvNode, NodeType::CommSendNode, src)
                };
                node = Some((*stream, ty, "memcpy_peer".into(), attrs(), 0));
                mirror = Some((
                    other,
                    Node {
                        name: "memcpy_peer".into(),
                        r#type: other_ty as i32,
                        attr: attrs(),
                        ..Node::default()
                    },
                ));
            }
            _ => {}
        }
        if let Some((stream, ty, name, attr, ns)) = node {
            let dev = st.streams.get(&stream).copied().unwrap_or(here);
            let file = files
                .get_mut(dev as usize)
                .ok_or_else(|| bad(i, format!("device {dev} of {n}")))?;
            let id = file.nodes.len() as u64;
            let ctrl_deps = st.last.get(&stream).copied().into_iter().collect();
            let mut data_deps: Vec<u64> = st
                .waits
                .remove(&stream)
                .unwrap_or_default()
                .into_iter()
                .filter(|&(d, _)| d == dev)
                .map(|(_, id)| id)
                .collect();
            data_deps.sort_unstable();
            data_deps.dedup();
            file.nodes.push(Node {
                id,
                name,
                r#type: ty as i32,
                ctrl_deps,
                data_deps,
                // The host's clock after the call: when it submitted the task.
                start_time_micros: e.host_ns / 1000,
                duration_micros: ns.div_ceil(1000),
                attr,
                ..Node::default()
            });
            st.last.insert(stream, id);
        }
        if let Some((dev, mut m)) = mirror
            && let Some(file) = files.get_mut(dev as usize)
        {
            m.id = file.nodes.len() as u64;
            file.nodes.push(m);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use npusim_engine::{
        Collective, DataType, Launch, ReduceOp, Runtime, RuntimeConfig, StreamConfig, StreamKind,
    };

    /// Two devices: device 0 runs a GEMM on a compute stream, then (after an event) sends its
    /// result to device 1 on a communication stream, which receives it and all-reduces.
    fn recorded() -> Trace {
        let rt = Runtime::new(RuntimeConfig {
            devices: 2,
            timing_only: true,
            recording: Some(Default::default()),
            ..RuntimeConfig::default()
        })
        .unwrap();
        let comms = rt.collectives().init_all(&[0, 1]).unwrap();
        let gemm = rt.kernel("gemm_f32").unwrap();
        for (r, comm) in comms.iter().enumerate() {
            rt.contexts().set_device(r as u32).unwrap();
            let s = rt.streams().create().unwrap();
            let c = rt
                .streams()
                .create_with(StreamConfig {
                    kind: StreamKind::Communication,
                    ..StreamConfig::default()
                })
                .unwrap();
            let buf = rt.memory().malloc(4 << 20).unwrap();
            if r == 0 {
                let (a, b, out) = (buf, buf, buf);
                let n = 512usize;
                rt.submit(Launch::new(
                    gemm,
                    8,
                    &[a.into(), b.into(), out.into(), n.into(), n.into(), n.into()],
                    s,
                ))
                .unwrap();
                let e = rt.events().create().unwrap();
                rt.events().record(e, s).unwrap();
                rt.events().stream_wait(c, e).unwrap();
                rt.submit(Collective::send(buf, 1 << 20, DataType::F32, 1).on(comm, c))
                    .unwrap();
            } else {
                rt.submit(Collective::recv(buf, 1 << 20, DataType::F32, 0).on(comm, c))
                    .unwrap();
            }
            rt.submit(
                Collective::all_reduce(buf, buf, 1 << 20, DataType::F32, ReduceOp::Sum).on(comm, c),
            )
            .unwrap();
        }
        rt.synchronize_device().unwrap();
        rt.take_trace().unwrap()
    }

    #[test]
    fn a_recorded_program_exports_its_tasks_and_dependencies_per_device() {
        let files = export(&recorded()).unwrap();
        assert_eq!(files.len(), 2);
        let r0 = &files[0].nodes;
        let types: Vec<i32> = r0.iter().map(|n| n.r#type).collect();
        let (comp, send, coll) = (
            NodeType::CompNode as i32,
            NodeType::CommSendNode as i32,
            NodeType::CommCollNode as i32,
        );
        assert_eq!(types, [comp, send, coll]);
        // The GEMM's cost from the built-in's cost function, its blocks and unit.
        assert_eq!(r0[0].attr_u64("num_ops"), Ok(Some(2 * 512 * 512 * 512)));
        assert_eq!(r0[0].attr_u64("tensor_size"), Ok(Some(4 * 3 * 512 * 512)));
        assert_eq!(r0[0].attr_u64("npusim_block_dim"), Ok(Some(8)));
        assert_eq!(r0[0].attr_str("npusim_unit"), Some("cube_f32"));
        assert!(r0[0].duration_micros > 0);
        // The send waits for the GEMM through the event; the all-reduce follows the send.
        assert_eq!(
            (r0[1].ctrl_deps.clone(), r0[1].data_deps.clone()),
            (vec![], vec![0])
        );
        assert_eq!(r0[2].ctrl_deps, [1]);
        assert_eq!(r0[1].attr_u64("comm_dst"), Ok(Some(1)));
        assert_eq!(r0[1].attr_u64("comm_size"), Ok(Some(4 << 20)));
        assert_eq!(r0[2].attr_u64("comm_type"), Ok(Some(0)));
        assert_eq!(
            r0[2].attr_str("pg_name"),
            None,
            "the communicator is every device"
        );
        let r1 = &files[1].nodes;
        assert_eq!(r1[0].r#type, NodeType::CommRecvNode as i32);
        assert_eq!(r1[0].attr_u64("comm_src"), Ok(Some(0)));
        assert_eq!(r1[0].attr_u64("comm_tag"), r0[1].attr_u64("comm_tag"));
        // And it imports: the pairs match, the groups agree.
        let w = crate::Workload { ranks: files };
        let o = crate::ImportOptions {
            topology: npusim_engine::RuntimeConfig::default().topology,
            ..crate::ImportOptions::default()
        };
        crate::replay(&w, &o).unwrap();
    }
}
