// Extension blocks between drafts (wire/ietf_properties.h): byte-exact.
#include "wire/ietf_properties.h"

#include <gtest/gtest.h>

#include "base/codec.h"

namespace moqd::wire::ietf {
namespace {

std::string transcode(Version from, Version to, std::string_view in_hex, bool* ok = nullptr) {
  std::vector<uint8_t> in = from_hex(in_hex);
  std::vector<uint8_t> out = {0xee};  // appended to, never touched before
  bool r = transcode_properties(*draft(from), *draft(to), in, out);
  if (ok != nullptr) {
    *ok = r;
  }
  return to_hex(out);
}

TEST(IetfPropertiesTest, SameEncodingIsByDraftFamily) {
  EXPECT_TRUE(same_property_encoding(*draft(Version::kTransport14), *draft(Version::kTransport15)));
  EXPECT_FALSE(same_property_encoding(*draft(Version::kTransport15), *draft(Version::kTransport16)));
  EXPECT_FALSE(same_property_encoding(*draft(Version::kTransport16), *draft(Version::kTransport17)));
  EXPECT_FALSE(same_property_encoding(*draft(Version::kTransport17), *draft(Version::kTransport18)));
  EXPECT_TRUE(same_property_encoding(*draft(Version::kTransport18), *draft(Version::kTransport20)));
}

TEST(IetfPropertiesTest, AbsoluteTypesBecomeDeltasAndBack) {
  // d14: {0x0d: aa bb} {0x10: 5} {0x1d: cc}, types absolute.
  const char* d14 = "0d 02 aa bb 10 05 1d 01 cc";
  // d16: the same pairs, each type a delta from the previous (0x0d, +3, +0x0d).
  const char* d16 = "0d 02 aa bb 03 05 0d 01 cc";
  EXPECT_EQ(transcode(Version::kTransport14, Version::kTransport16, d14), std::string("ee ") + d16);
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport14, d16), std::string("ee ") + d14);
  EXPECT_EQ(transcode(Version::kTransport14, Version::kTransport15, d14), std::string("ee ") + d14);
}

TEST(IetfPropertiesTest, VarintFormsAreRewritten) {
  // d16 (QUIC varints): {0x10: 300} is 10 41 2c; in d18's leading-ones form 300 is 81 2c.
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport18, "10 41 2c"), "ee 10 81 2c");
  EXPECT_EQ(transcode(Version::kTransport18, Version::kTransport16, "10 81 2c"), "ee 10 41 2c");
  // A length and its bytes: {0x81 (QUIC 40 81): 3 bytes}; 0x81 is 80 81 in leading ones, and a
  // type below 0x80 one byte (0x41: QUIC 40 41, leading ones 41).
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport20, "40 81 03 01 02 03"),
            "ee 80 81 03 01 02 03");
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport20, "40 41 03 01 02 03"),
            "ee 41 03 01 02 03");
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport17, ""), "ee");
}

TEST(IetfPropertiesTest, MalformedOrInexpressibleBlocksAreRefusedUntouched) {
  bool ok = true;
  // A length past the end.
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport18, "0d 05 aa", &ok), "ee");
  EXPECT_FALSE(ok);
  // A type with no value.
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport18, "10", &ok), "ee");
  EXPECT_FALSE(ok);
  // A truncated varint (QUIC 2-byte prefix, one byte).
  EXPECT_EQ(transcode(Version::kTransport16, Version::kTransport18, "10 41", &ok), "ee");
  EXPECT_FALSE(ok);
  // d14 types that go down (0x10 then 0x0d) cannot be delta-coded.
  EXPECT_EQ(transcode(Version::kTransport14, Version::kTransport16, "10 05 0d 01 cc", &ok), "ee");
  EXPECT_FALSE(ok);
  // d17's invalid prefix 1111110x.
  EXPECT_EQ(transcode(Version::kTransport17, Version::kTransport16, "10 fc 00 00 00 00 00 00", &ok),
            "ee");
  EXPECT_FALSE(ok);
}

}  // namespace
}  // namespace moqd::wire::ietf
