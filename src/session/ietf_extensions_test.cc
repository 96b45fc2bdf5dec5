// Object ids with gaps, subgroups and extension blocks (Properties, d18+) through the relay, on
// drafts 15 to 20 (14, reached through SETUP only, writes blocks as 15 does): an
// IETF peer publishes a track and subscribes to it again through moqd (one session, fake
// streams), and what it reads back must be what it wrote, byte for byte, past the SUBGROUP_HEADER
// moqd writes for its own alias. moq-lite subscribers refuse what moq-lite cannot express, per
// group and per subscriber, with UNSUPPORTED.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/codec.h"
#include "session/ietf_session.h"
#include "session/session.h"
#include "testing/ietf_fixture.h"
#include "testing/session_fixture.h"
#include "wire/ietf.h"
#include "wire/lite.h"

namespace moqd::session::extensions_test {
namespace {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;
using moqd::testing::RecordingHandler;
using moqd::testing::TestBroadcast;
using transport::websocket::MuxSession;

using testing::hex;
using testing::hex_of;

// The shared server fixture (testing/ietf_fixture.h), and the streams moqd opened by their start.
class Fixture : public moqd::testing::IetfServerFixture {
 public:
  using IetfServerFixture::IetfServerFixture;
  // The streams moqd opened whose bytes start with `prefix` (hex).
  std::vector<const RawStream*> streams_from(const std::string& prefix) const {
    std::vector<const RawStream*> out;
    for (const auto& s : raw_->incoming) {
      if (hex_of(s->data).rfind(prefix, 0) == 0) {
        out.push_back(s.get());
      }
    }
    return out;
  }
};

// The objects both tests send (every varint below 0x40: the same bytes in QUIC, leading-ones and
// d18's form), with the extension blocks delta-coded as d16+ write them:
//   id 5: properties {0x0d: aa bb}, "abc"; id 8 (a gap of 2): {0x10: 5, 0x1d: cc}, "z".
const char* kGappedObjects = "05 04 0d 02 aa bb 03 61 62 63 02 05 10 05 0d 01 cc 01 7a";
// Subgroup 0 of the same group: id 0, {0x10: 7} (a timestamp alone), "q".
const char* kPlainObjects = "00 02 10 07 01 71";

// d15 and d16 on the control stream: the peer publishes room/alice and subscribes to room/alice
// "video" through moqd, which subscribes upstream to the peer. (d15 writes Key-Value-Pair types
// absolute: the blocks below then read as other, equally valid, pairs, forwarded as they are.)
class ControlStreamTest : public ::testing::TestWithParam<int> {};

TEST_P(ControlStreamTest, SubgroupsGapsAndExtensionsComeBackUnchanged) {
  const bool d15 = GetParam() == 15;
  Fixture f(d15 ? "moqt-15" : "moqt-16");
  // @moq/lite 0.2.2's CLIENT_SETUP (MaxRequestId 42069, Implementation), d15 / d16 form.
  RawStream* c = f.raw_->open_bidi(hex(std::string("20 00 13 02 02 80 00 a4 55 ") +
                                       (d15 ? "07" : "05") + " 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73"));
  f.pump();
  c->write(hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));  // PUBLISH_NAMESPACE id 0
  f.pump();
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  c->data.clear();
  // SUBSCRIBE id 2 ["room","alice"] "video": forward 1, priority 7, LargestObject, order 2
  // (parameter types delta-coded on 16, absolute on 15).
  c->write(hex(std::string("03 00 1d 02 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f ") +
               (d15 ? "04 10 01 20 07 21 01 02 22 02" : "04 10 01 10 07 01 01 02 01 02")));
  f.pump();
  // moqd's own SUBSCRIBE upstream (id 1) is on the control stream; answer SUBSCRIBE_OK alias 9.
  ASSERT_NE(hex_of(c->data).find("03 00"), std::string::npos) << hex_of(c->data);
  c->write(hex("04 00 03 01 09 00"));
  f.pump();
  // Group 4 as two subgroups: 3 (explicit field, type 0x1d: extensions, subgroup, end of group)
  // with ids 5 and 8, and 0 (type 0x19) with id 0.
  f.peer_stream(std::string("1d 09 04 03 80 ") + kGappedObjects);
  f.peer_stream(std::string("19 09 04 80 ") + kPlainObjects);
  // moqd's streams to the subscriber: its alias is the request id 2, priority 7.
  auto sg3 = f.streams_from("1d 02 04 03 07");
  ASSERT_EQ(sg3.size(), 1u);
  EXPECT_EQ(hex_of(sg3[0]->data), std::string("1d 02 04 03 07 ") + kGappedObjects);
  EXPECT_TRUE(sg3[0]->fin);
  auto sg0 = f.streams_from("19 02 04 07");
  ASSERT_EQ(sg0.size(), 1u);
  EXPECT_EQ(hex_of(sg0[0]->data), std::string("19 02 04 07 ") + kPlainObjects);
  EXPECT_TRUE(sg0[0]->fin);
  // The same subgroup twice is a duplicate (refused, STOP_SENDING), another subgroup is not.
  f.peer_stream(std::string("1d 09 04 03 80 ") + kGappedObjects);
  EXPECT_EQ(f.streams_from("1d 02 04 03 07").size(), 1u);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  // The model holds them as they came.
  model::Track* t = f.origin_.track("room/alice", "video");
  ASSERT_NE(t, nullptr);
  size_t subgroups = 0;
  t->for_each_group_from(0, [&](const model::GroupRef& g) {
    ++subgroups;
    if (g->subgroup() == 3) {
      ASSERT_EQ(g->objects().size(), 2u);
      EXPECT_EQ(g->objects()[0].id, 5u);
      EXPECT_EQ(g->objects()[1].id, 8u);
      EXPECT_TRUE(g->objects()[1].lite_refused);
      EXPECT_EQ(g->objects()[1].extensions_draft, GetParam());
      EXPECT_EQ(hex_of(std::string(reinterpret_cast<const char*>(g->objects()[1].extensions.data()),
                                   g->objects()[1].extensions.size())),
                "10 05 0d 01 cc");
    } else {
      ASSERT_EQ(g->objects().size(), 1u);
      // A timestamp alone is what moq-lite carries too (moq-lite-05 FRAME timestamps).
      EXPECT_FALSE(g->objects()[0].lite_refused);
      EXPECT_EQ(g->objects()[0].timestamp, 7u);
    }
  });
  EXPECT_EQ(subgroups, 2u);
}

INSTANTIATE_TEST_SUITE_P(Drafts, ControlStreamTest, ::testing::Values(15, 16),
                         [](const auto& info) { return "D" + std::to_string(info.param); });

// d14 on the control stream, as above: its SUBSCRIBE and SUBSCRIBE_OK carry fields, not
// parameters, and its extension blocks absolute types (d14 §10.4.2), which read the same bytes as
// other valid pairs; moqd forwards the objects, gaps, subgroups and blocks unchanged.
TEST(IetfExtensionsTest, Draft14SubgroupsGapsAndExtensionsComeBackUnchanged) {
  Fixture f("", testing::only_draft14());
  RawStream* c = f.raw_->open_bidi(
      hex("20 00 2c 03 c0 00 00 00 ff 0d ad 02 c0 00 00 00 ff 0d ad 01 c0 00 00 00 ff 00 00 0e "
          "02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73"));
  f.pump();
  c->write(hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));  // PUBLISH_NAMESPACE id 0
  f.pump();
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  c->data.clear();
  // d14 §9.7 SUBSCRIBE id 2: priority 7, group order 0 (the publisher's), forward 1, LargestObject.
  c->write(hex("03 00 18 02 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f 07 00 01 02 00"));
  f.pump();
  // moqd's SUBSCRIBE upstream (id 1); d14 §9.8 SUBSCRIBE_OK: alias 9, expires 0, ascending, no
  // content yet, no parameters.
  ASSERT_NE(hex_of(c->data).find("03 00"), std::string::npos) << hex_of(c->data);
  c->write(hex("04 00 06 01 09 00 01 00 00"));
  f.pump();
  f.peer_stream(std::string("1d 09 04 03 80 ") + kGappedObjects);
  f.peer_stream(std::string("19 09 04 80 ") + kPlainObjects);
  auto sg3 = f.streams_from("1d 02 04 03 07");
  ASSERT_EQ(sg3.size(), 1u) << f.raw_->incoming.size();
  EXPECT_EQ(hex_of(sg3[0]->data), std::string("1d 02 04 03 07 ") + kGappedObjects);
  EXPECT_TRUE(sg3[0]->fin);
  auto sg0 = f.streams_from("19 02 04 07");
  ASSERT_EQ(sg0.size(), 1u);
  EXPECT_EQ(hex_of(sg0[0]->data), std::string("19 02 04 07 ") + kPlainObjects);
  EXPECT_TRUE(sg0[0]->fin);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
}

// 17 to 20: a request stream per request and SETUP on uni streams; 18+ types carry FIRST_OBJECT.
class RequestStreamTest : public testing::IetfRequestStreamsTest {
 protected:
  // A SUBGROUP_HEADER type of 17 (0x1d, 0x19) with FIRST_OBJECT on 18+.
  std::string type(int base) const {
    char b[4];
    std::snprintf(b, sizeof b, "%02x", base | (d17() ? 0 : 0x40));
    return b;
  }
};

TEST_P(RequestStreamTest, SubgroupsGapsAndPropertiesComeBackUnchanged) {
  Fixture f(GetParam().alpn);
  // @moq/net 0.3.4's SETUP (src/session/ietf_session_test.cc kSetup).
  send_setup(f, "af 00 00 1b 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73 c4 0b 4e 08 fe "
                "0a 5a 2a db 5a 87 d4 05 01");
  RawStream* pn = f.raw_->open_bidi(msg(0x06, id(0) + " 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
  f.pump();
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  // SUBSCRIBE id 2, priority 7, forward 1, group order 2, the filter @moq/net sends: 17..19
  // LargestObject, 20 relative 1 (the current group).
  RawStream* sub = f.raw_->open_bidi(
      msg(0x03, id(2) + " 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f 04 10 01 10 07 01 01 " +
                    (d20() ? "01" : "02") + " 01 02"));
  f.pump();
  // moqd's SUBSCRIBE upstream on a bidi stream of its own: SUBSCRIBE_OK alias 9 there.
  RawStream* up = nullptr;
  for (const auto& s : f.raw_->incoming) {
    if (!s->data.empty() && static_cast<uint8_t>(s->data[0]) == 0x03) {
      up = s.get();
    }
  }
  ASSERT_NE(up, nullptr);
  up->write(msg(0x04, "09 00"));
  f.pump();
  ASSERT_FALSE(sub->data.empty());
  EXPECT_EQ(static_cast<uint8_t>(sub->data[0]), 0x04) << hex_of(sub->data);
  f.peer_stream(type(0x1d) + " 09 04 03 80 " + kGappedObjects);
  f.peer_stream(type(0x19) + " 09 04 80 " + kPlainObjects);
  auto sg3 = f.streams_from(type(0x1d) + " 02 04 03 07");
  ASSERT_EQ(sg3.size(), 1u);
  EXPECT_EQ(hex_of(sg3[0]->data), type(0x1d) + " 02 04 03 07 " + kGappedObjects);
  EXPECT_TRUE(sg3[0]->fin);
  auto sg0 = f.streams_from(type(0x19) + " 02 04 07");
  ASSERT_EQ(sg0.size(), 1u);
  EXPECT_EQ(hex_of(sg0[0]->data), type(0x19) + " 02 04 07 " + kPlainObjects);
  EXPECT_FALSE(f.raw_->closed_code.has_value());
  (void)pn;
}

INSTANTIATE_TEST_SUITE_P(Drafts, RequestStreamTest, testing::request_stream_drafts(),
                         testing::request_stream_draft_name);

// The subgroup named by its first object's id (type 0x1b: extensions, end of group, subgroup =
// first object id): a group of its own, subgroup 6, sent back with an explicit subgroup field.
TEST(IetfExtensionsTest, D16SubgroupNamedByItsFirstObject) {
  Fixture f("moqt-16");
  RawStream* c = f.raw_->open_bidi(
      hex("20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73"));
  f.pump();
  c->write(hex("06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
  c->write(hex("03 00 1d 02 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f "
               "04 10 01 10 07 01 01 02 01 02"));
  f.pump();
  c->write(hex("04 00 03 01 09 00"));
  f.pump();
  f.peer_stream("1b 09 04 80 06 00 01 61 00 00 01 62");  // ids 6 and 7, no extensions
  auto sg = f.streams_from("1d 02 04 06 07");
  ASSERT_EQ(sg.size(), 1u);
  EXPECT_EQ(hex_of(sg[0]->data), "1d 02 04 06 07 06 00 01 61 00 00 01 62");
}

// A moq-lite subscriber of a track whose objects moq-lite cannot carry: the group is reset with
// UNSUPPORTED at that object (what came before it was sent), another subgroup is not sent, and
// the objects it can carry flow. Another subscriber's copy is untouched (the model keeps all).
class LiteRefusalTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LiteRefusalTest, WhatMoqLiteCannotCarryIsRefusedPerGroup) {
  moqd::testing::SessionPairOptions o;
  o.protocol = GetParam();
  o.raw_server = true;
  moqd::testing::SessionPair pair(std::move(o));
  pair.start();
  TestBroadcast alice(pair.client_origin(), "alice");
  moqd::testing::FrameCollector keep;
  ASSERT_TRUE(keep.subscribe(pair.client_origin(), "alice", "video"));
  pair.pump();
  const wire::Version v = std::string(GetParam()) == "moq-lite-03" ? wire::Version::kLite03
                                                                   : wire::Version::kLite04;
  std::vector<uint8_t> req{static_cast<uint8_t>(wire::BidiType::kSubscribe)};
  wire::Subscribe s;
  s.id = 1;
  s.broadcast = "alice";
  s.track = "video";
  wire::encode(v, s, req);
  ASSERT_NE(pair.raw().open_bidi(std::move(req)), nullptr);
  pair.pump();
  model::Track* t = alice.feed("video").track();
  ASSERT_NE(t, nullptr);
  auto object = [&](model::Group& g, uint64_t id, const std::string& payload,
                    std::vector<uint8_t> ext, bool refused) {
    model::Track::IetfObject in;
    in.id = id;
    in.size = payload.size();
    in.extensions = Bytes::copy(std::span<const uint8_t>(ext));
    in.extensions_draft = 16;
    in.lite_refused = refused;
    t->begin_ietf_object(g, std::move(in));
    t->append_chunk(g, Bytes::copy(std::string_view(payload)));
  };
  // Group 1: "a" (carried, and sent before what follows exists), then an object with a property
  // moq-lite has no place for.
  model::Group* g1 = t->begin_group(1, 0, true);
  object(*g1, 0, "a", {}, false);
  pair.pump();
  object(*g1, 1, "b", {0x0d, 0x01, 0xcc}, true);
  t->finish_group(*g1);
  pair.pump();
  // Group 2: ids 0 and 2 (a gap moq-lite cannot number).
  model::Group* g2 = t->begin_group(2, 0, true);
  object(*g2, 0, "c", {}, false);
  pair.pump();
  object(*g2, 2, "d", {}, false);
  t->finish_group(*g2);
  pair.pump();
  // Group 3: subgroup 1 (not sent), then subgroup 0 (sent whole).
  model::Group* g3s1 = t->begin_group(3, 1, true);
  object(*g3s1, 0, "e", {}, false);
  t->finish_group(*g3s1);
  model::Group* g3 = t->begin_group(3, 0, true);
  object(*g3, 0, "f", {}, false);
  t->finish_group(*g3);
  pair.pump();
  std::vector<std::string> group_streams;
  std::vector<std::optional<uint64_t>> resets;
  for (const auto& r : pair.raw().incoming) {
    // Group streams: type 0, GROUP {size 2, subscribe 1, sequence}, FRAMEs {size, payload}.
    if (hex_of(r->data).rfind("00 02 01", 0) == 0) {
      group_streams.push_back(hex_of(r->data));
      resets.push_back(r->reset_code);
    }
  }
  ASSERT_EQ(group_streams.size(), 3u);
  EXPECT_EQ(group_streams[0], "00 02 01 01 01 61");
  EXPECT_EQ(resets[0], static_cast<uint64_t>(ErrorCode::kUnsupported));
  EXPECT_EQ(group_streams[1], "00 02 01 02 01 63");
  EXPECT_EQ(resets[1], static_cast<uint64_t>(ErrorCode::kUnsupported));
  EXPECT_EQ(group_streams[2], "00 02 01 03 01 66");
  EXPECT_FALSE(resets[2].has_value());
  // The in-process reader (another subscriber) got every object of every subgroup.
  ASSERT_NE(keep.group(1), nullptr);
  EXPECT_EQ(keep.group(1)->frames, (std::vector<std::string>{"a", "b"}));
}

INSTANTIATE_TEST_SUITE_P(Lite, LiteRefusalTest, ::testing::Values("moq-lite-03", "moq-lite-04"),
                         [](const auto& info) { return "L" + std::string(info.param).substr(9); });

}  // namespace
}  // namespace moqd::session::extensions_test
