// A SIGHUP's limits (Relay::reload) reach the sessions that start afterwards, while a session
// that started before keeps the limits it started with. Sessions share their worker's settings
// (RelayWorker::session_config) instead of each holding a copy, so this is what the sharing must
// keep: the new snapshot for new sessions, the old one alive and unchanged for the old sessions.
#include <gtest/gtest.h>

#include <atomic>
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
namespace reload_test {

using namespace std::chrono_literals;

// Runs `fn` on worker 0's loop and waits for it (so the reload's injected task ran before it).
void on_worker(Relay& relay, runtime::EventLoop& loop, std::function<void(RelayWorker&)> fn) {
  std::atomic<bool> done{false};
  RelayWorker* w = &relay.worker(0);
  w->loop().inject([w, &fn, &done] {
    fn(*w);
    done.store(true);
  });
  ASSERT_TRUE(loop.run_until([&] { return done.load(); }, 5s));
}

TEST(RelayReloadTest, NewLimitsReachLaterSessionsAndEarlierOnesKeepTheirs) {
  RelayConfig config = testing::local_relay_config(1);
  config.limits.max_announced_paths = 8;
  config.drain_timeout = std::chrono::milliseconds(100);
  Relay relay(config);
  auto started = testing::start_local_relay(relay, client::TransportKind::kWebSocket);
  ASSERT_TRUE(started) << started.error().detail;
  const client::ConnectionOptions& options = *started;

  runtime::EventLoop loop;
  client::LocalBroadcast broadcast;

  // Before the reload: a publisher with one broadcast, and the worker's settings as they are.
  model::Origin early_origin(model::OriginConfig{}, loop, loop);
  early_origin.announce("early/0", &broadcast);
  client::LinkPtr early = client::make_link(loop, early_origin, options);
  ASSERT_TRUE(early->connect());
  ASSERT_TRUE(loop.run_until([&] { return early->is_ready(); }, 5s));
  std::shared_ptr<const session::SessionConfig> before;
  on_worker(relay, loop, [&](RelayWorker& w) { before = w.session_config(false); });
  ASSERT_TRUE(before);

  RelayConfig fresh = config;
  fresh.limits.max_announced_paths = 1;
  relay.reload(fresh);
  std::shared_ptr<const session::SessionConfig> after, link;
  on_worker(relay, loop, [&](RelayWorker& w) {
    after = w.session_config(false);
    link = w.session_config(true);
  });
  // The worker's shared settings now carry the new limit; the snapshot the early session holds
  // is unchanged (and alive: ASan would see it freed).
  EXPECT_EQ(after->limits.max_announced_paths, 1u);
  EXPECT_EQ(link->limits.max_announced_paths, 1u);
  EXPECT_EQ(link->limits.max_announce_rate, 0u);  // a relay link is exempt from the budget
  EXPECT_NE(after->limits.max_announce_rate, 0u);
  EXPECT_EQ(before->limits.max_announced_paths, 8u);
  EXPECT_NE(before.get(), after.get());
  before.reset();

  // A session that starts now gets the new limit: two broadcasts are one too many.
  model::Origin late_origin(model::OriginConfig{}, loop, loop);
  late_origin.announce("late/0", &broadcast);
  late_origin.announce("late/1", &broadcast);
  client::LinkPtr late = client::make_link(loop, late_origin, options);
  ASSERT_TRUE(late->connect());
  ASSERT_TRUE(loop.run_until([&] { return late->is_closed(); }, 5s));
  EXPECT_EQ(late->close_reason().code, ErrorCode::kBoundsExceeded);

  // The early session still has 8: three more broadcasts are accepted (a viewer that starts now,
  // with one path of its own at most, hears all four) and it stays open.
  early_origin.announce("early/1", &broadcast);
  early_origin.announce("early/2", &broadcast);
  early_origin.announce("early/3", &broadcast);
  model::Origin viewer_origin(model::OriginConfig{}, loop, loop);
  client::ConnectionOptions vo = options;
  vo.discover_prefix = "early";
  int heard = 0;  // before the link: its callback may run while the link is destroyed
  client::LinkPtr viewer = client::make_link(loop, viewer_origin, vo);
  viewer->on_announce_fn = [&heard](const std::string&, bool active, const model::Hops&,
                                    model::BroadcastSource&) { heard += active ? 1 : 0; };
  ASSERT_TRUE(viewer->connect());
  ASSERT_TRUE(loop.run_until([&] { return heard == 4 || early->is_closed(); }, 5s));
  EXPECT_EQ(heard, 4);
  EXPECT_FALSE(early->is_closed()) << early->close_reason().detail;
  relay.drain_and_stop();
}

}  // namespace reload_test
}  // namespace moqd::relay
