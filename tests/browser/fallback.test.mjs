// @moq/lite in headless Chromium with WebTransport removed from the page (deleted before any
// page script runs): it falls back to WebSocket (qmux) on moqd's TCP port. The page publishes
// and a Node subscriber gets every frame; then the page subscribes to a Node publisher.
import assert from "node:assert/strict";
import {
  assertGroups, b64, browserTest, callPage, closeConnection, collectTrack, connect, countFrames, loggedTransports,
  moqdStopsCleanly, openPage, publishBroadcast, randomFrame, text, uniquePrefix, useBrowser, waitFor,
} from "./browser.mjs";

const ctx = useBrowser();

// Several groups, empty frames, a ~100 KB frame.
const groups = () => [
  [text("group 0 frame 0"), new Uint8Array(0), text("group 0 frame 2")],
  [randomFrame(100 * 1024)],
  [new Uint8Array(0)],
  [text("last group"), randomFrame(1000)],
];

// The page opened no WebTransport, and moqd logged its one session at /root as a WebSocket one.
async function assertWebSocketSession(t, root, info) {
  assert.deepEqual(info.webtransports, []);
  const sessions = await waitFor(() => {
    const s = loggedTransports(ctx.moqd, root);
    return s.length > 0 && s;
  }, 5_000, `moqd to log the page's session at /${root}`);
  assert.equal(sessions.length, 1, JSON.stringify(sessions));
  assert.match(sessions[0].transport, /^websocket\//, JSON.stringify(sessions));
  t.diagnostic(`page session: ${JSON.stringify(sessions[0])}, page version ${info.version}`);
}

browserTest(ctx, "page without WebTransport publishes over WebSocket, Node subscriber gets every frame", async (t, state) => {
  const root = uniquePrefix("ws-fallback-pub");
  const sent = groups();
  state.page = await openPage(ctx, { webtransport: false });
  assert.equal(await state.page.evaluate(() => typeof WebTransport), "undefined");
  const info = await callPage(
    state.page, "publish",
    [`${ctx.moqd.url}${root}`, "b", "t", sent.map((g) => g.map(b64)), { ms: 10_000 }],
    12_000, "the page to connect over WebSocket and publish",
  );
  await assertWebSocketSession(t, root, info);

  const conn = await connect(ctx.moqd.url);
  const got = await collectTrack(conn, `${root}/b`, "t", { frames: countFrames(sent) });
  assertGroups(got, sent);
  closeConnection(conn);
});

browserTest(ctx, "page without WebTransport subscribes over WebSocket to a Node publisher", async (t, state) => {
  const root = uniquePrefix("ws-fallback-sub");
  const sent = groups();
  const conn = await connect(ctx.moqd.url);
  const pub = publishBroadcast(conn, `${root}/b`, { t: sent });
  state.page = await openPage(ctx, { webtransport: false });
  const info = await callPage(
    state.page, "subscribe",
    [`${ctx.moqd.url}${root}`, "b", "t", countFrames(sent), { ms: 10_000 }],
    15_000, "the page to subscribe over WebSocket",
  );
  await assertWebSocketSession(t, root, info);
  const got = info.groups.map((g) => ({ group: g.group, frames: g.frames.map((f) => Buffer.from(f, "base64")) }));
  assertGroups(got, sent);
  pub.close();
  closeConnection(conn);
});

moqdStopsCleanly(ctx);
