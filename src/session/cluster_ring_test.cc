// Relays in process: moq-lite-04 sessions over in-memory channels, one Origin per relay, every
// peer announcement put into the relay's Origin as the relay does (relay/worker.cc
// on_peer_announce), all on one ManualClock. Each relay counts the announcements it hears from
// its peers (a new route, an update, a withdrawal: every on_peer_announce), and after each event
// (a broadcast appears, viewers make warm copies, the publisher leaves, comes back, moves, a link
// drops and returns) the relays must fall quiet with a bounded number of them per relay. A storm
// shows as relays that never fall quiet, or as counts far past the bound (docs/ARCHITECTURE.md,
// Clustering: why announcements settle).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "session/session.h"
#include "testing/mux_pair.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::TestBroadcast;

constexpr size_t kRelays = 5;
constexpr char kPath[] = "ring/cam";

// One relay: its Origin and the announcements its peers made to it.
struct RingRelay {
  RingRelay(uint64_t hop, ManualClock& clock) : hop_id(hop), origin(config(hop), clock, clock) {}
  static model::OriginConfig config(uint64_t hop) {
    model::OriginConfig c;
    c.hop_id = hop;
    c.upstream_linger = std::chrono::milliseconds(200);
    return c;
  }
  uint64_t hop_id;
  model::Origin origin;
  uint64_t heard = 0;  // on_peer_announce calls, over every link this relay had
};

// A relay's side of a link: a trusted relay peer whose announcements go into the relay's Origin.
class LinkHandler final : public SessionHandler {
 public:
  // `cost`: the link's ?cost=N, added to the score of every route learned over it.
  LinkHandler(RingRelay& relay, uint64_t cost) : relay_(relay), cost_(cost) {}
  bool authorize(Action, std::string_view, std::string_view) override { return true; }
  void on_session_ready(wire::Version) override {}
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                        model::BroadcastSource& source) override {
    ++relay_.heard;
    if (active) {
      relay_.origin.announce(path, &source, hops, cost_);
    } else {
      relay_.origin.unannounce(path, &source);
    }
  }
  bool is_relay_link() const override { return true; }
  void on_session_closed(Error) override {}

 private:
  RingRelay& relay_;
  uint64_t cost_;
};

// A cluster link: relay `dialler` (client session) to relay `listener` (server session), as
// ClusterLink dials a peer: moq-lite-04, each side asking the other for every broadcast.
class RingLink {
 public:
  // `cost` counts at both ends (in moqd only the dialler counts it; two relays that dial each
  // other at that cost are the equivalent).
  RingLink(RingRelay& dialler, RingRelay& listener, uint64_t cost, ManualClock& clock)
      : dialler_handler_(dialler, cost),
        listener_handler_(listener, cost),
        muxes_(clock, "moq-lite-04", transport::websocket::Framing::kQmux00, "dialler", "listener") {
    server_ = std::make_unique<Session>(muxes_.server(), config(Role::kServer, listener.hop_id),
                                        listener.origin, listener_handler_, clock, clock);
    client_ = std::make_unique<Session>(muxes_.client(), config(Role::kClient, dialler.hop_id),
                                        dialler.origin, dialler_handler_, clock, clock);
    server_->start();
    client_->start();
  }
  ~RingLink() {
    // The sessions leave their origins (withdrawing what the peer announced) before the
    // transports (muxes_) go, as a relay's link does when it is lost.
    client_.reset();
    server_.reset();
  }
  RingLink(const RingLink&) = delete;
  RingLink& operator=(const RingLink&) = delete;

  // At most 64 messages each way: a ping-pong on one link must not keep a round from ending.
  size_t deliver() { return muxes_.channels().deliver(128); }

 private:
  static SessionConfig config(Role role, uint64_t hop) {
    SessionConfig c;
    c.role = role;
    c.hop_id = hop;
    c.limits.max_announce_rate = 0;  // a relay link's budgets (relay_session.cc)
    c.limits.idle_timeout = Duration::zero();
    return c;
  }

  LinkHandler dialler_handler_;
  LinkHandler listener_handler_;
  testing::MuxPair muxes_;
  std::unique_ptr<Session> server_;
  std::unique_ptr<Session> client_;
};

// Relays and the links between them, on one clock.
class Cluster {
 public:
  explicit Cluster(size_t relays) {
    for (size_t i = 0; i < relays; ++i) {
      // Hop ids whose order is not the relays' numbering, so tie-breaks do not follow it either.
      relays_.push_back(std::make_unique<RingRelay>(1000 + (i * 7) % relays, clock_));
    }
  }

  // Link `slot` (replacing what it held): `dialler` dials `listener` at `cost`.
  void connect(size_t slot, size_t dialler, size_t listener, uint64_t cost = 0) {
    if (links_.size() <= slot) {
      links_.resize(slot + 1);
    }
    links_[slot].reset();
    links_[slot] = std::make_unique<RingLink>(relay(dialler), relay(listener), cost, clock_);
  }
  void disconnect(size_t slot) { links_[slot].reset(); }

  size_t size() const { return relays_.size(); }
  RingRelay& relay(size_t i) { return *relays_[i]; }
  model::Origin& origin(size_t i) { return relays_[i]->origin; }

  // Delivers messages (and runs due timers) until nothing moves; false when the cluster was still
  // busy after `max_rounds`: announcements that never stop.
  bool pump(size_t max_rounds = 2000) {
    int quiet = 0;
    for (size_t round = 0; round < max_rounds; ++round) {
      clock_.advance(Duration::zero());
      size_t moved = 0;
      for (auto& l : links_) {
        moved += l ? l->deliver() : 0;
      }
      quiet = moved == 0 ? quiet + 1 : 0;
      if (quiet >= 2) {
        return true;
      }
    }
    return false;
  }

  // Runs the cluster for `d` in 10 ms steps (kUpdateGrace and linger timers fire on the way);
  // false as soon as a step never falls quiet.
  bool run(Duration d) {
    while (d > Duration::zero()) {
      Duration step = std::min<Duration>(d, std::chrono::milliseconds(10));
      clock_.advance(step);
      if (!pump()) {
        return false;
      }
      d -= step;
    }
    return true;
  }

  std::vector<uint64_t> heard() const {
    std::vector<uint64_t> out;
    for (const auto& r : relays_) {
      out.push_back(r->heard);
    }
    return out;
  }

 private:
  ManualClock clock_;
  std::vector<std::unique_ptr<RingRelay>> relays_;
  // After the relays: the links (their sessions) leave the origins first.
  std::vector<std::unique_ptr<RingLink>> links_;
};

// The interop ring: link i joins R(i) and R(i+1 mod 5); R1..R3 dial the one before, R4 dials R3
// and R0 (cluster.test.mjs).
class Ring : public Cluster {
 public:
  Ring() : Cluster(kRelays) {
    for (size_t i = 0; i < kRelays; ++i) {
      connect(i);
    }
  }
  void connect(size_t i) {
    size_t a = i, b = (i + 1) % kRelays;
    Cluster::connect(i, std::max(a, b), std::min(a, b));
  }
};

std::string show(const std::vector<uint64_t>& a) {
  std::string s;
  for (uint64_t n : a) {
    s += (s.empty() ? "" : " ") + std::to_string(n);
  }
  return s;
}

// Runs the ring through one event and checks that it settles: it falls quiet within 3 s and
// stays quiet for 2 s more (no announcement heard), each relay having heard at most `bound`
// announcements for the event.
::testing::AssertionResult settles(Cluster& ring, const char* event, uint64_t bound) {
  const auto before = ring.heard();
  const bool quiet = ring.run(std::chrono::seconds(3));
  const auto settled = ring.heard();
  const bool still = quiet && ring.run(std::chrono::seconds(2));
  const auto later = ring.heard();
  std::vector<uint64_t> delta(ring.size());
  bool bounded = true;
  for (size_t i = 0; i < ring.size(); ++i) {
    delta[i] = settled[i] - before[i];
    bounded = bounded && delta[i] <= bound;
  }
  std::printf("# %s: announcements heard per relay: %s\n", event, show(delta).c_str());
  std::fflush(stdout);
  if (!quiet || !still) {
    return ::testing::AssertionFailure() << event << ": the ring never fell quiet; heard "
                                         << show(later);
  }
  if (later != settled) {
    return ::testing::AssertionFailure() << event << ": announcements kept coming: heard "
                                         << show(settled) << ", 2 s later " << show(later);
  }
  if (!bounded) {
    return ::testing::AssertionFailure() << event << ": more than " << bound
                                         << " announcements heard by a relay: " << show(delta);
  }
  return ::testing::AssertionSuccess();
}

void expect_everywhere(Ring& ring, bool active, const char* event) {
  for (size_t i = 0; i < kRelays; ++i) {
    EXPECT_EQ(ring.origin(i).is_active(kPath), active) << event << ": R" << i;
    for (const auto& route : ring.origin(i).routes(kPath)) {
      // A route of a five-relay ring crosses at most four relays; a longer one went round.
      EXPECT_LE(route.hops.size(), kRelays - 1) << event << ": R" << i;
      EXPECT_FALSE(model::hops_contain(route.hops, ring.relay(i).hop_id)) << event << ": R" << i;
    }
  }
}

// Each relay has two links, and a broadcast's route over a link changes a bounded number of
// times per event (announced, withdrawn, updated as warm copies come and go or as a shorter
// route replaces a longer one): the bound is a few per link (measured: at most 3 per relay and
// event). A storm goes far past it, or never falls quiet.
constexpr uint64_t kPerEventBound = 6;

TEST(ClusterRingTest, FiveRelaysSettleWithBoundedAnnouncementsPerRelay) {
  Ring ring;
  ASSERT_TRUE(ring.run(std::chrono::milliseconds(100)));

  std::optional<TestBroadcast> pub;
  pub.emplace(ring.origin(0), kPath);
  ASSERT_TRUE(settles(ring, "publisher on R0", kPerEventBound));
  expect_everywhere(ring, true, "publisher on R0");
  EXPECT_EQ(ring.origin(2).routes(kPath).at(0).hops.size(), 2u);  // two hops away, either way

  // A viewer two hops away: the relays on its path carry the broadcast and mark it warm.
  FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(ring.origin(2), kPath, "video"));
  ASSERT_TRUE(settles(ring, "viewer on R2", kPerEventBound));
  ASSERT_NE(pub->feed("video").track(), nullptr);
  pub->write_group("video", 1, {"frame"});
  ASSERT_TRUE(ring.run(std::chrono::milliseconds(50)));
  ASSERT_NE(viewer.group(1), nullptr);
  // It leaves: after the linger the relays no longer carry it, and say so (cold hops).
  viewer.unsubscribe();
  ASSERT_TRUE(settles(ring, "viewer left", kPerEventBound));
  EXPECT_EQ(pub->feed("video").track(), nullptr);

  // The publisher leaves: every relay forgets the broadcast, none keeps a route through itself.
  pub.reset();
  ASSERT_TRUE(settles(ring, "publisher left", kPerEventBound));
  expect_everywhere(ring, false, "publisher left");

  // It flaps: comes and goes five times, then comes back on the far side of the ring.
  for (int i = 0; i < 5; ++i) {
    pub.emplace(ring.origin(0), kPath);
    ASSERT_TRUE(settles(ring, "publisher back", kPerEventBound));
    expect_everywhere(ring, true, "publisher back");
    pub.reset();
    ASSERT_TRUE(settles(ring, "publisher gone again", kPerEventBound));
    expect_everywhere(ring, false, "publisher gone again");
  }
  pub.emplace(ring.origin(3), kPath);
  ASSERT_TRUE(settles(ring, "publisher on R3", kPerEventBound));
  expect_everywhere(ring, true, "publisher on R3");

  // A link drops (the routes over it go the other way round) and comes back.
  ring.disconnect(3);  // R3-R4
  ASSERT_TRUE(settles(ring, "link R3-R4 lost", kPerEventBound));
  expect_everywhere(ring, true, "link R3-R4 lost");
  EXPECT_EQ(ring.origin(4).routes(kPath).at(0).hops.size(), 4u);  // R3 R2 R1 R0 to R4
  ring.connect(3);
  ASSERT_TRUE(settles(ring, "link R3-R4 back", kPerEventBound));
  expect_everywhere(ring, true, "link R3-R4 back");
  EXPECT_EQ(ring.origin(4).routes(kPath).at(0).hops.size(), 1u);

  // The publisher's own relay loses both its links: the rest of the ring forgets the broadcast.
  ring.disconnect(2);  // R2-R3
  ring.disconnect(3);  // R3-R4
  ASSERT_TRUE(settles(ring, "R3 cut off", kPerEventBound));
  for (size_t i : {0, 1, 2, 4}) {
    EXPECT_FALSE(ring.origin(i).is_active(kPath)) << "R" << i;
  }
  ring.connect(2);
  ring.connect(3);
  ASSERT_TRUE(settles(ring, "R3 back", kPerEventBound));
  expect_everywhere(ring, true, "R3 back");
  pub.reset();
  ASSERT_TRUE(settles(ring, "publisher left R3", kPerEventBound));
  expect_everywhere(ring, false, "publisher left R3");
}

// Two relays that each pull a broadcast and see each other's warm copy: B and C each link to A
// (the publisher's relay) at cost 5 and to each other at cost 4. Cold, both pull from A (score
// 1 + 5 against 2 + 4 through the other: a tie, and the smaller hop list wins). Warm, the route
// through the other scores 1 + 4: were both to take it at once, neither would pull from A, both
// would fall back on A, be warm again and move again, for ever. model::warm_key orders them, so
// exactly one moves onto the other's copy and the announcements settle.
TEST(ClusterRingTest, TwoWarmRelaysDoNotPullFromEachOther) {
  Cluster c(3);  // A, B, C
  c.connect(0, 1, 0, 5);
  c.connect(1, 2, 0, 5);
  c.connect(2, 2, 1, 4);
  ASSERT_TRUE(c.run(std::chrono::milliseconds(100)));
  TestBroadcast pub(c.origin(0), kPath);
  ASSERT_TRUE(settles(c, "publisher on A", kPerEventBound));
  EXPECT_EQ(c.origin(1).routes(kPath).at(0).hops.size(), 1u);
  EXPECT_EQ(c.origin(2).routes(kPath).at(0).hops.size(), 1u);

  FrameCollector on_b, on_c;
  ASSERT_TRUE(on_b.subscribe(c.origin(1), kPath, "video"));
  ASSERT_TRUE(on_c.subscribe(c.origin(2), kPath, "video"));
  ASSERT_TRUE(settles(c, "viewers on B and C", kPerEventBound));
  const size_t b_hops = c.origin(1).routes(kPath).at(0).hops.size();
  const size_t c_hops = c.origin(2).routes(kPath).at(0).hops.size();
  EXPECT_EQ(b_hops + c_hops, 3u) << "exactly one of B and C pulls through the other: " << b_hops
                                 << " " << c_hops;
  ASSERT_NE(pub.feed("video").track(), nullptr);
  pub.write_group("video", 1, {"frame"});
  ASSERT_TRUE(c.run(std::chrono::milliseconds(50)));
  EXPECT_NE(on_b.group(1), nullptr);
  EXPECT_NE(on_c.group(1), nullptr);
  on_b.unsubscribe();
  on_c.unsubscribe();
  ASSERT_TRUE(settles(c, "viewers left", kPerEventBound));
}

}  // namespace
}  // namespace moqd::session
