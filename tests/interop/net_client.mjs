// @moq/net 0.3.4 in Node, as the IETF session tests drive it (ietf_session.test.mjs,
// ietf_session_d17.test.mjs; net_pubsub.test.mjs waits for announcements with it too): connect, publish groups, wait for an announcement, subscribe and
// record the frames per group; the groups they send and the gate between them; and the two cases
// both ietf_session files run per draft (netPubSub, netLateJoiner, netCrossLite).
import assert from "node:assert/strict";
import * as H from "./harness.mjs";
import * as Net from "@moq/net";
import { waitLog } from "./raw.mjs";

const conns = [];

// Closes every connection netConnect() made (a file's after()).
export function closeNetConnections() {
  for (const c of conns.splice(0)) {
    try {
      c.close();
    } catch {}
  }
}

export async function netConnect(url) {
  const conn = await H.withDeadline(Net.Connection.connect(new URL(url)), 10_000, `@moq/net connect to ${url}`);
  conns.push(conn);
  return conn;
}

// Answers every request for a track of `broadcast` with serve(request), each on its own: with
// moq-lite-05 a relay's TRACK (which only wants the track's properties) and its SUBSCRIBE are two
// requests that may be pending at once. A serve that fails other than on a closed connection is
// logged as `what`.
function serveRequests(broadcast, serve, what) {
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      serve(req).catch((err) => {
        if (!/closed/.test(String(err?.message ?? err))) console.error(what, err);
      });
    }
  })().catch((err) => console.error(what, err));
}

// Serves `groups` (arrays of Uint8Array frames) on every track requested from `p`; before group
// i > 0, waits for before(i). With `end`, closes the track after the last group.
export function netPublish(conn, p, groups, { before = async () => {}, end = false } = {}) {
  const broadcast = new Net.Broadcast.Producer();
  conn.publish(Net.Path.from(p), broadcast);
  serveRequests(broadcast, async (req) => {
    const track = req.accept();
    let ts = 0;
    for (const [i, frames] of groups.entries()) {
      if (i > 0) await before(i);
      const g = track.appendGroup();
      for (const payload of frames) g.writeFrame({ payload, timestamp: Net.Time.Timestamp.fromMillis(ts++) });
      g.close();
    }
    if (end) track.close();
  }, "netPublish");
  return broadcast;
}

// A track with its own properties and timescale (90 kHz, as video), and timestamps that go
// backwards inside a group (B-frames: negative zigzag deltas), as netPublishTimed serves it
// (net_pubsub.test.mjs over moq-lite-05, ietf_timestamps.test.mjs to the IETF drafts).
export const TIMED_INFO = { timescale: 90_000, priority: 3, ordered: true, latencyMax: 1234 };
export const TIMED_STAMPS = [[900_000, 903_000], [906_000, 904_500, 909_000]];
export const TIMED = [[H.text("i0"), H.randomFrame(20_000)], [H.text("p1"), H.randomFrame(5), new Uint8Array(0)]];

// Serves TIMED with TIMED_INFO and TIMED_STAMPS on every track requested from `p`; before group
// i > 0, waits for before(i). The track stays open.
export function netPublishTimed(conn, p, before) {
  const broadcast = new Net.Broadcast.Producer();
  conn.publish(Net.Path.from(p), broadcast);
  serveRequests(broadcast, async (req) => {
    const track = req.accept(TIMED_INFO);
    for (const [i, frames] of TIMED.entries()) {
      if (i > 0) await before(i);
      const g = track.appendGroup();
      for (const [j, payload] of frames.entries()) {
        g.writeFrame({ payload, timestamp: new Net.Time.Timestamp(TIMED_STAMPS[i][j], TIMED_INFO.timescale) });
      }
      g.close();
    }
  }, "netPublishTimed");
  return broadcast;
}

export async function netWaitActive(conn, p, ms = 10_000) {
  const parent = p.slice(0, p.lastIndexOf("/"));
  const name = p.slice(p.lastIndexOf("/") + 1);
  const announced = conn.announced(Net.Path.from(parent)); // events carry the path under it
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

// Subscribes to `track` of `p` and records frames per group sequence; state.ended once the
// subscription ends (the publisher ended the track, through moqd): state.done when the track
// reader returned done (a clean end), state.error when it threw; state.groupErrors counts the
// groups whose frame reader threw; `complete` holds the groups read to their end. onFrame(sequence,
// frame) sees each frame (its timestamp too) once recorded.
export function netSubscribe(conn, p, track, { onFrame = () => {} } = {}) {
  const sub = conn.consume(Net.Path.from(p)).subscribe(track);
  const groups = new Map();
  const complete = new Set(); // sequences of the groups read to their end
  const state = { n: 0, ended: false, done: false, error: undefined, groupErrors: 0 };
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
          state.n++;
          onFrame(g.sequence, f);
        }
        complete.add(g.sequence);
      })().catch(() => {
        state.groupErrors++;
      });
    }
    state.done = true;
  })()
    .catch((err) => {
      state.error = err;
    })
    .finally(() => {
      state.ended = true;
    });
  const ordered = () => [...groups.entries()].sort((a, b) => a[0] - b[0]).map(([, f]) => f);
  return { sub, groups, complete, state, ordered };
}

export const GROUPS = [
  [H.text("sync"), H.randomFrame(40_000)],
  [new Uint8Array(0), H.randomFrame(17), H.randomFrame(3000)],
  [H.randomFrame(1), H.randomFrame(70_000)],
];
export const flat = (groups) => groups.flat().map((f) => Buffer.from(f));
export const count = (groups) => groups.flat().length;
export const before = (progress, groups) => (i) =>
  H.waitFor(() => progress.state.n >= count(groups.slice(0, i)), 10_000, `group ${i - 1} through moqd`);

// An @moq/net publisher and subscriber on `version` through moqd `m` (whose log must show a
// session of the draft over WebSocket framed as `framing`): the publisher serves GROUPS at `p`,
// each group once the subscriber has the ones before, then ends the track; the subscriber reads
// every frame byte for byte, each group as one. Returns the connections and the subscription
// (netSubscribe's) for the caller's checks of the end of the track.
export async function netPubSub(m, version, framing, p) {
  const pub = await netConnect(m.url);
  const sub = await netConnect(m.url);
  assert.equal(pub.version, version);
  assert.equal(sub.version, version);
  await waitLog(m, new RegExp(`transport=websocket/${framing} version=${version} `));
  const holder = {};
  netPublish(pub, p, GROUPS, { before: (i) => before(holder.s, GROUPS)(i), end: true });
  await netWaitActive(sub, p);
  holder.s = netSubscribe(sub, p, "video");
  await H.waitFor(() => holder.s.state.n >= count(GROUPS), 10_000, `${count(GROUPS)} frames`);
  assert.deepEqual(holder.s.ordered().flat(), flat(GROUPS));
  assert.equal(holder.s.groups.size, GROUPS.length);
  return { pub, sub, s: holder.s };
}

// Through moqd `m` (serving the draft @moq/net is to use): a viewer subscribing after groups 0..2
// were published starts at the newest cached group (2) at once, then gets 3 and 4, while the first
// viewer gets them all, byte for byte.
export async function netLateJoiner(m) {
  const p = `${H.uniquePrefix("late")}/alice`;
  const pub = await netConnect(m.url);
  const first = await netConnect(m.url);
  const late = await netConnect(m.url);
  const groups = [0, 1, 2, 3, 4].map((i) => [H.text(`g${i}`), H.randomFrame(1000 + i)]);
  const gate = { open: false };
  const holder = {};
  netPublish(pub, p, groups, {
    before: async (i) => {
      await H.waitFor(() => holder.a && holder.a.state.n >= count(groups.slice(0, i)), 10_000, `group ${i - 1}`);
      if (i === 3) await H.waitFor(() => gate.open, 10_000, "the late joiner");
    },
  });
  await netWaitActive(first, p);
  holder.a = netSubscribe(first, p, "video");
  await H.waitFor(() => holder.a.state.n >= count(groups.slice(0, 3)), 10_000, "three groups at the first viewer");
  const b = netSubscribe(late, p, "video");
  await H.waitFor(() => b.state.n >= 2, 10_000, "the newest cached group at the late joiner");
  gate.open = true;
  await H.waitFor(() => holder.a.state.n >= count(groups), 10_000, "every group at the first viewer");
  await H.waitFor(() => b.state.n >= 6, 10_000, "groups 2..4 at the late joiner");
  assert.deepEqual(holder.a.ordered().flat(), flat(groups));
  assert.deepEqual(b.ordered().flat(), flat(groups.slice(2)));
  pub.close();
  first.close();
  late.close();
}

// Through moqd `m` serving moq-lite-02 and `version`, across protocol families: groups 0..4 from an
// @moq/lite 0.2.2 publisher (lite-02) to two @moq/net viewers on the draft (`dir` "lite-to-ietf"),
// or from an @moq/net publisher to two @moq/lite viewers ("ietf-to-lite"). The second viewer
// subscribes after groups 0..2 and starts at the newest cached group (2) at once, then gets 3 and
// 4; the first gets them all; byte for byte.
export async function netCrossLiteLateJoiner(m, version, dir) {
  const p = `${H.uniquePrefix(`late-${dir}`)}/alice`;
  const groups = [0, 1, 2, 3, 4].map((i) => [H.text(`g${i}`), H.randomFrame(1000 + i)]);
  const gate = { open: false };
  const holder = {};
  const frames = (s) => (s.frameCount ? s.frameCount() : s.state.n);
  const before = async (i) => {
    await H.waitFor(() => holder.a && frames(holder.a) >= count(groups.slice(0, i)), 10_000, `group ${i - 1}`);
    if (i === 3) await H.waitFor(() => gate.open, 10_000, "the late joiner");
  };
  let first, late, got;
  if (dir === "lite-to-ietf") {
    const lite = await H.connect(m.url);
    [first, late] = [await netConnect(m.url), await netConnect(m.url)];
    assert.equal(first.version, version);
    H.publishBroadcast(lite, p, { video: groups }, { before: (i) => (i === 0 ? Promise.resolve() : before(i)) });
    await netWaitActive(first, p);
    holder.a = netSubscribe(first, p, "video");
    await H.waitFor(() => frames(holder.a) >= count(groups.slice(0, 3)), 10_000, "three groups at the first viewer");
    const b = netSubscribe(late, p, "video");
    await H.waitFor(() => b.state.n >= 2, 10_000, "the newest cached group at the late joiner");
    gate.open = true;
    await H.waitFor(() => b.state.n >= 6, 10_000, "groups 2..4 at the late joiner");
    await H.waitFor(() => frames(holder.a) >= count(groups), 10_000, "every group at the first viewer");
    got = { a: holder.a.ordered().flat(), b: b.ordered().flat() };
    first.close();
    late.close();
    H.closeConnection(lite);
  } else {
    const net = await netConnect(m.url);
    assert.equal(net.version, version);
    [first, late] = [await H.connect(m.url), await H.connect(m.url)];
    // The publisher ends the track: its end reaching both viewers means moqd has every group
    // stream whole (it honours PUBLISH_DONE's Stream Count), so @moq/net has no write left when
    // its connection closes (closing it earlier raced a group stream's last write).
    netPublish(net, p, groups, { before, end: true });
    const watcher = H.watchAnnounced(first, p.slice(0, p.lastIndexOf("/")));
    await watcher.waitFor(p, true);
    watcher.close();
    holder.a = H.subscribeTrack(first, p, "video");
    await H.waitFor(() => frames(holder.a) >= count(groups.slice(0, 3)), 10_000, "three groups at the first viewer");
    const b = H.subscribeTrack(late, p, "video");
    await H.waitFor(() => b.frameCount() >= 2, 10_000, "the newest cached group at the late joiner");
    gate.open = true;
    await H.waitFor(() => b.frameCount() >= 6, 10_000, "groups 2..4 at the late joiner");
    assert.deepEqual(b.groups.map((g) => g.group), [2, 3, 4]);
    await H.waitFor(() => frames(holder.a) >= count(groups), 10_000, "every group at the first viewer");
    got = { a: holder.a.groups.flatMap((g) => g.frames), b: b.groups.flatMap((g) => g.frames) };
    await holder.a.waitEnd(10_000);
    await b.waitEnd(10_000);
    net.close();
    H.closeConnection(first);
    H.closeConnection(late);
  }
  assert.deepEqual(got.a, flat(groups));
  assert.deepEqual(got.b, flat(groups.slice(2)));
}

// Through moqd `m` serving moq-lite-02 and `version`: GROUPS from an @moq/lite 0.2.2 publisher
// (it speaks lite-02) to an @moq/net subscriber on the draft (`dir` "lite-to-ietf"), or from an
// @moq/net publisher to an @moq/lite subscriber ("ietf-to-lite"), each group once the subscriber
// has the ones before, byte for byte. The @moq/net publisher's end of track reaches the lite
// subscriber; with `ietfSeesEnd`, the lite publisher's end reaches the @moq/net subscriber
// (PUBLISH_DONE) too.
export async function netCrossLite(m, version, dir, { ietfSeesEnd }) {
  const p = `${H.uniquePrefix(dir)}/alice`;
  const net = await netConnect(m.url);
  const lite = await H.connect(m.url);
  assert.equal(net.version, version);
  await waitLog(m, /version=moq-lite-02 /);
  if (dir === "lite-to-ietf") {
    const holder = {};
    H.publishBroadcast(lite, p, { video: GROUPS }, {
      before: (i) => (i === 0 ? Promise.resolve() : H.waitFor(() => holder.s.state.n >= count(GROUPS.slice(0, i)), 10_000, `group ${i - 1}`)),
    });
    await netWaitActive(net, p);
    holder.s = netSubscribe(net, p, "video");
    await H.waitFor(() => holder.s.state.n >= count(GROUPS), 10_000, `${count(GROUPS)} frames`);
    assert.deepEqual(holder.s.ordered().flat(), flat(GROUPS));
    if (ietfSeesEnd) await H.waitFor(() => holder.s.state.ended, 10_000, "the end of the track at the IETF subscriber");
  } else {
    const holder = {};
    netPublish(net, p, GROUPS, {
      before: (i) => H.waitFor(() => holder.s.frameCount() >= count(GROUPS.slice(0, i)), 10_000, `group ${i - 1}`),
      end: true,
    });
    const watcher = H.watchAnnounced(lite, p.slice(0, p.lastIndexOf("/")));
    await watcher.waitFor(p, true);
    watcher.close();
    holder.s = H.subscribeTrack(lite, p, "video");
    await H.waitFor(() => holder.s.frameCount() >= count(GROUPS), 10_000, `${count(GROUPS)} frames`);
    assert.deepEqual(holder.s.groups.flatMap((g) => g.frames), flat(GROUPS));
    await holder.s.waitEnd(10_000);
  }
  net.close();
  H.closeConnection(lite);
}
