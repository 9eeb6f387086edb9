//! Relocations, both halves: what each `R_RISCV_*` type patches, decoding an object's `.rela`
//! sections during [`parse`](super::parse) (where a bad relocation fails, before any memory is
//! reserved), and applying each one during [`link`](super::link), once the regions have bases.

use std::collections::BTreeMap;

use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{Rela, SectionHeader};

use super::error::internal;
use super::header::File;
use super::linker::Bases;
use super::sections::SymPlace;
use super::{ElfError, ParsedBinary, Region};

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

/// The address a relocation's symbol stands for, once the regions have bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
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
pub(super) struct Relocation {
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

/// Decodes the relocations of the loaded sections of a relocatable object, against the
/// sections' places (`place`, by section index) and the symbols' (`sym_places`, by symbol
/// index), and pairs every `%pcrel_lo` with its `%pcrel_hi`.
pub(super) fn decode(
    file: &File<'_>,
    headers: &[&elf::SectionHeader64<LE>],
    place: &[Option<(Region, u64)>],
    symtab_index: Option<usize>,
    sym_places: &[SymPlace],
    symbol_name: impl Fn(usize) -> String,
) -> Result<Vec<Relocation>, ElfError> {
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
    Ok(relocations)
}

pub(super) fn read_le(buf: &[u8], at: usize, width: usize) -> Option<u64> {
    let bytes = buf.get(at..at.checked_add(width)?)?;
    Some(
        bytes
            .iter()
            .rev()
            .fold(0, |acc, &b| (acc << 8) | u64::from(b)),
    )
}

pub(super) fn write_le(buf: &mut [u8], at: usize, width: usize, value: u64) -> Option<()> {
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
pub(super) fn apply(
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
    use super::super::fixtures::*;
    use super::super::{BinaryKind, Chunk, LinkedImage, link, parse};
    use super::*;

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
}
