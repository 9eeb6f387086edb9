#!/usr/bin/env bash
# The host path for an Ascend C kernel on npusim: compiles KERNEL.cpp for the AI core (with
# scripts/ascendc-compile.sh) and generates what a host program includes and links.
#
#   scripts/npusim-ascendc.sh [-D..] [-U..] [-I DIR] [-O..] [--cce-aicore-arch=..] KERNEL.cpp OUTDIR
#
# Produces, for every `extern "C" __global__ __aicore__ void NAME(...)` in KERNEL.cpp:
#   OUTDIR/aclrtlaunch_NAME.h     declares
#                                   uint32_t aclrtlaunch_NAME(uint32_t blockDim,
#                                                             aclrtStream stream, args...)
#                                 and the ACLRT_LAUNCH_KERNEL(NAME) macro
# and once per source:
#   OUTDIR/STEM.o                 the kernel object (what aclrtBinaryLoadFromFile takes)
#   OUTDIR/aclrtlaunch_STEM.cpp   the launch functions, with the object embedded; they load it
#                                 into the current context on first use (aclrtBinaryLoadFromData,
#                                 aclrtBinaryGetFunction) and launch with npusimLaunchKernel
#                                 (aclrtLaunchKernel's slots, plus float arguments)
#
# Kernel arguments: GM_ADDR and other pointers become `void *`; integer and float scalars keep
# their type. A tiling struct travels by pointer (`GM_ADDR tiling` + GET_TILING_DATA) or by value:
# then the launcher takes a pointer to the host's struct (`&tiling`, as CANN's generated
# launcher does) and packs its bytes as the device ABI passes it (structs of integers up to 16
# bytes). Any other argument is refused: the tool names the kernel, the parameter and why, and
# exits 1. Build a host program with
#   c++ main.cpp OUTDIR/aclrtlaunch_STEM.cpp -I OUTDIR -I acl/include -L target/release \
#       -lnpusim_acl
# (examples/c/ascendc.mk does it in one make command). Needs clang-16 and perl.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: $0 [--cpu-debug] [-DNAME[=VALUE]] [-UNAME] [-I DIR] [-O0..3] [-W..] [-std=..] [--cce-aicore-arch=ARCH] KERNEL.cpp OUTDIR"
# The flags a sample's kernel compile passes (CANN's ascendc_library / bisheng): defines,
# include directories (made absolute: the compile runs in the source's directory), the
# optimisation level and the SoC's AI-core architecture (accepted: npusim's core is the same
# for every preset).
flags=()
mode=()
cpu_debug=0
while [[ $# -gt 2 ]]; do
    case "$1" in
        -D?* | -U?* | -O[0-3s] | -W* | -std=c++1[47] | -std=gnu++1[47] | -std=c++20 | -std=gnu++20) flags+=("$1") ;;
        -I) flags+=("-I$(realpath -m "$2")"); shift ;;
        -I?*) flags+=("-I$(realpath -m "${1#-I}")") ;;
        --cce-aicore-arch=* | --npu-arch=* | --cce-soc-version=* | --cce-soc-core-type=*) flags+=("$1") ;;
        # CANN's compile flags with no meaning here: the language (-xcce), position-independent
        # and shared output (the tool writes an object and launch code), debug info.
        -xcce | -fPIC | -fpic | -shared | -g) ;;
        # Options of CANN's compiler backend and resource reports (-mllvm OPTION,
        # --cce-res-usage, ...): npusim's compile has no such stage.
        -mllvm) shift ;;
        "") ;;
        --cce-*) ;;
        --cpu-debug) cpu_debug=1; mode=(--cpu-debug) ;;
        *) echo "npusim-ascendc: unknown flag '$1'" >&2; echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
if [[ $# -ne 2 ]]; then
    echo "$usage" >&2
    exit 2
fi
src="$1"
out="$2"
mkdir -p "$out"
stem="$(basename "$src" .cpp)"
bash "$root/scripts/ascendc-compile.sh" ${mode[@]+"${mode[@]}"} ${flags[@]+"${flags[@]}"} "$src" "$out/$stem.o"

# A mix kernel (one that includes lib/matmul_intf.h on the 910B) runs 2 AIV blocks per AI core:
# CANN's blockDim counts AI cores, GetBlockIdx() the AIV blocks. npusim's core runs both parts as
# one program, so its launcher runs blockDim x 2 blocks. The header defines the marker symbol;
# its name in the object's string table is the mark.
mix=1
blocks="blockDim"
if LC_ALL=C grep -q -a 'npusim_kernel_mix_aiv' "$out/$stem.o"; then
    mix=2
    blocks="blockDim * 2u"
fi

# Kernel signatures: "name|type name, type name, ..." lines, comments stripped.
sigs="$(perl -0777 -ne '
    s{//[^\n]*}{}g; s{/\*.*?\*/}{}gs;
    while (/extern\s+"C"\s+__global__\s+__aicore__\s+void\s+(\w+)\s*\(([^)]*)\)/g) {
        my ($n, $p) = ($1, $2); $p =~ s/\s+/ /g; print "$n|$p\n";
    }' "$src")"
if [[ -z "$sigs" ]]; then
    echo "npusim-ascendc: no extern \"C\" __global__ __aicore__ kernel in $src" >&2
    exit 1
fi

# "SIZE|FLOATS" of a struct as the device compiler lays it out (bytes; the count of its
# floating-point fields), from clang's record-layout dump of the kernel source; empty when the
# source lays out no such struct. Computed once, and only for a source with a by-value struct.
layouts="$out/.$stem.layouts"
rm -f "$layouts"
struct_layout() {
    if [[ ! -f "$layouts" ]]; then
        bash "$root/scripts/ascendc-compile.sh" --layouts ${mode[@]+"${mode[@]}"} ${flags[@]+"${flags[@]}"} "$src" >"$layouts"
    fi
    perl -0777 -e '
        my $name = $ARGV[0]; my $dump = do { local $/; <STDIN> }; my @b = split /\*\*\* Dumping AST Record Layout/, $dump;
        for (@b) {
            next unless /^\s*0 \| (?:struct|class) \Q$name\E\s*$/m;
            my ($size) = /\[sizeof=(\d+)/ or next;
            my $floats = () = /^\s*\d+ \|\s+(?:const\s+)?(?:float|double|half|bfloat16_t|__fp16)\s+\w/mg;
            print "$size|$floats"; last;
        }' "$1" <"$layouts"
}
refused=0

impl="$out/aclrtlaunch_$stem.cpp"
{
    echo "// Generated by scripts/npusim-ascendc.sh from $(basename "$src"): do not edit."
    echo "#include <stdint.h>"
    echo "#include <string.h>"
    echo "#include \"acl/acl.h\""
    [[ $cpu_debug == 1 ]] && echo "#include \"tikicpulib.h\""
    echo
    echo "static const unsigned char npusim_object[] = {"
    od -An -v -tx1 "$out/$stem.o" | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g' -e 's/^/    /'
    echo "};"
    cat <<'CPP'

// The kernel's function in the current context, loading the object on first use there.
static aclrtFuncHandle npusim_function(const char *name, aclError *err) {
    static aclrtContext loaded_in = nullptr;
    static aclrtBinHandle bin = nullptr;
    aclrtContext ctx = nullptr;
    *err = aclrtGetCurrentContext(&ctx);
    if (*err != ACL_SUCCESS) {
        return nullptr;
    }
    if (bin == nullptr || ctx != loaded_in) {
        *err = aclrtBinaryLoadFromData(npusim_object, sizeof npusim_object, nullptr, &bin);
        if (*err != ACL_SUCCESS) {
            bin = nullptr;
            return nullptr;
        }
        loaded_in = ctx;
    }
    aclrtFuncHandle f = nullptr;
    *err = aclrtBinaryGetFunction(bin, name, &f);
    return f;
}
CPP
} >"$impl"

# The launch through the args builder, for a kernel with a struct over 16 bytes by value (in
# `kinds`): one args handle per thread and loaded binary, built at the first launch and updated
# at each later one (a handle lives as long as its binary, so none is made per launch).
args_builder_launch() {
    local n=${#kinds[@]} k kind rest pname size
    echo "    // A struct over 16 bytes goes by reference to a copy (LP64F): a placeholder argument."
    echo "    static thread_local aclrtFuncHandle made_for = nullptr;"
    echo "    static thread_local aclrtArgsHandle h = nullptr;"
    echo "    static thread_local aclrtParamHandle ph[$n];"
    for k in "${!kinds[@]}"; do
        IFS=: read -r kind pname size <<<"${kinds[$k]}"
        [[ $kind == small || $kind == big ]] &&
            printf '    if (%s == nullptr) {\n        return (uint32_t)ACL_ERROR_INVALID_PARAM;\n    }\n' "$pname"
    done
    echo "    bool fresh = made_for != f;"
    echo "    if (fresh) {"
    echo "        made_for = nullptr;"
    echo "        err = aclrtKernelArgsInit(f, &h);"
    echo "        if (err != ACL_SUCCESS) {"
    echo "            return (uint32_t)err;"
    echo "        }"
    echo "    }"
    for k in "${!kinds[@]}"; do
        IFS=: read -r kind pname size <<<"${kinds[$k]}"
        case "$kind" in
            ptr) echo "    { void *v = $pname; err = fresh ? aclrtKernelArgsAppend(h, &v, sizeof v, &ph[$k]) : aclrtKernelArgsParaUpdate(h, ph[$k], &v, sizeof v); }" ;;
            int) echo "    { auto v = $pname; err = fresh ? aclrtKernelArgsAppend(h, &v, sizeof v, &ph[$k]) : aclrtKernelArgsParaUpdate(h, ph[$k], &v, sizeof v); }" ;;
            float) echo "    { float v = $pname; err = fresh ? npusimKernelArgsAppendFloat(h, v, &ph[$k]) : aclrtKernelArgsParaUpdate(h, ph[$k], &v, sizeof v); }" ;;
            small) echo "    { uint64_t v[$(((size + 7) / 8))] = {}; memcpy(v, $pname, $size); err = fresh ? aclrtKernelArgsAppend(h, v, sizeof v, &ph[$k]) : aclrtKernelArgsParaUpdate(h, ph[$k], v, sizeof v); }" ;;
            big)
                echo "    if (fresh) {"
                echo "        void *buf = nullptr;"
                echo "        err = aclrtKernelArgsAppendPlaceHolder(h, &ph[$k]);"
                echo "        if (err == ACL_SUCCESS) {"
                echo "            err = aclrtKernelArgsGetPlaceHolderBuffer(h, ph[$k], $size, &buf);"
                echo "        }"
                echo "        if (err == ACL_SUCCESS) {"
                echo "            memcpy(buf, $pname, $size);"
                echo "        }"
                echo "    } else {"
                echo "        err = aclrtKernelArgsParaUpdate(h, ph[$k], const_cast<void *>($pname), $size);"
                echo "    }" ;;
        esac
        echo "    if (err != ACL_SUCCESS) {"
        echo "        return (uint32_t)err;"
        echo "    }"
    done
    echo "    if (fresh) {"
    echo "        err = aclrtKernelArgsFinalize(h);"
    echo "        if (err != ACL_SUCCESS) {"
    echo "            return (uint32_t)err;"
    echo "        }"
    echo "        made_for = f;"
    echo "    }"
    echo "    return (uint32_t)aclrtLaunchKernelWithConfig(f, blockDim, stream, nullptr, h, nullptr);"
}

while IFS='|' read -r name params; do
    decl=()
    body=()
    hdecl=() # the kernel's host definition (--cpu-debug): its parameters, the launcher's arguments
    hargs=()
    mask=0
    i=0
    kinds=() # per parameter, for the args-builder launcher: ptr|float|int|small|big:NAME[:SIZE]
    big=0
    IFS=',' read -ra ps <<<"$params"
    for p in "${ps[@]}"; do
        p="$(echo "$p" | sed -e 's/^ *//' -e 's/ *$//')"
        [[ -z "$p" || "$p" == "void" ]] && continue
        pname="$(echo "$p" | sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)$/\1/')"
        ptype="$(echo "${p%"$pname"}" | sed -e 's/ *$//' -e 's/__gm__ //g')"
        # An unnamed parameter (`GM_ADDR`, `__gm__ uint8_t *`, `uint32_t`): its type is all of
        # it; the launcher names it after its place.
        if [[ "$pname" == "$p" || -z "$ptype" || "$ptype" == "const" || "$ptype" == "unsigned" ]]; then
            ptype="$(echo "$p" | sed -e 's/ *$//' -e 's/__gm__ //g')"
            pname="arg$i"
        fi
        case "$ptype" in
            GM_ADDR | *"*") decl+=("void *$pname"); body+=("    slots[$i] = (uint64_t)(uintptr_t)$pname;")
                hdecl+=("void *$pname"); hargs+=("npusim_icpu::device($pname)"); kinds+=("ptr:$pname") ;;
            float) decl+=("float $pname"); mask=$((mask | (1 << i))); kinds+=("float:$pname")
                   hdecl+=("float $pname"); hargs+=("$pname")
                   body+=("    memcpy(&slots[$i], &$pname, sizeof(float));") ;;
            bool | char | int | long | "unsigned int" | "unsigned long" | "long long" | \
            "unsigned long long" | int8_t | int16_t | int32_t | int64_t | uint8_t | uint16_t | \
            uint32_t | uint64_t | size_t)
                decl+=("$ptype $pname"); body+=("    slots[$i] = (uint64_t)(int64_t)$pname;")
                hdecl+=("$ptype $pname"); hargs+=("$pname"); kinds+=("int:$pname") ;;
            *)
                # A struct by value: the host passes a pointer to it (as CANN's generated
                # launcher takes `&tiling`) and the launcher packs its bytes as the RISC-V
                # LP64F ABI passes a struct of integers of at most 16 bytes: in one or two
                # argument registers, little-endian, in order. A larger struct (of any fields)
                # goes by reference to a copy: a placeholder argument of the args builder,
                # copied to device memory at each launch and freed once the kernel is done.
                struct="${ptype#struct }"
                layout="$(struct_layout "$struct")"
                size="${layout%%|*}"
                floats="${layout#*|}"
                reason=""
                if [[ -z "$layout" ]]; then
                    reason="its type '$ptype' is not a struct the compiler laid out"
                elif [[ "$floats" != 0 ]] && ((size <= 16)); then
                    reason="struct $struct has floating-point fields (LP64F passes those in float registers; the launcher packs integer words only)"
                fi
                if [[ -z "$reason" && $cpu_debug == 1 ]]; then
                    reason="a twin-debug host program passes GmAlloc memory; a struct by value has no host definition for ICPU_RUN_KF"
                fi
                if [[ -n "$reason" ]]; then
                    echo "npusim-ascendc: kernel $name, parameter '$p': cannot be passed by value: $reason; pass it by pointer (GM_ADDR + GET_TILING_DATA)" >&2
                    refused=1
                    continue 2
                fi
                decl+=("const void *$pname")
                body+=("    if ($pname == nullptr) {" "        return (uint32_t)ACL_ERROR_INVALID_PARAM;" "    }")
                if ((size > 16)); then
                    big=1
                    kinds+=("big:$pname:$size")
                else
                    kinds+=("small:$pname:$size")
                    body+=("    memcpy(&slots[$i], $pname, $size); // struct $struct by value")
                    i=$((i + (size + 7) / 8 - 1))
                fi
                ;;
        esac
        i=$((i + 1))
    done
    args="uint32_t blockDim, aclrtStream stream"
    for d in "${decl[@]}"; do args+=", $d"; done
    guard="ACLRTLAUNCH_$(echo "$name" | tr '[:lower:]' '[:upper:]')_H"
    cat >"$out/aclrtlaunch_$name.h" <<H
// Generated by scripts/npusim-ascendc.sh from $(basename "$src"): do not edit.
#ifndef $guard
#define $guard
#include <stdint.h>
#include "acl/acl.h"

#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func
#endif

#ifdef __cplusplus
extern "C" {
#endif
// Launches $name on blockDim blocks on the stream ($mix AIV block(s) per AI core, GetBlockIdx()
// counting them); returns an aclError (0 on success).
uint32_t aclrtlaunch_$name($args);
#ifdef __cplusplus
}
#endif
#endif
H
    {
        echo
        echo "#include \"aclrtlaunch_$name.h\""
        echo "extern \"C\" uint32_t aclrtlaunch_$name($args) {"
        echo "    aclError err = ACL_SUCCESS;"
        echo "    aclrtFuncHandle f = npusim_function(\"$name\", &err);"
        echo "    if (f == nullptr) {"
        echo "        return (uint32_t)err;"
        echo "    }"
        if [[ $big == 1 ]]; then
            args_builder_launch
        elif [[ $i -gt 0 ]]; then
            echo "    uint64_t slots[$i] = {};"
            printf '%s\n' "${body[@]}"
            echo "    return (uint32_t)npusimLaunchKernel(f, $blocks, slots, sizeof slots, ${mask}u, stream);"
        else
            echo "    uint64_t slot = 0;"
            echo "    return (uint32_t)npusimLaunchKernel(f, $blocks, &slot, 0, 0, stream);"
        fi
        echo "}"
        if [[ $cpu_debug == 1 ]]; then
            # The kernel's host definition for the twin-debug main: ICPU_RUN_KF calls it; it
            # launches on the run's stream with GmAlloc pointers as their device addresses.
            hd="$(IFS=,; echo "${hdecl[*]}" | sed 's/,/, /g')"
            echo
            echo "extern \"C\" void $name(${hd:-void}) {"
            echo "    npusim_icpu::State *run = npusim_icpu::current();"
            echo "    if (run == nullptr) {"
            echo "        return;"
            echo "    }"
            ha="run->block_dim, run->stream"
            for a in "${hargs[@]}"; do ha+=", $a"; done
            echo "    uint32_t err = ACLRT_LAUNCH_KERNEL($name)($ha);"
            echo "    if (run->status == ACL_SUCCESS) {"
            echo "        run->status = err;"
            echo "    }"
            echo "}"
        fi
    } >>"$impl"
done <<<"$sigs"
rm -f "$layouts"

# The <<<blockDim, l2ctrl, stream>>> path: the host wrappers (`NAME_do(...)`) a kernel file
# defines for its host program inside `#ifndef __CCE_KT_TEST__` (or `#ifndef
# ASCENDC_CPU_DEBUG`), or as top-level host functions, which the device compile skips
# (scripts/ascendc-host-wrappers.pl finds them), are compiled for the host here, with
# each `KERNEL<<<blockDim, l2ctrl, stream>>>(args...)` a launch through KERNEL's generated
# launcher (l2ctrl, the L2 cache control, has no counterpart in npusim: it is evaluated and ignored). The user's file is not
# edited: the blocks are copied into the launch code.
kernels="$(cut -d'|' -f1 <<<"$sigs" | tr '\n' ' ')"
chevrons=""
# (Not in the twin-debug build: there the blocks are compiled out, as with CANN.)
[[ $cpu_debug == 1 ]] || chevrons="$(NPUSIM_KERNELS="$kernels" perl "$root/scripts/ascendc-host-wrappers.pl" --extract "$src" 2>&1)" || {
    echo "$chevrons" >&2
    exit 1
}
if [[ -n "$chevrons" ]]; then
    {
        echo
        echo "// The kernel file's host wrappers (its #ifndef __CCE_KT_TEST__ blocks), with"
        echo "// each triple-chevron launch as aclrtlaunch_KERNEL(blockDim, stream, args)."
        echo "#define __gm__"
        echo "#define GM_ADDR uint8_t *"
        echo "#define __aicore__"
        echo "#define __global__"
        while IFS='|' read -r name _; do
            [[ -f "$out/aclrtlaunch_$name.h" ]] && echo "#include \"aclrtlaunch_$name.h\""
        done <<<"$sigs"
        echo "$chevrons"
    } >>"$impl"
fi
if [[ $refused == 1 ]]; then
    echo "npusim-ascendc: $src: some kernels have no launcher (above)" >&2
    exit 1
fi
echo "npusim-ascendc: $out/$stem.o, $impl and its aclrtlaunch_*.h"
