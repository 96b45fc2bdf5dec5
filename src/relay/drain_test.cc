// The drain's deadline on a relay with two workers (RelayWorker::drain, Bridge::hold): a
// publisher on one worker and viewers on both. The publisher's worker reaches its deadline first,
// by far (500 ms), as one worker may when the other is busy: without the hold, the broadcast its
// closed publisher withdraws reaches the other worker's viewer long before that viewer's own
// close, and the viewer sees the broadcast end cleanly instead of being told the relay went away.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/connection.h"
#include "client/local_broadcast.h"
#include "client/quic_connection.h"
#include "model/origin.h"
#include "relay/relay.h"
#include "relay/worker.h"
#include "runtime/event_loop.h"
#include "testing/local_relay.h"

namespace moqd::relay {
namespace {

using namespace std::chrono_literals;

// A client session that discovers the relay's broadcasts.
struct Viewer {
  std::unique_ptr<model::Origin> origin;
  client::LinkPtr link;
  bool announced = false;
  // Withdrawals heard in the callback now running: the session's own close withdraws what it had
  // heard (Session::on_closed), and on_closed follows in the same callback.
  int withdrawals_pending = 0;
  // Withdrawals the relay sent while the session was open: the broadcast ended cleanly.
  int withdrawn_while_open = 0;
};

TEST(RelayDrainTest, DeadlineClosesEveryWorkersViewersBeforeAPublishersBroadcastEndsElsewhere) {
  RelayConfig config = testing::local_relay_config(2);
  // moq-lite-04 has GOAWAY: its sessions stay until the deadline (lite-02's are closed at once).
  config.versions = wire::VersionSet::none();
  config.versions.add(wire::Version::kLite04);
  Relay relay(config);
  auto started = testing::start_local_relay(relay, client::TransportKind::kWebSocket);
  ASSERT_TRUE(started) << started.error().detail;
  client::ConnectionOptions options = *started;
  options.versions = config.versions;

  runtime::EventLoop loop;
  auto sessions_on = [&relay](size_t i) {
    return relay.worker(i).sessions.load(std::memory_order_relaxed);
  };

  model::Origin pub_origin(model::OriginConfig{}, loop, loop);
  client::LocalBroadcast broadcast;
  pub_origin.announce("drain/live", &broadcast);
  client::LinkPtr pub = client::make_link(loop, pub_origin, options);
  ASSERT_TRUE(pub->connect());
  ASSERT_TRUE(loop.run_until(
      [&] { return pub->is_ready() && sessions_on(0) + sessions_on(1) == 1; }, 5s));
  const size_t pub_worker = sessions_on(0) == 1 ? 0 : 1;
  const size_t other_worker = 1 - pub_worker;

  // Viewers until one lands on the other worker (the kernel spreads connections by their ports).
  std::vector<std::unique_ptr<Viewer>> viewers;
  bool far_viewer = false;
  for (int64_t attempt = 0; attempt < 40 && !far_viewer; ++attempt) {
    const int64_t before = sessions_on(other_worker);
    auto v = std::make_unique<Viewer>();
    Viewer* raw = v.get();
    v->origin = std::make_unique<model::Origin>(model::OriginConfig{}, loop, loop);
    client::ConnectionOptions o = options;
    o.discover_prefix = "drain";
    v->link = client::make_link(loop, *v->origin, o);
    v->link->on_announce_fn = [raw, &loop](const std::string&, bool active, const model::Hops&,
                                           model::BroadcastSource&) {
      if (active) {
        raw->announced = true;
        return;
      }
      ++raw->withdrawals_pending;
      loop.defer([raw] {
        raw->withdrawn_while_open += raw->withdrawals_pending;
        raw->withdrawals_pending = 0;
      });
    };
    v->link->on_closed = [raw](Error) { raw->withdrawals_pending = 0; };
    ASSERT_TRUE(v->link->connect());
    viewers.push_back(std::move(v));
    ASSERT_TRUE(loop.run_until(
        [&] { return raw->announced && sessions_on(0) + sessions_on(1) == attempt + 2; }, 5s))
        << "viewer " << attempt;
    far_viewer = sessions_on(other_worker) > before;
  }
  ASSERT_TRUE(far_viewer) << "no viewer landed on worker " << other_worker;

  RelayWorker* early = &relay.worker(pub_worker);
  RelayWorker* late = &relay.worker(other_worker);
  early->loop().inject([early] { early->drain("", 0ms, 5s); });
  late->loop().inject([late] { late->drain("", 500ms, 5s); });
  ASSERT_TRUE(loop.run_until(
      [&] {
        bool all = pub->is_closed();
        for (const auto& v : viewers) {
          all = all && v->link->is_closed();
        }
        return all;
      },
      5s));
  EXPECT_EQ(pub->close_reason().code, ErrorCode::kGoingAway);
  for (size_t i = 0; i < viewers.size(); ++i) {
    EXPECT_EQ(viewers[i]->withdrawn_while_open, 0) << "viewer " << i << " saw the broadcast end";
    EXPECT_EQ(viewers[i]->link->close_reason().code, ErrorCode::kGoingAway) << "viewer " << i;
  }
  relay.drain_and_stop();
}

}  // namespace

// The drain's start on a relay with two workers (RelayWorker::drain, Relay::goaways_sent): a
// lite-02 publisher (no GOAWAY: closed at once) on one worker and a lite-04 viewer (GOAWAY) of
// its broadcast and track on the other. The publisher's worker drains first and its withdrawal
// is given every chance to cross before the viewer's worker drains: without the hold at the
// drain's start it does, and the viewer sees the broadcast and track end before its GOAWAY, as
// `moq sub --goaway-url` did in goaway.test.mjs (it ended instead of moving).
namespace drain_goaway_test {

using namespace std::chrono_literals;

constexpr const char* kMovedUrl = "http://127.0.0.1:9/moved";

using Answer = std::shared_ptr<std::atomic<int>>;
// Runs `fn` on worker `i`'s thread and returns what it stored in its Answer (-1 if nothing within
// 5 s), running the clients' `loop` meanwhile. `fn` may answer later, from another worker's
// thread; the Answer outlives a late one.
int ask_worker(Relay& relay, size_t i, runtime::EventLoop& loop,
               const std::function<void(RelayWorker&, Answer)>& fn) {
  auto answer = std::make_shared<std::atomic<int>>(-1);
  RelayWorker* w = &relay.worker(i);
  w->loop().inject([w, answer, fn] { fn(*w, answer); });
  loop.run_until([&] { return answer->load() >= 0; }, 5s);
  return answer->load();
}

// What the viewer's session heard, in order.
struct MovableViewer : model::TrackListener {
  std::vector<std::string> events;
  bool announced = false;
  bool closed = false;
  std::unique_ptr<model::Origin> origin;
  client::LinkPtr link;

  void on_track_data(model::Track&) override {}
  void on_track_ended(model::Track&, Error) override {
    if (!closed) {
      events.push_back("track ended");
    }
  }
};

}  // namespace drain_goaway_test

TEST(RelayDrainTest, GoawayReachesAViewerBeforeTheEndOfABroadcastClosedOnAnotherWorker) {
  using namespace drain_goaway_test;
  RelayConfig config;
  config.listen = {"127.0.0.1:0"};
  config.workers = 2;
  config.drain_timeout = 2s;
  config.versions = wire::VersionSet::none();
  config.versions.add(wire::Version::kLite02);
  config.versions.add(wire::Version::kLite04);
  Relay relay(config);
  auto bound = relay.start();
  ASSERT_TRUE(bound) << bound.error().detail;
  auto url = client::parse_url((*bound)[0].url());
  ASSERT_TRUE(url);
  auto sessions_on = [&relay](size_t i) {
    return relay.worker(i).sessions.load(std::memory_order_relaxed);
  };

  runtime::EventLoop loop;
  client::ConnectionOptions pub_options;
  pub_options.url = *url;
  pub_options.transport = client::TransportKind::kWebSocket;
  pub_options.versions = wire::VersionSet::none();
  pub_options.versions.add(wire::Version::kLite02);
  client::LocalBroadcast broadcast;  // outlives pub_origin's track of it
  model::Origin pub_origin(model::OriginConfig{}, loop, loop);
  pub_origin.announce("drain/live", &broadcast);
  client::LinkPtr pub = client::make_link(loop, pub_origin, pub_options);
  ASSERT_TRUE(pub->connect());
  ASSERT_TRUE(loop.run_until(
      [&] { return pub->is_ready() && sessions_on(0) + sessions_on(1) == 1; }, 5s));
  const size_t pub_worker = sessions_on(0) == 1 ? 0 : 1;
  const size_t other_worker = 1 - pub_worker;

  // Viewers until one lands on the other worker (the kernel spreads connections by their ports);
  // those that land on the publisher's are closed.
  client::ConnectionOptions options = pub_options;
  options.versions = wire::VersionSet::none();
  options.versions.add(wire::Version::kLite04);
  options.discover_prefix = "drain";
  std::unique_ptr<MovableViewer> viewer;
  for (int attempt = 0; attempt < 40 && viewer == nullptr; ++attempt) {
    const int64_t before = sessions_on(other_worker);
    auto v = std::make_unique<MovableViewer>();
    MovableViewer* raw = v.get();
    v->origin = std::make_unique<model::Origin>(model::OriginConfig{}, loop, loop);
    v->link = client::make_link(loop, *v->origin, options);
    v->link->on_announce_fn = [raw](const std::string&, bool active, const model::Hops&,
                                    model::BroadcastSource& source) {
      if (active) {
        raw->announced = true;
        raw->origin->announce("drain/live", &source);
        return;
      }
      if (!raw->closed) {
        raw->events.push_back("broadcast ended");
      }
      raw->origin->unannounce("drain/live", &source);
    };
    v->link->on_goaway_fn = [raw](const std::string& to) { raw->events.push_back("goaway " + to); };
    v->link->on_closed = [raw](Error) { raw->closed = true; };
    ASSERT_TRUE(v->link->connect());
    ASSERT_TRUE(loop.run_until([&] { return raw->announced; }, 5s)) << "viewer " << attempt;
    ASSERT_TRUE(loop.run_until([&] { return sessions_on(0) + sessions_on(1) == 2; }, 5s));
    if (sessions_on(other_worker) > before) {
      viewer = std::move(v);
    } else {
      raw->closed = true;
      v->link->close();
      ASSERT_TRUE(loop.run_until([&] { return sessions_on(pub_worker) == 1; }, 5s));
    }
  }
  ASSERT_NE(viewer, nullptr) << "no viewer landed on worker " << other_worker;
  model::Track* track = viewer->origin->track("drain/live", "video");
  ASSERT_NE(track, nullptr);
  track->add_listener(viewer.get());
  // The track is served across: the publisher's worker feeds it to the viewer's.
  auto feeding = [](RelayWorker& w, Answer a) { a->store(w.bridge().feed_count() == 1 ? 1 : 0); };
  int fed = 0;
  for (int i = 0; i < 500 && fed != 1; ++i) {
    loop.run_until([] { return false; }, 10ms);  // the polling interval
    fed = ask_worker(relay, pub_worker, loop, feeding);
  }
  ASSERT_EQ(fed, 1);

  RelayWorker* early = &relay.worker(pub_worker);
  RelayWorker* late = &relay.worker(other_worker);
  early->loop().inject([early] { early->drain(kMovedUrl, 10s, 10s); });
  ASSERT_TRUE(loop.run_until([&] { return pub->is_closed(); }, 5s));
  EXPECT_EQ(pub->close_reason().code, ErrorCode::kGoingAway);
  // Once the publisher's worker has withdrawn the broadcast and flushed what it tells the other
  // workers, a task posted after that (same ring, in order) finds on the viewer's worker whether
  // the withdrawal crossed ahead of that worker's drain.
  // Answers 0 while not yet flushed, then 1 if the broadcast is still on the viewer's worker, 2
  // if its withdrawal crossed.
  auto withdrawn_and_flushed = [other_worker](RelayWorker& w, Answer a) {
    if (!w.origin().active_paths("drain").empty() || w.bridge().pending_announces() != 0) {
      a->store(0);
      return;
    }
    w.workers().post(other_worker, [a, &relay = w.relay(), other_worker] {
      a->store(relay.worker(other_worker).origin().active_paths("drain").empty() ? 2 : 1);
    });
  };
  int where = ask_worker(relay, pub_worker, loop, withdrawn_and_flushed);
  for (int i = 0; i < 500 && where == 0; ++i) {
    loop.run_until([] { return false; }, 10ms);  // the polling interval
    where = ask_worker(relay, pub_worker, loop, withdrawn_and_flushed);
  }
  EXPECT_EQ(where, 1) << "the broadcast withdrawn on worker " << pub_worker << " ended on worker "
                      << other_worker << " before its drain";

  late->loop().inject([late] { late->drain(kMovedUrl, 10s, 10s); });
  // After the GOAWAY, the drain's hold is released: the broadcast and its track end, while the
  // viewer's session is still open (it could have moved meanwhile).
  ASSERT_TRUE(loop.run_until([&] { return viewer->events.size() >= 3; }, 5s))
      << ::testing::PrintToString(viewer->events);
  EXPECT_EQ(viewer->events[0], std::string("goaway ") + kMovedUrl)
      << ::testing::PrintToString(viewer->events);
  EXPECT_FALSE(viewer->closed);
  viewer->closed = true;
  viewer->link->close();
  ASSERT_TRUE(loop.run_until([&] { return viewer->link->is_transport_closed(); }, 5s));
  relay.drain_and_stop();
}

}  // namespace moqd::relay
