#!/bin/bash
# Where a connected QUIC viewer's heap goes, per allocation site: bench/heap_sites.sh BUILD [N1 N2]
#
# Runs moqd (one worker, CPU 1) under heaptrack twice, with N1 and then N2 viewers of `moq bench
# fanout` (a 1 Mbit/s track), and kills it with SIGKILL KILL_AT seconds after the viewers are
# connected: heaptrack's "leaked" bytes are then the heap live at that moment. The difference
# between the two snapshots, per site, divided by N2 - N1, is what one more viewer holds; what the
# relay holds whatever the viewer count (the cache, the send batch, GnuTLS's tables) cancels out.
# Bounded: each run publishes DURATION seconds (default 12); BENCH_ARGS adds `moq bench fanout` flags. Prints the sites, largest first, and
# the total per viewer. heaptrack slows moqd's allocations (handshakes most), so keep N2 at about
# 60 on a shared 2-core machine: past ~100 the viewers time out while connecting.
#
# ngtcp2's own functions have no symbols in Debian's library; to name them, build ngtcp2 1.11 from
# source with -g and point NGTCP2_LIBS at its lib/ and crypto/gnutls/ (colon-separated): the
# library is ABI-identical, LD_LIBRARY_PATH picks it up for moqd only.
set -euo pipefail
B=$(cd "${1:?usage: bench/heap_sites.sh BUILD [N1 N2]}" && pwd)
N1=${2:-20}
N2=${3:-60}
DURATION=${DURATION:-12}
KILL_AT=${KILL_AT:-6}
OUT=${OUT:-$(mktemp -d /tmp/heap_sites.XXXXXX)}
mkdir -p "$OUT"
command -v heaptrack >/dev/null || { echo "heaptrack is not installed (apt-get install heaptrack)" >&2; exit 1; }

snapshot() {  # N FILE_PREFIX
  local n=$1 out=$2 ht pid url s=0
  rm -f "$out".*
  LD_LIBRARY_PATH=${NGTCP2_LIBS:-} taskset -c 1 heaptrack -o "$out" "$B/bin/moqd" --listen 127.0.0.1:0 \
    --workers 1 --log-level warn --max-publisher-rate 0 --max-connections-per-address 1000000 \
    --max-connections 1000000 >"$out.stdout" 2>&1 &
  ht=$!
  for _ in $(seq 100); do grep -q "moqd ready" "$out.stdout" 2>/dev/null && break; sleep 0.1; done
  url=$(grep -o "moqd ready url=[^ ]*" "$out.stdout" | sed 's/moqd ready url=//')
  # moqd is heaptrack's child (taskset execs heaptrack, so $ht is heaptrack's pid). Never look it
  # up by command line: any moqd run from the same binary path (a soak, `moq bench churn`, another
  # run of this script) matches "$B/bin/moqd --listen", and the SIGKILL below would end that one.
  pid=$(pgrep -P "$ht" -x moqd || true)
  if [ -z "$pid" ] || [ "$(wc -w <<<"$pid")" -ne 1 ]; then
    echo "cannot find the moqd that heaptrack ($ht) started" >&2
    kill "$ht" 2>/dev/null || true
    exit 1
  fi
  "$B/bin/moq" bench fanout --relay "$url" --relay-pid "$pid" --viewers "$n" --duration "${DURATION}s" \
    --json --limits-seconds 0.05 --gen-cpus 0 ${BENCH_ARGS:-} >"$out.bench.json" 2>"$out.bench.err" &
  local bench=$!
  for _ in $(seq 300); do  # the publisher, the bystander's two sessions and the viewers
    s=$(curl -s "${url}health" | grep -o '"sessions":[0-9]*' | cut -d: -f2 || true)
    [ -n "$s" ] && [ "$s" -ge $((n + 1)) ] && break
    sleep 0.2
  done
  if [ -z "$s" ] || [ "$s" -lt $((n + 1)) ]; then
    echo "only ${s:-0} sessions of $((n + 1)) connected in time (a machine too busy for heaptrack?)" >&2
    kill -9 "$pid"
    wait "$ht" "$bench" || true
    exit 1
  fi
  sleep "$KILL_AT"
  echo "snapshot: $s sessions, moqd $(grep VmRSS /proc/"$pid"/status)" >&2
  kill -9 "$pid"
  wait "$ht" || true
  wait "$bench" || true
}

snapshot "$N1" "$OUT/n1"
snapshot "$N2" "$OUT/n2"
heaptrack_print -f "$OUT/n2.zst" -d "$OUT/n1.zst" --print-leaks 1 --print-peaks 0 --print-allocators 0 \
  --print-temporary 0 -n 60 -s 60 2>/dev/null >"$OUT/diff.txt"
# One line per site: bytes per viewer, calls per viewer, then the frames that name it.
awk -v d=$((N2 - N1)) '
  function flush() { if (hdr != "") printf "%8.0f B %6.2f calls  %s\n", bytes / d, calls / d, sig }
  function tobytes(s) {
    if (s ~ /K$/) return substr(s, 1, length(s) - 1) * 1000
    if (s ~ /M$/) return substr(s, 1, length(s) - 1) * 1000000
    sub(/B$/, "", s); return s + 0
  }
  /leaked over .* calls from:$/ { flush(); hdr = $0; bytes = tobytes($1); calls = $4; sig = ""; k = 0; next }
  /leaked over .* calls from$/ { flush(); hdr = ""; next }
  hdr != "" && k < 14 { k++; if ($0 !~ /^ *(at|in) / && $0 !~ /0x/ && $0 !~ /std::/) { l = $0; gsub(/^ +/, "", l); gsub(/\(.*$/, "", l); sig = sig " < " l } }
  END { flush() }
' "$OUT/diff.txt" | sort -rn >"$OUT/sites.txt"
head -60 "$OUT/sites.txt"
grep "total memory leaked" "$OUT/diff.txt" | sed "s/$/ over $((N2 - N1)) viewers/"
echo "heaptrack files and the full diff: $OUT" >&2
