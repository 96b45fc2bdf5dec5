// Chromium's real WebTransport bytes (tests/testing/chromium_webtransport.h) through our decoders:
// what a browser sends must decode to exactly what it meant.
#include <gtest/gtest.h>

#include "base/codec.h"
#include "testing/chromium_webtransport.h"
#include "transport/webtransport/h3.h"
#include "transport/webtransport/qpack.h"

namespace moqd::transport::webtransport {
namespace {

namespace chromium = test::chromium;

TEST(ChromiumCaptureTest, ControlStreamIsSettingsWithWebTransportEnabled) {
  std::vector<uint8_t> stream = from_hex(chromium::kControlStreamStart);
  auto payload = from_hex(chromium::kSettingsPayload);
  stream.insert(stream.end(), payload.begin(), payload.end());

  auto type = parse_varint(stream);
  ASSERT_TRUE(type);
  EXPECT_EQ(type->value, kStreamControl);
  auto frame = parse_frame(std::span(stream).subspan(type->consumed), 1024);
  ASSERT_TRUE(frame);
  ASSERT_TRUE(*frame);
  EXPECT_EQ((*frame)->value.type, kFrameSettings);
  EXPECT_EQ((*frame)->consumed, stream.size() - type->consumed);

  auto settings = parse_settings((*frame)->value.payload);
  ASSERT_TRUE(settings);
  ASSERT_EQ(settings->size(), 7u);
  const std::vector<std::pair<uint64_t, uint64_t>> expected = {
      {kSettingQpackMaxTableCapacity, 65536}, {kSettingMaxFieldSectionSize, 16384},
      {kSettingQpackBlockedStreams, 100},     {kSettingH3Datagram, 1},
      {kSettingH3DatagramDraft04, 1},         {kSettingEnableWebTransport, 1},
      {0xf667413fb, 3666705687}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*settings)[i].id, expected[i].first) << i;
    EXPECT_EQ((*settings)[i].value, expected[i].second) << i;
  }
  EXPECT_TRUE(is_reserved(0xf667413fb));  // Chromium greases its SETTINGS

  PeerSettings peer = summarize(*settings);
  EXPECT_TRUE(peer.webtransport);
  EXPECT_TRUE(peer.h3_datagram);
  EXPECT_EQ(peer.qpack_max_table_capacity, 65536u);
  EXPECT_EQ(peer.qpack_blocked_streams, 100u);
  EXPECT_EQ(peer.max_field_section_size, 16384u);
}

TEST(ChromiumCaptureTest, QpackEncoderStreamSetsCapacityZero) {
  auto bytes = from_hex(chromium::kQpackEncoderStream);
  auto type = parse_varint(bytes);
  ASSERT_TRUE(type);
  EXPECT_EQ(type->value, kStreamQpackEncoder);
  auto dec = QpackDecoder::create();
  ASSERT_TRUE(dec);
  EXPECT_TRUE((*dec)->read_encoder_stream(std::span(bytes).subspan(type->consumed)));
}

TEST(ChromiumCaptureTest, ConnectDecodesToAWebTransportRequest) {
  auto header = from_hex(chromium::kConnectFrameHeader);
  auto section = from_hex(chromium::kConnectFieldSection);
  std::vector<uint8_t> frame_bytes = header;
  frame_bytes.insert(frame_bytes.end(), section.begin(), section.end());
  auto frame = parse_frame(frame_bytes, 16384);
  ASSERT_TRUE(frame);
  ASSERT_TRUE(*frame);
  EXPECT_EQ((*frame)->value.type, kFrameHeaders);
  EXPECT_EQ((*frame)->value.payload.size(), 130u);

  auto dec = QpackDecoder::create();
  ASSERT_TRUE(dec);
  auto headers = (*dec)->decode(section, 16384);
  ASSERT_TRUE(headers);
  const HeaderList expected = {
      {":scheme", "https"},
      {":method", "CONNECT"},
      {":authority", "127.0.0.1:54303"},
      {":path", "/"},
      {":protocol", "webtransport"},
      {"sec-webtransport-http3-draft02", "1"},
      {"origin", "http://localhost:34017"},
      {"wt-available-protocols", "\"moq-lite-04\", \"moq-lite-03\", \"moql\""},
  };
  ASSERT_EQ(headers->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*headers)[i].name, expected[i].name) << i;
    EXPECT_EQ((*headers)[i].value, expected[i].value) << i;
  }

  auto request = parse_connect(*headers);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->authority, "127.0.0.1:54303");
  EXPECT_EQ(request->path, "/");
  EXPECT_EQ(request->origin, "http://localhost:34017");
  EXPECT_TRUE(request->draft02);
  EXPECT_EQ(request->available_protocols,
            (std::vector<std::string>{"moq-lite-04", "moq-lite-03", "moql"}));
  EXPECT_EQ(select_protocol(request->available_protocols, {"moq-lite-04", "moq-lite-03", "moql"}),
            "moq-lite-04");
  EXPECT_EQ(select_protocol(request->available_protocols, {"moql"}), "moql");
}

TEST(ChromiumCaptureTest, StreamPreamblesNameSessionZero) {
  auto uni = from_hex(chromium::kUniPreamble);
  auto t = parse_varint(uni);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->value, kStreamWebTransportUni);
  EXPECT_EQ(t->consumed, 2u);  // Chromium uses the 2-byte form for 0x54
  auto id = parse_varint(std::span(uni).subspan(t->consumed));
  ASSERT_TRUE(id);
  EXPECT_EQ(id->value, 0u);

  auto bidi = from_hex(chromium::kBidiPreamble);
  t = parse_varint(bidi);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->value, kWebTransportBidiSignal);
  id = parse_varint(std::span(bidi).subspan(t->consumed));
  ASSERT_TRUE(id);
  EXPECT_EQ(id->value, 0u);
}

TEST(ChromiumCaptureTest, DatagramCarriesQuarterStreamIdZero) {
  auto bytes = from_hex(chromium::kDatagram);
  auto d = parse_datagram(bytes);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->session_id, 0u);
  EXPECT_EQ(std::string(d->payload.begin(), d->payload.end()), "hi");
}

}  // namespace
}  // namespace moqd::transport::webtransport
