// Fuzzer for extract_dcid (src/transport/quic/cid.h): the UDP endpoint runs it on every datagram
// before any connection state exists. The first input byte picks the short-header DCID length
// (0..20); the rest is the datagram. Whatever comes out must lie inside the datagram, and a long
// header's DCID must start at byte 6 with the length its length byte says.
#include <cstdio>
#include <cstdlib>

#include "transport/quic/cid.h"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "cid_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  size_t short_len = data[0] % 21;
  std::span<const uint8_t> dgram(data + 1, size - 1);
  auto dcid = moqd::transport::quic::extract_dcid(dgram, short_len);
  if (!dcid) {
    return 0;
  }
  if (dcid->data() < dgram.data() || dcid->data() + dcid->size() > dgram.data() + dgram.size()) {
    bug("dcid outside the datagram");
  }
  if (moqd::transport::quic::is_long_header(dgram)) {
    if (dcid->data() != dgram.data() + 6 || dcid->size() != dgram[5]) {
      bug("long header dcid misplaced");
    }
  } else if (dcid->size() != short_len || dcid->data() != dgram.data() + 1) {
    bug("short header dcid misplaced");
  }
  (void)moqd::transport::quic::worker_of(*dcid);
  (void)moqd::transport::quic::is_initial(dgram);
  return 0;
}
