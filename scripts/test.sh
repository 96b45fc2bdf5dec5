#!/usr/bin/env bash
# The whole suite, as `make test` runs it. Prints how long each stage took.
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
configure_build() {  # dir compiler extra-flags...
  local dir=$1 cxx=$2; shift 2
  [[ -f $dir/build.ninja ]] || cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

stage setup ./scripts/setup.sh
stage build-gcc configure_build build g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
stage build-clang configure_build build-clang clang++-14 -DCMAKE_BUILD_TYPE=Debug
stage unit-tests bash -c "cd build && ctest --output-on-failure -j $jobs"
if [[ -f tests/interop/package.json ]]; then
  stage interop bash -c "cd tests/interop && MOQD_BIN=$PWD/build/bin/moqd MOQ_BIN=$PWD/build/bin/moq node --test --test-concurrency=1 ./*.test.mjs"
fi

echo "=== stage times"
for i in "${!stage_names[@]}"; do printf '%-14s %5d s\n' "${stage_names[$i]}" "${stage_times[$i]}"; done
