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

test("/health counts an open session, by transport", T, async () => {
  const health = async () => (await H.httpGet(`${ctx.moqd.url}health`)).json();
  assert.deepEqual((await health()).sessions_by_transport, { websocket: 0, quic: 0, webtransport: 0 });
  const conn = await H.connect(ctx.moqd.url);
  const seen = await H.waitFor(
    async () => {
      const h = await health();
      return h.sessions >= 1 && h;
    },
    5_000,
    "sessions >= 1 while a client is connected",
    50,
  );
  assert.deepEqual(seen.sessions_by_transport, { websocket: 1, quic: 0, webtransport: 0 });
  H.closeConnection(conn);
  await H.waitFor(async () => (await health()).sessions_by_transport.websocket === 0, 5_000,
    "the WebSocket session to leave the count", 50);
});

test("GET /stats answers each worker's UDP and loop counters, which QUIC traffic moves", T, async () => {
  const stats = async () => (await H.httpGet(`${ctx.moqd.url}stats`)).json();
  const keys = ["datagrams_in", "datagrams_out", "messages_out", "bytes_out", "send_calls", "recv_calls",
    "gso_batches", "gro_batches", "send_dropped", "loop_polls", "loop_busy_us", "turn_items", "turn_slices_cut",
    "quic_forwarded"];
  const before = await stats();
  assert.equal(before.per_worker.length, 2);
  for (const w of [before.total, ...before.per_worker]) {
    for (const k of keys) assert.ok(Number.isInteger(w[k]) && w[k] >= 0, `${k}: ${w[k]}`);
  }
  for (const k of keys) {
    assert.equal(before.total[k], before.per_worker[0][k] + before.per_worker[1][k], `total ${k}`);
  }
  // Skip-ahead counters: by slow subscriptions and by bridge feeds to slow workers.
  for (const k of ["events", "groups", "bridge_events", "bridge_groups"]) {
    for (const w of [before.total, ...before.per_worker]) {
      assert.ok(Number.isInteger(w.skips?.[k]) && w.skips[k] >= 0, `skips.${k}: ${w.skips?.[k]}`);
    }
    assert.equal(before.total.skips[k], before.per_worker[0].skips[k] + before.per_worker[1].skips[k],
      `total skips.${k}`);
  }
  // The process's heap (glibc's mallinfo2): bytes in use, within what the allocator holds. A
  // sanitizer's allocator bypasses glibc's, which then reports 0.
  assert.ok(Number.isInteger(before.heap?.in_use) && (before.heap.in_use > 0 || H.MOQD_SANITIZED),
    `heap.in_use: ${before.heap?.in_use}`);
  assert.ok(Number.isInteger(before.heap.held) && before.heap.held >= before.heap.in_use, `heap.held: ${before.heap.held}`);
  // The part of it ngtcp2 holds, counted by the allocator moqd hands it (usable bytes, so within
  // in_use, which adds malloc's headers; under a sanitizer in_use is 0 and only the count is real).
  assert.ok(Number.isInteger(before.heap.ngtcp2_in_use) && Number.isInteger(before.heap.ngtcp2_blocks),
    `heap.ngtcp2_in_use: ${before.heap.ngtcp2_in_use}, ngtcp2_blocks: ${before.heap.ngtcp2_blocks}`);
  assert.ok(H.MOQD_SANITIZED || before.heap.ngtcp2_in_use <= before.heap.in_use, "ngtcp2's share within in_use");
  // A QUIC session (the CLI, over raw QUIC) sends and receives datagrams through moqd's sockets.
  await H.runMoq(["announced", ctx.moqd.url, H.uniquePrefix("stats"), "--transport", "quic", "--timeout", "1"]);
  const after = await stats();
  assert.ok(after.total.datagrams_in > before.total.datagrams_in, "datagrams_in rose");
  assert.ok(after.total.datagrams_out > before.total.datagrams_out, "datagrams_out rose");
  assert.ok(after.total.send_calls > before.total.send_calls, "send_calls rose");
  assert.ok(after.total.recv_calls > before.total.recv_calls, "recv_calls rose");
  assert.ok(after.total.bytes_out >= after.total.datagrams_out, "bytes_out counts bytes");
  assert.ok(after.total.messages_out > before.total.messages_out, "messages_out rose");
  assert.ok(after.total.messages_out <= after.total.datagrams_out, "a message is at least a datagram");
  assert.ok(after.total.loop_polls > before.total.loop_polls, "loop_polls rose");
  assert.ok(after.total.turn_items > before.total.turn_items, "turn_items rose (write passes are turn work)");
});

H.moqdStopsCleanly(ctx);
