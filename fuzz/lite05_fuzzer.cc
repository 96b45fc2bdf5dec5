// Round-trip fuzzer for the moq-lite-05 codecs (src/wire/lite.h, NET-0.3.md §3): SETUP, ANNOUNCE_OK,
// TRACK, TRACK_INFO, the SUBSCRIBE_START/END/DROP responses, ANNOUNCE (status 2) and the
// timestamped FRAME header. The first input byte picks the message; the rest is decoded. Whatever
// decodes must round-trip (lite_round_trip.h).
#include "lite_round_trip.h"

namespace moqd::wire::fuzz {

const char* const kFuzzerName = "lite05_fuzzer";

namespace {

constexpr Version k05 = Version::kLite05;

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
  versioned<LiteSetup>(k05, in, decode_lite_setup);
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
    case 1: return versioned<AnnounceOk>(k05, in, decode_announce_ok);
    case 2: return versioned<TrackRequest>(k05, in, decode_track_request);
    case 3: return versioned<TrackInfo>(k05, in, decode_track_info);
    case 4: return subscribe_response(k05, in);
    case 5: return versioned<Announce>(k05, in, decode_announce);
    case 6: return versioned<AnnouncePlease>(k05, in, decode_announce_please);
    default: return frame_header(in);
  }
}

}  // namespace
}  // namespace moqd::wire::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  moqd::wire::fuzz::run(data[0], std::span<const uint8_t>(data + 1, size - 1));
  return 0;
}
