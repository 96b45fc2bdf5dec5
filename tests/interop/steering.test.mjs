// One UDP socket per worker, steered by connection ID: 32 QUIC viewers (the moq CLI) on moqd
// with 2 workers, each behind its own userspace NAT that changes the viewer's source port
// mid-session (a NAT rebinding). Every viewer keeps receiving, and no datagram had to be
// forwarded between workers (/stats quic_forwarded): the kernel's reuseport program delivered
// each to the worker that owns its connection. Without the program (--quic-steering false, the
// second test) the same rebinding lands datagrams on the wrong worker, which forwards and counts
// them: the counter this file's first test asserts on can move.
import assert from "node:assert/strict";
import dgram from "node:dgram";
import { test } from "node:test";
import * as H from "./harness.mjs";

const T = { timeout: 120_000 };
const VIEWERS = 32;

// A NAT for one client: the client talks to `front`; we talk to moqd from `upstream`, which
// rebind() replaces with a socket on a new port.
async function startNat(relayPort) {
  const bind = (s) => new Promise((resolve) => s.bind(0, "127.0.0.1", resolve));
  const front = dgram.createSocket("udp4");
  await bind(front);
  let client;
  let upstream;
  const openUpstream = async () => {
    const u = dgram.createSocket("udp4");
    await bind(u);
    u.on("message", (msg) => client && front.send(msg, client.port, client.address));
    return u;
  };
  upstream = await openUpstream();
  front.on("message", (msg, rinfo) => {
    client = rinfo;
    upstream.send(msg, relayPort, "127.0.0.1");
  });
  return {
    port: front.address().port,
    upstreamPort: () => upstream.address().port,
    rebind: async () => {
      const old = upstream;
      upstream = await openUpstream();
      setTimeout(() => old.close(), 2000);  // late answers to the old port still get through
    },
    close: () => { front.close(); try { upstream.close(); } catch {} },
  };
}

async function rebindingRun(moqdArgs) {
  const moqd = await H.startMoqd(moqdArgs);  // --workers 2
  const relayPort = Number(new URL(moqd.url).port);
  const hash = await H.certificateSha256(moqd.url);
  const p = H.uniquePrefix("steer") + "/live";
  const pub = H.spawnMoq(["pub", moqd.url, p, "--track", "t"]);
  let n = 0;
  const ticker = setInterval(() => pub.write(`frame ${n++}\n`), 40);
  const nats = [];
  const subs = [];
  try {
    for (let i = 0; i < VIEWERS; i++) {
      const nat = await startNat(relayPort);
      nats.push(nat);
      subs.push(H.spawnMoq(["sub", `http://127.0.0.1:${nat.port}/`, p, "--track", "t", "--transport", "quic",
        "--tls-fingerprint", hash]));
    }
    const lines = (s) => s.stdoutText().split("\n").filter((l) => l.startsWith("frame")).length;
    await H.waitFor(() => subs.every((s) => lines(s) >= 5), 30_000, "every viewer receiving", 50);
    const before = subs.map(lines);
    const oldPorts = nats.map((x) => x.upstreamPort());
    for (const nat of nats) await nat.rebind();
    assert.ok(nats.every((x, i) => x.upstreamPort() !== oldPorts[i]), "every viewer has a new source port");
    await H.waitFor(() => subs.every((s, i) => lines(s) >= before[i] + 25), 30_000,
      "every viewer receiving after its source port changed", 50);
    const stats = await (await H.httpGet(`${moqd.url}stats`)).json();
    const perWorker = stats.per_worker.map((w) => w.datagrams_in);
    return { forwarded: stats.total.quic_forwarded, perWorker };
  } finally {
    clearInterval(ticker);
    for (const s of subs) await s.stop().catch(() => {});
    pub.endStdin();
    await pub.stop().catch(() => {});
    for (const nat of nats) nat.close();
    await H.stopMoqdClean(moqd);
  }
}

test("32 QUIC viewers change source port mid-session, keep receiving, and nothing is forwarded", T, async () => {
  const r = await rebindingRun([]);
  assert.equal(r.forwarded, 0, "datagrams forwarded between workers");
  assert.ok(r.perWorker.every((n) => n > 0), `both workers carried viewers: ${r.perWorker}`);
});

test("without the steering program the same rebinding is forwarded between workers (and counted)", T, async () => {
  const r = await rebindingRun(["--quic-steering", "false"]);
  assert.ok(r.forwarded > 0, `forwarded: ${r.forwarded}`);
});
