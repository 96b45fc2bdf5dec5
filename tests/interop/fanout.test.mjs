// One track, 20 subscribers on separate connections (spread over both workers).
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";

const ctx = H.useMoqd();
const SUBSCRIBERS = 20;

test(`${SUBSCRIBERS} subscribers of one track all receive every frame; /health counts them`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const p = `${H.uniquePrefix("fan")}/bob`;
  const pubConn = await H.connect(ctx.moqd.url);
  const groups = [[H.text("sync")]];
  for (let i = 1; i <= 5; i++) groups.push([H.text(`g${i}`), new Uint8Array(0), H.randomFrame(2000 * i)]);
  const attached = H.gate();
  const end = H.gate();
  H.publishBroadcast(pubConn, p, { video: groups }, {
    holdOpen: (i) => i === 0, // every subscriber gets the open sync group, then the rest live
    before: (i) => (i === 1 ? attached.wait : undefined),
    afterLast: () => end.wait,
  });

  const subs = await Promise.all(
    Array.from({ length: SUBSCRIBERS }, async () => {
      const conn = await H.connect(ctx.moqd.url);
      await H.waitActive(conn, p);
      const sub = H.subscribeTrack(conn, p, "video");
      await sub.waitFrames(1, 15_000);
      return sub;
    }),
  );
  attached.open();
  const total = H.countFrames(groups);
  await Promise.all(subs.map((s) => s.waitFrames(total, 15_000)));
  subs.forEach((s, i) => H.assertGroups(s.received(), groups, 0, `subscriber ${i}`));

  const res = await H.httpGet(`${ctx.moqd.url}health`);
  assert.equal(res.status, 200);
  const health = await res.json();
  assert.equal(health.status, "ok");
  assert.equal(typeof health.version, "string");
  assert.ok(health.version.length > 0);
  assert.equal(health.workers, 2);
  assert.ok(Number.isInteger(health.sessions), `sessions: ${health.sessions}`);
  assert.ok(health.sessions >= SUBSCRIBERS + 1, `sessions ${health.sessions} < ${SUBSCRIBERS + 1} open connections`);
  // The kernel spreads connections over the workers' SO_REUSEPORT listeners, so with 21
  // connections both workers serve some (all on one worker: probability 2^-20).
  assert.deepEqual(health.sessions_per_worker.length, 2);
  assert.ok(health.sessions_per_worker.every((n) => n > 0), `per worker: ${health.sessions_per_worker}`);

  end.open();
  await Promise.all(subs.map((s) => s.waitEnd(10_000)));
  for (const s of subs) assert.equal(s.state.error, undefined);
});

H.moqdStopsCleanly(ctx);
