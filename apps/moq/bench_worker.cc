// The generator's processes. Protocol with the parent (bench_fanout.cc), a line each way:
//   child -> parent  "ready ..."            its sessions are up (viewers: attached to the track)
//                    "progress k=v ..."     every 500 ms while running (viewers)
//                    "done sent=N"          publisher: the run's frames are all published
//                    "result k=v ..."       after "stop": what it measured; then it exits
//   parent -> child  "go"                   publisher, bystander: start publishing
//                    "stop"                 report and exit
// Frames carry their send time (CLOCK_MONOTONIC, the same clock in every process) in their first
// 8 bytes and their index in the next 8, so viewers measure latency through the relay.
#include "bench_worker.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "bench_histogram.h"
#include "bench_proc.h"
#include "bench_relay.h"
#include "client/local_broadcast.h"
#include "client/quic_connection.h"
#include "client/shared_quic_socket.h"
#include "model/origin.h"
#include "model/path.h"
#include "runtime/event_loop.h"
#include "wire/version.h"

namespace moqd::bench {
namespace {

constexpr size_t kStampBytes = 16;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void report(const std::string& line) {
  fputs(line.c_str(), stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

double cpu_seconds_self() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

// The parent's commands on stdin, read without blocking the loop.
class Commands {
 public:
  Commands() { ::fcntl(0, F_SETFL, ::fcntl(0, F_GETFL) | O_NONBLOCK); }
  // The next whole line, if one has arrived; "stop" once stdin is closed.
  std::optional<std::string> next() {
    char chunk[256];
    ssize_t n;
    while ((n = ::read(0, chunk, sizeof chunk)) > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
    }
    if (n == 0) {
      closed_ = true;
    }
    auto nl = buf_.find('\n');
    if (nl == std::string::npos) {
      return closed_ ? std::optional<std::string>("stop") : std::nullopt;
    }
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    return line;
  }

 private:
  std::string buf_;
  bool closed_ = false;
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string s;
  while (std::getline(in, s, ',')) {
    out.push_back(s);
  }
  return out;
}

client::ConnectionOptions connection_options(const WorkerOptions& o,
                                             std::optional<std::string> discover) {
  client::ConnectionOptions c;
  if (auto url = client::parse_url(o.url)) {
    c.url = *url;
  }
  c.transport = o.transport == "ws"   ? client::TransportKind::kWebSocket
                : o.transport == "wt" ? client::TransportKind::kWebTransport
                                      : client::TransportKind::kQuic;
  c.tls.fingerprint = o.fingerprint;
  c.versions = version_set(o.versions);
  c.discover_prefix = std::move(discover);
  c.udp.buffer_bytes = o.socket_buffer;
  c.quic.ack_thresh = o.ack_thresh;
  c.quic.max_ack_delay = Duration(static_cast<int64_t>(o.max_ack_delay_ms * 1000));
  return c;
}

// A client session with its own origin (what it publishes or what it learns from the relay).
struct Peer {
  std::unique_ptr<model::Origin> origin;
  client::LinkPtr link;
};

Peer connect_peer(runtime::EventLoop& loop, const client::ConnectionOptions& options,
                  model::OriginConfig origin_config = {}) {
  Peer p;
  p.origin = std::make_unique<model::Origin>(origin_config, loop, loop);
  p.link = client::make_link(loop, *p.origin, options);
  if (auto st = p.link->connect(); !st) {
    fprintf(stderr, "moq bench worker: connect: %s\n", st.error().detail);
    p.link.reset();
  }
  return p;
}

void close_peers(runtime::EventLoop& loop, std::vector<Peer*> peers) {
  for (Peer* p : peers) {
    if (p->link) {
      p->link->close();
    }
  }
  loop.run_until(
      [&] {
        return std::all_of(peers.begin(), peers.end(), [](Peer* p) {
          return !p->link || p->link->is_closed() || p->link->is_transport_closed();
        });
      },
      std::chrono::seconds(2));
  // A QUIC link counts as closed once its CONNECTION_CLOSE is written into the socket's send
  // batch, which goes out at the end of a loop turn: one more turn sends it before we exit (else
  // the relay keeps the session until its idle timeout).
  loop.run_once(std::chrono::milliseconds(1));
}

// Publishes one track, a frame at a time, from this process.
class TrackPublisher {
 public:
  TrackPublisher(model::Origin& origin, std::string path, uint64_t group_frames)
      : origin_(origin), path_(std::move(path)), group_frames_(group_frames) {
    origin_.announce(path_, &broadcast_);
    track_ = origin_.track(path_, "data");
    track_->add_listener(&holder_);
  }
  ~TrackPublisher() {
    if (!holder_.ended) {
      track_->remove_listener(&holder_);
    }
    origin_.unannounce(path_, &broadcast_);
  }
  // Publishes one frame of `size` bytes stamped with the time now.
  void frame(std::vector<uint8_t>& payload) {
    if (holder_.ended) {
      return;
    }
    if (group_ == nullptr) {
      group_ = track_->begin_group(next_group_++);
    }
    int64_t t = now_ns();
    std::memcpy(payload.data(), &t, 8);
    std::memcpy(payload.data() + 8, &sent_, 8);
    track_->begin_object(*group_, payload.size());
    track_->append_chunk(*group_, Bytes::copy(std::span<const uint8_t>(payload)));
    ++sent_;
    if (sent_ % group_frames_ == 0) {
      end_group();
    }
  }
  void end_group() {
    if (group_ != nullptr && !holder_.ended) {
      track_->finish_group(*group_);
    }
    group_ = nullptr;
  }
  uint64_t sent() const { return sent_; }
  size_t listeners() const { return track_->listener_count(); }

 private:
  model::Origin& origin_;
  std::string path_;
  uint64_t group_frames_;
  client::LocalBroadcast broadcast_;
  client::TrackHolder holder_;
  model::Track* track_ = nullptr;
  model::Group* group_ = nullptr;
  uint64_t next_group_ = 0;
  uint64_t sent_ = 0;
};

std::vector<uint8_t> random_payload(size_t size) {
  std::vector<uint8_t> payload(std::max(size, kStampBytes));
  std::mt19937_64 rng(1);
  for (auto& b : payload) {
    b = static_cast<uint8_t>(rng());
  }
  return payload;
}

// Viewers: sessions that each watch the same broadcasts and measure what arrives.
class Viewers {
 public:
  Viewers(runtime::EventLoop& loop, const WorkerOptions& o)
      : loop_(loop), o_(o), paths_(split(o.path)) {}

  // Starts every connection, a few at a time so the relay's handshake limit is not what is
  // measured; runs the loop meanwhile.
  void connect_all() {
    auto options = connection_options(o_, prefix_of(paths_));
    viewers_.resize(o_.count);
    for (size_t i = 0; i < viewers_.size(); ++i) {
      options.shared_udp = shared_socket(i, options);
      viewers_[i].peer = connect_peer(loop_, options, viewer_origin_config());
      if ((i + 1) % o_.connects_per_tick == 0) {
        loop_.run_once(std::chrono::milliseconds(10));
        attach_ready();
      }
    }
  }
  // Attaches readers to the broadcasts the relay has announced; the number of viewers attached
  // to every path.
  size_t attach_ready() {
    size_t complete = 0;
    for (auto& v : viewers_) {
      if (!v.peer.link) {
        continue;
      }
      if (v.readers.size() < paths_.size()) {
        v.readers.resize(paths_.size());
      }
      size_t attached = 0;
      for (size_t i = 0; i < paths_.size(); ++i) {
        if (!v.readers[i] && v.peer.origin->is_active(paths_[i])) {
          model::Track* t = v.peer.origin->track(paths_[i], "data");
          Viewer* vp = &v;
          v.readers[i] = std::make_unique<client::FrameReader>(
              *t, loop_, loop_, Duration::zero(),
              [this, vp](uint64_t, uint64_t, std::span<const uint8_t> stamp, uint64_t size) {
                on_frame(*vp, stamp, size);
              },
              nullptr, kStampBytes);
        }
        attached += v.readers[i] ? 1 : 0;
      }
      complete += attached == paths_.size() ? 1 : 0;
    }
    return complete;
  }
  std::string progress() const {
    uint64_t frames = 0, bytes = 0;
    for (const auto& v : viewers_) {
      frames += v.frames;
      bytes += v.bytes;
    }
    return "attached=" + std::to_string(attached_) + " frames=" + std::to_string(frames) +
           " bytes=" + std::to_string(bytes) + " hist=" + hist_.serialize();
  }
  void note_attached(size_t n) { attached_ = n; }
  std::string result() const {
    uint64_t min_frames = UINT64_MAX;
    uint64_t send_drops = 0, clamped = 0, unknown = 0;
    runtime::UdpSocket::Stats io{};
    std::set<const runtime::UdpSocket*> counted;  // a shared socket once
    for (const auto& v : viewers_) {
      min_frames = std::min(min_frames, v.frames);
      if (v.peer.link) {
        if (const auto* udp = v.peer.link->udp_socket(); udp && counted.insert(udp).second) {
          send_drops += udp->datagrams_dropped();
          clamped += udp->buffers_clamped() ? 1 : 0;
          io += udp->stats();
        }
      }
    }
    for (const auto& s : shared_) {
      unknown += s->unknown_dropped();
    }
    std::string line = progress();
    line += " viewers=" + std::to_string(viewers_.size());
    line += " min_frames=" + std::to_string(viewers_.empty() ? 0 : min_frames);
    line += " drops=" + std::to_string(udp_socket_drops(getpid()));
    line += " send_drops=" + std::to_string(send_drops);
    line += " clamped=" + std::to_string(clamped);
    line += " sockets=" + std::to_string(counted.size());
    line += " datagrams_in=" + std::to_string(io.datagrams_in);
    line += " recv_calls=" + std::to_string(io.recv_calls);
    line += " gro_batches=" + std::to_string(io.gro_batches);
    line += " send_calls=" + std::to_string(io.sendmsg_calls);
    line += " datagrams_out=" + std::to_string(io.datagrams_out);
    line += " unknown_dcid=" + std::to_string(unknown);
    line += " cpu_s=" + std::to_string(cpu_seconds_self());
    return line;
  }
  const Histogram& histogram() const { return hist_; }
  uint64_t frames() const {
    uint64_t n = 0;
    for (const auto& v : viewers_) {
      n += v.frames;
    }
    return n;
  }
  void close() {
    std::vector<Peer*> peers;
    for (auto& v : viewers_) {
      v.readers.clear();
      peers.push_back(&v.peer);
    }
    close_peers(loop_, peers);
  }

 private:
  struct Viewer {
    Peer peer;
    std::vector<std::unique_ptr<client::FrameReader>> readers;
    uint64_t frames = 0;
    uint64_t bytes = 0;
  };
  // A viewer reads each group as it arrives and never looks back, so its track keeps only the
  // newest group (the FrameReader holds the groups it is still reading). The default cache (8
  // groups, 16 s of a 1 Mbit/s track: 2 MB a viewer, 2 GB for 1,000) made every received byte
  // land on a fresh page: a quarter of the generator's CPU was page faults (docs/BENCHMARKS.md).
  static model::OriginConfig viewer_origin_config() {
    model::OriginConfig c;
    c.cache.max_groups = 1;
    return c;
  }
  static std::string prefix_of(const std::vector<std::string>& paths) {
    // Discovery asks for one prefix: the common folder of every watched path.
    std::string p = paths.empty() ? "" : paths[0];
    for (const auto& q : paths) {
      size_t n = 0;
      while (n < p.size() && n < q.size() && p[n] == q[n]) {
        ++n;
      }
      p.resize(n);
    }
    if (paths.size() > 1) {
      p.resize(p.rfind('/') == std::string::npos ? 0 : p.rfind('/'));
    }
    return p;
  }
  // The shared socket for viewer i (a new one every viewers_per_socket viewers), or null.
  client::SharedQuicSocket* shared_socket(size_t i, const client::ConnectionOptions& options) {
    if (o_.viewers_per_socket == 0 || options.transport != client::TransportKind::kQuic) {
      return nullptr;
    }
    if (i % o_.viewers_per_socket == 0) {
      // A frame reaches every viewer of the socket at once, and a starved generator falls a few
      // frames behind: 128 KB per viewer (30 frames of 4.2 KB; 32 KB dropped datagrams on this
      // loaded 2-core machine at 300 viewers), and never more than the sockets it replaces would
      // have had (--socket-buffer each), so a small --socket-buffer still provokes drops.
      runtime::UdpSocket::Options u = options.udp;
      const size_t n = o_.viewers_per_socket;
      u.buffer_bytes = std::min({u.buffer_bytes * n, n << 17, size_t{256} << 20});
      auto s = client::SharedQuicSocket::open(loop_, options.url.host, u);
      if (!s) {
        fprintf(stderr, "moq bench worker: shared socket: %s\n", s.error().detail);
        return nullptr;
      }
      shared_.push_back(std::move(*s));
    }
    return shared_.empty() ? nullptr : shared_.back().get();
  }
  // `stamp`: the frame's first kStampBytes (the reader copies no more); `size`: all of it.
  void on_frame(Viewer& v, std::span<const uint8_t> stamp, uint64_t size) {
    ++v.frames;
    v.bytes += size;
    if (stamp.size() >= 8) {
      int64_t sent;
      std::memcpy(&sent, stamp.data(), 8);
      hist_.record_ns(now_ns() - sent);
    }
  }

  runtime::EventLoop& loop_;
  const WorkerOptions& o_;
  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<client::SharedQuicSocket>> shared_;  // outlives viewers_
  std::vector<Viewer> viewers_;
  size_t attached_ = 0;
  Histogram hist_;
};

int run_viewers(const WorkerOptions& o) {
  runtime::EventLoop loop;
  Commands commands;
  Viewers viewers(loop, o);
  viewers.connect_all();
  bool ready = false;
  Instant next_progress = loop.now();
  for (;;) {
    loop.run_once(std::chrono::milliseconds(5));
    // Once every viewer is attached the walk over all of them finds nothing to attach: it runs
    // only for the progress line then, not every loop turn (1,000 viewers: thousands a second).
    const bool progress_due = loop.now() >= next_progress;
    if (!ready || progress_due) {
      size_t attached = viewers.attach_ready();
      viewers.note_attached(attached);
      if (!ready && attached == o.count) {
        ready = true;
        report("ready attached=" + std::to_string(attached));
      }
    }
    if (progress_due) {
      next_progress = loop.now() + std::chrono::milliseconds(500);
      report("progress " + viewers.progress());
    }
    if (auto cmd = commands.next(); cmd && *cmd == "stop") {
      break;
    }
  }
  report("result " + viewers.result());
  viewers.close();
  return 0;
}

// Publishes at the requested rate after "go", for the run's duration.
int run_publisher(const WorkerOptions& o) {
  runtime::EventLoop loop;
  Commands commands;
  Peer pub = connect_peer(loop, connection_options(o, std::nullopt));
  if (!pub.link) {
    return 1;
  }
  std::string path = model::join_path(pub.link->path_prefix(), o.path);
  TrackPublisher track(*pub.origin, path, o.group_frames);
  if (!loop.run_until([&] { return pub.link->is_ready(); }, std::chrono::seconds(10))) {
    fprintf(stderr, "moq bench worker: the publisher's session did not come up\n");
    return 1;
  }
  report("ready");
  std::vector<uint8_t> payload = random_payload(o.frame_size);
  const Duration interval(static_cast<int64_t>(1e6 / o.fps));
  std::optional<Instant> end;
  Instant next_send{};
  bool done = false;
  for (;;) {
    if (auto cmd = commands.next()) {
      if (*cmd == "go" && !end) {
        next_send = loop.now();
        end = next_send + Duration(static_cast<int64_t>(o.duration_s * 1e6));
      } else if (*cmd == "stop") {
        break;
      }
    }
    if (end && !done) {
      while (loop.now() >= next_send && next_send < *end) {
        track.frame(payload);
        next_send += interval;
      }
      if (next_send >= *end) {
        track.end_group();
        done = true;
        report("done sent=" + std::to_string(track.sent()));
      }
    }
    Duration wait = end && !done ? std::max(Duration::zero(), next_send - loop.now())
                                 : std::chrono::milliseconds(5);
    loop.run_once(std::min<Duration>(wait, std::chrono::milliseconds(5)));
  }
  report("result sent=" + std::to_string(track.sent()) + " cpu_s=" + std::to_string(cpu_seconds_self()));
  close_peers(loop, {&pub});
  return 0;
}

// A publisher and a viewer of another broadcast, to show the fan-out leaves other tracks alone:
// 50 small frames a second from "go" to "stop".
int run_bystander(const WorkerOptions& o) {
  runtime::EventLoop loop;
  Commands commands;
  Peer pub = connect_peer(loop, connection_options(o, std::nullopt));
  if (!pub.link) {
    return 1;
  }
  std::string path = model::join_path(pub.link->path_prefix(), o.path);
  TrackPublisher track(*pub.origin, path, 50);
  WorkerOptions vo = o;
  vo.count = 1;
  Viewers viewer(loop, vo);
  viewer.connect_all();
  if (!loop.run_until([&] { return pub.link->is_ready() && viewer.attach_ready() == 1; },
                      std::chrono::seconds(10))) {
    fprintf(stderr, "moq bench worker: the bystander did not come up\n");
    return 1;
  }
  report("ready");
  std::vector<uint8_t> payload = random_payload(200);
  bool going = false;
  Instant next_send{};
  for (;;) {
    if (auto cmd = commands.next()) {
      if (*cmd == "go") {
        going = true;
        next_send = loop.now();
      } else if (*cmd == "stop") {
        break;
      }
    }
    if (going && loop.now() >= next_send) {
      track.frame(payload);
      next_send += std::chrono::milliseconds(20);
    }
    loop.run_once(std::chrono::milliseconds(2));
  }
  track.end_group();
  report("result sent=" + std::to_string(track.sent()) + " " + viewer.result());
  viewer.close();
  close_peers(loop, {&pub});
  return 0;
}

// Chat-shaped traffic: `count` publishers, each one long group of small messages, and
// `subscribers` sessions that each watch every publisher, all in this process so that "as fast
// as it goes" can be a closed loop: at most kWindow messages per publisher and subscriber are in
// flight (published, not yet received).
int run_msgs(const WorkerOptions& o) {
  constexpr uint64_t kWindow = 64;
  runtime::EventLoop loop;
  Commands commands;
  std::vector<Peer> pubs;
  std::vector<std::unique_ptr<TrackPublisher>> tracks;
  std::string paths;
  WorkerOptions po = o;
  po.ack_thresh = 2;
  for (size_t i = 0; i < o.count; ++i) {
    pubs.push_back(connect_peer(loop, connection_options(po, std::nullopt)));
    if (!pubs.back().link) {
      return 1;
    }
    std::string path = o.path + "/" + std::to_string(i);
    paths += (i ? "," : "") + path;
    tracks.push_back(std::make_unique<TrackPublisher>(
        *pubs.back().origin, model::join_path(pubs.back().link->path_prefix(), path), UINT64_MAX));
  }
  WorkerOptions so = o;
  so.count = o.subscribers;
  so.path = paths;
  Viewers subs(loop, so);
  subs.connect_all();
  if (!loop.run_until([&] { return subs.attach_ready() == o.subscribers; }, std::chrono::seconds(20))) {
    fprintf(stderr, "moq bench worker: msgs subscribers did not attach\n");
    return 1;
  }
  report("ready");
  std::vector<uint8_t> payload = random_payload(o.frame_size);
  std::optional<Instant> end;
  Instant next_send{};
  const Duration interval = o.rate > 0 ? Duration(static_cast<int64_t>(1e6 / o.rate)) : Duration::zero();
  bool done = false;
  uint64_t sent = 0;
  for (;;) {
    if (auto cmd = commands.next()) {
      if (*cmd == "go" && !end) {
        next_send = loop.now();
        end = next_send + Duration(static_cast<int64_t>(o.duration_s * 1e6));
      } else if (*cmd == "stop") {
        break;
      }
    }
    if (end && !done) {
      if (loop.now() >= *end) {
        // Drained: every message reached every subscriber (or 2 s passed).
        if (subs.frames() >= sent * o.subscribers || loop.now() >= *end + std::chrono::seconds(2)) {
          done = true;
          report("done sent=" + std::to_string(sent));
        }
      } else if (o.rate > 0) {
        while (loop.now() >= next_send) {
          for (auto& t : tracks) {
            t->frame(payload);
          }
          sent += tracks.size();
          next_send += interval;
        }
      } else {
        // Keep each (publisher, subscriber) pair's window full.
        uint64_t in_flight = sent * o.subscribers - subs.frames();
        uint64_t room = kWindow * o.count * o.subscribers;
        while (in_flight + o.count * o.subscribers <= room) {
          for (auto& t : tracks) {
            t->frame(payload);
          }
          sent += tracks.size();
          in_flight += o.count * o.subscribers;
        }
      }
    }
    loop.run_once(std::chrono::milliseconds(1));  // wakes as soon as anything arrives
  }
  report("result sent=" + std::to_string(sent) + " " + subs.result());
  subs.close();
  tracks.clear();
  std::vector<Peer*> peers;
  for (auto& p : pubs) {
    peers.push_back(&p);
  }
  close_peers(loop, peers);
  return 0;
}

}  // namespace

int run_worker(const WorkerOptions& o) {
  raise_fd_limit();
  if (o.role == "viewers") {
    return run_viewers(o);
  }
  if (o.role == "publisher") {
    return run_publisher(o);
  }
  if (o.role == "bystander") {
    return run_bystander(o);
  }
  if (o.role == "msgs") {
    return run_msgs(o);
  }
  fprintf(stderr, "moq bench worker: unknown role %s\n", o.role.c_str());
  return 2;
}

}  // namespace moqd::bench
