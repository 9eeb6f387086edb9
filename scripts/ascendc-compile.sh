#!/usr/bin/env bash
# Compiles one Ascend C kernel source for npusim's AI core (RV64IMF + the NPU extension)
# against device/sdk/ascendc/kernel_operator.h:
#
#   scripts/ascendc-compile.sh [extra clang flags...] KERNEL.cpp OUT.o
#
# C++17, freestanding: no exceptions, RTTI, libstdc++ or global constructors. __CCE_KT_TEST__
# is defined, so a host-side `<<<...>>>` launch wrapped in `#ifndef __CCE_KT_TEST__` is skipped
# and the file compiles unchanged. Environment: CLANGXX (default clang++-16).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
clangxx="${CLANGXX:-clang++-16}"
layouts=0
if [[ "${1:-}" == "--layouts" ]]; then
    # --layouts KERNEL.cpp: print clang's record-layout dump of the source (same flags), which
    # scripts/npusim-ascendc.sh reads to pack structs passed by value.
    layouts=1
    shift
    set -- "$@" /dev/null
fi
if [[ $# -lt 2 ]]; then
    echo "usage: $0 [clang flags...] KERNEL.cpp OUT.o   or   $0 --layouts KERNEL.cpp" >&2
    exit 2
fi
args=("$@")
src="${args[$#-2]}"
out="${args[$#-1]}"
extra=("${args[@]:0:$#-2}")

# The SDK is named relative to the source's directory when possible, so the object does not
# depend on where the checkout lives (file names end up in ASSERT messages).
sdk="$root/device/sdk"
srcdir="$(cd "$(dirname "$src")" && pwd)"
rel="$(realpath --relative-to="$srcdir" "$sdk" 2>/dev/null || echo "$sdk")"

flags=(--target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -O2 -std=c++17
    -ffreestanding -fno-builtin -nostdlib -fno-exceptions -fno-rtti -fno-threadsafe-statics
    -mcmodel=medany -mno-relax -fno-pic -fno-ident -fno-addrsig
    -fno-asynchronous-unwind-tables -fno-unwind-tables -Wall -Wextra
    -D__CCE_KT_TEST__ -DNPUSIM_ASCENDC=1 -I "$rel" -I "$rel/ascendc")
if [[ $layouts == 1 ]]; then
    cd "$srcdir"
    exec "$clangxx" "${flags[@]}" "${extra[@]}" -S -o /dev/null -Xclang -fdump-record-layouts \
        "$(basename "$src")"
fi
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
cd "$srcdir"
"$clangxx" "${flags[@]}" "${extra[@]}" -c "$(basename "$src")" -o "$out"
