//! 15 — a Megatron-style training workload written as Chakra execution traces, one file per
//! rank, for `npusim replay --chakra` (or ASTRA-sim): tensor parallelism TP (an all-reduce of
//! the activations after each forward and backward pass), pipeline parallelism PP
//! (activations sent to the next stage, gradients back), data parallelism DP (the weight
//! gradients all-reduced once a stage's backward pass is done), for a number of iterations.
//!
//! ```text
//! cargo run --release --example 15_chakra_megatron -- 8 4 32 2 /tmp/mega   # TP PP DP iterations dir
//! npusim replay /tmp/mega/mega.%d.et --chakra
//! ```
//!
//! Run: `cargo run --release --example 15_chakra_megatron [tp pp dp iterations dir]` (default
//! 2 2 2 2 and a temporary directory).

use npusim_chakra::EtFile;
use npusim_chakra::schema::{AttributeProto, CollectiveCommType, Node, NodeType};

/// One pass of a stage: operations, and bytes of weights it reads.
const FLOPS: i64 = 4_000_000_000_000;
const WEIGHTS: u64 = 400_000_000;
/// Activations all-reduced in a TP group, sent between stages; gradients all-reduced over DP.
const TP_BYTES: i64 = 64 << 20;
const ACT: i64 = 32 << 20;
const GRAD: i64 = 256 << 20;

fn node(f: &mut EtFile, name: &str, ty: NodeType, attr: Vec<AttributeProto>, deps: &[u64]) -> u64 {
    let id = f.nodes.len() as u64;
    f.nodes.push(Node {
        id,
        name: name.into(),
        r#type: ty as i32,
        data_deps: deps.to_vec(),
        attr,
        ..Node::default()
    });
    id
}

fn comp(f: &mut EtFile, name: &str, ops: i64, deps: &[u64]) -> u64 {
    let attr = vec![
        AttributeProto::int64("num_ops", ops),
        AttributeProto::uint64("tensor_size", WEIGHTS),
    ];
    node(f, name, NodeType::CompNode, attr, deps)
}

fn all_reduce(f: &mut EtFile, name: &str, bytes: i64, pg: &str, deps: &[u64]) -> u64 {
    let attr = vec![
        AttributeProto::int64("comm_type", CollectiveCommType::AllReduce as i64),
        AttributeProto::int64("comm_size", bytes),
        AttributeProto::string("pg_name", pg),
    ];
    node(f, name, NodeType::CommCollNode, attr, deps)
}

fn p2p(f: &mut EtFile, send: bool, src: u32, dst: u32, tag: i32, deps: &[u64]) -> u64 {
    let attr = vec![
        AttributeProto::int32("comm_src", src as i32),
        AttributeProto::int32("comm_dst", dst as i32),
        AttributeProto::int32("comm_tag", tag),
        AttributeProto::int64("comm_size", ACT),
    ];
    let (name, ty) = if send {
        ("send", NodeType::CommSendNode)
    } else {
        ("recv", NodeType::CommRecvNode)
    };
    node(f, name, ty, attr, deps)
}

/// Rank `r`'s trace: rank = dp * TP * PP + pp * TP + tp.
fn rank(r: u32, tp_n: u32, pp_n: u32, iterations: u32) -> EtFile {
    let (dp, pp, tp) = (r / (tp_n * pp_n), r / tp_n % pp_n, r % tp_n);
    let tp_group = format!("tp{}", dp * pp_n + pp);
    let dp_group = format!("dp{}", pp * tp_n + tp);
    let mut f = EtFile::new();
    let mut last: Vec<u64> = Vec::new();
    for it in 0..iterations as i32 {
        let (fwd_tag, bwd_tag) = (2 * it, 2 * it + 1);
        let mut deps = last.clone();
        if pp > 0 {
            deps.push(p2p(&mut f, false, r - tp_n, r, fwd_tag, &last));
        }
        let x = comp(&mut f, "fwd", FLOPS, &deps);
        let mut x = all_reduce(&mut f, "fwd_tp", TP_BYTES, &tp_group, &[x]);
        let mut sent = Vec::new();
        if pp + 1 < pp_n {
            sent.push(p2p(&mut f, true, r, r + tp_n, fwd_tag, &[x]));
            x = p2p(&mut f, false, r + tp_n, r, bwd_tag, &[x]);
        }
        let g = comp(&mut f, "bwd", 2 * FLOPS, &[x]);
        let g = all_reduce(&mut f, "bwd_tp", TP_BYTES, &tp_group, &[g]);
        if pp > 0 {
            sent.push(p2p(&mut f, true, r, r - tp_n, bwd_tag, &[g]));
        }
        last = vec![all_reduce(&mut f, "grad_dp", GRAD, &dp_group, &[g])];
        last.extend(sent);
    }
    f
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: u32| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (tp, pp, dp, iterations) = (num(0, 2), num(1, 2), num(2, 2), num(3, 2));
    let dir = args
        .get(4)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("npusim-mega"));
    std::fs::create_dir_all(&dir)?;
    let n = tp * pp * dp;
    for r in 0..n {
        rank(r, tp, pp, iterations).write(dir.join(format!("mega.{r}.et")))?;
    }
    let pattern = dir.join("mega.%d.et");
    println!(
        "TP {tp} x PP {pp} x DP {dp}, {iterations} iterations: {n} ranks written to {}",
        pattern.display()
    );
    // And replayed, as `npusim replay <pattern> --chakra` does.
    let w = npusim_chakra::Workload::read(&pattern.to_string_lossy(), Some(n))?;
    let started = std::time::Instant::now();
    let r = npusim_chakra::replay(&w, &npusim_chakra::ImportOptions::default())?;
    let end = r
        .runtime
        .timeline()
        .iter()
        .map(|t| t.end)
        .max()
        .unwrap_or_default();
    println!(
        "simulated time {end}, replayed in {:.2?} (wall)",
        started.elapsed()
    );
    Ok(())
}
