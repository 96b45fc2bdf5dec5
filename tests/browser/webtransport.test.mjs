// @moq/lite in headless Chromium talking to moqd over WebTransport (HTTP/3 on moqd's UDP port,
// certificate trusted through the hash at /certificate.sha256), with Node clients on WebSocket on
// the other side. The page's WebSocket fallback is disabled, and moqd's log must show the page's
// session as transport=webtransport, so these tests cannot pass over WebSocket.
import assert from "node:assert/strict";
import {
  assertGroups, b64, browserTest, callPage, closeConnection, collectTrack, connect, countFrames, httpsUrl,
  loggedTransports, moqdStopsCleanly, openPage, publishBroadcast, randomFrame, text, uniquePrefix, useBrowser,
  waitFor,
} from "./browser.mjs";

const ctx = useBrowser();

// Several groups, empty frames, a ~100 KB frame.
const groups = () => [
  [text("group 0 frame 0"), new Uint8Array(0), text("group 0 frame 2")],
  [randomFrame(100 * 1024)],
  [new Uint8Array(0)],
  [text("last group"), randomFrame(1000)],
];

// The page's WebTransport became ready, and moqd logged its one session at /root as WebTransport.
async function assertWebTransportSession(t, root, info) {
  assert.ok(
    info.webtransports.some((w) => w.ready === "ok"),
    `the page's WebTransport did not become ready: ${JSON.stringify(info.webtransports)}`,
  );
  const sessions = await waitFor(() => {
    const s = loggedTransports(ctx.moqd, root);
    return s.length > 0 && s;
  }, 5_000, `moqd to log the page's session at /${root}`);
  assert.deepEqual(sessions.map((s) => s.transport), ["webtransport"], `the page's sessions: ${JSON.stringify(sessions)}`);
  t.diagnostic(`page session: ${JSON.stringify(sessions[0])}, page version ${info.version}`);
}

browserTest(ctx, "page publishes over WebTransport, Node subscriber over WebSocket gets every frame", async (t, state) => {
  const root = uniquePrefix("wt-pub");
  const sent = groups();
  state.page = await openPage(ctx);
  const info = await callPage(
    state.page, "publish",
    [`${ctx.moqd.url}${root}`, "b", "t", sent.map((g) => g.map(b64)), { websocket: false, ms: 10_000 }],
    12_000, "the page to connect over WebTransport and publish",
  );
  await assertWebTransportSession(t, root, info);

  const conn = await connect(ctx.moqd.url);
  const got = await collectTrack(conn, `${root}/b`, "t", { frames: countFrames(sent) });
  assertGroups(got, sent);
  closeConnection(conn);
});

browserTest(ctx, "page subscribes over WebTransport to a Node publisher on WebSocket", async (t, state) => {
  const root = uniquePrefix("wt-sub");
  const sent = groups();
  const conn = await connect(ctx.moqd.url);
  const pub = publishBroadcast(conn, `${root}/b`, { t: sent });
  state.page = await openPage(ctx);
  const info = await callPage(
    state.page, "subscribe",
    [`${ctx.moqd.url}${root}`, "b", "t", countFrames(sent), { websocket: false, ms: 10_000 }],
    15_000, "the page to subscribe over WebTransport",
  );
  await assertWebTransportSession(t, root, info);
  const got = info.groups.map((g) => ({ group: g.group, frames: g.frames.map((f) => Buffer.from(f, "base64")) }));
  assertGroups(got, sent);
  pub.close();
  closeConnection(conn);
});

// The lead captures Chromium's bytes with this one; it asserts only the handshake.
browserTest(ctx, "raw WebTransport from the page: ready, protocol moq-lite-04, datagram and streams", async (t, state) => {
  state.page = await openPage(ctx);
  const result = await callPage(state.page, "rawWebTransport", [httpsUrl(ctx.moqd.url), { ms: 8_000 }], 27_000,
    "a bare WebTransport session from the page");
  t.diagnostic(`raw WebTransport: ${JSON.stringify(result)}`);
  assert.equal(result.ready, true);
  assert.equal(result.protocol, "moq-lite-04");
});

moqdStopsCleanly(ctx);
