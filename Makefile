# moqd: `make run` to start the relay, `make test` for the whole suite. See README.md.
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ARGS ?=

.PHONY: all setup build run test unit test-clang interop fuzz bench bench-configure bench-instructions clean

all: build

setup:
	@./scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/moqd $(ARGS)

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test:
	@./scripts/test.sh

fuzz: setup
	@./scripts/fuzz.sh long

# Microbenchmarks (bench/*_bench.cc, Google Benchmark), Release, in build-bench. BENCH_ARGS go to
# moqd_bench, e.g. BENCH_ARGS=--benchmark_filter=Fanout.
BENCH_ARGS ?=
bench-configure: setup
	cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOQD_BENCH=ON -DMOQD_TESTS=OFF

bench: bench-configure
	cmake --build build-bench -j $(JOBS) --target moqd_bench moqd_bench_instructions
	build-bench/bin/moqd_bench $(BENCH_ARGS)

# Instructions per delivered frame under callgrind (bench/instructions.sh). Builds and measures
# build-bench; with BUILD=dir, builds and measures that build dir instead (configured with
# -DMOQD_BENCH=ON, from this checkout or another), so two builds can be compared.
ifeq ($(origin BUILD),file)
bench-instructions: bench-configure
	cmake --build build-bench -j $(JOBS) --target moqd_bench_instructions
	@bench/instructions.sh build-bench
else
bench-instructions:
	cmake --build $(BUILD) -j $(JOBS) --target moqd_bench_instructions
	@bench/instructions.sh $(BUILD)
endif

clean:
	rm -rf build build-*
