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


// --- qmux-01 / qmux-02 and the three @moq/qmux versions ---------------------------------------
//
// Captured from the npm packages in Node 20 against a ws server (a session that opens a bidi
// stream, writes "hi", finishes it and closes with code 0, reason "bye"): @moq/qmux 0.0.6 over
// qmux-00, 0.1.3 over qmux-01, 0.3.3 over qmux-02 and qmux-00.

std::string canonical(std::string_view hex) { return to_hex(from_hex(hex)); }

// 0.1.3 over qmux-01, and 0.3.3 over qmux-00: idle timeout 30000 and max_record_size 16382 too.
constexpr std::string_view kParams013 =
    "ff 51 53 30 0d 0a 0d 0a 31 01 04 80 00 75 30 04 04 80 10 00 00 05 04 80 04 00 00 06 04 80 04 "
    "00 00 07 04 80 04 00 00 08 02 40 64 09 02 40 64 c5 71 c5 94 29 cd 08 45 02 7f fe";
// 0.3.3 over qmux-02: max_datagram_frame_size, and reset_stream_at with an empty value.
constexpr std::string_view kParams033Qmux02 =
    "ff 51 53 30 0d 0a 0d 0a 37 01 04 80 00 75 30 04 04 80 10 00 00 05 04 80 04 00 00 06 04 80 04 "
    "00 00 07 04 80 04 00 00 08 02 40 64 09 02 40 64 20 02 7f fe c5 71 c5 94 29 cd 08 45 02 7f fe "
    "1d 00";

struct Capture {
  const char* who;
  Framing framing;
  std::string_view params;
  std::string_view stream;  // "hi" on bidi 0
  std::string_view fin;     // empty FIN on bidi 0 (0.3.3: with the offset 2)
  std::string_view close;   // APPLICATION_CLOSE code 0 "bye"
};

const Capture kCaptures[] = {
    {"0.0.6 qmux-00", Framing::kQmux00, kClientParams, "0a 00 02 68 69", "0b 00 00",
     "1d 00 00 03 62 79 65"},
    {"0.1.3 qmux-01", Framing::kQmux01, kParams013, "0a 00 02 68 69", "0b 00 00",
     "1d 00 00 03 62 79 65"},
    {"0.3.3 qmux-02", Framing::kQmux02, kParams033Qmux02, "0e 00 00 02 68 69", "0f 00 02 00",
     "1d 00 03 62 79 65"},
    {"0.3.3 qmux-00", Framing::kQmux00, kParams013, "0e 00 00 02 68 69", "0f 00 02 00",
     "1d 00 03 62 79 65"},
};

TEST(QmuxCaptureTest, EveryVersionsFramesDecode) {
  for (const auto& c : kCaptures) {
    SCOPED_TRACE(c.who);
    auto params = from_hex(c.params);
    auto p = decode_frame(c.framing, params);
    ASSERT_TRUE(p) << p.error().detail;
    EXPECT_EQ(p->kind, FrameKind::kTransportParameters);
    EXPECT_EQ(p->params, client_params());
    EXPECT_EQ(p->size, params.size());

    auto stream = from_hex(c.stream);
    auto s = decode_frame(c.framing, stream);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->kind, FrameKind::kStream);
    EXPECT_EQ(s->stream_id, 0u);
    EXPECT_EQ(text(s->data), "hi");
    EXPECT_FALSE(s->fin);
    EXPECT_EQ(s->size, stream.size());

    auto fin = from_hex(c.fin);
    auto f = decode_frame(c.framing, fin);
    ASSERT_TRUE(f);
    EXPECT_TRUE(f->fin);
    EXPECT_TRUE(f->data.empty());
    EXPECT_EQ(f->size, fin.size());

    auto close = from_hex(c.close);
    auto x = decode_frame(c.framing, close);
    ASSERT_TRUE(x) << x.error().detail;
    EXPECT_EQ(x->kind, FrameKind::kClose);
    EXPECT_EQ(x->code, 0u);
    EXPECT_EQ(text(x->data), "bye");
    EXPECT_EQ(x->size, close.size());
  }
}

TEST(QmuxCaptureTest, CloseIsWrittenInTheLayoutEachVersionReads) {
  // Seen working against the packages: 0.0.6 and 0.1.3 read only the frame-type layout (0.1.3
  // fails "frame truncated" on the other); 0.3.3 reads only RFC 9000's (on qmux-01/02 the
  // frame-type layout is "Invalid QMux frame type: 0x3", on qmux-00 an empty reason).
  EXPECT_EQ(to_hex(encode_close(Framing::kQmux00, 0, "bye", CloseLayout::kWithFrameType).span()),
            canonical("1d 00 00 03 62 79 65"));
  EXPECT_EQ(to_hex(encode_close(Framing::kQmux01, 0, "bye", CloseLayout::kWithFrameType).span()),
            canonical("1d 00 00 03 62 79 65"));
  EXPECT_EQ(to_hex(encode_close(Framing::kQmux02, 0, "bye", CloseLayout::kRfc9000).span()),
            canonical("1d 00 03 62 79 65"));
  EXPECT_EQ(close_layout_for(Framing::kQmux00), CloseLayout::kWithFrameType);
  EXPECT_EQ(close_layout_for(Framing::kQmux01), CloseLayout::kWithFrameType);
  EXPECT_EQ(close_layout_for(Framing::kQmux02), CloseLayout::kRfc9000);
}

TEST(QmuxCaptureTest, CloseInEitherLayoutKeepsItsReason) {
  struct Case {
    std::string_view bytes;
    uint64_t code;
    std::string reason;
  };
  const Case cases[] = {
      {"1d 00 00", 0, ""},                  // 0.3.3 close(): RFC, empty
      {"1d 00 00 00", 0, ""},               // frame-type layout, empty
      {"1d 00 00 00 00", 0, ""},            // compatible close plus PADDING
      {"1d 05 03 62 6f 6f", 5, "boo"},      // RFC
      {"1d 05 00 03 62 6f 6f", 5, "boo"},   // frame type 0
      {"1d 05 1d 03 62 6f 6f", 5, "boo"},   // frame type 0x1d
      {"1d 40 64 02 00 00", 100, std::string("\0\0", 2)},  // RFC wins when it takes all
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bytes);
    auto bytes = from_hex(c.bytes);
    for (auto framing : {Framing::kQmux00, Framing::kQmux01, Framing::kQmux02}) {
      auto f = decode_frame(framing, bytes);
      ASSERT_TRUE(f) << f.error().detail;
      EXPECT_EQ(f->kind, FrameKind::kClose);
      EXPECT_EQ(f->code, c.code);
      EXPECT_EQ(text(f->data), c.reason);
    }
  }
  EXPECT_FALSE(decode_frame(Framing::kQmux02, from_hex("1d 00 05 62")));
  EXPECT_FALSE(decode_frame(Framing::kQmux02, from_hex("1d")));
}

TEST(QmuxCaptureTest, RecordsHoldSeveralFrames) {
  // PADDING, a STREAM with length, MAX_DATA, a blocked frame, a datagram, a ping request.
  auto record = from_hex("00 0a 04 01 41 10 44 00 15 04 05 31 02 aa bb "
                         "f4 8c 67 52 9e f8 c7 bd 07 0e 00 00 01 42");
  std::vector<MuxFrame> frames;
  std::span<const uint8_t> rest = record;
  while (!rest.empty()) {
    auto f = decode_frame(Framing::kQmux02, rest);
    ASSERT_TRUE(f) << f.error().detail;
    ASSERT_GT(f->size, 0u);
    frames.push_back(*f);
    rest = rest.subspan(f->size);
  }
  ASSERT_EQ(frames.size(), 7u);
  EXPECT_EQ(frames[0].kind, FrameKind::kIgnored);
  EXPECT_EQ(frames[1].kind, FrameKind::kStream);
  EXPECT_EQ(frames[1].stream_id, 4u);
  EXPECT_EQ(text(frames[1].data), "A");
  EXPECT_EQ(frames[2].kind, FrameKind::kMaxData);
  EXPECT_EQ(frames[2].value, 0x400u);
  EXPECT_EQ(frames[3].kind, FrameKind::kIgnored);  // STREAM_DATA_BLOCKED
  EXPECT_EQ(frames[4].kind, FrameKind::kIgnored);  // DATAGRAM with length
  EXPECT_EQ(frames[5].kind, FrameKind::kPing);
  EXPECT_EQ(frames[5].value, 7u);
  EXPECT_EQ(frames[6].kind, FrameKind::kStream);
  EXPECT_TRUE(frames[6].has_offset);
  EXPECT_EQ(text(frames[6].data), "B");
}

TEST(QmuxCaptureTest, PingResponseEchoesTheSequence) {
  EXPECT_EQ(to_hex(encode_ping_response(7).span()), canonical("f4 8c 67 52 9e f8 c7 be 07"));
  auto f = decode_frame(Framing::kQmux01, from_hex("f4 8c 67 52 9e f8 c7 be 07"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kPingResponse);
  EXPECT_EQ(f->value, 7u);
}

TEST(QmuxCaptureTest, PingRequestCarriesTheSequence) {
  EXPECT_EQ(to_hex(encode_ping_request(300).span()), canonical("f4 8c 67 52 9e f8 c7 bd 41 2c"));
  auto f = decode_frame(Framing::kQmux02, from_hex("f4 8c 67 52 9e f8 c7 bd 41 2c"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kPing);
  EXPECT_EQ(f->value, 300u);
}

TEST(QmuxCaptureTest, UnknownTypeEndsARecordButNotAQmux00Message) {
  auto unknown = from_hex("21 00 00");
  EXPECT_FALSE(decode_frame(Framing::kQmux01, unknown));
  EXPECT_FALSE(decode_frame(Framing::kQmux02, unknown));
  auto f = decode_frame(Framing::kQmux00, unknown);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kIgnored);
  EXPECT_EQ(f->size, unknown.size());
}

TEST(QmuxCaptureTest, ResetStreamAtOnlyInQmux02) {
  auto bytes = from_hex("24 02 07 05 03");
  auto f = decode_frame(Framing::kQmux02, bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FrameKind::kResetStream);
  EXPECT_EQ(f->stream_id, 2u);
  EXPECT_EQ(f->code, 7u);
  EXPECT_FALSE(decode_frame(Framing::kQmux01, bytes));
}

TEST(QmuxCaptureTest, EveryPrefixOfACapturedFrameIsTruncatedNotACrash) {
  for (const auto& c : kCaptures) {
    for (std::string_view hex : {c.params, c.stream, c.close}) {
      auto bytes = from_hex(hex);
      for (size_t n = 1; n < bytes.size(); ++n) {
        auto f = decode_frame(Framing::kQmux02, std::span(bytes).first(n));
        if (f) {
          EXPECT_LE(f->size, n);  // a STREAM without length may end anywhere
        }
      }
    }
  }
}

}  // namespace
}  // namespace moqd::transport::websocket
