// A server-role session made by make_session() on a qmux-00 MuxSession whose protocol is the given
// ALPN (an IETF draft's, or moq-lite's), over a FakeChannelPair, with a RawPeer as the client that
// speaks the wire by hand. The IETF session tests (ietf_session_test, ietf_fetch_test,
// ietf_publish_test, ietf_extensions_test) share it; nothing runs until pump() or advance().
// IetfRequestStreamsTest: the drafts 17..20 parameter and message builders of the request-stream
// tests (ietf_session_test, ietf_fetch_test, ietf_client_test).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/codec.h"
#include "session/moq_session.h"
#include "session/session.h"
#include "testing/mux_pair.h"
#include "testing/session_fixture.h"
#include "wire/version.h"

namespace moqd::testing {

class IetfServerFixture {
 public:
  explicit IetfServerFixture(std::string protocol,
                             wire::VersionSet versions = wire::VersionSet::all(),
                             session::SessionLimits limits = session::SessionLimits{})
      : origin_(model::OriginConfig{}, clock_, clock_), handler_(origin_), muxes_(clock_, protocol) {
    raw_ = std::make_unique<RawPeer>(muxes_.client());
    muxes_.client().set_visitor(raw_.get());
    session::SessionConfig sc;
    sc.role = session::Role::kServer;
    sc.versions = versions;
    sc.limits = limits;
    session_ = session::make_session(muxes_.server(), sc, origin_, handler_, clock_, clock_);
    session_->start();
    pump();
  }
  ~IetfServerFixture() { session_.reset(); }  // then muxes_ goes, then raw_
  IetfServerFixture(const IetfServerFixture&) = delete;
  IetfServerFixture& operator=(const IetfServerFixture&) = delete;

  // Delivers until the wire has been quiet twice (nothing while wire_held_).
  void pump() {
    int quiet = 0;
    for (int i = 0; i < 100000 && quiet < 2; ++i) {
      clock_.advance(Duration::zero());
      quiet = (wire_held_ ? 0 : muxes_.channels().deliver()) == 0 ? quiet + 1 : 0;
    }
  }
  // Moves the clock by `d` in 10 ms steps, pumping after each.
  void advance(Duration d) {
    constexpr Duration kStep = std::chrono::milliseconds(10);
    for (; d > Duration::zero(); d -= kStep) {
      clock_.advance(std::min(d, kStep));
      pump();
    }
  }
  // Opens the control stream with the SETUP `setup_hex`, pumps, and forgets what came back (the
  // relay's SETUP), so the stream's data holds only answers to what the test sends next.
  RawStream& open_control(std::string_view setup_hex) {
    RawStream* s = raw_->open_bidi(from_hex(setup_hex));
    EXPECT_NE(s, nullptr);
    pump();
    s->data.clear();
    return *s;
  }
  // Sends `h` (hex) on `c` and returns what came back on it (hex).
  std::string exchange(RawStream& c, std::string_view h) {
    c.data.clear();
    c.write(from_hex(h));
    pump();
    return to_hex(std::span(reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size()));
  }
  // {type, request id, error code} of the error answering `h` on `c`, each one byte on the wire
  // here (REQUEST_ERROR / FETCH_ERROR / PUBLISH_ERROR: type, length (16), id, code); empty if
  // fewer bytes came back.
  std::vector<int> error_of(RawStream& c, std::string_view h) {
    exchange(c, h);
    if (c.data.size() < 5) {
      return {};
    }
    return {static_cast<uint8_t>(c.data[0]), static_cast<uint8_t>(c.data[3]),
            static_cast<uint8_t>(c.data[4])};
  }
  // A uni stream from the peer (a SUBGROUP stream, say): `h` (hex) written whole, then FIN.
  void peer_stream(std::string_view h) {
    transport::Stream* u = muxes_.client().open_uni();
    ASSERT_NE(u, nullptr);
    u->write(Bytes::from(from_hex(h)));
    u->finish();
    pump();
  }

  bool wire_held_ = false;  // pump() delivers nothing: a peer that stopped reading
  ManualClock clock_;
  model::Origin origin_;
  RecordingHandler handler_;
  std::unique_ptr<RawPeer> raw_;  // the client mux's visitor: outlives muxes_
  MuxPair muxes_;
  std::unique_ptr<session::MoqSession> session_;
};

// Hex of the IETF session tests: `h` as bytes; bytes as to_hex writes them; `h` (as a draft's
// text spaces it) as to_hex writes it, to compare with hex_of.
inline std::vector<uint8_t> hex(std::string_view h) { return from_hex(h); }
inline std::string hex_of(const std::string& bytes) {
  return to_hex(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}
inline std::string canon(std::string_view h) { return to_hex(from_hex(h)); }

// @moq/lite 0.2.2's d16 CLIENT_SETUP (MAX_REQUEST_ID 42069, Implementation "moq-lite-js"), and its
// d14-layout one offering lite-02, lite-01 and d14.
inline constexpr const char* kD16Setup =
    "20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
inline constexpr const char* kD14Setup =
    "20 00 2c 03 c0 00 00 00 ff 0d ad 02 c0 00 00 00 ff 0d ad 01 c0 00 00 00 ff 00 00 0e "
    "02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";

// The versions of a server that speaks draft 14 alone (SETUP selects it, no ALPN of a later draft).
inline wire::VersionSet only_draft14() {
  wire::VersionSet v = wire::VersionSet::none();
  v.add(wire::Version::kTransport14);
  return v;
}

// One control message `type length(16) body` (types and values below 0x40: one-byte varints).
inline std::vector<uint8_t> ietf_message(uint8_t type, const std::string& body_hex) {
  std::vector<uint8_t> body = from_hex(body_hex);
  std::vector<uint8_t> out;
  out.reserve(3 + body.size());
  out.push_back(type);
  out.push_back(static_cast<uint8_t>(body.size() >> 8));
  out.push_back(static_cast<uint8_t>(body.size()));
  for (uint8_t c : body) {
    out.push_back(c);
  }
  return out;
}

// Drafts 17..20 (a bidi stream per request, SETUP on uni streams): the draft a parameterised test
// runs, named D17..D20.
struct RequestStreamDraft {
  int number;
  const char* alpn;
  wire::Version version;
};
inline void PrintTo(const RequestStreamDraft& d, std::ostream* os) { *os << d.alpn; }
// For INSTANTIATE_TEST_SUITE_P(Drafts, SUITE, request_stream_drafts(), request_stream_draft_name).
inline auto request_stream_drafts() {
  return ::testing::Values(RequestStreamDraft{17, "moqt-17", wire::Version::kTransport17},
                           RequestStreamDraft{18, "moqt-18", wire::Version::kTransport18},
                           RequestStreamDraft{19, "moqt-19", wire::Version::kTransport19},
                           RequestStreamDraft{20, "moqt-20", wire::Version::kTransport20});
}
inline std::string request_stream_draft_name(const ::testing::TestParamInfo<RequestStreamDraft>& i) {
  return "D" + std::to_string(i.param.number);
}

class IetfRequestStreamsTest : public ::testing::TestWithParam<RequestStreamDraft> {
 protected:
  bool d17() const { return GetParam().number == 17; }
  bool d20() const { return GetParam().number == 20; }
  // The request id field (d17: then the Required Request ID Delta 0).
  std::string id(uint8_t v) const {
    char b[8];
    std::snprintf(b, sizeof b, d17() ? "%02x 00" : "%02x", v);
    return b;
  }
  static std::vector<uint8_t> msg(uint8_t type, const std::string& body_hex) {
    return ietf_message(type, body_hex);
  }
  // The peer's SETUP `setup_hex` on a uni stream of its own; the session is then ready.
  static void send_setup(IetfServerFixture& f, const char* setup_hex) {
    f.pump();
    transport::Stream* u = f.muxes_.client().open_uni();
    ASSERT_NE(u, nullptr);
    u->write(Bytes::from(from_hex(setup_hex)));
    f.pump();
    ASSERT_TRUE(f.session_->is_ready());
  }
};

}  // namespace moqd::testing
