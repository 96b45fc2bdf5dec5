// Extension blocks between drafts (wire/ietf_properties.h). The first byte picks the two drafts
// (low and high nibble, modulo 7). Whatever transcodes must transcode back to a block that
// transcodes forward to the same bytes again (a block from a delta-coded draft whose types go
// down never gets this far); a refusal must leave the output untouched.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wire/ietf_properties.h"

namespace moqd::wire::ietf {
namespace {

constexpr Version kDrafts[] = {Version::kTransport14, Version::kTransport15,
                               Version::kTransport16, Version::kTransport17,
                               Version::kTransport18, Version::kTransport19,
                               Version::kTransport20};

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "ietf_properties_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace
}  // namespace moqd::wire::ietf

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace moqd::wire::ietf;
  if (size == 0) {
    return 0;
  }
  const Draft& a = *draft(kDrafts[(data[0] & 0x0f) % 7]);
  const Draft& b = *draft(kDrafts[(data[0] >> 4) % 7]);
  std::span<const uint8_t> in(data + 1, size - 1);
  std::vector<uint8_t> there = {0x5a};
  if (!transcode_properties(a, b, in, there)) {
    if (there.size() != 1) {
      bug("a refusal changed the output");
    }
    return 0;
  }
  std::vector<uint8_t> block(there.begin() + 1, there.end());
  std::vector<uint8_t> back;
  if (!transcode_properties(b, a, block, back)) {
    bug("a transcoded block does not transcode back");
  }
  std::vector<uint8_t> again;
  if (!transcode_properties(a, b, back, again) || again != block) {
    bug("the round trip is not stable");
  }
  return 0;
}
