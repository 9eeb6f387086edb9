//! Loading kernel binaries: the ELF objects that C kernels compile to (DESIGN.md §6).
//!
//! `load_binary` hands the file's bytes to [`elf::parse`], which checks and lays the binary out
//! without touching the world; the runtime then reserves instruction memory and module data of
//! the sizes the parse reports, and [`elf::link`] applies the relocations for those addresses.
//! Everything here is plain data in, plain data out, so it can be fuzzed and tested alone.

pub mod elf;

pub use elf::{
    BinaryKind, ElfError, LinkedImage, LinkedSymbol, ParsedBinary, Region, Symbol, SymbolBinding,
    SymbolKind, link, parse,
};
