// The moq CLI against moqd, with the JS client on the other end. The CLI behaviour these tests
// assume is written down in README.md ("Assumed moq CLI").
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";

const ctx = H.useMoqd();
const T = { timeout: H.TEST_TIMEOUT_MS };

test("JS publisher -> moq sub: one frame per line, exit 0 when the track ends", T, async () => {
  const p = `${H.uniquePrefix("clisub")}/bob`;
  const pubConn = await H.connect(ctx.moqd.url);
  const observer = await H.connect(ctx.moqd.url);
  const groups = [
    [H.text("sync")],
    [H.text("hello"), H.text("world")],
    [new Uint8Array(0), H.text("after an empty frame")],
    [H.text("x".repeat(5000))],
  ];
  const synced = await H.publishSynced(pubConn, observer, p, groups);
  const sub = H.spawnMoq(["sub", ctx.moqd.url, p, "--track", "video"]);
  await H.cliSubReadsLines(sub, groups, synced);
});

test("moq pub -> JS subscriber: a line per frame, --group-every 2, exit 0 at EOF", T, async () => {
  const p = `${H.uniquePrefix("clipub")}/alice`;
  const subConn = await H.connect(ctx.moqd.url);
  const pub = H.spawnMoq(["pub", ctx.moqd.url, p, "--track", "video", "--group-every", "2"]);
  await H.waitActive(subConn, p, { ms: 10_000 }).catch((err) => {
    throw new Error(`${err.message}\n${pub.describe()}`);
  });
  const sub = H.subscribeTrack(subConn, p, "video");
  const frames = ["l0", "l1", "", "l3", "l4 with spaces", "l5", "l6", "l7"];
  pub.write(`${frames[0]}\n`); // group 0 stays open until the next line: the subscriber is attached once it has l0
  await sub.waitFrames(1, 10_000);
  pub.write(frames.slice(1).map((f) => `${f}\n`).join(""));
  pub.endStdin();
  await sub.waitFrames(frames.length, 10_000);
  const expected = [];
  for (let i = 0; i < frames.length; i += 2) expected.push([H.text(frames[i]), H.text(frames[i + 1])]);
  H.assertGroups(sub.received(), expected);
  const exit = await pub.wait(10_000, "moq pub to exit after stdin EOF");
  assert.deepEqual(exit, { code: 0, signal: null }, pub.describe());
  await sub.waitEnd(10_000);
  H.assertGroups(sub.received(), expected);
});

test("moq announced prints the paths that become active under a prefix", T, async () => {
  const prefix = H.uniquePrefix("cliann");
  const pubConn = await H.connect(ctx.moqd.url);
  const before = `${prefix}/before`;
  const after = `${prefix}/after`;
  H.publishBroadcast(pubConn, before, {});
  await H.waitActive(await H.connect(ctx.moqd.url), before);
  const ann = H.spawnMoq(["announced", ctx.moqd.url, prefix]);
  const hasLine = (path) => (out) => out.toString().split("\n").some((l) => l.split(/\s+/).includes(path));
  await ann.waitStdout(hasLine(before), 10_000, `a line naming ${before}`);
  H.publishBroadcast(pubConn, after, {});
  await ann.waitStdout(hasLine(after), 10_000, `a line naming ${after}`);
  await ann.stop();
});

H.moqdStopsCleanly(ctx);
