//! The second stage of [`parse`](super::parse) for relocatable objects: which sections are
//! loaded, where each goes in the text or data region, and where every symbol of the symbol
//! table ends up. The relocations are decoded by `reloc`, against those places.

use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{SectionHeader, Sym};

use super::header::File;
use super::{
    BinaryKind, Chunk, ElfError, INSTRUCTION_ALIGN, MAX_IMAGE_SIZE, MAX_SECTION_ALIGN,
    ParsedBinary, Region, Symbol, SymbolBinding, SymbolKind, reloc,
};

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
pub(super) enum SymPlace {
    At(Region, u64),
    Absolute(u64),
    Undefined {
        weak: bool,
    },
    /// Defined in a section that is not loaded.
    NotLoaded(usize),
}

pub(super) fn binding(st_bind: u8) -> Option<SymbolBinding> {
    match st_bind {
        elf::STB_LOCAL => Some(SymbolBinding::Local),
        elf::STB_GLOBAL | elf::STB_GNU_UNIQUE => Some(SymbolBinding::Global),
        elf::STB_WEAK => Some(SymbolBinding::Weak),
        _ => None,
    }
}

pub(super) fn symbol_kind(st_type: u8) -> Option<SymbolKind> {
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

pub(super) fn parse_relocatable(file: &File<'_>) -> Result<ParsedBinary, ElfError> {
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
    let relocations = reloc::decode(
        file,
        &headers,
        &place,
        symtab_index,
        &sym_places,
        symbol_name,
    )?;

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

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::parse;
    use super::*;

    #[test]
    fn vector_add_is_all_text() {
        let parsed = parse(&kernel("vector_add.o")).unwrap();
        assert_eq!(parsed.data_size(), 0);
        assert_eq!(parsed.text_size() % 4, 0);
        assert_eq!(parsed.text_align(), 4);
        assert_eq!(parsed.function_offset("vadd_f32"), Some(0));
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
    fn code_without_text_is_rejected() {
        let mut bytes = kernel("saxpy.o");
        let text = shdr(&bytes, section(&bytes, ".text"));
        put(&mut bytes, text + 8, 8, u64::from(elf::SHF_ALLOC)); // no longer executable
        assert_eq!(parse_err(&bytes), ElfError::NoCode);
    }
}
