// The drain's deadline on a relay with two workers (RelayWorker::drain, Bridge::hold): a
// publisher on one worker and viewers on both. The publisher's worker reaches its deadline first,
// by far (500 ms), as one worker may when the other is busy: without the hold, the broadcast its
// closed publisher withdraws reaches the other worker's viewer long before that viewer's own
// close, and the viewer sees the broadcast end cleanly instead of being told the relay went away.
#include <gtest/gtest.h>

#include <chrono>
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
}  // namespace moqd::relay
