//! The contract between the simulated AI core, the kernel SDK and the loader: the layout of a
//! context's virtual address space, the NPU control and status registers, the `ecall` services
//! and the exit convention. `device/sdk/npusim.h` mirrors these numbers for C kernels.

/// Addresses below this are never mapped, so a null (or near-null) pointer always faults.
pub const NULL_GUARD_END: u64 = 0x1_0000;

/// Start of the instruction-memory window: loaded `.text` lives here, one range per binary.
pub const CODE_BASE: u64 = 0x4000_0000;
/// End (exclusive) of the instruction-memory window (256 MiB).
pub const CODE_END: u64 = 0x5000_0000;
/// Start of the module-data window: `.rodata`, `.data`, `.sdata`, `.bss` of loaded binaries.
/// It sits below 2 GiB so `medlow` code can address it and within 2 GiB of the code for `medany`.
pub const MODULE_DATA_BASE: u64 = 0x5000_0000;
/// End (exclusive) of the module-data window (512 MiB).
pub const MODULE_DATA_END: u64 = 0x7000_0000;
/// Start of the core-local window: each block's stack (and, later, the local buffers) are
/// addressed here; accesses never leave the core.
pub const LOCAL_BASE: u64 = 0x2000_0000;
/// Size of the per-block stack at the top of the core-local window.
pub const LOCAL_STACK_SIZE: u64 = 64 * 1024;
/// Start of the device heap: the memory pool hands out addresses from here upwards.
pub const HEAP_BASE: u64 = 0x10_0000_0000;

/// The return address a launch puts in `ra`: when the entry function returns here, the block
/// has finished normally. It is never mapped, so no other path can reach it.
pub const EXIT_PC: u64 = 0x3FFF_FFF0;

/// CSR: the index of the running block, in `0..block_dim` (read-only).
pub const CSR_BLOCK_IDX: u16 = 0xCC0;
/// CSR: the number of blocks of the launch (read-only).
pub const CSR_BLOCK_DIM: u16 = 0xCC1;
/// CSR: the id of the AI core running the block (read-only).
pub const CSR_CORE_ID: u16 = 0xCC2;
/// CSR: the device address of the launch's tiling words, 0 when it has none (read-only).
pub const CSR_TILING: u16 = 0xCC3;
/// CSR: the standard user cycle counter (read-only).
pub const CSR_CYCLE: u16 = 0xC00;
/// CSR: the standard user time counter, in core cycles here (read-only).
pub const CSR_TIME: u16 = 0xC01;
/// CSR: the standard user retired-instruction counter (read-only).
pub const CSR_INSTRET: u16 = 0xC02;

/// `ecall` with `a7 = ECALL_PRINT_STR`: print `a1` bytes at address `a0` to the host log.
pub const ECALL_PRINT_STR: u64 = 1;
/// `ecall` with `a7 = ECALL_PRINT_I64`: print `a0` as a signed integer to the host log.
pub const ECALL_PRINT_I64: u64 = 2;
/// `ecall` with `a7 = ECALL_PRINT_F32`: print `fa0` (single precision) to the host log.
pub const ECALL_PRINT_F32: u64 = 3;
/// `ecall` with `a7 = ECALL_ABORT`: the kernel reports an error; the task faults with code `a0`.
pub const ECALL_ABORT: u64 = 93;

/// Start of the unified buffer (UB) in the core-local window: the vector unit's operands, and
/// the only local buffer the scalar unit may also load from and store to. Its size comes from
/// the preset (`DeviceConfig::ub_bytes`); the window reserves [`LOCAL_BUFFER_WINDOW`] bytes.
pub const UB_BASE: u64 = 0x2100_0000;
/// Start of the L1 buffer: the cube unit's staging memory, filled from global memory.
pub const L1_BASE: u64 = 0x2200_0000;
/// Start of the L0A buffer: the cube's left operand.
pub const L0A_BASE: u64 = 0x2300_0000;
/// Start of the L0B buffer: the cube's right operand.
pub const L0B_BASE: u64 = 0x2400_0000;
/// Start of the L0C buffer: the cube's f32 accumulator.
pub const L0C_BASE: u64 = 0x2500_0000;
/// Start of the BT buffer (bias table): f32 bias rows the cube can start C from, filled from L1.
pub const BT_BASE: u64 = 0x2600_0000;
/// Address space reserved for each local buffer (16 MiB); the configured size is smaller and
/// anything past it faults.
pub const LOCAL_BUFFER_WINDOW: u64 = 0x0100_0000;
/// Alignment in bytes of every local-buffer address (and local row stride) an NPU instruction
/// names.
pub const LOCAL_BUFFER_ALIGN: u64 = 32;

/// CSR: the size of this core's unified buffer in bytes (read-only).
pub const CSR_UB_BYTES: u16 = 0xCC4;
/// CSR: the size of this core's L1 buffer in bytes (read-only).
pub const CSR_L1_BYTES: u16 = 0xCC5;
/// CSR: the size of this core's L0A buffer in bytes (read-only).
pub const CSR_L0A_BYTES: u16 = 0xCC6;
/// CSR: the size of this core's L0B buffer in bytes (read-only).
pub const CSR_L0B_BYTES: u16 = 0xCC7;
/// CSR: the size of this core's L0C buffer in bytes (read-only).
pub const CSR_L0C_BYTES: u16 = 0xCC8;
/// CSR: the size of this core's BT (bias table) buffer in bytes (read-only).
pub const CSR_BT_BYTES: u16 = 0xCC9;
/// CSR: how many elements the last gather-mask (`vperm` mode 1) to land kept (read-only;
/// read it after a `V -> S` flag wait).
pub const CSR_RSVD_CNT: u16 = 0xCCA;
/// CSR: which part of a mix kernel the block runs (read-only): [`CORE_KIND_ANY`] for a
/// kernel whose every block runs all of it, [`CORE_KIND_AIC`] / [`CORE_KIND_AIV`] for the
/// cube and vector blocks of a kernel declared `KERNEL_TYPE_MIX_AIC_1_*`.
pub const CSR_CORE_KIND: u16 = 0xCCB;
/// CSR: the block's index among the vector blocks of its AI core (0 on a cube block or a
/// kernel that is not split; read-only).
pub const CSR_SUB_BLOCK_IDX: u16 = 0xCCC;
/// CSR: how many vector blocks each AI core of the launch has (1 when the kernel is not
/// split; read-only).
pub const CSR_SUB_BLOCK_NUM: u16 = 0xCCD;
/// CSR: the repeat of the next data-mover instruction (read-write; `docs/isa.md`, "Data
/// movement"): `reps | src_rep << 16 | dst_rep << 40` — the next copy moves its `rows` ×
/// `row_bytes` rectangle `reps` times, the `i`-th from `src + i × src_rep` to
/// `dst + i × dst_rep` (bytes), as one instruction. The copy reads the CSR and clears it, so it
/// applies to that copy only; 0 (or `reps` 0) is one rectangle.
pub const CSR_MOVE_REPEAT: u16 = 0x800;
/// [`CSR_CORE_KIND`]: the block runs every part of its kernel.
pub const CORE_KIND_ANY: u64 = 0;
/// [`CSR_CORE_KIND`]: the cube (AIC) block of a split mix kernel's AI core.
pub const CORE_KIND_AIC: u64 = 1;
/// [`CSR_CORE_KIND`]: a vector (AIV) block of a split mix kernel's AI core.
pub const CORE_KIND_AIV: u64 = 2;
