// Peers from a DNS name (--cluster-dns URL): every A/AAAA address the name resolves to is a peer,
// looked up again when the answer's TTL runs out. A test nameserver on 127.0.0.1 (dns_server.mjs,
// TTL 1 s) answers for peers.moqd.test from an address set the test changes while the relay runs.
//
// Every member of a DNS-discovered cluster listens on the same port at its own address, so the
// relays here listen on loopback addresses of their own (127.0.0.2-5 and ::1, all on `lo`) at one
// port picked free on all of them; the harness's 127.0.0.1:0 listener stays as the URL tests use.
// scripts/test.sh runs this file alone (see interop() there): its relays listen on 127.0.0.2-5 at one common port, and it counts lookups in a 3 s window.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import dgram from "node:dgram";
import net from "node:net";
import { after, test } from "node:test";
import * as H from "./harness.mjs";
import { clusterOf, startClusterRelay } from "./cluster_harness.mjs";
import { startDnsServer } from "./dns_server.mjs";

H.useTeardownGuards();

const T = { timeout: 90_000 };
const NAME = "peers.moqd.test";
const HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "::1"];

// Whether ::1 can be bound here (a container may run without IPv6): without it the AAAA answer
// is not exercised end to end (runtime_tests DnsAnswer.* still parse AAAA records).
async function hasIpv6Loopback() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(0, "::1", () => s.close(() => resolve(true)));
  });
}

const started = [];
let dns;
after(async () => {
  H.closeAllConnections();
  for (const r of started) {
    if (r.proc.exitCode === null && r.proc.signalCode === null) await r.stop().catch(() => {});
  }
  if (dns) await dns.close();
});

const relay = (name, args) => startClusterRelay(started, name, args);

async function freeOn(host, port) {
  const tcp = await new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
  if (!tcp) return false;
  return new Promise((resolve) => {
    const u = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
    u.once("error", () => resolve(false));
    u.bind(port, host, () => u.close(() => resolve(true)));
  });
}

// A port free on TCP and UDP at every one of HOSTS (a kernel-chosen one, tried a few times).
async function commonPort(hosts) {
  for (let i = 0; i < 20; i++) {
    const port = await new Promise((resolve) => {
      const s = net.createServer();
      s.listen(0, hosts[0], () => { const p = s.address().port; s.close(() => resolve(p)); });
    });
    let ok = true;
    for (const h of hosts) ok = ok && await freeOn(h, port);
    if (ok) return port;
  }
  throw new Error("no port free on every test address");
}

const urlAt = (host, port) => `http://${host.includes(":") ? `[${host}]` : host}:${port}/`;

async function linkStates(r) {
  return Object.fromEntries((await clusterOf(r)).links.map((l) => [l.url, l.state]));
}

test("peers from a DNS name follow its answers as they change, on the TTL", T, async () => {
  dns = await startDnsServer({ ttl: 1 });
  const v6 = await hasIpv6Loopback();
  if (!v6) console.log("# no ::1 here: the AAAA answer is not exercised end to end");
  const port = await commonPort(v6 ? HOSTS : HOSTS.slice(0, 4));
  const [hb, hc, hd, ha, h6] = HOSTS;
  const b = await relay("DB", ["--listen", `${hb}:${port}`]);
  const c = await relay("DC", ["--listen", `${hc}:${port}`]);
  const d = await relay("DD", ["--listen", `${hd}:${port}`]);
  const e = v6 ? await relay("DE", ["--listen", `[${h6}]:${port}`]) : null;
  // The watcher's own address is in the answer too (as a StatefulSet's pods all share one name).
  dns.zone.set(NAME, [hb, hc, ha]);
  const a = await relay("DA", ["--listen", `${ha}:${port}`,
    "--cluster-dns", `http://${NAME}:${port}/?cost=2`, "--cluster-dns-server", dns.address]);

  // B and C are linked, at the URL's cost; A's own address is left out.
  await H.waitFor(async () => {
    const s = await linkStates(a);
    return Object.keys(s).length === 2 && s[urlAt(hb, port)] === "up" && s[urlAt(hc, port)] === "up";
  }, 15_000, "DA linked to DB and DC", 100);
  const links = (await clusterOf(a)).links;
  assert.deepEqual(links.map((l) => l.cost), [2, 2]);
  assert.ok(!links.some((l) => l.url === urlAt(ha, port)), "DA linked to itself");

  // What a DNS peer carries becomes reachable.
  const pubConn = await H.connect(d.url);
  const pubD = new H.Moq.Broadcast();
  pubConn.publish("dd/cam", pubD);

  // The set changes (B gone; D and E, over IPv6, come): A follows within a few TTLs.
  const changedAt = Date.now();
  const next = v6 ? [hc, hd, h6] : [hc, hd];
  dns.zone.set(NAME, next);
  await H.waitFor(async () => {
    const s = await linkStates(a);
    return Object.keys(s).length === next.length && next.every((h) => s[urlAt(h, port)] === "up");
  }, 15_000, "DA's links to follow the new answer", 100);
  console.log(`# dns: new address set linked ${Date.now() - changedAt} ms after the change (TTL 1 s)`);
  await H.waitFor(async () => (await clusterOf(a)).broadcasts.some((x) => x.path === "dd/cam"),
    10_000, "DA to learn dd/cam through DD", 100);

  // Asked again on the TTL: about once a second per type, not once and not in a loop.
  const t0 = Date.now();
  const n0 = dns.queries.length;
  await H.pace(3_000);  // not a synchronisation: the window whose queries are counted
  const perType = (dns.queries.length - n0) / 2;
  const secs = (Date.now() - t0) / 1000;
  console.log(`# dns: ${dns.queries.length - n0} queries in ${secs.toFixed(1)} s at TTL 1 s`);
  assert.ok(perType >= 1 && perType <= secs + 1, `${perType} lookups in ${secs} s`);
  assert.ok(dns.queries.every((q) => q.name === NAME && (q.type === 1 || q.type === 28)));

  // A resolver that stops answering keeps the peers it gave last (and says so).
  dns.silent = true;
  await H.waitFor(() => /cluster: dns peers\.moqd\.test: lookup failed/.test(a.stderrText()),
    15_000, "the failed lookup to be logged");
  assert.equal(Object.keys(await linkStates(a)).length, next.length);
  // An answer that the name has no address removes them all.
  dns.silent = false;
  dns.zone.set(NAME, []);
  await H.waitFor(async () => (await clusterOf(a)).links.length === 0, 15_000,
    "DA's links to go with an empty answer", 100);

  pubD.close();
  H.closeConnection(pubConn);
  for (const r of [a, b, c, d, e]) if (r) await H.stopMoqdClean(r);
});

test("--cluster-dns refuses a URL without a name and a resolver that is not IPv4:PORT", T, () => {
  for (const [flag, value] of [["--cluster-dns", "http://:4443/"], ["--cluster-dns-server", "[::1]:53"],
    ["--cluster-dns", "http://x:1/?cost=nope"], ["--cluster-dns-server", "127.0.0.1"]]) {
    const r = spawnSync(H.MOQD_BIN, ["--listen", "127.0.0.1:0", flag, value], { timeout: 10_000 });
    assert.notEqual(r.status, 0, `${flag} ${value} accepted`);
    assert.match(r.stderr.toString(), new RegExp(`invalid value for ${flag}: `), `${flag} ${value}`);
  }
});
