#include "relay/auth_service.h"

#include <chrono>
#include <optional>

#include "base/log.h"
#include "model/path.h"
#include "transport/websocket/http1.h"

namespace moqd::relay {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A complete chunked body (RFC 9112 §7.1), or nullopt while it is still arriving (or malformed,
// which the caller sees as never completing until the timeout or close).
std::optional<std::string> decode_chunked(std::string_view in) {
  std::string out;
  for (;;) {
    size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos) {
      return std::nullopt;
    }
    size_t size = std::strtoull(std::string(in.substr(0, eol)).c_str(), nullptr, 16);
    in.remove_prefix(eol + 2);
    if (size == 0) {
      return out;  // trailers, if any, are ignored
    }
    if (in.size() < size + 2) {
      return std::nullopt;
    }
    out.append(in.substr(0, size));
    in.remove_prefix(size + 2);
  }
}

}  // namespace

Result<AuthServiceUrl> parse_auth_url(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) {
    return fail(ErrorCode::kUnsupported, "--auth-url must be an http:// URL");
  }
  std::string rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  AuthServiceUrl u;
  u.text = url;
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  auto hp = runtime::parse_host_port(authority.find(':') == std::string::npos ||
                                             (authority.front() == '[' && authority.back() == ']')
                                         ? authority + ":80"
                                         : authority);
  if (!hp) {
    return tl::unexpected(hp.error());
  }
  u.host = hp->host;
  u.port = hp->port;
  return u;
}

std::unique_ptr<AuthServiceCall> AuthServiceCall::start(runtime::EventLoop& loop,
                                                        const AuthServiceUrl& url,
                                                        const auth::ServiceRequest& request,
                                                        std::function<void(AuthResult)> done) {
  std::unique_ptr<AuthServiceCall> call(new AuthServiceCall(loop, std::move(done)));
  AuthServiceCall* self = call.get();
  call->root_ = model::normalize_path(request.path);
  call->timer_ = loop.schedule(kTimeout, [self] {
    self->timer_ = 0;
    self->fail("no answer within 5 s");
  });
  auto fd = runtime::tcp_connect_nonblocking(url.host, url.port);
  if (!fd) {
    std::string why = std::string("cannot connect: ") + fd.error().detail;
    loop.defer([self, why] { self->fail(why); });  // never call back from inside start()
    return call;
  }
  call->tcp_ = std::make_unique<runtime::TcpConnection>(loop, *fd, url.host);
  std::string body = auth::service_request_json(request);
  transport::websocket::HttpHeaders headers = {
      {"Host", url.host + ":" + std::to_string(url.port)},
      {"Content-Type", "application/json"},
      {"Content-Length", std::to_string(body.size())},
      {"Connection", "close"},
  };
  std::string head = transport::websocket::write_http_request("POST", url.target, headers);
  call->tcp_->send(Bytes::copy(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(head.data()), head.size())));
  call->tcp_->send(Bytes::copy(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(body.data()), body.size())));
  call->tcp_->set_handler(call.get());
  return call;
}

AuthServiceCall::~AuthServiceCall() {
  loop_.cancel(timer_);
  if (tcp_) {
    tcp_->set_handler(nullptr);
    tcp_->abort();
  }
}

void AuthServiceCall::on_pipe_data(std::span<const uint8_t> data) {
  response_.append(reinterpret_cast<const char*>(data.data()), data.size());
  if (response_.size() > 1 << 20) {
    fail("answer over 1 MiB");
    return;
  }
  try_complete(false);
}

void AuthServiceCall::on_pipe_closed() { try_complete(true); }

void AuthServiceCall::try_complete(bool closed) {
  if (finished_) {
    return;
  }
  auto parsed = transport::websocket::parse_http_response(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(response_.data()), response_.size()));
  if (!parsed) {
    fail("malformed HTTP answer");
    return;
  }
  if (!*parsed) {
    if (closed) {
      fail("connection closed before an answer");
    }
    return;
  }
  const auto& res = (*parsed)->value;
  std::string body = response_.substr((*parsed)->consumed);
  if (auto te = res.header("transfer-encoding"); te && te->find("chunked") != std::string_view::npos) {
    auto decoded = decode_chunked(body);
    if (!decoded) {
      if (closed) {
        fail("chunked answer cut short");
      }
      return;
    }
    body = std::move(*decoded);
  } else if (auto len = res.header("content-length")) {
    size_t want = std::strtoull(std::string(*len).c_str(), nullptr, 10);
    if (body.size() < want) {
      if (closed) {
        fail("answer cut short");
      }
      return;
    }
    body.resize(want);
  } else if (!closed) {
    return;  // the body ends with the connection
  }
  if (res.status == 401 || res.status == 403) {
    finish(tl::unexpected(auth::TokenError{auth::Refusal::kNoPermission,
                                           "auth service refused (" + std::to_string(res.status) + ")"}));
    return;
  }
  if (res.status < 200 || res.status > 299) {
    fail("auth service answered " + std::to_string(res.status));
    return;
  }
  finish(auth::grant_from_service(body, root_, unix_now()));
}

void AuthServiceCall::fail(const std::string& why) {
  finish(tl::unexpected(auth::TokenError{auth::Refusal::kServiceFailed, why}));
}

void AuthServiceCall::finish(AuthResult r) {
  if (finished_) {
    return;
  }
  finished_ = true;
  loop_.cancel(timer_);
  timer_ = 0;
  done_(std::move(r));
}

}  // namespace moqd::relay
