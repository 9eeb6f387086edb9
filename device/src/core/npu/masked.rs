//! The vector unit's mask-register instructions: `vmask` sets the mask register, and the
//! repeat-form instructions that read it — `vred` (Ascend C's WholeReduce / BlockReduce) and
//! `vperm` (Brcb, GatherMask, Gather). Their operand fields are decoded here, next to the
//! encoders in [`isa::encode`](super::isa::encode), and computed here.
//!
//! A *repeat* is 256 bytes of source: 8 blocks of 32 bytes, `E = 256 / size` elements (128
//! for 16-bit types, 64 for 32-bit ones); element `p` of repeat `r` lives in block `p / (32 /
//! size)` at `src + (r × src_rep + block × src_blk) × 32`. Bit `p` of the mask register (the
//! value the last `vmask` issued before the instruction set) selects it.
//!
//! Results are written per row (one repeat's result, one block's result, one broadcast block,
//! one gathered element) at their strided places, so bytes between them keep their values.

use super::buffers::Staging;
use super::dtype::DType;
use super::f16::{f16_to_f32, f32_to_f16};
use super::isa::VecOp;
use super::layout::Buffer;
use super::vector::VectorOp;
use super::{Npu, NpuFault};
use crate::abi;

/// `vred`'s reduction (`rs3` bits 36..40).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Reduce {
    /// One sum per repeat, added pairwise in a binary tree (WholeReduceSum).
    Sum = 0,
    /// The maximum of each repeat and its index in the repeat (WholeReduceMax).
    Max = 1,
    /// The minimum of each repeat and its index (WholeReduceMin).
    Min = 2,
    /// One sum per 32-byte block, binary tree within the block (BlockReduceSum).
    BlockSum = 4,
    /// The maximum of each block (BlockReduceMax).
    BlockMax = 5,
    /// The minimum of each block (BlockReduceMin).
    BlockMin = 6,
}

impl Reduce {
    /// Every reduction.
    pub const ALL: [Reduce; 6] = [
        Reduce::Sum,
        Reduce::Max,
        Reduce::Min,
        Reduce::BlockSum,
        Reduce::BlockMax,
        Reduce::BlockMin,
    ];

    fn from_code(code: u64) -> Option<Reduce> {
        Reduce::ALL.into_iter().find(|r| *r as u64 == code)
    }

    fn per_block(self) -> bool {
        self as u8 & 4 != 0
    }
}

/// Where a whole-repeat maximum / minimum and its index go (`rs3` bits 40..44), Ascend C's
/// `ReduceOrder`. The index is the element's position in its repeat, stored as an unsigned
/// integer of the element's width (`u32` for `OnlyIndex`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReduceOrder {
    /// `[value, index]`.
    ValueIndex = 0,
    /// `[index, value]`.
    IndexValue = 1,
    /// `[value]`.
    OnlyValue = 2,
    /// `[index]` (a `u32`).
    OnlyIndex = 3,
}

impl ReduceOrder {
    /// Every order.
    pub const ALL: [ReduceOrder; 4] = [
        ReduceOrder::ValueIndex,
        ReduceOrder::IndexValue,
        ReduceOrder::OnlyValue,
        ReduceOrder::OnlyIndex,
    ];
}

/// `vperm`'s operation (`rs3` bits 36..40).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PermMode {
    /// Each of 8 source elements per repeat fills one 32-byte block (Brcb).
    Brcb = 0,
    /// The elements a pattern selects, packed (GatherMask).
    GatherMask = 1,
    /// `dst[i] = *(src + offset[i])`, byte offsets from a `u32` tensor (Gather).
    Gather = 2,
}

/// `vperm` gather-mask flag (`rs3` bit 40): counter mode, the element count is the mask
/// register's low 64 bits and the repeat field is ignored.
pub const GATHER_MASK_COUNTER: u64 = 1;
/// `vperm` gather-mask flag (`rs3` bit 41): `rs2` is a built-in pattern code 1..=7, not an
/// address.
pub const GATHER_MASK_BUILTIN: u64 = 2;

/// The decoded fields of a mask-register instruction.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RepeatForm {
    /// The mask register at issue.
    pub mask: u128,
    /// Repeats (for a gather-mask in counter mode: derived from the count).
    pub repeat: u32,
    /// Destination stride between repeats, in the instruction's unit (see `scatter`).
    pub dst_rep: u32,
    /// Destination stride between the blocks of a repeat (Brcb), in blocks.
    pub dst_blk: u32,
    /// Source stride between the blocks of a repeat, in blocks.
    pub src_blk: u32,
    /// Source stride between repeats, in blocks.
    pub src_rep: u32,
    /// Pattern stride between repeats (gather-mask), in blocks.
    pub pat_rep: u32,
    /// Elements a gather-mask in counter mode processes.
    pub count: u64,
    /// `Reduce` / `PermMode` code.
    pub kind: u8,
    /// `ReduceOrder` (vred) or gather-mask flags.
    pub flags: u8,
    /// A gather-mask's built-in pattern code (0: the pattern tensor at `VectorOp::b`).
    pub builtin: u8,
}

/// How a repeat-form result lands: row `i` (of `row_bytes`) goes to
/// `dst + (i / per) × rep_bytes + (i % per) × blk_bytes`, unless bit `i % per` of `skip`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scatter {
    pub row_bytes: usize,
    pub per: usize,
    pub rep_bytes: usize,
    pub blk_bytes: usize,
    pub skip: u128,
}

/// Elements per repeat and per block.
fn geometry(t: DType) -> (usize, usize) {
    let es = t.size() as usize;
    (256 / es, 32 / es)
}

/// The mask bits of one repeat's `e` elements.
fn repeat_mask(mask: u128, e: usize) -> u128 {
    if e >= 128 {
        mask
    } else {
        mask & ((1u128 << e) - 1)
    }
}

/// The per-block "no selected element" bits of a mask.
fn empty_blocks(mask: u128, e: usize, pb: usize) -> u128 {
    let mut skip = 0;
    for k in 0..8 {
        if (mask >> (k * pb)) & ((1u128 << pb) - 1) == 0 || k * pb >= e {
            skip |= 1 << k;
        }
    }
    skip
}

/// A UB operand of `len` bytes at `addr`, aligned to `align`: its offset.
fn ub_at(
    npu: &Npu,
    operand: &'static str,
    addr: u64,
    len: u64,
    align: u64,
) -> Result<u32, NpuFault> {
    let off = match Buffer::at(addr) {
        Some((Buffer::Ub, off)) => off,
        _ => {
            return Err(NpuFault::WrongBuffer {
                operand,
                expected: Buffer::Ub,
                addr,
            });
        }
    };
    if align == abi::LOCAL_BUFFER_ALIGN && !off.is_multiple_of(align) {
        return Err(NpuFault::Misaligned {
            buffer: Buffer::Ub,
            what: "address",
            value: addr,
        });
    }
    if !off.is_multiple_of(align) {
        return Err(NpuFault::Unaligned {
            operand,
            addr,
            align,
        });
    }
    let size = npu.buffers.size(Buffer::Ub) as u64;
    if off > size || len > size - off {
        return Err(NpuFault::OutOfBuffer {
            buffer: Buffer::Ub,
            addr,
            len,
            size: size as u32,
        });
    }
    Ok(off as u32)
}

/// The source extent of `repeat` repeats whose last selected block is `kmax`.
fn src_extent(f: &RepeatForm, kmax: usize) -> u64 {
    if f.repeat == 0 {
        return 0;
    }
    ((f.repeat as u64 - 1) * f.src_rep as u64 + kmax as u64 * f.src_blk as u64) * 32 + 32
}

/// The destination extent of a scatter of `rows` rows.
fn dst_extent(s: &Scatter, rows: usize) -> u64 {
    if rows == 0 {
        return 0;
    }
    let (g, k) = ((rows - 1) / s.per, (rows - 1) % s.per);
    (g * s.rep_bytes + k * s.blk_bytes + s.row_bytes) as u64
}

/// Decodes and checks `vred` / `vperm` (`vmask` never gets here): the operation and its
/// occupancy on the vector pipe.
pub(crate) fn decode(
    npu: &Npu,
    op: VecOp,
    [d, a, b, c]: [u64; 4],
) -> Result<(VectorOp, u64), NpuFault> {
    let bad = || NpuFault::BadVectorOperand {
        op: op.name(),
        value: c,
    };
    let dtype = DType::from_code((c >> 32) & 0xf).ok_or_else(bad)?;
    let kind = (c >> 36) & 0xf;
    let mut f = RepeatForm {
        mask: npu.vmask,
        kind: kind as u8,
        ..RepeatForm::default()
    };
    let mut v = VectorOp::new(op, dtype);
    let (e, pb) = geometry(dtype);
    let es = dtype.size();
    let processed: u64;
    if op == VecOp::Red {
        let red = Reduce::from_code(kind).ok_or_else(bad)?;
        let order = (c >> 40) & 0xf;
        if c & 0xffff_ff00 != 0
            || c >> 44 != 0
            || order > 3
            || (order != 0 && !matches!(red, Reduce::Max | Reduce::Min))
        {
            return Err(bad());
        }
        if !op.supports(dtype) {
            return Err(NpuFault::UnsupportedType {
                op: op.name(),
                dtype,
            });
        }
        f.flags = order as u8;
        f.repeat = (c & 0xff) as u32;
        f.dst_rep = (b & 0xffff) as u32;
        f.src_blk = ((b >> 16) & 0xffff) as u32;
        f.src_rep = ((b >> 32) & 0xffff) as u32;
        if b >> 48 != 0 {
            return Err(bad());
        }
        let m = repeat_mask(f.mask, e);
        if m == 0 {
            return Err(NpuFault::EmptyMask { op: op.name() });
        }
        let kmax = (127 - m.leading_zeros() as usize) / pb;
        v.a = ub_at(npu, "src", a, src_extent(&f, kmax), 32)?;
        v.rep = f;
        let s = scatter(&v).unwrap_or_else(|| unreachable!("vred always scatters"));
        let rows = f.repeat as usize * s.per;
        v.dst = ub_at(
            npu,
            "dst",
            d,
            dst_extent(&s, rows),
            es.min(s.row_bytes as u64),
        )?;
        processed = f.repeat as u64 * 256;
    } else {
        match kind {
            k if k == PermMode::Brcb as u64 => {
                if c & 0xffff_ff00 != 0 || c >> 40 != 0 || b >> 32 != 0 {
                    return Err(bad());
                }
                f.repeat = (c & 0xff) as u32;
                f.dst_blk = (b & 0xffff) as u32;
                f.dst_rep = ((b >> 16) & 0xffff) as u32;
                v.a = ub_at(npu, "src", a, f.repeat as u64 * 8 * es, 32)?;
                v.rep = f;
                let s = scatter(&v).unwrap_or_else(|| unreachable!("brcb scatters"));
                v.dst = ub_at(npu, "dst", d, dst_extent(&s, f.repeat as usize * 8), 32)?;
                processed = f.repeat as u64 * 256;
            }
            k if k == PermMode::GatherMask as u64 => {
                let flags = (c >> 40) & 0xf;
                if flags > 3 {
                    return Err(bad());
                }
                f.flags = flags as u8;
                f.src_blk = ((c >> 16) & 0xff) as u32;
                f.pat_rep = ((c >> 24) & 0xff) as u32;
                f.src_rep = ((c >> 48) & 0xffff) as u32;
                let last = if flags & GATHER_MASK_COUNTER != 0 {
                    f.count = f.mask as u64;
                    // As many repeats as the normal mode's 16-bit field allows.
                    f.repeat = u16::try_from(f.count.div_ceil(e as u64)).map_err(|_| bad())? as u32;
                    f.count - (f.repeat.max(1) as u64 - 1) * e as u64
                } else {
                    f.repeat = (c & 0xffff) as u32;
                    f.count = f.repeat as u64 * e as u64;
                    e as u64
                };
                // The source blocks the last repeat reaches, and every block before it.
                let mut ext = 0;
                if f.repeat > 0 {
                    let last_blocks = (last as usize).div_ceil(pb);
                    let full = RepeatForm {
                        repeat: f.repeat - 1,
                        ..f
                    };
                    ext = src_extent(&full, 7).max(
                        ((f.repeat as u64 - 1) * f.src_rep as u64
                            + (last_blocks as u64 - 1) * f.src_blk as u64)
                            * 32
                            + 32,
                    );
                }
                v.a = ub_at(npu, "src0", a, ext, 32)?;
                if flags & GATHER_MASK_BUILTIN != 0 {
                    if !(1..=7).contains(&b) {
                        return Err(bad());
                    }
                    f.builtin = b as u8;
                } else {
                    let pat = if f.repeat == 0 {
                        0
                    } else {
                        (f.repeat as u64 - 1) * f.pat_rep as u64 * 32 + last.div_ceil(8)
                    };
                    v.b = ub_at(npu, "pattern", b, pat, 32)?;
                }
                // How much of dst is written depends on the pattern's bits: checked when the
                // instruction reads them.
                v.dst = ub_at(npu, "dst", d, 0, 32)?;
                processed = f.repeat as u64 * 256;
            }
            k if k == PermMode::Gather as u64 => {
                if c & 0xff00_0000 != 0 || c >> 40 != 0 {
                    return Err(bad());
                }
                f.repeat = (c & 0xff) as u32;
                f.dst_rep = ((c >> 8) & 0xffff) as u32;
                let m = repeat_mask(f.mask, e);
                let offs = if f.repeat == 0 || m == 0 {
                    0
                } else {
                    ((f.repeat as u64 - 1) * e as u64 + 128 - m.leading_zeros() as u64) * 4
                };
                v.b = ub_at(npu, "offsets", b, offs, 32)?;
                v.a = ub_at(npu, "src", a, 0, es)?;
                v.rep = f;
                let s = scatter(&v).unwrap_or_else(|| unreachable!("gather scatters"));
                v.dst = ub_at(npu, "dst", d, dst_extent(&s, f.repeat as usize * e), 32)?;
                processed = f.repeat as u64 * 256;
            }
            _ => return Err(bad()),
        }
    }
    v.rep = f;
    v.n = f.repeat;
    let t = &npu.timing;
    let mut occupancy = t.vector_startup as u64 + processed.div_ceil(t.vector_lanes as u64 * 4);
    if op == VecOp::Red {
        occupancy += (32 - (t.vector_lanes.max(2) - 1).leading_zeros()) as u64;
    }
    Ok((v, occupancy))
}

/// Where `v`'s result rows land; `None` for a contiguous result (gather-mask).
pub(crate) fn scatter(v: &VectorOp) -> Option<Scatter> {
    let f = &v.rep;
    let es = v.dtype.size() as usize;
    let (e, pb) = geometry(v.dtype);
    match v.op {
        VecOp::Red => {
            let red = Reduce::from_code(f.kind as u64)?;
            if red.per_block() {
                return Some(Scatter {
                    row_bytes: es,
                    per: 8,
                    rep_bytes: f.dst_rep as usize * 8 * es,
                    blk_bytes: es,
                    skip: empty_blocks(repeat_mask(f.mask, e), e, pb),
                });
            }
            let row = match (red, f.flags) {
                (Reduce::Sum, _) | (_, 2) => es,
                (_, 3) => 4,
                _ => 2 * es,
            };
            Some(Scatter {
                row_bytes: row,
                per: 1,
                rep_bytes: f.dst_rep as usize * row,
                blk_bytes: 0,
                skip: 0,
            })
        }
        VecOp::Perm if f.kind == PermMode::Brcb as u8 => Some(Scatter {
            row_bytes: 32,
            per: 8,
            rep_bytes: f.dst_rep as usize * 32,
            blk_bytes: f.dst_blk as usize * 32,
            skip: 0,
        }),
        VecOp::Perm if f.kind == PermMode::Gather as u8 => Some(Scatter {
            row_bytes: es,
            per: e,
            rep_bytes: f.dst_rep as usize * 32,
            blk_bytes: es,
            skip: !repeat_mask(f.mask, e),
        }),
        _ => None,
    }
}

fn load(ub: &[u8], off: usize, es: usize) -> u32 {
    if es == 2 {
        u16::from_le_bytes([ub[off], ub[off + 1]]) as u32
    } else {
        u32::from_le_bytes([ub[off], ub[off + 1], ub[off + 2], ub[off + 3]])
    }
}

fn store(out: &mut [u8], bits: u32, es: usize) {
    out[..es].copy_from_slice(&bits.to_le_bytes()[..es]);
}

fn to_f32(bits: u32, t: DType) -> f32 {
    if t == DType::F16 {
        f16_to_f32(bits as u16)
    } else {
        f32::from_bits(bits)
    }
}

fn to_bits(x: f32, t: DType) -> u32 {
    if t == DType::F16 {
        f32_to_f16(x) as u32
    } else {
        x.to_bits()
    }
}

/// One addition of the tree: f32 for f32; for f16 computed in f32 from the exact inputs and
/// rounded once (the correctly rounded sum), a finite sum past the range saturating at
/// ±65504 as Ascend's documentation specifies.
fn add(a: f32, b: f32, t: DType) -> f32 {
    let s = a + b;
    if t != DType::F16 {
        return s;
    }
    let mut h = f32_to_f16(s);
    if h & 0x7fff == 0x7c00 && a.is_finite() && b.is_finite() {
        h = (h & 0x8000) | 0x7bff;
    }
    f16_to_f32(h)
}

/// Pairwise sum over the slots (a power of two): `(0+1) (2+3) …`, then the pairs' pairs.
/// Unselected slots do not take part (a pair with one selected element passes it on).
fn tree(v: &mut [Option<f32>], t: DType) -> Option<f32> {
    let mut n = v.len();
    while n > 1 {
        for i in 0..n / 2 {
            v[i] = match (v[2 * i], v[2 * i + 1]) {
                (Some(x), Some(y)) => Some(add(x, y, t)),
                (x, None) => x,
                (None, y) => y,
            };
        }
        n /= 2;
    }
    v[0]
}

/// The extreme of the selected slots and its slot (the first one on ties; a NaN counts only
/// when every selected element is NaN, as for `vmax`).
fn extreme(v: &[Option<f32>], max: bool) -> Option<(f32, usize)> {
    let mut best: Option<(f32, usize)> = None;
    for (i, x) in v.iter().enumerate() {
        let Some(x) = *x else { continue };
        best = match best {
            None => Some((x, i)),
            Some((b, _)) if b.is_nan() && !x.is_nan() => Some((x, i)),
            Some((b, _)) if (max && x > b) || (!max && x < b) => Some((x, i)),
            keep => keep,
        };
    }
    best
}

fn oob(addr: u64, len: u64, size: usize) -> NpuFault {
    NpuFault::OutOfBuffer {
        buffer: Buffer::Ub,
        addr,
        len,
        size: size as u32,
    }
}

/// Computes `v` (a `vred` / `vperm`) from `ub` into `out`: the rows [`scatter`] places, or
/// the packed elements of a gather-mask. Faults that depend on data (a gather offset, how far
/// a gather-mask writes) are found here.
pub(crate) fn compute(v: &VectorOp, ub: &[u8], out: &mut Staging) -> Result<(), NpuFault> {
    let f = &v.rep;
    let t = v.dtype;
    let es = t.size() as usize;
    let (e, pb) = geometry(t);
    let reps = f.repeat as usize;
    let at = |r: usize, p: usize| {
        v.a as usize + (r * f.src_rep as usize + (p / pb) * f.src_blk as usize) * 32 + (p % pb) * es
    };
    match v.op {
        VecOp::Red => {
            let red = Reduce::from_code(f.kind as u64).unwrap_or(Reduce::Sum);
            let m = repeat_mask(f.mask, e);
            let s = scatter(v).unwrap_or_else(|| unreachable!("vred scatters"));
            out.resize(reps * s.per * s.row_bytes);
            let o = out.bytes_mut();
            let mut slots = [None; 128];
            for r in 0..reps {
                for (p, slot) in slots.iter_mut().enumerate().take(e) {
                    *slot = (m >> p & 1 == 1).then(|| to_f32(load(ub, at(r, p), es), t));
                }
                let row = &mut o[r * s.per * s.row_bytes..(r + 1) * s.per * s.row_bytes];
                match red {
                    Reduce::Sum => {
                        let x = tree(&mut slots[..e], t).unwrap_or(0.0);
                        store(row, to_bits(x, t), es);
                    }
                    Reduce::Max | Reduce::Min => {
                        let (x, i) = extreme(&slots[..e], red == Reduce::Max).unwrap_or((0.0, 0));
                        let (x, i) = (to_bits(x, t), i as u32);
                        match f.flags {
                            0 => {
                                store(row, x, es);
                                store(&mut row[es..], i, es);
                            }
                            1 => {
                                store(row, i, es);
                                store(&mut row[es..], x, es);
                            }
                            2 => store(row, x, es),
                            _ => store(row, i, 4),
                        }
                    }
                    _ => {
                        for k in 0..8 {
                            let blk = &mut slots[k * pb..(k + 1) * pb];
                            let x = match red {
                                Reduce::BlockSum => tree(blk, t),
                                _ => extreme(blk, red == Reduce::BlockMax).map(|(x, _)| x),
                            };
                            store(&mut row[k * es..], to_bits(x.unwrap_or(0.0), t), es);
                        }
                    }
                }
            }
        }
        VecOp::Perm if f.kind == PermMode::Brcb as u8 => {
            out.resize(reps * 8 * 32);
            let o = out.bytes_mut();
            for i in 0..reps * 8 {
                let x = load(ub, v.a as usize + i * es, es);
                for j in 0..pb {
                    store(&mut o[i * 32 + j * es..], x, es);
                }
            }
        }
        VecOp::Perm if f.kind == PermMode::Gather as u8 => {
            let m = repeat_mask(f.mask, e);
            out.resize(reps * e * es);
            let o = out.bytes_mut();
            for r in 0..reps {
                for p in (0..e).filter(|p| m >> p & 1 == 1) {
                    let i = r * e + p;
                    let off = load(ub, v.b as usize + 4 * i, 4) as u64;
                    let src = v.a as u64 + off;
                    let addr = abi::UB_BASE + v.a as u64 + off;
                    if !off.is_multiple_of(es as u64) || src + es as u64 > ub.len() as u64 {
                        return Err(NpuFault::BadGatherOffset {
                            element: i as u32,
                            offset: off,
                            addr,
                        });
                    }
                    let x = load(ub, src as usize, es);
                    store(&mut o[i * es..], x, es);
                }
            }
        }
        _ => {
            // Gather-mask: the selected elements, packed.
            let counter = f.flags as u64 & GATHER_MASK_COUNTER != 0;
            let mut picked = Vec::with_capacity(f.count.min(1 << 16) as usize);
            for r in 0..reps {
                let n = if counter {
                    (f.count - (r * e) as u64).min(e as u64) as usize
                } else {
                    e
                };
                for p in 0..n {
                    let keep = match f.builtin {
                        0 => {
                            let byte = v.b as usize + r * f.pat_rep as usize * 32 + p / 8;
                            ub[byte] >> (p % 8) & 1 == 1
                        }
                        1 => p % 2 == 0,
                        2 => p % 2 == 1,
                        c @ 3..=6 => p % 4 == c as usize - 3,
                        _ => true,
                    };
                    if keep {
                        if v.dst as usize + (picked.len() + 1) * es > ub.len() {
                            let len = (picked.len() as u64 + 1) * es as u64;
                            return Err(oob(abi::UB_BASE + v.dst as u64, len, ub.len()));
                        }
                        picked.push(load(ub, at(r, p), es));
                    }
                }
            }
            out.resize(picked.len() * es);
            let o = out.bytes_mut();
            for (i, x) in picked.into_iter().enumerate() {
                store(&mut o[i * es..], x, es);
            }
        }
    }
    Ok(())
}
