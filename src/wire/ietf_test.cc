// Byte-exact fixtures for the IETF MoQ Transport core (drafts 14 to 20). "JS" fixtures are the
// bytes @moq/net 0.3.4's own encoders write (tests/interop/ietf_fixtures.mjs prints them);
// "draft" fixtures are transcribed from the draft text, section cited. Every fixture is decoded
// whole, at every truncated length (must ask for more), and encoded back to the same bytes.
#include "testing/ietf_wire.h"
#include "testing/wire_decode.h"
#include "wire/ietf.h"

#include <gtest/gtest.h>

namespace moqd::wire::ietf {
namespace {

using test::expect_round_trip;

constexpr Version k14 = Version::kTransport14;
constexpr Version k15 = Version::kTransport15;
constexpr Version k16 = Version::kTransport16;
constexpr Version k17 = Version::kTransport17;
constexpr Version k18 = Version::kTransport18;
constexpr Version k19 = Version::kTransport19;
constexpr Version k20 = Version::kTransport20;

using test::canonical;

ParseResult<ControlMessage> decode_hex(Version v, std::string_view hex) {
  auto bytes = from_hex(hex);
  return decode_control(v, std::span<const uint8_t>(bytes), Limits{});
}

void expect_error(Version v, std::string_view hex, ErrorCode code, TerminationCode term) {
  auto r = decode_hex(v, hex);
  ASSERT_FALSE(r.has_value()) << "decoded " << hex;
  EXPECT_EQ(r.error().code, code) << r.error().detail;
  EXPECT_EQ(termination_code(r.error().code), term) << r.error().detail;
}

Parameter var(uint64_t type, uint64_t value) { return Parameter{type, value, {}}; }
Parameter bin(uint64_t type, std::string bytes) { return Parameter{type, 0, std::move(bytes)}; }

const TrackNamespace kRoomAlice = {"room", "alice"};

// --- SETUP (d14 §9.3; d15/16: no version fields; d16: delta-coded types).

TEST(IetfSetup, ClientSetupJs) {
  ClientSetup d14{{0xff00000e}, {var(kSetupMaxRequestId, 42069), bin(kSetupImplementation, "moq-lite-js")}};
  expect_round_trip(k14, "20001c01c0000000ff00000e02028000a455070b6d6f712d6c6974652d6a73", d14);
  ClientSetup later{{}, d14.params};
  expect_round_trip(k15, "20001302028000a455070b6d6f712d6c6974652d6a73", later);
  // d16: 0x07 is written as the delta 5 from 0x02.
  expect_round_trip(k16, "20001302028000a455050b6d6f712d6c6974652d6a73", later);
}

// The d14-layout CLIENT_SETUP @moq/net sends on the SETUP path (NET-0.3.md §4.8): three versions,
// and the SOLICIT option 0x40b5a (an unknown setup parameter, kept).
TEST(IetfSetup, ClientSetupWithSolicitJs) {
  ClientSetup m{{0xff0dad02, 0xff0dad01, 0xff00000e},
                {var(kSetupMaxRequestId, 42069), var(kSetupSolicit, 1),
                 bin(kSetupImplementation, "moq-lite-js")}};
  expect_round_trip(k14,
                    "200031 03 c0000000ff0dad02 c0000000ff0dad01 c0000000ff00000e"
                    "03 02 8000a455 80040b5a 01 07 0b 6d6f712d6c6974652d6a73",
                    m);
}

TEST(IetfSetup, ServerSetupJs) {
  expect_round_trip(k14, "210009c0000000ff00000e00", ServerSetup{0xff00000e, {}});
  expect_round_trip(k15, "21000100", ServerSetup{});
  expect_round_trip(k16, "21000100", ServerSetup{});
}

TEST(IetfSetup, DuplicateKnownSetupParameterIsViolation) {
  // Two MAX_REQUEST_ID parameters.
  expect_error(k15, "210005 02 0201 0202", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // Two unknown ones (0x40) are allowed (d14 §9.2: "MUST allow duplicates of unknown").
  auto r = decode_hex(k15, "210007 02 4040 01 4040 02");
  ASSERT_TRUE(r.has_value()) << r.error().detail;
}

// --- SUBSCRIBE family.

TEST(IetfSubscribe, SubscribeD14Js) {
  // d14 §9.7: fields inline; JS: priority 7, group order 2, forward 1, filter 2 (Largest Object).
  Subscribe m{2, 0, kRoomAlice, "video", 7, 2, true, Filter{FilterType::kLargestObject, {}, 0}, {}};
  expect_round_trip(k14, "030018020204726f6f6d05616c69636505766964656f0702010200", m);
}

TEST(IetfSubscribe, SubscribeD15D16Js) {
  Subscribe m{2, 0, kRoomAlice, "video", 7, 2, true, Filter{FilterType::kLargestObject, {}, 0}, {}};
  // d15: absolute types in @moq/net's order 0x20, 0x22, 0x10, 0x21.
  expect_round_trip(k15, "03001d020204726f6f6d05616c69636505766964656f04200722021001210102", m);
  // d16: sorted, delta-coded 0x10, 0x20, 0x21, 0x22.
  expect_round_trip(k16, "03001d020204726f6f6d05616c69636505766964656f04100110070101020102", m);
}

TEST(IetfSubscribe, SubscribeAbsoluteRangeDraft) {
  // d14 §9.7: Filter Type 4 (AbsoluteRange), Start Location {5, 1}, End Group 9, and one
  // DELIVERY_TIMEOUT parameter (0x02 = 100 ms, §9.2.1.2).
  Subscribe m{4, 0, {"a"}, "t", 128, 1, false, Filter{FilterType::kAbsoluteRange, {5, 1}, 9},
              {var(kParamDeliveryTimeout, 100)}};
  expect_round_trip(k14, "030011 04 01 0161 0174 80 01 00 04 05 01 09 01 02 4064", m);
}

TEST(IetfSubscribe, SubscribeOkJs) {
  // d14 §9.8: id 2, alias 2, expires 0, group order 2, content exists 0, 0 params.
  expect_round_trip(k14, "040006020200020000", SubscribeOk{2, 2, 0, 2, std::nullopt, {}, {}});
  expect_round_trip(k15, "040003020200", SubscribeOk{2, 2, 0, 2, std::nullopt, {}, {}});
  expect_round_trip(k16, "040003020200", SubscribeOk{2, 2, 0, 2, std::nullopt, {}, {}});
}

TEST(IetfSubscribe, SubscribeOkLargestDraft) {
  // d14 §9.8: Content Exists 1 with Largest Location {7, 3}; Expires 1000 ms.
  expect_round_trip(k14, "040009 01 05 43e8 01 01 07 03 00",
                    SubscribeOk{1, 5, 1000, 1, Location{7, 3}, {}, {}});
  // d16 §9.10: LARGEST_OBJECT (0x09, §9.2.2.7) as a parameter, then Track Extensions (here one
  // DEFAULT_PUBLISHER_PRIORITY 0x0E = 64, kept raw).
  SubscribeOk d16{1, 5, 0, 2, std::nullopt, {bin(kParamLargestObject, "\x07\x03")}, "\x0e\x40\x40"};
  expect_round_trip(k16, "04000a 01 05 01 09 02 0703 0e4040", d16);
}

TEST(IetfSubscribe, ErrorsJs) {
  // d14 SUBSCRIBE_ERROR / d15 REQUEST_ERROR: id, code 404, reason.
  RequestError e{MessageType::kRequestError, 2, 404, 0, "Broadcast not found"};
  expect_round_trip(k14, "0500170241941342726f616463617374206e6f7420666f756e64", e);
  expect_round_trip(k15, "0500170241941342726f616463617374206e6f7420666f756e64", e);
  // d16 §9.8: Retry Interval 0 after the code.
  expect_round_trip(k16, "050018024194001342726f616463617374206e6f7420666f756e64", e);
}

TEST(IetfSubscribe, SubscribeUpdateJs) {
  // @moq/net writes request id 4 and zeroes: d14 fields inline (start {0, 0}, end group 0,
  // priority 128, forward 1); d15/16 the existing request id and no parameters; d17 the
  // Required Request ID Delta instead of an existing id (the update rides the request's stream).
  expect_round_trip(k14, "0200080400000000800100", SubscribeUpdate{4, 0, 0, {0, 0}, 0, 128, true, {}});
  expect_round_trip(k15, "020003040000", SubscribeUpdate{4, 0, 0, {}, 0, 128, true, {}});
  expect_round_trip(k16, "020003040000", SubscribeUpdate{4, 0, 0, {}, 0, 128, true, {}});
  expect_round_trip(k17, "020003040000", SubscribeUpdate{4, 0, 0, {}, 0, 128, true, {}});
}

TEST(IetfSubscribe, SubscribeUpdateDraft) {
  // d14 §9.10: update of subscription 2 to start at {10, 0}, end group 20, priority 5, forward
  // 0, with DELIVERY_TIMEOUT 100 ms.
  expect_round_trip(k14, "02000b 06 02 0a 00 14 05 00 01 02 4064",
                    SubscribeUpdate{6, 0, 2, {10, 0}, 20, 5, false, {var(kParamDeliveryTimeout, 100)}});
  // d16 REQUEST_UPDATE with FORWARD 0 and SUBSCRIBER_PRIORITY 9 as (delta-coded) parameters.
  expect_round_trip(k16, "020007 06 02 02 10 00 10 09",
                    SubscribeUpdate{6, 0, 2, {}, 0, 128, true, {var(kParamForward, 0), var(kParamSubscriberPriority, 9)}});
  // GROUP_ORDER is not an update parameter: a violation in d16.
  expect_error(k16, "020005 06 02 01 22 01", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
}

TEST(IetfSubscribe, UnsubscribeAndPublishDoneJs) {
  for (Version v : {k14, k15, k16}) {
    expect_round_trip(v, "0a000102", Unsubscribe{2});
    // PUBLISH_DONE: id 2, status 200, stream count 0, "OK".
    expect_round_trip(v, "0b00070240c800024f4b", PublishDone{2, 200, 0, "OK"});
  }
}

// --- Namespaces.

TEST(IetfNamespace, PublishNamespaceJs) {
  for (Version v : {k14, k15, k16}) {
    expect_round_trip(v, "06000e000204726f6f6d05616c69636500", PublishNamespace{0, 0, kRoomAlice, {}});
  }
  expect_round_trip(k14, "07000100", RequestOk{MessageType::kRequestOk, 0, {}});
  expect_round_trip(k15, "0700020000", RequestOk{MessageType::kRequestOk, 0, {}});
  expect_round_trip(k16, "0700020000", RequestOk{MessageType::kRequestOk, 0, {}});
  // DONE: by namespace in d14/15, by request id in d16 (§9.22).
  expect_round_trip(k14, "09000c0204726f6f6d05616c696365", PublishNamespaceDone{kRoomAlice, 0});
  expect_round_trip(k15, "09000c0204726f6f6d05616c696365", PublishNamespaceDone{kRoomAlice, 0});
  expect_round_trip(k16, "09000100", PublishNamespaceDone{{}, 0});
}

TEST(IetfNamespace, PublishNamespaceErrorAndCancelDraft) {
  // d14 §9.25 PUBLISH_NAMESPACE_ERROR: id 0, code 3 (uninterested), "no".
  expect_round_trip(k14, "080005 00 03 026e6f", RequestError{MessageType::kNamespace, 0, 3, 0, "no"});
  // d14 §9.27 PUBLISH_NAMESPACE_CANCEL by namespace; d16 §9.24 by request id.
  expect_round_trip(k14, "0c0006 01 0161 04 0178", PublishNamespaceCancel{{"a"}, 0, 4, "x"});
  expect_round_trip(k16, "0c0004 06 04 0178", PublishNamespaceCancel{{}, 6, 4, "x"});
}

TEST(IetfNamespace, SubscribeNamespaceJs) {
  expect_round_trip(k14, "110008000104726f6f6d00", SubscribeNamespace{0, 0, {"room"}, 0, {}});
  expect_round_trip(k15, "110008000104726f6f6d00", SubscribeNamespace{0, 0, {"room"}, 0, {}});
  // d16 §9.25: Subscribe Options 1 (NAMESPACE only).
  expect_round_trip(k16, "110009000104726f6f6d0100", SubscribeNamespace{0, 0, {"room"}, 1, {}});
  // d14 SUBSCRIBE_NAMESPACE_OK (0x12), captured in protocol/README.md §5.7.
  expect_round_trip(k14, "12000100", RequestOk{MessageType::kSubscribeNamespaceOk, 0, {}});
  // The whole root: a prefix of zero fields.
  expect_round_trip(k15, "11000300 0000", SubscribeNamespace{0, 0, {}, 0, {}});
}

TEST(IetfNamespace, NamespaceEntriesJs) {
  for (Version v : {k15, k16}) {
    expect_round_trip(v, "0800070105616c696365", Namespace{false, {"alice"}});
    expect_round_trip(v, "0e00070105616c696365", Namespace{true, {"alice"}});
  }
  // In d14, 0x08 is PUBLISH_NAMESPACE_ERROR and 0x0E TRACK_STATUS_OK (ietf_fetch_test.cc), which
  // these bytes are not.
  auto r = decode_hex(k14, "0e00070105616c696365");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kProtocolViolation);
}

TEST(IetfControl, MaxRequestIdGoawayJs) {
  for (Version v : {k14, k15, k16}) {
    expect_round_trip(v, "1500024064", MaxRequestId{false, 100});
    expect_round_trip(v, "10001a1968747470733a2f2f72656c61792e6578616d706c652f6d6f71",
                      Goaway{"https://relay.example/moq"});
  }
  // REQUESTS_BLOCKED (d14 §9.6): Maximum Request ID 100.
  expect_round_trip(k16, "1a00024064", MaxRequestId{true, 100});
}

// --- Bad input: each closes the session with the draft's code.

TEST(IetfErrors, UnknownMessageType) {
  for (Version v : {k14, k15, k16}) {
    expect_error(v, "3f0000", ErrorCode::kUnexpectedMessage, TerminationCode::kProtocolViolation);
  }
  // 0x12 SUBSCRIBE_NAMESPACE_OK exists only in d14.
  expect_error(k16, "12000100", ErrorCode::kUnexpectedMessage, TerminationCode::kProtocolViolation);
}

TEST(IetfErrors, LengthMismatch) {
  // UNSUBSCRIBE with a length of 2 around a 1-byte id: trailing byte (§9).
  expect_error(k15, "0a00020200", ErrorCode::kDecode, TerminationCode::kProtocolViolation);
  // A length shorter than the fields.
  expect_error(k15, "0b00020240c8", ErrorCode::kDecode, TerminationCode::kProtocolViolation);
}

TEST(IetfErrors, TruncatedParameter) {
  // PUBLISH_NAMESPACE whose one parameter (odd: AUTHORIZATION_TOKEN) claims 5 bytes but has 1.
  expect_error(k15, "060008 00 01 0161 01 03 05 aa", ErrorCode::kDecode,
               TerminationCode::kProtocolViolation);
}

TEST(IetfErrors, ParameterNotAllowedInMessage) {
  // SUBSCRIBER_PRIORITY (0x20) in PUBLISH_NAMESPACE: d16 §9.2 closes the session ...
  expect_error(k16, "060007 00 01 0161 01 20 07", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // ... an unknown parameter too ...
  expect_error(k16, "060007 00 01 0161 01 3e 07", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // ... while d14/15 ignore it and keep it (d14 §9.2: receivers ignore unrecognized ones).
  expect_round_trip(k15, "060007 00 01 0161 01 3e 07", PublishNamespace{0, 0, {"a"}, {var(0x3e, 7)}});
}

TEST(IetfErrors, DuplicateKnownParameter) {
  // d15 SUBSCRIBE with FORWARD twice.
  expect_error(k15, "03000b 00 01 0161 0174 02 1001 1001", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
}

TEST(IetfErrors, ParameterValueRules) {
  // d15 §9.2.1.10, §9.2.1.6, §9.2.1.5: FORWARD 2, GROUP_ORDER 3, SUBSCRIBER_PRIORITY 256: protocol violations.
  expect_error(k15, "030009 00 01 0161 0174 01 1002", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  expect_error(k15, "030009 00 01 0161 0174 01 2203", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  expect_error(k15, "03000a 00 01 0161 0174 01 20 4100", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // A filter that does not fill SUBSCRIPTION_FILTER exactly (type 2 plus a stray byte).
  expect_error(k15, "03000b 00 01 0161 0174 01 21 02 0200", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // LARGEST_OBJECT holding one varint instead of a Location: KEY_VALUE_FORMATTING_ERROR (§1.4.2).
  expect_error(k16, "040006 01 05 01 09 01 07", ErrorCode::kWrongSize,
               TerminationCode::kKeyValueFormattingError);
}

TEST(IetfErrors, NamespaceTupleLimits) {
  // 0 fields in a track's namespace, 33 fields (§2.4.1).
  expect_error(k14, "060003 00 00 00", ErrorCode::kBoundsExceeded,
               TerminationCode::kProtocolViolation);
  std::string hex = "060045 00 21";
  for (int i = 0; i < 33; ++i) {
    hex += " 0161";
  }
  hex += " 00";
  expect_error(k14, hex, ErrorCode::kBoundsExceeded, TerminationCode::kProtocolViolation);
  // An empty field is a violation from d16 on (§2.4.1), accepted before.
  expect_error(k16, "060004 00 01 00 00", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  expect_round_trip(k14, "060004 00 01 00 00", PublishNamespace{0, 0, {""}, {}});
}

TEST(IetfErrors, FullTrackNameOver4096) {
  // One 4000-byte field plus a 100-byte track name.
  std::vector<uint8_t> out;
  Subscribe m{0, 0, {std::string(4000, 'a')}, std::string(100, 'b'), 128, 0, true, std::nullopt, {}};
  ASSERT_TRUE(encode(k15, m, out));
  auto r = decode_control(k15, std::span<const uint8_t>(out), Limits{});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kBoundsExceeded);
  // 3996 + 100 fits.
  m.ns = {std::string(3996, 'a')};
  out.clear();
  ASSERT_TRUE(encode(k15, m, out));
  auto ok = decode_control(k15, std::span<const uint8_t>(out), Limits{});
  ASSERT_TRUE(ok.has_value()) << ok.error().detail;
}

TEST(IetfErrors, ReasonPhraseOver1024) {
  std::vector<uint8_t> out;
  ASSERT_TRUE(encode(k14, PublishDone{1, 500, 0, std::string(1025, 'x')}, out));
  auto r = decode_control(k14, std::span<const uint8_t>(out), Limits{});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(termination_code(r.error().code), TerminationCode::kProtocolViolation);
}

TEST(IetfErrors, MessagesADraftLacksAreNotEncoded) {
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(k14, Namespace{false, {"a"}}, out));
  EXPECT_FALSE(encode(k15, RequestOk{MessageType::kSubscribeNamespaceOk, 0, {}}, out));
  EXPECT_FALSE(encode(Version::kLite02, Unsubscribe{1}, out));
  EXPECT_TRUE(out.empty());
}

// --- SUBGROUP streams (d14 §10.4.2).

TEST(IetfSubgroup, JsStream) {
  // protocol/README.md §5.7 capture: type 0x18, alias 2, group 0, priority 0, objects "hi" and
  // "there" (delta 0 each: ids 0 and 1).
  auto bytes = from_hex("18020000 000268 69 0005 7468657265");
  auto h = decode_subgroup_header(k14, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(h.has_value() && h->has_value());
  const SubgroupHeader& hdr = (*h)->value;
  EXPECT_EQ(hdr, (SubgroupHeader{0x18, 2, 0, 0, uint8_t{0}}));
  EXPECT_TRUE(hdr.contains_end_of_group());
  EXPECT_FALSE(hdr.has_extensions());
  size_t pos = (*h)->consumed;
  EXPECT_EQ(pos, 4u);
  auto o1 = decode_object(k14, hdr, std::span<const uint8_t>(bytes).subspan(pos), Limits{});
  ASSERT_TRUE(o1.has_value() && o1->has_value());
  EXPECT_EQ((*o1)->value, (ObjectHeader{0, {}, 2, 0}));
  pos += (*o1)->consumed + 2;
  auto o2 = decode_object(k14, hdr, std::span<const uint8_t>(bytes).subspan(pos), Limits{});
  ASSERT_TRUE(o2.has_value() && o2->has_value());
  EXPECT_EQ((*o2)->value, (ObjectHeader{0, {}, 5, 0}));
  EXPECT_EQ(object_id(std::nullopt, 0), 0u);
  EXPECT_EQ(object_id(0, 0), 1u);
  std::vector<uint8_t> out;
  encode(k14, hdr, out);
  encode_object(k14, hdr, (*o1)->value, out);
  EXPECT_EQ(to_hex(out), canonical("18020000 0002"));
}

TEST(IetfSubgroup, ExtensionsAndSubgroupDraft) {
  // d15 §10.4.2 example: type 0x35 (explicit subgroup, extensions, no priority), alias 2, group
  // 0, subgroup 0; object delta 0 with a 3-byte extension block (type 4 = 0x40 0x40) and
  // payload "abcd"; then the end of group status (payload length 0, status 3).
  auto bytes = from_hex("35020000 00 03 044040 04 61626364 00 00 00 03");
  auto h = decode_subgroup_header(k15, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(h.has_value() && h->has_value());
  const SubgroupHeader& hdr = (*h)->value;
  EXPECT_EQ(hdr, (SubgroupHeader{0x35, 2, 0, 0, std::nullopt}));
  EXPECT_TRUE(hdr.has_extensions());
  auto rest = std::span<const uint8_t>(bytes).subspan((*h)->consumed);
  auto o1 = decode_object(k15, hdr, rest, Limits{});
  ASSERT_TRUE(o1.has_value() && o1->has_value());
  EXPECT_EQ((*o1)->value, (ObjectHeader{0, std::string("\x04\x40\x40", 3), 4, 0}));
  rest = rest.subspan((*o1)->consumed + 4);
  auto o2 = decode_object(k15, hdr, rest, Limits{});
  ASSERT_TRUE(o2.has_value() && o2->has_value());
  EXPECT_EQ((*o2)->value, (ObjectHeader{0, {}, 0, 3}));
  // Encoded back: the same bytes, extensions carried through unchanged.
  std::vector<uint8_t> out;
  encode(k15, hdr, out);
  encode_object(k15, hdr, (*o1)->value, out);
  out.insert(out.end(), {'a', 'b', 'c', 'd'});
  encode_object(k15, hdr, (*o2)->value, out);
  EXPECT_EQ(to_hex(out), to_hex(bytes));
  // Every strict prefix of the header asks for more.
  for (size_t n = 0; n < (*h)->consumed; ++n) {
    auto part = decode_subgroup_header(k15, std::span<const uint8_t>(bytes.data(), n), Limits{});
    ASSERT_TRUE(part.has_value());
    EXPECT_FALSE(part->has_value()) << n;
  }
}

TEST(IetfSubgroup, BadInput) {
  auto header = [](std::string_view hex) {
    auto b = from_hex(hex);
    return decode_subgroup_header(k16, std::span<const uint8_t>(b), Limits{});
  };
  // Types 0x16 (subgroup bits 0b11) and 0x20 are not SUBGROUP_HEADERs.
  EXPECT_FALSE(header("16 02 00 00").has_value());
  EXPECT_FALSE(header("20 02 00 00").has_value());
  EXPECT_TRUE(header("1d 02 00 05 80").has_value());
  // Object status 2 is not defined (d14 §10.2.1.1).
  SubgroupHeader h{0x10, 1, 1, 0, uint8_t{0}};
  auto b = from_hex("00 00 02");
  auto o = decode_object(k16, h, std::span<const uint8_t>(b), Limits{});
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(termination_code(o.error().code), TerminationCode::kProtocolViolation);
  // Object ids past 2^62-1.
  EXPECT_EQ(object_id(kMaxVarint, 0), std::nullopt);
  EXPECT_EQ(object_id(kMaxVarint - 2, 1), kMaxVarint);
}

TEST(IetfSubgroup, TypeBuilder) {
  EXPECT_EQ(subgroup_type(false, false, true, true), 0x18u);
  EXPECT_EQ(subgroup_type(true, true, true, false), 0x3du);
  EXPECT_EQ(subgroup_type(false, false, false, true), 0x10u);
}

// --- Draft 17: leading-ones varints, SETUP on a uni stream, a stream per request.

TEST(IetfDraft17, SetupJs) {
  // NET-0.3.md §4.1 [verified], also what ietf_fixtures.mjs prints: Implementation, RELAY_HOPS
  // (0x40b55 as the leading-ones delta c4 0b 4e), SOLICIT (+5); no count.
  ietf::Setup m{{bin(kSetupImplementation, "moq-lite-js"),
           bin(kSetupRelayHops, std::string("\xfe\x0a\x5a\x2a\xdb\x5a\x87\xd4", 8)),
           var(kSetupSolicit, 1)}};
  expect_round_trip(k17, "af00001b070b6d6f712d6c6974652d6a73c40b4e08fe0a5a2adb5a87d40501", m);
  expect_round_trip(k17, "af000000", ietf::Setup{});
  // CLIENT_SETUP is not a draft-17 message, SETUP not a draft-16 one.
  expect_error(k17, "21000100", ErrorCode::kUnexpectedMessage, TerminationCode::kProtocolViolation);
  expect_error(k16, "6f000000", ErrorCode::kUnexpectedMessage, TerminationCode::kProtocolViolation);
}

TEST(IetfDraft17, RequestsJs) {
  // Request id 2, Required Request ID Delta 0; typed parameters: FORWARD, SUBSCRIBER_PRIORITY
  // and GROUP_ORDER one byte each, the filter length-prefixed.
  Subscribe sub{2, 0, kRoomAlice, "video", 7, 2, true, Filter{FilterType::kLargestObject, {}, 0}, {}};
  expect_round_trip(k17, "03001e02000204726f6f6d05616c69636505766964656f04100110070101020102", sub);
  expect_round_trip(k17, "06000f00000204726f6f6d05616c69636500", PublishNamespace{0, 0, kRoomAlice, {}});
  expect_round_trip(k17, "11000a00000104726f6f6d0100", SubscribeNamespace{0, 0, {"room"}, 1, {}});
}

TEST(IetfDraft17, ResponsesCarryNoRequestIdJs) {
  expect_round_trip(k17, "0400020200", SubscribeOk{0, 2, 0, 2, std::nullopt, {}, {}});
  // REQUEST_ERROR: code 404 as the leading-ones 81 94, Retry Interval 0.
  expect_round_trip(k17, "0500178194001342726f616463617374206e6f7420666f756e64",
                    RequestError{MessageType::kRequestError, 0, 404, 0, "Broadcast not found"});
  expect_round_trip(k17, "07000100", RequestOk{MessageType::kRequestOk, 0, {}});
  expect_round_trip(k17, "0b000680c800024f4b", PublishDone{0, 200, 0, "OK"});
  // GOAWAY gains Timeout (d17 §9.5).
  expect_round_trip(k17, "10001b1968747470733a2f2f72656c61792e6578616d706c652f6d6f7100",
                    Goaway{"https://relay.example/moq", 0});
  expect_round_trip(k17, "0800070105616c696365", Namespace{false, {"alice"}});
  expect_round_trip(k17, "0e00070105616c696365", Namespace{true, {"alice"}});
}

TEST(IetfDraft17, ControlStreamMessagesAreGone) {
  for (std::string_view hex : {"0a000102", "09000100", "1500024064", "1a00024064", "200000",
                               "0c00030001 00"}) {
    expect_error(k17, hex, ErrorCode::kUnexpectedMessage, TerminationCode::kProtocolViolation);
  }
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(k17, Unsubscribe{1}, out));
  EXPECT_FALSE(encode(k17, MaxRequestId{false, 10}, out));
  EXPECT_FALSE(encode(k17, ClientSetup{}, out));
  EXPECT_TRUE(out.empty());
}

TEST(IetfDraft17, TypedParametersDraft) {
  // d17 §9.3.9: LARGEST_OBJECT is a Location, two varints with no length: {7, 3}.
  expect_round_trip(k17, "040005 02 01 09 07 03",
                    SubscribeOk{0, 2, 0, 2, std::nullopt, {bin(kParamLargestObject, "\x07\x03")}, {}});
  // A uint8 SUBSCRIBER_PRIORITY of 255 (one byte, not a varint).
  auto r = decode_hex(k17, "03000a 00 00 01 0161 0174 01 20 ff");
  ASSERT_TRUE(r.has_value() && r->has_value()) << (r ? "" : r.error().detail);
  EXPECT_EQ(std::get<Subscribe>((*r)->value).subscriber_priority, 255);
  // An unknown message parameter cannot be skipped: the session closes (d17 §9.3).
  expect_error(k17, "030009 00 00 01 0161 0174 01 3e", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // AUTHORIZATION_TOKEN may be repeated (d17 §9.3.2, also d14..16); FORWARD may not.
  expect_round_trip(k17, "06000c 00 00 01 0161 02 03 01 aa 00 01 bb",
                    PublishNamespace{0, 0, {"a"}, {bin(3, "\xaa"), bin(3, "\xbb")}});
  expect_round_trip(k15, "06000b 00 01 0161 02 03 01 aa 03 01 bb",
                    PublishNamespace{0, 0, {"a"}, {bin(3, "\xaa"), bin(3, "\xbb")}});
  expect_error(k17, "03000c 00 00 01 0161 0174 02 10 01 00 01", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
}

TEST(IetfDraft17, SubgroupWithLeadingOnesVarints) {
  // Type 0x10, alias 2, group 200 (leading-ones 80 c8), priority 0; one object "hi".
  auto bytes = from_hex("10 02 80c8 00 00 02 6869");
  auto h = decode_subgroup_header(k17, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(h.has_value() && h->has_value());
  EXPECT_EQ((*h)->value, (SubgroupHeader{0x10, 2, 200, 0, uint8_t{0}}));
  EXPECT_EQ((*h)->consumed, 5u);
  std::vector<uint8_t> out;
  encode(k17, (*h)->value, out);
  EXPECT_EQ(to_hex(out), canonical("10 02 80c8 00"));
  // The same group in QUIC form is 40 c8.
  out.clear();
  encode(k16, (*h)->value, out);
  EXPECT_EQ(to_hex(out), canonical("10 02 40c8 00"));
}

// --- Varint forms (protocol/README.md §1.1, §1.2; the leading-ones examples are the Rust
// implementation's test values).

uint64_t read_whole(VarintForm f, std::string_view hex) {
  auto b = from_hex(hex);
  auto r = read_varint(f, std::span<const uint8_t>(b));
  EXPECT_TRUE(r.has_value() && r->has_value()) << hex;
  if (!r.has_value() || !r->has_value()) {
    return 0;
  }
  EXPECT_EQ((*r)->consumed, b.size()) << hex;
  for (size_t n = 0; n < b.size(); ++n) {
    auto part = read_varint(f, std::span<const uint8_t>(b.data(), n));
    EXPECT_TRUE(part.has_value() && !part->has_value()) << hex << " prefix " << n;
  }
  return (*r)->value;
}

std::string written(VarintForm f, uint64_t v) {
  std::vector<uint8_t> out;
  write_varint(f, v, out);
  return to_hex(out);
}

TEST(IetfVarint, LeadingOnes) {
  const VarintForm lo = VarintForm::kLeadingOnes;
  EXPECT_EQ(read_whole(lo, "25"), 37u);
  EXPECT_EQ(read_whole(lo, "8025"), 37u);  // non-minimal, accepted
  EXPECT_EQ(read_whole(lo, "bbbd"), 15293u);
  EXPECT_EQ(read_whole(lo, "faa1a0e403d8"), 2893212287960u);
  EXPECT_EQ(written(lo, 37), canonical("25"));
  EXPECT_EQ(written(lo, 15293), canonical("bbbd"));
  EXPECT_EQ(written(lo, 2893212287960u), canonical("faa1a0e403d8"));
  EXPECT_EQ(written(lo, 0x2f00), canonical("af00"));  // draft-17 SETUP type
  // Past 42 bits: no 7-byte form, 8 bytes up to 2^56, then 9.
  EXPECT_EQ(written(lo, uint64_t{1} << 42), canonical("fe 00 04 00 00 00 00 00"));
  EXPECT_EQ(written(lo, kMaxVarint), canonical("ff 3f ff ff ff ff ff ff ff"));
  EXPECT_EQ(read_whole(lo, "fe00040000000000"), uint64_t{1} << 42);
  EXPECT_EQ(read_whole(lo, "ff3fffffffffffffff"), kMaxVarint);
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{16383}, uint64_t{16384},
                     (uint64_t{1} << 35) - 1, uint64_t{1} << 35, (uint64_t{1} << 56) - 1,
                     uint64_t{1} << 56}) {
    EXPECT_EQ(read_whole(lo, written(lo, v)), v) << v;
  }
  // 1111110x is invalid; so is a value past 2^62-1.
  for (std::string_view bad : {"fc 00 00 00 00 00 00", "fd 01", "ff 40 00 00 00 00 00 00 00"}) {
    auto b = from_hex(bad);
    auto r = read_varint(lo, std::span<const uint8_t>(b));
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kDecode);
  }
}

TEST(IetfVarint, QuicForm) {
  EXPECT_EQ(read_whole(VarintForm::kQuic, "c0000000ff0dad02"), 0xff0dad02u);
  EXPECT_EQ(read_whole(VarintForm::kQuic, "8000a455"), 42069u);
  EXPECT_EQ(written(VarintForm::kQuic, 100), canonical("4064"));
  // Drafts 14..16 speak QUIC varints.
  for (Version v : {k14, k15, k16}) {
    EXPECT_EQ(draft(v)->varint_form, VarintForm::kQuic);
  }
}

// --- Drafts 18, 19, 20. "d18"/"d19" are the tagged texts of moq-wg/moq-transport; "d20" its
// editor's copy after draft-19 (commit e1ae858d), nearest to what @moq/net 0.3.4 calls draft 20.

TEST(IetfDraft18, LeadingOnesSevenByteForm) {
  // d18 §1.4.1 (#1595): 1111110x is a 7-byte form with 49 value bits.
  const VarintForm lo7 = VarintForm::kLeadingOnes7;
  EXPECT_EQ(read_whole(lo7, "fc 04 00 00 00 00 00"), uint64_t{1} << 42);
  EXPECT_EQ(read_whole(lo7, "fd ff ff ff ff ff ff"), (uint64_t{1} << 49) - 1);
  EXPECT_EQ(written(lo7, uint64_t{1} << 42), canonical("fc 04 00 00 00 00 00"));
  EXPECT_EQ(written(lo7, (uint64_t{1} << 49) - 1), canonical("fd ff ff ff ff ff ff"));
  EXPECT_EQ(written(lo7, uint64_t{1} << 49), canonical("fe 02 00 00 00 00 00 00"));
  // The 8-byte form @moq/net writes for the same value is still read (non-minimal is allowed).
  EXPECT_EQ(read_whole(lo7, "fe 00 04 00 00 00 00 00"), uint64_t{1} << 42);
  for (Version v : {k18, k19, k20}) {
    EXPECT_EQ(draft(v)->varint_form, lo7);
  }
  EXPECT_EQ(draft(k17)->varint_form, VarintForm::kLeadingOnes);
}

// What @moq/net 0.3.4 writes on drafts 18 to 20 (ietf_fixtures.mjs prints them): the d17 layouts
// without the Required Request ID Delta, SUBSCRIBE_NAMESPACE as 0x50.
TEST(IetfDraft18, MessagesJs) {
  for (Version v : {k18, k19, k20}) {
    expect_round_trip(v, "af00001b070b6d6f712d6c6974652d6a73c40b4e08fe0a5a2adb5a87d40501",
                      ietf::Setup{{bin(kSetupImplementation, "moq-lite-js"),
                                   bin(kSetupRelayHops, std::string("\xfe\x0a\x5a\x2a\xdb\x5a\x87\xd4", 8)),
                                   var(kSetupSolicit, 1)}});
    expect_round_trip(v, "af000000", ietf::Setup{});
    expect_round_trip(v, "0200020400", SubscribeUpdate{4, 0, 0, {}, 0, 128, true, {}});
    expect_round_trip(v, "06000e000204726f6f6d05616c69636500", PublishNamespace{0, 0, kRoomAlice, {}});
    expect_round_trip(v, "500008000104726f6f6d00", SubscribeNamespace{0, 0, {"room"}, 0, {}});
    expect_round_trip(v, "0400020200", SubscribeOk{0, 2, 0, 2, std::nullopt, {}, {}});
    expect_round_trip(v, "0500178194001342726f616463617374206e6f7420666f756e64",
                      RequestError{MessageType::kRequestError, 0, 404, 0, "Broadcast not found"});
    expect_round_trip(v, "07000100", RequestOk{MessageType::kRequestOk, 0, {}});
    expect_round_trip(v, "0b000680c800024f4b", PublishDone{0, 200, 0, "OK"});
    expect_round_trip(v, "10001b1968747470733a2f2f72656c61792e6578616d706c652f6d6f7100",
                      Goaway{"https://relay.example/moq", 0});
    expect_round_trip(v, "0800070105616c696365", Namespace{false, {"alice"}});
    expect_round_trip(v, "0e00070105616c696365", Namespace{true, {"alice"}});
  }
}

TEST(IetfDraft18, SubscribeJs) {
  // d18, d19: the tag filter 2 (Largest Object); d20: the field form, one field 1 (relative: the
  // current group).
  Subscribe sub{2, 0, kRoomAlice, "video", 7, 2, true, Filter{FilterType::kLargestObject, {}, 0}, {}};
  expect_round_trip(k18, "03001d020204726f6f6d05616c69636505766964656f04100110070101020102", sub);
  expect_round_trip(k19, "03001d020204726f6f6d05616c69636505766964656f04100110070101020102", sub);
  sub.filter = Filter{FilterType::kRelative, {}, 0, 1, std::nullopt};
  expect_round_trip(k20, "03001d020204726f6f6d05616c69636505766964656f04100110070101010102", sub);
  // A relative filter past the next group has no d18/d19 tag: nothing is written.
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(k19, sub, out));
}

TEST(IetfDraft18, SubscribeOkTrackPropertiesJs) {
  // Track Properties (d18 §10.8 SUBSCRIBE_OK, last field): TIMESCALE 0x08 = 1000 (83 e8), then
  // +0x12 = 0x22 DEFAULT_PUBLISHER_GROUP_ORDER 2.
  SubscribeOk ok{0, 2, 0, 2, std::nullopt, {}, "\x08\x83\xe8\x1a\x02"};
  expect_round_trip(k18, "04000702000883e81a02", ok);
  expect_round_trip(k19, "04000702000883e81a02", ok);
  // d20: JS adds LARGEST_OBJECT {5, 3} with a Length (02) in front; the text writes the Location
  // bare. Both decode to the same value, whichever peer is assumed.
  ok.params = {bin(kParamLargestObject, "\x05\x03")};
  expect_round_trip(k20, "04000b0201090205030883e81a02", ok, Peer::kMoqNetJs);
  expect_round_trip(k20, "04000a02010905030883e81a02", ok);
  auto js = decode_hex(k20, "04000b0201090205030883e81a02");
  ASSERT_TRUE(js.has_value() && js->has_value());
  EXPECT_EQ(std::get<SubscribeOk>((*js)->value), ok);
}

TEST(IetfDraft20, SubscribeFillAndIncludePropertiesJs) {
  // JS: an absolute range {5, 1} to group 5 + 4, object 4 (four fields), FILL_PARAMETERS 0x23
  // (JS only: a nested scope with LOCATION_FILTER relative 3), INCLUDE_PROPERTIES 0 written as
  // Length 1 + byte.
  Subscribe sub{2, 0, kRoomAlice, "video", 7, 2, true,
                Filter{FilterType::kAbsoluteRange, {5, 1}, 4, 0, 4},
                {bin(kParamFillParameters, "\x01\x21\x01\x03"), var(kParamIncludeProperties, 0)}};
  expect_round_trip(
      k20,
      "030029020204726f6f6d05616c69636505766964656f06100110070104050104040102010401210103120100",
      sub, Peer::kMoqNetJs);
  // The text's form: INCLUDE_PROPERTIES a bare uint8 (editor's copy §10.2.20).
  expect_round_trip(
      k20, "030028020204726f6f6d05616c69636505766964656f061001100701040501040401020104012101031200",
      sub);
  // A draft-text decoder reading the JS form falls back to it.
  auto js = decode_hex(
      k20, "030029020204726f6f6d05616c69636505766964656f06100110070104050104040102010401210103120100");
  ASSERT_TRUE(js.has_value() && js->has_value()) << (js ? "" : js.error().detail);
  EXPECT_EQ(std::get<Subscribe>((*js)->value), sub);
}

// "03 len 00 01 0161 0174 03 10 01 10 80 01 <filter>": a d20 SUBSCRIBE with FORWARD 1,
// SUBSCRIBER_PRIORITY 128 and LOCATION_FILTER `fields`.
std::string d20_subscribe(std::string_view fields) {
  const std::vector<uint8_t> f = from_hex(fields);
  std::vector<uint8_t> body = from_hex("00 01 0161 0174 03 10 01 10 80 01");
  body.push_back(static_cast<uint8_t>(f.size()));
  body.insert(body.end(), f.begin(), f.end());
  std::vector<uint8_t> msg = {0x03, 0x00, static_cast<uint8_t>(body.size())};
  msg.insert(msg.end(), body.begin(), body.end());
  return to_hex(msg);
}

TEST(IetfDraft20, LocationFilterFieldsDraft) {
  // Editor's copy §5.1.2 "Location Filters": the number of fields says the kind.
  struct Case {
    std::string_view fields;
    Filter want;
  };
  const Case cases[] = {
      {"", Filter{FilterType::kUnfiltered, {}, 0, 0, std::nullopt}},
      {"00", Filter{FilterType::kNextGroupStart, {}, 0, 0, std::nullopt}},
      {"03", Filter{FilterType::kRelative, {}, 0, 3, std::nullopt}},
      {"00 00", Filter{FilterType::kLargestObject, {}, 0, 0, std::nullopt}},
      {"05 01", Filter{FilterType::kAbsoluteStart, {5, 1}, 0, 0, std::nullopt}},
      {"05 01 04", Filter{FilterType::kAbsoluteRange, {5, 1}, 4, 0, std::nullopt}},
      {"05 01 04 02", Filter{FilterType::kAbsoluteRange, {5, 1}, 4, 0, 2}},
  };
  for (const auto& c : cases) {
    Subscribe sub{0, 0, {"a"}, "t", 128, 0, true, c.want, {}};
    expect_round_trip(k20, d20_subscribe(c.fields), sub);
  }
  // Five fields, or one past the end of the value.
  expect_error(k20, d20_subscribe("05 01 04 02 01"), ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // The same bytes on d19 are tags: "05 01" is an unknown Filter Type.
  expect_error(k19, d20_subscribe("05 01"), ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // An open AbsoluteStart {0, 0} is unfiltered: written empty, not as Next Object "0 0".
  std::vector<uint8_t> out;
  Subscribe zero{0, 0, {"a"}, "t", 128, 0, true, Filter{FilterType::kAbsoluteStart, {}, 0}, {}};
  ASSERT_TRUE(encode(k20, zero, out));
  EXPECT_EQ(to_hex(out), canonical(d20_subscribe("")));
}

TEST(IetfDraft20, IncludePropertiesDraft) {
  // INCLUDE_PROPERTIES (0x35, +0x15 from 0x20) is a uint8, 0 or 1, d20 only.
  const std::string_view hex = "03000d 00 01 0161 0174 03 10 01 10 80 15 00";
  expect_round_trip(k20, hex,
                    Subscribe{0, 0, {"a"}, "t", 128, 0, true, std::nullopt,
                              {var(kParamIncludeProperties, 0)}});
  expect_error(k20, "03000d 00 01 0161 0174 03 10 01 10 80 15 02", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  expect_error(k19, hex, ErrorCode::kProtocolViolation, TerminationCode::kProtocolViolation);
}

TEST(IetfDraft18, SubscribeNamespaceAndTracksDraft) {
  // d18 §10.19 (#1542): SUBSCRIBE_TRACKS 0x51 has SUBSCRIBE_NAMESPACE's layout; FORWARD is one of
  // its parameters but no longer one of SUBSCRIBE_NAMESPACE's.
  SubscribeNamespace tracks{0, 0, {"room"}, 0, {var(kParamForward, 0)}, true};
  expect_round_trip(k18, "51000a 00 01 04726f6f6d 01 10 00", tracks);
  expect_error(k18, "50000a 00 01 04726f6f6d 01 10 00", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // 0x11 is gone from d18, 0x50 / 0x51 are unknown before it.
  expect_error(k18, "11000a00000104726f6f6d0100", ErrorCode::kUnexpectedMessage,
               TerminationCode::kProtocolViolation);
  expect_error(k17, "500008000104726f6f6d00", ErrorCode::kUnexpectedMessage,
               TerminationCode::kProtocolViolation);
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(k17, tracks, out));
}

TEST(IetfDraft18, GoawayRequestIdDraft) {
  // d18 §10.4 GOAWAY: an optional trailing Request ID (control stream only); d19 drops it.
  expect_round_trip(k18, "100003 00 00 04", Goaway{"", 0, 4});
  expect_error(k19, "100003 00 00 04", ErrorCode::kDecode, TerminationCode::kProtocolViolation);
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(k19, Goaway{"", 0, 4}, out));
}

TEST(IetfDraft18, RequestErrorRedirectAndRequestOkPropertiesDraft) {
  // d18 §10.6.1, §10.6.2 REQUEST_ERROR: code REDIRECT (0x34), Retry Interval 0, empty reason, then Redirect
  // {Connect URI "", namespace (a), track t}.
  RequestError e{MessageType::kRequestError, 0, kErrorRedirect, 0, "", Redirect{"", {"a"}, "t"}};
  expect_round_trip(k18, "050009 34 00 00 00 01 0161 0174", e);
  // The same bytes on d17 leave the Redirect unread.
  expect_error(k17, "050009 34 00 00 00 01 0161 0174", ErrorCode::kDecode,
               TerminationCode::kProtocolViolation);
  // d18 REQUEST_OK ends with Track Properties: TIMESCALE 1000.
  RequestOk ok{MessageType::kRequestOk, 0, {}, "\x08\x83\xe8"};
  expect_round_trip(k18, "070004 00 0883e8", ok);
  // Track Properties must be well-formed Key-Value-Pairs: an odd type 9 whose 5 bytes are missing.
  expect_error(k18, "070003 00 09 05", ErrorCode::kDecode, TerminationCode::kProtocolViolation);
}

TEST(IetfDraft18, ParameterTableDraft) {
  // d18 §10.2.14 TRACK_NAMESPACE_PREFIX (0x34) in REQUEST_UPDATE: a namespace tuple with no length.
  expect_round_trip(k18, "020008 04 01 34 02 0161 0162",
                    SubscribeUpdate{4, 0, 0, {}, 0, 128, true, {bin(0x34, "\x02\x01" "a\x01" "b")}});
  // SUBGROUP_DELIVERY_TIMEOUT (0x06) in SUBSCRIBE, a varint: 100 ms (leading-ones 40 64).
  expect_round_trip(k18, "03000d 00 01 0161 0174 03 06 64 0a 01 10 80",
                    Subscribe{0, 0, {"a"}, "t", 128, 0, true, std::nullopt,
                              {var(kParamSubgroupDeliveryTimeout, 100)}});
  // GROUP_ORDER left SUBSCRIBE_OK in d18 (it was there in d17).
  expect_error(k18, "040004 02 01 22 02", ErrorCode::kProtocolViolation,
               TerminationCode::kProtocolViolation);
  // d19 §5.1.3 Range Filters: SUBGROUP_FILTER (0x25) may repeat; d18 does not know it.
  const std::string_view ranges = "030011 00 01 0161 0174 04 10 01 10 80 05 01 00 00 01 01";
  expect_round_trip(k19, ranges,
                    Subscribe{0, 0, {"a"}, "t", 128, 0, true, std::nullopt,
                              {bin(0x25, std::string(1, '\0')), bin(0x25, "\x01")}});
  expect_error(k18, ranges, ErrorCode::kProtocolViolation, TerminationCode::kProtocolViolation);
}

TEST(IetfDraft18, ClusterExtension) {
  // NET-0.3.md §4.7: RELAY_HOPS carries the sender's origin as one varint in the draft's form.
  ietf::Setup m{{bin(kSetupRelayHops, std::string("\xfe\x0a\x5a\x2a\xdb\x5a\x87\xd4", 8))}};
  EXPECT_EQ(relay_hops_origin(k18, m.options), uint64_t{0x0a5a2adb5a87d4});
  m.options[0].bytes += '\0';  // a trailing byte: malformed, treated as absent
  EXPECT_EQ(relay_hops_origin(k18, m.options), std::nullopt);
  EXPECT_EQ(relay_hops_origin(k18, {}), std::nullopt);
  // RELAY_COST (0x40b56, even: a varint) right after RELAY_HOPS: type delta 1. Absent: 0.
  ietf::Setup cost{{bin(kSetupRelayHops, "\x07"), var(kSetupRelayCost, 300)}};
  expect_round_trip(k18, "af00 0008 c40b55 01 07 01 812c", cost);
  EXPECT_EQ(relay_cost(cost.options), 300u);
  EXPECT_EQ(relay_cost({}), 0u);
  // HOP_PATH (0x40b57, bytes) and ROUTE_COST (+1, varint) in PUBLISH_NAMESPACE.
  expect_round_trip(k18, "06000c 00 01 0161 02 c40b57 01 07 01 05",
                    PublishNamespace{0, 0, {"a"}, {bin(kParamHopPath, "\x07"), var(kParamRouteCost, 5)}});
}

TEST(IetfDraft18, SubgroupFirstObjectBitDraft) {
  // d18 §11.4.2 (#1618): FIRST_OBJECT 0x40 on top of 0x10..0x3D; 0x56 stays invalid.
  auto bytes = from_hex("50 02 05 80");
  auto h = decode_subgroup_header(k18, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(h.has_value() && h->has_value());
  EXPECT_EQ((*h)->value, (SubgroupHeader{0x50, 2, 5, 0, uint8_t{0x80}}));
  EXPECT_TRUE((*h)->value.first_object());
  EXPECT_EQ(subgroup_type(false, false, false, true, true), 0x50u);
  EXPECT_EQ(subgroup_type(true, true, true, false, true), 0x7du);
  EXPECT_TRUE(is_subgroup_type(k20, 0x7d));
  EXPECT_FALSE(is_subgroup_type(k18, 0x56));
  EXPECT_FALSE(is_subgroup_type(k17, 0x50));
  EXPECT_FALSE(decode_subgroup_header(k17, std::span<const uint8_t>(bytes), Limits{}).has_value());
}

}  // namespace
}  // namespace moqd::wire::ietf
