//! Parsing and linking RISC-V ELF kernel binaries for the NPU.
//!
//! Loading a binary takes two steps, because the runtime can only choose addresses once it
//! knows how much memory the binary needs:
//!
//! 1. [`parse`] validates the file and lays it out: every loaded section gets an offset in one
//!    of two regions, **text** (instruction memory, in the code window of
//!    `npusim_device::abi`) and **data** (`.rodata`, `.data`, `.sdata`, `.bss`, ... in the
//!    module-data window). It decodes every relocation and symbol, so a bad file fails here,
//!    before any memory is reserved. The result, [`ParsedBinary`], owns its bytes and no
//!    addresses.
//! 2. The runtime reserves [`ParsedBinary::text_size`] bytes aligned to
//!    [`ParsedBinary::text_align`] in the code window and [`ParsedBinary::data_size`] bytes
//!    aligned to [`ParsedBinary::data_align`] in the module-data window.
//! 3. [`link`] applies the relocations for those two base addresses and returns a
//!    [`LinkedImage`]: the final bytes of both regions and the address of every function.
//!
//! ```
//! use npusim_engine::loader::elf::{link, parse};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/kernels/vector_add.o");
//! let parsed = parse(&std::fs::read(path)?)?;
//! // The runtime reserves these in the code and module-data windows of the address space.
//! let (text_base, data_base) = (0x4000_0000, 0x5000_0000);
//! assert_eq!(text_base % parsed.text_align(), 0);
//! let image = link(&parsed, text_base, data_base)?;
//! assert_eq!(image.text.len() as u64, parsed.text_size());
//! assert_eq!(image.function("vadd_f32"), Some(text_base));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What is accepted
//!
//! ELF64, little-endian, `EM_RISCV`, with the single-float ABI (`-mabi=lp64f`), no compressed
//! instructions (`EF_RISCV_RVC`) and not RV64E. Two kinds:
//!
//! - **Relocatable objects** (`ET_REL`, what `clang -c` makes): the sections with `SHF_ALLOC`
//!   are loaded. Executable ones go to text in section order, each at its alignment; the others
//!   go to data: first those with contents in section order, then the `NOBITS` ones (`.bss`,
//!   `.sbss`), then common symbols. Sections without `SHF_ALLOC` (`.comment`, `.debug*`,
//!   `.riscv.attributes`, `.llvm_addrsig`, ...) and `.eh_frame` (nothing unwinds on the NPU) are
//!   not loaded, and relocations that patch them are not applied. Symbols must all be defined
//!   in the object: there is no libc and nothing else to link against; a weak undefined symbol
//!   resolves to address 0.
//! - **Executables** (`ET_EXEC`, e.g. from `ld.lld`): the `PT_LOAD` segments are loaded as
//!   linked; the executable ones form the text region and the others the data region. No
//!   relocation is applied, so the image must be loaded exactly at its link addresses:
//!   [`ParsedBinary::link_address`] says where, and [`link`] refuses any other base. Link such
//!   images into the code and module-data windows of `npusim_device::abi`; the runtime checks
//!   the windows when it reserves the memory.
//!
//! # Relocations
//!
//! Those that clang emits for `-mcmodel=medany` and `-mcmodel=medlow` without relaxation:
//! `R_RISCV_64`, `_32`, `_HI20`, `_LO12_I`, `_LO12_S`, `_PCREL_HI20`, `_PCREL_LO12_I`,
//! `_PCREL_LO12_S`, `_CALL`, `_CALL_PLT`, `_BRANCH`, `_JAL`, plus the data fixups `_ADD8/16/32/64`,
//! `_SUB6/8/16/32/64`, `_SET6/8/16/32` and `_32_PCREL`. `R_RISCV_RELAX` is ignored: the loader
//! never relaxes, and the unrelaxed instruction sequence is always valid. `R_RISCV_ALIGN` is
//! refused: it means the assembler left padding for the linker to trim, and trimming it is
//! relaxation; compile with `-mno-relax`. Every other type is an
//! [`ElfError::UnsupportedRelocation`].
//!
//! Nothing in a file can make the loader panic or allocate much more than the file itself
//! during [`parse`]; [`link`] allocates the two regions, whose total is capped at
//! [`MAX_IMAGE_SIZE`].
//!
//! # Stages
//!
//! Each stage has a file of its own, in the order a binary goes through them:
//!
//! 1. `header`: the identification bytes, the ELF header and the section header table, which
//!    a file must get right before its kind matters.
//! 2. `sections` for relocatable objects, `executable` for executables: the loaded sections
//!    or segments laid out in the two regions, and the symbols placed in them.
//! 3. `reloc`: the relocations, decoded from an object's `.rela` sections by [`parse`] and
//!    applied one by one by [`link`].
//! 4. `linker`: [`link`] copies the regions' bytes to their bases and has `reloc` patch them.
//!
//! Every stage fails with an [`ElfError`] (`error`). This file holds what the stages share:
//! the limits, the symbols, [`ParsedBinary`] and [`LinkedImage`].

mod error;
mod executable;
#[cfg(test)]
mod fixtures;
mod header;
mod linker;
mod reloc;
mod sections;

use std::fmt;

use object::LittleEndian as LE;
use object::elf;
use object::read::elf::FileHeader;

pub use error::ElfError;
pub use linker::link;
pub use reloc::reloc_name;

use reloc::Relocation;

/// The most text plus data one binary may occupy. The code window is 256 MiB, and a kernel
/// needing more is almost certainly a malformed file; refusing it early keeps a corrupt size
/// field from turning into a huge allocation.
pub const MAX_IMAGE_SIZE: u64 = 256 << 20;

/// The largest section alignment accepted. Page alignment (4 KiB) is the most a kernel has a
/// reason to ask for; 64 KiB leaves room and still keeps padding bounded.
pub const MAX_SECTION_ALIGN: u64 = 64 << 10;

/// Instructions are 4 bytes (no compressed ones), so text is never placed less aligned.
const INSTRUCTION_ALIGN: u64 = 4;

/// What kind of ELF file a binary came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryKind {
    /// A relocatable object (`ET_REL`): it can be linked at any suitably aligned address.
    Relocatable,
    /// A linked executable (`ET_EXEC`): it must be loaded at the addresses it was linked for.
    Executable,
}

/// One of the two memory regions a binary occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Region {
    /// Instructions, placed in the code (instruction-memory) window.
    Text,
    /// Constants, initialised and zeroed data, placed in the module-data window.
    Data,
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Region::Text => "text",
            Region::Data => "data",
        })
    }
}

/// What a symbol names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    /// A function (`STT_FUNC`): a kernel entry point or a helper.
    Function,
    /// A data object (`STT_OBJECT`): a global or static variable or constant.
    Object,
}

/// Who can see a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolBinding {
    /// Local to its file (`static` in C); listed for symbolising addresses only.
    Local,
    /// Global: a kernel entry point when it is a function.
    Global,
    /// Weak global.
    Weak,
}

/// A named function or object of a parsed binary, by its offset in its region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// The symbol's name.
    pub name: String,
    /// Function or object.
    pub kind: SymbolKind,
    /// Local, global or weak.
    pub binding: SymbolBinding,
    /// The region it lives in.
    pub region: Region,
    /// Its offset from the start of the region.
    pub offset: u64,
    /// Its size in bytes, as the compiler recorded it (0 when unknown).
    pub size: u64,
}

/// A named function or object of a linked image, at its final address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedSymbol {
    /// The symbol's name.
    pub name: String,
    /// Function or object.
    pub kind: SymbolKind,
    /// Local, global or weak.
    pub binding: SymbolBinding,
    /// Its device virtual address.
    pub address: u64,
    /// Its size in bytes (0 when unknown).
    pub size: u64,
}

/// A binary that passed validation and has been laid out, but not yet placed at addresses.
///
/// It owns copies of the bytes it needs, so the file can be dropped after [`parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedBinary {
    kind: BinaryKind,
    text_size: u64,
    text_align: u64,
    data_size: u64,
    data_align: u64,
    link_address: Option<(u64, u64)>,
    entry: Option<u64>,
    /// The initialised bytes of both regions, back to back; `chunks` says where each goes.
    /// Only bytes present in the file are kept: padding and `.bss` are zeroed by [`link`].
    contents: Vec<u8>,
    chunks: Vec<Chunk>,
    relocations: Vec<Relocation>,
    symbols: Vec<Symbol>,
    /// Section names by section index, for error messages at link time.
    section_names: Vec<String>,
}

/// `contents[start..start + len]` belongs at `offset` in `region`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Chunk {
    region: Region,
    offset: u64,
    start: usize,
    len: usize,
}

/// A binary placed at its final addresses: copy `text` to `text_base` and `data` to
/// `data_base`, and launch any of `functions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedImage {
    /// The device address of the first byte of `text`.
    pub text_base: u64,
    /// The relocated instructions, [`ParsedBinary::text_size`] bytes.
    pub text: Vec<u8>,
    /// The device address of the first byte of `data`.
    pub data_base: u64,
    /// The relocated data, [`ParsedBinary::data_size`] bytes: `.rodata*`, `.srodata*`,
    /// `.data*`, `.sdata*`, then `.bss` and `.sbss` as zeros, each at its aligned offset.
    pub data: Vec<u8>,
    /// The global and weak functions in text, by name, with their entry addresses: the
    /// kernels a launch can name. In symbol-table order.
    pub functions: Vec<(String, u64)>,
    /// Every named function and object, local ones included, at its address (for
    /// symbolising fault addresses). In symbol-table order.
    pub symbols: Vec<LinkedSymbol>,
    /// The executable's entry point (`e_entry`), for [`BinaryKind::Executable`] images whose
    /// entry lies in their text.
    pub entry: Option<u64>,
}

impl LinkedImage {
    /// The address of the global or weak function `name`, if the binary exports it.
    pub fn function(&self, name: &str) -> Option<u64> {
        self.functions
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, address)| address)
    }

    /// The function containing `address` and the offset into it, for reports such as
    /// "fault at `vadd_f32+0x1c`". Functions of unknown size contain nothing.
    pub fn symbolize(&self, address: u64) -> Option<(&str, u64)> {
        self.symbols
            .iter()
            .filter(|s| s.kind == SymbolKind::Function)
            .find(|s| address >= s.address && address - s.address < s.size)
            .map(|s| (s.name.as_str(), address - s.address))
    }
}

impl ParsedBinary {
    /// Whether the binary was a relocatable object or an executable.
    pub fn kind(&self) -> BinaryKind {
        self.kind
    }

    /// The bytes of instruction memory the binary needs.
    pub fn text_size(&self) -> u64 {
        self.text_size
    }

    /// The alignment the text base must have (a power of two, at least 4).
    pub fn text_align(&self) -> u64 {
        self.text_align
    }

    /// The bytes of module data the binary needs (0 when it has no data).
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// The alignment the data base must have (a power of two).
    pub fn data_align(&self) -> u64 {
        self.data_align
    }

    /// For an executable, the text and data bases it was linked for, which are the only
    /// ones [`link`] accepts; `None` for a relocatable object, which can go anywhere.
    pub fn link_address(&self) -> Option<(u64, u64)> {
        self.link_address
    }

    /// The named functions and objects, with their offsets in their regions.
    pub fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    /// The global or weak function `name`'s offset in the text region.
    pub fn function_offset(&self, name: &str) -> Option<u64> {
        self.symbols
            .iter()
            .find(|s| {
                s.name == name
                    && s.kind == SymbolKind::Function
                    && s.binding != SymbolBinding::Local
                    && s.region == Region::Text
            })
            .map(|s| s.offset)
    }

    /// The number of relocations [`link`] will apply.
    pub fn relocation_count(&self) -> usize {
        self.relocations.len()
    }

    fn section_name(&self, index: usize) -> String {
        self.section_names
            .get(index)
            .cloned()
            .unwrap_or_else(|| format!("section #{index}"))
    }
}

/// Validates an ELF kernel binary and lays it out; see the [module docs](self) for what is
/// accepted. Never panics and allocates no more than a small multiple of `bytes.len()`.
pub fn parse(bytes: &[u8]) -> Result<ParsedBinary, ElfError> {
    header::check_ident(bytes)?;
    // `object` reads headers in place and needs them aligned for their types; a caller's
    // slice (a sub-slice of a bundle, a fuzzer's buffer) need not be, so copy when it isn't.
    let storage: Vec<u64>;
    let data: &[u8] = if (bytes.as_ptr() as usize).is_multiple_of(8) {
        bytes
    } else {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        object::pod::bytes_of_slice_mut(&mut words)[..bytes.len()].copy_from_slice(bytes);
        storage = words;
        &object::pod::bytes_of_slice(&storage)[..bytes.len()]
    };
    let header = elf::FileHeader64::<LE>::parse(data)
        .map_err(|e| ElfError::Malformed(format!("ELF header: {e}")))?;
    let file = header::File::new(header, data)?;
    match file.e_type {
        elf::ET_REL => sections::parse_relocatable(&file),
        elf::ET_EXEC => executable::parse_executable(&file),
        other => Err(ElfError::WrongType(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use std::path::PathBuf;

    /// Every seed and every crash the fuzzer ever saved must load or fail cleanly.
    #[test]
    fn fuzz_corpus_replays_without_panics() {
        let dir = repo().join("fuzz/corpus/elf_loader");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "the seed corpus is empty");
        let mut loaded = 0;
        for file in &files {
            let bytes = std::fs::read(file).unwrap();
            if let Ok(parsed) = parse(&bytes) {
                let (text, data) = parsed.link_address().unwrap_or((TEXT, DATA));
                if link(&parsed, text, data).is_ok() {
                    loaded += 1;
                }
            }
        }
        assert!(loaded > 0, "no corpus file loads at all");
    }
}
