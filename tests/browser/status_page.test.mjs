// The live status page (moqd's embedded web/status.html) in headless Chromium: it shows a live
// broadcast with its track, its viewer count and a bitrate that moves, fed by /status.json. A
// screenshot is saved ($BROWSER_ARTIFACTS/status-page.png) and the DOM is checked.
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  browserTest, httpGet, moqdStopsCleanly, spawnMoq, uniquePrefix, useBrowser, waitFor,
} from "./browser.mjs";

const ctx = useBrowser(["--metrics-listen", "127.0.0.1:0"]);
const ARTIFACTS = process.env.BROWSER_ARTIFACTS ?? path.join(os.tmpdir(), "moqd-browser-artifacts");

const statusUrl = () => {
  const m = /^moqd metrics url=(\S+)$/m.exec(ctx.moqd.stdoutText());
  assert.ok(m, `no metrics line on stdout: ${ctx.moqd.stdoutText()}`);
  return m[1];
};

// Rows of the broadcasts table as the page shows them.
const rows = (page) => page.$$eval("#broadcasts tbody tr", (trs) => trs.map((tr) => ({
  broadcast: tr.dataset.broadcast,
  track: tr.dataset.track,
  viewers: tr.querySelector(".viewers")?.textContent,
  bpsIn: Number(tr.querySelector(".bitrate-in")?.dataset.bps ?? 0),
  bpsOut: Number(tr.querySelector(".bitrate-out")?.dataset.bps ?? 0),
  text: tr.textContent,
})));

browserTest(ctx, "the status page shows a live broadcast, its viewers and a moving bitrate", async (t, state) => {
  // Served on the metrics listener, and not on the public port when that one exists.
  assert.equal((await httpGet(ctx.moqd.url)).status, 404);
  const p = uniquePrefix("status");
  const pub = spawnMoq(["pub", ctx.moqd.url, p, "--track", "video"]);
  let n = 0;
  const timer = setInterval(() => pub.write(`frame ${n++} ${"x".repeat(2000)}\n`), 20);
  // The second viewer leaves by itself (a clean close) after 12 s: long enough for a slow
  // (sanitized, loaded) run to see it first.
  const viewers = [spawnMoq(["sub", ctx.moqd.url, p, "--track", "video"]),
    spawnMoq(["sub", ctx.moqd.url, p, "--track", "video", "--timeout", "12"])];
  try {
    for (const v of viewers) await v.waitStdout((out) => out.length > 0, 10_000, "a viewer's first frame");
    const context = await ctx.browser.newContext({ viewport: { width: 1000, height: 640 } });
    const page = await context.newPage();
    state.page = page;
    page.consoleLines = [];
    page.closeAll = () => context.close().catch(() => {});
    page.on("console", (m) => page.consoleLines.push(`[${m.type()}] ${m.text()}`));
    await page.goto(statusUrl(), { timeout: 10_000 });
    assert.equal(await page.title(), "moqd status");
    // Live: the row appears with two viewers and a bitrate in and out above zero.
    const row = await waitFor(async () => {
      const r = (await rows(page)).find((x) => x.broadcast === p && x.track === "video");
      return r && r.viewers === "2" && r.bpsIn > 0 && r.bpsOut > 0 && r;
    }, 10_000, "the broadcast's row with 2 viewers and bitrates");
    // ~2 KB every 20 ms in: some 800 kbit/s; out is about twice that for two viewers.
    assert.ok(row.bpsIn > 200e3 && row.bpsIn < 5e6, `bitrate in ${row.bpsIn}`);
    assert.ok(row.bpsOut > row.bpsIn, `bitrate out ${row.bpsOut} vs in ${row.bpsIn}`);
    assert.match(row.text, /[kM]bit\/s/);
    // The page keeps updating itself (it polls /status.json).
    const updates = Number(await page.evaluate(() => document.body.dataset.updates));
    await waitFor(async () => Number(await page.evaluate(() => document.body.dataset.updates)) >= updates + 2,
      5_000, "two more updates of the page");
    const workers = await page.$$eval("#workers tbody tr", (trs) => trs.length);
    assert.equal(workers, 2);
    assert.match(await page.textContent("#summary"), /\d+ sessions · \d+ broadcasts · 2 workers/);
    await mkdir(ARTIFACTS, { recursive: true });
    const shot = path.join(ARTIFACTS, "status-page.png");
    await page.screenshot({ path: shot, fullPage: true });
    t.diagnostic(`screenshot: ${shot}`);
    // A viewer leaving is seen live.
    await viewers[1].wait(15_000, "the second viewer to leave");
    await waitFor(async () => (await rows(page)).find((x) => x.broadcast === p)?.viewers === "1", 5_000,
      "the viewer count to drop to 1");
  } finally {
    clearInterval(timer);
    for (const v of viewers) await v.stop().catch(() => {});
    await pub.stop().catch(() => {});
  }
});

moqdStopsCleanly(ctx);
