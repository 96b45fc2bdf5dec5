#!/usr/bin/env bash
# The relay benchmarks of docs/BENCHMARKS.md as one table of `moq bench` cases. Each case starts
# its own moqd (pinned to the relay's CPUs; `moq bench` picks them: the upper half of the machine,
# the generator the rest) and prints one JSON object a line, prefixed by the case's name.
# Bounded: every case publishes for DURATION and stops; --find-max makes at most 8 runs.
#   bench/relay_bench.sh [build-dir]        every case below (about 10 minutes on 2 cores)
#   CASES="limits fanout-quic-100" ...      only these
#   DURATION=20s                            publishing time per fan-out run (default 10s)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
moq="$build/bin/moq"
duration=${DURATION:-10s}
fanout=(bench fanout --moqd "$build/bin/moqd" --duration "$duration" --json)

declare -A cases=(
  [limits]="bench limits --json"
  [fanout-quic-100]="${fanout[*]} --viewers 100"
  [fanout-quic-300]="${fanout[*]} --viewers 300"
  [fanout-quic-1000]="${fanout[*]} --viewers 1000"
  [fanout-wt-100]="${fanout[*]} --viewers 100 --transport wt"
  [fanout-wt-300]="${fanout[*]} --viewers 300 --transport wt"
  [fanout-wt-1000]="${fanout[*]} --viewers 1000 --transport wt"
  [fanout-ws-100]="${fanout[*]} --viewers 100 --transport ws"
  [fanout-ws-300]="${fanout[*]} --viewers 300 --transport ws"
  [fanout-ws-1000]="${fanout[*]} --viewers 1000 --transport ws"
  [fanout-quic-find-max]="${fanout[*]} --viewers 100 --find-max"
  [fanout-quic-spin]="${fanout[*]} --viewers 100 --relay-arg=--debug-spin-per-delivery=10us"
  [msgs]="bench msgs --moqd $build/bin/moqd --json"
)
order=(limits fanout-quic-100 fanout-quic-300 fanout-quic-1000 fanout-wt-100 fanout-wt-300
       fanout-wt-1000 fanout-ws-100 fanout-ws-300 fanout-ws-1000 fanout-quic-find-max
       fanout-quic-spin msgs)

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(uname -r), $build"
for name in ${CASES:-${order[*]}}; do
  [[ -n ${cases[$name]:-} ]] || { echo "relay_bench: unknown case $name" >&2; exit 2; }
  # shellcheck disable=SC2086  # the case's words are meant to split
  echo "$name $("$moq" ${cases[$name]} 2>/dev/null || echo '{"error":"moq bench failed"}')"
done
