#pragma once
// Helpers of the byte-exact wire fixtures (src/wire/*_test.cc): hex compared in one canonical
// spelling, and a decoder checked on a fixture whole and at every strict prefix.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/codec.h"

namespace moqd::test {

// `hex` (spaces and case as written) in the spelling to_hex gives, for comparing with encoded bytes.
inline std::string canonical(std::string_view hex) { return to_hex(from_hex(hex)); }

// Decodes `hex` whole with `decode` (span -> Result<optional<{value, consumed}>>): it must give
// `expected` and consume every byte; then every strict prefix of it, which must ask for more bytes.
template <class D, class T>
void expect_decodes(std::string_view hex, D decode, const T& expected) {
  auto bytes = from_hex(hex);
  auto r = decode(std::span<const uint8_t>(bytes));
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  ASSERT_TRUE(r->has_value()) << "needs more bytes";
  EXPECT_EQ((*r)->value, expected);
  EXPECT_EQ((*r)->consumed, bytes.size());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto t = decode(std::span<const uint8_t>(bytes).first(n));
    ASSERT_TRUE(t.has_value()) << "prefix " << n << ": " << t.error().detail;
    EXPECT_FALSE(t->has_value()) << "prefix " << n;
  }
}

}  // namespace moqd::test
