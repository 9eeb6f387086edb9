#!/usr/bin/env bash
# Counts the instructions of the runtime-core workloads with callgrind (exact and repeatable,
# unlike wall time on a shared machine): per pipeline task against the hand-written loop and
# the bare bevy_ecs skeleton of the same program, per idle frame, per kernel enqueue. Needs
# valgrind (`apt-get install -y valgrind`).
# The probe is built with the bench profile (fat LTO): the first build takes a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench probe --no-run >/dev/null 2>&1
probe=$(ls -t target/release/deps/probe-* | grep -v '\.d$' | head -n 1)
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$probe" "$@" 2>&1 | awk '/Collected/ {print $4}'; }
# As `count`, only inside calls of the function named by the glob $1.
count_in() { local fn=$1; shift; valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect="$fn" "$probe" "$@" 2>&1 | awk '/Collected/ {print $4}'; }
pipe=$(count pipeline); plain=$(count plain)
skel=$(count skeleton)
echo "pipeline, 100,000 kernels (125,000 tasks): $pipe instructions; hand-written loop: $plain ($(python3 -c "print(round($pipe/$plain,1))")x); bare bevy_ecs skeleton: $skel ($(python3 -c "print(round($skel/$plain,2))")x the loop, npusim $(python3 -c "print(round($pipe/$skel,2))")x it)"
rec=$(count pipeline-recording)
echo "pipeline with every API call recorded: $rec instructions ($(python3 -c "print(round($rec/$pipe,2))")x unrecorded)"
i1=$(count idle 10000); i2=$(count idle 20000)
echo "idle frame: $(( (i2 - i1) / 10000 )) instructions"
# Only inside the enqueue calls (the probe drains between batches, as the launch bench does).
l1=$(count_in '*Runtime>::launch' launch 20000); l2=$(count_in '*Runtime>::launch' launch 40000)
echo "kernel enqueue: $(( (l2 - l1) / 20000 )) instructions"
