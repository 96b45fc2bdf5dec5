#!/usr/bin/env bash
# Soak: one moqd with --workers 2 and a steady fan-out through it for DURATION (default 1h),
# sampling the relay's RSS, open fds and the viewers' latency every SAMPLE (default 60s), then
# the relay's RSS and fds once the viewers have left. Bounded: the fan-out publishes for
# DURATION and stops; moqd is stopped at the end (or on exit).
#   bench/soak.sh [build-dir]               writes soak-<UTC time>.log beside the build dir
#   DURATION=10m VIEWERS=20 SAMPLE=30s ...  shorter, fewer viewers, denser samples
#   LOG_LEVEL=info ...                      moqd's --log-level (default warn), its stderr goes to the log
#   MOQD=/path/moqd MOQ=/path/moq ...       binaries other than the build dir's (a copy is safe
#                                           from a rebuild during a long run)
# Output: "sample {json}" lines (t_s, rss_mib, fds, frames, p50_ms, p99_ms, p999_ms, max_ms),
# "baseline"/"after" lines, and the fan-out's JSON result.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
duration=${DURATION:-1h}
viewers=${VIEWERS:-20}
sample=${SAMPLE:-60s}
settle=${SETTLE:-10}
log=${LOG:-$build/soak-$(date -u +%Y%m%dT%H%M%S).log}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }

fifo=$(mktemp -u)
mkfifo "$fifo"
"${MOQD:-$build/bin/moqd}" --listen 127.0.0.1:0 --workers 2 --log-level "${LOG_LEVEL:-warn}" \
  --max-connections-per-address 100000 >"$fifo" 2>>"$log" &
moqd=$!
trap 'kill $moqd 2>/dev/null || true; rm -f "$fifo"' EXIT
read -r ready <"$fifo"
url=${ready#moqd ready url=}
exec 3<"$fifo"  # keep moqd's stdout open
echo "soak: moqd $moqd at $url, $viewers viewers for $duration, a sample every $sample" | tee -a "$log"
sleep 2
echo "baseline {\"rss_mib\":$(awk "BEGIN{print $(rss_kb $moqd)/1024}"),\"fds\":$(fds $moqd)}" | tee -a "$log"
"${MOQ:-$build/bin/moq}" bench fanout --relay "$url" --relay-pid "$moqd" --viewers "$viewers" \
  --duration "$duration" --sample-every "$sample" --json 2>&1 >>"$log" | grep --line-buffered '^sample ' | tee -a "$log"
sleep "$settle"
echo "after {\"rss_mib\":$(awk "BEGIN{print $(rss_kb $moqd)/1024}"),\"fds\":$(fds $moqd),\"settle_s\":$settle}" | tee -a "$log"
if kill -0 $moqd 2>/dev/null; then
  kill -TERM $moqd
  status=0; wait $moqd || status=$?
  echo "soak: moqd stopped at the end (exit status $status)" | tee -a "$log"
else
  status=0; wait $moqd || status=$?
  echo "soak: moqd DIED before the end (exit status $status)" | tee -a "$log"
fi
echo "soak: log in $log"
