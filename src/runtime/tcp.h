#pragma once
// TCP for one worker: a listener per worker on a shared port (SO_REUSEPORT lets the kernel spread
// connections), a non-blocking connection that is a transport::Pipe, and helpers to pick a port
// free on both TCP and UDP, bind the per-worker UDP socket, and connect as a client. Everything
// here belongs to the EventLoop it was given and runs on that loop's thread.
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "runtime/event_loop.h"
#include "transport/transport.h"

namespace moqd::runtime {

struct HostPort {
  std::string host;  // without brackets: "127.0.0.1", "::1", "::"
  uint16_t port = 0;
};

// Parses "127.0.0.1:0", "[::1]:0", "[::]:4443", "localhost:80". Rejects a missing or bad port.
Result<HostPort> parse_host_port(std::string_view s);

// "1.2.3.4:5" or "[::1]:5"; IPv4-mapped IPv6 addresses print as IPv4.
std::string format_peer(const sockaddr* addr, socklen_t len);

// A port free on both TCP and UDP at `host` right now (another process may still take it before
// it is bound again). Tries a few kernel-chosen TCP ports.
Result<uint16_t> pick_port(const std::string& host);

// A non-blocking UDP socket bound to host:port with SO_REUSEADDR and SO_REUSEPORT (dual-stack on
// "::"). The caller owns the fd.
Result<int> bind_udp(const std::string& host, uint16_t port);

// A connected, non-blocking TCP socket with TCP_NODELAY. Connecting blocks (CLI and tests only).
Result<int> tcp_connect(const std::string& host, uint16_t port);

// A non-blocking TCP socket whose connect is under way (or done); a TcpConnection on it queues
// what is sent until the connect completes, and reports a refused connect as closed. A host name
// is resolved here (blocking): give an address on a worker.
Result<int> tcp_connect_nonblocking(const std::string& host, uint16_t port);

// Accepts connections on host:port with SO_REUSEADDR and SO_REUSEPORT, dual-stack on "::".
// Accepted fds are non-blocking, close-on-exec, TCP_NODELAY, and owned by the callback.
class TcpListener final : private IoHandler {
 public:
  using AcceptFn = std::function<void(int fd, std::string peer)>;

  static Result<std::unique_ptr<TcpListener>> listen(EventLoop& loop, const std::string& host,
                                                     uint16_t port, AcceptFn on_accept);
  // `addr` as parse_host_port() takes it.
  static Result<std::unique_ptr<TcpListener>> listen(EventLoop& loop, std::string_view addr,
                                                     AcceptFn on_accept);
  static Result<uint16_t> pick_port(const std::string& host) { return runtime::pick_port(host); }

  ~TcpListener() override;
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  uint16_t port() const { return port_; }
  int fd() const { return fd_; }

 private:
  TcpListener(EventLoop& loop, int fd, uint16_t port, AcceptFn on_accept)
      : loop_(loop), fd_(fd), port_(port), on_accept_(std::move(on_accept)) {}
  void on_io(uint32_t events) override;

  EventLoop& loop_;
  int fd_;
  uint16_t port_;
  AcceptFn on_accept_;
  TimerId backoff_timer_ = 0;
};

// A TCP connection as a byte Pipe. Takes ownership of a connected non-blocking fd; starts reading
// once a handler is set. send() queues Bytes without copying and flushes them with one sendmsg
// (up to IOV_MAX parts) from the loop, polling for EPOLLOUT only while data is queued.
// on_pipe_writable() fires when buffered() falls below kLowWater after reaching it.
// on_pipe_closed() fires exactly once, from the loop (never inside send/close/abort), after peer
// EOF, an error, abort(), or once close() has flushed and the peer has closed (or kCloseLinger).
// The handler may destroy the connection from any callback.
class TcpConnection final : public transport::Pipe, private IoHandler {
 public:
  // Bytes queued at or above which the handler should stop sending until on_pipe_writable().
  static constexpr size_t kLowWater = 64 * 1024;
  // Bytes read per read() call into the connection's buffer.
  static constexpr size_t kReadChunk = 64 * 1024;
  // How long close() waits for the peer to close after our FIN before dropping the socket.
  static constexpr Duration kCloseLinger = std::chrono::seconds(5);

  TcpConnection(EventLoop& loop, int fd, std::string peer = "");
  ~TcpConnection() override;
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  // Null stops callbacks (bytes read meanwhile are dropped). The first non-null handler starts
  // reading.
  void set_handler(transport::PipeHandler* handler);
  const std::string& peer() const { return peer_; }
  bool is_open() const { return state_ == State::kOpen; }

  void send(Bytes data) override;
  size_t buffered() const override { return buffered_; }
  void close() override;
  void abort() override;

 private:
  enum class State { kOpen, kClosing, kClosed };

  void on_io(uint32_t events) override;
  // Return false when a handler callback destroyed the connection (touch nothing then).
  bool on_readable();
  bool flush();
  template <class F>
  bool call_handler(F&& f);
  void consume(size_t n);
  void register_fd();
  void update_events();
  void schedule_flush();
  void finish_close();
  void fail();
  void close_fd();
  void notify_closed();

  EventLoop& loop_;
  int fd_;
  std::string peer_;
  transport::PipeHandler* handler_ = nullptr;
  State state_ = State::kOpen;
  bool registered_ = false;
  uint32_t events_ = 0;
  std::deque<Bytes> queue_;
  size_t front_offset_ = 0;  // bytes of queue_.front() already sent
  size_t buffered_ = 0;
  bool above_low_water_ = false;
  bool shut_wr_ = false;
  bool closed_notified_ = false;
  TimerId flush_timer_ = 0;
  TimerId closed_timer_ = 0;
  TimerId linger_timer_ = 0;
  std::vector<uint8_t> read_buf_;
  std::vector<iovec> iov_;
  bool* alive_ = nullptr;  // set while inside on_io; cleared by the destructor
};

}  // namespace moqd::runtime
