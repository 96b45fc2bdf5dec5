// Codec microbenchmarks: QUIC varints (src/base/codec.h) and the moq-lite messages on the data
// and control paths (src/wire/lite.h): FRAME header, GROUP header, SUBSCRIBE, ANNOUNCE. Encoders
// append to one vector that is cleared, not freed, between iterations (as a caller reusing its
// buffer would); decoders read a buffer encoded once. Each reports heap allocations per operation
// (bench/alloc_counter.h).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "alloc_counter.h"
#include "base/codec.h"
#include "wire/lite.h"

namespace moqd::bench {
namespace {

constexpr wire::Version kVersion = wire::Version::kLite04;

// One value of each varint length (1, 2, 4, 8 bytes), as a mix.
constexpr uint64_t kVarints[] = {37, 15293, 494878333, 151288809941952652};

// Call before touching state.counters (a new counter's map node is an allocation too).
void report_allocations(benchmark::State& state, const AllocationDelta& allocs, uint64_t ops) {
  const double count = static_cast<double>(allocs.count());
  state.counters["allocs_per_op"] = count / static_cast<double>(ops);
}

void BM_VarintEncode(benchmark::State& state) {
  std::vector<uint8_t> out;
  out.reserve(64);
  AllocationDelta allocs;
  for (auto _ : state) {
    out.clear();
    Writer w(out);
    for (uint64_t v : kVarints) {
      w.varint(v);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  uint64_t ops = state.iterations() * std::size(kVarints);
  report_allocations(state, allocs, ops);
  state.SetItemsProcessed(static_cast<int64_t>(ops));
}
BENCHMARK(BM_VarintEncode);

void BM_VarintDecode(benchmark::State& state) {
  std::vector<uint8_t> in;
  Writer w(in);
  for (uint64_t v : kVarints) {
    w.varint(v);
  }
  AllocationDelta allocs;
  uint64_t sum = 0;
  for (auto _ : state) {
    Reader r(in);
    for (size_t i = 0; i < std::size(kVarints); ++i) {
      sum += r.varint().value_or(0);
    }
    benchmark::DoNotOptimize(sum);
  }
  if (sum == 0) {
    state.SkipWithError("decoded nothing");
  }
  uint64_t ops = state.iterations() * std::size(kVarints);
  report_allocations(state, allocs, ops);
  state.SetItemsProcessed(static_cast<int64_t>(ops));
}
BENCHMARK(BM_VarintDecode);

// Encodes `msg` once per iteration into a reused vector.
template <class Encode>
void run_encode(benchmark::State& state, Encode&& encode) {
  std::vector<uint8_t> out;
  out.reserve(256);
  AllocationDelta allocs;
  for (auto _ : state) {
    out.clear();
    encode(out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report_allocations(state, allocs, state.iterations());
  state.counters["bytes"] = static_cast<double>(out.size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// Decodes the bytes `encode` writes, once per iteration; fails the benchmark if decoding does not
// consume them exactly.
template <class Encode, class Decode>
void run_decode(benchmark::State& state, Encode&& encode, Decode&& decode) {
  std::vector<uint8_t> in;
  encode(in);
  AllocationDelta allocs;
  size_t consumed = 0;
  for (auto _ : state) {
    auto r = decode(std::span<const uint8_t>(in));
    consumed = r && r->has_value() ? (*r)->consumed : 0;
    benchmark::DoNotOptimize(r);
  }
  if (consumed != in.size()) {
    state.SkipWithError("decode did not consume the message");
  }
  report_allocations(state, allocs, state.iterations());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void encode_frame_header(std::vector<uint8_t>& out) { wire::encode_frame_header(1000, out); }
void encode_group_header(std::vector<uint8_t>& out) {
  wire::encode(kVersion, wire::GroupHeader{3, 123456}, out);
}
wire::Subscribe subscribe_message() {
  wire::Subscribe m;
  m.id = 7;
  m.broadcast = "room/alice";
  m.track = "video";
  m.priority = 128;
  m.max_latency_ms = 2000;
  return m;
}
void encode_subscribe(std::vector<uint8_t>& out) { wire::encode(kVersion, subscribe_message(), out); }
wire::Announce announce_message() {
  wire::Announce m;
  m.active = true;
  m.suffix = "room/alice";
  m.hops = {1, 2};
  return m;
}
void encode_announce(std::vector<uint8_t>& out) { wire::encode(kVersion, announce_message(), out); }

void BM_FrameHeaderEncode(benchmark::State& state) { run_encode(state, encode_frame_header); }
BENCHMARK(BM_FrameHeaderEncode);
void BM_FrameHeaderDecode(benchmark::State& state) {
  run_decode(state, encode_frame_header, [](auto in) { return wire::decode_frame_header(in); });
}
BENCHMARK(BM_FrameHeaderDecode);

void BM_GroupHeaderEncode(benchmark::State& state) { run_encode(state, encode_group_header); }
BENCHMARK(BM_GroupHeaderEncode);
void BM_GroupHeaderDecode(benchmark::State& state) {
  wire::DecodeLimits limits;
  run_decode(state, encode_group_header,
             [&](auto in) { return wire::decode_group_header(kVersion, in, limits); });
}
BENCHMARK(BM_GroupHeaderDecode);

// The message is built outside the loop: this measures the encoder, not std::string copies.
void BM_SubscribeEncode(benchmark::State& state) {
  const wire::Subscribe m = subscribe_message();
  run_encode(state, [&](std::vector<uint8_t>& out) { wire::encode(kVersion, m, out); });
}
BENCHMARK(BM_SubscribeEncode);
void BM_SubscribeDecode(benchmark::State& state) {
  wire::DecodeLimits limits;
  run_decode(state, encode_subscribe,
             [&](auto in) { return wire::decode_subscribe(kVersion, in, limits); });
}
BENCHMARK(BM_SubscribeDecode);

void BM_AnnounceEncode(benchmark::State& state) {
  const wire::Announce m = announce_message();
  run_encode(state, [&](std::vector<uint8_t>& out) { wire::encode(kVersion, m, out); });
}
BENCHMARK(BM_AnnounceEncode);
void BM_AnnounceDecode(benchmark::State& state) {
  wire::DecodeLimits limits;
  run_decode(state, encode_announce,
             [&](auto in) { return wire::decode_announce(kVersion, in, limits); });
}
BENCHMARK(BM_AnnounceDecode);

}  // namespace
}  // namespace moqd::bench
