#include "transport/webtransport/qpack.h"

#include <gtest/gtest.h>

#include "base/codec.h"

// Its own namespace: chromium_connect() here offers protocols, h3_test.cc's does not, and the two
// may be compiled as one unit (MOQD_UNITY_TESTS).
namespace moqd::transport::webtransport::qpack_test {
namespace {

using Bytes = std::vector<uint8_t>;

// limits.md §6: Chromium 156's CONNECT, plus the protocols a moq client offers.
HeaderList chromium_connect() {
  return {
      {":method", "CONNECT"},
      {":scheme", "https"},
      {":authority", "127.0.0.1:4433"},
      {":path", "/moq"},
      {":protocol", "webtransport"},
      {"sec-webtransport-http3-draft02", "1"},
      {"origin", "http://localhost:8080"},
      {"wt-available-protocols", "\"moq-lite-04\", \"moql\""},
  };
}

size_t field_section_size(const HeaderList& h) {
  size_t size = 0;
  for (const HeaderField& f : h) {
    size += f.name.size() + f.value.size() + 32;
  }
  return size;
}

bool same(const HeaderList& a, const HeaderList& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value != b[i].value) {
      return false;
    }
  }
  return true;
}

class QpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = QpackDecoder::create();
    ASSERT_TRUE(d);
    decoder_ = std::move(*d);
  }

  H3Result<HeaderList> decode(std::string_view hex, size_t max = 16384) {
    Bytes in = from_hex(hex);
    return decoder_->decode(in, max);
  }

  std::unique_ptr<QpackDecoder> decoder_;
};

TEST_F(QpackTest, RoundTripsChromiumConnect) {
  auto encoded = encode_field_section(chromium_connect());
  ASSERT_TRUE(encoded);
  // Static table and literals only: Required Insert Count 0, Delta Base 0.
  ASSERT_GE(encoded->size(), 2u);
  EXPECT_EQ((*encoded)[0], 0x00);
  EXPECT_EQ((*encoded)[1], 0x00);
  auto decoded = decoder_->decode(*encoded, 16384);
  ASSERT_TRUE(decoded) << decoded.error().detail;
  EXPECT_TRUE(same(*decoded, chromium_connect()));
}

TEST_F(QpackTest, DecoderIsReusable) {
  auto encoded = encode_field_section(chromium_connect());
  ASSERT_TRUE(encoded);
  for (int i = 0; i < 3; ++i) {
    auto decoded = decoder_->decode(*encoded, 16384);
    ASSERT_TRUE(decoded);
    EXPECT_TRUE(same(*decoded, chromium_connect()));
  }
}

TEST_F(QpackTest, EncodesStatusWithStaticTable) {
  auto encoded = encode_field_section({{":status", "200"}});
  ASSERT_TRUE(encoded);
  EXPECT_EQ(to_hex(*encoded), "00 00 d9");  // RFC 9204 Appendix A: index 25
}

TEST_F(QpackTest, EncodesEmptyFieldSection) {
  auto encoded = encode_field_section({});
  ASSERT_TRUE(encoded);
  EXPECT_EQ(to_hex(*encoded), "00 00");
  auto decoded = decoder_->decode(*encoded, 0);
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->empty());
}

TEST_F(QpackTest, EncodeRefusesUpperCaseName) {
  auto encoded = encode_field_section({{"Origin", "x"}});
  ASSERT_FALSE(encoded);
  EXPECT_EQ(encoded.error().code, H3Code::kInternalError);
}

TEST_F(QpackTest, DecodesStaticIndexedField) {
  auto decoded = decode("00 00 cf");  // :method CONNECT, static index 15
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ((*decoded)[0].name, ":method");
  EXPECT_EQ((*decoded)[0].value, "CONNECT");
}

TEST_F(QpackTest, DecodesLiteralWithNameReference) {
  // :path (static 1) with the literal value "/moq".
  auto decoded = decode("00 00 51 04 2f 6d 6f 71");
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ((*decoded)[0].name, ":path");
  EXPECT_EQ((*decoded)[0].value, "/moq");
}

TEST_F(QpackTest, DynamicTableReferencesFail) {
  for (const char* hex : {
           "01 00 80",  // Required Insert Count 1, indexed dynamic entry
           "00 00 80",  // indexed dynamic entry with no table
           "00 00 10",  // post-base indexed entry
           "00 00 40 00",  // literal with a dynamic name reference
       }) {
    auto d = QpackDecoder::create();
    ASSERT_TRUE(d);
    Bytes in = from_hex(hex);
    auto decoded = (*d)->decode(in, 16384);
    ASSERT_FALSE(decoded) << hex;
    EXPECT_EQ(decoded.error().code, H3Code::kQpackDecompressionFailed) << hex;
  }
}

TEST_F(QpackTest, GarbageFails) {
  for (const char* hex : {"ff ff ff ff ff ff ff ff ff ff ff", "00", "", "00 00 ff", "00 00 5f"}) {
    auto d = QpackDecoder::create();
    ASSERT_TRUE(d);
    Bytes in = from_hex(hex);
    auto decoded = (*d)->decode(in, 16384);
    ASSERT_FALSE(decoded) << hex;
    EXPECT_EQ(decoded.error().code, H3Code::kQpackDecompressionFailed) << hex;
  }
}

TEST_F(QpackTest, TruncatedFieldSectionFails) {
  auto encoded = encode_field_section(chromium_connect());
  ASSERT_TRUE(encoded);
  for (size_t n = 0; n < encoded->size(); ++n) {
    auto d = QpackDecoder::create();
    ASSERT_TRUE(d);
    auto decoded = (*d)->decode(std::span<const uint8_t>(encoded->data(), n), 16384);
    // A cut may land between two fields; then the shorter list is a valid field section.
    if (decoded) {
      EXPECT_LT(decoded->size(), chromium_connect().size()) << n;
    } else {
      EXPECT_EQ(decoded.error().code, H3Code::kQpackDecompressionFailed) << n;
    }
  }
}

TEST_F(QpackTest, FieldSectionSizeBound) {
  EXPECT_TRUE(decode("00 00 cf", 46));  // ":method" + "CONNECT" + 32
  auto over = decode("00 00 cf", 45);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, H3Code::kExcessiveLoad);

  auto encoded = encode_field_section(chromium_connect());
  ASSERT_TRUE(encoded);
  size_t size = field_section_size(chromium_connect());
  EXPECT_TRUE(decoder_->decode(*encoded, size));
  auto big = decoder_->decode(*encoded, size - 1);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, H3Code::kExcessiveLoad);
  // The decoder still works after a section it abandoned part way.
  EXPECT_TRUE(decoder_->decode(*encoded, size));
}

TEST_F(QpackTest, EncoderStreamCapacityZeroIsAccepted) {
  EXPECT_TRUE(decoder_->read_encoder_stream(from_hex("20")));
  EXPECT_TRUE(decoder_->read_encoder_stream(from_hex("20 20")));
  EXPECT_TRUE(decoder_->read_encoder_stream({}));
}

TEST_F(QpackTest, EncoderStreamInsertsFail) {
  for (const char* hex : {
           "c0 00",           // insert with static name reference
           "41 61 01 62",     // insert with literal name
           "00",              // duplicate
           "21",              // set capacity 1
           "3f e1 1f",        // set capacity 4096
       }) {
    auto d = QpackDecoder::create();
    ASSERT_TRUE(d);
    Bytes in = from_hex(hex);
    auto r = (*d)->read_encoder_stream(in);
    ASSERT_FALSE(r) << hex;
    EXPECT_EQ(r.error().code, H3Code::kQpackEncoderStreamError) << hex;
  }
}

}  // namespace
}  // namespace moqd::transport::webtransport::qpack_test
