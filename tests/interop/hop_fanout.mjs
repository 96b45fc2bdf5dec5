// The cluster's costs measured with the native generator (`moq bench fanout`, C++ publisher and
// viewers, each pinned) instead of Node (docs/BENCHMARKS.md). Not a test: prints tables.
//   MOQD_BIN=... MOQ_BIN=... node hop_fanout.mjs latency [ROUNDS] [SECONDS] [VIEWERS]
//     chains of 1 to 4 moqd (relay i+1 --cluster-connect relay i), the publisher on the first and
//     VIEWERS viewers on the last (--viewer-relays); the bench's latency (publish to receive, one
//     clock) p50 and p99 per chain length, lengths alternating (1..4, 4..1, ...) per round.
//   MOQD_BIN=... MOQ_BIN=... node hop_fanout.mjs cpu [ROUNDS] [SECONDS] [VIEWERS]
//     two moqd, B --cluster-connect A, the publisher on A. One run per round with the viewers on
//     B only: A's CPU per byte it forwarded over the relay link (one copy of the track, its
//     publisher's ingest included) next to B's CPU per byte its viewers got (the link's ingest
//     included), both from /proc of each moqd over the same window; then one with the viewers on
//     A only, for A's CPU per viewer byte with no link.
import * as H from "./harness.mjs";
import { startClusterRelay, waitLinksUp } from "./cluster_harness.mjs";

const MODE = process.argv[2] ?? "latency";
const ROUNDS = Number(process.argv[3] ?? 2);
const SECONDS = Number(process.argv[4] ?? 5);
const VIEWERS = Number(process.argv[5] ?? 4);

async function chain(n) {
  const rs = [];
  for (let i = 0; i < n; i++) {
    const args = i > 0 ? ["--cluster-connect", rs[i - 1].url] : [];
    rs.push(await startClusterRelay([], `H${i}`, args, { workers: 1 }));
    if (i > 0) await waitLinksUp(rs[i], 1);
  }
  return rs;
}

async function fanout(rs, viewerRelays, viewers) {
  const args = ["bench", "fanout", "--relay", rs.map((r) => r.url).join(","), "--relay-pid",
    rs.map((r) => r.proc.pid).join(","), "--viewer-relays", viewerRelays.join(","), "--viewers",
    String(viewers), "--duration", `${SECONDS}s`, "--limits-seconds", "0.05", "--json"];
  const r = await H.runMoq(args, { timeoutMs: (SECONDS + 90) * 1_000 });
  if (r.code !== 0) throw new Error(`moq bench fanout exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout.toString());
}

async function latency() {
  const rows = new Map();
  for (let round = 0; round < ROUNDS; round++) {
    for (const n of round % 2 === 0 ? [1, 2, 3, 4] : [4, 3, 2, 1]) {
      const rs = await chain(n);
      const j = await fanout(rs, [n - 1], VIEWERS);
      for (const r of rs) await r.stop();
      const l = j.latency_ms;
      console.error(`round ${round + 1} relays ${n}: p50 ${l.p50.toFixed(2)} p99 ${l.p99.toFixed(2)} ms, ` +
        `delivered ${j.delivered_ratio}${j.valid ? "" : `, invalid: ${j.invalid_reason}`}`);
      if (!rows.has(n)) rows.set(n, []);
      rows.get(n).push(l);
    }
  }
  console.log("| relays | p50 (ms), per round | p99 (ms), per round |");
  console.log("|---|---|---|");
  for (const n of [1, 2, 3, 4]) {
    const ls = rows.get(n);
    console.log(`| ${n} | ${ls.map((l) => l.p50.toFixed(2)).join(" / ")} | ${ls.map((l) => l.p99.toFixed(2)).join(" / ")} |`);
  }
}

async function cpu() {
  console.log("| round | A ns per link byte | B ns per viewer byte (viewers on B) | ratio | A ns per viewer byte (viewers on A) |");
  console.log("|---|---|---|---|---|");
  for (let round = 0; round < ROUNDS; round++) {
    const rs = await chain(2);
    const onB = await fanout(rs, [1], VIEWERS);
    const onA = await fanout(rs, [0], VIEWERS);
    for (const r of rs) await r.stop();
    const [a, b] = onB.relays;
    const linkBytes = b.bytes / b.viewers;  // one copy of what each viewer got
    const aLink = a.cpu_s * 1e9 / linkBytes;
    console.log(`| ${round + 1} | ${aLink.toFixed(1)} | ${b.ns_per_byte.toFixed(1)} | ` +
      `${(aLink / b.ns_per_byte).toFixed(1)} | ${onA.relays[0].ns_per_byte.toFixed(1)} |`);
    console.error(`round ${round + 1}: viewers on B ${JSON.stringify(onB.relays)}; on A ${JSON.stringify(onA.relays)}`);
  }
}

await (MODE === "cpu" ? cpu() : latency());
process.exit(0);
