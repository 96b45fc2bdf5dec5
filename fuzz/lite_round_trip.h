// The round-trip driver lite_fuzzer (moq-lite 01-04) and lite05_fuzzer (moq-lite-05) share, on
// round_trip.h's check. Each including fuzzer defines kFuzzerName, the prefix of its bug reports.
#pragma once

#include <span>
#include <variant>
#include <vector>

#include "round_trip.h"
#include "wire/lite.h"

namespace moqd::wire::fuzz {

// Messages with a version-taking encoder and decoder.
template <class T, class Fn>
void versioned(Version v, std::span<const uint8_t> in, Fn decode_fn) {
  const DecodeLimits limits;
  round_trip<T>(
      in, [v](const T& m, std::vector<uint8_t>& out) { encode(v, m, out); },
      [&](std::span<const uint8_t> b) { return decode_fn(v, b, limits); });
}

inline void subscribe_response(Version v, std::span<const uint8_t> in) {
  const DecodeLimits limits;
  round_trip<SubscribeResponse>(
      in,
      [v](const SubscribeResponse& m, std::vector<uint8_t>& out) {
        std::visit([&](const auto& alt) { encode(v, alt, out); }, m);
      },
      [&](std::span<const uint8_t> b) { return decode_subscribe_response(v, b, limits); });
}

}  // namespace moqd::wire::fuzz
