// --auth-url: one HTTP request per session to the operator's auth service (moq-auth's contract):
// the POST names the session's path and query, a 2xx grant of publish/subscribe patterns and an
// expiry admits it, and moqd fails closed: a refusal, an error status, no answer or no service
// refuses the session with unauthorized (6) and a log line.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, test } from "node:test";
import * as H from "./harness.mjs";

const T = { timeout: H.TEST_TIMEOUT_MS };
const now = () => Math.floor(Date.now() / 1000);
const requests = [];
let service;
const ctx = { moqd: undefined };

// The service decides by the query's jwt: good, short (expires in 2 s), deny (403), broken (500),
// slow (never answers).
before(async () => {
  service = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const r = JSON.parse(body);
      requests.push({ method: req.method, url: req.url, body: r });
      const jwt = new URLSearchParams(r.query ?? "").get("jwt");
      const grant = (g) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(g));
      if (jwt === "good") grant({ publish: ["alice/**"], subscribe: ["**"], expires: now() + 600 });
      else if (jwt === "short") grant({ subscribe: ["**"], expires: now() + 2 });
      else if (jwt === "deny") res.writeHead(403).end();
      else if (jwt === "broken") res.writeHead(500).end("oops");
      else if (jwt === "slow") {} // no answer
      else res.writeHead(401).end();
    });
  });
  await new Promise((resolve) => service.listen(0, "127.0.0.1", resolve));
  ctx.moqd = await H.startMoqd(["--auth-url", `http://127.0.0.1:${service.address().port}/auth`]);
});
after(async () => {
  service.closeAllConnections();
  service.close();
  H.closeAllConnections();
  if (ctx.moqd.proc.exitCode === null && ctx.moqd.proc.signalCode === null) await ctx.moqd.stop().catch(() => {});
});

const at = (jwt) => `${ctx.moqd.url}room?jwt=${jwt}`;
async function refused(jwt, reason, ms = 5_000) {
  const conn = await H.connect(at(jwt), { ms: ms + 2_000 }).catch(() => undefined);
  if (conn) await H.withDeadline(conn.closed.catch(() => {}), ms + 2_000, `moqd to close the ${jwt} session`);
  await H.waitFor(() => new RegExp(`auth refused connect peer=\\S+ path=/room reason=${reason} .*code=6`)
    .test(ctx.moqd.stderrText()), ms + 2_000, `the ${jwt} refusal (${reason})`);
}

test("a granted session publishes and subscribes within its patterns; the service heard its path and query", T, async () => {
  const pubConn = await H.connect(at("good"));
  const groups = [[H.text("granted")]];
  const pub = H.publishBroadcast(pubConn, "alice", { video: groups });
  const subConn = await H.connect(at("good"));
  H.assertGroups(await H.collectTrack(subConn, "alice", "video", { frames: 1 }), groups);
  const bob = H.publishBroadcast(pubConn, "bob", { video: groups });
  await H.waitFor(() => /auth refused publish session=\d+ path=\/room\/bob grant=auth-url code=6/
    .test(ctx.moqd.stderrText()), 5_000, "bob's publish to be refused");
  const r = requests.find((x) => x.body.query === "jwt=good");
  assert.equal(r.method, "POST");
  assert.equal(r.url, "/auth");
  assert.equal(r.body.event, "connect");
  assert.equal(r.body.path, "/room");
  assert.equal(r.body.transport, "websocket");
  assert.match(r.body.id, /^[0-9a-f]{32}$/);
  assert.match(r.body.remote, /^127\.0\.0\.1:\d+$/);
  // One request per session.
  assert.equal(requests.filter((x) => x.body.query === "jwt=good").length, 2);
  for (const b of [pub, bob]) b.close();
  H.closeConnection(pubConn);
  H.closeConnection(subConn);
});

test("refusals: 403, 401, 500 and a grant that expires mid-session", T, async () => {
  await refused("deny", "no_permission");
  await refused("nobody", "no_permission");
  await refused("broken", "service_failed");
  const conn = await H.connect(at("short"));
  await H.withDeadline(conn.closed.catch(() => {}), 6_000, "the short grant's session to be closed at expiry");
  await H.waitFor(() => /session \d+ auth expired \(auth-url\); closing code=6/.test(ctx.moqd.stderrText()),
    5_000, "moqd's expiry line");
});

test("no answer within 5 s refuses (fails closed)", { timeout: 20_000 }, async () => {
  await refused("slow", "service_failed", 7_000);
  assert.match(ctx.moqd.stderrText(), /detail=no answer within 5 s/);
});

test("no service at all refuses too, and moqd exits 0", T, async () => {
  const dead = http.createServer();
  await new Promise((resolve) => dead.listen(0, "127.0.0.1", resolve));
  const port = dead.address().port;
  await new Promise((resolve) => dead.close(resolve));
  const lonely = await H.startMoqd(["--auth-url", `http://127.0.0.1:${port}/auth`]);
  const conn = await H.connect(`${lonely.url}room?jwt=good`).catch(() => undefined);
  if (conn) await H.withDeadline(conn.closed.catch(() => {}), 7_000, "the session to be refused");
  await H.waitFor(() => /auth refused connect .* reason=service_failed/.test(lonely.stderrText()), 7_000,
    "the refusal without a service");
  await H.stopMoqdClean(lonely);
  H.closeAllConnections();
  await H.stopMoqdClean(ctx.moqd);
});
