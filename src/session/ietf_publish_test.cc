// PUBLISH of the IETF session (drafts 14, 16 and 17..20, ietf_publish.h), on a fake transport: a RawPeer
// publisher writes PUBLISH and SUBGROUP streams byte by byte (layouts: wire/ietf_publish_test.cc)
// and the track shows up in the origin, where a viewer reads it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/codec.h"
#include "session/ietf_session.h"
#include "session/session.h"
#include "testing/ietf_fixture.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace publish_test {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;
using moqd::testing::RecordingHandler;
using transport::websocket::MuxSession;

using testing::hex;
using testing::hex_of;
using testing::canon;
using testing::kD16Setup;
using testing::kD14Setup;

// The shared server fixture: testing/ietf_fixture.h.
using Fixture = testing::IetfServerFixture;

// d16 PUBLISH id 0 ["room","alice"] "video" alias 5, FORWARD 1, no Largest, no extensions.
const char* kD16Publish = "1d 00 17 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 01 10 01";
// The answer: PUBLISH_OK id 0, FORWARD 1, SUBSCRIBER_PRIORITY 128, SUBSCRIPTION_FILTER Next Group
// Start (delta-coded 10, +10, +01).
const char* kD16PublishOk = "1e 00 0a 00 03 10 01 10 4080 01 01 01";
// SUBGROUP stream (0x18) alias 5, group 4, priority 0, objects "abc" and "z".
const char* kGroup4 = "18 05 04 00 00 03 616263 00 01 7a";

// The peer sends kGroup4 (after a PUBLISH of alias 5), then `viewer` subscribes to room/alice's
// "video" here: a viewer that joins once the group is cached.
void send_group4_then_view(Fixture& f, testing::FrameCollector& viewer) {
  f.peer_stream(kGroup4);
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.pump();
}

TEST(IetfPublishSession, Draft16PublishFeedsTheOriginUntilPublishDone) {
  Fixture f("moqt-16");
  RawStream& c = f.open_control(kD16Setup);
  EXPECT_EQ(f.exchange(c, kD16Publish), canon(kD16PublishOk));
  // The namespace became a broadcast of this session, without PUBLISH_NAMESPACE.
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
  EXPECT_EQ(f.handler_.auth_count(Action::kPublish, "room/alice"), 1u);
  // Objects flow before anyone watches: the relay keeps the track, a late viewer joins the
  // cached group.
  c.data.clear();
  testing::FrameCollector viewer;
  ASSERT_NO_FATAL_FAILURE(send_group4_then_view(f, viewer));
  const auto* g = viewer.group(4);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->frames, (std::vector<std::string>{"abc", "z"}));
  EXPECT_TRUE(g->finished);
  // No SUBSCRIBE went upstream for it: the PUBLISH is the subscription.
  EXPECT_EQ(hex_of(c.data), "");
  // Group 5 reaches the viewer live.
  f.peer_stream("18 05 05 00 00 01 71");
  ASSERT_NE(viewer.group(5), nullptr);
  EXPECT_EQ(viewer.group(5)->frames, (std::vector<std::string>{"q"}));
  // PUBLISH_DONE id 0, TRACK_ENDED, 2 streams: the track ends, moqd answers UNSUBSCRIBE and the
  // broadcast it announced for the PUBLISH goes.
  EXPECT_EQ(f.exchange(c, "0b 00 04 00 02 02 00"), canon("0a 00 01 00"));
  EXPECT_TRUE(viewer.ended);
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfPublishSession, Draft14PublishAnswersWithFields) {
  Fixture f("", testing::only_draft14());
  RawStream& c = f.open_control(kD14Setup);
  // d14 PUBLISH: Group Order 2, Content Exists 1, Largest {3, 1}, Forward 0.
  const std::string ok =
      f.exchange(c, "1d 00 1a 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 02 01 03 01 00 00");
  // PUBLISH_OK: Forward 1 (moqd always forwards), priority 128, the publisher's group order 2,
  // Filter Next Group Start, no parameters.
  EXPECT_EQ(ok, canon("1e 00 06 00 01 80 02 01 00"));
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.peer_stream("18 05 07 00 00 02 6869");
  ASSERT_NE(viewer.group(7), nullptr);
  EXPECT_EQ(viewer.group(7)->frames, (std::vector<std::string>{"hi"}));
}

TEST(IetfPublishSession, RefusedPublishes) {
  {
    // Unauthorized: REQUEST_ERROR id 0 UNAUTHORIZED (retry interval 0, reason).
    Fixture f("moqt-16");
    f.handler_.deny_publish = true;
    RawStream& c = f.open_control(kD16Setup);
    EXPECT_EQ(f.error_of(c, kD16Publish), (std::vector<int>{0x05, 0, 0x1}));
    EXPECT_FALSE(f.origin_.is_active("room/alice"));
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
  {
    // d14: the refusal is PUBLISH_ERROR (0x1F).
    Fixture f("", testing::only_draft14());
    f.handler_.deny_publish = true;
    RawStream& c = f.open_control(kD14Setup);
    EXPECT_EQ(f.error_of(c, "1d 00 18 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 02 00 01 00"),
              (std::vector<int>{0x1f, 0, 0x1}));
  }
  {
    // The same track PUBLISHed twice: the second is refused (UNINTERESTED), the first goes on.
    Fixture f("moqt-16");
    RawStream& c = f.open_control(kD16Setup);
    f.exchange(c, kD16Publish);
    EXPECT_EQ(f.error_of(c, "1d 00 17 02 02 04 726f6f6d 05 616c696365 05 766964656f 06 01 10 01"),
              (std::vector<int>{0x05, 2, 0x4}));
    EXPECT_TRUE(f.origin_.is_active("room/alice"));
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
  {
    // A Track Alias already in use (d14 §9.13): DUPLICATE_TRACK_ALIAS closes the session.
    Fixture f("moqt-16");
    RawStream& c = f.open_control(kD16Setup);
    f.exchange(c, kD16Publish);
    f.exchange(c, "1d 00 17 02 02 04 726f6f6d 05 616c696365 05 617564696f 05 01 10 01");
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x5u);
  }
}

TEST(IetfPublishSession, PublishUnderAPublishedNamespaceLeavesItAnnounced) {
  Fixture f("moqt-16");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, "06 00 0e 00 02 04 726f6f6d 05 616c696365 00");  // PUBLISH_NAMESPACE id 0
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  EXPECT_EQ(f.exchange(c, "1d 00 17 02 02 04 726f6f6d 05 616c696365 05 766964656f 05 01 10 01"),
            canon("1e 00 0a 02 03 10 01 10 4080 01 01 01"));
  f.exchange(c, "0b 00 04 02 02 00 00");  // PUBLISH_DONE id 2, no streams
  for (int i = 0; i < 300; ++i) {
    f.clock_.advance(std::chrono::milliseconds(10));
    f.pump();
  }
  // The namespace was PUBLISH_NAMESPACEd: the PUBLISH ending does not withdraw it.
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
}

TEST(IetfPublishSession, SessionEndWithdrawsWhatPublishAnnounced) {
  Fixture f("moqt-16");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, kD16Publish);
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.muxes_.client().close(0, "bye");
  f.pump();
  EXPECT_TRUE(viewer.ended);
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
}

}  // namespace publish_test
}  // namespace moqd::session

namespace moqd::session {
namespace publish_test {

// OBJECT_DATAGRAMs (ietf_datagram.h) of a PUBLISHed track, handed to the session as the QUIC /
// WebTransport transport would (the fake transport has no datagrams).
void datagram(Fixture& f, std::string_view h) {
  auto* s = dynamic_cast<IetfSession*>(f.session_.get());
  ASSERT_NE(s, nullptr);
  const auto bytes = hex(h);
  s->on_datagram(std::span<const uint8_t>(bytes));
  f.pump();
}

TEST(IetfPublishSession, Draft16DatagramsBecomeGroups) {
  Fixture f("moqt-16");
  RawStream& c = f.open_control(kD16Setup);
  ASSERT_EQ(f.exchange(c, kD16Publish), canon(kD16PublishOk));
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  // 0x06 (End of Group, Object ID 0, priority 0x80): a single-object group 4.
  datagram(f, "06 05 04 80 616263");
  ASSERT_NE(viewer.group(4), nullptr);
  EXPECT_EQ(viewer.group(4)->frames, (std::vector<std::string>{"abc"}));
  EXPECT_TRUE(viewer.group(4)->finished);
  // Group 5 in three datagrams: 0x0C (Object ID 0, default priority), 0x08 (Object ID 1), then a
  // status datagram 0x28 (Object ID 2): END_OF_GROUP (3).
  datagram(f, "0c 05 05 6869");
  datagram(f, "08 05 05 01 7a");
  ASSERT_NE(viewer.group(5), nullptr);
  EXPECT_FALSE(viewer.group(5)->finished);
  datagram(f, "28 05 05 02 03");
  EXPECT_EQ(viewer.group(5)->frames, (std::vector<std::string>{"hi", "z"}));
  EXPECT_TRUE(viewer.group(5)->finished);
  // Group 6: object 1 lost, so object 2 is dropped; group 7 finishes group 6 as it begins.
  datagram(f, "0c 05 06 71");
  datagram(f, "08 05 06 02 72");
  datagram(f, "0e 05 07 73");
  EXPECT_EQ(viewer.group(6)->frames, (std::vector<std::string>{"q"}));
  EXPECT_TRUE(viewer.group(6)->finished);
  EXPECT_EQ(viewer.group(7)->frames, (std::vector<std::string>{"s"}));
  // An alias nobody subscribed: dropped, the session stays.
  datagram(f, "06 09 01 80 61");
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  // EXTENSIONS with an empty block (d16 §10.3.1): PROTOCOL_VIOLATION.
  datagram(f, "01 05 08 00 80 00 61");
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x3u);
}

TEST(IetfPublishSession, Draft16DatagramsOfASubscribedTrack) {
  // A SUBSCRIBE moqd sent upstream (PUBLISH_NAMESPACE, a viewer) gets its objects by datagram too.
  Fixture f("moqt-16");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, "06 00 0e 00 02 04 726f6f6d 05 616c696365 00");
  testing::FrameCollector viewer;
  c.data.clear();
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.pump();
  ASSERT_FALSE(c.data.empty());
  EXPECT_EQ(static_cast<uint8_t>(c.data[0]), 0x03);  // SUBSCRIBE id 1
  f.exchange(c, "04 00 03 01 09 00");                    // SUBSCRIBE_OK id 1 alias 9
  datagram(f, "06 09 02 80 6869");
  ASSERT_NE(viewer.group(2), nullptr);
  EXPECT_EQ(viewer.group(2)->frames, (std::vector<std::string>{"hi"}));
  EXPECT_TRUE(viewer.group(2)->finished);
}

}  // namespace publish_test
}  // namespace moqd::session

namespace moqd::session {
namespace publish_test {

TEST(IetfPublishSession, Draft17DatagramForNoSubscriptionIsDropped) {
  // d17: a datagram whose alias has no live subscription is dropped and counted, the session
  // stays (a datagram is no protocol error). Datagrams of a live alias on 17..20:
  // RequestStreamsTest.DatagramsOfAnUpstreamSubscribeBecomeGroups (ietf_session_test.cc).
  Fixture f("moqt-17");
  transport::Stream* u = f.muxes_.client().open_uni();
  ASSERT_NE(u, nullptr);
  u->write(Bytes::from(hex("af 00 00 00")));  // SETUP, no options
  f.pump();
  ASSERT_TRUE(f.session_->is_ready());
  datagram(f, "06 05 04 80 61");
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

// --- Drafts 17..20: PUBLISH on its own request stream (d17 §9.11-9.13, d18/19 §10.10-10.11 with
// REQUEST_OK §10.5, d20 §10.11-10.12; layouts: wire/ietf_publish_d17_test.cc).

struct PublishDraft {
  int number;
  const char* alpn;
};
void PrintTo(const PublishDraft& d, std::ostream* os) { *os << d.alpn; }

class PublishRequestStreamTest : public ::testing::TestWithParam<PublishDraft> {
 protected:
  bool d17() const { return GetParam().number == 17; }
  bool d20() const { return GetParam().number == 20; }
  // `type length(16) body` (types and values below 0x40 here: one-byte varints in every form).
  static std::vector<uint8_t> msg(uint8_t type, const std::string& body_hex) {
    return testing::ietf_message(type, body_hex);
  }
  // PUBLISH `id` of ["room","alice"] `track` (hex) under `alias`, FORWARD `forward`, Track
  // Properties `properties` (hex; d17: Required Request ID Delta 0 after the id).
  std::vector<uint8_t> publish(uint8_t id, uint8_t alias, bool forward = true,
                               const std::string& track = "05 766964656f",
                               const std::string& properties = "") const {
    char head[16];
    std::snprintf(head, sizeof head, d17() ? "%02x 00 " : "%02x ", id);
    char tail[16];
    std::snprintf(tail, sizeof tail, " %02x 01 10 %02x ", alias, forward ? 1 : 0);
    return msg(0x1d, std::string(head) + "02 04 726f6f6d 05 616c696365 " + track + tail + properties);
  }
  // SUBSCRIBE `id` of ["room","alice"] "video": FORWARD 1, SUBSCRIBER_PRIORITY 7, the draft's join
  // filter (17..19 LargestObject, 20 relative 1), GROUP_ORDER 2.
  std::vector<uint8_t> subscribe(uint8_t id) const {
    char head[16];
    std::snprintf(head, sizeof head, d17() ? "%02x 00 " : "%02x ", id);
    return msg(0x03, std::string(head) + "02 04 726f6f6d 05 616c696365 05 766964656f 04 10 01 10 07 01 01 " +
                         (d20() ? "01" : "02") + " 01 02");
  }
  // moqd's acceptance: d17 PUBLISH_OK (0x1E, no Request ID): FORWARD 1, SUBSCRIBER_PRIORITY 128 (a
  // uint8), SUBSCRIPTION_FILTER Next Group Start; d18/19 the same parameters in REQUEST_OK with
  // empty Track Properties; d20 (#1834) an empty REQUEST_OK.
  std::string accepted() const {
    if (d20()) {
      return canon("07 00 01 00");
    }
    return canon(std::string(d17() ? "1e" : "07") + " 00 08 03 10 01 10 80 01 01 01");
  }
  void setup(Fixture& f) {
    transport::Stream* u = f.muxes_.client().open_uni();
    ASSERT_NE(u, nullptr);
    u->write(Bytes::from(hex("af 00 00 00")));  // SETUP, no options
    f.pump();
    ASSERT_TRUE(f.session_->is_ready());
  }
  // REQUEST_ERROR's code: type 0x05, length (16), then the code (one byte here).
  static int code_of(const RawStream& r) {
    if (r.data.size() < 4 || static_cast<uint8_t>(r.data[0]) != 0x05) {
      return -1;
    }
    return static_cast<uint8_t>(r.data[3]);
  }
};

TEST_P(PublishRequestStreamTest, PublishFeedsTheOriginUntilPublishDone) {
  Fixture f(GetParam().alpn);
  setup(f);
  const size_t before = f.raw_->incoming.size();
  // Request id 4 (ids may skip, d18 §10.1): PUBLISH_DONE, which names none, is matched by stream.
  RawStream* r = f.raw_->open_bidi(publish(4, 5));
  f.pump();
  EXPECT_EQ(hex_of(r->data), accepted());
  EXPECT_FALSE(r->fin);
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
  EXPECT_EQ(f.handler_.auth_count(Action::kPublish, "room/alice"), 1u);
  testing::FrameCollector viewer;
  ASSERT_NO_FATAL_FAILURE(send_group4_then_view(f, viewer));
  ASSERT_NE(viewer.group(4), nullptr);
  EXPECT_EQ(viewer.group(4)->frames, (std::vector<std::string>{"abc", "z"}));
  // No SUBSCRIBE went upstream: moqd opened no request stream of its own.
  EXPECT_EQ(f.raw_->incoming.size(), before);
  f.peer_stream("18 05 05 00 00 01 71");
  ASSERT_NE(viewer.group(5), nullptr);
  // PUBLISH_DONE (no Request ID) TRACK_ENDED, Stream Count 3: two streams came, so the track
  // waits for the third.
  r->data.clear();
  r->write(hex("0b 00 03 02 03 00"));
  f.pump();
  EXPECT_FALSE(viewer.ended);
  f.peer_stream("18 05 06 00 00 01 72");
  ASSERT_NE(viewer.group(6), nullptr);
  EXPECT_EQ(viewer.group(6)->frames, (std::vector<std::string>{"r"}));
  // The third stream read: the track ends, the broadcast announced for the PUBLISH goes, and moqd
  // closes its side of the request stream (d17: UNSUBSCRIBE) with nothing more on it.
  EXPECT_TRUE(viewer.ended);
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_TRUE(r->fin);
  EXPECT_EQ(hex_of(r->data), "");
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishRequestStreamTest, ClosingThePublishStreamEndsTheTrack) {
  Fixture f(GetParam().alpn);
  setup(f);
  RawStream* r = f.raw_->open_bidi(publish(0, 5));
  f.pump();
  testing::FrameCollector viewer;
  ASSERT_NO_FATAL_FAILURE(send_group4_then_view(f, viewer));
  // FIN with no PUBLISH_DONE: read as one with an unknown Stream Count; the track ends once no
  // stream of it has been seen for a while, and moqd's side closes too.
  r->stream->finish();
  f.pump();
  EXPECT_TRUE(r->fin);
  f.advance(std::chrono::seconds(1));
  EXPECT_TRUE(viewer.ended);
  ASSERT_NE(viewer.group(4), nullptr);
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishRequestStreamTest, UncountedStreamCountEndsAfterAQuietSpell) {
  Fixture f(GetParam().alpn);
  setup(f);
  RawStream* r = f.raw_->open_bidi(publish(0, 5));
  f.pump();
  testing::FrameCollector viewer;
  ASSERT_NO_FATAL_FAILURE(send_group4_then_view(f, viewer));
  // PUBLISH_DONE with Stream Count 2^62-1 (d17 §9.13, d18 §10.11: the publisher could not count
  // its streams; the 9-byte leading-ones form); d20 §10.12 (#1831) writes it 2^64-1: no count to
  // wait for, so the track ends once no stream has come for a while, well before the latest
  // bound (5 s).
  r->write(hex(d20() ? "0b 00 0b 02 ffffffffffffffffff 00" : "0b 00 0b 02 ff3fffffffffffffff 00"));
  f.pump();
  EXPECT_FALSE(viewer.ended);
  f.advance(std::chrono::seconds(1));
  EXPECT_TRUE(viewer.ended);
  EXPECT_TRUE(r->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

// A PUBLISH's Track Properties (d17 §9.11, d18/19 §10.10, d20 §10.11: after the parameters, to the
// end of the message) with {TIMESCALE (0x08): 90000} (LOC; the d18 §15 Properties registry): the
// track is known in those units, as an upstream SUBSCRIBE_OK's TIMESCALE makes it, so an IETF
// subscriber's SUBSCRIBE_OK declares it and the publisher's object Timestamps pass unchanged
// (moq-lite-05 viewers: TRACK_INFO timescale 90000, ietf_publish_d17.test.mjs).
TEST_P(PublishRequestStreamTest, PublishTimescaleIsTheTracksTimescale) {
  Fixture f(GetParam().alpn);
  setup(f);
  // 90000 in the leading-ones forms of 17..20: c1 5f 90.
  RawStream* r = f.raw_->open_bidi(publish(0, 5, true, "05 766964656f", "08 c1 5f 90"));
  f.pump();
  EXPECT_EQ(hex_of(r->data), accepted());
  model::Track* t = f.origin_.track("room/alice", "video");
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->properties().has_value());
  EXPECT_TRUE(t->properties()->timescale_known);
  EXPECT_EQ(t->properties()->timescale, 90000u);
  // An IETF subscriber (the same peer, on a request stream of its own): SUBSCRIBE_OK alias 2, no
  // parameters, Track Properties {TIMESCALE: 90000}.
  RawStream* s = f.raw_->open_bidi(subscribe(2));
  ASSERT_NE(s, nullptr);
  f.pump();
  EXPECT_EQ(hex_of(s->data), canon("04 00 06 02 00 08 c1 5f 90"));
  // SUBGROUP (0x19: properties, subgroup 0, end of group) alias 5, group 4, priority 0; object 0
  // with {Timestamp (0x10): 1000000} (10 cf 42 40), payload "z".
  f.peer_stream("19 05 04 00 00 04 10 cf 42 40 01 7a");
  uint64_t stamp = 0;
  t->for_each_group_from(0, [&](const model::GroupRef& g) {
    if (g->sequence() == 4 && !g->objects().empty()) {
      stamp = g->objects()[0].timestamp;
    }
  });
  EXPECT_EQ(stamp, 1000000u);
  const std::string data = hex_of(f.raw_->incoming.back()->data);
  const std::string tail = canon("00 04 10 cf 42 40 01 7a");
  ASSERT_GE(data.size(), tail.size());
  EXPECT_EQ(data.substr(data.size() - tail.size()), tail) << data;
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishRequestStreamTest, RefusalsAndViolations) {
  {
    // Unauthorized: REQUEST_ERROR UNAUTHORIZED (0x1) on the stream, then FIN; the session stays.
    Fixture f(GetParam().alpn);
    f.handler_.deny_publish = true;
    setup(f);
    RawStream* r = f.raw_->open_bidi(publish(0, 5));
    f.pump();
    EXPECT_EQ(code_of(*r), 0x1);
    EXPECT_TRUE(r->fin);
    EXPECT_FALSE(f.origin_.is_active("room/alice"));
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
  {
    // FORWARD 0: accepted, with FORWARD 1 in the answer on 17..19; d20's empty REQUEST_OK leaves
    // the publisher paused (PublishForwardZeroTest: moqd starts it with REQUEST_UPDATE).
    Fixture f(GetParam().alpn);
    setup(f);
    RawStream* r = f.raw_->open_bidi(publish(0, 5, false));
    f.pump();
    EXPECT_EQ(hex_of(r->data), accepted());
    EXPECT_FALSE(r->fin);
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
  // After PUBLISH id 0 alias 5, a second one (track "audio") that reuses the Track Alias:
  // DUPLICATE_TRACK_ALIAS (0x5) closes the session; one that reuses the live request's id:
  // INVALID_REQUEST_ID (0x4).
  struct Reuse {
    uint8_t id;
    uint8_t alias;
    uint64_t code;
  };
  for (const Reuse& reuse : {Reuse{2, 5, 0x5}, Reuse{0, 6, 0x4}}) {
    SCOPED_TRACE(reuse.code);
    Fixture f(GetParam().alpn);
    setup(f);
    f.raw_->open_bidi(publish(0, 5));
    f.pump();
    f.raw_->open_bidi(publish(reuse.id, reuse.alias, true, "05 617564696f"));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, reuse.code);
  }
  {
    // Anything but PUBLISH_DONE after the PUBLISH on its stream (here REQUEST_OK): a protocol
    // violation (0x3).
    Fixture f(GetParam().alpn);
    setup(f);
    RawStream* r = f.raw_->open_bidi(publish(0, 5));
    f.pump();
    r->write(hex("07 00 01 00"));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
}

// d20 PUBLISH with FORWARD 0 (§10.11: the publisher "will not transmit any objects until the
// subscriber sets the Forward State to 1"; #1834 took FORWARD out of the answer). moqd steers it
// with REQUEST_UPDATE (§10.9) on the PUBLISH's stream by the track's demand (§9.5 "The relay MAY
// pause the Subscription with REQUEST_UPDATE in Forward State=0 until there are known
// subscribers"). Drafts 14..19 answer FORWARD 1 (RefusalsAndViolations above, and
// IetfPublishSession for 14/16).
class PublishForwardZeroTest : public PublishRequestStreamTest {
 protected:
  // REQUEST_UPDATE (§10.9): Type 0x2, Length (16), Request ID (moqd's: a server's, odd, §10.1;
  // each update takes a new one), Number of Parameters 1, FORWARD (0x10, §10.2 uint8) `forward`.
  static std::string update(uint8_t id, bool forward) {
    char b[40];
    std::snprintf(b, sizeof b, "02 00 04 %02x 01 10 %02x", id, forward ? 1 : 0);
    return canon(b);
  }
  // REQUEST_OK (§10.5) with no parameters and no Track Properties: the publisher's yes.
  static constexpr const char* kOk = "07 00 01 00";
  static constexpr Duration kLinger = model::OriginConfig{}.upstream_linger;
  // The peer's PUBLISH of room/alice "video" (request 0, alias 5, FORWARD 0) after SETUP: its
  // request stream.
  RawStream* open_publish(Fixture& f) {
    setup(f);
    RawStream* r = f.raw_->open_bidi(publish(0, 5, false));
    f.pump();
    return r;
  }
  // `viewer` subscribes to room/alice "video", and the session hears of it.
  static void watch(Fixture& f, testing::FrameCollector& viewer) {
    ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
    f.pump();
  }
};

TEST_P(PublishForwardZeroTest, DemandStartsAndPausesThePublisher) {
  Fixture f(GetParam().alpn);
  RawStream* r = open_publish(f);
  EXPECT_EQ(hex_of(r->data), canon(kOk));  // accepted: an empty REQUEST_OK
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
  // Nobody watches: no REQUEST_UPDATE, however long.
  r->data.clear();
  f.advance(kLinger * 2);
  EXPECT_EQ(hex_of(r->data), "");
  // A viewer: FORWARD 1 at once, request id 1 (moqd's first).
  testing::FrameCollector viewer;
  ASSERT_NO_FATAL_FAILURE(watch(f, viewer));
  EXPECT_EQ(hex_of(r->data), update(1, true));
  r->write(hex(kOk));
  f.pump();
  // The publisher starts; its objects reach the viewer.
  f.peer_stream(kGroup4);
  ASSERT_NE(viewer.group(4), nullptr);
  EXPECT_EQ(viewer.group(4)->frames, (std::vector<std::string>{"abc", "z"}));
  // The last viewer leaves: FORWARD 0 after the track's linger, not before.
  r->data.clear();
  viewer.unsubscribe();
  f.advance(kLinger - std::chrono::milliseconds(10));
  EXPECT_EQ(hex_of(r->data), "");
  f.advance(std::chrono::milliseconds(20));
  EXPECT_EQ(hex_of(r->data), update(3, false));
  r->write(hex(kOk));
  f.pump();
  // Another viewer: FORWARD 1 again, with the next id.
  r->data.clear();
  testing::FrameCollector second;
  ASSERT_NO_FATAL_FAILURE(watch(f, second));
  EXPECT_EQ(hex_of(r->data), update(5, true));
  EXPECT_FALSE(r->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishForwardZeroTest, AViewerBackWithinTheLingerKeepsItRunning) {
  Fixture f(GetParam().alpn);
  RawStream* r = open_publish(f);
  auto viewer = std::make_unique<testing::FrameCollector>();
  ASSERT_NO_FATAL_FAILURE(watch(f, *viewer));
  r->write(hex(kOk));
  f.pump();
  r->data.clear();
  viewer.reset();
  f.advance(kLinger / 2);
  testing::FrameCollector again;
  ASSERT_TRUE(again.subscribe(f.origin_, "room/alice", "video"));
  f.advance(kLinger * 2);
  EXPECT_EQ(hex_of(r->data), "");  // neither FORWARD 0 nor a second FORWARD 1
  f.peer_stream(kGroup4);
  ASSERT_NE(again.group(4), nullptr);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishForwardZeroTest, OneUpdateInFlightAtATime) {
  Fixture f(GetParam().alpn);
  RawStream* r = open_publish(f);
  r->data.clear();
  auto viewer = std::make_unique<testing::FrameCollector>();
  ASSERT_NO_FATAL_FAILURE(watch(f, *viewer));
  EXPECT_EQ(hex_of(r->data), update(1, true));
  // Demand goes before the publisher answers: FORWARD 0 waits for that answer (at most one
  // outstanding, within any MAX_REQUEST_UPDATES, §10.3).
  r->data.clear();
  viewer.reset();
  f.advance(kLinger * 2);
  EXPECT_EQ(hex_of(r->data), "");
  r->write(hex(kOk));
  f.pump();
  EXPECT_EQ(hex_of(r->data), update(3, false));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishForwardZeroTest, ARefusedUpdateEndsTheTrack) {
  Fixture f(GetParam().alpn);
  RawStream* r = open_publish(f);
  testing::FrameCollector viewer;
  ASSERT_NO_FATAL_FAILURE(watch(f, viewer));
  // REQUEST_ERROR (§10.6): NOT_SUPPORTED (0x3), Retry Interval 0, no reason. §10.9: the update
  // failing terminates the subscription; moqd ends the track without waiting for the publisher's
  // PUBLISH_DONE UPDATE_FAILED, and closes its side of the stream, the session staying.
  r->data.clear();
  r->write(hex("05 00 03 03 00 00"));
  f.pump();
  f.advance(std::chrono::seconds(1));
  EXPECT_TRUE(viewer.ended);
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_TRUE(r->fin);
  EXPECT_EQ(hex_of(r->data), "");
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishForwardZeroTest, AnAnswerWithNoUpdateInFlightIsAViolation) {
  Fixture f(GetParam().alpn);
  RawStream* r = open_publish(f);
  testing::FrameCollector viewer;
  ASSERT_NO_FATAL_FAILURE(watch(f, viewer));
  r->write(hex(kOk));
  f.pump();
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  r->write(hex(kOk));  // a second REQUEST_OK for the one update
  f.pump();
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
}

INSTANTIATE_TEST_SUITE_P(Draft20, PublishForwardZeroTest,
                         ::testing::Values(PublishDraft{20, "moqt-20"}),
                         [](const auto& info) { return "D" + std::to_string(info.param.number); });

INSTANTIATE_TEST_SUITE_P(Drafts, PublishRequestStreamTest,
                         ::testing::Values(PublishDraft{17, "moqt-17"}, PublishDraft{18, "moqt-18"},
                                           PublishDraft{19, "moqt-19"},
                                           PublishDraft{20, "moqt-20"}),
                         [](const auto& info) { return "D" + std::to_string(info.param.number); });

}  // namespace publish_test
}  // namespace moqd::session
