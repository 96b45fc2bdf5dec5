// @moq/net 0.3.4 in Node, as the IETF session tests drive it (ietf_session.test.mjs,
// ietf_session_d17.test.mjs; net_pubsub.test.mjs waits for announcements with it too): connect, publish groups, wait for an announcement, subscribe and
// record the frames per group; the groups they send and the gate between them; and the two cases
// both ietf_session files run per draft (netPubSub, netLateJoiner).
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

// Serves `groups` (arrays of Uint8Array frames) on every track requested from `p`; before group
// i > 0, waits for before(i). With `end`, closes the track after the last group.
export function netPublish(conn, p, groups, { before = async () => {}, end = false } = {}) {
  const broadcast = new Net.Broadcast.Producer();
  conn.publish(Net.Path.from(p), broadcast);
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      (async () => {
        const track = req.accept();
        let ts = 0;
        for (const [i, frames] of groups.entries()) {
          if (i > 0) await before(i);
          const g = track.appendGroup();
          for (const payload of frames) g.writeFrame({ payload, timestamp: Net.Time.Timestamp.fromMillis(ts++) });
          g.close();
        }
        if (end) track.close();
      })().catch((err) => {
        if (!/closed/.test(String(err?.message ?? err))) console.error("netPublish", err);
      });
    }
  })().catch((err) => console.error("netPublish", err));
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
// groups whose frame reader threw; `complete` holds the groups read to their end.
export function netSubscribe(conn, p, track) {
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
