#!/usr/bin/env bash
# Regenerates kernels.bin (flat text+data at abi::CODE_BASE) and kernels.syms ("name address"
# lines) from kernels.c. Needs clang-16, lld-16 and llvm-16 binutils:
#   apt-get install -y clang-16 lld-16 llvm-16
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
clang-16 --target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -mcmodel=medany -O2 \
    -ffreestanding -nostdlib -fno-builtin -c kernels.c -o "$tmp/kernels.o"
cat > "$tmp/link.ld" <<'LD'
SECTIONS {
  . = 0x40000000;
  .text : { *(.text .text.*) }
  .rodata : { *(.rodata .rodata.* .srodata .srodata.*) }
  .data : { *(.data .data.* .sdata .sdata.*) }
  .bss : { *(.bss .bss.* .sbss .sbss.*) }
}
LD
ld.lld-16 -T "$tmp/link.ld" --no-relax -e scalar_loop "$tmp/kernels.o" -o "$tmp/kernels.elf"
llvm-objcopy-16 -O binary "$tmp/kernels.elf" kernels.bin
chmod -x kernels.bin
llvm-nm-16 --defined-only "$tmp/kernels.elf" | awk '$2 == "T" { print $3, "0x" $1 }' | sort > kernels.syms
