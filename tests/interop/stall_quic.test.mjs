// Issue #12 over QUIC: a viewer that stops reading is skipped ahead and never stalls the publisher
// or another viewer. `moq pub` and two `moq sub` over QUIC; one sub is SIGSTOPped (it neither
// reads nor acknowledges) while about 40 MB pass, far past the relay's per-viewer backlog budget.
// The in-memory variant is session's BackpressureTest; the WebSocket one is resources.test.mjs.
// scripts/test.sh runs this file alone (see interop() there): it asserts a delivery-time bound
// and moqd's RSS, which a file beside it could disturb by starving it of CPU.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, test } from "node:test";

import * as H from "./harness.mjs";

const MiB = 1 << 20;
// ASan keeps freed memory in a 256 MiB quarantine, which would hide whether the relay lets go of
// skipped groups: a small one here keeps RSS a measure of what moqd holds.
if (H.MOQD_SANITIZED) process.env.ASAN_OPTIONS = `${process.env.ASAN_OPTIONS ?? ""}:quarantine_size_mb=4`;
// A 2 MiB backlog per subscription (the budget), 4 cached groups; the stall timeout is longer
// than the file, so the stopped viewer is skipped ahead, never closed.
const BUDGET = ["--max-backlog-bytes", "2MiB", "--cache-groups", "4", "--stall-timeout", "60s"];
const ctx = H.useMoqd([...BUDGET, "--metrics-listen", "127.0.0.1:0"]);
const QUIC = ["--transport", "quic"];
const FRAME = 64 * 1024;
const FRAMES = 640; // 40 MiB, 2 frames a group
const EVERY_MS = 6; // about 10 MiB/s: the pumping takes about 4 s
const LATE_MS = 2_000; // the most a frame may take from `moq pub`'s stdin to the healthy viewer
// moqd's RSS growth while the 40 MiB pass, measured: 9-11 MiB (ASan: 19-22), and without
// skip-ahead 42-55 MiB (ASan: 58; with ASan's whole quarantine, 190 even with skip-ahead).
const RSS_GROWTH = (H.MOQD_SANITIZED ? 36 : 24) * MiB;
const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
// Frames moqd received from publishers, from its Prometheus scrape (--metrics-listen prints
// "moqd metrics url=..." after the ready line).
async function framesIn() {
  const url = /^moqd metrics url=(\S+)$/m.exec(ctx.moqd.stdoutText())[1];
  const text = await (await H.httpGet(`${url}metrics`)).text();
  return Number(/^moqd_frames_received_total(?:\{[^}]*\})? (\d+)$/m.exec(text)[1]);
}
const stats = async () => (await H.httpGet(`${ctx.moqd.url}stats`)).json();

// Frame n: its number and the time it was written (ms since the epoch), then a pattern of n.
function frame(n) {
  const b = Buffer.alloc(FRAME, n & 0xff);
  b.writeUInt32BE(n, 0);
  b.writeDoubleBE(Date.now(), 4);
  return b;
}
const prefixed = (f) => {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(f.length);
  return Buffer.concat([len, f]);
};

// Reads `moq sub --length-prefixed`'s stdout as it comes: for each frame, its number and how long
// it took from being written to `moq pub` to arriving here; checks each frame's pattern.
function frameReader(sub) {
  const got = [];
  let buf = Buffer.alloc(0);
  sub.proc.stdout.on("data", (chunk) => {
    const now = Date.now();
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const f = buf.subarray(4, 4 + buf.readUInt32BE(0));
      buf = buf.subarray(4 + f.length);
      const n = f.readUInt32BE(0);
      const intact = f.length === FRAME && f.subarray(12).every((x) => x === (n & 0xff));
      got.push({ n, lateMs: now - f.readDoubleBE(4), intact });
    }
  });
  return got;
}

const started = [];
after(() => {
  for (const m of started) if (m.proc.exitCode === null && m.proc.signalCode === null) {
    m.proc.kill("SIGCONT");
    m.proc.kill("SIGKILL");
  }
});
function moq(args) {
  const m = H.spawnMoq(args);
  started.push(m);
  return m;
}

test("over QUIC, a viewer that stops reading is skipped ahead; the publisher and another viewer never wait", { timeout: 60_000 }, async () => {
  const pid = ctx.moqd.proc.pid;
  const p = `${H.uniquePrefix("stallq")}/cam`;
  const pub = moq(["pub", ctx.moqd.url, p, "--track", "video", "--length-prefixed", "--group-every", "2", "--linger", "0", ...QUIC]);
  const observer = await H.connect(ctx.moqd.url);
  await H.waitActive(observer, p, { ms: 10_000 }).catch((err) => {
    throw new Error(`${err.message}\n${pub.describe()}`);
  });
  H.closeConnection(observer);
  const healthy = moq(["sub", ctx.moqd.url, p, "--track", "video", "--length-prefixed", ...QUIC]);
  const stopped = moq(["sub", ctx.moqd.url, p, "--track", "video", "--length-prefixed", ...QUIC]);
  const seen = frameReader(healthy);
  const seenStopped = frameReader(stopped);
  // Frame 0 opens group 0, which stays open until frame 1: both viewers attach on it.
  pub.write(prefixed(frame(0)));
  await H.waitFor(() => seen.length >= 1 && seenStopped.length >= 1, 10_000,
    () => `both viewers to get frame 0\n${healthy.describe()}\n${stopped.describe()}`);
  stopped.proc.kill("SIGSTOP");
  const before = (await stats()).total.skips;
  const base = rss(pid);

  // Pump at a steady pace; the relay must take every frame from `moq pub` as it comes.
  let peak = base;
  const t0 = Date.now();
  for (let n = 1; n < FRAMES; n++) {
    pub.write(prefixed(frame(n)));
    peak = Math.max(peak, rss(pid));
    await H.pace(t0 + n * EVERY_MS - Date.now());
  }
  const pumpMs = Date.now() - t0;
  assert.ok(pumpMs < FRAMES * EVERY_MS + 2_000, `pumping took ${pumpMs} ms`);
  // The publisher: never held back. moqd counts every frame in within a second of the last write.
  let received = 0;
  await H.waitFor(async () => (received = await framesIn()) >= FRAMES, 1_000,
    () => `moqd to receive all ${FRAMES} frames from moq pub (has ${received})`);
  await H.waitFor(() => seen.length >= FRAMES, 10_000, () => `the healthy viewer to get all ${FRAMES} frames (has ${seen.length})`);
  peak = Math.max(peak, rss(pid));
  const skips = (await stats()).total.skips;
  const late = seen.reduce((m, f) => Math.max(m, f.lateMs), 0);
  console.log(`pumped ${FRAMES} frames (${(FRAMES * FRAME / MiB).toFixed(0)} MiB) in ${pumpMs} ms; ` +
    `healthy viewer: ${seen.length} frames, latest ${late} ms; ` +
    `skipped groups ${skips.groups - before.groups} (events ${skips.events - before.events}); ` +
    `moqd RSS base ${(base / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB`);

  // The healthy viewer: every frame, in order, intact, each within LATE_MS of being written.
  assert.deepEqual(seen.map((f) => f.n), Array.from({ length: FRAMES }, (_, n) => n), "the healthy viewer got every frame in order");
  assert.ok(seen.every((f) => f.intact), "every frame intact");
  assert.ok(late < LATE_MS, `a frame reached the healthy viewer ${late} ms after it was written (bound ${LATE_MS} ms)`);
  // The stopped viewer was skipped ahead, by whole groups, and moqd's memory stayed bounded.
  assert.ok(skips.groups - before.groups >= 10, `skip-ahead dropped ${skips.groups - before.groups} groups for the stopped viewer`);
  assert.ok(peak - base < RSS_GROWTH, `moqd RSS grew ${((peak - base) / MiB).toFixed(1)} MiB while 40 MiB passed a stopped viewer (bound ${RSS_GROWTH / MiB} MiB)`);

  // Woken, the stopped viewer carries on from a later group: it lost a run of old groups but gets
  // the last frame, and everything it gets is in order and intact.
  stopped.proc.kill("SIGCONT");
  await H.waitFor(() => seenStopped.some((f) => f.n === FRAMES - 1), 15_000,
    () => `the woken viewer to get the last frame (has ${seenStopped.length}, last ${seenStopped.at(-1)?.n})`);
  const ns = seenStopped.map((f) => f.n);
  assert.ok(ns.every((n, i) => i === 0 || n > ns[i - 1]), "the woken viewer's frames are in order");
  assert.ok(seenStopped.every((f) => f.intact), "the woken viewer's frames are intact");
  assert.ok(ns.length < FRAMES / 2, `the woken viewer got ${ns.length} of ${FRAMES} frames: it was skipped ahead`);

  // Stdin's end ends the track (no linger): `moq pub` and both viewers leave cleanly.
  pub.endStdin();
  for (const m of [pub, healthy, stopped]) assert.deepEqual(await m.wait(10_000), { code: 0, signal: null }, m.describe());
});

H.moqdStopsCleanly(ctx);
