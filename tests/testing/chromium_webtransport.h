#pragma once
// Bytes Debian's headless Chromium 156.0.8078.108 sent to moqd when a page opened
// `new WebTransport("https://127.0.0.1:PORT/", {protocols: ["moq-lite-04", "moq-lite-03", "moql"],
// serverCertificateHashes: [...]})`, then sent the datagram "hi", a uni stream and a bidi stream.
// Captured on 2026-11-30 from moqd's debug log (webtransport: ... lines) while running
//   cd tests/browser && MOQD_BIN=<moqd wrapper adding --log-level debug>
//     node --test --test-name-pattern "raw WebTransport" webtransport.test.mjs
// Used as decoder fixtures (h3, qpack and server tests) and fuzz seeds. Hex for from_hex().
namespace moqd::test::chromium {

// The client control stream: type 0x00, then SETTINGS (type 0x04, 41 bytes): QPACK_MAX_TABLE_
// CAPACITY 65536, MAX_FIELD_SECTION_SIZE 16384, QPACK_BLOCKED_STREAMS 100, H3_DATAGRAM 1,
// H3_DATAGRAM draft-04 (0xffd277) 1, ENABLE_WEBTRANSPORT 1, and a GREASE setting.
inline constexpr const char* kSettingsPayload =
    "01 80 01 00 00 06 80 00 40 00 07 40 64 33 01 80 ff d2 77 01 ab 60 37 42 01 c0 00 00 0f 66 "
    "74 13 fb c0 00 00 00 da 8d 7d 17";
inline constexpr const char* kControlStreamStart = "00 04 29";

// The QPACK encoder stream: type 0x02, Set Dynamic Table Capacity 0.
inline constexpr const char* kQpackEncoderStream = "02 20";

// The extended CONNECT on stream 0: HEADERS (type 0x01, length 130 as a 2-byte varint) and its
// QPACK field section (static table and Huffman literals, no dynamic table).
inline constexpr const char* kConnectFrameHeader = "01 40 82";
inline constexpr const char* kConnectFieldSection =
    "00 00 d7 cf 50 8b 08 9d 5c 0b 81 70 dc 6d a6 40 cf c1 2f 00 b9 5d 87 49 c8 7a 3f 89 f0 58 "
    "d3 60 ea 45 67 b1 3f 2f 0e 41 48 b7 82 c6 9b 07 52 2b 3d 89 5a 74 a6 b6 56 92 c1 ca 90 0b "
    "01 31 5f 4b 90 9d 29 ae e3 0c 50 72 0e 89 ce 84 dc 65 a0 05 df 2f 09 f0 95 87 dc 66 a0 71 "
    "d0 55 ab b0 e9 39 0f 42 3f 9e fe 69 3f 65 a8 32 4a b0 1a fe 7e 94 fe 69 3f 65 a8 32 4a b0 "
    "19 fe 7e 94 fe 69 3f 6a 3f 9f";

// Stream preambles: a WebTransport uni stream (type 0x54 as a 2-byte varint, session 0) and a
// bidi stream (signal 0x41 as a 2-byte varint, session 0).
inline constexpr const char* kUniPreamble = "40 54 00";
inline constexpr const char* kBidiPreamble = "40 41 00";

// The datagram "hi" on session 0 (quarter stream id 0).
inline constexpr const char* kDatagram = "00 68 69";

}  // namespace moqd::test::chromium
