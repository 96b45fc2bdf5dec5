// The real JS client on both ends of moqd: every frame byte for byte.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";

const ctx = H.useMoqd();
const T = { timeout: H.TEST_TIMEOUT_MS };

const allFramesIn = (n) => (groups) => groups.reduce((c, g) => c + g.frames.length, 0) >= n;

// Publishes `groups`, subscribes from a second connection, waits for every frame, then ends the
// track and checks the end reaches the subscriber without error.
async function roundTrip(groups, tag) {
  const p = `${H.uniquePrefix(tag)}/bob`;
  const pubConn = await H.connect(ctx.moqd.url);
  const subConn = await H.connect(ctx.moqd.url);
  assert.equal(pubConn.version, "moq-lite-02");
  const end = H.gate();
  const pub = H.publishBroadcast(pubConn, p, { video: groups }, { afterLast: () => end.wait });
  await H.waitActive(subConn, p);
  const sub = H.subscribeTrack(subConn, p, "video", { priority: 2 });
  await sub.waitUntil(allFramesIn(H.countFrames(groups)), 15_000, "every frame");
  H.assertGroups(sub.received(), groups);
  const req = await pub.waitRequest("video");
  assert.equal(req.priority, 2);
  end.open();
  await sub.waitEnd();
  assert.equal(sub.state.error, undefined);
  H.assertGroups(sub.received(), groups);
  H.closeConnection(pubConn);
  H.closeConnection(subConn);
}

test("JS publisher -> JS subscriber: several groups and frames, empty frames included", T, async () => {
  await roundTrip(
    [
      [H.text("g0f0"), new Uint8Array(0), H.text("g0f2")],
      [H.randomFrame(1000), H.text("x"), H.randomFrame(20_000)],
      [new Uint8Array(0)],
      [H.text("last"), H.randomFrame(1)],
    ],
    "basic",
  );
});

test("a 1 MiB frame arrives intact", T, async () => {
  await roundTrip([[H.randomFrame(1 << 20)], [H.text("after")]], "big");
});

test("late joiner gets the newest group first (3 or 4), never group 0", T, async () => {
  const p = `${H.uniquePrefix("late")}/bob`;
  const pubConn = await H.connect(ctx.moqd.url);
  const earlyConn = await H.connect(ctx.moqd.url);
  const lateConn = await H.connect(ctx.moqd.url);
  const frames = (i) => [H.text(`g${i}-a`), H.text(`g${i}-b`)];
  const lateGotOne = H.gate();
  const end = H.gate();

  const broadcast = new H.Moq.Broadcast();
  pubConn.publish(p, broadcast);
  const serve = async (track) => {
    for (let i = 0; i < 4; i++) {
      if (i > 0) await H.pace(200);
      const g = track.appendGroup();
      for (const f of frames(i)) g.writeFrame(f);
      g.close();
    }
    await H.pace(200);
    const g4 = track.appendGroup();
    g4.writeFrame(frames(4)[0]);
    await lateGotOne.wait; // group 4 stays open until the late joiner has something
    g4.writeFrame(frames(4)[1]);
    g4.close();
    await end.wait;
    track.close();
  };
  (async () => {
    for (let req; (req = await broadcast.requested()); ) serve(req.track).catch(() => {});
  })();

  await H.waitActive(earlyConn, p);
  await H.waitActive(lateConn, p);
  const early = H.subscribeTrack(earlyConn, p, "video");
  await early.waitUntil((gs) => gs.some((g) => g.group === 3), 10_000, "group 3 at the early subscriber");
  const late = H.subscribeTrack(lateConn, p, "video");
  await late.waitFrames(1);
  lateGotOne.open();
  await late.waitUntil((gs) => gs.some((g) => g.group === 4 && g.frames.length === 2), 10_000, "all of group 4");
  await early.waitUntil(allFramesIn(10), 10_000, "all 10 frames at the early subscriber");

  const first = late.groups[0].group;
  assert.ok(first === 3 || first === 4, `late joiner's first group is ${first}`);
  assert.ok(late.groups.every((g) => g.group >= 3), `late joiner got an old group: ${late.groups.map((g) => g.group)}`);
  const all = [0, 1, 2, 3, 4].map(frames);
  H.assertGroups(late.received(), all.slice(first), first);
  H.assertGroups(early.received(), all);
  end.open();
  await late.waitEnd();
  await early.waitEnd();
});

test("a subscriber leaving mid-stream does not disturb the publisher or another subscriber", T, async () => {
  const p = `${H.uniquePrefix("leave")}/bob`;
  const pubConn = await H.connect(ctx.moqd.url);
  const connA = await H.connect(ctx.moqd.url);
  const connB = await H.connect(ctx.moqd.url);
  const groups = [[H.text("sync")]];
  for (let i = 1; i <= 8; i++) groups.push([H.text(`g${i}`), H.randomFrame(3000 + i)]);
  const synced = H.gate();
  const aLeft = H.gate();
  const end = H.gate();
  const pub = H.publishBroadcast(pubConn, p, { video: groups }, {
    holdOpen: (i) => i === 0, // the sync group stays open until both subscribers are attached
    before: (i) => (i === 1 ? synced.wait : i === 4 ? aLeft.wait : undefined),
    afterLast: () => end.wait,
  });
  await H.waitActive(connA, p);
  await H.waitActive(connB, p);
  const a = H.subscribeTrack(connA, p, "video");
  const b = H.subscribeTrack(connB, p, "video");
  await a.waitFrames(1);
  await b.waitFrames(1);
  synced.open();
  await a.waitUntil(allFramesIn(1 + 3 * 2), 10_000, "groups 1..3 at A");
  H.closeConnection(connA);
  aLeft.open();
  await b.waitUntil(allFramesIn(H.countFrames(groups)), 15_000, "every frame at B");
  H.assertGroups(b.received(), groups);
  // The publisher kept its connection and served every group without an error.
  const state = await Promise.race([pubConn.closed.then(() => "closed"), H.pace(0).then(() => "open")]);
  assert.equal(state, "open");
  for (const r of pub.requests) assert.equal(r.track.state.closed.peek() instanceof Error, false);
  const health = await H.httpGet(`${ctx.moqd.url}health`);
  assert.equal(health.status, 200);
  end.open();
  await b.waitEnd();
  assert.equal(b.state.error, undefined);
});

H.moqdStopsCleanly(ctx);
