//! Measures the scalar core's interpreter speed: runs the compiled `scalar_loop` kernel from
//! `device/tests/data` and prints millions of instructions per wall-clock second.
//!
//! Usage: `cargo run -p npusim-device --release --example core_mips -- [ITERATIONS] [REPEATS]`
//! Prints one line per repeat and a final `median_mips=… instructions=…` line
//! (`scripts/bench-core-vs-qemu.sh` parses it).

use std::time::Instant;

use npusim_device::abi;
use npusim_device::core::{Core, CoreConfig, FlatBus, KernelArg, NpuCsrs, Program};

const IMAGE: &[u8] = include_bytes!("../tests/data/kernels.bin");
const SYMS: &str = include_str!("../tests/data/kernels.syms");

fn entry(name: &str) -> u64 {
    SYMS.lines()
        .find_map(|l| {
            let (n, a) = l.split_once(' ')?;
            (n == name).then(|| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())?
        })
        .expect("symbol in kernels.syms")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iterations: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000_000);
    let repeats: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);

    let program = Program::decode(abi::CODE_BASE, IMAGE);
    let mut core = Core::new(CoreConfig::default());
    let mut bus = FlatBus::new(abi::HEAP_BASE, 4096);
    let pc = entry("scalar_loop");

    let mut mips = Vec::new();
    let mut instructions = 0;
    for r in 0..repeats {
        let t = Instant::now();
        let stats = core
            .run(
                &program,
                pc,
                &[KernelArg::Int(iterations)],
                NpuCsrs::default(),
                &mut bus,
                u64::MAX,
            )
            .expect("scalar_loop runs");
        let secs = t.elapsed().as_secs_f64();
        instructions = stats.instructions;
        let m = stats.instructions as f64 / secs / 1e6;
        println!(
            "repeat {r}: {} instructions, {} cycles, {secs:.3} s, {m:.0} MIPS (result {:#x})",
            stats.instructions,
            stats.cycles,
            core.x(10)
        );
        mips.push(m);
    }
    mips.sort_by(f64::total_cmp);
    println!(
        "median_mips={:.1} instructions={instructions}",
        mips[mips.len() / 2]
    );
}
