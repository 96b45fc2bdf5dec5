#include "transport/websocket/handshake.h"

#include <array>
#include <utility>
#include <cstdlib>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "transport/websocket/base64.h"

namespace moqd::transport::websocket {
namespace {

// RFC 6455 §1.3.
constexpr std::string_view kAcceptGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
// The QMux drafts this transport frames (draft-ietf-quic-qmux-NN).
constexpr std::pair<std::string_view, Framing> kQmuxFramings[] = {
    {"qmux-00", Framing::kQmux00},
    {"qmux-01", Framing::kQmux01},
    {"qmux-02", Framing::kQmux02},
};
constexpr std::string_view kWebTransportPrefix = "webtransport";
constexpr size_t kKeyBytes = 16;

std::optional<std::string> prefixed_app(std::string_view token, std::string_view prefix) {
  if (token.substr(0, prefix.size()) != prefix) {
    return std::nullopt;
  }
  std::string_view rest = token.substr(prefix.size());
  if (rest.empty()) {
    return std::string();
  }
  if (rest.front() != '.' || rest.size() == 1) {
    return std::nullopt;
  }
  return std::string(rest.substr(1));
}

}  // namespace

std::string websocket_accept(std::string_view key) {
  std::string input(key);
  input += kAcceptGuid;
  std::array<uint8_t, 20> digest{};
  if (gnutls_hash_fast(GNUTLS_DIG_SHA1, input.data(), input.size(), digest.data()) != 0) {
    std::abort();  // SHA-1 is always compiled into GnuTLS; failure means a broken library
  }
  return base64_encode(digest);
}

std::optional<Subprotocol> parse_subprotocol(std::string_view token) {
  for (const auto& [prefix, framing] : kQmuxFramings) {
    if (auto app = prefixed_app(token, prefix)) {
      return Subprotocol{std::string(token), framing, std::move(*app)};
    }
  }
  if (auto app = prefixed_app(token, kWebTransportPrefix)) {
    return Subprotocol{std::string(token), Framing::kWebTransport, std::move(*app)};
  }
  return std::nullopt;
}

Result<Subprotocol> select_subprotocol(const HttpRequest& request,
                                       std::span<const std::string> acceptable) {
  std::vector<Subprotocol> offers;
  for (std::string_view offer : header_list(request.headers, "Sec-WebSocket-Protocol")) {
    if (auto parsed = parse_subprotocol(offer)) {
      offers.push_back(std::move(*parsed));
    }
  }
  for (const auto& want : acceptable) {
    for (auto& offer : offers) {
      if (offer.token == want) {
        return std::move(offer);
      }
    }
  }
  return fail(ErrorCode::kUnsupported, "no acceptable subprotocol offered");
}

std::string offered_subprotocols(const HttpRequest& request) {
  std::string out;
  for (std::string_view offer : header_list(request.headers, "Sec-WebSocket-Protocol")) {
    if (!out.empty()) {
      out += ", ";
    }
    out += offer;
  }
  return out;
}

bool is_websocket_upgrade(const HttpRequest& request) {
  return header_has_token(request.headers, "Upgrade", "websocket");
}

tl::expected<void, UpgradeRefusal> validate_upgrade(const HttpRequest& request) {
  auto refuse = [](int status, const char* detail) {
    return tl::unexpected(UpgradeRefusal{status, detail});
  };
  if (request.method != "GET" || request.minor_version < 1) {
    return refuse(400, "websocket upgrade needs GET over HTTP/1.1");
  }
  if (!is_websocket_upgrade(request) ||
      !header_has_token(request.headers, "Connection", "upgrade")) {
    return refuse(400, "missing Upgrade: websocket or Connection: upgrade");
  }
  if (request.header("Sec-WebSocket-Version").value_or("") != "13") {
    return refuse(426, "unsupported Sec-WebSocket-Version");
  }
  auto key = request.header("Sec-WebSocket-Key");
  if (!key) {
    return refuse(400, "missing Sec-WebSocket-Key");
  }
  auto decoded = base64_decode(*key);
  if (!decoded || decoded->size() != kKeyBytes) {
    return refuse(400, "malformed Sec-WebSocket-Key");
  }
  return {};
}

std::string write_upgrade_response(const HttpRequest& request, std::string_view subprotocol) {
  HttpResponse resp;
  resp.status = 101;
  resp.headers = {
      {"Upgrade", "websocket"},
      {"Connection", "Upgrade"},
      {"Sec-WebSocket-Accept", websocket_accept(request.header("Sec-WebSocket-Key").value_or(""))},
  };
  if (!subprotocol.empty()) {
    resp.headers.push_back({"Sec-WebSocket-Protocol", std::string(subprotocol)});
  }
  return write_http_response(resp);
}

std::string make_websocket_key() {
  std::array<uint8_t, kKeyBytes> nonce{};
  if (gnutls_rnd(GNUTLS_RND_NONCE, nonce.data(), nonce.size()) != 0) {
    std::abort();  // the system RNG failing is not survivable
  }
  return base64_encode(nonce);
}

std::string write_upgrade_request(std::string_view host, std::string_view target,
                                  std::string_view key,
                                  std::span<const std::string> protocols) {
  HttpHeaders headers = {
      {"Host", std::string(host)},
      {"Upgrade", "websocket"},
      {"Connection", "Upgrade"},
      {"Sec-WebSocket-Key", std::string(key)},
      {"Sec-WebSocket-Version", "13"},
  };
  if (!protocols.empty()) {
    std::string list;
    for (const auto& p : protocols) {
      list += list.empty() ? p : ", " + p;
    }
    headers.push_back({"Sec-WebSocket-Protocol", std::move(list)});
  }
  return write_http_request("GET", target.empty() ? "/" : target, headers);
}

Result<std::string> validate_upgrade_response(const HttpResponse& response, std::string_view key,
                                              std::span<const std::string> offered) {
  if (response.status != 101) {
    return fail(ErrorCode::kTransport, "websocket upgrade refused");
  }
  if (!header_has_token(response.headers, "Upgrade", "websocket") ||
      !header_has_token(response.headers, "Connection", "upgrade")) {
    return fail(ErrorCode::kTransport, "101 without Upgrade/Connection headers");
  }
  if (response.header("Sec-WebSocket-Accept").value_or("") != websocket_accept(key)) {
    return fail(ErrorCode::kTransport, "wrong Sec-WebSocket-Accept");
  }
  auto selected = response.header("Sec-WebSocket-Protocol");
  if (!selected) {
    if (!offered.empty()) {
      return fail(ErrorCode::kUnknownAlpn, "server selected no subprotocol");
    }
    return std::string();
  }
  for (const auto& p : offered) {
    if (p == *selected) {
      return p;
    }
  }
  return fail(ErrorCode::kUnknownAlpn, "server selected a subprotocol not offered");
}

}  // namespace moqd::transport::websocket
