// The relay's side of a QUIC fan-out, in one process and deterministic: `moqd_bench_quic`.
//
// N relay-side quic::Connections (accepted as QuicEndpoint accepts them) each carry one track to a
// viewer's client Connection: a uni stream per group, a FRAME-sized header and one shared payload
// Bytes per frame, written to every viewer's stream, as Subscription does. The relay's packets go
// into one send batch written in place (like the UDP socket's), and the viewers acknowledge as
// Chromium does (every 10 packets, or 25 ms). Time is two ManualClocks moved in 1 ms steps, one
// per side, so each side's timers and turn work run apart; there is no kernel and no socket.
//
// What it measures is the relay side alone: every relay-side call (writes, the turn's write pass,
// timers, each acknowledgement read) runs inside relay_side(), which adds the thread's CPU time,
// and which `valgrind --tool=callgrind --toggle-collect=*relay_side*` counts instructions in
// (bench/quic_instructions.sh). It prints relay ns and instructions per delivered payload byte,
// packets per frame and bytes per packet. Outside callgrind the instruction markers do nothing.
#include <ngtcp2/ngtcp2.h>
#include <netinet/in.h>
#include <time.h>
#include <valgrind/callgrind.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "runtime/timer_wheel.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"
#include "transport/quic/tls.h"

namespace {

using namespace moqd;
namespace quic = transport::quic;
using std::chrono::milliseconds;

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double g_relay_ns = 0;

// Every relay-side call goes through here: the CPU time it took is the relay's, and callgrind's
// --toggle-collect names this function to count only what runs inside it.
template <typename F>
__attribute__((noinline)) void relay_side(F&& fn) {
  double t0 = thread_cpu_ns();
  fn();
  g_relay_ns += thread_cpu_ns() - t0;
}

sockaddr_in make_addr(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// One side's time: a clock moved in steps, with the event loop's timer wheel and turn queue, run in
// the loop's order (timers, then turn work) at each step.
class SteppedLoop final : public Clock, public Timers {
 public:
  SteppedLoop() : wheel_(now_) {}
  Instant now() const override { return now_; }
  TimerId schedule(Duration delay, std::function<void()> fn) override {
    return wheel_.schedule(now_, delay, std::move(fn));
  }
  void cancel(TimerId id) override { wheel_.cancel(id); }
  void at_turn_end(TurnWork& w) override { turn_.push(w); }
  void advance(Duration d) {
    now_ += d;
    wheel_.advance(now_);
    turn_.run();
  }
  void run_turn() { turn_.run(); }

 private:
  Instant now_{Duration{1'000'000'000}};
  runtime::TimerWheel wheel_;
  TurnQueue turn_;
};

struct Packet {
  uint16_t to_port;
  std::vector<uint8_t> data;
};

// The relay's send batch: packets written in place, moved to the viewers when flushed.
class RelaySink final : public quic::PacketSink {
 public:
  // Room for what one 1 ms step writes: a frame to every viewer and then some. A writer refused
  // room would wait for a wake-up this rig never gives (it drains once per step), so running out
  // is this rig's error, reported, not a loss to recover from.
  explicit RelaySink(size_t viewers) : batch_(std::max<size_t>(1 << 20, viewers * 16 * 1024)) {}
  std::span<uint8_t> packet_buffer(size_t len) override {
    if (used_ + len > batch_.size()) {
      std::fprintf(stderr, "moqd_bench_quic: the relay's send batch (%zu bytes) is full\n",
                   batch_.size());
      std::exit(1);
    }
    return {batch_.data() + used_, len};
  }
  void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) override {
    uint16_t port = ntohs(reinterpret_cast<const sockaddr_in*>(path.remote.addr)->sin_port);
    if (pkt.data() != batch_.data() + used_) {
      std::memcpy(batch_.data() + used_, pkt.data(), pkt.size());
    }
    queued_.push_back({port, used_, pkt.size()});
    used_ += pkt.size();
    ++packets;
    bytes += pkt.size();
    ++sizes[pkt.size()];
  }
  template <typename F>
  void drain(F&& deliver) {
    for (const auto& q : queued_) {
      deliver(q.port, std::span<const uint8_t>(batch_.data() + q.offset, q.len));
    }
    queued_.clear();
    used_ = 0;
  }
  uint64_t packets = 0;
  uint64_t bytes = 0;
  std::map<size_t, uint64_t> sizes;  // packets by size

 private:
  struct Queued {
    uint16_t port;
    size_t offset;
    size_t len;
  };
  std::vector<uint8_t> batch_;
  size_t used_ = 0;
  std::vector<Queued> queued_;
};

// The viewers' packets, copied, for the relay.
class ViewerSink final : public quic::PacketSink {
 public:
  void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) override {
    uint16_t from = ntohs(reinterpret_cast<const sockaddr_in*>(path.local.addr)->sin_port);
    out.push_back({from, std::vector<uint8_t>(pkt.begin(), pkt.end())});
    ++sizes[pkt.size()];
  }
  std::map<size_t, uint64_t> sizes;  // packets by size
  std::vector<Packet> out;  // to_port holds the sender's port here
};

// Reads every stream a viewer's connection opens to it and counts the bytes.
class ViewerReader final : public transport::SessionVisitor, public transport::StreamVisitor {
 public:
  void on_incoming_stream(transport::Stream& s) override { s.set_visitor(this); streams_.push_back(&s); }
  void on_streams_available() override {}
  void on_closed(uint64_t, std::string_view) override { closed = true; }
  void on_readable() override {
    for (size_t i = 0; i < streams_.size();) {
      transport::Stream* s = streams_[i];
      size_t n = s->peek().size();
      bytes += n;
      s->consume(n);
      if (s->is_fin_received()) {
        s->release();
        streams_[i] = streams_.back();
        streams_.pop_back();
        continue;
      }
      ++i;
    }
  }
  void on_writable() override {}
  void on_reset(uint64_t) override {}
  void on_stop_sending(uint64_t) override {}
  uint64_t bytes = 0;
  bool closed = false;

 private:
  std::vector<transport::Stream*> streams_;
};

struct Observer final : quic::ConnectionObserver {
  void on_handshake_completed(quic::Connection&) override { handshake = true; }
  void on_done(quic::Connection&) override {}
  bool handshake = false;
};

struct Options {
  size_t viewers = 100;
  size_t frame_size = 4166;  // 1 Mbit/s at 30 fps
  size_t group_frames = 60;
  size_t warmup_frames = 90;
  size_t frames = 300;
  // 1: header and payload in one write_pair, as Subscription writes a whole object; 0: two writes.
  size_t pair = 1;
};

class Rig {
 public:
  explicit Rig(Options o) : o_(o), relay_addr_(make_addr(4443)) {
    auto cert = quic::Certificate::generate_self_signed();
    if (!cert) {
      std::fprintf(stderr, "no certificate\n");
      std::exit(1);
    }
    cert_ = std::move(*cert);
    relay_config_.ack_thresh = 2;
    viewer_config_.ack_thresh = 10;  // as Chromium acknowledges
    viewer_config_.max_ack_delay = milliseconds(25);
    viewers_.resize(o_.viewers);
    for (size_t i = 0; i < o_.viewers; ++i) {
      connect(i);
    }
  }

  void run() {
    for (int step = 0; step < 10'000 && !all_ready(); ++step) {
      tick();
    }
    if (!all_ready()) {
      std::fprintf(stderr, "handshakes did not complete\n");
      std::exit(1);
    }
    for (auto& v : viewers_) {
      v.relay_conn->set_visitor(&relay_visitor_);
    }
    payload_ = Bytes::copy(std::vector<uint8_t>(o_.frame_size, 0x5a));
    header_ = Bytes::copy(std::vector<uint8_t>{0x50, 0x46});  // a 2-byte FRAME size varint
    publish(o_.warmup_frames);
    uint64_t bytes0 = delivered();
    uint64_t pkts0 = relay_sink_.packets, pbytes0 = relay_sink_.bytes;
    uint64_t passes0 = relay_passes();
    quic::Connection::WriteStats stats0 = relay_stats();
    g_relay_ns = 0;
    CALLGRIND_START_INSTRUMENTATION;
    publish(o_.frames);
    settle();
    CALLGRIND_STOP_INSTRUMENTATION;
    uint64_t bytes = delivered() - bytes0;
    uint64_t payload = o_.frames * o_.viewers * (o_.frame_size + header_.size());
    uint64_t pkts = relay_sink_.packets - pkts0;
    uint64_t passes1 = relay_passes();
    std::printf("viewers=%zu frames=%zu frame_size=%zu group_frames=%zu\n", o_.viewers, o_.frames,
                o_.frame_size, o_.group_frames);
    std::printf("delivered_bytes=%llu expected_bytes=%llu relay_packets=%llu\n",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(payload),
                static_cast<unsigned long long>(pkts));
    std::printf("relay_write_passes=%llu\n", static_cast<unsigned long long>(passes1 - passes0));
    quic::Connection::WriteStats ws = relay_stats();
    auto per_frame = [&](uint64_t a, uint64_t b) {
      return static_cast<double>(a - b) / static_cast<double>(o_.frames * o_.viewers);
    };
    std::printf("per_frame_per_viewer: write_calls=%.2f empty_calls=%.2f passes=%.2f "
                "expiry_wakeups=%.2f idle_passes=%.2f\n",
                per_frame(ws.write_calls, stats0.write_calls),
                per_frame(ws.empty_calls, stats0.empty_calls), per_frame(ws.passes, stats0.passes),
                per_frame(ws.expiry_wakeups, stats0.expiry_wakeups),
                per_frame(ws.idle_passes, stats0.idle_passes));
    std::printf("per_frame_per_viewer: empty_passes after_read=%.2f after_expiry=%.2f other=%.2f\n",
                per_frame(ws.empty_passes_after_read, stats0.empty_passes_after_read),
                per_frame(ws.empty_passes_after_expiry, stats0.empty_passes_after_expiry),
                per_frame(ws.empty_passes_other, stats0.empty_passes_other));
    std::printf("packets_per_frame=%.2f bytes_per_packet=%.1f relay_ns_per_byte=%.2f\n",
                static_cast<double>(pkts) / static_cast<double>(o_.frames * o_.viewers),
                static_cast<double>(relay_sink_.bytes - pbytes0) / static_cast<double>(pkts),
                g_relay_ns / static_cast<double>(bytes));
    if (std::getenv("QUIC_BENCH_SIZES") != nullptr) {
      for (auto [size, count] : relay_sink_.sizes) {
        std::printf("  relay %zu bytes: %llu packets\n", size, static_cast<unsigned long long>(count));
      }
      for (auto [size, count] : viewer_sink_.sizes) {
        std::printf("  viewer %zu bytes: %llu packets\n", size, static_cast<unsigned long long>(count));
      }
    }
    if (bytes != payload) {
      std::fprintf(stderr, "delivered %llu of %llu bytes\n", static_cast<unsigned long long>(bytes),
                   static_cast<unsigned long long>(payload));
      std::exit(1);
    }
  }

 private:
  struct Viewer {
    sockaddr_in addr{};
    std::unique_ptr<quic::Connection> conn;      // the viewer's
    std::unique_ptr<quic::Connection> relay_conn;  // the relay's, accepted from its Initial
    Observer observer, relay_observer;
    ViewerReader reader;
    transport::Stream* stream = nullptr;  // the relay's current group stream
  };
  struct NullVisitor final : transport::SessionVisitor {
    void on_incoming_stream(transport::Stream& s) override { s.release(); }
    void on_streams_available() override {}
    void on_closed(uint64_t, std::string_view) override {}
  };

  void new_cid(ngtcp2_cid* cid, uint8_t* token) {
    cid->datalen = 16;
    std::memset(cid->data, 0, cid->datalen);
    std::memcpy(cid->data, &next_cid_, sizeof next_cid_);
    ++next_cid_;
    std::memset(token, static_cast<int>(next_cid_), NGTCP2_STATELESS_RESET_TOKENLEN);
  }

  void connect(size_t i) {
    Viewer& v = viewers_[i];
    v.addr = make_addr(static_cast<uint16_t>(10000 + i));
    ngtcp2_path path{};
    path.local.addr = reinterpret_cast<ngtcp2_sockaddr*>(&v.addr);
    path.local.addrlen = sizeof v.addr;
    path.remote.addr = reinterpret_cast<ngtcp2_sockaddr*>(&relay_addr_);
    path.remote.addrlen = sizeof relay_addr_;
    quic::TlsFactory tls = [this](ngtcp2_crypto_conn_ref* ref) {
      return quic::make_client_session(
          "localhost", alpns_,
          quic::Verification{quic::VerifyMode::kFingerprint, {}, cert_->sha256()}, ref);
    };
    quic::ConnectionContext ctx{viewer_sink_, viewer_clock_, viewer_clock_,
                                [this](ngtcp2_cid* c, uint8_t* t) { new_cid(c, t); }, &v.observer};
    auto c = quic::Connection::connect(path, tls, std::move(ctx), viewer_config_);
    if (!c) {
      std::fprintf(stderr, "connect failed\n");
      std::exit(1);
    }
    v.conn = std::move(*c);
    v.conn->set_visitor(&v.reader);
  }

  void to_relay(uint16_t from_port, std::span<const uint8_t> pkt) {
    Viewer& v = viewers_[from_port - 10000];
    ngtcp2_path path{};
    path.local.addr = reinterpret_cast<ngtcp2_sockaddr*>(&relay_addr_);
    path.local.addrlen = sizeof relay_addr_;
    path.remote.addr = reinterpret_cast<ngtcp2_sockaddr*>(&v.addr);
    path.remote.addrlen = sizeof v.addr;
    relay_side([&] {
      if (!v.relay_conn) {
        quic::TlsFactory tls = [this](ngtcp2_crypto_conn_ref* ref) {
          return quic::make_server_session(*cert_, alpns_, ref);
        };
        quic::ConnectionContext ctx{relay_sink_, relay_clock_, relay_clock_,
                                    [this](ngtcp2_cid* c, uint8_t* t) { new_cid(c, t); },
                                    &v.relay_observer};
        auto c = quic::Connection::accept(path, pkt, tls, std::move(ctx), relay_config_);
        if (!c) {
          return;
        }
        v.relay_conn = std::move(*c);
        v.relay_conn->set_visitor(&relay_visitor_);
      }
      (void)v.relay_conn->on_packet(path, pkt);
    });
  }

  void to_viewer(uint16_t port, std::span<const uint8_t> pkt) {
    Viewer& v = viewers_[port - 10000];
    ngtcp2_path path{};
    path.local.addr = reinterpret_cast<ngtcp2_sockaddr*>(&v.addr);
    path.local.addrlen = sizeof v.addr;
    path.remote.addr = reinterpret_cast<ngtcp2_sockaddr*>(&relay_addr_);
    path.remote.addrlen = sizeof relay_addr_;
    (void)v.conn->on_packet(path, pkt);
  }

  // One millisecond: each side's timers and turn work, and every packet across, both ways.
  void tick() {
    relay_side([&] { relay_clock_.advance(milliseconds(1)); });
    relay_sink_.drain([&](uint16_t port, std::span<const uint8_t> pkt) { to_viewer(port, pkt); });
    viewer_clock_.advance(milliseconds(1));
    std::vector<Packet> out;
    out.swap(viewer_sink_.out);
    for (auto& p : out) {
      to_relay(p.to_port, p.data);
    }
    relay_side([&] { relay_clock_.run_turn(); });  // the relay answers what came in this step
  }

  bool all_ready() const {
    for (const auto& v : viewers_) {
      if (!v.observer.handshake || !v.relay_observer.handshake) {
        return false;
      }
    }
    return true;
  }

  // One frame every 33 ms to every viewer, a new stream every group_frames.
  void publish(size_t frames) {
    for (size_t f = 0; f < frames; ++f, ++frame_) {
      relay_side([&] {
        for (auto& v : viewers_) {
          if (frame_ % o_.group_frames == 0) {
            if (v.stream != nullptr) {
              v.stream->finish();
              v.stream->release();
            }
            v.stream = v.relay_conn->open_uni();
            if (v.stream == nullptr) {
              std::fprintf(stderr, "no stream\n");
              std::exit(1);
            }
          }
          if (o_.pair != 0) {
            v.stream->write_pair(header_, payload_);
          } else {
            v.stream->write(header_);
            v.stream->write(payload_);
          }
        }
      });
      for (int t = 0; t < 33; ++t) {
        tick();
      }
    }
  }

  // Lets everything in flight arrive.
  void settle() {
    for (int t = 0; t < 200; ++t) {
      tick();
    }
  }

  // The relay's write-path counts, summed over all its connections.
  quic::Connection::WriteStats relay_stats() const {
    quic::Connection::WriteStats sum;
    for (const auto& v : viewers_) {
      const quic::Connection::WriteStats& s = v.relay_conn->write_stats();
      sum.passes += s.passes;
      sum.write_calls += s.write_calls;
      sum.empty_calls += s.empty_calls;
      sum.empty_passes_after_read += s.empty_passes_after_read;
      sum.empty_passes_after_expiry += s.empty_passes_after_expiry;
      sum.empty_passes_other += s.empty_passes_other;
      sum.expiry_wakeups += s.expiry_wakeups;
      sum.idle_passes += s.idle_passes;
    }
    return sum;
  }

  // The relay's write passes, over all its connections.
  uint64_t relay_passes() const {
    uint64_t run = 0;
    for (const auto& v : viewers_) {
      run += v.relay_conn->write_passes();
    }
    return run;
  }

  uint64_t delivered() const {
    uint64_t n = 0;
    for (const auto& v : viewers_) {
      n += v.reader.bytes;
    }
    return n;
  }

  Options o_;
  sockaddr_in relay_addr_;
  std::unique_ptr<quic::Certificate> cert_;
  std::vector<std::string> alpns_{"moq-lite-04"};
  quic::ConnectionConfig relay_config_;
  quic::ConnectionConfig viewer_config_;
  SteppedLoop relay_clock_;
  SteppedLoop viewer_clock_;
  RelaySink relay_sink_{o_.viewers};
  ViewerSink viewer_sink_;
  NullVisitor relay_visitor_;
  std::vector<Viewer> viewers_;
  uint64_t next_cid_ = 1;
  uint64_t frame_ = 0;
  Bytes payload_;
  Bytes header_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    size_t value = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--viewers") {
      o.viewers = value;
    } else if (flag == "--frames") {
      o.frames = value;
    } else if (flag == "--frame-size") {
      o.frame_size = value;
    } else if (flag == "--group-frames") {
      o.group_frames = value;
    } else if (flag == "--pair") {
      o.pair = value;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--viewers N] [--frames N] [--frame-size BYTES] [--group-frames N] [--pair 0|1]\n",
                   argv[0]);
      return 2;
    }
  }
  Rig rig(o);
  rig.run();
  return 0;
}
