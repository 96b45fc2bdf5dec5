// moq-lite-04 hop ids between relays (relay/cluster.h): a relay appends its hop id to what it
// announces, asks its peer (ANNOUNCE_PLEASE exclude_hop) not to send routes through itself, and
// drops an announcement whose hops already hold its id.
#include <gtest/gtest.h>

#include "session/handlers.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::testing::SessionPair;
using moqd::testing::SessionPairOptions;
using moqd::testing::TestBroadcast;

constexpr uint64_t kServerHop = 11;
constexpr uint64_t kClientHop = 22;

SessionPairOptions relay_pair(TrafficCounters* server = nullptr, TrafficCounters* client = nullptr) {
  SessionPairOptions o;
  o.server.traffic = server;
  o.client.traffic = client;
  o.protocol = "moq-lite-04";
  o.server.hop_id = kServerHop;
  o.client.hop_id = kClientHop;
  return o;
}

// A broadcast of someone else's origin, with the route it came by.
class RelayedBroadcast final : public model::BroadcastSource {
 public:
  model::TrackSource& track_source(const std::string&, const std::string&) override {
    return feed;
  }
  TestBroadcast::Feed feed;
};

const testing::RecordingHandler::PeerAnnounce* find(const testing::RecordingHandler& h,
                                                    const std::string& path) {
  for (const auto& a : h.announces) {
    if (a.path == path && a.active) {
      return &a;
    }
  }
  return nullptr;
}

TEST(ClusterHopsTest, RelayAppendsItsHopIdAndPeersSkipRoutesThroughThemselves) {
  TrafficCounters server_traffic;
  SessionPair p(relay_pair(&server_traffic));
  TestBroadcast local(p.client_origin(), "local");
  RelayedBroadcast far, loop;
  p.client_origin().announce("far", &far, model::Hops{77});
  // A route that already crossed the server: sending it there would be a loop.
  p.client_origin().announce("loop", &loop, model::Hops{77, kServerHop});
  p.start();
  p.pump();

  const auto* l = find(p.server_handler(), "local");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->hops, (model::Hops{kClientHop}));
  const auto* f = find(p.server_handler(), "far");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->hops, (model::Hops{77, kClientHop}));
  EXPECT_EQ(find(p.server_handler(), "loop"), nullptr);
  EXPECT_FALSE(p.server_origin().is_active("loop"));
  // The client did not even send it (exclude_hop): the server had no loop to drop.
  EXPECT_EQ(server_traffic.announces_looped.get(), 0u);

  // A route that becomes a loop later is withdrawn from the peer.
  p.client_origin().announce("far", &far, model::Hops{77, kServerHop});
  p.pump();
  EXPECT_FALSE(p.server_origin().is_active("far"));
  p.client_origin().unannounce("far", &far);
  p.client_origin().unannounce("loop", &loop);
  p.pump();
}

// The receiving side drops a looped announcement itself, whatever the sender excluded: here the
// peer has the same hop id as the client (two relays given one --cluster-node), so what it sends
// holds the client's id once it appended its own, and the client takes none of it.
TEST(ClusterHopsTest, AnnouncementHoldingOwnHopIdIsALoopAndDropped) {
  TrafficCounters client_traffic;
  SessionPairOptions o = relay_pair(nullptr, &client_traffic);
  o.server.hop_id = kClientHop;
  SessionPair p(std::move(o));
  RelayedBroadcast via;
  p.server_origin().announce("looped", &via, model::Hops{5, 6});
  p.start();
  p.pump();
  EXPECT_FALSE(p.client_origin().is_active("looped"));
  EXPECT_EQ(find(p.client_handler(), "looped"), nullptr);
  EXPECT_EQ(client_traffic.announces_looped.get(), 1u);
  // Without the clash the same announcement is taken, with the sender's id appended.
  SessionPair q(relay_pair());
  RelayedBroadcast via2;
  q.server_origin().announce("looped", &via2, model::Hops{5, 6});
  q.start();
  q.pump();
  ASSERT_TRUE(q.client_origin().is_active("looped"));
  EXPECT_EQ(q.client_origin().routes("looped").at(0).hops, (model::Hops{5, 6, kServerHop}));
  p.server_origin().unannounce("looped", &via);
  q.server_origin().unannounce("looped", &via2);
  p.pump();
  q.pump();
}

// moq-lite-05 names the responder's hop once, in ANNOUNCE_OK: the relay, never a warm copy (moqd
// marks warmth only on the hop lite-04 appends). A peer that sets the warm bit there (not moqd,
// or a bad peer) has it cleared on ingress: its hop counts in full and names the relay it is.
TEST(ClusterHopsTest, WarmBitOnLite05ResponderHopIsCleared) {
  SessionPairOptions o = relay_pair();
  o.protocol = "moq-lite-05";
  o.server.hop_id = kServerHop | model::kWarmHop;
  SessionPair p(std::move(o));
  RelayedBroadcast via;
  p.server_origin().announce("far", &via, model::Hops{5});
  p.start();
  p.pump();
  ASSERT_TRUE(p.client_origin().is_active("far"));
  EXPECT_EQ(p.client_origin().routes("far").at(0).hops, (model::Hops{5, kServerHop}));
  p.server_origin().unannounce("far", &via);
  p.pump();
}

class NullTrackListener final : public model::TrackListener {
 public:
  void on_track_data(model::Track&) override {}
  void on_track_ended(model::Track&, Error) override {}
};

std::vector<testing::RecordingHandler::PeerAnnounce> announces_of(const testing::RecordingHandler& h,
                                                                   const std::string& path) {
  std::vector<testing::RecordingHandler::PeerAnnounce> out;
  for (const auto& a : h.announces) {
    if (a.path == path) {
      out.push_back(a);
    }
  }
  return out;
}

// A relay that starts carrying a relayed broadcast (its first track: an upstream subscription)
// re-announces it to a relay peer with its hop marked warm, and back when the last track goes.
// lite-04 has no update, so it goes out as ended then active in one write, and the peer applies
// the pair as one change: its handler never sees the route withdrawn, and the route's tracks
// would stay. A client peer hears nothing of it: one that is no relay link, and one trusted as a
// link (an open relay trusts every session) that named no hop id in ANNOUNCE_PLEASE.
TEST(ClusterHopsTest, WarmCopyIsReannouncedToARelayAsOneUpdate) {
  for (int peer_kind : {0, 1, 2}) {
    const bool relay_peer = peer_kind == 0;
    SCOPED_TRACE(peer_kind == 0 ? "relay peer" : peer_kind == 1 ? "client peer" : "hopless link");
    SessionPairOptions o = relay_pair();
    if (peer_kind == 2) {
      o.server.hop_id = 0;  // its ANNOUNCE_PLEASE names no hop id
    }
    o.server_origin.upstream_linger = std::chrono::seconds(1);
    o.client_origin.upstream_linger = std::chrono::seconds(1);
    SessionPair p(std::move(o));
    p.client_handler().relay_link = peer_kind != 1;
    p.server_handler().relay_link = peer_kind != 1;
    RelayedBroadcast far;
    p.client_origin().announce("far", &far, model::Hops{77});
    p.start();
    p.pump();
    const size_t sent_idle = p.client_channel().sent().size();
    model::Track* t = p.client_origin().track("far", "video");
    ASSERT_NE(t, nullptr);
    NullTrackListener viewer;
    t->add_listener(&viewer);
    // Only a relay peer is sent anything (the track's source is local to the client).
    p.pump();
    const size_t sent_before = sent_idle;
    EXPECT_EQ(p.client_channel().sent().size() > sent_before, relay_peer);
    const model::Hops warm{77, kClientHop | model::kWarmHop};
    const model::Hops cold{77, kClientHop};
    using A = testing::RecordingHandler::PeerAnnounce;
    auto same = [](const std::vector<A>& got, const std::vector<std::pair<bool, model::Hops>>& want) {
      if (got.size() != want.size()) {
        return false;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i].active != want[i].first || got[i].hops != want[i].second) {
          return false;
        }
      }
      return true;
    };
    if (relay_peer) {
      EXPECT_TRUE(same(announces_of(p.server_handler(), "far"), {{true, cold}, {true, warm}}));
      EXPECT_EQ(p.server_origin().routes("far").at(0).hops, warm);
    } else {
      EXPECT_TRUE(same(announces_of(p.server_handler(), "far"), {{true, cold}}));
    }
    t->remove_listener(&viewer);
    p.advance(std::chrono::seconds(2));  // past the linger: the upstream subscription ends
    p.pump();
    EXPECT_FALSE(p.client_origin().is_carrying("far"));
    if (relay_peer) {
      EXPECT_TRUE(same(announces_of(p.server_handler(), "far"), {{true, cold}, {true, warm}, {true, cold}}));
      EXPECT_EQ(p.server_origin().routes("far").at(0).hops, cold);
    } else {
      EXPECT_TRUE(same(announces_of(p.server_handler(), "far"), {{true, cold}}));
    }
    // A withdrawal alone waits kUpdateGrace for an active that would make it an update.
    p.client_origin().unannounce("far", &far);
    p.pump();
    EXPECT_EQ(p.server_origin().is_active("far"), peer_kind != 1);  // came with hops
    p.advance(AnnounceRequester::kUpdateGrace);
    p.pump();
    EXPECT_FALSE(p.server_origin().is_active("far"));
  }
}

}  // namespace
}  // namespace moqd::session
