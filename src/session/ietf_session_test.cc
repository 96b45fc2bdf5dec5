// The IETF session (drafts 14..20), per handler, on a fake transport: a server-role session made
// by make_session() on a MuxSession whose protocol is the draft's ALPN, and a RawPeer client that
// speaks the wire by hand (byte fixtures from protocol/README.md §5 and the draft texts).
#include "session/ietf_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/codec.h"
#include "session/session.h"
#include "testing/ietf_fixture.h"
#include "testing/mux_pair.h"
#include "testing/session_fixture.h"
#include "wire/ietf.h"
#include "wire/ietf_cluster.h"

namespace moqd::session {
namespace {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;
using moqd::testing::RecordingHandler;
using moqd::testing::TestBroadcast;
namespace wi = wire::ietf;

std::vector<uint8_t> hex(std::string_view h) { return from_hex(h); }

// The shared server fixture (testing/ietf_fixture.h), with the control stream and sends in bytes.
class IetfFixture : public testing::IetfServerFixture {
 public:
  using IetfServerFixture::IetfServerFixture;
  // Opens the control stream with `setup` and pumps.
  RawStream& control(std::vector<uint8_t> setup) {
    pump();
    RawStream* s = raw_->open_bidi(std::move(setup));
    EXPECT_NE(s, nullptr);
    pump();
    return *s;
  }
  void send(RawStream& s, std::vector<uint8_t> bytes) {
    s.write(std::move(bytes));
    pump();
  }
};

// @moq/lite 0.2.2's d16 CLIENT_SETUP (protocol/README.md §2.5): MaxRequestId 42069,
// Implementation "moq-lite-js", delta-coded.
const char* kD16ClientSetup = "20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
const char* kD15ClientSetup = "20 00 13 02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
// @moq/lite 0.2.2's d14-layout CLIENT_SETUP offering lite-02, lite-01, d14 (§2.4).
const char* kD14ClientSetup =
    "20 00 2c 03 c0 00 00 00 ff 0d ad 02 c0 00 00 00 ff 0d ad 01 c0 00 00 00 ff 00 00 0e "
    "02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";

TEST(IetfSessionTest, FactoryPicksTheFamilyByProtocol) {
  IetfFixture d16("moqt-16");
  EXPECT_NE(dynamic_cast<IetfSession*>(d16.session_.get()), nullptr);
  IetfFixture lite("moq-lite-04");
  EXPECT_NE(dynamic_cast<Session*>(lite.session_.get()), nullptr);
  // The SETUP path stays moq-lite unless draft 14 is the only SETUP version enabled.
  IetfFixture setup("");
  EXPECT_NE(dynamic_cast<Session*>(setup.session_.get()), nullptr);
  IetfFixture d14("", testing::only_draft14());
  EXPECT_NE(dynamic_cast<IetfSession*>(d14.session_.get()), nullptr);
  // Drafts 17..20 by their own ALPN.
  for (const char* alpn : {"moqt-17", "moqt-18", "moqt-19", "moqt-20"}) {
    IetfFixture d(alpn);
    EXPECT_NE(dynamic_cast<IetfSession*>(d.session_.get()), nullptr) << alpn;
    EXPECT_FALSE(d.handler_.is_closed()) << alpn;
  }
}

TEST(IetfSessionTest, Draft16SetupGrantsRequestIds) {
  IetfFixture f("moqt-16");
  RawStream& c = f.control(hex(kD16ClientSetup));
  // SERVER_SETUP: one parameter, MaxRequestId (delta 2) = 1024.
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size())),
            "21 00 04 01 02 44 00");
  ASSERT_TRUE(f.handler_.ready_version.has_value());
  EXPECT_EQ(*f.handler_.ready_version, wire::Version::kTransport16);
  EXPECT_TRUE(f.session_->is_ready());
}

TEST(IetfSessionTest, Draft15SetupHasNoDeltaCoding) {
  IetfFixture f("moqt-15");
  RawStream& c = f.control(hex(kD15ClientSetup));
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size())),
            "21 00 04 01 02 44 00");
  EXPECT_EQ(*f.handler_.ready_version, wire::Version::kTransport15);
}

TEST(IetfSessionTest, Draft14SetupSelectsTheVersion) {
  IetfFixture f("", testing::only_draft14());
  RawStream& c = f.control(hex(kD14ClientSetup));
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size())),
            "21 00 0c c0 00 00 00 ff 00 00 0e 01 02 44 00");
  EXPECT_EQ(*f.handler_.ready_version, wire::Version::kTransport14);
}

// "moq-00", draft 14's own ALPN: an IETF session whatever else is enabled, SETUP selecting 14.
TEST(IetfSessionTest, Moq00AlpnIsDraft14ThroughSetup) {
  IetfFixture f("moq-00");
  EXPECT_NE(dynamic_cast<IetfSession*>(f.session_.get()), nullptr);
  RawStream& c = f.control(hex(kD14ClientSetup));
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size())),
            "21 00 0c c0 00 00 00 ff 00 00 0e 01 02 44 00");
  EXPECT_EQ(*f.handler_.ready_version, wire::Version::kTransport14);
  // Without draft 14 enabled "moq-00" is not served: the moq-lite session refuses the protocol.
  wire::VersionSet no14 = wire::VersionSet::none();
  no14.add(wire::Version::kLite04);
  no14.add(wire::Version::kTransport16);
  IetfFixture g("moq-00", no14);
  EXPECT_EQ(dynamic_cast<IetfSession*>(g.session_.get()), nullptr);
  EXPECT_TRUE(g.handler_.is_closed());
}

TEST(IetfSessionTest, Draft14SetupWithoutTheDraftFailsNegotiation) {
  IetfFixture f("", testing::only_draft14());
  // Offers lite-02 only.
  f.control(hex("20 00 0a 01 c0 00 00 00 ff 0d ad 02 00"));
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x15u);  // VERSION_NEGOTIATION_FAILED
}

TEST(IetfSessionTest, PublishNamespaceFeedsTheOriginAndDoneWithdraws) {
  IetfFixture f("moqt-16");
  RawStream& c = f.control(hex(kD16ClientSetup));
  c.data.clear();
  // PUBLISH_NAMESPACE id 0 ["room","alice"] params 0.
  f.send(c, hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size())),
            "07 00 02 00 00");  // REQUEST_OK id 0, no params
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
  // d16 PUBLISH_NAMESPACE_DONE names the request id.
  f.send(c, hex("09 00 01 00"));
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
}

// The first message of a d16 SUBSCRIBE_NAMESPACE stream (IetfSession::read_first_message, shared
// with the 17+ request streams): a message split across reads waits for its rest; one that FIN
// cuts short closes the session; one that is not SUBSCRIBE_NAMESPACE is a PROTOCOL_VIOLATION.
TEST(IetfSessionTest, Draft16NamespaceStreamFirstMessageWaitsForItsRestOrFails) {
  // SUBSCRIBE_NAMESPACE request 0, ["room"], Subscribe Options 1, no parameters (d16 §9.25).
  const char* head = "11 00 09 00 01";
  const char* rest = "04 72 6f 6f 6d 01 00";
  {
    IetfFixture f("moqt-16");
    f.control(hex(kD16ClientSetup));
    RawStream* s = f.raw_->open_bidi(hex(head));
    ASSERT_NE(s, nullptr);
    f.pump();
    EXPECT_TRUE(s->data.empty());
    EXPECT_FALSE(f.raw_->closed_code.has_value());
    f.send(*s, hex(rest));
    EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(s->data.data()), s->data.size())),
              "07 00 02 00 00");  // REQUEST_OK request 0, no parameters
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
  {
    IetfFixture f("moqt-16");
    f.control(hex(kD16ClientSetup));
    RawStream* s = f.raw_->open_bidi(hex(head));
    ASSERT_NE(s, nullptr);
    s->stream->finish();
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
  }
  {
    IetfFixture f("moqt-16");
    f.control(hex(kD16ClientSetup));
    // PUBLISH_NAMESPACE belongs on the control stream in 16.
    f.raw_->open_bidi(hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
}

TEST(IetfSessionTest, SubscribeIsServedAsSubgroupStreams) {
  IetfFixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.control(hex(kD16ClientSetup));
  c.data.clear();
  // SUBSCRIBE id 0 ["room","alice"] "video", params (delta-coded) forward 1, priority 7,
  // filter LargestObject, group order 2: protocol/README.md §5.7 d16 bytes.
  f.send(c, hex("03 00 1d 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f "
                "04 10 01 10 07 01 01 02 01 02"));
  // SUBSCRIBE_OK id 0 alias 0, no params, no track extensions.
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size())),
            "04 00 03 00 00 00");
  ASSERT_NE(b.feed("video").track(), nullptr);
  b.write_group("video", 5, {"hi", "there", ""});
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 1u);
  const RawStream& g = *f.raw_->incoming[0];
  // 18 alias 0 group 5 priority 7 | 00 02 "hi" | 00 05 "there" | 00 00 00 (empty object) | FIN
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(g.data.data()), g.data.size())),
            "18 00 05 07 00 02 68 69 00 05 74 68 65 72 65 00 00 00");
  EXPECT_TRUE(g.fin);
  // UNSUBSCRIBE: PUBLISH_DONE (status 3, one stream).
  c.data.clear();
  f.send(c, hex("0a 00 01 00"));
  ASSERT_GE(c.data.size(), 6u);
  EXPECT_EQ(static_cast<uint8_t>(c.data[0]), 0x0b);
  EXPECT_EQ(f.session_->subscription_count(), 0u);
}

// The relay's many viewers: a session whose peer only discovers and subscribes never makes the
// publisher state (the peer's announcements, upstream subscriptions, cache budget, rate
// buckets); the peer's first PUBLISH_NAMESPACE does.
TEST(IetfSessionTest, AViewerOnlySessionNeverMakesThePublisherState) {
  IetfFixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  auto& session = dynamic_cast<IetfSession&>(*f.session_);
  RawStream& c = f.control(hex(kD16ClientSetup));
  // SUBSCRIBE_NAMESPACE ["room"] on its own stream (d16), then SUBSCRIBE "video" as above.
  RawStream* ns = f.raw_->open_bidi(hex("11 00 09 00 01 04 72 6f 6f 6d 01 00"));
  ASSERT_NE(ns, nullptr);
  f.send(c, hex("03 00 1d 02 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f "
                "04 10 01 10 07 01 01 02 01 02"));
  ASSERT_NE(b.feed("video").track(), nullptr);
  b.write_group("video", 5, {"hi"});
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 1u);  // the group
  EXPECT_TRUE(f.raw_->incoming[0]->fin);
  f.advance(std::chrono::seconds(1));  // a liveness check or two
  EXPECT_EQ(session.subscription_count(), 1u);
  EXPECT_FALSE(session.has_publisher_state());
  f.send(c, hex("06 00 0c 04 02 04 72 6f 6f 6d 03 62 6f 62 00"));  // PUBLISH_NAMESPACE room/bob
  EXPECT_TRUE(f.origin_.is_active("room/bob"));
  EXPECT_TRUE(session.has_publisher_state());
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfSessionTest, SubscribeToAnUnknownBroadcastIsRefused) {
  IetfFixture f("moqt-16");
  RawStream& c = f.control(hex(kD16ClientSetup));
  c.data.clear();
  f.send(c, hex("03 00 1d 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f "
                "04 10 01 10 07 01 01 02 01 02"));
  ASSERT_GE(c.data.size(), 5u);
  EXPECT_EQ(static_cast<uint8_t>(c.data[0]), 0x05);  // REQUEST_ERROR
  EXPECT_EQ(static_cast<uint8_t>(c.data[3]), 0x00);  // request id 0
  EXPECT_EQ(static_cast<uint8_t>(c.data[4]), 0x10);  // d16 §13.1.3 DOES_NOT_EXIST
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfSessionTest, BadPeerInputClosesWithTheDraftsCode) {
  {
    IetfFixture f("moqt-16");
    RawStream& c = f.control(hex(kD16ClientSetup));
    f.send(c, hex("3f 00 00"));  // unknown message type (0x3f)
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
  {
    IetfFixture f("moqt-16");
    RawStream& c = f.control(hex(kD16ClientSetup));
    f.send(c, hex("06 00 0e 02 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));  // id 2 before 0
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x4u);  // INVALID_REQUEST_ID
  }
  {
    IetfFixture f("moqt-16");
    // A message before CLIENT_SETUP.
    f.control(hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
  {
    IetfFixture f("moqt-16");
    RawStream& c = f.control(hex(kD16ClientSetup));
    // A SUBGROUP stream for an alias nobody subscribed: refused (STOP_SENDING), session kept.
    transport::Stream* u = f.muxes_.client().open_uni();
    ASSERT_NE(u, nullptr);
    u->write(Bytes::from(hex("18 09 00 00 00 01 61")));
    f.pump();
    EXPECT_FALSE(f.raw_->closed_code.has_value());
    (void)c;
  }
  {
    IetfFixture f("moqt-15");
    RawStream& c = f.control(hex(kD15ClientSetup));
    // d15 has no SUBSCRIBE_NAMESPACE stream: the control stream ending is a violation.
    c.stream->finish();
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
}

TEST(IetfSessionTest, PublisherTrackFlowsIntoTheOrigin) {
  IetfFixture f("moqt-16");
  RawStream& c = f.control(hex(kD16ClientSetup));
  f.send(c, hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.pump();
  // The relay subscribed upstream: SUBSCRIBE with its own (odd) request id 1.
  std::string s = c.data.substr(12);  // after SERVER_SETUP and REQUEST_OK
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(static_cast<uint8_t>(s[0]), 0x03);
  EXPECT_EQ(static_cast<uint8_t>(s[3]), 0x01);
  // SUBSCRIBE_OK id 1 alias 9, then a SUBGROUP stream for alias 9, group 4.
  f.send(c, hex("04 00 03 01 09 00"));
  transport::Stream* u = f.muxes_.client().open_uni();
  ASSERT_NE(u, nullptr);
  u->write(Bytes::from(hex("18 09 04 00 00 03 61 62 63 00 00 00 00 01 7a")));
  u->finish();
  f.pump();
  const auto* g = viewer.group(4);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->frames, (std::vector<std::string>{"abc", "", "z"}));
  EXPECT_TRUE(g->finished);
  // A gap in object ids (0, then 2) is kept in the model; moq-lite readers refuse it
  // (src/session/ietf_extensions_test.cc), this in-process reader takes both objects.
  transport::Stream* gap = f.muxes_.client().open_uni();
  gap->write(Bytes::from(hex("18 09 05 00 00 01 61 01 01 62")));
  gap->finish();
  f.pump();
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  const auto* g5 = viewer.group(5);
  ASSERT_NE(g5, nullptr);
  EXPECT_TRUE(g5->finished);
  EXPECT_EQ(g5->frames, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(viewer.track()->newest_group()->objects()[1].id, 2u);
  // PUBLISH_DONE (status 2, 2 streams): the track ends.
  f.send(c, hex("0b 00 04 01 02 02 00"));
  EXPECT_TRUE(viewer.ended);
}

// --- the SessionLimits shared with moq-lite (session/guards.h) ---

// PUBLISH_NAMESPACE id `id` of ["room", `name`] (one-byte name), d16.
std::vector<uint8_t> publish_namespace(uint8_t id, char name) {
  return {0x06, 0x00, 0x0a, id, 0x02, 0x04, 'r', 'o', 'o', 'm', 0x01, static_cast<uint8_t>(name), 0x00};
}

// A SUBGROUP stream for alias 9, group `group`, with one object of `size` pattern bytes.
std::vector<uint8_t> subgroup_with_object(uint8_t group, uint32_t size) {
  std::vector<uint8_t> out = {0x18, 0x09, group, 0x00, 0x00};  // header, object id delta 0
  out.push_back(static_cast<uint8_t>(0x80 | (size >> 24)));    // 4-byte varint length
  out.push_back(static_cast<uint8_t>(size >> 16));
  out.push_back(static_cast<uint8_t>(size >> 8));
  out.push_back(static_cast<uint8_t>(size));
  for (uint32_t i = 0; i < size; ++i) {
    out.push_back(static_cast<uint8_t>('a' + i % 26));
  }
  return out;
}

TEST(IetfSessionLimitsTest, PublisherFasterThanMaxPublisherRateIsClosed) {
  SessionLimits l;
  l.max_publisher_rate = 100'000;  // bytes per second, one second of burst
  IetfFixture f("moqt-16", wire::VersionSet::all(), l);
  RawStream& c = f.control(hex(kD16ClientSetup));
  f.send(c, hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.pump();
  f.send(c, hex("04 00 03 01 09 00"));  // SUBSCRIBE_OK id 1 alias 9
  // Within the burst: accepted.
  transport::Stream* u = f.muxes_.client().open_uni();
  ASSERT_NE(u, nullptr);
  u->write(Bytes::from(subgroup_with_object(4, 60'000)));
  u->finish();
  f.pump();
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  ASSERT_NE(viewer.group(4), nullptr);
  EXPECT_TRUE(viewer.group(4)->finished);
  // 40 kB are left; half a second adds 50 kB, so 95 kB is too much.
  f.advance(std::chrono::milliseconds(500));
  transport::Stream* v = f.muxes_.client().open_uni();
  ASSERT_NE(v, nullptr);
  v->write(Bytes::from(subgroup_with_object(5, 95'000)));
  f.pump();
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x1u);  // INTERNAL_ERROR: the drafts have no rate code
}

TEST(IetfSessionLimitsTest, PublishNamespaceFlipFlopsOverMaxAnnounceRateClose) {
  for (bool fast : {true, false}) {
    SessionLimits l;
    l.max_announce_rate = 10;
    l.max_announced_paths = 10;  // burst: 20 changes
    IetfFixture f("moqt-16", wire::VersionSet::all(), l);
    RawStream& c = f.control(hex(kD16ClientSetup));
    // 30 PUBLISH_NAMESPACE + PUBLISH_NAMESPACE_DONE pairs: 60 changes, three times the burst;
    // slowly (8 changes per second) they are kept.
    for (uint8_t i = 0; i < 30 && !f.raw_->closed_code; ++i) {
      f.send(c, publish_namespace(static_cast<uint8_t>(2 * i), 'a'));
      if (f.raw_->closed_code) {
        break;  // the control stream is gone
      }
      f.send(c, {0x09, 0x00, 0x01, static_cast<uint8_t>(2 * i)});
      if (!fast) {
        f.advance(std::chrono::milliseconds(250));
      }
    }
    if (fast) {
      ASSERT_TRUE(f.raw_->closed_code.has_value());
      EXPECT_EQ(*f.raw_->closed_code, 0x7u);  // TOO_MANY_REQUESTS
    } else {
      EXPECT_FALSE(f.raw_->closed_code.has_value());
    }
  }
}

TEST(IetfSessionLimitsTest, PublishNamespacePastMaxAnnouncedPathsIsRefused) {
  SessionLimits l;
  l.max_announced_paths = 2;
  IetfFixture f("moqt-16", wire::VersionSet::all(), l);
  RawStream& c = f.control(hex(kD16ClientSetup));
  f.send(c, publish_namespace(0, 'a'));
  f.send(c, publish_namespace(2, 'b'));
  c.data.clear();
  f.send(c, publish_namespace(4, 'c'));
  EXPECT_TRUE(f.origin_.is_active("room/a"));
  EXPECT_TRUE(f.origin_.is_active("room/b"));
  EXPECT_FALSE(f.origin_.is_active("room/c"));
  ASSERT_GE(c.data.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(c.data[0]), 0x05);  // REQUEST_ERROR
  EXPECT_EQ(static_cast<uint8_t>(c.data[3]), 0x04);  // request id 4
  // One withdrawn: room for another.
  f.send(c, {0x09, 0x00, 0x01, 0x00});
  f.send(c, publish_namespace(6, 'c'));
  EXPECT_TRUE(f.origin_.is_active("room/c"));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

namespace ietf_stall_test {

// A d16 SUBSCRIBE id 0 to room/alice's "video" (published in `b`); then the subscriber stops
// reading (the wire is held) and group 0, 2 MiB (more than the channel holds), is written.
void subscribe_then_hold_a_large_group(IetfFixture& f, TestBroadcast& b) {
  RawStream& c = f.control(hex(kD16ClientSetup));
  f.send(c, hex("03 00 1d 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f "
                "04 10 01 10 07 01 01 02 01 02"));
  ASSERT_NE(b.feed("video").track(), nullptr);
  f.wire_held_ = true;
  b.write_group("video", 0, {std::string(2 << 20, 'x')});
  f.pump();
}

}  // namespace ietf_stall_test

TEST(IetfSessionLimitsTest, SubscriberWithoutProgressIsClosedAfterStallTimeout) {
  SessionLimits l;
  l.stall_timeout = std::chrono::seconds(2);
  IetfFixture f("moqt-16", wire::VersionSet::all(), l);
  TestBroadcast b(f.origin_, "room/alice");
  ASSERT_NO_FATAL_FAILURE(ietf_stall_test::subscribe_then_hold_a_large_group(f, b));
  f.advance(std::chrono::milliseconds(1500));
  EXPECT_FALSE(f.handler_.is_closed());
  f.advance(std::chrono::milliseconds(1500));
  f.wire_held_ = false;
  f.pump();
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x11u);  // CONTROL_MESSAGE_TIMEOUT, as the setup timeout
}

TEST(IetfSessionLimitsTest, SubscriberReadingSlowlyIsNotStalled) {
  SessionLimits l;
  l.stall_timeout = std::chrono::seconds(2);
  IetfFixture f("moqt-16", wire::VersionSet::all(), l);
  TestBroadcast b(f.origin_, "room/alice");
  ASSERT_NO_FATAL_FAILURE(ietf_stall_test::subscribe_then_hold_a_large_group(f, b));
  for (int i = 0; i < 40; ++i) {  // 10 s, five times the stall timeout, a few frames at a time
    f.advance(std::chrono::milliseconds(250));
    f.muxes_.channels().deliver(8);
  }
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  EXPECT_FALSE(f.handler_.is_closed());
}

TEST(IetfSessionLimitsTest, SilentSessionIsClosedAfterIdleTimeout) {
  SessionLimits l;
  l.idle_timeout = std::chrono::seconds(2);
  IetfFixture f("moqt-16", wire::VersionSet::all(), l);
  f.control(hex(kD16ClientSetup));
  ASSERT_TRUE(f.session_->is_ready());
  f.advance(std::chrono::milliseconds(1500));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  f.advance(std::chrono::seconds(2));
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x11u);
}

TEST(IetfSessionLimitsTest, PublisherIsNotIdle) {
  SessionLimits l;
  l.idle_timeout = std::chrono::seconds(2);
  IetfFixture f("moqt-16", wire::VersionSet::all(), l);
  RawStream& c = f.control(hex(kD16ClientSetup));
  f.send(c, publish_namespace(0, 'a'));
  f.advance(std::chrono::seconds(10));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}


// --- drafts 17 to 20: SETUP on uni streams, a bidi stream per request ---

namespace d17 {

std::string hex_of(const std::string& bytes) {
  return to_hex(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// @moq/net 0.3.4's SETUP on 17..20 (tests/interop/ietf_fixtures.mjs): Implementation
// "moq-lite-js", RELAY_HOPS (8-byte origin), SOLICIT 1.
const char* kSetup =
    "af 00 00 1b 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73 c4 0b 4e 08 fe 0a 5a 2a db 5a 87 d4 05 01";

class RequestStreamsTest : public testing::IetfRequestStreamsTest {
 protected:
  // SUBSCRIBE as @moq/net writes it for ["room","alice"] "video": priority 7, group order 2,
  // forward 1, the draft's join filter (17..19 LargestObject; 20 relative `relative`).
  std::vector<uint8_t> subscribe(uint8_t request_id, uint8_t relative = 1) const {
    const bool d20 = GetParam().number == 20;
    char filter[16];
    std::snprintf(filter, sizeof filter, "%02x", d20 ? relative : 2);
    return msg(0x03, id(request_id) + " 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f " +
                         "04 10 01 10 07 01 01 " + filter + " 01 02");
  }
  std::vector<uint8_t> publish_namespace(uint8_t request_id, const std::string& name) const {
    std::string h = id(request_id) + " 02 04 72 6f 6f 6d ";
    char b[8];
    std::snprintf(b, sizeof b, "%02zx", name.size());
    h += b;
    for (char c : name) {
      std::snprintf(b, sizeof b, " %02x", static_cast<unsigned char>(c));
      h += b;
    }
    return msg(0x06, h + " 00");
  }
  // A session with SETUP exchanged: the relay's SETUP stream is incoming[0].
  static void setup(IetfFixture& f) { send_setup(f, kSetup); }
};

TEST_P(RequestStreamsTest, SetupGoesBothWaysOnUniStreams) {
  IetfFixture f(GetParam().alpn);
  // The relay's SETUP goes out at once, on its first uni stream, with no options, kept open.
  ASSERT_GE(f.raw_->incoming.size(), 1u);
  const RawStream& ours = *f.raw_->incoming[0];
  EXPECT_EQ(hex_of(ours.data), "af 00 00 00");
  EXPECT_FALSE(ours.fin);
  EXPECT_FALSE(f.session_->is_ready());
  setup(f);
  ASSERT_TRUE(f.handler_.ready_version.has_value());
  EXPECT_EQ(*f.handler_.ready_version, GetParam().version);
  // GOAWAY (drain) on the SETUP stream: empty URI, timeout 0.
  EXPECT_TRUE(f.session_->send_goaway(""));
  f.pump();
  EXPECT_EQ(hex_of(ours.data), "af 00 00 00 10 00 02 00 00");
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(RequestStreamsTest, SubscribeIsServedOnItsStreamAndItsFinUnsubscribes) {
  IetfFixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  RawStream* r = f.raw_->open_bidi(subscribe(0));
  ASSERT_NE(r, nullptr);
  f.pump();
  // SUBSCRIBE_OK on the request's stream, no request id: alias 0, no params, Track Properties
  // {TIMESCALE (0x08): 1000} (a track whose objects carry their arrival millisecond).
  EXPECT_EQ(hex_of(r->data), "04 00 05 00 00 08 83 e8");
  ASSERT_NE(b.feed("video").track(), nullptr);
  b.write_group("video", 5, {"hi", ""});
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 2u);  // SETUP, then the group
  const RawStream& g = *f.raw_->incoming[1];
  // 17: type 0x19 (with extensions); 18+: with FIRST_OBJECT, 0x59. Alias 0, group 5, priority
  // 7, "hi", empty; each object with {Timestamp (0x10): 1000000}, the fixture clock's millisecond.
  EXPECT_EQ(hex_of(g.data), std::string(d17() ? "19" : "59") +
                                " 00 05 07 00 04 10 cf 42 40 02 68 69 00 04 10 cf 42 40 00 00");
  EXPECT_TRUE(g.fin);
  EXPECT_EQ(f.session_->subscription_count(), 1u);
  // The subscriber closes the stream (17+ have no UNSUBSCRIBE): PUBLISH_DONE status 3
  // (SUBSCRIPTION_ENDED), one stream, "unsubscribed", then FIN.
  r->data.clear();
  r->stream->finish();
  f.pump();
  EXPECT_EQ(hex_of(r->data), "0b 00 0f 03 01 0c 75 6e 73 75 62 73 63 72 69 62 65 64");
  EXPECT_TRUE(r->fin);
  EXPECT_EQ(f.session_->subscription_count(), 0u);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

// As IetfSessionTest.AViewerOnlySessionNeverMakesThePublisherState, with each request on its own
// stream.
TEST_P(RequestStreamsTest, AViewerOnlySessionNeverMakesThePublisherState) {
  IetfFixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  auto& session = dynamic_cast<IetfSession&>(*f.session_);
  setup(f);
  RawStream* r = f.raw_->open_bidi(subscribe(0));
  ASSERT_NE(r, nullptr);
  f.pump();
  ASSERT_NE(b.feed("video").track(), nullptr);
  b.write_group("video", 5, {"hi"});
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 2u);  // SETUP, then the group
  f.advance(std::chrono::seconds(1));
  EXPECT_EQ(session.subscription_count(), 1u);
  EXPECT_FALSE(session.has_publisher_state());
  f.raw_->open_bidi(publish_namespace(2, "bob"));
  f.pump();
  EXPECT_TRUE(f.origin_.is_active("room/bob"));
  EXPECT_TRUE(session.has_publisher_state());
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(RequestStreamsTest, TheTracksEndIsPublishDoneThenFin) {
  IetfFixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  RawStream* r = f.raw_->open_bidi(subscribe(0));
  f.pump();
  b.write_group("video", 0, {"x"});
  b.feed("video").track()->end(make_error(ErrorCode::kCancel, "done"));
  f.pump();
  ASSERT_GE(r->data.size(), 9u);
  // PUBLISH_DONE TRACK_ENDED (0x2), one stream, reason "cancel", then FIN.
  EXPECT_EQ(hex_of(r->data.substr(8, 5)), "0b 00 09 02 01");  // after SUBSCRIBE_OK's TIMESCALE
  EXPECT_TRUE(r->fin);
}

TEST_P(RequestStreamsTest, PublishNamespaceOnItsStreamFeedsTheOriginAndUpstreamSubscribeHasItsOwn) {
  IetfFixture f(GetParam().alpn);
  setup(f);
  RawStream* pn = f.raw_->open_bidi(publish_namespace(0, "alice"));
  f.pump();
  EXPECT_EQ(hex_of(pn->data), "07 00 01 00");  // REQUEST_OK, no request id, no params
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.pump();
  // The relay's SUBSCRIBE on a bidi stream of its own: request id 1.
  ASSERT_EQ(f.raw_->incoming.size(), 2u);
  RawStream& up = *f.raw_->incoming[1];
  ASSERT_GE(up.data.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(up.data[0]), 0x03);
  EXPECT_EQ(static_cast<uint8_t>(up.data[3]), 0x01);
  if (GetParam().number == 20) {
    // d20: the relative filter 1 (the current group from object 0), not "0 0" (Next Object,
    // which @moq/net serves from the middle of the current group).
    EXPECT_NE(hex_of(up.data).find("01 01 01"), std::string::npos) << hex_of(up.data);
  }
  // SUBSCRIBE_OK alias 9 on that stream, then a SUBGROUP stream for alias 9.
  up.write(msg(0x04, "09 00"));
  transport::Stream* u = f.muxes_.client().open_uni();
  u->write(Bytes::from(hex(std::string(d17() ? "18" : "58") + " 09 04 00 00 03 61 62 63 00 00 00")));
  u->finish();
  f.pump();
  const auto* g = viewer.group(4);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->frames, (std::vector<std::string>{"abc", ""}));
  EXPECT_TRUE(g->finished);
  // PUBLISH_DONE (as @moq/net writes it: status 200, count 0, "OK") and FIN: the track ends.
  up.write(hex("0b 00 06 80 c8 00 02 4f 4b"));
  up.stream->finish();
  f.advance(std::chrono::milliseconds(800));  // the quiet grace after PUBLISH_DONE with count 0
  EXPECT_TRUE(viewer.ended);
  // Closing the PUBLISH_NAMESPACE stream withdraws the namespace (17 has no _DONE); FIN back.
  pn->stream->finish();
  f.pump();
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_TRUE(pn->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(RequestStreamsTest, DatagramsOfAnUpstreamSubscribeBecomeGroups) {
  // OBJECT_DATAGRAMs (d17 §10.3.1, d18+ §11.3.1) for the alias of moqd's upstream SUBSCRIBE, handed
  // to the session as the QUIC / WebTransport transport would.
  IetfFixture f(GetParam().alpn);
  setup(f);
  f.raw_->open_bidi(publish_namespace(0, "alice"));
  f.pump();
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 2u);
  f.raw_->incoming[1]->write(msg(0x04, "09 00"));  // SUBSCRIBE_OK alias 9
  f.pump();
  auto* s = dynamic_cast<IetfSession*>(f.session_.get());
  ASSERT_NE(s, nullptr);
  auto datagram = [&](std::string_view h) {
    const auto bytes = hex(h);
    s->on_datagram(std::span<const uint8_t>(bytes));
    f.pump();
  };
  // 0x0C (Object ID 0, default priority), group 100 in one leading-ones byte; then a status
  // datagram 0x20 at Object ID 1, priority 0x80: End of Group (3).
  datagram("0c 09 64 6869");
  ASSERT_NE(viewer.group(100), nullptr);
  EXPECT_FALSE(viewer.group(100)->finished);
  datagram("20 09 64 01 80 03");
  EXPECT_EQ(viewer.group(100)->frames, (std::vector<std::string>{"hi"}));
  EXPECT_TRUE(viewer.group(100)->finished);
  // 0x0F: PROPERTIES (a timestamp 0x10 = 5), END_OF_GROUP, Object ID 0, default priority.
  datagram("0f 09 65 02 10 05 7a");
  ASSERT_NE(viewer.group(101), nullptr);
  EXPECT_EQ(viewer.group(101)->frames, (std::vector<std::string>{"z"}));
  EXPECT_TRUE(viewer.group(101)->finished);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  // Properties on an End of Group status: "only Normal Objects can have Properties",
  // PROTOCOL_VIOLATION (0x3).
  datagram("25 09 66 80 02 10 05 03");
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x3u);
}

TEST_P(RequestStreamsTest, RequestIdsAreEvenNeverReusedAndMayArriveOutOfOrder) {
  {
    IetfFixture f(GetParam().alpn);
    setup(f);
    // 4 before 0 and 2: each stream is its own, so a later id may overtake.
    f.raw_->open_bidi(publish_namespace(4, "c"));
    f.raw_->open_bidi(publish_namespace(0, "a"));
    f.raw_->open_bidi(publish_namespace(2, "b"));
    f.pump();
    EXPECT_FALSE(f.raw_->closed_code.has_value());
    EXPECT_TRUE(f.origin_.is_active("room/a"));
    EXPECT_TRUE(f.origin_.is_active("room/b"));
    EXPECT_TRUE(f.origin_.is_active("room/c"));
    // 2 again: INVALID_REQUEST_ID.
    f.raw_->open_bidi(publish_namespace(2, "d"));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x4u);
  }
  {
    IetfFixture f(GetParam().alpn);
    setup(f);
    // 0, its stream closed (the namespace withdrawn), then 0 again: still a reuse.
    RawStream* a = f.raw_->open_bidi(publish_namespace(0, "a"));
    f.pump();
    a->stream->finish();
    f.pump();
    EXPECT_FALSE(f.origin_.is_active("room/a"));
    EXPECT_FALSE(f.raw_->closed_code.has_value());
    f.raw_->open_bidi(publish_namespace(0, "b"));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x4u);
  }
  {
    IetfFixture f(GetParam().alpn);
    setup(f);
    f.raw_->open_bidi(publish_namespace(1, "a"));  // odd: the client's ids are even
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x4u);
  }
}

TEST_P(RequestStreamsTest, BadStreamsCloseWithTheDraftsCode) {
  {
    IetfFixture f(GetParam().alpn);
    setup(f);
    f.raw_->open_bidi(msg(0x3e, ""));  // unknown message type
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
  {
    IetfFixture f(GetParam().alpn);
    setup(f);
    f.raw_->open_bidi(msg(0x04, "00 00"));  // a response cannot open a request stream
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
  {
    IetfFixture f(GetParam().alpn);
    setup(f);
    f.raw_->open_bidi(msg(0x15, "10"));  // MAX_REQUEST_ID is gone in 17+: an unknown type
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
  {
    IetfFixture f(GetParam().alpn);
    f.pump();
    // The first uni stream must start with SETUP: a GOAWAY there (a message the draft knows) is a
    // violation.
    transport::Stream* u = f.muxes_.client().open_uni();
    u->write(Bytes::from(hex("10 00 02 00 00")));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
  {
    IetfFixture f(GetParam().alpn);
    setup(f);
    // A second SETUP on a second uni stream.
    transport::Stream* u = f.muxes_.client().open_uni();
    u->write(Bytes::from(hex(kSetup)));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
}

TEST_P(RequestStreamsTest, RefusalsGoOnTheRequestsStream) {
  IetfFixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  if (GetParam().number == 20) {
    // Relative 2 (a group before the current one): REQUEST_ERROR NOT_SUPPORTED (0x3), FIN.
    RawStream* r = f.raw_->open_bidi(subscribe(0, 2));
    f.pump();
    ASSERT_GE(r->data.size(), 4u);
    EXPECT_EQ(static_cast<uint8_t>(r->data[0]), 0x05);
    EXPECT_EQ(static_cast<uint8_t>(r->data[3]), 0x03);
    EXPECT_TRUE(r->fin);
    // Relative 0: the next group; accepted.
    RawStream* ok = f.raw_->open_bidi(subscribe(2, 0));
    f.pump();
    ASSERT_GE(ok->data.size(), 1u);
    EXPECT_EQ(static_cast<uint8_t>(ok->data[0]), 0x04);
  } else {
    // An unknown broadcast: REQUEST_ERROR DOES_NOT_EXIST (0x10), FIN, the session stays.
    RawStream* r = f.raw_->open_bidi(
        msg(0x03, id(0) + " 01 04 6e 6f 6e 65 01 76 04 10 01 10 07 01 01 02 01 02"));
    f.pump();
    ASSERT_GE(r->data.size(), 4u);
    EXPECT_EQ(static_cast<uint8_t>(r->data[0]), 0x05);
    EXPECT_EQ(static_cast<uint8_t>(r->data[3]), 0x10);
    EXPECT_TRUE(r->fin);
  }
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

INSTANTIATE_TEST_SUITE_P(Drafts, RequestStreamsTest, testing::request_stream_drafts(),
                         testing::request_stream_draft_name);

// One @moq/net-like relay peer of a cluster-node moqd (relay hop id kRelay), on its own fake
// wire, its server-side session feeding `origin` (shared by every peer of the test).
class ClusterPeer {
 public:
  static constexpr uint64_t kRelay = 0x7777;
  ClusterPeer(ManualClock& clock, model::Origin& origin, const char* alpn)
      : handler_(origin), muxes_(clock, alpn) {
    raw_ = std::make_unique<RawPeer>(muxes_.client());
    muxes_.client().set_visitor(raw_.get());
    SessionConfig sc;
    sc.role = Role::kServer;
    sc.ietf_relay_hops = kRelay;
    session_ = make_session(muxes_.server(), sc, origin, handler_, clock, clock);
    session_->start();
  }
  ~ClusterPeer() { session_.reset(); }  // then muxes_ goes, then raw_
  size_t deliver() { return muxes_.channels().deliver(); }
  // SETUP declaring hop id `self` and, unless 0, RELAY_COST `relay_cost`.
  void setup(wire::Version v, uint64_t self, uint64_t relay_cost) {
    wi::Setup setup;
    std::vector<uint8_t> id;
    wi::write_varint(wi::VarintForm::kLeadingOnes, self, id);
    setup.options.push_back(wi::Parameter{wi::kSetupRelayHops, 0, std::string(id.begin(), id.end())});
    if (relay_cost != 0) {
      setup.options.push_back(wi::Parameter{wi::kSetupRelayCost, relay_cost, {}});
    }
    std::vector<uint8_t> out;
    ASSERT_TRUE(wi::encode(v, setup, out));
    transport::Stream* u = muxes_.client().open_uni();
    ASSERT_NE(u, nullptr);
    u->write(Bytes::from(out));
  }
  // PUBLISH_NAMESPACE room/`name` with HOP_PATH {self} and ROUTE_COST `route_cost`.
  void publish(wire::Version v, const std::string& name, uint64_t self, uint64_t route_cost) {
    wi::PublishNamespace pn;
    pn.ns = {"room", name};
    ASSERT_TRUE(wi::append_advert(wi::Advert{{self}, route_cost}, pn.params));
    std::vector<uint8_t> out;
    ASSERT_TRUE(wi::encode(v, pn, out));
    ASSERT_NE(raw_->open_bidi(std::move(out)), nullptr);
  }
  bool closed() const { return raw_->closed_code.has_value(); }

 private:
  RecordingHandler handler_;
  std::unique_ptr<RawPeer> raw_;  // the client mux's visitor: outlives muxes_
  testing::MuxPair muxes_;
  std::unique_ptr<MoqSession> session_;
};

// Two relay peers announce room/x over one hop each (equal hop counts): the route with the lower
// ROUTE_COST + RELAY_COST is active, whichever of the two costs makes the difference, and the
// other way round when the costs swap. Peer A's hop id is the smaller, so A wins every tie.
TEST_P(RequestStreamsTest, ClusterRoutesAreScoredWithRouteCostPlusRelayCost) {
  constexpr uint64_t kA = 0xa1;
  constexpr uint64_t kB = 0xb1;
  struct Case {
    uint64_t a_relay, a_route, b_relay, b_route;
    uint64_t winner;
  };
  const Case cases[] = {
      {5, 0, 0, 2, kB},  // B by RELAY_COST alone: 1 + 5 > 1 + 2
      {0, 2, 5, 0, kA},  // the same costs swapped
      {0, 4, 2, 0, kB},  // B by ROUTE_COST alone: 1 + 4 > 1 + 2
      {2, 0, 0, 4, kA},  // swapped
  };
  const wire::Version v = GetParam().version;
  for (const Case& c : cases) {
    ManualClock clock;
    model::Origin origin(model::OriginConfig{}, clock, clock);
    ClusterPeer a(clock, origin, GetParam().alpn);
    ClusterPeer b(clock, origin, GetParam().alpn);
    auto pump = [&] {
      int quiet = 0;
      for (int i = 0; i < 100000 && quiet < 2; ++i) {
        clock.advance(Duration::zero());
        quiet = a.deliver() + b.deliver() == 0 ? quiet + 1 : 0;
      }
    };
    pump();
    a.setup(v, kA, c.a_relay);
    b.setup(v, kB, c.b_relay);
    pump();
    a.publish(v, "x", kA, c.a_route);
    pump();
    b.publish(v, "x", kB, c.b_route);
    pump();
    ASSERT_FALSE(a.closed());
    ASSERT_FALSE(b.closed());
    auto routes = origin.routes("room/x");
    ASSERT_EQ(routes.size(), 2u);
    EXPECT_TRUE(routes[0].active);
    EXPECT_EQ(routes[0].hops, model::Hops{c.winner})
        << "A " << c.a_relay << "+" << c.a_route << ", B " << c.b_relay << "+" << c.b_route;
    const bool a_won = c.winner == kA;
    EXPECT_EQ(routes[0].cost, a_won ? c.a_relay + c.a_route : c.b_relay + c.b_route);
    EXPECT_EQ(routes[1].cost, a_won ? c.b_relay + c.b_route : c.a_relay + c.a_route);
  }
}

}  // namespace d17

// A relay's IETF session borrows its worker's shared SessionConfig (make_session's borrowing
// overload): the root and query it uses are its own, never the shared config's.
class QueryHandler final : public SessionHandler {
 public:
  explicit QueryHandler(model::Origin& origin) : origin_(origin) {}
  bool authorize(Action action, std::string_view path, std::string_view query) override {
    calls.push_back({action, std::string(path), std::string(query)});
    return true;
  }
  void on_session_ready(wire::Version) override {}
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                        model::BroadcastSource& source) override {
    if (active) {
      origin_.announce(path, &source, hops);
    } else {
      origin_.unannounce(path, &source);
    }
  }
  void on_session_closed(Error) override {}
  struct Call {
    Action action;
    std::string path, query;
  };
  std::vector<Call> calls;

 private:
  model::Origin& origin_;
};

TEST(IetfSessionTest, ASharedConfigLeavesRootAndQueryToTheSession) {
  ManualClock clock;
  model::Origin origin(model::OriginConfig{}, clock, clock);
  QueryHandler handler(origin);
  testing::MuxPair muxes(clock, "moqt-16");
  RawPeer raw(muxes.client());
  muxes.client().set_visitor(&raw);
  SessionConfig shared;
  shared.role = Role::kServer;
  shared.root = "not/this";
  shared.query = "shared=wrong";
  auto session = make_session(muxes.server(), shared, "/site", "jwt=mine", origin, handler, clock, clock);
  session->start();
  auto pump = [&] {  // until the wire has been quiet twice, as IetfServerFixture::pump
    int quiet = 0;
    for (int i = 0; i < 100000 && quiet < 2; ++i) {
      clock.advance(Duration::zero());
      quiet = muxes.channels().deliver() == 0 ? quiet + 1 : 0;
    }
  };
  pump();
  RawStream* c = raw.open_bidi(hex(kD16ClientSetup));
  ASSERT_NE(c, nullptr);
  pump();
  // PUBLISH_NAMESPACE id 0 ["room","alice"] params 0: published under the session's root.
  c->write(hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
  pump();
  EXPECT_TRUE(origin.is_active("site/room/alice"));
  ASSERT_GE(handler.calls.size(), 2u);
  EXPECT_EQ(handler.calls[0].action, Action::kConnect);
  EXPECT_EQ(handler.calls[0].path, "site");
  bool published = false;
  for (const auto& call : handler.calls) {
    EXPECT_EQ(call.query, "jwt=mine");
    published = published || (call.action == Action::kPublish && call.path == "site/room/alice");
  }
  EXPECT_TRUE(published);
  session.reset();
}

}  // namespace
}  // namespace moqd::session
