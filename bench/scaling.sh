#!/usr/bin/env bash
# How far one relay scales with cores: `moq bench fanout --find-max` with the relay on 1, 2, 4
# and 8 cores and the generator (one viewer process per CPU) on the rest, for a machine with at
# least 16 CPUs (the device machine; on a smaller one it runs what fits and says so). One JSON
# object a line per core count, then a Markdown table for docs/BENCHMARKS.md. Bounded: every run
# publishes for DURATION, --find-max makes at most MAX_TRIALS runs, and the whole script stops
# after DEADLINE seconds.
#   bench/scaling.sh [build-dir]     defaults: DURATION=10s MAX_TRIALS=6 START=500 DEADLINE=1500
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
duration=${DURATION:-10s}
trials=${MAX_TRIALS:-6}
start=${START:-500}
deadline=$((SECONDS + ${DEADLINE:-1500}))
cpus=$(nproc)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# $(date -u +%FT%TZ) $cpus CPUs, $(uname -r), $build"
for relay in 1 2 4 8; do
  if ((relay * 2 > cpus)); then
    echo "# skipped: relay on $relay cores needs at least $((relay * 2)) CPUs (this machine has $cpus)"
    continue
  fi
  if ((SECONDS >= deadline)); then
    echo "# stopped: DEADLINE reached before the relay on $relay cores"
    break
  fi
  relay_cpus="$((cpus - relay))-$((cpus - 1))"
  gen_cpus="0-$((cpus - relay - 1))"
  line=$(timeout $((deadline - SECONDS)) "$build/bin/moq" bench fanout --moqd "$build/bin/moqd" \
           --relay-cpus "$relay_cpus" --gen-cpus "$gen_cpus" --viewers $((start * relay)) \
           --duration "$duration" --find-max --max-trials "$trials" --json 2>/dev/null ||
         echo '{"error":"timed out or failed"}')
  echo "relay_cores=$relay $line" | tee -a "$out"
done
echo
echo "| relay cores | viewers held (p99 <= 50 ms, nothing lost, valid) | ran out first | relay ns/B | vs limit | p99 ms | bystander p50 ms |"
echo "|---|---|---|---|---|---|---|"
while read -r cores json; do
  node -e '
    const j = JSON.parse(process.argv[2]); const b = j.best || {};
    const f = (v, d = 2) => (typeof v === "number" ? v.toFixed(d) : "-");
    console.log(`| ${process.argv[1].split("=")[1]} | ${j.max_viewers_held ?? "-"} | ${j.limited_by ?? j.error} | ` +
      `${f(b.relay_ns_per_byte)} | ${f(b.relay_vs_limit)} | ${f(b.latency_ms?.p99, 1)} | ${f(b.bystander_latency_ms?.p50)} |`);
  ' "$cores" "$json"
done <"$out"
