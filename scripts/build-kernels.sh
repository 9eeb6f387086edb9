#!/usr/bin/env bash
# Compiles the C kernels in examples/kernels/ into the committed objects examples/kernels/*.o.
#
#   scripts/build-kernels.sh           rebuild the objects in place
#   scripts/build-kernels.sh --check   rebuild into a temporary directory and fail if any object
#                                      differs from the committed one (for CI)
#
# The objects are committed so that nothing but this script needs clang. The output is
# deterministic for a given clang version: no debug info, no .comment (-fno-ident), no
# address-significance table, no unwind tables, and every file is compiled from inside
# examples/kernels so the only path recorded (the STT_FILE symbol) is the bare file name.
# The committed objects come from Debian's clang-16 (16.0.6); another version may schedule
# instructions differently, so --check only means something with the same compiler.
#
# Environment: CLANG (default clang-16).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kernels="$root/examples/kernels"
sdk="$root/device/sdk"
clang="${CLANG:-clang-16}"

check=0
case "${1:-}" in
    "") ;;
    --check) check=1 ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if ! command -v "$clang" >/dev/null 2>&1; then
    if [[ $check == 1 ]]; then
        echo "build-kernels: $clang not found; skipping the committed-object check" >&2
        exit 0
    fi
    echo "build-kernels: $clang not found (apt-get install clang-16, or set CLANG)" >&2
    exit 1
fi

# The NPU core is RV64IMF without compressed instructions; the loader does no linker
# relaxation (-mno-relax) and knows nothing of PIC (-fno-pic). -fno-builtin keeps the compiler
# from calling memcpy / memset, which do not exist on the NPU.
common=(
    --target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -O2
    -ffreestanding -fno-builtin -nostdlib -mno-relax -fno-pic
    -fno-ident -fno-addrsig -fno-asynchronous-unwind-tables -fno-unwind-tables
    -Wall -Wextra -Werror
    -I "$sdk"
)

# output object : source : extra flags. sort.c is built twice so both code models (medany's
# auipc-relative and medlow's absolute lui addressing) are exercised by the loader tests;
# the medlow build also puts every function and object in its own section, which makes
# calls between sections (R_RISCV_CALL_PLT) and .rodata.* / .sdata.* section names.
builds=(
    "vector_add.o:vector_add.c:-mcmodel=medany"
    "saxpy.o:saxpy.c:-mcmodel=medany"
    "reduce.o:reduce.c:-mcmodel=medany"
    "sort.o:sort.c:-mcmodel=medany"
    "sort_medlow.o:sort.c:-mcmodel=medlow -ffunction-sections -fdata-sections"
    "faults.o:faults.c:-mcmodel=medany"
    "reloc_probe.o:reloc_probe.c:-mcmodel=medany"
)

if [[ $check == 1 ]]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
else
    out="$kernels"
fi

cd "$kernels"
status=0
for build in "${builds[@]}"; do
    IFS=: read -r object source extra <<<"$build"
    # shellcheck disable=SC2086 # $extra is a list of flags
    "$clang" "${common[@]}" $extra -c "$source" -o "$out/$object"
    if [[ $check == 1 ]]; then
        if cmp -s "$out/$object" "$kernels/$object"; then
            echo "ok       $object"
        else
            echo "DIFFERS  $object (run scripts/build-kernels.sh and commit the result)"
            status=1
        fi
    else
        echo "built    examples/kernels/$object"
    fi
done
exit $status
