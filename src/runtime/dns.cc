#include "runtime/dns.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "runtime/tcp.h"

namespace moqd::runtime {

Result<DnsAnswer> parse_dns_answer(const uint8_t* data, size_t size) {
  if (data == nullptr || size > static_cast<size_t>(INT_MAX)) {
    return fail(ErrorCode::kProtocolViolation, "dns: no message");
  }
  ns_msg msg;
  if (ns_initparse(data, static_cast<int>(size), &msg) != 0) {
    return fail(ErrorCode::kProtocolViolation, "dns: malformed message");
  }
  DnsAnswer out;
  out.rcode = ns_msg_getflag(msg, ns_f_rcode);
  const int count = ns_msg_count(msg, ns_s_an);
  for (int i = 0; i < count; ++i) {
    ns_rr rr;
    if (ns_parserr(&msg, ns_s_an, i, &rr) != 0) {
      return fail(ErrorCode::kProtocolViolation, "dns: malformed answer record");
    }
    uint32_t ttl = ns_rr_ttl(rr);
    out.min_ttl = out.min_ttl ? std::min(*out.min_ttl, ttl) : ttl;
    if (ns_rr_class(rr) != ns_c_in) {
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (ns_rr_type(rr) == ns_t_a) {
      if (ns_rr_rdlen(rr) != 4) {
        return fail(ErrorCode::kProtocolViolation, "dns: A record of the wrong size");
      }
      inet_ntop(AF_INET, ns_rr_rdata(rr), text, sizeof text);
      out.addresses.emplace_back(text);
    } else if (ns_rr_type(rr) == ns_t_aaaa) {
      if (ns_rr_rdlen(rr) != 16) {
        return fail(ErrorCode::kProtocolViolation, "dns: AAAA record of the wrong size");
      }
      inet_ntop(AF_INET6, ns_rr_rdata(rr), text, sizeof text);
      out.addresses.emplace_back(text);
    }
  }
  return out;
}

namespace {

// One query's outcome, as DnsLookup's kinds.
DnsLookup query(res_state st, const std::string& name, int type) {
  DnsLookup out;
  unsigned char buf[8192];
  int n = res_nsearch(st, name.c_str(), ns_c_in, type, buf, sizeof buf);
  if (n < 0) {
    // res_nsearch answers -1 for a name without such records, as for a failure: h_errno tells.
    int h = st->res_h_errno;
    if (h == HOST_NOT_FOUND || h == NO_DATA) {
      out.kind = DnsLookup::Kind::kNoAddress;
    } else {
      out.error = h == TRY_AGAIN ? "no answer (timeout or server failure)" : "query refused";
    }
    return out;
  }
  auto answer = parse_dns_answer(buf, static_cast<size_t>(std::min<int>(n, sizeof buf)));
  if (!answer) {
    out.error = answer.error().detail;
    return out;
  }
  out.kind = answer->addresses.empty() ? DnsLookup::Kind::kNoAddress : DnsLookup::Kind::kAddresses;
  out.addresses = std::move(answer->addresses);
  out.ttl_s = answer->min_ttl.value_or(0);
  return out;
}

}  // namespace

DnsLookup resolve_addresses(const std::string& name, const DnsResolverOptions& options) {
  DnsLookup out;
  struct __res_state st;
  std::memset(&st, 0, sizeof st);
  if (res_ninit(&st) != 0) {
    out.error = "cannot initialise the resolver";
    return out;
  }
  st.retrans =
      static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(kQueryTimeout).count());
  st.retry = 1;
  if (!options.server.empty()) {
    auto hp = parse_host_port(options.server);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    if (!hp || inet_pton(AF_INET, hp->host.c_str(), &sin.sin_addr) != 1) {
      res_nclose(&st);
      out.error = "bad resolver address (IPv4:PORT)";
      return out;
    }
    sin.sin_port = htons(hp->port);
    st.nsaddr_list[0] = sin;
    st.nscount = 1;
  }
  DnsLookup a = query(&st, name, ns_t_a);
  DnsLookup aaaa = query(&st, name, ns_t_aaaa);
  res_nclose(&st);
  // Any failed query fails the lookup: a peer set built from half an answer would drop peers
  // that are still there.
  for (const DnsLookup* q : {&a, &aaaa}) {
    if (q->kind == DnsLookup::Kind::kFailed) {
      out.error = q->error;
      return out;
    }
  }
  out.kind = DnsLookup::Kind::kNoAddress;
  for (const DnsLookup* q : {&a, &aaaa}) {
    if (q->kind != DnsLookup::Kind::kAddresses) {
      continue;
    }
    out.ttl_s = out.kind == DnsLookup::Kind::kAddresses ? std::min(out.ttl_s, q->ttl_s) : q->ttl_s;
    out.kind = DnsLookup::Kind::kAddresses;
    for (const auto& addr : q->addresses) {
      if (std::find(out.addresses.begin(), out.addresses.end(), addr) == out.addresses.end()) {
        out.addresses.push_back(addr);
      }
    }
  }
  return out;
}

}  // namespace moqd::runtime
