// moq-lite-05 in the session (NET-0.3.md §3): the uni SETUP streams, track properties through
// TRACK / TRACK_INFO, frame timestamps carried exactly, ANNOUNCE_OK, and FETCH and TRACK served to a
// raw peer byte for byte. (Everything the versions share runs for lite-05 in session_test.cc.)
#include <gtest/gtest.h>

#include <map>

#include "session/session.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::RawStream;
using moqd::testing::SessionPair;
using moqd::testing::SessionPairOptions;
using moqd::testing::TestBroadcast;
using transport::websocket::FrameKind;
using namespace std::chrono_literals;

SessionPairOptions lite05() {
  SessionPairOptions o;
  o.protocol = "moq-lite-05";
  return o;
}

const model::TrackProperties kProps{.priority = 7, .ordered = true, .max_latency_ms = 250,
                                    .timescale = 90000};

// Writes group `seq` of `t` with `frames` at `stamps`, finished.
void write_timed(model::Track& t, uint64_t seq, const std::vector<std::string>& frames,
                 const std::vector<uint64_t>& stamps) {
  model::Group* g = t.begin_group(seq);
  ASSERT_NE(g, nullptr);
  model::GroupRef ref(g);
  for (size_t i = 0; i < frames.size(); ++i) {
    t.begin_timed_object(*g, frames[i].size(), stamps[i]);
    t.append_chunk(*g, Bytes::copy(frames[i]));
  }
  t.finish_group(*g);
}

std::vector<uint64_t> stamps_of(const model::Group& g) {
  std::vector<uint64_t> out;
  for (const auto& o : g.objects()) {
    out.push_back(o.timestamp);
  }
  return out;
}

class Lite05SessionTest : public ::testing::Test {
 protected:
  SessionPair& start(SessionPairOptions o = lite05()) {
    pair_ = std::make_unique<SessionPair>(std::move(o));
    pair_->start();
    return *pair_;
  }
  // A raw bidi stream the client's transport opens to the server, bypassing the client Session.
  RawStream& raw_to_server(std::vector<uint8_t> bytes) {
    transport::Stream* s = pair_->client_mux().open_bidi();
    EXPECT_NE(s, nullptr);
    raw_.push_back(std::make_unique<RawStream>(*s, &fin_clock_));
    raw_.back()->write(std::move(bytes));
    return *raw_.back();
  }

  std::unique_ptr<SessionPair> pair_;
  int fin_clock_ = 0;
  std::vector<std::unique_ptr<RawStream>> raw_;
};

TEST_F(Lite05SessionTest, EachSideSendsItsSetupWithItsOriginAndReadsThePeers) {
  SessionPairOptions o = lite05();
  o.server.hop_id = 300;
  o.client.hop_id = 0x0fbf0986f96e88;
  SessionPair& p = start(std::move(o));
  EXPECT_EQ(p.server().version(), wire::Version::kLite05);
  EXPECT_EQ(p.server().peer_hop_id(), uint64_t{0x0fbf0986f96e88});
  EXPECT_EQ(p.client().peer_hop_id(), 300u);
  EXPECT_FALSE(p.server_handler().is_closed());
  EXPECT_FALSE(p.client_handler().is_closed());
}

TEST_F(Lite05SessionTest, TimestampsAndTrackPropertiesReachTheSubscriberExactly) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  model::Track* published = p.client_origin().track("alice", "video");
  ASSERT_NE(published, nullptr);
  published->set_properties(kProps);
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  // The server's upstream asked TRACK before taking the properties as its own.
  ASSERT_TRUE(sub.track()->properties().has_value());
  EXPECT_EQ(*sub.track()->properties(), kProps);
  // Backwards, forwards, and a first timestamp far from 0.
  write_timed(*published, 0, {"i", "b", "p"}, {900000, 897000, 903000});
  write_timed(*published, 1, {"x"}, {uint64_t{1} << 60});
  p.pump();
  ASSERT_NE(sub.group(1), nullptr);
  EXPECT_EQ(sub.group(0)->frames, (std::vector<std::string>{"i", "b", "p"}));
  std::map<uint64_t, std::vector<uint64_t>> stamps;  // by sequence: newer groups may come first
  for (const auto& g : sub.track()->groups_from(0)) {
    stamps[g->sequence()] = stamps_of(*g);
  }
  EXPECT_EQ(stamps, (std::map<uint64_t, std::vector<uint64_t>>{
                        {0, {900000, 897000, 903000}}, {1, {uint64_t{1} << 60}}}));
}

TEST_F(Lite05SessionTest, TrackAndFetchAreServedByteForByte) {
  SessionPair& p = start();
  TestBroadcast bob(p.server_origin(), "bob");
  FrameCollector keep;  // keeps the track fed and its groups cached
  ASSERT_TRUE(keep.subscribe(p.server_origin(), "bob", "video"));
  model::Track* t = keep.track();
  t->set_properties(kProps);
  write_timed(*t, 4, {"hi", "abc"}, {900000, 899000});
  p.pump();

  // 06 TRACK{"bob", "video"} -> TRACK_INFO{7, ordered, 250, 90000} and FIN.
  RawStream& track = raw_to_server(from_hex("06 0a 03 62 6f 62 05 76 69 64 65 6f"));
  track.stream->finish();
  // 03 FETCH{"bob", "video", prio 2, group 4} -> the group's FRAMEs: ts 900000 (zigzag 1800000),
  // "hi"; ts -1000 (zigzag 1999), "abc"; FIN.
  RawStream& fetch = raw_to_server(from_hex("03 0c 03 62 6f 62 05 76 69 64 65 6f 02 04"));
  fetch.stream->finish();
  // A group that is not cached is refused.
  RawStream& missing = raw_to_server(from_hex("03 0c 03 62 6f 62 05 76 69 64 65 6f 02 05"));
  // An unknown track's TRACK is refused (the broadcast is unknown).
  RawStream& unknown = raw_to_server(from_hex("06 08 03 7a 65 64 03 61 75 64"));
  p.pump();

  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(track.data.data()), track.data.size())),
            to_hex(from_hex("08 07 01 40 fa 80 01 5f 90")));
  EXPECT_TRUE(track.fin);
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(fetch.data.data()), fetch.data.size())),
            to_hex(from_hex("80 1b 77 40 02 68 69 47 cf 03 61 62 63")));
  EXPECT_TRUE(fetch.fin);
  EXPECT_EQ(missing.reset_code, static_cast<uint64_t>(ErrorCode::kNotFound));
  EXPECT_EQ(unknown.reset_code, static_cast<uint64_t>(ErrorCode::kNotFound));
  EXPECT_FALSE(p.server_handler().is_closed());
}

TEST_F(Lite05SessionTest, TrackWaitsForPropertiesThePublisherIsStillAskedFor) {
  SessionPair& p = start();
  TestBroadcast bob(p.server_origin(), "bob");
  model::Track* t = p.server_origin().track("bob", "video");
  ASSERT_NE(t, nullptr);
  t->expect_properties();
  RawStream& track = raw_to_server(from_hex("06 0a 03 62 6f 62 05 76 69 64 65 6f"));
  p.pump();
  EXPECT_TRUE(track.data.empty());
  EXPECT_FALSE(track.fin);
  t->set_properties(kProps);
  p.pump();
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(track.data.data()), track.data.size())),
            to_hex(from_hex("08 07 01 40 fa 80 01 5f 90")));
  EXPECT_TRUE(track.fin);
}

// A lite-05 publisher that does not answer TRACK (its track's properties still being asked for):
// after UpstreamTrack::kTrackInfoWait (2 s) the relay's track gets provisional properties with no
// timescale (an IETF subscriber's SUBSCRIBE_OK then goes out without TIMESCALE instead of waiting
// without bound, FetchRequestStreamsTest.ProvisionalPropertiesAnswerSubscribeOkWithoutTimescale);
// the subscription goes on, a lite-05 TRACK to the relay still waits for the publisher's, and
// those replace the provisional ones when they come.
TEST_F(Lite05SessionTest, UnansweredTrackInfoGivesProvisionalPropertiesAfterTheBound) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  model::Track* published = p.client_origin().track("alice", "video");
  ASSERT_NE(published, nullptr);
  published->expect_properties();  // the publisher's app has not accepted the track yet
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  EXPECT_FALSE(sub.track()->properties().has_value());
  RawStream& track = raw_to_server(from_hex("06 0c 05 61 6c 69 63 65 05 76 69 64 65 6f"));
  p.advance(std::chrono::milliseconds(1900));
  EXPECT_FALSE(sub.track()->properties().has_value());
  p.advance(std::chrono::milliseconds(200));
  ASSERT_TRUE(sub.track()->properties().has_value());
  EXPECT_TRUE(sub.track()->properties()->provisional);
  EXPECT_FALSE(sub.track()->properties()->timescale_known);
  EXPECT_TRUE(track.data.empty());  // TRACK_INFO tells only the publisher's
  EXPECT_FALSE(track.fin);
  // Groups flow meanwhile: the subscription was never held up.
  write_timed(*published, 0, {"a"}, {5});
  p.pump();
  ASSERT_NE(sub.group(0), nullptr);
  published->set_properties(kProps);
  p.pump();
  ASSERT_TRUE(sub.track()->properties().has_value());
  EXPECT_EQ(*sub.track()->properties(), kProps);
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(track.data.data()), track.data.size())),
            to_hex(from_hex("08 07 01 40 fa 80 01 5f 90")));
  EXPECT_FALSE(p.server_handler().is_closed());
}

TEST_F(Lite05SessionTest, AnnounceOkNamesTheResponderWhichCompletesTheRoute) {
  SessionPairOptions o = lite05();
  o.client.hop_id = 41;
  SessionPair& p = start(std::move(o));
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  // The server learned alice through the client's ANNOUNCE_OK{41, ...}: its route is [41].
  auto routes = p.server_origin().routes("alice");
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].hops, (model::Hops{41}));
}

TEST_F(Lite05SessionTest, TimestampsTheVersionCannotCarryCutTheGroupShort) {
  SessionPair& p = start();
  TestBroadcast bob(p.server_origin(), "bob");
  FrameCollector keep;
  ASSERT_TRUE(keep.subscribe(p.server_origin(), "bob", "video"));
  // A delta of 2^62 - 1 does not fit a lite-05 FRAME (|delta| < 2^61): only moqd's own
  // producers could make one, and a subscriber then sees the group reset, not wrong bytes.
  write_timed(*keep.track(), 0, {"a", "b"}, {0, (uint64_t{1} << 62) - 1});
  RawStream& fetch = raw_to_server(from_hex("03 0c 03 62 6f 62 05 76 69 64 65 6f 00 00"));
  p.pump();
  EXPECT_EQ(fetch.reset_code, static_cast<uint64_t>(ErrorCode::kWrongSize));
  EXPECT_FALSE(p.server_handler().is_closed());
}

}  // namespace
}  // namespace moqd::session
