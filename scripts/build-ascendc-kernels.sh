#!/usr/bin/env bash
# Compiles the Ascend C kernels examples/ascendc/*.cpp (against device/sdk/ascendc/
# kernel_operator.h) into the committed objects examples/ascendc/*.o that the tests, example
# 12 and the C++ host program load. The flags are scripts/ascendc-compile.sh's.
#
#   scripts/build-ascendc-kernels.sh           rebuild in place
#   scripts/build-ascendc-kernels.sh --check   rebuild into a temporary directory and fail if
#                                              any object differs from the committed one (CI)
#
# The committed objects come from Debian's clang-16 (16.0.6); needs
# apt-get install -y clang-16 lld-16 llvm-16. Environment: CLANGXX (default clang++-16).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/examples/ascendc"
clangxx="${CLANGXX:-clang++-16}"

check=0
case "${1:-}" in
    "") ;;
    --check) check=1 ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if ! command -v "$clangxx" >/dev/null 2>&1; then
    if [[ $check == 1 ]]; then
        echo "build-ascendc-kernels: $clangxx not found; skipping the committed-output check" >&2
        exit 0
    fi
    echo "build-ascendc-kernels: $clangxx not found (apt-get install -y clang-16)" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
out="$dir"
[[ $check == 1 ]] && out="$tmp"

cd "$dir"
status=0
for source in *.cpp; do
    name="${source%.cpp}"
    # Relative paths keep the objects independent of where the repository lives.
    CLANGXX="$clangxx" bash "$root/scripts/ascendc-compile.sh" -Werror "$source" "$out/$name.o"
    if [[ $check == 1 ]]; then
        if cmp -s "$out/$name.o" "$dir/$name.o"; then
            echo "ok       $name.o"
        else
            echo "DIFFERS  $name.o (run scripts/build-ascendc-kernels.sh and commit the result)"
            status=1
        fi
    else
        echo "built    examples/ascendc/$name.o"
    fi
done
exit $status
