// Object timestamps across the protocol families: a moq-lite-05 publisher's frame timestamps (its
// own timescale, 90 kHz here, going backwards inside a group as B-frames do) reach an @moq/net
// 0.3.4 subscriber forced to moqt-17 and moqt-20 exactly: moqd declares the track's TIMESCALE
// (0x08) in the SUBSCRIBE_OK Track Properties and writes each object's LOC Timestamp (0x10)
// property (@moq/net reads Timestamps only on a track that declared a TIMESCALE). Each client is
// made to offer one WebSocket subprotocol, so the publisher speaks lite-05 and the subscriber the
// IETF draft through the same moqd.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { TIMED, TIMED_INFO as INFO, TIMED_STAMPS as STAMPS, closeNetConnections, netConnect, netPublishTimed, netWaitActive } from "./net_client.mjs";
import * as Net from "@moq/net";

const { moqd } = H.moqdsOfFile(() => {
  closeNetConnections();
});

// Connects with @moq/net offering only the WebSocket subprotocol `protocol`.
async function connectAs(url, protocol) {
  const Base = globalThis.WebSocket;
  class Forced extends Base {
    constructor(u, protocols, options) {
      super(u, [protocols ?? []].flat().filter((p) => p === protocol), options);
    }
  }
  globalThis.WebSocket = Forced;
  try {
    return await netConnect(url);
  } finally {
    globalThis.WebSocket = Base;
  }
}

const DRAFTS = { "moq-transport-17": "qmux-02.moqt-17", "moq-transport-20": "qmux-01.moqt-20" };

for (const [version, protocol] of Object.entries(DRAFTS)) {
  test(`a moq-lite-05 publisher's timestamps reach an @moq/net 0.3.4 ${version} subscriber exactly`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(["--versions", `moq-lite-05,${version}`]);
    const p = `${H.uniquePrefix("ietfts")}/alice`;
    const pub = await connectAs(m.url, "qmux-02.moq-lite-05");
    const sub = await connectAs(m.url, protocol);
    assert.equal(pub.version, "moq-lite-05");
    assert.equal(sub.version, version);
    const stamps = [];
    const frames = new Map();
    let n = 0;
    netPublishTimed(pub, p, (i) => H.waitFor(() => n >= TIMED.slice(0, i).flat().length, 10_000, `group ${i - 1}`));
    await netWaitActive(sub, p);
    const s = sub.consume(Net.Path.from(p)).subscribe("video");
    (async () => {
      for (;;) {
        const g = await s.recvGroup();
        if (!g) break;
        frames.set(g.sequence, []);
        (async () => {
          for (;;) {
            const f = await g.readFrame();
            if (!f) break;
            frames.get(g.sequence).push(Buffer.from(f.payload));
            stamps.push([g.sequence, f.timestamp]);
            n++;
          }
        })().catch(() => {});
      }
    })().catch(() => {});
    await H.waitFor(() => n >= TIMED.flat().length, 10_000, `${TIMED.flat().length} frames`);
    const seqs = [...frames.keys()].sort((a, b) => a - b);
    assert.deepEqual(seqs.map((q) => frames.get(q)).flat(), TIMED.flat().map((f) => Buffer.from(f)));
    for (const [i, want] of STAMPS.entries()) {
      const seen = stamps.filter(([g]) => g === seqs[i]).map(([, t]) => [t?.value, t?.scale]);
      assert.deepEqual(seen, want.map((v) => [v, INFO.timescale]), `timestamps of group ${i}`);
    }
    s.close();
    pub.close();
    sub.close();
  });
}
