// Hostile WebTransport CONNECTs on moqd's UDP port (HTTP/3, ALPN h3), sent by tests/tools/h3_probe
// (one QUIC connection, Chromium's SETTINGS or raw control bytes, one hand-built HEADERS frame).
// One moqd for the file; a bystander publisher/subscriber pair over WebSocket streams throughout,
// and after every case the test asserts the status the probe got, the refusal moqd logged for
// that probe's address, and that the bystander lost nothing.
// scripts/test.sh runs this file alone (see interop() there): its bystander must lose no frame.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { after, test } from "node:test";

import {
  MOQD_BIN,
  TEST_TIMEOUT_MS,
  certificateSha256,
  moqdStopsCleanly,
  startBystander,
  startMoqd,
  stopMoqdClean,
  useMoqd,
} from "./harness.mjs";
import { waitLog } from "./raw.mjs";

// Built next to moqd: build/tests/h3_probe for build/bin/moqd, build-asan/tests/... under ASan.
const H3_PROBE = path.resolve(process.env.H3_PROBE ?? path.join(path.dirname(MOQD_BIN), "../tests/h3_probe"));

const ctx = useMoqd();
const opts = { timeout: TEST_TIMEOUT_MS };
let bystander;
const startedBystander = async () => (bystander ??= await startBystander(ctx.moqd.url));
after(() => bystander?.stop());

const fingerprints = new Map();
async function fingerprintOf(moqd) {
  if (!fingerprints.has(moqd.url)) fingerprints.set(moqd.url, await certificateSha256(moqd.url));
  return fingerprints.get(moqd.url);
}

// Runs the probe against `moqd` with the HEADERS `fields` ([name, value] in order); resolves with
// its JSON line plus `exit`.
async function probe(moqd, fields, { rawControl, timeoutMs = 5_000 } = {}) {
  const args = ["--connect", `127.0.0.1:${moqd.port}`, "--fingerprint", await fingerprintOf(moqd), "--timeout-ms", String(timeoutMs)];
  for (const [name, value] of fields) args.push("--header", `${name}=${value}`);
  if (rawControl) args.push("--raw-control", rawControl);
  return new Promise((resolve, reject) => {
    execFile(H3_PROBE, args, { timeout: timeoutMs + 5_000 }, (err, stdout, stderr) => {
      try {
        resolve({ exit: err ? err.code : 0, ...JSON.parse(stdout) });
      } catch {
        reject(new Error(`${H3_PROBE} ${args.join(" ")}\nexit ${err?.code ?? 0} stdout: ${stdout}\nstderr: ${stderr}`));
      }
    });
  });
}

const connectFields = (moqd) => [
  [":method", "CONNECT"],
  [":scheme", "https"],
  [":authority", `127.0.0.1:${moqd.port}`],
  [":path", "/room"],
  [":protocol", "webtransport"],
  ["sec-webtransport-http3-draft02", "1"],
  ["wt-available-protocols", '"moq-lite-04", "moql"'],
];
// connectFields with `name` set to `value` (in place, or appended), or removed when value is null.
function withField(fields, name, value) {
  const out = fields.filter(([n]) => n !== name || value !== null).map(([n, v]) => [n, n === name ? value : v]);
  if (value !== null && !fields.some(([n]) => n === name)) out.push([name, value]);
  return out;
}

const peerRe = (r) => `peer=127\\.0\\.0\\.1:${r.local_port}\\b`;
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// The probe sends `fields`; asserts moqd answered `status` and logged the refusal with `reason`.
async function refused(fields, status, reason) {
  const r = await probe(ctx.moqd, fields);
  assert.equal(r.status, status, `probe got ${JSON.stringify(r)}`);
  assert.equal(r.exit, 0);
  await waitLog(ctx.moqd, new RegExp(`webtransport refused ${peerRe(r)} status=${status} reason=${escapeRe(reason)}$`, "m"));
  return r;
}

test("a well-formed CONNECT gets 200 and moq-lite-04 in WT-Protocol", opts, async () => {
  await startedBystander();
  const r = await probe(ctx.moqd, connectFields(ctx.moqd));
  assert.equal(r.status, 200, `probe got ${JSON.stringify(r)}`);
  assert.equal(r.headers["wt-protocol"], '"moq-lite-04"');
  await waitLog(ctx.moqd, new RegExp(`session \\d+ start ${peerRe(r)} transport=webtransport version=moq-lite-04 path=/room`));
  await bystander.check();
});

test("a CONNECT without :protocol, or with :protocol websocket, gets 400", opts, async () => {
  await startedBystander();
  await refused(withField(connectFields(ctx.moqd), ":protocol", null), 400, "missing :protocol");
  await refused(withField(connectFields(ctx.moqd), ":protocol", "websocket"), 400, "bad :protocol");
  await bystander.check();
});

test("a CONNECT with a malformed :authority gets 400", opts, async () => {
  await startedBystander();
  await refused(withField(connectFields(ctx.moqd), ":authority", "bad host"), 400, "bad authority");
  await bystander.check();
});

test("a GET gets 405", opts, async () => {
  await startedBystander();
  await refused(withField(connectFields(ctx.moqd), ":method", "GET"), 405, "not CONNECT");
  await bystander.check();
});

test("a CONNECT offering only protocols moqd does not speak gets 400", opts, async () => {
  await startedBystander();
  await refused(withField(connectFields(ctx.moqd), "wt-available-protocols", '"moqt-21"'), 400, "no common WebTransport protocol");
  await bystander.check();
});

test("a CONNECT with an upper-case field name gets 400", opts, async () => {
  await startedBystander();
  await refused(withField(connectFields(ctx.moqd), "X-Upper", "1"), 400, "bad field name");
  await bystander.check();
});

test("a control stream that does not start with SETTINGS closes the connection with H3_MISSING_SETTINGS", opts, async () => {
  await startedBystander();
  // Stream type 0x00 (control), then GOAWAY (type 0x07, length 1, id 0) where SETTINGS must be.
  const r = await probe(ctx.moqd, connectFields(ctx.moqd), { rawControl: "00 07 01 00" });
  assert.equal(r.closed?.code, 0x10a, `probe got ${JSON.stringify(r)}`);
  assert.equal(r.exit, 0);
  assert.doesNotMatch(ctx.moqd.stderrText(), new RegExp(`session \\d+ start ${peerRe(r)}|webtransport refused ${peerRe(r)}`));
  await bystander.check();
});

test("with --versions moq-lite-02 the CONNECT gets moql in WT-Protocol", opts, async () => {
  const lite02 = await startMoqd(["--versions", "moq-lite-02"]);
  try {
    const r = await probe(lite02, connectFields(lite02));
    assert.equal(r.status, 200, `probe got ${JSON.stringify(r)}`);
    assert.equal(r.headers["wt-protocol"], '"moql"');
    const refusedR = await probe(lite02, withField(connectFields(lite02), "wt-available-protocols", '"moq-lite-04"'));
    assert.equal(refusedR.status, 400, `probe got ${JSON.stringify(refusedR)}`);
    await waitLog(lite02, new RegExp(`webtransport refused ${peerRe(refusedR)} status=400 reason=no common WebTransport protocol$`, "m"));
  } finally {
    await stopMoqdClean(lite02);
  }
  await startedBystander();
  await bystander.check();
});

moqdStopsCleanly(ctx);
