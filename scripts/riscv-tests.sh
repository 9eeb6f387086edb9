#!/usr/bin/env bash
# Builds the official riscv-tests rv64ui / rv64um / rv64uf `p` tests and runs them on the
# simulated core (device/examples/riscv_test_runner.rs). The test sources are fetched into a
# scratch directory and never committed.
#
# Needs: clang-16 (preprocessor), binutils-riscv64-unknown-elf (as, ld), git, cargo.
#   apt-get install -y clang-16 binutils-riscv64-unknown-elf
#
# Environment:
#   RISCV_TESTS_SRC  an existing riscv-tests checkout whose env/ holds riscv-test-env
#                    (default: cloned into $WORK/src)
#   WORK             scratch directory (default: target/riscv-tests)
#   CARGO_TARGET_DIR honoured as usual
#
# Documented deviations (fail by design, see docs/conformance.md): rv64ui-p-ma_data
# (misaligned accesses trap on the NPU) and rv64ui-p-fence_i (code is immutable once decoded).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-$root/target/riscv-tests}
mkdir -p "$work"

src=${RISCV_TESTS_SRC:-}
if [[ -z $src ]]; then
    src=$work/src
    if [[ ! -d $src/isa ]]; then
        git clone --depth 1 https://github.com/riscv-software-src/riscv-tests "$src"
        rm -rf "$src/env"
        git clone --depth 1 https://github.com/riscv/riscv-test-env "$src/env"
    fi
fi
[[ -f $src/env/p/riscv_test.h ]] || { echo "missing $src/env/p/riscv_test.h" >&2; exit 1; }

CPP=${CPP:-clang-16}
AS=${AS:-riscv64-unknown-elf-as}
LD=${LD:-riscv64-unknown-elf-ld}

suite_tests() { # suite -> test names from its Makefrag
    sed -n "/^$1_sc_tests *=/,/^\$/p" "$src/isa/$1/Makefrag" |
        sed -e 's/.*=//' -e 's/\\//g' | tr -s ' \t' '\n' | sed '/^$/d'
}

bin=$work/bin
mkdir -p "$bin"
elfs=()
for suite in rv64ui rv64um rv64uf; do
    for t in $(suite_tests "$suite"); do
        out=$bin/$suite-p-$t
        # Preprocess with clang (defines __riscv_xlen), assemble and link with GNU binutils so
        # the env's link script is used exactly as upstream does.
        "$CPP" --target=riscv64-unknown-elf -march=rv64gc -mabi=lp64 -E -x assembler-with-cpp \
            -I"$src/env/p" -I"$src/isa/macros/scalar" "$src/isa/$suite/$t.S" -o "$out.s"
        "$AS" -march=rv64imafd_zicsr_zifencei -mabi=lp64 "$out.s" -o "$out.o"
        "$LD" -T "$src/env/p/link.ld" "$out.o" -o "$out"
        elfs+=("$out")
    done
done

cd "$root"
cargo run -q -p npusim-device --release --example riscv_test_runner -- \
    --allow-fail rv64ui-p-ma_data --allow-fail rv64ui-p-fence_i "${elfs[@]}"
