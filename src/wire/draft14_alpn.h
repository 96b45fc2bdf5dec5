#pragma once
// Draft 14's own ALPN / WebTransport protocol (NET-0.3.md; moq-dev's Rust relay), beside the
// protocol table of wire/version.h: SETUP on the first bidi stream as for "moql", but only draft 14
// may be selected. Served (after "moql") while draft 14 is enabled; no WebSocket form, and no
// moq-dev JS client offers it.
#include <string_view>

namespace moqd::wire {

inline constexpr std::string_view kDraft14Alpn = "moq-00";

}  // namespace moqd::wire
