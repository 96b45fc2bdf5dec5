#include "transport/webtransport/h3.h"

#include <gtest/gtest.h>

#include "base/codec.h"

namespace moqd::transport::webtransport {
namespace {

using Bytes = std::vector<uint8_t>;

std::span<const uint8_t> prefix(const Bytes& b, size_t n) {
  return std::span<const uint8_t>(b.data(), n);
}

std::string text(std::span<const uint8_t> data) {
  return std::string(reinterpret_cast<const char*>(data.data()), data.size());
}

// limits.md §6: Chromium 156's SETTINGS payload, plus the grease id 0x5f (0x1f * 2 + 0x21).
constexpr std::string_view kChromiumSettings =
    "01 80 01 00 00 "     // QPACK_MAX_TABLE_CAPACITY 65536
    "06 80 00 40 00 "     // MAX_FIELD_SECTION_SIZE 16384
    "07 40 64 "           // QPACK_BLOCKED_STREAMS 100
    "33 01 "              // H3_DATAGRAM 1
    "80 ff d2 77 01 "     // H3_DATAGRAM draft-04 1
    "ab 60 37 42 01 "     // ENABLE_WEBTRANSPORT 1
    "40 5f 0a";           // grease

// --- reserved values and error codes ---

TEST(H3Test, ReservedTypes) {
  EXPECT_TRUE(is_reserved(0x21));
  EXPECT_TRUE(is_reserved(0x40));
  EXPECT_TRUE(is_reserved(0x5f));
  EXPECT_TRUE(is_reserved(0x1f * 0x123456789ull + 0x21));
  EXPECT_FALSE(is_reserved(0x00));
  EXPECT_FALSE(is_reserved(0x02));
  EXPECT_FALSE(is_reserved(0x20));
  EXPECT_FALSE(is_reserved(0x22));
  EXPECT_FALSE(is_reserved(0x41));
  EXPECT_FALSE(is_reserved(kSettingEnableWebTransport));
}

TEST(H3Test, WtCodeMappingBoundaries) {
  EXPECT_EQ(wt_to_h3_code(0), 0x52e4a40fa8dbull);
  EXPECT_EQ(wt_to_h3_code(0x1d), 0x52e4a40fa8f8ull);
  // 0x52e4a40fa8f9 is reserved, so 0x1e skips it.
  EXPECT_TRUE(is_reserved(0x52e4a40fa8f9ull));
  EXPECT_EQ(wt_to_h3_code(0x1e), 0x52e4a40fa8faull);
  EXPECT_EQ(wt_to_h3_code(0xffffffff), 0x52e5ac983162ull);
  EXPECT_EQ(wt_to_h3_code(0x100000000ull), 0x52e5ac983162ull);
  EXPECT_EQ(wt_to_h3_code(UINT64_MAX), 0x52e5ac983162ull);
}

TEST(H3Test, WtCodeReverseMapping) {
  EXPECT_EQ(h3_to_wt_code(0x52e4a40fa8dbull), 0u);
  EXPECT_EQ(h3_to_wt_code(0x52e4a40fa8f8ull), 0x1du);
  EXPECT_EQ(h3_to_wt_code(0x52e4a40fa8faull), 0x1eu);
  EXPECT_EQ(h3_to_wt_code(0x52e5ac983162ull), 0xffffffffu);
  EXPECT_EQ(h3_to_wt_code(0x52e4a40fa8f9ull), std::nullopt);  // reserved
  EXPECT_EQ(h3_to_wt_code(0x52e4a40fa8daull), std::nullopt);  // below the range
  EXPECT_EQ(h3_to_wt_code(0x52e5ac983163ull), std::nullopt);  // above the range
  EXPECT_EQ(h3_to_wt_code(0x10c), std::nullopt);
  EXPECT_EQ(h3_to_wt_code(0), std::nullopt);
}

TEST(H3Test, WtCodeRoundTrip) {
  const uint64_t codes[] = {0,         1,          0x1d,       0x1e,       0x1f,
                            0x3b,      0x3c,       0x3d,       1000,       0x12345678,
                            0x7fffffff, 0xfffffffe, 0xffffffff};
  for (uint64_t code : codes) {
    uint64_t h3 = wt_to_h3_code(code);
    EXPECT_FALSE(is_reserved(h3)) << code;
    EXPECT_EQ(h3_to_wt_code(h3), code) << code;
  }
  for (uint64_t code = 0; code < 2000; ++code) {
    ASSERT_EQ(h3_to_wt_code(wt_to_h3_code(code)), code);
  }
}

// --- frames ---

TEST(H3Test, WritesAndParsesFrame) {
  Bytes out;
  Writer w(out);
  write_frame(w, kFrameHeaders, from_hex("aa bb cc"));
  EXPECT_EQ(to_hex(out), "01 03 aa bb cc");
  auto f = parse_frame(out, 100);
  ASSERT_TRUE(f);
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->value.type, kFrameHeaders);
  EXPECT_EQ(to_hex((*f)->value.payload), "aa bb cc");
  EXPECT_EQ((*f)->consumed, 5u);
}

TEST(H3Test, WritesFrameHeaderWithLongVarints) {
  Bytes out;
  Writer w(out);
  write_frame_header(w, kSettingEnableWebTransport, 300);
  EXPECT_EQ(to_hex(out), "ab 60 37 42 41 2c");
}

TEST(H3Test, ParseFrameLeavesFollowingBytes) {
  Bytes in = from_hex("00 02 68 69 07 01 00");
  auto f = parse_frame(in, 100);
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->value.type, kFrameData);
  EXPECT_EQ(text((*f)->value.payload), "hi");
  EXPECT_EQ((*f)->consumed, 4u);
}

TEST(H3Test, ParseFrameTruncatedAtEveryOffsetNeedsMore) {
  Bytes in = from_hex("40 41 80 00 00 05 01 02 03 04 05");
  for (size_t n = 0; n < in.size(); ++n) {
    auto f = parse_frame(prefix(in, n), 100);
    ASSERT_TRUE(f) << n;
    EXPECT_FALSE(f->has_value()) << n;
  }
  auto f = parse_frame(in, 100);
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->value.type, 0x41u);
  EXPECT_EQ((*f)->value.payload.size(), 5u);
}

TEST(H3Test, OverlongFrameFailsBeforePayloadArrives) {
  Bytes in = from_hex("00 44 00");  // DATA, length 0x400, no payload yet
  auto f = parse_frame(in, 0x3ff);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, H3Code::kExcessiveLoad);
  auto exact = parse_frame(in, 0x400);
  ASSERT_TRUE(exact);
  EXPECT_FALSE(exact->has_value());
}

TEST(H3Test, EmptyFramePayload) {
  Bytes in = from_hex("07 00");
  auto f = parse_frame(in, 0);
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->value.type, kFrameGoaway);
  EXPECT_TRUE((*f)->value.payload.empty());
}

// --- SETTINGS ---

TEST(H3Test, ParsesChromiumSettings) {
  Bytes payload = from_hex(kChromiumSettings);
  auto settings = parse_settings(payload);
  ASSERT_TRUE(settings);
  ASSERT_EQ(settings->size(), 7u);
  EXPECT_EQ((*settings)[0].id, kSettingQpackMaxTableCapacity);
  EXPECT_EQ((*settings)[0].value, 65536u);
  EXPECT_EQ((*settings)[4].id, kSettingH3DatagramDraft04);
  EXPECT_EQ((*settings)[6].id, 0x5fu);
  EXPECT_EQ((*settings)[6].value, 10u);

  PeerSettings p = summarize(*settings);
  EXPECT_EQ(p.qpack_max_table_capacity, 65536u);
  EXPECT_EQ(p.qpack_blocked_streams, 100u);
  EXPECT_EQ(p.max_field_section_size, 16384u);
  EXPECT_TRUE(p.h3_datagram);
  EXPECT_TRUE(p.webtransport);
}

TEST(H3Test, ParsesChromiumSettingsFrame) {
  Bytes frame = from_hex(std::string("04 1c ") + std::string(kChromiumSettings));
  auto f = parse_frame(frame, 1024);
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->value.type, kFrameSettings);
  EXPECT_EQ((*f)->consumed, frame.size());
  EXPECT_TRUE(parse_settings((*f)->value.payload));
}

TEST(H3Test, SummarizeDefaults) {
  PeerSettings p = summarize({});
  EXPECT_EQ(p.qpack_max_table_capacity, 0u);
  EXPECT_EQ(p.qpack_blocked_streams, 0u);
  EXPECT_EQ(p.max_field_section_size, std::nullopt);
  EXPECT_FALSE(p.h3_datagram);
  EXPECT_FALSE(p.webtransport);
}

TEST(H3Test, SummarizeIgnoresGreaseAndUnknown) {
  const Setting settings[] = {{0x21, 1}, {0x40, 7}, {0x1f * 1000 + 0x21, 99}, {0x1234, 5}};
  PeerSettings p = summarize(settings);
  EXPECT_EQ(p.qpack_max_table_capacity, 0u);
  EXPECT_FALSE(p.h3_datagram);
  EXPECT_FALSE(p.webtransport);
}

TEST(H3Test, SummarizeWebTransportVariants) {
  const Setting max_sessions[] = {{kSettingWtMaxSessions, 3}};
  EXPECT_TRUE(summarize(max_sessions).webtransport);
  const Setting zero_sessions[] = {{kSettingWtMaxSessions, 0}};
  EXPECT_FALSE(summarize(zero_sessions).webtransport);
  const Setting disabled[] = {{kSettingEnableWebTransport, 0}, {kSettingH3Datagram, 0}};
  EXPECT_FALSE(summarize(disabled).webtransport);
  EXPECT_FALSE(summarize(disabled).h3_datagram);
  const Setting draft04[] = {{kSettingH3DatagramDraft04, 1}};
  EXPECT_TRUE(summarize(draft04).h3_datagram);
}

TEST(H3Test, EmptySettingsPayload) {
  auto settings = parse_settings({});
  ASSERT_TRUE(settings);
  EXPECT_TRUE(settings->empty());
}

TEST(H3Test, DuplicateSettingFails) {
  Bytes payload = from_hex("01 00 06 40 64 01 00");
  auto settings = parse_settings(payload);
  ASSERT_FALSE(settings);
  EXPECT_EQ(settings.error().code, H3Code::kSettingsError);
}

TEST(H3Test, DuplicateGreaseSettingFails) {
  Bytes payload = from_hex("40 5f 01 40 5f 02");
  auto settings = parse_settings(payload);
  ASSERT_FALSE(settings);
  EXPECT_EQ(settings.error().code, H3Code::kSettingsError);
}

TEST(H3Test, Http2SettingsFail) {
  for (const char* hex : {"00 00", "02 01", "03 64", "04 00", "05 40 80"}) {
    Bytes payload = from_hex(hex);
    auto settings = parse_settings(payload);
    ASSERT_FALSE(settings) << hex;
    EXPECT_EQ(settings.error().code, H3Code::kSettingsError) << hex;
  }
}

TEST(H3Test, H3DatagramValueAboveOneFails) {
  Bytes payload = from_hex("33 02");
  auto settings = parse_settings(payload);
  ASSERT_FALSE(settings);
  EXPECT_EQ(settings.error().code, H3Code::kSettingsError);
}

TEST(H3Test, TruncatedSettingsFailAtEveryOffset) {
  Bytes payload = from_hex(kChromiumSettings);
  // Every cut that splits a pair; cuts between pairs decode a shorter list.
  const size_t pair_ends[] = {5, 10, 13, 15, 20, 25, 28};
  for (size_t n = 1; n < payload.size(); ++n) {
    bool at_boundary = std::find(std::begin(pair_ends), std::end(pair_ends), n) !=
                       std::end(pair_ends);
    auto settings = parse_settings(prefix(payload, n));
    EXPECT_EQ(static_cast<bool>(settings), at_boundary) << n;
    if (!settings) {
      EXPECT_EQ(settings.error().code, H3Code::kSettingsError) << n;
    }
  }
}

TEST(H3Test, ServerControlStreamPreamble) {
  Bytes out = server_control_stream_preamble(4);
  EXPECT_EQ(to_hex(out),
            "00 04 16 01 00 07 00 08 01 33 01 ab 60 37 42 01 c0 00 00 00 c6 71 70 6a 04");
  auto type = parse_varint(out);
  ASSERT_TRUE(type);
  EXPECT_EQ(type->value, kStreamControl);
  auto f = parse_frame(std::span<const uint8_t>(out).subspan(type->consumed), 1024);
  ASSERT_TRUE(f && f->has_value());
  auto settings = parse_settings((*f)->value.payload);
  ASSERT_TRUE(settings);
  PeerSettings p = summarize(*settings);
  EXPECT_TRUE(p.h3_datagram);
  EXPECT_TRUE(p.webtransport);
  EXPECT_EQ(p.qpack_max_table_capacity, 0u);
}

TEST(H3Test, ClientControlStreamPreamble) {
  Bytes out = client_control_stream_preamble();
  EXPECT_EQ(to_hex(out), "00 04 0b 01 00 07 00 33 01 ab 60 37 42 01");
  auto type = parse_varint(out);
  ASSERT_TRUE(type);
  auto f = parse_frame(std::span<const uint8_t>(out).subspan(type->consumed), 1024);
  ASSERT_TRUE(f && f->has_value());
  auto settings = parse_settings((*f)->value.payload);
  ASSERT_TRUE(settings);
  PeerSettings p = summarize(*settings);
  EXPECT_TRUE(p.h3_datagram);
  EXPECT_TRUE(p.webtransport);
}

// --- stream preambles ---

TEST(H3Test, BrowserStreamPreambles) {
  Bytes bidi = from_hex("40 41 00");
  auto signal = parse_varint(bidi);
  ASSERT_TRUE(signal);
  EXPECT_EQ(signal->value, kWebTransportBidiSignal);
  EXPECT_EQ(signal->consumed, 2u);
  auto session = parse_varint(std::span<const uint8_t>(bidi).subspan(2));
  ASSERT_TRUE(session);
  EXPECT_EQ(session->value, 0u);

  Bytes uni = from_hex("40 54 00");
  auto type = parse_varint(uni);
  ASSERT_TRUE(type);
  EXPECT_EQ(type->value, kStreamWebTransportUni);
}

TEST(H3Test, WritesStreamPreambles) {
  EXPECT_EQ(to_hex(wt_stream_preamble(false, 0)), "40 41 00");
  EXPECT_EQ(to_hex(wt_stream_preamble(true, 0)), "40 54 00");
  EXPECT_EQ(to_hex(wt_stream_preamble(false, 4)), "40 41 04");
  EXPECT_EQ(to_hex(wt_stream_preamble(true, 400)), "40 54 41 90");
}

TEST(H3Test, ParseVarintTruncated) {
  Bytes in = from_hex("80 00 40 54");
  for (size_t n = 0; n < in.size(); ++n) {
    EXPECT_FALSE(parse_varint(prefix(in, n))) << n;
  }
  auto v = parse_varint(in);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->value, 0x4054u);
  EXPECT_EQ(v->consumed, 4u);
}

// --- datagrams ---

TEST(H3Test, ParsesBrowserDatagram) {
  Bytes in = from_hex("00 68 69");
  auto d = parse_datagram(in);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->session_id, 0u);
  EXPECT_EQ(text(d->payload), "hi");
}

TEST(H3Test, DatagramQuarterStreamId) {
  Bytes out;
  Writer w(out);
  write_datagram(w, 8, from_hex("68 69"));
  EXPECT_EQ(to_hex(out), "02 68 69");
  auto d = parse_datagram(out);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->session_id, 8u);
  EXPECT_EQ(text(d->payload), "hi");
}

TEST(H3Test, DatagramEmptyPayload) {
  Bytes in = from_hex("01");
  auto d = parse_datagram(in);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->session_id, 4u);
  EXPECT_TRUE(d->payload.empty());
}

TEST(H3Test, DatagramWithoutQuarterIdFails) {
  for (const char* hex : {"", "40", "80 00 00"}) {
    Bytes in = from_hex(hex);
    auto d = parse_datagram(in);
    ASSERT_FALSE(d) << hex;
    EXPECT_EQ(d.error().code, H3Code::kDatagramError) << hex;
  }
}

TEST(H3Test, DatagramQuarterIdAboveStreamIdSpaceFails) {
  Bytes max = from_hex("cf ff ff ff ff ff ff ff");  // 2^60 - 1
  auto d = parse_datagram(max);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->session_id, ((uint64_t{1} << 60) - 1) * 4);
  Bytes over = from_hex("d0 00 00 00 00 00 00 00");  // 2^60
  auto bad = parse_datagram(over);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, H3Code::kDatagramError);
}

// --- capsules ---

TEST(H3Test, CloseSessionDataFrame) {
  Bytes frame = close_session_data_frame(0x01020304, "bye");
  EXPECT_EQ(to_hex(frame), "00 0a 68 43 07 01 02 03 04 62 79 65");
  auto f = parse_frame(frame, 2048);
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->value.type, kFrameData);
  auto c = parse_capsule((*f)->value.payload, 2048);
  ASSERT_TRUE(c && c->has_value());
  EXPECT_EQ((*c)->value.type, kCapsuleCloseSession);
  auto close = parse_close_session((*c)->value.value);
  ASSERT_TRUE(close);
  EXPECT_EQ(close->code, 0x01020304u);
  EXPECT_EQ(close->reason, "bye");
}

TEST(H3Test, CloseSessionEmptyReason) {
  EXPECT_EQ(to_hex(close_session_data_frame(0, "")), "00 07 68 43 04 00 00 00 00");
  Bytes value = from_hex("ff ff ff ff");
  auto close = parse_close_session(value);
  ASSERT_TRUE(close);
  EXPECT_EQ(close->code, 0xffffffffu);
  EXPECT_TRUE(close->reason.empty());
}

TEST(H3Test, CloseSessionShortValueFails) {
  for (const char* hex : {"", "00", "00 00 00"}) {
    Bytes value = from_hex(hex);
    auto close = parse_close_session(value);
    ASSERT_FALSE(close) << hex;
    EXPECT_EQ(close.error().code, H3Code::kMessageError);
  }
}

TEST(H3Test, CloseSessionReasonLimit) {
  Bytes value(4 + kMaxCloseReason, 'x');
  EXPECT_TRUE(parse_close_session(value));
  value.push_back('x');
  auto close = parse_close_session(value);
  ASSERT_FALSE(close);
  EXPECT_EQ(close.error().code, H3Code::kMessageError);
}

TEST(H3Test, CloseSessionCutsLongReason) {
  std::string reason(kMaxCloseReason + 100, 'r');
  Bytes frame = close_session_data_frame(7, reason);
  auto f = parse_frame(frame, 4096);
  ASSERT_TRUE(f && f->has_value());
  auto c = parse_capsule((*f)->value.payload, 4096);
  ASSERT_TRUE(c && c->has_value());
  auto close = parse_close_session((*c)->value.value);
  ASSERT_TRUE(close);
  EXPECT_EQ(close->code, 7u);
  EXPECT_EQ(close->reason.size(), kMaxCloseReason);
}

TEST(H3Test, CloseSessionCutDoesNotSplitUtf8) {
  // 1023 ASCII bytes then "é" (c3 a9): the cut at 1024 would split it, so it drops it whole.
  std::string reason(kMaxCloseReason - 1, 'r');
  reason += "\xc3\xa9";
  Bytes frame = close_session_data_frame(7, reason);
  auto f = parse_frame(frame, 4096);
  auto c = parse_capsule((*f)->value.payload, 4096);
  auto close = parse_close_session((*c)->value.value);
  ASSERT_TRUE(close);
  EXPECT_EQ(close->reason, std::string(kMaxCloseReason - 1, 'r'));
}

TEST(H3Test, DrainSessionDataFrame) {
  Bytes frame = drain_session_data_frame();
  EXPECT_EQ(to_hex(frame), "00 05 80 00 78 ae 00");
  auto c = parse_capsule(std::span<const uint8_t>(frame).subspan(2), 16);
  ASSERT_TRUE(c && c->has_value());
  EXPECT_EQ((*c)->value.type, kCapsuleDrainSession);
  EXPECT_TRUE((*c)->value.value.empty());
  EXPECT_EQ((*c)->consumed, 5u);
}

TEST(H3Test, CapsuleTruncatedAtEveryOffsetNeedsMore) {
  Bytes in = from_hex("68 43 07 01 02 03 04 62 79 65");
  for (size_t n = 0; n < in.size(); ++n) {
    auto c = parse_capsule(prefix(in, n), 100);
    ASSERT_TRUE(c) << n;
    EXPECT_FALSE(c->has_value()) << n;
  }
}

TEST(H3Test, OverlongCapsuleFailsBeforeValueArrives) {
  Bytes in = from_hex("68 43 41 00");  // length 256, nothing else yet
  auto c = parse_capsule(in, 255);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, H3Code::kMessageError);
}

TEST(H3Test, CapsuleSequence) {
  Bytes in = from_hex("80 00 78 ae 00 17 02 aa bb");  // DRAIN, then an unknown capsule
  auto first = parse_capsule(in, 16);
  ASSERT_TRUE(first && first->has_value());
  auto second = parse_capsule(std::span<const uint8_t>(in).subspan((*first)->consumed), 16);
  ASSERT_TRUE(second && second->has_value());
  EXPECT_EQ((*second)->value.type, 0x17u);
  EXPECT_EQ(to_hex((*second)->value.value), "aa bb");
}

// --- the CONNECT request ---

HeaderList chromium_connect() {
  return {
      {":scheme", "https"},
      {":method", "CONNECT"},
      {":authority", "127.0.0.1:4433"},
      {":path", "/moq"},
      {":protocol", "webtransport"},
      {"sec-webtransport-http3-draft02", "1"},
      {"origin", "http://localhost:8080"},
  };
}

HeaderList with(HeaderList h, std::string_view name, std::string_view value) {
  for (HeaderField& f : h) {
    if (f.name == name) {
      f.value = value;
      return h;
    }
  }
  h.push_back(HeaderField{std::string(name), std::string(value)});
  return h;
}

HeaderList without(HeaderList h, std::string_view name) {
  std::erase_if(h, [&](const HeaderField& f) { return f.name == name; });
  return h;
}

void expect_refused(const HeaderList& h, int status, std::string_view reason) {
  auto req = parse_connect(h);
  ASSERT_FALSE(req) << reason;
  EXPECT_EQ(req.error().status, status) << reason;
  EXPECT_EQ(std::string_view(req.error().reason), reason);
}

TEST(ConnectTest, AcceptsChromiumRequest) {
  auto req = parse_connect(chromium_connect());
  ASSERT_TRUE(req) << req.error().reason;
  EXPECT_EQ(req->authority, "127.0.0.1:4433");
  EXPECT_EQ(req->path, "/moq");
  EXPECT_EQ(req->origin, "http://localhost:8080");
  EXPECT_TRUE(req->draft02);
  EXPECT_TRUE(req->available_protocols.empty());
}

TEST(ConnectTest, ReadsAvailableProtocolsAndQuery) {
  HeaderList h = with(chromium_connect(), "wt-available-protocols", "\"moq-lite-04\", \"moql\"");
  h = with(h, ":path", "/room?jwt=abc");
  h = without(h, "sec-webtransport-http3-draft02");
  h = without(h, "origin");
  auto req = parse_connect(h);
  ASSERT_TRUE(req);
  EXPECT_EQ(req->path, "/room?jwt=abc");
  EXPECT_EQ(req->origin, "");
  EXPECT_FALSE(req->draft02);
  EXPECT_EQ(req->available_protocols, (std::vector<std::string>{"moq-lite-04", "moql"}));
}

TEST(ConnectTest, InvalidProtocolListIsEmpty) {
  auto req = parse_connect(with(chromium_connect(), "wt-available-protocols", "\"moql"));
  ASSERT_TRUE(req);
  EXPECT_TRUE(req->available_protocols.empty());
}

TEST(ConnectTest, Draft02OnlyWhenOne) {
  auto req = parse_connect(with(chromium_connect(), "sec-webtransport-http3-draft02", "0"));
  ASSERT_TRUE(req);
  EXPECT_FALSE(req->draft02);
}

TEST(ConnectTest, AcceptsAuthorityForms) {
  for (const char* authority : {"example.com", "example.com:443", "[::1]:4433", "[::1]",
                                "a-b.example_1.com:1"}) {
    auto req = parse_connect(with(chromium_connect(), ":authority", authority));
    EXPECT_TRUE(req) << authority;
  }
}

TEST(ConnectTest, RefusesOtherMethods) {
  expect_refused(with(chromium_connect(), ":method", "GET"), 405, "not CONNECT");
  expect_refused(with(chromium_connect(), ":method", "connect"), 405, "not CONNECT");
  expect_refused(without(chromium_connect(), ":method"), 400, "missing :method");
}

TEST(ConnectTest, RefusesMissingOrBadProtocol) {
  expect_refused(without(chromium_connect(), ":protocol"), 400, "missing :protocol");
  expect_refused(with(chromium_connect(), ":protocol", "websocket"), 400, "bad :protocol");
  expect_refused(with(chromium_connect(), ":protocol", "WebTransport"), 400, "bad :protocol");
}

TEST(ConnectTest, RefusesBadScheme) {
  expect_refused(with(chromium_connect(), ":scheme", "http"), 400, "bad :scheme");
  expect_refused(without(chromium_connect(), ":scheme"), 400, "bad :scheme");
}

TEST(ConnectTest, RefusesBadPath) {
  expect_refused(with(chromium_connect(), ":path", ""), 400, "bad :path");
  expect_refused(with(chromium_connect(), ":path", "moq"), 400, "bad :path");
  expect_refused(with(chromium_connect(), ":path", "*"), 400, "bad :path");
  expect_refused(without(chromium_connect(), ":path"), 400, "bad :path");
}

TEST(ConnectTest, RefusesBadAuthority) {
  for (const char* authority : {"", "user@example.com", "user:pw@host:1", "host:", "host:port",
                                "host:123456", "ho st", "host/x", "[::1", "[zz]:1", ":443"}) {
    expect_refused(with(chromium_connect(), ":authority", authority), 400, "bad authority");
  }
  expect_refused(without(chromium_connect(), ":authority"), 400, "bad authority");
}

TEST(ConnectTest, RefusesPseudoHeaderAfterField) {
  HeaderList h = without(chromium_connect(), ":path");
  h.push_back({":path", "/moq"});
  expect_refused(h, 400, "pseudo-header after field");
}

TEST(ConnectTest, RefusesUnknownPseudoHeader) {
  HeaderList h = chromium_connect();
  h.insert(h.begin(), {":status", "200"});
  expect_refused(h, 400, "unknown pseudo-header");
  HeaderList upper = chromium_connect();
  upper.insert(upper.begin(), {":Path", "/x"});
  expect_refused(upper, 400, "unknown pseudo-header");
}

TEST(ConnectTest, RefusesRepeatedPseudoHeader) {
  HeaderList h = chromium_connect();
  h.insert(h.begin(), {":path", "/other"});
  expect_refused(h, 400, "repeated pseudo-header");
}

TEST(ConnectTest, RefusesUpperCaseOrInvalidFieldName) {
  expect_refused(with(chromium_connect(), "Origin", "http://x"), 400, "bad field name");
  expect_refused(with(chromium_connect(), "bad name", "x"), 400, "bad field name");
  expect_refused(with(chromium_connect(), "", "x"), 400, "bad field name");
}

TEST(ConnectTest, RefusesControlCharactersInValues) {
  expect_refused(with(chromium_connect(), "origin", "http://x\r\nevil: 1"), 400, "bad field value");
  expect_refused(with(chromium_connect(), ":path", std::string("/a\0b", 4)), 400,
                 "bad field value");
}

// --- WT-Available-Protocols and WT-Protocol ---

std::optional<std::vector<std::string>> list(std::string_view s) {
  return parse_protocol_list(s);
}
using Strings = std::vector<std::string>;

TEST(ProtocolListTest, ParsesStrings) {
  EXPECT_EQ(list("\"moq-lite-04\", \"moql\""), (Strings{"moq-lite-04", "moql"}));
  EXPECT_EQ(list("\"a\""), (Strings{"a"}));
  EXPECT_EQ(list("\"a\",\"b\""), (Strings{"a", "b"}));
  EXPECT_EQ(list("  \"a\" ,\t \"b\"  "), (Strings{"a", "b"}));
  EXPECT_EQ(list(""), (Strings{}));
  EXPECT_EQ(list("   "), (Strings{}));
}

TEST(ProtocolListTest, Escapes) {
  EXPECT_EQ(list(R"("a\"b", "c\\d")"), (Strings{"a\"b", "c\\d"}));
}

TEST(ProtocolListTest, SkipsParametersAndOtherMembers) {
  EXPECT_EQ(list("\"moql\";q=0.5;x, tok, 12, -3.25, ?1, :aGk=:, (\"in\" \"ner\");a=b, \"x\";y=\"z\""),
            (Strings{"moql", "x"}));
  EXPECT_EQ(list("moql, \"moq-lite-04\""), (Strings{"moq-lite-04"}));
  EXPECT_EQ(list("tok/en:x"), (Strings{}));
}

TEST(ProtocolListTest, InvalidListsAreNullopt) {
  for (std::string_view bad :
       {"\"moql", "\"a\",", "\"a\" \"b\"", ",\"a\"", "\"a\",,\"b\"", "\"\\x\"", "\"a\";Q=1",
        "\"a\";=1", "1234567890123456", "1.2345", "1.", "-", "?2", ":aGk", "(\"a\"",
        "(\"a\"\"b\")", "\"tab\there\"", "\"caf\xc3\xa9\"", "\t\"a\"", "@1", "\"a\";q="}) {
    EXPECT_EQ(list(bad), std::nullopt) << bad;
  }
}

TEST(ProtocolListTest, SelectProtocol) {
  const Strings supported = {"moq-lite-04", "moq-lite-03", "moql"};
  EXPECT_EQ(select_protocol({}, supported), "");
  EXPECT_EQ(select_protocol({"moql", "moq-lite-04"}, supported), "moq-lite-04");
  EXPECT_EQ(select_protocol({"moql"}, supported), "moql");
  EXPECT_EQ(select_protocol({"moqt-16"}, supported), std::nullopt);
  EXPECT_EQ(select_protocol({"moqt-16"}, {}), std::nullopt);
}

TEST(ProtocolListTest, ProtocolHeaderValue) {
  EXPECT_EQ(protocol_header_value("moq-lite-04"), "\"moq-lite-04\"");
  EXPECT_EQ(protocol_header_value("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(list(protocol_header_value("a\"b\\c")), (Strings{"a\"b\\c"}));
}

}  // namespace
}  // namespace moqd::transport::webtransport
