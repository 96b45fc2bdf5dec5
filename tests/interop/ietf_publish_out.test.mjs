// moqd sending PUBLISH (d16 §9.25 / d17 §9.24 Subscribe Options 0x00 "PUBLISH" on
// SUBSCRIBE_NAMESPACE; d18 §10.20 SUBSCRIBE_TRACKS): a raw IETF client (raw_ietf.mjs) asks for the
// tracks under a prefix; a @moq/lite 0.2.2 publisher (moq-lite-02) publishes a broadcast there, and
// once a @moq/lite viewer makes its track live in the relay, moqd offers it to the raw client with
// its own PUBLISH (its request id, the alias = that id). The raw client answers PUBLISH_OK (d16) /
// REQUEST_OK (d18), reads the SUBGROUP streams under that alias byte for byte, and moqd's
// PUBLISH_DONE (TRACK_ENDED) follows the publisher's end of the track. @moq/net 0.3.4 never asks
// for PUBLISH (Subscribe Options 0x01 on 16/17, no SUBSCRIBE_TRACKS on 18+, and it refuses a PUBLISH
// with NOT_SUPPORTED), so this raw client is the only peer here: tested only against moqd's own
// reading of the draft text.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import { varint, readVarint, str } from "./raw.mjs";
import {
  IMPL, controlSession16, hex, msg16, tuple16, parseSubgroup16, lo, loTuple, messages, msg17, rawSession, readLo,
} from "./raw_ietf.mjs";

const started = [];
after(async () => {
  H.closeAllConnections();
  for (const m of started) await m.stop().catch(() => {});
  for (const m of started) assert.doesNotMatch(m.stderrText(), H.SANITIZER_REPORT);
});

const GROUPS = [
  [H.text("sync"), H.randomFrame(12_000)],
  [new Uint8Array(0), H.randomFrame(17), H.randomFrame(3000)],
  [H.randomFrame(1), H.randomFrame(20_000)],
];
const flat = (groups) => groups.flat().map((f) => Buffer.from(f).toString("hex"));

// The publisher (@moq/lite, moq-lite-02) and the viewer whose subscription makes the track live;
// the groups wait for `go`.
async function liteSide(m, p, go) {
  const pub = await H.connect(m.url);
  const served = H.publishBroadcast(pub, p, { video: GROUPS }, { before: async (i) => { if (i === 0) await go.wait; } });
  const viewer = await H.connect(m.url);
  await H.waitActive(viewer, p);
  return { pub, served, viewer };
}

test("moq-transport-16 through moqd: SUBSCRIBE_NAMESPACE with Subscribe Options PUBLISH gets moqd's PUBLISH for a @moq/lite track, its objects after PUBLISH_OK byte for byte, then PUBLISH_DONE", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  // One worker: the origin whose live tracks are offered is the raw client's worker's.
  const m = await H.startMoqd(["--versions", "moq-lite-02,moq-transport-16"], { workers: 1 });
  started.push(m);
  const prefix = H.uniquePrefix("pubout16");
  const p = `${prefix}/alice`;
  const { mux, control, messages: control16 } = await controlSession16(m, "qmux-00.moqt-16", hex(`2000130202 8000a455 050b${IMPL}`));
  // SUBSCRIBE_NAMESPACE id 0, the prefix, Subscribe Options 0x00 (PUBLISH), no parameters, on its
  // own bidi stream: REQUEST_OK id 0 there, and no NAMESPACE.
  const sn = mux.open();
  mux.write(sn, msg16(0x11, varint(0), tuple16(prefix), varint(0), varint(0)));
  await mux.waitStream(sn, (x) => x.data().length >= 5, 10_000, "REQUEST_OK");
  assert.equal(mux.stream(sn).data().toString("hex"), "0700020000");

  const go = H.gate();
  const { served, viewer } = await liteSide(m, p, go);
  const l = H.subscribeTrack(viewer, p, "video");
  const pub = await mux.waitUntil(() => control16().find((x) => x.type === 0x1d), 10_000, "moqd's PUBLISH");
  // PUBLISH: request id 1 (the server's first), ns, "video", alias 1, {FORWARD: 1}, no Track
  // Extensions (d16 §9.13).
  assert.equal(Buffer.from(pub.body).toString("hex"),
    Buffer.concat([varint(1), tuple16(p), str("video"), varint(1), hex("01 10 01")]).toString("hex"));
  mux.write(control, msg16(0x1e, varint(1), varint(0)));  // PUBLISH_OK id 1, no parameters
  await served.waitRequest("video");
  go.open();

  const finished = () => [...mux.streams.values()].filter((s) => (s.id & 3) === 3 && s.fin);
  await mux.waitUntil(() => finished().length === GROUPS.length, 10_000, "three SUBGROUP streams");
  const got = finished().map((s) => parseSubgroup16(s.data())).sort((a, b) => a.group - b.group);
  assert.deepEqual(got.map((g) => g.alias), [1, 1, 1]);
  assert.deepEqual(got.flatMap((g) => g.frames).map((f) => f.toString("hex")), flat(GROUPS));
  await l.waitEnd(10_000);

  // The publisher closed the track: PUBLISH_DONE id 1, TRACK_ENDED (2), 3 streams.
  const done = await mux.waitUntil(() => control16().find((x) => x.type === 0x0b), 10_000, "PUBLISH_DONE");
  const id = readVarint(done.body, 0);
  const code = readVarint(done.body, id.next);
  const streams = readVarint(done.body, code.next);
  assert.deepEqual([id.value, code.value, streams.value], [1, 2, 3]);
  assert.ok(!mux.appClose, "the session stays up");
  mux.close();
});

test("moq-transport-18 through moqd: SUBSCRIBE_TRACKS gets moqd's PUBLISH on its own stream for a @moq/lite track, its objects after REQUEST_OK byte for byte, then PUBLISH_DONE and FIN", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await H.startMoqd(["--versions", "moq-lite-02,moq-transport-18"], { workers: 1 });
  started.push(m);
  const prefix = H.uniquePrefix("pubout18");
  const p = `${prefix}/alice`;
  const { mux, groups } = await rawSession(m, "moq-transport-18");
  // SUBSCRIBE_TRACKS (0x51) id 0, the prefix, no parameters: REQUEST_OK (no parameters, no Track
  // Properties) on its stream.
  const st = mux.open();
  mux.write(st, msg17(0x51, lo(0), loTuple(...prefix.split("/")), lo(0)));
  await mux.waitStream(st, (x) => messages(x.data()).length > 0, 10_000, "REQUEST_OK");
  assert.equal(mux.stream(st).data().toString("hex"), "07000100");

  const go = H.gate();
  const { served, viewer } = await liteSide(m, p, go);
  const l = H.subscribeTrack(viewer, p, "video");
  // moqd's PUBLISH on a bidi stream of its own (server bidi ids are 1 mod 4).
  const ps = await mux.waitUntil(() => [...mux.streams.values()].find((s) => (s.id & 3) === 1 && messages(s.data()).length > 0), 10_000, "moqd's PUBLISH stream");
  const [pub] = messages(ps.data());
  assert.equal(pub.type, 0x1d);
  // Request id 1, ns, "video", alias 1, {FORWARD (uint8): 1}, Track Properties {TIMESCALE (0x08):
  // 1000}: moqd times a moq-lite-02 track's objects by arrival, in milliseconds.
  assert.equal(Buffer.from(pub.body).toString("hex"),
    Buffer.concat([lo(1), loTuple(...p.split("/")), lo(5), Buffer.from("video"), lo(1), hex("01 10 01 08"), lo(1000)]).toString("hex"));
  mux.write(ps.id, msg17(0x07, lo(0)));  // REQUEST_OK: PUBLISH_OK's form from 18
  await served.waitRequest("video");
  go.open();

  await mux.waitUntil(() => groups().size === GROUPS.length, 10_000, "three SUBGROUP streams");
  const g = groups();
  assert.deepEqual([...g.keys()].sort((a, b) => a - b), [0, 1, 2]);
  assert.deepEqual([0, 1, 2].flatMap((k) => g.get(k)).map((f) => f.toString("hex")), flat(GROUPS));
  for (const s of mux.streams.values()) {
    if ((s.id & 3) === 3 && s.id !== 3) assert.equal(readLo(s.data(), readLo(s.data(), 0).next).value, 1, "alias 1");
  }
  await l.waitEnd(10_000);
  // PUBLISH_DONE (no request id on 17+) TRACK_ENDED, 3 streams, then FIN on the PUBLISH stream.
  await mux.waitStream(ps.id, (x) => x.fin, 10_000, "PUBLISH_DONE and FIN");
  const after = messages(mux.stream(ps.id).data());
  assert.deepEqual(after.map((x) => x.type), [0x1d, 0x0b]);
  assert.deepEqual([...after[1].body.subarray(0, 2)], [0x02, 0x03]);
  assert.ok(!mux.appClose, "the session stays up");
  mux.close();
});
