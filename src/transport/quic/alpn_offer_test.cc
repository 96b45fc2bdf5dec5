// parse_alpn_offer reads the peer's bytes (the ClientHello's ALPN extension_data) byte for byte;
// choose_alpn picks by moqd's preference, never the client's.
#include "transport/quic/alpn_offer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace moqd::transport::quic {
namespace {

using ::testing::ElementsAre;

std::optional<std::vector<std::string_view>> parse(std::initializer_list<uint8_t> bytes) {
  static std::vector<uint8_t> keep;  // the views point into it
  keep.assign(bytes);
  return parse_alpn_offer(keep);
}

TEST(AlpnOfferTest, WellFormedListKeepsTheClientsOrder) {
  // list length 0x0010 = 16: "moqt-15" (1+7), "h3" (1+2), "moql" (1+4)
  auto names =
      parse({0x00, 0x10, 7, 'm', 'o', 'q', 't', '-', '1', '5', 2, 'h', '3', 4, 'm', 'o', 'q', 'l'});
  ASSERT_TRUE(names.has_value());
  EXPECT_THAT(*names, ElementsAre("moqt-15", "h3", "moql"));
}

TEST(AlpnOfferTest, OneNameOf255Bytes) {
  std::vector<uint8_t> bytes = {0x01, 0x00, 0xff};  // list 256 = 1 + 255
  bytes.insert(bytes.end(), 255, 'x');
  auto names = parse_alpn_offer(bytes);
  ASSERT_TRUE(names.has_value());
  ASSERT_EQ(names->size(), 1u);
  EXPECT_EQ((*names)[0], std::string(255, 'x'));
}

TEST(AlpnOfferTest, EmptyInputsAreMalformed) {
  EXPECT_FALSE(parse({}).has_value());            // no length field
  EXPECT_FALSE(parse({0x00}).has_value());        // half a length field
  EXPECT_FALSE(parse({0x00, 0x00}).has_value());  // an empty list (RFC 7301: at least one name)
  EXPECT_FALSE(parse({0x00, 0x01, 0x00}).has_value());            // an empty name
  EXPECT_FALSE(parse({0x00, 0x04, 2, 'h', '3', 0}).has_value());  // an empty name after a good one
}

TEST(AlpnOfferTest, TruncatedInputsAreMalformed) {
  EXPECT_FALSE(parse({0x00, 0x03, 2, 'h'}).has_value());       // list length past the end
  EXPECT_FALSE(parse({0x00, 0x02, 2, 'h', '3'}).has_value());  // list length short of the end
  EXPECT_FALSE(parse({0x00, 0x01, 2}).has_value());            // the name itself cut off
  EXPECT_FALSE(parse({0xff, 0xff, 2, 'h', '3'}).has_value());  // 65535 announced, 3 present
}

TEST(AlpnOfferTest, OverlongNameIsMalformed) {
  // The list length is right, but the name claims more bytes than the list holds.
  EXPECT_FALSE(parse({0x00, 0x03, 3, 'h', '3'}).has_value());
  EXPECT_FALSE(parse({0x00, 0x06, 2, 'h', '3', 9, 'm', 'o'}).has_value());
  EXPECT_FALSE(parse({0x00, 0x03, 0xff, 'h', '3'}).has_value());
}

TEST(AlpnOfferTest, DuplicatesAreKept) {
  auto names = parse({0x00, 0x06, 2, 'h', '3', 2, 'h', '3'});
  ASSERT_TRUE(names.has_value());
  EXPECT_THAT(*names, ElementsAre("h3", "h3"));
  const std::vector<std::string> ours = {"moqt-20", "h3"};
  EXPECT_EQ(choose_alpn(ours, *names), std::optional<size_t>(1));
}

TEST(AlpnOfferTest, ChoiceFollowsOurPreferenceNotTheClients) {
  const std::vector<std::string> ours = {"moq-lite-05", "moq-lite-04", "moqt-20", "moqt-16",
                                         "moqt-15",     "moql",        "h3"};
  const std::vector<std::string_view> offers = {"h3", "moqt-16", "zzz", "moqt-15"};
  EXPECT_EQ(choose_alpn(ours, offers), std::optional<size_t>(3));  // moqt-16
  const std::vector<std::string_view> last_only = {"moqt-15"};
  EXPECT_EQ(choose_alpn(ours, last_only), std::optional<size_t>(4));
  const std::vector<std::string_view> none = {"moqt-99", "h2", "moq-lite-0"};
  EXPECT_EQ(choose_alpn(ours, none), std::nullopt);
  EXPECT_EQ(choose_alpn({}, offers), std::nullopt);
  EXPECT_EQ(choose_alpn(ours, {}), std::nullopt);
}

TEST(AlpnOfferTest, NamesCompareByteExact) {
  const std::vector<std::string> ours = {"moqt-16"};
  const std::vector<std::string_view> near = {"MOQT-16", "moqt-16 ", "moqt-1",
                                              std::string_view("moqt-16\0", 8)};
  EXPECT_EQ(choose_alpn(ours, near), std::nullopt);
}

}  // namespace
}  // namespace moqd::transport::quic
