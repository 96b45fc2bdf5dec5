#include "fanout_rig.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "memory_transport.h"
#include "model/cache_budget.h"
#include "model/origin.h"
#include "relay/bridge.h"
#include "runtime/workers.h"
#include "session/session.h"
#include "wire/lite.h"

namespace moqd::bench {
namespace {

constexpr wire::Version kVersion = wire::Version::kLite04;
constexpr const char* kProtocol = "moq-lite-04";
constexpr const char* kBroadcast = "bench";
constexpr const char* kTrack = "video";
// The relay's default --cache-budget, split over the workers as RelayWorker does.
constexpr uint64_t kCacheBudget = 1ull << 30;
// Longest the rig waits for the workers before it gives up (a bug, not a slow machine).
constexpr auto kTimeout = std::chrono::seconds(60);

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "fanout rig: %s\n", what.c_str());
  fflush(stderr);
  std::abort();
}

// The relay's session configuration (what RelaySession::start builds from the defaults).
session::SessionConfig relay_session_config() {
  session::SessionConfig c;
  c.role = session::Role::kServer;
  c.discover_prefix = std::string();
  return c;
}

void write_message(transport::Stream& s, std::vector<uint8_t> bytes) {
  s.write(Bytes::from(bytes));
}

struct Worker;

// The relay's SessionHandler, as RelaySession and RelayWorker answer it: everything is allowed,
// and a peer's announcement goes into this worker's origin and, through the bridge, to the others.
class Handler final : public session::SessionHandler {
 public:
  explicit Handler(Worker& w) : w_(w) {}
  bool authorize(session::Action, std::string_view, std::string_view) override { return true; }
  void on_session_ready(wire::Version) override {}
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                        model::BroadcastSource& source) override;
  void on_session_closed(Error) override {}

 private:
  Worker& w_;
};

// A stream of a raw peer: calls `on_data` whenever bytes (or the FIN) arrive.
class RawStream final : public transport::StreamVisitor {
 public:
  RawStream(transport::Stream& s, std::function<void(RawStream&)> on_data)
      : stream_(&s), on_data_(std::move(on_data)) {
    s.set_visitor(this);
  }
  void on_readable() override { on_data_(*this); }
  void on_writable() override {}
  void on_reset(uint64_t) override { reset_ = true; }
  void on_stop_sending(uint64_t) override {}
  transport::Stream& stream() { return *stream_; }
  bool is_reset() const { return reset_; }

 private:
  transport::Stream* stream_;
  std::function<void(RawStream&)> on_data_;
  bool reset_ = false;
};

// The publisher's end of its connection, played by hand as a moq-lite-04 client: it answers the
// relay's ANNOUNCE_PLEASE with one broadcast, accepts its SUBSCRIBE, and sends groups a frame at
// a time (each frame a separate deferred task, as frames arriving from the network would be; the
// loop runs them all in one turn, since each frame queues turn work and the turn's loop also runs
// deferred tasks: fanout_bench's polls_per_frame shows it).
class PublisherPeer final : public transport::SessionVisitor {
 public:
  PublisherPeer(MemorySession& end, runtime::EventLoop& loop, const FanoutOptions& o)
      : end_(end), loop_(loop), frames_per_group_(o.frames_per_group),
        next_sequence_(o.first_sequence) {
    end.set_visitor(this);
    std::vector<uint8_t> frame;
    wire::encode_frame_header(o.frame_size, frame);
    for (size_t i = 0; i < o.frame_size; ++i) {
      frame.push_back(static_cast<uint8_t>(i * 7 + 1));
    }
    frame_ = Bytes::from(frame);  // written as is for every frame: the publisher allocates nothing
  }

  void on_incoming_stream(transport::Stream& s) override {
    streams_.push_back(std::make_unique<RawStream>(s, [this](RawStream& r) { on_control(r); }));
  }
  void on_streams_available() override {}
  void on_closed(uint64_t, std::string_view) override { streams_.clear(); }

  bool is_subscribed() const { return subscribe_id_.has_value(); }
  // Sends `groups` more groups, one frame per loop turn. `overlapping`: each group but the last
  // ends (FIN) only after the next group's first frame was sent (FanoutRig::publish_groups).
  void publish(size_t groups, bool overlapping) {
    groups_left_ += groups;
    overlapping_ = overlapping;
    if (!publishing_) {
      publishing_ = true;
      step();
    }
  }

 private:
  // A bidi stream the relay opened: ANNOUNCE_PLEASE or SUBSCRIBE, answered once.
  void on_control(RawStream& r) {
    transport::Stream& s = r.stream();
    auto data = s.peek();
    auto type = wire::decode_stream_type(data);
    if (!type || !type->has_value()) {
      return;
    }
    auto body = data.subspan((*type)->consumed);
    wire::DecodeLimits limits;
    std::vector<uint8_t> out;
    if ((*type)->value == static_cast<uint64_t>(wire::BidiType::kAnnounce)) {
      auto m = wire::decode_announce_please(kVersion, body, limits);
      if (!m || !m->has_value()) {
        return;
      }
      s.consume((*type)->consumed + (*m)->consumed);
      wire::Announce a;
      a.active = true;
      a.suffix = kBroadcast;
      wire::encode(kVersion, a, out);
    } else if ((*type)->value == static_cast<uint64_t>(wire::BidiType::kSubscribe)) {
      auto m = wire::decode_subscribe(kVersion, body, limits);
      if (!m || !m->has_value()) {
        return;
      }
      s.consume((*type)->consumed + (*m)->consumed);
      subscribe_id_ = (*m)->value.id;
      wire::SubscribeOk ok;
      ok.priority = (*m)->value.priority;
      wire::encode(kVersion, ok, out);
    } else {
      s.consume(data.size());
      return;
    }
    write_message(s, std::move(out));
  }

  void step() {
    if (stream_ == nullptr) {
      if (groups_left_ == 0) {
        publishing_ = false;
        return;
      }
      --groups_left_;
      stream_ = end_.open_uni();
      if (stream_ == nullptr) {
        die("publisher: no uni stream");
      }
      std::vector<uint8_t> header;
      header.push_back(static_cast<uint8_t>(wire::UniType::kGroup));
      wire::encode(kVersion, wire::GroupHeader{subscribe_id_.value_or(0), next_sequence_++}, header);
      write_message(*stream_, std::move(header));
      frames_left_ = frames_per_group_;
    }
    stream_->write(frame_);
    if (held_ != nullptr) {  // the previous group, left open until this group's first frame
      held_->finish();
      held_->release();
      held_ = nullptr;
    }
    if (--frames_left_ == 0) {
      if (overlapping_ && groups_left_ > 0) {
        held_ = stream_;
      } else {
        stream_->finish();
        stream_->release();
      }
      stream_ = nullptr;
    }
    loop_.defer([this] { step(); });
  }

  MemorySession& end_;
  runtime::EventLoop& loop_;
  size_t frames_per_group_;
  Bytes frame_;  // FRAME header + payload
  std::vector<std::unique_ptr<RawStream>> streams_;
  std::optional<uint64_t> subscribe_id_;
  transport::Stream* stream_ = nullptr;
  transport::Stream* held_ = nullptr;  // a finished group's stream, FIN not sent yet (overlapping)
  bool overlapping_ = false;
  uint64_t next_sequence_;
  size_t groups_left_ = 0;
  size_t frames_left_ = 0;
  bool publishing_ = false;
};

// The publisher's connection: the relay's Session on one end, the PublisherPeer on the other.
struct PublisherConn {
  PublisherConn(Worker& w, const FanoutOptions& o);
  ~PublisherConn() { session.reset(); }

  MemorySession relay_end;
  MemorySession peer_end;
  PublisherPeer peer;
  std::unique_ptr<session::Session> session;
};

// One subscriber's connection: the relay's Session on one end; on the other a raw subscriber that
// sends one SUBSCRIBE, holds the relay's ANNOUNCE_PLEASE stream open unanswered, and takes the
// group streams as a GroupStreamSink.
class SubscriberConn final : public transport::SessionVisitor, public GroupStreamSink {
 public:
  SubscriberConn(Worker& w, uint64_t id);
  ~SubscriberConn() override {
    session_.reset();
    streams_.clear();
  }

  void on_incoming_stream(transport::Stream& s) override {
    streams_.push_back(std::make_unique<RawStream>(s, [](RawStream& r) {
      r.stream().consume(r.stream().peek().size());
    }));
  }
  void on_streams_available() override {}
  void on_closed(uint64_t, std::string_view) override { streams_.clear(); }
  void on_group_end() override;

  bool has_ok() const { return ok_; }

 private:
  Worker& w_;
  MemorySession relay_end_;
  MemorySession peer_end_;
  std::unique_ptr<session::Session> session_;
  std::vector<std::unique_ptr<RawStream>> streams_;
  bool ok_ = false;
};

model::OriginConfig origin_config(const FanoutOptions& o, model::CacheBudget* budget) {
  model::OriginConfig c;
  c.cache.max_groups = o.cache_groups;
  c.budget = budget;
  return c;
}

// One relay worker's share: what a RelayWorker owns for this path, plus the rig's bookkeeping.
// Built and used on the worker's thread; torn down by the rig after the threads are joined.
struct Worker {
  Worker(size_t i, runtime::Workers& pool, const std::vector<relay::Bridge*>& bridges,
         const FanoutOptions& o)
      : index(i),
        loop(pool.loop(i)),
        budget(kCacheBudget / o.workers),
        origin(origin_config(o, &budget), loop, loop),
        bridge(i, pool, origin, bridges),
        net(loop),
        handler(*this) {}

  // A subscriber finished one more group: once the count reaches the target the benchmark thread
  // is waiting for, wake it.
  void on_group_end() {
    if (++groups_done == target.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(mu);
      reached = groups_done;
      cv.notify_all();
    }
  }

  size_t index;
  runtime::EventLoop& loop;
  model::CacheBudget budget;  // outlives origin
  model::Origin origin;
  relay::Bridge bridge;
  MemoryNet net;
  Handler handler;
  std::unique_ptr<PublisherConn> publisher;
  std::vector<std::unique_ptr<SubscriberConn>> subscribers;
  size_t subscriber_count = 0;  // set by the rig before any subscriber exists

  uint64_t groups_done = 0;  // worker thread only
  std::atomic<uint64_t> target{UINT64_MAX};
  std::mutex mu;
  std::condition_variable cv;
  uint64_t reached = 0;  // guarded by mu
};

void Handler::on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                               model::BroadcastSource& source) {
  if (active) {
    w_.origin.announce(path, &source, hops);
  } else {
    w_.origin.unannounce(path, &source);
  }
  w_.bridge.publish_local(path, active, hops, 0);
}

PublisherConn::PublisherConn(Worker& w, const FanoutOptions& o)
    : relay_end(w.net, true, kProtocol), peer_end(w.net, false, kProtocol), peer(peer_end, w.loop, o) {
  MemorySession::connect(relay_end, peer_end);
  session = std::make_unique<session::Session>(relay_end, relay_session_config(), w.origin,
                                               w.handler, w.loop, w.loop);
  session->start();
}

SubscriberConn::SubscriberConn(Worker& w, uint64_t id)
    : w_(w), relay_end_(w.net, true, kProtocol), peer_end_(w.net, false, kProtocol) {
  MemorySession::connect(relay_end_, peer_end_);
  peer_end_.set_visitor(this);
  peer_end_.set_uni_sink(this);
  session_ = std::make_unique<session::Session>(relay_end_, relay_session_config(), w.origin,
                                                w.handler, w.loop, w.loop);
  session_->start();

  transport::Stream* s = peer_end_.open_bidi();
  if (s == nullptr) {
    die("subscriber: no bidi stream");
  }
  streams_.push_back(std::make_unique<RawStream>(*s, [this](RawStream& r) {
    auto data = r.stream().peek();
    auto resp = wire::decode_subscribe_response(kVersion, data, wire::DecodeLimits{});
    if (resp && resp->has_value()) {
      ok_ = std::holds_alternative<wire::SubscribeOk>((*resp)->value);
      r.stream().consume((*resp)->consumed);
    }
  }));
  wire::Subscribe req;
  req.id = id;
  req.broadcast = kBroadcast;
  req.track = kTrack;
  req.priority = 128;
  std::vector<uint8_t> out;
  out.push_back(static_cast<uint8_t>(wire::BidiType::kSubscribe));
  wire::encode(kVersion, req, out);
  write_message(*s, std::move(out));
}

void SubscriberConn::on_group_end() { w_.on_group_end(); }

}  // namespace

struct FanoutRig::Impl {
  explicit Impl(size_t n) : pool(n), bridges(n, nullptr), workers(n) {}

  // Runs `fn` on worker `i` and waits for it.
  void run_on(size_t i, const std::function<void()>& fn) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    pool.post(i, [&] {
      fn();
      std::lock_guard<std::mutex> lock(m);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, kTimeout, [&] { return done; })) {
      die("a worker did not answer");
    }
  }
  // Asks worker `i` whether `pred` holds until it does; setup only.
  void wait_for(size_t i, const std::function<bool()>& pred, const char* what) {
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (;;) {
      bool ok = false;
      run_on(i, [&] { ok = pred(); });
      if (ok) {
        return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        die(std::string("timed out waiting for ") + what);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  runtime::Workers pool;
  std::vector<relay::Bridge*> bridges;
  std::vector<std::unique_ptr<Worker>> workers;
};

FanoutRig::FanoutRig(FanoutOptions options) : options_(options) {
  if (options_.workers == 0 || options_.subscribers == 0 || options_.frames_per_group == 0) {
    die("workers, subscribers and frames_per_group must be positive");
  }
  log::set_level(log::Level::kWarn);  // 10,000 sessions would log their start and end
  const size_t n = options_.workers;
  impl_ = std::make_unique<Impl>(n);
  Impl& im = *impl_;
  im.pool.start([this, &im](size_t i) {
    im.workers[i] = std::make_unique<Worker>(i, im.pool, im.bridges, options_);
    im.bridges[i] = &im.workers[i]->bridge;
  });
  for (size_t i = 0; i < n; ++i) {
    im.run_on(i, [] {});  // each worker has run its init
  }
  for (size_t i = 0; i < n; ++i) {
    im.workers[i]->subscriber_count = options_.subscribers / n + (i == 0 ? options_.subscribers % n : 0);
  }

  im.run_on(0, [&] {
    Worker& w = *im.workers[0];
    w.publisher = std::make_unique<PublisherConn>(w, options_);
  });
  for (size_t i = 0; i < n; ++i) {
    im.wait_for(i, [&im, i] { return im.workers[i]->origin.is_active(kBroadcast); },
                "the broadcast to be announced");
  }
  uint64_t next_id = 0;
  for (size_t i = 0; i < n; ++i) {
    im.run_on(i, [&im, i, &next_id] {
      Worker& w = *im.workers[i];
      for (size_t k = 0; k < w.subscriber_count; ++k) {
        w.subscribers.push_back(std::make_unique<SubscriberConn>(w, next_id++));
      }
    });
  }
  for (size_t i = 0; i < n; ++i) {
    im.wait_for(i, [&im, i] {
      for (const auto& s : im.workers[i]->subscribers) {
        if (!s->has_ok()) {
          return false;
        }
      }
      return true;
    }, "every SUBSCRIBE_OK");
  }
  im.wait_for(0, [&im] { return im.workers[0]->publisher->peer.is_subscribed(); },
              "the upstream SUBSCRIBE");
}

FanoutRig::~FanoutRig() {
  Impl& im = *impl_;
  im.pool.stop_and_join();
  // The threads are gone: tear down from here, subscribers before the publisher before the
  // workers' origins and bridges. Tasks still queued between workers are destroyed unrun.
  for (auto& w : im.workers) {
    w->subscribers.clear();
  }
  for (auto& w : im.workers) {
    w->publisher.reset();
  }
  for (auto& w : im.workers) {
    w.reset();
  }
}

uint64_t FanoutRig::expected_deliveries() const {
  return groups_published_ * options_.frames_per_group * options_.subscribers;
}

void FanoutRig::publish_groups(size_t groups, bool overlapping) {
  Impl& im = *impl_;
  groups_published_ += groups;
  for (auto& w : im.workers) {
    w->target.store(groups_published_ * w->subscriber_count, std::memory_order_relaxed);
  }
  // overlapping: the other workers wait in a task until worker 0's subscribers have every group,
  // then take the Bridge's queued batches in one turn (fanout_rig.h). Publishing starts once every
  // hold has begun, and this returns once every hold has returned (they use this frame).
  const size_t holds = overlapping ? im.workers.size() - 1 : 0;
  std::mutex hold_mu;
  std::condition_variable hold_cv;
  size_t held = 0;
  size_t left = 0;
  bool released = false;
  auto wait_holds = [&](const size_t& count, const char* what) {
    std::unique_lock<std::mutex> lock(hold_mu);
    if (!hold_cv.wait_for(lock, kTimeout, [&] { return count == holds; })) {
      die(what);
    }
  };
  for (size_t i = 1; i <= holds; ++i) {
    im.pool.post(i, [&] {
      std::unique_lock<std::mutex> lock(hold_mu);
      ++held;
      hold_cv.notify_all();
      hold_cv.wait_for(lock, kTimeout, [&] { return released; });
      ++left;
      hold_cv.notify_all();
    });
  }
  wait_holds(held, "a worker did not start its hold");
  im.pool.post(0, [&im, groups, overlapping] {
    im.workers[0]->publisher->peer.publish(groups, overlapping);
  });
  for (size_t i = 0; i < im.workers.size(); ++i) {
    if (i == 1) {  // worker 0 is done: let the others go
      std::lock_guard<std::mutex> lock(hold_mu);
      released = true;
      hold_cv.notify_all();
    }
    Worker& w = *im.workers[i];
    uint64_t target = groups_published_ * w.subscriber_count;
    if (target == 0) {
      continue;
    }
    std::unique_lock<std::mutex> lock(w.mu);
    if (!w.cv.wait_for(lock, kTimeout, [&] { return w.reached >= target; })) {
      die("subscribers did not receive every group (see check())");
    }
  }
  wait_holds(left, "a worker did not end its hold");
}

FanoutTotals FanoutRig::totals() {
  FanoutTotals t;
  for (size_t i = 0; i < impl_->workers.size(); ++i) {
    impl_->run_on(i, [&] {
      for (const auto& s : impl_->workers[i]->subscribers) {
        t.frames += s->frames();
        t.payload_bytes += s->payload_bytes();
        t.stream_bytes += s->bytes();
        t.groups += s->groups();
        t.resets += s->resets();
      }
    });
  }
  return t;
}

LoopTotals FanoutRig::loop_totals() {
  LoopTotals t;
  Impl& im = *impl_;
  for (size_t i = 0; i < im.workers.size(); ++i) {
    t.polls += im.pool.loop(i).polls();
    t.turn_items += im.pool.loop(i).turn_items();
    t.turn_slices_cut += im.pool.loop(i).turn_slices_cut();
    t.turn_clock_reads += im.pool.loop(i).turn_clock_reads();
    im.run_on(i, [&] {
      for (size_t j = 0; j < im.workers.size(); ++j) {
        t.wakes += im.pool.wakes(j);
      }
    });
  }
  return t;
}

std::string FanoutRig::check() {
  FanoutTotals t = totals();
  char buf[256];
  uint64_t want = expected_deliveries();
  if (t.frames != want || t.payload_bytes != want * options_.frame_size ||
      t.groups != groups_published_ * options_.subscribers || t.resets != 0) {
    snprintf(buf, sizeof buf,
             "received %llu frames (%llu payload bytes), %llu groups, %llu resets; expected %llu "
             "frames, %llu groups",
             static_cast<unsigned long long>(t.frames),
             static_cast<unsigned long long>(t.payload_bytes),
             static_cast<unsigned long long>(t.groups), static_cast<unsigned long long>(t.resets),
             static_cast<unsigned long long>(want),
             static_cast<unsigned long long>(groups_published_ * options_.subscribers));
    return buf;
  }
  return std::string();
}

}  // namespace moqd::bench
