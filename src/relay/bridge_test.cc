// The Bridge between two real workers (runtime::Workers threads and their SPSC mailboxes): a
// publisher's track on worker 0, a viewer on each worker, the replica on worker 1 fed through a
// Feed. Covers the end of a track after a burst larger than the credit window, and a receiving
// worker that stops running (its mailbox fills): the feed skips it ahead like a slow viewer,
// without stalling the publisher or worker 0's viewer and without growing memory.
#include "relay/bridge.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/origin.h"
#include "runtime/workers.h"
#include "testing/session_fixture.h"

namespace moqd::relay {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::TestBroadcast;
using moqd::testing::pattern_bytes;
using namespace std::chrono_literals;

constexpr auto kTimeout = 30s;
const std::string kPath = "room/alice";
const std::string kTrack = "video";

// What one worker owns for the test: built, used and (before the threads stop) emptied on its
// thread; destroyed after the threads are joined.
struct Side {
  Side(size_t i, runtime::Workers& pool, const std::vector<Bridge*>& bridges, BridgeLimits limits,
       model::OriginConfig oc)
      : origin(oc, pool.loop(i), pool.loop(i)),
        bridge(i, pool, origin, bridges, limits) {}
  model::Origin origin;
  Bridge bridge;
  std::unique_ptr<TestBroadcast> publisher;  // worker 0 only
  FrameCollector viewer;
  std::vector<std::unique_ptr<FrameCollector>> more_viewers;  // tests with several per worker
};

bool same_groups(const FrameCollector& a, const FrameCollector& b) {
  if (a.groups.size() != b.groups.size()) {
    return false;
  }
  for (size_t i = 0; i < a.groups.size(); ++i) {
    const auto& x = a.groups[i];
    const auto& y = b.groups[i];
    if (x.sequence != y.sequence || x.frames != y.frames || x.finished != y.finished ||
        x.aborted != y.aborted) {
      return false;
    }
  }
  return true;
}

class TwoWorkers {
 public:
  explicit TwoWorkers(BridgeLimits limits, size_t ring_capacity = runtime::Workers::kDefaultRingCapacity,
                      model::OriginConfig oc = {})
      : pool_(2, ring_capacity), bridges_(2, nullptr) {
    pool_.start();
    for (size_t i = 0; i < 2; ++i) {
      run_on(i, [this, i, limits, oc] {
        sides_.at(i) = std::make_unique<Side>(i, pool_, bridges_, limits, oc);
        bridges_[i] = &sides_[i]->bridge;
      });
    }
  }
  ~TwoWorkers() {
    release();
    pool_.stop_and_join();
    // The threads are gone: viewers, then the publisher, then origins and bridges. Tasks still
    // queued between the workers are destroyed unrun.
    for (auto& s : sides_) {
      s->viewer.unsubscribe();
      for (auto& v : s->more_viewers) {
        v->unsubscribe();
      }
    }
    sides_[0]->publisher.reset();
    for (auto& s : sides_) {
      s.reset();
    }
  }

  Side& side(size_t i) { return *sides_[i]; }
  runtime::Workers& pool() { return pool_; }

  // Runs `fn` on worker `i` and waits for it.
  void run_on(size_t i, const std::function<void()>& fn) {
    struct Done {
      std::mutex m;
      std::condition_variable cv;
      bool done = false;
    };
    auto d = std::make_shared<Done>();  // test scaffolding, not the data path
    pool_.post(i, [d, &fn] {
      fn();
      std::lock_guard<std::mutex> lock(d->m);
      d->done = true;
      d->cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(d->m);
    ASSERT_TRUE(d->cv.wait_for(lock, kTimeout, [&] { return d->done; })) << "worker " << i << " hung";
  }
  // Polls `pred` on worker `i` until it holds; false after kTimeout.
  bool wait_for(size_t i, const std::function<bool()>& pred) {
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (;;) {
      bool ok = false;
      run_on(i, [&] { ok = pred(); });
      if (ok) {
        return true;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      std::this_thread::sleep_for(1ms);  // polling interval, not synchronisation
    }
  }

  // Worker 0 publishes kPath (kTrack's properties set to `props` first, when given); worker 1's
  // viewer subscribes through the bridge once kPath is active there.
  void publish_and_view_remotely(
      const std::optional<model::TrackProperties>& props = std::nullopt) {
    run_on(0, [this, &props] {
      Side& s = side(0);
      s.publisher = std::make_unique<TestBroadcast>(s.origin, kPath);
      s.bridge.publish_local(kPath, true, {}, 0);
      if (props) {
        model::Track* t = s.origin.track(kPath, kTrack);
        ASSERT_NE(t, nullptr);
        t->set_properties(*props);
      }
    });
    ASSERT_TRUE(wait_for(1, [this] { return side(1).origin.is_active(kPath); }));
    run_on(1, [this] { ASSERT_TRUE(side(1).viewer.subscribe(side(1).origin, kPath, kTrack)); });
  }
  // Whether worker 1's viewer's track reports the properties `want` before kTimeout.
  bool remote_viewer_sees(const model::TrackProperties& want) {
    return wait_for(1, [this, &want] {
      auto p = side(1).viewer.track()->properties();
      return p.has_value() && *p == want;
    });
  }
  // Worker 0 publishes kPath; a viewer subscribes on each worker (worker 1's through the bridge).
  void start_track() {
    ASSERT_NO_FATAL_FAILURE(publish_and_view_remotely());
    run_on(0, [this] { ASSERT_TRUE(side(0).viewer.subscribe(side(0).origin, kPath, kTrack)); });
    ASSERT_TRUE(wait_for(0, [this] { return side(0).bridge.feed_count() == 1; }));
  }
  model::Track* track() { return side(0).publisher->feed(kTrack).track(); }
  // After start_track(): worker 0 publishes `groups` groups of 1,000 bytes, each in its own task
  // (so each crosses as its own batch); every one reaches worker 1's viewer as worker 0's got it,
  // and every batch comes back (nothing in flight).
  void publish_groups_one_per_turn(uint64_t groups) {
    for (uint64_t seq = 0; seq < groups; ++seq) {
      run_on(0, [this, seq] {
        side(0).publisher->write_group(
            kTrack, seq, {pattern_bytes(1'000, static_cast<uint8_t>(seq)), "", ""}, true, 1000);
      });
    }
    ASSERT_TRUE(wait_for(1, [&] { return side(1).viewer.finished_sequences().size() == groups; }));
    ASSERT_TRUE(wait_for(0, [this] { return side(0).bridge.feed_stats().in_flight_bytes == 0; }));
    FrameCollector* local = nullptr;
    FrameCollector* remote = nullptr;
    run_on(0, [&] { local = &side(0).viewer; });
    run_on(1, [&] { remote = &side(1).viewer; });
    EXPECT_TRUE(same_groups(*local, *remote));
  }

  // Parks worker `i` inside a task until release(); returns once it is parked.
  void block(size_t i) {
    blocked_.store(true);
    parked_.store(false);
    pool_.post(i, [this] {
      parked_.store(true);
      std::unique_lock<std::mutex> lock(gate_m_);
      gate_cv_.wait(lock, [this] { return !blocked_.load(); });
    });
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (!parked_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(parked_.load());
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(gate_m_);
      blocked_.store(false);
    }
    gate_cv_.notify_all();
  }

 private:
  runtime::Workers pool_;
  std::vector<Bridge*> bridges_;  // sized once: the bridges hold a reference to it
  std::vector<std::unique_ptr<Side>> sides_ = std::vector<std::unique_ptr<Side>>(2);
  std::mutex gate_m_;
  std::condition_variable gate_cv_;
  std::atomic<bool> blocked_{false};
  std::atomic<bool> parked_{false};
};

// A path flipped between active and ended 100,000 times inside one task (a publisher's
// announce flip-flops read in one loop turn) costs the other worker one task per net change, not
// one per flip; the other worker ends up with the last state.
TEST(BridgeTest, AnnounceFlipFlopsAreCoalescedBeforeTheyCross) {
  TwoWorkers w(BridgeLimits{});
  w.run_on(0, [&] {
    for (int i = 0; i < 100'000; ++i) {
      w.side(0).bridge.publish_local(kPath, true, {}, 0);
      w.side(0).bridge.publish_local(kPath, false, {}, 0);
    }
    w.side(0).bridge.publish_local(kPath, true, {}, 0);
    EXPECT_EQ(w.side(0).bridge.pending_announces(), 1u);
  });
  ASSERT_TRUE(w.wait_for(1, [&] { return w.side(1).origin.is_active(kPath); }));
  w.run_on(0, [&] {
    EXPECT_EQ(w.side(0).bridge.announce_posts(), 1u);
    // Back and forth again within one task: the other worker already believes "active".
    w.side(0).bridge.publish_local(kPath, false, {}, 0);
    w.side(0).bridge.publish_local(kPath, true, {}, 0);
  });
  w.run_on(0, [&] { EXPECT_EQ(w.side(0).bridge.announce_posts(), 1u); });
  w.run_on(0, [&] { w.side(0).bridge.publish_local(kPath, false, {}, 0); });
  ASSERT_TRUE(w.wait_for(1, [&] { return !w.side(1).origin.is_active(kPath); }));
  w.run_on(0, [&] { EXPECT_EQ(w.side(0).bridge.announce_posts(), 2u); });
}

// Credit on announcements: while worker 1 is parked (not reading its mailbox), worker 0's
// sessions announce 1,000 paths over 100 tasks. Worker 0 posts one batch and keeps the rest
// coalesced, one entry per path, so its queue towards worker 1 holds one announcement task
// however many changes are made; once worker 1 runs again, every path arrives, in batches of at
// most kMaxAnnounceBatch.
// Records what Origin::is_carrying changes its listeners hear.
class CarryingListener final : public model::AnnounceListener {
 public:
  void on_announce(const std::string&, bool, const model::Hops&) override {}
  void on_carrying(const std::string& path, const model::Hops&, bool carrying) override {
    seen.emplace_back(path, carrying);
  }
  std::vector<std::pair<std::string, bool>> seen;
};

// Warmness is the relay's (issue #14): a relayed broadcast with tracks on worker 0 only is
// carried on worker 1 too, whose listeners (the announce streams to relay peers) hear it, and
// stops being carried there once worker 0's last track is gone.
TEST(BridgeTest, TracksOnOneWorkerMakeTheBroadcastCarriedOnEveryWorker) {
  model::OriginConfig oc;
  oc.upstream_linger = 10ms;
  TwoWorkers w(BridgeLimits{}, runtime::Workers::kDefaultRingCapacity, oc);
  const model::Hops relayed{77};
  w.run_on(0, [&] {
    Side& s = w.side(0);
    s.publisher = std::make_unique<TestBroadcast>(s.origin, kPath);
    s.origin.announce(kPath, s.publisher.get(), relayed);  // the same source, relayed
    s.bridge.publish_local(kPath, true, relayed, 0);
  });
  ASSERT_TRUE(w.wait_for(1, [&] { return w.side(1).origin.is_active(kPath); }));
  CarryingListener heard;
  w.run_on(1, [&] {
    w.side(1).origin.add_listener("", &heard);
    EXPECT_FALSE(w.side(1).origin.is_carrying(kPath));
  });

  w.run_on(0, [&] { ASSERT_TRUE(w.side(0).viewer.subscribe(w.side(0).origin, kPath, kTrack)); });
  EXPECT_TRUE(w.wait_for(1, [&] { return w.side(1).origin.is_carrying(kPath); }));
  w.run_on(1, [&] {
    EXPECT_EQ(w.side(1).origin.track_count(), 0u);  // worker 1 itself pulls nothing
    EXPECT_EQ(heard.seen, (std::vector<std::pair<std::string, bool>>{{kPath, true}}));
  });

  w.run_on(0, [&] { w.side(0).viewer.unsubscribe(); });
  EXPECT_TRUE(w.wait_for(1, [&] { return !w.side(1).origin.is_carrying(kPath); }));
  w.run_on(1, [&] {
    ASSERT_FALSE(heard.seen.empty());
    EXPECT_EQ(heard.seen.back(), (std::pair<std::string, bool>{kPath, false}));
    w.side(1).origin.remove_listener(&heard);
  });
  w.run_on(0, [&] { EXPECT_EQ(w.side(0).bridge.presence_posts(), 2u); });
}

TEST(BridgeTest, AnnouncementsWaitForCreditWhileTheOtherWorkerIsParked) {
  constexpr int kTurns = 100, kPerTurn = 10;
  auto path = [](int i) { return "room/p" + std::to_string(i); };
  TwoWorkers w(BridgeLimits{});
  w.block(1);
  for (int turn = 0; turn < kTurns; ++turn) {
    w.run_on(0, [&] {
      for (int i = 0; i < kPerTurn; ++i) {
        w.side(0).bridge.publish_local(path(turn * kPerTurn + i), true, {}, 0);
      }
    });
  }
  w.run_on(0, [&] {
    EXPECT_EQ(w.side(0).bridge.announce_posts(), 1u);
    EXPECT_EQ(w.side(0).bridge.announce_acks_awaited(), 1u);
    EXPECT_GE(w.side(0).bridge.pending_announces(), static_cast<size_t>(kTurns * kPerTurn * 9 / 10));
  });
  w.release();
  ASSERT_TRUE(w.wait_for(1, [&] {
    for (int i = 0; i < kTurns * kPerTurn; ++i) {
      if (!w.side(1).origin.is_active(path(i))) {
        return false;
      }
    }
    return true;
  }));
  ASSERT_TRUE(w.wait_for(0, [&] { return w.side(0).bridge.announce_acks_awaited() == 0; }));
  w.run_on(0, [&] {
    size_t most = 1 + (kTurns * kPerTurn + Bridge::kMaxAnnounceBatch - 1) / Bridge::kMaxAnnounceBatch;
    EXPECT_GE(w.side(0).bridge.announce_posts(), 2u);
    EXPECT_LE(w.side(0).bridge.announce_posts(), most);
    EXPECT_EQ(w.side(0).bridge.pending_announces(), 0u);
  });
}

// The track ends right after a burst larger than the credit window: the remote viewer gets every
// group the local viewer gets, byte for byte, before it sees the end.
TEST(BridgeTest, TrackEndingAfterBurstOverCreditReachesRemoteViewerWhole) {
  TwoWorkers w(BridgeLimits{});  // the production credit (4 MiB)
  w.start_track();
  constexpr uint64_t kGroups = 12;  // 12 x 512 KiB = 6 MiB: over the credit, under the backlog
  w.run_on(0, [&] {
    for (uint64_t seq = 0; seq < kGroups; ++seq) {
      w.side(0).publisher->write_group(kTrack, seq,
                                       {pattern_bytes(256 << 10, static_cast<uint8_t>(seq)),
                                        pattern_bytes(256 << 10, static_cast<uint8_t>(seq + 100))});
    }
    w.track()->end(make_error(ErrorCode::kCancel, "publisher done"));
  });
  ASSERT_TRUE(w.wait_for(1, [&] { return w.side(1).viewer.ended; }));
  ASSERT_TRUE(w.wait_for(0, [&] { return w.side(0).viewer.ended; }));
  FrameCollector* local = nullptr;
  FrameCollector* remote = nullptr;
  w.run_on(0, [&] { local = &w.side(0).viewer; });
  w.run_on(1, [&] { remote = &w.side(1).viewer; });
  // Both workers are idle now (their viewers ended); reading from here is ordered by run_on.
  EXPECT_EQ(local->finished_sequences().size(), kGroups);
  EXPECT_EQ(remote->finished_sequences(), local->finished_sequences());
  EXPECT_EQ(remote->total_bytes(), local->total_bytes());
  EXPECT_TRUE(same_groups(*local, *remote));
  EXPECT_TRUE(w.wait_for(0, [&] { return w.side(0).bridge.feed_count() == 0; }));
  EXPECT_EQ(w.side(0).bridge.skips().groups.get(), 0u);
}

// Worker 1 stops running (a task parks it), so its mailbox from worker 0 fills. Worker 0 keeps
// serving its own viewer at full speed, the feed holds back and skips worker 1's replica ahead,
// and what worker 0 holds for worker 1 (the feed's groups, the overflow queue) stays bounded.
// Once worker 1 runs again its viewer gets the newest group whole.
TEST(BridgeTest, StalledWorkerIsSkippedAheadWithoutStallingThePublisher) {
  BridgeLimits limits;
  limits.credit_bytes = 256 << 10;
  limits.max_backlog_bytes = 512 << 10;
  TwoWorkers w(limits, /*ring_capacity=*/16);
  w.start_track();
  w.block(1);
  constexpr uint64_t kGroups = 200;  // 200 x 64 KiB = 12.5 MiB while worker 1 is parked
  constexpr size_t kFrame = 64 << 10;
  FeedStats worst;
  size_t worst_overflow = 0;
  for (uint64_t seq = 0; seq < kGroups; seq += 10) {
    w.run_on(0, [&] {
      for (uint64_t s = seq; s < seq + 10; ++s) {
        // 1 KiB chunks: many small events, so the ring (16 tasks) fills long before the credit.
        w.side(0).publisher->write_group(kTrack, s, {pattern_bytes(kFrame, static_cast<uint8_t>(s))},
                                         true, 1024);
      }
      FeedStats st = w.side(0).bridge.feed_stats();
      worst.held_bytes = std::max(worst.held_bytes, st.held_bytes);
      worst.groups_held = std::max(worst.groups_held, st.groups_held);
      worst.in_flight_bytes = std::max(worst.in_flight_bytes, st.in_flight_bytes);
      worst_overflow = std::max(worst_overflow, w.pool().overflow_size(1));
    });
  }
  // The publisher and worker 0's viewer were never held up by worker 1.
  w.run_on(0, [&] { EXPECT_EQ(w.side(0).viewer.finished_sequences().size(), kGroups); });
  // Bounded: the backlog limit, plus what is in flight, plus the newest group.
  EXPECT_LE(worst.held_bytes, limits.max_backlog_bytes + limits.credit_bytes + 2 * kFrame);
  EXPECT_LE(worst.groups_held, 16u);
  EXPECT_LE(worst.in_flight_bytes, limits.credit_bytes + 64 * FeedEvent::kCost);
  EXPECT_LE(worst_overflow, 4u) << "track data queued behind a full mailbox";
  uint64_t skipped = 0;
  w.run_on(0, [&] { skipped = w.side(0).bridge.skips().groups.get(); });
  EXPECT_GT(skipped, 150u);
  EXPECT_GT(w.side(0).bridge.skips().events.get(), 0u);

  w.release();
  // A new group after worker 1 is back: it arrives whole, and so does every group it finished.
  w.run_on(0, [&] { w.side(0).publisher->write_group(kTrack, kGroups, {"fresh"}); });
  ASSERT_TRUE(w.wait_for(1, [&] {
    const auto* g = w.side(1).viewer.group(kGroups);
    return g != nullptr && g->finished;
  }));
  w.run_on(1, [&] {
    const FrameCollector& remote = w.side(1).viewer;
    EXPECT_LT(remote.finished_sequences().size(), kGroups / 2);
    for (uint64_t seq : remote.finished_sequences()) {
      std::vector<std::string> want = seq == kGroups ? std::vector<std::string>{"fresh"}
                                                     : std::vector<std::string>{pattern_bytes(
                                                           kFrame, static_cast<uint8_t>(seq))};
      EXPECT_EQ(remote.group(seq)->frames, want) << "group " << seq;
    }
  });
  // Caught up: nothing held for worker 1 any more.
  EXPECT_TRUE(w.wait_for(0, [&] {
    FeedStats st = w.side(0).bridge.feed_stats();
    return st.groups_held == 0 && st.in_flight_bytes == 0 && w.pool().overflow_size(1) == 0;
  }));
}

// A receiver that keeps up loses nothing and skips nothing: a 2 MiB burst (under the backlog
// limit) through a 16 KiB credit window, in 1000-byte chunks, with empty frames (paced by their
// event cost alone).
TEST(BridgeTest, ReceiverThatKeepsUpGetsEveryGroup) {
  BridgeLimits limits;
  limits.credit_bytes = 16 << 10;
  TwoWorkers w(limits, 16);
  w.start_track();
  constexpr uint64_t kGroups = 50;
  w.run_on(0, [&] {
    for (uint64_t seq = 0; seq < kGroups; ++seq) {
      w.side(0).publisher->write_group(
          kTrack, seq, {pattern_bytes(40'000, static_cast<uint8_t>(seq)), "", ""}, true, 1000);
    }
  });
  ASSERT_TRUE(w.wait_for(1, [&] { return w.side(1).viewer.finished_sequences().size() == kGroups; }));
  w.run_on(0, [&] { EXPECT_EQ(w.side(0).bridge.skips().groups.get(), 0u); });
  FrameCollector* local = nullptr;
  FrameCollector* remote = nullptr;
  w.run_on(0, [&] { local = &w.side(0).viewer; });
  w.run_on(1, [&] { remote = &w.side(1).viewer; });
  EXPECT_TRUE(same_groups(*local, *remote));
  EXPECT_TRUE(w.wait_for(0, [&] { return w.side(0).bridge.feed_stats().in_flight_bytes == 0; }));
}

// Each group published in its own turn crosses as its own batch; the batches come back with
// their credit and are reused: every group arrives whole and in order, and worker 0 owns a handful
// of batches, all back in its pool, not one per crossing.
TEST(BridgeTest, FeedBatchesComeBackAndAreReused) {
  TwoWorkers w(BridgeLimits{});
  w.start_track();
  ASSERT_NO_FATAL_FAILURE(w.publish_groups_one_per_turn(200));
  w.run_on(0, [&] {
    const Bridge& b = w.side(0).bridge;
    EXPECT_GE(b.batches_owned(), 1u);
    EXPECT_EQ(b.batches_pooled(), b.batches_owned()) << "a batch did not come back";
    EXPECT_LE(b.batches_owned(), Bridge::kMaxPooledBatches) << "batches were not reused";
  });
}

// The receiving worker makes its own copy of every chunk: the block is allocated and freed on
// that worker, and the home worker's reference in a batch is dropped by the home worker when the
// batch comes back. Bytes::live_buffers() counts per thread, so a block allocated on one worker
// and freed by the other (worker 1's cache evicts the older of these 200 groups) would leave
// worker 1's count below where it started; and the home worker holds no chunk for worker 1
// once every batch is back.
TEST(BridgeTest, ChunkCopiesAreAllocatedAndFreedOnTheReceivingWorker) {
  TwoWorkers w(BridgeLimits{});
  w.start_track();
  int64_t live_before[2] = {0, 0};
  w.run_on(0, [&] { live_before[0] = Bytes::live_buffers(); });
  w.run_on(1, [&] { live_before[1] = Bytes::live_buffers(); });
  ASSERT_NO_FATAL_FAILURE(w.publish_groups_one_per_turn(200));
  int64_t live_after[2] = {0, 0};
  w.run_on(0, [&] { live_after[0] = Bytes::live_buffers(); });
  w.run_on(1, [&] { live_after[1] = Bytes::live_buffers(); });
  // Each cache keeps at most CacheLimits::max_groups groups (8 by default) of what it got.
  EXPECT_GE(live_after[1], live_before[1]) << "worker 1 freed blocks worker 0 allocated";
  EXPECT_LE(live_after[1] - live_before[1], 64) << "worker 1 holds more than its cache";
  EXPECT_LE(live_after[0] - live_before[0], 64) << "worker 0 still holds chunks for worker 1";
}

}  // namespace
}  // namespace moqd::relay

namespace moqd::relay {
namespace {

// moq-lite-05's track properties and object timestamps cross to the other worker as they are:
// worker 1's track reports its properties only once worker 0's are posted.
TEST(BridgeTest, TrackPropertiesAndTimestampsCrossToTheOtherWorker) {
  TwoWorkers w(BridgeLimits{});
  const model::TrackProperties props{.priority = 5, .ordered = true, .max_latency_ms = 70,
                                     .timescale = 48000};
  ASSERT_NO_FATAL_FAILURE(w.publish_and_view_remotely(props));
  ASSERT_TRUE(w.remote_viewer_sees(props));
  w.run_on(0, [&] {
    model::Track* t = w.track();
    model::Group* g = t->begin_group(3);
    ASSERT_NE(g, nullptr);
    t->begin_timed_object(*g, 1, 96000);
    t->append_chunk(*g, Bytes::copy(std::string("a")));
    t->begin_timed_object(*g, 1, 95040);
    t->append_chunk(*g, Bytes::copy(std::string("b")));
    t->finish_group(*g);
  });
  ASSERT_TRUE(w.wait_for(1, [&] { return w.side(1).viewer.finished_sequences().size() == 1; }));
  std::vector<uint64_t> stamps;
  w.run_on(1, [&] {
    for (const auto& o : w.side(1).viewer.track()->newest_group()->objects()) {
      stamps.push_back(o.timestamp);
    }
  });
  EXPECT_EQ(stamps, (std::vector<uint64_t>{96000, 95040}));
}

// Provisional properties (a lite-05 publisher slow to answer TRACK, model::TrackProperties::
// provisional) cross, and the publisher's, when they replace them, cross too: the feed posts the
// properties again when they change, not only once.
TEST(BridgeTest, ProvisionalPropertiesAreReplacedOnTheOtherWorker) {
  TwoWorkers w(BridgeLimits{});
  model::TrackProperties provisional;
  provisional.timescale_known = false;
  provisional.provisional = true;
  const model::TrackProperties props{.priority = 5, .ordered = true, .max_latency_ms = 70,
                                     .timescale = 90000};
  ASSERT_NO_FATAL_FAILURE(w.publish_and_view_remotely(provisional));
  ASSERT_TRUE(w.remote_viewer_sees(provisional));
  w.run_on(0, [&] { w.track()->set_properties(props); });
  ASSERT_TRUE(w.remote_viewer_sees(props));
}

}  // namespace
}  // namespace moqd::relay

namespace moqd::relay {
namespace {

// An IETF publisher's subgroups, object ids with gaps and extension blocks cross to the other
// worker as they are (the receiver holds its own copy of each block).
TEST(BridgeTest, SubgroupsObjectIdsAndExtensionsCrossToTheOtherWorker) {
  TwoWorkers w(BridgeLimits{});
  w.start_track();
  w.run_on(0, [&] {
    model::Track* t = w.track();
    for (uint64_t subgroup : {2u, 0u}) {
      model::Group* g = t->begin_group(3, subgroup, true);
      ASSERT_NE(g, nullptr);
      model::Track::IetfObject in;
      in.id = 4 + subgroup;
      in.size = 1;
      in.extensions = Bytes::copy(std::string("\x0d\x01\xcc"));
      in.extensions_draft = 16;
      in.lite_refused = true;
      t->begin_ietf_object(*g, std::move(in));
      t->append_chunk(*g, Bytes::copy(std::string("a")));
      t->finish_group(*g);
    }
  });
  ASSERT_TRUE(w.wait_for(1, [&] {
    size_t n = 0;
    w.side(1).viewer.track()->for_each_group_from(0, [&](const model::GroupRef& g) {
      n += g->is_finished() ? 1 : 0;
    });
    return n == 2;
  }));
  std::vector<std::string> seen;
  w.run_on(1, [&] {
    w.side(1).viewer.track()->for_each_group_from(0, [&](const model::GroupRef& g) {
      const model::Object& o = g->objects()[0];
      seen.push_back(std::to_string(g->sequence()) + "/" + std::to_string(g->subgroup()) + " id " +
                     std::to_string(o.id) + " " + std::string(o.extensions.view()) + " d" +
                     std::to_string(o.extensions_draft) + (o.lite_refused ? " refused" : "") +
                     (g->has_extensions() ? " ext" : ""));
    });
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"3/2 id 6 \x0d\x01\xcc d16 refused ext",
                                            "3/0 id 4 \x0d\x01\xcc d16 refused ext"}));
}

// Issue #12: a frame crosses to another worker once per worker that has viewers, never once per
// viewer. Eight viewers of one track on worker 1 (one subscribed before the first groups, seven
// after them, served from worker 1's own cache): worker 0 serves one feed to worker 1, worker 1
// receives one, and every chunk the publisher wrote is posted once and copied once on worker 1
// (Bridge::chunks_posted / chunks_copied), not eight times; every viewer gets every byte.
TEST(BridgeTest, EightViewersOnOneWorkerShareOneFeedAndOneCopyPerChunk) {
  constexpr size_t kViewers = 8;
  constexpr uint64_t kGroups = 8;  // within the cache's 8 groups: late viewers see them all
  constexpr size_t kChunk = 1000;
  // Per group: 10 + 5 chunks, and an empty frame (no chunk).
  auto frames = [](uint64_t seq) {
    return std::vector<std::string>{pattern_bytes(10'000, static_cast<uint8_t>(seq)),
                                    pattern_bytes(4'500, static_cast<uint8_t>(seq + 50)), ""};
  };
  constexpr uint64_t kChunksPerGroup = 15;
  constexpr uint64_t kBytesPerGroup = 14'500;
  TwoWorkers w(BridgeLimits{});
  ASSERT_NO_FATAL_FAILURE(w.publish_and_view_remotely());
  ASSERT_TRUE(w.wait_for(0, [&] { return w.side(0).bridge.feed_count() == 1; }));
  auto publish = [&](uint64_t from, uint64_t to) {
    w.run_on(0, [&] {
      for (uint64_t seq = from; seq < to; ++seq) {
        w.side(0).publisher->write_group(kTrack, seq, frames(seq), true, kChunk);
      }
    });
  };
  publish(0, kGroups / 2);
  ASSERT_TRUE(w.wait_for(
      1, [&] { return w.side(1).viewer.finished_sequences().size() == kGroups / 2; }));
  w.run_on(1, [&] {
    Side& s = w.side(1);
    for (size_t i = 1; i < kViewers; ++i) {
      s.more_viewers.push_back(std::make_unique<FrameCollector>());
      ASSERT_TRUE(s.more_viewers.back()->subscribe(s.origin, kPath, kTrack));
    }
    EXPECT_EQ(s.viewer.track()->viewer_count(), kViewers);
  });
  publish(kGroups / 2, kGroups);
  ASSERT_TRUE(w.wait_for(1, [&] {
    Side& s = w.side(1);
    if (s.viewer.finished_sequences().size() != kGroups) {
      return false;
    }
    for (const auto& v : s.more_viewers) {
      if (v->finished_sequences().size() != kGroups) {
        return false;
      }
    }
    return true;
  }));
  ASSERT_TRUE(w.wait_for(0, [&] { return w.side(0).bridge.feed_stats().in_flight_bytes == 0; }));
  w.run_on(0, [&] {
    const Bridge& b = w.side(0).bridge;
    EXPECT_EQ(b.feed_count(), 1u) << "one feed for worker 1, not one per viewer";
    EXPECT_EQ(b.chunks_posted(), kGroups * kChunksPerGroup);
    EXPECT_EQ(b.chunks_copied(), 0u);
  });
  w.run_on(1, [&] {
    const Side& s = w.side(1);
    EXPECT_EQ(s.bridge.inbound_feed_count(), 1u);
    EXPECT_EQ(s.bridge.feed_count(), 0u);
    EXPECT_EQ(s.bridge.chunks_copied(), kGroups * kChunksPerGroup) << "a copy per viewer?";
    EXPECT_EQ(s.bridge.chunk_bytes_copied(), kGroups * kBytesPerGroup);
    std::vector<const FrameCollector*> all{&s.viewer};
    for (const auto& v : s.more_viewers) {
      all.push_back(v.get());
    }
    for (size_t i = 0; i < all.size(); ++i) {
      const FrameCollector& v = *all[i];
      EXPECT_EQ(v.total_bytes(), kGroups * kBytesPerGroup) << "viewer " << i;
      for (uint64_t seq = 0; seq < kGroups; ++seq) {
        const auto* g = v.group(seq);
        ASSERT_NE(g, nullptr) << "viewer " << i << " group " << seq;
        EXPECT_TRUE(g->finished);
        EXPECT_EQ(g->frames, frames(seq)) << "viewer " << i << " group " << seq;
      }
    }
  });
}

// The drain holds a bridge twice (its start and its deadline, RelayWorker::drain), and the two
// releases may come in either order: what waits crosses, in order, only after the last one.
TEST(BridgeTest, HoldsNestAndWhatWaitedCrossesInOrderAfterTheLastRelease) {
  TwoWorkers w(BridgeLimits{});
  std::vector<int> order;  // worker 1's
  std::atomic<bool> marker{false};
  w.run_on(0, [&] {
    Bridge& b = w.side(0).bridge;
    b.hold();
    b.hold();
    b.post(1, [&order] { order.push_back(1); });
    b.release();
    EXPECT_TRUE(b.is_held());
    b.post(1, [&order] { order.push_back(2); });
    // Past the bridge, on the same ring: runs after anything the bridge had sent to worker 1.
    w.pool().post(1, [&marker] { marker = true; });
  });
  ASSERT_TRUE(w.wait_for(1, [&] { return marker.load(); }));
  w.run_on(1, [&] { EXPECT_TRUE(order.empty()); });
  w.run_on(0, [&] {
    Bridge& b = w.side(0).bridge;
    b.release();
    EXPECT_FALSE(b.is_held());
    b.release();  // unmatched: nothing to undo
    EXPECT_FALSE(b.is_held());
    b.post(1, [&order] { order.push_back(3); });
  });
  ASSERT_TRUE(w.wait_for(1, [&] { return order.size() == 3; }));
  w.run_on(1, [&] { EXPECT_EQ(order, (std::vector<int>{1, 2, 3})); });
}

}  // namespace
}  // namespace moqd::relay
