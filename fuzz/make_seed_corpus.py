#!/usr/bin/env python3
"""Writes the seed corpus for the elf_loader fuzz target into fuzz/corpus/elf_loader/.

Seeds are the committed kernel objects, two executables linked by ld.lld, and broken variants
of them (truncated, wrong header fields, bad section headers, bad relocations), so that the
fuzzer starts next to every error path. The corpus is committed; rerun this only when the
kernels change (needs ld.lld-16 for the executables). The engine's loader tests replay every
file in the corpus.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "examples", "kernels")
OUT = os.path.join(ROOT, "fuzz", "corpus", "elf_loader")
SCRIPT = """PHDRS { text PT_LOAD FLAGS(5); data PT_LOAD FLAGS(6); }
SECTIONS {
  . = 0x40000000;
  .text : { *(.text .text.*) } :text
  . = 0x50000000;
  .data : { *(.rodata .rodata.* .srodata .srodata.* .data .data.* .sdata .sdata.*)
            *(.sbss .sbss.* .bss .bss.* COMMON) } :data
  /DISCARD/ : { *(.eh_frame) }
}
"""


def kernel(name):
    with open(os.path.join(KERNELS, name), "rb") as f:
        return bytearray(f.read())


def put(data, at, fmt, value):
    struct.pack_into("<" + fmt, data, at, value)


def get(data, at, fmt):
    return struct.unpack_from("<" + fmt, data, at)[0]


def shdr(data, index):
    return get(data, 0x28, "Q") + index * 64


def section(data, name):
    count = get(data, 0x3C, "H")
    strings = get(data, shdr(data, get(data, 0x3E, "H")) + 0x18, "Q")
    for i in range(count):
        at = strings + get(data, shdr(data, i), "I")
        if data[at:data.index(0, at)] == name.encode():
            return i
    raise KeyError(name)


def field(data, name, offset):
    """The file offset of a field of the section header of section `name`."""
    return shdr(data, section(data, name)) + offset


def entry(data, name, index, size):
    return get(data, field(data, name, 0x18), "Q") + index * size


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes(data))


def mutate(base, name, edits):
    data = kernel(base) if isinstance(base, str) else bytearray(base)
    for at, fmt, value in edits(data):
        put(data, at, fmt, value)
    write(name, data)


def main():
    os.makedirs(OUT, exist_ok=True)
    # regress_* files are inputs that once broke the loader, saved by hand: keep them.
    for f in os.listdir(OUT):
        if not f.startswith("regress_"):
            os.remove(os.path.join(OUT, f))
    objects = sorted(f for f in os.listdir(KERNELS) if f.endswith(".o"))
    for f in objects:
        shutil.copy(os.path.join(KERNELS, f), os.path.join(OUT, f))

    lld = shutil.which("ld.lld-16") or shutil.which("ld.lld")
    if lld is None:
        sys.exit("ld.lld-16 not found")
    executables = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "kernel.ld")
        with open(script, "w") as f:
            f.write(SCRIPT)
        for obj, out, entry_symbol in [("sort.o", "sort_medany.elf", "sort_i32"),
                                       ("reloc_probe.o", "reloc_probe.elf", "reloc_probe")]:
            path = os.path.join(tmp, out)
            subprocess.run([lld, "--no-relax", "-N", "-e", entry_symbol, "-T", script,
                            os.path.join(KERNELS, obj), "-o", path], check=True)
            with open(path, "rb") as f:
                executables[out] = bytearray(f.read())
            write(out, executables[out])

    sort = kernel("sort.o")
    # Truncations: inside the header, mid-file, just after the section headers start.
    write("empty", b"")
    write("trunc_header", sort[:40])
    write("trunc_shdrs", sort[: get(sort, 0x28, "Q") + 64])
    write("trunc_exec", executables["sort_medany.elf"][:0x100])

    # Header fields.
    mutate("saxpy.o", "class32", lambda d: [(4, "B", 1)])
    mutate("saxpy.o", "big_endian", lambda d: [(5, "B", 2)])
    mutate("saxpy.o", "machine_x86", lambda d: [(0x12, "H", 62)])
    mutate("saxpy.o", "type_dyn", lambda d: [(0x10, "H", 3)])
    mutate("saxpy.o", "flags_rvc", lambda d: [(0x30, "I", 3)])
    mutate("saxpy.o", "flags_double", lambda d: [(0x30, "I", 4)])
    mutate("sort.o", "shnum_max", lambda d: [(0x3C, "H", 0xFFFF)])
    mutate("sort.o", "shstrndx_bad", lambda d: [(0x3E, "H", 200)])
    mutate("sort.o", "shoff_huge", lambda d: [(0x28, "Q", 1 << 62)])

    # Section headers.
    mutate("sort.o", "text_size_huge", lambda d: [(field(d, ".text", 0x20), "Q", 1 << 40)])
    mutate("sort.o", "bss_huge", lambda d: [(field(d, ".sbss", 0x20), "Q", 1 << 40)])
    mutate("sort.o", "align_odd", lambda d: [(field(d, ".text", 0x30), "Q", 12)])
    mutate("sort.o", "align_huge", lambda d: [(field(d, ".sbss", 0x30), "Q", 1 << 40)])
    mutate("sort.o", "overlap", lambda d: [(field(d, ".rodata", 0x18), "Q",
                                            get(d, field(d, ".text", 0x18), "Q") + 8)])
    mutate("sort.o", "symtab_link_bad", lambda d: [(field(d, ".symtab", 0x28), "I", 99)])
    mutate("sort.o", "rela_info_bad", lambda d: [(field(d, ".rela.text", 0x2C), "I", 99)])
    mutate("sort.o", "sdata_not_alloc", lambda d: [(field(d, ".sdata", 0x08), "Q", 0)])
    mutate("sort.o", "text_tls", lambda d: [(field(d, ".text", 0x08), "Q", 0x406)])
    mutate("sort.o", "text_nobits", lambda d: [(field(d, ".text", 0x04), "I", 8)])

    # Relocations and symbols.
    rela = lambda d, i: entry(d, ".rela.text", i, 24)
    mutate("sort.o", "reloc_got", lambda d: [(rela(d, 0) + 8, "I", 20)])
    mutate("sort.o", "reloc_align", lambda d: [(rela(d, 0) + 8, "I", 43)])
    mutate("sort.o", "reloc_unpaired", lambda d: [(rela(d, 0) + 8, "I", 26)])
    mutate("sort.o", "reloc_sym_range", lambda d: [(rela(d, 0) + 12, "I", 9999)])
    mutate("sort.o", "reloc_offset_past", lambda d: [(rela(d, 0), "Q", 0x1F2)])
    probe = lambda d, i: entry(d, ".rela.text.reloc_probe", i, 24)
    mutate("reloc_probe.o", "probe_jal_as_branch", lambda d: [(probe(d, 0) + 8, "I", 16)])
    mutate("reloc_probe.o", "probe_uleb128", lambda d: [(probe(d, 1) + 8, "I", 60)])
    symtab = lambda d: get(d, field(d, ".symtab", 0x18), "Q")
    mutate("sort.o", "sym_undefined", lambda d: [(symtab(d) + 3 * 24 + 6, "H", 0)])
    mutate("sort.o", "sym_section_bad", lambda d: [(symtab(d) + 3 * 24 + 6, "H", 500)])
    mutate("sort.o", "sym_value_past", lambda d: [(symtab(d) + 3 * 24 + 8, "Q", 1 << 40)])
    mutate("sort.o", "sym_common", lambda d: [(symtab(d) + 3 * 24 + 6, "H", 0xFFF2),
                                               (symtab(d) + 3 * 24 + 8, "Q", 8)])

    # Executables: segment fields (the first program header is at e_phoff = 64).
    exe = executables["sort_medany.elf"]
    mutate(exe, "exec_filesz_gt_memsz", lambda d: [(64 + 0x20, "Q", get(d, 64 + 0x28, "Q") + 4)])
    mutate(exe, "exec_segment_past_file", lambda d: [(64 + 0x08, "Q", 1 << 40)])
    mutate(exe, "exec_overlap", lambda d: [(64 + 56 + 0x10, "Q", 0x40000010)])
    mutate(exe, "exec_data_moved", lambda d: [(64 + 56 + 0x10, "Q", 0x4F000000)])
    mutate(exe, "exec_dynamic", lambda d: [(64 + 56, "I", 2)])
    mutate(exe, "exec_no_code", lambda d: [(64 + 4, "I", 4)])
    print(f"{len(os.listdir(OUT))} seeds in {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
