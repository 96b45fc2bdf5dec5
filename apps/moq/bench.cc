// moq bench: a load generator. One publisher and N subscribers, each its own WebSocket, QUIC or
// WebTransport connection to the relay, all on this process's one event loop. Every frame carries
// its send time, so the subscribers measure end-to-end latency through the relay.
#include "bench.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/log.h"
#include "client/connection.h"
#include "client/local_broadcast.h"
#include "client/quic_connection.h"
#include "model/origin.h"
#include "model/path.h"
#include "runtime/event_loop.h"

namespace moqd::bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// One subscriber connection and what it measured.
struct Subscriber {
  std::unique_ptr<model::Origin> origin;
  client::LinkPtr conn;
  std::unique_ptr<client::FrameReader> reader;
  uint64_t frames = 0;
  uint64_t bytes = 0;
  std::vector<int64_t> latencies_ns;
};

double percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) {
    return 0;
  }
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return static_cast<double>(v[i]) / 1e6;
}

}  // namespace

int run(const Options& o) {
  runtime::EventLoop loop;
  auto url = client::parse_url(o.url);
  if (!url) {
    fprintf(stderr, "moq bench: %s\n", url.error().detail);
    return 2;
  }
  client::ConnectionOptions base;
  base.url = *url;
  base.transport = o.transport;
  base.tls = o.tls;

  // Publisher.
  model::Origin pub_origin(model::OriginConfig{}, loop, loop);
  client::LinkPtr pub_link = client::make_link(loop, pub_origin, base);
  client::Link& pub = *pub_link;
  std::string path = model::join_path(pub.path_prefix(), "bench/" + std::to_string(getpid()));
  if (auto st = pub.connect(); !st) {
    fprintf(stderr, "moq bench: connect: %s\n", st.error().detail);
    return 1;
  }
  client::LocalBroadcast broadcast;
  pub_origin.announce(path, &broadcast);
  model::Track* track = pub_origin.track(path, "data");
  client::TrackHolder holder;
  track->add_listener(&holder);

  // Subscribers.
  std::vector<Subscriber> subs(o.subscribers);
  for (auto& s : subs) {
    s.origin = std::make_unique<model::Origin>(model::OriginConfig{}, loop, loop);
    client::ConnectionOptions so = base;
    so.discover_prefix = path;
    s.conn = client::make_link(loop, *s.origin, so);
    if (auto st = s.conn->connect(); !st) {
      fprintf(stderr, "moq bench: connect: %s\n", st.error().detail);
      return 1;
    }
    s.latencies_ns.reserve(static_cast<size_t>(o.rate * o.seconds) + 16);
  }
  // Attach each subscriber once the relay announced the broadcast to it.
  auto attach_ready = [&] {
    size_t attached = 0;
    for (auto& s : subs) {
      if (!s.reader && s.origin->is_active(path)) {
        model::Track* t = s.origin->track(path, "data");
        Subscriber* sp = &s;
        s.reader = std::make_unique<client::FrameReader>(
            *t, loop, loop, Duration::zero(),
            [sp](uint64_t, uint64_t, std::span<const uint8_t> f) {
              ++sp->frames;
              sp->bytes += f.size();
              if (f.size() >= 8) {
                int64_t sent;
                std::memcpy(&sent, f.data(), 8);
                sp->latencies_ns.push_back(now_ns() - sent);
              }
            },
            nullptr);
      }
      attached += s.reader ? 1 : 0;
    }
    return attached;
  };
  Instant setup_deadline = loop.now() + std::chrono::seconds(10);
  while (attach_ready() < subs.size() && loop.now() < setup_deadline) {
    loop.run_once(std::chrono::milliseconds(5));
  }
  if (attach_ready() < subs.size()) {
    fprintf(stderr, "moq bench: only %zu of %zu subscribers saw the broadcast\n", attach_ready(),
            subs.size());
    return 1;
  }
  // Let the subscriptions reach the publisher before the first frame.
  loop.run_until([&] { return pub.session() && pub.session()->subscription_count() > 0; },
                 std::chrono::seconds(5));

  // Publish at the requested rate for the requested time.
  std::vector<uint8_t> payload(std::max<size_t>(o.frame_size, 8));
  std::mt19937_64 rng(1);
  for (auto& b : payload) {
    b = static_cast<uint8_t>(rng());
  }
  const Duration interval(static_cast<int64_t>(1e6 / o.rate));
  const Instant start = loop.now();
  const Instant end = start + Duration(static_cast<int64_t>(o.seconds * 1e6));
  uint64_t sent = 0;
  model::Group* group = nullptr;
  uint64_t next_group = 0;
  Instant next_send = start;
  while (loop.now() < end) {
    while (loop.now() >= next_send && loop.now() < end) {
      if (group == nullptr) {
        group = track->begin_group(next_group++);
      }
      int64_t t = now_ns();
      std::memcpy(payload.data(), &t, 8);
      track->begin_object(*group, payload.size());
      track->append_chunk(*group, Bytes::copy(std::span<const uint8_t>(payload)));
      ++sent;
      if (sent % o.group_every == 0) {
        track->finish_group(*group);
        group = nullptr;
      }
      next_send += interval;
    }
    loop.run_once(std::chrono::microseconds(200));
  }
  if (group != nullptr) {
    track->finish_group(*group);
  }
  // Drain: wait until every subscriber has everything, or a second passes.
  loop.run_until(
      [&] {
        return std::all_of(subs.begin(), subs.end(), [&](const Subscriber& s) { return s.frames >= sent; });
      },
      std::chrono::seconds(1));
  double elapsed = std::chrono::duration<double>(loop.now() - start).count();

  uint64_t received = 0;
  uint64_t min_frames = UINT64_MAX;
  uint64_t bytes = 0;
  std::vector<int64_t> all;
  for (auto& s : subs) {
    received += s.frames;
    min_frames = std::min(min_frames, s.frames);
    bytes += s.bytes;
    all.insert(all.end(), s.latencies_ns.begin(), s.latencies_ns.end());
  }
  printf("subscribers=%zu frame_size=%zu rate=%.0f/s seconds=%.1f sent=%" PRIu64
         " received=%" PRIu64 " (min per subscriber %" PRIu64 ") delivered=%.1f Mbit/s"
         " latency_ms p50=%.2f p99=%.2f max=%.2f\n",
         subs.size(), payload.size(), o.rate, o.seconds, sent, received, min_frames,
         static_cast<double>(bytes) * 8 / elapsed / 1e6, percentile(all, 0.5), percentile(all, 0.99),
         percentile(all, 1.0));
  fflush(stdout);
  for (auto& s : subs) {
    s.reader.reset();
    s.conn->close();
  }
  pub.close();
  loop.run_until([&] { return pub.is_closed(); }, std::chrono::seconds(2));
  track->remove_listener(&holder);
  pub_origin.unannounce(path, &broadcast);
  return min_frames == sent ? 0 : 3;
}

}  // namespace moqd::bench
