// @moq/lite 0.2.2's IETF drafts 15, 16 and 17 (its WebTransport offer is moq-lite-04, moq-lite-03,
// moql, moqt-17, moqt-16, moqt-15; over WebSocket it offers only the bare forms, so these drafts
// are reached over WebTransport only). Per draft, a moqd of its own with `--versions
// moq-transport-NN`, and both pages forced to it too: their WebTransport offers only `moqt-NN`
// (through @moq/lite's `webtransport` option, spread into the WebTransport options) and the
// WebSocket fallback is off. One page publishes four groups (text, empty frames, 100 KB), a second
// page subscribes and gets every frame byte for byte; moqd logged both sessions as
// `transport=webtransport version=moq-transport-NN`.
import assert from "node:assert/strict";
import { after } from "node:test";
import {
  assertGroups, b64, browserTest, callPage, countFrames, loggedTransports, openPage, randomFrame, startMoqd, text,
  uniquePrefix, useBrowser, waitFor,
} from "./browser.mjs";

const ctx = useBrowser();
const started = [];
after(async () => {
  for (const m of started) await m.stop().catch(() => {});
});

const groups = () => [
  [text("group 0 frame 0"), new Uint8Array(0), text("group 0 frame 2")],
  [randomFrame(100 * 1024)],
  [new Uint8Array(0)],
  [text("last group"), randomFrame(1000)],
];

for (const draft of [17, 16, 15]) {
  const version = `moq-transport-${draft}`;
  const protocols = [`moqt-${draft}`];
  browserTest(ctx, `@moq/lite 0.2.2 over ${version} forced (WebTransport offering only moqt-${draft}): a page publishes to a page, byte for byte`, async (t, s) => {
    const m = await startMoqd(["--versions", version]);
    started.push(m);
    const root = uniquePrefix(`lite-d${draft}`);
    const sent = groups();
    s.page = await openPage(ctx);
    const pub = await callPage(s.page, "publish",
      [`${m.url}${root}`, "b", "t", sent.map((g) => g.map(b64)), { websocket: false, ms: 10_000, protocols }],
      12_000, `the publisher page to connect over ${version}`);
    s.page2 = await openPage(ctx);
    const sub = await callPage(s.page2, "subscribe",
      [`${m.url}${root}`, "b", "t", countFrames(sent), { websocket: false, ms: 12_000, protocols }],
      15_000, `the subscriber page over ${version}`);
    const got = sub.groups.map((g) => ({ group: g.group, frames: g.frames.map((f) => Buffer.from(f, "base64")) }));
    assertGroups(got, sent);
    for (const [who, info] of [["publisher", pub], ["subscriber", sub]]) {
      const ready = info.webtransports.filter((w) => w.ready === "ok");
      assert.equal(ready.length, 1, `${who}'s WebTransports: ${JSON.stringify(info.webtransports)}`);
      assert.deepEqual(ready[0].protocols, protocols, `${who} offered more than moqt-${draft}`);
      assert.equal(ready[0].protocol, `moqt-${draft}`);
      assert.equal(info.version, version);
      t.diagnostic(`${who}: version ${info.version}, WebTransport ${JSON.stringify(ready[0])}`);
    }
    const sessions = await waitFor(() => {
      const x = loggedTransports(m, root);
      return x.length >= 2 && x;
    }, 5_000, `moqd to log both page sessions at /${root}`);
    assert.deepEqual(sessions, [{ transport: "webtransport", version }, { transport: "webtransport", version }]);
    await m.stop();
  });
}
