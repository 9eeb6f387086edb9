#!/usr/bin/env bash
# Wall time of examples 04, 08 and 10 with the stream sanitizer off and in report mode
# (NPUSIM_SANITIZE=report), alternating runs; prints each median and the ratio.
# Usage: bash scripts/sanitizer-overhead.sh [rounds]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
examples=(04_memory_pool 08_binary_kernels 10_data_parallel)
cargo build -q --release $(printf -- '--example %s ' "${examples[@]}")
trace=$(mktemp)
run() { # mode example -> milliseconds
    local start end
    start=$(date +%s%N)
    if [ "$1" = report ]; then
        NPUSIM_SANITIZE=report "target/release/examples/$2" "$trace" >/dev/null 2>&1
    else
        env -u NPUSIM_SANITIZE "target/release/examples/$2" "$trace" >/dev/null 2>&1
    fi
    end=$(date +%s%N)
    echo $(((end - start) / 1000000))
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for e in "${examples[@]}"; do
    off=(); on=()
    for _ in $(seq "$rounds"); do
        off+=("$(run off "$e")")
        on+=("$(run report "$e")")
    done
    a=$(median "${off[@]}"); b=$(median "${on[@]}")
    echo "$e: off ${a} ms, report ${b} ms: $(python3 -c "print(round($b/$a, 2))")x"
done
rm -f "$trace"
