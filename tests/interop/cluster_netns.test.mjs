// A cluster of four moqd, each on a host of its own: a Linux network namespace joined to this
// (the root) namespace by a veth pair, with no route to the other namespaces. Every relay link
// runs through a userspace relay in the root namespace (link_proxy.mjs: this kernel has no netem)
// that delays each QUIC datagram by DELAY_MS and drops LOSS of them, each way. Topology: the
// publisher on A, viewers on C, paths A-B-C and A-D-C (C's link to D costs 1, so B is in use).
// B is killed with SIGKILL mid-stream: every viewer keeps its subscription and receives again
// through D within FAILOVER_BOUND_MS, with no duplicate and no out-of-order group.
//
// A ring of five (R0..R4, each on a host, every link through a proxy) carries a broadcast from
// R0 to a viewer on R2 with a bounded, settled number of announcements per relay, and forgets it,
// again with a bounded, settled number, when the publisher leaves; a relay whose
// cluster token is signed with the wrong key is refused by the hub on another host, one with a
// good token links up.
//
// Needs root (ip netns, veth). The namespaces and links are created here and always deleted,
// also when a test fails; the file skips, saying why, only when a namespace cannot be created.
// scripts/test.sh runs this file alone (see interop() there): failover through network namespaces within a stated bound.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import * as H from "./harness.mjs";
import { clockPublisher, clusterOf, clusterTokens, recordGroups, ringForgets, ringSettles, waitLinksUp } from "./cluster_harness.mjs";
import { startLinkProxy } from "./link_proxy.mjs";

H.useTeardownGuards();

const T = { timeout: 120_000 };
const DELAY_MS = 15;   // per link, each way
const LOSS = 0.01;     // per link, each way
const VIEWERS = 3;
// C notices B is gone when its QUIC link idles out (ClusterLink::kLinkIdleTimeout, 3 s, with a
// keep-alive every 0.5 s); C then moves the track to D's route and D subscribes to A: two delayed
// links, a few round trips of 2 x DELAY_MS. 6 s leaves room for a lost datagram's retransmission
// on each link and a loaded machine.
const FAILOVER_BOUND_MS = 6_000;
const PORT = 4443;  // each namespace has its own ports

const tag = `mq${process.pid % 100000}`;
const subnet = 100 + (process.pid % 100);  // 10.<subnet>.<host>.0/24 per host
const namespaces = [];
const veths = [];  // root-side ends, deleted too: a veth left in the root if makeHost failed half-way
const proxies = [];
const started = [];

function ip(...args) {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr || r.error}`);
  return r.stdout;
}

function cleanup() {
  for (const ns of namespaces.splice(0)) spawnSync("ip", ["netns", "del", ns]);  // takes its veth
  for (const v of veths.splice(0)) spawnSync("ip", ["link", "del", v]);  // fails quietly when gone
}
process.on("exit", cleanup);

after(async () => {
  H.closeAllConnections();
  for (const r of started) {
    if (r.proc.exitCode === null && r.proc.signalCode === null) await r.stop().catch(() => {});
  }
  for (const p of proxies) await p.close();
  cleanup();
});

// Why namespaces cannot be used here, or null when they can (checked by making one).
function netnsUnavailable() {
  const probe = `${tag}probe`;
  const r = spawnSync("ip", ["netns", "add", probe], { encoding: "utf8" });
  if (r.error) return `no ip command (${r.error.message})`;
  if (r.status !== 0) return `ip netns add failed: ${r.stderr.trim()}`;
  spawnSync("ip", ["netns", "del", probe]);
  return null;
}

// Host `i` (1-based): namespace `${tag}-${name}`, its end of the veth at 10.S.i.2, the root's at
// 10.S.i.1.
function makeHost(i, name) {
  const ns = `${tag}-${name}`;
  ip("netns", "add", ns);
  namespaces.push(ns);
  const outer = `${tag}h${i}`;
  const inner = `${tag}n${i}`;
  veths.push(outer);
  ip("link", "add", outer, "type", "veth", "peer", "name", inner);
  ip("link", "set", inner, "netns", ns);
  ip("addr", "add", `10.${subnet}.${i}.1/24`, "dev", outer);
  ip("link", "set", outer, "up");
  ip("netns", "exec", ns, "ip", "addr", "add", `10.${subnet}.${i}.2/24`, "dev", inner);
  ip("netns", "exec", ns, "ip", "link", "set", inner, "up");
  ip("netns", "exec", ns, "ip", "link", "set", "lo", "up");
  return { ns, name, addr: `10.${subnet}.${i}.2`, outer: `10.${subnet}.${i}.1` };
}

async function relayOn(host, args = []) {
  const r = await H.startMoqd(["--listen", `${host.addr}:${PORT}`, "--cluster-node", host.name,
    "--metrics-listen", `${host.addr}:9090`, "--log-level", "info", ...args],
  { wrap: ["ip", "netns", "exec", host.ns] });
  started.push(r);
  r.name = host.name;
  r.url = `http://${host.addr}:${PORT}/`;  // the ready line names the harness's 127.0.0.1 listener
  r.metrics = `http://${host.addr}:9090/`;
  return r;
}

// A link from host `from` to relay `to` through a delaying, lossy relay on from's side of the
// root namespace (the only address `from` can reach).
async function linkProxy(from, to, seed) {
  const p = await startLinkProxy({ listenHost: from.outer, targetHost: to.addr, targetPort: PORT,
    delayMs: DELAY_MS, loss: LOSS, seed });
  proxies.push(p);
  return p;
}

const unavailable = netnsUnavailable();
if (unavailable) console.log(`# SKIP cluster_netns: network namespaces unavailable here: ${unavailable}`);

test("netns diamond: B killed mid-stream, every viewer on C continues through D", {
  ...T, skip: unavailable ? `network namespaces unavailable: ${unavailable}` : false,
}, async () => {
  const [a, b, c, d] = ["A", "B", "C", "D"].map((n, i) => makeHost(i + 1, n));
  // The hosts are isolated: C has no route to B except through the proxies.
  const direct = spawnSync("ip", ["netns", "exec", c.ns, "ip", "route", "get", b.addr], { encoding: "utf8" });
  assert.notEqual(direct.status, 0, `C can reach B directly: ${direct.stdout}`);

  const ra = await relayOn(a);
  const ba = await linkProxy(b, a, 1);
  const da = await linkProxy(d, a, 2);
  const rb = await relayOn(b, ["--cluster-connect", ba.url]);
  const rd = await relayOn(d, ["--cluster-connect", da.url]);
  const cb = await linkProxy(c, b, 3);
  const cd = await linkProxy(c, d, 4);
  const rc = await relayOn(c, ["--cluster-connect", cb.url, "--cluster-connect", `${cd.url}?cost=1`]);
  await waitLinksUp(rb, 1, 20_000);
  await waitLinksUp(rd, 1, 20_000);
  await waitLinksUp(rc, 2, 20_000);

  const pubConn = await H.connect(ra.url);
  const pub = clockPublisher(pubConn, "ns/cam");
  const views = [];
  for (let i = 0; i < VIEWERS; i++) {
    const conn = await H.connect(rc.url);
    await H.waitActive(conn, "ns/cam", { ms: 15_000 });
    views.push({ conn, rec: recordGroups(conn, "ns/cam", "video") });
  }
  // C knows both routes (/cluster is a snapshot at most 500 ms old: waited for), B's in use.
  const routes = await H.waitFor(async () => {
    const bc = (await clusterOf(rc)).broadcasts.find((x) => x.path === "ns/cam");
    return bc && bc.routes.length === 2 && bc.routes;
  }, 10_000, "C: two routes to ns/cam", 100);
  assert.equal(routes[0].via, cb.url, JSON.stringify(routes));
  const cbBefore = cb.stats.forwarded;
  const start = views.map((v) => v.rec.arrivals.length);
  await H.waitFor(() => views.every((v, i) => v.rec.arrivals.length >= start[i] + 10), 15_000,
    "10 more groups at every viewer through B");
  // At least a datagram per group crossed B's link into C.
  assert.ok(cb.stats.forwarded - cbBefore >= 10, `${cb.stats.forwarded - cbBefore} datagrams via B`);

  const killedAt = Date.now();
  const before = views.map((v) => v.rec.arrivals.length);
  const cdBefore = cd.stats.forwarded;
  const daBefore = da.stats.forwarded;
  rb.proc.kill("SIGKILL");
  await rb.exited;
  await H.waitFor(() => views.every((v, i) => v.rec.arrivals.length >= before[i] + 20 || v.rec.state.ended),
    30_000, () => `20 more groups at every viewer (${views.map((v) => v.rec.arrivals.length)})`);

  let reordered = 0;
  for (const [i, v] of views.entries()) {
    assert.ok(!v.rec.state.ended, `viewer ${i}'s subscription ended (${v.rec.state.error})`);
    // The first group that arrived after the kill and was not already on its way through B: the
    // first one after a pause, or simply the first after the kill.
    const after = v.rec.arrivals.filter((x) => x.at > killedAt);
    const resumed = after.find((x, j) => j > 0 && x.at - after[j - 1].at > 1_000) ?? after[0];
    const gap = resumed.at - killedAt;
    console.log(`# netns failover: viewer ${i} receives again ${gap} ms after SIGKILL of B (bound ${FAILOVER_BOUND_MS} ms)`);
    assert.ok(gap <= FAILOVER_BOUND_MS, `viewer ${i}: failover took ${gap} ms`);
    // No group twice, and none through D at or below one the viewer had before the kill (the
    // Track's sequence floor across the switch).
    const seqs = v.rec.arrivals.map((x) => x.seq);
    assert.equal(new Set(seqs).size, seqs.length, `viewer ${i}: a group arrived twice: ${seqs}`);
    const newestBefore = Math.max(...v.rec.arrivals.filter((x) => x.at <= killedAt).map((x) => x.seq));
    const throughD = v.rec.arrivals.filter((x) => x.at >= resumed.at);
    assert.ok(throughD.every((x) => x.seq > newestBefore),
      `viewer ${i}: through D came ${throughD.map((x) => x.seq)} after ${newestBefore} through B`);
    // Loss reorders groups on a path: a group whose datagram was lost is retransmitted after the
    // next group's stream arrived, and moqd forwards a late group as it comes (it refuses older
    // groups only across a switch). Counted, not failed.
    const late = v.rec.arrivals.filter((x, j) => j > 0 && x.seq < v.rec.arrivals[j - 1].seq).length;
    console.log(`# netns: viewer ${i}: ${seqs.length} groups, ${late} arrived after a newer one (loss)`);
    reordered += late;
  }
  // After the kill the groups came through D's proxies, and the proxies did drop datagrams.
  const after = await H.waitFor(async () => {
    const bc = (await clusterOf(rc)).broadcasts.find((x) => x.path === "ns/cam");
    return bc && bc.routes.length === 1 && bc.routes;
  }, 5_000, "C: one route left to ns/cam", 100);
  assert.deepEqual(after.map((r) => r.via), [cd.url]);
  // At least a datagram per group crossed each of D's links after the kill.
  assert.ok(cd.stats.forwarded - cdBefore >= 20 && da.stats.forwarded - daBefore >= 20,
    JSON.stringify([cd.stats, cdBefore, da.stats, daBefore]));
  const dropped = [ba, da, cb, cd].reduce((n, p) => n + p.stats.dropped, 0);
  console.log(`# netns proxies: ${reordered} groups reordered by loss in all; ${dropped} datagrams dropped of ${dropped + [ba, da, cb, cd].reduce((n, p) => n + p.stats.forwarded, 0)}`);
  assert.ok(dropped > 0, "the proxies dropped nothing: the test ran without loss");

  for (const v of views) { v.rec.close(); H.closeConnection(v.conn); }
  pub.stop();
  H.closeConnection(pubConn);
  for (const r of [ra, rc, rd]) await H.stopMoqdClean(r);
});

test("netns ring of five: a broadcast crosses it with a bounded number of announcements", {
  ...T, skip: unavailable ? `network namespaces unavailable: ${unavailable}` : false,
}, async () => {
  // Hosts 11..15 (the diamond has 1..4). R1..R3 dial the one before; R4 dials R3 and R0, closing
  // the ring (a link carries announcements both ways, whoever dialled it).
  const hosts = [0, 1, 2, 3, 4].map((i) => makeHost(11 + i, `R${i}`));
  const rs = [await relayOn(hosts[0])];
  const links = [];
  for (let i = 1; i < 4; i++) {
    const p = await linkProxy(hosts[i], hosts[i - 1], 10 + i);
    links.push(p);
    rs.push(await relayOn(hosts[i], ["--cluster-connect", p.url]));
  }
  const p43 = await linkProxy(hosts[4], hosts[3], 14);
  const p40 = await linkProxy(hosts[4], hosts[0], 15);
  links.push(p43, p40);
  rs.push(await relayOn(hosts[4], ["--cluster-connect", p43.url, "--cluster-connect", p40.url]));
  for (let i = 1; i < 5; i++) await waitLinksUp(rs[i], i === 4 ? 2 : 1, 20_000);

  const pubConn = await H.connect(rs[0].url);
  const pub = clockPublisher(pubConn, "ring/cam");
  const viewConn = await H.connect(rs[2].url);
  await H.waitActive(viewConn, "ring/cam", { ms: 15_000 });
  const view = recordGroups(viewConn, "ring/cam", "video");
  await H.waitFor(() => view.arrivals.length >= 10, 15_000, "10 groups two hops away");
  const seqs = view.arrivals.map((x) => x.seq);
  assert.equal(new Set(seqs).size, seqs.length, `viewer on R2: a group arrived twice: ${seqs}`);
  // The groups crossed the proxies: R2's link to R1 and R1's to R0 (the two-hop path).
  assert.ok(links[0].stats.forwarded >= 10 && links[1].stats.forwarded >= 10,
    JSON.stringify(links.map((p) => p.stats)));
  // Every relay hears of the broadcast, and the announcements settle within the loopback ring's
  // bounds.
  await ringSettles(rs, "ring/cam", { listMs: 10_000, pollMs: 100, settleMs: 15_000, label: "netns ring" });
  // The publisher leaves: every relay forgets the broadcast and what each hears settles, bounded
  // (the loopback ring's check; without the loop guards a route through itself goes round).
  await ringForgets(rs, "ring/cam", () => {
    view.close();
    pub.stop();
    H.closeConnection(pubConn);
  }, { forgetMs: 10_000, settleMs: 15_000, label: "netns ring" });

  H.closeConnection(viewConn);
  for (const r of rs) await H.stopMoqdClean(r);
});

test("netns: a relay with a bad cluster token is refused by its peer; a good one links", {
  ...T, skip: unavailable ? `network namespaces unavailable: ${unavailable}` : false,
}, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moqd-netns-"));
  try {
    const { key, good, bad } = await clusterTokens(dir);
    // Hosts 21..23: the hub, an intruder and a member, each linked to the hub through a proxy.
    const [hh, ih, mh] = ["hub", "intruder", "member"].map((n, i) => makeHost(21 + i, n));
    const hub = await relayOn(hh, ["--auth-key", key]);
    const ip2hub = await linkProxy(ih, hh, 21);
    const intruder = await relayOn(ih, ["--cluster-connect", ip2hub.url, "--cluster-token", bad]);
    await H.waitFor(async () => (await clusterOf(intruder)).links[0].failures >= 2, 20_000,
      "the intruder's link to fail twice", 100);
    assert.notEqual((await clusterOf(intruder)).links[0].state, "up");
    assert.match(hub.stderrText(), /auth refused connect .*reason=bad_signature/);
    // The refusal came over the proxy: the intruder's datagrams reached the hub's host.
    assert.ok(ip2hub.stats.forwarded > 0, JSON.stringify(ip2hub.stats));
    const mp2hub = await linkProxy(mh, hh, 22);
    const member = await relayOn(mh, ["--cluster-connect", mp2hub.url, "--cluster-token", good]);
    await waitLinksUp(member, 1, 20_000);
    // The token's cluster claim makes the link a relay link: the hub sees the member's broadcast
    // with the member's hop id.
    const pubConn = await H.connect(member.url);
    const pub = clockPublisher(pubConn, "m/cam");
    await H.waitFor(async () => (await clusterOf(hub)).broadcasts.some((b) => b.path === "m/cam"),
      15_000, "the hub to learn m/cam", 100);
    const bc = (await clusterOf(hub)).broadcasts.find((b) => b.path === "m/cam");
    assert.deepEqual(bc.routes[0].hops, [(await clusterOf(member)).hop_id]);
    // Still refused: the intruder never linked while the member did.
    assert.notEqual((await clusterOf(intruder)).links[0].state, "up");
    pub.stop();
    H.closeConnection(pubConn);
    for (const r of [hub, intruder, member]) await H.stopMoqdClean(r);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
