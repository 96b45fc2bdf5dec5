// Cross-transport interop: the moq CLI over QUIC against moqd (2 workers), with the JS client
// over WebSocket on the other end, byte for byte; and the CLI's certificate checks (http:// pins
// /certificate.sha256, https:// with --tls-fingerprint, --tls-insecure, a wrong fingerprint).
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";

const ctx = H.useMoqd();
const T = { timeout: H.TEST_TIMEOUT_MS };
const QUIC = ["--transport", "quic"];
const hasLine = (path) => (out) => out.toString().split("\n").some((l) => l.split(/\s+/).includes(path));

async function jsToQuicSub(url, p, subArgs) {
  const groups = H.lineGroups();
  // The JS publisher is over WebSocket (as in cli.test.mjs).
  const synced = await H.publishSynced(await H.connect(url), await H.connect(url), p, groups);
  const sub = H.spawnMoq(["sub", ...subArgs, "--track", "video", ...QUIC]);
  await H.cliSubReadsLines(sub, groups, synced);
}

test("JS publisher over WebSocket -> moq sub over QUIC (http:// pins the hash), byte for byte", T, async () => {
  const p = `${H.uniquePrefix("qsub")}/bob`;
  await jsToQuicSub(ctx.moqd.url, p, [ctx.moqd.url, p]);
});

test("moq pub over QUIC -> JS subscriber over WebSocket, byte for byte, exit 0 at EOF", T, async () => {
  const p = `${H.uniquePrefix("qpub")}/alice`;
  const subConn = await H.connect(ctx.moqd.url);
  const pub = H.spawnMoq(["pub", ctx.moqd.url, p, "--track", "video", "--length-prefixed", "--group-every", "2", ...QUIC]);
  await H.waitActive(subConn, p, { ms: 10_000 }).catch((err) => {
    throw new Error(`${err.message}\n${pub.describe()}`);
  });
  const sub = H.subscribeTrack(subConn, p, "video");
  await H.cliPubFramesReachJs(pub, sub);
});

test("moq sub over QUIC at a URL path sees the paths under it, as over WebSocket", T, async () => {
  const room = H.uniquePrefix("qroom");
  await jsToQuicSub(`${ctx.moqd.url}${room}`, "carol", [`${ctx.moqd.url}${room}`, "carol"]);
});

for (const version of ["moq-lite-01", "moq-lite-02", "moq-lite-03"]) {
  test(`JS publisher -> moq sub over QUIC with --versions ${version} (ALPN ${version.endsWith("3") ? version : "moql + SETUP"})`, T, async () => {
    const p = `${H.uniquePrefix("qver")}/erin`;
    await jsToQuicSub(ctx.moqd.url, p, [ctx.moqd.url, p, "--versions", version]);
  });
}

async function announcedOverQuic(url, extra) {
  const p = `${H.uniquePrefix("qtls")}/dave`;
  const pubConn = await H.connect(ctx.moqd.url);
  H.publishBroadcast(pubConn, p, {});
  await H.waitActive(await H.connect(ctx.moqd.url), p);
  const ann = H.spawnMoq(["announced", url, p.split("/")[0], ...QUIC, ...extra, "--timeout", "20"]);
  await ann.waitStdout(hasLine(p), 10_000, `a line naming ${p}`);
  await ann.stop();
}

test("https:// with --tls-fingerprint of /certificate.sha256 connects", T, async () => {
  const hex = await H.certificateSha256(ctx.moqd.url);
  await announcedOverQuic(H.httpsUrl(ctx.moqd.url), ["--tls-fingerprint", hex]);
});

test("https:// with --tls-fingerprint in upper case with colons connects", T, async () => {
  const hex = await H.certificateSha256(ctx.moqd.url);
  const colons = hex.toUpperCase().match(/../g).join(":");
  await announcedOverQuic(H.httpsUrl(ctx.moqd.url), ["--tls-fingerprint", colons]);
});

test("https:// with --tls-insecure connects", T, async () => {
  await announcedOverQuic(H.httpsUrl(ctx.moqd.url), ["--tls-insecure"]);
});

test("https:// with a wrong fingerprint fails with a clear error and a non-zero exit", T, async () => {
  const hex = await H.certificateSha256(ctx.moqd.url);
  const wrong = (hex[0] === "0" ? "1" : "0") + hex.slice(1);
  const r = await H.runMoq(["announced", H.httpsUrl(ctx.moqd.url), "x", ...QUIC, "--tls-fingerprint", wrong, "--timeout", "20"], { timeoutMs: 15_000 });
  assert.notEqual(r.code, 0, r.stderr);
  assert.match(r.stderr, /certificate/i, r.stderr);
  assert.match(r.stderr, /does not match the pinned one|rejected/, r.stderr);
});

test("https:// without a TLS flag rejects moqd's self-signed certificate (system store)", T, async () => {
  const r = await H.runMoq(["announced", H.httpsUrl(ctx.moqd.url), "x", ...QUIC, "--timeout", "20"], { timeoutMs: 15_000 });
  assert.notEqual(r.code, 0, r.stderr);
  assert.match(r.stderr, /certificate/i, r.stderr);
});

test("a malformed --tls-fingerprint is refused before connecting", T, async () => {
  const r = await H.runMoq(["announced", H.httpsUrl(ctx.moqd.url), "x", ...QUIC, "--tls-fingerprint", "abc"], { timeoutMs: 5_000 });
  assert.notEqual(r.code, 0, r.stderr);
  assert.match(r.stderr, /fingerprint/, r.stderr);
});

H.moqdStopsCleanly(ctx);
