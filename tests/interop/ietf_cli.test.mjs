// The moq CLI over IETF MoQ Transport (`--versions moq-transport-14|15|16`, IetfSession's client
// role) against moqd: `moq pub` -> moqd -> `moq sub` byte for byte over several groups, for each
// draft, over WebSocket, raw QUIC and WebTransport (moqd's log names the draft each session ran); across
// protocol families (`moq pub` on draft 16 to `moq sub` on moq-lite, and @moq/net 0.3.4 forced to
// draft 16 publishing to `moq sub` on draft 16); `moq announced` on each draft seeing an
// announcement come and go; and `moq bench fanout`, `msgs` and `churn` with every generator
// session on draft 16 (msgs and churn on 14 too). Only moqd's own client speaks IETF on the moq side here: these rows of
// docs/INTEROP.md are "moq against moqd only".
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import * as Net from "@moq/net";
import { waitLog } from "./raw.mjs";

const started = [];
const conns = [];
after(async () => {
  for (const c of conns) {
    try {
      c.close();
    } catch {}
  }
  H.closeAllConnections();
  for (const m of started) await m.stop().catch(() => {});
});

async function moqd(args = []) {
  const m = await H.startMoqd(args);
  started.push(m);
  return m;
}

// moqd serves draft 14 only through SETUP, and only when it is the one SETUP version enabled
// (docs/ARCHITECTURE.md); 15 and 16 by their own ALPNs next to everything else.
const RELAY_ARGS = {
  "moq-transport-16": [],
  "moq-transport-15": [],
  "moq-transport-14": ["--versions", "moq-transport-14,moq-lite-04"],
};

const lp = (frames) =>
  Buffer.concat(
    frames.map((f) => {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(f.length);
      return Buffer.concat([len, H.bytes(f)]);
    }),
  );

// Three groups of two frames (--group-every 2): binary, an empty one, one over a QUIC packet.
const FRAMES = [
  H.text("sync"),
  H.randomFrame(40_000),
  new Uint8Array(0),
  H.randomFrame(17),
  H.randomFrame(1),
  H.randomFrame(3000),
];

// How many sessions moqd started on `version` (its "session N start ... version=V" lines).
const sessions = (m, version) =>
  (m.stderrText().match(new RegExp(`session \\d+ start .* version=${version} `, "g")) ?? []).length;

// `moq pub` on pubVersions -> moqd -> `moq sub` on subVersions, byte for byte: the first frame
// keeps group 0 open while the subscriber joins; the rest follow, then EOF, which ends the track
// at the subscriber (moq sub exits 0 on its own).
async function pubToSub(m, { pubVersions, subVersions, transport }) {
  const p = `${H.uniquePrefix("ietfcli")}/alice`;
  const pub = H.spawnMoq(["pub", m.url, p, "--track", "video", "--group-every", "2", "--length-prefixed",
    "--versions", pubVersions, "--transport", transport]);
  let sub;
  try {
    pub.write(lp(FRAMES.slice(0, 1)));
    // The subscriber waits for the announcement (discovery), so it may start before the relay has it.
    sub = H.spawnMoq(["sub", m.url, p, "--track", "video", "--length-prefixed",
      "--versions", subVersions, "--transport", transport]);
    await sub.waitStdout((out) => out.length >= 4 + FRAMES[0].length, 10_000, "the first frame").catch((err) => {
      throw new Error(`${err.message}\n${pub.describe()}\nmoqd:\n${m.stderrText()}`);
    });
    pub.write(lp(FRAMES.slice(1)));
    pub.endStdin();
    const expected = lp(FRAMES);
    await sub.waitStdout((out) => out.length >= expected.length, 10_000, "every frame");
    const subExit = await sub.wait(10_000, "moq sub to exit at the end of the track");
    assert.deepEqual(subExit, { code: 0, signal: null }, sub.describe());
    assert.deepStrictEqual(sub.stdout(), expected);
    const pubExit = await pub.wait(10_000, "moq pub to exit after stdin EOF");
    assert.deepEqual(pubExit, { code: 0, signal: null }, pub.describe());
  } finally {
    await pub.stop().catch(() => {});
    if (sub) await sub.stop().catch(() => {});
  }
}

for (const version of ["moq-transport-16", "moq-transport-15", "moq-transport-14"]) {
  for (const transport of ["ws", "quic", "wt"]) {
    test(`moq pub -> moqd -> moq sub over ${version} (${transport}), byte for byte, three groups, end of track`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
      const m = await moqd(RELAY_ARGS[version]);
      await pubToSub(m, { pubVersions: version, subVersions: version, transport });
      // Both ends ran the draft (not moq-lite): moqd started two sessions of it.
      assert.equal(sessions(m, version), 2, m.stderrText());
    });
  }
}

test("cross-protocol: moq pub over moq-transport-16 -> moqd -> moq sub over moq-lite-04", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd();
  await pubToSub(m, { pubVersions: "moq-transport-16", subVersions: "moq-lite-04", transport: "ws" });
  assert.equal(sessions(m, "moq-transport-16"), 1, m.stderrText());
  assert.equal(sessions(m, "moq-lite-04"), 1, m.stderrText());
});

test("cross-protocol: @moq/net 0.3.4 forced to moq-transport-16 publishes -> moq sub over moq-transport-16 (QUIC)", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  // moqd offers @moq/net (moq-lite-03+ and the IETF drafts over WebSocket) only draft 16.
  const m = await moqd(["--versions", "moq-lite-02,moq-transport-16"]);
  const net = await H.withDeadline(Net.Connection.connect(new URL(m.url)), 10_000, "@moq/net connect");
  conns.push(net);
  assert.equal(net.version, "moq-transport-16");
  const p = `${H.uniquePrefix("ietfnet")}/alice`;
  const groups = [[FRAMES[0], FRAMES[1]], [FRAMES[2], FRAMES[3]], [FRAMES[4], FRAMES[5]]];
  const joined = H.gate();
  const broadcast = new Net.Broadcast.Producer();
  net.publish(Net.Path.from(p), broadcast);
  (async () => {
    const req = await broadcast.requested();
    if (!req) return;
    const track = req.accept();
    let ts = 0;
    for (const [i, frames] of groups.entries()) {
      const g = track.appendGroup();
      for (const [j, payload] of frames.entries()) {
        g.writeFrame({ payload, timestamp: Net.Time.Timestamp.fromMillis(ts++) });
        if (i === 0 && j === 0) await joined.wait; // group 0 open until moq sub has its first frame
      }
      g.close();
    }
    track.close();
  })().catch((err) => console.error("net publisher", err));
  const sub = H.spawnMoq(["sub", m.url, p, "--track", "video", "--length-prefixed",
    "--versions", "moq-transport-16", "--transport", "quic"]);
  try {
    await sub.waitStdout((out) => out.length >= 4 + FRAMES[0].length, 10_000, "the first frame");
    joined.open();
    const expected = lp(FRAMES);
    await sub.waitStdout((out) => out.length >= expected.length, 10_000, "every frame");
    const exit = await sub.wait(10_000, "moq sub to exit at the end of the track");
    assert.deepEqual(exit, { code: 0, signal: null }, sub.describe());
    assert.deepStrictEqual(sub.stdout(), expected);
    assert.equal(sessions(m, "moq-transport-16"), 2, m.stderrText());
  } finally {
    await sub.stop().catch(() => {});
  }
  net.close();
});

for (const version of ["moq-transport-16", "moq-transport-15", "moq-transport-14"]) {
  test(`moq announced over ${version} sees a moq pub announcement come and go`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(RELAY_ARGS[version]);
    const prefix = H.uniquePrefix("ietfann");
    const ann = H.spawnMoq(["announced", m.url, prefix, "--versions", version, "--transport", "ws"]);
    try {
      // Discovery is set up (moqd answered SUBSCRIBE_NAMESPACE) before the publisher comes.
      await waitLog(m, new RegExp(`session \\d+ start .* version=${version} `), 10_000);
      const pub = H.spawnMoq(["pub", m.url, `${prefix}/bob`, "--track", "t", "--linger", "0.2",
        "--versions", version, "--transport", "ws"]);
      const line = (l) => (out) => out.toString().split("\n").includes(l);
      await ann.waitStdout(line(`active ${prefix}/bob`), 10_000, "the announcement");
      pub.endStdin();
      assert.deepEqual(await pub.wait(10_000, "moq pub to exit"), { code: 0, signal: null }, pub.describe());
      await ann.waitStdout(line(`ended ${prefix}/bob`), 10_000, "the end of the announcement");
      assert.equal(ann.stdoutText(), `active ${prefix}/bob\nended ${prefix}/bob\n`);
      assert.equal(sessions(m, version), 2, m.stderrText());
    } finally {
      await ann.stop().catch(() => {});
    }
  });
}

test("moq bench fanout --versions moq-transport-16: the publisher and every viewer over draft 16, every frame delivered", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  // moqd would pick moq-lite-04 for a client offering both: only --versions makes it draft 16.
  const m = await moqd(["--versions", "moq-transport-16,moq-lite-04"]);
  const r = await H.runMoq(["bench", "fanout", "--relay", m.url, "--relay-pid", String(m.proc.pid),
    "--viewers", "4", "--duration", "1s", "--limits-seconds", "0.05", "--transport", "ws",
    "--versions", "moq-transport-16", "--json"], { timeoutMs: 25_000 });
  assert.equal(r.code, 0, `moq bench exited ${r.code}\n${r.stderr}\nmoqd:\n${m.stderrText()}`);
  const j = JSON.parse(r.stdout.toString());
  assert.equal(j.viewers, 4);
  assert.ok(j.frames_sent >= 25, `frames sent: ${j.frames_sent}`);
  assert.equal(j.frames_lost, 0);
  assert.equal(j.delivered_ratio, 1);
  assert.equal(j.valid, true);
  // The publisher and four viewers at least (the bystander too), all on draft 16.
  assert.ok(sessions(m, "moq-transport-16") >= 5, m.stderrText());
  assert.equal(sessions(m, "moq-lite-04"), 0, m.stderrText());
});

// `moq bench msgs` and `moq bench churn` with --versions: every generator session on the draft
// (moqd would pick moq-lite-04 for a client offering everything), every message delivered to
// every subscriber, every connect/ready/close cycle done.
async function benchMsgs(m, version, transport) {
  const r = await H.runMoq(["bench", "msgs", "--relay", m.url, "--relay-pid", String(m.proc.pid),
    "--publishers", "2", "--subscribers", "3", "--duration", "1", "--rate", "200",
    "--transport", transport, "--versions", version, "--json"], { timeoutMs: 40_000 });
  assert.equal(r.code, 0, `moq bench msgs exited ${r.code}\n${r.stderr}\nmoqd:\n${m.stderrText()}`);
  const [c] = JSON.parse(r.stdout.toString()).msgs;
  assert.equal(c.versions, version);
  assert.ok(c.messages_sent >= 100, `messages sent: ${c.messages_sent}`);
  assert.equal(c.messages_delivered, c.messages_sent * 3, `delivered ${c.messages_delivered} of ${c.messages_sent} x 3`);
  assert.equal(sessions(m, version), 5, m.stderrText());  // two publishers, three subscribers
  assert.equal(sessions(m, "moq-lite-04"), 0, m.stderrText());
}

async function benchChurn(m, version) {
  const r = await H.runMoq(["bench", "churn", "--relay", m.url, "--relay-pid", String(m.proc.pid),
    "--warmup", "10", "--cycles", "60", "--concurrency", "6", "--settle", "0.5", "--margin", "100",
    "--versions", version, "--json"], { timeoutMs: 60_000 });
  assert.equal(r.code, 0, `moq bench churn exited ${r.code}\n${r.stderr}\nmoqd:\n${m.stderrText()}`);
  const j = JSON.parse(r.stdout.toString());
  assert.equal(j.versions, version);
  assert.deepEqual([j.done, j.failed, j.warmup_failed], [60, 0, 0]);
  assert.deepEqual([j.websocket, j.quic], [30, 30]);
  assert.equal(sessions(m, version), 70, m.stderrText());
  assert.equal(sessions(m, "moq-lite-04"), 0, m.stderrText());
}

for (const [version, transport] of [["moq-transport-14", "quic"], ["moq-transport-16", "ws"]]) {
  test(`moq bench msgs --versions ${version} (${transport}): every message to every subscriber over the draft`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    await benchMsgs(await moqd(["--versions", `${version},moq-lite-04`]), version, transport);
  });
  test(`moq bench churn --versions ${version}: every cycle done over the draft (WebSocket and QUIC)`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    await benchChurn(await moqd(["--versions", `${version},moq-lite-04`]), version);
  });
}
