// QUIC viewers sharing one client UDP socket (client::SharedQuicSocket, the load generator's) on a
// relay with two workers: each connection's datagrams reach it by its CIDs, the relay's steering
// forwards nothing, and a viewer that leaves does not disturb the others on the socket.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/connection.h"
#include "client/local_broadcast.h"
#include "client/quic_connection.h"
#include "client/shared_quic_socket.h"
#include "model/origin.h"
#include "relay/relay.h"
#include "relay/worker.h"
#include "runtime/event_loop.h"
#include "testing/local_relay.h"
#include "transport/quic/certificate.h"

namespace moqd::relay {
namespace shared_client_socket_test {

using namespace std::chrono_literals;

constexpr size_t kViewers = 8;

struct SharedViewer {
  std::unique_ptr<model::Origin> origin;
  client::LinkPtr link;
  int announced = 0;  // broadcasts heard active
};

TEST(SharedClientSocketTest, ViewersOnOneSocketEachGetTheirOwnAndOneLeavingLeavesTheRest) {
  RelayConfig config = testing::local_relay_config(2);
  auto cert = transport::quic::Certificate::generate_self_signed();
  ASSERT_TRUE(cert);
  config.certificate = std::move(*cert);
  Relay relay(config);
  auto started = testing::start_local_relay(relay, client::TransportKind::kQuic);
  ASSERT_TRUE(started) << started.error().detail;
  const client::ConnectionOptions& options = *started;

  runtime::EventLoop loop;
  auto sessions = [&relay] {
    return relay.worker(0).sessions.load(std::memory_order_relaxed) +
           relay.worker(1).sessions.load(std::memory_order_relaxed);
  };

  model::Origin pub_origin(model::OriginConfig{}, loop, loop);
  client::LocalBroadcast first, second;
  pub_origin.announce("shared/first", &first);
  client::LinkPtr pub = client::make_link(loop, pub_origin, options);
  ASSERT_TRUE(pub->connect());
  ASSERT_TRUE(loop.run_until([&] { return pub->is_ready(); }, 5s));

  auto shared = client::SharedQuicSocket::open(loop, options.url.host, options.udp);
  ASSERT_TRUE(shared);
  std::vector<std::unique_ptr<SharedViewer>> viewers;
  for (size_t i = 0; i < kViewers; ++i) {
    auto v = std::make_unique<SharedViewer>();
    SharedViewer* raw = v.get();
    v->origin = std::make_unique<model::Origin>(model::OriginConfig{}, loop, loop);
    client::ConnectionOptions o = options;
    o.discover_prefix = "shared";
    o.shared_udp = shared->get();
    v->link = client::make_link(loop, *v->origin, o);
    v->link->on_announce_fn = [raw](const std::string&, bool active, const model::Hops&,
                                    model::BroadcastSource&) { raw->announced += active ? 1 : 0; };
    ASSERT_TRUE(v->link->connect());
    viewers.push_back(std::move(v));
  }
  auto all_heard = [&](int n) {
    for (const auto& v : viewers) {
      if (!v->link->is_ready() || v->announced < n) {
        return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(loop.run_until(
      [&] { return all_heard(1) && sessions() == static_cast<int64_t>(kViewers + 1); }, 10s));
  EXPECT_EQ((*shared)->members(), kViewers);
  EXPECT_EQ(viewers[0]->link->udp_socket(), &(*shared)->socket());
  EXPECT_EQ(viewers[kViewers - 1]->link->udp_socket(), &(*shared)->socket());

  // One viewer leaves; the relay ends its session and the others go on: a broadcast announced
  // now reaches every one of them through the shared socket.
  viewers[3]->link->close();
  ASSERT_TRUE(loop.run_until([&] { return sessions() == static_cast<int64_t>(kViewers); }, 5s));
  viewers.erase(viewers.begin() + 3);
  EXPECT_EQ((*shared)->members(), kViewers - 1);
  pub_origin.announce("shared/second", &second);
  ASSERT_TRUE(loop.run_until([&] { return all_heard(2); }, 5s));

  // Every datagram the relay sent reached its connection, and the relay's steering sent each of
  // ours to the worker that owns its connection.
  EXPECT_EQ((*shared)->unknown_dropped(), 0u);
  EXPECT_GT((*shared)->routed(), kViewers * 4);
  EXPECT_EQ(relay.worker(0).quic_forwarded() + relay.worker(1).quic_forwarded(), 0u);

  for (auto& v : viewers) {
    v->link->close();
  }
  pub->close();
  loop.run_until([&] { return sessions() == 0; }, 5s);
  viewers.clear();
  pub_origin.unannounce("shared/first", &first);
  pub_origin.unannounce("shared/second", &second);
  relay.drain_and_stop();
}

}  // namespace shared_client_socket_test
}  // namespace moqd::relay
