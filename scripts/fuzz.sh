#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzzer.cc) in build-fuzz and runs them. See docs/TESTING.md.
#   scripts/fuzz.sh short                  every target on a copy of its committed corpus, 60 s of
#                                          fuzzing in all (make test); fails on any crash
#   scripts/fuzz.sh long [SECONDS]         each target for SECONDS (default 300), new inputs kept in
#                                          build-fuzz/corpus/<target>; prints a summary table
# Targets run FUZZ_JOBS at a time (default: the number of cores), so short takes 60 s / FUZZ_JOBS.
# Crash inputs land in build-fuzz/artifacts/. Nothing is ever written into fuzz/corpus.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-fuzz
MODE=${1:-short}
CXX_CLANG=${CXX_CLANG:-clang++-14}
SHORT_TOTAL=60

usage() {
  echo "usage: $0 short | long [SECONDS_PER_TARGET]" >&2
  exit 2
}

build() {
  if [[ ! -f $BUILD/build.ninja ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_CLANG" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOQD_FUZZ=ON -DMOQD_TESTS=OFF >/dev/null
  fi
  cmake --build "$BUILD" --target "${TARGETS[@]}"
}

# Runs one target; $1 name, $2 seconds, $3 corpus dir written to. Leaves the log in $BUILD/logs.
run_target() {
  local name=$1 seconds=$2 corpus=$3
  local log=$BUILD/logs/$name.log
  local dict=()
  [[ -f $ROOT/fuzz/moq.dict ]] && dict=(-dict="$ROOT/fuzz/moq.dict")
  local rc=0
  "$BUILD/fuzz/$name" "$corpus" "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$name-" \
    >"$log" 2>&1 || rc=$?
  return $rc
}

# "execs exec/s cov ft" from a libFuzzer log.
stats() {
  local log=$1
  local execs rate last cov ft
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  echo "${execs:-?} ${rate:-?} ${cov:-?} ${ft:-?}"
}

mapfile -t TARGETS < <(find "$ROOT/fuzz" -maxdepth 1 -name '*_fuzzer.cc' -printf '%f\n' |
  sed 's/\.cc$//' | sort)
[[ ${#TARGETS[@]} -gt 0 ]] || { echo "no fuzz targets" >&2; exit 1; }

case $MODE in
  short)
    [[ $# -le 1 ]] || usage
    per=$((SHORT_TOTAL / ${#TARGETS[@]}))
    ((per >= 1)) || per=1
    ;;
  long)
    [[ $# -le 2 ]] || usage
    per=${2:-300}
    [[ $per =~ ^[0-9]+$ && $per -ge 1 ]] || usage
    ;;
  *) usage ;;
esac

build
mkdir -p "$BUILD/logs" "$BUILD/artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Starts one target in the background on its corpus (a copy in short mode).
start_target() {
  local t=$1 name=${1%_fuzzer} corpus
  if [[ $MODE == short ]]; then
    corpus=$scratch/$name  # a copy: short runs never keep what they find
    mkdir -p "$corpus"
    [[ -d $ROOT/fuzz/corpus/$name ]] && cp -r "$ROOT/fuzz/corpus/$name/." "$corpus/"
  else
    corpus=$BUILD/corpus/$name
    mkdir -p "$corpus"
    [[ -d $ROOT/fuzz/corpus/$name ]] && cp -rn "$ROOT/fuzz/corpus/$name/." "$corpus/"
  fi
  echo "== $t: ${per}s on $corpus"
  run_target "$t" "$per" "$corpus" &
  running[$!]=$t
}

# Reports a target that ended; $1 its pid, $2 its exit status.
end_target() {
  local t=${running[$1]} status=ok
  unset "running[$1]"
  if (($2 != 0)); then
    status=CRASH
    failed+=("$t")
    grep -E 'ERROR|SUMMARY|Test unit written|_fuzzer: ' "$BUILD/logs/$t.log" | head -20 || true
  fi
  read -r execs rate cov ft <<<"$(stats "$BUILD/logs/$t.log")"
  echo "   $t $status: $execs executions, $rate exec/s, cov: $cov, ft: $ft (log: $BUILD/logs/$t.log)"
  rows[$t]=$(printf '%-16s %8s %12s %8s %8s %8s  %s' "$t" "$per" "$execs" "$rate" "$cov" "$ft" "$status")
}

# libFuzzer runs one process on one core: $FUZZ_JOBS targets (default: the number of cores) run
# at once, each for its full $per seconds.
jobs=${FUZZ_JOBS:-$(nproc)}
declare -A running=() rows=()
failed=()
for t in "${TARGETS[@]}"; do
  while ((${#running[@]} >= jobs)); do
    rc=0; wait -n -p pid || rc=$?
    end_target "$pid" "$rc"
  done
  start_target "$t"
done
while ((${#running[@]} > 0)); do
  rc=0; wait -n -p pid || rc=$?
  end_target "$pid" "$rc"
done

echo
printf '%-16s %8s %12s %8s %8s %8s  %s\n' target seconds executions exec/s cov ft result
for t in "${TARGETS[@]}"; do echo "${rows[$t]}"; done
if ((${#failed[@]} > 0)); then
  echo "fuzz: crash in ${failed[*]}; inputs in $BUILD/artifacts (see docs/TESTING.md)" >&2
  exit 1
fi
