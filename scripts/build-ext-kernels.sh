#!/usr/bin/env bash
# Compiles the NPU-extension kernels examples/kernels/ext_*.c (against device/sdk/npusim.h and
# device/sdk/npusim_ext.h) into the committed objects examples/kernels/ext_*.o, and links each
# object into a flat image for the device-level tests:
#
#   examples/kernels/ext_NAME.o     relocatable object (what the runtime's loader takes)
#   examples/kernels/ext_NAME.bin   .text, .rodata, .data, .bss linked contiguously at
#                                   abi::CODE_BASE (0x40000000), for device/tests/npu_kernels.rs
#   examples/kernels/ext_NAME.syms  "symbol address" lines for the image's global functions
#
#   scripts/build-ext-kernels.sh           rebuild in place
#   scripts/build-ext-kernels.sh --check   rebuild into a temporary directory and fail if any
#                                          output differs from the committed one (for CI)
#
# Flags and determinism as in scripts/build-kernels.sh; the committed outputs come from
# Debian's clang-16 / lld-16 / llvm-16 (16.0.6). Needs: apt-get install -y clang-16 lld-16 llvm-16
#
# Environment: CLANG (default clang-16), LLD (default ld.lld-16), OBJCOPY (default
# llvm-objcopy-16), NM (default llvm-nm-16).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kernels="$root/examples/kernels"
sdk="$root/device/sdk"
clang="${CLANG:-clang-16}"
lld="${LLD:-ld.lld-16}"
objcopy="${OBJCOPY:-llvm-objcopy-16}"
nm="${NM:-llvm-nm-16}"

check=0
case "${1:-}" in
    "") ;;
    --check) check=1 ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

for tool in "$clang" "$lld" "$objcopy" "$nm"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        if [[ $check == 1 ]]; then
            echo "build-ext-kernels: $tool not found; skipping the committed-output check" >&2
            exit 0
        fi
        echo "build-ext-kernels: $tool not found (apt-get install -y clang-16 lld-16 llvm-16)" >&2
        exit 1
    fi
done

common=(
    --target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -O2
    -ffreestanding -fno-builtin -nostdlib -mcmodel=medany -mno-relax -fno-pic
    -fno-ident -fno-addrsig -fno-asynchronous-unwind-tables -fno-unwind-tables
    -Wall -Wextra -Werror
    -I "$sdk"
)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [[ $check == 1 ]]; then
    out="$tmp/out"
    mkdir "$out"
else
    out="$kernels"
fi

cat > "$tmp/link.ld" <<'LD'
SECTIONS {
  . = 0x40000000;
  .text : { *(.text .text.*) }
  .rodata : { *(.rodata .rodata.* .srodata .srodata.*) }
  .data : { *(.data .data.* .sdata .sdata.*) }
  .bss : { *(.bss .bss.* .sbss .sbss.*) }
}
LD

cd "$kernels"
status=0
for source in ext_*.c; do
    name="${source%.c}"
    "$clang" "${common[@]}" -c "$source" -o "$out/$name.o"
    "$lld" -T "$tmp/link.ld" --no-relax -e 0 "$out/$name.o" -o "$tmp/$name.elf" 2>/dev/null
    "$objcopy" -O binary "$tmp/$name.elf" "$out/$name.bin"
    chmod -x "$out/$name.bin"
    "$nm" --defined-only "$tmp/$name.elf" | awk '$2 == "T" { print $3, "0x" $1 }' | sort > "$out/$name.syms"
    for f in "$name.o" "$name.bin" "$name.syms"; do
        if [[ $check == 1 ]]; then
            if cmp -s "$out/$f" "$kernels/$f"; then
                echo "ok       $f"
            else
                echo "DIFFERS  $f (run scripts/build-ext-kernels.sh and commit the result)"
                status=1
            fi
        else
            echo "built    examples/kernels/$f"
        fi
    done
done
exit $status
