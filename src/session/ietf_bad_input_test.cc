// Bad peer input on an IETF session of each draft 14..20, the same five cases on every draft:
// an unknown message type, a request id over the limit or reused, a truncated parameter, a
// parameter the message does not take, a namespace tuple over 32 fields. Each closes the session
// with the draft's termination code (d14 §3.4, unchanged through d20), except where the draft says
// to ignore (d14/15 keep a parameter the message does not take). Drafts 14..16 send requests on
// the control stream, 17..20 on a bidi stream each. The bytes are PUBLISH_NAMESPACE (0x06) for
// ["room", "a"], with every value below 0x40 (one byte in every varint form) unless said.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "base/codec.h"
#include "testing/ietf_fixture.h"
#include "wire/version.h"

namespace moqd::session {
// Named, not anonymous: the unity build puts several test files in one translation unit.
namespace ietf_bad_input_test {

using moqd::testing::IetfServerFixture;
using moqd::testing::ietf_message;
using moqd::testing::RawStream;

// @moq/lite 0.2.2's CLIENT_SETUPs (protocol/README.md §2.4, §2.5) and @moq/net 0.3.4's SETUP on
// 17..20 (tests/interop/ietf_fixtures.mjs), as in ietf_session_test.cc.
const char* kD14ClientSetup =
    "20 00 2c 03 c0 00 00 00 ff 0d ad 02 c0 00 00 00 ff 0d ad 01 c0 00 00 00 ff 00 00 0e "
    "02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
const char* kD15ClientSetup = "20 00 13 02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
const char* kD16ClientSetup = "20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
const char* kD17Setup =
    "af 00 00 1b 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73 c4 0b 4e 08 fe 0a 5a 2a db 5a 87 d4 05 01";

struct Draft {
  int number;
  const char* protocol;  // the WebSocket subprotocol after qmux-00 ("" for bare qmux-00: d14)
  wire::Version version;
};
void PrintTo(const Draft& d, std::ostream* os) { *os << "draft " << d.number; }

constexpr const char* kRoomA = "02 04 72 6f 6f 6d 01 61";  // ["room", "a"]

class BadInputTest : public ::testing::TestWithParam<Draft> {
 protected:
  bool request_streams() const { return GetParam().number >= 17; }

  // A session of the draft with SETUP exchanged.
  std::unique_ptr<IetfServerFixture> session() {
    const Draft& d = GetParam();
    wire::VersionSet only = wire::VersionSet::none();
    only.add(d.version);
    auto f = std::make_unique<IetfServerFixture>(d.protocol, only);
    if (request_streams()) {
      transport::Stream* u = f->muxes_.client().open_uni();
      EXPECT_NE(u, nullptr);
      u->write(Bytes::from(from_hex(kD17Setup)));
      f->pump();
    } else {
      const char* setup = d.number == 14 ? kD14ClientSetup
                          : d.number == 15 ? kD15ClientSetup
                                           : kD16ClientSetup;
      control_ = &f->open_control(setup);
    }
    EXPECT_TRUE(f->session_->is_ready());
    EXPECT_FALSE(f->raw_->closed_code.has_value());
    return f;
  }
  // Sends one request: on the control stream (14..16) or on a bidi stream of its own (17..20).
  void request(IetfServerFixture& f, const std::vector<uint8_t>& bytes) {
    if (request_streams()) {
      f.raw_->open_bidi(bytes);
    } else {
      control_->write(bytes);
    }
    f.pump();
  }
  // The request id field: `id_hex` (already in the draft's varint form), then d17's Required
  // Request ID Delta 0.
  std::string id(const std::string& id_hex) const {
    return GetParam().number == 17 ? id_hex + " 00" : id_hex;
  }
  // PUBLISH_NAMESPACE: request id, tuple, then the parameters (count first).
  std::vector<uint8_t> publish_namespace(const std::string& id_hex, const std::string& tuple,
                                         const std::string& params = "00") const {
    return ietf_message(0x06, id(id_hex) + " " + tuple + " " + params);
  }
  // A tuple of `n` fields "a".
  static std::string tuple_of(int n) {
    char b[8];
    std::snprintf(b, sizeof b, "%02x", n);
    std::string h = b;
    for (int i = 0; i < n; ++i) {
      h += " 01 61";
    }
    return h;
  }

  RawStream* control_ = nullptr;
};

TEST_P(BadInputTest, UnknownMessageTypeIsAProtocolViolation) {
  auto f = session();
  request(*f, ietf_message(0x3e, ""));
  ASSERT_TRUE(f->raw_->closed_code.has_value());
  EXPECT_EQ(*f->raw_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
}

TEST_P(BadInputTest, RequestIdOverTheLimit) {
  if (!request_streams()) {
    // SERVER_SETUP granted MAX_REQUEST_ID 1024: a first request with id 1024 (two-byte varint
    // 0x4400) is over it, TOO_MANY_REQUESTS (d14 §9.1, d15/16 §9.1), though also out of sequence.
    auto f = session();
    request(*f, publish_namespace("44 00", kRoomA));
    ASSERT_TRUE(f->raw_->closed_code.has_value());
    EXPECT_EQ(*f->raw_->closed_code, 0x7u);  // TOO_MANY_REQUESTS
    return;
  }
  // 17..20 have no MAX_REQUEST_ID; ids may arrive out of order, and moqd keeps at most 1024
  // skipped ids acceptable: a first id of 2048 (1024 skipped, two-byte leading-ones 0x8800) is
  // taken, 2050 (1025 skipped, 0x8802) is INVALID_REQUEST_ID.
  {
    auto f = session();
    request(*f, publish_namespace("88 00", kRoomA));
    EXPECT_FALSE(f->raw_->closed_code.has_value());
    EXPECT_TRUE(f->origin_.is_active("room/a"));
  }
  auto f = session();
  request(*f, publish_namespace("88 02", kRoomA));
  ASSERT_TRUE(f->raw_->closed_code.has_value());
  EXPECT_EQ(*f->raw_->closed_code, 0x4u);  // INVALID_REQUEST_ID
}

TEST_P(BadInputTest, RequestIdReusedIsInvalid) {
  auto f = session();
  request(*f, publish_namespace("00", kRoomA));
  EXPECT_TRUE(f->origin_.is_active("room/a"));
  EXPECT_FALSE(f->raw_->closed_code.has_value());
  request(*f, publish_namespace("00", "02 04 72 6f 6f 6d 01 62"));
  ASSERT_TRUE(f->raw_->closed_code.has_value());
  EXPECT_EQ(*f->raw_->closed_code, 0x4u);  // INVALID_REQUEST_ID
  EXPECT_FALSE(f->origin_.is_active("room/b"));
}

TEST_P(BadInputTest, TruncatedParameterIsAProtocolViolation) {
  // One AUTHORIZATION_TOKEN (0x03) whose Length says 5 with 1 byte left in the message.
  auto f = session();
  request(*f, publish_namespace("00", kRoomA, "01 03 05 aa"));
  ASSERT_TRUE(f->raw_->closed_code.has_value());
  EXPECT_EQ(*f->raw_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
  EXPECT_FALSE(f->origin_.is_active("room/a"));
}

TEST_P(BadInputTest, ParameterTheMessageDoesNotTake) {
  auto f = session();
  if (GetParam().number <= 15) {
    // d14 §9.2 / d15 §9.2: receivers ignore it; the namespace is taken. d14 has no
    // SUBSCRIBER_PRIORITY parameter, so DELIVERY_TIMEOUT (0x02), which PUBLISH_NAMESPACE lacks.
    request(*f, publish_namespace("00", kRoomA, GetParam().number == 14 ? "01 02 07" : "01 20 07"));
    EXPECT_FALSE(f->raw_->closed_code.has_value());
    EXPECT_TRUE(f->origin_.is_active("room/a"));
    return;
  }
  // d16 §9.2 (and 17..20): SUBSCRIBER_PRIORITY (0x20) in PUBLISH_NAMESPACE closes the session.
  request(*f, publish_namespace("00", kRoomA, "01 20 07"));
  ASSERT_TRUE(f->raw_->closed_code.has_value());
  EXPECT_EQ(*f->raw_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
  EXPECT_FALSE(f->origin_.is_active("room/a"));
}

TEST_P(BadInputTest, NamespaceTupleOver32FieldsIsAProtocolViolation) {
  {
    auto f = session();
    request(*f, publish_namespace("00", tuple_of(32)));
    EXPECT_FALSE(f->raw_->closed_code.has_value());
  }
  auto f = session();
  request(*f, publish_namespace("00", tuple_of(33)));
  ASSERT_TRUE(f->raw_->closed_code.has_value());
  EXPECT_EQ(*f->raw_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
}

INSTANTIATE_TEST_SUITE_P(
    Drafts, BadInputTest,
    ::testing::Values(Draft{14, "", wire::Version::kTransport14},
                      Draft{15, "moqt-15", wire::Version::kTransport15},
                      Draft{16, "moqt-16", wire::Version::kTransport16},
                      Draft{17, "moqt-17", wire::Version::kTransport17},
                      Draft{18, "moqt-18", wire::Version::kTransport18},
                      Draft{19, "moqt-19", wire::Version::kTransport19},
                      Draft{20, "moqt-20", wire::Version::kTransport20}),
    [](const ::testing::TestParamInfo<Draft>& i) { return "D" + std::to_string(i.param.number); });

}  // namespace ietf_bad_input_test
}  // namespace moqd::session
