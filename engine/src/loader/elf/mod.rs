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

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;

use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, Rela, SectionHeader, SectionTable, Sym};

/// The most text plus data one binary may occupy. The code window is 256 MiB, and a kernel
/// needing more is almost certainly a malformed file; refusing it early keeps a corrupt size
/// field from turning into a huge allocation.
pub const MAX_IMAGE_SIZE: u64 = 256 << 20;

/// The largest section alignment accepted. Page alignment (4 KiB) is the most a kernel has a
/// reason to ask for; 64 KiB leaves room and still keeps padding bounded.
pub const MAX_SECTION_ALIGN: u64 = 64 << 10;

/// Instructions are 4 bytes (no compressed ones), so text is never placed less aligned.
const INSTRUCTION_ALIGN: u64 = 4;

/// Offsets of the class and data-encoding bytes in `e_ident`.
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;

/// Names may add up to twice the file's size plus this (see `File::name_budget`).
const NAME_BUDGET_BASE: usize = 64 << 10;

const ELF_HEADER_SIZE: u64 = 64;
const SECTION_HEADER_SIZE: u64 = 64;
const PROGRAM_HEADER_SIZE: u64 = 56;

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

/// Why a binary could not be parsed or linked. Each message says what is wrong and, where
/// there is one, how to build a binary the NPU accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    /// The file ends before a structure it declares.
    #[error("truncated ELF file: the {what} lies past the end of the {len}-byte file")]
    Truncated {
        /// The structure that is cut off.
        what: &'static str,
        /// The file's length.
        len: usize,
    },
    /// The file does not start with the ELF magic number.
    #[error("not an ELF file (bad magic number)")]
    BadMagic,
    /// The file is not ELF64.
    #[error("ELF class {0} is not supported: NPU kernels are ELF64 (--target=riscv64-unknown-elf)")]
    WrongClass(u8),
    /// The file is not little-endian.
    #[error("ELF data encoding {0} is not supported: the NPU is little-endian")]
    WrongEndianness(u8),
    /// The file is not for RISC-V.
    #[error("ELF machine {0} is not RISC-V (EM_RISCV = 243)")]
    WrongMachine(u16),
    /// The file is neither a relocatable object nor an executable.
    #[error(
        "ELF type {0} is not supported: load a relocatable object (ET_REL, from `clang -c`) \
         or a static executable (ET_EXEC)"
    )]
    WrongType(u16),
    /// The file was compiled for another floating-point ABI.
    #[error("the {0} float ABI is not supported: the NPU calls kernels with -mabi=lp64f")]
    FloatAbi(&'static str),
    /// The file may contain compressed instructions, which the core cannot execute.
    #[error(
        "the binary uses compressed instructions (EF_RISCV_RVC), which the NPU core does not \
         have: compile with -march=rv64imf (no 'c')"
    )]
    CompressedInstructions,
    /// The file was compiled for RV64E (16 registers).
    #[error("the binary is for RV64E, the embedded 16-register subset; compile for rv64imf")]
    EmbeddedAbi,
    /// A structure of the file is inconsistent.
    #[error("malformed ELF file: {0}")]
    Malformed(String),
    /// A section, segment or table lies outside the file.
    #[error("{what} (at {offset:#x}, {size:#x} bytes) lies outside the {len}-byte file")]
    OutOfBounds {
        /// What lies outside.
        what: String,
        /// Its file offset.
        offset: u64,
        /// Its size.
        size: u64,
        /// The file's length.
        len: usize,
    },
    /// Two sections or segments claim the same bytes.
    #[error("{first} and {second} overlap")]
    Overlap {
        /// The first of the two.
        first: String,
        /// The second of the two.
        second: String,
    },
    /// The binary needs more memory than a binary may have.
    #[error("{what} needs {size:#x} bytes, more than the {limit:#x} a binary may have")]
    TooLarge {
        /// What is too large.
        what: String,
        /// The size it needs.
        size: u64,
        /// The limit ([`MAX_IMAGE_SIZE`]).
        limit: u64,
    },
    /// A section's alignment is not a power of two, or is absurdly large.
    #[error(
        "{section} asks for alignment {align:#x}, which is not a power of two no larger than \
         {MAX_SECTION_ALIGN:#x}"
    )]
    BadAlignment {
        /// The section (or common symbol).
        section: String,
        /// The alignment it asks for.
        align: u64,
    },
    /// The binary uses an ELF feature the NPU has no use for.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The binary has no executable code.
    #[error("the binary has no executable code")]
    NoCode,
    /// A relocation names a symbol the symbol table does not have.
    #[error("symbol index {index} is out of range: the symbol table has {count} entries")]
    SymbolIndexOutOfRange {
        /// The index named.
        index: u32,
        /// The number of symbols.
        count: usize,
    },
    /// A relocation refers to a symbol defined nowhere.
    #[error(
        "undefined symbol `{0}`: a kernel binary is linked alone, with no libc or other \
         objects; define it in the kernel (and see npusim.h for what the SDK provides)"
    )]
    UndefinedSymbol(String),
    /// A relocation refers to a symbol in a section that is not loaded.
    #[error("symbol `{symbol}` lies in {section}, which is not loaded")]
    SymbolNotLoaded {
        /// The symbol.
        symbol: String,
        /// Its section.
        section: String,
    },
    /// A relocation patches bytes past the end of its section.
    #[error("relocation at {section}+{offset:#x} lies past the end of its {size:#x}-byte section")]
    RelocationOffsetOutOfBounds {
        /// The patched section.
        section: String,
        /// The offset of the patched place in it.
        offset: u64,
        /// The section's size.
        size: u64,
    },
    /// The relocation type is not one the loader applies.
    #[error("unsupported relocation {} at {section}+{offset:#x}", reloc_name(*kind))]
    UnsupportedRelocation {
        /// The relocation type (`R_RISCV_*`).
        kind: u32,
        /// The patched section.
        section: String,
        /// The offset of the patched place in it.
        offset: u64,
    },
    /// The object was built for linker relaxation.
    #[error(
        "R_RISCV_ALIGN at {section}+{offset:#x}: the object relies on linker relaxation, \
         which the loader does not do; compile with -mno-relax"
    )]
    RelaxationRequired {
        /// The section with the alignment padding.
        section: String,
        /// The offset of the padding in it.
        offset: u64,
    },
    /// A `%pcrel_lo` relocation whose label has no `%pcrel_hi` relocation.
    #[error(
        "{} at {section}+{offset:#x} names a label with no R_RISCV_PCREL_HI20 relocation",
        reloc_name(*kind)
    )]
    UnpairedPcrelLo {
        /// The relocation type.
        kind: u32,
        /// The patched section.
        section: String,
        /// The offset of the patched place in it.
        offset: u64,
    },
    /// A relocated value does not fit its field at the chosen addresses.
    #[error(
        "{} at {section}+{offset:#x}: value {value:#x} does not fit the field",
        reloc_name(*kind)
    )]
    RelocationOutOfRange {
        /// The relocation type.
        kind: u32,
        /// The patched section.
        section: String,
        /// The offset of the patched place in it.
        offset: u64,
        /// The value that does not fit (a displacement for PC-relative types).
        value: i64,
    },
    /// A branch or jump target is not 2-byte aligned.
    #[error(
        "{} at {section}+{offset:#x}: displacement {value:#x} is odd",
        reloc_name(*kind)
    )]
    RelocationMisaligned {
        /// The relocation type.
        kind: u32,
        /// The patched section.
        section: String,
        /// The offset of the patched place in it.
        offset: u64,
        /// The displacement.
        value: i64,
    },
    /// A base address given to [`link`] is not aligned as the binary needs.
    #[error("{region} base {base:#x} is not aligned to {align:#x} bytes")]
    MisalignedBase {
        /// Which region.
        region: Region,
        /// The base given.
        base: u64,
        /// The alignment needed.
        align: u64,
    },
    /// A region placed at the given base would wrap around the address space.
    #[error("{region} of {size:#x} bytes at {base:#x} runs past the end of the address space")]
    AddressOverflow {
        /// Which region.
        region: Region,
        /// The base given.
        base: u64,
        /// The region's size.
        size: u64,
    },
    /// An executable was asked to load somewhere other than its link address.
    #[error(
        "this executable's {region} was linked at {linked:#x} and must be loaded there, \
         not at {requested:#x}"
    )]
    FixedAddress {
        /// Which region.
        region: Region,
        /// Where it was linked.
        linked: u64,
        /// Where it was asked to go.
        requested: u64,
    },
}

/// The name of a RISC-V relocation type, for messages.
pub fn reloc_name(kind: u32) -> &'static str {
    match kind {
        elf::R_RISCV_NONE => "R_RISCV_NONE",
        elf::R_RISCV_32 => "R_RISCV_32",
        elf::R_RISCV_64 => "R_RISCV_64",
        elf::R_RISCV_RELATIVE => "R_RISCV_RELATIVE",
        elf::R_RISCV_COPY => "R_RISCV_COPY",
        elf::R_RISCV_JUMP_SLOT => "R_RISCV_JUMP_SLOT",
        elf::R_RISCV_BRANCH => "R_RISCV_BRANCH",
        elf::R_RISCV_JAL => "R_RISCV_JAL",
        elf::R_RISCV_CALL => "R_RISCV_CALL",
        elf::R_RISCV_CALL_PLT => "R_RISCV_CALL_PLT",
        elf::R_RISCV_GOT_HI20 => "R_RISCV_GOT_HI20",
        elf::R_RISCV_TLS_GOT_HI20 => "R_RISCV_TLS_GOT_HI20",
        elf::R_RISCV_TLS_GD_HI20 => "R_RISCV_TLS_GD_HI20",
        elf::R_RISCV_PCREL_HI20 => "R_RISCV_PCREL_HI20",
        elf::R_RISCV_PCREL_LO12_I => "R_RISCV_PCREL_LO12_I",
        elf::R_RISCV_PCREL_LO12_S => "R_RISCV_PCREL_LO12_S",
        elf::R_RISCV_HI20 => "R_RISCV_HI20",
        elf::R_RISCV_LO12_I => "R_RISCV_LO12_I",
        elf::R_RISCV_LO12_S => "R_RISCV_LO12_S",
        elf::R_RISCV_TPREL_HI20 => "R_RISCV_TPREL_HI20",
        elf::R_RISCV_TPREL_LO12_I => "R_RISCV_TPREL_LO12_I",
        elf::R_RISCV_TPREL_LO12_S => "R_RISCV_TPREL_LO12_S",
        elf::R_RISCV_TPREL_ADD => "R_RISCV_TPREL_ADD",
        elf::R_RISCV_ADD8 => "R_RISCV_ADD8",
        elf::R_RISCV_ADD16 => "R_RISCV_ADD16",
        elf::R_RISCV_ADD32 => "R_RISCV_ADD32",
        elf::R_RISCV_ADD64 => "R_RISCV_ADD64",
        elf::R_RISCV_SUB8 => "R_RISCV_SUB8",
        elf::R_RISCV_SUB16 => "R_RISCV_SUB16",
        elf::R_RISCV_SUB32 => "R_RISCV_SUB32",
        elf::R_RISCV_SUB64 => "R_RISCV_SUB64",
        elf::R_RISCV_ALIGN => "R_RISCV_ALIGN",
        elf::R_RISCV_RVC_BRANCH => "R_RISCV_RVC_BRANCH",
        elf::R_RISCV_RVC_JUMP => "R_RISCV_RVC_JUMP",
        elf::R_RISCV_RVC_LUI => "R_RISCV_RVC_LUI",
        elf::R_RISCV_GPREL_I => "R_RISCV_GPREL_I",
        elf::R_RISCV_GPREL_S => "R_RISCV_GPREL_S",
        elf::R_RISCV_RELAX => "R_RISCV_RELAX",
        elf::R_RISCV_SUB6 => "R_RISCV_SUB6",
        elf::R_RISCV_SET6 => "R_RISCV_SET6",
        elf::R_RISCV_SET8 => "R_RISCV_SET8",
        elf::R_RISCV_SET16 => "R_RISCV_SET16",
        elf::R_RISCV_SET32 => "R_RISCV_SET32",
        elf::R_RISCV_32_PCREL => "R_RISCV_32_PCREL",
        elf::R_RISCV_PLT32 => "R_RISCV_PLT32",
        elf::R_RISCV_SET_ULEB128 => "R_RISCV_SET_ULEB128",
        elf::R_RISCV_SUB_ULEB128 => "R_RISCV_SUB_ULEB128",
        _ => "an unknown RISC-V relocation type",
    }
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

/// The address a relocation's symbol stands for, once the regions have bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// At this offset in a region.
    At(Region, u64),
    /// An absolute value (`SHN_ABS` symbols, symbol 0, weak undefined symbols).
    Absolute(u64),
}

/// The `%pcrel_hi` half of a `%pcrel_lo` relocation: the lo part encodes the low 12 bits of
/// *that* relocation's PC-relative value, computed at the `auipc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PcrelHi {
    region: Region,
    offset: u64,
    target: Target,
    addend: i64,
}

/// How a relocation patches its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Patch {
    Abs64,
    Abs32,
    Hi20,
    Lo12I,
    Lo12S,
    PcrelHi20,
    /// Resolved in a second pass, once every `%pcrel_hi` is known (`hi` is `None` until then).
    PcrelLo12 {
        store: bool,
        hi: Option<PcrelHi>,
    },
    /// An `auipc` + `jalr` pair.
    Call,
    Branch,
    Jal,
    Add(u8),
    Sub(u8),
    Set(u8),
    Set6,
    Sub6,
    Pcrel32,
}

impl Patch {
    fn from_type(kind: u32) -> Option<Patch> {
        Some(match kind {
            elf::R_RISCV_64 => Patch::Abs64,
            elf::R_RISCV_32 => Patch::Abs32,
            elf::R_RISCV_HI20 => Patch::Hi20,
            elf::R_RISCV_LO12_I => Patch::Lo12I,
            elf::R_RISCV_LO12_S => Patch::Lo12S,
            elf::R_RISCV_PCREL_HI20 => Patch::PcrelHi20,
            elf::R_RISCV_PCREL_LO12_I => Patch::PcrelLo12 {
                store: false,
                hi: None,
            },
            elf::R_RISCV_PCREL_LO12_S => Patch::PcrelLo12 {
                store: true,
                hi: None,
            },
            elf::R_RISCV_CALL | elf::R_RISCV_CALL_PLT => Patch::Call,
            elf::R_RISCV_BRANCH => Patch::Branch,
            elf::R_RISCV_JAL => Patch::Jal,
            elf::R_RISCV_ADD8 => Patch::Add(1),
            elf::R_RISCV_ADD16 => Patch::Add(2),
            elf::R_RISCV_ADD32 => Patch::Add(4),
            elf::R_RISCV_ADD64 => Patch::Add(8),
            elf::R_RISCV_SUB8 => Patch::Sub(1),
            elf::R_RISCV_SUB16 => Patch::Sub(2),
            elf::R_RISCV_SUB32 => Patch::Sub(4),
            elf::R_RISCV_SUB64 => Patch::Sub(8),
            elf::R_RISCV_SET8 => Patch::Set(1),
            elf::R_RISCV_SET16 => Patch::Set(2),
            elf::R_RISCV_SET32 => Patch::Set(4),
            elf::R_RISCV_SET6 => Patch::Set6,
            elf::R_RISCV_SUB6 => Patch::Sub6,
            elf::R_RISCV_32_PCREL => Patch::Pcrel32,
            _ => return None,
        })
    }

    /// How many bytes at the place the patch reads and writes.
    fn width(self) -> u64 {
        match self {
            Patch::Abs64 => 8,
            Patch::Call => 8,
            Patch::Add(w) | Patch::Sub(w) | Patch::Set(w) => u64::from(w),
            Patch::Set6 | Patch::Sub6 => 1,
            _ => 4,
        }
    }
}

/// One decoded relocation: patch `region` at `offset` with `target + addend`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Relocation {
    kind: u32,
    patch: Patch,
    region: Region,
    offset: u64,
    target: Target,
    addend: i64,
    /// Where it came from, for error messages.
    section: usize,
    section_offset: u64,
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

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Validates an ELF kernel binary and lays it out; see the [module docs](self) for what is
/// accepted. Never panics and allocates no more than a small multiple of `bytes.len()`.
pub fn parse(bytes: &[u8]) -> Result<ParsedBinary, ElfError> {
    check_ident(bytes)?;
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
    let file = File::new(header, data)?;
    match file.e_type {
        elf::ET_REL => parse_relocatable(&file),
        elf::ET_EXEC => parse_executable(&file),
        other => Err(ElfError::WrongType(other)),
    }
}

/// The identification bytes, checked by hand so each mismatch gets its own message.
fn check_ident(bytes: &[u8]) -> Result<(), ElfError> {
    let len = bytes.len();
    let magic = &elf::ELFMAG[..];
    let prefix = &bytes[..len.min(magic.len())];
    if prefix != &magic[..prefix.len()] {
        return Err(ElfError::BadMagic);
    }
    let ident_byte = |i: usize| {
        bytes.get(i).copied().ok_or(ElfError::Truncated {
            what: "ELF header",
            len,
        })
    };
    let class = ident_byte(EI_CLASS)?;
    if class != elf::ELFCLASS64 {
        return Err(ElfError::WrongClass(class));
    }
    let encoding = ident_byte(EI_DATA)?;
    if encoding != elf::ELFDATA2LSB {
        return Err(ElfError::WrongEndianness(encoding));
    }
    if (len as u64) < ELF_HEADER_SIZE {
        return Err(ElfError::Truncated {
            what: "ELF header",
            len,
        });
    }
    Ok(())
}

/// What both kinds of file need: the header fields and the section table.
struct File<'data> {
    data: &'data [u8],
    e_type: u16,
    entry: u64,
    header: &'data elf::FileHeader64<LE>,
    sections: SectionTable<'data, elf::FileHeader64<LE>>,
    names: Vec<String>,
    /// Bytes of section and symbol names still allowed to be copied out. Names are shared
    /// slices of a string table, so without a budget a small file whose thousands of symbols
    /// all name one long string would cost gigabytes of `String`s.
    name_budget: Cell<usize>,
}

impl<'data> File<'data> {
    fn new(header: &'data elf::FileHeader64<LE>, data: &'data [u8]) -> Result<Self, ElfError> {
        let len = data.len();
        let machine = header.e_machine(LE);
        if machine != elf::EM_RISCV {
            return Err(ElfError::WrongMachine(machine));
        }
        let e_type = header.e_type(LE);
        if e_type != elf::ET_REL && e_type != elf::ET_EXEC {
            return Err(ElfError::WrongType(e_type));
        }
        let flags = header.e_flags(LE);
        if flags & elf::EF_RISCV_RVC != 0 {
            return Err(ElfError::CompressedInstructions);
        }
        if flags & elf::EF_RISCV_RVE != 0 {
            return Err(ElfError::EmbeddedAbi);
        }
        match flags & elf::EF_RISCV_FLOAT_ABI {
            elf::EF_RISCV_FLOAT_ABI_SINGLE => {}
            elf::EF_RISCV_FLOAT_ABI_SOFT => return Err(ElfError::FloatAbi("soft (lp64)")),
            elf::EF_RISCV_FLOAT_ABI_DOUBLE => return Err(ElfError::FloatAbi("double (lp64d)")),
            _ => return Err(ElfError::FloatAbi("quad (lp64q)")),
        }

        // Bounds of the header tables first, so the message names the table; `object`
        // checks them again (and handles the extended counts in section 0).
        let shoff = header.e_shoff(LE);
        if shoff != 0 {
            let count = u64::from(header.e_shnum(LE)).max(1);
            check_in_file(
                "section header table",
                shoff,
                count * SECTION_HEADER_SIZE,
                len,
            )?;
        }
        let sections = header
            .sections(LE, data)
            .map_err(|e| ElfError::Malformed(format!("section headers: {e}")))?;
        let mut file = File {
            data,
            e_type,
            entry: header.e_entry(LE),
            header,
            sections,
            names: Vec::new(),
            name_budget: Cell::new(NAME_BUDGET_BASE.saturating_add(len.saturating_mul(2))),
        };
        let mut names = Vec::with_capacity(file.sections.len());
        for (index, section) in file.sections.enumerate() {
            names.push(match file.sections.section_name(LE, section) {
                Ok(name) if !name.is_empty() => file.owned_name(name)?,
                _ => format!("section #{}", index.0),
            });
        }
        file.names = names;
        file.check_section_placement()?;
        Ok(file)
    }

    /// Copies a name out of a string table, within the name budget.
    fn owned_name(&self, name: &[u8]) -> Result<String, ElfError> {
        let left = self.name_budget.get();
        if name.len() > left {
            return Err(ElfError::Malformed(
                "the section and symbol names add up to far more than the file holds".into(),
            ));
        }
        self.name_budget.set(left - name.len());
        Ok(String::from_utf8_lossy(name).into_owned())
    }

    fn name(&self, index: usize) -> String {
        self.names
            .get(index)
            .cloned()
            .unwrap_or_else(|| format!("section #{index}"))
    }

    /// Every section with contents lies inside the file, and no two share bytes with each
    /// other, the ELF header or the section header table.
    fn check_section_placement(&self) -> Result<(), ElfError> {
        let len = self.data.len();
        let mut ranges: Vec<(u64, u64, String)> = Vec::with_capacity(self.sections.len() + 2);
        ranges.push((0, ELF_HEADER_SIZE, "the ELF header".to_owned()));
        let shoff = self.header.e_shoff(LE);
        if shoff != 0 && !self.sections.is_empty() {
            let size = self.sections.len() as u64 * SECTION_HEADER_SIZE;
            ranges.push((shoff, shoff + size, "the section header table".to_owned()));
        }
        for (index, section) in self.sections.enumerate() {
            let kind = section.sh_type(LE);
            if kind == elf::SHT_NULL || kind == elf::SHT_NOBITS {
                continue;
            }
            let (offset, size) = (section.sh_offset(LE), section.sh_size(LE));
            let what = format!("section {}", self.name(index.0));
            let end = check_in_file(&what, offset, size, len)?;
            if size > 0 {
                ranges.push((offset, end, what));
            }
        }
        check_disjoint(ranges)
    }

    /// The index of the one symbol table, if there is one.
    fn symtab_index(&self) -> Result<Option<usize>, ElfError> {
        let mut found = None;
        for (index, section) in self.sections.enumerate() {
            if section.sh_type(LE) == elf::SHT_SYMTAB {
                if found.is_some() {
                    return Err(ElfError::Malformed("more than one symbol table".into()));
                }
                found = Some(index.0);
            }
        }
        Ok(found)
    }

    fn symbol_table(
        &self,
        index: usize,
    ) -> Result<object::read::elf::SymbolTable<'data, elf::FileHeader64<LE>>, ElfError> {
        self.sections
            .symbol_table_by_index(LE, self.data, object::SectionIndex(index))
            .map_err(|e| ElfError::Malformed(format!("symbol table: {e}")))
    }
}

/// `offset + size` when that range lies in a file of `len` bytes.
fn check_in_file(what: &str, offset: u64, size: u64, len: usize) -> Result<u64, ElfError> {
    match offset.checked_add(size) {
        Some(end) if end <= len as u64 => Ok(end),
        _ => Err(ElfError::OutOfBounds {
            what: what.to_owned(),
            offset,
            size,
            len,
        }),
    }
}

/// Fails on the first two of `ranges` (start, end, name) that share a byte.
fn check_disjoint(mut ranges: Vec<(u64, u64, String)>) -> Result<(), ElfError> {
    ranges.sort_by_key(|r| (r.0, r.1));
    let mut furthest: Option<(u64, usize)> = None;
    for (i, range) in ranges.iter().enumerate() {
        if range.0 == range.1 {
            continue;
        }
        if let Some((end, owner)) = furthest
            && range.0 < end
        {
            return Err(ElfError::Overlap {
                first: ranges[owner].2.clone(),
                second: range.2.clone(),
            });
        }
        if furthest.is_none_or(|(end, _)| range.1 > end) {
            furthest = Some((range.1, i));
        }
    }
    Ok(())
}

/// A power-of-two alignment of at most [`MAX_SECTION_ALIGN`]; 0 means 1, as in ELF.
fn check_align(what: &str, align: u64) -> Result<u64, ElfError> {
    let align = align.max(1);
    if !align.is_power_of_two() || align > MAX_SECTION_ALIGN {
        return Err(ElfError::BadAlignment {
            section: what.to_owned(),
            align,
        });
    }
    Ok(align)
}

/// Running layout of one region: places items at aligned offsets and enforces the size cap.
struct RegionLayout {
    region: Region,
    size: u64,
    align: u64,
}

impl RegionLayout {
    fn new(region: Region, align: u64) -> Self {
        RegionLayout {
            region,
            size: 0,
            align,
        }
    }

    /// Places `size` bytes at the next `align`ed offset; `other` is the other region's size,
    /// which counts against the same cap.
    fn place(&mut self, what: &str, size: u64, align: u64, other: u64) -> Result<u64, ElfError> {
        let too_large = || ElfError::TooLarge {
            what: format!("the {} region (at {what})", self.region),
            size: u64::MAX,
            limit: MAX_IMAGE_SIZE,
        };
        // Both operands are below the cap (or the align limit), so these cannot overflow.
        let offset = self.size.next_multiple_of(align);
        let end = offset.checked_add(size).ok_or_else(too_large)?;
        if end.saturating_add(other) > MAX_IMAGE_SIZE {
            return Err(ElfError::TooLarge {
                what: format!("the {} region (at {what})", self.region),
                size: end.saturating_add(other),
                limit: MAX_IMAGE_SIZE,
            });
        }
        self.size = end;
        self.align = self.align.max(align);
        Ok(offset)
    }
}

/// Where a symbol of the file ends up.
#[derive(Debug, Clone, Copy)]
enum SymPlace {
    At(Region, u64),
    Absolute(u64),
    Undefined {
        weak: bool,
    },
    /// Defined in a section that is not loaded.
    NotLoaded(usize),
}

fn binding(st_bind: u8) -> Option<SymbolBinding> {
    match st_bind {
        elf::STB_LOCAL => Some(SymbolBinding::Local),
        elf::STB_GLOBAL | elf::STB_GNU_UNIQUE => Some(SymbolBinding::Global),
        elf::STB_WEAK => Some(SymbolBinding::Weak),
        _ => None,
    }
}

fn symbol_kind(st_type: u8) -> Option<SymbolKind> {
    match st_type {
        elf::STT_FUNC => Some(SymbolKind::Function),
        elf::STT_OBJECT => Some(SymbolKind::Object),
        _ => None,
    }
}

/// Loaded-section filter for relocatable objects: `Ok(None)` means "not loaded".
fn loaded_region(
    file: &File<'_>,
    index: usize,
    section: &elf::SectionHeader64<LE>,
) -> Result<Option<Region>, ElfError> {
    let flags = section.sh_flags(LE);
    if flags & u64::from(elf::SHF_ALLOC) == 0 {
        return Ok(None);
    }
    let name = file.name(index);
    // Nothing unwinds on the NPU, so unwind tables would be dead weight (and need the
    // ADD/SUB/SET6 fixups of their own); ALLOC notes carry build metadata only.
    if name == ".eh_frame" || section.sh_type(LE) == elf::SHT_NOTE {
        return Ok(None);
    }
    if flags & u64::from(elf::SHF_TLS) != 0 {
        return Err(ElfError::Unsupported(format!(
            "thread-local storage ({name}): the NPU has no thread pointer"
        )));
    }
    match section.sh_type(LE) {
        elf::SHT_PROGBITS | elf::SHT_NOBITS => {}
        elf::SHT_INIT_ARRAY | elf::SHT_FINI_ARRAY | elf::SHT_PREINIT_ARRAY => {
            return Err(ElfError::Unsupported(format!(
                "{name}: nothing runs constructors or destructors on the NPU; \
                 initialise globals with constants"
            )));
        }
        other => {
            return Err(ElfError::Unsupported(format!(
                "loaded section {name} of type {other:#x}"
            )));
        }
    }
    if flags & u64::from(elf::SHF_EXECINSTR) != 0 {
        if section.sh_type(LE) == elf::SHT_NOBITS {
            return Err(ElfError::Malformed(format!(
                "executable section {name} has no contents"
            )));
        }
        Ok(Some(Region::Text))
    } else {
        Ok(Some(Region::Data))
    }
}

fn parse_relocatable(file: &File<'_>) -> Result<ParsedBinary, ElfError> {
    let count = file.sections.len();
    let headers: Vec<&elf::SectionHeader64<LE>> = file.sections.iter().collect();

    // 1. Lay out the loaded sections: text in section order, then data with contents, then
    //    NOBITS data, so that `.bss` costs nothing in `contents`.
    let mut place: Vec<Option<(Region, u64)>> = vec![None; count];
    let mut text = RegionLayout::new(Region::Text, INSTRUCTION_ALIGN);
    let mut data = RegionLayout::new(Region::Data, 1);
    let mut regions = Vec::with_capacity(count);
    for (index, section) in headers.iter().enumerate() {
        regions.push(loaded_region(file, index, section)?);
    }
    let passes: [(Region, Option<bool>); 3] = [
        (Region::Text, None),
        (Region::Data, Some(false)),
        (Region::Data, Some(true)),
    ];
    for (region, nobits) in passes {
        for (index, section) in headers.iter().enumerate() {
            if regions[index] != Some(region) {
                continue;
            }
            let is_nobits = section.sh_type(LE) == elf::SHT_NOBITS;
            if nobits.is_some_and(|n| n != is_nobits) {
                continue;
            }
            let name = format!("section {}", file.name(index));
            let align = check_align(&name, section.sh_addralign(LE))?;
            let size = section.sh_size(LE);
            let offset = match region {
                Region::Text => text.place(&name, size, align, data.size)?,
                Region::Data => data.place(&name, size, align, text.size)?,
            };
            place[index] = Some((region, offset));
        }
    }

    // 2. Resolve every symbol to a place; common symbols get their space after `.bss`.
    let symtab_index = file.symtab_index()?;
    let symtab = match symtab_index {
        Some(index) => Some(file.symbol_table(index)?),
        None => None,
    };
    let raw_symbols = symtab.as_ref().map_or(&[][..], |t| t.symbols());
    let mut sym_places = Vec::with_capacity(raw_symbols.len());
    let mut symbols = Vec::new();
    for (index, sym) in symtab
        .iter()
        .flat_map(|t| t.symbols().iter().map(move |s| (t, s)))
        .enumerate()
    {
        let (symtab, sym) = sym;
        // For messages: built only when an error needs it.
        let name = || -> String {
            match symtab.symbol_name(LE, sym) {
                Ok(name) if !name.is_empty() => String::from_utf8_lossy(name).into_owned(),
                _ => format!("symbol #{index}"),
            }
        };
        let value = sym.st_value(LE);
        let sym_place = match sym.st_shndx(LE) {
            elf::SHN_UNDEF => SymPlace::Undefined {
                weak: sym.st_bind() == elf::STB_WEAK,
            },
            elf::SHN_ABS => SymPlace::Absolute(value),
            elf::SHN_COMMON => {
                // For a common symbol st_value is its alignment.
                let what = format!("common symbol {}", name());
                let align = check_align(&what, value)?;
                let offset = data.place(&what, sym.st_size(LE), align, text.size)?;
                SymPlace::At(Region::Data, offset)
            }
            _ => {
                let section = symtab
                    .symbol_section(LE, sym, object::SymbolIndex(index))
                    .map_err(|e| ElfError::Malformed(format!("symbol {}: {e}", name())))?;
                match section {
                    // Other reserved indices (processor / OS specific): nothing we can place.
                    None => SymPlace::NotLoaded(0),
                    Some(section) => {
                        let section = section.0;
                        let Some(header) = headers.get(section) else {
                            return Err(ElfError::Malformed(format!(
                                "symbol {} is in section #{section}, which does not exist",
                                name()
                            )));
                        };
                        match place[section] {
                            Some((region, base)) => {
                                if value > header.sh_size(LE) {
                                    return Err(ElfError::Malformed(format!(
                                        "symbol {} lies past the end of {}",
                                        name(),
                                        file.name(section)
                                    )));
                                }
                                SymPlace::At(region, base + value)
                            }
                            None => SymPlace::NotLoaded(section),
                        }
                    }
                }
            }
        };
        if let (SymPlace::At(region, offset), Some(kind), Some(binding)) = (
            sym_place,
            symbol_kind(sym.st_type()),
            binding(sym.st_bind()),
        ) && sym.st_name(LE) != 0
            && let Ok(raw_name) = symtab.symbol_name(LE, sym)
        {
            symbols.push(Symbol {
                name: file.owned_name(raw_name)?,
                kind,
                binding,
                region,
                offset,
                size: sym.st_size(LE),
            });
        }
        sym_places.push(sym_place);
    }
    let symbol_name = |index: usize| -> String {
        symtab
            .as_ref()
            .and_then(|t| raw_symbols.get(index).map(|s| (t, s)))
            .and_then(|(t, s)| t.symbol_name(LE, s).ok())
            .filter(|n| !n.is_empty())
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_else(|| format!("symbol #{index}"))
    };

    // 3. Decode the relocations of loaded sections.
    let mut relocations = Vec::new();
    let mut pcrel_hi: BTreeMap<(Region, u64), PcrelHi> = BTreeMap::new();
    for (rel_index, rel_section) in headers.iter().enumerate() {
        let rel_type = rel_section.sh_type(LE);
        if rel_type != elf::SHT_RELA && rel_type != elf::SHT_REL {
            continue;
        }
        let target_index = rel_section.sh_info(LE) as usize;
        let Some(target_header) = headers.get(target_index) else {
            return Err(ElfError::Malformed(format!(
                "relocation section {} applies to section #{target_index}, which does not exist",
                file.name(rel_index)
            )));
        };
        let Some((region, base)) = place.get(target_index).copied().flatten() else {
            continue; // relocations for a section that is not loaded
        };
        let target_name = file.name(target_index);
        if rel_type == elf::SHT_REL {
            return Err(ElfError::Unsupported(format!(
                "SHT_REL relocations ({}); RISC-V objects use SHT_RELA",
                file.name(rel_index)
            )));
        }
        if Some(rel_section.sh_link(LE) as usize) != symtab_index {
            return Err(ElfError::Malformed(format!(
                "relocation section {} does not use the symbol table",
                file.name(rel_index)
            )));
        }
        let entries: &[elf::Rela64<LE>] = rel_section
            .data_as_array(LE, file.data)
            .map_err(|e| ElfError::Malformed(format!("{}: {e}", file.name(rel_index))))?;
        let section_size = target_header.sh_size(LE);
        for rela in entries {
            let kind = rela.r_type(LE, false);
            let section_offset = rela.r_offset(LE);
            let addend = rela.r_addend(LE);
            match kind {
                elf::R_RISCV_NONE | elf::R_RISCV_RELAX => continue,
                elf::R_RISCV_ALIGN => {
                    return Err(ElfError::RelaxationRequired {
                        section: target_name,
                        offset: section_offset,
                    });
                }
                _ => {}
            }
            let Some(patch) = Patch::from_type(kind) else {
                return Err(ElfError::UnsupportedRelocation {
                    kind,
                    section: target_name,
                    offset: section_offset,
                });
            };
            if section_offset
                .checked_add(patch.width())
                .is_none_or(|end| end > section_size)
            {
                return Err(ElfError::RelocationOffsetOutOfBounds {
                    section: target_name,
                    offset: section_offset,
                    size: section_size,
                });
            }
            let sym_index = rela.r_sym(LE, false);
            let target = if sym_index == 0 {
                Target::Absolute(0)
            } else {
                match sym_places.get(sym_index as usize) {
                    None => {
                        return Err(ElfError::SymbolIndexOutOfRange {
                            index: sym_index,
                            count: sym_places.len(),
                        });
                    }
                    Some(&SymPlace::At(r, o)) => Target::At(r, o),
                    Some(&SymPlace::Absolute(v)) => Target::Absolute(v),
                    // A weak reference to nothing is a null pointer, as in any ELF linker.
                    Some(&SymPlace::Undefined { weak: true }) => Target::Absolute(0),
                    Some(&SymPlace::Undefined { weak: false }) => {
                        return Err(ElfError::UndefinedSymbol(symbol_name(sym_index as usize)));
                    }
                    Some(&SymPlace::NotLoaded(section)) => {
                        return Err(ElfError::SymbolNotLoaded {
                            symbol: symbol_name(sym_index as usize),
                            section: file.name(section),
                        });
                    }
                }
            };
            let offset = base + section_offset;
            if patch == Patch::PcrelHi20 {
                pcrel_hi.insert(
                    (region, offset),
                    PcrelHi {
                        region,
                        offset,
                        target,
                        addend,
                    },
                );
            }
            relocations.push(Relocation {
                kind,
                patch,
                region,
                offset,
                target,
                addend,
                section: target_index,
                section_offset,
            });
        }
    }
    // A %pcrel_lo names the label of its auipc; the value it encodes is that of the
    // %pcrel_hi relocation at the label (its own addend is ignored, as lld does).
    for relocation in &mut relocations {
        if let Patch::PcrelLo12 { store, .. } = relocation.patch {
            let hi = match relocation.target {
                Target::At(region, offset) => pcrel_hi.get(&(region, offset)).copied(),
                Target::Absolute(_) => None,
            };
            let Some(hi) = hi else {
                return Err(ElfError::UnpairedPcrelLo {
                    kind: relocation.kind,
                    section: file.name(relocation.section),
                    offset: relocation.section_offset,
                });
            };
            relocation.patch = Patch::PcrelLo12 {
                store,
                hi: Some(hi),
            };
        }
    }

    if text.size == 0 {
        return Err(ElfError::NoCode);
    }

    // 4. Keep the bytes the regions start from; everything else is zero.
    let mut contents = Vec::new();
    let mut chunks = Vec::new();
    for (index, section) in headers.iter().enumerate() {
        let Some((region, offset)) = place[index] else {
            continue;
        };
        let bytes = section
            .data(LE, file.data)
            .map_err(|e| ElfError::Malformed(format!("{}: {e}", file.name(index))))?;
        if bytes.is_empty() {
            continue;
        }
        chunks.push(Chunk {
            region,
            offset,
            start: contents.len(),
            len: bytes.len(),
        });
        contents.extend_from_slice(bytes);
    }

    Ok(ParsedBinary {
        kind: BinaryKind::Relocatable,
        text_size: text.size,
        text_align: text.align,
        data_size: data.size,
        data_align: data.align,
        link_address: None,
        entry: None,
        contents,
        chunks,
        relocations,
        symbols,
        section_names: file.names.clone(),
    })
}

/// One `PT_LOAD` segment of an executable.
struct Segment {
    index: usize,
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

fn parse_executable(file: &File<'_>) -> Result<ParsedBinary, ElfError> {
    let len = file.data.len();
    let phoff = file.header.e_phoff(LE);
    if phoff != 0 {
        let count = u64::from(file.header.e_phnum(LE));
        check_in_file(
            "program header table",
            phoff,
            count * PROGRAM_HEADER_SIZE,
            len,
        )?;
    }
    let program_headers = file
        .header
        .program_headers(LE, file.data)
        .map_err(|e| ElfError::Malformed(format!("program headers: {e}")))?;

    let mut code = Vec::new();
    let mut data = Vec::new();
    for (index, ph) in program_headers.iter().enumerate() {
        match ph.p_type(LE) {
            elf::PT_LOAD => {}
            elf::PT_DYNAMIC | elf::PT_INTERP => {
                return Err(ElfError::Unsupported(
                    "dynamically linked executables: link statically".into(),
                ));
            }
            elf::PT_TLS => {
                return Err(ElfError::Unsupported(
                    "thread-local storage: the NPU has no thread pointer".into(),
                ));
            }
            _ => continue,
        }
        let what = format!("segment #{index}");
        let (offset, filesz, memsz) = (ph.p_offset(LE), ph.p_filesz(LE), ph.p_memsz(LE));
        let vaddr = ph.p_vaddr(LE);
        check_in_file(&what, offset, filesz, len)?;
        if filesz > memsz {
            return Err(ElfError::Malformed(format!(
                "{what} has more bytes in the file ({filesz:#x}) than in memory ({memsz:#x})"
            )));
        }
        if vaddr.checked_add(memsz).is_none() {
            return Err(ElfError::Malformed(format!(
                "{what} runs past the end of the address space"
            )));
        }
        let align = ph.p_align(LE);
        if align > 1 && !align.is_power_of_two() {
            return Err(ElfError::Malformed(format!(
                "{what} has alignment {align:#x}, not a power of two"
            )));
        }
        if memsz == 0 {
            continue;
        }
        let segment = Segment {
            index,
            vaddr,
            memsz,
            offset,
            filesz,
        };
        if ph.p_flags(LE) & elf::PF_X != 0 {
            code.push(segment);
        } else {
            data.push(segment);
        }
    }
    if code.is_empty() {
        return Err(ElfError::NoCode);
    }
    check_disjoint(
        code.iter()
            .chain(&data)
            .map(|s| (s.vaddr, s.vaddr + s.memsz, format!("segment #{}", s.index)))
            .collect(),
    )?;

    // Each region spans its segments, gaps included (the gaps load as zeros).
    let span = |segments: &[Segment]| -> (u64, u64) {
        let start = segments.iter().map(|s| s.vaddr).min().unwrap_or(0);
        let end = segments
            .iter()
            .map(|s| s.vaddr + s.memsz)
            .max()
            .unwrap_or(0);
        (start, end)
    };
    let (text_start, text_end) = span(&code);
    let (data_start, data_end) = span(&data);
    let text_size = text_end - text_start;
    let data_size = data_end - data_start;
    if text_size.saturating_add(data_size) > MAX_IMAGE_SIZE {
        return Err(ElfError::TooLarge {
            what: "the executable's segments".into(),
            size: text_size.saturating_add(data_size),
            limit: MAX_IMAGE_SIZE,
        });
    }
    if data_size > 0 && text_start < data_end && data_start < text_end {
        return Err(ElfError::Overlap {
            first: "the code segments".into(),
            second: "the data segments".into(),
        });
    }

    let mut contents = Vec::new();
    let mut chunks = Vec::new();
    for (region, segments, start) in [
        (Region::Text, &code, text_start),
        (Region::Data, &data, data_start),
    ] {
        for segment in segments.iter() {
            if segment.filesz == 0 {
                continue;
            }
            // Checked against the file above.
            let from = segment.offset as usize;
            let bytes = file
                .data
                .get(from..from + segment.filesz as usize)
                .ok_or_else(|| internal("a segment lies outside the file"))?;
            chunks.push(Chunk {
                region,
                offset: segment.vaddr - start,
                start: contents.len(),
                len: bytes.len(),
            });
            contents.extend_from_slice(bytes);
        }
    }

    // Symbols are optional (a stripped executable has none) and already absolute.
    let mut symbols = Vec::new();
    if let Some(index) = file.symtab_index()? {
        let symtab = file.symbol_table(index)?;
        for sym in symtab.symbols() {
            let shndx = sym.st_shndx(LE);
            if shndx == elf::SHN_UNDEF || shndx == elf::SHN_ABS || sym.st_name(LE) == 0 {
                continue;
            }
            let (Some(kind), Some(binding)) = (symbol_kind(sym.st_type()), binding(sym.st_bind()))
            else {
                continue;
            };
            let address = sym.st_value(LE);
            let (region, offset) = if (text_start..text_end).contains(&address) {
                (Region::Text, address - text_start)
            } else if (data_start..data_end).contains(&address) {
                (Region::Data, address - data_start)
            } else {
                continue;
            };
            let Ok(name) = symtab.symbol_name(LE, sym) else {
                continue;
            };
            symbols.push(Symbol {
                name: file.owned_name(name)?,
                kind,
                binding,
                region,
                offset,
                size: sym.st_size(LE),
            });
        }
    }

    let entry = (text_start..text_end)
        .contains(&file.entry)
        .then(|| file.entry - text_start);
    Ok(ParsedBinary {
        kind: BinaryKind::Executable,
        text_size,
        // The bases are fixed, so alignment is whatever the linker chose; report what the
        // instructions need at least.
        text_align: INSTRUCTION_ALIGN,
        data_size,
        data_align: 1,
        link_address: Some((text_start, if data_size > 0 { data_start } else { 0 })),
        entry,
        contents,
        chunks,
        relocations: Vec::new(),
        symbols,
        section_names: file.names.clone(),
    })
}

// ---------------------------------------------------------------------------------------------
// Linking
// ---------------------------------------------------------------------------------------------

/// Places a parsed binary at `text_base` (instruction memory) and `data_base` (module data)
/// and applies its relocations.
///
/// The bases must be aligned to [`ParsedBinary::text_align`] and
/// [`ParsedBinary::data_align`]; an executable accepts only its
/// [`ParsedBinary::link_address`] (its data base is not checked when it has no data). Fails
/// when a relocated value does not fit its instruction field at these addresses, e.g. a
/// `medlow` object whose data lies above 2 GiB, or `medany` code more than 2 GiB from its data.
pub fn link(
    parsed: &ParsedBinary,
    text_base: u64,
    data_base: u64,
) -> Result<LinkedImage, ElfError> {
    if let Some((text, data)) = parsed.link_address {
        if text_base != text {
            return Err(ElfError::FixedAddress {
                region: Region::Text,
                linked: text,
                requested: text_base,
            });
        }
        if parsed.data_size > 0 && data_base != data {
            return Err(ElfError::FixedAddress {
                region: Region::Data,
                linked: data,
                requested: data_base,
            });
        }
    }
    let bases = Bases {
        text: check_base(Region::Text, text_base, parsed.text_size, parsed.text_align)?,
        data: check_base(Region::Data, data_base, parsed.data_size, parsed.data_align)?,
    };

    // Sizes are capped at MAX_IMAGE_SIZE by `parse`, so these allocations are bounded.
    let mut text = vec![0u8; parsed.text_size as usize];
    let mut data = vec![0u8; parsed.data_size as usize];
    for chunk in &parsed.chunks {
        let region = match chunk.region {
            Region::Text => &mut text,
            Region::Data => &mut data,
        };
        let bytes = parsed.contents.get(chunk.start..chunk.start + chunk.len);
        let offset = chunk.offset as usize;
        let place = region.get_mut(offset..offset + chunk.len);
        match (place, bytes) {
            (Some(place), Some(bytes)) => place.copy_from_slice(bytes),
            _ => return Err(internal("a chunk lies outside its region")),
        }
    }
    for relocation in &parsed.relocations {
        apply(parsed, relocation, &bases, &mut text, &mut data)?;
    }

    let symbols: Vec<LinkedSymbol> = parsed
        .symbols
        .iter()
        .map(|s| LinkedSymbol {
            name: s.name.clone(),
            kind: s.kind,
            binding: s.binding,
            address: bases.address(s.region, s.offset),
            size: s.size,
        })
        .collect();
    // A "function" outside text (a mislabelled symbol) would only fault when launched.
    let functions = parsed
        .symbols
        .iter()
        .zip(&symbols)
        .filter(|(s, _)| {
            s.kind == SymbolKind::Function
                && s.binding != SymbolBinding::Local
                && s.region == Region::Text
        })
        .map(|(_, linked)| (linked.name.clone(), linked.address))
        .collect();
    Ok(LinkedImage {
        text_base,
        text,
        data_base,
        data,
        functions,
        symbols,
        entry: parsed.entry.map(|offset| text_base + offset),
    })
}

/// Bugs in this module, reported instead of panicking (they cannot come from a file).
fn internal(what: &str) -> ElfError {
    ElfError::Malformed(format!("internal loader error: {what}"))
}

fn check_base(region: Region, base: u64, size: u64, align: u64) -> Result<u64, ElfError> {
    if !base.is_multiple_of(align) {
        return Err(ElfError::MisalignedBase {
            region,
            base,
            align,
        });
    }
    if base.checked_add(size).is_none() {
        return Err(ElfError::AddressOverflow { region, base, size });
    }
    Ok(base)
}

struct Bases {
    text: u64,
    data: u64,
}

impl Bases {
    /// Offsets come from `parse` and are within their region, whose end was checked
    /// not to overflow.
    fn address(&self, region: Region, offset: u64) -> u64 {
        match region {
            Region::Text => self.text + offset,
            Region::Data => self.data + offset,
        }
    }

    fn resolve(&self, target: Target) -> u64 {
        match target {
            Target::At(region, offset) => self.address(region, offset),
            Target::Absolute(value) => value,
        }
    }
}

fn read_le(buf: &[u8], at: usize, width: usize) -> Option<u64> {
    let bytes = buf.get(at..at.checked_add(width)?)?;
    Some(
        bytes
            .iter()
            .rev()
            .fold(0, |acc, &b| (acc << 8) | u64::from(b)),
    )
}

fn write_le(buf: &mut [u8], at: usize, width: usize, value: u64) -> Option<()> {
    let bytes = buf.get_mut(at..at.checked_add(width)?)?;
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = (value >> (8 * i)) as u8;
    }
    Some(())
}

fn fits_signed(value: i64, bits: u32) -> bool {
    let limit = 1i64 << (bits - 1);
    (-limit..limit).contains(&value)
}

/// The `lui` / `auipc` immediate for `value`: the upper 20 bits, rounded so that adding the
/// sign-extended low 12 bits gives `value` back.
fn hi20(insn: u32, value: u64) -> Option<u32> {
    let hi = value.wrapping_add(0x800) as i64;
    fits_signed(hi, 32).then_some((insn & 0xfff) | (hi as u32 & 0xffff_f000))
}

/// Puts the low 12 bits of `value` in an I-type immediate (`addi`, loads, `jalr`).
fn lo12_i(insn: u32, value: u64) -> u32 {
    (insn & 0x000f_ffff) | ((value as u32 & 0xfff) << 20)
}

/// Puts the low 12 bits of `value` in an S-type immediate (stores).
fn lo12_s(insn: u32, value: u64) -> u32 {
    let imm = value as u32 & 0xfff;
    (insn & 0x01ff_f07f) | ((imm & 0x1f) << 7) | ((imm >> 5) << 25)
}

/// A B-type immediate (conditional branches): 13 bits, even.
fn branch(insn: u32, offset: u64) -> u32 {
    let imm = offset as u32;
    (insn & 0x01ff_f07f)
        | (((imm >> 12) & 1) << 31)
        | (((imm >> 5) & 0x3f) << 25)
        | (((imm >> 1) & 0xf) << 8)
        | (((imm >> 11) & 1) << 7)
}

/// A J-type immediate (`jal`): 21 bits, even.
fn jal(insn: u32, offset: u64) -> u32 {
    let imm = offset as u32;
    (insn & 0xfff)
        | (((imm >> 20) & 1) << 31)
        | (((imm >> 1) & 0x3ff) << 21)
        | (((imm >> 11) & 1) << 20)
        | (((imm >> 12) & 0xff) << 12)
}

/// Applies one relocation (RISC-V psABI: S = symbol, A = addend, P = place).
fn apply(
    parsed: &ParsedBinary,
    r: &Relocation,
    bases: &Bases,
    text: &mut [u8],
    data: &mut [u8],
) -> Result<(), ElfError> {
    let place = bases.address(r.region, r.offset);
    let value = bases.resolve(r.target).wrapping_add(r.addend as u64); // S + A
    let pcrel = value.wrapping_sub(place); // S + A - P
    let buf = match r.region {
        Region::Text => text,
        Region::Data => data,
    };
    let at = r.offset as usize;
    let out_of_range = |value: u64| ElfError::RelocationOutOfRange {
        kind: r.kind,
        section: parsed.section_name(r.section),
        offset: r.section_offset,
        value: value as i64,
    };
    let misaligned = |value: u64| ElfError::RelocationMisaligned {
        kind: r.kind,
        section: parsed.section_name(r.section),
        offset: r.section_offset,
        value: value as i64,
    };
    let read32 = |buf: &[u8], at: usize| {
        read_le(buf, at, 4)
            .map(|v| v as u32)
            .ok_or_else(|| internal("relocation outside its region"))
    };
    let write = |buf: &mut [u8], at: usize, width: usize, v: u64| {
        write_le(buf, at, width, v).ok_or_else(|| internal("relocation outside its region"))
    };

    match r.patch {
        Patch::Abs64 => write(buf, at, 8, value),
        Patch::Abs32 => {
            // Either a 32-bit address or a sign-extended negative one, as lld accepts.
            if value > u64::from(u32::MAX) && !fits_signed(value as i64, 32) {
                return Err(out_of_range(value));
            }
            write(buf, at, 4, value)
        }
        Patch::Hi20 => {
            let insn = hi20(read32(buf, at)?, value).ok_or_else(|| out_of_range(value))?;
            write(buf, at, 4, insn.into())
        }
        Patch::Lo12I => write(buf, at, 4, lo12_i(read32(buf, at)?, value).into()),
        Patch::Lo12S => write(buf, at, 4, lo12_s(read32(buf, at)?, value).into()),
        Patch::PcrelHi20 => {
            let insn = hi20(read32(buf, at)?, pcrel).ok_or_else(|| out_of_range(pcrel))?;
            write(buf, at, 4, insn.into())
        }
        Patch::PcrelLo12 { store, hi } => {
            let hi = hi.ok_or_else(|| internal("unpaired %pcrel_lo"))?;
            let hi_value = bases
                .resolve(hi.target)
                .wrapping_add(hi.addend as u64)
                .wrapping_sub(bases.address(hi.region, hi.offset));
            let insn = read32(buf, at)?;
            let insn = if store {
                lo12_s(insn, hi_value)
            } else {
                lo12_i(insn, hi_value)
            };
            write(buf, at, 4, insn.into())
        }
        Patch::Call => {
            let auipc = hi20(read32(buf, at)?, pcrel).ok_or_else(|| out_of_range(pcrel))?;
            let jalr = lo12_i(read32(buf, at + 4)?, pcrel);
            write(buf, at, 4, auipc.into())?;
            write(buf, at + 4, 4, jalr.into())
        }
        Patch::Branch => {
            if !fits_signed(pcrel as i64, 13) {
                return Err(out_of_range(pcrel));
            }
            if pcrel & 1 != 0 {
                return Err(misaligned(pcrel));
            }
            write(buf, at, 4, branch(read32(buf, at)?, pcrel).into())
        }
        Patch::Jal => {
            if !fits_signed(pcrel as i64, 21) {
                return Err(out_of_range(pcrel));
            }
            if pcrel & 1 != 0 {
                return Err(misaligned(pcrel));
            }
            write(buf, at, 4, jal(read32(buf, at)?, pcrel).into())
        }
        Patch::Add(width) | Patch::Sub(width) => {
            let width = usize::from(width);
            let old = read_le(buf, at, width).ok_or_else(|| internal("ADD/SUB outside"))?;
            let new = if matches!(r.patch, Patch::Add(_)) {
                old.wrapping_add(value)
            } else {
                old.wrapping_sub(value)
            };
            write(buf, at, width, new)
        }
        Patch::Set(width) => write(buf, at, usize::from(width), value),
        Patch::Set6 | Patch::Sub6 => {
            let old = read_le(buf, at, 1).ok_or_else(|| internal("SET6/SUB6 outside"))?;
            let low = if r.patch == Patch::Set6 {
                value
            } else {
                old.wrapping_sub(value)
            };
            write(buf, at, 1, (old & 0xc0) | (low & 0x3f))
        }
        Patch::Pcrel32 => {
            if !fits_signed(pcrel as i64, 32) {
                return Err(out_of_range(pcrel));
            }
            write(buf, at, 4, pcrel)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    // npusim_device::abi::CODE_BASE and MODULE_DATA_BASE: where the runtime puts binaries.
    const TEXT: u64 = 0x4000_0000;
    const DATA: u64 = 0x5000_0000;

    /// Every committed kernel object and the global functions it must export.
    const KERNELS: &[(&str, &[&str])] = &[
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

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn kernel(name: &str) -> Vec<u8> {
        let path = repo().join("examples/kernels").join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn linked(name: &str) -> LinkedImage {
        let parsed = parse(&kernel(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        link(&parsed, TEXT, DATA).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn symbol<'a>(image: &'a LinkedImage, name: &str) -> &'a LinkedSymbol {
        image
            .symbols
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no symbol {name}"))
    }

    fn data_at(image: &LinkedImage, address: u64, width: usize) -> u64 {
        let at = (address - image.data_base) as usize;
        read_le(&image.data, at, width).expect("address inside data")
    }

    // -- Raw ELF64 editing, to make broken files from good ones. ------------------------------

    fn get(bytes: &[u8], at: usize, width: usize) -> u64 {
        read_le(bytes, at, width).unwrap()
    }

    fn put(bytes: &mut [u8], at: usize, width: usize, value: u64) {
        write_le(bytes, at, width, value).unwrap();
    }

    /// The file offset of section header `index`.
    fn shdr(bytes: &[u8], index: usize) -> usize {
        get(bytes, 0x28, 8) as usize + index * 64
    }

    /// The index of the section called `name`.
    fn section(bytes: &[u8], name: &str) -> usize {
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
    fn entry(bytes: &[u8], name: &str, entry: usize, size: usize) -> usize {
        get(bytes, shdr(bytes, section(bytes, name)) + 0x18, 8) as usize + entry * size
    }

    /// The file offset of the symbol table entry of the symbol called `name`.
    fn sym(bytes: &[u8], name: &str) -> usize {
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
    fn computed_addresses(image: &LinkedImage) -> Vec<u64> {
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

    // -- The committed kernels. --------------------------------------------------------------

    #[test]
    fn committed_kernels_export_their_entry_points() {
        for &(name, functions) in KERNELS {
            let image = linked(name);
            for &function in functions {
                let address = image
                    .function(function)
                    .unwrap_or_else(|| panic!("{name} does not export {function}"));
                assert!((TEXT..TEXT + image.text.len() as u64).contains(&address));
                assert_eq!(address % 4, 0, "{name}: {function} misaligned");
            }
            let parsed = parse(&kernel(name)).unwrap();
            assert_eq!(parsed.kind(), BinaryKind::Relocatable);
            assert_eq!(image.text.len() as u64, parsed.text_size());
            assert_eq!(image.data.len() as u64, parsed.data_size());
        }
    }

    #[test]
    fn static_helpers_are_local_and_not_launchable() {
        let image = linked("sort.o");
        assert_eq!(symbol(&image, "classify_one").binding, SymbolBinding::Local);
        assert_eq!(image.function("classify_one"), None);
        let sort = image.function("sort_i32").unwrap();
        assert_eq!(image.symbolize(sort + 8), Some(("sort_i32", 8)));
        assert_eq!(image.symbolize(DATA), None);
    }

    #[test]
    fn vector_add_is_all_text() {
        let parsed = parse(&kernel("vector_add.o")).unwrap();
        assert_eq!(parsed.data_size(), 0);
        assert_eq!(parsed.text_size() % 4, 0);
        assert_eq!(parsed.text_align(), 4);
        assert_eq!(parsed.function_offset("vadd_f32"), Some(0));
    }

    /// Both code models reach .rodata, .sdata and .sbss: medany with auipc, medlow with lui.
    #[test]
    fn data_references_resolve_to_their_symbols_in_both_code_models() {
        for name in ["sort.o", "sort_medlow.o"] {
            let image = linked(name);
            let computed = computed_addresses(&image);
            for target in ["SORT_GAPS", "sort_calls", "sort_version"] {
                let address = symbol(&image, target).address;
                assert!(
                    computed.contains(&address),
                    "{name}: no instruction pair computes {target} at {address:#x}"
                );
            }
            let gaps = symbol(&image, "SORT_GAPS").address;
            assert_eq!(data_at(&image, gaps, 4), 701);
            assert_eq!(data_at(&image, gaps + 28, 4), 1);
            assert_eq!(
                data_at(&image, symbol(&image, "sort_version").address, 4),
                3
            );
        }
    }

    /// The switch's jump table (the first data in both builds) holds code addresses inside
    /// classify_one: R_RISCV_64 entries for medany, R_RISCV_32 for medlow.
    #[test]
    fn jump_table_entries_point_into_their_function() {
        for (name, width) in [("sort.o", 8), ("sort_medlow.o", 4)] {
            let image = linked(name);
            let function = symbol(&image, "classify_one");
            let range = function.address..function.address + function.size;
            for i in 0..7 {
                let entry = data_at(&image, DATA + i * width as u64, width);
                assert!(range.contains(&entry), "{name}: entry {i} = {entry:#x}");
            }
        }
    }

    #[test]
    fn string_literal_reference_reaches_the_string() {
        let image = linked("faults.o");
        let message = b"call_abort: giving up on purpose\0";
        let found = computed_addresses(&image).into_iter().any(|address| {
            let at = address.wrapping_sub(DATA) as usize;
            image.data.get(at..at + message.len()) == Some(&message[..])
        });
        assert!(found, "no auipc/addi pair computes the message's address");
    }

    #[test]
    fn reloc_probe_table_holds_the_relocated_values() {
        let image = linked("reloc_probe.o");
        let table = symbol(&image, "probe_table").address;
        let probe = symbol(&image, "reloc_probe").address;
        let call_target = symbol(&image, "probe_call_target").address;
        let jal_target = symbol(&image, "probe_jal_target").address;
        let word = symbol(&image, "probe_word").address;
        let distance = call_target - probe;
        assert_eq!(data_at(&image, table, 8), probe); // R_RISCV_64
        assert_eq!(data_at(&image, table + 8, 4), word); // R_RISCV_32
        assert_eq!(data_at(&image, table + 12, 4), distance); // ADD32/SUB32
        assert_eq!(data_at(&image, table + 16, 8), distance); // ADD64/SUB64
        assert_eq!(data_at(&image, table + 24, 2), distance); // ADD16/SUB16
        assert_eq!(data_at(&image, table + 26, 1), distance & 0xff); // ADD8/SUB8
        assert_eq!(data_at(&image, table + 27, 1), 0xc0 | (call_target & 0x3f)); // SET6
        let sub6 = 0xc0 | (0x3fu64.wrapping_sub(probe) & 0x3f);
        assert_eq!(data_at(&image, table + 28, 1), sub6); // SUB6
        assert_eq!(data_at(&image, table + 29, 1), jal_target & 0xff); // SET8
        assert_eq!(data_at(&image, table + 30, 2), jal_target & 0xffff); // SET16
        assert_eq!(data_at(&image, table + 32, 4), jal_target & 0xffff_ffff); // SET32
        let pcrel = probe.wrapping_sub(table + 36) & 0xffff_ffff;
        assert_eq!(data_at(&image, table + 36, 4), pcrel); // 32_PCREL
        assert_eq!(data_at(&image, word, 4), 0x1234_5678);
    }

    #[test]
    fn linking_at_other_bases_moves_every_address() {
        let parsed = parse(&kernel("sort.o")).unwrap();
        let (text, data) = (TEXT + 0x12_3000, DATA + 0x0abc_d000);
        let image = link(&parsed, text, data).unwrap();
        let gaps = symbol(&image, "SORT_GAPS").address;
        assert!(computed_addresses(&image).contains(&gaps));
        assert_eq!(image.function("sort_i32"), Some(text));
    }

    // -- Agreement with the real linker. -----------------------------------------------------

    /// A tool from LLVM 16, or its unversioned name, if it is installed.
    fn llvm_tool(name: &str) -> Option<String> {
        [format!("{name}-16"), name.to_owned()]
            .into_iter()
            .find(|tool| {
                Command::new(tool)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
    }

    /// The same layout the loader uses, as an lld linker script: text sections in order,
    /// then data sections with contents in order, then the zeroed ones.
    fn linker_script(text: u64, data: u64) -> String {
        format!(
            "PHDRS {{ text PT_LOAD FLAGS(5); data PT_LOAD FLAGS(6); }}\n\
             SECTIONS {{\n\
               . = {text:#x};\n\
               .text : {{ *(.text .text.*) }} :text\n\
               . = {data:#x};\n\
               .data : {{ *(.rodata .rodata.* .srodata .srodata.* .data .data.* .sdata .sdata.*) \
                          *(.sbss .sbss.* .bss .bss.* COMMON) }} :data\n\
               /DISCARD/ : {{ *(.eh_frame) }}\n\
             }}\n"
        )
    }

    /// Links every committed kernel with ld.lld (no relaxation) at the same bases and checks
    /// that the loader produces the same bytes, that lld's symbol addresses agree, and that
    /// the executable lld wrote loads (as ET_EXEC) to those same bytes. Skipped, with a note,
    /// where LLVM's tools are not installed.
    #[test]
    fn links_byte_identical_to_lld() {
        let (Some(lld), Some(objcopy)) = (llvm_tool("ld.lld"), llvm_tool("llvm-objcopy")) else {
            println!("note: ld.lld-16 / llvm-objcopy-16 not found; skipping the lld comparison");
            return;
        };
        let dir = std::env::temp_dir().join(format!("npusim-elf-lld-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (text, data) in [(TEXT, DATA), (TEXT + 0x12_3000, DATA + 0x0abc_d000)] {
            let script = dir.join("kernel.ld");
            std::fs::write(&script, linker_script(text, data)).unwrap();
            for &(name, functions) in KERNELS {
                let ours = link(&parse(&kernel(name)).unwrap(), text, data).unwrap();
                let object = repo().join("examples/kernels").join(name);
                let exe = dir.join(format!("{name}.elf"));
                let status = Command::new(&lld)
                    .args(["--no-relax", "-e", functions[0], "-T"])
                    .arg(&script)
                    .arg(&object)
                    .arg("-o")
                    .arg(&exe)
                    .status()
                    .unwrap();
                assert!(status.success(), "ld.lld failed on {name}");
                for (section, bytes) in [(".text", &ours.text), (".data", &ours.data)] {
                    let out = dir.join(format!("{name}{section}.bin"));
                    let status = Command::new(&objcopy)
                        .args(["-O", "binary", "--only-section", section])
                        .arg(&exe)
                        .arg(&out)
                        .status()
                        .unwrap();
                    assert!(status.success(), "llvm-objcopy failed on {name}");
                    let theirs = std::fs::read(&out).unwrap();
                    assert!(
                        theirs == *bytes,
                        "{name} at {text:#x}/{data:#x}: {section} differs from ld.lld's \
                         ({} vs {} bytes, first difference at {:?})",
                        bytes.len(),
                        theirs.len(),
                        bytes.iter().zip(&theirs).position(|(a, b)| a != b)
                    );
                }
                let executable = parse(&std::fs::read(&exe).unwrap()).unwrap();
                assert_eq!(executable.kind(), BinaryKind::Executable);
                let reloaded = link(&executable, text, data).unwrap();
                assert_eq!(reloaded.text, ours.text, "{name}: executable text");
                assert_eq!(reloaded.data, ours.data, "{name}: executable data");
                assert_eq!(reloaded.functions, ours.functions, "{name}: lld's symbols");
                println!("{name} at {text:#x}/{data:#x}: identical to ld.lld");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    // -- Executables. -----------------------------------------------------------------------

    /// `sort_medany.elf` in the seed corpus is sort.o linked by ld.lld at TEXT / DATA.
    fn corpus_file(name: &str) -> Vec<u8> {
        std::fs::read(repo().join("fuzz/corpus/elf_loader").join(name)).unwrap()
    }

    #[test]
    fn executable_loads_only_at_its_link_address() {
        let parsed = parse(&corpus_file("sort_medany.elf")).unwrap();
        assert_eq!(parsed.kind(), BinaryKind::Executable);
        assert_eq!(parsed.link_address(), Some((TEXT, DATA)));
        assert_eq!(
            link(&parsed, TEXT + 0x1000, DATA),
            Err(ElfError::FixedAddress {
                region: Region::Text,
                linked: TEXT,
                requested: TEXT + 0x1000
            })
        );
        assert!(matches!(
            link(&parsed, TEXT, DATA + 8),
            Err(ElfError::FixedAddress {
                region: Region::Data,
                ..
            })
        ));
        let image = link(&parsed, TEXT, DATA).unwrap();
        let object = linked("sort.o");
        assert_eq!(image.text, object.text);
        assert_eq!(image.data, object.data);
        assert_eq!(image.function("sort_i32"), object.function("sort_i32"));
        assert_eq!(image.entry, object.function("sort_i32"));
    }

    // -- Rejected files. ----------------------------------------------------------------------

    fn parse_err(bytes: &[u8]) -> ElfError {
        parse(bytes).expect_err("the file should be rejected")
    }

    #[test]
    fn headers_that_are_not_an_npu_elf_are_rejected() {
        let good = kernel("saxpy.o");
        assert!(matches!(parse_err(&[]), ElfError::Truncated { .. }));
        assert!(matches!(parse_err(b"\x7fEL"), ElfError::Truncated { .. }));
        assert!(matches!(parse_err(&good[..40]), ElfError::Truncated { .. }));
        assert_eq!(parse_err(b"MZ\x90\0 this is a PE file"), ElfError::BadMagic);

        let edit = |at: usize, width: usize, value: u64| {
            let mut bytes = good.clone();
            put(&mut bytes, at, width, value);
            parse_err(&bytes)
        };
        assert_eq!(edit(4, 1, 1), ElfError::WrongClass(1));
        assert_eq!(edit(5, 1, 2), ElfError::WrongEndianness(2));
        assert_eq!(edit(0x12, 2, 62), ElfError::WrongMachine(62));
        assert_eq!(edit(0x10, 2, 3), ElfError::WrongType(3));
        assert_eq!(edit(0x30, 4, 0x4), ElfError::FloatAbi("double (lp64d)"));
        assert_eq!(edit(0x30, 4, 0x0), ElfError::FloatAbi("soft (lp64)"));
        assert_eq!(edit(0x30, 4, 0x3), ElfError::CompressedInstructions);
        assert_eq!(edit(0x30, 4, 0xa), ElfError::EmbeddedAbi);
    }

    #[test]
    fn every_truncation_of_a_kernel_is_an_error() {
        let good = kernel("sort.o");
        for len in 0..good.len() {
            assert!(parse(&good[..len]).is_err(), "a {len}-byte prefix parsed");
        }
        let shoff = get(&good, 0x28, 8) as usize;
        assert!(matches!(
            parse_err(&good[..shoff + 64]),
            ElfError::OutOfBounds { what, .. } if what == "section header table"
        ));
    }

    #[test]
    fn misaligned_input_parses_like_aligned_input() {
        let good = kernel("sort.o");
        let mut shifted = vec![0u8; good.len() + 1];
        shifted[1..].copy_from_slice(&good);
        assert_eq!(parse(&shifted[1..]), parse(&good));
    }

    #[test]
    fn sections_outside_the_file_or_overlapping_are_rejected() {
        let good = kernel("sort.o");
        let text = shdr(&good, section(&good, ".text"));
        let rodata = shdr(&good, section(&good, ".rodata"));

        let mut bytes = good.clone();
        put(&mut bytes, text + 0x20, 8, 0x10_0000);
        assert!(
            matches!(parse_err(&bytes), ElfError::OutOfBounds { what, .. } if what == "section .text")
        );

        let mut bytes = good.clone();
        put(&mut bytes, text + 0x18, 8, u64::MAX - 4);
        assert!(matches!(parse_err(&bytes), ElfError::OutOfBounds { .. }));

        let mut bytes = good.clone();
        let text_offset = get(&good, text + 0x18, 8);
        put(&mut bytes, rodata + 0x18, 8, text_offset + 8);
        assert!(matches!(parse_err(&bytes), ElfError::Overlap { .. }));

        let mut bytes = good.clone();
        put(&mut bytes, text + 0x18, 8, 0x20);
        assert!(matches!(
            parse_err(&bytes),
            ElfError::Overlap { first, .. } if first == "the ELF header"
        ));
    }

    #[test]
    fn absurd_sizes_and_alignments_are_rejected_before_allocating() {
        let good = kernel("sort.o");
        let sbss = shdr(&good, section(&good, ".sbss"));
        let text = shdr(&good, section(&good, ".text"));

        let mut bytes = good.clone();
        put(&mut bytes, sbss + 0x20, 8, 1 << 40);
        assert!(matches!(parse_err(&bytes), ElfError::TooLarge { .. }));

        let mut bytes = good.clone();
        put(&mut bytes, sbss + 0x20, 8, u64::MAX);
        assert!(matches!(parse_err(&bytes), ElfError::TooLarge { .. }));

        let mut bytes = good.clone();
        put(&mut bytes, sbss + 0x20, 8, MAX_IMAGE_SIZE);
        assert!(matches!(parse_err(&bytes), ElfError::TooLarge { .. }));

        let mut bytes = good.clone();
        put(&mut bytes, text + 0x30, 8, 12);
        assert_eq!(
            parse_err(&bytes),
            ElfError::BadAlignment {
                section: "section .text".into(),
                align: 12
            }
        );

        let mut bytes = good.clone();
        put(&mut bytes, sbss + 0x30, 8, 1 << 40);
        assert!(matches!(parse_err(&bytes), ElfError::BadAlignment { .. }));
    }

    #[test]
    fn bad_relocations_are_rejected_with_their_place() {
        let good = kernel("sort.o");
        let rela = |i: usize| entry(&good, ".rela.text", i, 24);
        let first_offset = get(&good, rela(0), 8);

        let mut bytes = good.clone();
        put(&mut bytes, rela(0) + 8, 4, u64::from(elf::R_RISCV_GOT_HI20));
        assert_eq!(
            parse_err(&bytes),
            ElfError::UnsupportedRelocation {
                kind: elf::R_RISCV_GOT_HI20,
                section: ".text".into(),
                offset: first_offset
            }
        );
        assert!(parse_err(&bytes).to_string().contains("R_RISCV_GOT_HI20"));

        let mut bytes = good.clone();
        put(&mut bytes, rela(0) + 8, 4, u64::from(elf::R_RISCV_ALIGN));
        let err = parse_err(&bytes);
        assert!(matches!(err, ElfError::RelaxationRequired { .. }));
        assert!(err.to_string().contains("-mno-relax"));

        let mut bytes = good.clone();
        put(&mut bytes, rela(0) + 12, 4, 9999);
        assert!(matches!(
            parse_err(&bytes),
            ElfError::SymbolIndexOutOfRange { index: 9999, .. }
        ));

        let mut bytes = good.clone();
        put(&mut bytes, rela(0), 8, 0x1f4 - 2);
        assert!(matches!(
            parse_err(&bytes),
            ElfError::RelocationOffsetOutOfBounds { .. }
        ));

        // The auipc's %pcrel_hi turned into %hi: its %pcrel_lo partner is left without one.
        let mut bytes = good.clone();
        put(&mut bytes, rela(0) + 8, 4, u64::from(elf::R_RISCV_HI20));
        assert!(matches!(
            parse_err(&bytes),
            ElfError::UnpairedPcrelLo { .. }
        ));

        // R_RISCV_RELAX and R_RISCV_NONE are accepted and do nothing.
        let mut bytes = good.clone();
        put(&mut bytes, rela(0) + 8, 4, u64::from(elf::R_RISCV_RELAX));
        put(&mut bytes, rela(1) + 8, 4, u64::from(elf::R_RISCV_NONE));
        put(&mut bytes, rela(2) + 8, 4, u64::from(elf::R_RISCV_NONE));
        assert!(parse(&bytes).is_ok());
    }

    #[test]
    fn undefined_symbols_are_named() {
        let mut bytes = kernel("sort.o");
        let at = sym(&bytes, "sort_version");
        put(&mut bytes, at + 6, 2, 0);
        assert_eq!(
            parse_err(&bytes),
            ElfError::UndefinedSymbol("sort_version".into())
        );
        // A weak undefined symbol is a null pointer instead.
        put(
            &mut bytes,
            at + 4,
            1,
            u64::from(elf::STB_WEAK << 4 | elf::STT_OBJECT),
        );
        assert!(parse(&bytes).is_ok());
    }

    #[test]
    fn symbols_in_unloaded_sections_cannot_be_relocated_against() {
        let mut bytes = kernel("sort.o");
        let sdata = shdr(&bytes, section(&bytes, ".sdata"));
        put(&mut bytes, sdata + 8, 8, 0); // drop SHF_ALLOC
        assert!(matches!(
            parse_err(&bytes),
            ElfError::SymbolNotLoaded { symbol, .. } if symbol == "sort_version"
        ));
    }

    #[test]
    fn functions_outside_text_are_not_launchable() {
        let mut bytes = kernel("sort.o");
        let at = sym(&bytes, "sort_i32");
        let sdata = section(&bytes, ".sdata") as u64;
        put(&mut bytes, at + 6, 2, sdata);
        let image = link(&parse(&bytes).unwrap(), TEXT, DATA).unwrap();
        assert_eq!(image.function("sort_i32"), None);
        assert_eq!(symbol(&image, "sort_i32").address, DATA + 0x38);
    }

    #[test]
    fn names_cannot_multiply_the_file_size() {
        // Point the string table at a 256 KiB run of 'a's and every name at its start: a
        // million bytes of names from a quarter-megabyte file.
        let mut bytes = kernel("sort.o");
        let long_name = bytes.len() as u64;
        bytes.extend(std::iter::repeat_n(b'a', 256 << 10));
        bytes.push(0);
        let strtab = shdr(&bytes, section(&bytes, ".strtab"));
        put(&mut bytes, strtab + 0x18, 8, long_name);
        put(&mut bytes, strtab + 0x20, 8, (256 << 10) + 1);
        for i in 0..get(&bytes, 0x3c, 2) as usize {
            let at = shdr(&bytes, i);
            put(&mut bytes, at, 4, 0);
        }
        let err = parse_err(&bytes);
        assert!(err.to_string().contains("names add up"), "{err}");
    }

    #[test]
    fn code_without_text_is_rejected() {
        let mut bytes = kernel("saxpy.o");
        let text = shdr(&bytes, section(&bytes, ".text"));
        put(&mut bytes, text + 8, 8, u64::from(elf::SHF_ALLOC)); // no longer executable
        assert_eq!(parse_err(&bytes), ElfError::NoCode);
    }

    // -- Linking errors. ----------------------------------------------------------------------

    #[test]
    fn medlow_data_above_2_gib_is_out_of_range() {
        let parsed = parse(&kernel("sort_medlow.o")).unwrap();
        let err = link(&parsed, TEXT, 0x8000_0000).unwrap_err();
        assert!(
            matches!(
                err,
                ElfError::RelocationOutOfRange {
                    kind: elf::R_RISCV_HI20,
                    ..
                }
            ),
            "{err}"
        );
        // medany code reaches any data within ±2 GiB of itself.
        let parsed = parse(&kernel("sort.o")).unwrap();
        assert!(link(&parsed, TEXT, TEXT + 0x7000_0000).is_ok());
        let err = link(&parsed, TEXT, TEXT + 0x8000_0000).unwrap_err();
        assert!(matches!(
            err,
            ElfError::RelocationOutOfRange {
                kind: elf::R_RISCV_PCREL_HI20,
                ..
            }
        ));
    }

    #[test]
    fn bases_must_be_aligned_and_fit_the_address_space() {
        let parsed = parse(&kernel("sort.o")).unwrap();
        assert_eq!(parsed.data_align(), 8);
        assert_eq!(
            link(&parsed, TEXT + 2, DATA),
            Err(ElfError::MisalignedBase {
                region: Region::Text,
                base: TEXT + 2,
                align: 4
            })
        );
        assert!(matches!(
            link(&parsed, TEXT, DATA + 4),
            Err(ElfError::MisalignedBase {
                region: Region::Data,
                ..
            })
        ));
        assert!(matches!(
            link(&parsed, u64::MAX - 3, DATA),
            Err(ElfError::AddressOverflow {
                region: Region::Text,
                ..
            })
        ));
    }

    /// A one-instruction binary with one relocation against text offset `target`, for range
    /// checks that no real object can reach.
    fn synthetic(insn: u32, kind: u32, patch: Patch, target: u64) -> ParsedBinary {
        ParsedBinary {
            kind: BinaryKind::Relocatable,
            text_size: target + 4,
            text_align: 4,
            data_size: 0,
            data_align: 1,
            link_address: None,
            entry: None,
            contents: insn.to_le_bytes().to_vec(),
            chunks: vec![Chunk {
                region: Region::Text,
                offset: 0,
                start: 0,
                len: 4,
            }],
            relocations: vec![Relocation {
                kind,
                patch,
                region: Region::Text,
                offset: 0,
                target: Target::At(Region::Text, target),
                addend: 0,
                section: 1,
                section_offset: 0,
            }],
            symbols: Vec::new(),
            section_names: vec![String::new(), ".text".into()],
        }
    }

    fn first_word(image: &LinkedImage) -> u32 {
        u32::from_le_bytes(image.text[..4].try_into().unwrap())
    }

    #[test]
    fn branches_and_jumps_encode_and_check_their_range() {
        const BEQ_ZERO_ZERO: u32 = 0x0000_0063; // beq x0, x0, 0
        const JAL_ZERO: u32 = 0x0000_006f; // jal x0, 0
        let branch = |target| synthetic(BEQ_ZERO_ZERO, elf::R_RISCV_BRANCH, Patch::Branch, target);
        let jump = |target| synthetic(JAL_ZERO, elf::R_RISCV_JAL, Patch::Jal, target);

        // Encodings as the assembler writes `beq x0, x0, .+8` and `jal x0, .+8`.
        assert_eq!(
            first_word(&link(&branch(8), TEXT, DATA).unwrap()),
            0x0000_0463
        );
        assert_eq!(
            first_word(&link(&jump(8), TEXT, DATA).unwrap()),
            0x0080_006f
        );
        // The largest forward displacements: +4094 and +1 MiB - 2.
        assert_eq!(
            first_word(&link(&branch(4094), TEXT, DATA).unwrap()),
            0x7e00_0fe3
        );
        assert_eq!(
            first_word(&link(&jump(0xf_fffe), TEXT, DATA).unwrap()),
            0x7fff_f06f
        );

        assert!(matches!(
            link(&branch(4096), TEXT, DATA),
            Err(ElfError::RelocationOutOfRange { value: 4096, .. })
        ));
        assert!(matches!(
            link(&jump(1 << 20), TEXT, DATA),
            Err(ElfError::RelocationOutOfRange { .. })
        ));
        assert!(matches!(
            link(&branch(5), TEXT, DATA),
            Err(ElfError::RelocationMisaligned { value: 5, .. })
        ));
    }

    #[test]
    fn upper_immediates_round_for_a_negative_low_part() {
        // lui a0, %hi(0x5000_0800): the low part 0x800 is -2048 once sign-extended, so the
        // upper part must be one more page.
        assert_eq!(hi20(0x0000_0537, 0x5000_0800), Some(0x5000_1537));
        assert_eq!(lo12_i(0x0005_0513, 0x5000_0800), 0x8005_0513);
        assert_eq!(hi20(0x0000_0537, 0x7fff_f800), None);
        assert_eq!(
            hi20(0x0000_0537, (-0x8000_0000i64) as u64),
            Some(0x8000_0537)
        );
        // sw a1, -4(a0): imm -4 = 0xffc splits into imm[11:5] = 0x7f, imm[4:0] = 0x1c.
        assert_eq!(lo12_s(0x00b5_2023, 0xffc), 0xfeb5_2e23);
    }

    // -- The fuzz corpus as regression tests. --------------------------------------------------

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
