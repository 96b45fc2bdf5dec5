// The moq CLI over IETF MoQ Transport drafts 17 to 20 (`--versions moq-transport-17..20`,
// IetfSession's client role: SETUP on uni streams, a bidi stream per request) against moqd:
// `moq pub` -> moqd -> `moq sub` byte for byte over several groups for each draft, over WebSocket
// (qmux), raw QUIC and WebTransport (draft 19 has no WebSocket form in the protocol table, as
// @moq/net 0.3.4 offers none: QUIC and WebTransport only); moqd's log names the draft both
// sessions ran. `moq announced` on each draft sees a `moq pub` become active and end; `moq pub` on
// draft 20 reaches `moq sub` on draft 16 and on moq-lite-04; `moq sub` on 17 and 20 reads an
// @moq/net 0.3.4 publisher forced to the same draft (the third-party side of these rows); and
// `moq bench fanout --versions moq-transport-20` runs its publisher and viewers on draft 20, and
// `moq bench msgs` and `churn` every session; and `moq sub` on draft 20 follows a GOAWAY to a
// second moqd. About 25 s in all.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import { closeNetConnections, netConnect, netPublish } from "./net_client.mjs";
import { waitLog } from "./raw.mjs";

const started = [];
after(async () => {
  closeNetConnections();
  H.closeAllConnections();
  for (const m of started) await m.stop().catch(() => {});
  for (const m of started) assert.doesNotMatch(m.stderrText(), /ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer/);
});

async function moqd(args = []) {
  const m = await H.startMoqd(args);
  started.push(m);
  return m;
}

const DRAFTS = ["moq-transport-17", "moq-transport-18", "moq-transport-19", "moq-transport-20"];
const TRANSPORTS = {
  "moq-transport-17": ["ws", "quic", "wt"],
  "moq-transport-18": ["ws", "quic", "wt"],
  "moq-transport-19": ["quic", "wt"],
  "moq-transport-20": ["ws", "quic", "wt"],
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

const sessions = (m, version) =>
  (m.stderrText().match(new RegExp(`session \\d+ start .* version=${version} `, "g")) ?? []).length;

// `moq pub` on pubVersions -> moqd -> `moq sub` on subVersions, byte for byte; EOF on the
// publisher's stdin ends the track, and both exit 0 on their own.
async function pubToSub(m, { pubVersions, subVersions, transport }) {
  const p = `${H.uniquePrefix("ietfcli17")}/alice`;
  const pub = H.spawnMoq(["pub", m.url, p, "--track", "video", "--group-every", "2", "--length-prefixed",
    "--versions", pubVersions, "--transport", transport]);
  let sub;
  try {
    pub.write(lp(FRAMES.slice(0, 1)));
    sub = H.spawnMoq(["sub", m.url, p, "--track", "video", "--length-prefixed",
      "--versions", subVersions, "--transport", transport]);
    await sub.waitStdout((out) => out.length >= 4 + FRAMES[0].length, 10_000, "the first frame").catch((err) => {
      throw new Error(`${err.message}\n${pub.describe()}\n${sub.describe()}\nmoqd:\n${m.stderrText()}`);
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

for (const version of DRAFTS) {
  for (const transport of TRANSPORTS[version]) {
    test(`moq pub -> moqd -> moq sub over ${version} (${transport}), byte for byte, three groups, end of track`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
      const m = await moqd();
      await pubToSub(m, { pubVersions: version, subVersions: version, transport });
      assert.equal(sessions(m, version), 2, m.stderrText());
    });
  }
}

for (const version of DRAFTS) {
  const transport = version === "moq-transport-19" ? "quic" : "ws";
  test(`moq announced over ${version} (${transport}) sees a moq pub announcement come and go`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd();
    const prefix = H.uniquePrefix("ietfann17");
    const ann = H.spawnMoq(["announced", m.url, prefix, "--versions", version, "--transport", transport]);
    try {
      await waitLog(m, new RegExp(`session \\d+ start .* version=${version} `), 10_000);
      const pub = H.spawnMoq(["pub", m.url, `${prefix}/bob`, "--track", "t", "--linger", "0.2",
        "--versions", version, "--transport", transport]);
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

for (const subVersion of ["moq-transport-16", "moq-lite-04"]) {
  test(`cross-draft: moq pub over moq-transport-20 -> moqd -> moq sub over ${subVersion} (ws)`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd();
    await pubToSub(m, { pubVersions: "moq-transport-20", subVersions: subVersion, transport: "ws" });
    assert.equal(sessions(m, "moq-transport-20"), 1, m.stderrText());
    assert.equal(sessions(m, subVersion), 1, m.stderrText());
  });
}

// @moq/net 0.3.4 over WebSocket, forced to the draft by moqd's --versions (it offers 17 as
// qmux-NN.moqt-17 and 20 as qmux-01.moqt-20), publishes three groups and ends the track; `moq sub`
// on the same draft over QUIC reads them byte for byte and exits at the end of the track.
for (const version of ["moq-transport-17", "moq-transport-20"]) {
  test(`third-party: @moq/net 0.3.4 forced to ${version} publishes -> moqd -> moq sub over ${version} (QUIC)`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(["--versions", `moq-lite-02,${version}`]);
    const net = await netConnect(m.url);
    assert.equal(net.version, version);
    const p = `${H.uniquePrefix("ietfnet17")}/alice`;
    const groups = [[FRAMES[0], FRAMES[1]], [FRAMES[2], FRAMES[3]], [FRAMES[4], FRAMES[5]]];
    const joined = H.gate();
    netPublish(net, p, groups, { before: (i) => (i === 1 ? joined.wait : Promise.resolve()), end: true });
    const sub = H.spawnMoq(["sub", m.url, p, "--track", "video", "--length-prefixed",
      "--versions", version, "--transport", "quic"]);
    try {
      await sub.waitStdout((out) => out.length >= lp(groups[0]).length, 10_000, "group 0").catch((err) => {
        throw new Error(`${err.message}\n${sub.describe()}\nmoqd:\n${m.stderrText()}`);
      });
      joined.open();
      const expected = lp(FRAMES);
      await sub.waitStdout((out) => out.length >= expected.length, 10_000, "every frame");
      const exit = await sub.wait(10_000, "moq sub to exit at the end of the track");
      assert.deepEqual(exit, { code: 0, signal: null }, sub.describe());
      assert.deepStrictEqual(sub.stdout(), expected);
      assert.equal(sessions(m, version), 2, m.stderrText());
    } finally {
      await sub.stop().catch(() => {});
    }
    net.close();
  });
}

test("moq bench fanout --versions moq-transport-20: the publisher and every viewer over draft 20, every frame delivered", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd(["--versions", "moq-transport-20,moq-lite-04"]);
  const r = await H.runMoq(["bench", "fanout", "--relay", m.url, "--relay-pid", String(m.proc.pid),
    "--viewers", "4", "--duration", "1s", "--limits-seconds", "0.05", "--transport", "ws",
    "--versions", "moq-transport-20", "--json"], { timeoutMs: 25_000 });
  assert.equal(r.code, 0, `moq bench exited ${r.code}\n${r.stderr}\nmoqd:\n${m.stderrText()}`);
  const j = JSON.parse(r.stdout.toString());
  assert.equal(j.viewers, 4);
  assert.ok(j.frames_sent >= 25, `frames sent: ${j.frames_sent}`);
  assert.equal(j.frames_lost, 0);
  assert.equal(j.delivered_ratio, 1);
  assert.equal(j.valid, true);
  assert.ok(sessions(m, "moq-transport-20") >= 5, m.stderrText());
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

test("moq bench msgs --versions moq-transport-20 (quic): every message to every subscriber over draft 20", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  await benchMsgs(await moqd(["--versions", "moq-transport-20,moq-lite-04"]), "moq-transport-20", "quic");
});

test("moq bench churn --versions moq-transport-20: every cycle done over draft 20 (WebSocket and QUIC)", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  await benchChurn(await moqd(["--versions", "moq-transport-20,moq-lite-04"]), "moq-transport-20");
});

// GOAWAY on draft 20 (the relay's SETUP stream): `moq sub` on moqd A, where nothing is published
// yet, follows A's GOAWAY (SIGTERM, --goaway-url B) to moqd B, where `moq pub` on draft 20 is, and
// reads the whole track there byte for byte.
test("moq sub over moq-transport-20 (QUIC) follows a GOAWAY to a second moqd and reads the track there", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const b = await moqd();
  const a = await moqd(["--goaway-url", b.url, "--drain-timeout", "4s"]);
  const p = `${H.uniquePrefix("ietfgoaway")}/alice`;
  const v = ["--versions", "moq-transport-20", "--transport", "quic"];
  const pub = H.spawnMoq(["pub", b.url, p, "--track", "video", "--group-every", "2", "--length-prefixed", ...v]);
  const sub = H.spawnMoq(["sub", a.url, p, "--track", "video", "--length-prefixed", ...v]);
  try {
    pub.write(lp(FRAMES.slice(0, 1)));
    await waitLog(a, /session \d+ start .* version=moq-transport-20 /, 10_000);
    const stopped = a.stop({ ms: 10_000 });
    await H.waitFor(() => /goaway sent uri=http:\/\/127\.0\.0\.1:\d+\//.test(a.stderrText()), 5_000, "A's GOAWAY");
    await H.waitFor(() => /moq: relay sent GOAWAY; moving to http:\/\/127\.0\.0\.1/.test(sub.stderrText()), 5_000,
      () => `moq sub to follow the GOAWAY\n${sub.describe()}\nA:\n${a.stderrText()}`);
    await sub.waitStdout((out) => out.length >= 4 + FRAMES[0].length, 10_000, "the first frame through B");
    pub.write(lp(FRAMES.slice(1)));
    pub.endStdin();
    const expected = lp(FRAMES);
    await sub.waitStdout((out) => out.length >= expected.length, 10_000, "every frame");
    assert.deepEqual(await sub.wait(10_000, "moq sub to exit at the end of the track"), { code: 0, signal: null }, sub.describe());
    assert.deepStrictEqual(sub.stdout(), expected);
    assert.deepEqual(await stopped, { code: 0, signal: null }, a.describe());
    assert.equal(sessions(b, "moq-transport-20"), 2, b.stderrText());
  } finally {
    await pub.stop().catch(() => {});
    await sub.stop().catch(() => {});
  }
});
