// moqd sending PUBLISH (IetfSession::offer_track): a SUBSCRIBE_NAMESPACE whose Subscribe Options
// ask for PUBLISH (d16 §9.25, d17 §9.24: 0x00 PUBLISH, 0x02 both) gets one for every track of the
// prefix live in the origin, then the track's objects on SUBGROUP streams under our alias once the
// peer answers PUBLISH_OK, and PUBLISH_DONE at its end. Bytes from the draft texts' layouts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/codec.h"
#include "testing/ietf_fixture.h"
#include "testing/session_fixture.h"

namespace moqd::session {
// Named, not anonymous: the unity build puts several test files in one translation unit.
namespace ietf_publish_out_test {

using moqd::testing::RawStream;
using moqd::testing::TestBroadcast;

using testing::hex_of;

// @moq/lite 0.2.2's d16 CLIENT_SETUP: MAX_REQUEST_ID 42069, Implementation "moq-lite-js".
const char* kD16ClientSetup = "20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
// d16 CLIENT_SETUP with MAX_REQUEST_ID 1 (the client takes no request of ours: ids below 1).
const char* kD16SetupNoRequests = "20 00 03 01 02 01";

// d16 SUBSCRIBE_NAMESPACE id 0, prefix ["room"], Subscribe Options `options`, no parameters.
std::vector<uint8_t> subscribe_namespace_d16(uint8_t options) {
  char b[8];
  std::snprintf(b, sizeof b, "%02x", options);
  return testing::ietf_message(0x11, std::string("00 01 04 72 6f 6f 6d ") + b + " 00");
}

// d16 PUBLISH id 1 ["room","alice"] "video" alias 1, parameters {FORWARD (0x10): 1}, no Track
// Extensions (d16 §9.13).
const char* kD16Publish =
    "1d 00 17 01 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f 01 01 10 01";

struct D16 {
  D16() : f("moqt-16") {}
  explicit D16(const char* setup) : f("moqt-16"), setup_hex(setup) {}
  void start(uint8_t options) {
    c = &f.open_control(setup_hex);
    sn = f.raw_->open_bidi(subscribe_namespace_d16(options));
    f.pump();
  }
  // start(options), then room/alice's "video" comes alive (a subscriber elsewhere asked for it).
  void start_then_make_live(uint8_t options) {
    start(options);
    ASSERT_NE(f.origin_.track("room/alice", "video"), nullptr);
    f.pump();
  }
  std::string control() const { return hex_of(c->data); }
  testing::IetfServerFixture f;
  const char* setup_hex = kD16ClientSetup;
  RawStream* c = nullptr;
  RawStream* sn = nullptr;
};

TEST(IetfPublishOutTest, Draft16PublishOptionSendsPublishThenObjectsAfterPublishOkThenDone) {
  D16 t;
  TestBroadcast b(t.f.origin_, "room/alice");
  t.start(0x00);
  // REQUEST_OK id 0 on the SUBSCRIBE_NAMESPACE stream; Options 0 asks for no NAMESPACE.
  EXPECT_EQ(hex_of(t.sn->data), "07 00 02 00 00");
  EXPECT_EQ(t.control(), "");
  // The track comes alive (a subscriber elsewhere asked for it): PUBLISH on the control stream.
  ASSERT_NE(t.f.origin_.track("room/alice", "video"), nullptr);
  t.f.pump();
  EXPECT_EQ(t.control(), kD16Publish);
  // Nothing goes out before PUBLISH_OK.
  b.write_group("video", 5, {"hi"}, false);
  t.f.pump();
  EXPECT_EQ(t.f.raw_->incoming.size(), 0u);
  // PUBLISH_OK id 1, no parameters (d16 §9.14).
  t.c->data.clear();
  t.c->write(testing::ietf_message(0x1e, "01 00"));
  t.f.pump();
  b.write_group("video", 6, {"x", ""});
  t.f.pump();
  ASSERT_EQ(t.f.raw_->incoming.size(), 2u);
  // SUBGROUP_HEADER 0x18, alias 1, group 5, publisher priority 128 | object 0 "hi" (group open).
  EXPECT_EQ(hex_of(t.f.raw_->incoming[0]->data), "18 01 05 80 00 02 68 69");
  // group 6: "x", then an empty object, FIN.
  EXPECT_EQ(hex_of(t.f.raw_->incoming[1]->data), "18 01 06 80 00 01 78 00 00 00");
  EXPECT_TRUE(t.f.raw_->incoming[1]->fin);
  EXPECT_EQ(t.f.session_->subscription_count(), 1u);
  // The track ends: PUBLISH_DONE id 1, TRACK_ENDED (2), 2 streams, reason "cancel".
  b.feed("video").track()->end(make_error(ErrorCode::kCancel, "done"));
  t.f.advance(std::chrono::milliseconds(100));
  EXPECT_EQ(t.control(), "0b 00 0a 01 02 02 06 63 61 6e 63 65 6c");
  EXPECT_EQ(t.f.session_->subscription_count(), 0u);
  EXPECT_FALSE(t.f.raw_->closed_code.has_value());
}

TEST(IetfPublishOutTest, Draft16LiveTracksAreOfferedAtOnceAndNamespacesWithOptionTwo) {
  D16 t;
  TestBroadcast b(t.f.origin_, "room/alice");
  ASSERT_NE(t.f.origin_.track("room/alice", "video"), nullptr);
  t.start(0x02);
  // Both: NAMESPACE ["alice"] on the SUBSCRIBE_NAMESPACE stream after its REQUEST_OK, and the
  // track already live offered with PUBLISH.
  EXPECT_EQ(hex_of(t.sn->data), "07 00 02 00 00 08 00 07 01 05 61 6c 69 63 65");
  EXPECT_EQ(t.control(), kD16Publish);
}

TEST(IetfPublishOutTest, Draft16NamespaceOptionSendsNoPublish) {
  D16 t;
  TestBroadcast b(t.f.origin_, "room/alice");
  ASSERT_NO_FATAL_FAILURE(t.start_then_make_live(0x01));
  EXPECT_EQ(hex_of(t.sn->data), "07 00 02 00 00 08 00 07 01 05 61 6c 69 63 65");
  EXPECT_EQ(t.control(), "");
  EXPECT_EQ(t.f.session_->subscription_count(), 0u);
}

TEST(IetfPublishOutTest, Draft16RefusedPublishSendsNothingMore) {
  D16 t;
  TestBroadcast b(t.f.origin_, "room/alice");
  ASSERT_NO_FATAL_FAILURE(t.start_then_make_live(0x00));
  EXPECT_EQ(t.control(), kD16Publish);
  // REQUEST_ERROR id 1, code 3 (NOT_SUPPORTED, as @moq/net 0.3.4 answers), retry 0, no reason.
  t.c->data.clear();
  t.c->write(testing::ietf_message(0x05, "01 03 00 00"));
  t.f.pump();
  EXPECT_EQ(t.f.session_->subscription_count(), 0u);
  b.write_group("video", 0, {"x"});
  b.feed("video").track()->end(make_error(ErrorCode::kCancel, "done"));
  t.f.advance(std::chrono::milliseconds(100));
  EXPECT_EQ(t.f.raw_->incoming.size(), 0u);  // no SUBGROUP stream
  EXPECT_EQ(t.control(), "");                // no PUBLISH_DONE
  EXPECT_FALSE(t.f.raw_->closed_code.has_value());
}

TEST(IetfPublishOutTest, Draft16PublishWaitsForTheClientsMaxRequestId) {
  D16 t(kD16SetupNoRequests);
  TestBroadcast b(t.f.origin_, "room/alice");
  ASSERT_NO_FATAL_FAILURE(t.start_then_make_live(0x00));
  // No PUBLISH under MAX_REQUEST_ID 1: REQUESTS_BLOCKED (0x1A) at 1 instead.
  EXPECT_EQ(t.control(), "1a 00 01 01");
  // MAX_REQUEST_ID 3: request id 1 is ours now, and the track is offered.
  t.c->data.clear();
  t.c->write(testing::ietf_message(0x15, "03"));
  t.f.pump();
  EXPECT_EQ(t.control(), kD16Publish);
}

TEST(IetfPublishOutTest, Draft16TrackTheClientSubscribesIsNotOffered) {
  D16 t;
  TestBroadcast b(t.f.origin_, "room/alice");
  RawStream& c = t.f.open_control(kD16ClientSetup);
  // SUBSCRIBE id 0 ["room","alice"] "video" (as in ietf_session_test.cc), then the namespace.
  c.write(from_hex("03 00 1d 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f "
                   "04 10 01 10 07 01 01 02 01 02"));
  t.f.pump();
  c.data.clear();
  RawStream* sn = t.f.raw_->open_bidi(testing::ietf_message(0x11, "02 01 04 72 6f 6f 6d 00 00"));
  t.f.pump();
  EXPECT_EQ(hex_of(sn->data), "07 00 02 02 00");
  EXPECT_EQ(hex_of(c.data), "");  // already Established: no PUBLISH
  EXPECT_EQ(t.f.session_->subscription_count(), 1u);
}


// --- drafts 17 to 20: the PUBLISH opens its own bidi stream; 17 asks with Subscribe Options on
// SUBSCRIBE_NAMESPACE, 18+ with SUBSCRIBE_TRACKS (0x51, d18 §10.20) ---

// @moq/net 0.3.4's SETUP on 17..20 (as ietf_session_test.cc).
const char* kD17Setup =
    "af 00 00 1b 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73 c4 0b 4e 08 fe 0a 5a 2a db 5a 87 d4 05 01";

class PublishOutStreamsTest : public testing::IetfRequestStreamsTest {
 protected:
  // The request that asks for PUBLISH for prefix ["room"]: d17 SUBSCRIBE_NAMESPACE with Subscribe
  // Options 0x00, 18+ SUBSCRIBE_TRACKS; request id 0, no parameters.
  std::vector<uint8_t> ask() const {
    if (d17()) {
      return msg(0x11, id(0) + " 01 04 72 6f 6f 6d 00 00");
    }
    return msg(0x51, id(0) + " 01 04 72 6f 6f 6d 00");
  }
  // Our PUBLISH id 1 ["room","alice"] "video" alias 1, {FORWARD: 1}, Track Properties
  // {TIMESCALE (0x08): 1000} (TestBroadcast's tracks are timed in milliseconds).
  std::string publish() const {
    return std::string(d17() ? "1d 00 1b 01 00" : "1d 00 1a 01") +
           " 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f 01 01 10 01 08 83 e8";
  }
  // The peer's acceptance: d17 PUBLISH_OK (0x1E, parameters only), 18+ REQUEST_OK.
  std::vector<uint8_t> accept() const { return msg(d17() ? 0x1e : 0x07, "00"); }
  // SETUP, the peer's SUBSCRIBE_NAMESPACE ["room"], then room/alice's "video" wanted here: moqd
  // opens its PUBLISH stream, the peer's second incoming stream (f.raw_->incoming[1]).
  void await_publish(testing::IetfServerFixture& f) {
    send_setup(f, kD17Setup);
    f.raw_->open_bidi(ask());
    f.pump();
    ASSERT_NE(f.origin_.track("room/alice", "video"), nullptr);
    f.pump();
    ASSERT_EQ(f.raw_->incoming.size(), 2u);
  }
};

TEST_P(PublishOutStreamsTest, PublishOnItsOwnStreamThenObjectsThenPublishDoneAndFin) {
  testing::IetfServerFixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  send_setup(f, kD17Setup);
  RawStream* sn = f.raw_->open_bidi(ask());
  f.pump();
  EXPECT_EQ(hex_of(sn->data), "07 00 01 00");  // REQUEST_OK, no parameters; no NAMESPACE
  ASSERT_EQ(f.raw_->incoming.size(), 1u);       // the relay's SETUP stream
  ASSERT_NE(f.origin_.track("room/alice", "video"), nullptr);
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 2u);
  RawStream& p = *f.raw_->incoming[1];
  EXPECT_EQ(hex_of(p.data), publish());
  b.write_group("video", 5, {"hi"}, false);
  f.pump();
  EXPECT_EQ(f.raw_->incoming.size(), 2u);  // nothing before the answer
  p.write(accept());
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 3u);
  // SUBGROUP_HEADER (17: 0x19 with extensions; 18+: | FIRST_OBJECT 0x40), alias 1, group 5,
  // priority 128 | object 0 {Timestamp (0x10): 1000000} "hi".
  EXPECT_EQ(hex_of(f.raw_->incoming[2]->data),
            std::string(d17() ? "19" : "59") + " 01 05 80 00 04 10 cf 42 40 02 68 69");
  // The track ends: PUBLISH_DONE (no request id in 17+) TRACK_ENDED, 1 stream, "cancel", FIN.
  p.data.clear();
  b.feed("video").track()->end(make_error(ErrorCode::kCancel, "done"));
  f.advance(std::chrono::milliseconds(100));
  EXPECT_EQ(hex_of(p.data), "0b 00 09 02 01 06 63 61 6e 63 65 6c");
  EXPECT_TRUE(p.fin);
  EXPECT_EQ(f.session_->subscription_count(), 0u);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(PublishOutStreamsTest, RefusalOrCloseBeforeAnAnswerEndsThePublish) {
  for (bool refuse : {true, false}) {
    SCOPED_TRACE(refuse ? "REQUEST_ERROR" : "FIN");
    testing::IetfServerFixture f(GetParam().alpn);
    TestBroadcast b(f.origin_, "room/alice");
    ASSERT_NO_FATAL_FAILURE(await_publish(f));
    RawStream& p = *f.raw_->incoming[1];
    if (refuse) {
      // REQUEST_ERROR NOT_SUPPORTED (3), as @moq/net 0.3.4 answers; d16+: retry interval 0;
      // 18+: an empty redirect is not written for other codes.
      p.write(msg(0x05, "03 00 00"));
    }
    p.stream->finish();
    f.pump();
    EXPECT_EQ(f.session_->subscription_count(), 0u);
    b.write_group("video", 0, {"x"});
    f.advance(std::chrono::milliseconds(100));
    EXPECT_EQ(f.raw_->incoming.size(), 2u);  // no SUBGROUP stream
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
}

TEST_P(PublishOutStreamsTest, ThePeersCloseAfterAcceptingUnsubscribes) {
  testing::IetfServerFixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  ASSERT_NO_FATAL_FAILURE(await_publish(f));
  RawStream& p = *f.raw_->incoming[1];
  p.write(accept());
  f.pump();
  EXPECT_EQ(f.session_->subscription_count(), 1u);
  p.data.clear();
  p.stream->finish();
  f.pump();
  // PUBLISH_DONE SUBSCRIPTION_ENDED (3), no stream, "unsubscribed", then FIN.
  EXPECT_EQ(hex_of(p.data), "0b 00 0f 03 00 0c 75 6e 73 75 62 73 63 72 69 62 65 64");
  EXPECT_TRUE(p.fin);
  EXPECT_EQ(f.session_->subscription_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Drafts, PublishOutStreamsTest, testing::request_stream_drafts(),
                         testing::request_stream_draft_name);

}  // namespace ietf_publish_out_test
}  // namespace moqd::session
