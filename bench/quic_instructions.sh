#!/usr/bin/env bash
# Instructions the relay side of a QUIC fan-out spends per delivered payload byte, counted by
# callgrind: moqd's transport code, ngtcp2 and GnuTLS, everything inside relay_side() of
# bench/quic_fanout_main.cc (writes, write passes, timers, acknowledgements read), nothing of the
# viewers and no kernel. For comparing two builds on a noisy machine.
#   bench/quic_instructions.sh [build-dir]       default build (configured with -DMOQD_BENCH=ON)
#   VIEWERS=20 FRAMES=120 FRAME_SIZE=4166        the defaults
#   PAIR=0                                       header and payload in two writes (default one write_pair)
#   KEEP=1                                       keep callgrind's output (for callgrind_annotate)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin="$build/bin/moqd_bench_quic"
[[ -x "$bin" ]] || { echo "quic_instructions: $bin not found (-DMOQD_BENCH=ON)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "quic_instructions: valgrind is not installed" >&2; exit 1; }
out=$(mktemp -d)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$out"' EXIT
valgrind --tool=callgrind --instr-atstart=no --toggle-collect='*relay_side*' \
  --callgrind-out-file="$out/callgrind.out" "$bin" --viewers "${VIEWERS:-20}" \
  --frames "${FRAMES:-120}" --frame-size "${FRAME_SIZE:-4166}" --pair "${PAIR:-1}" >"$out/stdout" 2>"$out/stderr" || {
  echo "quic_instructions: the run failed:" >&2
  cat "$out/stdout" "$out/stderr" >&2
  exit 1
}
bytes=$(sed -n 's/^delivered_bytes=\([0-9]*\).*/\1/p' "$out/stdout")
ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out/callgrind.out" | head -1)
[[ -n "$ir" ]] || ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out/callgrind.out" | head -1)
cat "$out/stdout"
echo "build=$build instructions=$ir delivered_bytes=$bytes"
awk -v ir="$ir" -v b="$bytes" 'BEGIN { printf "relay_instructions_per_byte=%.3f\n", ir / b }'
[[ -z "${KEEP:-}" ]] || echo "callgrind output: $out/callgrind.out"
