// moqd's public HTTP GETs on the same port as WebSocket.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";

const ctx = H.useMoqd();
const T = { timeout: H.TEST_TIMEOUT_MS };

test("GET /health answers JSON with status, version, workers, sessions", T, async () => {
  const res = await H.httpGet(`${ctx.moqd.url}health`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /application\/json/);
  const health = await res.json();
  for (const key of ["status", "version", "workers", "sessions"]) assert.ok(key in health, `missing ${key}`);
  assert.equal(health.workers, 2);
  assert.ok(Number.isInteger(health.sessions) && health.sessions >= 0);
});

test("CORS: GET /health carries Access-Control-Allow-Origin: *", T, async () => {
  for (const headers of [undefined, { Origin: "http://example.test" }]) {
    const res = await H.httpGet(`${ctx.moqd.url}health`, { headers });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    await res.arrayBuffer();
  }
});

test("/health counts an open session", T, async () => {
  const conn = await H.connect(ctx.moqd.url);
  await H.waitFor(
    async () => (await (await H.httpGet(`${ctx.moqd.url}health`)).json()).sessions >= 1,
    5_000,
    "sessions >= 1 while a client is connected",
    50,
  );
  H.closeConnection(conn);
});

H.moqdStopsCleanly(ctx);
