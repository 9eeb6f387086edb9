//! The extension's instruction set: four custom major opcodes, R4-type encodings (R-type for
//! synchronization), every operand in an integer register. The register in the `rd` field is
//! read as an operand like the others; no NPU instruction writes an integer register.
//!
//! ```text
//!  31    27 26 25 24  20 19  15 14  12 11   7 6      0
//! [  rs3  ][ f2 ][ rs2 ][ rs1 ][ f3  ][ rd  ][ opcode ]
//! ```
//!
//! | opcode | unit | f2 / f3 | operands `rd, rs1, rs2, rs3` |
//! |---|---|---|---|
//! | custom-0 `0x0b` | vector | [`VecOp`] code `f2 << 3 \| f3` | dst, a, b (or f32 bits), n |
//! | custom-1 `0x2b` | data movers | f2 = [`CopyMode`], f3 = [`CopyDir`] | dst, src, `rows << 32 \| row_bytes`, `src_stride << 32 \| dst_stride` |
//! | custom-2 `0x5b` | cube | f2 = bias, f3 = `fractal << 2 \| f32 << 1 \| accumulate` ([`CubeLayout`]) | c, a, b, `m \| n << 16 \| k << 32 \| bias_offset / 32 << 48` |
//! | custom-3 `0x7b` | sync | f7 = 0, f3 = [`SyncOp`] | –, `src \| dst << 8 \| event << 16` (or a pipe), – |
//!
//! `docs/isa.md` has the full table with semantics and costs; [`encode`] builds the words.

use super::dtype::DType;
use super::layout::Buffer;
use super::pipes::Pipe;

/// custom-0: vector instructions.
pub const OPCODE_VECTOR: u32 = 0x0b;
/// custom-1: data movement.
pub const OPCODE_MOVE: u32 = 0x2b;
/// custom-2: cube matmul.
pub const OPCODE_CUBE: u32 = 0x5b;
/// custom-3: synchronization.
pub const OPCODE_SYNC: u32 = 0x7b;

/// A vector instruction. The discriminant is its code, `funct2 << 3 | funct3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum VecOp {
    /// `dst[i] = a[i] + b[i]` (f32).
    Add = 0x00,
    /// `dst[i] = a[i] - b[i]`.
    Sub = 0x01,
    /// `dst[i] = a[i] * b[i]`.
    Mul = 0x02,
    /// `dst[i] = a[i] / b[i]`.
    Div = 0x03,
    /// `dst[i] = max(a[i], b[i])` (a NaN operand yields the other).
    Max = 0x04,
    /// `dst[i] = min(a[i], b[i])`.
    Min = 0x05,
    /// `dst[i] = a[i] & b[i]` (integer types).
    And = 0x06,
    /// `dst[i] = a[i] | b[i]` (integer types).
    Or = 0x07,
    /// `dst[i] = a[i] + s`, `s` the f32 whose bits are the low word of the `rs2` register.
    Adds = 0x08,
    /// `dst[i] = a[i] * s`.
    Muls = 0x09,
    /// `dst[i] = max(a[i], s)`.
    Maxs = 0x0a,
    /// `dst[i] = min(a[i], s)`.
    Mins = 0x0b,
    /// `dst[i] = s` (`a` is ignored).
    Dup = 0x0c,
    /// `dst[i] = a[i] > 0 ? a[i] : a[i] * s` (leaky ReLU, float types).
    LRelu = 0x0d,
    /// Sets the vector mask register to `rs1 | rs2 << 64` (bit `i` selects element `i` of a
    /// repeat; the count of a `vperm` gather-mask in counter mode). Takes effect for the
    /// instructions issued after it; no pipe.
    Mask = 0x0e,
    /// Repeat-form reductions under the mask register: per repeat (whole) or per 32-byte
    /// block, sum (binary tree) / max / min; [`masked`](super::masked) has the fields.
    Red = 0x0f,
    /// `dst[i] = exp(a[i])`.
    Exp = 0x10,
    /// `dst[i] = ln(a[i])`.
    Ln = 0x11,
    /// `dst[i] = sqrt(a[i])`.
    Sqrt = 0x12,
    /// `dst[i] = a[i] > 0 ? a[i] : 0`.
    Relu = 0x13,
    /// `dst[i] = |a[i]|`.
    Abs = 0x14,
    /// `dst[i] = 1 / a[i]`.
    Rec = 0x15,
    /// `dst[i] = a[i]` (copy within UB).
    Mov = 0x16,
    /// `dst[i] = !a[i]` (bitwise not; integer types).
    Not = 0x17,
    /// `dst[0] = a[0] + … + a[n-1]` (accumulated in f64, rounded once).
    Sum = 0x18,
    /// `dst[0] = max(a[0..n])` (−∞ for `n = 0`).
    RMax = 0x19,
    /// f32 → f16: `dst` holds `n` f16 values (round to nearest even).
    CvtF32ToF16 = 0x1a,
    /// f16 → f32: `a` holds `n` f16 values.
    CvtF16ToF32 = 0x1b,
    /// `dst[i] = cast(a[i])` from the source type (`rs3` bits 40..44) to the destination type
    /// (bits 32..36) with a [`RoundMode`](super::RoundMode) (bits 36..40).
    Cvt = 0x1c,
    /// Bit `i` of the byte mask `dst` = `a[i] cmp b[i]`, [`CmpMode`](super::CmpMode) in `rs3`
    /// bits 36..40; the mask has `ceil(n / 8)` bytes.
    Cmp = 0x1d,
    /// `dst[i] = mask bit i ? a[i] : b[i]` (or `: s` when `rs3` bit 36 is set); the mask's UB
    /// offset / 32 is in `rs3` bits 48..64.
    Sel = 0x1e,
    /// Repeat-form rearrangements: block broadcast (`Brcb`), gather by pattern
    /// (`GatherMask`), gather by byte offsets (`Gather`); mode in `rs3` bits 36..40.
    Perm = 0x1f,
}

/// The operand shape of a vector instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VecClass {
    Binary,
    Compare,
    Select,
    Scalar,
    Unary,
    Reduce,
    Cast,
    /// The mask-register instructions (`vmask`, `vred`, `vperm`): decoded in `masked`.
    Masked,
}

impl VecOp {
    /// Every vector instruction.
    pub const ALL: [VecOp; 32] = [
        VecOp::Add,
        VecOp::Sub,
        VecOp::Mul,
        VecOp::Div,
        VecOp::Max,
        VecOp::Min,
        VecOp::And,
        VecOp::Or,
        VecOp::Adds,
        VecOp::Muls,
        VecOp::Maxs,
        VecOp::Mins,
        VecOp::Dup,
        VecOp::LRelu,
        VecOp::Mask,
        VecOp::Red,
        VecOp::Exp,
        VecOp::Ln,
        VecOp::Sqrt,
        VecOp::Relu,
        VecOp::Abs,
        VecOp::Rec,
        VecOp::Mov,
        VecOp::Not,
        VecOp::Sum,
        VecOp::RMax,
        VecOp::CvtF32ToF16,
        VecOp::CvtF16ToF32,
        VecOp::Cvt,
        VecOp::Cmp,
        VecOp::Sel,
        VecOp::Perm,
    ];

    /// The instruction with code `code` (`funct2 << 3 | funct3`).
    pub fn from_code(code: u8) -> Option<VecOp> {
        VecOp::ALL.iter().copied().find(|op| *op as u8 == code)
    }

    /// `funct2 << 3 | funct3`.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The mnemonic (and SDK function suffix).
    pub const fn name(self) -> &'static str {
        match self {
            VecOp::Add => "vadd",
            VecOp::Sub => "vsub",
            VecOp::Mul => "vmul",
            VecOp::Div => "vdiv",
            VecOp::Max => "vmax",
            VecOp::Min => "vmin",
            VecOp::And => "vand",
            VecOp::Or => "vor",
            VecOp::Adds => "vadds",
            VecOp::Muls => "vmuls",
            VecOp::Maxs => "vmaxs",
            VecOp::Mins => "vmins",
            VecOp::Dup => "vdup",
            VecOp::LRelu => "vlrelu",
            VecOp::Exp => "vexp",
            VecOp::Ln => "vln",
            VecOp::Sqrt => "vsqrt",
            VecOp::Relu => "vrelu",
            VecOp::Abs => "vabs",
            VecOp::Rec => "vrec",
            VecOp::Mov => "vmov",
            VecOp::Not => "vnot",
            VecOp::Sum => "vsum",
            VecOp::RMax => "vrmax",
            VecOp::CvtF32ToF16 => "vcvt_f16_f32",
            VecOp::CvtF16ToF32 => "vcvt_f32_f16",
            VecOp::Cvt => "vcvt",
            VecOp::Cmp => "vcmp",
            VecOp::Sel => "vsel",
            VecOp::Mask => "vmask",
            VecOp::Red => "vred",
            VecOp::Perm => "vperm",
        }
    }

    pub(crate) const fn class(self) -> VecClass {
        match self {
            VecOp::Sum | VecOp::RMax => VecClass::Reduce,
            VecOp::CvtF32ToF16 | VecOp::CvtF16ToF32 | VecOp::Cvt => VecClass::Cast,
            VecOp::Cmp => VecClass::Compare,
            VecOp::Sel => VecClass::Select,
            VecOp::Mask | VecOp::Red | VecOp::Perm => VecClass::Masked,
            _ => match self as u8 >> 3 {
                0 => VecClass::Binary,
                1 => VecClass::Scalar,
                _ => VecClass::Unary,
            },
        }
    }

    /// Whether the instruction is defined on elements of type `t` (the legacy f16 ↔ f32
    /// conversions take no type: `t` is F32).
    pub const fn supports(self, t: DType) -> bool {
        if matches!(t, DType::I8 | DType::U8) {
            return matches!(self, VecOp::Cvt | VecOp::Dup | VecOp::Mov);
        }
        if matches!(t, DType::I4) {
            return matches!(self, VecOp::Cvt);
        }
        match self {
            VecOp::Div | VecOp::Exp | VecOp::Ln | VecOp::Sqrt | VecOp::Rec | VecOp::LRelu => {
                t.is_float()
            }
            VecOp::And | VecOp::Or | VecOp::Not => !t.is_float(),
            VecOp::Red => matches!(t, DType::F32 | DType::F16),
            VecOp::CvtF32ToF16 | VecOp::CvtF16ToF32 => matches!(t, DType::F32),
            _ => true,
        }
    }
}

/// A data-mover instruction: which buffers it connects (funct3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CopyDir {
    /// Global memory → UB, on MTE2.
    GmToUb = 0,
    /// Global memory → L1, on MTE2.
    GmToL1 = 1,
    /// UB → global memory, on MTE3.
    UbToGm = 2,
    /// L1 → L0A, on MTE1.
    L1ToL0a = 3,
    /// L1 → L0B, on MTE1.
    L1ToL0b = 4,
    /// L0C → global memory (f32), on MTE3.
    L0cToGm = 5,
    /// L1 → BT (the bias table), on MTE1.
    L1ToBt = 6,
    /// L0C → UB (f32), on MTE3: the fixpipe into the vector side (npusim's AI core runs a
    /// kernel's cube and vector parts as one program, so C reaches UB without a trip to GM).
    L0cToUb = 7,
}

impl CopyDir {
    /// Every direction.
    pub const ALL: [CopyDir; 8] = [
        CopyDir::GmToUb,
        CopyDir::GmToL1,
        CopyDir::UbToGm,
        CopyDir::L1ToL0a,
        CopyDir::L1ToL0b,
        CopyDir::L0cToGm,
        CopyDir::L1ToBt,
        CopyDir::L0cToUb,
    ];

    /// The direction with funct3 `code`.
    pub fn from_code(code: u8) -> Option<CopyDir> {
        CopyDir::ALL.get(code as usize).copied()
    }

    /// The pipe that executes it.
    pub const fn pipe(self) -> Pipe {
        match self {
            CopyDir::GmToUb | CopyDir::GmToL1 => Pipe::Mte2,
            CopyDir::UbToGm | CopyDir::L0cToGm | CopyDir::L0cToUb => Pipe::Mte3,
            CopyDir::L1ToL0a | CopyDir::L1ToL0b | CopyDir::L1ToBt => Pipe::Mte1,
        }
    }

    /// Source buffer; `None` is global memory.
    pub const fn src(self) -> Option<Buffer> {
        match self {
            CopyDir::GmToUb | CopyDir::GmToL1 => None,
            CopyDir::UbToGm => Some(Buffer::Ub),
            CopyDir::L1ToL0a | CopyDir::L1ToL0b | CopyDir::L1ToBt => Some(Buffer::L1),
            CopyDir::L0cToGm | CopyDir::L0cToUb => Some(Buffer::L0c),
        }
    }

    /// Destination buffer; `None` is global memory.
    pub const fn dst(self) -> Option<Buffer> {
        match self {
            CopyDir::GmToUb | CopyDir::L0cToUb => Some(Buffer::Ub),
            CopyDir::GmToL1 => Some(Buffer::L1),
            CopyDir::UbToGm | CopyDir::L0cToGm => None,
            CopyDir::L1ToL0a => Some(Buffer::L0a),
            CopyDir::L1ToL0b => Some(Buffer::L0b),
            CopyDir::L1ToBt => Some(Buffer::Bt),
        }
    }

    /// The SDK name.
    pub const fn name(self) -> &'static str {
        match self {
            CopyDir::GmToUb => "copy_gm_to_ub",
            CopyDir::GmToL1 => "copy_gm_to_l1",
            CopyDir::UbToGm => "copy_ub_to_gm",
            CopyDir::L1ToL0a => "copy_l1_to_l0a",
            CopyDir::L1ToL0b => "copy_l1_to_l0b",
            CopyDir::L0cToGm => "copy_l0c_to_gm",
            CopyDir::L1ToBt => "copy_l1_to_bt",
            CopyDir::L0cToUb => "copy_l0c_to_ub",
        }
    }
}

/// What a data-mover instruction does to the bytes on the way (its funct2). Each mode other
/// than [`CopyMode::Plain`] is defined for some directions only ([`CopyMode::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyMode {
    /// f2 = 0: the bytes as they are (every direction).
    Plain,
    /// f2 = 1 on L1 → L0A / L0B: every row is one 16 × 16 fractal of 2-byte elements
    /// (`row_bytes` = 512) and lands transposed (Ascend C's `LoadData` with `ifTranspose`).
    Transpose16,
    /// f2 = 1 on L0C → GM and L0C → UB: every row is f32 (`row_bytes` a multiple of 4) and lands in global
    /// memory as f16, rounded to nearest even, `row_bytes / 2` bytes per row (Ascend C's
    /// `Fixpipe` with `QuantMode_t::F322F16`).
    F32ToF16,
    /// f2 = 1 on L1 → BT: every row is f16 (`row_bytes` even) and lands in the bias table as
    /// f32 (exact), `2 × row_bytes` bytes per row (Ascend C's `DataCopy` C1 → C2 from half).
    F16ToF32,
    /// f2 = 1, 2, 3 on UB → GM (and f2 = 2 on L0C → GM, f32): every row is elements of this
    /// type (f32, f16, i32) added to what global memory holds instead of overwriting it
    /// (Ascend C's `SetAtomicAdd<T>()`, and `Fixpipe` / the `Matmul` API's `enAtomic` under
    /// it): floats rounded once to nearest even, i32 wrapping.
    AtomicAdd(DType),
}

impl CopyMode {
    /// The mode funct2 `f2` selects for direction `dir`, when it is defined.
    pub fn decode(dir: CopyDir, f2: u8) -> Option<CopyMode> {
        match (f2, dir) {
            (0, _) => Some(CopyMode::Plain),
            (1, CopyDir::L1ToL0a | CopyDir::L1ToL0b) => Some(CopyMode::Transpose16),
            (1, CopyDir::L0cToGm | CopyDir::L0cToUb) => Some(CopyMode::F32ToF16),
            (1, CopyDir::L1ToBt) => Some(CopyMode::F16ToF32),
            (1, CopyDir::UbToGm) => Some(CopyMode::AtomicAdd(DType::F32)),
            (2, CopyDir::UbToGm) => Some(CopyMode::AtomicAdd(DType::F16)),
            (3, CopyDir::UbToGm) => Some(CopyMode::AtomicAdd(DType::I32)),
            (2, CopyDir::L0cToGm) => Some(CopyMode::AtomicAdd(DType::F32)),
            _ => None,
        }
    }

    /// The bytes a row of `row_bytes` source bytes has once it lands, or `None` when the mode
    /// cannot take such a row (a transposed row is one 512-byte fractal; the conversions take
    /// whole elements).
    pub const fn out_row_bytes(self, row_bytes: u64) -> Option<u64> {
        match self {
            CopyMode::Plain => Some(row_bytes),
            CopyMode::Transpose16 if row_bytes == 512 => Some(row_bytes),
            CopyMode::F32ToF16 if row_bytes.is_multiple_of(4) => Some(row_bytes / 2),
            CopyMode::F16ToF32 if row_bytes.is_multiple_of(2) => Some(row_bytes * 2),
            CopyMode::AtomicAdd(t) if row_bytes.is_multiple_of(t.size()) => Some(row_bytes),
            _ => None,
        }
    }

    /// The funct2 that selects this mode on direction `dir`.
    pub const fn funct2(self, dir: CopyDir) -> u8 {
        match self {
            CopyMode::Plain => 0,
            CopyMode::Transpose16 | CopyMode::F32ToF16 | CopyMode::F16ToF32 => 1,
            CopyMode::AtomicAdd(_) if matches!(dir, CopyDir::L0cToGm) => 2,
            CopyMode::AtomicAdd(DType::F16) => 2,
            CopyMode::AtomicAdd(DType::I32) => 3,
            CopyMode::AtomicAdd(_) => 1,
        }
    }
}

/// How a cube instruction's operands are laid out in L0A / L0B / L0C (funct3 bit 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CubeLayout {
    /// All three row-major, each row starting on a 32-byte boundary.
    RowMajor,
    /// Ascend's fractal layouts: A in L0A as zZ fractals of 16 rows × 32 bytes, B in L0B as
    /// zN fractals (16 columns of B × 32 bytes of its rows, i.e. each fractal transposed), C in
    /// L0C as NZ fractals of 16 × 16 f32 (`docs/isa.md`, "Cube").
    Fractal,
}

/// A synchronization instruction (funct3 of custom-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SyncOp {
    /// `set_flag(src, dst, event)`, operand `src | dst << 8 | event << 16` in `rs1`.
    SetFlag = 0,
    /// `wait_flag(src, dst, event)`, same operand.
    WaitFlag = 1,
    /// `pipe_barrier(pipe)`, the pipe number (or `PIPE_ALL`) in `rs1`.
    Barrier = 2,
    /// `sync_all(blocks)`: every pipe drains, then the block waits until `blocks` blocks of
    /// its launch (0: all of them) have reached a `sync_all`; the count is in `rs1`.
    SyncAll = 3,
    /// `cross_set(mode, pipe, flag)`: once everything issued to `pipe` has completed, counts
    /// one set of cross-core flag `flag` for the blocks `mode` names (0: every block of the
    /// same kind, 1: the vector blocks of this AI core, 2: cube to vector or vector to cube
    /// within it); operand `flag | mode << 8 | pipe << 16` in `rs1`.
    CrossSet = 4,
    /// `cross_wait(flag)`: the block waits until a set of its cross-core flag `flag` is
    /// counted, and consumes it; the flag number in `rs1`.
    CrossWait = 5,
}

impl SyncOp {
    /// The instruction with funct3 `code`.
    pub fn from_code(code: u8) -> Option<SyncOp> {
        match code {
            0 => Some(SyncOp::SetFlag),
            1 => Some(SyncOp::WaitFlag),
            2 => Some(SyncOp::Barrier),
            3 => Some(SyncOp::SyncAll),
            4 => Some(SyncOp::CrossSet),
            5 => Some(SyncOp::CrossWait),
            _ => None,
        }
    }
}

/// Instruction words and packed operands, for tests and hand-written programs. Register
/// arguments are register numbers (0..32).
pub mod encode {
    use super::*;

    /// An R4-type word.
    pub const fn r4(
        opcode: u32,
        funct3: u32,
        funct2: u32,
        rd: u32,
        rs1: u32,
        rs2: u32,
        rs3: u32,
    ) -> u32 {
        (rs3 & 31) << 27
            | (funct2 & 3) << 25
            | (rs2 & 31) << 20
            | (rs1 & 31) << 15
            | (funct3 & 7) << 12
            | (rd & 31) << 7
            | (opcode & 0x7f)
    }

    /// A vector instruction: `op dst, a, b, n` (registers).
    pub const fn vector(op: VecOp, dst: u32, a: u32, b: u32, n: u32) -> u32 {
        let code = op as u32;
        r4(OPCODE_VECTOR, code & 7, code >> 3, dst, a, b, n)
    }

    /// A data-mover instruction: `dir dst, src, shape, strides` (registers).
    pub const fn copy(dir: CopyDir, dst: u32, src: u32, shape: u32, strides: u32) -> u32 {
        r4(OPCODE_MOVE, dir as u32, 0, dst, src, shape, strides)
    }

    /// A data-mover instruction with a [`CopyMode`] (the caller picks one defined for `dir`).
    pub const fn copy_mode(
        dir: CopyDir,
        mode: CopyMode,
        dst: u32,
        src: u32,
        shape: u32,
        strides: u32,
    ) -> u32 {
        r4(
            OPCODE_MOVE,
            dir as u32,
            mode.funct2(dir) as u32,
            dst,
            src,
            shape,
            strides,
        )
    }

    /// A cube instruction: `mmad c, a, b, mnk` (registers), row-major operands.
    pub const fn mmad(accumulate: bool, f32_inputs: bool, c: u32, a: u32, b: u32, mnk: u32) -> u32 {
        mmad_layout(CubeLayout::RowMajor, accumulate, f32_inputs, c, a, b, mnk)
    }

    /// A cube instruction with its operands in `layout` whose C starts from the bias row at
    /// the offset in the `mnk` operand's bits 48.. ([`mnk_bias`]; C = bias + A × B).
    pub const fn mmad_bias(
        layout: CubeLayout,
        f32_inputs: bool,
        c: u32,
        a: u32,
        b: u32,
        mnk: u32,
    ) -> u32 {
        mmad_layout(layout, false, f32_inputs, c, a, b, mnk) | 1 << 25
    }

    /// A cube instruction with its operands in `layout`.
    pub const fn mmad_layout(
        layout: CubeLayout,
        accumulate: bool,
        f32_inputs: bool,
        c: u32,
        a: u32,
        b: u32,
        mnk: u32,
    ) -> u32 {
        let fractal = matches!(layout, CubeLayout::Fractal) as u32;
        r4(
            OPCODE_CUBE,
            fractal << 2 | (f32_inputs as u32) << 1 | accumulate as u32,
            0,
            c,
            a,
            b,
            mnk,
        )
    }

    /// A synchronization instruction with its operand in register `rs1`.
    pub const fn sync(op: SyncOp, rs1: u32) -> u32 {
        r4(OPCODE_SYNC, op as u32, 0, 0, rs1, 0, 0)
    }

    /// The packed `cross_set` operand.
    pub const fn cross_flag(mode: u8, pipe: Pipe, flag: u8) -> u64 {
        flag as u64 | (mode as u64) << 8 | (pipe as u64) << 16
    }

    /// The packed `set_flag` / `wait_flag` operand.
    pub const fn flag(src: Pipe, dst: Pipe, event: u8) -> u64 {
        src as u64 | (dst as u64) << 8 | (event as u64) << 16
    }

    /// The packed shape operand of a copy.
    pub const fn shape(rows: u32, row_bytes: u32) -> u64 {
        (rows as u64) << 32 | row_bytes as u64
    }

    /// The packed strides operand of a copy.
    pub const fn strides(src_stride: u32, dst_stride: u32) -> u64 {
        (src_stride as u64) << 32 | dst_stride as u64
    }

    /// The `rs3` operand of a vector instruction on `n` elements of type `t`.
    pub const fn count(n: u32, t: DType) -> u64 {
        n as u64 | (t as u64) << 32
    }

    /// The `rs3` operand of `vcvt`: `n` elements from `src` to `dst`, rounded with `mode`.
    pub const fn cast(n: u32, dst: DType, src: DType, mode: crate::core::npu::RoundMode) -> u64 {
        count(n, dst) | (mode as u64) << 36 | (src as u64) << 40
    }

    /// The `rs3` operand of `vcmp`.
    pub const fn compare(n: u32, t: DType, mode: crate::core::npu::CmpMode) -> u64 {
        count(n, t) | (mode as u64) << 36
    }

    /// The `rs3` operand of `vsel`, the mask at UB offset `mask_off` (a multiple of 32);
    /// `scalar`: `b` is a scalar, not a tensor.
    pub const fn select(n: u32, t: DType, mask_off: u32, scalar: bool) -> u64 {
        count(n, t) | (scalar as u64) << 36 | ((mask_off / 32) as u64) << 48
    }

    /// `vmask`: the mask register becomes `rs1 | rs2 << 64`.
    pub const fn mask(rs1: u32, rs2: u32) -> u32 {
        vector(VecOp::Mask, 0, rs1, rs2, 0)
    }

    /// The `rs3` operand of `vred`: `repeat` repeats (at most 255) of `t`; `order` only for
    /// the whole-repeat maximum / minimum.
    pub const fn reduce(
        repeat: u8,
        t: DType,
        red: crate::core::npu::Reduce,
        order: crate::core::npu::ReduceOrder,
    ) -> u64 {
        repeat as u64 | (t as u64) << 32 | (red as u64) << 36 | (order as u64) << 40
    }

    /// The `rs2` operand of `vred`: the destination stride between repeats (in results of one
    /// repeat: one value, a value and its index, 8 block values), the source strides between
    /// blocks and between repeats (in 32-byte blocks).
    pub const fn reduce_strides(dst_rep: u16, src_blk: u16, src_rep: u16) -> u64 {
        dst_rep as u64 | (src_blk as u64) << 16 | (src_rep as u64) << 32
    }

    /// `vperm` Brcb: `rs3` (`repeat` repeats of 8 source elements of `t`) and `rs2` (the
    /// destination strides between the 8 blocks of a repeat and between repeats, in blocks).
    pub const fn brcb(repeat: u8, t: DType, dst_blk: u16, dst_rep: u16) -> (u64, u64) {
        (
            repeat as u64 | (t as u64) << 32 | (crate::core::npu::PermMode::Brcb as u64) << 36,
            dst_blk as u64 | (dst_rep as u64) << 16,
        )
    }

    /// The `rs3` operand of a `vperm` gather-mask: `repeat` repeats (ignored in counter mode,
    /// where the mask register holds the element count), source strides in blocks, the
    /// pattern's stride between repeats in blocks, `flags` of
    /// [`GATHER_MASK_COUNTER`](crate::core::npu::masked::GATHER_MASK_COUNTER) /
    /// [`GATHER_MASK_BUILTIN`](crate::core::npu::masked::GATHER_MASK_BUILTIN).
    pub const fn gather_mask(
        repeat: u16,
        t: DType,
        src_blk: u8,
        src_rep: u16,
        pattern_rep: u8,
        flags: u64,
    ) -> u64 {
        repeat as u64
            | (src_blk as u64) << 16
            | (pattern_rep as u64) << 24
            | (t as u64) << 32
            | (crate::core::npu::PermMode::GatherMask as u64) << 36
            | flags << 40
            | (src_rep as u64) << 48
    }

    /// The `rs3` operand of a `vperm` gather: `repeat` repeats of `t` under the mask register,
    /// the destination stride between repeats in blocks.
    pub const fn gather(repeat: u8, t: DType, dst_rep: u16) -> u64 {
        repeat as u64
            | (dst_rep as u64) << 8
            | (t as u64) << 32
            | (crate::core::npu::PermMode::Gather as u64) << 36
    }

    /// The packed `m, n, k` operand of a cube instruction.
    pub const fn mnk(m: u16, n: u16, k: u16) -> u64 {
        m as u64 | (n as u64) << 16 | (k as u64) << 32
    }

    /// The packed operand of a bias cube instruction: `m, n, k` and the bias row's BT offset
    /// (a multiple of 32).
    pub const fn mnk_bias(m: u16, n: u16, k: u16, bias_offset: u32) -> u64 {
        mnk(m, n, k) | ((bias_offset / 32) as u64) << 48
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for op in VecOp::ALL {
            assert_eq!(VecOp::from_code(op.code()), Some(op));
        }
        for d in CopyDir::ALL {
            assert_eq!(CopyDir::from_code(d as u8), Some(d));
        }
        for free in 0x20..=0xff {
            assert_eq!(VecOp::from_code(free), None);
        }
        assert_eq!(CopyDir::from_code(8), None);
        for d in CopyDir::ALL {
            for f2 in 0..4 {
                if let Some(mode) = CopyMode::decode(d, f2) {
                    assert_eq!(mode.funct2(d), f2, "{d:?} {mode:?}");
                }
            }
        }
    }

    #[test]
    fn clang_encodes_the_same_words() {
        // `.insn r4 0x0b, 0, 0, a0, a1, a2, a3` as clang-16 assembles it.
        assert_eq!(encode::vector(VecOp::Add, 10, 11, 12, 13), 0x68c5_850b);
        // `.insn r 0x7b, 0, 0, x0, a2, x0`.
        assert_eq!(encode::sync(SyncOp::SetFlag, 12), 0x0006_007b);
    }
}
