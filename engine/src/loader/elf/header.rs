//! The first stage of [`parse`](super::parse), common to both kinds of file: the
//! identification bytes, the ELF header and the section header table, and the bounds and
//! overlap checks the later stages use on sections and segments.

use std::cell::Cell;

use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, SectionHeader, SectionTable};

use super::ElfError;

/// Offsets of the class and data-encoding bytes in `e_ident`.
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;

/// Names may add up to twice the file's size plus this (see `File::name_budget`).
const NAME_BUDGET_BASE: usize = 64 << 10;

const ELF_HEADER_SIZE: u64 = 64;
const SECTION_HEADER_SIZE: u64 = 64;
pub(super) const PROGRAM_HEADER_SIZE: u64 = 56;

/// The identification bytes, checked by hand so each mismatch gets its own message.
pub(super) fn check_ident(bytes: &[u8]) -> Result<(), ElfError> {
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
pub(super) struct File<'data> {
    pub(super) data: &'data [u8],
    pub(super) e_type: u16,
    pub(super) entry: u64,
    pub(super) header: &'data elf::FileHeader64<LE>,
    pub(super) sections: SectionTable<'data, elf::FileHeader64<LE>>,
    pub(super) names: Vec<String>,
    /// Bytes of section and symbol names still allowed to be copied out. Names are shared
    /// slices of a string table, so without a budget a small file whose thousands of symbols
    /// all name one long string would cost gigabytes of `String`s.
    name_budget: Cell<usize>,
}

impl<'data> File<'data> {
    pub(super) fn new(
        header: &'data elf::FileHeader64<LE>,
        data: &'data [u8],
    ) -> Result<Self, ElfError> {
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
    pub(super) fn owned_name(&self, name: &[u8]) -> Result<String, ElfError> {
        let left = self.name_budget.get();
        if name.len() > left {
            return Err(ElfError::Malformed(
                "the section and symbol names add up to far more than the file holds".into(),
            ));
        }
        self.name_budget.set(left - name.len());
        Ok(String::from_utf8_lossy(name).into_owned())
    }

    pub(super) fn name(&self, index: usize) -> String {
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
    pub(super) fn symtab_index(&self) -> Result<Option<usize>, ElfError> {
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

    pub(super) fn symbol_table(
        &self,
        index: usize,
    ) -> Result<object::read::elf::SymbolTable<'data, elf::FileHeader64<LE>>, ElfError> {
        self.sections
            .symbol_table_by_index(LE, self.data, object::SectionIndex(index))
            .map_err(|e| ElfError::Malformed(format!("symbol table: {e}")))
    }
}

/// `offset + size` when that range lies in a file of `len` bytes.
pub(super) fn check_in_file(
    what: &str,
    offset: u64,
    size: u64,
    len: usize,
) -> Result<u64, ElfError> {
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
pub(super) fn check_disjoint(mut ranges: Vec<(u64, u64, String)>) -> Result<(), ElfError> {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::parse;
    use super::*;

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
}
