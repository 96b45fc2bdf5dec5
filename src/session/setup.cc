// Stream dispatch, the compat SETUP exchange and the PROBE stream.
#include "base/log.h"
#include "session/handlers.h"

namespace moqd::session {
namespace {

// The versions a CLIENT_SETUP may select: lite-01/02 only. lite-03/04 are chosen by ALPN or
// WebTransport protocol, and selecting them here breaks @moq/lite (protocol/README.md §2.4).
constexpr wire::Version kSetupVersions[] = {wire::Version::kLite02, wire::Version::kLite01};

bool is_setup_version(wire::Version v) {
  for (auto s : kSetupVersions) {
    if (s == v) {
      return true;
    }
  }
  return false;
}

}  // namespace

PendingStream::PendingStream(LiteContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

void PendingStream::on_readable() {
  if (stream_ == nullptr || session_.is_admission_pending()) {
    return;
  }
  auto data = stream_->peek();
  if (data.empty()) {
    if (stream_->is_fin_received()) {
      finish();
    }
    return;
  }
  transport::Stream& stream = *stream_;
  const bool ready = session_.version().has_value();
  if (stream.is_uni()) {
    if (!ready) {
      return;  // held until SETUP completes (on_session_ready): loss can reorder streams
    }
    // Up to lite-04 the type is one raw byte; lite-05 reads a varint (NET-0.3.md §3.1).
    uint64_t uni_type = data[0];
    size_t type_size = 1;
    if (wire::is_lite05(*session_.version())) {
      auto t = wire::decode_stream_type(data);
      if (!t) {
        session_.fail(t.error());
        return;
      }
      if (!t->has_value()) {
        return;
      }
      uni_type = (*t)->value;
      type_size = (*t)->consumed;
    }
    const bool setup = wire::is_lite05(*session_.version()) &&
                       uni_type == static_cast<uint64_t>(wire::UniType::kSetup);
    if (uni_type != static_cast<uint64_t>(wire::UniType::kGroup) && !setup) {
      stream.stop_sending(static_cast<uint64_t>(ErrorCode::kUnexpectedStream));
      finish();
      return;
    }
    stream.consume(type_size);
    stream_ = nullptr;
    session_.retire(this);
    if (setup) {
      if (!session_.note_peer_setup_stream()) {
        session_.fail(make_error(ErrorCode::kProtocolViolation, "second SETUP stream"));
        return;
      }
      session_.make<LiteSetupReceiver>(stream)->on_readable();
      return;
    }
    session_.make<GroupReceiver>(stream)->on_readable();
    return;
  }
  auto type = wire::decode_stream_type(data);
  if (!type) {
    session_.fail(type.error());
    return;
  }
  if (!type->has_value()) {
    return;
  }
  uint64_t t = (*type)->value;
  if (!ready) {
    if (t != static_cast<uint64_t>(wire::BidiType::kClientSetup) ||
        session_.config().role != Role::kServer) {
      // The peer's SETUP (or its answer) is still on its way: a stream opened after it can
      // overtake it when a packet is lost. Held, unread, until SETUP completes; a peer that never
      // sends one is closed by the setup timeout.
      return;
    }
    stream_ = nullptr;
    session_.retire(this);
    session_.make<SetupServer>(stream)->on_readable();
    return;
  }
  stream.consume((*type)->consumed);
  stream_ = nullptr;
  session_.retire(this);
  const bool lite03 = wire::is_lite03_plus(*session_.version());
  switch (static_cast<wire::BidiType>(t)) {
    case wire::BidiType::kAnnounce:
      session_.make<AnnounceResponder>(stream)->on_readable();
      return;
    case wire::BidiType::kSubscribe:
      session_.make<Subscription>(stream)->on_readable();
      return;
    case wire::BidiType::kProbe:
      if (lite03) {
        session_.make<ProbeHolder>(stream)->on_readable();
        return;
      }
      break;
    case wire::BidiType::kGoaway:
      if (wire::is_lite04_plus(*session_.version()) && session_.config().role == Role::kClient) {
        session_.make<GoawayStream>(stream, true)->on_readable();
        return;
      }
      break;
    case wire::BidiType::kTrack:
      if (wire::is_lite05(*session_.version())) {
        session_.make<TrackResponder>(stream)->on_readable();
        return;
      }
      break;
    case wire::BidiType::kFetch:
      if (wire::is_lite05(*session_.version())) {
        session_.make<FetchResponder>(stream)->on_readable();
        return;
      }
      break;
    case wire::BidiType::kClientSetup:
      session_.fail(make_error(ErrorCode::kProtocolViolation, "second SETUP"));
      return;
    default:
      break;
  }
  stream.reset(static_cast<uint64_t>(ErrorCode::kUnexpectedStream));
  stream.stop_sending(static_cast<uint64_t>(ErrorCode::kUnexpectedStream));
  stream.release();
}

SetupServer::SetupServer(ControlContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

void SetupServer::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  if (!done_) {
    auto setup = read_message<wire::ClientSetup>([&](auto in) {
      return wire::decode_client_setup(in, session_.config().decode);
    });
    if (!setup) {
      return;
    }
    std::optional<wire::Version> chosen;
    for (uint64_t offered : setup->versions) {
      auto v = wire::version_from_wire(offered);
      if (v && is_setup_version(*v) && session_.config().versions.contains(*v)) {
        chosen = v;
        break;
      }
    }
    if (!chosen) {
      session_.fail(make_error(ErrorCode::kVersion, "no common version"));
      return;
    }
    std::vector<uint8_t> out;
    wire::encode(wire::ServerSetup{static_cast<uint64_t>(*chosen), {}}, out);
    write_bytes(std::move(out));
    done_ = true;
    session_.on_setup_complete(*chosen);
  }
  // SESSION_INFO messages may follow; they carry nothing moqd uses.
  while (stream_ != nullptr && !stream_->peek().empty()) {
    auto info = read_message<wire::SessionInfo>([&](auto in) {
      return wire::decode_session_info(*session_.version(), in, session_.config().decode);
    });
    if (!info) {
      return;
    }
  }
}

void SetupServer::on_reset(uint64_t) {
  session_.fail(make_error(ErrorCode::kProtocolViolation, "session stream reset"));
}

SetupClient::SetupClient(ControlContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
  wire::ClientSetup setup;
  for (auto v : kSetupVersions) {
    if (s.config().versions.contains(v)) {
      setup.versions.push_back(static_cast<uint64_t>(v));
    }
  }
  setup.parameters.push_back(wire::SetupParameter{7, 0, "moqd"});  // Implementation
  std::vector<uint8_t> out;
  wire::encode(setup, out);
  write_bytes(std::move(out));
}

void SetupClient::on_readable() {
  if (stream_ == nullptr || done_) {
    if (stream_ != nullptr) {
      stream_->consume(stream_->peek().size());
    }
    return;
  }
  auto setup = read_message<wire::ServerSetup>([&](auto in) {
    return wire::decode_server_setup(in, session_.config().decode);
  });
  if (!setup) {
    return;
  }
  auto v = wire::version_from_wire(setup->version);
  if (!v || !is_setup_version(*v) || !session_.config().versions.contains(*v)) {
    session_.fail(make_error(ErrorCode::kVersion, "server selected an unsupported version"));
    return;
  }
  done_ = true;
  session_.on_setup_complete(*v);
}

void SetupClient::on_reset(uint64_t) {
  session_.fail(make_error(ErrorCode::kProtocolViolation, "session stream reset"));
}

LiteSetupReceiver::LiteSetupReceiver(ControlContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

void LiteSetupReceiver::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  if (!done_) {
    auto setup = read_message<wire::LiteSetup>([&](auto in) {
      return wire::decode_lite_setup(*session_.version(), in, session_.config().decode);
    });
    if (!setup) {
      return;
    }
    done_ = true;
    session_.set_peer_hop_id(setup->varint(wire::LiteSetup::kOrigin).value_or(0));
  }
  // SETUP is the stream's only message; the peer FINs it. Anything after it is ignored.
  stream_->consume(stream_->peek().size());
  if (stream_->is_fin_received()) {
    finish();
  }
}

ProbeHolder::ProbeHolder(ControlContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

void ProbeHolder::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  stream_->consume(stream_->peek().size());
  if (stream_->is_fin_received()) {
    stream_->finish();
    finish();
  }
}

}  // namespace moqd::session
