//! Why a binary is refused: the one error type of every loader stage, each message saying what
//! is wrong and how to build a binary the NPU accepts.

use super::{MAX_SECTION_ALIGN, Region, reloc_name};

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
        /// The limit ([`MAX_IMAGE_SIZE`](super::MAX_IMAGE_SIZE)).
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
    /// A base address given to [`link`](super::link) is not aligned as the binary needs.
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

/// Bugs in this module, reported instead of panicking (they cannot come from a file).
pub(super) fn internal(what: &str) -> ElfError {
    ElfError::Malformed(format!("internal loader error: {what}"))
}
