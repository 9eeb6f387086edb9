//! The dispatch loop. One `match` on the pre-decoded [`Op`] per instruction; the program
//! counter, the instruction and cycle counts live in locals; the stack window is a plain byte
//! array; everything rare (bus accesses, CSRs, `ecall`, traps) is out of line so the loop
//! stays small.

use super::csr::{MCAUSE, MEPC, MTVEC};
use super::decode::{Inst, Op, Program, RM_DYN};
use super::fpu::{self, Cmp, IntKind, Rm};
use super::npu::Buffer;
use super::trap::Trap;
use super::{Bus, Core, Exit};
use crate::abi;

/// How a run stops: normally (`Ok`) or with a trap.
type Stop = Result<Exit, Trap>;

/// The NaN-boxing pattern of a single-precision value in a 64-bit FP register.
const BOX: u64 = 0xffff_ffff_0000_0000;

/// Cause value the test environment expects for an `ecall` (environment call from M-mode).
const CAUSE_MACHINE_ECALL: u64 = 11;

/// Largest string `ECALL_PRINT_STR` reads.
const PRINT_CAP: u64 = 4096;

/// Maps the offset of `pc` from the program base to an instruction index. Rotating puts the
/// two alignment bits at the top, so a misaligned `pc` yields a huge index and misses the
/// bounds check together with out-of-range ones: one compare covers both.
#[inline(always)]
fn slot(off: u64) -> usize {
    usize::try_from(off.rotate_right(2)).unwrap_or(usize::MAX)
}

/// What an out-of-line instruction did to control flow.
enum Flow {
    /// Continue at the next instruction.
    Next,
    /// Continue at this pc.
    Jump(u64),
    /// End the run.
    Stop(Stop),
}

impl Core {
    /// Runs from `self.pc` until the block returns to `abi::EXIT_PC`, a test-mode `tohost`
    /// store, a trap, or `budget` more instructions have executed.
    ///
    /// Only the frequent classes (integer ALU, branches, jumps, loads, stores, multiplies) are
    /// handled inline; everything else goes through [`Core::exec_rare`] so the loop keeps its
    /// state in machine registers.
    pub(crate) fn exec<B: Bus>(&mut self, prog: &Program, bus: &mut B, budget: u64) -> Stop {
        let insts = prog.insts();
        let base = prog.base();
        let taken_extra = self
            .latencies
            .branch_taken
            .saturating_sub(self.latencies.branch_not_taken) as u64;
        let start_instret = self.instret;
        let mut pc = self.pc;
        // Instructions still allowed; executed = budget - left.
        let mut left = budget;
        let mut cycles = self.cycles;

        // Early exits from inside `match` arms.
        macro_rules! tr {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(t) => break Err(t),
                }
            };
        }
        macro_rules! st {
            ($e:expr) => {
                if let Err(stop) = $e {
                    break stop;
                }
            };
        }

        let stop: Stop = loop {
            let Some(&inst) = insts.get(slot(pc.wrapping_sub(base))) else {
                break self.fetch_miss(pc);
            };
            if left == 0 {
                break Err(Trap::BudgetExceeded { pc, budget });
            }
            left -= 1;
            cycles += self.op_costs[inst.op as usize] as u64;

            let rd = inst.rd as usize & 63;
            let a = self.x[inst.rs1 as usize & 31];
            let b = self.x[inst.rs2 as usize & 31];
            let imm = inst.imm as i64 as u64;
            let mut next = pc.wrapping_add(4);

            match inst.op {
                Op::Addi => self.x[rd] = a.wrapping_add(imm),
                Op::Add => self.x[rd] = a.wrapping_add(b),
                Op::Sub => self.x[rd] = a.wrapping_sub(b),
                Op::Addiw => self.x[rd] = sext32(a.wrapping_add(imm)),
                Op::Addw => self.x[rd] = sext32(a.wrapping_add(b)),
                Op::Subw => self.x[rd] = sext32(a.wrapping_sub(b)),
                Op::Slti => self.x[rd] = ((a as i64) < (imm as i64)) as u64,
                Op::Sltiu => self.x[rd] = (a < imm) as u64,
                Op::Slt => self.x[rd] = ((a as i64) < (b as i64)) as u64,
                Op::Sltu => self.x[rd] = (a < b) as u64,
                Op::Xori => self.x[rd] = a ^ imm,
                Op::Ori => self.x[rd] = a | imm,
                Op::Andi => self.x[rd] = a & imm,
                Op::Xor => self.x[rd] = a ^ b,
                Op::Or => self.x[rd] = a | b,
                Op::And => self.x[rd] = a & b,
                Op::Slli => self.x[rd] = a << (imm & 63),
                Op::Srli => self.x[rd] = a >> (imm & 63),
                Op::Srai => self.x[rd] = ((a as i64) >> (imm & 63)) as u64,
                Op::Sll => self.x[rd] = a << (b & 63),
                Op::Srl => self.x[rd] = a >> (b & 63),
                Op::Sra => self.x[rd] = ((a as i64) >> (b & 63)) as u64,
                Op::Slliw => self.x[rd] = sext32(((a as u32) << (imm & 31)) as u64),
                Op::Srliw => self.x[rd] = sext32(((a as u32) >> (imm & 31)) as u64),
                Op::Sraiw => self.x[rd] = ((a as i32) >> (imm & 31)) as i64 as u64,
                Op::Sllw => self.x[rd] = sext32(((a as u32) << (b & 31)) as u64),
                Op::Srlw => self.x[rd] = sext32(((a as u32) >> (b & 31)) as u64),
                Op::Sraw => self.x[rd] = ((a as i32) >> (b & 31)) as i64 as u64,
                Op::Auipc => self.x[rd] = pc.wrapping_add(imm),
                Op::Mul => self.x[rd] = a.wrapping_mul(b),
                Op::Mulw => self.x[rd] = sext32(a.wrapping_mul(b)),
                Op::Nop => {}

                Op::Jal => {
                    self.x[rd] = next;
                    next = pc.wrapping_add(imm);
                }
                Op::Jalr => {
                    self.x[rd] = next;
                    next = a.wrapping_add(imm) & !1;
                }
                Op::Beq | Op::Bne | Op::Blt | Op::Bge | Op::Bltu | Op::Bgeu => {
                    let taken = match inst.op {
                        Op::Beq => a == b,
                        Op::Bne => a != b,
                        Op::Blt => (a as i64) < (b as i64),
                        Op::Bge => (a as i64) >= (b as i64),
                        Op::Bltu => a < b,
                        _ => a >= b,
                    };
                    if taken {
                        next = pc.wrapping_add(imm);
                        cycles += taken_extra;
                    }
                }

                Op::Lb => {
                    let v = tr!(self.load::<1, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.x[rd] = v[0] as i8 as u64;
                }
                Op::Lbu => {
                    let v = tr!(self.load::<1, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.x[rd] = v[0] as u64;
                }
                Op::Lh => {
                    let v = tr!(self.load::<2, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.x[rd] = i16::from_le_bytes(v) as u64;
                }
                Op::Lhu => {
                    let v = tr!(self.load::<2, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.x[rd] = u16::from_le_bytes(v) as u64;
                }
                Op::Lw => {
                    let v = tr!(self.load::<4, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.x[rd] = i32::from_le_bytes(v) as u64;
                }
                Op::Lwu => {
                    let v = tr!(self.load::<4, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.x[rd] = u32::from_le_bytes(v) as u64;
                }
                Op::Ld => {
                    let v = tr!(self.load::<8, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.x[rd] = u64::from_le_bytes(v);
                }
                Op::Sb => st!(self.store::<1, B>(bus, a.wrapping_add(imm), [b as u8], pc, cycles)),
                Op::Sh => st!(self.store(
                    bus,
                    a.wrapping_add(imm),
                    (b as u16).to_le_bytes(),
                    pc,
                    cycles
                )),
                Op::Sw => st!(self.store(
                    bus,
                    a.wrapping_add(imm),
                    (b as u32).to_le_bytes(),
                    pc,
                    cycles
                )),
                Op::Sd => st!(self.store(bus, a.wrapping_add(imm), b.to_le_bytes(), pc, cycles)),
                Op::Flw => {
                    let v = tr!(self.load::<4, B>(bus, a.wrapping_add(imm), pc, cycles));
                    self.f[inst.rd as usize & 31] = BOX | u32::from_le_bytes(v) as u64;
                }
                Op::Fsw => {
                    // Stores move the raw low 32 bits, boxed or not.
                    let v = self.f[inst.rs2 as usize & 31] as u32;
                    st!(self.store(bus, a.wrapping_add(imm), v.to_le_bytes(), pc, cycles));
                }

                Op::NpuVector | Op::NpuMove | Op::NpuCube | Op::NpuSync => {
                    // The extension runs at the cycle after its issue cost; stalls (waits,
                    // full queues) move the scalar clock on.
                    self.instret = start_instret + (budget - left);
                    self.cycles = cycles;
                    let r = self.exec_npu(bus, inst, pc);
                    cycles = self.cycles;
                    tr!(r);
                    // A wait for another block: the launch resumes the block after it.
                    if inst.op == Op::NpuSync
                        && let Some(exit) = self.npu.wait.take()
                    {
                        pc = next;
                        break Ok(exit);
                    }
                }

                _ => {
                    // CSR reads see the counters as of the start of this instruction.
                    self.instret = start_instret + (budget - left) - 1;
                    self.cycles = cycles - self.op_costs[inst.op as usize] as u64;
                    match self.exec_rare(prog, bus, inst, pc, a, b) {
                        Flow::Next => {}
                        Flow::Jump(target) => next = target,
                        Flow::Stop(stop) => break stop,
                    }
                }
            }
            pc = next;
        };

        self.pc = pc;
        self.instret = start_instret + (budget - left);
        self.cycles = cycles;
        stop
    }

    /// The instructions kept out of the hot loop: M-extension high multiplies and divisions,
    /// all F arithmetic, CSRs, and the system instructions.
    #[inline(never)]
    fn exec_rare<B: Bus>(
        &mut self,
        prog: &Program,
        bus: &mut B,
        inst: Inst,
        pc: u64,
        a: u64,
        b: u64,
    ) -> Flow {
        let rd = inst.rd as usize & 63;
        let illegal = || Flow::Stop(Err(illegal(prog, pc)));
        macro_rules! rm {
            ($field:expr) => {
                match self.rounding_mode($field) {
                    Some(rm) => rm,
                    None => return illegal(),
                }
            };
        }
        let mut fl = 0;
        match inst.op {
            Op::Mulh => self.x[rd] = ((a as i64 as i128 * b as i64 as i128) >> 64) as u64,
            Op::Mulhsu => self.x[rd] = ((a as i64 as i128 * b as i128) >> 64) as u64,
            Op::Mulhu => self.x[rd] = ((a as u128 * b as u128) >> 64) as u64,
            Op::Div
            | Op::Divu
            | Op::Rem
            | Op::Remu
            | Op::Divw
            | Op::Divuw
            | Op::Remw
            | Op::Remuw => match self.divide(inst.op, a, b, pc) {
                Ok(v) => self.x[rd] = v,
                Err(t) => return Flow::Stop(Err(t)),
            },

            Op::FaddS | Op::FsubS | Op::FmulS | Op::FdivS => {
                let rm = rm!(inst.imm as u8);
                let (fa, fb) = (self.fs(inst.rs1), self.fs(inst.rs2));
                let r = match inst.op {
                    Op::FaddS => fpu::add(fa, fb, rm, &mut fl),
                    Op::FsubS => fpu::add(fa, fb ^ 0x8000_0000, rm, &mut fl),
                    Op::FmulS => fpu::mul(fa, fb, rm, &mut fl),
                    _ => fpu::div(fa, fb, rm, &mut fl),
                };
                self.set_fs(inst.rd, r);
            }
            Op::FmaddS | Op::FmsubS | Op::FnmsubS | Op::FnmaddS => {
                let rm = rm!((inst.imm >> 8) as u8);
                let (fa, fb, fc) = (
                    self.fs(inst.rs1),
                    self.fs(inst.rs2),
                    self.fs(inst.imm as u8),
                );
                let (neg_prod, neg_add) = match inst.op {
                    Op::FmaddS => (false, false),
                    Op::FmsubS => (false, true),
                    Op::FnmsubS => (true, false),
                    _ => (true, true),
                };
                let r = fpu::fma(fa, fb, fc, neg_prod, neg_add, rm, &mut fl);
                self.set_fs(inst.rd, r);
            }
            Op::FsqrtS => {
                let rm = rm!(inst.imm as u8);
                let r = fpu::sqrt(self.fs(inst.rs1), rm, &mut fl);
                self.set_fs(inst.rd, r);
            }
            Op::FsgnjS | Op::FsgnjnS | Op::FsgnjxS => {
                let (fa, fb) = (self.fs(inst.rs1), self.fs(inst.rs2));
                let sign = match inst.op {
                    Op::FsgnjS => fb,
                    Op::FsgnjnS => !fb,
                    _ => fa ^ fb,
                } & 0x8000_0000;
                self.set_fs(inst.rd, (fa & 0x7fff_ffff) | sign);
            }
            Op::FminS | Op::FmaxS => {
                let r = fpu::min_max(
                    self.fs(inst.rs1),
                    self.fs(inst.rs2),
                    inst.op == Op::FmaxS,
                    &mut fl,
                );
                self.set_fs(inst.rd, r);
            }
            Op::FeqS | Op::FltS | Op::FleS => {
                let kind = match inst.op {
                    Op::FeqS => Cmp::Eq,
                    Op::FltS => Cmp::Lt,
                    _ => Cmp::Le,
                };
                self.x[rd] = fpu::compare(self.fs(inst.rs1), self.fs(inst.rs2), kind, &mut fl);
            }
            Op::FclassS => self.x[rd] = fpu::classify(self.fs(inst.rs1)),
            Op::FmvXW => self.x[rd] = self.f[inst.rs1 as usize & 31] as u32 as i32 as i64 as u64,
            Op::FmvWX => self.f[inst.rd as usize & 31] = BOX | a as u32 as u64,
            Op::FcvtWS | Op::FcvtWuS | Op::FcvtLS | Op::FcvtLuS => {
                let rm = rm!(inst.imm as u8);
                let kind = match inst.op {
                    Op::FcvtWS => IntKind::W,
                    Op::FcvtWuS => IntKind::Wu,
                    Op::FcvtLS => IntKind::L,
                    _ => IntKind::Lu,
                };
                self.x[rd] = fpu::to_int(self.fs(inst.rs1), kind, rm, &mut fl);
            }
            Op::FcvtSW | Op::FcvtSWu | Op::FcvtSL | Op::FcvtSLu => {
                let rm = rm!(inst.imm as u8);
                let kind = match inst.op {
                    Op::FcvtSW => IntKind::W,
                    Op::FcvtSWu => IntKind::Wu,
                    Op::FcvtSL => IntKind::L,
                    _ => IntKind::Lu,
                };
                let r = fpu::from_int(a, kind, rm, &mut fl);
                self.set_fs(inst.rd, r);
            }

            Op::Csrrw | Op::Csrrs | Op::Csrrc | Op::Csrrwi | Op::Csrrsi | Op::Csrrci => {
                // The gather-mask count is what has landed by now.
                if (inst.imm as u32 & 0xfff) as u16 == crate::abi::CSR_RSVD_CNT
                    && let Err(t) = self.npu.advance(self.cycles, bus)
                {
                    return Flow::Stop(Err(t));
                }
                if self.csr_op(inst).is_err() {
                    return illegal();
                }
            }
            Op::Ecall => {
                return match self.ecall(bus, pc) {
                    Ok(Some(target)) => Flow::Jump(target),
                    Ok(None) => Flow::Next,
                    Err(t) => Flow::Stop(Err(t)),
                };
            }
            Op::Ebreak => return Flow::Stop(Err(Trap::Breakpoint { pc })),
            Op::Mret => {
                return match self.test_mode {
                    Some(_) => Flow::Jump(self.test_csrs[MEPC as usize]),
                    None => illegal(),
                };
            }
            // The hot loop handles every other op; reaching here means an illegal encoding.
            _ => return illegal(),
        }
        self.fflags |= fl;
        Flow::Next
    }

    /// The register value of a single-precision operand: NaN-boxed values yield their low 32
    /// bits, anything else reads as the canonical NaN (F extension, NaN boxing).
    #[inline(always)]
    fn fs(&self, r: u8) -> u32 {
        let v = self.f[r as usize & 31];
        if v >> 32 == 0xffff_ffff {
            v as u32
        } else {
            fpu::CANONICAL_NAN
        }
    }

    #[inline(always)]
    fn set_fs(&mut self, r: u8, bits: u32) {
        self.f[r as usize & 31] = BOX | bits as u64;
    }

    /// The static mode of the instruction or, for the dynamic field value, `frm`; `None` when
    /// the result is a reserved mode (an illegal instruction).
    #[inline(always)]
    fn rounding_mode(&self, field: u8) -> Option<Rm> {
        Rm::from_bits(if field == RM_DYN { self.frm } else { field })
    }

    /// A fetch outside the program: the normal exit, or a fault.
    #[cold]
    fn fetch_miss(&self, pc: u64) -> Stop {
        if pc == abi::EXIT_PC {
            Ok(Exit::Returned)
        } else if pc & 3 != 0 {
            Err(Trap::InstructionMisaligned { pc })
        } else {
            Err(Trap::InstructionPageFault { pc })
        }
    }

    /// DIV/REM and their word forms. A zero divisor traps on the NPU; in test mode it gives
    /// the RISC-V results (all ones, or the dividend). Overflow (MIN / -1) wraps per spec.
    #[inline(always)]
    fn divide(&self, op: Op, a: u64, b: u64, pc: u64) -> Result<u64, Trap> {
        let zero = match op {
            Op::Divw | Op::Divuw | Op::Remw | Op::Remuw => b as u32 == 0,
            _ => b == 0,
        };
        if zero {
            if self.test_mode.is_none() {
                return Err(Trap::DivideByZero { pc });
            }
            return Ok(match op {
                Op::Div | Op::Divu | Op::Divw | Op::Divuw => u64::MAX,
                Op::Rem | Op::Remu => a,
                _ => sext32(a),
            });
        }
        Ok(match op {
            Op::Div => (a as i64).wrapping_div(b as i64) as u64,
            Op::Divu => a / b,
            Op::Rem => (a as i64).wrapping_rem(b as i64) as u64,
            Op::Remu => a % b,
            Op::Divw => (a as i32).wrapping_div(b as i32) as i64 as u64,
            Op::Divuw => sext32(((a as u32) / (b as u32)) as u64),
            Op::Remw => (a as i32).wrapping_rem(b as i32) as i64 as u64,
            _ => sext32(((a as u32) % (b as u32)) as u64),
        })
    }

    /// A naturally aligned load of `N` bytes at scalar cycle `now`: the stack window is served
    /// here, the local buffers and anything else out of line.
    #[inline(always)]
    fn load<const N: usize, B: Bus>(
        &mut self,
        bus: &mut B,
        addr: u64,
        pc: u64,
        now: u64,
    ) -> Result<[u8; N], Trap> {
        if addr & (N as u64 - 1) != 0 {
            return Err(Trap::LoadMisaligned { pc, addr });
        }
        let off = addr.wrapping_sub(abi::LOCAL_BASE);
        if off < self.local.len() as u64 {
            let o = off as usize;
            if let Some(s) = self.local.get(o..o + N) {
                let mut v = [0; N];
                v.copy_from_slice(s);
                return Ok(v);
            }
        }
        self.load_slow(bus, addr, pc, now)
    }

    /// A load from a local buffer (UB only) or the bus. Asynchronous writes due by `now` land
    /// first, so the load sees exactly what has completed.
    #[inline(never)]
    fn load_slow<const N: usize, B: Bus>(
        &mut self,
        bus: &mut B,
        addr: u64,
        pc: u64,
        now: u64,
    ) -> Result<[u8; N], Trap> {
        let mut v = [0; N];
        if let Some((buffer, off)) = Buffer::at(addr) {
            let o = self
                .npu
                .scalar_check(buffer, addr, off, N, false)
                .map_err(|fault| Trap::Npu { pc, fault })?;
            self.npu.advance(now, bus)?;
            v.copy_from_slice(&self.npu.buffers.bytes(Buffer::Ub)[o..o + N]);
            return Ok(v);
        }
        self.npu.advance(now, bus)?;
        self.bus_loads += 1;
        match bus.load(addr, &mut v) {
            Ok(()) => Ok(v),
            Err(fault) => Err(Trap::LoadPageFault { pc, addr, fault }),
        }
    }

    /// A naturally aligned store at scalar cycle `now`; `Err(Ok(_))` ends the run normally
    /// (test-mode `tohost`).
    #[inline(always)]
    fn store<const N: usize, B: Bus>(
        &mut self,
        bus: &mut B,
        addr: u64,
        data: [u8; N],
        pc: u64,
        now: u64,
    ) -> Result<(), Stop> {
        if addr & (N as u64 - 1) != 0 {
            return Err(Err(Trap::StoreMisaligned { pc, addr }));
        }
        let off = addr.wrapping_sub(abi::LOCAL_BASE);
        if off < self.local.len() as u64 {
            let o = off as usize;
            if let Some(s) = self.local.get_mut(o..o + N) {
                s.copy_from_slice(&data);
                return Ok(());
            }
        }
        self.store_slow(bus, addr, &data, pc, now)
    }

    /// A store to a local buffer (UB only) or the bus, after the asynchronous writes due by
    /// `now`.
    #[inline(never)]
    fn store_slow<B: Bus>(
        &mut self,
        bus: &mut B,
        addr: u64,
        data: &[u8],
        pc: u64,
        now: u64,
    ) -> Result<(), Stop> {
        if let Some((buffer, off)) = Buffer::at(addr) {
            let o = self
                .npu
                .scalar_check(buffer, addr, off, data.len(), true)
                .map_err(|fault| Err(Trap::Npu { pc, fault }))?;
            self.npu.advance(now, bus).map_err(Err)?;
            self.npu
                .buffers
                .range_mut(Buffer::Ub, o, data.len())
                .copy_from_slice(data);
            return Ok(());
        }
        self.npu.advance(now, bus).map_err(Err)?;
        if let Some(tm) = self.test_mode
            && addr == tm.tohost
        {
            let mut v = [0u8; 8];
            v[..data.len()].copy_from_slice(data);
            return Err(Ok(Exit::ToHost(u64::from_le_bytes(v))));
        }
        self.bus_stores += 1;
        bus.store(addr, data)
            .map_err(|fault| Err(Trap::StorePageFault { pc, addr, fault }))
    }

    /// Reads `len` bytes for a service call, from the stack window or the bus.
    fn read_bytes<B: Bus>(
        &mut self,
        bus: &mut B,
        addr: u64,
        len: u64,
        pc: u64,
    ) -> Result<Vec<u8>, Trap> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let mut buf = vec![0; len as usize];
        let off = addr.wrapping_sub(abi::LOCAL_BASE);
        if let Some(s) = usize::try_from(off)
            .ok()
            .and_then(|o| self.local.get(o..o.checked_add(buf.len())?))
        {
            buf.copy_from_slice(s);
            return Ok(buf);
        }
        if let Some((buffer, off)) = Buffer::at(addr) {
            let o = self
                .npu
                .scalar_check(buffer, addr, off, buf.len(), false)
                .map_err(|fault| Trap::Npu { pc, fault })?;
            self.npu.advance(self.cycles, bus)?;
            let n = buf.len();
            buf.copy_from_slice(&self.npu.buffers.bytes(Buffer::Ub)[o..o + n]);
            return Ok(buf);
        }
        self.npu.advance(self.cycles, bus)?;
        self.bus_loads += 1;
        bus.load(addr, &mut buf)
            .map_err(|fault| Trap::LoadPageFault { pc, addr, fault })?;
        Ok(buf)
    }

    /// `ecall`: in test mode a trap to `mtvec`; otherwise the `abi::ECALL_*` services.
    /// Returns the new pc when control transfers.
    #[cold]
    fn ecall<B: Bus>(&mut self, bus: &mut B, pc: u64) -> Result<Option<u64>, Trap> {
        if self.test_mode.is_some() {
            self.test_csrs[MEPC as usize] = pc;
            self.test_csrs[MCAUSE as usize] = CAUSE_MACHINE_ECALL;
            return Ok(Some(self.test_csrs[MTVEC as usize]));
        }
        let service = self.x[17];
        let (a0, a1) = (self.x[10], self.x[11]);
        let line = match service {
            abi::ECALL_PRINT_STR => {
                let bytes = self.read_bytes(bus, a0, a1.min(PRINT_CAP), pc)?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
            abi::ECALL_PRINT_I64 => (a0 as i64).to_string(),
            abi::ECALL_PRINT_F32 => f32::from_bits(self.fs(10)).to_string(),
            abi::ECALL_ABORT => {
                return Err(Trap::Abort {
                    pc,
                    code: a0 as i64,
                });
            }
            _ => return Err(Trap::UnknownEcall { pc, service }),
        };
        self.output.push(line);
        Ok(None)
    }
}

/// Sign-extends the low 32 bits.
#[inline(always)]
fn sext32(v: u64) -> u64 {
    v as u32 as i32 as i64 as u64
}

/// The illegal-instruction trap for the instruction at `pc`.
#[cold]
fn illegal(prog: &Program, pc: u64) -> Trap {
    Trap::IllegalInstruction {
        pc,
        bits: prog.word_at(pc),
    }
}
