// Fuzzer for the QPACK decoder (src/transport/webtransport/qpack.h). The first input byte picks
// field-section decoding (even) or the encoder stream (odd) and, for field sections, the size
// bound. A field section that decodes must re-encode with encode_field_section and decode to the
// same fields; a mismatch aborts.
#include <cstdio>
#include <cstdlib>

#include "transport/webtransport/qpack.h"

namespace moqd::transport::webtransport {
namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "qpack_fuzzer: %s\n", what);
  std::abort();
}

bool same(const HeaderList& a, const HeaderList& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value != b[i].value) {
      return false;
    }
  }
  return true;
}

bool has_upper_case(const HeaderList& h) {
  for (const HeaderField& f : h) {
    for (char c : f.name) {
      if (c >= 'A' && c <= 'Z') {
        return true;
      }
    }
  }
  return false;
}

void field_section(uint8_t selector, std::span<const uint8_t> in) {
  auto decoder = QpackDecoder::create();
  if (!decoder) {
    bug("decoder allocation failed");
  }
  size_t max = selector < 0x80 ? 16384 : selector;
  auto fields = (*decoder)->decode(in, max);
  if (!fields || has_upper_case(*fields)) {
    return;
  }
  auto encoded = encode_field_section(*fields);
  if (!encoded) {
    bug("decoded fields do not encode");
  }
  auto again = (*decoder)->decode(*encoded, max);
  if (!again || !same(*again, *fields)) {
    bug("re-decoded fields differ");
  }
}

void encoder_stream(std::span<const uint8_t> in) {
  auto decoder = QpackDecoder::create();
  if (!decoder) {
    bug("decoder allocation failed");
  }
  // Fed in two pieces, as a stream delivers it.
  size_t half = in.size() / 2;
  if ((*decoder)->read_encoder_stream(in.first(half))) {
    (void)(*decoder)->read_encoder_stream(in.subspan(half));
  }
}

}  // namespace
}  // namespace moqd::transport::webtransport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  std::span<const uint8_t> in(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    moqd::transport::webtransport::field_section(data[0], in);
  } else {
    moqd::transport::webtransport::encoder_stream(in);
  }
  return 0;
}
