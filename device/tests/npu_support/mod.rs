//! Shared by the NPU extension's integration tests: a global-memory bus that can also serve a
//! linked kernel image, a tiny assembler layer over `core_asm` for extension instructions, and
//! f32 / f16 helpers.
#![allow(dead_code, clippy::too_many_arguments)]

use npusim_device::abi;
use npusim_device::core::npu::Pipe;
use npusim_device::core::npu::isa::encode;
use npusim_device::core::npu::isa::{CopyDir, CopyMode, SyncOp, VecOp};
use npusim_device::core::{Bus, Core, CoreConfig, MemFault, NpuCsrs, Program, RunStats, Trap};

#[path = "../core_asm/mod.rs"]
pub mod core_asm;

#[allow(unused_imports)]
pub use core_asm::{A0, A1, A2, A3, A7, RA, SP, T0, T1, T2, ZERO, li};

pub const A4: u32 = 14;
pub const A5: u32 = 15;
pub const A6: u32 = 16;
pub const S2: u32 = 18;
pub const S3: u32 = 19;
pub const T3: u32 = 28;
pub const T4: u32 = 29;

/// Global memory at `abi::HEAP_BASE`, plus (optionally) a read-only kernel image at
/// `abi::CODE_BASE` for the kernel's constants.
pub struct Gm {
    pub mem: Vec<u8>,
    pub image: Vec<u8>,
}

impl Gm {
    pub fn new(len: usize) -> Gm {
        Gm {
            mem: vec![0; len],
            image: Vec::new(),
        }
    }

    fn range(&self, va: u64, len: usize) -> Option<(bool, std::ops::Range<usize>)> {
        if let Some(off) = va.checked_sub(abi::HEAP_BASE) {
            let off = usize::try_from(off).ok()?;
            let end = off.checked_add(len)?;
            return (end <= self.mem.len()).then_some((true, off..end));
        }
        let off = usize::try_from(va.checked_sub(abi::CODE_BASE)?).ok()?;
        let end = off.checked_add(len)?;
        (end <= self.image.len()).then_some((false, off..end))
    }

    pub fn write_bytes(&mut self, addr: u64, data: &[u8]) {
        let o = (addr - abi::HEAP_BASE) as usize;
        self.mem[o..o + data.len()].copy_from_slice(data);
    }

    pub fn write_f32(&mut self, addr: u64, v: &[f32]) {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.write_bytes(addr, &bytes);
    }

    pub fn write_u16(&mut self, addr: u64, v: &[u16]) {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.write_bytes(addr, &bytes);
    }

    pub fn read_bytes(&self, addr: u64, n: usize) -> Vec<u8> {
        let o = (addr - abi::HEAP_BASE) as usize;
        self.mem[o..o + n].to_vec()
    }

    pub fn read_f32(&self, addr: u64, n: usize) -> Vec<f32> {
        let o = (addr - abi::HEAP_BASE) as usize;
        self.mem[o..o + 4 * n]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

impl Bus for Gm {
    fn load(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        let (heap, r) = self.range(va, buf.len()).ok_or(MemFault::unmapped(va))?;
        buf.copy_from_slice(if heap { &self.mem[r] } else { &self.image[r] });
        Ok(())
    }

    fn store(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault> {
        match self.range(va, data.len()) {
            Some((true, r)) => {
                self.mem[r].copy_from_slice(data);
                Ok(())
            }
            _ => Err(MemFault::unmapped(va)),
        }
    }
}

/// A core and its global memory.
pub struct Machine {
    pub core: Core,
    pub gm: Gm,
}

impl Machine {
    pub fn new() -> Machine {
        Machine::with_config(CoreConfig::default())
    }

    pub fn with_config(cfg: CoreConfig) -> Machine {
        Machine {
            core: Core::new(cfg),
            gm: Gm::new(1 << 20),
        }
    }

    /// Runs `words` (plus a `ret`) as a kernel.
    pub fn run(&mut self, words: &[u32]) -> Result<RunStats, Trap> {
        let mut text = words.to_vec();
        text.push(core_asm::RET);
        let program = Program::decode(abi::CODE_BASE, &core_asm::bytes(&text));
        self.core.run(
            &program,
            abi::CODE_BASE,
            &[],
            NpuCsrs::default(),
            &mut self.gm,
            10_000_000,
        )
    }

    /// The address of word `i` of a program run with [`Machine::run`].
    pub fn pc_of(i: usize) -> u64 {
        abi::CODE_BASE + 4 * i as u64
    }
}

/// A little assembler for test programs: `li` into registers, then extension instructions.
#[derive(Default)]
pub struct Asm {
    pub words: Vec<u32>,
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }
    pub fn li(&mut self, rd: u32, v: u64) -> &mut Self {
        self.words.extend(li(rd, v));
        self
    }
    pub fn word(&mut self, w: u32) -> &mut Self {
        self.words.push(w);
        self
    }
    /// `op dst, a, b, n` with the operands loaded into a0..a3 first.
    pub fn vec(&mut self, op: VecOp, dst: u64, a: u64, b: u64, n: u64) -> &mut Self {
        self.li(A0, dst).li(A1, a).li(A2, b).li(A3, n);
        self.word(encode::vector(op, A0, A1, A2, A3))
    }
    /// A 2-D copy with operands in a0..a3.
    pub fn copy2d(
        &mut self,
        dir: CopyDir,
        dst: u64,
        src: u64,
        rows: u32,
        row_bytes: u32,
        src_stride: u32,
        dst_stride: u32,
    ) -> &mut Self {
        self.copy2d_mode(
            dir,
            CopyMode::Plain,
            dst,
            src,
            rows,
            row_bytes,
            src_stride,
            dst_stride,
        )
    }
    /// A 2-D copy in a [`CopyMode`], operands in a0..a3.
    pub fn copy2d_mode(
        &mut self,
        dir: CopyDir,
        mode: CopyMode,
        dst: u64,
        src: u64,
        rows: u32,
        row_bytes: u32,
        src_stride: u32,
        dst_stride: u32,
    ) -> &mut Self {
        self.li(A0, dst).li(A1, src);
        self.li(A2, encode::shape(rows, row_bytes));
        self.li(A3, encode::strides(src_stride, dst_stride));
        self.word(encode::copy_mode(dir, mode, A0, A1, A2, A3))
    }
    /// A contiguous copy of `bytes`.
    pub fn copy(&mut self, dir: CopyDir, dst: u64, src: u64, bytes: u32) -> &mut Self {
        self.copy2d(dir, dst, src, 1, bytes, bytes, bytes)
    }
    pub fn mmad(
        &mut self,
        acc: bool,
        f32_in: bool,
        c: u64,
        a: u64,
        b: u64,
        m: u16,
        n: u16,
        k: u16,
    ) -> &mut Self {
        self.li(A0, c)
            .li(A1, a)
            .li(A2, b)
            .li(A3, encode::mnk(m, n, k));
        self.word(encode::mmad(acc, f32_in, A0, A1, A2, A3))
    }
    pub fn set_flag(&mut self, src: Pipe, dst: Pipe, ev: u8) -> &mut Self {
        self.li(T0, encode::flag(src, dst, ev));
        self.word(encode::sync(SyncOp::SetFlag, T0))
    }
    pub fn wait_flag(&mut self, src: Pipe, dst: Pipe, ev: u8) -> &mut Self {
        self.li(T0, encode::flag(src, dst, ev));
        self.word(encode::sync(SyncOp::WaitFlag, T0))
    }
    /// set + wait: `dst` waits for everything `src` has been given so far.
    pub fn sync(&mut self, src: Pipe, dst: Pipe) -> &mut Self {
        self.set_flag(src, dst, 0).wait_flag(src, dst, 0)
    }
    pub fn barrier(&mut self, pipe: u64) -> &mut Self {
        self.li(T0, pipe);
        self.word(encode::sync(SyncOp::Barrier, T0))
    }
    /// `sync_all(blocks)`.
    pub fn sync_all(&mut self, blocks: u64) -> &mut Self {
        self.li(T0, blocks);
        self.word(encode::sync(SyncOp::SyncAll, T0))
    }
    /// `lw rd, 0(addr)` via t1.
    pub fn load_w(&mut self, rd: u32, addr: u64) -> &mut Self {
        self.li(T1, addr);
        self.word(core_asm::load("lw", rd, T1, 0))
    }
    pub fn store_w(&mut self, addr: u64, rs: u32) -> &mut Self {
        self.li(T1, addr);
        self.word(core_asm::store("sw", T1, rs, 0))
    }
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A deterministic pseudo-random generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [lo, hi).
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32(lo, hi)).collect()
    }
}

// ---- Kernels from examples/kernels/ext_*.bin ------------------------------------------------

use npusim_device::core::npu::launch::{LaunchEstimate, LaunchModel};
use npusim_device::core::{Footprint, KernelArg};

/// A linked kernel image (`scripts/build-ext-kernels.sh`) and its symbols.
pub struct Kernel {
    pub program: Program,
    pub image: Vec<u8>,
    pub syms: Vec<(String, u64)>,
}

impl Kernel {
    /// Loads `examples/kernels/{name}.bin` and `.syms`.
    pub fn load(name: &str) -> Kernel {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kernels");
        let image = std::fs::read(dir.join(format!("{name}.bin"))).expect("kernel image");
        let syms = std::fs::read_to_string(dir.join(format!("{name}.syms")))
            .expect("kernel symbols")
            .lines()
            .filter_map(|l| {
                let (n, a) = l.split_once(' ')?;
                Some((
                    n.to_string(),
                    u64::from_str_radix(a.trim_start_matches("0x"), 16).ok()?,
                ))
            })
            .collect();
        Kernel {
            program: Program::decode(abi::CODE_BASE, &image),
            image,
            syms,
        }
    }

    pub fn entry(&self, sym: &str) -> u64 {
        self.syms
            .iter()
            .find(|(n, _)| n == sym)
            .unwrap_or_else(|| panic!("no symbol {sym}"))
            .1
    }
}

/// Where the tiling words go in global memory; data starts at [`DATA`].
pub const TILING: u64 = abi::HEAP_BASE;
/// First address for kernel data.
pub const DATA: u64 = abi::HEAP_BASE + 0x1000;

/// One block's results.
pub struct BlockRun {
    pub stats: RunStats,
    pub footprint: Footprint,
}

/// A whole launch: every block, and the launch-level estimate.
pub struct LaunchRun {
    pub blocks: Vec<BlockRun>,
    pub estimate: LaunchEstimate,
    pub wall: std::time::Duration,
}

/// Runs blocks `0..block_dim` of `sym` one after the other on `core` (as the engine would,
/// each on a clean core), with the tiling words at [`TILING`].
pub fn launch(
    core: &mut Core,
    gm: &mut Gm,
    kernel: &Kernel,
    sym: &str,
    args: &[KernelArg],
    tiling: &[u8],
    block_dim: u32,
    model: &LaunchModel,
) -> Result<LaunchRun, Trap> {
    gm.image = kernel.image.clone();
    gm.write_bytes(TILING, tiling);
    let entry = kernel.entry(sym);
    let start = std::time::Instant::now();
    let mut blocks = Vec::new();
    for b in 0..block_dim {
        let csrs = NpuCsrs {
            block_idx: b as u64,
            block_dim: block_dim as u64,
            core_id: (b % model.cores) as u64,
            tiling: if tiling.is_empty() { 0 } else { TILING },
            ..NpuCsrs::default()
        };
        let stats = core.run(&kernel.program, entry, args, csrs, gm, 1 << 40)?;
        blocks.push(BlockRun {
            stats,
            footprint: core.footprint().clone(),
        });
    }
    let wall = start.elapsed();
    let estimate = model.estimate(blocks.iter().map(|b| (&b.stats, &b.footprint)));
    Ok(LaunchRun {
        blocks,
        estimate,
        wall,
    })
}
