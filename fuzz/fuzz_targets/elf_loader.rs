//! Fuzz target for the kernel-binary loader: whatever the bytes, `parse` and `link` return
//! `Ok` or `Err` — never panic, never allocate beyond the image cap — and what they return is
//! consistent (region sizes, symbol addresses inside their regions).
//!
//! With the default `libfuzzer` feature this is a cargo-fuzz target. Without it (stable Rust)
//! it is a plain program that mutates the seed corpus with a seeded xorshift generator:
//!
//! ```text
//! cargo run --release --no-default-features -- [ITERATIONS] [SEED] [CORPUS_DIR]
//! ```
//!
//! A panicking input is written to `artifacts/elf_loader/` in both modes.
#![cfg_attr(feature = "libfuzzer", no_main)]

// The loader is pure (std + object), so the target compiles its source directly instead of
// depending on npusim-engine, which would instrument all of bevy_ecs for nothing.
#[allow(dead_code)]
#[path = "../../engine/src/loader/elf/mod.rs"]
mod elf;

/// Where the runtime places binaries (npusim_device::abi::CODE_BASE / MODULE_DATA_BASE).
const TEXT_BASE: u64 = 0x4000_0000;
const DATA_BASE: u64 = 0x5000_0000;

/// One input: parse, link at the runtime's bases (or the executable's own), check invariants.
fn check(bytes: &[u8]) {
    let Ok(parsed) = elf::parse(bytes) else {
        return;
    };
    let (text_size, data_size) = (parsed.text_size(), parsed.data_size());
    assert!(text_size > 0);
    assert!(text_size + data_size <= elf::MAX_IMAGE_SIZE);
    assert!(parsed.text_align().is_power_of_two() && parsed.text_align() >= 4);
    assert!(parsed.data_align().is_power_of_two());
    for symbol in parsed.symbols() {
        let size = match symbol.region {
            elf::Region::Text => text_size,
            elf::Region::Data => data_size,
        };
        assert!(symbol.offset <= size, "{symbol:?} outside its region");
    }
    let (text_base, data_base) = parsed.link_address().unwrap_or((TEXT_BASE, DATA_BASE));
    if let Ok(image) = elf::link(&parsed, text_base, data_base) {
        assert_eq!(image.text.len() as u64, text_size);
        assert_eq!(image.data.len() as u64, data_size);
        for (name, address) in &image.functions {
            assert!(
                (text_base..=text_base + text_size).contains(address),
                "{name} at {address:#x} outside text"
            );
        }
    }
    // Linking again at other bases must not panic either (it may fail: out of range).
    if parsed.link_address().is_none() {
        let _ = elf::link(&parsed, TEXT_BASE + 0x0fff_f000, DATA_BASE + 0x1fff_0000);
        let _ = elf::link(&parsed, 0x8000_0000, 0xffff_ffff_0000_0000);
    }
}

#[cfg(feature = "libfuzzer")]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check(bytes));

#[cfg(not(feature = "libfuzzer"))]
fn main() {
    standalone::run();
}

/// The stable-Rust driver: a deterministic mutation loop over the seed corpus.
#[cfg(not(feature = "libfuzzer"))]
mod standalone {
    use std::path::{Path, PathBuf};
    use std::time::Instant;

    /// xorshift64*: tiny, seeded, and the same on every machine.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            if n == 0 {
                0
            } else {
                (self.next() % n as u64) as usize
            }
        }
    }

    /// Values that sit on the boundaries the loader checks.
    const INTERESTING: [u64; 16] = [
        0,
        1,
        2,
        3,
        4,
        8,
        0x7f,
        0x80,
        0xff,
        0xffff,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        1 << 40,
        u64::MAX - 7,
        u64::MAX,
    ];

    fn read(bytes: &[u8], at: usize, width: usize) -> u64 {
        bytes.get(at..at + width).map_or(0, |b| {
            b.iter().rev().fold(0, |acc, &x| (acc << 8) | u64::from(x))
        })
    }

    /// An offset biased towards the structures the loader reads: the ELF header, the section
    /// header table, and the tables it points to.
    fn pick_offset(rng: &mut Rng, bytes: &[u8]) -> usize {
        let len = bytes.len().max(1);
        match rng.below(4) {
            0 => rng.below(64.min(len)),
            1 => {
                let shoff = read(bytes, 0x28, 8) as usize;
                let shnum = read(bytes, 0x3c, 2) as usize;
                if shoff < len && shnum > 0 {
                    // A field of a section header: name, type, flags, offset, size, ...
                    (shoff + 64 * rng.below(shnum) + 8 * rng.below(8)).min(len - 1)
                } else {
                    rng.below(len)
                }
            }
            _ => rng.below(len),
        }
    }

    fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[Vec<u8>]) {
        // Mostly one or two edits: more of them and almost nothing parses any more.
        for _ in 0..1 + rng.below(2) + rng.below(2) * rng.below(4) {
            if input.is_empty() {
                input.push(rng.next() as u8);
            }
            let at = pick_offset(rng, input);
            match rng.below(10) {
                0 | 1 => input[at] ^= 1 << rng.below(8),
                2 => input[at] = rng.next() as u8,
                3..=5 => {
                    let width = [1, 2, 4, 8][rng.below(4)];
                    let value = if rng.below(2) == 0 {
                        INTERESTING[rng.below(INTERESTING.len())]
                    } else {
                        // Nudge the current value: sizes and offsets one off.
                        read(input, at, width)
                            .wrapping_add(rng.next() % 9)
                            .wrapping_sub(4)
                    };
                    for i in 0..width {
                        if let Some(byte) = input.get_mut(at + i) {
                            *byte = (value >> (8 * i)) as u8;
                        }
                    }
                }
                6 => input.truncate(at),
                7 => {
                    // Copy a run of bytes over another place (duplicates table entries).
                    let from = rng.below(input.len());
                    let len = rng.below(64).min(input.len() - from).min(input.len() - at);
                    let run = input[from..from + len].to_vec();
                    input[at..at + len].copy_from_slice(&run);
                }
                8 => {
                    let len = rng.below(32);
                    input.splice(at..at, (0..len).map(|_| rng.next() as u8));
                }
                _ => {
                    // Splice in the tail of another seed.
                    let other = &seeds[rng.below(seeds.len())];
                    let from = rng.below(other.len());
                    input.truncate(at);
                    input.extend_from_slice(&other[from..]);
                }
            }
        }
    }

    fn save_crash(input: &[u8], iteration: u64) -> PathBuf {
        let dir = Path::new("artifacts/elf_loader");
        std::fs::create_dir_all(dir).expect("create artifacts/elf_loader");
        let path = dir.join(format!("crash-standalone-{iteration}"));
        std::fs::write(&path, input).expect("write the crashing input");
        path
    }

    pub fn run() {
        let args: Vec<String> = std::env::args().collect();
        let iterations: u64 = args
            .get(1)
            .map_or(100_000, |a| a.parse().expect("ITERATIONS"));
        let seed: u64 = args.get(2).map_or(0x5eed, |a| a.parse().expect("SEED"));
        let dir = PathBuf::from(args.get(3).map_or("corpus/elf_loader", String::as_str));

        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("corpus entry").path())
            .collect();
        paths.sort(); // directory order is not deterministic
        let seeds: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        assert!(!seeds.is_empty(), "no seeds in {}", dir.display());

        // Quiet the default hook: a panic is reported below, with the input saved.
        std::panic::set_hook(Box::new(|_| {}));
        let mut rng = Rng(seed | 1);
        let (mut parsed, mut linked) = (0u64, 0u64);
        let start = Instant::now();
        for iteration in 0..iterations {
            let mut input = seeds[rng.below(seeds.len())].clone();
            mutate(&mut rng, &mut input, &seeds);
            let outcome = std::panic::catch_unwind(|| {
                super::check(&input);
                super::elf::parse(&input).ok().map(|p| {
                    p.link_address().is_some()
                        || super::elf::link(&p, super::TEXT_BASE, super::DATA_BASE).is_ok()
                })
            });
            match outcome {
                Ok(Some(true)) => {
                    parsed += 1;
                    linked += 1;
                }
                Ok(Some(false)) => parsed += 1,
                Ok(None) => {}
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("(no message)");
                    let path = save_crash(&input, iteration);
                    eprintln!("PANIC at iteration {iteration}: {message}");
                    eprintln!("input saved to {}", path.display());
                    std::process::exit(1);
                }
            }
        }
        println!(
            "{iterations} inputs from {} seeds (seed {seed}): {parsed} parsed, {linked} linked, \
             0 panics, {:.1}s",
            seeds.len(),
            start.elapsed().as_secs_f64()
        );
    }
}
