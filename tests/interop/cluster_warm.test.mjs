// Warm re-announce (docs/ARCHITECTURE.md, Clustering): a relay that carries a broadcast marks its
// hop warm when it announces it to its peers, and a sibling counts a route's distance from that
// warm copy, so it pulls the copy next door rather than open another subscription at the origin.
//
// Four moqd on 127.0.0.1, one worker each (warmness is per worker): publisher on A; B and D link
// to A; C links to B and D. C's two routes, [A,B] and [A,D], tie on two hops, and the node names
// are picked so that the tie-break (the smaller hop list) picks D and B keys below C for the
// path (model::warm_key), so C may pull from B's warm copy. A viewer on B makes B warm: C moves
// to B, and a viewer on C is served through B. A counts exactly one upstream subscription (B's),
// no announcement loops, and every relay's announcement count stops changing (no storm).
import assert from "node:assert/strict";
import { after, test } from "node:test";
import * as H from "./harness.mjs";
import {
  clockPublisher, clusterOf, hopIdFor, recordGroups, startClusterRelay, waitLinksUp, warmKey, WARM_HOP,
} from "./cluster_harness.mjs";

// Connections close while frames are in flight: they reach closed @moq/qmux streams.
H.useTeardownGuards();

const T = { timeout: 90_000 };
const PATH = "warm/cam";
// Announcements a relay accepts for one broadcast crossing this cluster: its first route, the
// other route, each of them turning warm or cold once and a switch; far below a storm.
const MAX_ANNOUNCES = 12;

const started = [];
after(async () => {
  H.closeAllConnections();
  for (const r of started) {
    if (r.proc.exitCode === null && r.proc.signalCode === null) await r.stop().catch(() => {});
  }
});

const relay = (name, args = []) => startClusterRelay(started, name, args, { workers: 1 });

async function metric(r, name) {
  const text = await (await H.httpGet(`${r.metrics}metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, "m").exec(text);
  assert.ok(m, `${name} in /metrics of ${r.name}`);
  return Number(m[1]);
}

async function routesOf(r) {
  return (await clusterOf(r)).broadcasts.find((x) => x.path === PATH)?.routes ?? [];
}

// Names for B, C and D such that C's cold tie-break picks D (its hop id is the smaller) and C
// honours B's warm mark (B's warm key for PATH is below C's).
function pickNames() {
  for (let i = 0; i < 64; i++) {
    for (let j = 0; j < 64; j++) {
      const b = `warm-b${i}`;
      const c = `warm-c${j}`;
      const d = `warm-d${i}`;
      if (hopIdFor(d) < hopIdFor(b) && warmKey(PATH, hopIdFor(b)) < warmKey(PATH, hopIdFor(c))) {
        return { b, c, d };
      }
    }
  }
  throw new Error("no names fit");
}

test("a sibling pulls the warm copy: one upstream subscription at the origin relay", T, async () => {
  const names = pickNames();
  const a = await relay("warm-a");
  const b = await relay(names.b, ["--cluster-connect", a.url]);
  const d = await relay(names.d, ["--cluster-connect", a.url]);
  const c = await relay(names.c, ["--cluster-connect", b.url, "--cluster-connect", d.url]);
  await waitLinksUp(b, 1);
  await waitLinksUp(d, 1);
  await waitLinksUp(c, 2);
  const bHop = (await clusterOf(b)).hop_id;
  const dHop = (await clusterOf(d)).hop_id;
  assert.equal(BigInt(bHop), hopIdFor(names.b), "the test's hop id is moqd's");

  const pubConn = await H.connect(a.url);
  const pub = clockPublisher(pubConn, PATH);
  // Cold, C's two routes tie on two hops and D's (the smaller list) is in use.
  await H.waitFor(async () => (await routesOf(c)).length === 2, 10_000, "C: two routes", 100);
  let routes = await routesOf(c);
  assert.equal(routes[0].via, d.url, JSON.stringify(routes));
  assert.equal(routes[0].hops[1], dHop);

  // A viewer on B: B pulls from A and re-announces its hop warm; C moves to B (distance 1).
  const viewB = recordGroups(await H.connect(b.url), PATH, "video");
  await H.waitFor(() => viewB.arrivals.length >= 5, 10_000, "5 groups on B");
  await H.waitFor(async () => (await routesOf(c))[0]?.hops[1] === bHop + WARM_HOP, 10_000,
    "C: B's warm copy in use", 100);
  routes = await routesOf(c);
  assert.equal(routes[0].via, b.url, JSON.stringify(routes));
  assert.equal(routes[0].distance, 1);
  assert.equal(routes[1].via, d.url);
  assert.equal(routes[1].distance, 2);

  // A viewer on C is served through B: the origin relay still has one upstream subscription.
  const viewC = recordGroups(await H.connect(c.url), PATH, "video");
  await H.waitFor(() => viewC.arrivals.length >= 10, 10_000, "10 groups on C");
  assert.equal(await metric(a, "moqd_subscriptions_total"), 1, "subscriptions at the origin relay");
  assert.equal(await metric(a, "moqd_subscriptions_open"), 1);
  assert.equal(await metric(d, "moqd_subscriptions_total"), 0, "nothing pulled through D");
  assert.equal(await metric(b, "moqd_subscriptions_open"), 2, "B serves its viewer and C");
  assert.deepEqual(pub.requests, ["video"]);

  // B's own viewer leaves: C still pulls through B, so B stays warm and C stays on it.
  viewB.close();
  const before = viewC.arrivals.length;
  await H.waitFor(() => viewC.arrivals.length >= before + 10, 10_000, "10 more groups on C");
  assert.equal((await routesOf(c))[0].hops[1], bHop + WARM_HOP);

  // No loop, no storm: the announcement counts settle, bounded.
  const relays = [a, b, c, d];
  let last = [];
  await H.waitFor(async () => {
    const now = [];
    for (const r of relays) now.push(await metric(r, "moqd_announces_total"));
    const same = JSON.stringify(now) === JSON.stringify(last);
    last = now;
    return same;
  }, 10_000, "announcement counts stop changing", 1_000);
  for (let i = 0; i < relays.length; i++) {
    assert.ok(last[i] <= MAX_ANNOUNCES, `${relays[i].name}: ${last[i]} announcements`);
    assert.equal(await metric(relays[i], "moqd_announces_looped_total"), 0, `${relays[i].name}: loops`);
  }
  assert.equal(await metric(a, "moqd_subscriptions_total"), 1);
  console.log(`# announcements accepted (A B C D): ${last.join(" ")}`);
  viewC.close();
  pub.stop();
});
