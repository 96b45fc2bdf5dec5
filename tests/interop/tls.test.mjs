// TLS on the TCP port: moqd tells TLS from plain HTTP by the first byte, so wss:// and
// https://host/health work on the same port as ws:// and http://, with moqd's certificate
// (here the generated one, trusted through GET /certificate.pem) and ALPN http/1.1.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import * as H from "./harness.mjs";

const T = { timeout: H.TEST_TIMEOUT_MS };
const ctx = H.useMoqd();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moqd-tls-"));
const https = () => H.httpsUrl(ctx.moqd.url);

async function certificatePem() {
  const res = await H.httpGet(`${ctx.moqd.url}certificate.pem`);
  assert.equal(res.status, 200);
  const pem = await res.text();
  assert.match(pem, /^-----BEGIN CERTIFICATE-----/);
  const file = path.join(dir, "moqd.pem");
  fs.writeFileSync(file, pem);
  return { pem, file };
}

// Makes @moq/lite's WebSockets (the `ws` package) trust `pem`, and records the URLs they open.
function trustForWebSockets(pem) {
  const Base = globalThis.WebSocket;
  const opened = [];
  globalThis.WebSocket = class extends Base {
    constructor(url, protocols, options) {
      super(url, protocols, { ...options, ca: pem });
      opened.push(String(url));
    }
  };
  return { opened, restore: () => { globalThis.WebSocket = Base; } };
}

test("curl --cacert gets /health over TLS on the moqd port, ALPN http/1.1", T, async () => {
  const { file } = await certificatePem();
  const out = execFileSync("curl", ["-sS", "-v", "--max-time", "5", "--cacert", file, `${https()}health`],
    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  assert.equal(JSON.parse(out).status, "ok");
  const verbose = execFileSync("sh", ["-c", `curl -sS -v --max-time 5 --cacert ${file} ${https()}health 2>&1 >/dev/null`],
    { encoding: "utf8" });
  assert.match(verbose, /ALPN.*http\/1\.1/i, verbose);
  assert.match(verbose, /TLSv1\.3/, verbose);
  // Plain HTTP still answers on the same port.
  assert.equal((await (await H.httpGet(`${ctx.moqd.url}health`)).json()).status, "ok");
  // Without trusting the certificate, curl refuses it (exit 60: peer certificate not trusted).
  let code = 0;
  try {
    execFileSync("curl", ["-sS", "--max-time", "5", `${https()}health`], { stdio: "ignore" });
  } catch (err) {
    code = err.status;
  }
  assert.equal(code, 60);
});

test("@moq/lite in Node publishes and subscribes over wss:// with the certificate trusted", T, async () => {
  const { pem } = await certificatePem();
  const trust = trustForWebSockets(pem);
  try {
    const p = H.uniquePrefix("tls");
    const groups = [[H.text("over"), H.text("tls")], [H.randomFrame(100_000)]];
    const pubConn = await H.connect(`${https()}`);
    const pub = H.publishBroadcast(pubConn, p, { video: groups }, { before: () => H.pace(20) });
    const subConn = await H.connect(`${https()}`);
    H.assertGroups(await H.collectTrack(subConn, p, "video", { frames: 3 }), groups);
    assert.ok(trust.opened.length >= 2 && trust.opened.every((u) => u.startsWith("wss://")),
      `WebSockets opened: ${trust.opened.join(", ")}`);
    pub.close();
    H.closeConnection(pubConn);
    H.closeConnection(subConn);
  } finally {
    trust.restore();
  }
});

test("a TLS handshake that fails (no common protocol) costs moqd nothing", T, async () => {
  const { file } = await certificatePem();
  let code = 0;
  try {
    execFileSync("curl", ["-sS", "--max-time", "5", "--tls-max", "1.2", "--cacert", file, `${https()}health`],
      { stdio: "ignore" });
  } catch (err) {
    code = err.status;
  }
  assert.notEqual(code, 0, "TLS 1.2 only is refused (moqd speaks TLS 1.3)");
  assert.equal((await (await H.httpGet(`${ctx.moqd.url}health`)).json()).status, "ok");
});

H.moqdStopsCleanly(ctx);
