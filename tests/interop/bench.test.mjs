// The instruments: `moq bench limits`, `fanout` and `msgs` run end to end (each starts its own
// moqd, pinned), report the fields docs/BENCHMARKS.md reads, and say a run is invalid when the
// generator's own sockets dropped datagrams. Short and small: these check the instruments, not
// the relay's speed (that is docs/BENCHMARKS.md's job).
// scripts/test.sh runs this file alone (see interop() there): the runs pin CPUs and set the relay's cost against a limit.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import * as H from "./harness.mjs";
import { startClusterRelay, waitLinksUp } from "./cluster_harness.mjs";

const started = [];
after(async () => {
  for (const r of started) {
    if (r.proc.exitCode === null && r.proc.signalCode === null) await r.stop().catch(() => {});
  }
});

const T = { timeout: 120_000 };

async function benchJson(args, timeoutMs = 90_000) {
  const r = await H.runMoq(["bench", ...args, "--json"], { timeoutMs });
  assert.equal(r.code, 0, `moq bench ${args.join(" ")} exited ${r.code}\n${r.stderr}`);
  return JSON.parse(r.stdout.toString());
}

const positive = (v, what) => assert.ok(typeof v === "number" && v > 0, `${what}: ${v}`);

test("bench limits: crypto and UDP send cost per byte, measured now", T, async () => {
  const j = await benchJson(["limits", "--seconds", "0.05", "--batches", "1,8", "--gso", "1,16"]);
  positive(j.crypto.seal_ns_per_byte, "seal ns/B");
  positive(j.crypto.open_ns_per_byte, "open ns/B");
  const modes = j.udp.map((u) => `${u.mode}/${u.batch}`);
  assert.deepEqual(modes.sort(), ["gso/1", "gso/16", "sendmmsg/1", "sendmmsg/8"]);
  for (const u of j.udp) positive(u.ns_per_byte, `${u.mode}/${u.batch} ns/B`);
});

test("bench fanout: every frame to every viewer, with the relay's cost against the same run's limit", T, async () => {
  const j = await benchJson(["fanout", "--moqd", H.MOQD_BIN, "--viewers", "6", "--duration", "1s",
    "--limits-seconds", "0.05"]);
  for (const k of ["viewers", "delivered_ratio", "frames_lost", "latency_ms", "bystander_latency_ms",
    "relay_cpu_s", "relay_ns_per_byte", "limit_ns_per_byte", "relay_vs_limit", "throughput_gbps",
    "relay_rss_per_viewer_kb", "relay_heap_per_viewer_kb", "relay_ngtcp2_per_viewer_kb",
    "relay_ngtcp2_blocks_per_viewer", "relay_syscalls_per_packet", "relay_datagrams_per_send",
    "relay_turn_busy_us", "relay_items_per_turn", "relay_slices_cut",
    "generator_cpu_share", "generator_drops", "valid"]) {
    assert.ok(k in j, `missing ${k}`);
  }
  assert.equal(j.viewers, 6);
  assert.ok(j.frames_sent >= 25, `frames sent: ${j.frames_sent}`);
  assert.equal(j.frames_lost, 0);
  assert.equal(j.delivered_ratio, 1);
  for (const k of ["p50", "p99", "p999", "max"]) positive(j.latency_ms[k], `latency ${k}`);
  positive(j.bystander_latency_ms.p50, "bystander p50");
  positive(j.relay_ns_per_byte, "relay ns/B");
  positive(j.limit_ns_per_byte, "limit ns/B");
  positive(j.relay_datagrams_per_send, "datagrams per send");
  // Every frame is write passes on the relay's loop: turn work, in turns that took some time.
  positive(j.relay_items_per_turn, "turn work items per loop turn");
  positive(j.relay_turn_busy_us, "busy time per loop turn");
  // The limit is measured at the mean size of the datagrams the relay sent in this window (bytes
  // over datagrams from its /stats: 1,452-byte data packets on loopback, ACKs, frame tails), not
  // at the probe's default of 1,200 bytes.
  positive(j.relay_datagrams_out, "relay datagrams out");
  const mean = Math.round(j.relay_udp_bytes_out / j.relay_datagrams_out);
  assert.ok(mean > 100 && mean <= 1452, `the relay's mean datagram: ${mean} bytes`);
  assert.equal(j.limit_packet_size, mean);
  // Six viewers' sessions, streams and QUIC state are on the relay's heap (its /stats "heap",
  // glibc's mallinfo2: a sanitizer's allocator bypasses glibc's, which then reports 0).
  if (H.MOQD_SANITIZED) assert.equal(typeof j.relay_heap_per_viewer_kb, "number");
  else positive(j.relay_heap_per_viewer_kb, "relay heap per viewer");
  // What ngtcp2 holds, counted by the allocator moqd hands it (works under a sanitizer too): each
  // viewer's connection struct alone is over 9 KB, in one of its many blocks.
  assert.ok(j.relay_ngtcp2_per_viewer_kb > 9, `ngtcp2 KB per viewer: ${j.relay_ngtcp2_per_viewer_kb}`);
  assert.ok(j.relay_ngtcp2_blocks_per_viewer > 5, `ngtcp2 blocks per viewer: ${j.relay_ngtcp2_blocks_per_viewer}`);
  assert.equal(j.generator_drops, 0);
});

// Viewers keep only the newest group and copy only each frame's 16-byte stamp
// (bench_worker.cc): short groups make every viewer cross many group boundaries, and the bytes
// they count are still every byte of every frame.
test("bench fanout: viewers count every frame and byte across many groups", T, async () => {
  const j = await benchJson(["fanout", "--moqd", H.MOQD_BIN, "--viewers", "4", "--duration", "1s",
    "--group-frames", "3", "--limits-seconds", "0.05"]);
  assert.ok(j.frames_sent >= 25, `frames sent: ${j.frames_sent}`);
  assert.equal(j.frames_lost, 0);
  assert.equal(j.frames_delivered, j.frames_sent * 4);
  const bytes = (j.throughput_gbps * 1e9 / 8) * j.window_s;
  const want = j.frames_delivered * j.frame_size;
  assert.ok(Math.abs(bytes - want) <= want * 0.01, `bytes counted ${bytes}, frames x size ${want}`);
});

test("bench fanout: a generator whose sockets drop datagrams makes the run invalid", T, async () => {
  // 200 KB frames into receive buffers of a few KB. A frame is more than one GSO run (64 datagrams
  // at most), and loopback hands each run over whole (GRO): the first fits an empty buffer, the
  // runs behind it do not.
  const j = await benchJson(["fanout", "--moqd", H.MOQD_BIN, "--viewers", "10", "--duration", "2s",
    "--frame-size", "200000", "--fps", "5", "--socket-buffer", "2048", "--limits-seconds", "0.05"]);
  assert.ok(j.generator_drops > 0, `generator_drops: ${j.generator_drops}`);
  assert.equal(j.valid, false);
  assert.match(j.invalid_reason, /dropped/);
});

test("bench fanout: a run that could not start is reported invalid, with its reason", T, async () => {
  const r = await H.runMoq(["bench", "fanout", "--moqd", "/nonexistent/moqd", "--viewers", "2",
    "--duration", "1s", "--json"], { timeoutMs: 60_000 });
  assert.equal(r.code, 1);
  const j = JSON.parse(r.stdout.toString());
  assert.equal(j.valid, false);
  assert.match(j.invalid_reason, /moqd/);
});

test("bench fanout over a two-relay cluster: viewers dealt round-robin, reported per relay", T, async () => {
  const a = await startClusterRelay(started, "bench-a");
  const b = await startClusterRelay(started, "bench-b", ["--cluster-connect", a.url]);
  await waitLinksUp(b, 1);
  const j = await benchJson(["fanout", "--relay", `${a.url},${b.url}`, "--relay-pid",
    `${a.proc.pid},${b.proc.pid}`, "--viewers", "6", "--duration", "1s", "--limits-seconds", "0.05"]);
  assert.equal(j.frames_lost, 0);
  assert.equal(j.delivered_ratio, 1);
  assert.deepEqual(j.relays.map((r) => r.url), [a.url, b.url]);
  for (const r of j.relays) {
    assert.equal(r.viewers, 3, `${r.url}: viewers`);
    assert.equal(r.frames_delivered, j.frames_sent * 3, `${r.url}: frames`);
    positive(r.bytes, `${r.url}: bytes`);
    positive(r.cpu_s, `${r.url}: CPU`);
    positive(r.ns_per_byte, `${r.url}: ns/B`);
    positive(r.latency_ms.p50, `${r.url}: p50`);
  }
  // Only the viewers of the second relay: the first (the publisher's) serves none.
  const k = await benchJson(["fanout", "--relay", `${a.url},${b.url}`, "--relay-pid",
    `${a.proc.pid},${b.proc.pid}`, "--viewer-relays", "1", "--viewers", "2", "--duration", "1s",
    "--limits-seconds", "0.05"]);
  assert.equal(k.delivered_ratio, 1);
  assert.deepEqual(k.relays.map((r) => r.viewers), [0, 2]);
  assert.equal(k.relays[0].frames_delivered, 0);
});

test("bench msgs: 1->8 and 8->1 chat-shaped messages, relay cost per message", T, async () => {
  const j = await benchJson(["msgs", "--moqd", H.MOQD_BIN, "--duration", "1"]);
  assert.deepEqual(j.msgs.map((m) => [m.publishers, m.subscribers]), [[1, 8], [8, 1]]);
  for (const m of j.msgs) {
    positive(m.messages_delivered, "messages delivered");
    assert.equal(m.messages_delivered, m.messages_sent * m.subscribers);
    positive(m.relay_ns_per_message, "relay ns/message");
    positive(m.relay_packets_per_message, "packets/message");
  }
});
