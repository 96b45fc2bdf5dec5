// @moq/net 0.3.4 (the current moq-dev client, @moq/qmux 0.3.3) in Node over WebSocket through
// moqd: publishes and subscribes byte for byte with each moq-lite version moqd serves, forced in
// turn with --versions (moqd then selects qmux-02.moq-lite-05, qmux-02.moq-lite-04,
// qmux-02.moq-lite-03, or qmux-02.moql and SETUP picks lite-02 or lite-01); with moq-lite-05,
// frame timestamps, TRACK_INFO and FETCH arrive exactly as published; and against @moq/lite 0.2.2
// on the other side of moqd, both ways; and `moq` with --versions moq-lite-05.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import { TIMED, TIMED_INFO as INFO, TIMED_STAMPS as STAMPS, closeNetConnections, netConnect, netPublish, netPublishTimed, netSubscribe, netWaitActive } from "./net_client.mjs";
import * as Net from "@moq/net";
import { waitLog } from "./raw.mjs";

const started = [];
after(async () => {
  closeNetConnections();
  for (const m of started) await m.stop().catch(() => {});
});

// netPublish (net_client.mjs) leaves the track open here: the subscriber reads what it needs, then
// closes; the relay may skip a group a newer one overtakes.

// Reads `count` frames from `track` of `path`, groups in any order, frames in order;
// progress.n counts the frames read so far; stamps (if given) gets [group, timestamp] per frame.
async function netCollect(conn, p, track, count, progress = { n: 0 }, ms = 10_000, stamps = undefined) {
  const s = netSubscribe(conn, p, track, {
    onFrame: (sequence, f) => {
      stamps?.push([sequence, f.timestamp]);
      progress.n = s.state.n;
    },
  });
  await H.waitFor(() => s.state.n >= count, ms, `${count} frames of ${p}/${track}`);
  s.sub.close();
  return s.ordered();
}

const GROUPS = [[H.text("sync"), H.randomFrame(40_000)], [new Uint8Array(0), H.randomFrame(17), H.randomFrame(3000)]];
const flat = (groups) => groups.flat().map((f) => Buffer.from(f));

for (const version of ["moq-lite-05", "moq-lite-04", "moq-lite-03", "moq-lite-02", "moq-lite-01"]) {
  test(`@moq/net 0.3.4 publishes and subscribes byte for byte with ${version} forced`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const moqd = await H.startMoqd(["--versions", version]);
    started.push(moqd);
    const p = `${H.uniquePrefix(version)}/alice`;
    const pub = await netConnect(moqd.url);
    const sub = await netConnect(moqd.url);
    assert.equal(pub.version, version);
    assert.equal(sub.version, version);
    const progress = { n: 0 };
    netPublish(pub, p, GROUPS, { before: (i) => H.waitFor(() => progress.n >= GROUPS.slice(0, i).flat().length, 10_000, `group ${i - 1}`) });
    await netWaitActive(sub, p);
    const got = await netCollect(sub, p, "video", flat(GROUPS).length, progress);
    assert.deepEqual(got.flat(), flat(GROUPS));
    await waitLog(moqd, new RegExp(`transport=websocket/qmux-02 version=${version} `));
    pub.close();
    sub.close();
    await H.stopMoqdClean(moqd);
  });
}

test("moq-lite-05: timestamps, TRACK_INFO and FETCH reach a @moq/net 0.3.4 viewer exactly", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  // Two workers: the publisher's and the viewer's sessions may sit on different ones, and the
  // properties and timestamps then cross the bridge too.
  const moqd = await H.startMoqd([]);
  started.push(moqd);
  const p = `${H.uniquePrefix("lite05ts")}/alice`;
  const pub = await netConnect(moqd.url);
  const sub = await netConnect(moqd.url);
  assert.equal(pub.version, "moq-lite-05");
  assert.equal(sub.version, "moq-lite-05");
  const progress = { n: 0 };
  netPublishTimed(pub, p, (i) => H.waitFor(() => progress.n >= TIMED.slice(0, i).flat().length, 10_000, `group ${i - 1}`));
  await netWaitActive(sub, p);
  const stamps = [];
  const got = await netCollect(sub, p, "video", TIMED.flat().length, progress, 10_000, stamps);
  assert.deepEqual(got.flat(), flat(TIMED));
  // Frame order within a group is kept; groups may interleave. (The publisher numbers groups per
  // broadcast, so the sequences depend on what it served before: take them in order.)
  const seqs = [...new Set(stamps.map(([g]) => g))].sort((a, b) => a - b);
  assert.equal(seqs.length, STAMPS.length);
  for (const [i, want] of STAMPS.entries()) {
    const seen = stamps.filter(([g]) => g === seqs[i]).map(([, t]) => [t.value, t.scale]);
    assert.deepEqual(seen, want.map((v) => [v, INFO.timescale]), `timestamps of group ${i}`);
  }
  // TRACK_INFO as the publisher gave it.
  const track = sub.consume(Net.Path.from(p)).track("video");
  const info = await H.withDeadline(track.info(), 10_000, "TRACK_INFO");
  assert.deepEqual(
    { timescale: info.timescale, priority: info.priority, ordered: info.ordered, latencyMax: info.latencyMax },
    INFO,
  );
  // FETCH of a cached group: its frames and timestamps.
  const group = await H.withDeadline(track.fetchGroup(seqs[1]), 10_000, "FETCH of the second group");
  const fetched = [];
  for (;;) {
    const f = await H.withDeadline(group.readFrame(), 10_000, "a fetched frame");
    if (!f) break;
    fetched.push([Buffer.from(f.payload), f.timestamp.value, f.timestamp.scale]);
  }
  assert.deepEqual(fetched, TIMED[1].map((f, j) => [Buffer.from(f), STAMPS[1][j], INFO.timescale]));
  await waitLog(moqd, /transport=websocket\/qmux-02 version=moq-lite-05 /);
  pub.close();
  sub.close();
  await H.stopMoqdClean(moqd);
});

test("@moq/net 0.3.4 and @moq/lite 0.2.2 on either side of moqd, both ways", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const moqd = await H.startMoqd([]);
  started.push(moqd);
  // @moq/net publishes (lite-05 over qmux-02), @moq/lite subscribes (lite-02 over qmux-00): the
  // bytes go through, the timestamps stay behind (lite-02 has none).
  const p1 = `${H.uniquePrefix("net2lite")}/alice`;
  const netPub = await netConnect(moqd.url);
  assert.equal(netPub.version, "moq-lite-05");
  const litePub = await H.connect(moqd.url);
  const liteSub = await H.connect(moqd.url);
  let sub1;
  netPublish(netPub, p1, GROUPS, { before: (i) => H.waitFor(() => sub1?.frameCount() >= GROUPS.slice(0, i).flat().length, 10_000, `group ${i - 1}`) });
  await H.waitActive(liteSub, p1);
  sub1 = H.subscribeTrack(liteSub, p1, "video");
  await sub1.waitFrames(flat(GROUPS).length);
  assert.deepEqual(sub1.received().flatMap((g) => g.frames.map((f) => Buffer.from(f))), flat(GROUPS));
  // @moq/lite publishes, @moq/net subscribes.
  const p2 = `${H.uniquePrefix("lite2net")}/bob`;
  const progress = { n: 0 };
  H.publishBroadcast(litePub, p2, { video: GROUPS }, {
    keepTrack: true,
    before: (i) => (i > 0 ? H.waitFor(() => progress.n >= GROUPS.slice(0, i).flat().length, 10_000, `group ${i - 1}`) : undefined),
  });
  const netSub = await netConnect(moqd.url);
  await netWaitActive(netSub, p2);
  const stamps = [];
  const got = await netCollect(netSub, p2, "video", flat(GROUPS).length, progress, 10_000, stamps);
  assert.deepEqual(got.flat(), flat(GROUPS));
  // A lite-02 publisher sends no timestamps: moqd stamps each frame with the millisecond it
  // arrived (timescale 1000), so within a group they never go backwards.
  for (const seq of new Set(stamps.map(([g]) => g))) {
    const seen = stamps.filter(([g]) => g === seq).map(([, t]) => t);
    assert.ok(seen.every((t) => t.scale === 1000 && t.value > 0), "arrival times, timescale 1000");
    assert.ok(seen.every((t, j) => j === 0 || t.value >= seen[j - 1].value), `arrival order in group ${seq}`);
  }
  netPub.close();
  netSub.close();
  H.closeConnection(litePub);
  H.closeConnection(liteSub);
  await H.stopMoqdClean(moqd);
});

// moq as a viewer at the protocol level: a broadcast published by @moq/net 0.3.4 with a hang-style
// catalog.json track (a JSON frame), read by `moq sub --track catalog.json` over WebSocket and
// over QUIC, prints the catalog.
test("moq sub prints the catalog.json track of a broadcast @moq/net 0.3.4 publishes", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const moqd = await H.startMoqd([]);
  started.push(moqd);
  const p = `${H.uniquePrefix("catalog")}/camera`;
  const catalog = { video: { renditions: { "video/hd": { codec: "avc1.64001f", codedWidth: 1280, codedHeight: 720 } } } };
  const text = JSON.stringify(catalog);
  const pub = await netConnect(moqd.url);
  netPublish(pub, p, [[H.text(text)]]);
  const watcher = await netConnect(moqd.url);
  await netWaitActive(watcher, p);
  for (const transport of ["ws", "quic"]) {
    const sub = H.spawnMoq(["sub", moqd.url, p, "--track", "catalog.json", "--transport", transport]);
    try {
      await sub.waitStdout((out) => out.toString() === `${text}\n`, 10_000, `the catalog over ${transport}`);
      assert.deepEqual(JSON.parse(sub.stdout().toString()), catalog);
    } finally {
      await sub.stop();
    }
  }
  pub.close();
  watcher.close();
  await H.stopMoqdClean(moqd);
});

// `moq` (this repo's client) speaks moq-lite-05 when told to: `moq pub --versions moq-lite-05`
// publishes to @moq/net 0.3.4 and `moq sub --versions moq-lite-05` reads what @moq/net
// publishes, both through moqd over WebSocket; moqd logs each of moq's sessions as moq-lite-05.
test("moq --versions moq-lite-05 publishes to and subscribes from @moq/net 0.3.4 through moqd", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const moqd = await H.startMoqd([]);
  started.push(moqd);
  const V = ["--versions", "moq-lite-05", "--transport", "ws"];
  // moq pub -> @moq/net viewer.
  const p1 = `${H.uniquePrefix("moq05pub")}/alice`;
  const viewer = await netConnect(moqd.url);
  // -v: moq logs its session's start, with the version.
  const pub = H.spawnMoq(["-v", "pub", moqd.url, p1, "--track", "video", "--group-every", "2", ...V]);
  try {
    await netWaitActive(viewer, p1).catch((err) => {
      throw new Error(`${err.message}\n${pub.describe()}`);
    });
    const stamps = [];
    const collecting = netCollect(viewer, p1, "video", 4, { n: 0 }, 10_000, stamps);
    pub.write("a0\n");
    await H.waitFor(() => stamps.length >= 1, 10_000, "the first frame");
    pub.write("a1\nb0\nb1\n");
    const got = await collecting;
    assert.deepEqual(got, [[Buffer.from("a0"), Buffer.from("a1")], [Buffer.from("b0"), Buffer.from("b1")]]);
    assert.ok(stamps.every(([, t]) => t.scale === 1000), "moq pub stamps in milliseconds");
    assert.match(pub.stderrText(), /session \d+ start .*transport=websocket\/qmux-02 version=moq-lite-05 /);
  } finally {
    await pub.stop();
  }
  // @moq/net publisher -> moq sub.
  const p2 = `${H.uniquePrefix("moq05sub")}/bob`;
  const netPub = await netConnect(moqd.url);
  netPublish(netPub, p2, [[H.text("x0"), H.text("x1")]]);
  await netWaitActive(viewer, p2);
  const sub = H.spawnMoq(["-v", "sub", moqd.url, p2, "--track", "video", ...V]);
  try {
    await sub.waitStdout((out) => out.toString() === "x0\nx1\n", 10_000, "both frames");
    assert.match(sub.stderrText(), /session \d+ start .*transport=websocket\/qmux-02 version=moq-lite-05 /);
  } finally {
    await sub.stop();
  }
  viewer.close();
  netPub.close();
  await H.stopMoqdClean(moqd);
});
