#include "runtime/workers.h"

#include <cstdio>
#include <utility>

#include "base/log.h"

namespace moqd::runtime {
namespace {

// Tasks run from one inbound ring per poll before moving to the next, so one busy sender cannot
// starve the others or the loop's own fds.
constexpr size_t kDrainBatch = 256;

thread_local const Workers* t_pool = nullptr;
thread_local size_t t_index = SIZE_MAX;

}  // namespace

Workers::Workers(size_t count, size_t ring_capacity) {
  if (count == 0) {
    count = 1;
  }
  workers_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    workers_.push_back(std::make_unique<Worker>(*this, i));
    workers_.back()->overflow.resize(count);
  }
  rings_.resize(count * count);
  for (size_t from = 0; from < count; ++from) {
    for (size_t to = 0; to < count; ++to) {
      if (from != to) {
        rings_[from * count + to] = std::make_unique<Mailbox>(
            ring_capacity, workers_[to]->loop.waker(), &workers_[from]->loop.waker());
      }
    }
  }
  for (auto& w : workers_) {
    w->loop.add_poll_source(&w->pump);
  }
}

Workers::~Workers() { stop_and_join(); }

size_t Workers::current() const { return t_pool == this ? t_index : SIZE_MAX; }

void Workers::start(std::function<void(size_t)> init) {
  started_ = true;
  for (size_t i = 0; i < size(); ++i) {
    workers_[i]->thread = std::thread([this, i, init] {
      t_pool = this;
      t_index = i;
      char tag[16];
      snprintf(tag, sizeof tag, "w%zu", i);
      log::set_thread_tag(tag);
      if (init) {
        init(i);
      }
      workers_[i]->loop.run();
      t_pool = nullptr;
      t_index = SIZE_MAX;
    });
  }
}

void Workers::stop_and_join() {
  if (!started_) {
    return;
  }
  for (auto& w : workers_) {
    w->loop.stop();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) {
      w->thread.join();
    }
  }
  started_ = false;
}

void Workers::post(size_t to, Task task, Wake wake) {
  size_t from = current();
  if (from == SIZE_MAX) {
    workers_[to]->loop.inject(std::move(task));
    return;
  }
  if (from == to) {
    workers_[to]->loop.defer(std::move(task));
    return;
  }
  auto& queue = workers_[from]->overflow[to];
  if (queue.empty() && ring(from, to).try_push(std::move(task), wake == Wake::kDeferred)) {
    return;
  }
  if (queue.empty()) {
    ++workers_[from]->overflowing;
  }
  queue.push_back(std::move(task));
}

bool Workers::is_congested(size_t to) {
  size_t from = current();
  if (from == SIZE_MAX || from == to) {
    return false;
  }
  return !workers_[from]->overflow[to].empty() || !ring(from, to).has_space();
}

size_t Workers::overflow_size(size_t to) const {
  size_t from = current();
  return from == SIZE_MAX ? 0 : workers_[from]->overflow[to].size();
}

uint64_t Workers::wakes(size_t to) {
  size_t from = current();
  return from == SIZE_MAX || from == to ? 0 : ring(from, to).wakes();
}

void Workers::flush_overflow(size_t from, size_t to) {
  auto& queue = workers_[from]->overflow[to];
  Mailbox& box = ring(from, to);
  while (!queue.empty()) {
    if (!box.try_push(std::move(queue.front()))) {
      box.wait_for_space();
      // Space freed between the failed push and wait_for_space() is not signalled: retry once.
      if (!box.try_push(std::move(queue.front()))) {
        return;
      }
    }
    queue.pop_front();
  }
  --workers_[from]->overflowing;
}

bool Workers::Pump::is_ready() {
  Worker& me = *pool_.workers_[self_];
  for (size_t j = 0; j < pool_.size(); ++j) {
    if (j == self_) {
      continue;
    }
    if (!pool_.ring(j, self_).empty()) {
      return true;
    }
    if (me.overflowing > 0 && !me.overflow[j].empty() && pool_.ring(self_, j).has_space()) {
      return true;
    }
  }
  return false;
}

void Workers::Pump::before_wait() {
  for (size_t j = 0; j < pool_.size(); ++j) {
    if (j != self_) {
      pool_.ring(self_, j).flush_wake();
    }
  }
}

void Workers::Pump::poll() {
  Worker& me = *pool_.workers_[self_];
  for (size_t j = 0; j < pool_.size(); ++j) {
    if (j == self_) {
      continue;
    }
    pool_.ring(j, self_).drain(kDrainBatch);
    if (me.overflowing > 0 && !me.overflow[j].empty()) {
      pool_.flush_overflow(self_, j);
    }
  }
}

}  // namespace moqd::runtime
