// Control-traffic abuse against moqd with --workers 2: a publisher that announces and withdraws
// the same path in a tight loop (a flip-flop flood over the legacy framing, which has no flow
// control to slow it), and a discovery listener that stops reading while long paths flip. moqd
// must close the flooder with bounds_exceeded (--max-announce-rate) and reset the listener's
// announce stream with bounds_exceeded (--max-announce-buffer), log why, keep its RSS under a stated bound, give the
// memory back afterwards, and the bystander publisher/subscriber pair must lose no frame and see
// no gap over a stated bound.
// scripts/test.sh runs this file alone (see interop() there): it bounds moqd's RSS during a flood and after it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";

import { MOQD_SANITIZED, TEST_TIMEOUT_MS, closeAllConnections, startBystanderThread, startMoqd, stopMoqdClean, waitFor } from "./harness.mjs";
import { RawLite, RawMux, lite, waitLog } from "./raw.mjs";

// RSS moqd may reach during the flood (before the fix a flood took it past 1.5 GB in 6 s).
const MAX_RSS_MB = 200;
// After the attack RSS must come back to within this of its baseline, within RECOVER_MS.
const RSS_MARGIN_MB = 16;
const RECOVER_MS = 10_000;
const MAX_GAP_MS = 500;

let moqd;
let bystander;
let sampler;
const rss = { baseline: 0, peak: 0 };

function rssMb() {
  const status = readFileSync(`/proc/${moqd.proc.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) / 1024;
}

before(async () => {
  moqd = await startMoqd(["--max-announce-buffer", "64KiB"]);
  // Under a prefix of its own: @moq/lite 0.2.2 leaves the stream of a closed announced() open and
  // unread, and unread announcements there would use up its qmux connection credit.
  // On a thread of its own: the flood written from this one delays its timers and reads by
  // hundreds of milliseconds on a loaded machine, which the bystander would report as moqd's gap.
  bystander = await startBystanderThread(moqd.url, { path: "bystander/live" });
  await bystander.waitFrames(20, 10_000);
  rss.baseline = rssMb();
  await bystander.watchGaps();
  sampler = setInterval(() => {
    rss.peak = Math.max(rss.peak, rssMb());
  }, 5);
});

after(async () => {
  clearInterval(sampler);
  await bystander?.stop();
  closeAllConnections();
  if (moqd && moqd.proc.exitCode === null && moqd.proc.signalCode === null) await moqd.stop().catch(() => {});
});

// A lite-02 publisher over the legacy webtransport framing, answering moqd's ANNOUNCE_PLEASE with
// an empty ANNOUNCE_INIT; resolves with it and the announce stream's id.
async function publisher() {
  const peer = new RawLite(await RawMux.connect(moqd, { framing: "webtransport", params: null }));
  await peer.setup();
  peer.announce([]);
  await waitFor(() => peer.announceStream !== undefined, 5_000, "moqd's ANNOUNCE_PLEASE");
  return peer;
}

// Writes flip-flops of `paths` on the announce stream until moqd closes the connection or
// `ms` pass; returns the pairs written.
async function flood(peer, paths, ms) {
  const chunk = Buffer.concat(paths.flatMap((p) => [lite.announce(true, p), lite.announce(false, p)]));
  const deadline = Date.now() + ms;
  let pairs = 0;
  while (!peer.tcp.ended && peer.mux.appClose === null && Date.now() < deadline) {
    if (peer.tcp.socket.writableLength < 1 << 20) {
      peer.mux.write(peer.announceStream, chunk);
      pairs += paths.length;
    }
    // Yield to timers too: a loop that only yields to I/O (setImmediate) starves this thread's
    // RSS sampler.
    await new Promise((r) => setTimeout(r, 1));
  }
  return pairs;
}

test("a publisher flip-flopping one path is closed at --max-announce-rate", { timeout: 60_000 }, async () => {
  const peer = await publisher();
  const paths = Array.from({ length: 500 }, () => "flip");
  const pairs = await flood(peer, paths, 20_000);
  await waitLog(moqd, /session \d+ closing peer=127\.0\.0\.1:\d+ .*code=11 \(bounds_exceeded\) detail=announce changes over --max-announce-rate/, 10_000);
  assert.ok(pairs < 1_000_000, `moqd took ${pairs} flip-flops before closing the publisher`);
  peer.tcp.destroy();
});

test("a discovery listener that stops reading has its stream reset at --max-announce-buffer", { timeout: 60_000 }, async () => {
  const listener = new RawLite(await RawMux.connect(moqd, { framing: "webtransport", params: null }));
  await listener.setup();
  const streamId = listener.mux.open();
  listener.mux.write(streamId, lite.announcePlease("long"));
  await waitFor(() => listener.mux.stream(streamId).data().length > 0, 5_000, "the ANNOUNCE_INIT");
  listener.tcp.pause();
  // Long paths flipping, from publishers that are closed at the rate limit in turn, until the
  // listener is closed (its socket buffers hold a few MB before moqd queues anything).
  const long = (i) => `long/${i}/${"x".repeat(900)}`;
  const deadline = Date.now() + 40_000;
  const closed = /announce stream reset prefix=long code=11 \(listener not reading: over --max-announce-buffer\)/;
  while (!closed.test(moqd.stderrText()) && Date.now() < deadline) {
    const peer = await publisher();
    await flood(peer, Array.from({ length: 50 }, (_, i) => long(i)), 10_000);
    peer.tcp.destroy();
  }
  await waitLog(moqd, closed, 5_000);
  listener.tcp.destroy();
});

test("moqd's memory stayed bounded and came back; the bystander lost nothing", { timeout: 60_000 }, async () => {
  // A sanitizer's allocator keeps freed memory (quarantine) and shadows the rest: no RSS bounds there.
  if (!MOQD_SANITIZED) {
    assert.ok(rss.peak < MAX_RSS_MB, `moqd RSS peaked at ${rss.peak.toFixed(1)} MB (bound ${MAX_RSS_MB} MB)`);
    await waitFor(() => rssMb() < rss.baseline + RSS_MARGIN_MB, RECOVER_MS,
      () => `moqd RSS ${rssMb().toFixed(1)} MB to return within ${RSS_MARGIN_MB} MB of ${rss.baseline.toFixed(1)} MB`, 100);
  }
  const frames = await bystander.check();
  assert.ok(frames >= 20, `bystander received ${frames} frames`);
  const gap = await bystander.gaps();
  // Not under a sanitizer: see MOQD_SANITIZED.
  if (!MOQD_SANITIZED) assert.ok(gap.max < MAX_GAP_MS, `bystander gap ${gap.max} ms ending at ${gap.at} (bound ${MAX_GAP_MS} ms)`);
  console.log(`# rss baseline ${rss.baseline.toFixed(1)} MB, peak ${rss.peak.toFixed(1)} MB, now ${rssMb().toFixed(1)} MB; bystander gap ${gap.max} ms`);
});

test("moqd exits 0 on SIGTERM", { timeout: TEST_TIMEOUT_MS }, async () => {
  clearInterval(sampler);
  await bystander.stop();
  closeAllConnections();
  await stopMoqdClean(moqd);
});
