//! A tiny RV64IMF encoder and a harness for the core's integration tests: build a few
//! instruction words, run them as a kernel at `abi::CODE_BASE` with a `FlatBus` at
//! `abi::HEAP_BASE`, inspect registers and memory.
#![allow(dead_code)]

use npusim_device::abi;
use npusim_device::core::{Core, CoreConfig, FlatBus, KernelArg, NpuCsrs, Program, RunStats, Trap};

pub const ZERO: u32 = 0;
pub const RA: u32 = 1;
pub const SP: u32 = 2;
pub const T0: u32 = 5;
pub const T1: u32 = 6;
pub const T2: u32 = 7;
pub const A0: u32 = 10;
pub const A1: u32 = 11;
pub const A2: u32 = 12;
pub const A3: u32 = 13;
pub const A7: u32 = 17;

/// Rounding-mode fields.
pub const RNE: u32 = 0;
pub const RTZ: u32 = 1;
pub const RDN: u32 = 2;
pub const RUP: u32 = 3;
pub const RMM: u32 = 4;
pub const DYN: u32 = 7;

pub fn r(opcode: u32, f3: u32, f7: u32, rd: u32, rs1: u32, rs2: u32) -> u32 {
    (f7 << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | opcode
}
pub fn i(opcode: u32, f3: u32, rd: u32, rs1: u32, imm: i32) -> u32 {
    (((imm as u32) & 0xfff) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | opcode
}
pub fn s(opcode: u32, f3: u32, rs1: u32, rs2: u32, imm: i32) -> u32 {
    let imm = imm as u32;
    (((imm >> 5) & 0x7f) << 25)
        | (rs2 << 20)
        | (rs1 << 15)
        | (f3 << 12)
        | ((imm & 31) << 7)
        | opcode
}
pub fn b(f3: u32, rs1: u32, rs2: u32, off: i32) -> u32 {
    let o = off as u32;
    (((o >> 12) & 1) << 31)
        | (((o >> 5) & 0x3f) << 25)
        | (rs2 << 20)
        | (rs1 << 15)
        | (f3 << 12)
        | (((o >> 1) & 0xf) << 8)
        | (((o >> 11) & 1) << 7)
        | 0x63
}

pub fn addi(rd: u32, rs1: u32, imm: i32) -> u32 {
    i(0x13, 0, rd, rs1, imm)
}
pub fn lui(rd: u32, imm20: u32) -> u32 {
    (imm20 << 12) | (rd << 7) | 0x37
}
pub fn jal(rd: u32, off: i32) -> u32 {
    let o = off as u32;
    (((o >> 20) & 1) << 31)
        | (((o >> 1) & 0x3ff) << 21)
        | (((o >> 11) & 1) << 20)
        | (o & 0xff000)
        | (rd << 7)
        | 0x6f
}
pub fn jalr(rd: u32, rs1: u32, imm: i32) -> u32 {
    i(0x67, 0, rd, rs1, imm)
}
pub const RET: u32 = 0x0000_8067;
pub const ECALL: u32 = 0x0000_0073;
pub const EBREAK: u32 = 0x0010_0073;

/// Loads a 64-bit constant into `rd` (lui/addi/slli sequence, at most 8 words).
pub fn li(rd: u32, v: u64) -> Vec<u32> {
    let v = v as i64;
    if v == v as i32 as i64 {
        let lo = ((v << 52) >> 52) as i32;
        let hi = ((v as i32).wrapping_sub(lo) as u32) >> 12;
        let mut out = Vec::new();
        if hi != 0 {
            out.push(lui(rd, hi & 0xfffff));
            out.push(i(0x1b, 0, rd, rd, lo)); // addiw
        } else {
            out.push(addi(rd, ZERO, lo));
        }
        return out;
    }
    // Build the upper part, shift, add the low 12 bits.
    let lo = ((v << 52) >> 52) as i32;
    let upper = v.wrapping_sub(lo as i64) >> 12;
    let mut out = li(rd, upper as u64);
    out.push(i(0x13, 1, rd, rd, 12)); // slli rd, rd, 12
    if lo != 0 {
        out.push(addi(rd, rd, lo));
    }
    out
}

/// An OP (register-register) instruction by mnemonic.
pub fn op(name: &str, rd: u32, rs1: u32, rs2: u32) -> u32 {
    let (opc, f3, f7) = match name {
        "add" => (0x33, 0, 0),
        "sub" => (0x33, 0, 0x20),
        "sll" => (0x33, 1, 0),
        "slt" => (0x33, 2, 0),
        "sltu" => (0x33, 3, 0),
        "xor" => (0x33, 4, 0),
        "srl" => (0x33, 5, 0),
        "sra" => (0x33, 5, 0x20),
        "or" => (0x33, 6, 0),
        "and" => (0x33, 7, 0),
        "mul" => (0x33, 0, 1),
        "mulh" => (0x33, 1, 1),
        "mulhsu" => (0x33, 2, 1),
        "mulhu" => (0x33, 3, 1),
        "div" => (0x33, 4, 1),
        "divu" => (0x33, 5, 1),
        "rem" => (0x33, 6, 1),
        "remu" => (0x33, 7, 1),
        "addw" => (0x3b, 0, 0),
        "subw" => (0x3b, 0, 0x20),
        "sllw" => (0x3b, 1, 0),
        "srlw" => (0x3b, 5, 0),
        "sraw" => (0x3b, 5, 0x20),
        "mulw" => (0x3b, 0, 1),
        "divw" => (0x3b, 4, 1),
        "divuw" => (0x3b, 5, 1),
        "remw" => (0x3b, 6, 1),
        "remuw" => (0x3b, 7, 1),
        _ => panic!("unknown op {name}"),
    };
    r(opc, f3, f7, rd, rs1, rs2)
}

/// An OP-IMM instruction by mnemonic (shifts take the shift amount as `imm`).
pub fn opi(name: &str, rd: u32, rs1: u32, imm: i32) -> u32 {
    match name {
        "addi" => i(0x13, 0, rd, rs1, imm),
        "slti" => i(0x13, 2, rd, rs1, imm),
        "sltiu" => i(0x13, 3, rd, rs1, imm),
        "xori" => i(0x13, 4, rd, rs1, imm),
        "ori" => i(0x13, 6, rd, rs1, imm),
        "andi" => i(0x13, 7, rd, rs1, imm),
        "slli" => i(0x13, 1, rd, rs1, imm & 63),
        "srli" => i(0x13, 5, rd, rs1, imm & 63),
        "srai" => i(0x13, 5, rd, rs1, (imm & 63) | 0x400),
        "addiw" => i(0x1b, 0, rd, rs1, imm),
        "slliw" => i(0x1b, 1, rd, rs1, imm & 31),
        "srliw" => i(0x1b, 5, rd, rs1, imm & 31),
        "sraiw" => i(0x1b, 5, rd, rs1, (imm & 31) | 0x400),
        _ => panic!("unknown op-imm {name}"),
    }
}

pub fn load(name: &str, rd: u32, rs1: u32, imm: i32) -> u32 {
    let f3 = ["lb", "lh", "lw", "ld", "lbu", "lhu", "lwu"]
        .iter()
        .position(|n| *n == name)
        .unwrap();
    i(0x03, f3 as u32, rd, rs1, imm)
}
pub fn store(name: &str, rs1: u32, rs2: u32, imm: i32) -> u32 {
    let f3 = ["sb", "sh", "sw", "sd"]
        .iter()
        .position(|n| *n == name)
        .unwrap();
    s(0x23, f3 as u32, rs1, rs2, imm)
}
pub fn branch(name: &str, rs1: u32, rs2: u32, off: i32) -> u32 {
    let f3 = match name {
        "beq" => 0,
        "bne" => 1,
        "blt" => 4,
        "bge" => 5,
        "bltu" => 6,
        "bgeu" => 7,
        _ => panic!("unknown branch {name}"),
    };
    b(f3, rs1, rs2, off)
}

/// csrrw/csrrs/csrrc (f3 1..3) and the immediate forms (f3 5..7).
pub fn csr(f3: u32, rd: u32, rs1_or_uimm: u32, csr: u16) -> u32 {
    ((csr as u32) << 20) | (rs1_or_uimm << 15) | (f3 << 12) | (rd << 7) | 0x73
}
pub fn csrr(rd: u32, c: u16) -> u32 {
    csr(2, rd, 0, c)
}
pub fn csrw(c: u16, rs1: u32) -> u32 {
    csr(1, 0, rs1, c)
}

pub fn flw(rd: u32, rs1: u32, imm: i32) -> u32 {
    i(0x07, 2, rd, rs1, imm)
}
pub fn fsw(rs1: u32, rs2: u32, imm: i32) -> u32 {
    s(0x27, 2, rs1, rs2, imm)
}
/// OP-FP with funct7 and funct3 (rounding mode or sub-op).
pub fn fp(f7: u32, f3: u32, rd: u32, rs1: u32, rs2: u32) -> u32 {
    r(0x53, f3, f7, rd, rs1, rs2)
}
/// Fused multiply-add family: opcode 0x43 fmadd, 0x47 fmsub, 0x4b fnmsub, 0x4f fnmadd.
pub fn fma(opcode: u32, rd: u32, rs1: u32, rs2: u32, rs3: u32, rm: u32) -> u32 {
    (rs3 << 27) | (rs2 << 20) | (rs1 << 15) | (rm << 12) | (rd << 7) | opcode
}
pub fn fmv_w_x(rd: u32, rs1: u32) -> u32 {
    fp(0x78, 0, rd, rs1, 0)
}
pub fn fmv_x_w(rd: u32, rs1: u32) -> u32 {
    fp(0x70, 0, rd, rs1, 0)
}

pub fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Size of the test bus at `abi::HEAP_BASE`.
pub const BUS_SIZE: usize = 64 * 1024;

/// The result of running a snippet.
pub struct Ran {
    pub core: Core,
    pub bus: FlatBus,
    pub result: Result<RunStats, Trap>,
}

impl Ran {
    pub fn x(&self, i: u32) -> u64 {
        self.core.x(i as usize)
    }
    pub fn ok(&self) -> RunStats {
        match &self.result {
            Ok(s) => *s,
            Err(t) => panic!("unexpected trap: {t}"),
        }
    }
    pub fn trap(&self) -> Trap {
        match &self.result {
            Ok(_) => panic!("expected a trap"),
            Err(t) => t.clone(),
        }
    }
}

/// Runs `words` (a `ret` is appended) as a kernel with `args`, a fresh bus, default config.
pub fn run_with(words: &[u32], args: &[KernelArg], config: CoreConfig) -> Ran {
    let mut text = words.to_vec();
    text.push(RET);
    let program = Program::decode(abi::CODE_BASE, &bytes(&text));
    let mut bus = FlatBus::new(abi::HEAP_BASE, BUS_SIZE);
    let mut core = Core::new(config);
    let csrs = NpuCsrs {
        block_idx: 3,
        block_dim: 8,
        core_id: 5,
        tiling: abi::HEAP_BASE + 0x100,
        ..NpuCsrs::default()
    };
    let result = core.run(&program, abi::CODE_BASE, args, csrs, &mut bus, 1_000_000);
    Ran { core, bus, result }
}

pub fn run(words: &[u32]) -> Ran {
    run_with(words, &[], CoreConfig::default())
}

/// Runs `words` after `li`-ing each `(reg, value)`.
pub fn run_regs(init: &[(u32, u64)], words: &[u32]) -> Ran {
    let mut all = Vec::new();
    for &(reg, v) in init {
        all.extend(li(reg, v));
    }
    all.extend_from_slice(words);
    run(&all)
}
