#!/usr/bin/env bash
# The allocator comparison of docs/BENCHMARKS.md: moqd as built (glibc malloc and moqd's own
# malloc_trim) against the same binary with jemalloc or mimalloc preloaded (Debian's
# libjemalloc2 and libmimalloc2.0), alternating allocators within each round.
#   bench/alloc_compare.sh [build-dir]    ROUNDS=3 VIEWERS=300 DURATION=6s by default
# Per allocator and round, two cases, one JSON object a line prefixed by the case's name:
#   fanout-ALLOC   `moq bench fanout` (its own moqd, --workers 1, pinned): relay ns/B, KB/viewer
#   burst-ALLOC    moqd --workers 2 started here; RSS before, at the end of a fan-out of VIEWERS
#                  viewers (via --relay), and 1, 5, 10 and 20 s after they left: does memory
#                  come back
# Bounded: every fan-out publishes for DURATION; each burst's moqd is stopped after 20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-3}
viewers=${VIEWERS:-300}
duration=${DURATION:-6s}
allocators=${ALLOCATORS:-glibc jemalloc mimalloc}
libdir=/usr/lib/x86_64-linux-gnu
declare -A preload=([glibc]="" [jemalloc]="$libdir/libjemalloc.so.2" [mimalloc]="$libdir/libmimalloc.so.2")
for a in $allocators; do
  if [[ -n ${preload[$a]} && ! -e ${preload[$a]} ]]; then
    echo "alloc_compare: ${preload[$a]} missing: apt-get install libjemalloc2 libmimalloc2.0" >&2
    exit 2
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

wrapper() {  # a moqd that runs with allocator $1
  local w="$tmp/moqd-$1"
  printf '#!/bin/sh\n%sexec %q "$@"\n' "${preload[$1]:+LD_PRELOAD=${preload[$1]} }" "$PWD/$build/bin/moqd" >"$w"
  chmod +x "$w"
  echo "$w"
}
rss_mib() { awk '/^VmRSS:/ {printf "%.2f", $2/1024}' "/proc/$1/status"; }

burst() {
  local bin=$1 fifo="$tmp/fifo" pid url ready before peak
  rm -f "$fifo"; mkfifo "$fifo"
  "$bin" --listen 127.0.0.1:0 --workers 2 --log-level warn --max-connections-per-address 100000 \
    --max-publisher-rate 0 >"$fifo" 2>/dev/null &
  pid=$!
  exec 4<"$fifo"
  read -r ready <&4
  url=${ready#moqd ready url=}
  sleep 1
  before=$(rss_mib $pid)
  (peak=0; while kill -0 $pid 2>/dev/null; do
     peak=$(awk -v a="$peak" -v b="$(rss_mib $pid)" 'BEGIN{print (b>a)?b:a}'); echo "$peak" >"$tmp/peak"
     sleep 0.2; done) &
  local sampler=$!
  "$build/bin/moq" bench fanout --relay "$url" --relay-pid $pid --viewers "$viewers" \
    --duration "$duration" --json --limits-seconds 0.05 2>/dev/null >"$tmp/burst.json" || true
  local at_end; at_end=$(rss_mib $pid)  # the viewers have left
  local after=()
  for s in 1 4 5 10; do sleep $s; after+=("$(rss_mib $pid)"); done
  peak=$(cat "$tmp/peak")
  kill $sampler 2>/dev/null || true; wait $sampler 2>/dev/null || true
  kill -TERM $pid; wait $pid || true
  exec 4<&-
  printf '{"rss_before_mib":%s,"rss_peak_mib":%s,"rss_at_end_mib":%s,"rss_after_1s":%s,"rss_after_5s":%s,"rss_after_10s":%s,"rss_after_20s":%s}\n' \
    "$before" "$peak" "$at_end" "${after[@]}"
}

for round in $(seq "$rounds"); do
  for a in $allocators; do
    bin=$(wrapper "$a")
    echo "fanout-$a round=$round $("$build/bin/moq" bench fanout --moqd "$bin" --viewers "$viewers" \
      --duration "$duration" --json --limits-seconds 0.2 2>/dev/null)"
    echo "burst-$a round=$round $(burst "$bin")"
  done
done
