#include "runtime/udp.h"

#include <netdb.h>
#include <netinet/udp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace moqd::runtime {
namespace {

// Datagrams one recvmmsg() call can return; each slot holds a whole GRO super-datagram.
constexpr size_t kRecvBatch = 16;
// recvmmsg() calls per readiness event, so one busy socket cannot starve the rest of the loop.
constexpr int kRecvCallsPerEvent = 8;
// Messages per sendmmsg() call.
constexpr size_t kSendBatch = 64;
// Segments per GSO super-datagram (the kernel's UDP_MAX_SEGMENTS is 64 before Linux 6.x).
constexpr size_t kMaxGsoSegments = 64;
// Payload bytes per GSO super-datagram (an IPv4 UDP payload is at most 65507).
constexpr size_t kMaxGsoBytes = 65000;

void set_int_opt(int fd, int level, int name, int value) {
  ::setsockopt(fd, level, name, &value, sizeof value);
}

// Sets a socket buffer and returns the size the kernel gave (it reports twice what it keeps for
// data, so halved).
size_t set_buffer(int fd, int force_name, int name, size_t bytes) {
  int value = static_cast<int>(bytes);
  if (::setsockopt(fd, SOL_SOCKET, force_name, &value, sizeof value) != 0) {
    set_int_opt(fd, SOL_SOCKET, name, value);  // unprivileged: capped by net.core.*mem_max
  }
  int got = 0;
  socklen_t len = sizeof got;
  if (::getsockopt(fd, SOL_SOCKET, name, &got, &len) != 0 || got < 0) {
    return 0;
  }
  return static_cast<size_t>(got) / 2;
}

struct Resolved {
  sockaddr_storage storage{};
  socklen_t len = 0;
};

Result<Resolved> resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res) != 0 ||
      res == nullptr) {
    return fail(ErrorCode::kTransport, "cannot resolve host");
  }
  Resolved out;
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

bool same_peer(const sockaddr_storage& a, socklen_t alen, const sockaddr_storage& b,
               socklen_t blen) {
  return alen == blen && std::memcmp(&a, &b, alen) == 0;
}

}  // namespace

struct UdpSocket::Message {
  size_t first = 0;  // index into pending_
  size_t count = 0;  // datagrams (segments) in this message
  iovec iov{};
  union {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    cmsghdr align;
  } control{};
};

Result<std::unique_ptr<UdpSocket>> UdpSocket::bind(EventLoop& loop, const std::string& host,
                                                   uint16_t port, Options o) {
  auto addr = resolve(host, port);
  if (!addr) {
    return tl::unexpected(addr.error());
  }
  return open(loop, reinterpret_cast<const sockaddr*>(&addr->storage), addr->len, o);
}

Result<std::unique_ptr<UdpSocket>> UdpSocket::open_client(EventLoop& loop, const std::string& host,
                                                          Options o) {
  auto addr = resolve(host, 0);
  if (!addr) {
    return tl::unexpected(addr.error());
  }
  Resolved any;
  any.storage.ss_family = addr->storage.ss_family;
  any.len = addr->storage.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  o.reuse_port = false;
  return open(loop, reinterpret_cast<const sockaddr*>(&any.storage), any.len, o);
}

Result<std::unique_ptr<UdpSocket>> UdpSocket::open(EventLoop& loop, const sockaddr* addr,
                                                   socklen_t len, Options o) {
  int fd = ::socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(ErrorCode::kTransport, "socket() failed");
  }
  if (o.reuse_port) {
    set_int_opt(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    set_int_opt(fd, SOL_SOCKET, SO_REUSEPORT, 1);
  }
  if (addr->sa_family == AF_INET6) {
    set_int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);  // "[::]" also serves IPv4
  }
  if (::bind(fd, addr, len) != 0) {
    ::close(fd);
    return fail(ErrorCode::kTransport, "bind() failed");
  }
  size_t rcvbuf = set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, o.buffer_bytes);
  size_t sndbuf = set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, o.buffer_bytes);
  if (rcvbuf < o.buffer_bytes || sndbuf < o.buffer_bytes) {
    MOQD_LOG(kWarn,
             "udp socket buffers clamped by the kernel: asked %zu bytes, got receive %zu send %zu "
             "(raise net.core.rmem_max and wmem_max, or run with CAP_NET_ADMIN)",
             o.buffer_bytes, rcvbuf, sndbuf);
  }
  if (o.gro) {
    int on = 1;
    o.gro = ::setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof on) == 0;
  }
  std::unique_ptr<UdpSocket> s(new UdpSocket(loop, fd, o));
  s->rcvbuf_ = rcvbuf;
  s->sndbuf_ = sndbuf;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&s->local_), &s->local_len_) != 0) {
    return fail(ErrorCode::kTransport, "getsockname() failed");
  }
  return s;
}

UdpSocket::UdpSocket(EventLoop& loop, int fd, Options o)
    : loop_(loop), fd_(fd), options_(o), local_len_(sizeof local_) {}

Status UdpSocket::attach_reuseport_program(std::span<const sock_filter> program) {
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.size());
  prog.filter = const_cast<sock_filter*>(program.data());
  if (::setsockopt(fd_, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) != 0) {
    return fail(ErrorCode::kTransport, "SO_ATTACH_REUSEPORT_CBPF failed");
  }
  return {};
}

void UdpSocket::detach_reuseport_program() {
  int unused = 0;
  ::setsockopt(fd_, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &unused, sizeof unused);
}

Status UdpSocket::send_to_self(std::span<const uint8_t> datagram) const {
  sockaddr_storage to = local_;
  if (to.ss_family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&to);
    if (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr)) {
      a6->sin6_addr = in6addr_loopback;
    }
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&to);
    if (a4->sin_addr.s_addr == htonl(INADDR_ANY)) {
      a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
  }
  int fd = ::socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(ErrorCode::kTransport, "socket() failed");
  }
  ssize_t n = ::sendto(fd, datagram.data(), datagram.size(), 0,
                       reinterpret_cast<const sockaddr*>(&to), local_len_);
  ::close(fd);
  if (n != static_cast<ssize_t>(datagram.size())) {
    return fail(ErrorCode::kTransport, "sendto() failed");
  }
  return {};
}

size_t UdpSocket::drain_now(const std::function<void(std::span<const uint8_t>)>& fn) {
  size_t n = 0;
  uint8_t buf[kMaxDatagram];
  for (;;) {
    ssize_t r = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (r < 0) {
      return n;
    }
    ++n;
    fn({buf, static_cast<size_t>(r)});
  }
}

UdpSocket::Stats UdpSocket::stats() const {
  return {stats_.datagrams_in.get(),  stats_.datagrams_out.get(), stats_.messages_out.get(),
          stats_.bytes_out.get(),     stats_.sendmsg_calls.get(), stats_.recv_calls.get(),
          stats_.gso_batches.get(),   stats_.gro_batches.get()};
}

UdpSocket::~UdpSocket() {
  if (alive_ != nullptr) {
    *alive_ = false;
  }
  if (events_ != 0) {
    loop_.remove(fd_);
  }
  ::close(fd_);
}

uint16_t UdpSocket::port() const {
  if (local_.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&local_)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&local_)->sin6_port);
}

void UdpSocket::set_handler(Handler h) {
  handler_ = std::move(h);
  update_events();
}

void UdpSocket::update_events() {
  uint32_t want = (handler_ ? static_cast<uint32_t>(EPOLLIN) : 0u) |
                  (watching_out_ ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  if (want == events_) {
    return;
  }
  if (events_ == 0) {
    if (!loop_.add(fd_, want, this)) {
      return;
    }
  } else if (want == 0) {
    loop_.remove(fd_);
  } else {
    (void)loop_.modify(fd_, want, this);
  }
  events_ = want;
}

void UdpSocket::watch_writable(bool on) {
  if (watching_out_ != on) {
    watching_out_ = on;
    update_events();
  }
}

void UdpSocket::on_io(uint32_t events) {
  if ((events & EPOLLOUT) != 0) {
    flush();
  }
  if ((events & (EPOLLIN | EPOLLERR)) != 0 && handler_) {
    bool alive = true;
    alive_ = &alive;
    on_readable();
    if (alive) {
      alive_ = nullptr;
    }
  }
}

void UdpSocket::on_readable() {
  if (recv_buf_.empty()) {
    recv_buf_.resize(kRecvBatch * kMaxDatagram);
  }
  for (int call = 0; call < kRecvCallsPerEvent; ++call) {
    mmsghdr msgs[kRecvBatch]{};
    iovec iovs[kRecvBatch];
    sockaddr_storage from[kRecvBatch];
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      cmsghdr align;
    } control[kRecvBatch];
    for (size_t i = 0; i < kRecvBatch; ++i) {
      iovs[i] = iovec{recv_buf_.data() + i * kMaxDatagram, kMaxDatagram};
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof from[i];
      msgs[i].msg_hdr.msg_control = control[i].buf;
      msgs[i].msg_hdr.msg_controllen = sizeof control[i].buf;
    }
    stats_.recv_calls.add();
    int n = ::recvmmsg(fd_, msgs, kRecvBatch, MSG_DONTWAIT, nullptr);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;  // EAGAIN, or an ICMP error queued on the socket: nothing to read now
    }
    for (int i = 0; i < n; ++i) {
      msghdr& h = msgs[i].msg_hdr;
      if ((h.msg_flags & MSG_TRUNC) != 0) {
        continue;
      }
      size_t segment = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
        if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
          int value = 0;
          std::memcpy(&value, CMSG_DATA(c), sizeof value);
          segment = value > 0 ? static_cast<size_t>(value) : 0;
        }
      }
      if (!deliver(reinterpret_cast<const sockaddr*>(&from[i]), h.msg_namelen,
                   static_cast<const uint8_t*>(iovs[i].iov_base), msgs[i].msg_len, segment) ||
          !handler_) {
        return;
      }
    }
    if (static_cast<size_t>(n) < kRecvBatch) {
      break;
    }
  }
}

bool UdpSocket::deliver(const sockaddr* from, socklen_t from_len, const uint8_t* data, size_t len,
                        size_t segment) {
  bool* alive = alive_;
  if (segment == 0 || segment >= len) {
    segment = len;
  } else {
    stats_.gro_batches.add();
  }
  for (size_t off = 0; off < len; off += segment) {
    size_t n = std::min(segment, len - off);
    stats_.datagrams_in.add();
    handler_(from, from_len, {data + off, n});
    if (!*alive || !handler_) {
      return *alive;
    }
  }
  return true;
}

std::span<uint8_t> UdpSocket::prepare(size_t len) {
  if (len > kMaxDatagram) {
    return {};
  }
  if (!has_room(len) && !watching_out_) {
    flush();
  }
  if (!has_room(len)) {
    return {};
  }
  if (!batch_) {
    batch_ = std::make_unique_for_overwrite<uint8_t[]>(kBatchBytes);  // pages touched as used
  }
  return {batch_.get() + used_, len};
}

void UdpSocket::send(const sockaddr* to, socklen_t to_len, std::span<const uint8_t> datagram) {
  if (datagram.empty() || datagram.size() > kMaxDatagram || to_len > sizeof(sockaddr_storage)) {
    return;
  }
  bool in_place = batch_ && datagram.data() == batch_.get() + used_ && has_room(datagram.size());
  if (!in_place) {
    std::span<uint8_t> room = prepare(datagram.size());
    if (room.empty()) {
      dropped_.add();
      return;
    }
    std::memcpy(room.data(), datagram.data(), datagram.size());
  }
  Pending& p = pending_.emplace_back();
  p.offset = used_;
  p.len = static_cast<uint16_t>(datagram.size());
  p.to_len = to_len;
  std::memcpy(&p.to, to, to_len);
  used_ += datagram.size();
  if (!watching_out_) {
    loop_.at_turn_flush(flush_work_);
  }
}

// Entries from `first` that can share one GSO super-datagram: same peer, same size, except that
// the last may be shorter (the kernel sends a short final segment).
size_t UdpSocket::run_length(size_t first) const {
  const Pending& head = pending_[first];
  size_t count = 1;
  size_t bytes = head.len;
  while (options_.gso && first + count < pending_.size() && count < kMaxGsoSegments) {
    const Pending& next = pending_[first + count];
    if (next.len > head.len || bytes + next.len > kMaxGsoBytes ||
        !same_peer(head.to, head.to_len, next.to, next.to_len)) {
      break;
    }
    ++count;
    bytes += next.len;
    if (next.len < head.len) {
      break;
    }
  }
  return count;
}

size_t UdpSocket::fill_messages(size_t first, std::vector<Message>& out) {
  out.clear();
  size_t i = first;
  while (i < pending_.size() && out.size() < kSendBatch) {
    Message& m = out.emplace_back();
    m.first = i;
    m.count = run_length(i);
    size_t bytes = 0;
    for (size_t k = 0; k < m.count; ++k) {
      bytes += pending_[i + k].len;
    }
    m.iov = iovec{batch_.get() + pending_[i].offset, bytes};
    i += m.count;
  }
  return i;
}

size_t UdpSocket::send_messages(size_t first) {
  std::vector<Message> msgs;
  msgs.reserve(kSendBatch);
  fill_messages(first, msgs);
  mmsghdr hdrs[kSendBatch]{};
  for (size_t j = 0; j < msgs.size(); ++j) {
    Message& m = msgs[j];
    Pending& p = pending_[m.first];
    msghdr& h = hdrs[j].msg_hdr;
    h.msg_name = &p.to;
    h.msg_namelen = p.to_len;
    h.msg_iov = &m.iov;
    h.msg_iovlen = 1;
    if (m.count > 1) {
      h.msg_control = m.control.buf;
      h.msg_controllen = sizeof m.control.buf;
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = IPPROTO_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t seg = p.len;
      std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
    }
  }
  int n;
  do {
    stats_.sendmsg_calls.add();
    n = ::sendmmsg(fd_, hdrs, static_cast<unsigned>(msgs.size()), MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    }
    if (msgs[0].count > 1 && options_.gso) {
      options_.gso = false;  // EIO / EINVAL: no GSO on this path; resend the run one by one
      return send_messages(first);
    }
    dropped_.add();  // the kernel refused this datagram (unreachable peer, EMSGSIZE): skip it
    return msgs[0].count;
  }
  size_t entries = 0;
  for (int j = 0; j < n; ++j) {
    entries += msgs[j].count;
    stats_.datagrams_out.add(msgs[j].count);
    stats_.messages_out.add();
    stats_.bytes_out.add(msgs[j].iov.iov_len);
    if (msgs[j].count > 1) {
      stats_.gso_batches.add();
    }
  }
  return entries;
}

void UdpSocket::flush() {
  while (sent_ < pending_.size()) {
    size_t n = send_messages(sent_);
    if (n == 0) {
      compact();
      watch_writable(true);
      return;
    }
    sent_ += n;
  }
  pending_.clear();
  used_ = 0;
  sent_ = 0;
  watch_writable(false);
  on_drained();
}

// The kernel took the tail that held writers back: they run at the end of this turn.
void UdpSocket::on_drained() {
  while (!waiting_.empty()) {
    loop_.at_turn_end(*waiting_.pop_front());
  }
}

// Moves what the kernel has not taken yet to the front of the batch.
void UdpSocket::compact() {
  if (sent_ == 0) {
    return;
  }
  size_t bytes = pending_[sent_].offset;
  std::memmove(batch_.get(), batch_.get() + bytes, used_ - bytes);
  used_ -= bytes;
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(sent_));
  for (Pending& p : pending_) {
    p.offset -= bytes;
  }
  sent_ = 0;
}

}  // namespace moqd::runtime
