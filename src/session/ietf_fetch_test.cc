// FETCH, TRACK_STATUS and SUBSCRIBE_UPDATE / REQUEST_UPDATE of the IETF session (drafts 14, 16,
// and 17 to 20 on request streams), per handler, on a fake transport: a RawPeer client writes the control messages byte by byte (layouts from the
// draft texts, see wire/ietf_fetch_test.cc) and reads the FETCH streams and answers.
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
namespace fetch_test {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;
using moqd::testing::RecordingHandler;
using moqd::testing::TestBroadcast;
using transport::websocket::MuxSession;

using testing::hex;
using testing::hex_of;
using testing::canon;
using testing::kD16Setup;
using testing::kD14Setup;

// The shared server fixture: testing/ietf_fixture.h.
using Fixture = testing::IetfServerFixture;

// d16 SUBSCRIBE of ["room","alice"] "video" (Largest Object), request id `id` (one byte).
std::string subscribe16(const char* id) {
  return std::string("03 00 1d ") + id +
         " 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f 04 10 01 10 07 01 01 02 01 02";
}
const char* kRoomAliceVideo = "02 04726f6f6d 05616c696365 05766964656f";

// Publishes groups 1..3 of room/alice "video", frames "a".."f", two per group.
void publish_three(TestBroadcast& b, Fixture& f) {
  b.write_group("video", 1, {"a", "b"});
  b.write_group("video", 2, {"c", "d"});
  b.write_group("video", 3, {"e", "f"});
  f.pump();
}

// The FETCH stream's bytes: FETCH_HEADER of `id`, then d16 objects (flags 0x1C, priority 128)
// of one-byte payloads, each {group, object, payload}.
std::string fetch_stream16(int id, std::vector<std::tuple<int, int, char>> objects) {
  std::vector<uint8_t> out = {0x05, static_cast<uint8_t>(id)};
  for (auto [g, o, p] : objects) {
    out.insert(out.end(), {0x1c, static_cast<uint8_t>(g), static_cast<uint8_t>(o), 0x80, 0x01,
                           static_cast<uint8_t>(p)});
  }
  return to_hex(out);
}

// Group 4 of room/alice "video" as an IETF producer at draft 16 left it in the cache: subgroup 3
// (arrived first) with ids 5 {0x0d: aa bb} "abc" and 8 {0x10: 5, 0x1d: cc} "z", then subgroup 0
// with id 0 {0x10: 7} "q" (blocks delta-coded, every varint below 0x40).
void publish_ietf_group(TestBroadcast& b, Fixture& f) {
  model::Track* t = b.feed("video").track();
  ASSERT_NE(t, nullptr);
  auto put = [&](model::Group& g, uint64_t id, const char* block, std::string_view payload) {
    model::Track::IetfObject o;
    o.id = id;
    o.size = payload.size();
    o.extensions = Bytes::from(hex(block));
    o.extensions_draft = 16;
    t->begin_ietf_object(g, std::move(o));
    t->append_chunk(g, Bytes::copy(payload));
  };
  model::Group* g3 = t->begin_group(4, 3, true);
  ASSERT_NE(g3, nullptr);
  put(*g3, 5, "0d 02 aa bb", "abc");
  put(*g3, 8, "10 05 0d 01 cc", "z");
  t->finish_group(*g3);
  model::Group* g0 = t->begin_group(4, 0, true);
  ASSERT_NE(g0, nullptr);
  put(*g0, 0, "10 07", "q");
  t->finish_group(*g0);
  f.pump();
}

TEST(IetfFetchTest, Draft16FetchCarriesTheExtensionBlocks) {
  Fixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, subscribe16("00"));
  publish_ietf_group(b, f);
  ASSERT_FALSE(HasFatalFailure());
  // FETCH id 2 of all of group 4: subgroup 0 first, then 3; flags 0x20 (extensions) and 0x03 (an
  // explicit subgroup); the blocks as the producer wrote them (same encoding).
  f.exchange(c, std::string("16 00 19 02 01 ") + kRoomAliceVideo + " 04 00 04 00 00");
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            canon("05 02 3c 04 00 80 02 10 07 01 71 3f 04 03 05 80 04 0d 02 aa bb 03 61 62 63 "
                  "3f 04 03 08 80 05 10 05 0d 01 cc 01 7a"));
  EXPECT_TRUE(f.raw_->incoming.back()->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfFetchTest, Draft14FetchCarriesTheExtensionBlocksWithAbsoluteTypes) {
  Fixture f("", testing::only_draft14());
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD14Setup);
  f.exchange(c, std::string("03 00 18 00 ") + kRoomAliceVideo + " 80 00 01 02 00");  // SUBSCRIBE
  publish_ietf_group(b, f);
  ASSERT_FALSE(HasFatalFailure());
  // d14 objects: group, subgroup, object, priority, extensions length (always), block, length;
  // d14 types are absolute: {0x10: 5, 0x1d: cc} is rewritten 10 05 1d 01 cc.
  f.exchange(c, std::string("16 00 1b 02 80 01 01 ") + kRoomAliceVideo + " 04 00 04 00 00");
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            canon("05 02 04 00 00 80 02 10 07 01 71 04 03 05 80 04 0d 02 aa bb 03 61 62 63 "
                  "04 03 08 80 05 10 05 1d 01 cc 01 7a"));
  EXPECT_TRUE(f.raw_->incoming.back()->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfFetchTest, StandaloneFetchReturnsExactlyTheCachedRange) {
  Fixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, subscribe16("00"));  // starts the track, keeps it live
  publish_three(b, f);
  const size_t subgroups = f.raw_->incoming.size();
  // d16 §9.16 Standalone FETCH id 2, Start {1, 0}, End {3, 0} (all of group 3): FETCH_OK with End
  // Location {3, 2} (past the largest, §9.17), then one stream with all six objects and FIN.
  EXPECT_EQ(f.exchange(c, std::string("16 00 19 02 01 ") + kRoomAliceVideo + " 01 00 03 00 00"),
            canon("18 00 05 02 00 03 02 00"));
  ASSERT_EQ(f.raw_->incoming.size(), subgroups + 1);
  const RawStream& s = *f.raw_->incoming.back();
  EXPECT_EQ(hex_of(s.data), fetch_stream16(2, {{1, 0, 'a'}, {1, 1, 'b'}, {2, 0, 'c'},
                                               {2, 1, 'd'}, {3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(s.fin);
  // Start {2, 1}, End {3, 1}: group 2 from object 1, group 3 before object 1; End {3, 1}.
  EXPECT_EQ(f.exchange(c, std::string("16 00 19 04 01 ") + kRoomAliceVideo + " 02 01 03 01 00"),
            canon("18 00 05 04 00 03 01 00"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data), fetch_stream16(4, {{2, 1, 'd'}, {3, 0, 'e'}}));
  // Descending (GROUP_ORDER 2), groups 1..2.
  EXPECT_EQ(f.exchange(c, std::string("16 00 1b 06 01 ") + kRoomAliceVideo + " 01 00 02 00 01 22 02"),
            canon("18 00 05 06 00 02 00 00"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            fetch_stream16(6, {{2, 0, 'c'}, {2, 1, 'd'}, {1, 0, 'a'}, {1, 1, 'b'}}));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfFetchTest, JoiningFetchEndsAtTheSubscriptionsLargestObject) {
  Fixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, subscribe16("00"));
  // Joining a subscription that began before any object: INVALID_RANGE (0x11, d16 §9.16.2).
  EXPECT_EQ(f.error_of(c, "16 00 05 02 02 00 01 00"), (std::vector<int>{0x05, 0x02, 0x11}));
  publish_three(b, f);
  // A second subscription, id 4, begins at Largest {3, 1}.
  f.exchange(c, subscribe16("04"));
  // Relative joining FETCH of it, 1 group back: {2, 0} to {3, 1} inclusive.
  EXPECT_EQ(f.exchange(c, "16 00 05 06 02 04 01 00"), canon("18 00 05 06 00 03 02 00"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            fetch_stream16(6, {{2, 0, 'c'}, {2, 1, 'd'}, {3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(f.raw_->incoming.back()->fin);
  // Absolute joining FETCH from group 3.
  EXPECT_EQ(f.exchange(c, "16 00 05 08 03 04 03 00"), canon("18 00 05 08 00 03 02 00"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data), fetch_stream16(8, {{3, 0, 'e'}, {3, 1, 'f'}}));
  // Groups published after the subscription began are not in its joining FETCH.
  b.write_group("video", 4, {"g"});
  f.pump();
  EXPECT_EQ(f.exchange(c, "16 00 05 0a 02 04 00 00"), canon("18 00 05 0a 00 03 02 00"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data), fetch_stream16(10, {{3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfFetchTest, BadFetchesAreAnsweredWithTheDraftsErrors) {
  Fixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, subscribe16("00"));
  publish_three(b, f);
  const size_t streams = f.raw_->incoming.size();
  // REQUEST_ERROR (0x05) {id, code}. Unknown broadcast room/bob: DOES_NOT_EXIST (0x10).
  EXPECT_EQ(f.error_of(c, "16 00 17 02 01 02 04726f6f6d 03626f62 05766964656f 01 00 03 00 00"),
            (std::vector<int>{0x05, 0x02, 0x10}));
  // End before start: INVALID_RANGE (0x11).
  EXPECT_EQ(f.error_of(c, std::string("16 00 19 04 01 ") + kRoomAliceVideo + " 03 00 01 00 00"),
            (std::vector<int>{0x05, 0x04, 0x11}));
  // Start past the largest object {3, 1}: INVALID_RANGE.
  EXPECT_EQ(f.error_of(c, std::string("16 00 19 06 01 ") + kRoomAliceVideo + " 09 00 0a 00 00"),
            (std::vector<int>{0x05, 0x06, 0x11}));
  // Joining an unknown subscription: INVALID_JOINING_REQUEST_ID (0x32).
  EXPECT_EQ(f.error_of(c, "16 00 05 08 02 30 01 00"), (std::vector<int>{0x05, 0x08, 0x32}));
  EXPECT_EQ(f.raw_->incoming.size(), streams);  // no FETCH stream for any of them
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  // An unknown Fetch Type closes the session with PROTOCOL_VIOLATION.
  f.exchange(c, "16 00 03 0a 04 00");
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x3u);
}

TEST(IetfFetchTest, Draft14FetchErrorAndNoObjects) {
  Fixture f("", testing::only_draft14());
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD14Setup);
  // d14 FETCH (§9.16) of room/bob: FETCH_ERROR (0x19) TRACK_DOES_NOT_EXIST (0x4).
  EXPECT_EQ(f.error_of(c, "16 00 19 00 80 01 01 02 04726f6f6d 03626f62 05766964656f 01 00 03 00 00"),
            (std::vector<int>{0x19, 0x00, 0x04}));
  // Nothing cached on room/alice video yet: INVALID_RANGE (0x5).
  EXPECT_EQ(f.error_of(c, std::string("16 00 1b 02 80 01 01 ") + kRoomAliceVideo + " 01 00 03 00 00"),
            (std::vector<int>{0x19, 0x02, 0x05}));
  // A range with no cached object (groups 5..6 while 1..3 are cached, start below the largest
  // after group 9 arrives): NO_OBJECTS (0x6), d14 only.
  f.exchange(c, std::string("03 00 18 04 ") + kRoomAliceVideo + " 80 00 01 02 00");  // SUBSCRIBE
  publish_three(b, f);
  b.write_group("video", 9, {"z"});
  f.pump();
  EXPECT_EQ(f.error_of(c, std::string("16 00 1b 06 80 01 01 ") + kRoomAliceVideo + " 05 00 06 00 00"),
            (std::vector<int>{0x19, 0x06, 0x06}));
}

// d14 §9.16.2 joining FETCH (Subscriber Priority and Group Order before the Fetch Type, as in
// the standalone one above): the relative and absolute forms return exactly the cached objects up
// to where the joined subscription began, in d14's object layout (§10.4.4: group, subgroup,
// object, priority, Extension Headers Length, payload length, payload).
TEST(IetfFetchTest, Draft14JoiningFetchReturnsExactlyWhatWasPublished) {
  Fixture f("", testing::only_draft14());
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD14Setup);
  f.exchange(c, std::string("03 00 18 00 ") + kRoomAliceVideo + " 80 00 01 02 00");  // SUBSCRIBE 0
  publish_three(b, f);
  // Subscription 2 begins at the Largest Object {3, 1}.
  f.exchange(c, std::string("03 00 18 02 ") + kRoomAliceVideo + " 80 00 01 02 00");
  auto stream14 = [](int id, std::vector<std::tuple<int, int, char>> objects) {
    std::vector<uint8_t> out = {0x05, static_cast<uint8_t>(id)};
    for (auto [g, o, p] : objects) {
      out.insert(out.end(), {static_cast<uint8_t>(g), 0x00, static_cast<uint8_t>(o), 0x80, 0x00,
                             0x01, static_cast<uint8_t>(p)});
    }
    return to_hex(out);
  };
  // Relative joining FETCH (type 2) id 4 of subscription 2, 1 group back: {2, 0} to {3, 1}.
  // FETCH_OK: ascending, not the end of the track, End Location {3, 2} (the range reaches the
  // largest object {3, 1}: one past it, as the standalone FETCHes of d14..16 answer, §9.17).
  EXPECT_EQ(f.exchange(c, "16 00 07 04 80 01 02 02 01 00"), canon("18 00 06 04 01 00 03 02 00"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            stream14(4, {{2, 0, 'c'}, {2, 1, 'd'}, {3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(f.raw_->incoming.back()->fin);
  // Absolute joining FETCH (type 3) id 6 from group 1: every published object.
  EXPECT_EQ(f.exchange(c, "16 00 07 06 80 01 03 02 01 00"), canon("18 00 06 06 01 00 03 02 00"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            stream14(6, {{1, 0, 'a'}, {1, 1, 'b'}, {2, 0, 'c'}, {2, 1, 'd'}, {3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(f.raw_->incoming.back()->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfFetchTest, FetchCancelResetsTheStream) {
  Fixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, subscribe16("00"));
  // Group 1 with an object whose payload is still arriving: the FETCH stream waits for it.
  model::GroupRef g = b.write_group("video", 1, {"abc"}, false);
  f.pump();
  model::Track* t = b.feed("video").track();
  ASSERT_NE(t, nullptr);
  t->begin_object(*g, 4);
  t->append_chunk(*g, Bytes::from(std::vector<uint8_t>{'x', 'y'}));
  f.pump();
  f.exchange(c, std::string("16 00 19 02 01 ") + kRoomAliceVideo + " 01 00 01 00 00");
  const RawStream& s = *f.raw_->incoming.back();
  EXPECT_EQ(hex_of(s.data), canon("05 02 1c 01 00 80 03 616263 1c 01 01 80 04 7879"));
  EXPECT_FALSE(s.fin);
  // The rest arrives: written, then FIN.
  t->append_chunk(*g, Bytes::from(std::vector<uint8_t>{'z', 'w'}));
  t->finish_group(*g);
  f.pump();
  EXPECT_EQ(hex_of(s.data), canon("05 02 1c 01 00 80 03 616263 1c 01 01 80 04 78797a77"));
  EXPECT_TRUE(s.fin);
  // A second FETCH of an open object, cancelled: the stream is reset (CANCELLED, 0x1).
  model::GroupRef g2 = b.write_group("video", 2, {}, false);
  t->begin_object(*g2, 4);
  t->append_chunk(*g2, Bytes::from(std::vector<uint8_t>{'p', 'q'}));
  f.pump();
  f.exchange(c, std::string("16 00 19 04 01 ") + kRoomAliceVideo + " 02 00 02 00 00");
  const RawStream& s2 = *f.raw_->incoming.back();
  EXPECT_FALSE(s2.reset_code.has_value());
  f.exchange(c, "17 00 01 04");
  ASSERT_TRUE(s2.reset_code.has_value());
  EXPECT_EQ(*s2.reset_code, 0x1u);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfFetchTest, FetchesInFlightAreBoundedAndUpdatable) {
  SessionLimits l;
  l.max_subscriptions = 2;
  Fixture f("moqt-16", wire::VersionSet::all(), l);
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, subscribe16("00"));
  model::GroupRef g = b.write_group("video", 1, {}, false);
  model::Track* t = b.feed("video").track();
  ASSERT_NE(t, nullptr);
  t->begin_object(*g, 4);  // never completes: each FETCH of it stays in flight
  f.pump();
  const std::string fetch = std::string(" 01 ") + kRoomAliceVideo + " 01 00 01 00 00";
  EXPECT_EQ(f.exchange(c, "16 00 19 02" + fetch).substr(0, 2), "18");
  EXPECT_EQ(f.exchange(c, "16 00 19 04" + fetch).substr(0, 2), "18");
  // The third: REQUEST_ERROR INTERNAL_ERROR (0x0); the session stays.
  EXPECT_EQ(f.error_of(c, "16 00 19 06" + fetch), (std::vector<int>{0x05, 0x06, 0x00}));
  f.exchange(c, "17 00 01 02");  // FETCH_CANCEL frees one
  EXPECT_EQ(f.exchange(c, "16 00 19 08" + fetch).substr(0, 2), "18");
  // d16 §9.11 REQUEST_UPDATE (id 10) of FETCH 4 in flight, SUBSCRIBER_PRIORITY 3: REQUEST_OK.
  EXPECT_EQ(f.exchange(c, "02 00 05 0a 04 01 20 03"), canon("07 00 02 0a 00"));
  // FORWARD 2 in an update of subscription 0: PROTOCOL_VIOLATION.
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  f.exchange(c, "02 00 05 0c 00 01 10 02");
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x3u);
}

TEST(IetfTrackStatusTest, AnswersWithTheLargestLocation) {
  {
    Fixture f("moqt-16");
    TestBroadcast b(f.origin_, "room/alice");
    RawStream& c = f.open_control(kD16Setup);
    f.exchange(c, subscribe16("00"));
    publish_three(b, f);
    // d16 §9.19 TRACK_STATUS id 2 (SUBSCRIBE's layout): REQUEST_OK with LARGEST_OBJECT {3, 1}.
    EXPECT_EQ(f.exchange(c, std::string("0d 00 1d 02 ") + kRoomAliceVideo + " 04 10 01 10 07 01 01 02 01 02"),
              canon("07 00 06 02 01 09 02 03 01"));
    // An unknown broadcast: REQUEST_ERROR DOES_NOT_EXIST (0x10).
    EXPECT_EQ(f.error_of(c, "0d 00 1b 04 02 04726f6f6d 03626f62 05766964656f 04 10 01 10 07 01 01 02 01 02"),
              (std::vector<int>{0x05, 0x04, 0x10}));
  }
  {
    Fixture f("", testing::only_draft14());
    TestBroadcast b(f.origin_, "room/alice");
    RawStream& c = f.open_control(kD14Setup);
    f.exchange(c, std::string("03 00 18 00 ") + kRoomAliceVideo + " 80 00 01 02 00");  // SUBSCRIBE
    publish_three(b, f);
    // d14 §9.18 TRACK_STATUS_OK: alias 0, expires 0, ascending, Content Exists, Largest {3, 1}.
    EXPECT_EQ(f.exchange(c, std::string("0d 00 18 02 ") + kRoomAliceVideo + " 80 00 01 02 00"),
              canon("0e 00 08 02 00 00 01 01 03 01 00"));
  }
}

// After SUBSCRIBE id 0 of room/alice "video" on `c` (d15 or d16): group 1 is delivered, then the
// update `update_hex` (id 2 of subscription 0: SUBSCRIPTION_FILTER AbsoluteRange {0, 0} to End
// Group 2 inclusive, SUBSCRIBER_PRIORITY 9) is answered REQUEST_OK with LARGEST_OBJECT {1, 0}.
// Group 2's stream carries the new priority (9); it is the end group: once it is written the
// subscription ends with PUBLISH_DONE SUBSCRIPTION_ENDED (0x3), 2 streams. Group 3 is past the end:
// not delivered.
void expect_update_narrows_to_end_group_2(Fixture& f, TestBroadcast& b, RawStream& c,
                                          std::string_view update_hex) {
  b.write_group("video", 1, {"a"});
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 1u);
  EXPECT_EQ(f.exchange(c, update_hex), canon("07 00 06 02 01 09 02 01 00"));
  c.data.clear();
  b.write_group("video", 2, {"b"});
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), 2u);
  EXPECT_EQ(hex_of(f.raw_->incoming[1]->data), canon("18 00 02 09 00 01 62"));
  EXPECT_EQ(hex_of(c.data).substr(0, 3 * 6 - 1), canon("0b 00 15 00 03 02"));
  EXPECT_EQ(f.session_->subscription_count(), 0u);
  b.write_group("video", 3, {"c"});
  f.pump();
  EXPECT_EQ(f.raw_->incoming.size(), 2u);
}

TEST(IetfSubscribeUpdateTest, EndGroupNarrowsALiveSubscription) {
  Fixture f("moqt-16");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD16Setup);
  f.exchange(c, subscribe16("00"));
  // d16 §9.11 REQUEST_UPDATE: the filter and the priority as delta-coded parameters.
  expect_update_narrows_to_end_group_2(f, b, c, "02 00 0b 02 00 02 20 09 01 04 04 00 00 02");
  ASSERT_FALSE(HasFatalFailure());
  // An update of a subscription that does not exist closes the session (PROTOCOL_VIOLATION).
  f.exchange(c, "02 00 03 04 00 00");
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x3u);
}

// d15 §9.10 SUBSCRIBE_UPDATE: d16's layout with absolute parameter types (no delta coding),
// answered with REQUEST_OK.
TEST(IetfSubscribeUpdateTest, Draft15EndGroupNarrowsALiveSubscription) {
  Fixture f("moqt-15");
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control("20 00 13 02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73");
  // SUBSCRIBE id 0: FORWARD 1, SUBSCRIBER_PRIORITY 7, SUBSCRIPTION_FILTER Largest Object, GROUP_ORDER 2.
  f.exchange(c, std::string("03 00 1d 00 ") + kRoomAliceVideo + " 04 10 01 20 07 21 01 02 22 02");
  // SUBSCRIBE_UPDATE: SUBSCRIBER_PRIORITY (0x20) 9, SUBSCRIPTION_FILTER (0x21).
  expect_update_narrows_to_end_group_2(f, b, c, "02 00 0b 02 00 02 20 09 21 04 04 00 00 02");
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST(IetfSubscribeUpdateTest, Draft14EndGroupMayNotIncrease) {
  Fixture f("", testing::only_draft14());
  TestBroadcast b(f.origin_, "room/alice");
  RawStream& c = f.open_control(kD14Setup);
  f.exchange(c, std::string("03 00 18 00 ") + kRoomAliceVideo + " 80 00 01 02 00");
  b.write_group("video", 1, {"a"});
  f.pump();
  // d14 §9.10 SUBSCRIBE_UPDATE id 2 of 0: Start {0, 0}, End Group 2 (last group 1), priority 5,
  // forward 1. No answer.
  EXPECT_EQ(f.exchange(c, "02 00 08 02 00 00 00 02 05 01 00"), "");
  b.write_group("video", 2, {"b"});
  f.pump();
  EXPECT_EQ(f.raw_->incoming.size(), 1u);
  EXPECT_EQ(static_cast<uint8_t>(c.data[0]), 0x0b);  // PUBLISH_DONE
  EXPECT_EQ(static_cast<uint8_t>(c.data[4]), 0x03);  // SUBSCRIPTION_ENDED
  // A second subscription narrowed to End Group 3, then widened to 5: PROTOCOL_VIOLATION.
  f.exchange(c, std::string("03 00 18 04 ") + kRoomAliceVideo + " 80 00 01 02 00");
  f.exchange(c, "02 00 08 06 04 00 00 03 05 01 00");
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  f.exchange(c, "02 00 08 08 04 00 00 05 05 01 00");
  ASSERT_TRUE(f.raw_->closed_code.has_value());
  EXPECT_EQ(*f.raw_->closed_code, 0x3u);
}

TEST(IetfRequestsBlockedTest, SentOnceWhenAnUpstreamSubscribeWaitsForARequestId) {
  Fixture f("moqt-16");
  // CLIENT_SETUP granting MAX_REQUEST_ID 2: the relay may use request id 1 only.
  RawStream& c = f.open_control("20 00 03 01 02 02");
  f.exchange(c, "06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00");  // PUBLISH_NAMESPACE
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  c.data.clear();
  testing::FrameCollector video, audio, data;
  ASSERT_TRUE(video.subscribe(f.origin_, "room/alice", "video"));
  ASSERT_TRUE(audio.subscribe(f.origin_, "room/alice", "audio"));
  ASSERT_TRUE(data.subscribe(f.origin_, "room/alice", "data"));
  f.pump();
  // SUBSCRIBE id 1 for video, then d16 §9.5 REQUESTS_BLOCKED (0x1A) at 2, once for two waiting.
  const std::string got = hex_of(c.data);
  EXPECT_EQ(got.substr(0, 2), "03");
  EXPECT_EQ(got.substr(9, 2), "01");
  const std::string blocked = canon("1a 00 01 02");
  ASSERT_NE(got.find(blocked), std::string::npos) << got;
  EXPECT_EQ(got.find(blocked), got.rfind(blocked));
  // MAX_REQUEST_ID 6: both waiting SUBSCRIBEs go out (ids 3 and 5), nothing blocked.
  const std::string more = f.exchange(c, "15 00 01 06");
  EXPECT_EQ(more.substr(0, 2), "03");
  EXPECT_EQ(more.substr(9, 2), "03");
  EXPECT_EQ(more.find(canon("1a 00")), std::string::npos) << more;
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}


// --- drafts 17 to 20: FETCH and TRACK_STATUS each on its own bidi stream (d17 §9.14, §9.16; d18
// §10.12, §10.14; d20 §10.13, §10.15), answered there without a request id; REQUEST_UPDATE on the
// request's stream (d17 §9.10, d18 §10.9).

namespace d17 {

// A SETUP with no options: the peer is not @moq/net, so LARGEST_OBJECT is the text's Location.
const char* kSetup = "af 00 00 00";

class FetchRequestStreamsTest : public testing::IetfRequestStreamsTest {
 protected:
  // SUBSCRIBE of ["room","alice"] "video": priority 7, group order 2, forward 1, the draft's
  // join filter (17..19 LargestObject; 20 relative 1, the current group).
  std::vector<uint8_t> subscribe(uint8_t request_id) const {
    return msg(0x03, id(request_id) + " " + kRoomAliceVideo + " 04 10 01 10 07 01 01 " +
                         (d20() ? "01" : "02") + " 01 02");
  }
  static void setup(Fixture& f) { send_setup(f, kSetup); }
  // The FETCH stream's bytes: FETCH_HEADER of `id`, then objects {group, object, payload} of one
  // byte each, every field written (flags 0x3C, priority 128); from 18 (§11.4.4) the same group
  // leaves the Group ID Delta out (flags 0x34, Object ID Delta), a new one writes the distance to
  // the previous group minus one and the absolute Object ID. Each object carries the properties
  // {Timestamp (0x10): 1000000} (flag 0x20; 10 cf 42 40): the fixture's objects are stamped with
  // the clock's millisecond and FETCH_OK declares TIMESCALE 1000 (08 83 e8).
  std::string stream(int id, std::vector<std::tuple<int, int, char>> objects,
                     bool descending = false) const {
    std::vector<uint8_t> out = {0x05, static_cast<uint8_t>(id)};
    std::optional<std::pair<int, int>> prev;
    for (auto [g, o, p] : objects) {
      const bool deltas = GetParam().number >= 18 && prev.has_value();
      if (deltas && prev->first == g) {
        out.insert(out.end(), {0x34, static_cast<uint8_t>(o - prev->second)});
      } else {
        const int gd = !deltas ? g : descending ? prev->first - g - 1 : g - prev->first - 1;
        out.insert(out.end(), {0x3c, static_cast<uint8_t>(gd), static_cast<uint8_t>(o)});
      }
      out.insert(out.end(), {0x80, 0x04, 0x10, 0xcf, 0x42, 0x40, 0x01, static_cast<uint8_t>(p)});
      prev = std::make_pair(g, o);
    }
    return to_hex(out);
  }
  // A standalone FETCH: 17..19 Start / End (End "plus 1") in the message; 20 `filter20` as the
  // LOCATION_FILTER fields. `extra`: more parameters (sorted after the filter's 0x21).
  std::vector<uint8_t> fetch(uint8_t request_id, const std::string& start_end,
                             const std::string& filter20, const std::string& extra = "",
                             int extra_count = 0) const {
    char count[8];
    if (d20()) {
      const size_t n = hex(filter20).size();
      std::snprintf(count, sizeof count, "%02x", 1 + extra_count);
      char len[8];
      std::snprintf(len, sizeof len, "%02zx", n);
      return msg(0x16, id(request_id) + " 01 " + kRoomAliceVideo + " " + count + " 21 " + len +
                           " " + filter20 + " " + extra);
    }
    std::snprintf(count, sizeof count, "%02x", extra_count);
    return msg(0x16, id(request_id) + " 01 " + kRoomAliceVideo + " " + start_end + " " + count +
                         " " + extra);
  }
  static int code_of(const RawStream& r) {
    return r.data.size() >= 4 ? static_cast<uint8_t>(r.data[3]) : -1;
  }
  // room/alice's track "video" made to wait for its properties, then SUBSCRIBE 0 of it: `t` the
  // track, `s` the request stream, on which nothing is answered yet (the properties are not known).
  void subscribe_before_properties(Fixture& f, model::Track*& t, RawStream*& s) const {
    t = f.origin_.track("room/alice", "video");
    ASSERT_NE(t, nullptr);
    t->expect_properties();
    s = f.raw_->open_bidi(subscribe(0));
    ASSERT_NE(s, nullptr);
    f.pump();
    EXPECT_TRUE(s->data.empty()) << hex_of(s->data);
  }
  // Group 3 of `t`: one object, timestamp 300, payload "x"; then the session writes it.
  static void publish_x_at_300(Fixture& f, model::Track& t) {
    model::Group* g = t.begin_group(3);
    ASSERT_NE(g, nullptr);
    t.begin_timed_object(*g, 1, 300);
    t.append_chunk(*g, Bytes::copy(std::string_view("x")));
    t.finish_group(*g);
    f.pump();
  }
  // The last stream the peer received begins with the byte `type` and ends with `tail_hex`.
  static void expect_last_stream(Fixture& f, const std::string& type, const std::string& tail_hex) {
    const std::string data = hex_of(f.raw_->incoming.back()->data);
    EXPECT_EQ(data.substr(0, 2), type) << data;
    const std::string tail = canon(tail_hex);
    ASSERT_GE(data.size(), tail.size());
    EXPECT_EQ(data.substr(data.size() - tail.size()), tail) << data;
  }
};

TEST_P(FetchRequestStreamsTest, StandaloneFetchReturnsExactlyTheCachedRange) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  ASSERT_NE(f.raw_->open_bidi(subscribe(0)), nullptr);  // starts the track, keeps it live
  f.pump();
  publish_three(b, f);
  const size_t streams = f.raw_->incoming.size();
  // {2, 1} to {3, 0} inclusive: 17..19 End {3, 1} ("plus 1"); 20 StartGroup 2, StartObject 1,
  // EndGroupDelta 1, EndObject 0.
  RawStream* r = f.raw_->open_bidi(fetch(2, "02 01 03 01", "02 01 01 00"));
  ASSERT_NE(r, nullptr);
  f.pump();
  // FETCH_OK: End Of Track 0, End Location (17..19: the request's End {3, 1}; 20: the last object
  // covered, {3, 0}), no parameters, Track Properties {TIMESCALE (0x08): 1000} as SUBSCRIBE_OK's
  // (d17 §9.15, d18 §10.13, d20 §10.14). Then FIN once the data stream ended.
  EXPECT_EQ(hex_of(r->data),
            canon(d20() ? "18 00 07 00 03 00 00 08 83 e8" : "18 00 07 00 03 01 00 08 83 e8"));
  EXPECT_TRUE(r->fin);
  ASSERT_EQ(f.raw_->incoming.size(), streams + 1);
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data), stream(2, {{2, 1, 'd'}, {3, 0, 'e'}}));
  EXPECT_TRUE(f.raw_->incoming.back()->fin);
  // Descending (GROUP_ORDER 0x22 = 2), groups 1 to 3 whole: groups in descending order, objects in
  // each ascending.
  r = f.raw_->open_bidi(d20() ? fetch(4, "", "01 00 02", "01 02", 1)
                              : fetch(4, "01 00 03 00", "", "22 02", 1));
  f.pump();
  // The whole of group 3 reaches past the largest object {3, 1}: End {3, 2} (d17 §9.15 "beyond
  // the Largest"), 20 the largest itself.
  EXPECT_EQ(hex_of(r->data),
            canon(d20() ? "18 00 07 00 03 01 00 08 83 e8" : "18 00 07 00 03 02 00 08 83 e8"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            stream(4, {{3, 0, 'e'}, {3, 1, 'f'}, {2, 0, 'c'}, {2, 1, 'd'}, {1, 0, 'a'}, {1, 1, 'b'}},
                   true));
  EXPECT_TRUE(r->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(FetchRequestStreamsTest, FetchCarriesTheExtensionBlocks) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  ASSERT_NE(f.raw_->open_bidi(subscribe(0)), nullptr);
  f.pump();
  publish_ietf_group(b, f);
  ASSERT_FALSE(HasFatalFailure());
  // All of group 4: 17..19 Start {4, 0} End {4, 0}; 20 StartGroup 4, StartObject 0, EndGroupDelta 0.
  RawStream* r = f.raw_->open_bidi(fetch(2, "04 00 04 00", "04 00 00"));
  ASSERT_NE(r, nullptr);
  f.pump();
  // Subgroup 0 first, then 3; the blocks' bytes are the same in every delta-coded draft here.
  // 17: every field (flags 0x3c, 0x3f with the subgroup); 18+: the same group writes no Group ID
  // and an Object ID delta (flags 0x37).
  const std::string want =
      GetParam().number == 17
          ? "05 02 3c 04 00 80 02 10 07 01 71 3f 04 03 05 80 04 0d 02 aa bb 03 61 62 63 "
            "3f 04 03 08 80 05 10 05 0d 01 cc 01 7a"
          : "05 02 3c 04 00 80 02 10 07 01 71 37 03 05 80 04 0d 02 aa bb 03 61 62 63 "
            "37 03 03 80 05 10 05 0d 01 cc 01 7a";
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data), canon(want));
  EXPECT_TRUE(f.raw_->incoming.back()->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

// A track whose timestamps moqd knows the units of (a moq-lite-05 source here: 90 kHz, its
// properties asked for first): SUBSCRIBE_OK waits for them and ends with the Track Properties
// {TIMESCALE (0x08): 90000}, and each object carries {Timestamp (0x10): its timestamp}; a FETCH
// declares and stamps the same.
TEST_P(FetchRequestStreamsTest, SubscribeOkDeclaresTheTimescaleAndObjectsCarryTimestamps) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  model::Track* t = nullptr;
  RawStream* s = nullptr;
  ASSERT_NO_FATAL_FAILURE(subscribe_before_properties(f, t, s));
  model::TrackProperties props;
  props.timescale = 90'000;
  t->set_properties(props);
  f.pump();
  // 90000 in the leading-ones forms (17, 18+): c1 5f 90.
  const std::string ok = hex_of(s->data);
  const std::string declared = canon("08 c1 5f 90");
  ASSERT_GE(ok.size(), declared.size());
  EXPECT_EQ(ok.substr(0, 2), "04") << ok;
  EXPECT_EQ(ok.substr(ok.size() - declared.size()), declared) << ok;
  ASSERT_NO_FATAL_FAILURE(publish_x_at_300(f, *t));
  // SUBGROUP_HEADER with extensions (0x19; 0x59 on 18+), then object 0: block {0x10: 300}
  // (81 2c), payload "x".
  ASSERT_NO_FATAL_FAILURE(expect_last_stream(f, d17() ? "19" : "59", "00 03 10 81 2c 01 78"));
  // FETCH of group 3 (17..19 Start {3, 0} End {3, 0}; 20 StartGroup 3, StartObject 0, delta 0):
  // FETCH_OK (d17 §9.15, d18 §10.13, d20 §10.14) ends with the same Track Properties, End {3, 1}
  // (20: {3, 0}); the object carries its Timestamp as on the subscription: flags 0x3c (with
  // properties), group 3, object 0, priority 128, block {0x10: 300}, "x".
  RawStream* r = f.raw_->open_bidi(fetch(2, "03 00 03 00", "03 00 00"));
  ASSERT_NE(r, nullptr);
  f.pump();
  EXPECT_EQ(hex_of(r->data), canon(d20() ? "18 00 08 00 03 00 00 08 c1 5f 90"
                                         : "18 00 08 00 03 01 00 08 c1 5f 90"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data), canon("05 02 3c 03 00 80 03 10 81 2c 01 78"));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

// Provisional properties (a moq-lite-05 publisher that did not answer TRACK within the relay's
// bound, Lite05SessionTest.UnansweredTrackInfoGivesProvisionalPropertiesAfterTheBound): the held
// SUBSCRIBE_OK goes out with empty Track Properties (alias 0, no parameters), and objects carry no
// Timestamp (a subscriber times them by arrival).
TEST_P(FetchRequestStreamsTest, ProvisionalPropertiesAnswerSubscribeOkWithoutTimescale) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  model::Track* t = nullptr;
  RawStream* s = nullptr;
  ASSERT_NO_FATAL_FAILURE(subscribe_before_properties(f, t, s));
  model::TrackProperties props;
  props.timescale_known = false;
  props.provisional = true;
  t->set_properties(props);
  f.pump();
  EXPECT_EQ(hex_of(s->data), canon("04 00 02 00 00"));
  ASSERT_NO_FATAL_FAILURE(publish_x_at_300(f, *t));
  // SUBGROUP_HEADER without properties (0x18; 0x58 on 18+), alias 0, group 3, priority 7;
  // object 0, payload "x".
  ASSERT_NO_FATAL_FAILURE(expect_last_stream(f, d17() ? "18" : "58", "00 01 78"));
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(FetchRequestStreamsTest, JoiningFetchRelativeAndAbsolute) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  f.raw_->open_bidi(subscribe(0));
  f.pump();
  publish_three(b, f);
  f.raw_->open_bidi(subscribe(4));  // begins at Largest {3, 1}: the joining FETCHes end there
  f.pump();
  // Relative: 17..19 Joining Start 1 (d17 §9.14.2.1: {3 - 1, 0}); 20 StartGroup 2 (§10.13.2.1:
  // {3 + 1 - 2, 0}). {2, 0} to {3, 1} inclusive.
  RawStream* r = f.raw_->open_bidi(msg(0x16, id(6) + (d20() ? " 02 04 01 21 01 02" : " 02 04 01 00")));
  f.pump();
  EXPECT_EQ(hex_of(r->data),
            canon(d20() ? "18 00 07 00 03 01 00 08 83 e8" : "18 00 07 00 03 02 00 08 83 e8"));
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            stream(6, {{2, 0, 'c'}, {2, 1, 'd'}, {3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(r->fin);
  // Absolute from group 3.
  r = f.raw_->open_bidi(msg(0x16, id(8) + (d20() ? " 03 04 01 21 01 03" : " 03 04 03 00")));
  f.pump();
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data), stream(8, {{3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(r->fin);
  // Joining a subscription that does not exist: REQUEST_ERROR INVALID_JOINING_REQUEST_ID (0x32)
  // on the FETCH's stream, then FIN.
  const size_t streams = f.raw_->incoming.size();
  r = f.raw_->open_bidi(msg(0x16, id(10) + (d20() ? " 02 30 00" : " 02 30 01 00")));
  f.pump();
  EXPECT_EQ(static_cast<uint8_t>(r->data[0]), 0x05);
  EXPECT_EQ(code_of(*r), 0x32);
  EXPECT_TRUE(r->fin);
  EXPECT_EQ(f.raw_->incoming.size(), streams);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(FetchRequestStreamsTest, StopSendingTheRequestStreamCancelsTheFetch) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  f.raw_->open_bidi(subscribe(0));
  f.pump();
  // Group 1: "abc", then an object whose payload is still arriving.
  model::GroupRef g = b.write_group("video", 1, {"abc"}, false);
  f.pump();
  model::Track* t = b.feed("video").track();
  ASSERT_NE(t, nullptr);
  t->begin_object(*g, 4);
  t->append_chunk(*g, Bytes::from(std::vector<uint8_t>{'x', 'y'}));
  f.pump();
  RawStream* r = f.raw_->open_bidi(fetch(2, "01 00 01 00", "01 00 00"));  // group 1 whole
  f.pump();
  const RawStream& s = *f.raw_->incoming.back();
  EXPECT_EQ(hex_of(s.data), canon(std::string("05 02 3c 01 00 80 04 10cf4240 03 616263 ") +
                                  (d17() ? "3c 01 01" : "34 01") + " 80 04 10cf4240 04 7879"));
  EXPECT_FALSE(s.fin);
  EXPECT_FALSE(r->fin);
  // d17 §5.2: the subscriber cancels with STOP_SENDING on the request stream; the publisher
  // resets both streams (CANCELLED, 0x1).
  r->stream->stop_sending(0x1);
  f.pump();
  ASSERT_TRUE(s.reset_code.has_value());
  EXPECT_EQ(*s.reset_code, 0x1u);
  ASSERT_TRUE(r->reset_code.has_value());
  EXPECT_EQ(*r->reset_code, 0x1u);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(FetchRequestStreamsTest, TrackStatusAnswersOnItsStreamThenFin) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  f.raw_->open_bidi(subscribe(0));
  f.pump();
  publish_three(b, f);
  const size_t streams = f.raw_->incoming.size();
  // TRACK_STATUS (SUBSCRIBE's layout, no parameters): REQUEST_OK (d18+: TRACK_STATUS_OK) with
  // LARGEST_OBJECT (0x09, a Location) {3, 1}, no Track Properties, then FIN.
  RawStream* r = f.raw_->open_bidi(msg(0x0d, id(2) + " " + kRoomAliceVideo + " 00"));
  f.pump();
  EXPECT_EQ(hex_of(r->data), canon("07 00 04 01 09 03 01"));
  EXPECT_TRUE(r->fin);
  EXPECT_EQ(f.raw_->incoming.size(), streams);  // no objects
  // An unknown broadcast: REQUEST_ERROR DOES_NOT_EXIST (0x10), FIN.
  r = f.raw_->open_bidi(msg(0x0d, id(4) + " 02 04726f6f6d 03626f62 05766964656f 00"));
  f.pump();
  EXPECT_EQ(static_cast<uint8_t>(r->data[0]), 0x05);
  EXPECT_EQ(code_of(*r), 0x10);
  EXPECT_TRUE(r->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(FetchRequestStreamsTest, RequestUpdateNarrowsALiveSubscription) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  RawStream* r = f.raw_->open_bidi(subscribe(0));
  f.pump();
  b.write_group("video", 1, {"a"});
  f.pump();
  const size_t streams = f.raw_->incoming.size();
  r->data.clear();
  // REQUEST_UPDATE on the SUBSCRIBE's stream, its own request id 2: SUBSCRIBER_PRIORITY 9 and
  // SUBSCRIPTION_FILTER AbsoluteRange {1, 0} to group 2 (17..19: tag 4, End Group Delta 1; 20:
  // fields 1 0 1). REQUEST_OK on the same stream with LARGEST_OBJECT {1, 0}.
  r->write(msg(0x02, id(2) + (d20() ? " 02 20 09 01 03 01 00 01" : " 02 20 09 01 04 04 01 00 01")));
  f.pump();
  EXPECT_EQ(hex_of(r->data), canon("07 00 04 01 09 01 00"));
  r->data.clear();
  b.write_group("video", 2, {"b"});
  f.pump();
  ASSERT_EQ(f.raw_->incoming.size(), streams + 1);
  // Group 2 carries the new priority (9); it is the end group: PUBLISH_DONE SUBSCRIPTION_ENDED
  // (0x3), then FIN.
  EXPECT_EQ(hex_of(f.raw_->incoming.back()->data),
            canon(std::string(d17() ? "19" : "59") + " 00 02 09 00 04 10 cf 42 40 01 62"));
  ASSERT_GE(r->data.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(r->data[0]), 0x0b);
  EXPECT_EQ(static_cast<uint8_t>(r->data[3]), 0x03);
  EXPECT_TRUE(r->fin);
  b.write_group("video", 3, {"c"});
  f.pump();
  EXPECT_EQ(f.raw_->incoming.size(), streams + 1);  // past the end: not delivered
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

TEST_P(FetchRequestStreamsTest, JoiningAPausedSubscription) {
  Fixture f(GetParam().alpn);
  TestBroadcast b(f.origin_, "room/alice");
  setup(f);
  f.raw_->open_bidi(subscribe(0));
  f.pump();
  publish_three(b, f);
  // Subscription 2 begins at {3, 1} (a joining FETCH of it would have objects), then pauses.
  RawStream* s = f.raw_->open_bidi(subscribe(2));
  f.pump();
  s->write(msg(0x02, id(4) + " 01 10 00"));  // REQUEST_UPDATE: FORWARD 0
  f.pump();
  RawStream* r = f.raw_->open_bidi(msg(0x16, id(6) + (d20() ? " 02 02 01 21 01 01" : " 02 02 01 00")));
  f.pump();
  if (d17()) {
    // d17 §9.14.2: "otherwise the publisher MUST close the session with a PROTOCOL_VIOLATION".
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  } else {
    // d18 §10.12.2: REQUEST_ERROR INVALID_RANGE (0x11).
    EXPECT_EQ(code_of(*r), 0x11);
    EXPECT_TRUE(r->fin);
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
}

TEST_P(FetchRequestStreamsTest, BadInputClosesWithProtocolViolation) {
  const std::vector<std::vector<uint8_t>> bad = {
      // Fetch Type 4 (d17 §9.14, d18 §10.12).
      msg(0x16, id(0) + " 04 00 00"),
      // FETCH_CANCEL (0x17): not a message from 17 on.
      msg(0x17, "00"),
      // A range filter (d19 §5.1.3 SUBGROUP_FILTER 0x25) is refused below, not here; FETCH_OK from
      // a subscriber is not a request.
      msg(0x18, "00 01 00 00"),
  };
  for (const auto& m : bad) {
    Fixture f(GetParam().alpn);
    setup(f);
    f.raw_->open_bidi(m);
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value()) << to_hex(m);
    EXPECT_EQ(*f.raw_->closed_code, 0x3u) << to_hex(m);
  }
  {
    // A malformed SUBSCRIPTION_FILTER (tag 9) in a REQUEST_UPDATE.
    Fixture f(GetParam().alpn);
    TestBroadcast b(f.origin_, "room/alice");
    setup(f);
    RawStream* s = f.raw_->open_bidi(subscribe(0));
    f.pump();
    s->write(msg(0x02, id(2) + (d20() ? " 01 21 05 01 01 01 01 01" : " 01 21 01 09")));
    f.pump();
    ASSERT_TRUE(f.raw_->closed_code.has_value());
    EXPECT_EQ(*f.raw_->closed_code, 0x3u);
  }
  if (GetParam().number >= 19) {
    // SUBGROUP_FILTER (0x25) in a FETCH: REQUEST_ERROR NOT_SUPPORTED (0x3); the session stays.
    Fixture f(GetParam().alpn);
    TestBroadcast b(f.origin_, "room/alice");
    setup(f);
    f.raw_->open_bidi(subscribe(0));
    f.pump();
    publish_three(b, f);
    RawStream* r = f.raw_->open_bidi(
        d20() ? fetch(2, "", "01 00", "04 01 00", 1) : fetch(2, "01 00 02 00", "", "25 01 00", 1));
    f.pump();
    EXPECT_EQ(code_of(*r), 0x03);
    EXPECT_TRUE(r->fin);
    EXPECT_FALSE(f.raw_->closed_code.has_value());
  }
}

INSTANTIATE_TEST_SUITE_P(Drafts, FetchRequestStreamsTest, testing::request_stream_drafts(),
                         testing::request_stream_draft_name);

}  // namespace d17

}  // namespace fetch_test
}  // namespace moqd::session
