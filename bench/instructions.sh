#!/usr/bin/env bash
# Instructions per delivered frame, counted by callgrind: for comparing two builds on a noisy
# machine, where timings are not. Runs BUILD/bin/moqd_bench_instructions (bench/instructions_main.cc:
# the 1-worker fan-out to BENCH_SUBSCRIBERS subscribers, BENCH_GROUPS groups of 30 frames of
# 1000 bytes) under `valgrind --tool=callgrind --instr-atstart=no`, so only the delivery phase is
# counted, and prints
#   instructions_per_delivery=N   (callgrind's total Ir / deliveries, rounded down)
# with the totals it came from.
#   bench/instructions.sh [build-dir]            default build-bench
#   BENCH_SUBSCRIBERS=64 BENCH_GROUPS=10         the defaults
#   BENCH_FRAMES=3000 BENCH_FRAME_SIZE=16        chat-shaped: long groups of small frames
#                                                (defaults 30 and 1000)
#   BENCH_WORKERS=2                              the 2-worker fan-out instead (less repeatable:
#                                                how the two threads interleave varies by ~2%)
#   KEEP=1                                       keep callgrind's output (for callgrind_annotate)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
bin="$build/bin/moqd_bench_instructions"
subscribers=${BENCH_SUBSCRIBERS:-64}
groups=${BENCH_GROUPS:-10}
workers=${BENCH_WORKERS:-1}
frames=${BENCH_FRAMES:-30}
frame_size=${BENCH_FRAME_SIZE:-1000}
if [[ ! -x "$bin" ]]; then
  echo "instructions: $bin not found (configure $build with -DMOQD_BENCH=ON and build target" \
       "moqd_bench_instructions)" >&2
  exit 1
fi
if ! command -v valgrind >/dev/null; then
  echo "instructions: valgrind is not installed" >&2
  exit 1
fi
out=$(mktemp -d)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$out"' EXIT
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/callgrind.out" \
  "$bin" --subscribers "$subscribers" --groups "$groups" --workers "$workers" \
  --frames-per-group "$frames" --frame-size "$frame_size" >"$out/stdout" 2>"$out/stderr" || {
  echo "instructions: the run failed:" >&2
  cat "$out/stdout" "$out/stderr" >&2
  exit 1
}
deliveries=$(sed -n 's/^deliveries=\([0-9]*\).*/\1/p' "$out/stdout")
ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out/callgrind.out" | head -1)
if [[ -z "$ir" ]]; then
  ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out/callgrind.out" | head -1)
fi
if [[ -z "$deliveries" || "$deliveries" -eq 0 || -z "$ir" ]]; then
  echo "instructions: could not read the deliveries or the instruction total" >&2
  cat "$out/stdout" >&2
  exit 1
fi
head -1 "$out/stdout"
echo "build=$build instructions=$ir deliveries=$deliveries"
echo "instructions_per_delivery=$((ir / deliveries))"
if [[ -n "${KEEP:-}" ]]; then
  echo "callgrind output: $out/callgrind.out"
fi
