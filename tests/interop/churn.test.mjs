// Churn soak: ~12 virtual @moq/lite clients do seeded random things to one moqd (2 workers, short
// linger, small cache, short stall timeout) for ~20 s: connect, close gracefully or abruptly,
// publish broadcasts under a small shared set of paths (so duplicate publishers and switches
// happen), write groups of random sizes, close tracks and broadcasts, subscribe to existing and
// missing tracks, unsubscribe, subscribe without reading, watch announcements. Client-side errors
// are swallowed: the subject is moqd. Afterwards every session must be gone, a fresh pub -> sub
// round trip must be exact, and moqd must exit 0 on SIGTERM (under ASan an error or leak report
// makes that fail). CHURN_SEED=<n> replays a seed's choices (timing still varies).
// scripts/test.sh runs this file alone (see interop() there): a 20 s soak on 2 workers, with stall timeouts of its own.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Moq,
  assertGroups,
  httpGet,
  publishBroadcast,
  randomFrame,
  startMoqd,
  subscribeTrack,
  waitActive,
  waitFor,
  withDeadline,
} from "./harness.mjs";

const CHURN_MS = 20_000;
const CLIENTS = 12;
const PATHS = ["churn/a", "churn/b", "churn/c", "churn/d/e"];
const MISSING_PATHS = ["churn/none", "elsewhere/x"];
const TRACKS = ["t0", "t1", "t2"];
const MISSING_TRACK = "nope";
const PREFIXES = ["", "churn", "churn/d", "elsewhere"];

const seed = process.env.CHURN_SEED !== undefined ? Number(process.env.CHURN_SEED) >>> 0 : (Date.now() ^ (Math.random() * 2 ** 32)) >>> 0;
const log = console.log.bind(console);
log(`churn seed ${seed} (replay with CHURN_SEED=${seed})`);

// mulberry32: small, seeded, good enough to pick actions.
function rng(s) {
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

// Every client WebSocket, by the `churn` query parameter of its URL, so a client can drop its
// TCP connection without a close handshake.
const sockets = new Map();
const BaseWebSocket = globalThis.WebSocket;
class TrackedWebSocket extends BaseWebSocket {
  constructor(url, protocols, options) {
    super(url, protocols, options);
    const id = new URL(String(url)).searchParams.get("churn");
    if (id !== null) sockets.set(id, this);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quiet = (p) => Promise.resolve(p).catch(() => {});
function attempt(fn) {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

class VirtualClient {
  constructor(index, base, random, stats, deadline) {
    this.index = index;
    this.base = base;
    this.random = random;
    this.stats = stats;
    this.deadline = deadline;
    this.attempts = 0;
    this.conn = undefined;
    this.socketId = undefined;
    this.connecting = false;
    this.publishes = []; // {path, broadcast, tracks: [track]}
    this.subscriptions = []; // Moq track (subscriber side)
    this.watchers = []; // announced iterators
    this.stopped = false;
  }

  rand(n) {
    return Math.floor(this.random() * n);
  }
  pick(list) {
    return list[this.rand(list.length)];
  }
  chance(p) {
    return this.random() < p;
  }

  async run() {
    while (!this.stopped && Date.now() < this.deadline) {
      // Mostly a few ms between actions, sometimes a few hundred.
      await sleep(this.chance(0.2) ? 50 + this.rand(300) : 2 + this.rand(40));
      if (this.stopped) break;
      await this.step();
    }
  }

  async step() {
    if (!this.conn) {
      if (!this.connecting) await this.connect();
      return;
    }
    const r = this.random();
    if (r < 0.03) return this.closeGracefully();
    if (r < 0.06) return this.closeAbruptly();
    if (r < 0.16) return this.publish();
    if (r < 0.2) return this.closeBroadcast();
    if (r < 0.23) return this.closePublishedTrack();
    if (r < 0.43) return this.subscribe({ read: true, missing: this.chance(0.2) });
    if (r < 0.46) return this.subscribe({ read: false, missing: false });
    if (r < 0.56) return this.unsubscribe();
    if (r < 0.61) return this.watch();
    if (r < 0.64) return this.unwatch();
  }

  async connect() {
    this.connecting = true;
    const id = `${this.index}-${++this.attempts}`;
    const pending = Moq.Connection.connect(new URL(`${this.base}?churn=${id}`));
    let conn;
    try {
      conn = await withDeadline(pending, 5_000, "connect");
    } catch {
      // A connection that completes after the deadline must not outlive the test.
      pending.then((c) => attempt(() => c.close()), () => {});
      this.stats.connectFailures++;
    }
    this.connecting = false;
    if (!conn) return;
    if (this.stopped) {
      attempt(() => conn.close());
      return;
    }
    this.stats.connects++;
    this.conn = conn;
    this.socketId = id;
    quiet(conn.closed).finally(() => {
      if (this.conn === conn) this.forget();
    });
  }

  forget() {
    for (const p of this.publishes) attempt(() => p.broadcast.close());
    this.conn = undefined;
    this.publishes = [];
    this.subscriptions = [];
    this.watchers = [];
  }

  closeGracefully() {
    this.stats.gracefulCloses++;
    const conn = this.conn;
    this.forget();
    attempt(() => conn.close());
  }

  closeAbruptly() {
    this.stats.abruptCloses++;
    const conn = this.conn;
    const ws = sockets.get(this.socketId);
    this.forget();
    if (ws?._socket) ws._socket.destroy();
    else if (ws) attempt(() => ws.terminate());
    // Let the library notice and clean up its side.
    attempt(() => conn.close());
  }

  publish() {
    if (this.publishes.length >= 3) return;
    const path = this.pick(PATHS);
    const broadcast = new Moq.Broadcast();
    const entry = { path, broadcast, tracks: [] };
    if (attempt(() => (this.conn.publish(path, broadcast), true)) === undefined) return;
    this.stats.publishes++;
    this.publishes.push(entry);
    (async () => {
      for (;;) {
        const req = await broadcast.requested();
        if (!req) break;
        this.stats.requests++;
        if (!TRACKS.includes(req.track.name)) {
          attempt(() => req.track.close(new Error("unknown track")));
          continue;
        }
        entry.tracks.push(req.track);
        quiet(this.serve(req.track));
      }
    })().catch(() => {});
  }

  // Writes groups of random frames (mostly small, up to 64 KiB, rarely 300 KiB) until the track
  // or the client goes away; sometimes ends the track, sometimes leaves it open.
  async serve(track) {
    const groups = 1 + this.rand(30);
    for (let g = 0; g < groups && !this.stopped; g++) {
      const group = track.appendGroup();
      const frames = this.rand(6);
      for (let f = 0; f < frames && !this.stopped; f++) {
        const size = this.chance(0.01) ? 300 * 1024 : Math.floor(64 * 1024 * this.random() ** 4);
        group.writeFrame(randomFrame(size));
        this.stats.framesWritten++;
        this.stats.bytesWritten += size;
        if (this.chance(0.3)) await sleep(this.rand(30));
      }
      if (this.chance(0.05)) attempt(() => group.close(new Error("abandoned")));
      else group.close();
      await sleep(5 + this.rand(60));
    }
    if (this.chance(0.7)) track.close();
  }

  closeBroadcast() {
    if (this.publishes.length === 0) return;
    const entry = this.publishes.splice(this.rand(this.publishes.length), 1)[0];
    this.stats.broadcastCloses++;
    attempt(() => entry.broadcast.close());
  }

  closePublishedTrack() {
    const entry = this.publishes.find((p) => p.tracks.length > 0);
    if (!entry) return;
    const track = entry.tracks.splice(this.rand(entry.tracks.length), 1)[0];
    attempt(() => track.close(this.chance(0.5) ? new Error("publisher gave up") : undefined));
  }

  subscribe({ read, missing }) {
    if (this.subscriptions.length >= 6) return;
    const path = missing && this.chance(0.5) ? this.pick(MISSING_PATHS) : this.pick(PATHS);
    const name = missing ? this.pick([...TRACKS, MISSING_TRACK]) : this.pick(TRACKS);
    const track = attempt(() => this.conn.consume(path).subscribe(name, this.rand(4)));
    if (!track) return;
    this.stats.subscribes++;
    this.subscriptions.push(track);
    if (!read) {
      this.stats.unreadSubscribes++;
      return;
    }
    (async () => {
      for (;;) {
        const group = await track.recvGroup();
        if (!group) break;
        (async () => {
          for (;;) {
            const frame = await group.readFrame();
            if (!frame) break;
            this.stats.framesRead++;
          }
        })().catch(() => {});
      }
    })().catch(() => {});
  }

  unsubscribe() {
    if (this.subscriptions.length === 0) return;
    const track = this.subscriptions.splice(this.rand(this.subscriptions.length), 1)[0];
    this.stats.unsubscribes++;
    attempt(() => track.close());
  }

  watch() {
    if (this.watchers.length >= 3) return;
    const announced = attempt(() => this.conn.announced(this.pick(PREFIXES)));
    if (!announced) return;
    this.stats.watches++;
    this.watchers.push(announced);
    (async () => {
      for (;;) {
        const entry = await announced.next();
        if (!entry) break;
        this.stats.announcements++;
      }
    })().catch(() => {});
  }

  unwatch() {
    if (this.watchers.length === 0) return;
    const announced = this.watchers.splice(this.rand(this.watchers.length), 1)[0];
    attempt(() => announced.close());
  }

  stop() {
    this.stopped = true;
    if (this.conn) {
      if (this.chance(0.3)) this.closeAbruptly();
      else this.closeGracefully();
    }
  }
}

function tail(text, n = 6_000) {
  const asan = text.indexOf("ERROR: AddressSanitizer");
  const ubsan = text.indexOf("runtime error:");
  const leak = text.indexOf("ERROR: LeakSanitizer");
  const first = [asan, ubsan, leak].filter((i) => i >= 0).sort((a, b) => a - b)[0];
  if (first !== undefined) return text.slice(Math.max(0, first - 500), first + n);
  return text.slice(-n);
}

async function sessions(moqd) {
  const res = await httpGet(`${moqd.url}health`);
  return (await res.json()).sessions;
}

test(`churn soak (seed ${seed})`, { timeout: 60_000 }, async () => {
  // Errors the library throws into the void while connections die are expected here.
  const saved = {};
  const swallowed = { count: 0, last: undefined };
  for (const kind of ["unhandledRejection", "uncaughtException"]) {
    saved[kind] = process.listeners(kind);
    process.removeAllListeners(kind);
    process.on(kind, (err) => {
      swallowed.count++;
      swallowed.last = err;
    });
  }
  // The library logs every dying stream; keep the output to what the test says.
  const consoleSaved = { log: console.log, warn: console.warn, error: console.error };
  console.log = console.warn = console.error = () => {};
  globalThis.WebSocket = TrackedWebSocket;

  const moqd = await startMoqd(["--upstream-linger", "200ms", "--cache-groups", "4", "--stall-timeout", "3s"]);
  const crashed = () => moqd.proc.exitCode !== null || moqd.proc.signalCode !== null;
  const crashReport = () =>
    `moqd exited during the run (code ${moqd.proc.exitCode}, signal ${moqd.proc.signalCode}), seed ${seed}\n${tail(moqd.stderrText())}`;
  const stats = {
    connects: 0, connectFailures: 0, gracefulCloses: 0, abruptCloses: 0, publishes: 0, requests: 0,
    broadcastCloses: 0, subscribes: 0, unreadSubscribes: 0, unsubscribes: 0, watches: 0,
    announcements: 0, framesWritten: 0, bytesWritten: 0, framesRead: 0,
  };
  const clients = [];
  let failure;
  try {
    const master = rng(seed);
    const deadline = Date.now() + CHURN_MS;
    for (let i = 0; i < CLIENTS; i++) clients.push(new VirtualClient(i, moqd.url, rng((master() * 2 ** 32) >>> 0), stats, deadline));
    const runs = clients.map((c) => c.run().catch(() => {}));
    await waitFor(() => crashed() || Date.now() >= deadline, CHURN_MS + 5_000, "the churn to end", 50);
    for (const c of clients) c.stop();
    await withDeadline(Promise.all(runs), 5_000, "the virtual clients to stop");
    log(`churn stats ${JSON.stringify(stats)} swallowed client errors: ${swallowed.count}`);
    assert.ok(!crashed(), crashReport());

    // Every session ends once its client is gone (the abrupt ones when the socket closes).
    await waitFor(
      async () => {
        if (crashed()) throw new Error(crashReport());
        return (await sessions(moqd)) === 0;
      },
      10_000,
      async () => `/health sessions == 0 after the churn (seed ${seed})`,
      100,
    );

    // moqd still relays exactly: one publisher, three subscribers (on either worker).
    globalThis.WebSocket = BaseWebSocket;
    const pubConn = await Moq.Connection.connect(new URL(moqd.url));
    const subConns = await Promise.all([0, 1, 2].map(() => Moq.Connection.connect(new URL(moqd.url))));
    try {
      const groups = [
        [randomFrame(1), randomFrame(0), randomFrame(70_000)],
        [randomFrame(300 * 1024)],
        [randomFrame(5), randomFrame(64 * 1024), randomFrame(3)],
      ];
      const all = [[new TextEncoder().encode("sync")], ...groups];
      const subs = [];
      const subscribed = Promise.withResolvers();
      // Group 0 stays open until every subscriber has it, so all of them see every later group.
      const pub = publishBroadcast(pubConn, "churn/final", { f: all }, {
        holdOpen: (i) => i === 0,
        before: async (i) => {
          if (i === 1) await subscribed.promise.then(() => Promise.all(subs.map((s) => s.waitFrames(1))));
        },
        afterLast: () => Promise.all(subs.map((s) => s.waitFrames(1 + groups.flat().length))),
      });
      for (const c of subConns) {
        await waitActive(c, "churn/final");
        subs.push(subscribeTrack(c, "churn/final", "f"));
      }
      subscribed.resolve();
      for (const s of subs) {
        await s.waitFrames(1 + groups.flat().length, 10_000);
        assertGroups(s.received(), groups, 1, `final round trip after churn (seed ${seed})`);
      }
      pub.close();
    } finally {
      for (const c of [pubConn, ...subConns]) attempt(() => c.close());
    }
    assert.ok(!crashed(), crashReport());
    await waitFor(async () => (await sessions(moqd)) === 0, 10_000, "/health sessions == 0 after the final round trip", 50);
  } catch (err) {
    failure = err;
  } finally {
    for (const c of clients) c.stopped = true;
    globalThis.WebSocket = BaseWebSocket;
    const result = await moqd.stop({ ms: 15_000 }).catch((err) => ({ error: String(err) }));
    Object.assign(console, consoleSaved);
    for (const kind of Object.keys(saved)) {
      process.removeAllListeners(kind);
      for (const l of saved[kind]) process.on(kind, l);
    }
    const exit = `moqd exit on SIGTERM: ${JSON.stringify(result)} (seed ${seed})`;
    if (failure) {
      failure.message += `\n${exit}\nmoqd stderr:\n${tail(moqd.stderrText())}`;
      throw failure;
    }
    assert.deepEqual(result, { code: 0, signal: null }, `${exit}\n${tail(moqd.stderrText())}`);
    assert.doesNotMatch(moqd.stderrText(), /ERROR: (Address|Leak)Sanitizer|runtime error:/, `sanitizer report (seed ${seed})\n${tail(moqd.stderrText())}`);
  }
});

// The deterministic case the churn exposed: two publishers of one path on worker A, the older
// (a backup) leaves; worker B must keep relaying the active one.
// Opens connections one at a time until `want[w]` of them landed on worker w (told by /health's
// sessions_per_worker). Returns [[conn...] per worker]; every connection is also pushed to `conns`.
async function connectOnWorkers(moqd, want, conns) {
  const perWorker = async () => (await (await httpGet(`${moqd.url}health`)).json()).sessions_per_worker;
  const byWorker = want.map(() => []);
  for (let tries = 0; byWorker.some((c, w) => c.length < want[w]); tries++) {
    assert.ok(tries < 60, `could not place connections on workers: ${byWorker.map((c) => c.length)}`);
    const before = await perWorker();
    const conn = await Moq.Connection.connect(new URL(moqd.url));
    conns.push(conn);
    const w = await waitFor(async () => {
      const now = await perWorker();
      const i = now.findIndex((n, k) => n > before[k]);
      return i >= 0 ? { i } : undefined;
    }, 5_000, "the new session on /health");
    byWorker[w.i].push(conn);
  }
  return byWorker;
}

test("a backup publisher leaving one worker keeps the broadcast live on the other", { timeout: 30_000 }, async () => {
  const moqd = await startMoqd(["--upstream-linger", "200ms"]);
  const conns = [];
  const timers = [];
  function serve(conn, label) {
    const broadcast = new Moq.Broadcast();
    conn.publish("dup/p", broadcast);
    (async () => {
      for (;;) {
        const req = await broadcast.requested();
        if (!req) break;
        let n = 0;
        let group;
        const timer = setInterval(() => {
          try {
            if (n % 5 === 0) {
              group?.close();
              group = req.track.appendGroup();
            }
            group.writeFrame(new TextEncoder().encode(`${label} ${n++}`));
          } catch {
            clearInterval(timer);
          }
        }, 20);
        timers.push(timer);
      }
    })().catch(() => {});
    return broadcast;
  }
  try {
    const byWorker = await connectOnWorkers(moqd, [2, 1], conns);
    const [pub1, pub2] = byWorker[0];
    const subConn = byWorker[1][0];

    serve(pub1, "pub1");
    await waitActive(subConn, "dup/p");
    serve(pub2, "pub2");
    // Subscribe on the other worker until the newest publisher (pub2) is the one served.
    let sub;
    await waitFor(async () => {
      if (!sub || sub.state.ended) sub = subscribeTrack(subConn, "dup/p", "t");
      return sub.groups.some((g) => g.frames.some((f) => f.toString().startsWith("pub2")));
    }, 10_000, "frames from the second publisher on the other worker", 50);

    pub1.close(); // the backup leaves
    const have = sub.frameCount();
    await sub.waitFrames(have + 10, 5_000);
    assert.ok(!sub.state.ended, "the subscription on the other worker survived the backup leaving");
  } finally {
    for (const t of timers) clearInterval(t);
    for (const c of conns) attempt(() => c.close());
    const result = await moqd.stop();
    assert.deepEqual(result, { code: 0, signal: null }, `moqd exit\n${tail(moqd.stderrText())}`);
  }
});

// A publisher that vanishes with a group open: subscribers on its worker and on the other worker
// must see that group reset and the track end, not wait on the open group forever.
for (const how of ["closes its connection", "closes its broadcast"]) {
  test(`a publisher that ${how} mid-group ends its subscribers' groups`, { timeout: 30_000 }, async () => {
    const moqd = await startMoqd(["--upstream-linger", "200ms"]);
    const conns = [];
    try {
      const byWorker = await connectOnWorkers(moqd, [2, 1], conns);
      const [pubConn, localConn] = byWorker[0];
      const remoteConn = byWorker[1][0];
      const broadcast = new Moq.Broadcast();
      pubConn.publish("open/p", broadcast);
      (async () => {
        for (;;) {
          const req = await broadcast.requested();
          if (!req) break;
          const done = req.track.appendGroup();
          done.writeFrame(new TextEncoder().encode("whole"));
          done.close();
          req.track.appendGroup().writeFrame(new TextEncoder().encode("open")); // never closed
        }
      })().catch(() => {});
      const subs = [];
      for (const c of [localConn, remoteConn]) {
        await waitActive(c, "open/p");
        const sub = subscribeTrack(c, "open/p", "t");
        await sub.waitUntil((groups) => groups.some((g) => g.frames.some((f) => f.toString() === "open")), 10_000, "the open group's frame");
        subs.push(sub);
      }
      if (how === "closes its connection") pubConn.close();
      else broadcast.close();
      for (const [i, sub] of subs.entries()) await sub.waitEnd(5_000).catch((err) => assert.fail(`${i === 0 ? "same" : "other"} worker: ${err.message}`));
    } finally {
      for (const c of conns) attempt(() => c.close());
      const result = await moqd.stop();
      assert.deepEqual(result, { code: 0, signal: null }, `moqd exit\n${tail(moqd.stderrText())}`);
    }
  });
}
