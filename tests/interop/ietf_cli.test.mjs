// The moq CLI over IETF MoQ Transport (`--versions moq-transport-14|15|16`, IetfSession's client
// role) against moqd: `moq pub` -> moqd -> `moq sub` byte for byte over several groups, for each
// draft, over WebSocket, raw QUIC and WebTransport (moqd's log names the draft each session ran); across
// protocol families (`moq pub` on draft 16 to `moq sub` on moq-lite, and @moq/net 0.3.4 forced to
// draft 16 publishing to `moq sub` on draft 16); `moq announced` on each draft seeing an
// announcement come and go; and `moq bench fanout`, `msgs` and `churn` with every generator
// session on draft 16 (msgs and churn on 14 too). Only moqd's own client speaks IETF on the moq side here: these rows of
// docs/INTEROP.md are "moq against moqd only". The cases and helpers it shares with
// ietf_cli_d17.test.mjs are ietf_cli.mjs's.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import * as Net from "@moq/net";
import { FRAMES, GROUPS, announcedTests, benchChurn, benchFanoutTest, benchMsgs, pubSubTests, pubToSub, sessions, subReadsTrack } from "./ietf_cli.mjs";
import { closeNetConnections, netConnect } from "./net_client.mjs";

const started = [];
after(async () => {
  closeNetConnections();
  H.closeAllConnections();
  for (const m of started) await m.stop().catch(() => {});
});

async function moqd(args = []) {
  const m = await H.startMoqd(args);
  started.push(m);
  return m;
}

// moqd serves draft 14 only through SETUP, and only when it is the one SETUP version enabled
// (docs/ARCHITECTURE.md); 15 and 16 by their own ALPNs next to everything else.
const RELAY_ARGS = {
  "moq-transport-16": [],
  "moq-transport-15": [],
  "moq-transport-14": ["--versions", "moq-transport-14,moq-lite-04"],
};

pubSubTests(moqd, {
  "moq-transport-16": ["ws", "quic", "wt"],
  "moq-transport-15": ["ws", "quic", "wt"],
  "moq-transport-14": ["ws", "quic", "wt"],
}, RELAY_ARGS);

test("cross-protocol: moq pub over moq-transport-16 -> moqd -> moq sub over moq-lite-04", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd();
  await pubToSub(m, { pubVersions: "moq-transport-16", subVersions: "moq-lite-04", transport: "ws" });
  assert.equal(sessions(m, "moq-transport-16"), 1, m.stderrText());
  assert.equal(sessions(m, "moq-lite-04"), 1, m.stderrText());
});

test("cross-protocol: @moq/net 0.3.4 forced to moq-transport-16 publishes -> moq sub over moq-transport-16 (QUIC)", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  // moqd offers @moq/net (moq-lite-03+ and the IETF drafts over WebSocket) only draft 16.
  const m = await moqd(["--versions", "moq-lite-02,moq-transport-16"]);
  const net = await netConnect(m.url);
  assert.equal(net.version, "moq-transport-16");
  const p = `${H.uniquePrefix("ietfnet")}/alice`;
  const joined = H.gate();
  const broadcast = new Net.Broadcast.Producer();
  net.publish(Net.Path.from(p), broadcast);
  (async () => {
    const req = await broadcast.requested();
    if (!req) return;
    const track = req.accept();
    let ts = 0;
    for (const [i, frames] of GROUPS.entries()) {
      const g = track.appendGroup();
      for (const [j, payload] of frames.entries()) {
        g.writeFrame({ payload, timestamp: Net.Time.Timestamp.fromMillis(ts++) });
        if (i === 0 && j === 0) await joined.wait; // group 0 open until moq sub has its first frame
      }
      g.close();
    }
    track.close();
  })().catch((err) => console.error("net publisher", err));
  const sub = H.spawnMoq(["sub", m.url, p, "--track", "video", "--length-prefixed",
    "--versions", "moq-transport-16", "--transport", "quic"]);
  try {
    await subReadsTrack(m, sub, { joinedAt: 4 + FRAMES[0].length, joined: () => joined.open() });
    assert.equal(sessions(m, "moq-transport-16"), 2, m.stderrText());
  } finally {
    await sub.stop().catch(() => {});
  }
  net.close();
});

announcedTests(moqd, { "moq-transport-16": "ws", "moq-transport-15": "ws", "moq-transport-14": "ws" }, RELAY_ARGS);

benchFanoutTest(moqd, "moq-transport-16");

for (const [version, transport] of [["moq-transport-14", "quic"], ["moq-transport-16", "ws"]]) {
  test(`moq bench msgs --versions ${version} (${transport}): every message to every subscriber over the draft`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    await benchMsgs(await moqd(["--versions", `${version},moq-lite-04`]), version, transport);
  });
  test(`moq bench churn --versions ${version}: every cycle done over the draft (WebSocket and QUIC)`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    await benchChurn(await moqd(["--versions", `${version},moq-lite-04`]), version);
  });
}
