// Prometheus metrics on --metrics-listen: the scrape parses with the reference text-format
// parser (python3-prometheus-client) and its counters move by exactly what the test did: N
// frames published to M viewers are N frames in, N*M frames out, N*M delivery latencies.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import * as H from "./harness.mjs";

const T = { timeout: H.TEST_TIMEOUT_MS };
const ctx = H.useMoqd(["--metrics-listen", "127.0.0.1:0"]);
// moqd prints "moqd metrics url=..." on stdout right after its ready line.
const metricsUrl = () => {
  const m = /^moqd metrics url=(\S+)$/m.exec(ctx.moqd.stdoutText());
  assert.ok(m, `no metrics line on stdout: ${ctx.moqd.stdoutText()}`);
  return m[1];
};

async function scrape() {
  const res = await H.httpGet(`${metricsUrl()}metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const json = execFileSync("/usr/bin/python3", [new URL("./prom_parse.py", import.meta.url).pathname],
    { input: text });
  return JSON.parse(json);
}

// The value of `sample` with `labels` (a subset match) in a parsed scrape; 0 when absent.
function value(families, family, sample = family, labels = {}) {
  const f = families[family];
  if (!f) return 0;
  let total = 0;
  for (const [name, l, v] of f.samples) {
    if (name !== sample) continue;
    if (Object.entries(labels).every(([k, want]) => l[k] === want)) total += v;
  }
  return total;
}

test("/metrics, /health and /ready answer on the metrics listener; not /metrics on the public port", T, async () => {
  const base = metricsUrl();
  const health = await (await H.httpGet(`${base}health`)).json();
  assert.equal(health.status, "ok");
  assert.equal((await H.httpGet(`${base}ready`)).status, 200);
  assert.equal((await H.httpGet(`${ctx.moqd.url}metrics`)).status, 404);
  const families = await scrape();
  for (const name of ["moqd_sessions_started", "moqd_frames_received", "moqd_frames_sent",
    "moqd_payload_bytes_sent", "moqd_groups_skipped", "moqd_auth_refusals", "moqd_delivery_latency_seconds",
    "moqd_worker_busy_seconds", "moqd_quic_handshakes_started", "moqd_quic_retries",
    "moqd_quic_missteered_datagrams", "moqd_subscriptions", "moqd_subscriptions_open", "moqd_announces",
    "moqd_announces_active"]) {
    assert.ok(families[name], `family ${name} missing from ${Object.keys(families).join(", ")}`);
  }
  assert.equal(families.moqd_delivery_latency_seconds.type, "histogram");
  assert.equal(value(families, "moqd_worker_busy_seconds", "moqd_worker_busy_seconds_total", { worker: "1" }) >= 0, true);
});

test("N frames published to M viewers move the counters by exactly N, N*M and N*M", T, async () => {
  const N = 12, M = 3, size = 1000;
  const p = H.uniquePrefix("metrics");
  const before = await scrape();
  const pubConn = await H.connect(ctx.moqd.url);
  const broadcast = new H.Moq.Broadcast();
  pubConn.publish(p, broadcast);
  const viewers = [];
  for (let i = 0; i < M; i++) viewers.push(await H.connect(ctx.moqd.url));
  for (const v of viewers) await H.waitActive(v, p);
  const subs = viewers.map((v) => H.subscribeTrack(v, p, "video"));
  const req = await H.withDeadline(broadcast.requested(), 5_000, "the relay's subscription");
  // Every viewer's subscription is in place before the first frame: the gauge says so.
  await H.waitFor(async () => value(await scrape(), "moqd_subscriptions_open") - value(before, "moqd_subscriptions_open") === M,
    5_000, `${M} subscriptions in moqd_subscriptions`, 50);
  const frames = [];
  for (let g = 0; g < N / 3; g++) {
    const group = req.track.appendGroup();
    for (let f = 0; f < 3; f++) {
      const frame = H.randomFrame(size);
      frames.push(frame);
      group.writeFrame(frame);
    }
    group.close();
  }
  await H.waitFor(() => subs.every((s) => s.frameCount() === N), 10_000, `${N} frames at each of ${M} viewers`);
  const after = await scrape();
  const delta = (family, sample = family, labels) => value(after, family, sample, labels) - value(before, family, sample, labels);
  assert.equal(delta("moqd_frames_received", "moqd_frames_received_total"), N);
  assert.equal(delta("moqd_payload_bytes_received", "moqd_payload_bytes_received_total"), N * size);
  assert.equal(delta("moqd_frames_sent", "moqd_frames_sent_total"), N * M);
  assert.equal(delta("moqd_payload_bytes_sent", "moqd_payload_bytes_sent_total"), N * M * size);
  assert.equal(delta("moqd_delivery_latency_seconds", "moqd_delivery_latency_seconds_count"), N * M);
  assert.equal(delta("moqd_subscriptions", "moqd_subscriptions_total"), M);
  assert.equal(delta("moqd_announces", "moqd_announces_total"), 1);
  assert.equal(delta("moqd_announces_active"), 1);
  assert.equal(delta("moqd_sessions", "moqd_sessions", { transport: "websocket", version: "moq-lite-02" }), M + 1);
  // Histogram buckets are cumulative and end at the count.
  const buckets = after.moqd_delivery_latency_seconds.samples.filter(([n]) => n.endsWith("_bucket"));
  for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i][2] >= buckets[i - 1][2]);
  assert.equal(buckets.at(-1)[1].le, "+Inf");
  assert.equal(buckets.at(-1)[2], value(after, "moqd_delivery_latency_seconds", "moqd_delivery_latency_seconds_count"));
  for (const s of subs) s.close();
  req.track.close();
  broadcast.close();
  for (const c of [pubConn, ...viewers]) H.closeConnection(c);
  await H.waitFor(async () => value(await scrape(), "moqd_sessions") === value(before, "moqd_sessions"), 5_000,
    "the sessions gauge to drop back", 50);
  const closed = await scrape();
  assert.ok(value(closed, "moqd_sessions_closed", "moqd_sessions_closed_total") >=
    value(before, "moqd_sessions_closed", "moqd_sessions_closed_total") + M + 1);
});

H.moqdStopsCleanly(ctx);
