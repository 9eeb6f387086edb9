#!/usr/bin/env bash
# Compiles one Ascend C kernel source for npusim's AI core (RV64IMF + the NPU extension)
# against device/sdk/ascendc/kernel_operator.h:
#
#   scripts/ascendc-compile.sh [--cpu-debug] [flags...] KERNEL.cpp OUT.o
#   scripts/ascendc-compile.sh --layouts [--cpu-debug] [flags...] KERNEL.cpp
#
# C++17, freestanding: no exceptions, RTTI, libstdc++ or global constructors; the std headers a
# kernel may include are device/sdk/ascendc/std/ (<cstdint>, <cmath>, <type_traits>, <limits>,
# ...). The mode macros are CANN's (docs/ascendc.md, "Compile environment"):
#   NPU build (default)    __CCE_AICORE__ = the architecture's value and its core macro
#                          (__DAV_C220_VEC__ for the default dav-c220-vec); neither
#                          __CCE_KT_TEST__ nor ASCENDC_CPU_DEBUG
#   --cpu-debug            __CCE_KT_TEST__ and ASCENDC_CPU_DEBUG (the twin-debug build of CANN's
#                          tikicpulib path), __CCE_AICORE__ as above, no core macro
# In the NPU build the kernel file's host wrappers with a `<<<...>>>` launch (inside `#ifndef
# ASCENDC_CPU_DEBUG` / `#ifndef __CCE_KT_TEST__`, or top-level host functions) are host code:
# the compile reads a copy of the source with them blanked (line numbers kept; found by
# scripts/ascendc-host-wrappers.pl); the user's file is not edited.
# Flags: --cce-aicore-arch=ARCH / --npu-arch=ARCH pick the architecture (table below);
# CANN's -xcce, -fPIC, -shared, --cce-soc-version=, --cce-soc-core-type= are accepted; every
# other flag goes to clang. Environment: CLANGXX (default clang++-16).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
clangxx="${CLANGXX:-clang++-16}"
layouts=0
cpu_debug=0
while [[ "${1:-}" == --layouts || "${1:-}" == --cpu-debug ]]; do
    [[ "$1" == --layouts ]] && layouts=1
    [[ "$1" == --cpu-debug ]] && cpu_debug=1
    shift
done
# --layouts KERNEL.cpp: print clang's record-layout dump of the source (same flags), which
# scripts/npusim-ascendc.sh reads to pack structs passed by value.
[[ $layouts == 1 ]] && set -- "$@" /dev/null
if [[ $# -lt 2 ]]; then
    echo "usage: $0 [--cpu-debug] [clang flags...] KERNEL.cpp OUT.o   or   $0 --layouts [--cpu-debug] [flags...] KERNEL.cpp" >&2
    exit 2
fi
args=("$@")
src="${args[$#-2]}"
out="${args[$#-1]}"

# The architecture: CANN's --cce-aicore-arch values, and --npu-arch=dav-2201 (910B, mix).
arch="dav-c220-vec"
core_type=""
extra=()
for a in "${args[@]:0:$#-2}"; do
    case "$a" in
        --cce-aicore-arch=* | --npu-arch=*) arch="${a#*=}" ;;
        --cce-soc-core-type=*) core_type="${a#*=}" ;;
        -xcce | -fPIC | -fpic | -shared | --cce-soc-version=*) ;;
        *) extra+=("$a") ;;
    esac
done
case "$core_type" in
    "") ;;
    VecCore) arch="${arch%-vec}"; arch="${arch%-cube}-vec" ;;
    CubeCore) arch="${arch%-vec}"; arch="${arch%-cube}-cube" ;;
    MixCore | AiCore) arch="${arch%-vec}"; arch="${arch%-cube}" ;;
    *) echo "ascendc-compile: --cce-soc-core-type=$core_type: not one of VecCore, CubeCore, MixCore, AiCore" >&2; exit 2 ;;
esac
case "$arch" in
    dav-c220-vec) mode=(-D__CCE_AICORE__=220 -D__DAV_C220_VEC__) ;;
    dav-c220-cube) mode=(-D__CCE_AICORE__=220 -D__DAV_C220_CUBE__) ;;
    # The mix build: npusim's AI core runs a kernel's cube and vector parts as one program.
    dav-c220 | dav-2201) mode=(-D__CCE_AICORE__=220 -D__DAV_C220_VEC__ -D__DAV_C220_CUBE__) ;;
    dav-m200 | dav-m200-vec) mode=(-D__CCE_AICORE__=200 -D__DAV_M200__) ;;
    dav-c100) mode=(-D__CCE_AICORE__=100 -D__DAV_C100__) ;;
    dav-m300) mode=(-D__CCE_AICORE__=300 -D__DAV_M300__) ;;
    *) echo "ascendc-compile: unknown AI-core architecture '$arch' (one of dav-c220-vec, dav-c220-cube, dav-c220, dav-2201, dav-m200, dav-m200-vec, dav-c100, dav-m300)" >&2; exit 2 ;;
esac
if [[ $cpu_debug == 1 ]]; then
    mode=("${mode[0]}" -D__CCE_KT_TEST__ -DASCENDC_CPU_DEBUG)
fi

# The SDK is named relative to the source's directory when possible, so the object does not
# depend on where the checkout lives (file names end up in ASSERT messages).
sdk="$root/device/sdk"
srcdir="$(cd "$(dirname "$src")" && pwd)"
rel="$(realpath --relative-to="$srcdir" "$sdk" 2>/dev/null || echo "$sdk")"

flags=(--target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -O2 -std=c++17
    -ffreestanding -fno-builtin -nostdlib -nostdinc++ -fno-exceptions -fno-rtti -fno-threadsafe-statics
    -mcmodel=medany -mno-relax -fno-pic -fno-ident -fno-addrsig
    -fno-asynchronous-unwind-tables -fno-unwind-tables -Wall -Wextra
    "${mode[@]}" -DNPUSIM_ASCENDC=1 -I "$rel" -I "$rel/ascendc" -isystem "$rel/ascendc/std")

# The source the compiler reads: the user's, or (NPU build, a file with `<<<`) a copy with the
# host wrapper blocks blanked, in a temporary directory under the same name so the object is
# the same as from the original; -iquote keeps the source's own directory first for "...".
base="$(basename "$src")"
input="$base"
tmp=""
prefix_map=()
if [[ $cpu_debug == 0 && $layouts == 0 ]] && grep -q '<<<' "$src"; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    perl "$root/scripts/ascendc-host-wrappers.pl" --blank "$src" >"$tmp/$base" || exit 1
    input="$tmp/$base"
    prefix_map=(-fmacro-prefix-map="$tmp/=")
fi
if [[ $layouts == 1 ]]; then
    cd "$srcdir"
    exec "$clangxx" "${flags[@]}" ${extra[@]+"${extra[@]}"} -S -o /dev/null -Xclang -fdump-record-layouts \
        "$base"
fi
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
cd "$srcdir"
"$clangxx" "${flags[@]}" -iquote . ${prefix_map[@]+"${prefix_map[@]}"} ${extra[@]+"${extra[@]}"} -c "$input" -o "$out"
