//! What the loader's tests share: the committed kernel objects, where the runtime links them,
//! and raw ELF64 editing to make broken files from good ones.

use std::path::{Path, PathBuf};

use super::reloc::{read_le, write_le};
use super::{ElfError, LinkedImage, LinkedSymbol, link, parse};

// npusim_device::abi::CODE_BASE and MODULE_DATA_BASE: where the runtime puts binaries.
pub(super) const TEXT: u64 = 0x4000_0000;
pub(super) const DATA: u64 = 0x5000_0000;

/// Every committed kernel object and the global functions it must export.
pub(super) const KERNELS: &[(&str, &[&str])] = &[
    ("vector_add.o", &["vadd_f32"]),
    ("saxpy.o", &["saxpy"]),
    ("reduce.o", &["reduce_sum_f32", "reduce_final_f32"]),
    ("sort.o", &["sort_i32", "sort_stats", "classify_i32"]),
    ("sort_medlow.o", &["sort_i32", "sort_stats", "classify_i32"]),
    (
        "faults.o",
        &["null_deref", "div_zero", "spin_forever", "call_abort"],
    ),
    ("reloc_probe.o", &["reloc_probe", "probe_call_target"]),
];

pub(super) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(super) fn kernel(name: &str) -> Vec<u8> {
    let path = repo().join("examples/kernels").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(super) fn linked(name: &str) -> LinkedImage {
    let parsed = parse(&kernel(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    link(&parsed, TEXT, DATA).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub(super) fn symbol<'a>(image: &'a LinkedImage, name: &str) -> &'a LinkedSymbol {
    image
        .symbols
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

pub(super) fn data_at(image: &LinkedImage, address: u64, width: usize) -> u64 {
    let at = (address - image.data_base) as usize;
    read_le(&image.data, at, width).expect("address inside data")
}

// -- Raw ELF64 editing, to make broken files from good ones. ------------------------------

pub(super) fn get(bytes: &[u8], at: usize, width: usize) -> u64 {
    read_le(bytes, at, width).unwrap()
}

pub(super) fn put(bytes: &mut [u8], at: usize, width: usize, value: u64) {
    write_le(bytes, at, width, value).unwrap();
}

/// The file offset of section header `index`.
pub(super) fn shdr(bytes: &[u8], index: usize) -> usize {
    get(bytes, 0x28, 8) as usize + index * 64
}

/// The index of the section called `name`.
pub(super) fn section(bytes: &[u8], name: &str) -> usize {
    let count = get(bytes, 0x3c, 2) as usize;
    let strtab = shdr(bytes, get(bytes, 0x3e, 2) as usize);
    let strings = get(bytes, strtab + 0x18, 8) as usize;
    (0..count)
        .find(|&i| {
            let at = strings + get(bytes, shdr(bytes, i), 4) as usize;
            let end = bytes[at..].iter().position(|&b| b == 0).unwrap();
            &bytes[at..at + end] == name.as_bytes()
        })
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// The file offset of entry `entry` of section `name` (entries of `size` bytes).
pub(super) fn entry(bytes: &[u8], name: &str, entry: usize, size: usize) -> usize {
    get(bytes, shdr(bytes, section(bytes, name)) + 0x18, 8) as usize + entry * size
}

/// The file offset of the symbol table entry of the symbol called `name`.
pub(super) fn sym(bytes: &[u8], name: &str) -> usize {
    let symtab = shdr(bytes, section(bytes, ".symtab"));
    let strings = get(bytes, shdr(bytes, section(bytes, ".strtab")) + 0x18, 8) as usize;
    let (offset, size) = (get(bytes, symtab + 0x18, 8), get(bytes, symtab + 0x20, 8));
    (0..size as usize / 24)
        .map(|i| offset as usize + i * 24)
        .find(|&at| {
            let name_at = strings + get(bytes, at, 4) as usize;
            bytes[name_at..].starts_with(name.as_bytes()) && bytes[name_at + name.len()] == 0
        })
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

/// The addresses that `auipc`/`lui` + I- or S-type pairs in `text` compute.
pub(super) fn computed_addresses(image: &LinkedImage) -> Vec<u64> {
    let words: Vec<u32> = image
        .text
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    let mut found = Vec::new();
    for (i, pair) in words.windows(2).enumerate() {
        let (hi, lo) = (pair[0], pair[1]);
        let rd = (hi >> 7) & 31;
        let upper = i64::from((hi & 0xffff_f000) as i32);
        let base = match hi & 0x7f {
            0x17 => (image.text_base + 4 * i as u64) as i64 + upper, // auipc
            0x37 => upper,                                           // lui
            _ => continue,
        };
        if (lo >> 15) & 31 != rd {
            continue;
        }
        let low = match lo & 0x7f {
            0x13 | 0x03 | 0x07 | 0x67 => i64::from((lo as i32) >> 20),
            0x23 | 0x27 => i64::from((((lo as i32) >> 25) << 5) | ((lo >> 7) & 31) as i32),
            _ => continue,
        };
        found.push((base + low) as u64);
    }
    found
}

pub(super) fn parse_err(bytes: &[u8]) -> ElfError {
    parse(bytes).expect_err("the file should be rejected")
}
