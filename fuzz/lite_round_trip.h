// The round-trip driver lite_fuzzer (moq-lite 01-04) and lite05_fuzzer (moq-lite-05) share:
// whatever decodes must re-encode to bytes that decode to the same value, consume exactly what
// was written, and re-encode identically. A mismatch aborts through bug(): it is a codec bug.
// Each including fuzzer defines kFuzzerName, the prefix of its bug reports.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <span>
#include <variant>
#include <vector>

#include "wire/lite.h"

namespace moqd::wire::fuzz {

extern const char* const kFuzzerName;

[[noreturn]] inline void bug(const char* what) {
  std::fprintf(stderr, "%s: %s\n", kFuzzerName, what);
  std::abort();
}

template <class T, class Encode, class Decode>
void round_trip(std::span<const uint8_t> in, Encode encode_fn, Decode decode_fn) {
  auto first = decode_fn(in);
  if (!first || !first->has_value()) {
    return;
  }
  if ((*first)->consumed == 0 || (*first)->consumed > in.size()) {
    bug("consumed out of range");
  }
  std::vector<uint8_t> bytes;
  encode_fn((*first)->value, bytes);
  auto second = decode_fn(std::span<const uint8_t>(bytes));
  if (!second || !second->has_value()) {
    bug("re-encoded message does not decode");
  }
  if (!((*second)->value == (*first)->value)) {
    bug("re-decoded value differs");
  }
  if ((*second)->consumed != bytes.size()) {
    bug("re-decode consumed a different size");
  }
  std::vector<uint8_t> again;
  encode_fn((*second)->value, again);
  if (again != bytes) {
    bug("encoding is not deterministic");
  }
}

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
