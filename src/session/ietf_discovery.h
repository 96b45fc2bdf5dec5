#pragma once
// NamespaceDiscovery, the client role's SUBSCRIBE_NAMESPACE (ietf_client.cc starts it): in a header
// of its own so that ietf_handlers_test.cc drives it on a fake stream with a fake NamespaceContext.
// Internal to session/.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "session/ietf_handlers.h"
#include "wire/ietf_namespace.h"

namespace moqd::session::ietf_detail {

// Our SUBSCRIBE_NAMESPACE: the relay's REQUEST_OK or error, then NAMESPACE / NAMESPACE_DONE, on
// the request's own bidi stream (d16) or routed here from the control stream (d15). Each namespace
// learned is announced to the handler with the session as its source, and withdrawn when the
// request or the session ends.
class NamespaceDiscovery final : public HandlerOf<NamespaceContext> {
 public:
  NamespaceDiscovery(NamespaceContext& s, uint64_t request_id, wi::TrackNamespace prefix)
      : HandlerOf(s), request_id_(request_id), prefix_(std::move(prefix)) {}
  uint64_t request_id() const { return request_id_; }

  // Sends the request on `own` (d16) or on the control stream (null).
  void begin(transport::Stream* own) {
    wi::SubscribeNamespace m;
    m.request_id = request_id_;
    m.prefix = prefix_;
    m.options = 1;  // d16 Subscribe Options: NAMESPACE only (moqd subscribes to tracks itself)
    if (own == nullptr) {
      session_.send_control(m);
      return;
    }
    attach(*own);
    std::vector<uint8_t> out;
    wi::encode(session_.draft(), m, out, session_.peer_form());
    own->write(Bytes::from(out));
  }

  void on_readable() override {
    if (read_messages([this](const wi::ControlMessage& m) { on_message(m); })) {
      end();  // the relay ended the request: what it told of is gone
    }
  }
  void on_reset(uint64_t) override { end(); }
  void on_stop_sending(uint64_t) override { end(); }
  void on_session_closed() override {
    withdraw_all();
    Handler::on_session_closed();
  }

  // One message answering this request.
  void on_message(const wi::ControlMessage& m) {
    if (const auto* n = std::get_if<wi::Namespace>(&m)) {
      on_namespace(*n);
    } else if (const auto* e = std::get_if<wi::RequestError>(&m)) {
      MOQD_LOG(kInfo, "session %llu subscribe_namespace refused code=%llu reason=%s",
               static_cast<unsigned long long>(session_.id()),
               static_cast<unsigned long long>(e->error_code), e->reason.c_str());
    } else if (!std::holds_alternative<wi::RequestOk>(m)) {
      session_.fail(wi::TerminationCode::kProtocolViolation,
                    "unexpected message on a SUBSCRIBE_NAMESPACE stream");
    }
  }

  void on_namespace(const wi::Namespace& n) {
    wi::TrackNamespace ns = prefix_;
    ns.insert(ns.end(), n.suffix.begin(), n.suffix.end());
    auto peer = wi::to_path(ns);
    if (!peer || peer->empty()) {
      return;  // no moqd path: nothing can be subscribed under it
    }
    std::string full = session_.to_full(*peer);
    if (n.done != (seen_.count(full) != 0)) {
      return;  // a repeat, or the end of a namespace never told of
    }
    if (n.done) {
      seen_.erase(full);
      session_.client_withdraw(full);
      return;
    }
    if (seen_.size() >= session_.config().limits.max_received_announced_paths) {
      session_.fail(wi::TerminationCode::kTooManyRequests, "too many announced namespaces");
      return;
    }
    seen_.insert(full);
    session_.client_announce(full);
  }

 private:
  void end() {
    withdraw_all();
    done();
  }
  void withdraw_all() {
    auto paths = std::move(seen_);
    seen_.clear();
    for (const auto& p : paths) {
      session_.handler().on_peer_announce(p, false, {}, session_.source());
    }
  }

  uint64_t request_id_;
  wi::TrackNamespace prefix_;
  std::set<std::string> seen_;
};

}  // namespace moqd::session::ietf_detail
