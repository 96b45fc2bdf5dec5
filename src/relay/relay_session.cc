#include "relay/relay_session.h"

#include <gnutls/crypto.h>

#include <chrono>

#include "base/log.h"
#include "model/path.h"
#include "relay/relay.h"
#include "relay/worker.h"

namespace moqd::relay {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

size_t auth_action(session::Action a) {
  switch (a) {
    case session::Action::kConnect: return kAuthConnect;
    case session::Action::kPublish: return kAuthPublish;
    case session::Action::kSubscribe:
    case session::Action::kDiscover:
    case session::Action::kSee: return kAuthSubscribe;
  }
  return kAuthConnect;
}

}  // namespace

RelaySession::~RelaySession() {
  service_call_.reset();
  worker_.loop().cancel(expiry_timer_);
  session_.reset();
  if (ready_) {
    worker_.sessions.fetch_sub(1, std::memory_order_relaxed);
    worker_.sessions_by_transport[transport_class_].fetch_sub(1, std::memory_order_relaxed);
    if (version_) {
      worker_.metrics().sessions_ended[transport_class_][metric_version_index(*version_)].add();
    }
  }
}

bool RelaySession::admit(std::string_view path, std::string_view query, std::string_view peer) {
  if (!worker_.auth_policy()->service_url.empty()) {
    return true;  // the auth service decides once the session starts
  }
  admitted_ = true;
  std::string root = model::normalize_path(path);
  auto grant = auth::authenticate(*worker_.auth_policy(), root, query, unix_now());
  if (!grant) {
    MOQD_LOG(kInfo, "auth refused connect peer=%.*s path=/%s reason=%s detail=%s code=%u",
             static_cast<int>(peer.size()), peer.data(), root.c_str(),
             auth::refusal_name(grant.error().reason), grant.error().detail.c_str(),
             static_cast<unsigned>(ErrorCode::kUnauthorized));
    worker_.metrics().auth_refusals[kAuthConnect][static_cast<size_t>(grant.error().reason)].add();
    grant_.reset();
    return false;
  }
  grant_ = std::move(*grant);
  return true;
}

void RelaySession::start(transport::Session& transport, std::string root, std::string query) {
  if (!worker_.auth_policy()->service_url.empty()) {
    ask_service(transport, root, query);
  } else if (!admitted_) {
    admit(root, query, transport.peer());
  }
  // A relay link (a token with the cluster claim) is exempt from the per-client budgets
  // (--max-announce-rate, --idle-timeout). An open relay counts every session as a relay link,
  // so there they apply. The worker's config is shared by its sessions; this one keeps the
  // snapshot it starts with alive until it ends (a SIGHUP reaches later sessions).
  session_config_ =
      worker_.session_config(grant_ && grant_->cluster && !worker_.auth_policy()->is_open());
  transport_class_ = transport_class(transport.kind());
  session_ = session::make_session(transport, *session_config_, std::move(root), std::move(query),
                                   worker_.origin(), *this, worker_.loop(), worker_.loop());
  session_->start();
  if (!closed_ && !service_call_ && grant_ && grant_->expires) {
    schedule_expiry();
  }
}

void RelaySession::ask_service(transport::Session& transport, const std::string& path,
                               const std::string& query) {
  auto url = parse_auth_url(worker_.auth_policy()->service_url);
  std::string peer(transport.peer());
  if (!url) {
    on_service_answer(tl::unexpected(auth::TokenError{auth::Refusal::kServiceFailed, url.error().detail}),
                      path, peer);
    return;
  }
  auth::ServiceRequest req;
  uint8_t id[16];
  if (gnutls_rnd(GNUTLS_RND_NONCE, id, sizeof id) == 0) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (uint8_t b : id) {
      req.id += kHex[b >> 4];
      req.id += kHex[b & 15];
    }
  }
  req.node = worker_.relay().config().listen.empty() ? "moqd" : worker_.relay().config().listen[0];
  req.transport = transport_class(transport.kind()) == kWebSocket ? "websocket" : "quic";
  req.remote = peer;
  req.alpn = std::string(transport.protocol());
  req.path = path.empty() || path[0] != '/' ? "/" + path : path;
  req.query = query;
  service_call_ = AuthServiceCall::start(
      worker_.loop(), *url, req, [this, path, peer](AuthResult r) {
        on_service_answer(std::move(r), path, peer);
      });
}

void RelaySession::on_service_answer(AuthResult r, std::string path, std::string peer) {
  admitted_ = true;
  if (service_call_) {
    // Destroyed from the loop: this runs inside the call's own callbacks.
    worker_.loop().defer([call = std::shared_ptr<AuthServiceCall>(std::move(service_call_))] {});
  }
  if (!r) {
    MOQD_LOG(kInfo, "auth refused connect peer=%s path=/%s reason=%s detail=%s code=%u",
             peer.c_str(), model::normalize_path(path).c_str(), auth::refusal_name(r.error().reason),
             r.error().detail.c_str(), static_cast<unsigned>(ErrorCode::kUnauthorized));
    worker_.metrics().auth_refusals[kAuthConnect][static_cast<size_t>(r.error().reason)].add();
    grant_.reset();
  } else {
    grant_ = std::move(*r);
  }
  if (session_) {
    session_->admit();
    if (!closed_ && grant_ && grant_->expires) {
      schedule_expiry();
    }
  }
}

void RelaySession::schedule_expiry() {
  int64_t left_s = *grant_->expires - unix_now();
  auto delay = std::chrono::duration_cast<Duration>(std::chrono::seconds(std::max<int64_t>(0, left_s)));
  expiry_timer_ = worker_.loop().schedule(delay, [this] {
    expiry_timer_ = 0;
    if (session_ && !closed_) {
      MOQD_LOG(kInfo, "session %llu auth expired (%s); closing code=%u",
               static_cast<unsigned long long>(session_->id()), grant_->source.c_str(),
               static_cast<unsigned>(ErrorCode::kUnauthorized));
      worker_.metrics().sessions_expired.add();
      session_->close(make_error(ErrorCode::kUnauthorized, "token expired"));
    }
  });
}

bool RelaySession::close(Error reason) {
  if (!session_ || closed_) {
    return false;
  }
  session_->close(reason);
  return true;
}

bool RelaySession::send_goaway(const std::string& url) {
  if (!session_ || closed_) {
    return false;
  }
  if (!session_->send_goaway(url)) {
    return false;
  }
  worker_.metrics().goaways_sent.add();
  return true;
}

bool RelaySession::authorize(session::Action action, std::string_view path,
                             std::string_view) {
  if (!grant_) {
    return false;  // admit() refused and logged
  }
  bool ok = false;
  switch (action) {
    case session::Action::kConnect: ok = true; break;
    case session::Action::kPublish: ok = grant_->may_publish(path); break;
    case session::Action::kSubscribe: ok = grant_->may_subscribe(path); break;
    case session::Action::kDiscover: ok = grant_->may_discover(path); break;
    case session::Action::kSee: return grant_->may_subscribe(path);  // filtered, not refused
  }
  if (!ok) {
    worker_.metrics()
        .auth_refusals[auth_action(action)][static_cast<size_t>(auth::Refusal::kNoPermission)]
        .add();
    MOQD_LOG(kInfo, "auth refused %s session=%llu path=/%.*s grant=%s code=%u",
             action == session::Action::kPublish     ? "publish"
             : action == session::Action::kDiscover ? "discover"
                                                    : "subscribe",
             static_cast<unsigned long long>(session_ ? session_->id() : 0),
             static_cast<int>(path.size()), path.data(), grant_->source.c_str(),
             static_cast<unsigned>(ErrorCode::kUnauthorized));
  }
  return ok;
}

void RelaySession::on_session_ready(wire::Version version) {
  ready_ = true;
  version_ = version;
  worker_.sessions.fetch_add(1, std::memory_order_relaxed);
  worker_.sessions_by_transport[transport_class_].fetch_add(1, std::memory_order_relaxed);
  worker_.metrics().sessions_started[transport_class_][metric_version_index(version)].add();
}

void RelaySession::on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                                    model::BroadcastSource& source) {
  // Only relay links (a token with the cluster claim, or an open relay) are trusted with hops:
  // a client's hop list could otherwise steer other relays' route choice.
  static const model::Hops kNone;
  worker_.on_peer_announce(path, active, is_relay_link() ? hops : kNone, 0, source);
}

void RelaySession::on_peer_route(const std::string& path, const model::Hops& hops, uint64_t cost,
                                 model::BroadcastSource& source) {
  // Hops and cost alike steer route choice: trusted from relay links only.
  if (!is_relay_link()) {
    on_peer_announce(path, true, hops, source);
    return;
  }
  worker_.on_peer_announce(path, true, hops, cost, source);
}

void RelaySession::on_session_closed(Error reason) {
  closed_ = true;
  worker_.loop().cancel(expiry_timer_);
  expiry_timer_ = 0;
  size_t code = static_cast<size_t>(reason.code);
  worker_.metrics().sessions_closed_by_code[std::min(code, kMaxCodeLabel + 1)].add();
}

}  // namespace moqd::relay
