#!/usr/bin/env bash
# The Ascend C conformance corpus: builds public Ascend C kernel-launch samples unchanged against
# npusim, runs them as their own run.sh does, and prints one table row per sample.
#
#   scripts/ascendc-conformance.sh SAMPLES_DIR [--out TABLE.md] [--work DIR] [--only REGEX]
#                                  [--label TEXT] [--soc SOC_VERSION] [--timeout SECONDS]
#
# A sample is a directory under SAMPLES_DIR with a CMakeLists.txt, a main.cpp and an
# `ascendc_library(...)` call (in its CMakeLists.txt or cmake/*.cmake): the kernel-launch
# samples of Huawei's Ascend/samples `operator/` tree. Each one is copied to WORK/ (the samples
# directory is never written) and, in the copy, taken through the steps of its run.sh:
#
#   cmake -B build -DRUN_MODE=npu -DSOC_VERSION=Ascend910B3 -DCMAKE_BUILD_TYPE=Debug
#         -DCMAKE_INSTALL_PREFIX=out -DASCEND_CANN_PACKAGE_PATH=<npusim>/acl/cann
#   cmake --build build -j && cmake --install build           -> built?
#   mkdir input output; its `python3 scripts/gen_data.py ...` lines; the program it copies out
#   of out/bin (`cp ./out/bin/NAME ./`; ascendc_kernels_bbit by default)   -> ran?
#   its `python3 scripts/verify_result.py ...` lines (all must pass)        -> verified?
#
# No source file is edited and nothing but the configure command differs from the sample's own
# run.sh. The gen_data / verify lines are taken from run.sh only when they are plain
# `python3 scripts/NAME.py ARGS` commands (run as argument lists, never evaluated by a shell).
# The table (Markdown) goes to stdout and, with --out, to TABLE.md; each sample's logs stay in
# WORK/ID/conformance-*.log. Exit status: 0 when every sample passed, 1 when some did not,
# 2 for a usage or environment error (a missing tool, numpy, or libnpusim_acl.so).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: $0 SAMPLES_DIR [--out TABLE.md] [--work DIR] [--only REGEX] [--label TEXT] [--soc SOC_VERSION] [--timeout SECONDS]"
get_them="The samples are public: Huawei's Ascend/samples repository, operator/ tree:
    git clone --depth 1 https://github.com/Ascend/samples.git   (or https://gitee.com/ascend/samples.git)
    $0 samples/operator --out table.md"

samples=""
out=""
work="${TMPDIR:-/tmp}/npusim-conformance"
only=""
label=""
soc="Ascend910B3"
limit=300
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="${2:?--out needs a file}"; shift ;;
        --work) work="${2:?--work needs a directory}"; shift ;;
        --only) only="${2:?--only needs a regular expression}"; shift ;;
        --label) label="${2:?--label needs a text}"; shift ;;
        --soc) soc="${2:?--soc needs a SoC version}"; shift ;;
        --timeout) limit="${2:?--timeout needs seconds}"; shift ;;
        -h | --help) echo "$usage"; echo; echo "$get_them"; exit 0 ;;
        -*) echo "ascendc-conformance: unknown option '$1'" >&2; echo "$usage" >&2; exit 2 ;;
        *)
            if [[ -n "$samples" ]]; then
                echo "ascendc-conformance: one samples directory only ('$samples', then '$1')" >&2
                exit 2
            fi
            samples="$1" ;;
    esac
    shift
done
if [[ -z "$samples" ]]; then
    echo "ascendc-conformance: no samples directory given." >&2
    echo "$usage" >&2
    echo >&2
    echo "$get_them" >&2
    exit 2
fi
if [[ ! -d "$samples" ]]; then
    echo "ascendc-conformance: '$samples' is not a directory." >&2
    echo "$get_them" >&2
    exit 2
fi
if ! [[ "$limit" =~ ^[0-9]+$ ]] || [[ "$limit" -eq 0 ]]; then
    echo "ascendc-conformance: --timeout takes a positive number of seconds, not '$limit'" >&2
    exit 2
fi
samples="$(cd "$samples" && pwd)"

# What the steps need, all reported at once.
libdir="${NPUSIM_ACL_LIBRARY_DIR:-$root/target/release}"
missing=()
for tool in cmake make perl python3 timeout "${CLANGXX:-clang++-16}" c++; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool (not on PATH)")
done
if command -v cmake >/dev/null 2>&1; then
    v="$(cmake --version | head -n1 | sed 's/[^0-9.]*//')"
    if [[ "$(printf '%s\n3.19\n' "$v" | sort -V | head -n1)" != 3.19 ]]; then
        missing+=("cmake 3.19 or newer (this is $v)")
    fi
fi
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import numpy' 2>/dev/null; then
    missing+=("numpy for python3 (the samples' gen_data.py / verify_result.py; pip install numpy)")
fi
if [[ ! -f "$libdir/libnpusim_acl.so" ]]; then
    missing+=("$libdir/libnpusim_acl.so (cargo build --release -p npusim-acl, or set NPUSIM_ACL_LIBRARY_DIR)")
fi
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "ascendc-conformance: missing what the samples need:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 2
fi

# The samples: directories with CMakeLists.txt + main.cpp whose build calls ascendc_library.
list=()
while IFS= read -r cm; do
    d="$(dirname "$cm")"
    [[ -f "$d/main.cpp" ]] || continue
    grep -qs 'ascendc_library' "$d/CMakeLists.txt" "$d"/cmake/*.cmake || continue
    rel="${d#"$samples"}"
    rel="${rel#/}"
    [[ -z "$rel" ]] && rel="$(basename "$d")"
    [[ -n "$only" ]] && ! [[ "$rel" =~ $only ]] && continue
    list+=("$rel")
done < <(find "$samples" -name CMakeLists.txt -not -path '*/build/*' -not -path '*/out/*' | LC_ALL=C sort)
if [[ ${#list[@]} -eq 0 ]]; then
    echo "ascendc-conformance: no kernel-launch sample (CMakeLists.txt + main.cpp + ascendc_library) under $samples${only:+ matching '$only'}" >&2
    exit 2
fi
mkdir -p "$work"
work="$(cd "$work" && pwd)"
case "$work/" in
    "$samples"/*) echo "ascendc-conformance: the work directory $work is inside the samples directory" >&2; exit 2 ;;
esac

# The first line of LOG that says what went wrong (a compiler error, a refusal, an ACL error, a
# fault), else its last non-empty line; cut to one table cell.
first_error() {
    local line
    line="$(grep -m1 -E 'error:|Error:|ERROR|FATAL|undefined reference|npusim-ascendc:|npusim:|fault|Fault|abort|Abort|Traceback|No such file|not found|failed|Segmentation|Assertion' "$1" 2>/dev/null)"
    [[ -z "$line" ]] && line="$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n1)"
    line="${line//$work\//}"
    line="${line//$root\//}"
    line="${line//|/\\|}"
    line="$(printf '%s' "$line" | tr -s '[:space:]' ' ' | sed 's/^ //')"
    printf '%s' "${line:0:220}"
}

# A `python3 scripts/NAME.py ARGS` line of run.sh as words (empty when it is anything else).
plain_python() {
    [[ "$1" =~ ^[[:space:]]*python3?[[:space:]]+(scripts/[A-Za-z0-9_.-]+\.py([[:space:]]+[A-Za-z0-9_./=-]+)*)[[:space:]]*$ ]] &&
        printf '%s' "${BASH_REMATCH[1]}"
}

rows=()
passed=0
for rel in "${list[@]}"; do
    src="$samples/$rel"
    id="$(printf '%s' "$rel" | tr '/' '_')"
    dir="$work/$id"
    rm -rf "$dir"
    cp -a "$src" "$dir"
    rm -rf "$dir/build" "$dir/out" "$dir/input" "$dir/output"
    runsh="$dir/run.sh"
    built="no"; ran="—"; verified="—"; why=""
    echo "== $rel" >&2

    # Build: configure, build, install, as run.sh does, with npusim as the CANN package.
    log="$dir/conformance-build.log"
    if (cd "$dir" && cmake -B build -DRUN_MODE=npu -DSOC_VERSION="$soc" -DCMAKE_BUILD_TYPE=Debug \
            -DCMAKE_INSTALL_PREFIX="$dir/out" -DASCEND_CANN_PACKAGE_PATH="$root/acl/cann" \
            -DNPUSIM_ACL_LIBRARY_DIR="$libdir" &&
            cmake --build build -j 2 && cmake --install build) >"$log" 2>&1; then
        built="yes"
    else
        why="$(first_error "$log")"
    fi

    if [[ $built == yes ]]; then
        # The program run.sh copies out of out/bin, else the one executable there.
        prog=""
        [[ -f "$runsh" ]] && prog="$(sed -n -E 's#^[[:space:]]*cp[[:space:]]+(\./)?out/bin/([A-Za-z0-9_.-]+)[[:space:]]+\./?[[:space:]]*$#\2#p' "$runsh" | head -n1)"
        if [[ -z "$prog" ]]; then
            if [[ -x "$dir/out/bin/ascendc_kernels_bbit" ]]; then
                prog="ascendc_kernels_bbit"
            else
                bins=()
                for b in "$dir"/out/bin/* "$dir"/build/*; do
                    [[ -f "$b" && -x "$b" ]] && bins+=("$b")
                done
                [[ ${#bins[@]} -eq 1 ]] && prog="${bins[0]#"$dir/"}"
            fi
        fi
        gens=(); verifies=()
        if [[ -f "$runsh" ]]; then
            while IFS= read -r l; do
                p="$(plain_python "$l")" || continue
                case "$p" in
                    scripts/verify_result.py*) verifies+=("$p") ;;
                    scripts/*gen*) gens+=("$p") ;;
                esac
            done <"$runsh"
        fi
        [[ ${#gens[@]} -eq 0 && -f "$dir/scripts/gen_data.py" ]] && gens=("scripts/gen_data.py")

        log="$dir/conformance-run.log"
        mkdir -p "$dir/input" "$dir/output"
        if [[ -z "$prog" ]]; then
            ran="no"; why="no program to run: run.sh copies none out of out/bin and out/bin has not exactly one"
        elif [[ -f "$dir/out/bin/$prog" ]]; then
            cp "$dir/out/bin/$prog" "$dir/"
            prog="./$prog"
        else
            prog="./$prog"
        fi
        if [[ $ran != no ]]; then
            status=0
            for g in ${gens[@]+"${gens[@]}"}; do
                # shellcheck disable=SC2086 # the line's words, checked by plain_python
                (cd "$dir" && timeout "$limit" python3 $g) >>"$log" 2>&1 || { status=$?; break; }
            done
            if [[ $status -ne 0 ]]; then
                ran="no"; why="gen_data failed: $(first_error "$log")"
            else
                (cd "$dir" && LD_LIBRARY_PATH="$dir/out/lib:$dir/out/lib64:$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                    timeout "$limit" "$prog") >>"$log" 2>&1
                status=$?
                if [[ $status -eq 0 ]]; then
                    ran="yes"
                elif [[ $status -eq 124 ]]; then
                    ran="no"; why="timed out after ${limit}s"
                else
                    ran="no"; why="exit $status: $(first_error "$log")"
                fi
            fi
        fi

        if [[ $ran == yes ]]; then
            if [[ ${#verifies[@]} -eq 0 ]]; then
                verified="n/a"
                why="the sample has no verify_result.py step"
                passed=$((passed + 1))
            else
                log="$dir/conformance-verify.log"
                verified="yes"
                for v in "${verifies[@]}"; do
                    # shellcheck disable=SC2086
                    if ! (cd "$dir" && timeout "$limit" python3 $v) >>"$log" 2>&1; then
                        verified="no"
                        why="${v#scripts/verify_result.py }: $(grep -m1 -E 'error ratio|ERROR|Error|No such file' "$log" | tr -s '[:space:]' ' ')"
                        break
                    fi
                done
                [[ $verified == yes ]] && passed=$((passed + 1))
            fi
        fi
    fi
    rows+=("| \`$rel\` | $built | $ran | $verified | $why |")
done

{
    echo "Samples: ${label:-$samples} — ${#list[@]} kernel-launch samples, RUN_MODE=npu, SOC_VERSION=$soc."
    echo
    echo "| sample | built | ran | verified | first error / reason |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Passing: $passed of ${#list[@]}."
} >"$work/table.md"
cat "$work/table.md"
[[ -n "$out" ]] && cp "$work/table.md" "$out"
[[ $passed -eq ${#list[@]} ]]
