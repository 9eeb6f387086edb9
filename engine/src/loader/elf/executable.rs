//! The second stage of [`parse`](super::parse) for executables: the `PT_LOAD` segments become
//! the text and data regions as linked, and the symbols, already absolute, are placed in them.
//! Nothing is relocated.

use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, Sym};

use super::error::internal;
use super::header::{File, PROGRAM_HEADER_SIZE, check_disjoint, check_in_file};
use super::sections::{binding, symbol_kind};
use super::{
    BinaryKind, Chunk, ElfError, INSTRUCTION_ALIGN, MAX_IMAGE_SIZE, ParsedBinary, Region, Symbol,
};

/// One `PT_LOAD` segment of an executable.
struct Segment {
    index: usize,
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

pub(super) fn parse_executable(file: &File<'_>) -> Result<ParsedBinary, ElfError> {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{link, parse};
    use super::*;

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
}
