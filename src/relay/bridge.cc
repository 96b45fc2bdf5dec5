#include "relay/bridge.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/log.h"

namespace moqd::relay {

// A track of a broadcast homed on another worker: fed through a Bridge feed.
class RemoteTrack final : public model::TrackSource {
 public:
  RemoteTrack(Bridge& bridge, size_t home, std::string path, std::string name)
      : bridge_(bridge), home_(home), path_(std::move(path)), name_(std::move(name)) {}
  ~RemoteTrack() override { close(); }

  void start_track(model::Track& track) override {
    close();
    // The home worker's track may still be asking its publisher (moq-lite-05 TRACK): its feed
    // posts the properties once it has them.
    track.expect_properties();
    id_ = bridge_.open_feed(home_, path_, name_, track);
  }
  void stop_track(model::Track&) override { close(); }
  void close() {
    if (id_ != 0) {
      bridge_.close_feed(home_, std::exchange(id_, 0));
    }
  }

 private:
  Bridge& bridge_;
  size_t home_;
  std::string path_;
  std::string name_;
  uint64_t id_ = 0;
};

// The local stand-in for a broadcast announced on another worker.
class RemoteBroadcast final : public model::BroadcastSource {
 public:
  RemoteBroadcast(Bridge& bridge, size_t home) : bridge_(bridge), home_(home) {}

  model::TrackSource& track_source(const std::string& path, const std::string& name) override {
    auto& t = tracks_[name];
    if (!t) {
      t = std::make_unique<RemoteTrack>(bridge_, home_, path, name);
    }
    return *t;
  }
  // Closes every feed (before the broadcast is withdrawn from the origin).
  void close_all() {
    for (auto& [name, t] : tracks_) {
      t->close();
    }
  }

 private:
  Bridge& bridge_;
  size_t home_;
  std::map<std::string, std::unique_ptr<RemoteTrack>> tracks_;
};

// Serves one track of this worker to another worker: a listener of the local Track that pulls it
// with a cursor per group and posts the events to the receiving worker within the credit window
// (see bridge.h for the pacing, skip-ahead and end). The cursors hold GroupRefs, so a group
// evicted from the cache meanwhile is still forwarded whole unless skip-ahead drops it.
class Feed final : public model::TrackListener {
 public:
  bool is_viewer() const override { return false; }
  Feed(Bridge& bridge, size_t to, uint64_t id, model::Track& track)
      : bridge_(bridge),
        to_(to),
        id_(id),
        track_(&track),
        broadcast_(track.broadcast()),
        name_(track.name()) {
    next_arrival_ = track.late_join_arrival();
    track.add_listener(this);
  }
  ~Feed() override {
    if (track_ != nullptr) {
      track_->remove_listener(this);
    }
  }

  void on_track_data(model::Track&) override { pump(); }
  // The feed lingers until what its cursors still hold has gone through the credit window; only
  // then is the end posted (finish()).
  void on_track_ended(model::Track&, Error reason) override {
    track_ = nullptr;
    end_reason_ = reason;
    pump();
  }
  void ack(uint64_t bytes) {
    in_flight_ -= std::min(in_flight_, bytes);
    pump();
  }
  size_t to() const { return to_; }
  uint64_t id() const { return id_; }
  void add_stats(FeedStats& s) const {
    ++s.feeds;
    s.groups_held += cursors_.size();
    s.in_flight_bytes += in_flight_;
    for (const auto& o : cursors_) {
      s.held_bytes += o.cursor.group()->bytes();
      s.backlog_bytes += o.cursor.backlog();
    }
  }

  void pump() {
    if (finished_) {
      return;
    }
    if (track_ != nullptr) {
      // Again when they change: provisional ones (a lite-05 publisher slow to answer TRACK) are
      // replaced by the publisher's.
      if (auto p = track_->properties(); p && p != properties_sent_) {
        properties_sent_ = p;
        FeedEvent e;
        e.kind = FeedEvent::Kind::kProperties;
        e.properties = *p;
        emit(std::move(e));
      }
    }
    collect_new_groups();
    skip_ahead();
    drain_cursors();
    flush();
    if (end_reason_ && cursors_.empty()) {
      finish();
    }
  }

 private:
  // One group being forwarded.
  struct Out {
    explicit Out(model::GroupRef g) : cursor(std::move(g)) {}
    model::GroupCursor cursor;
    bool announced = false;  // its kGroup event was posted
  };

  void collect_new_groups() {
    if (track_ == nullptr) {
      return;
    }
    for (auto& g : track_->groups_from(next_arrival_)) {
      cursors_.emplace_back(std::move(g));
    }
    next_arrival_ = track_->next_arrival();
  }
  // The receiving worker is a viewer that cannot keep up once bytes wait here: past the backlog
  // limits, drop the oldest groups (whole; aborted on the receiver if begun there) and keep the
  // newest, as Subscription::drop_old_groups does for a slow subscriber.
  void skip_ahead() {
    if (cursors_.size() < 2) {
      return;
    }
    const BridgeLimits& limits = bridge_.limits();
    uint64_t total = 0;
    for (const auto& o : cursors_) {
      total += o.cursor.backlog();
    }
    Instant now = bridge_.clock().now();
    size_t drop = 0;
    while (cursors_.size() - drop > 1) {
      const Out& o = cursors_[drop];
      uint64_t backlog = o.cursor.backlog();
      bool too_old = backlog > 0 && now - o.cursor.group()->created() > limits.max_backlog_age;
      if (total <= limits.max_backlog_bytes && !too_old) {
        break;
      }
      total -= std::min(total, backlog);
      if (o.announced && !o.cursor.is_done()) {
        // Past the credit if need be: at most one per group begun on the receiver.
        FeedEvent e{FeedEvent::Kind::kGroupAbort, o.cursor.group()->sequence(), 0, Bytes()};
        e.subgroup = o.cursor.group()->subgroup();
        emit(std::move(e));
      }
      ++drop;
    }
    if (drop > 0) {
      cursors_.erase(cursors_.begin(), cursors_.begin() + static_cast<ptrdiff_t>(drop));
      note_skip(drop, now);
    }
  }
  void note_skip(uint64_t groups, Instant now) {
    bridge_.skips().events.add();
    bridge_.skips().groups.add(groups);
    skipped_unlogged_ += groups;
    if (skip_logged_ && now - skip_logged_at_ < Bridge::kSkipLogInterval) {
      return;
    }
    skip_logged_ = true;
    skip_logged_at_ = now;
    MOQD_LOG(kInfo, "bridge feed %zu->%zu id=%llu skip-ahead broadcast=%s track=%s groups_skipped=%llu",
             bridge_.self(), to_, static_cast<unsigned long long>(id_), broadcast_.c_str(),
             name_.c_str(), static_cast<unsigned long long>(std::exchange(skipped_unlogged_, 0)));
  }
  void drain_cursors() {
    if (in_flight_ >= bridge_.limits().credit_bytes) {
      return;
    }
    // A congested mailbox means the receiver is behind: hold back until what is in flight is
    // acknowledged (the ack pumps again), so the overflow queue never grows with track data.
    if (in_flight_ > 0 && bridge_.workers().is_congested(to_)) {
      return;
    }
    for (auto& o : cursors_) {
      if (!drain(o)) {
        break;
      }
    }
  }
  // Emits what `o` has; false once out of credit.
  bool drain(Out& o) {
    const uint64_t credit = bridge_.limits().credit_bytes;
    const model::Group& group = *o.cursor.group();
    uint64_t seq = group.sequence();
    // Every event names the group by (sequence, subgroup).
    auto event = [&group, seq](FeedEvent::Kind kind, uint64_t size, Bytes chunk) {
      FeedEvent e{kind, seq, size, std::move(chunk)};
      e.subgroup = group.subgroup();
      return e;
    };
    for (;;) {
      if (in_flight_ >= credit) {
        return false;
      }
      if (!o.announced) {
        o.announced = true;
        FeedEvent e = event(FeedEvent::Kind::kGroup, 0, Bytes());
        e.has_extensions = group.has_extensions();
        emit(std::move(e));
        continue;
      }
      auto step = o.cursor.peek(credit - in_flight_);
      switch (step.kind) {
        case model::GroupCursor::Kind::kNothing:
          return true;
        case model::GroupCursor::Kind::kObjectStart: {
          const model::Object& obj = *step.object;
          FeedEvent e = event(FeedEvent::Kind::kObject, obj.size, Bytes());
          e.timestamp = obj.timestamp;
          e.object_id = obj.id;
          e.extensions = obj.extensions;  // a reference: the receiver copies it (FeedEvent)
          e.extensions_draft = obj.extensions_draft;
          e.lite_refused = obj.lite_refused;
          emit(std::move(e));
          break;
        }
        case model::GroupCursor::Kind::kChunk:
          // A reference, held here until the batch comes back: the receiver makes the one copy
          // per receiving core (FeedEvent::chunk).
          emit(event(FeedEvent::Kind::kChunk, 0, step.chunk));
          bridge_.count_chunk_posted();
          break;
        case model::GroupCursor::Kind::kEnd:
          emit(event(FeedEvent::Kind::kGroupEnd, 0, Bytes()));
          o.cursor.advance(step);
          return true;
        case model::GroupCursor::Kind::kAborted:
          emit(event(FeedEvent::Kind::kGroupAbort, 0, Bytes()));
          o.cursor.advance(step);
          return true;
      }
      o.cursor.advance(step);
    }
  }
  void emit(FeedEvent e) {
    in_flight_ += e.cost();
    events_.push_back(std::move(e));
  }
  void flush() {
    std::erase_if(cursors_, [](const Out& o) { return o.cursor.is_done(); });
    if (events_.empty()) {
      return;
    }
    // The batch takes the events; events_ takes the batch's emptied vector and its capacity.
    FeedBatch* batch = bridge_.take_batch(to_, id_);
    batch->events.swap(events_);
    Bridge* peer = &bridge_.peer(to_);
    // Two pointers: stored inside the std::function, no allocation.
    bridge_.post(to_, [peer, batch] { peer->on_feed_events(batch); });
  }
  void finish() {
    finished_ = true;
    Bridge* peer = &bridge_.peer(to_);
    uint64_t id = id_;
    Error reason = *end_reason_;
    bridge_.post(to_, [peer, id, reason] { peer->on_feed_end(id, reason); });
    bridge_.feed_finished(this);
  }

  Bridge& bridge_;
  size_t to_;
  uint64_t id_;
  model::Track* track_;
  std::string broadcast_;
  std::string name_;
  uint64_t next_arrival_ = 0;
  uint64_t in_flight_ = 0;
  std::vector<Out> cursors_;  // arrival order
  std::vector<FeedEvent> events_;
  std::optional<Error> end_reason_;  // the track ended; the end is posted once cursors_ drain
  bool finished_ = false;
  std::optional<model::TrackProperties> properties_sent_;
  bool skip_logged_ = false;
  Instant skip_logged_at_{};
  uint64_t skipped_unlogged_ = 0;
};

Bridge::Bridge(size_t self, runtime::Workers& workers, model::Origin& origin,
               const std::vector<Bridge*>& bridges, BridgeLimits limits)
    : self_(self), limits_(limits), workers_(workers), origin_(origin), bridges_(bridges) {
  origin_.set_presence_observer(
      [this](const std::string& path, bool present) { on_local_presence(path, present); });
}

void Bridge::post(size_t to, std::function<void()> task, runtime::Workers::Wake wake) {
  if (holds_ > 0) {
    held_tasks_.push_back(HeldTask{to, std::move(task), wake});
    return;
  }
  workers_.post(to, std::move(task), wake);
}

void Bridge::release() {
  if (holds_ == 0 || --holds_ > 0) {
    return;
  }
  auto tasks = std::move(held_tasks_);
  held_tasks_.clear();
  for (auto& t : tasks) {
    workers_.post(t.to, std::move(t.task), t.wake);
  }
}

FeedStats Bridge::feed_stats() const {
  FeedStats s;
  for (const auto& [key, f] : feeds_) {
    f->add_stats(s);
  }
  return s;
}

Bridge::~Bridge() {
  origin_.set_presence_observer({});
  if (flush_timer_ != 0) {
    workers_.loop(self_).cancel(flush_timer_);
  }
  if (presence_timer_ != 0) {
    workers_.loop(self_).cancel(presence_timer_);
  }
  feeds_.clear();
  for (auto& [key, rb] : remote_) {
    rb->close_all();
    origin_.unannounce(key.first, rb.get());
  }
  remote_.clear();
}

void Bridge::publish_local(const std::string& path, bool active, const model::Hops& hops,
                           uint64_t cost) {
  if (active) {
    ++local_publishers_[path];
  } else {
    auto it = local_publishers_.find(path);
    if (it != local_publishers_.end() && --it->second > 0) {
      // Another local session still publishes it (its own switch ends or moves the feeds): the
      // other workers now reach it through the best route left here.
      for (const auto& r : origin_.routes(path)) {
        if (!is_remote(r.source)) {
          publish_route(path, r.hops, r.cost);
          break;
        }
      }
      return;
    }
    if (it != local_publishers_.end()) {
      local_publishers_.erase(it);
    }
  }
  if (active) {
    // The other workers reach the path through this worker's best local route.
    for (const auto& r : origin_.routes(path)) {
      if (!is_remote(r.source)) {
        publish_route(path, r.hops, r.cost);
        return;
      }
    }
  }
  post_announce(path, active, hops, cost);
}

void Bridge::refresh_local(const std::string& path) {
  if (local_publishers_.count(path) == 0) {
    return;
  }
  for (const auto& r : origin_.routes(path)) {
    if (!is_remote(r.source)) {
      publish_route(path, r.hops, r.cost);
      return;
    }
  }
}

void Bridge::publish_route(const std::string& path, const model::Hops& hops, uint64_t cost) {
  post_announce(path, true, hops, cost);
}

void Bridge::post_announce(const std::string& path, bool active, const model::Hops& hops,
                           uint64_t cost) {
  if (bridges_.size() < 2) {
    return;
  }
  pending_announces_[path] = PendingAnnounce{active, hops, cost};
  schedule_flush();
}

void Bridge::schedule_flush() {
  if (flush_timer_ == 0 && announce_acks_awaited_ == 0) {
    flush_timer_ = workers_.loop(self_).schedule(Duration::zero(), [this] {
      flush_timer_ = 0;
      flush_announces();
    });
  }
}

void Bridge::flush_announces() {
  if (announce_acks_awaited_ > 0) {
    return;  // the last batch is not acknowledged yet; on_announce_ack flushes again
  }
  std::map<std::string, PendingAnnounce> pending;
  while (!pending_announces_.empty() && pending.size() < kMaxAnnounceBatch) {
    pending.insert(pending_announces_.extract(pending_announces_.begin()));
  }
  std::vector<AnnounceChange> batch;
  for (auto& entry : pending) {
    const std::string& path = entry.first;
    const PendingAnnounce& p = entry.second;
    auto told = posted_active_.find(path);
    bool same = p.active ? told != posted_active_.end() && told->second.first == p.hops &&
                               told->second.second == p.cost
                         : told == posted_active_.end();
    if (same) {
      continue;  // the other workers already believe this
    }
    if (p.active) {
      posted_active_[path] = {p.hops, p.cost};
    } else {
      posted_active_.erase(told);
    }
    batch.push_back(AnnounceChange{path, p});
  }
  if (batch.empty()) {
    if (!pending_announces_.empty()) {
      schedule_flush();  // this slice changed nothing the others believe; the next may
    }
    return;
  }
  for (size_t i = 0; i < bridges_.size(); ++i) {
    if (i == self_) {
      continue;
    }
    Bridge* peer = bridges_[i];
    Bridge* home_bridge = this;
    size_t home = self_;
    ++announce_posts_;
    ++announce_acks_awaited_;
    post(i, [peer, home_bridge, home, batch] {
      for (const auto& c : batch) {
        peer->on_remote_announce(c.path, home, c.state.active, c.state.hops, c.state.cost);
      }
      peer->post(home, [home_bridge] { home_bridge->on_announce_ack(); });
    });
  }
}

void Bridge::on_announce_ack() {
  if (announce_acks_awaited_ > 0 && --announce_acks_awaited_ == 0 && !pending_announces_.empty()) {
    schedule_flush();
  }
}

void Bridge::on_local_presence(const std::string& path, bool present) {
  if (bridges_.size() < 2) {
    return;
  }
  pending_presence_[path] = present;
  if (presence_timer_ == 0) {
    presence_timer_ = workers_.loop(self_).schedule(Duration::zero(), [this] {
      presence_timer_ = 0;
      flush_presence();
    });
  }
}

void Bridge::flush_presence() {
  std::vector<std::pair<std::string, bool>> batch;
  for (auto& [path, present] : pending_presence_) {
    if (present == (posted_present_.count(path) != 0)) {
      continue;  // the other workers already believe this
    }
    if (present) {
      posted_present_.insert(path);
    } else {
      posted_present_.erase(path);
    }
    batch.emplace_back(path, present);
  }
  pending_presence_.clear();
  if (batch.empty()) {
    return;
  }
  for (size_t i = 0; i < bridges_.size(); ++i) {
    if (i == self_) {
      continue;
    }
    Bridge* peer = bridges_[i];
    size_t from = self_;
    ++presence_posts_;
    post(i, [peer, from, batch] { peer->on_remote_presence(from, batch); });
  }
}

void Bridge::on_remote_presence(size_t from,
                                const std::vector<std::pair<std::string, bool>>& changes) {
  for (const auto& [path, present] : changes) {
    auto it = present_elsewhere_.find(path);
    if (present) {
      if (it == present_elsewhere_.end()) {
        it = present_elsewhere_.emplace(path, std::set<size_t>{}).first;
        origin_.set_carried_elsewhere(path, true);
      }
      it->second.insert(from);
    } else if (it != present_elsewhere_.end() && it->second.erase(from) != 0 &&
               it->second.empty()) {
      present_elsewhere_.erase(it);
      origin_.set_carried_elsewhere(path, false);
    }
  }
}

bool Bridge::is_remote(const model::BroadcastSource* source) const {
  for (const auto& [key, rb] : remote_) {
    if (rb.get() == source) {
      return true;
    }
  }
  return false;
}

void Bridge::on_remote_announce(const std::string& path, size_t home, bool active, model::Hops hops,
                                uint64_t cost) {
  auto key = std::make_pair(path, home);
  auto it = remote_.find(key);
  if (active) {
    if (it == remote_.end()) {
      it = remote_.emplace(key, std::make_unique<RemoteBroadcast>(*this, home)).first;
    }
    origin_.announce(path, it->second.get(), std::move(hops), cost);
    return;
  }
  if (it == remote_.end()) {
    return;
  }
  it->second->close_all();
  origin_.unannounce(path, it->second.get());
  remote_.erase(it);
}

uint64_t Bridge::open_feed(size_t home, const std::string& path, const std::string& name,
                           model::Track& track) {
  uint64_t id = next_feed_id_++;
  inbound_[id] = Inbound{home, &track, {}};
  Bridge* peer = bridges_[home];
  size_t to = self_;
  uint8_t priority = track.priority().value_or(128);
  post(home, [peer, path, name, priority, to, id] { peer->on_open_feed(path, name, priority, to, id); });
  return id;
}

void Bridge::close_feed(size_t home, uint64_t id) {
  inbound_.erase(id);
  Bridge* peer = bridges_[home];
  size_t to = self_;
  post(home, [peer, to, id] { peer->on_close_feed(to, id); });
}

void Bridge::on_open_feed(const std::string& path, const std::string& name, uint8_t priority,
                          size_t to, uint64_t id) {
  model::Track* track = origin_.track(path, name);
  if (track != nullptr) {
    track->raise_priority(priority);
  }
  if (track == nullptr) {
    Bridge* peer = bridges_[to];
    post(to, [peer, id] { peer->on_feed_end(id, make_error(ErrorCode::kNotFound, "broadcast gone")); });
    return;
  }
  auto feed = std::make_unique<Feed>(*this, to, id, *track);
  Feed* raw = feed.get();
  feeds_[{to, id}] = std::move(feed);
  raw->pump();
}

void Bridge::on_close_feed(size_t to, uint64_t id) { feeds_.erase({to, id}); }

FeedBatch* Bridge::take_batch(size_t to, uint64_t id) {
  FeedBatch* b;
  if (!free_batches_.empty()) {
    b = free_batches_.back();
    free_batches_.pop_back();
  } else {
    batch_store_.push_back(std::make_unique<FeedBatch>());
    b = batch_store_.back().get();
    b->slot = batch_store_.size() - 1;
  }
  b->from = self_;
  b->to = to;
  b->id = id;
  b->bytes = 0;
  return b;
}

void Bridge::recycle_batch(FeedBatch* b) {
  b->events.clear();
  if (free_batches_.size() < kMaxPooledBatches) {
    free_batches_.push_back(b);
    return;
  }
  // Past a burst: free it (swap-remove from the store).
  size_t slot = b->slot;
  if (slot + 1 != batch_store_.size()) {
    std::swap(batch_store_[slot], batch_store_.back());
    batch_store_[slot]->slot = slot;
  }
  batch_store_.pop_back();
}

void Bridge::on_feed_ack(FeedBatch* batch) {
  const size_t to = batch->to;
  const uint64_t id = batch->id;
  const uint64_t bytes = batch->bytes;
  recycle_batch(batch);  // first: the ack may pump and post again
  auto it = feeds_.find({to, id});
  if (it != feeds_.end()) {
    it->second->ack(bytes);
  }
}

void Bridge::feed_finished(Feed* f) {
  auto key = std::make_pair(f->to(), f->id());
  workers_.loop(self_).defer([this, key, f] {
    auto it = feeds_.find(key);
    if (it != feeds_.end() && it->second.get() == f) {
      feeds_.erase(it);
    }
  });
}

void Bridge::on_feed_events(FeedBatch* batch) {
  const uint64_t id = batch->id;
  uint64_t bytes = 0;
  for (const auto& e : batch->events) {
    bytes += e.cost();
  }
  for (const auto& e : batch->events) {
    if (!apply_feed_event(id, e)) {
      break;  // closed meanwhile; the home worker drops the feed when it sees the close
    }
  }
  // Every event costs credit, so every batch is acknowledged; the home worker empties it.
  batch->bytes = bytes;
  Bridge* peer = bridges_[batch->from];
  // The ack returns credit: it can wait until this loop's iteration ends, so a home worker that
  // sleeps while this one works through a backlog is woken once per iteration, not per batch.
  post(batch->from, [peer, batch] { peer->on_feed_ack(batch); }, runtime::Workers::Wake::kDeferred);
}

bool Bridge::apply_feed_event(uint64_t id, const FeedEvent& e) {
  auto it = inbound_.find(id);
  if (it == inbound_.end()) {
    return false;
  }
  Inbound& in = it->second;
  model::Track& track = *in.track;
  if (e.kind == FeedEvent::Kind::kProperties) {
    track.set_properties(e.properties);
    return true;
  }
  const std::pair<uint64_t, uint64_t> key{e.sequence, e.subgroup};
  if (e.kind == FeedEvent::Kind::kGroup) {
    if (model::Group* g = track.begin_group(e.sequence, e.subgroup, e.has_extensions);
        g != nullptr) {
      in.groups[key] = model::GroupRef(g);
    }
    return true;
  }
  auto g = in.groups.find(key);
  if (g == in.groups.end()) {
    return true;  // a duplicate group this worker refused
  }
  model::GroupRef group = g->second;
  if (e.kind == FeedEvent::Kind::kGroupEnd || e.kind == FeedEvent::Kind::kGroupAbort) {
    in.groups.erase(g);
  }
  switch (e.kind) {
    case FeedEvent::Kind::kObject: {
      model::Track::IetfObject o;
      o.id = e.object_id;
      o.size = e.size;
      if (!e.extensions.empty()) {
        o.extensions = Bytes::copy(e.extensions.span());
      }
      o.extensions_draft = e.extensions_draft;
      o.timestamp = e.timestamp;
      o.lite_refused = e.lite_refused;
      track.begin_ietf_object(*group, std::move(o));
      break;
    }
    case FeedEvent::Kind::kChunk:
      ++chunks_copied_;
      chunk_bytes_copied_ += e.chunk.size();
      track.append_chunk(*group, Bytes::copy(e.chunk.span()));
      break;
    case FeedEvent::Kind::kGroupEnd:
      track.finish_group(*group);
      break;
    case FeedEvent::Kind::kGroupAbort:
      track.abort_group(*group);
      break;
    case FeedEvent::Kind::kGroup:
    case FeedEvent::Kind::kProperties:
      break;
  }
  return true;
}

void Bridge::on_feed_end(uint64_t id, Error reason) {
  auto it = inbound_.find(id);
  if (it == inbound_.end()) {
    return;
  }
  model::Track* track = it->second.track;
  inbound_.erase(it);
  track->end(reason);
}

}  // namespace moqd::relay
