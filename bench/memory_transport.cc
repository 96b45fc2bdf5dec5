#include "memory_transport.h"

#include <algorithm>
#include <utility>

namespace moqd::bench {

// --- MemoryNet ---

void MemoryNet::post(const Event& e) {
  events_.push_back(e);
  if (!scheduled_) {
    scheduled_ = true;
    loop_.defer([this] { run(); });
  }
}

void MemoryNet::run() {
  // Callbacks may post more events: they are delivered in this same run, in order.
  while (!events_.empty()) {
    std::swap(events_, running_);
    for (const Event& e : running_) {
      dispatch(e);
    }
    running_.clear();
  }
  scheduled_ = false;
}

void MemoryNet::dispatch(const Event& e) {
  if (e.kind == Kind::kClosed) {
    e.session->on_closed_event(e.code);
    return;
  }
  MemoryStream* s = e.stream;
  if (!s->in_use_ || s->generation_ != e.generation || s->owner_.closed_) {
    return;  // released (and maybe recycled) since, or its session closed
  }
  switch (e.kind) {
    case Kind::kIncoming:
      if (s->owner_.visitor_ != nullptr) {
        s->owner_.visitor_->on_incoming_stream(*s);
      }
      break;
    case Kind::kReadable:
      s->readable_queued_ = false;
      if (s->visitor_ != nullptr) {
        s->visitor_->on_readable();
      }
      break;
    case Kind::kReset:
      if (s->visitor_ != nullptr) {
        s->visitor_->on_reset(e.code);
      }
      break;
    case Kind::kStopSending:
      if (s->visitor_ != nullptr) {
        s->visitor_->on_stop_sending(e.code);
      }
      break;
    case Kind::kClosed:
      break;
  }
}

// --- MemoryStream ---

void MemoryStream::open(transport::StreamId id) {
  id_ = id;
  in_use_ = true;
  visitor_ = nullptr;
  peer_ = nullptr;
  sink_ = nullptr;
  recv_.drop();
  peer_fin_ = false;
  readable_queued_ = false;
  stopped_ = false;
  send_done_ = false;
  send_order_ = 0;
  parse_ = Parse::kType;
  skip_ = 0;
  varint_len_ = 0;
  varint_have_ = 0;
  varint_ = 0;
}

std::span<const uint8_t> MemoryStream::peek() const { return recv_.peek(); }

void MemoryStream::consume(size_t n) { recv_.consume(n); }

void MemoryStream::notify_peer(MemoryNet::Kind kind, uint64_t code) {
  MemoryStream* p = peer_;
  if (kind == MemoryNet::Kind::kReadable) {
    if (p->readable_queued_) {
      return;
    }
    p->readable_queued_ = true;
  }
  owner_.net_.post({kind, p, p->generation_, nullptr, code});
}

void MemoryStream::deliver(std::span<const uint8_t> data) {
  if (stopped_) {
    return;  // we asked the peer to stop: what it still sends is discarded
  }
  recv_.append(data);
}

void MemoryStream::write(Bytes data) {
  if (send_done_ || owner_.closed_ || data.empty()) {
    return;
  }
  owner_.bytes_sent_ += data.size();
  if (sink_ != nullptr) {
    sink_bytes(data.span());
    return;
  }
  if (peer_ != nullptr) {
    peer_->deliver(data.span());
    notify_peer(MemoryNet::Kind::kReadable);
  }
}

void MemoryStream::write_pair(Bytes first, Bytes second) {
  if (send_done_ || owner_.closed_) {
    return;
  }
  owner_.bytes_sent_ += first.size() + second.size();
  if (sink_ != nullptr) {
    sink_bytes(first.span());
    sink_bytes(second.span());
    return;
  }
  if (peer_ != nullptr) {
    peer_->deliver(first.span());
    peer_->deliver(second.span());
    notify_peer(MemoryNet::Kind::kReadable);
  }
}

void MemoryStream::finish() {
  if (send_done_ || owner_.closed_) {
    return;
  }
  send_done_ = true;
  if (sink_ != nullptr) {
    ++sink_->groups_;
    sink_->on_group_end();
    return;
  }
  if (peer_ != nullptr) {
    peer_->peer_fin_ = true;
    notify_peer(MemoryNet::Kind::kReadable);
  }
}

void MemoryStream::reset(uint64_t code) {
  if (send_done_ || owner_.closed_) {
    return;
  }
  send_done_ = true;
  if (sink_ != nullptr) {
    ++sink_->resets_;
    return;
  }
  if (peer_ != nullptr) {
    peer_->recv_.drop();
    notify_peer(MemoryNet::Kind::kReset, code);
  }
}

void MemoryStream::stop_sending(uint64_t code) {
  if (stopped_ || owner_.closed_) {
    return;
  }
  stopped_ = true;
  recv_.drop();
  // As QUIC does: the peer's send side is reset with the same code, then the peer hears of it.
  if (peer_ != nullptr && !peer_->send_done_) {
    peer_->send_done_ = true;
    notify_peer(MemoryNet::Kind::kStopSending, code);
  }
}

void MemoryStream::release() {
  if (!in_use_) {
    return;
  }
  visitor_ = nullptr;
  // transport.h: an unfinished send side is reset with 0, an unfinished receive side gets
  // STOP_SENDING 0.
  const bool local = transport::is_server_initiated(id_) == owner_.server_;
  const bool can_send = !transport::is_uni(id_) || local;
  const bool can_receive = !transport::is_uni(id_) || !local;
  if (can_send && !send_done_) {
    reset(0);
  }
  if (can_receive && !peer_fin_ && !stopped_) {
    stop_sending(0);
  }
  if (peer_ != nullptr) {
    peer_->peer_ = nullptr;
    peer_ = nullptr;
  }
  owner_.recycle(this);
}

bool MemoryStream::read_varint(std::span<const uint8_t>& data, uint64_t& out) {
  if (varint_have_ == 0) {
    varint_len_ = static_cast<uint8_t>(1u << (data[0] >> 6));
    varint_ = data[0] & 0x3f;
    varint_have_ = 1;
    data = data.subspan(1);
  }
  while (varint_have_ < varint_len_ && !data.empty()) {
    varint_ = (varint_ << 8) | data[0];
    ++varint_have_;
    data = data.subspan(1);
  }
  if (varint_have_ < varint_len_) {
    return false;
  }
  out = varint_;
  varint_have_ = 0;
  return true;
}

// A group stream (moq-lite): the 0x00 type byte, the size-prefixed GROUP header, then FRAMEs
// (varint size, payload). Payload bytes are counted, never read.
void MemoryStream::sink_bytes(std::span<const uint8_t> data) {
  GroupStreamSink& s = *sink_;
  s.bytes_ += data.size();
  // At a frame boundary, FRAMEs whose size varint lies whole in `data` are counted without the
  // byte-at-a-time state machine below (what a relay writes: a header with its payload, or a
  // header alone); the rest, and a varint split across writes, go through it.
  const uint8_t* p = data.data();
  const uint8_t* const end = p + data.size();
  while (parse_ == Parse::kFrameSize && varint_have_ == 0 && p < end) {
    const size_t len = size_t{1} << (*p >> 6);
    if (static_cast<size_t>(end - p) < len) {
      break;
    }
    uint64_t v = *p & 0x3f;
    for (size_t i = 1; i < len; ++i) {
      v = (v << 8) | p[i];
    }
    p += len;
    ++s.frames_;
    const size_t left = static_cast<size_t>(end - p);
    if (v > left) {
      s.payload_bytes_ += left;
      skip_ = v - left;
      parse_ = Parse::kPayload;
      return;
    }
    s.payload_bytes_ += v;
    p += v;
  }
  data = data.subspan(static_cast<size_t>(p - data.data()));
  while (!data.empty()) {
    uint64_t v = 0;
    switch (parse_) {
      case Parse::kType:
        data = data.subspan(1);
        parse_ = Parse::kHeaderSize;
        break;
      case Parse::kHeaderSize:
        if (!read_varint(data, v)) {
          return;
        }
        skip_ = v;
        parse_ = v > 0 ? Parse::kSkipHeader : Parse::kFrameSize;
        break;
      case Parse::kSkipHeader:
      case Parse::kPayload: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, data.size()));
        if (parse_ == Parse::kPayload) {
          s.payload_bytes_ += n;
        }
        skip_ -= n;
        data = data.subspan(n);
        if (skip_ == 0) {
          parse_ = Parse::kFrameSize;
        }
        break;
      }
      case Parse::kFrameSize:
        if (!read_varint(data, v)) {
          return;
        }
        ++s.frames_;
        skip_ = v;
        parse_ = v > 0 ? Parse::kPayload : Parse::kFrameSize;
        break;
    }
  }
}

// --- MemorySession ---

MemorySession::MemorySession(MemoryNet& net, bool server, std::string protocol)
    : net_(net), server_(server), protocol_(std::move(protocol)) {}

MemorySession::~MemorySession() {
  for (auto& s : streams_) {
    if (s->peer_ != nullptr) {
      s->peer_->peer_ = nullptr;
    }
  }
  if (peer_ != nullptr) {
    peer_->peer_ = nullptr;
  }
  auto mine = [this](const MemoryNet::Event& e) {
    return e.session == this || (e.stream != nullptr && &e.stream->owner_ == this);
  };
  std::erase_if(net_.events_, mine);
}

void MemorySession::connect(MemorySession& a, MemorySession& b) {
  a.peer_ = &b;
  b.peer_ = &a;
}

MemoryStream* MemorySession::acquire() {
  if (free_.empty()) {
    streams_.push_back(std::make_unique<MemoryStream>(*this));
    return streams_.back().get();
  }
  MemoryStream* s = free_.back();
  free_.pop_back();
  return s;
}

void MemorySession::recycle(MemoryStream* s) {
  s->in_use_ = false;
  ++s->generation_;
  free_.push_back(s);
}

MemoryStream* MemorySession::open(bool uni) {
  if (closed_ || peer_ == nullptr || peer_->closed_) {
    return nullptr;
  }
  uint64_t seq = uni ? next_uni_++ : next_bidi_++;
  transport::StreamId id = (seq << 2) | (uni ? 2u : 0u) | (server_ ? 1u : 0u);
  MemoryStream* s = acquire();
  s->open(id);
  if (uni && peer_->uni_sink_ != nullptr) {
    s->sink_ = peer_->uni_sink_;
    return s;
  }
  MemoryStream* p = peer_->acquire();
  p->open(id);
  s->peer_ = p;
  p->peer_ = s;
  net_.post({MemoryNet::Kind::kIncoming, p, p->generation_, nullptr, 0});
  return s;
}

void MemorySession::close(uint64_t code, std::string_view) {
  if (closed_) {
    return;
  }
  net_.post({MemoryNet::Kind::kClosed, nullptr, 0, this, code});
  if (peer_ != nullptr) {
    net_.post({MemoryNet::Kind::kClosed, nullptr, 0, peer_, code});
  }
}

void MemorySession::on_closed_event(uint64_t code) {
  if (closed_) {
    return;
  }
  closed_ = true;
  if (visitor_ != nullptr) {
    visitor_->on_closed(code, "closed");
  }
}

}  // namespace moqd::bench
