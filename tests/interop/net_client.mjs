// @moq/net 0.3.4 in Node, as the IETF session tests drive it (ietf_session.test.mjs,
// ietf_session_d17.test.mjs; net_pubsub.test.mjs waits for announcements with it too): connect, publish groups, wait for an announcement, subscribe and
// record the frames per group; the groups they send and the gate between them.
import * as H from "./harness.mjs";
import * as Net from "@moq/net";

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
