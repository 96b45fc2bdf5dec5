#pragma once
// The in-process fan-out rig: one publisher and N subscribers of one track, all moqd's real
// session code over the in-memory transport (bench/memory_transport.h), on 1 or 2 relay workers.
//
// Worker i runs a runtime::Workers event loop on its own thread and owns what a RelayWorker owns
// for this path: a model::Origin (with its share of the cache budget), a relay::Bridge, and the
// relay's session::Session of every connection homed there. Worker 0 also holds the publisher's
// connection: its relay-side Session learns the broadcast through ANNOUNCE_PLEASE and subscribes
// upstream; a raw publisher on the far end answers and sends groups (GROUP header, FRAMEs) as a
// moq-lite-04 client would. Subscribers are split evenly over the workers; each is a relay-side
// Session serving one SUBSCRIBE from a raw subscriber, whose group streams end in a
// GroupStreamSink that parses and counts what arrives. On worker 1 the track is the Bridge's
// replica: worker 0 feeds it through the mailbox, one copy per chunk for the whole worker.
//
// The benchmark thread (not a worker) drives it: publish_groups() posts the publishing to worker 0
// and blocks (on a condition variable, so it burns no CPU) until every subscriber has received
// every frame of those groups and their FINs.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moqd::bench {

struct FanoutOptions {
  size_t workers = 1;            // relay workers (threads): 1 or 2
  size_t subscribers = 64;       // split evenly over the workers, worker 0 taking the remainder
  size_t frame_size = 1000;      // payload bytes per frame
  size_t frames_per_group = 30;  // a new group (a new uni stream per subscriber) every this many
  size_t cache_groups = 2;       // the track cache's --cache-groups: small, so eviction happens
                                 // in steady state at every subscriber count
  // Sequence of the first group. A live track is joined long after its start: from 64 on, a
  // sequence takes a 2-byte varint, which is what a steady-state GROUP header costs to encode.
  uint64_t first_sequence = 1000;
};

// What the subscribers have received, summed over all of them.
struct FanoutTotals {
  uint64_t frames = 0;
  uint64_t payload_bytes = 0;
  uint64_t stream_bytes = 0;  // every byte of the group streams (headers included)
  uint64_t groups = 0;        // group streams ended with FIN
  uint64_t resets = 0;        // group streams reset (skip-ahead); 0 in a healthy run
};

// The workers' loops, summed (read on each worker's thread).
struct LoopTotals {
  uint64_t polls = 0;  // epoll_wait calls
  uint64_t wakes = 0;  // eventfd writes one worker made to wake another (Workers::wakes)
  uint64_t turn_items = 0;        // turn work run (EventLoop::turn_items)
  uint64_t turn_slices_cut = 0;   // slices that left work for a later turn
  uint64_t turn_clock_reads = 0;  // clock reads inside slices
};

class FanoutRig {
 public:
  // Starts the workers, connects the publisher and every subscriber, and waits until each
  // subscriber holds a SUBSCRIBE_OK. Aborts with a message if that takes over a minute.
  explicit FanoutRig(FanoutOptions options);
  ~FanoutRig();
  FanoutRig(const FanoutRig&) = delete;
  FanoutRig& operator=(const FanoutRig&) = delete;

  const FanoutOptions& options() const { return options_; }
  // Publishes `groups` more groups (frames_per_group frames each) and returns once every
  // subscriber has received all of them. Aborts with a message after a minute without.
  // `overlapping` (a warm-up): every subscription, on every worker, serves more than one group at
  // once at each group boundary. On worker 0 each group but the last stays open (no FIN) until
  // the next group's first frame was sent; the other workers are held (a task that waits) until
  // worker 0's subscribers have every group, so that each applies the Bridge's queued batches (a
  // group's end, the next group's begin, ...) in one turn. Steady state brings the same about now
  // and then (a cut turn slice, a descheduled worker: a subscriber still writing group N when
  // N+1 begins), and the GroupWriter, stream and writers' vector slot it then takes are pool
  // growth (high-water marks, never again once reached) that belongs to the warm-up: without it
  // `moqd_bench_instructions --workers 2 --assert-zero` failed ~1 run in 100-135 with 158-320
  // allocations on the delivery path (docs/BENCHMARKS.md, "the 2-worker allocation flake").
  void publish_groups(size_t groups, bool overlapping = false);
  // Groups published so far.
  uint64_t groups_published() const { return groups_published_; }
  // Frames every subscriber should have so far, summed (one delivery = one frame to one
  // subscriber).
  uint64_t expected_deliveries() const;
  // Read from the workers (a round trip to each): what arrived so far.
  FanoutTotals totals();
  LoopTotals loop_totals();
  // Empty when totals() match everything published so far; otherwise what differs.
  std::string check();

  struct Impl;

 private:
  FanoutOptions options_;
  uint64_t groups_published_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moqd::bench
