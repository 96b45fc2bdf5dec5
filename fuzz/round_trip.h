// The round-trip check that lite_fuzzer, lite05_fuzzer (through lite_round_trip.h) and ietf_fuzzer
// share: whatever decodes must re-encode to bytes that decode to the same value, consume exactly
// what was written, and re-encode identically. A mismatch aborts through bug(): it is a codec bug.
// Each including fuzzer defines kFuzzerName, the prefix of its bug reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

namespace moqd::wire::fuzz {

extern const char* const kFuzzerName;

[[noreturn]] inline void bug(const char* what) {
  std::fprintf(stderr, "%s: %s\n", kFuzzerName, what);
  std::abort();
}

// Returns the value decoded from `in`, if any (after the checks).
template <class T, class Encode, class Decode>
std::optional<T> round_trip(std::span<const uint8_t> in, Encode encode_fn, Decode decode_fn) {
  auto first = decode_fn(in);
  if (!first || !first->has_value()) {
    return std::nullopt;
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
  return T((*first)->value);
}

}  // namespace moqd::wire::fuzz
