// lite-03/04 SUBSCRIBE fields (start_group, end_group, ordered) as the publisher side honours them.
// The subscriber is a RawPeer speaking the wire by hand, because our own session never sends them.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "session/session.h"
#include "testing/session_fixture.h"
#include "wire/lite.h"

namespace moqd::session {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::RawStream;
using moqd::testing::SessionPair;
using moqd::testing::SessionPairOptions;
using moqd::testing::TestBroadcast;
using moqd::testing::pattern_bytes;
using namespace std::chrono_literals;

struct RawGroup {
  uint64_t subscribe_id = 0;
  uint64_t sequence = 0;
  std::vector<std::string> frames;
  bool fin = false;
  int fin_index = -1;
};

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Parses a group uni stream (type byte, GROUP header, FRAMEs); nullopt if it is not one.
std::optional<RawGroup> parse_group(wire::Version v, const RawStream& s) {
  auto in = bytes_of(s.data);
  if (in.empty() || in[0] != static_cast<uint8_t>(wire::UniType::kGroup)) {
    return std::nullopt;
  }
  in = in.subspan(1);
  auto h = wire::decode_group_header(v, in, wire::DecodeLimits{});
  if (!h || !h->has_value()) {
    return std::nullopt;
  }
  RawGroup g{(*h)->value.subscribe_id, (*h)->value.sequence, {}, s.fin, s.fin_index};
  in = in.subspan((*h)->consumed);
  while (!in.empty()) {
    auto size = wire::decode_frame_header(in);
    if (!size || !size->has_value() || in.size() - (*size)->consumed < (*size)->value) {
      break;
    }
    in = in.subspan((*size)->consumed);
    g.frames.emplace_back(reinterpret_cast<const char*>(in.data()), (*size)->value);
    in = in.subspan((*size)->value);
  }
  return g;
}

class SubscribeFieldsTest : public ::testing::TestWithParam<wire::Version> {
 protected:
  wire::Version version() const { return GetParam(); }

  void SetUp() override {
    SessionPairOptions o;
    o.protocol = GetParam() == wire::Version::kLite03 ? "moq-lite-03" : "moq-lite-04";
    o.raw_server = true;
    pair_ = std::make_unique<SessionPair>(std::move(o));
    pair_->start();
    alice_ = std::make_unique<TestBroadcast>(pair_->client_origin(), "alice");
    ASSERT_TRUE(local_.subscribe(pair_->client_origin(), "alice", "video"));
    pair_->pump();
  }
  void TearDown() override {
    local_.unsubscribe();
    alice_.reset();
  }

  RawStream* subscribe(wire::Subscribe req) {
    std::vector<uint8_t> out{static_cast<uint8_t>(wire::BidiType::kSubscribe)};
    wire::encode(version(), req, out);
    RawStream* s = pair_->raw().open_bidi(std::move(out));
    pair_->pump();
    return s;
  }
  static wire::Subscribe request(uint64_t id) {
    wire::Subscribe r;
    r.id = id;
    r.broadcast = "alice";
    r.track = "video";
    r.priority = 1;
    return r;
  }
  std::map<uint64_t, RawGroup> groups_for(uint64_t id) {
    std::map<uint64_t, RawGroup> out;
    for (const auto& s : pair_->raw().incoming) {
      auto g = parse_group(version(), *s);
      if (g && g->subscribe_id == id) {
        out[g->sequence] = *g;
      }
    }
    return out;
  }
  void write_groups(uint64_t from, uint64_t to, size_t size = 10) {
    for (uint64_t seq = from; seq <= to; ++seq) {
      alice_->write_group("video", seq, {pattern_bytes(size, static_cast<uint8_t>(seq))});
    }
    pair_->pump();
  }

  std::unique_ptr<SessionPair> pair_;
  std::unique_ptr<TestBroadcast> alice_;
  FrameCollector local_;  // keeps the publisher's track fed and cached
};

INSTANTIATE_TEST_SUITE_P(Versions, SubscribeFieldsTest,
                         ::testing::Values(wire::Version::kLite03, wire::Version::kLite04),
                         [](const auto& info) {
                           return info.param == wire::Version::kLite03 ? "Lite03" : "Lite04";
                         });

TEST_P(SubscribeFieldsTest, OkEchoesTheRequestedRange) {
  wire::Subscribe r = request(3);
  r.start_group = 1;
  r.end_group = 5;
  r.ordered = true;
  RawStream* s = subscribe(r);
  ASSERT_NE(s, nullptr);
  auto resp = wire::decode_subscribe_response(version(), bytes_of(s->data), wire::DecodeLimits{});
  ASSERT_TRUE(resp && resp->has_value());
  ASSERT_TRUE(std::holds_alternative<wire::SubscribeOk>((*resp)->value));
  const auto& ok = std::get<wire::SubscribeOk>((*resp)->value);
  EXPECT_EQ(ok.start_group, std::optional<uint64_t>(1));
  EXPECT_EQ(ok.end_group, std::optional<uint64_t>(5));
  EXPECT_TRUE(ok.ordered);
}

TEST_P(SubscribeFieldsTest, WithoutStartGroupALateJoinerGetsTheNewestCachedGroup) {
  write_groups(0, 3);
  subscribe(request(1));
  write_groups(4, 4);
  auto groups = groups_for(1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups.count(3) && groups.count(4));
}

TEST_P(SubscribeFieldsTest, StartGroupReplaysFromTheCache) {
  write_groups(0, 3);
  wire::Subscribe r = request(2);
  r.start_group = 1;
  subscribe(r);
  write_groups(4, 4);
  auto groups = groups_for(2);
  std::vector<uint64_t> seqs;
  for (const auto& [seq, g] : groups) {
    seqs.push_back(seq);
    EXPECT_TRUE(g.fin);
    EXPECT_EQ(g.frames, std::vector<std::string>{pattern_bytes(10, static_cast<uint8_t>(seq))});
  }
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST_P(SubscribeFieldsTest, EndGroupEndsTheSubscriptionAfterThatGroup) {
  write_groups(0, 1);
  wire::Subscribe r = request(4);
  r.start_group = 1;
  r.end_group = 2;
  RawStream* s = subscribe(r);
  ASSERT_NE(s, nullptr);
  write_groups(2, 4);
  pair_->advance(1s);
  auto groups = groups_for(4);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups.count(1) && groups.count(2));
  EXPECT_TRUE(s->fin) << "the subscribe stream is not finished after end_group";
  EXPECT_FALSE(s->reset_code.has_value());
  EXPECT_EQ(pair_->client().subscription_count(), 0u);
  EXPECT_FALSE(pair_->client_handler().is_closed());
}

TEST_P(SubscribeFieldsTest, EndBeforeStartIsRefused) {
  write_groups(0, 3);
  wire::Subscribe r = request(5);
  r.start_group = 3;
  r.end_group = 1;
  RawStream* s = subscribe(r);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->reset_code, static_cast<uint64_t>(ErrorCode::kProtocolViolation));
  EXPECT_TRUE(groups_for(5).empty());
  EXPECT_FALSE(pair_->client_handler().is_closed());
}

// Groups queued while the transport is blocked leave in send order: older first when ordered,
// newer first otherwise. The FIN order of the group streams shows which.
std::vector<uint64_t> fin_order(const std::map<uint64_t, RawGroup>& groups) {
  std::vector<std::pair<int, uint64_t>> by_fin;
  for (const auto& [seq, g] : groups) {
    by_fin.emplace_back(g.fin_index, seq);
  }
  std::sort(by_fin.begin(), by_fin.end());
  std::vector<uint64_t> out;
  for (const auto& [i, seq] : by_fin) {
    out.push_back(seq);
  }
  return out;
}

TEST_P(SubscribeFieldsTest, OrderedSendsOlderGroupsFirst) {
  wire::Subscribe r = request(6);
  r.ordered = true;
  subscribe(r);
  pair_->client_channel().set_low_water(1);
  pair_->hold_wire(true);
  // Fill the channel so the scheduler stops; then queue four groups at once.
  write_groups(0, 3, 40'000);
  pair_->hold_wire(false);
  pair_->pump();
  EXPECT_EQ(fin_order(groups_for(6)), (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST_P(SubscribeFieldsTest, UnorderedSendsNewerGroupsFirst) {
  subscribe(request(7));
  pair_->client_channel().set_low_water(1);
  pair_->hold_wire(true);
  write_groups(0, 3, 40'000);
  pair_->hold_wire(false);
  pair_->pump();
  EXPECT_EQ(fin_order(groups_for(7)), (std::vector<uint64_t>{3, 2, 1, 0}));
}

}  // namespace
}  // namespace moqd::session
