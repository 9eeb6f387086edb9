//! Control and status registers: the NPU's read-only launch registers and local-buffer sizes
//! (`abi::CSR_*`), the data movers' repeat register (`abi::CSR_MOVE_REPEAT`), the user
//! counters, the floating-point `fflags`/`frm`/`fcsr`, and — in test mode only — a scratch
//! file standing in for the machine-mode CSRs the riscv-tests `p` environment touches.
//!
//! Any other CSR, and any write to a read-only one, is an illegal instruction.

use super::Core;
use super::decode::{Inst, Op, X_SINK};
use super::npu::Buffer;
use crate::abi;

/// The launch registers of one block, set by the launcher and read-only to the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NpuCsrs {
    /// `CSR_BLOCK_IDX`: this block's index in `0..block_dim`.
    pub block_idx: u64,
    /// `CSR_BLOCK_DIM`: the number of blocks in the launch.
    pub block_dim: u64,
    /// `CSR_CORE_ID`: the AI core running the block.
    pub core_id: u64,
    /// `CSR_TILING`: device address of the tiling words, 0 when there are none.
    pub tiling: u64,
    /// `CSR_CORE_KIND`: `abi::CORE_KIND_ANY`, `_AIC` or `_AIV`.
    pub core_kind: u64,
    /// `CSR_SUB_BLOCK_IDX`: the vector block's index within its AI core.
    pub sub_block_idx: u64,
    /// `CSR_SUB_BLOCK_NUM`: vector blocks per AI core (0 reads as 1).
    pub sub_block_num: u64,
}

const FFLAGS: u16 = 0x001;
const FRM: u16 = 0x002;
const FCSR: u16 = 0x003;
/// Machine-mode CSRs used by the test environment.
pub(crate) const MTVEC: u16 = 0x305;
pub(crate) const MEPC: u16 = 0x341;
pub(crate) const MCAUSE: u16 = 0x342;
const MHARTID: u16 = 0xf14;

impl Core {
    /// Reads a CSR, `None` if it does not exist.
    fn csr_read(&self, csr: u16) -> Option<u64> {
        Some(match csr {
            FFLAGS => self.fflags as u64,
            FRM => self.frm as u64,
            FCSR => ((self.frm as u64) << 5) | self.fflags as u64,
            abi::CSR_CYCLE | abi::CSR_TIME => self.cycles,
            abi::CSR_INSTRET => self.instret,
            abi::CSR_BLOCK_IDX => self.csrs.block_idx,
            abi::CSR_BLOCK_DIM => self.csrs.block_dim,
            abi::CSR_CORE_ID => self.csrs.core_id,
            abi::CSR_TILING => self.csrs.tiling,
            abi::CSR_UB_BYTES => self.npu.sizes().of(Buffer::Ub) as u64,
            abi::CSR_L1_BYTES => self.npu.sizes().of(Buffer::L1) as u64,
            abi::CSR_L0A_BYTES => self.npu.sizes().of(Buffer::L0a) as u64,
            abi::CSR_L0B_BYTES => self.npu.sizes().of(Buffer::L0b) as u64,
            abi::CSR_L0C_BYTES => self.npu.sizes().of(Buffer::L0c) as u64,
            abi::CSR_BT_BYTES => self.npu.sizes().of(Buffer::Bt) as u64,
            abi::CSR_RSVD_CNT => self.npu.rsvd_cnt,
            abi::CSR_CORE_KIND => self.csrs.core_kind,
            abi::CSR_SUB_BLOCK_IDX => self.csrs.sub_block_idx,
            abi::CSR_SUB_BLOCK_NUM => self.csrs.sub_block_num.max(1),
            abi::CSR_MOVE_REPEAT => self.npu.move_repeat,
            MHARTID if self.test_mode.is_some() => 0,
            _ => return self.test_csrs.get(csr as usize).copied(),
        })
    }

    /// Writes a CSR, `None` if it does not exist or is read-only.
    fn csr_write(&mut self, csr: u16, v: u64) -> Option<()> {
        match csr {
            FFLAGS => self.fflags = (v & 0x1f) as u8,
            FRM => self.frm = (v & 7) as u8,
            FCSR => {
                self.fflags = (v & 0x1f) as u8;
                self.frm = ((v >> 5) & 7) as u8;
            }
            abi::CSR_MOVE_REPEAT => self.npu.move_repeat = v,
            // Bits 11:10 = 0b11 mark the read-only space (counters, NPU launch registers,
            // mhartid).
            _ if csr >> 10 == 3 => return None,
            _ => *self.test_csrs.get_mut(csr as usize)? = v,
        }
        Some(())
    }

    /// Executes one Zicsr instruction; `Err` means it is illegal (unknown CSR, or a write to
    /// a read-only one). The caller has synchronized the counters.
    pub(crate) fn csr_op(&mut self, inst: Inst) -> Result<(), IllegalCsr> {
        let csr = (inst.imm as u32 & 0xfff) as u16;
        let illegal = || IllegalCsr;
        let src = match inst.op {
            Op::Csrrw | Op::Csrrs | Op::Csrrc => self.x[inst.rs1 as usize & 31],
            _ => inst.rs1 as u64,
        };
        // Which of read and write happen follows the spec: CSRRW with rd = x0 does not read;
        // CSRRS/CSRRC with a zero source register or immediate do not write.
        let (read, write) = match inst.op {
            Op::Csrrw | Op::Csrrwi => (inst.rd != X_SINK, true),
            _ => (true, inst.rs1 != 0),
        };
        let old = if read {
            self.csr_read(csr).ok_or_else(illegal)?
        } else if self.csr_read(csr).is_none() {
            return Err(illegal());
        } else {
            0
        };
        if write {
            let new = match inst.op {
                Op::Csrrw | Op::Csrrwi => src,
                Op::Csrrs | Op::Csrrsi => old | src,
                _ => old & !src,
            };
            self.csr_write(csr, new).ok_or_else(illegal)?;
        }
        self.x[inst.rd as usize & 63] = old;
        Ok(())
    }
}

/// The CSR access was illegal.
#[derive(Debug)]
pub(crate) struct IllegalCsr;
