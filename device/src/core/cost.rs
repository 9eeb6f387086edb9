//! The scalar core's timing model: a fixed latency per instruction class, summed over the
//! instructions a block executes. The table is folded into a per-opcode array when a core is
//! built, so charging a cycle costs one table load in the hot loop.
//!
//! Bus latency is not in here: a [`Bus`](super::Bus) implementation that models memory timing
//! keeps its own account per access (the engine adds it to the block's cycles).

use super::decode::{OP_COUNT, Op};

/// Cycles charged per instruction class. Latencies, not throughputs: the core is modeled as
/// in-order and unpipelined between dependent classes, which is pessimistic but deterministic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latencies {
    /// Integer ALU ops, shifts, compares, `lui`/`auipc`, FENCE.
    pub alu: u32,
    /// A conditional branch that falls through.
    pub branch_not_taken: u32,
    /// A conditional branch that is taken (the fetch redirect costs a bubble).
    pub branch_taken: u32,
    /// `jal` / `jalr` (always a redirect).
    pub jump: u32,
    /// Integer or FP load, before any bus latency.
    pub load: u32,
    /// Integer or FP store, before any bus latency.
    pub store: u32,
    /// MUL, MULH*, MULW.
    pub mul: u32,
    /// DIV*, REM* (iterative divider).
    pub div: u32,
    /// FADD.S / FSUB.S.
    pub fadd: u32,
    /// FMUL.S.
    pub fmul: u32,
    /// The four fused multiply-adds.
    pub fma: u32,
    /// FDIV.S.
    pub fdiv: u32,
    /// FSQRT.S.
    pub fsqrt: u32,
    /// FP conversions to and from integers.
    pub fcvt: u32,
    /// Sign injection, min/max, compares, classify, moves between register files.
    pub fmisc: u32,
    /// CSR reads and writes.
    pub csr: u32,
    /// `ecall`, `ebreak`, `mret`, and illegal instructions that trap.
    pub system: u32,
    /// Issuing an NPU extension instruction (the scalar unit's share; the unit's own time is
    /// in the NPU timing).
    pub npu_issue: u32,
}

/// The default table (documented in `docs/conformance.md`).
pub const DEFAULT_LATENCIES: Latencies = Latencies {
    alu: 1,
    branch_not_taken: 1,
    branch_taken: 2,
    jump: 2,
    load: 2,
    store: 2,
    mul: 3,
    div: 20,
    fadd: 4,
    fmul: 4,
    fma: 5,
    fdiv: 15,
    fsqrt: 20,
    fcvt: 4,
    fmisc: 2,
    csr: 1,
    system: 1,
    npu_issue: 1,
};

impl Default for Latencies {
    fn default() -> Self {
        DEFAULT_LATENCIES
    }
}

impl Latencies {
    /// The base cost of `op`. Branches are charged the not-taken cost here; the interpreter
    /// adds the difference when one is taken.
    pub(crate) fn of(&self, op: Op) -> u32 {
        use Op::*;
        match op {
            Illegal | Ecall | Ebreak | Mret => self.system,
            Nop | Auipc | Addi | Slti | Sltiu | Xori | Ori | Andi | Slli | Srli | Srai | Add
            | Sub | Sll | Slt | Sltu | Xor | Srl | Sra | Or | And | Addiw | Slliw | Srliw
            | Sraiw | Addw | Subw | Sllw | Srlw | Sraw => self.alu,
            Jal | Jalr => self.jump,
            Beq | Bne | Blt | Bge | Bltu | Bgeu => self.branch_not_taken,
            Lb | Lh | Lw | Ld | Lbu | Lhu | Lwu | Flw => self.load,
            Sb | Sh | Sw | Sd | Fsw => self.store,
            Csrrw | Csrrs | Csrrc | Csrrwi | Csrrsi | Csrrci => self.csr,
            Mul | Mulh | Mulhsu | Mulhu | Mulw => self.mul,
            Div | Divu | Rem | Remu | Divw | Divuw | Remw | Remuw => self.div,
            FaddS | FsubS => self.fadd,
            FmulS => self.fmul,
            FmaddS | FmsubS | FnmsubS | FnmaddS => self.fma,
            FdivS => self.fdiv,
            FsqrtS => self.fsqrt,
            FcvtWS | FcvtWuS | FcvtLS | FcvtLuS | FcvtSW | FcvtSWu | FcvtSL | FcvtSLu => self.fcvt,
            FsgnjS | FsgnjnS | FsgnjxS | FminS | FmaxS | FmvXW | FclassS | FeqS | FltS | FleS
            | FmvWX => self.fmisc,
            NpuVector | NpuMove | NpuCube | NpuSync => self.npu_issue,
        }
    }

    /// The per-opcode array the interpreter indexes. 256 entries so a `u8` index needs no
    /// bounds check.
    pub(crate) fn per_op(&self) -> [u32; 256] {
        let mut t = [0; 256];
        for (slot, op) in t.iter_mut().zip(ALL_OPS) {
            *slot = self.of(op);
        }
        t
    }
}

/// Every [`Op`], in declaration order (checked by a test), to build the per-op table.
pub(crate) const ALL_OPS: [Op; OP_COUNT] = {
    use Op::*;
    [
        Illegal, Nop, Auipc, Jal, Jalr, Beq, Bne, Blt, Bge, Bltu, Bgeu, Lb, Lh, Lw, Ld, Lbu, Lhu,
        Lwu, Sb, Sh, Sw, Sd, Addi, Slti, Sltiu, Xori, Ori, Andi, Slli, Srli, Srai, Add, Sub, Sll,
        Slt, Sltu, Xor, Srl, Sra, Or, And, Addiw, Slliw, Srliw, Sraiw, Addw, Subw, Sllw, Srlw,
        Sraw, Ecall, Ebreak, Mret, Csrrw, Csrrs, Csrrc, Csrrwi, Csrrsi, Csrrci, Mul, Mulh, Mulhsu,
        Mulhu, Div, Divu, Rem, Remu, Mulw, Divw, Divuw, Remw, Remuw, Flw, Fsw, FmaddS, FmsubS,
        FnmsubS, FnmaddS, FaddS, FsubS, FmulS, FdivS, FsqrtS, FsgnjS, FsgnjnS, FsgnjxS, FminS,
        FmaxS, FcvtWS, FcvtWuS, FcvtLS, FcvtLuS, FmvXW, FclassS, FeqS, FltS, FleS, FcvtSW, FcvtSWu,
        FcvtSL, FcvtSLu, FmvWX, NpuVector, NpuMove, NpuCube, NpuSync,
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_list_matches_declaration_order() {
        for (i, op) in ALL_OPS.iter().enumerate() {
            assert_eq!(*op as usize, i);
        }
    }

    #[test]
    fn default_table_charges_the_documented_costs() {
        let t = DEFAULT_LATENCIES.per_op();
        assert_eq!(t[Op::Add as usize], 1);
        assert_eq!(t[Op::Div as usize], 20);
        assert_eq!(t[Op::FmaddS as usize], 5);
        assert_eq!(t[Op::Lw as usize], 2);
    }
}
