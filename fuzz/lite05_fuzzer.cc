// Round-trip fuzzer for the moq-lite-05 codecs (src/wire/lite.h, NET-0.3.md §3): SETUP, ANNOUNCE_OK,
// TRACK, TRACK_INFO, the SUBSCRIBE_START/END/DROP responses, ANNOUNCE (status 2) and the
// timestamped FRAME header. The first input byte picks the message; the rest is decoded. Whatever
// decodes must re-encode to bytes that decode to the same value, consume exactly what was written,
// and re-encode identically. A mismatch aborts: it is a codec bug.
#include <cstdio>
#include <cstdlib>

#include "wire/lite.h"

namespace moqd::wire {
namespace {

constexpr Version k05 = Version::kLite05;

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "lite05_fuzzer: %s\n", what);
  std::abort();
}

template <class T, class Encode, class Decode>
void round_trip(std::span<const uint8_t> in, Encode encode_fn, Decode decode_fn) {
  auto first = decode_fn(in);
  if (!first || !first->has_value()) {
    return;
  }
  if ((*first)->consumed == 0 || (*first)->consumed > in.size()) {
    bug("consumed out of range");
  }
  std::vector<uint8_t> bytes;
  encode_fn((*first)->value, bytes);
  auto second = decode_fn(std::span<const uint8_t>(bytes));
  if (!second || !second->has_value()) {
    bug("re-encoded message does not decode");
  }
  if (!((*second)->value == (*first)->value)) {
    bug("re-decoded value differs");
  }
  if ((*second)->consumed != bytes.size()) {
    bug("re-decode consumed a different size");
  }
  std::vector<uint8_t> again;
  encode_fn((*second)->value, again);
  if (again != bytes) {
    bug("encoding is not deterministic");
  }
}

template <class T, class Fn>
void versioned(std::span<const uint8_t> in, Fn decode_fn) {
  const DecodeLimits limits;
  round_trip<T>(
      in, [](const T& m, std::vector<uint8_t>& out) { encode(k05, m, out); },
      [&](std::span<const uint8_t> b) { return decode_fn(k05, b, limits); });
}

void setup(std::span<const uint8_t> in) {
  const DecodeLimits limits;
  auto r = decode_lite_setup(k05, in, limits);
  if (r && r->has_value()) {
    // Every known varint parameter that decoded is readable.
    const LiteSetup& s = (*r)->value;
    for (uint64_t id : {LiteSetup::kProbe, LiteSetup::kRole, LiteSetup::kOrigin}) {
      bool present = false;
      for (const auto& p : s.parameters) {
        present = present || p.id == id;
      }
      if (present && !s.varint(id)) {
        bug("a decoded varint parameter does not read back");
      }
    }
  }
  versioned<LiteSetup>(in, decode_lite_setup);
}

void subscribe_response(std::span<const uint8_t> in) {
  const DecodeLimits limits;
  round_trip<SubscribeResponse>(
      in,
      [](const SubscribeResponse& m, std::vector<uint8_t>& out) {
        std::visit([&](const auto& alt) { encode(k05, alt, out); }, m);
      },
      [&](std::span<const uint8_t> b) { return decode_subscribe_response(k05, b, limits); });
}

void frame_header(std::span<const uint8_t> in) {
  round_trip<TimedFrameHeader>(
      in,
      [](const TimedFrameHeader& m, std::vector<uint8_t>& out) {
        if (!encode_timed_frame_header(m, out)) {
          bug("a decoded timestamp delta does not encode");
        }
      },
      decode_timed_frame_header);
}

void run(uint8_t selector, std::span<const uint8_t> in) {
  switch (selector % 8) {
    case 0: return setup(in);
    case 1: return versioned<AnnounceOk>(in, decode_announce_ok);
    case 2: return versioned<TrackRequest>(in, decode_track_request);
    case 3: return versioned<TrackInfo>(in, decode_track_info);
    case 4: return subscribe_response(in);
    case 5: return versioned<Announce>(in, decode_announce);
    case 6: return versioned<AnnouncePlease>(in, decode_announce_please);
    default: return frame_header(in);
  }
}

}  // namespace
}  // namespace moqd::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  moqd::wire::run(data[0], std::span<const uint8_t>(data + 1, size - 1));
  return 0;
}
