// Both WebSocket framings the client offers ("qmux-00, webtransport"), each forced alone.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";

const ctx = H.useMoqd();

for (const framing of ["qmux-00", "webtransport"]) {
  test(`pub -> sub over WebSocket with ${framing} framing`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const p = `${H.uniquePrefix(framing)}/bob`;
    const seenBefore = H.negotiated.length;
    const uninstall = H.forceFraming(framing);
    let pubConn, subConn;
    try {
      pubConn = await H.connect(ctx.moqd.url);
      subConn = await H.connect(ctx.moqd.url);
    } finally {
      uninstall();
    }
    const opened = H.negotiated.slice(seenBefore);
    assert.equal(opened.length, 2);
    for (const ws of opened) assert.equal(ws.protocol, framing);

    // 40 KB frames span several STREAM frames (the client's limit is 16 360 bytes a frame).
    const groups = [[H.text("sync")], [H.text("a"), new Uint8Array(0), H.randomFrame(40_000)], [H.randomFrame(17)]];
    const { attached, end } = await H.publishSynced(pubConn, subConn, p, groups);
    const sub = H.subscribeTrack(subConn, p, "video");
    await sub.waitFrames(1);
    attached.open();
    await sub.waitFrames(H.countFrames(groups));
    H.assertGroups(sub.received(), groups);
    end.open();
    await sub.waitEnd();
    assert.equal(sub.state.error, undefined);
    H.closeConnection(pubConn);
    H.closeConnection(subConn);
  });
}

H.moqdStopsCleanly(ctx);
