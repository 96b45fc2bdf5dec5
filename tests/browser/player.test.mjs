// The moq-dev project's own browser components through moqd: `<moq-publish>` (@moq/publish
// 0.2.17) publishes Chromium's fake camera and microphone, and `<moq-watch>` (@moq/watch 0.4.6)
// in a second browser context plays it: the catalog arrives, video frames are decoded, and the
// canvas changes between two samples a second apart. Once over WebTransport (WebSocket fallback
// off in both pages, moqd must log both sessions as transport=webtransport), once over WebSocket
// in pages whose WebTransport is deleted before the packages load (the player takes
// qmux-02.moq-lite-05, the first of its offers, while the publisher's offers lead to moq-lite-02:
// moqd stamps the lite-02 frames with their arrival for the lite-05 player, whose container
// carries its own presentation times). Each time `moq sub --track catalog.json` prints the live
// broadcast's catalog too.
import assert from "node:assert/strict";
import {
  browserTest, callPage, loggedTransports, moqdStopsCleanly, openPage, spawnMoq, uniquePrefix, useBrowser, waitFor,
} from "./browser.mjs";

const ctx = useBrowser([], {
  page: "player.mjs",
  chromiumArgs: [
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
  ],
});

const CASE_TIMEOUT_MS = 60_000;
const state = (page, fn) => page.evaluate((name) => window[name](), fn);

// Polls `fn` in `page` until `cond(value)` holds; the timeout message shows the last value.
async function waitPage(page, fn, cond, ms, what) {
  let last;
  return waitFor(async () => {
    last = await state(page, fn);
    return cond(last) && last;
  }, ms, () => `${what}; last ${fn}(): ${JSON.stringify(last).slice(0, 2000)}`, 100);
}

async function publishAndWatch(t, s, { webtransport }) {
  const root = uniquePrefix(webtransport ? "player-wt" : "player-ws");
  const url = `${ctx.moqd.url}${root}`;
  const opts = { websocket: !webtransport };

  s.page = await openPage(ctx, { webtransport });
  await callPage(s.page, "startPublish", [url, "cam", opts], 5_000, "the publisher page to start");
  const pub = await waitPage(s.page, "publishState", (p) => p.version && p.video && p.audio, 15_000,
    "<moq-publish> to connect with camera and microphone");
  t.diagnostic(`publisher: version ${pub.version}, offered ${JSON.stringify(pub.offered)}, websockets ${JSON.stringify(pub.websockets)}`);

  s.page2 = await openPage(ctx, { webtransport });
  await callPage(s.page2, "startWatch", [url, "cam", opts], 5_000, "the watcher page to start");
  const watch = await waitPage(s.page2, "watchState", (w) => w.catalog && w.frames >= 10 && w.canvas, 35_000,
    "<moq-watch> to get the catalog, decode 10 frames and paint the canvas");
  t.diagnostic(`watcher: version ${watch.version}, ${watch.frames} frames, canvas ${watch.canvas}`);
  t.diagnostic(`catalog: ${JSON.stringify(watch.catalog).slice(0, 600)}`);
  assert.ok(watch.catalog.video, `catalog has no video: ${JSON.stringify(watch.catalog)}`);
  assert.ok(watch.catalog.audio, `catalog has no audio: ${JSON.stringify(watch.catalog)}`);

  const [a, b] = await callPage(s.page2, "sampleCanvasTwice", [1_000], 5_000, "two canvas samples");
  assert.ok(a && b && a !== b, `the canvas did not change in a second: ${a} then ${b}`);
  const after = await state(s.page2, "watchState");
  assert.ok(after.frames > watch.frames, `no frames decoded in that second: ${watch.frames} then ${after.frames}`);
  t.diagnostic(`canvas ${a} -> ${b}, frames ${watch.frames} -> ${after.frames}`);

  const sessions = loggedTransports(ctx.moqd, root);
  t.diagnostic(`moqd sessions at /${root}: ${JSON.stringify(sessions)}`);

  // `moq` as a viewer at the protocol level: the catalog.json track of the live broadcast, one
  // JSON frame per catalog, the same renditions the player read.
  const sub = spawnMoq(["sub", url, "cam", "--track", "catalog.json", "--transport", "ws"]);
  try {
    await sub.waitStdout((out) => out.toString().includes("\n"), 10_000, "moq sub to print the catalog");
    const printed = JSON.parse(sub.stdout().toString().split("\n")[0]);
    t.diagnostic(`moq sub catalog.json: ${JSON.stringify(printed).slice(0, 300)}`);
    assert.deepEqual(Object.keys(printed.video.renditions).sort(), Object.keys(watch.catalog.video.renditions).sort());
    assert.deepEqual(Object.keys(printed.audio.renditions).sort(), Object.keys(watch.catalog.audio.renditions).sort());
  } finally {
    await sub.stop();
  }

  return { pub, watch: after, sessions };
}

browserTest(ctx, "@moq/publish 0.2.17 -> moqd -> @moq/watch 0.4.6 over WebTransport: catalog, decoded frames, moving canvas", async (t, s) => {
  const { pub, watch, sessions } = await publishAndWatch(t, s, { webtransport: true });
  for (const [who, info] of [["publisher", pub], ["watcher", watch]]) {
    assert.ok(info.webtransports.some((w) => w.ready === "ok"), `${who}'s WebTransport never became ready: ${JSON.stringify(info.webtransports)}`);
    assert.deepEqual(info.websockets, [], `${who} opened a WebSocket`);
  }
  assert.ok(sessions.length >= 2 && sessions.every((x) => x.transport === "webtransport"), `moqd's sessions: ${JSON.stringify(sessions)}`);
  // The player (@moq/net 0.2.8) takes moq-lite-05; the publisher (@moq/net 0.1.9) has no lite-05.
  assert.equal(watch.version, "moq-lite-05");
  assert.equal(pub.version, "moq-lite-04");
}, { timeout: CASE_TIMEOUT_MS });

browserTest(ctx, "@moq/publish 0.2.17 -> moqd -> @moq/watch 0.4.6 over WebSocket (no WebTransport in the page): the player takes qmux-02.moq-lite-05", async (t, s) => {
  const { pub, watch, sessions } = await publishAndWatch(t, s, { webtransport: false });
  for (const [who, info] of [["publisher", pub], ["watcher", watch]]) {
    assert.deepEqual(info.webtransports, [], `${who} opened a WebTransport`);
    assert.ok(info.websockets.some((w) => w.state === "open"), `${who} has no open WebSocket: ${JSON.stringify(info.websockets)}`);
  }
  // @moq/watch 0.4.6 (@moq/net 0.2.8) offers moq-lite-05 first, and moqd serves it.
  assert.equal(watch.offered[0], "qmux-02.moq-lite-05");
  assert.equal(watch.websockets.find((w) => w.state === "open").protocol, "qmux-02.moq-lite-05");
  assert.ok(sessions.length >= 2 && sessions.every((x) => x.transport.startsWith("websocket")), `moqd's sessions: ${JSON.stringify(sessions)}`);
  assert.ok(sessions.some((x) => x.version === "moq-lite-05"), `no moq-lite-05 session at moqd: ${JSON.stringify(sessions)}`);
}, { timeout: CASE_TIMEOUT_MS });

moqdStopsCleanly(ctx);
