#pragma once

// The server's ALPN choice from a ClientHello (RFC 7301 §3.1-3.2). GnuTLS 3.7 keeps at most 8
// protocols per gnutls_alpn_set_protocols, fewer than moqd serves, so the server reads the
// client's offer itself and hands GnuTLS only its pick (tls.cc's ClientHello hook).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moqd::transport::quic {

// The TLS extension type of application_layer_protocol_negotiation.
inline constexpr unsigned kAlpnExtensionType = 16;

// Parses the extension_data of a ClientHello's ALPN extension: a 2-byte ProtocolNameList length,
// then ProtocolName entries of a 1-byte length and 1..255 bytes. Returns the names in the client's
// order (views into `data`), duplicates kept; nullopt when `data` is malformed: shorter than the
// length field, a list length that is not exactly the rest of `data`, an empty list, an empty
// name, or a name running past the list.
[[nodiscard]] std::optional<std::vector<std::string_view>> parse_alpn_offer(
    std::span<const uint8_t> data);

// The index in `ours` (most preferred first) of the first protocol that `offers` holds; nullopt
// when the client offered none of them. The client's order does not matter.
[[nodiscard]] std::optional<size_t> choose_alpn(std::span<const std::string> ours,
                                                std::span<const std::string_view> offers);

}  // namespace moqd::transport::quic
