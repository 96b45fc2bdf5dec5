// @moq/net 0.3.4 (the current moq-dev client) in headless Chromium over WebTransport through moqd,
// with each moq-lite version moqd serves forced in turn by --versions: one browser context
// publishes a few groups of distinct frames, another subscribes, and every frame arrives byte for
// byte. Both pages' WebSocket fallback is disabled; each page's WebTransport must become ready,
// both clients must report the forced version, and moqd must log both sessions as
// transport=webtransport with that version.
import assert from "node:assert/strict";
import { after } from "node:test";
import {
  b64, browserTest, callPage, countFrames, loggedTransports, moqdStopsCleanly, openPage, randomFrame, startMoqd,
  stopMoqdClean, text, uniquePrefix, useBrowser, waitFor,
} from "./browser.mjs";

const ctx = useBrowser([], { page: "net.mjs" });

const started = [];
after(async () => {
  for (const m of started) await m.stop().catch(() => {});
});

// Distinct frames in every group: text, an empty frame, random bytes up to 40 KB.
const groups = () => [
  [text("group 0 frame 0"), randomFrame(40_000)],
  [new Uint8Array(0), randomFrame(17), text("group 1 frame 2")],
  [randomFrame(3000), text("last group")],
];

for (const version of ["moq-lite-05", "moq-lite-04", "moq-lite-03", "moq-lite-02", "moq-lite-01"]) {
  browserTest(ctx, `@moq/net 0.3.4 in Chromium publishes and subscribes byte for byte over WebTransport with ${version} forced`, async (t, state) => {
    const moqd = await startMoqd(["--versions", version]);
    started.push(moqd);
    const shown = ctx.moqd;
    ctx.moqd = moqd; // browserTest saves this moqd's stderr if the test fails
    try {
      const root = uniquePrefix(`net-${version}`);
      const url = `${moqd.url}${root}`;
      const sent = groups();
      state.page = await openPage(ctx);
      state.page2 = await openPage(ctx);
      const pub = await callPage(state.page, "netPublish", [url, "b", "t", sent.map((g) => g.map(b64)), { ms: 10_000 }],
        12_000, "the publishing page to connect over WebTransport");
      const sub = await callPage(state.page2, "netSubscribe", [url, "b", "t", { ms: 10_000 }],
        12_000, "the subscribing page to connect over WebTransport and subscribe");
      for (const [name, info] of [["publisher", pub], ["subscriber", sub]]) {
        assert.ok(info.webtransports.some((w) => w.ready === "ok"),
          `the ${name} page's WebTransport did not become ready: ${JSON.stringify(info.webtransports)}`);
        assert.equal(info.version, version, `the ${name}'s negotiated version`);
      }
      // Release group i once the viewer has every frame before it.
      let got = [];
      for (let i = 0; i < sent.length; i++) {
        await callPage(state.page, "netRelease", [i], 2_000, `releasing group ${i}`);
        const want = countFrames(sent.slice(0, i + 1));
        await waitFor(async () => {
          got = await state.page2.evaluate(() => window.netReceived());
          return got.reduce((n, g) => n + g.frames.length, 0) >= want;
        }, 10_000, `the subscribing page to receive ${want} frames`);
      }
      assert.equal(got.length, sent.length, `groups received: ${JSON.stringify(got.map((g) => [g.group, g.frames.length]))}`);
      assert.deepEqual(got.map((g) => g.frames.map((f) => Buffer.from(f, "base64"))), sent.map((g) => g.map((f) => Buffer.from(f))));
      const sessions = await waitFor(() => {
        const s = loggedTransports(moqd, root);
        return s.length >= 2 && s;
      }, 5_000, `moqd to log both pages' sessions at /${root}`);
      assert.deepEqual(sessions, [{ transport: "webtransport", version }, { transport: "webtransport", version }],
        `the pages' sessions: ${JSON.stringify(sessions)}`);
      t.diagnostic(`sessions ${JSON.stringify(sessions)}, groups ${JSON.stringify(got.map((g) => g.group))}`);
      await state.page.evaluate(() => window.closeAll());
      await state.page2.evaluate(() => window.closeAll());
      await stopMoqdClean(moqd);
    } finally {
      ctx.moqd = shown;
    }
  });
}

moqdStopsCleanly(ctx);
