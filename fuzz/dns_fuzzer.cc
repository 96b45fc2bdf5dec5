// libFuzzer target for the DNS answers --cluster-dns reads (runtime/dns.h parse_dns_answer): any
// bytes a nameserver (or whoever spoofs one) sends. Must never crash or read out of bounds; an
// answer that parses holds only well-formed addresses, and a TTL whenever it holds an address.
#include <arpa/inet.h>

#include <cstdint>
#include <cstdlib>

#include "runtime/dns.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto a = moqd::runtime::parse_dns_answer(data, size);
  if (!a) {
    return 0;
  }
  for (const auto& addr : a->addresses) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, addr.c_str(), buf) != 1 && inet_pton(AF_INET6, addr.c_str(), buf) != 1) {
      abort();
    }
  }
  if (!a->addresses.empty() && !a->min_ttl) {
    abort();
  }
  return 0;
}
