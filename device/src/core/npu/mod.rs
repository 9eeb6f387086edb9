//! The AI core's NPU extension: local buffers, data movers, the vector and cube units, and the
//! pipes and flags that order them. The scalar core ([`Core`](super::Core)) issues the
//! extension's instructions (custom opcodes, [`isa`]); each goes to one pipe and runs there
//! asynchronously while the scalar core carries on.
//!
//! How an instruction runs:
//!
//! 1. **Issue** (scalar time `t`): operands are checked against the buffers (faults here are
//!    precise); the pipe's timing state ([`pipes`]) gives the instruction a start cycle (the
//!    pipe is free, its last wait released, and `start ≥ t`) and a done cycle (start plus
//!    occupancy, plus the global-memory latency for GM transfers).
//! 2. **Read** (at `start`): the instruction reads its sources and computes its result into a
//!    staging buffer.
//! 3. **Write** (at `done`): the result lands in the destination.
//!
//! Reads and writes of all instructions — and the scalar unit's own loads and stores to UB and
//! global memory — happen in cycle order, with writes before reads at the same cycle. So a
//! consumer that starts before its producer is done reads the old bytes, exactly as on hardware
//! when a `wait_flag` is missing, and a producer that lands before a slow consumer starts
//! clobbers what it was meant to read. The scalar unit's time only moves forward and every new
//! instruction starts no earlier than it, so processing events up to the scalar unit's current
//! cycle is always safe: nothing issued later can land before then.

mod buffers;
mod config;
mod cube;
pub mod dtype;
mod exec;
mod f16;
mod fault;
mod footprint;
pub mod isa;
pub mod launch;
mod layout;
pub mod masked;
pub mod pipes;
pub mod tiling;
mod vector;

pub use config::{
    BT_BYTES, BufferSizes, CUBE_STARTUP_CYCLES, GM_LATENCY_CYCLES, GM_PORT_BYTES_PER_CYCLE,
    L1_BYTES_PER_CYCLE, MTE_SETUP_CYCLES, MTE1_SETUP_CYCLES, NpuConfig, NpuTiming,
    PIPE_QUEUE_DEPTH, PerCycle, VECTOR_STARTUP_CYCLES, hbm_share_bytes_per_cycle,
};
pub use dtype::{
    CmpMode, DType, RoundMode, bf16_to_f32, f32_to_bf16_rounded, f32_to_f16_rounded,
    f64_to_f16_rounded,
};
pub use f16::{f16_to_f32, f32_to_f16};
pub use fault::NpuFault;
pub use footprint::Footprint;
pub use isa::{CopyDir, CopyMode, CubeLayout, SyncOp, VecOp};
pub use layout::{Buffer, pitch};
pub use masked::{PermMode, Reduce, ReduceOrder};
pub use pipes::{Pipe, PipeCycles};

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Bus;
use super::trap::Trap;
use buffers::{LocalBuffers, Staging};
use cube::{CubeOp, CubeScratch};
use pipes::{Pipes, Slot};
use vector::VectorOp;

/// One side of a transfer.
#[derive(Clone, Copy, Debug)]
enum Side {
    Gm(u64),
    Local(Buffer, usize),
}

/// A 2-D transfer: `rows` rows of `row_bytes`, each side with its own stride — repeated
/// `reps` times, each repeat `src_rep` / `dst_rep` bytes after the last (the repeat register,
/// `abi::CSR_MOVE_REPEAT`; one repeat without it).
#[derive(Clone, Copy, Debug)]
struct CopyOp {
    src: Side,
    dst: Side,
    rows: u64,
    row_bytes: u64,
    src_stride: u64,
    dst_stride: u64,
    reps: u64,
    src_rep: u64,
    dst_rep: u64,
    mode: CopyMode,
}

impl CopyOp {
    /// Bytes each row has once it lands (checked at issue).
    fn out_row_bytes(&self) -> u64 {
        self.mode.out_row_bytes(self.row_bytes).unwrap_or(0)
    }

    /// Where row `r` of every repeat is, in order: `(repeat, row)` → the byte offset from the
    /// side's start, given the side's row stride and repeat stride.
    fn row_offsets(&self, stride: u64, rep: u64) -> impl Iterator<Item = u64> + use<> {
        let rows = self.rows;
        (0..self.reps).flat_map(move |i| (0..rows).map(move |r| i * rep + r * stride))
    }
}

#[derive(Clone, Copy, Debug)]
enum AsyncOp {
    Copy(CopyOp),
    Vector(VectorOp),
    Cube(CubeOp),
}

/// An issued instruction that has not landed yet.
struct Pending {
    pc: u64,
    op: AsyncOp,
    data: Staging,
}

const WRITE: u8 = 0;
const READ: u8 = 1;

/// A point in time where an instruction reads or writes. Ordered by cycle, then writes before
/// reads, then issue order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time: u64,
    phase: u8,
    seq: u64,
    slot: u32,
}

/// The extension's state inside one core.
pub(crate) struct Npu {
    pub buffers: LocalBuffers,
    pub pipes: Pipes,
    timing: NpuTiming,
    sizes: BufferSizes,
    events: BinaryHeap<Reverse<Event>>,
    ops: Vec<Option<Pending>>,
    free_slots: Vec<u32>,
    pool: Vec<Staging>,
    seq: u64,
    cube_scratch: CubeScratch,
    /// Global memory's bytes under an atomic-add copy's row, read, added to and written back.
    atomic_scratch: Vec<u8>,
    pub footprint: Footprint,
    pub instructions: u64,
    pub stall_cycles: u64,
    pub gm_read_bytes: u64,
    pub gm_write_bytes: u64,
    /// The vector mask register (`vmask`), read by `vred` / `vperm` at issue.
    pub vmask: u128,
    /// Elements the last gather-mask to land kept (`CSR_RSVD_CNT`).
    pub rsvd_cnt: u64,
    /// Set by a synchronization instruction that must wait for another block (`sync_all`,
    /// `cross_wait`): the run stops after it with this exit, and the launch resumes it.
    pub wait: Option<crate::core::Exit>,
    /// Cross-core flag sets this block made since the launch last collected them.
    pub cross_sets: Vec<CrossSet>,
    /// The repeat register (`abi::CSR_MOVE_REPEAT`), taken by the next copy.
    pub move_repeat: u64,
}

/// Cross-core flag ids: 0..16.
pub const CROSS_FLAGS: usize = 16;
/// Unconsumed sets one cross-core flag holds at most: its counter is four bits, as CANN's
/// "a flag's counter is set at most 16 times" leaves it.
pub const CROSS_DEPTH: usize = 15;

/// One `cross_set`: flag `flag` in mode `mode`, released at cycle `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrossSet {
    /// The flag id (0..16).
    pub flag: u8,
    /// 0: every block of the same kind; 1: the vector blocks of the AI core; 2: cube to
    /// vector or vector to cube within it.
    pub mode: u8,
    /// The cycle the set is released at (its pipe's earlier work done).
    pub at: u64,
}

impl Npu {
    pub fn new(config: &NpuConfig) -> Npu {
        Npu {
            buffers: LocalBuffers::new(&config.buffers),
            pipes: Pipes::new(config.timing.queue_depth),
            timing: config.timing,
            sizes: config.buffers,
            events: BinaryHeap::new(),
            ops: Vec::new(),
            free_slots: Vec::new(),
            pool: Vec::new(),
            seq: 0,
            cube_scratch: CubeScratch::default(),
            atomic_scratch: Vec::new(),
            footprint: Footprint::default(),
            instructions: 0,
            stall_cycles: 0,
            gm_read_bytes: 0,
            gm_write_bytes: 0,
            vmask: u128::MAX,
            rsvd_cnt: 0,
            wait: None,
            cross_sets: Vec::new(),
            move_repeat: 0,
        }
    }

    pub fn reset(&mut self) {
        self.buffers.reset();
        self.pipes.reset();
        self.events.clear();
        for (i, p) in self.ops.iter_mut().enumerate() {
            if let Some(p) = p.take() {
                self.pool.push(p.data);
                self.free_slots.push(i as u32);
            }
        }
        self.seq = 0;
        self.footprint.clear();
        self.instructions = 0;
        self.stall_cycles = 0;
        self.gm_read_bytes = 0;
        self.gm_write_bytes = 0;
        self.vmask = u128::MAX;
        self.rsvd_cnt = 0;
        self.wait = None;
        self.cross_sets.clear();
        self.move_repeat = 0;
    }

    pub fn sizes(&self) -> &BufferSizes {
        &self.sizes
    }

    /// Queues the read and write of an instruction scheduled in `slot`.
    fn enqueue(&mut self, slot: Slot, op: AsyncOp, pc: u64) {
        let data = self.pool.pop().unwrap_or_default();
        let pending = Some(Pending { pc, op, data });
        let i = match self.free_slots.pop() {
            Some(i) => {
                self.ops[i as usize] = pending;
                i
            }
            None => {
                self.ops.push(pending);
                (self.ops.len() - 1) as u32
            }
        };
        for (time, phase) in [(slot.start, READ), (slot.done, WRITE)] {
            self.seq += 1;
            self.events.push(Reverse(Event {
                time,
                phase,
                seq: self.seq,
                slot: i,
            }));
        }
    }

    /// Runs every read and write due at or before `now`, in order.
    #[inline]
    pub fn advance<B: Bus>(&mut self, now: u64, bus: &mut B) -> Result<(), Trap> {
        while let Some(&Reverse(e)) = self.events.peek() {
            if e.time > now {
                break;
            }
            self.events.pop();
            self.run_event(e, bus)?;
        }
        Ok(())
    }

    fn run_event<B: Bus>(&mut self, e: Event, bus: &mut B) -> Result<(), Trap> {
        let slot = e.slot as usize;
        let Some(mut p) = self.ops[slot].take() else {
            unreachable!("an event outlived its instruction");
        };
        if e.phase == READ {
            let r = self.read_phase(&mut p, bus);
            self.ops[slot] = Some(p);
            r
        } else {
            let r = self.write_phase(&p, bus);
            self.pool.push(p.data);
            self.free_slots.push(e.slot);
            r
        }
    }

    fn read_phase<B: Bus>(&mut self, p: &mut Pending, bus: &mut B) -> Result<(), Trap> {
        match p.op {
            AsyncOp::Copy(c) => {
                let rb = c.row_bytes as usize;
                p.data.resize((c.reps * c.rows) as usize * rb);
                let out = p.data.bytes_mut();
                match c.src {
                    Side::Gm(va) => {
                        // Contiguous rows are one load.
                        if c.reps == 1 && c.src_stride == c.row_bytes {
                            load(bus, p.pc, va, out, &mut self.footprint)?;
                        } else {
                            let offsets = c.row_offsets(c.src_stride, c.src_rep);
                            for (o, chunk) in offsets.zip(out.chunks_exact_mut(rb.max(1))) {
                                load(bus, p.pc, va.wrapping_add(o), chunk, &mut self.footprint)?;
                            }
                        }
                        self.gm_read_bytes += out.len() as u64;
                    }
                    Side::Local(b, off) => {
                        let src = self.buffers.bytes(b);
                        let offsets = c.row_offsets(c.src_stride, c.src_rep);
                        for (o, chunk) in offsets.zip(out.chunks_exact_mut(rb.max(1))) {
                            let o = off + o as usize;
                            chunk.copy_from_slice(&src[o..o + rb]);
                        }
                    }
                }
                match c.mode {
                    CopyMode::Plain => {}
                    CopyMode::Transpose16 => {
                        for fractal in p.data.u16s_mut().chunks_exact_mut(256) {
                            for i in 0..16 {
                                for j in i + 1..16 {
                                    fractal.swap(i * 16 + j, j * 16 + i);
                                }
                            }
                        }
                    }
                    CopyMode::F32ToF16 => {
                        // In place: half i lands on bytes f32 i / 2 held, already read.
                        let bytes = p.data.bytes_mut();
                        let n = bytes.len() / 4;
                        for i in 0..n {
                            let v = f32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
                            bytes[2 * i..2 * i + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
                        }
                        p.data.truncate(n * 2);
                    }
                    CopyMode::AtomicAdd(_) => {}
                    CopyMode::F16ToF32 => {
                        // Back to front: f32 i lands on bytes halves 2i.. held, read before.
                        let n = p.data.bytes().len() / 2;
                        p.data.grow(n * 4);
                        let bytes = p.data.bytes_mut();
                        for i in (0..n).rev() {
                            let h = u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
                            bytes[4 * i..4 * i + 4].copy_from_slice(&f16_to_f32(h).to_le_bytes());
                        }
                    }
                }
            }
            AsyncOp::Vector(v) => vector::compute(&v, self.buffers.bytes(Buffer::Ub), &mut p.data)
                .map_err(|fault| Trap::Npu { pc: p.pc, fault })?,
            AsyncOp::Cube(c) => cube::compute(
                &c,
                [Buffer::L0a, Buffer::L0b, Buffer::L0c, Buffer::Bt].map(|b| self.buffers.bytes(b)),
                &mut self.cube_scratch,
                &mut p.data,
            ),
        }
        Ok(())
    }

    fn write_phase<B: Bus>(&mut self, p: &Pending, bus: &mut B) -> Result<(), Trap> {
        let data = p.data.bytes();
        match p.op {
            AsyncOp::Copy(c) => {
                let rb = c.out_row_bytes() as usize;
                if rb == 0 || c.rows == 0 {
                    return Ok(());
                }
                match c.dst {
                    Side::Gm(va) => {
                        // Contiguous rows (and no element-wise add) are one store.
                        let whole = c.reps == 1
                            && c.dst_stride == rb as u64
                            && !matches!(c.mode, CopyMode::AtomicAdd(_));
                        let len = if whole { data.len() } else { rb };
                        let offsets = c.row_offsets(c.dst_stride, c.dst_rep);
                        for (o, chunk) in offsets.zip(data.chunks_exact(len)) {
                            let addr = va.wrapping_add(o);
                            let chunk = match c.mode {
                                CopyMode::AtomicAdd(t) => {
                                    let sum = &mut self.atomic_scratch;
                                    sum.resize(chunk.len(), 0);
                                    load(bus, p.pc, addr, sum, &mut self.footprint)?;
                                    self.gm_read_bytes += chunk.len() as u64;
                                    atomic_add(t, sum, chunk);
                                    &self.atomic_scratch[..]
                                }
                                _ => chunk,
                            };
                            bus.store(addr, chunk)
                                .map_err(|fault| Trap::StorePageFault {
                                    pc: p.pc,
                                    addr: fault.addr,
                                    fault,
                                })?;
                            self.footprint.write(addr, chunk.len() as u64);
                        }
                        self.gm_write_bytes += data.len() as u64;
                    }
                    Side::Local(b, off) => {
                        let last = (c.reps - 1) * c.dst_rep + (c.rows - 1) * c.dst_stride;
                        let dst = self.buffers.range_mut(b, off, last as usize + rb);
                        let offsets = c.row_offsets(c.dst_stride, c.dst_rep);
                        for (o, chunk) in offsets.zip(data.chunks_exact(rb)) {
                            let o = o as usize;
                            dst[o..o + rb].copy_from_slice(chunk);
                        }
                    }
                }
            }
            AsyncOp::Vector(v) => match masked::scatter(&v) {
                Some(s) => {
                    for (i, row) in data.chunks_exact(s.row_bytes).enumerate() {
                        let (g, k) = (i / s.per, i % s.per);
                        if s.skip >> k & 1 == 1 {
                            continue;
                        }
                        let off = v.dst as usize + g * s.rep_bytes + k * s.blk_bytes;
                        self.buffers
                            .range_mut(Buffer::Ub, off, row.len())
                            .copy_from_slice(row);
                    }
                }
                None => {
                    self.buffers
                        .range_mut(Buffer::Ub, v.dst as usize, data.len())
                        .copy_from_slice(data);
                    if v.op == VecOp::Perm {
                        self.rsvd_cnt = (data.len() as u64) / v.dtype.size();
                    }
                }
            },
            AsyncOp::Cube(c) => {
                let (_, _, extent) = c.extents();
                if c.m == 0 || c.n == 0 {
                    return Ok(());
                }
                let end = c.c as usize + extent as usize;
                cube::store(&c, data, self.buffers.range_mut(Buffer::L0c, 0, end));
            }
        }
        Ok(())
    }
}

/// Loads `out.len()` bytes of global memory at `addr` for the instruction at `pc`, noting them
/// in the footprint.
fn load<B: Bus>(
    bus: &mut B,
    pc: u64,
    addr: u64,
    out: &mut [u8],
    footprint: &mut Footprint,
) -> Result<(), Trap> {
    bus.load(addr, out).map_err(|fault| Trap::LoadPageFault {
        pc,
        addr: fault.addr,
        fault,
    })?;
    footprint.read(addr, out.len() as u64);
    Ok(())
}

/// `gm[i] += add[i]` for every element of type `t` (an atomic-add copy's row landing): floats
/// added in f32 and rounded once (f16 sums of two halves are exact in f32 before their one
/// rounding to f16), i32 wrapping.
fn atomic_add(t: DType, gm: &mut [u8], add: &[u8]) {
    match t {
        DType::F16 => {
            for (g, a) in gm.chunks_exact_mut(2).zip(add.chunks_exact(2)) {
                let s = f16_to_f32(u16::from_le_bytes([g[0], g[1]]))
                    + f16_to_f32(u16::from_le_bytes([a[0], a[1]]));
                g.copy_from_slice(&f32_to_f16(s).to_le_bytes());
            }
        }
        DType::I32 => {
            for (g, a) in gm.chunks_exact_mut(4).zip(add.chunks_exact(4)) {
                let s = i32::from_le_bytes(g.try_into().unwrap())
                    .wrapping_add(i32::from_le_bytes(a.try_into().unwrap()));
                g.copy_from_slice(&s.to_le_bytes());
            }
        }
        _ => {
            for (g, a) in gm.chunks_exact_mut(4).zip(add.chunks_exact(4)) {
                let s = f32::from_le_bytes(g.try_into().unwrap())
                    + f32::from_le_bytes(a.try_into().unwrap());
                g.copy_from_slice(&s.to_le_bytes());
            }
        }
    }
}
