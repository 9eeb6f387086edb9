//! Why a block stopped abnormally. Every trap carries the `pc` of the instruction that raised it
//! (for fetch faults, the address that could not be fetched) and, for memory traps, the
//! faulting address. The engine turns a trap into a fault on the task.

use super::npu::NpuFault;

/// What kind of failure a [`Bus`](super::Bus) access hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemFaultKind {
    /// No mapping at the address.
    Unmapped,
    /// Mapped, but the access is not permitted (for example a store to read-only memory).
    Protection,
}

/// A failed bus access: the first address that could not be accessed and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?} memory at {addr:#x}")]
pub struct MemFault {
    /// The faulting virtual address.
    pub addr: u64,
    /// What went wrong.
    pub kind: MemFaultKind,
}

impl MemFault {
    /// A fault for an address nothing is mapped at.
    pub fn unmapped(addr: u64) -> MemFault {
        MemFault {
            addr,
            kind: MemFaultKind::Unmapped,
        }
    }
}

/// A trap that ends a block's run.
///
/// NPU deviations from plain RISC-V, by design: misaligned loads and stores always trap (the
/// NPU requires natural alignment), and integer division or remainder by zero traps instead of
/// producing the architectural all-ones / dividend result (except in test mode).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Trap {
    /// An encoding the core does not implement, a privileged instruction, a reserved rounding
    /// mode, or an access to an unknown CSR or a write to a read-only one.
    #[error("illegal instruction {bits:#010x} at pc {pc:#x}")]
    IllegalInstruction {
        /// Address of the instruction.
        pc: u64,
        /// Its encoding.
        bits: u32,
    },
    /// Execution reached an address that holds no loaded instruction.
    #[error("instruction page fault: no code at {pc:#x}")]
    InstructionPageFault {
        /// The address that could not be fetched.
        pc: u64,
    },
    /// Execution reached an address that is not a multiple of 4 (there is no C extension).
    #[error("instruction address misaligned: {pc:#x}")]
    InstructionMisaligned {
        /// The misaligned target.
        pc: u64,
    },
    /// A load from memory the bus could not read.
    #[error("load page fault at {addr:#x} (pc {pc:#x}): {fault}")]
    LoadPageFault {
        /// Address of the load instruction.
        pc: u64,
        /// The faulting data address.
        addr: u64,
        /// What the bus reported.
        fault: MemFault,
    },
    /// A store to memory the bus could not write.
    #[error("store page fault at {addr:#x} (pc {pc:#x}): {fault}")]
    StorePageFault {
        /// Address of the store instruction.
        pc: u64,
        /// The faulting data address.
        addr: u64,
        /// What the bus reported.
        fault: MemFault,
    },
    /// A load whose address is not a multiple of its size.
    #[error("misaligned load from {addr:#x} (pc {pc:#x})")]
    LoadMisaligned {
        /// Address of the load instruction.
        pc: u64,
        /// The data address.
        addr: u64,
    },
    /// A store whose address is not a multiple of its size.
    #[error("misaligned store to {addr:#x} (pc {pc:#x})")]
    StoreMisaligned {
        /// Address of the store instruction.
        pc: u64,
        /// The data address.
        addr: u64,
    },
    /// DIV/DIVU/REM/REMU(W) with a zero divisor: an NPU trap.
    #[error("integer division by zero at pc {pc:#x}")]
    DivideByZero {
        /// Address of the division.
        pc: u64,
    },
    /// An `ebreak`.
    #[error("breakpoint at pc {pc:#x}")]
    Breakpoint {
        /// Address of the `ebreak`.
        pc: u64,
    },
    /// An `ecall` whose service number (`a7`) is not one of `abi::ECALL_*`.
    #[error("unknown ecall service {service} at pc {pc:#x}")]
    UnknownEcall {
        /// Address of the `ecall`.
        pc: u64,
        /// The value of `a7`.
        service: u64,
    },
    /// The kernel reported an error with `ECALL_ABORT`.
    #[error("kernel aborted with code {code} at pc {pc:#x}")]
    Abort {
        /// Address of the `ecall`.
        pc: u64,
        /// The code the kernel passed in `a0`.
        code: i64,
    },
    /// An NPU extension instruction with bad operands (out of a buffer, misaligned, a bad
    /// pipe or event, a wait that could never be released), or a scalar access to a local
    /// buffer it may not touch.
    #[error("NPU fault at pc {pc:#x}: {fault}")]
    Npu {
        /// Address of the instruction.
        pc: u64,
        /// What was wrong.
        fault: NpuFault,
    },
    /// The watchdog: the run executed its whole instruction budget without finishing.
    #[error("instruction budget of {budget} exceeded at pc {pc:#x}")]
    BudgetExceeded {
        /// Address of the next instruction that would have run.
        pc: u64,
        /// The budget that was exhausted.
        budget: u64,
    },
}

impl Trap {
    /// The program counter the trap is attributed to.
    pub fn pc(&self) -> u64 {
        match *self {
            Trap::IllegalInstruction { pc, .. }
            | Trap::InstructionPageFault { pc }
            | Trap::InstructionMisaligned { pc }
            | Trap::LoadPageFault { pc, .. }
            | Trap::StorePageFault { pc, .. }
            | Trap::LoadMisaligned { pc, .. }
            | Trap::StoreMisaligned { pc, .. }
            | Trap::DivideByZero { pc }
            | Trap::Breakpoint { pc }
            | Trap::UnknownEcall { pc, .. }
            | Trap::Abort { pc, .. }
            | Trap::Npu { pc, .. }
            | Trap::BudgetExceeded { pc, .. } => pc,
        }
    }

    /// The faulting data address of a memory trap.
    pub fn addr(&self) -> Option<u64> {
        match *self {
            Trap::LoadPageFault { addr, .. }
            | Trap::StorePageFault { addr, .. }
            | Trap::LoadMisaligned { addr, .. }
            | Trap::StoreMisaligned { addr, .. } => Some(addr),
            Trap::InstructionPageFault { pc } | Trap::InstructionMisaligned { pc } => Some(pc),
            Trap::Npu { ref fault, .. } => fault.addr(),
            _ => None,
        }
    }
}
