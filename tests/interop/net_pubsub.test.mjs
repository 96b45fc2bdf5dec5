// @moq/net 0.3.4 (the current moq-dev client, @moq/qmux 0.3.3) in Node over WebSocket through
// moqd: publishes and subscribes byte for byte with each moq-lite version moqd serves, forced in
// turn with --versions (moqd then selects qmux-02.moq-lite-04, qmux-02.moq-lite-03, or
// qmux-02.moql and SETUP picks lite-02 or lite-01); and against @moq/lite 0.2.2 on the other
// side of moqd, both ways.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import * as Net from "@moq/net";
import { waitLog } from "./raw.mjs";

const started = [];
const conns = [];
after(async () => {
  for (const c of conns) {
    try {
      c.close();
    } catch {}
  }
  for (const m of started) await m.stop().catch(() => {});
});

async function netConnect(url) {
  const conn = await H.withDeadline(Net.Connection.connect(new URL(url)), 10_000, `@moq/net connect to ${url}`);
  conns.push(conn);
  return conn;
}

// Serves `groups` (arrays of Uint8Array frames) on every track requested from `path`; before
// group i > 0, waits for before(i) (the relay may skip a group a newer one overtakes).
function netPublish(conn, p, groups, before = async () => {}) {
  const broadcast = new Net.Broadcast.Producer();
  conn.publish(Net.Path.from(p), broadcast);
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      const track = req.accept();
      let ts = 0;
      for (const [i, frames] of groups.entries()) {
        if (i > 0) await before(i);
        const g = track.appendGroup();
        for (const payload of frames) g.writeFrame({ payload, timestamp: Net.Time.Timestamp.fromMillis(ts++) });
        g.close();
      }
      // Leave the track open: the subscriber reads what it needs, then closes.
    }
  })().catch((err) => console.error("netPublish", err));
  return broadcast;
}

async function netWaitActive(conn, p, ms = 10_000) {
  const parent = p.slice(0, p.lastIndexOf("/"));
  const name = p.slice(p.lastIndexOf("/") + 1);
  const announced = conn.announced(Net.Path.from(parent));  // events carry the path under it
  try {
    await H.withDeadline(
      (async () => {
        for (;;) {
          const e = await announced.next();
          if (!e) throw new Error("announced ended");
          if (e.path === name && e.active) return;
        }
      })(),
      ms,
      `announcement of ${p}`,
    );
  } finally {
    announced.close();
  }
}

// Reads `count` frames from `track` of `path`, groups in any order, frames in order;
// progress.n counts the frames read so far.
async function netCollect(conn, p, track, count, progress = { n: 0 }, ms = 10_000) {
  const sub = conn.consume(Net.Path.from(p)).subscribe(track);
  const groups = new Map();
  let n = 0;
  const bump = () => {
    n++;
    progress.n = n;
  };
  // Groups are read concurrently; the receive loop ends with the subscription.
  (async () => {
    for (;;) {
      const g = await sub.recvGroup();
      if (!g) break;
      const frames = [];
      groups.set(g.sequence, frames);
      (async () => {
        for (;;) {
          const f = await g.readFrame();
          if (!f) break;
          frames.push(Buffer.from(f.payload));
          bump();
        }
      })().catch(() => {});
    }
  })().catch(() => {});
  await H.waitFor(() => n >= count, ms, `${count} frames of ${p}/${track}`);
  sub.close();
  return [...groups.entries()].sort((a, b) => a[0] - b[0]).map(([, f]) => f);
}

const GROUPS = [[H.text("sync"), H.randomFrame(40_000)], [new Uint8Array(0), H.randomFrame(17), H.randomFrame(3000)]];
const flat = (groups) => groups.flat().map((f) => Buffer.from(f));

for (const version of ["moq-lite-04", "moq-lite-03", "moq-lite-02", "moq-lite-01"]) {
  test(`@moq/net 0.3.4 publishes and subscribes byte for byte with ${version} forced`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const moqd = await H.startMoqd(["--versions", version]);
    started.push(moqd);
    const p = `${H.uniquePrefix(version)}/alice`;
    const pub = await netConnect(moqd.url);
    const sub = await netConnect(moqd.url);
    assert.equal(pub.version, version);
    assert.equal(sub.version, version);
    const progress = { n: 0 };
    netPublish(pub, p, GROUPS, (i) => H.waitFor(() => progress.n >= GROUPS.slice(0, i).flat().length, 10_000, `group ${i - 1}`));
    await netWaitActive(sub, p);
    const got = await netCollect(sub, p, "video", flat(GROUPS).length, progress);
    assert.deepEqual(got.flat(), flat(GROUPS));
    await waitLog(moqd, new RegExp(`transport=websocket/qmux-02 version=${version} `));
    pub.close();
    sub.close();
    await H.stopMoqdClean(moqd);
  });
}

test("@moq/net 0.3.4 and @moq/lite 0.2.2 on either side of moqd, both ways", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const moqd = await H.startMoqd([]);
  started.push(moqd);
  // @moq/net publishes (lite-04 over qmux-02), @moq/lite subscribes (lite-02 over qmux-00).
  const p1 = `${H.uniquePrefix("net2lite")}/alice`;
  const netPub = await netConnect(moqd.url);
  assert.equal(netPub.version, "moq-lite-04");
  const litePub = await H.connect(moqd.url);
  const liteSub = await H.connect(moqd.url);
  let sub1;
  netPublish(netPub, p1, GROUPS, (i) => H.waitFor(() => sub1?.frameCount() >= GROUPS.slice(0, i).flat().length, 10_000, `group ${i - 1}`));
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
  const got = await netCollect(netSub, p2, "video", flat(GROUPS).length, progress);
  assert.deepEqual(got.flat(), flat(GROUPS));
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
