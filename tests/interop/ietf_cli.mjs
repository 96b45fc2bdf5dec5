// The moq CLI against moqd over the IETF drafts, as ietf_cli.test.mjs (drafts 14-16) and
// ietf_cli_d17.test.mjs (17-20) drive it: the frames they send and their --length-prefixed form,
// how many sessions moqd ran on a draft, and the cases both files run for each draft they name
// (pubSubTests, announcedTests, benchFanoutTest), with moq sub reading a whole track byte for byte
// (subReadsTrack) under them and under the files' own cases.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { waitLog } from "./raw.mjs";

// Frames as `moq pub --length-prefixed` reads them and `moq sub --length-prefixed` prints them.
export const lp = H.lengthPrefixed;

// Three groups of two frames (--group-every 2): binary, an empty one, one over a QUIC packet.
export const FRAMES = [
  H.text("sync"),
  H.randomFrame(40_000),
  new Uint8Array(0),
  H.randomFrame(17),
  H.randomFrame(1),
  H.randomFrame(3000),
];
export const GROUPS = [[FRAMES[0], FRAMES[1]], [FRAMES[2], FRAMES[3]], [FRAMES[4], FRAMES[5]]];

// How many sessions moqd started on `version` (its "session N start ... version=V" lines).
export const sessions = (m, version) =>
  (m.stderrText().match(new RegExp(`session \\d+ start .* version=${version} `, "g")) ?? []).length;

// `sub` (a spawned `moq sub --length-prefixed`) reads the whole of FRAMES and exits 0 at the end
// of the track: once it printed `joinedAt` bytes, `joined()` lets the publisher go on.
export async function subReadsTrack(m, sub, { joinedAt, joined, what = "the first frame", describe = () => "" }) {
  await sub.waitStdout((out) => out.length >= joinedAt, 10_000, what).catch((err) => {
    throw new Error(`${err.message}\n${describe()}${sub.describe()}\nmoqd:\n${m.stderrText()}`);
  });
  await joined();
  const expected = lp(FRAMES);
  await sub.waitStdout((out) => out.length >= expected.length, 10_000, "every frame");
  const exit = await sub.wait(10_000, "moq sub to exit at the end of the track");
  assert.deepEqual(exit, { code: 0, signal: null }, sub.describe());
  assert.deepStrictEqual(sub.stdout(), expected);
}

// `moq pub` on pubVersions -> moqd -> `moq sub` on subVersions, byte for byte: the first frame
// keeps group 0 open while the subscriber joins; the rest follow, then EOF, which ends the track
// at the subscriber (moq sub exits 0 on its own) and moq pub exits 0.
export async function pubToSub(m, { pubVersions, subVersions, transport }) {
  const p = `${H.uniquePrefix("ietfcli")}/alice`;
  const pub = H.spawnMoq(["pub", m.url, p, "--track", "video", "--group-every", "2", "--length-prefixed",
    "--versions", pubVersions, "--transport", transport]);
  let sub;
  try {
    pub.write(lp(FRAMES.slice(0, 1)));
    // The subscriber waits for the announcement (discovery), so it may start before the relay has it.
    sub = H.spawnMoq(["sub", m.url, p, "--track", "video", "--length-prefixed",
      "--versions", subVersions, "--transport", transport]);
    await subReadsTrack(m, sub, {
      joinedAt: 4 + FRAMES[0].length,
      joined: () => {
        pub.write(lp(FRAMES.slice(1)));
        pub.endStdin();
      },
      describe: () => `${pub.describe()}\n`,
    });
    const pubExit = await pub.wait(10_000, "moq pub to exit after stdin EOF");
    assert.deepEqual(pubExit, { code: 0, signal: null }, pub.describe());
  } finally {
    await pub.stop().catch(() => {});
    if (sub) await sub.stop().catch(() => {});
  }
}

// For each draft of `transports` (draft -> its transports), each transport: `moq pub` -> moqd ->
// `moq sub` both on the draft, byte for byte, on a moqd started with relayArgs[draft].
export function pubSubTests(moqd, transports, relayArgs = {}) {
  for (const [version, list] of Object.entries(transports)) {
    for (const transport of list) {
      test(`moq pub -> moqd -> moq sub over ${version} (${transport}), byte for byte, three groups, end of track`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
        const m = await moqd(relayArgs[version] ?? []);
        await pubToSub(m, { pubVersions: version, subVersions: version, transport });
        // Both ends ran the draft (not moq-lite): moqd started two sessions of it.
        assert.equal(sessions(m, version), 2, m.stderrText());
      });
    }
  }
}

// For each draft of `transports` (draft -> one transport): `moq announced` on it sees a `moq pub`
// on it become active and end, and prints nothing else.
export function announcedTests(moqd, transports, relayArgs = {}) {
  for (const [version, transport] of Object.entries(transports)) {
    test(`moq announced over ${version} (${transport}) sees a moq pub announcement come and go`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
      const m = await moqd(relayArgs[version] ?? []);
      const prefix = H.uniquePrefix("ietfann");
      const ann = H.spawnMoq(["announced", m.url, prefix, "--versions", version, "--transport", transport]);
      try {
        // Discovery is set up (moqd answered SUBSCRIBE_NAMESPACE) before the publisher comes.
        await waitLog(m, new RegExp(`session \\d+ start .* version=${version} `), 10_000);
        const pub = H.spawnMoq(["pub", m.url, `${prefix}/bob`, "--track", "t", "--linger", "0.2",
          "--versions", version, "--transport", transport]);
        const line = (l) => (out) => out.toString().split("\n").includes(l);
        await ann.waitStdout(line(`active ${prefix}/bob`), 10_000, "the announcement");
        pub.endStdin();
        assert.deepEqual(await pub.wait(10_000, "moq pub to exit"), { code: 0, signal: null }, pub.describe());
        await ann.waitStdout(line(`ended ${prefix}/bob`), 10_000, "the end of the announcement");
        assert.equal(ann.stdoutText(), `active ${prefix}/bob\nended ${prefix}/bob\n`);
        // moqd writes its log from a background thread: the publisher's "session ... start" line
        // may come after its announcement did (seen on main, 1 run in 21 on a busy machine).
        await H.waitFor(() => sessions(m, version) >= 2, 5_000, "moqd's log of both sessions").catch(() => {});
        assert.equal(sessions(m, version), 2, m.stderrText());
      } finally {
        await ann.stop().catch(() => {});
      }
    });
  }
}

// `moq bench fanout --versions <version>` over WebSocket: moqd also serves moq-lite-04 (which it
// would pick for a client offering both), so only --versions puts the publisher and the four
// viewers (and the bystander) on the draft; every frame is delivered.
export function benchFanoutTest(moqd, version) {
  const draft = version.replace("moq-transport-", "");
  test(`moq bench fanout --versions ${version}: the publisher and every viewer over draft ${draft}, every frame delivered`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(["--versions", `${version},moq-lite-04`]);
    const r = await H.runMoq(["bench", "fanout", "--relay", m.url, "--relay-pid", String(m.proc.pid),
      "--viewers", "4", "--duration", "1s", "--limits-seconds", "0.05", "--transport", "ws",
      "--versions", version, "--json"], { timeoutMs: 25_000 });
    assert.equal(r.code, 0, `moq bench exited ${r.code}\n${r.stderr}\nmoqd:\n${m.stderrText()}`);
    const j = JSON.parse(r.stdout.toString());
    assert.equal(j.viewers, 4);
    assert.ok(j.frames_sent >= 25, `frames sent: ${j.frames_sent}`);
    assert.equal(j.frames_lost, 0);
    assert.equal(j.delivered_ratio, 1);
    assert.equal(j.valid, true);
    // The publisher and four viewers at least (the bystander too), all on the draft.
    assert.ok(sessions(m, version) >= 5, m.stderrText());
    assert.equal(sessions(m, "moq-lite-04"), 0, m.stderrText());
  });
}

// `moq bench msgs` and `moq bench churn` with --versions: every generator session on the draft
// (moqd would pick moq-lite-04 for a client offering everything), every message delivered to
// every subscriber, every connect/ready/close cycle done.
export async function benchMsgs(m, version, transport) {
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

export async function benchChurn(m, version) {
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
