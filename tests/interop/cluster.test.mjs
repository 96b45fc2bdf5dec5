// Relays subscribing to relays (--cluster-connect): moqd processes on 127.0.0.1 linked over QUIC
// (WebTransport, moq-lite-04, hop lists on announcements).
// - A diamond: publisher on A, viewer on C, paths A-B-C and A-D-C (C's link to D costs 1, so
//   B is the path in use). B is killed with SIGKILL mid-stream: the viewer keeps its subscription
//   and receives again through D within FAILOVER_BOUND_MS, with no duplicate and no out-of-order
//   group; /cluster on C shows the routes, then D as the way to the broadcast.
// - A ring of five relays carries a broadcast end to end, and the announcements each relay
//   accepts stay bounded (counted with moqd_announces_total) and stop changing: no storm. When
//   the publisher leaves, every relay forgets the broadcast and what each hears (withdrawals and
//   updates too) settles, bounded: no route goes round the ring.
// - A relay presenting a cluster token signed with the wrong key is refused by its peer (logged
//   there, the link stays down), and one with a good token links up.
// - --cluster-peers-file: peers added to the file are linked, peers removed are unlinked (with
//   the routes learned through them), an editor's rename-into-place is seen, bad lines skipped.
// - `moq sub --fallback URL`: its relay killed, it continues through the other relay (both linked
//   to the publisher's), never writing a group twice or out of order.
// scripts/test.sh runs this file alone (see interop() there): failover must happen within a stated bound.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import * as H from "./harness.mjs";
import { clockPublisher, clusterOf, clusterTokens, recordGroups, ringForgets, ringSettles, startClusterRelay, waitLinksUp } from "./cluster_harness.mjs";

// Relays die mid-stream here: frames still in flight reach closed @moq/qmux streams.
H.useTeardownGuards();

const T = { timeout: 60_000 };
// SIGKILL leaves C's QUIC link to B open until its idle timeout (3 s, kept alive every 0.5 s:
// ClusterLink::kLinkIdleTimeout); then C moves the track to D, which subscribes to A.
const FAILOVER_BOUND_MS = 6_000;
const GROUP_MS = 50;

const started = [];
after(async () => {
  H.closeAllConnections();
  for (const r of started) {
    if (r.proc.exitCode === null && r.proc.signalCode === null) await r.stop().catch(() => {});
  }
});

const relay = (name, args) => startClusterRelay(started, name, args);

// moq-lite sends a viewer that falls behind its newer groups first (src/session/subscription.cc,
// send_order), so on a loaded machine a group can arrive after a newer one: that is not a fault
// (@moq/lite documents recvGroup() as arrival order for that reason). What a path change must
// never do is deliver a group twice: the relay drops what the new path sends at or below the
// newest group it had (model::Track::switch_source), and a group it had already sent the viewer
// would arrive again.
function assertNoDuplicates(arrivals, what) {
  const seen = new Set();
  for (const x of arrivals) {
    assert.ok(!seen.has(x.seq), `${what}: group ${x.seq} arrived twice: ${arrivals.map((a) => a.seq).join(" ")}`);
    seen.add(x.seq);
  }
  const late = arrivals.filter((x, i) => i > 0 && x.seq < arrivals[i - 1].seq).length;
  if (late) console.log(`# ${what}: ${late} group(s) arrived after a newer one`);
}

test("diamond: killing the relay in use moves the viewer to the other path within the bound", T, async () => {
  const a = await relay("A");
  const b = await relay("B", ["--cluster-connect", a.url]);
  const d = await relay("D", ["--cluster-connect", a.url]);
  const c = await relay("C", ["--cluster-connect", b.url, "--cluster-connect", `${d.url}?cost=1`]);
  await waitLinksUp(b, 1);
  await waitLinksUp(d, 1);
  await waitLinksUp(c, 2);

  const pubConn = await H.connect(`${a.url}`);
  const pub = clockPublisher(pubConn, "live/cam");
  const viewConn = await H.connect(`${c.url}`);
  await H.waitActive(viewConn, "live/cam", { ms: 10_000 });

  // C knows both routes; the one through B (2 hops, cost 0) is in use, D's (cost 1) waits.
  await H.waitFor(async () => {
    const bc = (await clusterOf(c)).broadcasts.find((x) => x.path === "live/cam");
    return bc && bc.routes.length === 2;
  }, 10_000, "C: two routes to live/cam", 100);
  const routes = (await clusterOf(c)).broadcasts.find((x) => x.path === "live/cam").routes;
  assert.equal(routes[0].via, b.url, JSON.stringify(routes));
  assert.equal(routes[0].hops.length, 2);
  assert.equal(routes[1].via, d.url);
  assert.equal(routes[1].cost, 1);
  const cInfo = await clusterOf(c);
  assert.equal(cInfo.node, "C");

  const view = recordGroups(viewConn, "live/cam", "video");
  await H.waitFor(() => view.arrivals.length >= 10, 10_000, "10 groups through B");
  const killedAt = Date.now();
  const before = view.arrivals.length;
  b.proc.kill("SIGKILL");
  await b.exited;

  await H.waitFor(() => view.arrivals.length >= before + 20 || view.state.ended, 15_000,
    "20 more groups through D");
  assert.ok(!view.state.ended, `the viewer's subscription ended (${view.state.error})`);
  // The first group newer than any before the kill: a late one still queued at C would say
  // nothing about the new path.
  const newestBefore = Math.max(...view.arrivals.slice(0, before).map((x) => x.seq));
  const firstAfter = view.arrivals.find((x, i) => i >= before && x.at > killedAt && x.seq > newestBefore);
  const gap = firstAfter.at - killedAt;
  console.log(`# failover: first group after SIGKILL of B in ${gap} ms (bound ${FAILOVER_BOUND_MS} ms)`);
  assert.ok(gap <= FAILOVER_BOUND_MS, `failover took ${gap} ms`);
  assertNoDuplicates(view.arrivals, "viewer on C");

  const after = (await clusterOf(c)).broadcasts.find((x) => x.path === "live/cam").routes;
  assert.equal(after.length, 1, JSON.stringify(after));
  assert.equal(after[0].via, d.url);
  // A saw one subscription request for the track: the relays share it, one upstream each.
  assert.deepEqual(pub.requests, ["video"]);
  view.close();
  pub.stop();
  H.closeConnection(pubConn);
  H.closeConnection(viewConn);
  for (const r of [a, c, d]) await H.stopMoqdClean(r);
});

test("ring of five: a broadcast crosses it with a bounded number of announcements", T, async () => {
  // R1..R3 dial the one before; R4 dials R3 and R0, closing the ring (a link carries
  // announcements both ways, whoever dialled it).
  const rs = [await relay("R0")];
  for (let i = 1; i < 4; i++) rs.push(await relay(`R${i}`, ["--cluster-connect", rs[i - 1].url]));
  rs.push(await relay("R4", ["--cluster-connect", rs[3].url, "--cluster-connect", rs[0].url]));
  for (let i = 1; i < 5; i++) await waitLinksUp(rs[i], i === 4 ? 2 : 1);
  const pubConn = await H.connect(rs[0].url);
  const pub = clockPublisher(pubConn, "ring/cam");
  const viewConn = await H.connect(rs[2].url);
  await H.waitActive(viewConn, "ring/cam", { ms: 10_000 });
  const view = recordGroups(viewConn, "ring/cam", "video");
  await H.waitFor(() => view.arrivals.length >= 10, 10_000, "10 groups two hops away");
  assertNoDuplicates(view.arrivals, "viewer on R2");
  // Every relay hears of the broadcast, and the announcements settle, bounded.
  await ringSettles(rs, "ring/cam", { listMs: 5_000, settleMs: 10_000, label: "ring" });
  // The publisher leaves. Every relay forgets the broadcast, and what each hears about it
  // (withdrawals and updates included) settles, bounded. Without the loop guards a relay falls
  // back on a route through itself and re-announces it round the ring, one hop longer each lap
  // (docs/ARCHITECTURE.md, Clustering: why announcements settle).
  await ringForgets(rs, "ring/cam", () => {
    view.close();
    pub.stop();
    H.closeConnection(pubConn);
  }, { forgetMs: 5_000, settleMs: 10_000, label: "ring" });
  H.closeConnection(viewConn);
  for (const r of rs) await H.stopMoqdClean(r);
});

test("a bad cluster token is refused by the peer; a good one links", T, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moqd-cluster-"));
  const { key, good, bad } = await clusterTokens(dir);
  const hub = await relay("hub", ["--auth-key", key]);
  const intruder = await relay("intruder", ["--cluster-connect", hub.url, "--cluster-token", bad]);
  await H.waitFor(async () => (await clusterOf(intruder)).links[0].failures >= 2, 15_000,
    "the intruder's link to fail twice", 100);
  assert.notEqual((await clusterOf(intruder)).links[0].state, "up");
  assert.match(hub.stderrText(), /auth refused connect .*reason=bad_signature/);
  const member = await relay("member", ["--cluster-connect", hub.url, "--cluster-token", good]);
  await waitLinksUp(member, 1);
  // The token's cluster claim makes the link a relay link: the hub sees the member's broadcast
  // with the member's hop id.
  const pubConn = await H.connect(member.url);
  const pub = clockPublisher(pubConn, "m/cam");
  await H.waitFor(async () => (await clusterOf(hub)).broadcasts.some((b) => b.path === "m/cam"),
    10_000, "the hub to learn m/cam", 100);
  const bc = (await clusterOf(hub)).broadcasts.find((b) => b.path === "m/cam");
  assert.deepEqual(bc.routes[0].hops, [(await clusterOf(member)).hop_id]);
  pub.stop();
  H.closeConnection(pubConn);
  for (const r of [hub, intruder, member]) await H.stopMoqdClean(r);
  fs.rmSync(dir, { recursive: true, force: true });
});

test("peers from a file: links follow the file as it changes", T, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moqd-peers-"));
  const file = path.join(dir, "peers");
  fs.writeFileSync(file, "# no peers yet\n");
  const b = await relay("FB");
  const c = await relay("FC");
  const a = await relay("FA", ["--cluster-peers-file", file]);
  const pubConn = await H.connect(b.url);
  const pub = clockPublisher(pubConn, "fb/cam");
  // A peer added to the file is dialled, and what it carries becomes reachable.
  fs.writeFileSync(file, `# B only\n${b.url}?cost=2\n`);
  await waitLinksUp(a, 1);
  await H.waitFor(async () => (await clusterOf(a)).broadcasts.some((x) => x.path === "fb/cam"),
    10_000, "FA to learn fb/cam through FB", 100);
  let links = (await clusterOf(a)).links;
  assert.deepEqual(links.map((l) => [l.url, l.cost]), [[b.url, 2]]);
  // Replaced by C (written to a new file renamed into place, as editors do): B's link goes, with
  // the routes learned through it, and C's comes up.
  fs.writeFileSync(`${file}.new`, `${c.url}\n`);
  fs.renameSync(`${file}.new`, file);
  await H.waitFor(async () => {
    const info = await clusterOf(a);
    return info.links.length === 1 && info.links[0].url === c.url && info.links[0].state === "up" &&
      !info.broadcasts.some((x) => x.path === "fb/cam");
  }, 10_000, "FA's link to move from FB to FC", 100);
  // A line that is not a URL is skipped (and logged); the others stay.
  fs.writeFileSync(file, `${c.url}\nnonsense\n`);
  await H.waitFor(() => /peers file .* skipping 'nonsense'/.test(a.stderrText()), 5_000,
    "the bad line to be logged");
  links = (await clusterOf(a)).links;
  assert.deepEqual(links.map((l) => l.url), [c.url]);
  pub.stop();
  H.closeConnection(pubConn);
  for (const r of [a, b, c]) await H.stopMoqdClean(r);
  fs.rmSync(dir, { recursive: true, force: true });
});

// The frames `moq sub --length-prefixed` wrote, with the time each was first seen.
function lengthPrefixedFrames(buf) {
  const out = [];
  for (let off = 0; off + 4 <= buf.length;) {
    const n = buf.readUInt32BE(off);
    if (off + 4 + n > buf.length) break;
    out.push(buf.subarray(off + 4, off + 4 + n).toString());
    off += 4 + n;
  }
  return out;
}

test("moq sub --fallback keeps receiving when its relay is killed", T, async () => {
  const p = await relay("SP");
  const a = await relay("SA", ["--cluster-connect", p.url]);
  const b = await relay("SB", ["--cluster-connect", p.url]);
  await waitLinksUp(a, 1);
  await waitLinksUp(b, 1);
  const pubConn = await H.connect(p.url);
  const pub = clockPublisher(pubConn, "fo/cam");
  const sub = H.spawnMoq(["sub", a.url, "fo/cam", "--track", "video", "--length-prefixed",
    "--fallback", b.url]);
  await sub.waitStdout((buf) => lengthPrefixedFrames(buf).length >= 10, 15_000, "10 frames through SA");
  const before = lengthPrefixedFrames(sub.stdout()).length;
  const killedAt = Date.now();
  a.proc.kill("SIGKILL");
  await a.exited;
  let resumedAt = 0;
  await sub.waitStdout((buf) => {
    const n = lengthPrefixedFrames(buf).length;
    if (n > before && !resumedAt) resumedAt = Date.now();
    return n >= before + 20;
  }, 15_000, "20 more frames through SB");
  // The first new frame may have been written just before the kill: the bound is on the 20th.
  console.log(`# moq sub failover: frames again ${resumedAt - killedAt} ms after SIGKILL of SA`);
  assert.match(sub.stderrText(), /failing over to /);
  const seqs = lengthPrefixedFrames(sub.stdout()).map((f) => Number(/^group (\d+)$/.exec(f)[1]));
  for (let i = 1; i < seqs.length; i++) {
    assert.ok(seqs[i] > seqs[i - 1], `frame of group ${seqs[i]} written after group ${seqs[i - 1]}`);
  }
  await sub.stop();
  pub.stop();
  H.closeConnection(pubConn);
  for (const r of [p, b]) await H.stopMoqdClean(r);
});

test("moq pub --fallback publishes through the next relay when its relay is killed", T, async () => {
  const a = await relay("QA");
  const b = await relay("QB");
  const pub = H.spawnMoq(["pub", a.url, "pf/cam", "--track", "video", "--length-prefixed",
    "--fallback", b.url]);
  // A frame (its own group) every GROUP_MS from the test, numbered.
  let n = 0;
  const feed = setInterval(() => {
    const body = Buffer.from(`frame ${n++}`);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(body.length);
    pub.write(Buffer.concat([len, body]));
  }, GROUP_MS);
  try {
    const connA = await H.connect(a.url);
    await H.waitActive(connA, "pf/cam", { ms: 10_000 });
    const onA = recordGroups(connA, "pf/cam", "video");
    await H.waitFor(() => onA.arrivals.length >= 5, 10_000, "5 groups through QA");
    const killedAt = Date.now();
    a.proc.kill("SIGKILL");
    await a.exited;
    H.closeConnection(connA);
    const lastOnA = Math.max(...onA.arrivals.map((x) => x.seq));
    // The publisher notices within its 3 s idle timeout and announces on QB.
    const connB = await H.connect(b.url);
    await H.waitActive(connB, "pf/cam", { ms: 15_000 });
    const onB = recordGroups(connB, "pf/cam", "video");
    await H.waitFor(() => onB.arrivals.length >= 10, 10_000, "10 groups through QB");
    console.log(`# moq pub failover: groups on QB ${onB.arrivals[0].at - killedAt} ms after SIGKILL of QA`);
    assert.match(pub.stderrText(), /failing over to /);
    // The sequence continued (the same Track in moq pub's origin), it did not restart at 0.
    const firstOnB = Math.min(...onB.arrivals.map((x) => x.seq));
    assert.ok(firstOnB > lastOnA, `group ${firstOnB} on QB after ${lastOnA} on QA`);
    assertNoDuplicates(onB.arrivals, "viewer on QB");
    onB.close();
    H.closeConnection(connB);
  } finally {
    clearInterval(feed);
  }
  pub.endStdin();
  const r = await pub.wait(15_000);
  assert.deepEqual(r, { code: 0, signal: null }, pub.describe());
  await H.stopMoqdClean(b);
});
