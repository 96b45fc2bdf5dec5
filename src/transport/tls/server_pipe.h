#pragma once
// TLS on a byte pipe, server side (GnuTLS, sans-I/O): wraps the lower pipe (a TCP connection) and
// is itself a Pipe for the protocol above (HTTP/1.1 and WebSocket), so `wss://` and
// `https://host/health` share moqd's TCP port with plain HTTP. ALPN http/1.1; TLS 1.3, the
// certificate moqd serves over QUIC.
//
// Ownership and thread: owned by the connection that owns the lower pipe, on its worker thread.
// The owner routes the lower pipe's events here (on_pipe_*) and sets the upper handler; the
// upper handler then sees plaintext, writable and closed events, never from inside its own call.
// The certificate is kept alive by the pipe.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/quic/certificate.h"
#include "transport/quic/tls.h"
#include "transport/transport.h"

namespace moqd::transport::tls {

// The first byte of a TLS connection (a handshake record, RFC 8446 §5.1): how the TCP port tells
// TLS from plain HTTP.
inline constexpr uint8_t kHandshakeRecord = 0x16;

class ServerPipe final : public Pipe, public PipeHandler {
 public:
  // Fails (kTransport) when GnuTLS cannot make the session. `peer` names the client in the log
  // line of a failed handshake or record ("tls failed peer=... reason=...").
  static Result<std::unique_ptr<ServerPipe>> make(
      Pipe& lower, std::shared_ptr<const quic::Certificate> cert, std::string peer);
  ~ServerPipe() override;

  void set_handler(PipeHandler* upper) { upper_ = upper; }
  bool is_handshake_done() const { return handshake_done_; }
  // The SNI the client sent, once the handshake is done ("" when none).
  const std::string& server_name() const { return server_name_; }

  // Pipe (plaintext, for the protocol above).
  void send(Bytes data) override;
  size_t buffered() const override { return lower_.buffered(); }
  void close() override;
  void abort() override { lower_.abort(); }

  // PipeHandler (ciphertext, from the lower pipe).
  void on_pipe_data(std::span<const uint8_t> data) override;
  void on_pipe_writable() override;
  void on_pipe_closed() override;

 private:
  ServerPipe(Pipe& lower, std::shared_ptr<const quic::Certificate> cert, quic::TlsSession session,
             std::string peer);
  static ssize_t push(void* self, const void* data, size_t n);
  static ssize_t pull(void* self, void* data, size_t n);
  void continue_handshake();
  void read_records();
  void fail(const char* why);
  void flush_pending();

  Pipe& lower_;
  std::shared_ptr<const quic::Certificate> cert_;  // the session borrows its credentials
  quic::TlsSession session_;
  PipeHandler* upper_ = nullptr;
  std::vector<uint8_t> in_;   // ciphertext not yet taken by GnuTLS
  size_t in_offset_ = 0;
  std::vector<Bytes> pending_;  // plaintext sent before the handshake completed
  bool handshake_done_ = false;
  bool failed_ = false;
  bool closed_ = false;
  std::string server_name_;
  std::string peer_;
};

}  // namespace moqd::transport::tls
