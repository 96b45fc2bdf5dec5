#!/usr/bin/env bash
# Relay fan-out benchmark over WebSocket on loopback. moqd runs one worker pinned to one CPU, the
# load generator (`moq bench`: one publisher, N subscribers, one event loop) on another. For each
# case it prints the generator's line plus moqd's CPU use, from /proc/PID/stat, over the run:
# the share of its one core (the limit in the same run is 100%) and the CPU time per delivered
# frame and per delivered MB. Bounded: each case publishes for SECONDS and stops.
#   bench/relay_bench.sh [build-dir]            the WebSocket fan-out cases
#   CASES=quic bench/relay_bench.sh [build-dir]  one publisher to one subscriber over QUIC (the
#                                                relay's GSO/GRO on and off), WebTransport and
#                                                WebSocket
#   CASES=transports bench/relay_bench.sh [dir]  100 subscribers of 1000-byte frames over WebSocket,
#                                                QUIC and WebTransport
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${SECONDS_PER_CASE:-5}
relay_cpu=${RELAY_CPU:-1}
gen_cpu=${GEN_CPU:-0}
ticks=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run_case() {  # subscribers rate frame_size group_every [transport] [moqd args...]
  local subs=$1 rate=$2 size=$3 every=$4 transport=${5:-ws}
  shift 5 2>/dev/null || shift $#
  local extra=("$@")
  local out="$tmp/moqd.out"
  taskset -c "$relay_cpu" "$build/bin/moqd" --listen 127.0.0.1:0 --workers 1 --log-level warn \
    --max-publisher-rate 0 "${extra[@]}" >"$out" 2>"$tmp/moqd.err" &
  local pid=$!
  for _ in $(seq 100); do grep -q "moqd ready" "$out" 2>/dev/null && break; sleep 0.05; done
  local url; url=$(sed -n 's/moqd ready url=//p' "$out")
  local t0; t0=$(cpu_ticks "$pid")
  local start; start=$(date +%s.%N)
  local line
  line=$(taskset -c "$gen_cpu" "$build/bin/moq" bench "$url" --subscribers "$subs" --rate "$rate" \
           --frame-size "$size" --group-every "$every" --seconds "$seconds" --transport "$transport" || true)
  line="[$transport ${extra[*]}] $line"
  local t1; t1=$(cpu_ticks "$pid")
  local end; end=$(date +%s.%N)
  kill -TERM "$pid"; wait "$pid" || true
  local received; received=$(sed -n 's/.* received=\([0-9]*\).*/\1/p' <<<"$line")
  awk -v line="$line" -v t="$((t1 - t0))" -v hz="$ticks" -v s0="$start" -v s1="$end" \
      -v frames="$received" -v size="$size" 'BEGIN {
    cpu = t / hz; wall = s1 - s0;
    printf "%s\n  relay: cpu=%.2fs of %.2fs wall (%.0f%% of its core)  %.2f us/frame  %.1f ms/MB\n",
      line, cpu, wall, 100 * cpu / wall, frames ? 1e6 * cpu / frames : 0,
      frames ? 1e3 * cpu / (frames * size / 1e6) : 0 }'
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(uname -r), moqd $("$build/bin/moqd" --help >/dev/null 2>&1 && echo built) from $build"
if [[ ${CASES:-ws} == transports ]]; then
  run_case 100 100 1000 10 ws
  run_case 100 100 1000 10 quic
  run_case 100 100 1000 10 webtransport
elif [[ ${CASES:-ws} == quic ]]; then
  run_case 1 400 262144 4 quic --udp-gso true --udp-gro true
  run_case 1 400 262144 4 quic --udp-gso false --udp-gro false
  run_case 1 400 262144 4 webtransport
  run_case 1 400 262144 4 ws
else
  run_case 10 100 1000 10
  run_case 100 100 1000 10
  run_case 500 30 1000 10
  run_case 10 200 65536 10
  run_case 50 30 262144 4
fi
