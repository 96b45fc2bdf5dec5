#!/usr/bin/env bash
# Where the relay's CPU goes in a fan-out: starts moqd (one worker, pinned to RELAY_CPU), samples
# it with perf's software clock (cpu-clock: works where hardware counters are not exposed) while
# `moq bench fanout --relay` drives VIEWERS viewers of one 1 Mbit/s track over QUIC, then prints
# the share of samples by library (ngtcp2, GnuTLS/nettle, kernel, moqd, libc) and the hottest
# moqd functions. Bounded by DURATION.
#   bench/profile.sh [build-dir]     defaults: VIEWERS=1000 DURATION=10s RELAY_CPU=1 GEN_CPUS=0
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
viewers=${VIEWERS:-1000}
duration=${DURATION:-10s}
relay_cpu=${RELAY_CPU:-1}
gen_cpus=${GEN_CPUS:-0}
command -v perf >/dev/null || { echo "profile: perf is not installed (Debian: linux-perf)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'kill $moqd 2>/dev/null || true; [[ -n ${KEEP_PERF:-} ]] && cp "$tmp/perf.data" "$KEEP_PERF"; rm -rf "$tmp"' EXIT
taskset -c "$relay_cpu" "$build/bin/moqd" --listen 127.0.0.1:0 --workers 1 --log-level warn \
  --max-publisher-rate 0 --max-connections-per-address 1000000 >"$tmp/moqd.out" 2>"$tmp/moqd.err" &
moqd=$!
for _ in $(seq 100); do grep -q "moqd ready" "$tmp/moqd.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's/moqd ready url=//p' "$tmp/moqd.out")
perf record -q -e cpu-clock -F 999 -g -p "$moqd" -o "$tmp/perf.data" 2>/dev/null &
perf_pid=$!
"$build/bin/moq" bench fanout --relay "$url" --relay-pid "$moqd" --relay-cpus "$relay_cpu" \
  --gen-cpus "$gen_cpus" --viewers "$viewers" --duration "$duration" 2>/dev/null
kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true
echo
echo "## samples by library"
perf report -q -i "$tmp/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -v "^$" | sed "s/ *$//" | head -15 || true
echo
echo "## hottest functions (all libraries)"
perf report -q -i "$tmp/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null |
  grep -v "^$" | sed "s/  *-  *- *$//; s/ *$//" | cut -c1-160 | head -30 || true
echo
echo "## hottest moqd functions"
perf report -q -i "$tmp/perf.data" --no-children --dsos moqd --sort symbol --stdio -g none 2>/dev/null |
  grep -v "^$" | sed "s/  *-  *- *$//; s/ *$//" | cut -c1-160 | head -10 || true
