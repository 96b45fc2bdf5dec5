#include "runtime/tcp.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <vector>

namespace moqd::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kTcpDeadline = seconds(10);

struct RecordingHandler : transport::PipeHandler {
  void on_pipe_data(std::span<const uint8_t> data) override {
    received.insert(received.end(), data.begin(), data.end());
    if (on_data) {
      on_data();
    }
  }
  void on_pipe_writable() override { ++writable; }
  void on_pipe_closed() override { ++closed; }
  std::vector<uint8_t> received;
  int writable = 0;
  int closed = 0;
  std::function<void()> on_data;
};

class TcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto port = TcpListener::pick_port("127.0.0.1");
    ASSERT_TRUE(port);
    auto l = TcpListener::listen(loop_, "127.0.0.1", *port, [this](int fd, std::string peer) {
      server_ = std::make_unique<TcpConnection>(loop_, fd, std::move(peer));
      server_->set_handler(&server_handler_);
    });
    ASSERT_TRUE(l);
    listener_ = std::move(*l);
    ASSERT_EQ(listener_->port(), *port);
    auto fd = tcp_connect("127.0.0.1", *port);
    ASSERT_TRUE(fd);
    client_ = std::make_unique<TcpConnection>(loop_, *fd, "server");
    client_->set_handler(&client_handler_);
    ASSERT_TRUE(loop_.run_until([&] { return server_ != nullptr; }, kTcpDeadline));
  }

  void settle() { loop_.run_until([] { return false; }, milliseconds(30)); }

  EventLoop loop_;
  std::unique_ptr<TcpListener> listener_;
  std::unique_ptr<TcpConnection> server_;
  std::unique_ptr<TcpConnection> client_;
  RecordingHandler server_handler_;
  RecordingHandler client_handler_;
};

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint8_t>((i * 131) ^ (i >> 9));
  }
  return v;
}

TEST_F(TcpTest, SendsOneMebibyteInPiecesAndReportsWritable) {
  constexpr size_t kTotal = 1 << 20;
  auto data = pattern(kTotal);
  size_t off = 0;
  for (size_t piece = 1; off < kTotal; piece = piece * 3 % 70'001 + 1) {
    size_t n = std::min(piece, kTotal - off);
    client_->send(Bytes::copy(std::span<const uint8_t>(data).subspan(off, n)));
    off += n;
  }
  EXPECT_EQ(client_->buffered(), kTotal);
  ASSERT_TRUE(loop_.run_until([&] { return server_handler_.received.size() >= kTotal; }, kTcpDeadline));
  EXPECT_EQ(server_handler_.received, data);
  ASSERT_TRUE(loop_.run_until([&] { return client_handler_.writable > 0; }, kTcpDeadline));
  EXPECT_EQ(client_handler_.writable, 1);
  EXPECT_EQ(client_->buffered(), 0u);
  EXPECT_EQ(client_handler_.closed, 0);
}

TEST_F(TcpTest, SmallSendsDoNotReportWritable) {
  client_->send(Bytes::copy("hello"));
  ASSERT_TRUE(loop_.run_until([&] { return server_handler_.received.size() == 5; }, kTcpDeadline));
  EXPECT_EQ(client_handler_.writable, 0);
}

TEST_F(TcpTest, PeerCloseReportsClosedExactlyOnce) {
  client_->send(Bytes::copy("bye"));
  client_->close();
  EXPECT_EQ(client_handler_.closed, 0) << "close() must not call back re-entrantly";
  ASSERT_TRUE(loop_.run_until([&] { return server_handler_.closed > 0; }, kTcpDeadline));
  ASSERT_TRUE(loop_.run_until([&] { return client_handler_.closed > 0; }, kTcpDeadline));
  settle();
  EXPECT_EQ(server_handler_.closed, 1);
  EXPECT_EQ(client_handler_.closed, 1);
  EXPECT_EQ(std::string(server_handler_.received.begin(), server_handler_.received.end()), "bye");
  EXPECT_FALSE(server_->is_open());
  client_->send(Bytes::copy("late"));  // ignored after close
  server_->abort();                   // no second on_pipe_closed
  settle();
  EXPECT_EQ(server_handler_.closed, 1);
}

TEST_F(TcpTest, CloseFlushesEverythingQueuedFirst) {
  constexpr size_t kTotal = 512 * 1024;
  auto data = pattern(kTotal);
  client_->send(Bytes::from(data));
  client_->close();
  ASSERT_TRUE(loop_.run_until([&] { return server_handler_.closed > 0; }, kTcpDeadline));
  EXPECT_EQ(server_handler_.received, data);
}

TEST_F(TcpTest, AbortClosesBothSides) {
  client_->send(Bytes::copy("x"));
  client_->abort();
  EXPECT_EQ(client_handler_.closed, 0);
  ASSERT_TRUE(loop_.run_until([&] { return server_handler_.closed > 0; }, kTcpDeadline));
  ASSERT_TRUE(loop_.run_until([&] { return client_handler_.closed > 0; }, kTcpDeadline));
  settle();
  EXPECT_EQ(server_handler_.closed, 1);
  EXPECT_EQ(client_handler_.closed, 1);
}

TEST_F(TcpTest, HandlerMayDestroyTheConnectionFromOnPipeData) {
  server_handler_.on_data = [&] { server_.reset(); };
  client_->send(Bytes::copy("boom"));
  ASSERT_TRUE(loop_.run_until([&] { return server_ == nullptr; }, kTcpDeadline));
  ASSERT_TRUE(loop_.run_until([&] { return client_handler_.closed > 0; }, kTcpDeadline));
  EXPECT_EQ(server_handler_.closed, 0);
}

TEST_F(TcpTest, DestroyingWithPendingCallbacksIsSafe) {
  client_->send(Bytes::copy("pending"));
  client_->abort();
  client_.reset();  // cancels the pending flush and on_pipe_closed
  settle();
  EXPECT_EQ(client_handler_.closed, 0);
}

TEST(TcpAddressTest, ParsesHostAndPort) {
  auto a = parse_host_port("127.0.0.1:0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 0);
  auto b = parse_host_port("[::1]:4443");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 4443);
  auto c = parse_host_port("[::]:65535");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "::");
  EXPECT_FALSE(parse_host_port("127.0.0.1"));
  EXPECT_FALSE(parse_host_port("127.0.0.1:"));
  EXPECT_FALSE(parse_host_port("127.0.0.1:65536"));
  EXPECT_FALSE(parse_host_port("127.0.0.1:12x"));
  EXPECT_FALSE(parse_host_port("::1:80"));
  EXPECT_FALSE(parse_host_port("[::1]80"));
  EXPECT_FALSE(parse_host_port(":80"));
}

TEST(TcpAddressTest, PickedPortIsFreeOnTcpAndUdpAndSharedByReusePort) {
  EventLoop loop;
  auto port = pick_port("127.0.0.1");
  ASSERT_TRUE(port);
  EXPECT_NE(*port, 0);
  auto udp1 = bind_udp("127.0.0.1", *port);
  auto udp2 = bind_udp("127.0.0.1", *port);
  ASSERT_TRUE(udp1);
  ASSERT_TRUE(udp2);
  auto noop = [](int fd, std::string) { ::close(fd); };
  auto l1 = TcpListener::listen(loop, "127.0.0.1:" + std::to_string(*port), noop);
  auto l2 = TcpListener::listen(loop, "127.0.0.1", *port, noop);
  ASSERT_TRUE(l1);
  ASSERT_TRUE(l2);
  ::close(*udp1);
  ::close(*udp2);
}

TEST(TcpAddressTest, DualStackListenerAcceptsIpv4) {
  EventLoop loop;
  auto port = pick_port("::");
  if (!port) {
    GTEST_SKIP() << "no IPv6 on this host";
  }
  std::string peer;
  auto l = TcpListener::listen(loop, "[::]:" + std::to_string(*port), [&](int fd, std::string p) {
    peer = std::move(p);
    ::close(fd);
  });
  ASSERT_TRUE(l);
  auto fd = tcp_connect("127.0.0.1", *port);
  ASSERT_TRUE(fd);
  ASSERT_TRUE(loop.run_until([&] { return !peer.empty(); }, kTcpDeadline));
  EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << peer;
  ::close(*fd);
}

TEST(TcpAddressTest, ConnectToClosedPortFails) {
  auto port = pick_port("127.0.0.1");
  ASSERT_TRUE(port);
  EXPECT_FALSE(tcp_connect("127.0.0.1", *port));
}

}  // namespace
}  // namespace moqd::runtime
