// Fuzzer for parse_alpn_offer and choose_alpn (src/transport/quic/alpn_offer.h): the TLS server
// runs them on the ALPN extension of every ClientHello before GnuTLS reads it. Every name must lie
// inside the input, be 1 to 255 bytes, and the names with their length bytes must tile the list
// exactly; the choice must be a protocol the client offered.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "transport/quic/alpn_offer.h"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "alpn_offer_fuzzer: %s\n", what);
  std::abort();
}

const std::vector<std::string> kOurs = {"moq-lite-05", "moq-lite-04", "moq-lite-03", "moqt-20",
                                        "moqt-19",     "moqt-18",     "moqt-17",     "moqt-16",
                                        "moqt-15",     "moql",        "h3"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  auto names = moqd::transport::quic::parse_alpn_offer(in);
  if (!names) {
    return 0;
  }
  if (names->empty()) {
    bug("an accepted list with no names");
  }
  size_t tiled = 2;
  for (std::string_view n : *names) {
    const auto* p = reinterpret_cast<const uint8_t*>(n.data());
    if (n.empty() || n.size() > 255 || p < data || p + n.size() > data + size) {
      bug("a name outside the input or of a bad length");
    }
    tiled += 1 + n.size();
  }
  if (tiled != size) {
    bug("the names do not tile the list");
  }
  auto i = moqd::transport::quic::choose_alpn(kOurs, *names);
  if (i && (*i >= kOurs.size() ||
            std::find(names->begin(), names->end(), std::string_view(kOurs[*i])) == names->end())) {
    bug("chose a protocol the client did not offer");
  }
  return 0;
}
