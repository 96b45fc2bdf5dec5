#include "transport/tls/server_pipe.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace moqd::transport::tls {
namespace {
const std::string kHttp11 = "http/1.1";
}  // namespace

Result<std::unique_ptr<ServerPipe>> ServerPipe::make(Pipe& lower,
                                                     std::shared_ptr<const quic::Certificate> cert,
                                                     std::string peer) {
  std::vector<std::string> alpns = {kHttp11};
  auto session = quic::make_server_session(*cert, alpns, nullptr, quic::Binding::kStream);
  if (!session) {
    return tl::unexpected(session.error());
  }
  return std::unique_ptr<ServerPipe>(
      new ServerPipe(lower, std::move(cert), std::move(*session), std::move(peer)));
}

ServerPipe::ServerPipe(Pipe& lower, std::shared_ptr<const quic::Certificate> cert,
                       quic::TlsSession session, std::string peer)
    : lower_(lower), cert_(std::move(cert)), session_(std::move(session)), peer_(std::move(peer)) {
  gnutls_session_t s = session_.get();
  gnutls_transport_set_ptr(s, this);
  gnutls_transport_set_push_function(s, &ServerPipe::push);
  gnutls_transport_set_pull_function(s, &ServerPipe::pull);
}

ServerPipe::~ServerPipe() = default;

ssize_t ServerPipe::push(void* self, const void* data, size_t n) {
  auto* p = static_cast<ServerPipe*>(self);
  p->lower_.send(Bytes::copy({static_cast<const uint8_t*>(data), n}));
  return static_cast<ssize_t>(n);
}

ssize_t ServerPipe::pull(void* self, void* data, size_t n) {
  auto* p = static_cast<ServerPipe*>(self);
  size_t have = p->in_.size() - p->in_offset_;
  if (have == 0) {
    gnutls_transport_set_errno(p->session_.get(), EAGAIN);
    return -1;
  }
  size_t take = std::min(have, n);
  memcpy(data, p->in_.data() + p->in_offset_, take);
  p->in_offset_ += take;
  if (p->in_offset_ == p->in_.size()) {
    p->in_.clear();
    p->in_offset_ = 0;
  }
  return static_cast<ssize_t>(take);
}

void ServerPipe::on_pipe_data(std::span<const uint8_t> data) {
  if (failed_) {
    return;
  }
  in_.insert(in_.end(), data.begin(), data.end());
  if (!handshake_done_) {
    continue_handshake();
  }
  if (handshake_done_) {
    read_records();
  }
}

void ServerPipe::continue_handshake() {
  int rv = gnutls_handshake(session_.get());
  if (rv == GNUTLS_E_AGAIN || rv == GNUTLS_E_INTERRUPTED) {
    return;
  }
  if (rv < 0) {
    fail(gnutls_strerror(rv));
    return;
  }
  handshake_done_ = true;
  char name[256];
  size_t len = sizeof name;
  unsigned type = 0;
  if (gnutls_server_name_get(session_.get(), name, &len, &type, 0) == 0 &&
      type == GNUTLS_NAME_DNS) {
    server_name_.assign(name, strnlen(name, len));
  }
  flush_pending();
}

void ServerPipe::flush_pending() {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& b : pending) {
    send(std::move(b));
  }
}

void ServerPipe::read_records() {
  uint8_t buf[16384];
  while (!failed_) {
    ssize_t n = gnutls_record_recv(session_.get(), buf, sizeof buf);
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
      return;
    }
    if (n == 0) {
      // close_notify: the peer has finished sending; the lower pipe's close follows.
      return;
    }
    if (n < 0) {
      if (gnutls_error_is_fatal(static_cast<int>(n)) == 0) {
        continue;
      }
      fail(gnutls_strerror(static_cast<int>(n)));
      return;
    }
    if (upper_ != nullptr) {
      upper_->on_pipe_data({buf, static_cast<size_t>(n)});
    }
  }
}

void ServerPipe::send(Bytes data) {
  if (failed_ || closed_) {
    return;
  }
  if (!handshake_done_) {
    pending_.push_back(std::move(data));
    return;
  }
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = gnutls_record_send(session_.get(), data.data() + off, data.size() - off);
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
      continue;  // push never blocks; GnuTLS retries the record
    }
    if (n < 0) {
      fail(gnutls_strerror(static_cast<int>(n)));
      return;
    }
    off += static_cast<size_t>(n);
  }
}

void ServerPipe::close() {
  if (closed_) {
    return;
  }
  closed_ = true;
  if (!handshake_done_ && !failed_) {
    // The layer above gave up first (its request timeout): a handshake that never finished.
    MOQD_LOG(kInfo, "tls failed peer=%s handshake=incomplete reason=closed before the handshake "
             "finished", peer_.c_str());
  }
  if (handshake_done_ && !failed_) {
    gnutls_bye(session_.get(), GNUTLS_SHUT_WR);  // close_notify; push never blocks
  }
  lower_.close();
}

void ServerPipe::fail(const char* why) {
  failed_ = true;
  MOQD_LOG(kInfo, "tls failed peer=%s handshake=%s reason=%s", peer_.c_str(),
           handshake_done_ ? "done" : "incomplete", why);
  lower_.close();
}

void ServerPipe::on_pipe_writable() {
  if (upper_ != nullptr && handshake_done_) {
    upper_->on_pipe_writable();
  }
}

void ServerPipe::on_pipe_closed() {
  if (upper_ != nullptr) {
    upper_->on_pipe_closed();
  }
}

}  // namespace moqd::transport::tls
