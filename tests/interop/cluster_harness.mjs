// What the cluster tests share: a moqd started as a named cluster node with its metrics listener,
// its /cluster view, and a wait for its links.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as Token from "@moq/token";
import * as H from "./harness.mjs";

// Starts moqd as cluster node `name` (plus `args`; `opts` as startMoqd takes them), with /cluster
// on a metrics listener at r.metrics; pushes it to `started` (the file's after() stops them) and
// resolves with it.
export async function startClusterRelay(started, name, args = [], opts = {}) {
  const r = await H.startMoqd(["--cluster-node", name, "--metrics-listen", "127.0.0.1:0",
    "--log-level", "info", ...args], opts);
  started.push(r);
  const m = /^moqd metrics url=(\S+)$/m.exec(r.stdoutText());
  assert.ok(m, `metrics url of ${name}`);
  r.metrics = m[1];
  r.name = name;
  return r;
}

// The relay's GET /cluster, parsed.
export async function clusterOf(r) {
  const res = await H.httpGet(`${r.metrics}cluster`);
  assert.equal(res.status, 200);
  return res.json();
}

// Every announcement a relay heard: new ones (moqd_announces_total), withdrawals (new ones less
// moqd_announces_active) and hop-list updates received. moqd_announces_total alone misses a
// storm of updates or of withdrawn-and-back routes.
export async function announcesHeard(r) {
  const text = await (await H.httpGet(`${r.metrics}metrics`)).text();
  const value = (re, what) => {
    const m = re.exec(text);
    assert.ok(m, `${what} in /metrics`);
    return Number(m[1]);
  };
  const opened = value(/^moqd_announces_total(?:\{[^}]*\})? (\d+)/m, "moqd_announces_total");
  const active = value(/^moqd_announces_active(?:\{[^}]*\})? (\d+)/m, "moqd_announces_active");
  const updates = value(/^moqd_announce_updates_total\{direction="received"\} (\d+)/m,
    "moqd_announce_updates_total{direction=\"received\"}");
  return 2 * opened - active + updates;
}

// Reads read(r) of every relay until two reads 600 ms apart are the same (within `ms`: a storm
// never settles, so the wait fails on it); resolves with the last.
async function settledReads(relays, read, ms, what) {
  let last = [];
  await H.waitFor(async () => {
    const now = [];
    for (const r of relays) now.push(await read(r));
    const settled = now.every((n, i) => n === last[i]);
    last = now;
    if (!settled) await H.pace(600);  // not a synchronisation: the interval between two reads
    return settled;
  }, ms, what);
  return last;
}

// The relay's moqd_announces_total.
export async function announcesTotal(r) {
  const text = await (await H.httpGet(`${r.metrics}metrics`)).text();
  const m = /^moqd_announces_total(?:\{[^}]*\})? (\d+)/m.exec(text);
  assert.ok(m, "moqd_announces_total in /metrics");
  return Number(m[1]);
}

// A ring of `relays` (R0 with the publisher of `path`): every relay lists `path` in /cluster
// (each within `listMs`, read every `pollMs`; /cluster is a snapshot each worker rebuilds every
// 500 ms, src/relay/status.h); then the announcements each accepted (announcesTotal) settle, the
// same on two reads 600 ms apart (within `settleMs`: a storm never settles, so the wait fails on
// it), logged as `# <label> announcements accepted per relay`, and bounded: each relay has two
// links and R0 the publisher too, a route per link plus an update or two while the shorter path
// settles is at most 5; no route is over 4 hops; and none more come in the next second, the window
// in which a storm would show. Returns the counts.
export async function ringSettles(relays, path, { listMs, pollMs = 10, settleMs, label }) {
  for (const r of relays) {
    await H.waitFor(async () => (await clusterOf(r)).broadcasts.some((x) => x.path === path),
      listMs, `${r.name} lists ${path} in /cluster`, pollMs);
  }
  const counts = await settledReads(relays, announcesTotal, settleMs, "announcement counts settle");
  console.log(`# ${label} announcements accepted per relay: ${counts.join(" ")}`);
  for (const [i, n] of counts.entries()) assert.ok(n >= 1 && n <= 5, `R${i} accepted ${n}`);
  for (const r of relays) {
    const bc = (await clusterOf(r)).broadcasts.find((x) => x.path === path);
    for (const route of bc.routes) assert.ok(route.hops.length <= 4, JSON.stringify(route));
  }
  await H.pace(1_000);  // not a synchronisation: the window in which a storm would show
  const later = [];
  for (const r of relays) later.push(await announcesTotal(r));
  assert.deepEqual(later, counts, "announcements kept coming");
  return counts;
}

// Waits until none of `relays` lists `path` in /cluster (each within `forgetMs`), then until the
// announcements each heard (announcesHeard) are the same on two reads 600 ms apart (within
// `settleMs`: a storm never settles, so the wait fails on it). Returns what each heard since
// `before` (announcesHeard values read earlier).
export async function forgetsAndSettles(relays, path, before, { forgetMs, settleMs }) {
  for (const r of relays) {
    await H.waitFor(async () => !(await clusterOf(r)).broadcasts.some((x) => x.path === path),
      forgetMs, `${r.name} forgets ${path}`, 100);
  }
  const heard = await settledReads(relays, announcesHeard, settleMs, `announcements heard settle after ${path} left`);
  return heard.map((n, i) => n - before[i]);
}

// The publisher of `p` leaves the ring of `relays` (`leave()`): every relay forgets `p` and what
// each hears about it (withdrawals and updates included) settles (forgetsAndSettles, with
// `forgetMs` and `settleMs`), logged as `# <label> announcements heard per relay as the publisher
// left`, at most 8 per relay: each relay's two links each withdraw the route and may offer a longer
// one first, which is withdrawn in turn (ClusterRingTest measures at most 3 per relay in process).
export async function ringForgets(relays, p, leave, { forgetMs, settleMs, label }) {
  const heardBefore = [];
  for (const r of relays) heardBefore.push(await announcesHeard(r));
  leave();
  const leftDelta = await forgetsAndSettles(relays, p, heardBefore, { forgetMs, settleMs });
  console.log(`# ${label} announcements heard per relay as the publisher left: ${leftDelta.join(" ")}`);
  for (const [i, n] of leftDelta.entries()) assert.ok(n <= 8, `R${i} heard ${n} as the publisher left`);
}

// Two cluster keys written in `dir` and a cluster token (`moq token --cluster`) from each:
// {key, good, bad}, `good` signed with `key` and `bad` with the other.
export async function clusterTokens(dir) {
  const key = path.join(dir, "cluster.jwk");
  const wrong = path.join(dir, "wrong.jwk");
  fs.writeFileSync(key, JSON.stringify(await Token.generate("HS256", "cluster")));
  fs.writeFileSync(wrong, JSON.stringify(await Token.generate("HS256", "cluster")));
  const mint = async (k) => (await H.runMoq(["token", "--key", k, "--put", "", "--get", "", "--cluster"])).stdout.toString().trim();
  return { key, good: await mint(key), bad: await mint(wrong) };
}

// Waits until exactly `n` of the relay's cluster links are up.
export async function waitLinksUp(r, n, ms = 15_000) {
  await H.waitFor(async () => (await clusterOf(r)).links.filter((l) => l.state === "up").length === n,
    ms, `${r.name}: ${n} cluster links up`, 100);
}

// A publisher of broadcast `p` on `conn` whose group sequence is the time since `t0` in `groupMs`
// steps, so every track request (a relay that subscribed again) continues the same numbering;
// one frame per group holding its sequence. `requests` lists the track names asked for.
export function clockPublisher(conn, p, { groupMs = 50, t0 = Date.now() } = {}) {
  const broadcast = new H.Moq.Broadcast();
  conn.publish(p, broadcast);
  let stopped = false;
  const requests = [];
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      requests.push(req.track.name);
      (async () => {
        let last = -1;
        while (!stopped) {
          const seq = Math.floor((Date.now() - t0) / groupMs);
          if (seq > last) {
            last = seq;
            const g = new H.Moq.Group(seq);
            req.track.writeGroup(g);
            g.writeFrame(H.text(`group ${seq}`));
            g.close();
          }
          await H.pace(5);
        }
        req.track.close();
      })().catch(() => {});
    }
  })().catch(() => {});
  return { requests, stop: () => { stopped = true; broadcast.close(); } };
}

// Records the groups of track `name` of `p` in arrival order, with their arrival time.
export function recordGroups(conn, p, name) {
  const track = conn.consume(p).subscribe(name, 0);
  const arrivals = [];
  const state = { ended: false };
  (async () => {
    for (;;) {
      const g = await track.recvGroup();
      if (!g) break;
      arrivals.push({ seq: g.sequence, at: Date.now() });
    }
  })().catch((err) => { state.error = err; }).finally(() => { state.ended = true; });
  return { arrivals, state, close: () => track.close() };
}

// FNV-1a 64 over `bytes` (numbers 0..255), as BigInt.
function fnv1a(bytes, h = 0xcbf29ce484222325n) {
  for (const b of bytes) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h;
}

// A relay's hop id for --cluster-node `name` (relay::hop_id_for_node): below 2^52, never 0.
export function hopIdFor(name) {
  const h = fnv1a(Buffer.from(name, "utf8")) & ((1n << 52n) - 1n);
  return h === 0n ? 1n : h;
}

// The warm bit of a hop id (model::kWarmHop).
export const WARM_HOP = 2 ** 52;

// model::warm_key(path, relay): which relay may pull `path` from which one's warm copy (lower
// pulls from nobody's key above its own).
export function warmKey(path, hopId) {
  const le = [];
  for (let i = 0n; i < 8n; i++) le.push(Number((hopId >> (8n * i)) & 0xffn));
  return fnv1a(le, fnv1a(Buffer.from(path, "utf8")));
}
