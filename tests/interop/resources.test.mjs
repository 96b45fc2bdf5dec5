// Resources stay bounded: a subscriber that stops reading while 100 MB flow past it, and 1,000
// connections opened and dropped. Reads moqd's /proc entries (Linux).
// scripts/test.sh runs this file alone (see interop() there): it measures moqd's RSS and open files.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, test } from "node:test";

import { closeConnection, connect, httpGet, moqdStopsCleanly, startBystander, useMoqd, waitFor } from "./harness.mjs";
import { RawLite } from "./raw.mjs";

const MiB = 1 << 20;
// The paused subscriber is never closed during this file (stall timeout 60 s); the bound comes
// from the caches and per-session buffers: --cache-bytes 32 MiB per track, one bulk track,
// --max-backlog-bytes 8 MiB per subscription, the transport's 1 MiB send buffer and 512 KiB
// channel high-water mark per session, and 4 MiB of cross-worker feed credit.
const ctx = useMoqd(["--stall-timeout", "60s", "--cache-bytes", "32MiB", "--max-backlog-bytes", "8MiB"]);
let bystander;
after(() => bystander?.stop());

// A subscriber that reads a track as fast as it can and only counts bytes and groups.
async function countingSubscriber(url, path, track) {
  const conn = await connect(url);
  const sub = conn.consume(path).subscribe(track, 1);
  const state = { bytes: 0, groups: 0, stopped: false };
  (async () => {
    for (;;) {
      const group = await sub.recvGroup().catch(() => undefined);
      if (!group || state.stopped) break;
      state.groups++;
      for (let f; (f = await group.readFrame().catch(() => undefined)); ) state.bytes += f.length;
    }
  })();
  return {
    bytes: () => state.bytes,
    groups: () => state.groups,
    stop() {
      state.stopped = true;
      sub.close();
      closeConnection(conn);
    },
  };
}

const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
const fds = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;

test("a subscriber that stops reading while 100 MB pass keeps moqd's memory bounded", { timeout: 60_000 }, async () => {
  const pid = ctx.moqd.proc.pid;
  // 128 KiB frames every 5 ms: about 25 MB/s on the bulk track.
  bystander = await startBystander(ctx.moqd.url, { bulkFrameSize: 128 * 1024, bulkEveryMs: 5 });
  const base = rss(pid);
  const BOUND = base + 96 * MiB;

  const paused = await RawLite.connect(ctx.moqd);
  await paused.setup();
  const { id } = paused.subscribe("bystander", "bulk");
  await paused.mux.waitUntil(() => paused.groups().some((g) => g.subscribeId === id), 5_000, "the first bulk group");
  paused.tcp.pause();

  const reader = await countingSubscriber(ctx.moqd.url, "bystander", "bulk"); // keeps reading
  let peak = base;
  await waitFor(() => {
    peak = Math.max(peak, rss(pid));
    assert.ok(peak < BOUND, `moqd RSS ${(peak / MiB).toFixed(1)} MiB passed ${(BOUND / MiB).toFixed(1)} MiB`);
    return reader.bytes() >= 100 * 1e6;
  }, 30_000, "100 MB to reach the reading subscriber");
  console.log(`rss: base ${(base / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB, bound ${(BOUND / MiB).toFixed(1)} MiB`);
  assert.equal(paused.mux.appClose, null, "the paused subscriber is still connected (only bounded, not closed)");
  paused.tcp.destroy();
  reader.stop();
  await bystander.check();
});

test("1,000 connections opened and dropped leave fds and memory where they were", { timeout: 60_000 }, async () => {
  const pid = ctx.moqd.proc.pid;
  const settle = async () => waitFor(async () => (await (await httpGet(`${ctx.moqd.url}health`)).json()).sessions <= 2, 10_000, "sessions to close");
  await settle();
  const fdsBefore = fds(pid);
  const rssBefore = rss(pid);
  for (let batch = 0; batch < 10; batch++) {
    const peers = await Promise.all(Array.from({ length: 100 }, async () => {
      const p = await RawLite.connect(ctx.moqd);
      await p.setup();
      return p;
    }));
    for (const [i, p] of peers.entries()) (i % 2 ? p.tcp.destroy() : p.mux.close());
  }
  await settle();
  // At most where it started: a connection of the previous test may still have been closing when
  // the baseline was taken, so fewer is fine; more is a leak.
  await waitFor(() => fds(pid) <= fdsBefore, 10_000, `open fds back to ${fdsBefore} (now ${fds(pid)})`);
  const grown = rss(pid) - rssBefore;
  console.log(`after 1000 connections: fds ${fds(pid)} (before ${fdsBefore}), rss +${(grown / MiB).toFixed(1)} MiB`);
  assert.ok(grown < 16 * MiB, `RSS grew by ${(grown / MiB).toFixed(1)} MiB`);
  await bystander.check();
});

moqdStopsCleanly(ctx);
