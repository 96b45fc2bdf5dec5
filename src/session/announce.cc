// Announce streams in both directions.
#include <algorithm>

#include "base/log.h"
#include "model/path.h"
#include "session/handlers.h"

namespace moqd::session {

AnnounceResponder::AnnounceResponder(ServeContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

AnnounceResponder::~AnnounceResponder() { stop(); }

void AnnounceResponder::stop() {
  if (listening_) {
    session_.origin().remove_listener(this);
    listening_ = false;
    session_.remove_announce_stream();
  }
}

void AnnounceResponder::on_session_closed() {
  stop();
  StreamHandler::on_session_closed();
}

void AnnounceResponder::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  if (!full_prefix_) {
    auto please = read_message<wire::AnnouncePlease>([&](auto in) {
      return wire::decode_announce_please(*session_.version(), in, session_.config().decode);
    });
    if (!please) {
      return;
    }
    std::string full = session_.to_full(please->prefix);
    if (!session_.authorize(Action::kDiscover, full)) {
      MOQD_LOG(kInfo, "session %llu announce refused prefix=%s code=%u (unauthorized)",
               static_cast<unsigned long long>(session_.id()), full.c_str(),
               static_cast<unsigned>(ErrorCode::kUnauthorized));
      stream_->reset(static_cast<uint64_t>(ErrorCode::kUnauthorized));
      finish();
      return;
    }
    if (!session_.add_announce_stream()) {
      MOQD_LOG(kInfo, "session %llu announce refused prefix=%s code=%u (too many announce streams)",
               static_cast<unsigned long long>(session_.id()), full.c_str(),
               static_cast<unsigned>(ErrorCode::kBoundsExceeded));
      stream_->reset(static_cast<uint64_t>(ErrorCode::kBoundsExceeded));
      finish();
      return;
    }
    full_prefix_ = full;
    exclude_hop_ = please->exclude_hop;
    const wire::Version v = *session_.version();
    // lite-01/02 send the current set as ANNOUNCE_INIT; lite-05 counts it in ANNOUNCE_OK, which
    // comes first. Both collect it while add_listener() reports it.
    collecting_init_ = !wire::is_lite03_plus(v) || wire::is_lite05(v);
    listening_ = true;
    session_.origin().add_listener(full, this);
    if (collecting_init_) {
      collecting_init_ = false;
      std::vector<uint8_t> out;
      if (wire::is_lite05(v)) {
        wire::encode(v, wire::AnnounceOk{session_.config().hop_id, init_suffixes_.size()}, out);
        for (size_t i = 0; i < init_suffixes_.size(); ++i) {
          wire::encode(v, wire::Announce{true, init_suffixes_[i], std::move(init_hops_[i])}, out);
        }
        init_hops_.clear();
      } else {
        wire::encode(v, wire::AnnounceInit{std::move(init_suffixes_)}, out);
      }
      init_suffixes_.clear();
      write_bytes(std::move(out));
    }
  }
  if (stream_ == nullptr) {
    return;
  }
  // Nothing more is expected from the peer; its FIN ends the stream.
  stream_->consume(stream_->peek().size());
  if (stream_->is_fin_received()) {
    stop();
    stream_->finish();
    finish();
  }
}

void AnnounceResponder::on_announce(const std::string& path, bool active, const model::Hops& hops) {
  if (stream_ == nullptr || !full_prefix_) {
    return;
  }
  auto suffix = model::strip_prefix(*full_prefix_, path);
  if (!suffix) {
    return;
  }
  // Paths the peer may not subscribe to are not revealed (ended ones were never sent).
  if (active && !session_.authorize(Action::kSee, path)) {
    return;
  }
  // Split horizon: never announce a broadcast back to the peer it came from. (A switch to another
  // publisher arrives as ended-then-active, so the check on active is enough.)
  if (active && session_.origin().active_source(path) == session_.peer_source()) {
    return;
  }
  // A route that already crossed the peer would be a loop there: the peer asked not to get it
  // (lite-04 exclude_hop), and withdrawing it, if it was sent, is what it must hear instead.
  if (active && exclude_hop_ != 0 && model::hops_contain(hops, exclude_hop_)) {
    active = false;
  }
  auto sent = active_.find(path);
  if (!active && sent == active_.end()) {
    return;
  }
  wire::Announce m;
  m.suffix = std::string(*suffix);
  std::vector<uint8_t> out;
  if (!active) {
    active_.erase(sent);
    m.active = false;
  } else {
    m.active = true;
    m.hops = wire_hops(path, hops);
    if (sent != active_.end()) {
      // Already announced with other hops: only a relay hears the change (a client has no use
      // for it, and a lite-05 client would take a second active for a restart), as ended then
      // active in one write, which a relay applies as one change.
      if (sent->second == m.hops || !is_relay_peer()) {
        return;
      }
      sent->second = m.hops;
      if (session_.config().traffic != nullptr) {
        session_.config().traffic->announce_updates_sent.add();
      }
      wire::encode(*session_.version(), wire::Announce{false, m.suffix, {}}, out);
    } else {
      active_.emplace(path, m.hops);
    }
  }
  if (collecting_init_) {
    // Each path alternates active/ended; while collecting, only actives come.
    init_suffixes_.emplace_back(*suffix);
    init_hops_.push_back(hops);
    return;
  }
  MOQD_LOG(kDebug, "session %llu announce %s %s", static_cast<unsigned long long>(session_.id()),
           active ? "active" : "ended", path.c_str());
  wire::encode(*session_.version(), m, out);
  send(std::move(out));
}

bool AnnounceResponder::is_relay_peer() const {
  return exclude_hop_ != 0 && session_.is_relay_link();
}

void AnnounceResponder::on_carrying(const std::string& path, const model::Hops& hops, bool) {
  if (is_relay_peer() && active_.count(path) != 0) {
    on_announce(path, true, hops);
  }
}

model::Hops AnnounceResponder::wire_hops(const std::string& path, const model::Hops& hops) const {
  model::Hops out = hops;
  const uint64_t self = session_.config().hop_id;
  // lite-04 appends our own hop to every route; lite-05 names it once, in ANNOUNCE_OK.
  if (self != 0 && !wire::is_lite05(*session_.version())) {
    const bool warm = is_relay_peer() && session_.origin().is_carrying(path);
    out.push_back(warm ? (self | model::kWarmHop) : self);
  }
  return out;
}

void AnnounceResponder::send(std::vector<uint8_t> out) {
  // A listener that stops reading would make us queue every change for it: past the bound its
  // stream is reset and no longer listens. (The session goes on: @moq/lite 0.2.2 leaves the
  // stream of a closed announced() open and unread, so a viewer may hold one without fault.)
  if (stream_->buffered() + out.size() > session_.config().limits.max_announce_buffer) {
    MOQD_LOG(kInfo, "session %llu announce stream reset prefix=%s code=%u (listener not reading: "
             "over --max-announce-buffer)", static_cast<unsigned long long>(session_.id()),
             full_prefix_->c_str(), static_cast<unsigned>(ErrorCode::kBoundsExceeded));
    stop();
    stream_->reset(static_cast<uint64_t>(ErrorCode::kBoundsExceeded));
    finish();
    return;
  }
  write_bytes(std::move(out));
}

AnnounceRequester::AnnounceRequester(PeerContext& s, transport::Stream& stream, std::string prefix)
    : HandlerOf(s), prefix_(model::normalize_path(prefix)) {
  attach(stream);
  std::vector<uint8_t> out;
  out.push_back(static_cast<uint8_t>(wire::BidiType::kAnnounce));
  wire::encode(*s.version(), wire::AnnouncePlease{prefix_, s.config().hop_id}, out);
  write_bytes(std::move(out));
}

AnnounceRequester::~AnnounceRequester() { session_.timers().cancel(flush_timer_); }

void AnnounceRequester::on_session_closed() {
  session_.timers().cancel(flush_timer_);
  flush_timer_ = 0;
  paths_.reset();  // the session withdraws everything the peer announced
  StreamHandler::on_session_closed();
}

void AnnounceRequester::on_readable() {
  const wire::Version v = *session_.version();
  while (stream_ != nullptr && !stream_->peek().empty()) {
    if (wire::is_lite05(v) && !got_init_) {
      auto ok = read_message<wire::AnnounceOk>([&](auto in) {
        return wire::decode_announce_ok(v, in, session_.config().decode);
      });
      if (!ok) {
        return;
      }
      got_init_ = true;
      responder_hop_ = ok->hop_id;
      continue;
    }
    if (!wire::is_lite03_plus(v) && !got_init_) {
      auto init = read_message<wire::AnnounceInit>([&](auto in) {
        return wire::decode_announce_init(v, in, session_.config().decode);
      });
      if (!init) {
        return;
      }
      got_init_ = true;
      for (const auto& suffix : init->suffixes) {
        apply(suffix, true, {});
      }
      continue;
    }
    auto m = read_message<wire::Announce>([&](auto in) {
      return wire::decode_announce(v, in, session_.config().decode);
    });
    if (!m) {
      return;
    }
    if (responder_hop_ != 0 && m->active) {
      // lite-05: the responder is the route's last hop. Its ANNOUNCE_OK names the relay, never a
      // warm copy (moqd marks warmth only on lite-04's appended hop), so a warm bit there is
      // cleared.
      m->hops.push_back(model::hop_relay(responder_hop_));
    }
    apply(m->suffix, m->active, std::move(m->hops));
  }
  if (stream_ != nullptr && stream_->is_fin_received()) {
    withdraw_all();
    stream_->finish();
    finish();
  }
}

void AnnounceRequester::apply(const std::string& suffix, bool active, model::Hops hops) {
  std::string full = session_.to_full(model::join_path(prefix_, suffix));
  // A route that already crossed this relay is a loop: it is not a way to the broadcast, so it
  // counts as withdrawn (if it replaced a good route, that one was withdrawn first).
  const uint64_t self = session_.config().hop_id;
  if (active && self != 0 && model::hops_contain(hops, self)) {
    MOQD_LOG(kDebug, "session %llu loop: announcement of %s already crossed this relay",
             static_cast<unsigned long long>(session_.id()), full.c_str());
    if (session_.config().traffic != nullptr) {
      session_.config().traffic->announces_looped.add();
    }
    active = false;
  }
  MOQD_LOG(kDebug, "session %llu peer announced %s %s", static_cast<unsigned long long>(session_.id()),
           active ? "active" : "ended", full.c_str());
  if (active && !session_.authorize(Action::kPublish, full)) {
    MOQD_LOG(kInfo, "session %llu publish refused path=%s code=%u (unauthorized)",
             static_cast<unsigned long long>(session_.id()), full.c_str(),
             static_cast<unsigned>(ErrorCode::kUnauthorized));
    return;
  }
  if (active) {
    if (paths_ == nullptr) {
      paths_ = std::make_unique<Paths>();
    }
    // Ended then active within the grace: an update of the route.
    if (paths_->withdrawing.erase(full) != 0 && session_.config().traffic != nullptr) {
      session_.config().traffic->announce_updates_received.add();
    }
    paths_->active.insert(full);
    if (hops.empty()) {
      paths_->hopped.erase(full);
    } else {
      paths_->hopped.insert(full);
    }
  } else if (paths_ == nullptr || paths_->active.count(full) == 0) {
    return;
  } else if (session_.is_relay_link() && paths_->hopped.count(full) != 0) {
    paths_->withdrawing.insert(full);
    if (flush_timer_ == 0) {
      flush_timer_ = session_.timers().schedule(kUpdateGrace, [this] {
        flush_timer_ = 0;
        flush_withdrawals();
      });
    }
    return;
  } else {
    paths_->active.erase(full);
    paths_->hopped.erase(full);
  }
  session_.announce_from_peer(full, active, hops);
}

void AnnounceRequester::flush_withdrawals() {
  if (paths_ == nullptr) {
    return;
  }
  auto withdrawing = std::move(paths_->withdrawing);
  paths_->withdrawing.clear();
  for (const auto& full : withdrawing) {
    // announce_from_peer may close the session, which frees paths_ (on_session_closed).
    if (paths_ == nullptr) {
      return;
    }
    paths_->hopped.erase(full);
    if (paths_->active.erase(full) != 0) {
      session_.announce_from_peer(full, false, {});
    }
  }
}

void AnnounceRequester::withdraw_all() {
  session_.timers().cancel(flush_timer_);
  flush_timer_ = 0;
  if (paths_ == nullptr) {
    return;
  }
  auto active = std::move(paths_->active);
  paths_.reset();
  for (const auto& full : active) {
    session_.announce_from_peer(full, false, {});
  }
}

void AnnounceRequester::on_reset(uint64_t) {
  withdraw_all();
  finish();
}

}  // namespace moqd::session
