// Round-trip fuzzer for the IETF MoQ Transport codecs (src/wire/ietf.h). The first input byte
// picks the draft (bits 0-1, and bit 4 adding 4: 14, 15, 16, 17, 18, 19, 20, then 14 again), the
// decoder (bit 2: control message, or a data stream: a SUBGROUP stream (header then objects with
// their payloads), or a FETCH stream when it starts with 0x05 (every draft; bit 6: its groups in
// descending order, which d18+'s Group ID Deltas count down in);
// bit 3: varints back to back in the leading-ones form instead, d18's 7-byte form with bit 4, and
// the same bytes as a HOP_PATH value) and
// the peer whose forms are read first and written (bit 5: @moq/net's); bit 6 (without bits 3 and 2): one
// OBJECT_DATAGRAM (wire/ietf_datagram.h) instead. Whatever decodes must
// re-encode to
// bytes that decode to the same value and re-encode identically; a mismatch aborts (a codec bug).
// Bit 7: the rest is an object's extension block (Properties on 18+) carried between two drafts
// (wire/ietf_properties.h), bits 0-2 and 4-6 picking them (each modulo 7, 14 to 20): whatever
// transcodes must transcode back to a block that transcodes forward to the same bytes again (a
// block from a delta-coded draft whose types go down never gets this far); a refusal must leave
// the output untouched.
// Anything else must come back as need-more or an error, never a crash or a sanitizer report.
#include <iterator>
#include <vector>

#include "wire/ietf.h"
#include "wire/ietf_datagram.h"
#include "wire/ietf_cluster.h"
#include "wire/ietf_properties.h"
#include "round_trip.h"

namespace moqd::wire::fuzz {
const char* const kFuzzerName = "ietf_fuzzer";
}  // namespace moqd::wire::fuzz

namespace moqd::wire::ietf {
namespace {

constexpr Version kDrafts[] = {Version::kTransport14, Version::kTransport15,
                               Version::kTransport16, Version::kTransport17,
                               Version::kTransport18, Version::kTransport19,
                               Version::kTransport20};

using fuzz::bug;

// HOP_PATH's value (wire/ietf_cluster.h): whatever decodes is a valid path that re-encodes (in
// @moq/net's form) to a value that decodes to the same hops.
void hop_path(Version v, std::string_view value) {
  auto hops = decode_hop_path(v, value);
  if (!hops) {
    return;
  }
  if (!valid_hop_path(*hops)) {
    bug("decoded HOP_PATH is not valid");
  }
  auto again = decode_hop_path(v, encode_hop_path(*hops));
  if (!again || *again != *hops) {
    bug("HOP_PATH does not round-trip");
  }
}

// The cluster parameters of a decoded PUBLISH_NAMESPACE or extended NAMESPACE.
void advert(Version v, const ControlMessage& m) {
  const Parameters* params = nullptr;
  if (const auto* p = std::get_if<PublishNamespace>(&m)) {
    params = &p->params;
  } else if (const auto* n = std::get_if<Namespace>(&m)) {
    params = &n->params;
  }
  if (params == nullptr) {
    return;
  }
  if (const Parameter* hp = find(*params, kParamHopPath); hp != nullptr) {
    hop_path(v, hp->bytes);
  }
  auto a = read_advert(v, *params);
  if (!a) {
    return;
  }
  Parameters out;
  if (!append_advert(*a, out)) {
    bug("a read advertisement does not write");
  }
  auto b = read_advert(v, out);
  if (!b || !(*b == *a)) {
    bug("advertisement does not round-trip");
  }
}

void control(Version v, Peer peer, std::span<const uint8_t> in) {
  const Limits limits;
  auto m = fuzz::round_trip<ControlMessage>(
      in,
      [&](const ControlMessage& msg, std::vector<uint8_t>& out) {
        if (!encode(v, msg, out, peer)) {
          bug("a decoded message does not encode");
        }
      },
      [&](std::span<const uint8_t> b) { return decode_control(v, b, limits, peer); });
  if (m) {
    advert(v, *m);
  }
}

// A FETCH stream (drafts 14..20): FETCH_HEADER, then objects, each read against the one before
// (d15+ Serialization Flags refer to it, d18+ deltas count from it); every object must re-encode to
// bytes that decode the same without that reference, and (d18+ deltas) with it.
void fetch_stream(Version v, std::span<const uint8_t> in, bool descending) {
  const Limits limits;
  auto h = decode_fetch_header(v, in);
  if (!h || !h->has_value()) {
    return;
  }
  std::vector<uint8_t> out;
  encode_fetch_header(v, (*h)->value, out);
  auto again = decode_fetch_header(v, std::span<const uint8_t>(out));
  if (!again || !again->has_value() || (*again)->value != (*h)->value) {
    bug("FETCH_HEADER does not round-trip");
  }
  auto rest = in.subspan((*h)->consumed);
  std::optional<FetchObject> prev;
  while (!rest.empty()) {
    auto o = decode_fetch_object(v, prev ? &*prev : nullptr, descending, rest, limits);
    if (!o || !o->has_value()) {
      return;
    }
    std::vector<uint8_t> obj;
    encode_fetch_object(v, (*o)->value, obj);
    auto o2 = decode_fetch_object(v, nullptr, std::span<const uint8_t>(obj), limits);
    if ((*o)->value.end_of_range == 0 &&
        (!o2 || !o2->has_value() || !((*o2)->value == (*o)->value) ||
         (*o2)->consumed != obj.size())) {
      bug("fetch object does not round-trip");
    }
    if (prev && (*o)->value.end_of_range == 0) {
      std::vector<uint8_t> delta;
      encode_fetch_object(v, (*o)->value, &*prev, descending, delta);
      auto o3 = decode_fetch_object(v, &*prev, descending, std::span<const uint8_t>(delta), limits);
      if (!o3 || !o3->has_value() || !((*o3)->value == (*o)->value) ||
          (*o3)->consumed != delta.size()) {
        bug("fetch object does not round-trip against the previous one");
      }
    }
    prev = (*o)->value;
    rest = rest.subspan((*o)->consumed);
    const uint64_t len = (*o)->value.end_of_range != 0 ? 0 : (*o)->value.payload_length;
    if (len > rest.size()) {
      return;
    }
    rest = rest.subspan(static_cast<size_t>(len));
  }
}

void subgroup(Version v, std::span<const uint8_t> in, bool descending) {
  const Limits limits;
  if (!in.empty() && in[0] == kFetchHeaderType) {
    fetch_stream(v, in, descending);
    return;
  }
  auto h = decode_subgroup_header(v, in, limits);
  if (!h || !h->has_value()) {
    return;
  }
  const SubgroupHeader header = (*h)->value;
  std::vector<uint8_t> out;
  encode(v, header, out);
  auto again = decode_subgroup_header(v, std::span<const uint8_t>(out), limits);
  if (!again || !again->has_value() || !((*again)->value == header) ||
      (*again)->consumed != out.size()) {
    bug("subgroup header does not round-trip");
  }
  auto rest = in.subspan((*h)->consumed);
  std::optional<uint64_t> id;
  while (!rest.empty()) {
    auto o = decode_object(v, header, rest, limits);
    if (!o || !o->has_value()) {
      return;
    }
    std::vector<uint8_t> obj;
    encode_object(v, header, (*o)->value, obj);
    auto o2 = decode_object(v, header, std::span<const uint8_t>(obj), limits);
    if (!o2 || !o2->has_value() || !((*o2)->value == (*o)->value) ||
        (*o2)->consumed != obj.size()) {
      bug("object header does not round-trip");
    }
    id = object_id(id, (*o)->value.id_delta);
    if (!id) {
      return;
    }
    rest = rest.subspan((*o)->consumed);
    if ((*o)->value.payload_length > rest.size()) {
      return;
    }
    rest = rest.subspan(static_cast<size_t>((*o)->value.payload_length));
  }
}

// One OBJECT_DATAGRAM: its header and payload must re-encode to the same bytes (minimal varints
// aside) that decode to the same header.
void datagram(Version v, std::span<const uint8_t> in) {
  const Limits limits;
  auto d = decode_datagram(v, in, limits);
  if (!d) {
    return;
  }
  if (!d->has_value() || (*d)->consumed > in.size()) {
    bug("datagram header consumed out of range");
  }
  auto payload = in.subspan((*d)->consumed);
  std::vector<uint8_t> out;
  if (!encode_datagram(v, (*d)->value, payload, out)) {
    bug("a decoded datagram does not encode");
  }
  auto again = decode_datagram(v, std::span<const uint8_t>(out), limits);
  if (!again || !again->has_value() || !((*again)->value == (*d)->value) ||
      out.size() - (*again)->consumed != ((*d)->value.status ? 0 : payload.size())) {
    bug("datagram does not round-trip");
  }
}

void varints(VarintForm form, std::span<const uint8_t> in) {
  while (!in.empty()) {
    auto v = read_varint(form, in);
    if (!v || !v->has_value()) {
      return;
    }
    std::vector<uint8_t> out;
    write_varint(form, (*v)->value, out);
    auto again = read_varint(form, std::span<const uint8_t>(out));
    if (!again || !again->has_value() || (*again)->value != (*v)->value ||
        (*again)->consumed != out.size() || out.size() > (*v)->consumed) {
      bug("leading-ones varint does not round-trip minimally");
    }
    in = in.subspan((*v)->consumed);
  }
}

// An extension block written in draft `a`, carried to `b` and back.
void properties(Version a, Version b, std::span<const uint8_t> in) {
  const Draft& from = *draft(a);
  const Draft& to = *draft(b);
  std::vector<uint8_t> there = {0x5a};
  if (!transcode_properties(from, to, in, there)) {
    if (there.size() != 1) {
      bug("a refusal changed the output");
    }
    return;
  }
  std::vector<uint8_t> block(there.begin() + 1, there.end());
  std::vector<uint8_t> back;
  if (!transcode_properties(to, from, block, back)) {
    bug("a transcoded block does not transcode back");
  }
  std::vector<uint8_t> again;
  if (!transcode_properties(from, to, back, again) || again != block) {
    bug("the round trip is not stable");
  }
}

}  // namespace
}  // namespace moqd::wire::ietf

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  using moqd::wire::ietf::Peer;
  using moqd::wire::ietf::VarintForm;
  const size_t index =
      ((data[0] & 3u) | ((data[0] >> 2) & 4u)) % std::size(moqd::wire::ietf::kDrafts);
  const moqd::wire::Version v = moqd::wire::ietf::kDrafts[index];
  const Peer peer = (data[0] & 0x20) != 0 ? Peer::kMoqNetJs : Peer::kDraftText;
  std::span<const uint8_t> in(data + 1, size - 1);
  if ((data[0] & 0x80) != 0) {
    constexpr size_t kCount = std::size(moqd::wire::ietf::kDrafts);
    moqd::wire::ietf::properties(moqd::wire::ietf::kDrafts[(data[0] & 7u) % kCount],
                                 moqd::wire::ietf::kDrafts[((data[0] >> 4) & 7u) % kCount], in);
  } else if ((data[0] & 8) != 0) {
    moqd::wire::ietf::varints(
        (data[0] & 0x10) != 0 ? VarintForm::kLeadingOnes7 : VarintForm::kLeadingOnes, in);
    moqd::wire::ietf::hop_path(
        v, std::string_view(reinterpret_cast<const char*>(in.data()), in.size()));
  } else if ((data[0] & 0x44) == 0x40) {
    moqd::wire::ietf::datagram(v, in);
  } else if ((data[0] & 4) == 0) {
    moqd::wire::ietf::control(v, peer, in);
  } else {
    moqd::wire::ietf::subgroup(v, in, (data[0] & 0x40) != 0);
  }
  return 0;
}
