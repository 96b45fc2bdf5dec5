// Warm re-announce across workers (issue #14): warmness is the relay's, not a worker's. B runs
// two workers and dials its peers itself, so each link's worker is known (peer i on worker i mod
// 2): the link to A, where B pulls the broadcast from, on one worker, and the link to C on the
// other. B's viewer is placed on the upstream link's worker, so the warm copy (B's tracks) is on
// that worker only, and the worker holding C's link has none. C must still hear B's hop warm and
// pull through B, as in cluster_warm.test.mjs with one worker. Both placements are run (upstream
// on worker 0 and on worker 1). Each relay also counts the hop-list update it sent (B) or
// applied (C) in moqd_announce_updates_total and /cluster.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import * as H from "./harness.mjs";
import {
  clockPublisher, clusterOf, hopIdFor, recordGroups, startClusterRelay, waitLinksUp, warmKey, WARM_HOP,
} from "./cluster_harness.mjs";

// Connections close while frames are in flight: they reach closed @moq/qmux streams.
H.useTeardownGuards();

const T = { timeout: 120_000 };
const PATH = "warmw/cam";

const started = [];
after(async () => {
  H.closeAllConnections();
  for (const r of started) {
    if (r.proc.exitCode === null && r.proc.signalCode === null) await r.stop().catch(() => {});
  }
});

async function metricsText(r) {
  return (await H.httpGet(`${r.metrics}metrics`)).text();
}

// The sample's value; asserts it is there unless `optional` (then absent reads 0).
async function metric(r, name, labels = "", optional = false) {
  const text = await metricsText(r);
  const esc = labels.replace(/[{}]/g, "\\$&");
  const m = new RegExp(`^${name}${esc} (\\d+)`, "m").exec(text);
  if (optional && !m) return 0;
  assert.ok(m, `${name}${labels} in /metrics of ${r.name}`);
  return Number(m[1]);
}

const updates = (r, direction, optional = false) =>
  metric(r, "moqd_announce_updates_total", `{direction="${direction}"}`, optional);

async function routesOf(r) {
  return (await clusterOf(r)).broadcasts.find((x) => x.path === PATH)?.routes ?? [];
}

async function sessionsByWorker(r) {
  const res = await H.httpGet(`${r.metrics}status.json`);
  return (await res.json()).workers.map((w) => w.sessions);
}

const total = (xs) => xs.reduce((a, b) => a + b, 0);

// A viewer connection to `r` that landed on worker `worker` (the kernel spreads connections over
// the workers' listeners: reconnect until one lands there).
async function connectOnWorker(r, worker) {
  for (let i = 0; i < 40; i++) {
    const before = await sessionsByWorker(r);
    const conn = await H.connect(r.url);
    let now = before;
    await H.waitFor(async () => total(now = await sessionsByWorker(r)) > total(before), 5_000,
      `${r.name}: viewer session counted`, 20);
    if (now[worker] > before[worker]) return conn;
    H.closeConnection(conn);
    await H.waitFor(async () => total(await sessionsByWorker(r)) === total(before), 5_000,
      `${r.name}: viewer session gone`, 20);
  }
  throw new Error(`no connection to ${r.name} landed on worker ${worker}`);
}

// Names for B, C and D such that C's cold tie-break picks D and C honours B's warm mark.
function pickNames(tag) {
  for (let i = 0; i < 64; i++) {
    for (let j = 0; j < 64; j++) {
      const b = `ww${tag}-b${i}`;
      const c = `ww${tag}-c${j}`;
      const d = `ww${tag}-d${i}`;
      if (hopIdFor(d) < hopIdFor(b) && warmKey(PATH, hopIdFor(b)) < warmKey(PATH, hopIdFor(c))) {
        return { b, c, d };
      }
    }
  }
  throw new Error("no names fit");
}

for (const upstreamWorker of [0, 1]) {
  test(`a warm copy on worker ${upstreamWorker} is announced warm over the link on worker ${1 - upstreamWorker}`, T, async () => {
    const names = pickNames(upstreamWorker);
    const relay = (name, args, workers = 1) => startClusterRelay(started, name, args, { workers });
    const a = await relay(`ww${upstreamWorker}-a`, []);
    const d = await relay(names.d, ["--cluster-connect", a.url]);
    const c = await relay(names.c, ["--cluster-connect", d.url]);
    // Peer i is dialled on worker i mod 2: the order puts A's link on `upstreamWorker`.
    const peers = upstreamWorker === 0 ? [a.url, c.url] : [c.url, a.url];
    const b = await relay(names.b, peers.flatMap((u) => ["--cluster-connect", u]), 2);
    await waitLinksUp(d, 1);
    await waitLinksUp(c, 1);
    await waitLinksUp(b, 2);
    const links = (await clusterOf(b)).links;
    assert.equal(links.find((l) => l.url.startsWith(a.url)).worker, upstreamWorker, JSON.stringify(links));
    assert.equal(links.find((l) => l.url.startsWith(c.url)).worker, 1 - upstreamWorker, JSON.stringify(links));
    const bHop = (await clusterOf(b)).hop_id;
    const dHop = (await clusterOf(d)).hop_id;

    const pub = clockPublisher(await H.connect(a.url), PATH);
    // Cold: C's two routes tie on two hops and D's (the smaller list) is in use.
    await H.waitFor(async () => (await routesOf(c)).length === 2, 10_000, "C: two routes", 100);
    assert.equal((await routesOf(c))[0].hops[1], dHop, JSON.stringify(await routesOf(c)));
    // (Read leniently here so that a build without the counter still shows the warmness failure
    // below first; the counts after are required.)
    const sentBefore = await updates(b, "sent", true);
    const receivedBefore = await updates(c, "received", true);

    // A viewer on B's upstream worker: only that worker has the broadcast's tracks.
    const viewB = recordGroups(await connectOnWorker(b, upstreamWorker), PATH, "video");
    await H.waitFor(() => viewB.arrivals.length >= 5, 10_000, "5 groups on B");
    await H.waitFor(async () => (await routesOf(c))[0]?.hops[1] === bHop + WARM_HOP, 10_000,
      "C: B's warm copy in use", 100);
    assert.equal((await routesOf(c))[0].distance, 1);

    // B re-sent its hop list to C once it turned warm; C applied it as an update.
    assert.ok(await updates(b, "sent") > sentBefore, "B counted the update it sent");
    assert.ok(await updates(c, "received") > receivedBefore, "C counted the update it applied");
    const bView = await clusterOf(b);
    assert.equal(bView.announce_updates.sent, await updates(b, "sent"), "/cluster agrees with /metrics");

    // A viewer on C is served through B: A still serves one upstream subscription.
    const viewC = recordGroups(await H.connect(c.url), PATH, "video");
    await H.waitFor(() => viewC.arrivals.length >= 10, 10_000, "10 groups on C");
    assert.equal(await metric(a, "moqd_subscriptions_total"), 1, "subscriptions at the origin relay");
    assert.equal(await metric(d, "moqd_subscriptions_total"), 0, "nothing pulled through D");
    viewC.close();
    viewB.close();
    pub.stop();
  });
}
