// QUIC connection exhaustion from one source address: moqd with --workers 2 and a small
// --max-connections-per-address; an attacker process (`moq bench worker`, the load generator's
// viewer process) opens many more QUIC connections from 127.0.0.1 than the cap allows. The cap
// counts connections per source address over the whole relay (TCP and QUIC, every worker), so
// the JS bystander's two WebSocket connections from 127.0.0.1 count too. Asserted: the ready QUIC
// sessions never exceed the cap (sampled throughout), moqd logs the refusals, a WebSocket
// session from another address (127.0.0.2) is still upgraded, the bystander loses nothing, and
// once the attacker leaves its places are given back (a new QUIC viewer from 127.0.0.1 is served).
// scripts/test.sh runs this file alone (see interop() there): its sessions must close within the handshake timeout and RSS come back within 16 MB.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  TEST_TIMEOUT_MS,
  certificateSha256,
  closeAllConnections,
  pace,
  spawnMoq,
  startBystander,
  startMoqd,
  stopMoqdClean,
  waitFor,
} from "./harness.mjs";
import { RawTcp, parseHttpResponse, upgradeRequest } from "./raw.mjs";

const PER_ADDRESS = 10;
const BYSTANDER_CONNECTIONS = 2; // its publisher and subscriber, over WebSocket from 127.0.0.1
const ATTACKER_CONNECTIONS = 40;

let moqd;
let bystander;
let attacker;
const others = [];

before(async () => {
  moqd = await startMoqd(["--max-connections-per-address", String(PER_ADDRESS)]);
  bystander = await startBystander(moqd.url);
});

after(async () => {
  for (const t of others) t.destroy();
  await attacker?.stop().catch(() => {});
  bystander?.stop();
  closeAllConnections();
  if (moqd && moqd.proc.exitCode === null && moqd.proc.signalCode === null) await moqd.stop().catch(() => {});
});

// GET /health from another source address (127.0.0.1 is at its cap, so it would get a 503).
async function health(localAddress = "127.0.0.2") {
  const tcp = await RawTcp.connect(moqd.host, moqd.port, 5_000, localAddress);
  try {
    tcp.write(Buffer.from(`GET /health HTTP/1.1\r\nHost: ${moqd.host}\r\nConnection: close\r\n\r\n`));
    const complete = () => {
      const r = parseHttpResponse(tcp.received());
      return r && tcp.received().length - r.headEnd >= Number(r.headers["content-length"] ?? 0) ? r : null;
    };
    await waitFor(() => complete() || tcp.ended, 5_000, "the /health answer");
    const r = complete();
    assert.equal(r?.status, 200, `GET /health: ${tcp.received().toString().slice(0, 80)}`);
    return JSON.parse(tcp.received().subarray(r.headEnd).toString());
  } finally {
    tcp.destroy();
  }
}

test("QUIC connections from one address stop at --max-connections-per-address; another address is served", { timeout: 60_000 }, async () => {
  const fingerprint = await certificateSha256(moqd.url);
  attacker = spawnMoq([
    "bench", "worker", "--role", "viewers", "--url", moqd.url, "--path", "nothing/here",
    "--count", String(ATTACKER_CONNECTIONS), "--transport", "quic", "--fingerprint", fingerprint,
  ]);
  const allowed = PER_ADDRESS - BYSTANDER_CONNECTIONS;
  let most = 0;
  let now = 0;
  // Every attacker connection is either a ready session or refused (some only once their
  // handshake completed); sample the ready ones until the refusals are logged and 3 s passed.
  const started = Date.now();
  await waitFor(
    async () => {
      now = (await health()).sessions_by_transport.quic;
      most = Math.max(most, now);
      assert.ok(most <= allowed, `${most} QUIC sessions from 127.0.0.1 (cap ${PER_ADDRESS}, ${BYSTANDER_CONNECTIONS} taken by the bystander)`);
      return Date.now() - started > 3_000 && /connection refused peer=127\.0\.0\.1:\d+ reason=max-connections-per-address/.test(moqd.stderrText());
    },
    20_000,
    () => `the per-address refusals (QUIC sessions now ${now}, most ${most})\n${moqd.stderrText().slice(-2000)}`,
    100,
  );
  assert.equal(now, allowed, `the attacker holds ${now} QUIC sessions, ${allowed} places were free`);
  // Another source address is not affected by 127.0.0.1's cap.
  const ws = await RawTcp.connect(moqd.host, moqd.port, 5_000, "127.0.0.2");
  others.push(ws);
  ws.write(upgradeRequest({ host: `${moqd.host}:${moqd.port}`, protocols: ["qmux-00.moq-lite-04"] }));
  await waitFor(() => parseHttpResponse(ws.received()) || ws.ended, 5_000, "the upgrade answer");
  assert.equal(parseHttpResponse(ws.received())?.status, 101, "a WebSocket session from 127.0.0.2");
  await bystander.check();
});

test("once the attacker leaves, its places are given back: a new QUIC viewer from the same address is served", { timeout: 60_000 }, async () => {
  attacker.write("stop\n");
  await attacker.wait(15_000, "the attacker to close its connections and exit");
  attacker = undefined;
  let left;
  await waitFor(async () => (left = (await health()).sessions_by_transport).quic === 0, 10_000,
    () => `the attacker's QUIC sessions to close (sessions now ${JSON.stringify(left)})\n${moqd.stderrText().slice(-3000)}`);
  // The attacker's connections leave their sessions at once but hold their places through QUIC's
  // closing period (three PTOs, long on a loaded machine): a viewer refused in that window tries
  // again, and every place must be back within the 10 s bound.
  const viewers = [];
  const deadline = Date.now() + 10_000;
  const served = async () => {
    for (;;) {
      const v = spawnMoq(["sub", moqd.url, "bystander", "--track", "t", "--transport", "quic"]);
      viewers.push(v);
      try {
        await v.waitStdout((out) => out.length > 0, Math.max(1, deadline - Date.now()), "a QUIC viewer's first frame");
        return;
      } catch (e) {
        if (Date.now() >= deadline || !/closed during the handshake/.test(String(e))) throw e;
      }
      await pace(200);
    }
  };
  try {
    await Promise.all(Array.from({ length: PER_ADDRESS - BYSTANDER_CONNECTIONS }, served));
  } finally {
    for (const v of viewers) await v.stop().catch(() => {});
  }
  await pace(100);
  await bystander.check();
});

test("moqd exits 0 on SIGTERM", { timeout: TEST_TIMEOUT_MS }, async () => {
  bystander.stop();
  for (const t of others) t.destroy();
  closeAllConnections();
  await stopMoqdClean(moqd);
});
