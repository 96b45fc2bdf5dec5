// `moq bench limits` (see bench_limits.h). The crypto part calls ngtcp2 1.11's GnuTLS backend
// itself (ngtcp2_crypto_encrypt / _decrypt / _hp_mask from libngtcp2_crypto_gnutls), with the
// contexts set up the way that backend sets them up for AES-128-GCM (gnutls_aead_cipher_init,
// and gnutls_cipher_init on AES-128-CBC for the single-block header-protection mask). The UDP
// part sends over 127.0.0.1 to a receiver thread in this process and counts both ends.
#include "bench_limits.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace moqd::bench {
namespace {

// Short header (RFC 9000 §17.3): first byte, moqd's 16-byte DCID, a 4-byte packet number.
constexpr size_t kCidLength = 16;
constexpr size_t kPnOffset = 1 + kCidLength;
constexpr size_t kPnLength = 4;
constexpr size_t kHeaderLength = kPnOffset + kPnLength;
constexpr size_t kTagLength = 16;  // AES-128-GCM
constexpr size_t kNonceLength = 12;
// Packets sealed before timing, and the ring the open loop cycles through.
constexpr size_t kRingPackets = 64;
// Operations between clock reads in the crypto loops.
constexpr size_t kOpsPerCheck = 256;
// More loss than this (a fraction of datagrams sent) means the receiver did not keep up.
constexpr double kMaxLossFraction = 0.001;
// recvmmsg batch, and the receive timeout that lets the receiver notice the end of a point.
constexpr size_t kRecvBatch = 64;
constexpr int kRecvTimeoutMs = 20;
constexpr size_t kGroBufferBytes = 65536;
constexpr size_t kMaxUdpPayload = 65507;  // IPv4: 65535 - 20 (IP) - 8 (UDP)
// The smallest packet measure_crypto can seal: a header, a tag and a header-protection sample.
constexpr size_t kMinPacketSize = kHeaderLength + kTagLength + NGTCP2_HP_SAMPLELEN;
// Paced runs keep at most this fraction of the receive buffer (as read back) in flight as
// payload: a 1,200-byte datagram's skb is charged 2-4 times its payload against SO_RCVBUF.
constexpr size_t kWindowDivisor = 8;
// A paced sender that has waited this long without progress counts what is in flight as lost.
constexpr long kPaceWaitNs = 10'000'000;

double now_s(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double rusage_s(int who) {
  rusage ru{};
  getrusage(who, &ru);
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + (errno ? std::string(": ") + std::strerror(errno) : ""));
}

// ---- crypto ----------------------------------------------------------------------------------

// AES-128-GCM packet protection keys for one direction, as ngtcp2's GnuTLS backend holds them.
class PacketKeys {
 public:
  PacketKeys() {
    aead_.native_handle = reinterpret_cast<void*>(static_cast<intptr_t>(GNUTLS_CIPHER_AES_128_GCM));
    aead_.max_overhead = kTagLength;
    hp_.native_handle = reinterpret_cast<void*>(static_cast<intptr_t>(GNUTLS_CIPHER_AES_128_CBC));
    uint8_t key[16], hp_key[16];
    if (gnutls_rnd(GNUTLS_RND_NONCE, key, sizeof key) != 0 ||
        gnutls_rnd(GNUTLS_RND_NONCE, hp_key, sizeof hp_key) != 0 ||
        gnutls_rnd(GNUTLS_RND_NONCE, iv_, sizeof iv_) != 0) {
      fail("gnutls_rnd");
    }
    if (ngtcp2_crypto_aead_ctx_encrypt_init(&tx_, &aead_, key, kNonceLength) != 0 ||
        ngtcp2_crypto_aead_ctx_decrypt_init(&rx_, &aead_, key, kNonceLength) != 0) {
      fail("ngtcp2_crypto_aead_ctx_*_init(AES-128-GCM)");
    }
    // What ngtcp2_crypto_cipher_ctx_encrypt_init does in the GnuTLS backend (not exported).
    gnutls_cipher_hd_t hd;
    gnutls_datum_t datum{hp_key, sizeof hp_key};
    if (gnutls_cipher_init(&hd, GNUTLS_CIPHER_AES_128_CBC, &datum, nullptr) != 0) {
      fail("gnutls_cipher_init(AES-128-CBC)");
    }
    hp_ctx_.native_handle = hd;
  }
  ~PacketKeys() {
    ngtcp2_crypto_aead_ctx_free(&tx_);
    ngtcp2_crypto_aead_ctx_free(&rx_);
    gnutls_cipher_deinit(static_cast<gnutls_cipher_hd_t>(hp_ctx_.native_handle));
  }
  PacketKeys(const PacketKeys&) = delete;
  PacketKeys& operator=(const PacketKeys&) = delete;

  // Protects pkt[0, size) in place for packet number `pn`, as ngtcp2_ppe_final does: AEAD over
  // the payload with the header as AAD, then the header-protection mask from the sample.
  bool seal(uint8_t* pkt, size_t size, uint64_t pn) {
    pkt[0] = 0x40 | (kPnLength - 1);
    for (size_t i = 0; i < kPnLength; ++i) {
      pkt[kPnOffset + i] = static_cast<uint8_t>(pn >> (8 * (kPnLength - 1 - i)));
    }
    uint8_t nonce[kNonceLength];
    make_nonce(nonce, pn);
    size_t plain = size - kHeaderLength - kTagLength;
    uint8_t* payload = pkt + kHeaderLength;
    if (ngtcp2_crypto_encrypt(payload, &aead_, &tx_, payload, plain, nonce, kNonceLength, pkt,
                              kHeaderLength) != 0) {
      return false;
    }
    return apply_mask(pkt, pkt);
  }

  // Removes header protection into `header` (a copy, as ngtcp2 does) and decrypts into `out`.
  bool open(const uint8_t* pkt, size_t size, uint8_t* header, uint8_t* out) {
    std::memcpy(header, pkt, kHeaderLength);
    if (!apply_mask(header, pkt)) {
      return false;
    }
    uint64_t pn = 0;
    for (size_t i = 0; i < kPnLength; ++i) {
      pn = (pn << 8) | header[kPnOffset + i];
    }
    uint8_t nonce[kNonceLength];
    make_nonce(nonce, pn);
    return ngtcp2_crypto_decrypt(out, &aead_, &rx_, pkt + kHeaderLength, size - kHeaderLength,
                                 nonce, kNonceLength, header, kHeaderLength) == 0;
  }

 private:
  void make_nonce(uint8_t* nonce, uint64_t pn) const {
    std::memcpy(nonce, iv_, kNonceLength);
    for (size_t i = 0; i < 8; ++i) {
      nonce[kNonceLength - 1 - i] ^= static_cast<uint8_t>(pn >> (8 * i));
    }
  }
  // XORs the mask computed from the sample in `pkt` into the header bytes of `header`.
  bool apply_mask(uint8_t* header, const uint8_t* pkt) {
    uint8_t mask[NGTCP2_HP_SAMPLELEN];
    if (ngtcp2_crypto_hp_mask(mask, &hp_, &hp_ctx_, pkt + kPnOffset + 4) != 0) {
      return false;
    }
    header[0] ^= mask[0] & 0x1f;
    for (size_t i = 0; i < kPnLength; ++i) {
      header[kPnOffset + i] ^= mask[1 + i];
    }
    return true;
  }

  ngtcp2_crypto_aead aead_{};
  ngtcp2_crypto_aead_ctx tx_{}, rx_{};
  ngtcp2_crypto_cipher hp_{};
  ngtcp2_crypto_cipher_ctx hp_ctx_{};
  uint8_t iv_[kNonceLength]{};
};

// Runs `op(i)` in blocks until `seconds` of wall time pass; returns {ops, thread CPU seconds}.
template <typename Op>
std::pair<uint64_t, double> run_timed(double seconds, Op&& op) {
  double deadline = now_s(CLOCK_MONOTONIC) + seconds;
  double cpu0 = now_s(CLOCK_THREAD_CPUTIME_ID);
  uint64_t ops = 0;
  do {
    for (size_t i = 0; i < kOpsPerCheck; ++i, ++ops) {
      if (!op(ops)) {
        fail("packet protection failed during the measurement");
      }
    }
  } while (now_s(CLOCK_MONOTONIC) < deadline);
  return {ops, now_s(CLOCK_THREAD_CPUTIME_ID) - cpu0};
}

CryptoLimit measure_crypto(size_t packet_size, double seconds) {
  if (packet_size < kHeaderLength + kTagLength + NGTCP2_HP_SAMPLELEN) {
    throw std::runtime_error("packet size too small for a short header, sample and tag");
  }
  PacketKeys keys;
  std::vector<uint8_t> ring(kRingPackets * packet_size, 0xab);
  std::vector<uint8_t> header(kHeaderLength), out(packet_size);
  auto pkt = [&](uint64_t i) { return ring.data() + (i % kRingPackets) * packet_size; };
  // Every slot sealed then opened once: a probe whose packets do not open measures nothing.
  for (uint64_t i = 0; i < kRingPackets; ++i) {
    if (!keys.seal(pkt(i), packet_size, i) ||
        !keys.open(pkt(i), packet_size, header.data(), out.data())) {
      throw std::runtime_error("AES-128-GCM seal/open round trip failed");
    }
  }
  // The seal loop leaves every slot holding a valid packet (the last pn sealed into it).
  auto [sealed, seal_cpu] = run_timed(
      seconds / 2, [&](uint64_t i) { return keys.seal(pkt(i), packet_size, kRingPackets + i); });
  auto [opened, open_cpu] = run_timed(seconds / 2, [&](uint64_t i) {
    return keys.open(pkt(i), packet_size, header.data(), out.data());
  });
  CryptoLimit c{};
  c.header_bytes = kHeaderLength;
  c.plaintext_bytes = packet_size - kHeaderLength - kTagLength;
  c.packets = sealed;
  c.seal_ns_per_packet = seal_cpu * 1e9 / static_cast<double>(sealed);
  c.open_ns_per_packet = open_cpu * 1e9 / static_cast<double>(opened);
  c.seal_ns_per_byte = c.seal_ns_per_packet / static_cast<double>(packet_size);
  c.open_ns_per_byte = c.open_ns_per_packet / static_cast<double>(packet_size);
  c.seal_ns_per_plaintext_byte = c.seal_ns_per_packet / static_cast<double>(c.plaintext_bytes);
  c.open_ns_per_plaintext_byte = c.open_ns_per_packet / static_cast<double>(c.plaintext_bytes);
  return c;
}

// ---- UDP -------------------------------------------------------------------------------------

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

struct Buffers {
  size_t receive = 0, send = 0;
  bool forced = true;
};

// Sets SO_{SND,RCV}BUFFORCE, or the plain option when that is not permitted; returns whether
// FORCE took, and stores the size the kernel reports back (double the request) in *effective.
bool set_buffer(int fd, int force_opt, int opt, size_t bytes, size_t* effective) {
  int v = static_cast<int>(std::min<size_t>(bytes, std::numeric_limits<int>::max() / 2));
  bool forced = setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) == 0;
  if (!forced && setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v) != 0) {
    fail("setsockopt(SO_*BUF)");
  }
  int got = 0;
  socklen_t len = sizeof got;
  getsockopt(fd, SOL_SOCKET, opt, &got, &len);
  *effective = static_cast<size_t>(got);
  return forced;
}

// A receiver bound to 127.0.0.1:0 and a sender connected to it.
struct SocketPair {
  Fd rx{socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  Fd tx{socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  uint16_t port = 0;
  Buffers buffers;

  SocketPair(const LimitsOptions& o, bool gro) {
    if (rx.get() < 0 || tx.get() < 0) {
      fail("socket");
    }
    size_t rcv = o.receive_buffer_bytes ? o.receive_buffer_bytes : o.socket_buffer_bytes;
    buffers.forced = set_buffer(rx.get(), SO_RCVBUFFORCE, SO_RCVBUF, rcv, &buffers.receive);
    buffers.forced &=
        set_buffer(tx.get(), SO_SNDBUFFORCE, SO_SNDBUF, o.socket_buffer_bytes, &buffers.send);
    timeval tv{0, kRecvTimeoutMs * 1000};
    setsockopt(rx.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int on = 1;
    if (gro && setsockopt(rx.get(), SOL_UDP, UDP_GRO, &on, sizeof on) != 0) {
      fail("setsockopt(UDP_GRO)");
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(rx.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(rx.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        connect(tx.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      fail("bind/connect on 127.0.0.1");
    }
    port = ntohs(a.sin_port);
  }
};

struct Received {
  uint64_t datagrams = 0, bytes = 0;
  double cpu_s = 0;
  int error = 0;
};

// What the sender and the receiver thread share. `received` (mod 2^32, a futex word) is the
// receiver's running datagram count; the receiver wakes the sender only while `waiting` is set.
struct Link {
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> received{0};
  std::atomic<bool> waiting{false};

  void on_received(uint64_t total) {
    received.store(static_cast<uint32_t>(total));
    if (waiting.load()) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&received), FUTEX_WAKE_PRIVATE, 1, nullptr,
              nullptr, 0);
    }
  }
};

// Flow control for a paced sender, as a QUIC peer's ACKs would give: at most `window` datagrams
// sent and not yet received. Waiting sleeps on a futex, so it costs no CPU worth counting.
class Pacer {
 public:
  Pacer(Link* link, uint32_t window) : link_(link), window_(window) {}

  // Blocks until `sent` is within the window again; returns at once when unpaced (window 0).
  void wait(uint64_t sent) {
    auto s = static_cast<uint32_t>(sent);
    while (window_ && s - (link_->received.load() + lost_) > window_) {
      link_->waiting.store(true);
      uint32_t r = link_->received.load();
      if (s - (r + lost_) <= window_) {
        break;
      }
      ++waits_;
      timespec ts{0, kPaceWaitNs};
      long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(&link_->received),
                        FUTEX_WAIT_PRIVATE, r, &ts, nullptr, 0);
      if (rc != 0 && errno == ETIMEDOUT && link_->received.load() == r) {
        lost_ = s - r;  // dropped in the kernel: they will never arrive
      }
    }
    link_->waiting.store(false);
  }
  uint64_t waits() const { return waits_; }

 private:
  Link* link_;
  uint32_t window_;
  uint32_t lost_ = 0;
  uint64_t waits_ = 0;
};

// Datagrams in one received buffer: a GRO buffer holds len / gso_size segments (rounded up).
uint64_t datagrams_in(const msghdr& h, size_t len, size_t packet_size) {
  size_t seg = packet_size;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int v = 0;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      seg = v > 0 ? static_cast<size_t>(v) : packet_size;
    }
  }
  return len == 0 ? 1 : (len + seg - 1) / seg;
}

// The receiving peer: recvmmsg until `stop` is set and the socket has stayed empty for
// kRecvTimeoutMs. Runs on its own thread; its CPU is that thread's (RUSAGE_THREAD).
void receive_loop(int fd, bool gro, size_t packet_size, Link* link, Received* out) {
  double cpu0 = rusage_s(RUSAGE_THREAD);
  size_t buf_size = gro ? kGroBufferBytes : std::max<size_t>(packet_size, 2048);
  std::vector<uint8_t> bufs(kRecvBatch * buf_size);
  constexpr size_t kCtrl = CMSG_SPACE(sizeof(int));
  std::vector<uint8_t> ctrl(kRecvBatch * kCtrl);
  std::vector<iovec> iov(kRecvBatch);
  std::vector<mmsghdr> msgs(kRecvBatch);
  for (size_t i = 0; i < kRecvBatch; ++i) {
    iov[i] = {bufs.data() + i * buf_size, buf_size};
  }
  while (true) {
    for (size_t i = 0; i < kRecvBatch; ++i) {
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = ctrl.data() + i * kCtrl;
      msgs[i].msg_hdr.msg_controllen = gro ? kCtrl : 0;
    }
    int n = recvmmsg(fd, msgs.data(), kRecvBatch, MSG_WAITFORONE, nullptr);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (link->stop.load()) {
          break;
        }
        continue;
      }
      if (errno == EINTR) {
        continue;
      }
      out->error = errno;
      break;
    }
    for (int i = 0; i < n; ++i) {
      out->bytes += msgs[i].msg_len;
      out->datagrams += datagrams_in(msgs[i].msg_hdr, msgs[i].msg_len, packet_size);
    }
    link->on_received(out->datagrams);
  }
  out->cpu_s = rusage_s(RUSAGE_THREAD) - cpu0;
}

// The kernel's drop counter for the socket bound to 127.0.0.1:port (/proc/net/udp, last
// column), or -1 when it cannot be read. It counts skbs: a dropped GSO super-packet is one.
int64_t kernel_drops(uint16_t port) {
  std::ifstream f("/proc/net/udp");
  char want[32];
  std::snprintf(want, sizeof want, "0100007F:%04X", port);
  std::string line;
  while (std::getline(f, line)) {
    if (line.find(want) == std::string::npos || line.find(want) > 16) {
      continue;
    }
    // The kernel pads each line with spaces to 127 columns.
    line.erase(line.find_last_not_of(' ') + 1);
    return std::strtoll(line.c_str() + line.find_last_of(' ') + 1, nullptr, 10);
  }
  return -1;
}

struct Sent {
  uint64_t datagrams = 0, calls = 0, waits = 0;
  double cpu_s = 0, wall_s = 0;
};

// Sends `batch` datagrams per sendmmsg call until `seconds` pass.
Sent send_mmsg(int fd, size_t packet_size, size_t batch, double seconds, Pacer& pacer) {
  std::vector<uint8_t> payload(batch * packet_size, 0x5a);
  std::vector<iovec> iov(batch);
  std::vector<mmsghdr> msgs(batch);
  for (size_t i = 0; i < batch; ++i) {
    iov[i] = {payload.data() + i * packet_size, packet_size};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  Sent s;
  double t0 = now_s(CLOCK_MONOTONIC), cpu0 = rusage_s(RUSAGE_THREAD);
  do {
    pacer.wait(s.datagrams + batch);
    int n = sendmmsg(fd, msgs.data(), static_cast<unsigned>(batch), 0);
    if (n < 0 && errno != EINTR && errno != EAGAIN && errno != ENOBUFS) {
      fail("sendmmsg");
    }
    s.datagrams += n > 0 ? static_cast<uint64_t>(n) : 0;
    ++s.calls;
  } while ((s.wall_s = now_s(CLOCK_MONOTONIC) - t0) < seconds);
  s.cpu_s = rusage_s(RUSAGE_THREAD) - cpu0;
  s.waits = pacer.waits();
  return s;
}

// Sends `segments` datagrams per sendmsg as one UDP_SEGMENT (GSO) buffer until `seconds` pass.
Sent send_gso(int fd, size_t packet_size, size_t segments, double seconds, Pacer& pacer) {
  std::vector<uint8_t> payload(segments * packet_size, 0x5a);
  iovec iov{payload.data(), payload.size()};
  alignas(cmsghdr) uint8_t ctrl[CMSG_SPACE(sizeof(uint16_t))] = {};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = ctrl;
  h.msg_controllen = sizeof ctrl;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  auto seg = static_cast<uint16_t>(packet_size);
  std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
  Sent s;
  double t0 = now_s(CLOCK_MONOTONIC), cpu0 = rusage_s(RUSAGE_THREAD);
  do {
    pacer.wait(s.datagrams + segments);
    ssize_t n = sendmsg(fd, &h, 0);
    if (n < 0 && errno != EINTR && errno != EAGAIN && errno != ENOBUFS) {
      fail("sendmsg(UDP_SEGMENT)");
    }
    s.datagrams += n > 0 ? static_cast<uint64_t>(n) / packet_size : 0;
    ++s.calls;
  } while ((s.wall_s = now_s(CLOCK_MONOTONIC) - t0) < seconds);
  s.cpu_s = rusage_s(RUSAGE_THREAD) - cpu0;
  s.waits = pacer.waits();
  return s;
}

UdpLimit measure_udp(const LimitsOptions& o, bool gso, size_t batch, Buffers* buffers) {
  SocketPair sockets(o, gso);
  *buffers = sockets.buffers;
  Link link;
  // The window must hold at least one send call, or a paced sender would never send.
  size_t window = std::max(sockets.buffers.receive / kWindowDivisor / o.packet_size, batch);
  Pacer pacer(&link, o.pace ? static_cast<uint32_t>(window) : 0);
  Received rx;
  double proc0 = rusage_s(RUSAGE_SELF);
  std::thread receiver(receive_loop, sockets.rx.get(), gso, o.packet_size, &link, &rx);
  Sent tx = gso ? send_gso(sockets.tx.get(), o.packet_size, batch, o.seconds, pacer)
                : send_mmsg(sockets.tx.get(), o.packet_size, batch, o.seconds, pacer);
  link.stop.store(true);
  receiver.join();
  // The receiver's final empty wait (kRecvTimeoutMs) sleeps, so it adds no CPU.
  double proc_cpu = rusage_s(RUSAGE_SELF) - proc0;
  if (rx.error) {
    errno = rx.error;
    fail("recvmmsg");
  }
  UdpLimit u{};
  u.mode = gso ? "gso" : "sendmmsg";
  u.batch = batch;
  u.gro = gso;
  u.sent = tx.datagrams;
  u.received = rx.datagrams;
  u.send_calls = tx.calls;
  u.paced = o.pace;
  u.window = o.pace ? window : 0;
  u.sender_waits = tx.waits;
  u.seconds = tx.wall_s;
  double rx_bytes = static_cast<double>(rx.bytes),
         tx_bytes = static_cast<double>(u.sent) * static_cast<double>(o.packet_size);
  u.ns_per_byte = rx_bytes > 0 ? proc_cpu * 1e9 / rx_bytes : NAN;
  u.sender_ns_per_byte = tx_bytes > 0 ? tx.cpu_s * 1e9 / tx_bytes : NAN;
  u.receiver_ns_per_byte = rx_bytes > 0 ? rx.cpu_s * 1e9 / rx_bytes : NAN;
  u.ns_per_datagram = rx.datagrams ? proc_cpu * 1e9 / static_cast<double>(rx.datagrams) : NAN;
  u.gbit_per_s = rx_bytes * 8 / tx.wall_s / 1e9;
  uint64_t lost = u.sent > u.received ? u.sent - u.received : 0;
  u.receiver_kept_up =
      u.received > 0 && static_cast<double>(lost) <= kMaxLossFraction * static_cast<double>(u.sent);
  u.kernel_drops = kernel_drops(sockets.port);
  return u;
}

// ---- output ----------------------------------------------------------------------------------

std::string num(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

std::string udp_json(const Limits& l, const UdpLimit& u) {
  LimitEstimate e = estimate_limit(l, static_cast<double>(u.batch), u.mode == "gso");
  std::string s = "{\"mode\":\"" + u.mode + "\",\"batch\":" + std::to_string(u.batch);
  s += ",\"ns_per_byte\":" + num(u.ns_per_byte);
  s += ",\"sender_ns_per_byte\":" + num(u.sender_ns_per_byte);
  s += ",\"receiver_ns_per_byte\":" + num(u.receiver_ns_per_byte);
  s += ",\"ns_per_datagram\":" + num(u.ns_per_datagram);
  s += ",\"sent\":" + std::to_string(u.sent) + ",\"received\":" + std::to_string(u.received);
  s += ",\"lost\":" + std::to_string(u.sent > u.received ? u.sent - u.received : 0);
  s += ",\"kernel_drops\":" + std::to_string(u.kernel_drops);
  s += ",\"receiver_kept_up\":" + std::string(u.receiver_kept_up ? "true" : "false");
  s += ",\"gro\":" + std::string(u.gro ? "true" : "false");
  s += ",\"paced\":" + std::string(u.paced ? "true" : "false");
  s += ",\"window\":" + std::to_string(u.window);
  s += ",\"sender_waits\":" + std::to_string(u.sender_waits);
  s += ",\"send_calls\":" + std::to_string(u.send_calls) + ",\"seconds\":" + num(u.seconds);
  s += ",\"gbit_per_s\":" + num(u.gbit_per_s);
  s += ",\"limit_ns_per_byte\":" + num(e.ns_per_byte);
  s += ",\"limit_gbit_per_s_per_core\":" + num(8 / e.ns_per_byte) + "}";
  return s;
}

std::string crypto_json(const CryptoLimit& c) {
  std::string s = "{\"aead\":\"AES-128-GCM\",\"backend\":\"ngtcp2 " NGTCP2_VERSION " GnuTLS\"";
  s += ",\"seal_ns_per_packet\":" + num(c.seal_ns_per_packet);
  s += ",\"seal_ns_per_byte\":" + num(c.seal_ns_per_byte);
  s += ",\"open_ns_per_packet\":" + num(c.open_ns_per_packet);
  s += ",\"open_ns_per_byte\":" + num(c.open_ns_per_byte);
  s += ",\"seal_ns_per_plaintext_byte\":" + num(c.seal_ns_per_plaintext_byte);
  s += ",\"open_ns_per_plaintext_byte\":" + num(c.open_ns_per_plaintext_byte);
  s += ",\"header_bytes\":" + std::to_string(c.header_bytes);
  s += ",\"plaintext_bytes\":" + std::to_string(c.plaintext_bytes);
  s += ",\"packets\":" + std::to_string(c.packets) + "}";
  return s;
}

// ---- flags -----------------------------------------------------------------------------------

struct CommandState {
  LimitsOptions options;
  bool json = false;
};

void run_command(const CommandState& st, int* exit_code) {
  try {
    Limits l = measure_limits(st.options);
    if (st.json) {
      std::printf("%s\n", limits_json(l).c_str());
    } else {
      print_limits(l, stdout);
    }
    std::fflush(stdout);
    *exit_code = 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moq bench limits: %s\n", e.what());
    *exit_code = 1;
  }
}

}  // namespace

size_t limit_packet_size(double bytes, double datagrams, const std::vector<size_t>& gso_segments,
                         size_t fallback) {
  if (!(datagrams > 0) || !(bytes > 0)) {
    return fallback;
  }
  size_t largest_run = 1;
  for (size_t segs : gso_segments) {
    largest_run = std::max(largest_run, segs);
  }
  size_t size = static_cast<size_t>(std::llround(bytes / datagrams));
  return std::clamp(size, kMinPacketSize, kMaxUdpPayload / largest_run);
}

Limits measure_limits(const LimitsOptions& options) {
  if (options.packet_size == 0 || options.packet_size > kMaxUdpPayload || !(options.seconds > 0)) {
    throw std::runtime_error("packet size must be 1..65507 bytes and seconds positive");
  }
  // Checked before measuring anything, so a bad list fails at once.
  for (size_t segs : options.gso_segments) {
    if (segs * options.packet_size > kMaxUdpPayload) {
      throw std::runtime_error("GSO batch over 65507 bytes: " + std::to_string(segs) + " x " +
                               std::to_string(options.packet_size));
    }
  }
  Limits l{};
  l.packet_size = options.packet_size;
  l.crypto = measure_crypto(options.packet_size, options.seconds);
  Buffers b;
  for (size_t batch : options.sendmmsg_batches) {
    l.udp.push_back(measure_udp(options, false, std::max<size_t>(batch, 1), &b));
  }
  for (size_t segs : options.gso_segments) {
    l.udp.push_back(measure_udp(options, true, std::max<size_t>(segs, 1), &b));
  }
  l.socket_buffer_bytes = b.receive;
  l.send_buffer_bytes = b.send;
  l.forced_buffers = b.forced;
  return l;
}

LimitEstimate estimate_limit(const Limits& limits, double datagrams_per_send, bool gso) {
  std::vector<const UdpLimit*> pts;
  for (const auto& u : limits.udp) {
    if (u.mode == (gso ? "gso" : "sendmmsg")) {
      pts.push_back(&u);
    }
  }
  std::sort(pts.begin(), pts.end(), [](auto* a, auto* b) { return a->batch < b->batch; });
  LimitEstimate e{};
  e.crypto_ns_per_byte = limits.crypto.seal_ns_per_byte;
  if (pts.empty()) {
    e.ns_per_byte = e.udp_ns_per_byte = NAN;
    return e;
  }
  const UdpLimit* lo = pts.front();
  const UdpLimit* hi = pts.back();
  for (size_t i = 0; i + 1 < pts.size(); ++i) {
    if (static_cast<double>(pts[i]->batch) <= datagrams_per_send &&
        datagrams_per_send <= static_cast<double>(pts[i + 1]->batch)) {
      lo = pts[i];
      hi = pts[i + 1];
      break;
    }
  }
  double x = datagrams_per_send, x0 = static_cast<double>(lo->batch),
         x1 = static_cast<double>(hi->batch);
  if (x <= x0 || lo == hi) {
    hi = lo;
  } else if (x >= x1) {
    lo = hi;
  }
  e.lower_batch = lo->batch;
  e.upper_batch = hi->batch;
  e.interpolated = lo != hi;
  e.receiver_kept_up = lo->receiver_kept_up && hi->receiver_kept_up;
  // Linear in 1/batch: a send call's fixed cost spread over its datagrams, plus a per-byte part.
  double t = e.interpolated ? (1 / x0 - 1 / x) / (1 / x0 - 1 / x1) : 0;
  e.udp_ns_per_byte = lo->ns_per_byte + (hi->ns_per_byte - lo->ns_per_byte) * t;
  e.ns_per_byte = e.crypto_ns_per_byte + e.udp_ns_per_byte;
  return e;
}

double limit_ns_per_byte(const Limits& limits, double datagrams_per_send, bool gso) {
  return estimate_limit(limits, datagrams_per_send, gso).ns_per_byte;
}

std::string limits_json(const Limits& l) {
  std::string s = "{\"packet_size\":" + std::to_string(l.packet_size);
  s += ",\"socket_buffer_bytes\":" + std::to_string(l.socket_buffer_bytes);
  s += ",\"send_buffer_bytes\":" + std::to_string(l.send_buffer_bytes);
  s += ",\"forced_buffers\":" + std::string(l.forced_buffers ? "true" : "false");
  s += ",\"crypto\":" + crypto_json(l.crypto) + ",\"udp\":[";
  for (size_t i = 0; i < l.udp.size(); ++i) {
    s += (i ? "," : "") + udp_json(l, l.udp[i]);
  }
  return s + "]}";
}

void print_limits(const Limits& l, FILE* out) {
  const CryptoLimit& c = l.crypto;
  std::fprintf(out, "packet %zu B; socket buffers as read back: receive %zu B, send %zu B (%s)\n",
               l.packet_size, l.socket_buffer_bytes, l.send_buffer_bytes,
               l.forced_buffers ? "SO_*BUFFORCE" : "SO_*BUF, capped by net.core.*mem_max");
  std::fprintf(out,
               "crypto AES-128-GCM via ngtcp2 %s GnuTLS backend (%zu B header, %zu B plaintext):\n"
               "  seal %.0f ns/packet  %.3f ns/B   open %.0f ns/packet  %.3f ns/B\n",
               NGTCP2_VERSION, c.header_bytes, c.plaintext_bytes, c.seal_ns_per_packet,
               c.seal_ns_per_byte, c.open_ns_per_packet, c.open_ns_per_byte);
  bool paced = !l.udp.empty() && l.udp.front().paced;
  std::fprintf(out,
               "udp on 127.0.0.1 (%s), CPU user+sys; ns/B: process per byte received, "
               "sender thread per byte sent, receiver thread per byte received\n",
               paced ? "paced: at most receive buffer / 8 in flight" : "unpaced");
  std::fprintf(out, "%-9s %5s %8s %8s %8s %9s %10s %10s %8s %7s %-8s %7s %9s %8s\n", "mode",
               "batch", "ns/B", "sender", "recv", "ns/dgram", "sent", "received", "lost", "Gbit/s",
               "kept-up", "waits", "limit", "Gb/s/cpu");
  for (const auto& u : l.udp) {
    double lim = limit_ns_per_byte(l, static_cast<double>(u.batch), u.mode == "gso");
    std::fprintf(out,
                 "%-9s %5zu %8.3f %8.3f %8.3f %9.0f %10llu %10llu %8llu %7.2f %-8s %7llu %9.3f "
                 "%8.2f\n",
                 u.mode.c_str(), u.batch, u.ns_per_byte, u.sender_ns_per_byte,
                 u.receiver_ns_per_byte, u.ns_per_datagram, static_cast<unsigned long long>(u.sent),
                 static_cast<unsigned long long>(u.received),
                 static_cast<unsigned long long>(u.sent > u.received ? u.sent - u.received : 0),
                 u.gbit_per_s, u.receiver_kept_up ? "yes" : "NO",
                 static_cast<unsigned long long>(u.sender_waits), lim, 8 / lim);
  }
  std::fprintf(out,
               "limit = crypto seal ns/B + udp ns/B (process); Gb/s/cpu = 8 / limit. "
               "Rows with kept-up NO lost datagrams: not a limit of the send path.\n");
}

void add_limits_command(CLI::App& bench, int* exit_code) {
  auto st = std::make_shared<CommandState>();
  auto* cmd = bench.add_subcommand("limits",
                                   "this machine's limit for a QUIC relay: AES-128-GCM "
                                   "and UDP send CPU per byte, measured now");
  cmd->add_flag("--json", st->json, "print one JSON object");
  cmd->add_option("--seconds", st->options.seconds,
                  "wall seconds per measured point (default 0.5)");
  cmd->add_option("--packet-size", st->options.packet_size, "UDP payload bytes (default 1200)");
  cmd->add_option("--batches", st->options.sendmmsg_batches,
                  "datagrams per sendmmsg, comma list (default 1,8,32,64)")
      ->delimiter(',');
  cmd->add_option("--gso", st->options.gso_segments,
                  "segments per GSO send, comma list (default 1,8,16,44)")
      ->delimiter(',');
  cmd->add_option("--socket-buffer", st->options.socket_buffer_bytes,
                  "bytes requested for SO_SNDBUF and SO_RCVBUF (default 4194304)");
  cmd->add_option(
      "--receive-buffer", st->options.receive_buffer_bytes,
      "bytes requested for SO_RCVBUF alone, to provoke drops (default: --socket-buffer)");
  cmd->add_flag("--no-pace{false}", st->options.pace,
                "send as fast as possible instead of at most a window ahead of the receiver");
  cmd->callback([st, exit_code] { run_command(*st, exit_code); });
}

}  // namespace moqd::bench
