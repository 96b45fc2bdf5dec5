#!/usr/bin/env bash
# The whole suite, as `make test` runs it. Prints how long each stage took.
#   build        g++ RelWithDebInfo: unit tests, the @moq/lite interop suite, then the browser
#                tests (@moq/lite in headless Chromium over WebTransport and WebSocket)
#   asan         clang, ASan+UBSan: unit tests, the interop suite and the browser tests against
#                sanitized binaries
#   tsan         g++, TSan: the multi-worker tests (runtime, and relay's two-worker bridge tests)
#                and interop tests on 2 workers, and `moq sub`/`moq pub --fallback` failing over
#   bench        the microbenchmarks, the fixed-work fan-out and the in-process QUIC fan-out (built with
#                the g++ stage) run once
#                each, briefly: they check every delivery, so they must not rot (figures are
#                docs/BENCHMARKS.md's, not this stage's); the fixed-work fan-out fails when a
#                delivery allocates or locks (--assert-zero)
#   fuzz         every fuzzer on its committed corpus, 60 s in all
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
declare -a stage_names stage_times
stage() {
  local name=$1; shift
  local t0=$SECONDS
  echo "=== stage: $name"
  "$@"
  stage_names+=("$name"); stage_times+=($((SECONDS - t0)))
  echo "=== stage: $name took $((SECONDS - t0)) s"
}
# CCACHE=1 builds through ccache (installed by setup.sh): a rebuild of an unchanged tree, or of a
# second checkout of the same sources, is then nearly free. Off by default: a fresh clone (CI)
# gains nothing from it, and a build must never depend on what a cache holds.
launcher=()
if [[ -n "${CCACHE:-}" ]] && command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
configure_build() {  # dir compiler extra-flags...   (TARGETS: what to build; default all)
  local dir=$1 cxx=$2; shift 2
  [[ -f $dir/build.ninja ]] ||
    cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" "$@" >/dev/null
  local targets=()
  for t in ${TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
}
# The layers' gtest binaries ($dir/tests/*_tests), each split into gtest shards of about
# $tests_per_shard tests, every shard one process, $jobs at a time, the largest binaries first.
# ctest (`make unit`) starts one process per test instead: 1,100 of them, and each start of an
# ASan binary costs about 0.15 s of CPU (its shadow memory, then LeakSanitizer at exit), which
# was most of the unit-asan stage. Every test still runs, in its own binary, with the same
# sanitizer options; a shard stops at ${shard_timeout} s.
tests_per_shard=100
shard_timeout=300
unit() {  # dir
  local dir=$1
  local logs; logs=$(mktemp -d)
  local -a shards=()
  local b n count
  for b in "$dir"/tests/*_tests; do
    count=$("$b" --gtest_list_tests | grep -c '^  ' || true)
    n=$(((count + tests_per_shard - 1) / tests_per_shard))
    ((n >= 1)) || n=1
    for ((i = 0; i < n; i++)); do shards+=("$count $b $i $n"); done
  done
  mapfile -t shards < <(printf '%s\n' "${shards[@]}" | sort -rn -k1,1 -k3,3n)
  local -A running=()
  local failed=() pid rc shard
  finish() {  # pid exit-status: a shard that ended
    local rc=$2 s=${running[$1]}
    unset "running[$1]"
    read -r _ b i n <<<"$s"
    if ((rc == 0)); then
      echo "ok   $(basename "$b") shard $((i + 1))/$n:" \
        "$(sed -n 's/^\[  PASSED  \] //p' "$logs/$(basename "$b").$i")"
    else
      echo "FAIL $(basename "$b") shard $((i + 1))/$n (exit $rc); its output:"
      tail -n 60 "$logs/$(basename "$b").$i"
      failed+=("$b $i")
    fi
  }
  for shard in "${shards[@]}"; do
    while ((${#running[@]} >= jobs)); do
      rc=0; wait -n -p pid || rc=$?
      finish "$pid" "$rc"
    done
    read -r _ b i n <<<"$shard"
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout -k 10 "$shard_timeout" "$b" \
      >"$logs/$(basename "$b").$i" 2>&1 &
    running[$!]=$shard
  done
  while ((${#running[@]} > 0)); do
    rc=0; wait -n -p pid || rc=$?
    finish "$pid" "$rc"
  done
  if ((${#failed[@]} == 0)); then
    rm -rf "$logs"
    return 0
  fi
  # CI keeps only the tail of the output: end with the failed tests run again one at a time, the
  # last 80 lines of each, so the reason is what a reader sees last. A shard that died without a
  # verdict (a crash, a timeout) names the test it was running.
  echo "=== unit: the failed tests again, alone"
  local f log names=()
  for f in "${failed[@]}"; do
    read -r b i <<<"$f"
    log="$logs/$(basename "$b").$i"
    mapfile -t names < <(sed -n 's/^\[  FAILED  \] \([^ ,]*\.[^ ,]*\).*/\1/p' "$log" | awk '!seen[$0]++')
    ((${#names[@]} > 0)) || mapfile -t names < <(sed -n 's/^\[ RUN      \] //p' "$log" | tail -n 1)
    for t in "${names[@]}"; do
      echo "--- $(basename "$b") --gtest_filter=$t"
      timeout -k 10 "$shard_timeout" "$b" --gtest_filter="$t" 2>&1 | tail -n 80 || true
    done
  done
  rm -rf "$logs"
  return 1
}
# The interop files, $INTEROP_JOBS at a time (default 1). Each file starts its own moqd on
# ephemeral ports, and most of a file's time is spent waiting (on a timeout, a TTL, a killed relay),
# so two files side by side share 2 cores well. A file whose header says "scripts/test.sh runs this
# file alone" measures RSS, a rate, a CPU cost, a time bound or a bystander that must lose no frame,
# which another file beside it could disturb (by starving it of CPU): those run afterwards, one at
# a time. Both groups always run; the stage fails if either did.
interop_alone_marker="scripts/test.sh runs this file alone"
interop() {  # dir [test files...]
  local dir=$1; shift
  (
    cd tests/interop
    local files=("$@")
    [[ ${#files[@]} -gt 0 ]] || files=(./*.test.mjs)
    local together=() alone=() f rc=0
    for f in "${files[@]}"; do
      if ((${INTEROP_JOBS:-1} > 1)) && grep -q "$interop_alone_marker" "$f"; then alone+=("$f"); else together+=("$f"); fi
    done
    export MOQD_BIN="$PWD/../../$dir/bin/moqd" MOQ_BIN="$PWD/../../$dir/bin/moq"
    if ((${#together[@]} > 0)); then
      node --test --test-concurrency="${INTEROP_JOBS:-1}" --test-force-exit "${together[@]}" || rc=1
    fi
    if ((${#alone[@]} > 0)); then
      echo "=== interop: ${#alone[@]} files one at a time"
      node --test --test-concurrency=1 --test-force-exit "${alone[@]}" || rc=1
    fi
    return $rc
  )
}
browser() {  # dir
  local dir=$1
  (cd tests/browser && MOQD_BIN="$PWD/../../$dir/bin/moqd" MOQ_BIN="$PWD/../../$dir/bin/moq" node --test --test-concurrency=1 --test-force-exit ./*.test.mjs)
}

bench_smoke() {  # dir
  local dir=$1
  # --assert-zero: fails when a delivery allocates or takes a lock in steady state.
  # Each runs once, no retry: the rare 158-320 delivery-path allocations on 2 workers were pool
  # growth (a subscription's second or third GroupWriter at a group boundary) that the warm-up now
  # reaches first (bench/fanout_rig.h; docs/BENCHMARKS.md, "the 2-worker allocation flake").
  "$dir/bin/moqd_bench_instructions" --groups 2 --assert-zero
  "$dir/bin/moqd_bench_instructions" --groups 2 --workers 2 --assert-zero
  "$dir/bin/moqd_bench" --benchmark_min_time=0.01 --benchmark_filter='Varint|Header|Cache'
  # The relay side of a QUIC fan-out in one process: exits 1 unless every byte arrives.
  "$dir/bin/moqd_bench_quic" --viewers 4 --frames 30
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

stage setup ./scripts/setup.sh
stage build-gcc configure_build build g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOQD_BENCH=ON \
  -DMOQD_UNITY_TESTS=ON
stage unit-tests unit build
stage bench bench_smoke build
INTEROP_JOBS=2 stage interop interop build
stage browser browser build
stage build-asan configure_build build-asan clang++-14 -DCMAKE_BUILD_TYPE=Debug \
  "-DMOQD_SANITIZE=address;undefined" -DMOQD_UNITY_TESTS=ON
stage unit-asan unit build-asan
# resources.test.mjs measures RSS, which ASan's quarantine of freed memory inflates: it runs in
# the uninstrumented stage only; so does bench_scripts.test.mjs, which runs moqd under heaptrack
# (its LD_PRELOAD and ASan's runtime cannot both come first).
INTEROP_JOBS=2 stage interop-asan interop build-asan $(cd tests/interop && ls ./*.test.mjs | grep -v -e resources -e bench_scripts)
stage browser-asan browser build-asan
TARGETS="moqd moq runtime_tests relay_tests" stage build-tsan configure_build build-tsan g++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOQD_SANITIZE=thread -DMOQD_UNITY_TESTS=ON
stage unit-tsan build-tsan/tests/runtime_tests --gtest_brief=1
stage relay-tsan build-tsan/tests/relay_tests --gtest_brief=1
stage interop-tsan interop build-tsan ./fanout.test.mjs ./js_pubsub.test.mjs ./framing.test.mjs
# Client failover under TSan: `moq sub --fallback` (a leg per relay, each with its own session)
# keeps receiving when its first relay is killed, `moq pub --fallback` publishes at the next one;
# moqd and moq both TSan builds.
stage fallback-tsan interop build-tsan --test-name-pattern="moq (sub|pub) --fallback" ./cluster.test.mjs
if [[ -x scripts/fuzz.sh ]]; then
  stage fuzz ./scripts/fuzz.sh short
fi

echo "=== stage times"
for i in "${!stage_names[@]}"; do printf '%-14s %5d s\n' "${stage_names[$i]}" "${stage_times[$i]}"; done
