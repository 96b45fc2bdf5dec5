// Graceful drain: on SIGTERM moqd stops accepting, sends GOAWAY (moq-lite-04) naming
// --goaway-url, and closes the sessions still there at half of --drain-timeout with going_away
// (27); sessions whose version has no GOAWAY (lite-01/02) are closed with going_away at once.
// `moq sub` follows a GOAWAY to the new relay and resubscribes, losing at most the groups in
// flight; moqd exits 0.
// scripts/test.sh runs this file alone (see interop() there): sessions must close 1.5-4 s after SIGTERM.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import * as H from "./harness.mjs";

const T = { timeout: 40_000 };
const started = [];
const publishers = [];
after(async () => {
  for (const p of publishers) p.stop();  // a test that failed midway left its timer running
  H.closeAllConnections();
  for (const m of started) {
    if (m.proc.exitCode === null && m.proc.signalCode === null) await m.stop().catch(() => {});
  }
});
async function moqd(args) {
  const m = await H.startMoqd(args);
  started.push(m);
  return m;
}

// One publisher on several relays: every tick writes group n (two frames "g<n> f<k>") to the
// track on every relay that subscribed, with the same sequence number everywhere, as one encoder
// feeding several relays would.
function publishEverywhere(conns, p) {
  const tracks = new Set();
  for (const conn of conns) {
    const broadcast = new H.Moq.Broadcast();
    conn.publish(p, broadcast);
    (async () => {
      for (;;) {
        const req = await broadcast.requested();
        if (!req) break;
        tracks.add(req.track);
        req.track.closed.finally(() => tracks.delete(req.track)).catch(() => {});
      }
    })().catch(() => {});
  }
  let n = 0;
  const timer = setInterval(() => {
    for (const track of tracks) {
      try {
        const g = new H.Moq.Group(n);
        track.writeGroup(g);
        g.writeFrame(H.text(`g${n} f0`));
        g.writeFrame(H.text(`g${n} f1`));
        g.close();
      } catch {
        tracks.delete(track);
      }
    }
    n++;
  }, 100);
  const publisher = { stop: () => clearInterval(timer), current: () => n };
  publishers.push(publisher);
  return publisher;
}

const parse = (text) =>
  text.split("\n").filter(Boolean).map((l) => {
    const m = /^g(\d+) f(\d+)$/.exec(l);
    assert.ok(m, `unexpected output line ${JSON.stringify(l)}`);
    return [Number(m[1]), Number(m[2])];
  });

test("SIGTERM with --goaway-url moves a live moq sub to a second moqd, losing at most the groups in flight", T, async () => {
  const b = await moqd([]);
  const a = await moqd(["--goaway-url", b.url, "--drain-timeout", "8s"]);
  const p = H.uniquePrefix("goaway");
  const conns = [await H.connect(a.url), await H.connect(b.url)];
  const pub = publishEverywhere(conns, p);
  const sub = H.spawnMoq(["sub", a.url, p, "--track", "video"]);
  await sub.waitStdout((out) => parse(out.toString()).length >= 10, 10_000, "10 frames through moqd A");
  const atSigterm = pub.current();
  const stopped = a.stop({ ms: 10_000 });
  await H.waitFor(() => /goaway sent uri=http:\/\/127\.0\.0\.1:\d+\//.test(a.stderrText()), 5_000,
    () => `A's GOAWAY: ${a.describe()}`);
  await H.waitFor(() => /moq: relay sent GOAWAY; moving to http:\/\/127\.0\.0\.1/.test(sub.stderrText()), 5_000,
    "moq sub to follow the GOAWAY");
  assert.deepEqual(await stopped, { code: 0, signal: null }, a.describe());
  // The subscriber keeps going on B well past the switch.
  await sub.waitStdout((out) => {
    const frames = parse(out.toString());
    return frames.length > 0 && frames.at(-1)[0] >= atSigterm + 20;
  }, 10_000, "frames from moqd B after the switch");
  assert.match(b.stderrText(), /transport=quic version=moq-lite-05/);
  assert.equal(sub.proc.exitCode, null, sub.describe());
  const frames = parse(sub.stdoutText());
  // In order, nothing twice, and at most the groups in flight lost at the switch.
  for (let i = 1; i < frames.length; i++) {
    const [g0, f0] = frames[i - 1];
    const [g1, f1] = frames[i];
    assert.ok(g1 > g0 || (g1 === g0 && f1 > f0), `out of order or repeated at ${i}: ${frames[i - 1]} -> ${frames[i]}`);
  }
  const groups = [...new Set(frames.map(([g]) => g))];
  const missing = groups.at(-1) - groups[0] + 1 - groups.length;
  assert.ok(missing <= 2, `lost ${missing} groups across the move (seen ${groups.join(",")})`);
  await sub.stop();
  pub.stop();
  for (const c of conns) H.closeConnection(c);
  await H.stopMoqdClean(b);
});

test("a client that ignores GOAWAY is closed at the deadline; a lite-02 session at once; moqd exits 0", T, async () => {
  // GOAWAY names a relay that is not there, so `moq sub` cannot move and stays; `moq pub` does
  // not follow GOAWAY at all. Both speak moq-lite-05 over QUIC.
  const a = await moqd(["--goaway-url", "http://127.0.0.1:9/", "--drain-timeout", "4s"]);
  const p = H.uniquePrefix("deadline");
  const pub = H.spawnMoq(["pub", a.url, p, "--track", "video"]);
  let n = 0;
  const timer = setInterval(() => pub.write(`g${n++} f0\n`), 50);
  const sub = H.spawnMoq(["sub", a.url, p, "--track", "video"]);
  await sub.waitStdout((out) => parse(out.toString()).length >= 3, 10_000, "frames before SIGTERM");
  const lite02 = await H.connect(a.url);  // @moq/lite over WebSocket: lite-02, no GOAWAY
  await H.waitFor(() => /version=moq-lite-02/.test(a.stderrText()), 5_000, "the lite-02 session");
  const t0 = Date.now();
  const stopped = a.stop({ ms: 8_000 });
  await H.withDeadline(lite02.closed.catch(() => {}), 1_500, "the lite-02 session to be closed at once");
  const result = await sub.wait(8_000, "moq sub to be closed at the deadline");
  const closedAfter = Date.now() - t0;
  assert.equal(result.code, 1, sub.describe());
  assert.match(sub.stderrText(), /going_away/, sub.describe());
  assert.ok(closedAfter >= 1_500 && closedAfter < 4_000, `closed ${closedAfter} ms after SIGTERM (deadline 2 s)`);
  assert.match(a.stderrText(), /session \d+ closing peer=\S+ version=moq-lite-02 code=27/);
  assert.deepEqual(await stopped, { code: 0, signal: null }, a.describe());
  clearInterval(timer);
  await pub.stop().catch(() => {});
});
