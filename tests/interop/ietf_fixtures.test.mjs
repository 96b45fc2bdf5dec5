// @moq/net 0.3.4's IETF encoders against moqd's IETF codec (src/wire/ietf.h): every message the
// JS writes for drafts 14 to 20 (ietf_fixtures.mjs) must be one of the "JS" fixtures that
// src/wire/ietf_test.cc decodes and re-encodes byte for byte under the same draft. A change in the
// client's bytes fails here until the C++ fixtures follow. Codec only: moqd serves no IETF
// session yet. No moqd process is needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fixtures } from "./ietf_fixtures.mjs";

const source = readFileSync(new URL("../../src/wire/ietf_test.cc", import.meta.url), "utf8");

// Every (draft, hex) the C++ test checks: expect_round_trip(kNN, "hex", ...) and the loops over
// drafts that call it with `v`. A fixture in @moq/net's own forms (LARGEST_OBJECT and
// INCLUDE_PROPERTIES with a Length, drafts 17+) is checked with Peer::kMoqNetJs, so moqd's encoder
// writes those bytes too.
function cxxFixtures() {
  const found = new Set();
  const norm = (h) => h.replace(/\s+/g, "");
  for (const m of source.matchAll(/expect_round_trip\(\s*k(1[4-9]|20),\s*"([0-9a-f ]+)"/g)) {
    found.add(`${m[1]} ${norm(m[2])}`);
  }
  // for (Version v : {k14, k15, k16}) { ... expect_round_trip(v, "hex", ...) ... }
  for (const loop of source.matchAll(/for \(Version v : \{([k0-9, ]+)\}\) \{([\s\S]*?)\n  \}/g)) {
    const drafts = loop[1].split(",").map((s) => s.trim().slice(1));
    for (const m of loop[2].matchAll(/expect_round_trip\(v, "([0-9a-f ]+)"/g)) {
      for (const d of drafts) found.add(`${d} ${norm(m[1])}`);
    }
  }
  return found;
}

test("every IETF message @moq/net 0.3.4 encodes is a byte-exact fixture of moqd's codec", async () => {
  const cxx = cxxFixtures();
  assert.ok(cxx.size > 30, `only ${cxx.size} fixtures found in ietf_test.cc`);
  const rows = await fixtures();
  assert.equal(new Set(rows.map((r) => r.draft)).size, 7, "drafts 14 to 20");
  const missing = rows.filter((r) => !cxx.has(`${r.draft} ${r.hex}`));
  assert.deepEqual(missing, [], "JS bytes without a matching C++ fixture");
});
