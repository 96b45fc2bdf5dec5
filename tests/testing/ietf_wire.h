#pragma once
// Helpers of the byte-exact IETF control-message fixtures (src/wire/ietf*_test.cc): a fixture is
// decoded whole and at every strict prefix, and encoded back to the same bytes.
#include <gtest/gtest.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/codec.h"
#include "wire/ietf.h"

namespace moqd::test {

// Decodes `hex` as one control message of draft `v` in `peer`'s forms: it must decode whole to
// `expected` (of type T) and consume every byte, every strict prefix must ask for more, and
// encoding `expected` must give back `hex` (compared in canonical hex).
template <class T>
void expect_round_trip(wire::Version v, std::string_view hex, const T& expected,
                       wire::ietf::Peer peer = wire::ietf::Peer::kDraftText) {
  SCOPED_TRACE(hex);
  auto bytes = from_hex(hex);
  auto r = wire::ietf::decode_control(v, std::span<const uint8_t>(bytes), wire::ietf::Limits{}, peer);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  ASSERT_TRUE(r->has_value()) << "needs more bytes";
  ASSERT_TRUE(std::holds_alternative<T>((*r)->value)) << "decoded as another message";
  EXPECT_EQ(std::get<T>((*r)->value), expected);
  EXPECT_EQ((*r)->consumed, bytes.size());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto part = wire::ietf::decode_control(v, std::span<const uint8_t>(bytes.data(), n),
                                           wire::ietf::Limits{}, peer);
    ASSERT_TRUE(part.has_value()) << "prefix " << n << ": " << part.error().detail;
    EXPECT_FALSE(part->has_value()) << "prefix " << n << " decoded";
  }
  std::vector<uint8_t> out;
  EXPECT_TRUE(wire::ietf::encode(v, expected, out, peer));
  EXPECT_EQ(to_hex(out), to_hex(bytes));
}

// The error `hex` is refused with when decoded as a control message of draft `v` (a failed
// expectation, and nullopt, when it decodes).
inline std::optional<ErrorCode> control_decode_error(wire::Version v, std::string_view hex) {
  auto bytes = from_hex(hex);
  auto r = wire::ietf::decode_control(v, std::span<const uint8_t>(bytes), wire::ietf::Limits{});
  EXPECT_FALSE(r.has_value()) << "decoded " << hex;
  return r.has_value() ? std::nullopt : std::optional<ErrorCode>(r.error().code);
}

}  // namespace moqd::test
