// GOAWAY (moq-lite-04 §GOAWAY, protocol/README.md §3.4.9): a relay that is draining tells its
// client where to reconnect.
#include "base/log.h"
#include "session/handlers.h"
#include "session/session.h"

namespace moqd::session {

bool Session::send_goaway(const std::string& uri) {
  if (closed_ || !version_ || !wire::is_lite04_plus(*version_)) {
    return false;
  }
  transport::Stream* stream = transport_.open_bidi();
  if (stream == nullptr) {
    return false;
  }
  std::vector<uint8_t> out;
  Writer w(out);
  w.varint(static_cast<uint64_t>(wire::BidiType::kGoaway));
  wire::encode(*version_, wire::Goaway{uri}, out);
  stream->write(Bytes::from(out));
  stream->finish();
  ctx_.make<GoawayStream>(*stream, false);
  MOQD_LOG(kInfo, "session %llu goaway sent uri=%s", static_cast<unsigned long long>(id_),
           uri.empty() ? "(same)" : uri.c_str());
  return true;
}

GoawayStream::GoawayStream(ControlContext& s, transport::Stream& stream, bool receiving)
    : HandlerOf(s), receiving_(receiving) {
  attach(stream);
}

void GoawayStream::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  if (receiving_ && !told_) {
    auto m = read_message<wire::Goaway>([&](auto in) {
      return wire::decode_goaway(*session_.version(), in, session_.config().decode);
    });
    if (!m) {
      return;
    }
    told_ = true;
    session_.on_goaway(m->uri);
    if (stream_ == nullptr) {
      return;
    }
  }
  stream_->consume(stream_->peek().size());  // nothing else is expected: drained
  if (stream_->is_fin_received()) {
    if (!receiving_ || told_) {
      finish();
    }
  }
}

}  // namespace moqd::session
