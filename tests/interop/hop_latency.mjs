// Measures the latency a relay hop adds (docs/BENCHMARKS.md): chains of 1 to 4 moqd on 127.0.0.1
// (relay i+1 --cluster-connect relay i), a @moq/lite publisher on the first and a viewer on the
// last, in this process, so one clock stamps and reads each frame. A frame every FRAME_MS carries
// its send time; the viewer's latency samples after WARMUP_MS give p50 and p99 per chain length.
// Chain lengths are run in alternating order (1..4, 4..1, ...) for ROUNDS rounds, so a load
// change on a shared machine falls on every length alike. Not a test: prints a table.
//   MOQD_BIN=... node hop_latency.mjs [ROUNDS] [SECONDS]
import * as H from "./harness.mjs";

H.useTeardownGuards();

const ROUNDS = Number(process.argv[2] ?? 3);
const SECONDS = Number(process.argv[3] ?? 5);
const FRAME_MS = 20;
const WARMUP_MS = 1_000;

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function chain(n) {
  const rs = [];
  for (let i = 0; i < n; i++) {
    const args = ["--cluster-node", `L${i}`, "--metrics-listen", "127.0.0.1:0"];
    if (i > 0) args.push("--cluster-connect", rs[i - 1].url);
    rs.push(await H.startMoqd(args));
  }
  return rs;
}

async function measure(n) {
  const rs = await chain(n);
  const pubConn = await H.connect(rs[0].url);
  const broadcast = new H.Moq.Broadcast();
  pubConn.publish("lat/cam", broadcast);
  let stop = false;
  (async () => {
    const req = await broadcast.requested();
    if (!req) return;
    let seq = 0;
    while (!stop) {
      const g = new H.Moq.Group(seq++);
      req.track.writeGroup(g);
      const stamp = Buffer.alloc(8);
      stamp.writeDoubleBE(performance.now());
      g.writeFrame(stamp);
      g.close();
      await H.pace(FRAME_MS);
    }
  })().catch(() => {});
  const viewConn = await H.connect(rs[n - 1].url);
  await H.waitActive(viewConn, "lat/cam", { ms: 15_000 });
  const track = viewConn.consume("lat/cam").subscribe("video", 0);
  const samples = [];
  const start = performance.now();
  const reading = (async () => {
    for (;;) {
      const g = await track.recvGroup();
      if (!g) break;
      const frame = await g.readFrame();
      const now = performance.now();
      if (frame && now - start > WARMUP_MS) samples.push(now - Buffer.from(frame).readDoubleBE(0));
    }
  })().catch(() => {});
  await H.pace(WARMUP_MS + SECONDS * 1_000);  // the measured window (a duration, not a sync)
  track.close();
  void reading;
  stop = true;
  broadcast.close();
  H.closeConnection(viewConn);
  H.closeConnection(pubConn);
  for (const r of rs) await r.stop();
  samples.sort((a, b) => a - b);
  return { n, count: samples.length, p50: pct(samples, 50), p99: pct(samples, 99) };
}

const results = new Map();
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? [1, 2, 3, 4] : [4, 3, 2, 1];
  for (const n of order) {
    const r = await measure(n);
    console.error(`round ${round + 1} hops ${n}: ${r.count} frames p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms`);
    if (!results.has(n)) results.set(n, []);
    results.get(n).push(r);
  }
}
console.log("| relays | p50 (ms), per round | p99 (ms), per round |");
console.log("|---|---|---|");
for (const n of [1, 2, 3, 4]) {
  const rs = results.get(n);
  console.log(`| ${n} | ${rs.map((r) => r.p50.toFixed(2)).join(" / ")} | ${rs.map((r) => r.p99.toFixed(2)).join(" / ")} |`);
}
process.exit(0);
