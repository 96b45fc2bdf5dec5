// h3_probe: a test aid that sends one hand-built WebTransport CONNECT to moqd over HTTP/3, for
// tests/interop/hostile_webtransport.test.mjs.
//
//   h3_probe --connect HOST:PORT --fingerprint HEX [--header NAME=VALUE]... [--raw-control HEX]
//            [--timeout-ms N]
//
// It connects over QUIC with ALPN h3, accepting only the certificate whose DER has SHA-256 HEX
// (moqd's GET /certificate.sha256), opens its control stream with the SETTINGS Chromium sends (or
// writes the --raw-control bytes on it instead, to send a bad control stream), then opens one
// bidi stream carrying a HEADERS frame with the --header fields in the order given. Any name
// goes, pseudo-headers and upper case included: encode_field_section refuses upper-case names, so
// such a section is written as plain literals instead. It prints ONE JSON line on stdout:
//   {"status":200,"headers":{"wt-protocol":"\"moq-lite-04\""},"local_port":P}
//   {"closed":{"code":266,"reason":"..."},"local_port":P}   the connection closed first
//   {"timeout":true,"local_port":P}                           nothing within --timeout-ms (5000)
// local_port is the probe's UDP port, which moqd logs as peer=IP:PORT. Exit status: 0 after a
// status or a close, 1 on a timeout, a usage error or a malformed response.
#include <netdb.h>
#include <sys/random.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/codec.h"
#include "runtime/event_loop.h"
#include "runtime/udp.h"
#include "testing/chromium_webtransport.h"
#include "transport/quic/connection.h"
#include "transport/quic/tls.h"
#include "transport/webtransport/h3.h"
#include "transport/webtransport/qpack.h"

namespace moqd {
namespace {

namespace quic = transport::quic;
namespace wt = transport::webtransport;

constexpr size_t kMaxFrame = 64 << 10;

struct Options {
  std::string host;
  std::string port;
  std::string fingerprint;
  wt::HeaderList headers;
  std::optional<std::vector<uint8_t>> raw_control;
  int timeout_ms = 5000;
};

std::optional<Options> parse_args(int argc, char** argv) {
  Options o;
  if ((argc - 1) % 2 != 0) {
    return std::nullopt;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--connect" && value.rfind(':') != std::string::npos) {
      o.host = value.substr(0, value.rfind(':'));
      o.port = value.substr(value.rfind(':') + 1);
    } else if (flag == "--fingerprint") {
      o.fingerprint = value;
    } else if (flag == "--header" && value.find('=', 1) != std::string::npos) {
      size_t eq = value.find('=', 1);  // from 1: a name is never empty
      o.headers.push_back({value.substr(0, eq), value.substr(eq + 1)});
    } else if (flag == "--raw-control") {
      o.raw_control = from_hex(value);
    } else if (flag == "--timeout-ms") {
      o.timeout_ms = std::atoi(value.c_str());
    } else {
      return std::nullopt;
    }
  }
  if (o.host.empty() || o.fingerprint.empty() || o.timeout_ms <= 0) {
    return std::nullopt;
  }
  return o;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// RFC 9204 §4.1.1: an integer whose first `bits` bits share the byte `first`.
void prefixed_int(std::vector<uint8_t>& out, uint8_t first, int bits, uint64_t value) {
  const uint64_t max = (uint64_t{1} << bits) - 1;
  if (value < max) {
    out.push_back(static_cast<uint8_t>(first | value));
    return;
  }
  out.push_back(static_cast<uint8_t>(first | max));
  for (value -= max; value >= 0x80; value >>= 7) {
    out.push_back(static_cast<uint8_t>(0x80 | (value & 0x7f)));
  }
  out.push_back(static_cast<uint8_t>(value));
}

// Each field as a Literal Field Line with Literal Name (RFC 9204 §4.5.6), no Huffman.
std::vector<uint8_t> literal_field_section(const wt::HeaderList& headers) {
  std::vector<uint8_t> out{0x00, 0x00};  // Required Insert Count 0, Base 0
  for (const wt::HeaderField& f : headers) {
    prefixed_int(out, 0x20, 3, f.name.size());
    out.insert(out.end(), f.name.begin(), f.name.end());
    prefixed_int(out, 0x00, 7, f.value.size());
    out.insert(out.end(), f.value.begin(), f.value.end());
  }
  return out;
}

void new_random_cid(ngtcp2_cid* cid, uint8_t* token) {
  cid->datalen = 16;
  (void)getrandom(cid->data, cid->datalen, 0);
  (void)getrandom(token, NGTCP2_STATELESS_RESET_TOKENLEN, 0);
}

// One connection, one CONNECT; result_ holds the JSON members to print once something happened.
class Probe final : quic::PacketSink, quic::ConnectionObserver, transport::SessionVisitor,
                    transport::StreamVisitor {
 public:
  Probe(runtime::EventLoop& loop, Options options) : loop_(loop), options_(std::move(options)) {}
  ~Probe() override {
    if (conn_) {
      conn_->set_visitor(nullptr);
    }
    conn_.reset();
  }

  const char* start();
  bool has_result() const { return !result_.empty(); }
  const std::string& result() const { return result_; }
  uint16_t local_port() const { return udp_ ? udp_->port() : 0; }
  // Sends our CONNECTION_CLOSE (H3_NO_ERROR) so that moqd does not wait for an idle timeout.
  void finish() {
    if (conn_ && !conn_->is_closed()) {
      conn_->close(static_cast<uint64_t>(wt::H3Code::kNoError), "probe done");
      udp_->flush();
    }
  }

 private:
  ngtcp2_path path_to(const sockaddr* remote, socklen_t len) {
    ngtcp2_path path{};
    path.local.addr = const_cast<ngtcp2_sockaddr*>(
        reinterpret_cast<const ngtcp2_sockaddr*>(&udp_->local_address()));
    path.local.addrlen = udp_->local_address_len();
    path.remote.addr = const_cast<ngtcp2_sockaddr*>(reinterpret_cast<const ngtcp2_sockaddr*>(remote));
    path.remote.addrlen = len;
    return path;
  }
  void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) override {
    udp_->send(reinterpret_cast<const sockaddr*>(path.remote.addr), path.remote.addrlen, pkt);
  }
  void on_handshake_completed(quic::Connection& conn) override { send_request(conn); }
  void on_done(quic::Connection&) override {}
  void send_request(quic::Connection& conn);
  void read_response();

  // SessionVisitor: moqd's own control and QPACK streams are left unread.
  void on_incoming_stream(transport::Stream&) override {}
  void on_streams_available() override {}
  void on_closed(uint64_t code, std::string_view reason) override {
    request_ = nullptr;
    if (result_.empty()) {
      result_ = "\"closed\":{\"code\":" + std::to_string(code) + ",\"reason\":" +
                json_string(reason) + "}";
    }
  }
  // StreamVisitor (the request stream)
  void on_readable() override { read_response(); }
  void on_writable() override {}
  void on_reset(uint64_t) override {}
  void on_stop_sending(uint64_t) override {}

  runtime::EventLoop& loop_;
  const Options options_;
  std::unique_ptr<runtime::UdpSocket> udp_;
  std::unique_ptr<quic::Connection> conn_;  // destroyed before udp_
  transport::Stream* request_ = nullptr;
  std::string result_;
};

const char* Probe::start() {
  auto fingerprint = quic::parse_sha256_hex(options_.fingerprint);
  if (!fingerprint) {
    return "--fingerprint must be 64 hex digits";
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (getaddrinfo(options_.host.c_str(), options_.port.c_str(), &hints, &res) != 0) {
    return "--connect needs a numeric IP:PORT";
  }
  sockaddr_storage remote{};
  std::memcpy(&remote, res->ai_addr, res->ai_addrlen);
  socklen_t remote_len = static_cast<socklen_t>(res->ai_addrlen);
  freeaddrinfo(res);

  auto udp = runtime::UdpSocket::open_client(loop_, options_.host, runtime::UdpSocket::Options{});
  if (!udp) {
    return "cannot open a UDP socket";
  }
  udp_ = std::move(*udp);
  udp_->set_handler([this](const sockaddr* from, socklen_t len, std::span<const uint8_t> d) {
    if (conn_ && !conn_->is_done()) {
      (void)conn_->on_packet(path_to(from, len), d);
    }
  });
  quic::Verification v{quic::VerifyMode::kFingerprint, "", *fingerprint};
  quic::TlsFactory make_tls = [host = options_.host, v](ngtcp2_crypto_conn_ref* ref) {
    const std::string alpns[] = {"h3"};
    return quic::make_client_session(host, alpns, v, ref);
  };
  quic::ConnectionContext ctx{*this, loop_, loop_, new_random_cid, this};
  auto conn = quic::Connection::connect(path_to(reinterpret_cast<const sockaddr*>(&remote),
                                                remote_len), make_tls, ctx);
  if (!conn) {
    return "cannot start the QUIC connection";
  }
  conn_ = std::move(*conn);
  conn_->set_visitor(this);
  return nullptr;
}

void Probe::send_request(quic::Connection& conn) {
  std::vector<uint8_t> control = options_.raw_control.value_or(std::vector<uint8_t>{});
  if (!options_.raw_control) {
    std::vector<uint8_t> settings = from_hex(test::chromium::kSettingsPayload);
    Writer w(control);
    w.varint(wt::kStreamControl);
    wt::write_frame(w, wt::kFrameSettings, settings);
  }
  auto section = wt::encode_field_section(options_.headers);
  std::vector<uint8_t> headers;
  Writer w(headers);
  wt::write_frame(w, wt::kFrameHeaders, section ? *section : literal_field_section(options_.headers));
  transport::Stream* control_stream = conn.open_uni();
  request_ = conn.open_bidi();
  if (control_stream == nullptr || request_ == nullptr) {
    result_ = "\"error\":\"moqd allows no stream\"";
    return;
  }
  control_stream->write(Bytes::from(control));
  request_->set_visitor(this);
  request_->write(Bytes::from(headers));
}

void Probe::read_response() {
  while (request_ != nullptr && result_.empty()) {
    auto frame = wt::parse_frame(request_->peek(), kMaxFrame);
    if (!frame) {
      result_ = "\"error\":\"malformed frame on the request stream\"";
    }
    if (!frame || !*frame) {
      return;
    }
    if ((*frame)->value.type == wt::kFrameHeaders) {
      auto decoder = wt::QpackDecoder::create();
      auto fields = decoder ? (*decoder)->decode((*frame)->value.payload, kMaxFrame)
                            : wt::H3Result<wt::HeaderList>(tl::unexpected(decoder.error()));
      if (!fields) {
        result_ = "\"error\":\"undecodable response HEADERS\"";
        return;
      }
      std::string status = "null";
      std::string members;
      for (const wt::HeaderField& f : *fields) {
        if (f.name == ":status") {
          status = f.value;
        } else {
          members += (members.empty() ? "" : ",") + json_string(f.name) + ":" + json_string(f.value);
        }
      }
      result_ = "\"status\":" + status + ",\"headers\":{" + members + "}";
    }
    request_->consume((*frame)->consumed);
  }
}

int run(int argc, char** argv) {
  auto options = parse_args(argc, argv);
  if (!options) {
    std::fprintf(stderr,
                 "usage: h3_probe --connect IP:PORT --fingerprint HEX [--header NAME=VALUE]... "
                 "[--raw-control HEX] [--timeout-ms N]\n");
    return 1;
  }
  runtime::EventLoop loop;
  Probe probe(loop, *options);
  if (const char* failure = probe.start()) {
    std::fprintf(stderr, "h3_probe: %s\n", failure);
    return 1;
  }
  loop.run_until([&] { return probe.has_result(); }, std::chrono::milliseconds(options->timeout_ms));
  probe.finish();
  std::string result = probe.has_result() ? probe.result() : "\"timeout\":true";
  std::printf("{%s,\"local_port\":%u}\n", result.c_str(), static_cast<unsigned>(probe.local_port()));
  bool answered = result.starts_with("\"status\"") || result.starts_with("\"closed\"");
  return answered ? 0 : 1;
}

}  // namespace
}  // namespace moqd

int main(int argc, char** argv) { return moqd::run(argc, argv); }
