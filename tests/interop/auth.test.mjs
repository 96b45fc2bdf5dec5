// JWT authentication compatible with moq-relay: tokens minted by @moq/token 0.2.3 (pinned) are
// accepted by moqd and tokens minted by `moq token` by @moq/token's verifier; `root` confines the
// connect path, `put`/`get` allow and refuse publish and subscribe, an expired token is refused at
// connect, and a token expiring mid-session closes that session with unauthorized (6) while
// another session carries on. Every refusal has moqd's log line.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import * as Token from "@moq/token";
import * as H from "./harness.mjs";

const T = { timeout: H.TEST_TIMEOUT_MS };
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moqd-auth-"));
const now = () => Math.floor(Date.now() / 1000);

// An HMAC key as `moq-token generate` writes it (plain JSON), and an ES256 key pair written
// base64url, the other form the CLI writes; moqd gets only the public half.
const hmac = await Token.generate("HS256", "hmac1");
const ec = await Token.generate("ES256", "ec1");
const ecPublic = Token.toPublicKey(ec);
const b64url = (s) => Buffer.from(s).toString("base64url");
fs.writeFileSync(path.join(dir, "hmac.jwk"), JSON.stringify(hmac, null, 2));
fs.writeFileSync(path.join(dir, "ec.jwk"), JSON.stringify(ec, null, 2));
fs.writeFileSync(path.join(dir, "ec-public.jwk"), b64url(JSON.stringify(ecPublic, null, 2)));

const ctx = H.useMoqd([
  "--auth-key", path.join(dir, "hmac.jwk"),
  "--auth-key", path.join(dir, "ec-public.jwk"),
  "--auth-public", "anon",
]);

const wsUrl = (p, token) => `${ctx.moqd.url}${p}${token ? `?jwt=${token}` : ""}`.replace(/^http:/, "ws:");
const connectAt = (p, token) => H.connect(`${ctx.moqd.url}${p}${token ? `?jwt=${token}` : ""}`);

async function waitLog(re, what) {
  await H.waitFor(() => re.test(ctx.moqd.stderrText()), 5_000, `${what} (log ${re})`);
}

// Resolves once `conn` is closed (by moqd), whatever the reason.
async function closedWithin(conn, ms, what) {
  await H.withDeadline(conn.closed.catch(() => {}), ms, what);
}

test("moqd says at start that auth is on", T, async () => {
  await waitLog(/auth: 2 keys, 1 public prefixes/, "the auth line at start");
});

test("@moq/token tokens are accepted: put publishes, get subscribes, frames flow", T, async () => {
  const pubToken = await Token.sign(hmac, { root: "room", put: ["alice"] });
  const subToken = await Token.sign(ec, { root: "room", get: [""], exp: now() + 600 });
  const pubConn = await connectAt("room", pubToken);
  const groups = [[H.text("one"), H.text("two")], [H.text("three")]];
  const pub = H.publishBroadcast(pubConn, "alice", { video: groups }, { before: () => H.pace(20) });
  const subConn = await connectAt("room", subToken);
  const got = await H.collectTrack(subConn, "alice", "video", { frames: 3 });
  H.assertGroups(got, groups);
  pub.close();
  H.closeConnection(pubConn);
  H.closeConnection(subConn);
});

test("root confines the connect path", T, async () => {
  const token = await Token.sign(hmac, { root: "room", put: [""], get: [""] });
  const conn = await connectAt("elsewhere", token).catch(() => undefined);
  if (conn) await closedWithin(conn, 5_000, "moqd to close a session outside the token's root");
  await waitLog(/auth refused connect peer=\S+ path=\/elsewhere reason=wrong_root .* code=6/,
    "the refusal of a path outside root");
  // Deeper inside root is fine.
  const inside = await connectAt("room/deeper", token);
  H.closeConnection(inside);
});

test("put refuses publishing elsewhere; get refuses subscribing elsewhere", T, async () => {
  const token = await Token.sign(hmac, { root: "room", put: ["alice"], get: ["alice"] });
  const conn = await connectAt("room", token);
  const bob = H.publishBroadcast(conn, "bob", { video: [[H.text("x")]] });
  await waitLog(/auth refused publish session=\d+ path=\/room\/bob grant=jwt code=6/, "the publish refusal");
  // A subscription to a path outside `get` is refused, the session goes on.
  const other = await connectAt("room", await Token.sign(hmac, { root: "room", put: ["carol"] }));
  const carol = H.publishBroadcast(other, "carol", { video: [[H.text("c")]] }, { holdOpen: true });
  const sub = H.subscribeTrack(conn, "carol", "video");
  await waitLog(/auth refused subscribe session=\d+ path=\/room\/carol grant=jwt code=6/, "the subscribe refusal");
  await H.waitFor(() => sub.state.ended, 5_000, "the refused subscription to end");
  // ... and the allowed publish on the same session still works.
  const alice = H.publishBroadcast(conn, "alice", { video: [[H.text("a1")]] });
  const watcher = await connectAt("room", await Token.sign(hmac, { root: "room", get: ["alice"] }));
  const got = await H.collectTrack(watcher, "alice", "video", { frames: 1 });
  H.assertGroups(got, [[H.text("a1")]]);
  for (const b of [bob, carol, alice]) b.close();
  for (const c of [conn, other, watcher]) H.closeConnection(c);
});

test("an expired token is refused at connect", T, async () => {
  const token = await Token.sign(hmac, { root: "room", get: [""], exp: now() - 5 });
  const conn = await connectAt("room", token).catch(() => undefined);
  if (conn) await closedWithin(conn, 5_000, "moqd to close a session with an expired token");
  await waitLog(/auth refused connect peer=\S+ path=\/room reason=expired/, "the expired-token refusal");
});

test("forged tokens are refused: alg none, wrong signature, unknown kid", T, async () => {
  const good = await Token.sign(hmac, { root: "room", get: [""] });
  const [, payload] = good.split(".");
  const none = `${b64url(JSON.stringify({ alg: "none", typ: "JWT" }))}.${payload}.`;
  const forged = `${good.slice(0, -3)}${good.endsWith("AAA") ? "BBB" : "AAA"}`;
  const stranger = await Token.sign(await Token.generate("HS256", "stranger"), { root: "room", get: [""] });
  for (const [token, reason] of [[none, "alg_none"], [forged, "bad_signature"], [stranger, "unknown_kid"]]) {
    const conn = await connectAt("room", token).catch(() => undefined);
    if (conn) await closedWithin(conn, 5_000, `moqd to close a session with a ${reason} token`);
    await waitLog(new RegExp(`auth refused connect .* reason=${reason}`), `the ${reason} refusal`);
  }
});

test("without a token, only the public prefix is open", T, async () => {
  const conn = await connectAt("anon");
  const groups = [[H.text("hello")]];
  const pub = H.publishBroadcast(conn, "cam", { video: groups });
  const viewer = await connectAt("anon");
  H.assertGroups(await H.collectTrack(viewer, "cam", "video", { frames: 1 }), groups);
  pub.close();
  H.closeConnection(conn);
  H.closeConnection(viewer);
  const refused = await connectAt("room").catch(() => undefined);
  if (refused) await closedWithin(refused, 5_000, "moqd to close an anonymous session outside anon");
  await waitLog(/auth refused connect peer=\S+ path=\/room reason=no_permission/, "the anonymous refusal");
});

test("a token expiring mid-session closes that session with unauthorized; another carries on", T, async () => {
  const pubConn = await connectAt("room", await Token.sign(hmac, { root: "room", put: ["live"] }));
  const broadcast = new H.Moq.Broadcast();
  pubConn.publish("live", broadcast);
  let stop = false;
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      (async () => {
        for (let n = 0; !stop; n++) {
          const g = req.track.appendGroup();
          g.writeFrame(H.text(`frame ${n}`));
          g.close();
          await H.pace(50);
        }
        req.track.close();
      })().catch(() => {});
    }
  })().catch(() => {});
  const short = await Token.sign(hmac, { root: "room", get: ["live"], exp: now() + 3 });
  const long = await Token.sign(ec, { root: "room", get: ["live"], exp: now() + 600 });
  const expiring = H.spawnMoq(["sub", "--transport", "ws", wsUrl("room", short), "live", "--track", "video"]);
  const lasting = H.spawnMoq(["sub", "--transport", "ws", wsUrl("room", long), "live", "--track", "video"]);
  await H.waitFor(() => /frame \d+/.test(expiring.stdoutText()) && /frame \d+/.test(lasting.stdoutText()),
    5_000, "both subscribers to receive frames");
  const result = await H.withDeadline(expiring.exited, 8_000, "the expiring subscriber to be closed");
  assert.equal(result.code, 1, expiring.describe());
  assert.match(expiring.stderrText(), /unauthorized/, expiring.describe());
  await waitLog(/session \d+ auth expired \(jwt\); closing code=6/, "moqd's expiry line");
  const before = (lasting.stdoutText().match(/frame \d+/g) ?? []).length;
  await H.waitFor(() => (lasting.stdoutText().match(/frame \d+/g) ?? []).length >= before + 10, 5_000,
    "the other subscriber to keep receiving");
  assert.equal(lasting.proc.exitCode, null, "the other subscriber is still running");
  lasting.proc.kill("SIGTERM");
  await lasting.exited;
  stop = true;
  broadcast.close();
  H.closeConnection(pubConn);
});

test("moq token mints tokens that @moq/token's verifier accepts (HS256 and ES256)", T, async () => {
  for (const [keyFile, verifyKey] of [["hmac.jwk", hmac], ["ec.jwk", ecPublic]]) {
    const r = await H.runMoq(["token", "--key", path.join(dir, keyFile), "--root", "room",
      "--put", "alice", "--get", "", "--get", "bob", "--expires", "1h"]);
    assert.equal(r.code, 0, r.stderr);
    const token = r.stdout.toString().trim();
    const claims = await Token.verify(verifyKey, token, "room");
    assert.equal(claims.root, "room");
    assert.deepEqual(claims.put, ["alice"]);
    assert.deepEqual(claims.get, ["", "bob"]);
    assert.ok(claims.exp > now() + 3500 && claims.exp <= now() + 3600, `exp ${claims.exp}`);
    // ... and moqd accepts it too.
    const conn = await connectAt("room", token);
    H.closeConnection(conn);
  }
});

test("--auth-key-dir picks keys by kid (the file name when the key names none); no kid is refused", T, async () => {
  const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "moqd-keydir-"));
  const a = await Token.generate("HS256", "alpha");
  const b = await Token.generate("HS384", "beta");
  const { kid: _drop, ...unnamed } = b;  // named by its file: beta.jwk
  fs.writeFileSync(path.join(keyDir, "alpha.jwk"), JSON.stringify(a));
  fs.writeFileSync(path.join(keyDir, "beta.jwk"), b64url(JSON.stringify(unnamed)));
  const m = await H.startMoqd(["--auth-key-dir", keyDir]);
  try {
    for (const key of [a, b]) {
      const conn = await H.connect(`${m.url}room?jwt=${await Token.sign(key, { root: "room", get: [""] })}`);
      H.closeConnection(conn);
    }
    const { kid: _k, ...anonymous } = a;
    const noKid = await Token.sign(anonymous, { root: "room", get: [""] });
    const conn = await H.connect(`${m.url}room?jwt=${noKid}`).catch(() => undefined);
    if (conn) await closedWithin(conn, 5_000, "moqd to close a session whose token names no key");
    await H.waitFor(() => /auth refused connect .* reason=missing_kid/.test(m.stderrText()), 5_000,
      "the missing-kid refusal");
  } finally {
    H.closeAllConnections();
    await H.stopMoqdClean(m);
  }
});

H.moqdStopsCleanly(ctx);
