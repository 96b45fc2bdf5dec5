// The MoQ Cluster extension (draft-lcurley-moq-cluster) on IETF drafts 17, 18, 20 through moqd
// running as a cluster node (--cluster-node): moqd's SETUP carries RELAY_HOPS with its hop id (the
// one /cluster shows and its moq-lite announcements carry), and @moq/net 0.3.4 (which always
// declares RELAY_HOPS on 17+, so the extension is negotiated) accepts moqd's extended NAMESPACE
// (it closes the session over one without HOP_PATH). Raw sessions check the bytes: HOP_PATH =
// the route's hops then moqd's id, ROUTE_COST = the upstream hop count; a received HOP_PATH becomes
// the route's hop list in /cluster; one holding moqd's id is refused as a loop; a path through the
// peer's declared origin is not advertised to it; a malformed or missing HOP_PATH closes the
// session with PROTOCOL_VIOLATION (0x3). Draft 19 is not offered over WebSocket by @moq/net 0.3.4.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { clusterOf, startClusterRelay } from "./cluster_harness.mjs";
import { GROUPS, closeNetConnections, count, flat, netConnect, netPublish, netSubscribe, netWaitActive } from "./net_client.mjs";
import { lo, loTuple, msg17, messages, rawSession as rawSession17, readLo } from "./raw_ietf.mjs";

const { started, moqd } = H.moqdsOfFile(() => {
  closeNetConnections();
  H.closeAllConnections();
});

const DRAFTS = ["moq-transport-17", "moq-transport-18", "moq-transport-20"];
// The origin R that raw_ietf.mjs's CLIENT_SETUP (@moq/net 0.3.4's) declares in RELAY_HOPS.
const R = 0x0a5a2adb5a87d4;
// The same as raw_ietf.mjs's CLIENT_SETUP with RELAY_COST 3 (0x40b56, type delta 1) after
// RELAY_HOPS: SOLICIT's delta becomes 4.
const CLIENT_SETUP_COST3 = Buffer.from("af00001d070b6d6f712d6c6974652d6a73c40b4e08fe0a5a2adb5a87d401030401", "hex");
const HOP_PATH = 0x40b57;
const ROUTE_COST = 0x40b58;

const d17 = (version) => version === "moq-transport-17";
// Message parameters (17+): count, then delta-coded types; HOP_PATH a length-prefixed value, ROUTE_COST a varint.
function clusterParams({ hops, cost }) {
  const parts = [lo(cost === undefined ? 1 : 2)];
  if (hops !== undefined) {
    const value = Buffer.concat(hops.map(lo));
    parts.push(lo(HOP_PATH), lo(value.length), value);
  }
  if (cost !== undefined) parts.push(lo(hops === undefined ? ROUTE_COST : ROUTE_COST - HOP_PATH), lo(cost));
  return Buffer.concat(parts);
}
const publishNamespace = (version, id, path, params) =>
  msg17(0x06, lo(id), d17(version) ? lo(0) : Buffer.alloc(0), loTuple(...path.split("/")), params);
// SUBSCRIBE_NAMESPACE for NAMESPACE messages: d17 0x11 with Subscribe Options 1; d18+ 0x50.
const subscribeNamespace = (version, id, prefix) =>
  d17(version)
    ? msg17(0x11, lo(id), lo(0), loTuple(...prefix.split("/")), lo(1), lo(0))
    : msg17(0x50, lo(id), loTuple(...prefix.split("/")), lo(0));
// A NAMESPACE body: the suffix, then (extended form) the parameters.
function parseNamespace(body) {
  let pos = 0;
  const n = readLo(body, pos);
  pos = n.next;
  const suffix = [];
  for (let i = 0; i < n.value; i++) {
    const l = readLo(body, pos);
    suffix.push(body.subarray(l.next, l.next + l.value).toString());
    pos = l.next + l.value;
  }
  const out = { suffix: suffix.join("/"), extended: pos < body.length, hops: undefined, cost: undefined, params: 0 };
  if (!out.extended) return out;
  const c = readLo(body, pos);
  pos = c.next;
  out.params = c.value;
  let type = 0;
  for (let i = 0; i < c.value; i++) {
    const t = readLo(body, pos);
    type += t.value;
    pos = t.next;
    if (type === HOP_PATH) {
      const l = readLo(body, pos);
      const end = l.next + l.value;
      out.hops = [];
      for (let p = l.next; p < end; ) {
        const h = readLo(body, p);
        out.hops.push(h.value);
        p = h.next;
      }
      pos = end;
    } else if (type === ROUTE_COST) {
      const v = readLo(body, pos);
      out.cost = v.value;
      pos = v.next;
    } else throw new Error(`unexpected NAMESPACE parameter 0x${type.toString(16)}`);
  }
  return out;
}

// A raw session declaring origin R (and, with `clientSetup`, a RELAY_COST); `setup` is moqd's
// SETUP (hex) once complete.
async function rawSession(m, version, clientSetup) {
  const { mux, serverSetup } = await rawSession17(m, version, { expectSetup: null, clientSetup });
  return { mux, setup: serverSetup };
}

// The route of `path` that /cluster lists (its first, the one in use), or undefined.
async function routeOf(m, path) {
  const b = (await clusterOf(m)).broadcasts.find((x) => x.path === path);
  return b?.routes[0];
}

for (const version of DRAFTS) {
  test(`${version} cluster: moqd declares RELAY_HOPS; NAMESPACE carries HOP_PATH with moqd's hop id; a received HOP_PATH is the route's hop list; a loop is refused`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await startClusterRelay(started, `ietf-cluster-${version}`, ["--versions", `moq-lite-02,${version}`]);
    const self = (await clusterOf(m)).hop_id;
    assert.ok(self > 0);
    const prefix = H.uniquePrefix("ietfcluster");

    // moqd's SETUP: exactly RELAY_HOPS (0x40b55, odd: length + the LO varint of its hop id).
    const a = await rawSession(m, version);
    const relayHops = lo(self);
    assert.equal(a.setup, Buffer.concat([Buffer.from("af00", "hex"), Buffer.from([0, 3 + 1 + relayHops.length]), Buffer.from("c40b55", "hex"), lo(relayHops.length), relayHops]).toString("hex"));

    // Raw session A (declared R) listens to the prefix.
    const sn = a.mux.open();
    a.mux.write(sn, subscribeNamespace(version, 0, prefix));
    const nsOf = () => messages(a.mux.stream(sn).data()).filter((x) => x.type === 0x08).map((x) => parseNamespace(x.body));

    // A moq-lite publisher (a local route: no hops): A hears HOP_PATH [self], no ROUTE_COST.
    const lite = await H.connect(m.url);
    const holder = {};
    H.publishBroadcast(lite, `${prefix}/cam`, { video: GROUPS }, {
      before: (i) => (i === 0 ? Promise.resolve() : H.waitFor(() => holder.s.state.n >= count(GROUPS.slice(0, i)), 10_000, `group ${i - 1}`)),
    });
    const cam = await a.mux.waitUntil(() => nsOf().find((x) => x.suffix === "cam"), 5_000, "NAMESPACE cam");
    assert.deepEqual(cam, { suffix: "cam", extended: true, hops: [self], cost: undefined, params: 1 });

    // @moq/net negotiates (it would close the session over a NAMESPACE without HOP_PATH), sees
    // the broadcast and pulls it byte for byte.
    const net = await netConnect(m.url);
    assert.equal(net.version, version);
    await netWaitActive(net, `${prefix}/cam`);
    holder.s = netSubscribe(net, `${prefix}/cam`, "video");
    await H.waitFor(() => holder.s.state.n >= count(GROUPS), 10_000, `${count(GROUPS)} frames`);
    assert.deepEqual(holder.s.ordered().flat(), flat(GROUPS));

    // Raw session B publishes with HOP_PATH: holding moqd's own id (a loop: REQUEST_ERROR 0x05,
    // nothing published), through R (published, but never advertised to A, which declared R), and
    // a plain relayed path [777, 888] with ROUTE_COST 5 (REQUEST_OK; the route's hop list).
    const b = await rawSession(m, version);
    const looped = b.mux.open();
    b.mux.write(looped, publishNamespace(version, 0, `${prefix}/looped`, clusterParams({ hops: [777, self] })));
    await b.mux.waitStream(looped, (x) => x.data().length > 0, 5_000, "answer to the looped PUBLISH_NAMESPACE");
    assert.equal(b.mux.stream(looped).data()[0], 0x05);
    const viaR = b.mux.open();
    b.mux.write(viaR, publishNamespace(version, 2, `${prefix}/via-r`, clusterParams({ hops: [R, 999] })));
    await b.mux.waitStream(viaR, (x) => x.data().length > 0 && x.data()[0] === 0x07, 5_000, "REQUEST_OK via-r");
    const relayed = b.mux.open();
    b.mux.write(relayed, publishNamespace(version, 4, `${prefix}/relayed`, clusterParams({ hops: [777, 888], cost: 5 })));
    await b.mux.waitStream(relayed, (x) => x.data().length > 0 && x.data()[0] === 0x07, 5_000, "REQUEST_OK relayed");

    const watcher = H.watchAnnounced(lite, prefix);
    await watcher.waitFor(`${prefix}/relayed`, true);
    await watcher.waitFor(`${prefix}/via-r`, true);
    await H.waitFor(async () => (await routeOf(m, `${prefix}/relayed`)) !== undefined, 5_000, "/cluster lists relayed");
    assert.deepEqual((await routeOf(m, `${prefix}/relayed`)).hops, [777, 888]);
    assert.deepEqual((await routeOf(m, `${prefix}/via-r`)).hops, [R, 999]);
    assert.equal(await routeOf(m, `${prefix}/looped`), undefined);
    assert.ok(!watcher.entries.some((e) => e.path === `${prefix}/looped`));

    // A hears relayed as [777, 888, self] with ROUTE_COST 2 (its upstream hops), and not via-r.
    const rel = await a.mux.waitUntil(() => nsOf().find((x) => x.suffix === "relayed"), 5_000, "NAMESPACE relayed");
    assert.deepEqual(rel, { suffix: "relayed", extended: true, hops: [777, 888, self], cost: 2, params: 2 });
    assert.deepEqual(nsOf().map((x) => x.suffix).sort(), ["cam", "relayed"]);
    // @moq/net (another origin) does hear via-r.
    await netWaitActive(net, `${prefix}/via-r`);

    // @moq/net publishing: its PUBLISH_NAMESPACE carries HOP_PATH [its origin], which becomes
    // the route's hop list; a moq-lite subscriber pulls it.
    const pub = await netConnect(m.url);
    const jsHolder = {};
    netPublish(pub, `${prefix}/js`, GROUPS, {
      before: (i) => H.waitFor(() => jsHolder.s.frameCount() >= count(GROUPS.slice(0, i)), 10_000, `group ${i - 1}`),
    });
    await watcher.waitFor(`${prefix}/js`, true);
    await H.waitFor(async () => (await routeOf(m, `${prefix}/js`)) !== undefined, 5_000, "/cluster lists js");
    const jsHops = (await routeOf(m, `${prefix}/js`)).hops;
    assert.equal(jsHops.length, 1);
    assert.ok(jsHops[0] !== 0 && jsHops[0] !== self);
    jsHolder.s = H.subscribeTrack(lite, `${prefix}/js`, "video");
    await H.waitFor(() => jsHolder.s.frameCount() >= count(GROUPS), 10_000, `${count(GROUPS)} frames from @moq/net`);
    assert.deepEqual(jsHolder.s.groups.flatMap((g) => g.frames), flat(GROUPS));
    // A hears it with its origin first and moqd last.
    const js = await a.mux.waitUntil(() => nsOf().find((x) => x.suffix === "js"), 5_000, "NAMESPACE js");
    assert.deepEqual(js.hops, [jsHops[0], self]);
    assert.equal(js.cost, 1);

    // A route's cost is its ROUTE_COST plus the sender's RELAY_COST: B's relayed (ROUTE_COST 5,
    // no RELAY_COST) costs 5; C (RELAY_COST 3) announcing it over as many hops, ROUTE_COST 0,
    // costs 3 and is used instead (without costs, B's smaller hop list would win the tie).
    assert.equal((await routeOf(m, `${prefix}/relayed`)).cost, 5);
    const c = await rawSession(m, version, CLIENT_SETUP_COST3);
    const cheaper = c.mux.open();
    c.mux.write(cheaper, publishNamespace(version, 0, `${prefix}/relayed`, clusterParams({ hops: [777, 889] })));
    await c.mux.waitStream(cheaper, (x) => x.data().length > 0 && x.data()[0] === 0x07, 5_000, "REQUEST_OK cheaper relayed");
    await H.waitFor(async () => (await routeOf(m, `${prefix}/relayed`))?.cost === 3, 5_000, "/cluster uses the cheaper route");
    assert.deepEqual((await routeOf(m, `${prefix}/relayed`)).hops, [777, 889]);
    watcher.close();
    H.closeConnection(lite);
  });

  test(`${version} cluster: a PUBLISH_NAMESPACE with a missing, empty, repeating or 33-hop HOP_PATH closes the session with PROTOCOL_VIOLATION`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await startClusterRelay(started, `ietf-cluster-bad-${version}`, ["--versions", version]);
    const cases = {
      missing: clusterParams({ cost: 1 }),
      empty: clusterParams({ hops: [] }),
      repeating: clusterParams({ hops: [5, 6, 5] }),
      "33 hops": clusterParams({ hops: Array.from({ length: 33 }, (_, i) => i + 1) }),
    };
    for (const [what, params] of Object.entries(cases)) {
      const { mux } = await rawSession(m, version);
      mux.write(mux.open(), publishNamespace(version, 0, `room/${what.replace(/ /g, "")}`, params));
      assert.equal((await mux.waitAppClose(5_000, `close over a ${what} HOP_PATH`)).code, 0x3, what);
    }
    // 32 hops, zeros repeated, are fine.
    const { mux } = await rawSession(m, version);
    const ok = mux.open();
    mux.write(ok, publishNamespace(version, 0, "room/ok", clusterParams({ hops: [0, 0, ...Array.from({ length: 30 }, (_, i) => i + 1)] })));
    await mux.waitStream(ok, (x) => x.data().length > 0 && x.data()[0] === 0x07, 5_000, "REQUEST_OK for 32 hops");
  });
}

test("moqd that is not a cluster node declares nothing: @moq/net reads base NAMESPACE messages", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd(["--versions", "moq-lite-02,moq-transport-18"]);
  const a = await rawSession(m, "moq-transport-18");
  assert.equal(a.setup, "af000000");
  const prefix = H.uniquePrefix("ietfcluster-off");
  const sn = a.mux.open();
  a.mux.write(sn, subscribeNamespace("moq-transport-18", 0, prefix));
  const lite = await H.connect(m.url);
  H.publishBroadcast(lite, `${prefix}/cam`, { video: GROUPS });
  const cam = await a.mux.waitUntil(() => messages(a.mux.stream(sn).data()).filter((x) => x.type === 0x08).map((x) => parseNamespace(x.body))[0], 5_000, "NAMESPACE");
  assert.deepEqual(cam, { suffix: "cam", extended: false, hops: undefined, cost: undefined, params: 0 });
  const net = await netConnect(m.url);
  await netWaitActive(net, `${prefix}/cam`);
  H.closeConnection(lite);
});
