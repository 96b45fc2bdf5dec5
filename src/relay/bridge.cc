#include "relay/bridge.h"

#include <algorithm>

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

// Serves one track of this worker to another worker.
class Feed final : public model::TrackListener {
 public:
  Feed(Bridge& bridge, size_t to, uint64_t id, model::Track& track)
      : bridge_(bridge), to_(to), id_(id), track_(&track) {
    next_arrival_ = track.late_join_arrival();
    track.add_listener(this);
  }
  ~Feed() override {
    if (track_ != nullptr) {
      track_->remove_listener(this);
    }
  }

  void on_track_data(model::Track&) override { pump(); }
  void on_track_ended(model::Track&, Error reason) override {
    track_ = nullptr;
    pump_cursors();  // flush what is still buffered in open groups
    Bridge* peer = &bridge_.peer(to_);
    uint64_t id = id_;
    bridge_.post(to_, [peer, id, reason] { peer->on_feed_end(id, reason); });
    bridge_.feed_finished(this);
  }
  void ack(uint64_t bytes) {
    in_flight_ -= std::min(in_flight_, bytes);
    pump();
  }
  size_t to() const { return to_; }
  uint64_t id() const { return id_; }

  void pump() {
    if (track_ != nullptr) {
      for (auto& g : track_->groups_from(next_arrival_)) {
        events_.push_back({FeedEvent::Kind::kGroup, g->sequence(), 0, Bytes()});
        cursors_.emplace_back(std::move(g));
      }
      next_arrival_ = track_->next_arrival();
    }
    pump_cursors();
  }

 private:
  void pump_cursors() {
    for (auto& c : cursors_) {
      if (!drain(c)) {
        break;
      }
    }
    flush();
  }
  // Emits what `c` has; false once out of credit.
  bool drain(model::GroupCursor& c) {
    uint64_t seq = c.group()->sequence();
    for (;;) {
      if (in_flight_ >= Bridge::kMaxInFlightBytes) {
        return false;
      }
      auto step = c.peek(Bridge::kMaxInFlightBytes - in_flight_);
      switch (step.kind) {
        case model::GroupCursor::Kind::kNothing:
          return true;
        case model::GroupCursor::Kind::kObjectStart:
          events_.push_back({FeedEvent::Kind::kObject, seq, step.object->size, Bytes()});
          break;
        case model::GroupCursor::Kind::kChunk:
          in_flight_ += step.chunk.size();
          // The one copy per receiving core: the receiver owns it outright.
          events_.push_back({FeedEvent::Kind::kChunk, seq, 0, Bytes::copy(step.chunk.span())});
          break;
        case model::GroupCursor::Kind::kEnd:
          events_.push_back({FeedEvent::Kind::kGroupEnd, seq, 0, Bytes()});
          c.advance(step);
          done_.push_back(seq);
          return true;
        case model::GroupCursor::Kind::kAborted:
          events_.push_back({FeedEvent::Kind::kGroupAbort, seq, 0, Bytes()});
          c.advance(step);
          done_.push_back(seq);
          return true;
      }
      c.advance(step);
    }
  }
  void flush() {
    if (!done_.empty()) {
      std::erase_if(cursors_, [this](const model::GroupCursor& c) {
        return std::find(done_.begin(), done_.end(), c.group()->sequence()) != done_.end();
      });
      done_.clear();
    }
    if (events_.empty()) {
      return;
    }
    Bridge* peer = &bridge_.peer(to_);
    uint64_t id = id_;
    bridge_.post(to_, [peer, id, events = std::move(events_)]() mutable {
      peer->on_feed_events(id, std::move(events));
    });
    events_.clear();
  }

  Bridge& bridge_;
  size_t to_;
  uint64_t id_;
  model::Track* track_;
  uint64_t next_arrival_ = 0;
  uint64_t in_flight_ = 0;
  std::vector<model::GroupCursor> cursors_;
  std::vector<FeedEvent> events_;
  std::vector<uint64_t> done_;
};

Bridge::Bridge(size_t self, runtime::Workers& workers, model::Origin& origin,
               const std::vector<Bridge*>& bridges)
    : self_(self), workers_(workers), origin_(origin), bridges_(bridges) {}

Bridge::~Bridge() {
  feeds_.clear();
  for (auto& [key, rb] : remote_) {
    rb->close_all();
    origin_.unannounce(key.first, rb.get());
  }
  remote_.clear();
}

void Bridge::publish_local(const std::string& path, bool active, uint64_t hops) {
  if (active) {
    ++local_publishers_[path];
  } else {
    auto it = local_publishers_.find(path);
    if (it != local_publishers_.end() && --it->second > 0) {
      return;  // another local session still publishes it; its own switch ends the feeds
    }
    if (it != local_publishers_.end()) {
      local_publishers_.erase(it);
    }
  }
  for (size_t i = 0; i < bridges_.size(); ++i) {
    if (i == self_) {
      continue;
    }
    Bridge* peer = bridges_[i];
    size_t home = self_;
    post(i, [peer, path, home, active, hops] { peer->on_remote_announce(path, home, active, hops); });
  }
}

void Bridge::on_remote_announce(const std::string& path, size_t home, bool active, uint64_t hops) {
  auto key = std::make_pair(path, home);
  auto it = remote_.find(key);
  if (active) {
    if (it == remote_.end()) {
      it = remote_.emplace(key, std::make_unique<RemoteBroadcast>(*this, home)).first;
    }
    origin_.announce(path, it->second.get(), hops);
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

void Bridge::on_feed_ack(size_t to, uint64_t id, uint64_t bytes) {
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

void Bridge::on_feed_events(uint64_t id, std::vector<FeedEvent> events) {
  auto it = inbound_.find(id);
  if (it == inbound_.end()) {
    return;  // closed meanwhile; the home worker drops the feed when it sees the close
  }
  Inbound& in = it->second;
  model::Track& track = *in.track;
  uint64_t bytes = 0;
  for (auto& e : events) {
    if (e.kind == FeedEvent::Kind::kGroup) {
      if (model::Group* g = track.begin_group(e.sequence); g != nullptr) {
        in.groups[e.sequence] = model::GroupRef(g);
      }
      continue;
    }
    auto g = in.groups.find(e.sequence);
    if (e.kind == FeedEvent::Kind::kChunk) {
      bytes += e.chunk.size();
    }
    if (g == in.groups.end()) {
      continue;  // a duplicate group this worker refused
    }
    model::GroupRef group = g->second;
    if (e.kind == FeedEvent::Kind::kGroupEnd || e.kind == FeedEvent::Kind::kGroupAbort) {
      in.groups.erase(g);
    }
    switch (e.kind) {
      case FeedEvent::Kind::kObject:
        track.begin_object(*group, e.size);
        break;
      case FeedEvent::Kind::kChunk:
        track.append_chunk(*group, std::move(e.chunk));
        break;
      case FeedEvent::Kind::kGroupEnd:
        track.finish_group(*group);
        break;
      case FeedEvent::Kind::kGroupAbort:
        track.abort_group(*group);
        break;
      case FeedEvent::Kind::kGroup:
        break;
    }
    if (inbound_.find(id) == inbound_.end()) {
      return;  // a listener callback closed the feed
    }
  }
  if (bytes > 0) {
    Bridge* peer = bridges_[in.home];
    size_t to = self_;
    post(in.home, [peer, to, id, bytes] { peer->on_feed_ack(to, id, bytes); });
  }
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
