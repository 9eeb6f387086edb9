//! Issuing the extension's instructions from the scalar core: operand checks, costs from the
//! timing, scheduling on a pipe, and the scalar unit's own accesses to UB.

use super::cube::CubeOp;
use super::dtype::{CmpMode, DType, RoundMode};
use super::isa::{CopyDir, CopyMode, CubeLayout, SyncOp, VecClass, VecOp};
use super::layout::{Buffer, pitch};
use super::masked;
use super::pipes::{PIPE_ALL, Pipe, Pipes};
use super::vector::VectorOp;
use super::{AsyncOp, CROSS_FLAGS, CopyOp, CrossSet, Npu, NpuFault, Side};
use crate::abi;
use crate::core::Exit;
use crate::core::decode::{Inst, Op};
use crate::core::trap::Trap;
use crate::core::{Bus, Core};

/// A checked local-side region: the offset of its first byte.
fn local_region(
    npu: &Npu,
    operand: &'static str,
    expected: Buffer,
    addr: u64,
    rows: u64,
    row_bytes: u64,
    stride: u64,
) -> Result<usize, NpuFault> {
    let off = match Buffer::at(addr) {
        Some((b, off)) if b == expected => off,
        _ => {
            return Err(NpuFault::WrongBuffer {
                operand,
                expected,
                addr,
            });
        }
    };
    if !off.is_multiple_of(abi::LOCAL_BUFFER_ALIGN) {
        return Err(NpuFault::Misaligned {
            buffer: expected,
            what: "address",
            value: addr,
        });
    }
    if rows > 1 {
        if !stride.is_multiple_of(abi::LOCAL_BUFFER_ALIGN) {
            return Err(NpuFault::Misaligned {
                buffer: expected,
                what: "stride",
                value: stride,
            });
        }
        if stride < row_bytes {
            return Err(NpuFault::OverlappingRows {
                buffer: expected,
                stride,
                row_bytes,
            });
        }
    }
    let len = if rows == 0 || row_bytes == 0 {
        0
    } else {
        (rows - 1)
            .checked_mul(stride)
            .and_then(|v| v.checked_add(row_bytes))
            .unwrap_or(u64::MAX)
    };
    let size = npu.buffers.size(expected) as u64;
    if off > size || len > size - off {
        return Err(NpuFault::OutOfBuffer {
            buffer: expected,
            addr,
            len,
            size: size as u32,
        });
    }
    Ok(off as usize)
}

/// A checked contiguous UB operand of `len` bytes.
fn ub(npu: &Npu, operand: &'static str, addr: u64, len: u64) -> Result<u32, NpuFault> {
    local_region(npu, operand, Buffer::Ub, addr, 1, len, 0).map(|o| o as u32)
}

/// `ceil(log2(x))`.
fn log2_ceil(x: u32) -> u64 {
    (32 - x.max(1).saturating_sub(1).leading_zeros()) as u64
}

/// Rounds up to a multiple of 16 (the cube's fractal edge).
fn pad16(x: u32) -> u64 {
    (x as u64).div_ceil(16) * 16
}

impl Npu {
    fn vector_op(&self, op: VecOp, [d, a, b, c]: [u64; 4]) -> Result<(VectorOp, u64), NpuFault> {
        let n = c & 0xffff_ffff;
        let field = |shift: u32| (c >> shift) & 0xf;
        let bad = || NpuFault::BadVectorOperand {
            op: op.name(),
            value: c,
        };
        let dtype = DType::from_code(field(32)).ok_or_else(bad)?;
        let (mut src_dtype, mut mode, mut mask_off) = (dtype, 0u8, None);
        match op {
            VecOp::Cvt => {
                src_dtype = DType::from_code(field(40)).ok_or_else(bad)?;
                mode = RoundMode::from_code(field(36)).ok_or_else(bad)? as u8;
                // Packed i4 operands are whole bytes: an even count.
                let i4 = dtype == DType::I4 || src_dtype == DType::I4;
                if c >> 44 != 0 || (i4 && !n.is_multiple_of(2)) {
                    return Err(bad());
                }
            }
            VecOp::Cmp => {
                mode = CmpMode::from_code(field(36)).ok_or_else(bad)? as u8;
                if c >> 40 != 0 {
                    return Err(bad());
                }
            }
            VecOp::Sel => {
                mode = field(36) as u8;
                if mode > 1 || field(40) != 0 || (c >> 44) & 0xf != 0 {
                    return Err(bad());
                }
                mask_off = Some((c >> 48) * abi::LOCAL_BUFFER_ALIGN);
            }
            _ => {
                if c >> 36 != 0 {
                    return Err(bad());
                }
            }
        }
        if !op.supports(dtype) {
            return Err(NpuFault::UnsupportedType {
                op: op.name(),
                dtype,
            });
        }
        let mut v = VectorOp {
            op,
            dst: 0,
            a: 0,
            b: 0,
            scalar: f32::from_bits(b as u32),
            n: 0,
            dtype,
            src_dtype,
            mode,
            mask: 0,
            scalar_bits: b,
            rep: Default::default(),
        };
        // `n` has 32 bits, so no operand size overflows.
        v.n = n as u32;
        v.dst = ub(self, "dst", d, v.dst_bytes())?;
        let src = v.src_bytes();
        match op.class() {
            VecClass::Binary | VecClass::Compare => {
                v.a = ub(self, "a", a, src)?;
                v.b = ub(self, "b", b, src)?;
            }
            VecClass::Select => {
                v.a = ub(self, "a", a, src)?;
                if mode == 0 {
                    v.b = ub(self, "b", b, src)?;
                }
                let m = mask_off.unwrap_or(0);
                v.mask = ub(self, "mask", abi::UB_BASE + m, n.div_ceil(8))?;
            }
            VecClass::Scalar if op == VecOp::Dup => {}
            _ => v.a = ub(self, "a", a, src)?,
        }
        // Bytes per cycle: `vector_lanes` f32 elements, so f16 / i16 go twice as fast.
        let t = &self.timing;
        let widest = v.src_elem().max(match op {
            VecOp::CvtF16ToF32 => 4,
            VecOp::CvtF32ToF16 => 2,
            _ => dtype.size(),
        });
        let mut occupancy =
            t.vector_startup as u64 + (n * widest).div_ceil(t.vector_lanes as u64 * 4);
        if op.class() == VecClass::Reduce {
            occupancy += log2_ceil(t.vector_lanes);
        }
        Ok((v, occupancy))
    }

    fn copy_op(
        &self,
        dir: CopyDir,
        mode: CopyMode,
        [d, s, shape, strides]: [u64; 4],
        repeat: u64,
    ) -> Result<(CopyOp, u64, u64), NpuFault> {
        let (rows, row_bytes) = (shape >> 32, shape & 0xffff_ffff);
        let (src_stride, dst_stride) = (strides >> 32, strides & 0xffff_ffff);
        // The repeat register: `reps | src_rep << 16 | dst_rep << 40`, 0 reps one rectangle.
        let reps = (repeat & 0xffff).max(1);
        let (src_rep, dst_rep) = ((repeat >> 16) & 0xff_ffff, repeat >> 40);
        let out_row_bytes = mode.out_row_bytes(row_bytes).ok_or(NpuFault::BadCopyRow {
            op: dir.name(),
            mode,
            row_bytes,
        })?;
        // Every repeat's rectangle lies in its buffer: the first and the last do (the buffer
        // is one range and the repeats step forward).
        let side = |buffer: Option<Buffer>, operand, addr, stride, rep: u64, bytes| {
            Ok::<_, NpuFault>(match buffer {
                None => Side::Gm(addr),
                Some(b) => {
                    let off = local_region(self, operand, b, addr, rows, bytes, stride)?;
                    if reps > 1 {
                        if !rep.is_multiple_of(abi::LOCAL_BUFFER_ALIGN) {
                            return Err(NpuFault::Misaligned {
                                buffer: b,
                                what: "repeat stride",
                                value: rep,
                            });
                        }
                        let last = addr + (reps - 1) * rep;
                        local_region(self, operand, b, last, rows, bytes, stride)?;
                    }
                    Side::Local(b, off)
                }
            })
        };
        let src = side(dir.src(), "src", s, src_stride, src_rep, row_bytes)?;
        let dst = side(dir.dst(), "dst", d, dst_stride, dst_rep, out_row_bytes)?;
        // A local side bounds rows × row_bytes by its buffer, so this cannot overflow.
        let bytes = if row_bytes == 0 {
            0
        } else {
            reps * rows * pitch(row_bytes)
        };
        let t = &self.timing;
        let (occupancy, extra) = match dir.pipe() {
            Pipe::Mte1 => (
                t.mte1_setup as u64 + t.l1_bytes_per_cycle.cycles_for(bytes),
                0,
            ),
            _ => (
                t.mte_setup as u64 + t.gm_bytes_per_cycle.cycles_for(bytes),
                t.gm_latency as u64,
            ),
        };
        let op = CopyOp {
            src,
            dst,
            rows: if row_bytes == 0 { 0 } else { rows },
            row_bytes,
            src_stride,
            dst_stride,
            reps,
            src_rep,
            dst_rep,
            mode,
        };
        Ok((op, occupancy, extra))
    }

    fn cube_op(&self, funct: u8, [c, a, b, mnk]: [u64; 4]) -> Result<(CubeOp, u64), NpuFault> {
        let (m, n, k) = (mnk & 0xffff, (mnk >> 16) & 0xffff, (mnk >> 32) & 0xffff);
        let bias = if funct & 8 != 0 {
            let addr = abi::BT_BASE + (mnk >> 48) * abi::LOCAL_BUFFER_ALIGN;
            Some(local_region(self, "bias", Buffer::Bt, addr, 1, n * 4, 0)? as u32)
        } else {
            None
        };
        let mut op = CubeOp {
            bias,
            c: 0,
            a: 0,
            b: 0,
            m: m as u32,
            n: n as u32,
            k: k as u32,
            accumulate: funct & 1 != 0,
            f32_inputs: funct & 2 != 0,
            layout: if funct & 4 != 0 {
                CubeLayout::Fractal
            } else {
                CubeLayout::RowMajor
            },
        };
        match op.layout {
            CubeLayout::RowMajor => {
                let e = op.elem();
                let (pa, pb, pc) = op.pitches();
                op.a = local_region(self, "a", Buffer::L0a, a, m, k * e, pa)? as u32;
                op.b = local_region(self, "b", Buffer::L0b, b, k, n * e, pb)? as u32;
                op.c = local_region(self, "c", Buffer::L0c, c, m, n * 4, pc)? as u32;
            }
            CubeLayout::Fractal => {
                let (ea, eb, ec) = op.extents();
                op.a = local_region(self, "a", Buffer::L0a, a, 1, ea, 0)? as u32;
                op.b = local_region(self, "b", Buffer::L0b, b, 1, eb, 0)? as u32;
                op.c = local_region(self, "c", Buffer::L0c, c, 1, ec, 0)? as u32;
            }
        }
        let t = &self.timing;
        let rate = if op.f32_inputs {
            t.cube_f32_flops_per_cycle
        } else {
            t.cube_f16_flops_per_cycle
        } as u64;
        let flops = pad16(op.m) * pad16(op.n) * pad16(op.k) * 2;
        Ok((op, t.cube_startup as u64 + flops.div_ceil(rate)))
    }

    /// Checks a scalar access of `len` bytes at `addr` (in `buffer`'s window, at `off`);
    /// returns the UB offset.
    pub(crate) fn scalar_check(
        &self,
        buffer: Buffer,
        addr: u64,
        off: u64,
        len: usize,
        store: bool,
    ) -> Result<usize, NpuFault> {
        if buffer != Buffer::Ub {
            return Err(NpuFault::ScalarAccess {
                access: if store { "store" } else { "load" },
                buffer,
                addr,
            });
        }
        let size = self.buffers.size(Buffer::Ub) as u64;
        if off + len as u64 > size {
            return Err(NpuFault::OutOfBuffer {
                buffer,
                addr,
                len: len as u64,
                size: size as u32,
            });
        }
        Ok(off as usize)
    }
}

impl Core {
    /// Executes one extension instruction at scalar time `self.cycles` (already charged its
    /// issue cost). Stalls move `self.cycles` forward.
    pub(crate) fn exec_npu<B: Bus>(
        &mut self,
        bus: &mut B,
        inst: Inst,
        pc: u64,
    ) -> Result<(), Trap> {
        let regs = [
            self.x[inst.rd as usize & 31],
            self.x[inst.rs1 as usize & 31],
            self.x[inst.rs2 as usize & 31],
            self.x[(inst.imm >> 8) as usize & 31],
        ];
        let code = inst.imm as u8;
        let fault = |fault| Trap::Npu { pc, fault };
        self.npu.instructions += 1;
        // Keeps the in-flight queue short; correctness does not depend on it.
        self.npu.advance(self.cycles, bus)?;
        match inst.op {
            Op::NpuVector => {
                let op = VecOp::from_code(code).ok_or(Trap::IllegalInstruction { pc, bits: 0 })?;
                if op == VecOp::Mask {
                    // A scalar-side register write: instructions issued later read it.
                    self.npu.vmask = regs[1] as u128 | (regs[2] as u128) << 64;
                    return Ok(());
                }
                let (v, occ) = if op.class() == VecClass::Masked {
                    masked::decode(&self.npu, op, regs)
                } else {
                    self.npu.vector_op(op, regs)
                }
                .map_err(fault)?;
                self.issue(Pipe::V, occ, 0, AsyncOp::Vector(v), pc);
            }
            Op::NpuMove => {
                let illegal = Trap::IllegalInstruction { pc, bits: 0 };
                let dir = CopyDir::from_code(code & 7).ok_or(illegal.clone())?;
                let mode = CopyMode::decode(dir, code >> 3).ok_or(illegal)?;
                let repeat = std::mem::take(&mut self.npu.move_repeat);
                let (c, occ, extra) = self.npu.copy_op(dir, mode, regs, repeat).map_err(fault)?;
                self.issue(dir.pipe(), occ, extra, AsyncOp::Copy(c), pc);
            }
            Op::NpuCube => {
                let (c, occ) = self.npu.cube_op(code, regs).map_err(fault)?;
                self.issue(Pipe::M, occ, 0, AsyncOp::Cube(c), pc);
            }
            _ => {
                let now = self.cycles;
                let until = match SyncOp::from_code(code) {
                    Some(SyncOp::SetFlag) => {
                        let (s, d, e) = Pipes::flag_operand("set_flag", regs[1]).map_err(fault)?;
                        self.npu.pipes.set_flag(s, d, e, now).map_err(fault)?;
                        None
                    }
                    Some(SyncOp::WaitFlag) => {
                        let (s, d, e) = Pipes::flag_operand("wait_flag", regs[1]).map_err(fault)?;
                        self.npu.pipes.wait_flag(s, d, e).map_err(fault)?
                    }
                    Some(SyncOp::Barrier) => self.npu.pipes.barrier(regs[1]).map_err(fault)?,
                    Some(SyncOp::SyncAll) => {
                        // Everything the block issued lands before another block goes on.
                        let blocks = u32::try_from(regs[1])
                            .map_err(|_| fault(NpuFault::BadSyncAll { blocks: regs[1] }))?;
                        self.npu.wait = Some(Exit::SyncAll(blocks));
                        self.npu.pipes.barrier(PIPE_ALL as u64).map_err(fault)?
                    }
                    Some(SyncOp::CrossSet) => {
                        let v = regs[1];
                        let (flag, mode) = (v & 0xff, (v >> 8) & 0xff);
                        let pipe = Pipe::from_number((v >> 16) & 0xff)
                            .filter(|&p| p != Pipe::S)
                            .ok_or(fault(NpuFault::BadPipe {
                                what: "cross_set",
                                value: v,
                            }))?;
                        if flag >= CROSS_FLAGS as u64 || mode > 2 || v >> 24 != 0 {
                            return Err(fault(NpuFault::BadCrossFlag { value: v }));
                        }
                        let at = self.npu.pipes.released_at(pipe, now);
                        self.npu.cross_sets.push(CrossSet {
                            flag: flag as u8,
                            mode: mode as u8,
                            at,
                        });
                        None
                    }
                    Some(SyncOp::CrossWait) => {
                        let flag = regs[1];
                        if flag >= CROSS_FLAGS as u64 {
                            return Err(fault(NpuFault::BadCrossFlag { value: flag }));
                        }
                        // The launch keeps the counters: it resumes the block once a set is
                        // counted, from the cycle that set was released.
                        self.npu.wait = Some(Exit::CrossWait(flag as u8));
                        None
                    }
                    None => return Err(Trap::IllegalInstruction { pc, bits: 0 }),
                };
                if let Some(t) = until {
                    self.stall_until(t);
                }
            }
        }
        Ok(())
    }

    fn issue(&mut self, pipe: Pipe, occupancy: u64, extra: u64, op: AsyncOp, pc: u64) {
        let t = self.npu.pipes.issue_time(pipe, self.cycles);
        self.stall_until(t);
        let slot = self.npu.pipes.schedule(pipe, self.cycles, occupancy, extra);
        self.npu.enqueue(slot, op, pc);
    }

    fn stall_until(&mut self, t: u64) {
        if t > self.cycles {
            self.npu.stall_cycles += t - self.cycles;
            self.cycles = t;
        }
    }
}
