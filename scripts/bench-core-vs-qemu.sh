#!/usr/bin/env bash
# Runs the same compiled C function, `scalar_loop` from device/tests/data/kernels.c, (a) on the
# simulated core (device/examples/core_mips.rs) and (b) under qemu-riscv64 user mode as a
# static program whose _start calls it and exits with ecall 93. Both get the same instruction
# count (the core's count for the call; the _start wrapper adds 4), so MIPS = instructions /
# wall seconds. Prints the median of each and the ratio core / qemu.
#
# Needs: clang-16, lld-16, qemu-user, cargo.
#   apt-get install -y clang-16 lld-16 qemu-user
#
# Environment: ITER (loop iterations, default 50000000), REPEATS (default 5).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
iter=${ITER:-50000000}
repeats=${REPEATS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# (a) the core.
cd "$root"
core_out=$(cargo run -q -p npusim-device --release --example core_mips -- "$iter" "$repeats")
echo "$core_out"
core_mips=$(sed -n 's/^median_mips=\([0-9.]*\).*/\1/p' <<<"$core_out")
instructions=$(sed -n 's/.*instructions=\([0-9]*\)$/\1/p' <<<"$core_out")

# (b) qemu: same source and flags as device/tests/data/build.sh, plus a Linux-style _start.
clang-16 --target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -mcmodel=medany -O2 \
    -ffreestanding -nostdlib -fno-builtin -c device/tests/data/kernels.c -o "$tmp/kernels.o"
cat > "$tmp/start.S" <<EOF
    .globl _start
_start:
    li a0, $iter
    call scalar_loop
    li a7, 93          # exit(a0 & 0xff)
    ecall
EOF
clang-16 --target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -c "$tmp/start.S" -o "$tmp/start.o"
ld.lld-16 -static -e _start "$tmp/start.o" "$tmp/kernels.o" -o "$tmp/bench"

qemu_runs=()
for r in $(seq 1 "$repeats"); do
    t0=$(date +%s%N)
    qemu-riscv64 "$tmp/bench" || true # the exit status is the result's low byte
    t1=$(date +%s%N)
    mips=$(awk -v n="$instructions" -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", n / (ns / 1e9) / 1e6 }')
    echo "qemu repeat $r: $(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }') s, $mips MIPS"
    qemu_runs+=("$mips")
done
qemu_mips=$(printf '%s\n' "${qemu_runs[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')

echo
echo "scalar_loop($iter): $instructions instructions"
echo "core: median $core_mips MIPS"
echo "qemu-riscv64: median $qemu_mips MIPS"
awk -v c="$core_mips" -v q="$qemu_mips" 'BEGIN { printf "ratio core/qemu: %.2f\n", c / q }'
