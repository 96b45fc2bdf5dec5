#pragma once
// A byte budget shared by the caches of several tracks: the worker's share of the global cache
// budget (--cache-budget), or one publisher's cached bytes (--max-publisher-cache). When a track's
// cache grows past the budget, the oldest groups of the least recently served tracks go first;
// a track's newest group is never evicted, so the budget can be overrun by at most one group per
// track. One worker thread. Tracks attach themselves; a budget that dies first detaches them.
#include <cstddef>
#include <cstdint>
#include <list>

namespace moqd::model {

class Track;

class CacheBudget {
 public:
  explicit CacheBudget(uint64_t limit) : limit_(limit) {}
  ~CacheBudget();
  CacheBudget(const CacheBudget&) = delete;
  CacheBudget& operator=(const CacheBudget&) = delete;

  uint64_t limit() const { return limit_; }
  void set_limit(uint64_t limit) { limit_ = limit; }
  // Cached payload bytes of the attached tracks.
  uint64_t used() const { return used_; }
  // Groups evicted to stay within the limit, since creation.
  uint64_t evictions() const { return evictions_; }
  size_t track_count() const { return lru_.size(); }

 private:
  friend class Track;
  using Link = std::list<Track*>::iterator;
  Link attach(Track* t);
  void detach(Link link);
  // Marks a track as just served: it becomes the last to lose groups.
  void touch(Link link) { lru_.splice(lru_.end(), lru_, link); }
  void charge(uint64_t n) { used_ += n; }
  void release(uint64_t n) { used_ -= n < used_ ? n : used_; }
  // Evicts until within the limit or nothing more can go.
  void enforce();

  uint64_t limit_;
  uint64_t used_ = 0;
  uint64_t evictions_ = 0;
  bool enforcing_ = false;
  std::list<Track*> lru_;  // least recently served first
};

}  // namespace moqd::model
