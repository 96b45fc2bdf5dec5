#include "transport/websocket/ws_frame.h"

#include <gtest/gtest.h>

#include "base/codec.h"
#include "transport/websocket/base64.h"
#include "transport/websocket/handshake.h"

namespace moqd::transport::websocket {
namespace {

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

FrameHeader decode_ok(const std::vector<uint8_t>& wire, size_t expect_size) {
  auto r = decode_frame_header(wire);
  EXPECT_TRUE(r.has_value());
  EXPECT_TRUE(r->has_value());
  EXPECT_EQ((*r)->consumed, expect_size);
  return (*r)->value;
}

// RFC 6455 §5.7.
TEST(WsFrameTest, EncodesUnmaskedHelloAsInRfc) {
  Bytes f = encode_frame(Opcode::kText, bytes_of("Hello"));
  EXPECT_EQ(to_hex(f.span()), to_hex(from_hex("81 05 48 65 6c 6c 6f")));
}

TEST(WsFrameTest, EncodesMaskedHelloAsInRfc) {
  MaskKey key{0x37, 0xfa, 0x21, 0x3d};
  Bytes f = encode_frame(Opcode::kText, bytes_of("Hello"), true, &key);
  EXPECT_EQ(to_hex(f.span()), to_hex(from_hex("81 85 37 fa 21 3d 7f 9f 4d 51 58")));
}

TEST(WsFrameTest, DecodesMaskedHelloAndUnmasks) {
  auto wire = from_hex("81 85 37 fa 21 3d 7f 9f 4d 51 58");
  FrameHeader h = decode_ok(wire, 6);
  EXPECT_TRUE(h.fin);
  EXPECT_EQ(h.opcode, Opcode::kText);
  EXPECT_TRUE(h.masked);
  EXPECT_EQ(h.payload_size, 5u);
  std::vector<uint8_t> payload(wire.begin() + 6, wire.end());
  // Unmasking in two pieces gives the same result as in one.
  apply_mask(std::span(payload).first(2), h.mask_key, 0);
  apply_mask(std::span(payload).subspan(2), h.mask_key, 2);
  EXPECT_EQ(std::string(payload.begin(), payload.end()), "Hello");
}

TEST(WsFrameTest, DecodesFragmentedUnmaskedTextAsInRfc) {
  FrameHeader first = decode_ok(from_hex("01 03 48 65 6c"), 2);
  EXPECT_FALSE(first.fin);
  EXPECT_EQ(first.opcode, Opcode::kText);
  FrameHeader last = decode_ok(from_hex("80 02 6c 6f"), 2);
  EXPECT_TRUE(last.fin);
  EXPECT_EQ(last.opcode, Opcode::kContinuation);
}

TEST(WsFrameTest, SixteenBitLengthRoundTrips) {
  FrameHeader h;
  h.payload_size = 256;
  Bytes wire = encode_frame_header(h);
  EXPECT_EQ(to_hex(wire.span()), to_hex(from_hex("82 7e 01 00")));
  EXPECT_EQ(decode_ok(std::vector<uint8_t>(wire.data(), wire.data() + wire.size()), 4).payload_size,
            256u);
}

TEST(WsFrameTest, SixtyFourBitLengthRoundTrips) {
  FrameHeader h;
  h.payload_size = 65536;
  Bytes wire = encode_frame_header(h);
  EXPECT_EQ(to_hex(wire.span()), to_hex(from_hex("82 7f 00 00 00 00 00 01 00 00")));
  EXPECT_EQ(decode_ok(std::vector<uint8_t>(wire.data(), wire.data() + wire.size()), 10).payload_size,
            65536u);
}

TEST(WsFrameTest, MaskedSixtyFourBitHeaderIsFourteenBytes) {
  FrameHeader h;
  h.masked = true;
  h.mask_key = {1, 2, 3, 4};
  h.payload_size = uint64_t{1} << 40;
  Bytes wire = encode_frame_header(h);
  ASSERT_EQ(wire.size(), kMaxFrameHeaderSize);
  FrameHeader back = decode_ok(std::vector<uint8_t>(wire.data(), wire.data() + wire.size()), 14);
  EXPECT_EQ(back.payload_size, uint64_t{1} << 40);
  EXPECT_EQ(back.mask_key, h.mask_key);
}

TEST(WsFrameTest, NeedsMoreAtEveryShortPrefix) {
  auto wire = from_hex("82 ff 00 00 00 00 00 01 00 00 01 02 03 04");
  for (size_t n = 0; n < wire.size(); ++n) {
    auto r = decode_frame_header(std::span(wire).first(n));
    ASSERT_TRUE(r.has_value()) << n;
    EXPECT_FALSE(r->has_value()) << n;
  }
}

TEST(WsFrameTest, RejectsInvalidHeaders) {
  for (const char* hex : {
           "c2 00",  // RSV1
           "a2 00",  // RSV2
           "92 00",  // RSV3
           "83 00",  // reserved data opcode
           "8b 00",  // reserved control opcode
           "09 00",  // fragmented ping
           "89 7e 00 7e",  // ping longer than 125
           "82 7f 80 00 00 00 00 00 00 00",  // 64-bit length with MSB set
           "82 7e 00 05",  // non-minimal 16-bit length
           "82 7f 00 00 00 00 00 00 01 00",  // non-minimal 64-bit length
       }) {
    auto r = decode_frame_header(from_hex(hex));
    EXPECT_FALSE(r.has_value()) << hex;
  }
}

TEST(WsFrameTest, ClosePayloadRoundTrips) {
  auto p = bytes_of(encode_close_payload(1009, "too big"));
  auto back = decode_close_payload(p);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->code, 1009);
  EXPECT_EQ(back->reason, "too big");
  EXPECT_EQ(decode_close_payload({})->code, kCloseNoStatus);
  EXPECT_FALSE(decode_close_payload(from_hex("03")).has_value());
  EXPECT_FALSE(decode_close_payload(from_hex("03 ed")).has_value());  // 1005 is never sent
  EXPECT_FALSE(decode_close_payload(from_hex("03 e8 ff")).has_value());  // reason not UTF-8
}

TEST(WsFrameTest, CloseReasonIsCutToFitAControlFrame) {
  std::string p = encode_close_payload(1000, std::string(300, 'x'));
  EXPECT_EQ(p.size(), kMaxControlPayload);
}

TEST(WsFrameTest, Utf8ValidatorFollowsRfc3629) {
  EXPECT_TRUE(is_valid_utf8(bytes_of("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80")));
  EXPECT_FALSE(is_valid_utf8(from_hex("c0 af")));  // overlong
  EXPECT_FALSE(is_valid_utf8(from_hex("ed a0 80")));  // surrogate
  EXPECT_FALSE(is_valid_utf8(from_hex("f4 90 80 80")));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8(from_hex("e2 82")));  // truncated
  Utf8Validator v;
  EXPECT_TRUE(v.feed(from_hex("e2 82")));  // a fragment may end mid-character
  EXPECT_FALSE(v.is_complete());
  EXPECT_TRUE(v.feed(from_hex("ac")));
  EXPECT_TRUE(v.is_complete());
}

TEST(Base64Test, EncodesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(bytes_of("")), "");
  EXPECT_EQ(base64_encode(bytes_of("f")), "Zg==");
  EXPECT_EQ(base64_encode(bytes_of("fo")), "Zm8=");
  EXPECT_EQ(base64_encode(bytes_of("foo")), "Zm9v");
  EXPECT_EQ(base64_encode(bytes_of("foobar")), "Zm9vYmFy");
}

TEST(Base64Test, DecodesStrictly) {
  EXPECT_EQ(base64_decode("Zm9vYmE="), bytes_of("fooba"));
  EXPECT_EQ(base64_decode("Zg=="), bytes_of("f"));
  EXPECT_EQ(base64_decode("dGhlIHNhbXBsZSBub25jZQ==")->size(), 16u);
  EXPECT_FALSE(base64_decode("Zg="));  // length not a multiple of 4
  EXPECT_FALSE(base64_decode("Zh=="));  // non-zero unused bits
  EXPECT_FALSE(base64_decode("Z=g="));  // padding in the middle
  EXPECT_FALSE(base64_decode("Zm9v YmFy"));
}

// RFC 6455 §1.3.
TEST(HandshakeTest, AcceptKeyMatchesRfcExample) {
  EXPECT_EQ(websocket_accept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

}  // namespace
}  // namespace moqd::transport::websocket
