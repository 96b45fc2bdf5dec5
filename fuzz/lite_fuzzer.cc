// Round-trip fuzzer for the moq-lite codecs (src/wire/lite.h). The first input byte picks the
// version (low 2 bits) and the message (the rest); the remaining bytes are decoded. Whatever
// decodes must round-trip (lite_round_trip.h).
#include "lite_round_trip.h"

namespace moqd::wire::fuzz {

const char* const kFuzzerName = "lite_fuzzer";

namespace {

constexpr Version kVersions[] = {Version::kLite01, Version::kLite02, Version::kLite03,
                                 Version::kLite04};

template <class T, class Fn>
void setup(std::span<const uint8_t> in, Fn decode_fn) {
  const DecodeLimits limits;
  round_trip<T>(
      in, [](const T& m, std::vector<uint8_t>& out) { encode(m, out); },
      [&](std::span<const uint8_t> b) { return decode_fn(b, limits); });
}

void varint(std::span<const uint8_t> in) {
  round_trip<uint64_t>(in, encode_frame_header, decode_frame_header);
  round_trip<uint64_t>(in, encode_frame_header, decode_stream_type);
}

void run(uint8_t selector, std::span<const uint8_t> in) {
  Version v = kVersions[selector & 3];
  switch ((selector >> 2) % 15) {
    case 0: return setup<ClientSetup>(in, decode_client_setup);
    case 1: return setup<ServerSetup>(in, decode_server_setup);
    case 2: return versioned<SessionInfo>(v, in, decode_session_info);
    case 3: return versioned<AnnouncePlease>(v, in, decode_announce_please);
    case 4: return versioned<AnnounceInit>(v, in, decode_announce_init);
    case 5: return versioned<Announce>(v, in, decode_announce);
    case 6: return versioned<Subscribe>(v, in, decode_subscribe);
    case 7: return subscribe_response(v, in);
    case 8: return versioned<SubscribeUpdate>(v, in, decode_subscribe_update);
    case 9: return versioned<GroupHeader>(v, in, decode_group_header);
    case 10: return versioned<Fetch>(v, in, decode_fetch);
    case 11: return versioned<Goaway>(v, in, decode_goaway);
    case 12: return versioned<Probe>(v, in, decode_probe);
    default: return varint(in);
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
