//! The last stage: [`link`] places a parsed binary at the bases the runtime reserved, copies
//! its bytes into both regions and has `reloc` apply every relocation for those addresses.

use super::error::internal;
use super::reloc::{Target, apply};
use super::{ElfError, LinkedImage, LinkedSymbol, ParsedBinary, Region, SymbolBinding, SymbolKind};

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

pub(super) struct Bases {
    text: u64,
    data: u64,
}

impl Bases {
    /// Offsets come from `parse` and are within their region, whose end was checked
    /// not to overflow.
    pub(super) fn address(&self, region: Region, offset: u64) -> u64 {
        match region {
            Region::Text => self.text + offset,
            Region::Data => self.data + offset,
        }
    }

    pub(super) fn resolve(&self, target: Target) -> u64 {
        match target {
            Target::At(region, offset) => self.address(region, offset),
            Target::Absolute(value) => value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{BinaryKind, parse};
    use super::*;
    use std::process::Command;

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
}
