#include "model/cache_budget.h"

#include "model/track.h"

namespace moqd::model {

CacheBudget::~CacheBudget() {
  while (!lru_.empty()) {
    lru_.front()->forget_budget(this);
  }
}

CacheBudget::Link CacheBudget::attach(Track* t) { return lru_.insert(lru_.end(), t); }

void CacheBudget::detach(Link link) { lru_.erase(link); }

void CacheBudget::enforce() {
  if (enforcing_) {
    return;  // an eviction below released bytes and called back in
  }
  enforcing_ = true;
  // One pass over the tracks, least recently served first, each giving up old groups until the
  // budget fits; a track down to its newest group is skipped.
  for (auto it = lru_.begin(); used_ > limit_ && it != lru_.end();) {
    Track* t = *it++;
    while (used_ > limit_ && t->evict_oldest_group()) {
      ++evictions_;
    }
  }
  enforcing_ = false;
}

}  // namespace moqd::model
