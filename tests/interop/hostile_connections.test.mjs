// Connection exhaustion: moqd under `prlimit --nofile=1024:4096` with --workers 2. An attacker
// opens silent WebSocket sessions (lite-04, so each is a ready session that never says anything)
// until moqd refuses it, first from one source address (--max-connections-per-address), then
// from two more until --max-connections is reached. Meanwhile /health answers, a new viewer from
// another address is served while only the per-address cap holds, the silent sessions are
// closed by --idle-timeout, after which a new viewer is served again, and a bystander
// publisher/subscriber pair loses no frame and sees no gap over a stated bound.
// scripts/test.sh runs this file alone (see interop() there): moqd runs under prlimit and its RSS is bounded.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  MOQD_SANITIZED,
  TEST_TIMEOUT_MS,
  closeAllConnections,
  collectTrack,
  connect,
  httpGet,
  startBystanderThread,
  startMoqd,
  stopMoqdClean,
  waitFor,
} from "./harness.mjs";
import { RawTcp, parseHttpResponse, upgradeRequest, waitLog } from "./raw.mjs";

const PER_ADDRESS = 120;
const MAX_CONNECTIONS = 200;
const IDLE_TIMEOUT_S = 4;
// The bystander sends a frame every 20 ms; the longest time between two frames it receives must
// stay under this while the attack goes on.
const MAX_GAP_MS = 500;

let moqd;
let bystander;
const attackers = [];

before(async () => {
  moqd = await startMoqd(
    [
      "--max-connections", String(MAX_CONNECTIONS),
      "--max-connections-per-address", String(PER_ADDRESS),
      "--idle-timeout", `${IDLE_TIMEOUT_S}s`,
    ],
    { wrap: ["prlimit", "--nofile=1024:4096"] },
  );
  // On a thread of its own: opening a thousand sockets on this one delays its timers.
  bystander = await startBystanderThread(moqd.url);
  await bystander.watchGaps();
});

after(async () => {
  for (const a of attackers) a.destroy();
  await bystander?.stop();
  closeAllConnections();
  if (moqd && moqd.proc.exitCode === null && moqd.proc.signalCode === null) await moqd.stop().catch(() => {});
});

// One silent session from `localAddress`: the TCP connection and how the upgrade went:
// "open" (101), "refused" (any other status, or closed without one).
async function silentSession(localAddress) {
  const tcp = await RawTcp.connect(moqd.host, moqd.port, 5_000, localAddress);
  tcp.write(upgradeRequest({ host: `${moqd.host}:${moqd.port}`, protocols: ["qmux-00.moq-lite-04"] }));
  await waitFor(() => parseHttpResponse(tcp.received()) || tcp.ended, 5_000, "the upgrade answer");
  const resp = parseHttpResponse(tcp.received());
  const outcome = resp?.status === 101 ? "open" : "refused";
  if (outcome === "open") attackers.push(tcp);
  else tcp.destroy();
  return { outcome, status: resp?.status };
}

// Opens silent sessions from `localAddress` until one is refused (at most `limit` tries).
async function openUntilRefused(localAddress, limit) {
  let opened = 0;
  for (let i = 0; i < limit; i++) {
    const r = await silentSession(localAddress);
    if (r.outcome === "refused") return { opened, refusedWith: r.status };
    opened++;
  }
  return { opened, refusedWith: undefined };
}

async function health() {
  const res = await httpGet(new URL("/health", moqd.url));
  assert.equal(res.status, 200, `GET /health answered ${res.status}`);
  return res.json();
}

test("the soft open-file limit is raised to the hard one at start", { timeout: TEST_TIMEOUT_MS }, async () => {
  await waitLog(moqd, /open-file limit 4096 \(soft was 1024, hard 4096\)/);
});

test("one address is refused at --max-connections-per-address; /health and a viewer from elsewhere are served", { timeout: 60_000 }, async () => {
  const r = await openUntilRefused("127.0.0.2", PER_ADDRESS + 20);
  assert.equal(r.opened, PER_ADDRESS, `opened ${r.opened} sessions from one address`);
  await waitLog(moqd, /connection refused peer=127\.0\.0\.2:\d+ reason=max-connections-per-address limit/);
  const h = await health();
  assert.ok(h.sessions >= PER_ADDRESS, `health sessions ${h.sessions}`);
  const viewer = await connect(moqd.url);
  const groups = await collectTrack(viewer, "bystander", "t", { frames: 5 });
  assert.ok(groups.length > 0);
});

test("past --max-connections the attacker is refused, /health still answers, and idle sessions are closed", { timeout: 60_000 }, async () => {
  // From further addresses until the total cap answers 503 (sessions from 127.0.0.2 may be gone
  // to the idle timeout by now, so how many addresses it takes varies).
  let refused;
  for (let host = 3; host < 10 && refused === undefined; host++) {
    const r = await openUntilRefused(`127.0.0.${host}`, PER_ADDRESS);
    if (r.refusedWith === 503 && r.opened < PER_ADDRESS) refused = host;
  }
  assert.ok(refused !== undefined, "the total cap never refused");
  const open = attackers.filter((t) => !t.ended && !t.finReceived).length;
  assert.ok(open <= MAX_CONNECTIONS, `${open} silent sessions over --max-connections`);
  await waitLog(moqd, new RegExp(`connection refused peer=127\\.0\\.0\\.${refused}:\\d+ reason=max-connections limit`));
  // Plain HTTP is still answered from the reserve.
  const h = await health();
  assert.ok(h.sessions >= MAX_CONNECTIONS - 10, `health sessions ${h.sessions} at the cap ${MAX_CONNECTIONS}`);
  // --idle-timeout closes every silent session, with its reason in the log.
  await waitLog(moqd, /session \d+ closing peer=127\.0\.0\.[234]:\d+ .*code=3 \(timeout\) detail=idle/, 10_000);
  await waitFor(() => attackers.every((t) => t.ended || t.finReceived), 15_000, "moqd to close the silent sessions");
  const after = await health();
  assert.ok(after.sessions < 10, `health sessions ${after.sessions} after the idle timeout`);
  const viewer = await connect(moqd.url);
  const groups = await collectTrack(viewer, "bystander", "t", { frames: 5 });
  assert.ok(groups.length > 0);
});

test("the bystander lost no frame and its largest gap stayed under the bound", { timeout: TEST_TIMEOUT_MS }, async () => {
  const frames = await bystander.check();
  assert.ok(frames > 50, `bystander received ${frames} frames`);
  const gap = await bystander.gaps();
  // Not under a sanitizer: see MOQD_SANITIZED.
  if (!MOQD_SANITIZED) assert.ok(gap.max < MAX_GAP_MS, `bystander gap ${gap.max} ms ending at ${gap.at} (bound ${MAX_GAP_MS} ms)`);
});

test("moqd exits 0 on SIGTERM", { timeout: TEST_TIMEOUT_MS }, async () => {
  await bystander.stop();
  closeAllConnections();
  await stopMoqdClean(moqd);
});
