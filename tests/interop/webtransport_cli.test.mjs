// Cross-transport interop: the moq CLI over WebTransport (HTTP/3, `--transport webtransport`)
// against moqd (2 workers), with the JS client over WebSocket on the other end, byte for byte, at
// a URL path so that the session roots are exercised: the CLI's URL path travels in the CONNECT's
// :path (unlike raw QUIC, where the CLI prefixes its paths), and moqd logs its session as
// transport=webtransport at that path. Also the certificate checks over https://.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { waitLog } from "./raw.mjs";

const ctx = H.useMoqd();
const T = { timeout: H.TEST_TIMEOUT_MS };
const WT = ["--transport", "webtransport"];
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// moqd logged a WebTransport session (the CLI's: the JS client is on WebSocket) rooted at `room`.
async function assertWebTransportSession(room) {
  const re = new RegExp(`session \\d+ start peer=\\S+ transport=webtransport version=moq-lite-05 path=/${escapeRe(room)}$`, "m");
  await waitLog(ctx.moqd, re, 5_000).catch((err) => {
    throw new Error(`${err.message}\nmoqd stderr:\n${ctx.moqd.stderrText()}`);
  });
}

test("moq pub over WebTransport at /room -> JS subscriber over WebSocket at /room, byte for byte", T, async () => {
  const room = H.uniquePrefix("wtpub");
  const roomUrl = `${ctx.moqd.url}${room}`;
  const subConn = await H.connect(roomUrl);
  const pub = H.spawnMoq(["pub", roomUrl, "alice", "--track", "video", "--length-prefixed", "--group-every", "2", ...WT]);
  await H.waitActive(subConn, "alice", { ms: 10_000 }).catch((err) => {
    throw new Error(`${err.message}\n${pub.describe()}`);
  });
  await assertWebTransportSession(room);
  // Rooted at the room, not prefixed twice: at / the broadcast is the room's path + "alice".
  await H.waitActive(await H.connect(ctx.moqd.url), `${room}/alice`, { ms: 10_000 });
  const sub = H.subscribeTrack(subConn, "alice", "video");
  await H.cliPubFramesReachJs(pub, sub);
});

test("JS publisher over WebSocket at /room -> moq sub over WebTransport at /room, byte for byte", T, async () => {
  const room = H.uniquePrefix("wtsub");
  const roomUrl = `${ctx.moqd.url}${room}`;
  const groups = H.lineGroups();
  const synced = await H.publishSynced(await H.connect(roomUrl), await H.connect(roomUrl), "bob", groups);
  // The publisher is at the room too: the JS client sees it as "bob", and so must the CLI.
  const sub = H.spawnMoq(["sub", roomUrl, "bob", "--track", "video", ...WT]);
  await H.cliSubReadsLines(sub, groups, synced, () => assertWebTransportSession(room));
});

test("moq announced over WebTransport (wt) at https:// with --tls-fingerprint lists paths under its root", T, async () => {
  const room = H.uniquePrefix("wtann");
  const pubConn = await H.connect(`${ctx.moqd.url}${room}`);
  H.publishBroadcast(pubConn, "dave", {});
  await H.waitActive(await H.connect(`${ctx.moqd.url}${room}`), "dave");
  const hex = await H.certificateSha256(ctx.moqd.url);
  const ann = H.spawnMoq(["announced", `${H.httpsUrl(ctx.moqd.url)}${room}`, "dave", "--transport", "wt", "--tls-fingerprint", hex, "--timeout", "20"]);
  await ann.waitStdout((out) => out.toString().split("\n").some((l) => l.split(/\s+/).includes("dave")), 10_000, "a line naming dave");
  await ann.stop();
});

test("WebTransport with a wrong fingerprint fails with a clear error and a non-zero exit", T, async () => {
  const hex = await H.certificateSha256(ctx.moqd.url);
  const wrong = (hex[0] === "0" ? "1" : "0") + hex.slice(1);
  const r = await H.runMoq(["announced", H.httpsUrl(ctx.moqd.url), "x", ...WT, "--tls-fingerprint", wrong, "--timeout", "20"], { timeoutMs: 15_000 });
  assert.notEqual(r.code, 0, r.stderr);
  assert.match(r.stderr, /certificate/i, r.stderr);
});

H.moqdStopsCleanly(ctx);
