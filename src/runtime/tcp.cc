#include "runtime/tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "base/log.h"

namespace moqd::runtime {
namespace {

// How long a listener stops accepting after running out of descriptors, so a level-triggered
// accept loop does not spin.
constexpr Duration kAcceptBackoff = std::chrono::milliseconds(100);
// Kernel-chosen ports pick_port() tries before giving up.
constexpr int kPickPortAttempts = 16;
// Reads per readiness event, so one busy connection cannot starve the rest of the loop.
constexpr int kReadsPerEvent = 16;

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

Result<SockAddr> resolve(const std::string& host, uint16_t port, int socktype, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res) != 0 ||
      res == nullptr) {
    return fail(ErrorCode::kTransport, "cannot resolve host");
  }
  SockAddr out;
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

void set_int_opt(int fd, int level, int name, int value) {
  ::setsockopt(fd, level, name, &value, sizeof value);
}

Result<int> bound_socket(const SockAddr& addr, int type, bool reuse) {
  int fd = ::socket(addr.family(), type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(ErrorCode::kTransport, "socket() failed");
  }
  if (reuse) {
    set_int_opt(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    set_int_opt(fd, SOL_SOCKET, SO_REUSEPORT, 1);
  }
  if (addr.family() == AF_INET6) {
    set_int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);  // "[::]" also serves IPv4
  }
  if (::bind(fd, addr.get(), addr.len) != 0) {
    ::close(fd);
    return fail(ErrorCode::kTransport, "bind() failed");
  }
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return 0;
  }
  if (ss.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

}  // namespace

Result<HostPort> parse_host_port(std::string_view s) {
  HostPort out;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      return fail(ErrorCode::kDecode, "expected [host]:port");
    }
    out.host = std::string(s.substr(1, close - 1));
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string_view::npos || s.find(':') != colon) {
      return fail(ErrorCode::kDecode, "expected host:port");
    }
    out.host = std::string(s.substr(0, colon));
    port = s.substr(colon + 1);
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535 ||
      out.host.empty()) {
    return fail(ErrorCode::kDecode, "bad port");
  }
  out.port = static_cast<uint16_t>(value);
  return out;
}

std::string format_peer(const sockaddr* addr, socklen_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    uint16_t port = ntohs(in6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      ::inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof host);
      return std::string(host) + ":" + std::to_string(port);
    }
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

Result<uint16_t> pick_port(const std::string& host) {
  for (int attempt = 0; attempt < kPickPortAttempts; ++attempt) {
    auto tcp_addr = resolve(host, 0, SOCK_STREAM, true);
    if (!tcp_addr) {
      return tl::unexpected(tcp_addr.error());
    }
    auto tcp = bound_socket(*tcp_addr, SOCK_STREAM, false);
    if (!tcp) {
      return tl::unexpected(tcp.error());
    }
    uint16_t port = local_port(*tcp);
    auto udp_addr = resolve(host, port, SOCK_DGRAM, true);
    auto udp = udp_addr ? bound_socket(*udp_addr, SOCK_DGRAM, false) : Result<int>(-1);
    ::close(*tcp);
    if (udp && *udp >= 0) {
      ::close(*udp);
      if (port != 0) {
        return port;
      }
    }
  }
  return fail(ErrorCode::kTransport, "no port free on both TCP and UDP");
}

Result<int> bind_udp(const std::string& host, uint16_t port) {
  auto addr = resolve(host, port, SOCK_DGRAM, true);
  if (!addr) {
    return tl::unexpected(addr.error());
  }
  return bound_socket(*addr, SOCK_DGRAM, true);
}

Result<int> tcp_connect(const std::string& host, uint16_t port) {
  auto addr = resolve(host, port, SOCK_STREAM, false);
  if (!addr) {
    return tl::unexpected(addr.error());
  }
  int fd = ::socket(addr->family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(ErrorCode::kTransport, "socket() failed");
  }
  int rc;
  do {
    rc = ::connect(fd, addr->get(), addr->len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    ::close(fd);
    return fail(ErrorCode::kTransport, "connect() failed");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  return fd;
}

Result<int> tcp_connect_nonblocking(const std::string& host, uint16_t port) {
  auto addr = resolve(host, port, SOCK_STREAM, false);
  if (!addr) {
    return tl::unexpected(addr.error());
  }
  int fd = ::socket(addr->family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return fail(ErrorCode::kTransport, "socket() failed");
  }
  int rc;
  do {
    rc = ::connect(fd, addr->get(), addr->len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return fail(ErrorCode::kTransport, "connect() failed");
  }
  set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  return fd;
}

// --- TcpListener ---

Result<std::unique_ptr<TcpListener>> TcpListener::listen(EventLoop& loop, const std::string& host,
                                                         uint16_t port, AcceptFn on_accept) {
  auto addr = resolve(host, port, SOCK_STREAM, true);
  if (!addr) {
    return tl::unexpected(addr.error());
  }
  auto fd = bound_socket(*addr, SOCK_STREAM, true);
  if (!fd) {
    return tl::unexpected(fd.error());
  }
  if (::listen(*fd, SOMAXCONN) != 0) {
    ::close(*fd);
    return fail(ErrorCode::kTransport, "listen() failed");
  }
  std::unique_ptr<TcpListener> l(new TcpListener(loop, *fd, local_port(*fd), std::move(on_accept)));
  if (auto st = loop.add(*fd, EPOLLIN, l.get()); !st) {
    return tl::unexpected(st.error());
  }
  return l;
}

Result<std::unique_ptr<TcpListener>> TcpListener::listen(EventLoop& loop, std::string_view addr,
                                                         AcceptFn on_accept) {
  auto hp = parse_host_port(addr);
  if (!hp) {
    return tl::unexpected(hp.error());
  }
  return listen(loop, hp->host, hp->port, std::move(on_accept));
}

TcpListener::~TcpListener() {
  loop_.cancel(backoff_timer_);
  loop_.remove(fd_);
  ::close(fd_);
}

void TcpListener::on_io(uint32_t) {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        MOQD_LOG(kWarn, "accept: out of descriptors or memory (errno %d); pausing", errno);
        loop_.remove(fd_);
        backoff_timer_ = loop_.schedule(kAcceptBackoff, [this] {
          backoff_timer_ = 0;
          (void)loop_.add(fd_, EPOLLIN, this);
        });
      }
      return;
    }
    set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    on_accept_(fd, format_peer(reinterpret_cast<sockaddr*>(&ss), len));
  }
}

// --- TcpConnection ---

TcpConnection::TcpConnection(EventLoop& loop, int fd, std::string peer)
    : loop_(loop), fd_(fd), peer_(std::move(peer)) {
  set_int_opt(fd_, IPPROTO_TCP, TCP_NODELAY, 1);
}

TcpConnection::~TcpConnection() {
  if (alive_ != nullptr) {
    *alive_ = false;
  }
  loop_.cancel(flush_timer_);
  loop_.cancel(closed_timer_);
  loop_.cancel(linger_timer_);
  close_fd();
}

template <class F>
bool TcpConnection::call_handler(F&& f) {
  bool alive = true;
  bool* outer = alive_;
  alive_ = &alive;
  f();
  if (!alive) {
    if (outer != nullptr) {
      *outer = false;
    }
    return false;
  }
  alive_ = outer;
  return true;
}

void TcpConnection::set_handler(transport::PipeHandler* handler) {
  handler_ = handler;
  if (handler_ != nullptr && !registered_ && fd_ >= 0) {
    register_fd();
  }
}

void TcpConnection::register_fd() {
  events_ = EPOLLIN | (queue_.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  if (!loop_.add(fd_, events_, this)) {
    fail();
    return;
  }
  registered_ = true;
}

void TcpConnection::send(Bytes data) {
  if (state_ != State::kOpen || data.empty()) {
    return;
  }
  buffered_ += data.size();
  queue_.push_back(std::move(data));
  if (buffered_ >= kLowWater) {
    above_low_water_ = true;
  }
  if ((events_ & EPOLLOUT) == 0) {
    schedule_flush();
  }
}

void TcpConnection::schedule_flush() {
  if (flush_timer_ == 0) {
    flush_timer_ = loop_.schedule(Duration::zero(), [this] {
      flush_timer_ = 0;
      flush();
    });
  }
}

void TcpConnection::close() {
  if (state_ != State::kOpen) {
    return;
  }
  state_ = State::kClosing;
  linger_timer_ = loop_.schedule(kCloseLinger, [this] {
    linger_timer_ = 0;
    finish_close();
  });
  if (!registered_ && fd_ >= 0) {
    register_fd();
  }
  schedule_flush();
}

void TcpConnection::abort() {
  if (state_ == State::kClosed) {
    return;
  }
  if (fd_ >= 0) {
    linger l{1, 0};  // RST instead of FIN
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  finish_close();
}

void TcpConnection::fail() { finish_close(); }

void TcpConnection::finish_close() {
  state_ = State::kClosed;
  loop_.cancel(linger_timer_);
  linger_timer_ = 0;
  close_fd();
  notify_closed();
}

void TcpConnection::close_fd() {
  loop_.cancel(flush_timer_);
  flush_timer_ = 0;
  queue_.clear();
  front_offset_ = 0;
  buffered_ = 0;
  if (fd_ < 0) {
    return;
  }
  if (registered_) {
    loop_.remove(fd_);
    registered_ = false;
  }
  ::close(fd_);
  fd_ = -1;
}

void TcpConnection::notify_closed() {
  if (closed_notified_) {
    return;
  }
  closed_notified_ = true;
  closed_timer_ = loop_.schedule(Duration::zero(), [this] {
    closed_timer_ = 0;
    if (handler_ != nullptr) {
      handler_->on_pipe_closed();
    }
  });
}

void TcpConnection::on_io(uint32_t events) {
  if ((events & EPOLLERR) != 0) {
    fail();
    return;
  }
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) != 0 && !on_readable()) {
    return;
  }
  if (fd_ >= 0 && (events & EPOLLOUT) != 0) {
    flush();
  }
}

bool TcpConnection::on_readable() {
  if (read_buf_.empty()) {
    read_buf_.resize(kReadChunk);
  }
  for (int i = 0; i < kReadsPerEvent && fd_ >= 0; ++i) {
    ssize_t n = ::read(fd_, read_buf_.data(), read_buf_.size());
    if (n > 0) {
      auto got = static_cast<size_t>(n);
      if (state_ == State::kOpen && handler_ != nullptr &&
          !call_handler([&] { handler_->on_pipe_data({read_buf_.data(), got}); })) {
        return false;
      }
      if (got < read_buf_.size()) {
        return true;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    }
    fail();  // EOF (after close(): the peer's answer to our FIN) or a socket error
    return true;
  }
  return true;
}

bool TcpConnection::flush() {
  while (fd_ >= 0 && !queue_.empty()) {
    iov_.clear();
    size_t total = 0;
    for (size_t i = 0; i < queue_.size() && iov_.size() < IOV_MAX; ++i) {
      size_t skip = i == 0 ? front_offset_ : 0;
      auto* base = const_cast<uint8_t*>(queue_[i].data() + skip);
      iov_.push_back(iovec{base, queue_[i].size() - skip});
      total += queue_[i].size() - skip;
    }
    msghdr msg{};
    msg.msg_iov = iov_.data();
    msg.msg_iovlen = iov_.size();
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      }
      fail();
      return true;
    }
    consume(static_cast<size_t>(n));
    if (static_cast<size_t>(n) < total) {
      break;  // the socket buffer is full
    }
  }
  if (fd_ < 0) {
    return true;
  }
  if (queue_.empty() && state_ == State::kClosing && !shut_wr_) {
    ::shutdown(fd_, SHUT_WR);
    shut_wr_ = true;
  }
  update_events();
  if (above_low_water_ && buffered_ < kLowWater) {
    above_low_water_ = false;
    if (state_ == State::kOpen && handler_ != nullptr) {
      return call_handler([&] { handler_->on_pipe_writable(); });
    }
  }
  return true;
}

void TcpConnection::consume(size_t n) {
  buffered_ -= n;
  while (n > 0) {
    size_t left = queue_.front().size() - front_offset_;
    if (n < left) {
      front_offset_ += n;
      return;
    }
    n -= left;
    queue_.pop_front();
    front_offset_ = 0;
  }
}

void TcpConnection::update_events() {
  uint32_t want = EPOLLIN | (queue_.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  if (!registered_ || want == events_) {
    return;
  }
  if (loop_.modify(fd_, want, this)) {
    events_ = want;
  }
}

}  // namespace moqd::runtime
