#include "transport/websocket/mux_frames.h"

#include <gtest/gtest.h>

#include "base/codec.h"

namespace moqd::transport::websocket {
namespace {

std::string text(std::span<const uint8_t> data) {
  return std::string(reinterpret_cast<const char*>(data.data()), data.size());
}

// Protocol README §4.5: the JS client's QX_TRANSPORT_PARAMETERS, byte for byte.
constexpr std::string_view kClientParams =
    "ff 51 53 30 0d 0a 0d 0a 20 04 04 80 10 00 00 05 04 80 04 00 00 06 04 80 04 00 00 07 04 80 "
    "04 00 00 08 02 40 64 09 02 40 64";

TransportParameters client_params() {
  TransportParameters p;
  p.initial_max_data = 1'048'576;
  p.initial_max_stream_data_bidi_local = 262'144;
  p.initial_max_stream_data_bidi_remote = 262'144;
  p.initial_max_stream_data_uni = 262'144;
  p.initial_max_streams_bidi = 100;
  p.initial_max_streams_uni = 100;
  return p;
}

TEST(MuxFramesTest, DecodesClientTransportParameters) {
  auto bytes = from_hex(kClientParams);
  auto f = decode_frame(Framing::kQmux00, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kTransportParameters);
  EXPECT_EQ(f->params, client_params());
}

TEST(MuxFramesTest, EncodesTransportParametersLikeTheClient) {
  EXPECT_EQ(to_hex(encode_transport_parameters(client_params()).span()),
            to_hex(from_hex(kClientParams)));
}

TEST(MuxFramesTest, TransportParametersSkipUnknownIds) {
  auto bytes = from_hex("ff 51 53 30 0d 0a 0d 0a 08 3f 02 40 01 08 02 40 64");
  auto f = decode_frame(Framing::kQmux00, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->params.initial_max_streams_bidi, 100u);
}

TEST(MuxFramesTest, TruncatedTransportParametersAreAnError) {
  auto bytes = from_hex("ff 51 53 30 0d 0a 0d 0a 20 04 04 80 10");
  EXPECT_FALSE(decode_frame(Framing::kQmux00, bytes));
}

TEST(MuxFramesTest, DecodesQmuxStreamWithLength) {
  auto bytes = from_hex("0a 00 01 20 ff");  // trailing byte after the frame is ignored
  auto f = decode_frame(Framing::kQmux00, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kStream);
  EXPECT_EQ(f->stream_id, 0u);
  EXPECT_FALSE(f->fin);
  EXPECT_EQ(to_hex(f->data), "20");
}

TEST(MuxFramesTest, DecodesQmuxStreamFinWithOffsetAndNoLength) {
  auto bytes = from_hex("0d 02 05 aa bb");  // OFF + FIN, data = rest
  auto f = decode_frame(Framing::kQmux00, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->stream_id, 2u);
  EXPECT_TRUE(f->fin);
  EXPECT_EQ(f->value, 5u);
  EXPECT_EQ(to_hex(f->data), "aa bb");
}

TEST(MuxFramesTest, QmuxStreamLengthPastMessageIsAnError) {
  auto bytes = from_hex("0a 00 05 20");
  EXPECT_FALSE(decode_frame(Framing::kQmux00, bytes));
}

TEST(MuxFramesTest, DecodesQmuxApplicationCloseFromClient) {
  auto bytes = from_hex("1d 00 00 00");
  auto f = decode_frame(Framing::kQmux00, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kClose);
  EXPECT_EQ(f->code, 0u);
  EXPECT_TRUE(f->data.empty());
}

TEST(MuxFramesTest, EncodesQmuxCloseWithFrameTypeAndReason) {
  EXPECT_EQ(to_hex(encode_close(Framing::kQmux00, 0, "").span()), "1d 00 00 00");
  auto bytes = encode_close(Framing::kQmux00, 1002, "bye");
  auto f = decode_frame(Framing::kQmux00, bytes.span());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, 1002u);
  EXPECT_EQ(text(f->data), "bye");
}

TEST(MuxFramesTest, DecodesQmuxResetWithoutValidatingFinalSize) {
  auto bytes = from_hex("04 02 07 00");
  auto f = decode_frame(Framing::kQmux00, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kResetStream);
  EXPECT_EQ(f->stream_id, 2u);
  EXPECT_EQ(f->code, 7u);
  EXPECT_EQ(to_hex(encode_reset_stream(Framing::kQmux00, 3, 1, 9).span()), "04 03 01 09");
}

TEST(MuxFramesTest, QmuxFlowControlFramesRoundTrip) {
  auto md = decode_frame(Framing::kQmux00, encode_max_data(1 << 20).span());
  ASSERT_TRUE(md);
  EXPECT_EQ(md->kind, FrameKind::kMaxData);
  EXPECT_EQ(md->value, 1u << 20);
  auto msd = decode_frame(Framing::kQmux00, encode_max_stream_data(6, 300).span());
  ASSERT_TRUE(msd);
  EXPECT_EQ(msd->kind, FrameKind::kMaxStreamData);
  EXPECT_EQ(msd->stream_id, 6u);
  EXPECT_EQ(msd->value, 300u);
  auto uni = decode_frame(Framing::kQmux00, encode_max_streams(true, 101).span());
  ASSERT_TRUE(uni);
  EXPECT_EQ(uni->kind, FrameKind::kMaxStreamsUni);
  EXPECT_EQ(uni->value, 101u);
  auto bidi = decode_frame(Framing::kQmux00, encode_max_streams(false, 5).span());
  ASSERT_TRUE(bidi);
  EXPECT_EQ(bidi->kind, FrameKind::kMaxStreamsBidi);
  auto stop = decode_frame(Framing::kQmux00, encode_stop_sending(Framing::kQmux00, 4, 2).span());
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->kind, FrameKind::kStopSending);
  EXPECT_EQ(stop->stream_id, 4u);
  EXPECT_EQ(stop->code, 2u);
}

TEST(MuxFramesTest, QmuxIgnoresBlockedDatagramAndUnknownFrames) {
  for (const char* hex : {"14 05", "15 00 05", "16 01", "17 01", "30 aa", "31 01 aa", "21 00",
                          "40 80"}) {
    auto bytes = from_hex(hex);
    auto f = decode_frame(Framing::kQmux00, bytes);
    ASSERT_TRUE(f) << hex;
    EXPECT_EQ(f->kind, FrameKind::kIgnored) << hex;
  }
}

TEST(MuxFramesTest, EncodesQmuxStreamHeader) {
  EXPECT_EQ(to_hex(encode_stream_header(Framing::kQmux00, 0, 1, false).span()), "0a 00 01");
  EXPECT_EQ(to_hex(encode_stream_header(Framing::kQmux00, 2, 0, true).span()), "0b 02 00");
}

TEST(MuxFramesTest, LegacyStreamFixture) {
  auto bytes = from_hex("08 00 20");
  auto f = decode_frame(Framing::kWebTransport, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kStream);
  EXPECT_EQ(f->stream_id, 0u);
  EXPECT_FALSE(f->fin);
  EXPECT_EQ(to_hex(f->data), "20");
  EXPECT_EQ(to_hex(encode_stream_header(Framing::kWebTransport, 0, 1, false).span()), "08 00");
  EXPECT_EQ(to_hex(encode_stream_header(Framing::kWebTransport, 5, 0, true).span()), "09 05");
}

TEST(MuxFramesTest, LegacyFinMayBeEmpty) {
  auto bytes = from_hex("09 02");
  auto f = decode_frame(Framing::kWebTransport, bytes);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->fin);
  EXPECT_TRUE(f->data.empty());
}

TEST(MuxFramesTest, LegacyControlFramesRoundTrip) {
  auto reset = encode_reset_stream(Framing::kWebTransport, 3, 9, 100);
  EXPECT_EQ(to_hex(reset.span()), "04 03 09");
  auto r = decode_frame(Framing::kWebTransport, reset.span());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, FrameKind::kResetStream);
  EXPECT_EQ(r->code, 9u);
  auto stop = encode_stop_sending(Framing::kWebTransport, 1, 4);
  EXPECT_EQ(to_hex(stop.span()), "05 01 04");
  auto close = encode_close(Framing::kWebTransport, 7, "done");
  EXPECT_EQ(to_hex(close.span()), "1d 07 64 6f 6e 65");
  auto c = decode_frame(Framing::kWebTransport, close.span());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, FrameKind::kClose);
  EXPECT_EQ(c->code, 7u);
  EXPECT_EQ(text(c->data), "done");
}

TEST(MuxFramesTest, LegacyUnknownTypeIsAProtocolViolation) {
  auto bytes = from_hex("0a 00 01 20");
  auto f = decode_frame(Framing::kWebTransport, bytes);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, ErrorCode::kProtocolViolation);
}

TEST(MuxFramesTest, EmptyAndTruncatedMessagesAreErrors) {
  EXPECT_FALSE(decode_frame(Framing::kQmux00, {}));
  EXPECT_FALSE(decode_frame(Framing::kWebTransport, {}));
  auto legacy = from_hex("04 01");
  EXPECT_FALSE(decode_frame(Framing::kWebTransport, legacy));
  auto qmux = from_hex("11 01");
  EXPECT_FALSE(decode_frame(Framing::kQmux00, qmux));
}

}  // namespace
}  // namespace moqd::transport::websocket
