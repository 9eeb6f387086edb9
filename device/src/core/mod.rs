//! The AI core's scalar unit: an RV64IMF + Zicsr interpreter that runs one block of a binary
//! kernel. The engine hands it the decoded text ([`Program`]), an entry pc, the kernel
//! arguments, the block's launch registers ([`NpuCsrs`]), a [`Bus`] to device memory, and an
//! instruction budget; it gets back [`RunStats`] or the [`Trap`] that ended the block.
//!
//! How a block runs:
//!
//! 1. [`Program::decode`] turns the text into a decode cache once, when the binary is loaded.
//! 2. [`Core::run`] resets the registers and the core-local stack (the `LOCAL_STACK_SIZE`
//!    bytes at `abi::LOCAL_BASE`, served inside the core, never on the bus), points `sp` at
//!    its top, places the arguments per LP64F ([`KernelArg`]), sets `ra = abi::EXIT_PC`, and
//!    jumps to the entry.
//! 3. Instructions execute from the cache; loads and stores outside the stack window go to
//!    the bus (generic, so each access is a direct call); `ecall` services print to
//!    [`Core::output`].
//! 4. Returning to `abi::EXIT_PC` ends the block; any trap ends it with an error.
//!
//! The NPU extension ([`npu`]) adds the core's local buffers (UB, L1, L0A/B/C, mapped in the
//! core-local window), data movers, the vector and cube units and the flags between them, all
//! in the custom opcode space; `docs/isa.md` describes it. The block's time is then the latest
//! of the scalar unit's cycles and every pipe's completion ([`RunStats::block_cycles`]).
//!
//! Deviations from plain RISC-V, on purpose: loads and stores must be naturally aligned,
//! integer division by zero traps, code is immutable once decoded (`fence.i` is a no-op and
//! stores never change what executes), and only user-level state exists outside test mode.
//! Timing: each instruction is charged a latency from [`Latencies`]. Test mode
//! ([`CoreConfig::test_mode`]) adds just enough machine mode to run the official riscv-tests;
//! see `docs/conformance.md`.

mod abi_args;
mod cost;
mod csr;
mod decode;
mod exec;
mod fpu;
pub mod npu;
mod trap;

pub use abi_args::KernelArg;
pub use cost::{DEFAULT_LATENCIES, Latencies};
pub use csr::NpuCsrs;
pub use decode::Program;
pub use npu::{Buffer, Footprint, NpuConfig, NpuFault, Pipe, PipeCycles};
pub use trap::{MemFault, MemFaultKind, Trap};

use crate::abi;
use crate::config::DeviceConfig;

/// Device memory as the core sees it: every load and store outside the core-local stack and
/// buffer windows. Scalar accesses are naturally aligned (the core checks) and at most 8
/// bytes; service calls that read a string, and the data movers, read or write longer ranges
/// (one call per row of a transfer, any alignment, possibly crossing pages). An implementation
/// that models timing keeps its own account of latency per access; the data movers' time is in
/// the NPU timing.
pub trait Bus {
    /// Reads `buf.len()` bytes at virtual address `va`.
    fn load(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemFault>;
    /// Writes `data` at virtual address `va`.
    fn store(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault>;
}

/// A bus over one flat byte vector mapped at `base`: enough for tests and the conformance
/// runner. Anything outside `base .. base + len` is unmapped.
#[derive(Clone, Debug)]
pub struct FlatBus {
    /// The first mapped address.
    pub base: u64,
    /// The memory, `mem[0]` at `base`.
    pub mem: Vec<u8>,
}

impl FlatBus {
    /// `len` zero bytes at `base`.
    pub fn new(base: u64, len: usize) -> FlatBus {
        FlatBus {
            base,
            mem: vec![0; len],
        }
    }

    fn range(&self, va: u64, len: usize) -> Result<std::ops::Range<usize>, MemFault> {
        let off = va
            .checked_sub(self.base)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(MemFault::unmapped(va))?;
        match off.checked_add(len) {
            Some(end) if end <= self.mem.len() => Ok(off..end),
            _ => Err(MemFault::unmapped(va)),
        }
    }
}

impl Bus for FlatBus {
    fn load(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        let r = self.range(va, buf.len())?;
        buf.copy_from_slice(&self.mem[r]);
        Ok(())
    }

    fn store(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault> {
        let r = self.range(va, data.len())?;
        self.mem[r].copy_from_slice(data);
        Ok(())
    }
}

/// Settings for the riscv-tests `p` environment (conformance only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestMode {
    /// Address of the `tohost` symbol: a store there ends the run with [`Exit::ToHost`].
    pub tohost: u64,
}

/// How a core is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreConfig {
    /// The per-class cycle costs.
    pub latencies: Latencies,
    /// Bytes of core-local memory at `abi::LOCAL_BASE` (the stack lives at its top). Rounded
    /// down to a multiple of 16.
    pub local_size: usize,
    /// `Some` only for conformance runs: machine-mode CSRs as scratch registers, `mret`,
    /// `ecall` trapping to `mtvec` with `mcause = 11`, RISC-V division-by-zero results, and
    /// the `tohost` exit.
    pub test_mode: Option<TestMode>,
    /// The NPU extension: local buffer sizes and the timing of its units.
    pub npu: NpuConfig,
}

impl CoreConfig {
    /// One AI core of the device `cfg`: the default latency table and stack, local buffers
    /// sized by the preset, unit timing from its throughputs and bandwidths.
    pub fn from_device(cfg: &DeviceConfig) -> CoreConfig {
        CoreConfig {
            latencies: DEFAULT_LATENCIES,
            local_size: abi::LOCAL_STACK_SIZE as usize,
            test_mode: None,
            npu: NpuConfig::from_device(cfg),
        }
    }
}

impl Default for CoreConfig {
    /// [`CoreConfig::from_device`] of the default preset.
    fn default() -> Self {
        CoreConfig::from_device(&DeviceConfig::default())
    }
}

/// How a run ended without a trap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The entry function returned to `abi::EXIT_PC`.
    Returned,
    /// Test mode: the program stored this value to `tohost` (1 means pass).
    ToHost(u64),
    /// The block executed a `sync_all` for this many blocks of its launch (0: all of them):
    /// its pipes have drained and its pc is past the instruction. The launch resumes it with
    /// [`Core::resume_at`] and [`Core::execute`] once the others have reached theirs.
    SyncAll(u32),
    /// The block executed a `cross_wait` on this cross-core flag: its pipes are as they were
    /// and its pc is past the instruction. The launch, which counts the flags' sets, resumes
    /// it with [`Core::resume_at`] and [`Core::execute`] once a set is counted for it.
    CrossWait(u8),
}

/// Counters of a run (since the last reset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Instructions executed (retired or trapping).
    pub instructions: u64,
    /// The scalar unit's cycles: the latency table plus stalls on flags, barriers and full
    /// pipe queues (bus latency not included).
    pub cycles: u64,
    /// Loads that went to the bus.
    pub bus_loads: u64,
    /// Stores that went to the bus.
    pub bus_stores: u64,
    /// The block's time: the later of the scalar unit's `cycles` and the completion of
    /// everything issued to the pipes.
    pub block_cycles: u64,
    /// Of `cycles`, those the scalar unit spent waiting (`wait_flag` to `S`,
    /// `pipe_barrier(ALL)`, full queues).
    pub stall_cycles: u64,
    /// Busy cycles per pipe (the scalar entry is `cycles - stall_cycles`).
    pub pipe_busy: PipeCycles,
    /// NPU extension instructions executed.
    pub npu_instructions: u64,
    /// Bytes the data movers read from global memory.
    pub gm_read_bytes: u64,
    /// Bytes the data movers wrote to global memory.
    pub gm_write_bytes: u64,
}

/// The register file is 64 entries so a masked index never needs a bounds check; entry 32 is
/// the sink for writes to `x0`.
const XREGS: usize = 64;

/// One AI core's scalar unit. Reusable: each [`Core::run`] starts from a clean state.
///
/// ```
/// use npusim_device::abi;
/// use npusim_device::core::{Core, CoreConfig, FlatBus, KernelArg, NpuCsrs, Program};
///
/// // addw a0, a0, a1; ret
/// let text = [0x00b5_053bu32, 0x0000_8067].map(u32::to_le_bytes).concat();
/// let program = Program::decode(abi::CODE_BASE, &text);
/// let mut core = Core::new(CoreConfig::default());
/// let mut bus = FlatBus::new(abi::HEAP_BASE, 0);
/// let args = [KernelArg::i32(40), KernelArg::i32(2)];
/// let stats = core
///     .run(&program, abi::CODE_BASE, &args, NpuCsrs::default(), &mut bus, 1000)
///     .unwrap();
/// assert_eq!(core.x(10), 42);
/// assert_eq!(stats.instructions, 2);
/// ```
pub struct Core {
    latencies: Latencies,
    op_costs: [u32; 256],
    test_mode: Option<TestMode>,
    x: [u64; XREGS],
    /// FP registers; single-precision values are NaN-boxed.
    f: [u64; 32],
    fflags: u8,
    frm: u8,
    pc: u64,
    instret: u64,
    cycles: u64,
    bus_loads: u64,
    bus_stores: u64,
    csrs: NpuCsrs,
    /// The core-local window at `abi::LOCAL_BASE`.
    local: Box<[u8]>,
    /// Test mode: 4096 scratch CSRs; empty otherwise (so every lookup misses).
    test_csrs: Vec<u64>,
    output: Vec<String>,
    /// The NPU extension: local buffers, pipes, in-flight instructions.
    npu: npu::Npu,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The registers and local memory are too large to be useful in a debug line.
        f.debug_struct("Core")
            .field("pc", &format_args!("{:#x}", self.pc))
            .field("stats", &self.stats())
            .field("test_mode", &self.test_mode)
            .finish_non_exhaustive()
    }
}

impl Core {
    /// A core in its reset state.
    pub fn new(config: CoreConfig) -> Core {
        // The stack window must not shadow the local buffers above it.
        let local_size = config
            .local_size
            .min((abi::UB_BASE - abi::LOCAL_BASE) as usize)
            & !15;
        Core {
            op_costs: config.latencies.per_op(),
            latencies: config.latencies,
            test_mode: config.test_mode,
            x: [0; XREGS],
            f: [0; 32],
            fflags: 0,
            frm: 0,
            pc: 0,
            instret: 0,
            cycles: 0,
            bus_loads: 0,
            bus_stores: 0,
            csrs: NpuCsrs::default(),
            local: vec![0; local_size].into_boxed_slice(),
            test_csrs: if config.test_mode.is_some() {
                vec![0; 4096]
            } else {
                Vec::new()
            },
            output: Vec::new(),
            npu: npu::Npu::new(&config.npu),
        }
    }

    /// Runs one block: resets the core, sets up the call of `entry` with `args` (LP64F) and
    /// `ra = abi::EXIT_PC`, and executes at most `budget` instructions. `Ok` when the entry
    /// function returns (or stops at a `sync_all`: [`Core::start`] and [`Core::execute`] tell
    /// the two apart); [`Core::stats`] and [`Core::output`] stay readable after a trap.
    pub fn run<B: Bus>(
        &mut self,
        program: &Program,
        entry_pc: u64,
        args: &[KernelArg],
        csrs: NpuCsrs,
        bus: &mut B,
        budget: u64,
    ) -> Result<RunStats, Trap> {
        self.start(entry_pc, args, csrs)?;
        self.execute(program, bus, budget)?;
        Ok(self.stats())
    }

    /// Clears registers, counters, output and the local memory, and installs the launch
    /// registers. `sp` points at the top of the local memory.
    pub fn reset(&mut self, csrs: NpuCsrs) {
        self.x = [0; XREGS];
        self.f = [0; 32];
        self.fflags = 0;
        self.frm = 0;
        self.pc = 0;
        self.instret = 0;
        self.cycles = 0;
        self.bus_loads = 0;
        self.bus_stores = 0;
        self.csrs = csrs;
        self.local.fill(0);
        self.test_csrs.fill(0);
        self.output.clear();
        self.npu.reset();
        self.x[2] = self.stack_top();
    }

    /// Places `args` per LP64F: registers, then stack slots below the current `sp` (which
    /// moves down, staying 16-byte aligned). Fails with a store page fault (attributed to the
    /// current pc) if the stack arguments do not fit in local memory.
    pub fn set_args(&mut self, args: &[KernelArg]) -> Result<(), Trap> {
        let pc = self.pc;
        let p = abi_args::place(args);
        for (i, v) in p.int_regs.iter().enumerate() {
            self.x[10 + i] = *v;
        }
        for (i, v) in p.float_regs.iter().enumerate() {
            self.f[10 + i] = *v;
        }
        if !p.stack.is_empty() {
            let bytes = (p.stack.len() as u64 * 8 + 15) & !15;
            let sp = self.x[2].wrapping_sub(bytes) & !15;
            let off = sp.wrapping_sub(abi::LOCAL_BASE);
            let fits = sp >= abi::LOCAL_BASE
                && off
                    .checked_add(p.stack.len() as u64 * 8)
                    .is_some_and(|end| end <= self.local.len() as u64);
            if !fits {
                return Err(Trap::StorePageFault {
                    pc,
                    addr: sp,
                    fault: MemFault::unmapped(sp),
                });
            }
            for (i, v) in p.stack.iter().enumerate() {
                let o = off as usize + i * 8;
                self.local[o..o + 8].copy_from_slice(&v.to_le_bytes());
            }
            self.x[2] = sp;
        }
        Ok(())
    }

    /// Sets up a block's run without executing it: resets the core, places the call of
    /// `entry` with `args` (LP64F) and `ra = abi::EXIT_PC`. [`Core::run`] is this and
    /// [`Core::execute`].
    pub fn start(&mut self, entry_pc: u64, args: &[KernelArg], csrs: NpuCsrs) -> Result<(), Trap> {
        self.reset(csrs);
        self.pc = entry_pc;
        self.set_args(args)?;
        self.x[1] = abi::EXIT_PC;
        Ok(())
    }

    /// Moves the block's clock on to `cycle` (when the last block of its launch reached the
    /// `sync_all` it stopped at, plus the barrier's cost); the wait counts as stall. An
    /// earlier cycle changes nothing.
    pub fn resume_at(&mut self, cycle: u64) {
        if cycle > self.cycles {
            self.npu.stall_cycles += cycle - self.cycles;
            self.cycles = cycle;
        }
    }

    /// The cross-core flag sets the block made since the last call, in program order.
    pub fn take_cross_sets(&mut self) -> Vec<npu::CrossSet> {
        std::mem::take(&mut self.npu.cross_sets)
    }

    /// Executes from the current pc and state (no reset) for at most `budget` instructions.
    /// The lower-level entry under [`Core::run`], used by tests and the conformance runner.
    /// When the run ends without a trap, every instruction still in flight on the pipes
    /// completes (its writes land) before this returns; after a trap they stay pending.
    pub fn execute<B: Bus>(
        &mut self,
        program: &Program,
        bus: &mut B,
        budget: u64,
    ) -> Result<Exit, Trap> {
        let exit = self.exec(program, bus, budget)?;
        self.npu.advance(u64::MAX, bus)?;
        self.npu.footprint.normalize();
        Ok(exit)
    }

    /// The counters since the last reset.
    pub fn stats(&self) -> RunStats {
        let mut pipe_busy = self.npu.pipes.busy();
        pipe_busy.scalar = self.cycles - self.npu.stall_cycles;
        RunStats {
            instructions: self.instret,
            cycles: self.cycles,
            bus_loads: self.bus_loads,
            bus_stores: self.bus_stores,
            block_cycles: self.cycles.max(self.npu.pipes.finish_time()),
            stall_cycles: self.npu.stall_cycles,
            pipe_busy,
            npu_instructions: self.npu.instructions,
            gm_read_bytes: self.npu.gm_read_bytes,
            gm_write_bytes: self.npu.gm_write_bytes,
        }
    }

    /// The global memory the data movers read and wrote since the last reset (normalized
    /// when a run ends without a trap).
    pub fn footprint(&self) -> &Footprint {
        &self.npu.footprint
    }

    /// The configured size of a local buffer, in bytes.
    pub fn buffer_size(&self, buffer: Buffer) -> usize {
        self.npu.buffers.size(buffer)
    }

    /// A local buffer's contents (its configured size). Writes still in flight are not in
    /// it yet.
    pub fn buffer(&self, buffer: Buffer) -> &[u8] {
        &self.npu.buffers.bytes(buffer)[..self.npu.buffers.size(buffer)]
    }

    /// A local buffer, writable (for launchers and tests that stage data there).
    pub fn buffer_mut(&mut self, buffer: Buffer) -> &mut [u8] {
        let size = self.npu.buffers.size(buffer);
        &mut self.npu.buffers.bytes_mut(buffer)[..size]
    }

    /// What the block printed through the `ecall` services, one entry per call.
    pub fn output(&self) -> &[String] {
        &self.output
    }

    /// Takes the printed output, leaving it empty.
    pub fn take_output(&mut self) -> Vec<String> {
        std::mem::take(&mut self.output)
    }

    /// The address just above the local memory, 16-byte aligned: the initial `sp`.
    pub fn stack_top(&self) -> u64 {
        abi::LOCAL_BASE + self.local.len() as u64
    }

    /// Integer register `i` (0..32); `x0` is always 0.
    pub fn x(&self, i: usize) -> u64 {
        if i < 32 { self.x[i] } else { 0 }
    }

    /// Sets integer register `i`; writes to `x0` and out-of-range indices are ignored.
    pub fn set_x(&mut self, i: usize, v: u64) {
        if (1..32).contains(&i) {
            self.x[i] = v;
        }
    }

    /// The raw 64-bit content of FP register `i` (single-precision values are NaN-boxed).
    pub fn f_bits(&self, i: usize) -> u64 {
        self.f.get(i).copied().unwrap_or(0)
    }

    /// Sets the raw 64-bit content of FP register `i`.
    pub fn set_f_bits(&mut self, i: usize, v: u64) {
        if let Some(r) = self.f.get_mut(i) {
            *r = v;
        }
    }

    /// FP register `i` as an `f32` (a register that is not properly NaN-boxed reads as NaN).
    pub fn f32(&self, i: usize) -> f32 {
        let v = self.f_bits(i);
        if v >> 32 == 0xffff_ffff {
            f32::from_bits(v as u32)
        } else {
            f32::NAN
        }
    }

    /// Sets FP register `i` to the NaN-boxed `v`.
    pub fn set_f32(&mut self, i: usize, v: f32) {
        self.set_f_bits(i, 0xffff_ffff_0000_0000 | v.to_bits() as u64);
    }

    /// The floating-point control and status register (`frm << 5 | fflags`).
    pub fn fcsr(&self) -> u32 {
        ((self.frm as u32) << 5) | self.fflags as u32
    }

    /// Sets `fcsr` (upper bits ignored).
    pub fn set_fcsr(&mut self, v: u32) {
        self.fflags = (v & 0x1f) as u8;
        self.frm = ((v >> 5) & 7) as u8;
    }

    /// The program counter.
    pub fn pc(&self) -> u64 {
        self.pc
    }

    /// Sets the program counter.
    pub fn set_pc(&mut self, pc: u64) {
        self.pc = pc;
    }

    /// The core-local memory (at `abi::LOCAL_BASE`).
    pub fn local(&self) -> &[u8] {
        &self.local
    }

    /// The core-local memory, writable (for launchers that stage data there).
    pub fn local_mut(&mut self) -> &mut [u8] {
        &mut self.local
    }
}
