//! The decode cache: a kernel's text is decoded once, when it is loaded, into a `Vec` of compact
//! [`Inst`] records indexed by `(pc - base) / 4`. The interpreter never looks at instruction bits
//! again. Encodings the core does not implement decode to [`Op::Illegal`] (keeping the raw word
//! for the trap report) and only trap if they are executed, so data mixed into text is harmless.

use super::npu::isa;

/// Index of the scratch integer register that stands in for `x0` as a destination: writes to
/// `x0` land there and are never read, so the hot loop needs no `rd != 0` test.
pub(crate) const X_SINK: u8 = 32;

/// Rounding-mode field value meaning "use `frm`" (the instruction's `rm` is dynamic).
pub(crate) const RM_DYN: u8 = 7;

/// One decoded operation. `#[repr(u8)]` keeps [`Inst`] at eight bytes and lets the per-op cost
/// table be a plain array indexed by the discriminant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs)]
pub(crate) enum Op {
    Illegal,
    Nop,
    // RV64I. `lui` decodes to `addi rd, x0, imm`.
    Auipc,
    Jal,
    Jalr,
    Beq,
    Bne,
    Blt,
    Bge,
    Bltu,
    Bgeu,
    Lb,
    Lh,
    Lw,
    Ld,
    Lbu,
    Lhu,
    Lwu,
    Sb,
    Sh,
    Sw,
    Sd,
    Addi,
    Slti,
    Sltiu,
    Xori,
    Ori,
    Andi,
    Slli,
    Srli,
    Srai,
    Add,
    Sub,
    Sll,
    Slt,
    Sltu,
    Xor,
    Srl,
    Sra,
    Or,
    And,
    Addiw,
    Slliw,
    Srliw,
    Sraiw,
    Addw,
    Subw,
    Sllw,
    Srlw,
    Sraw,
    Ecall,
    Ebreak,
    /// Machine-mode return; legal only in test mode.
    Mret,
    // Zicsr. `imm` is the CSR number; for the immediate forms `rs1` is the 5-bit immediate.
    Csrrw,
    Csrrs,
    Csrrc,
    Csrrwi,
    Csrrsi,
    Csrrci,
    // M
    Mul,
    Mulh,
    Mulhsu,
    Mulhu,
    Div,
    Divu,
    Rem,
    Remu,
    Mulw,
    Divw,
    Divuw,
    Remw,
    Remuw,
    // F. `imm` holds the rounding mode where the instruction has one; the fused ops put `rs3`
    // in bits 0..8 and the rounding mode in bits 8..16.
    Flw,
    Fsw,
    FmaddS,
    FmsubS,
    FnmsubS,
    FnmaddS,
    FaddS,
    FsubS,
    FmulS,
    FdivS,
    FsqrtS,
    FsgnjS,
    FsgnjnS,
    FsgnjxS,
    FminS,
    FmaxS,
    FcvtWS,
    FcvtWuS,
    FcvtLS,
    FcvtLuS,
    FmvXW,
    FclassS,
    FeqS,
    FltS,
    FleS,
    FcvtSW,
    FcvtSWu,
    FcvtSL,
    FcvtSLu,
    FmvWX,
    // The NPU extension (custom opcodes, `npu::isa`). `rd`, `rs1` and `rs2` are the raw
    // register fields, all read as operands (none is written); `imm` holds the sub-operation
    // code in bits 0..8 and the `rs3` field in bits 8..13.
    NpuVector,
    NpuMove,
    NpuCube,
    NpuSync,
}

/// Number of [`Op`] variants (the last one is `NpuSync`).
pub(crate) const OP_COUNT: usize = Op::NpuSync as usize + 1;

/// A decoded instruction: eight bytes, copied out of the cache by value.
///
/// Integer destinations are already remapped (`x0` → [`X_SINK`]); source register fields are
/// 0..=31 and floating-point register fields are 0..=31.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Inst {
    pub op: Op,
    pub rd: u8,
    pub rs1: u8,
    pub rs2: u8,
    /// Immediate, CSR number, rounding mode or (for `Illegal`) the raw instruction word.
    pub imm: i32,
}

impl Inst {
    const fn new(op: Op, rd: u8, rs1: u8, rs2: u8, imm: i32) -> Inst {
        Inst {
            op,
            rd,
            rs1,
            rs2,
            imm,
        }
    }

    fn illegal(word: u32) -> Inst {
        Inst::new(Op::Illegal, 0, 0, 0, word as i32)
    }
}

/// A kernel's text, decoded once. Execution fetches only from here: a `pc` outside
/// `base .. base + 4 * len` is an instruction page fault.
#[derive(Clone, Debug)]
pub struct Program {
    base: u64,
    insts: Vec<Inst>,
    /// The raw words, for trap reports only.
    words: Vec<u32>,
}

impl Program {
    /// Decodes `text` (little-endian RV64IMF instruction words) placed at virtual address
    /// `base`. Never fails: words that are not valid RV64IMF+Zicsr instructions become illegal
    /// entries that trap only when executed. Trailing bytes that do not fill a word are ignored.
    ///
    /// `base` should be 4-byte aligned; if it is not, every fetch is misaligned and faults.
    pub fn decode(base: u64, text: &[u8]) -> Program {
        let words: Vec<u32> = text
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let insts = words.iter().map(|&w| decode(w)).collect();
        Program { base, insts, words }
    }

    /// The address of the first instruction.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// One past the address of the last instruction.
    pub fn end(&self) -> u64 {
        self.base
            .wrapping_add((self.insts.len() as u64).wrapping_mul(4))
    }

    /// Number of instruction slots.
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// True when the program has no instructions.
    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }

    /// True when `pc` is the address of an instruction slot of this program.
    pub fn contains(&self, pc: u64) -> bool {
        let off = pc.wrapping_sub(self.base);
        off & 3 == 0 && off / 4 < self.insts.len() as u64
    }

    pub(crate) fn insts(&self) -> &[Inst] {
        &self.insts
    }

    /// The raw instruction word at `pc` (0 outside the program).
    pub fn word_at(&self, pc: u64) -> u32 {
        if !self.contains(pc) {
            return 0;
        }
        let i = (pc.wrapping_sub(self.base) / 4) as usize;
        self.words.get(i).copied().unwrap_or(0)
    }
}

/// `x0` as a destination becomes the sink register.
fn xd(rd: u32) -> u8 {
    if rd == 0 { X_SINK } else { rd as u8 }
}

/// True for a rounding-mode field the F extension defines (0..=4 static, 7 dynamic).
fn rm_ok(rm: u32) -> bool {
    rm <= 4 || rm == RM_DYN as u32
}

/// Decodes one 32-bit instruction word.
pub(crate) fn decode(w: u32) -> Inst {
    let opcode = w & 0x7f;
    let rd = (w >> 7) & 31;
    let funct3 = (w >> 12) & 7;
    let rs1 = ((w >> 15) & 31) as u8;
    let rs2 = ((w >> 20) & 31) as u8;
    let funct7 = w >> 25;
    let imm_i = (w as i32) >> 20;
    let imm_s = ((w as i32) >> 25 << 5) | ((w >> 7) & 31) as i32;
    let imm_b = (((w as i32) >> 31) << 12)
        | (((w >> 7) & 1) << 11) as i32
        | (((w >> 25) & 0x3f) << 5) as i32
        | (((w >> 8) & 0xf) << 1) as i32;
    let imm_u = (w & 0xffff_f000) as i32;
    let imm_j = (((w as i32) >> 31) << 20)
        | (w & 0x000f_f000) as i32
        | (((w >> 20) & 1) << 11) as i32
        | (((w >> 21) & 0x3ff) << 1) as i32;
    let ill = Inst::illegal(w);
    let i = |op| Inst::new(op, xd(rd), rs1, 0, imm_i);
    let r = |op| Inst::new(op, xd(rd), rs1, rs2, 0);

    match opcode {
        0x37 => Inst::new(Op::Addi, xd(rd), 0, 0, imm_u), // lui
        0x17 => Inst::new(Op::Auipc, xd(rd), 0, 0, imm_u),
        0x6f => Inst::new(Op::Jal, xd(rd), 0, 0, imm_j),
        0x67 if funct3 == 0 => i(Op::Jalr),
        0x63 => {
            let op = match funct3 {
                0 => Op::Beq,
                1 => Op::Bne,
                4 => Op::Blt,
                5 => Op::Bge,
                6 => Op::Bltu,
                7 => Op::Bgeu,
                _ => return ill,
            };
            Inst::new(op, 0, rs1, rs2, imm_b)
        }
        0x03 => {
            let op = match funct3 {
                0 => Op::Lb,
                1 => Op::Lh,
                2 => Op::Lw,
                3 => Op::Ld,
                4 => Op::Lbu,
                5 => Op::Lhu,
                6 => Op::Lwu,
                _ => return ill,
            };
            i(op)
        }
        0x23 => {
            let op = match funct3 {
                0 => Op::Sb,
                1 => Op::Sh,
                2 => Op::Sw,
                3 => Op::Sd,
                _ => return ill,
            };
            Inst::new(op, 0, rs1, rs2, imm_s)
        }
        0x13 => match funct3 {
            0 => i(Op::Addi),
            2 => i(Op::Slti),
            3 => i(Op::Sltiu),
            4 => i(Op::Xori),
            6 => i(Op::Ori),
            7 => i(Op::Andi),
            // RV64 shifts by immediate: 6-bit shamt, the upper six bits select the kind.
            1 | 5 => {
                let shamt = ((w >> 20) & 63) as i32;
                let op = match (funct3, w >> 26) {
                    (1, 0) => Op::Slli,
                    (5, 0) => Op::Srli,
                    (5, 0x10) => Op::Srai,
                    _ => return ill,
                };
                Inst::new(op, xd(rd), rs1, 0, shamt)
            }
            _ => ill,
        },
        0x1b => match (funct3, funct7) {
            (0, _) => i(Op::Addiw),
            (1, 0) => Inst::new(Op::Slliw, xd(rd), rs1, 0, rs2 as i32),
            (5, 0) => Inst::new(Op::Srliw, xd(rd), rs1, 0, rs2 as i32),
            (5, 0x20) => Inst::new(Op::Sraiw, xd(rd), rs1, 0, rs2 as i32),
            _ => ill,
        },
        0x33 => {
            let op = match (funct7, funct3) {
                (0, 0) => Op::Add,
                (0x20, 0) => Op::Sub,
                (0, 1) => Op::Sll,
                (0, 2) => Op::Slt,
                (0, 3) => Op::Sltu,
                (0, 4) => Op::Xor,
                (0, 5) => Op::Srl,
                (0x20, 5) => Op::Sra,
                (0, 6) => Op::Or,
                (0, 7) => Op::And,
                (1, 0) => Op::Mul,
                (1, 1) => Op::Mulh,
                (1, 2) => Op::Mulhsu,
                (1, 3) => Op::Mulhu,
                (1, 4) => Op::Div,
                (1, 5) => Op::Divu,
                (1, 6) => Op::Rem,
                (1, 7) => Op::Remu,
                _ => return ill,
            };
            r(op)
        }
        0x3b => {
            let op = match (funct7, funct3) {
                (0, 0) => Op::Addw,
                (0x20, 0) => Op::Subw,
                (0, 1) => Op::Sllw,
                (0, 5) => Op::Srlw,
                (0x20, 5) => Op::Sraw,
                (1, 0) => Op::Mulw,
                (1, 4) => Op::Divw,
                (1, 5) => Op::Divuw,
                (1, 6) => Op::Remw,
                (1, 7) => Op::Remuw,
                _ => return ill,
            };
            r(op)
        }
        // FENCE (any predecessor/successor sets) and FENCE.I are no-ops: one hart, no caches.
        0x0f if funct3 <= 1 => Inst::new(Op::Nop, 0, 0, 0, 0),
        0x73 => match funct3 {
            0 => match w {
                0x0000_0073 => Inst::new(Op::Ecall, 0, 0, 0, 0),
                0x0010_0073 => Inst::new(Op::Ebreak, 0, 0, 0, 0),
                0x3020_0073 => Inst::new(Op::Mret, 0, 0, 0, 0),
                _ => ill,
            },
            4 => ill,
            _ => {
                let op = match funct3 {
                    1 => Op::Csrrw,
                    2 => Op::Csrrs,
                    3 => Op::Csrrc,
                    5 => Op::Csrrwi,
                    6 => Op::Csrrsi,
                    _ => Op::Csrrci,
                };
                Inst::new(op, xd(rd), rs1, 0, (w >> 20) as i32)
            }
        },
        0x07 if funct3 == 2 => Inst::new(Op::Flw, rd as u8, rs1, 0, imm_i),
        0x27 if funct3 == 2 => Inst::new(Op::Fsw, 0, rs1, rs2, imm_s),
        0x43 | 0x47 | 0x4b | 0x4f => {
            // Only fmt = S (bits 26:25 = 00).
            if (w >> 25) & 3 != 0 || !rm_ok(funct3) {
                return ill;
            }
            let op = match opcode {
                0x43 => Op::FmaddS,
                0x47 => Op::FmsubS,
                0x4b => Op::FnmsubS,
                _ => Op::FnmaddS,
            };
            let rs3 = w >> 27;
            Inst::new(op, rd as u8, rs1, rs2, (rs3 | (funct3 << 8)) as i32)
        }
        0x53 => decode_op_fp(w, rd, funct3, rs1, rs2, funct7),
        isa::OPCODE_VECTOR | isa::OPCODE_MOVE | isa::OPCODE_CUBE | isa::OPCODE_SYNC => {
            decode_npu(w)
        }
        _ => ill,
    }
}

/// The NPU extension's custom opcodes; encodings it does not define are illegal.
fn decode_npu(w: u32) -> Inst {
    let funct3 = (w >> 12) & 7;
    let funct2 = (w >> 25) & 3;
    let (op, code) = match w & 0x7f {
        isa::OPCODE_VECTOR => match isa::VecOp::from_code((funct2 << 3 | funct3) as u8) {
            Some(v) => (Op::NpuVector, v.code()),
            None => return Inst::illegal(w),
        },
        isa::OPCODE_MOVE
            if isa::CopyDir::from_code(funct3 as u8)
                .and_then(|d| isa::CopyMode::decode(d, funct2 as u8))
                .is_some() =>
        {
            (Op::NpuMove, (funct2 << 3 | funct3) as u8)
        }
        // f2 = 1: C starts from a bias row instead of 0 or L0C (so not with accumulate).
        isa::OPCODE_CUBE if funct2 == 0 || (funct2 == 1 && funct3 & 1 == 0) => {
            (Op::NpuCube, (funct2 << 3 | funct3) as u8)
        }
        isa::OPCODE_SYNC if w >> 25 == 0 && isa::SyncOp::from_code(funct3 as u8).is_some() => {
            (Op::NpuSync, funct3 as u8)
        }
        _ => return Inst::illegal(w),
    };
    let field = |shift: u32| ((w >> shift) & 31) as u8;
    Inst::new(
        op,
        field(7),
        field(15),
        field(20),
        code as i32 | ((w >> 27) << 8) as i32,
    )
}

/// The OP-FP major opcode (single precision only).
fn decode_op_fp(w: u32, rd: u32, funct3: u32, rs1: u8, rs2: u8, funct7: u32) -> Inst {
    let ill = Inst::illegal(w);
    let frd = rd as u8;
    // Arithmetic with a rounding mode: the mode travels in `imm`.
    let arith = |op| {
        if rm_ok(funct3) {
            Inst::new(op, frd, rs1, rs2, funct3 as i32)
        } else {
            ill
        }
    };
    match funct7 {
        0x00 => arith(Op::FaddS),
        0x04 => arith(Op::FsubS),
        0x08 => arith(Op::FmulS),
        0x0c => arith(Op::FdivS),
        0x2c if rs2 == 0 => arith(Op::FsqrtS),
        0x10 => match funct3 {
            0 => Inst::new(Op::FsgnjS, frd, rs1, rs2, 0),
            1 => Inst::new(Op::FsgnjnS, frd, rs1, rs2, 0),
            2 => Inst::new(Op::FsgnjxS, frd, rs1, rs2, 0),
            _ => ill,
        },
        0x14 => match funct3 {
            0 => Inst::new(Op::FminS, frd, rs1, rs2, 0),
            1 => Inst::new(Op::FmaxS, frd, rs1, rs2, 0),
            _ => ill,
        },
        0x60 if rm_ok(funct3) => {
            let op = match rs2 {
                0 => Op::FcvtWS,
                1 => Op::FcvtWuS,
                2 => Op::FcvtLS,
                3 => Op::FcvtLuS,
                _ => return ill,
            };
            Inst::new(op, xd(rd), rs1, 0, funct3 as i32)
        }
        0x68 if rm_ok(funct3) => {
            let op = match rs2 {
                0 => Op::FcvtSW,
                1 => Op::FcvtSWu,
                2 => Op::FcvtSL,
                3 => Op::FcvtSLu,
                _ => return ill,
            };
            Inst::new(op, frd, rs1, 0, funct3 as i32)
        }
        0x70 if rs2 == 0 && funct3 == 0 => Inst::new(Op::FmvXW, xd(rd), rs1, 0, 0),
        0x70 if rs2 == 0 && funct3 == 1 => Inst::new(Op::FclassS, xd(rd), rs1, 0, 0),
        0x50 => {
            let op = match funct3 {
                0 => Op::FleS,
                1 => Op::FltS,
                2 => Op::FeqS,
                _ => return ill,
            };
            Inst::new(op, xd(rd), rs1, rs2, 0)
        }
        0x78 if rs2 == 0 && funct3 == 0 => Inst::new(Op::FmvWX, frd, rs1, 0, 0),
        _ => ill,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inst_stays_eight_bytes() {
        assert_eq!(std::mem::size_of::<Inst>(), 8);
    }

    #[test]
    fn immediates_are_sign_extended() {
        // addi a0, a0, -1
        assert_eq!(decode(0xfff5_0513), Inst::new(Op::Addi, 10, 10, 0, -1));
        // sd ra, -8(sp)
        assert_eq!(decode(0xfe11_3c23), Inst::new(Op::Sd, 0, 2, 1, -8));
        // beq x0, x0, -4
        assert_eq!(decode(0xfe00_0ee3), Inst::new(Op::Beq, 0, 0, 0, -4));
        // jal x0, -2048  (imm[11] and sign bits)
        assert_eq!(decode(0x801f_f06f).imm, -2048);
        // lui a0, 0x80000 sign-extends to 64 bits through the i32 immediate.
        assert_eq!(decode(0x8000_0537), Inst::new(Op::Addi, 10, 0, 0, i32::MIN));
    }

    #[test]
    fn writes_to_x0_go_to_the_sink() {
        // addi x0, x0, 0 (nop)
        assert_eq!(decode(0x0000_0013).rd, X_SINK);
    }

    #[test]
    fn reserved_encodings_are_illegal() {
        for w in [
            0x0000_0000u32, // all zeros is defined illegal
            0xffff_ffff,    // all ones
            0x0000_7003,    // load funct3 = 7
            0x0400_1013,    // slli with funct6 != 0
            0x0200_101b,    // slliw with shamt[5] set
            0x0000_3007,    // fld (no D extension)
            0x0200_0053,    // fadd.d
            0x0000_5053,    // fadd.s with rm = 5
            0x1050_0073,    // wfi
        ] {
            assert_eq!(decode(w).op, Op::Illegal, "{w:#010x}");
            assert_eq!(decode(w).imm as u32, w);
        }
    }
}
