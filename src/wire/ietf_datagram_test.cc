// Byte-exact fixtures for OBJECT_DATAGRAM, drafts 14..20, transcribed from the draft text (d14
// §10.3.1 type table; d15 §10.3.1 table with Priority Present; d16/d17 §10.3.1 type bits; d18,
// d19 §11.3.1; d20, the editor's copy, §11.3.1 "Type Flags"). Each
// fixture decodes to the expected header and payload offset and encodes back to the same bytes.
#include "wire/ietf_datagram.h"

#include <gtest/gtest.h>

// A named namespace: wire_tests may be a unity build.
namespace moqd::wire::ietf::datagram_test {

constexpr Version k14 = Version::kTransport14;
constexpr Version k15 = Version::kTransport15;
constexpr Version k16 = Version::kTransport16;
constexpr Version k17 = Version::kTransport17;
constexpr Version k18 = Version::kTransport18;
constexpr Version k19 = Version::kTransport19;
constexpr Version k20 = Version::kTransport20;

// Decodes `hex`, expects `want` and `payload` after the header, and encodes both back to `hex`.
void round_trip(Version v, std::string_view hex, const ObjectDatagram& want, std::string payload) {
  auto bytes = from_hex(hex);
  auto r = decode_datagram(v, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->value, want);
  EXPECT_EQ(std::string(bytes.begin() + static_cast<ptrdiff_t>((*r)->consumed), bytes.end()),
            payload);
  std::vector<uint8_t> out;
  std::vector<uint8_t> p(payload.begin(), payload.end());
  EXPECT_TRUE(encode_datagram(v, want, std::span<const uint8_t>(p), out));
  EXPECT_EQ(to_hex(out), to_hex(bytes));
}

void decode_fails(Version v, std::string_view hex, ErrorCode code) {
  auto bytes = from_hex(hex);
  auto r = decode_datagram(v, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(r.has_value()) << "decoded " << hex;
  EXPECT_EQ(r.error().code, code) << r.error().detail;
}

ObjectDatagram dg(uint64_t type, uint64_t object, std::optional<uint8_t> priority,
                  std::string ext = {}, std::optional<uint64_t> status = std::nullopt) {
  ObjectDatagram o;
  o.type = type;
  o.track_alias = 5;
  o.group = 4;
  o.object = object;
  o.publisher_priority = priority;
  o.extensions = std::move(ext);
  o.status = status;
  return o;
}

TEST(IetfDatagram, Draft14Types) {
  for (Version v : {k14, k15, k16}) {
    // 0x00: Object ID, Priority, payload to the end of the datagram.
    round_trip(v, "00 05 04 01 80 616263", dg(0x00, 1, 0x80), "abc");
    // 0x06: End of Group, Object ID 0 (no field).
    round_trip(v, "06 05 04 80 7a", dg(0x06, 0, 0x80), "z");
    // 0x03: End of Group with Extensions (length 2, kept raw).
    round_trip(v, "03 05 04 02 07 02 0a01 6869", dg(0x03, 2, 0x07, std::string("\x0a\x01", 2)),
               "hi");
    // 0x21: Status with Extensions: Object Status 3 (End of Group), nothing after it.
    round_trip(v, "21 05 04 09 80 01 00 03", dg(0x21, 9, 0x80, std::string("\x00", 1), 3), "");
  }
  // An empty payload is an empty object.
  round_trip(k14, "04 05 04 80", dg(0x04, 0, 0x80), "");
}

TEST(IetfDatagram, Draft15And16TypeBits) {
  for (Version v : {k15, k16}) {
    // 0x0C: Object ID 0 and the subscription's priority (DEFAULT_PRIORITY), payload.
    round_trip(v, "0c 05 04 6869", dg(0x0c, 0, std::nullopt), "hi");
    // 0x0B: End of Group, Extensions, default priority.
    round_trip(v, "0b 05 04 03 01 ff 71", dg(0x0b, 3, std::nullopt, "\xff"), "q");
    // 0x2C: Status, Object ID 0, default priority: End of Track (4).
    round_trip(v, "2c 05 04 04", dg(0x2c, 0, std::nullopt, {}, 4), "");
  }
  EXPECT_EQ(datagram_type(false, true, true, true, false), 0x0eu);
  EXPECT_EQ(datagram_type(true, false, false, false, true), 0x21u);
}

TEST(IetfDatagram, BadDatagrams) {
  // Types the draft lacks: 0x08 in d14 (no DEFAULT_PRIORITY yet); STATUS with END_OF_GROUP
  // (0x22) and anything outside 0b00X0XXXX (0x10, 0x40) in d16 §10.3.1.
  decode_fails(k14, "08 05 04 01 61", ErrorCode::kProtocolViolation);
  decode_fails(k14, "24 05 04 80 00", ErrorCode::kProtocolViolation);
  decode_fails(k16, "22 05 04 01 80 03", ErrorCode::kProtocolViolation);
  decode_fails(k16, "10 05 04 01 80 61", ErrorCode::kProtocolViolation);
  decode_fails(k16, "40 40 05 04 01 80 61", ErrorCode::kProtocolViolation);
  // EXTENSIONS with a zero length (§10.3.1 MUST close with PROTOCOL_VIOLATION).
  decode_fails(k16, "01 05 04 01 80 00 61", ErrorCode::kProtocolViolation);
  // Extensions longer than the datagram; a datagram cut inside its header.
  decode_fails(k16, "01 05 04 01 80 05 61", ErrorCode::kDecode);
  decode_fails(k14, "00 05", ErrorCode::kDecode);
  decode_fails(k14, "00 05 04 01", ErrorCode::kDecode);
  // A status datagram with bytes after the status; an unknown status (2).
  decode_fails(k14, "20 05 04 01 80 00 ff", ErrorCode::kDecode);
  decode_fails(k14, "20 05 04 01 80 02", ErrorCode::kProtocolViolation);
  // Extensions over the limit.
  Limits small;
  small.max_extensions = 1;
  auto bytes = from_hex("01 05 04 01 80 02 0a01 61");
  auto r = decode_datagram(k16, std::span<const uint8_t>(bytes), small);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kBoundsExceeded);
  // Fields that do not match the type are not encoded.
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode_datagram(k16, dg(0x04, 3, 0x80), {}, out));
  EXPECT_FALSE(encode_datagram(k16, dg(0x0c, 0, 0x80), {}, out));
  EXPECT_FALSE(encode_datagram(k16, dg(0x01, 0, 0x80), {}, out));
  EXPECT_FALSE(encode_datagram(k14, dg(0x0c, 0, std::nullopt), {}, out));
  EXPECT_TRUE(out.empty());
}

TEST(IetfDatagram, Draft17To20) {
  for (Version v : {k17, k18, k19, k20}) {
    // 0x0C: Object ID 0, default priority; group 100 is one byte in the leading-ones varint of
    // d17 (§1.4.1) and d18+ (the QUIC form would need 40 64).
    ObjectDatagram g100 = dg(0x0c, 0, std::nullopt);
    g100.group = 100;
    round_trip(v, "0c 05 64 6869", g100, "hi");
    // 0x03: PROPERTIES and END_OF_GROUP, Object ID 2, priority 7, Properties Length 2 then the
    // Key-Value-Pairs kept raw (d17 §10.2.1.2, d18+ §11.2.1.2): 0x10 = 5.
    round_trip(v, "03 05 04 02 07 02 1005 6869", dg(0x03, 2, 0x07, std::string("\x10\x05", 2)),
               "hi");
    // 0x2C: STATUS, Object ID 0, default priority: End of Track (4); 0x20 status End of Group
    // (3) at Object ID 9.
    round_trip(v, "2c 05 04 04", dg(0x2c, 0, std::nullopt, {}, 4), "");
    round_trip(v, "20 05 04 09 80 03", dg(0x20, 9, 0x80, {}, 3), "");
    // STATUS with PROPERTIES on a Normal object is allowed (§10.3.1 / §11.3.1 forbid it only
    // for a status that is not Normal).
    round_trip(v, "25 05 04 80 02 1005 00", dg(0x25, 0, 0x80, std::string("\x10\x05", 2), 0),
               "");
    // Invalid types: STATUS with END_OF_GROUP (0x22), bit 4 (0x10), outside 0b00X0XXXX (0x40,
    // one byte in the leading-ones form).
    decode_fails(v, "22 05 04 01 80 03", ErrorCode::kProtocolViolation);
    decode_fails(v, "10 05 04 01 80 61", ErrorCode::kProtocolViolation);
    decode_fails(v, "40 05 04 01 80 61", ErrorCode::kProtocolViolation);
    // PROPERTIES with a zero Properties Length: PROTOCOL_VIOLATION.
    decode_fails(v, "01 05 04 01 80 00 61", ErrorCode::kProtocolViolation);
    // "only Normal Objects can have Properties": End of Group (3) with properties.
    decode_fails(v, "25 05 04 80 02 1005 03", ErrorCode::kProtocolViolation);
    // Status 1 (DOES_NOT_EXIST) is gone from d17 §10.2.1.1 / d18+ §11.2.1.1.
    decode_fails(v, "2c 05 04 01", ErrorCode::kProtocolViolation);
    std::vector<uint8_t> out;
    EXPECT_FALSE(
        encode_datagram(v, dg(0x25, 0, 0x80, std::string("\x10\x05", 2), 3), {}, out));
    EXPECT_TRUE(out.empty());
  }
  // The same two datagrams are valid on d16, where status 1 exists and a status may carry
  // extensions.
  round_trip(k16, "2c 05 04 01", dg(0x2c, 0, std::nullopt, {}, 1), "");
  round_trip(k16, "25 05 04 80 02 1005 03", dg(0x25, 0, 0x80, std::string("\x10\x05", 2), 3), "");
  // Group 200: 80 c8 in d17's leading-ones form (10xxxxxx), 40 c8 in d16's QUIC form.
  ObjectDatagram g200 = dg(0x0c, 0, std::nullopt);
  g200.group = 200;
  round_trip(k17, "0c 05 80c8 61", g200, "a");
  round_trip(k16, "0c 05 40c8 61", g200, "a");
  // d18 §1.4.1: the 7-byte form (1111110x) for group 2^42.
  ObjectDatagram big = dg(0x0c, 0, std::nullopt);
  big.group = uint64_t{1} << 42;
  round_trip(k18, "0c 05 fc0400000000 00 61", big, "a");
  round_trip(k20, "0c 05 fc0400000000 00 61", big, "a");
}

}  // namespace moqd::wire::ietf::datagram_test
