// The moq CLI over IETF MoQ Transport drafts 17 to 20 (`--versions moq-transport-17..20`,
// IetfSession's client role: SETUP on uni streams, a bidi stream per request) against moqd:
// `moq pub` -> moqd -> `moq sub` byte for byte over several groups for each draft, over WebSocket
// (qmux), raw QUIC and WebTransport (draft 19 has no WebSocket form in the protocol table, as
// @moq/net 0.3.4 offers none: QUIC and WebTransport only); moqd's log names the draft both
// sessions ran. `moq announced` on each draft sees a `moq pub` become active and end; `moq pub` on
// draft 20 reaches `moq sub` on draft 16 and on moq-lite-04; `moq sub` on 17 and 20 reads an
// @moq/net 0.3.4 publisher forced to the same draft (the third-party side of these rows); and
// `moq bench fanout --versions moq-transport-20` runs its publisher and viewers on draft 20, and
// `moq bench msgs` and `churn` every session; and `moq sub` on draft 20 follows a GOAWAY to a
// second moqd. About 25 s in all. The cases and helpers it shares with ietf_cli.test.mjs are
// ietf_cli.mjs's.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { closeNetConnections, netConnect, netPublish } from "./net_client.mjs";
import { FRAMES, GROUPS, announcedTests, benchChurn, benchFanoutTest, benchMsgs, lp, pubSubTests, pubToSub, sessions, subReadsTrack } from "./ietf_cli.mjs";
import { waitLog } from "./raw.mjs";

const { moqd } = H.moqdsOfFile(() => {
  closeNetConnections();
  H.closeAllConnections();
});

pubSubTests(moqd, {
  "moq-transport-17": ["ws", "quic", "wt"],
  "moq-transport-18": ["ws", "quic", "wt"],
  "moq-transport-19": ["quic", "wt"],
  "moq-transport-20": ["ws", "quic", "wt"],
});

announcedTests(moqd, { "moq-transport-17": "ws", "moq-transport-18": "ws", "moq-transport-19": "quic", "moq-transport-20": "ws" });

for (const subVersion of ["moq-transport-16", "moq-lite-04"]) {
  test(`cross-draft: moq pub over moq-transport-20 -> moqd -> moq sub over ${subVersion} (ws)`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd();
    await pubToSub(m, { pubVersions: "moq-transport-20", subVersions: subVersion, transport: "ws" });
    assert.equal(sessions(m, "moq-transport-20"), 1, m.stderrText());
    assert.equal(sessions(m, subVersion), 1, m.stderrText());
  });
}

// @moq/net 0.3.4 over WebSocket, forced to the draft by moqd's --versions (it offers 17 as
// qmux-NN.moqt-17 and 20 as qmux-01.moqt-20), publishes three groups and ends the track; `moq sub`
// on the same draft over QUIC reads them byte for byte and exits at the end of the track.
for (const version of ["moq-transport-17", "moq-transport-20"]) {
  test(`third-party: @moq/net 0.3.4 forced to ${version} publishes -> moqd -> moq sub over ${version} (QUIC)`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(["--versions", `moq-lite-02,${version}`]);
    const net = await netConnect(m.url);
    assert.equal(net.version, version);
    const p = `${H.uniquePrefix("ietfnet17")}/alice`;
    const joined = H.gate();
    netPublish(net, p, GROUPS, { before: (i) => (i === 1 ? joined.wait : Promise.resolve()), end: true });
    const sub = H.spawnMoq(["sub", m.url, p, "--track", "video", "--length-prefixed",
      "--versions", version, "--transport", "quic"]);
    try {
      await subReadsTrack(m, sub, { joinedAt: lp(GROUPS[0]).length, joined: () => joined.open(), what: "group 0" });
      assert.equal(sessions(m, version), 2, m.stderrText());
    } finally {
      await sub.stop().catch(() => {});
    }
    net.close();
  });
}

benchFanoutTest(moqd, "moq-transport-20");

test("moq bench msgs --versions moq-transport-20 (quic): every message to every subscriber over draft 20", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  await benchMsgs(await moqd(["--versions", "moq-transport-20,moq-lite-04"]), "moq-transport-20", "quic");
});

test("moq bench churn --versions moq-transport-20: every cycle done over draft 20 (WebSocket and QUIC)", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  await benchChurn(await moqd(["--versions", "moq-transport-20,moq-lite-04"]), "moq-transport-20");
});

// GOAWAY on draft 20 (the relay's SETUP stream): `moq sub` on moqd A, where nothing is published
// yet, follows A's GOAWAY (SIGTERM, --goaway-url B) to moqd B, where `moq pub` on draft 20 is, and
// reads the whole track there byte for byte.
test("moq sub over moq-transport-20 (QUIC) follows a GOAWAY to a second moqd and reads the track there", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const b = await moqd();
  const a = await moqd(["--goaway-url", b.url, "--drain-timeout", "4s"]);
  const p = `${H.uniquePrefix("ietfgoaway")}/alice`;
  const v = ["--versions", "moq-transport-20", "--transport", "quic"];
  const pub = H.spawnMoq(["pub", b.url, p, "--track", "video", "--group-every", "2", "--length-prefixed", ...v]);
  const sub = H.spawnMoq(["sub", a.url, p, "--track", "video", "--length-prefixed", ...v]);
  try {
    pub.write(lp(FRAMES.slice(0, 1)));
    await waitLog(a, /session \d+ start .* version=moq-transport-20 /, 10_000);
    const stopped = a.stop({ ms: 10_000 });
    await H.waitFor(() => /goaway sent uri=http:\/\/127\.0\.0\.1:\d+\//.test(a.stderrText()), 5_000, "A's GOAWAY");
    await H.waitFor(() => /moq: relay sent GOAWAY; moving to http:\/\/127\.0\.0\.1/.test(sub.stderrText()), 5_000,
      () => `moq sub to follow the GOAWAY\n${sub.describe()}\nA:\n${a.stderrText()}`);
    await subReadsTrack(a, sub, {
      joinedAt: 4 + FRAMES[0].length,
      joined: () => {
        pub.write(lp(FRAMES.slice(1)));
        pub.endStdin();
      },
      what: "the first frame through B",
    });
    assert.deepEqual(await stopped, { code: 0, signal: null }, a.describe());
    assert.equal(sessions(b, "moq-transport-20"), 2, b.stderrText());
  } finally {
    await pub.stop().catch(() => {});
    await sub.stop().catch(() => {});
  }
});
