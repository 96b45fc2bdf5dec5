// Checks the harness without a relay: `node selfcheck.mjs`. Not part of the suite.
// - publisher/subscriber/announce helpers against @moq/lite's own in-process server half
//   (mock transport, lite-02), so the client code paths the tests use are exercised;
// - startMoqd/stop/runMoq/spawnMoq against a fake moqd written to a temp dir;
// - forceFraming against a plain `ws` server.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { WebSocketServer } from "ws";
import * as H from "./harness.mjs";
import { createMockTransportPair } from "./node_modules/@moq/lite/mock.js";

async function mockPair() {
  const pair = createMockTransportPair("");
  const url = new URL("https://localhost/selfcheck");
  const [client, server] = await Promise.all([
    H.Moq.Connection.connect(url, { transport: pair.client }),
    H.Moq.Connection.accept(pair.server, url, { version: 0xff0dad02 }),
  ]);
  return { client, server };
}

async function checkClientHelpers() {
  const { client, server } = await mockPair();
  const prefix = H.uniquePrefix("self");
  const p = `${prefix}/bob`;
  // No empty frame here: the mock transport passes a 0-byte write through as an empty chunk,
  // which the reader rejects; @moq/qmux never sends one (empty writes produce no STREAM frame).
  const groups = [[H.text("a"), H.text("b"), H.text("c")], [H.randomFrame(100_000)], []];
  const hold = H.gate();
  const pub = H.publishBroadcast(client, p, { video: groups }, { afterLast: () => hold.wait });

  const watcher = H.watchAnnounced(server, prefix);
  await watcher.waitFor(p, true, 5_000);
  const sub = H.subscribeTrack(server, p, "video", { priority: 3 });
  await sub.waitFrames(4, 5_000);
  await pub.waitRequest("video", 1_000);
  assert.equal(pub.requests[0].priority, 3);
  hold.open();
  await sub.waitEnd(5_000);
  // An empty group is a legal group; the mock carries it.
  H.assertGroups(sub.received(), groups);

  // Unknown track: subscription ends with an error.
  const bad = H.subscribeTrack(server, p, "nope");
  await bad.waitEnd(5_000);
  assert.ok(bad.state.error, "unknown track must error");

  // collectTrack (brief's one-shot form).
  const p2 = `${prefix}/carol`;
  const g2 = [[H.text("x")], [H.text("y"), H.text("z")]];
  H.publishBroadcast(client, p2, { t: g2 }, { keepTrack: true });
  const got = await H.collectTrack(server, p2, "t", { frames: 3, ms: 5_000 });
  H.assertGroups(got, g2);

  // Ended announcement when the broadcast closes.
  pub.close();
  await watcher.waitFor(p, false, 5_000);
  watcher.close();

  // Negative: a wrong byte must fail assertGroups.
  assert.throws(() => H.assertGroups(got, [[H.text("x")], [H.text("y"), H.text("Z")]]));
  // Negative: waitFrames times out.
  const idle = H.subscribeTrack(server, p2, "t2-never");
  await assert.rejects(idle.waitFrames(1, 200));

  client.close();
  server.close();
  console.log("ok client helpers (mock transport, lite-02)");
}

function writeFakeBinaries() {
  const dir = mkdtempSync(path.join(tmpdir(), "interop-selfcheck-"));
  const moqd = path.join(dir, "moqd");
  writeFileSync(
    moqd,
    `#!/usr/bin/env node
const http = require("node:http");
const args = process.argv.slice(2);
if (args.includes("--die")) { console.error("dying"); process.exit(3); }
const server = http.createServer((req, res) => {
  res.setHeader("Access-Control-Allow-Origin", "*");
  res.setHeader("Content-Type", "application/json");
  res.end(JSON.stringify({ status: "ok", version: "fake", workers: Number(args[args.indexOf("--workers") + 1]), sessions: 0 }));
});
server.listen(0, "127.0.0.1", () => console.log("moqd ready url=http://127.0.0.1:" + server.address().port + "/"));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
`,
  );
  chmodSync(moqd, 0o755);
  const moq = path.join(dir, "moq");
  writeFileSync(moq, `#!/bin/sh\nif [ "$1" = fail ]; then echo bad >&2; exit 2; fi\nexec cat\n`);
  chmodSync(moq, 0o755);
  return { dir, moqd, moq };
}

async function checkProcessHelpers() {
  const fake = writeFakeBinaries();
  const moqd = await H.startMoqd([], { bin: fake.moqd });
  assert.match(moqd.url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  const res = await H.httpGet(`${moqd.url}health`);
  assert.equal(res.headers.get("access-control-allow-origin"), "*");
  assert.equal((await res.json()).workers, 2);
  await H.stopMoqdClean(moqd);

  await assert.rejects(H.startMoqd(["--die"], { bin: fake.moqd }), /exited before ready/);
  await assert.rejects(H.startMoqd([], { bin: "/nonexistent/moqd" }), /exited before ready/);

  const r = await H.runMoq([], { bin: fake.moq, stdin: "a\nb\n" });
  assert.equal(r.code, 0);
  assert.equal(r.stdout.toString(), "a\nb\n");
  const f = await H.runMoq(["fail"], { bin: fake.moq });
  assert.equal(f.code, 2);
  assert.equal(f.stderr, "bad\n");

  const s = H.spawnMoq([], { bin: fake.moq });
  s.write("line1\n");
  await s.waitStdout((b) => b.toString() === "line1\n", 2_000, "echo");
  s.endStdin();
  assert.deepEqual(await s.wait(2_000), { code: 0, signal: null });
  rmSync(fake.dir, { recursive: true, force: true });
  console.log("ok process helpers (fake moqd/moq)");
}

async function checkForceFraming() {
  const seen = [];
  const wss = new WebSocketServer({
    port: 0,
    host: "127.0.0.1",
    handleProtocols: (protocols) => {
      seen.push([...protocols]);
      return protocols.has("webtransport") ? "webtransport" : [...protocols][0];
    },
  });
  await new Promise((r) => wss.on("listening", r));
  const url = `ws://127.0.0.1:${wss.address().port}/`;
  for (const framing of ["qmux-00", "webtransport"]) {
    const uninstall = H.forceFraming(framing);
    const ws = new globalThis.WebSocket(url, ["qmux-00", "webtransport"]);
    await H.withDeadline(new Promise((r) => ws.addEventListener("open", r)), 2_000, "ws open");
    assert.equal(ws.protocol, framing);
    ws.close();
    uninstall();
  }
  assert.deepEqual(seen, [["qmux-00"], ["webtransport"]]);
  assert.equal(H.negotiated.at(-1).protocol, "webtransport");
  wss.close();
  console.log("ok forceFraming");
}

try {
  await checkClientHelpers();
  await checkProcessHelpers();
  await checkForceFraming();
  await H.withDeadline(H.waitFor(() => true, 10, "trivial"), 100, "waitFor");
  await assert.rejects(H.withDeadline(new Promise(() => {}), 50, "never"), /timed out after 50 ms/);
} catch (err) {
  console.error("selfcheck FAILED:", err);
  process.exit(1);
}
console.log(`selfcheck passed (${H.recordedAsyncErrors().length} async errors recorded)`);
process.exit(0);
