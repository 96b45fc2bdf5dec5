// FETCH, joining FETCH, TRACK_STATUS and SUBSCRIBE_UPDATE (REQUEST_UPDATE) through moqd on
// moq-transport-16 and -15: @moq/net 0.3.4 publishes (moqd's --versions leaves it only that draft), and a raw
// IETF client (raw.mjs over qmux-00.moqt-16) asks, because @moq/net 0.3.4 has no FETCH API in
// drafts 14-16 (its Fetch encoder throws "FETCH messages are not supported"). What FETCH returns
// is compared byte for byte with what was published; the message layouts are the draft-16 text's
// (§9.11 REQUEST_UPDATE, §9.16 FETCH, §9.17 FETCH_OK, §9.19 TRACK_STATUS, §10.4.4 FETCH_HEADER).
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import * as Net from "@moq/net";
import { closeNetConnections, netConnect, netWaitActive } from "./net_client.mjs";
import { varint, readVarint, str, isServerStream, isUniStream } from "./raw.mjs";
import { IMPL, controlSession16, hex, msg16 as msg, parseSubgroup16, tuple16 as tuple } from "./raw_ietf.mjs";

const started = [];
after(async () => {
  closeNetConnections();
  for (const m of started) await m.stop().catch(() => {});
});

// Per draft: the raw client's protocol and CLIENT_SETUP (protocol/README.md §2.5), and the
// parameters of its SUBSCRIBE / TRACK_STATUS: FORWARD 1, SUBSCRIBER_PRIORITY 7, filter Largest
// Object (2), GROUP_ORDER 2 (d16 delta-codes the types, d15 writes them absolute). The FETCH,
// FETCH_OK, REQUEST_UPDATE and FETCH stream bytes this test writes and reads are the same in both
// (one parameter each; Serialization Flags 0x1C is one byte as a varint too).
const DRAFTS = [
  { name: "moq-transport-16", protocol: "qmux-00.moqt-16", setup: hex(`2000130202 8000a455 050b${IMPL}`), params: hex("04 1001 1007 010102 0102") },
  { name: "moq-transport-15", protocol: "qmux-00.moqt-15", setup: hex(`2000130202 8000a455 070b${IMPL}`), params: hex("04 1001 2007 210102 2202") },
];

const u8 = (v) => Buffer.from([v]);
const subscribe = (d, id, path, track) => msg(0x03, varint(id), tuple(path), str(track), d.params);
const PRIORITY_128 = Buffer.from("01204080", "hex"); // one parameter: SUBSCRIBER_PRIORITY 128
const fetchStandalone = (id, path, track, [sg, so], [eg, eo]) =>
  msg(0x16, varint(id), varint(1), tuple(path), str(track), varint(sg), varint(so), varint(eg), varint(eo), PRIORITY_128);
const fetchJoining = (id, type, joined, start) => msg(0x16, varint(id), varint(type), varint(joined), varint(start), PRIORITY_128);

const varints = (body, n) => {
  const v = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    const r = readVarint(body, at);
    v.push(r.value);
    at = r.next;
  }
  return v;
};

// A FETCH stream (d15, d16 §10.4.4): FETCH_HEADER {0x05, request id}, objects {flags, [group],
// [subgroup], [object], [priority], [extensions], length, payload; d15: Object Status after a
// zero length}.
function parseFetch(buf, draft) {
  assert.equal(buf[0], 0x05, "FETCH_HEADER");
  const id = readVarint(buf, 1);
  let at = id.next;
  const objects = [];
  let prev = null;
  while (at < buf.length) {
    const flags = readVarint(buf, at);
    at = flags.next;
    const f = flags.value;
    const take = () => {
      const r = readVarint(buf, at);
      at = r.next;
      return r.value;
    };
    const group = f & 0x08 ? take() : prev.group;
    if ((f & 0x03) === 0x03) take();
    const object = f & 0x04 ? take() : prev.object + 1;
    if (f & 0x10) at += 1;
    if (f & 0x20) {
      // The object's extension block (FETCH carries the publisher's blocks): its length, then
      // skipped. (`at += take()` would add to the `at` read before take() moved it.)
      const n = Number(take());
      at += n;
    }
    const len = take();
    if (len === 0 && draft === "moq-transport-15") take();
    objects.push({ group, object, payload: Buffer.from(buf.subarray(at, at + len)) });
    at += len;
    prev = { group, object };
  }
  return { requestId: id.value, objects };
}

const GROUPS = [
  [H.text("g0 first"), H.randomFrame(40_000)],
  [new Uint8Array(0), H.randomFrame(17), H.randomFrame(3000)],
  [H.randomFrame(1), H.randomFrame(20_000)],
  [H.text("g3")],
  [H.text("g4")],
  [H.text("g5")],
];

for (const d of DRAFTS) test(`${d.name} through moqd: FETCH and joining FETCH return exactly what @moq/net published; TRACK_STATUS, bad FETCHes and SUBSCRIBE_UPDATE (raw client)`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await H.startMoqd(["--versions", d.name]);
  started.push(m);
  const p = `${H.uniquePrefix(d.name)}/alice`;

  // The raw client: control stream, CLIENT_SETUP, SERVER_SETUP back.
  const { mux, control, messages } = await controlSession16(m, d.protocol, d.setup);
  const answer = (type, id) => mux.waitUntil(() => messages().find((x) => x.type === type && readVarint(x.body, 0).value === id), 10_000, `message 0x${type.toString(16)} for request ${id}`);
  const uni = () => [...mux.streams.values()].filter((s) => isServerStream(s.id) && isUniStream(s.id));

  // The publisher: @moq/net 0.3.4 on moqt-16. Groups 3..5 wait for `more`.
  const pub = await netConnect(m.url);
  assert.equal(pub.version, d.name);
  const more = H.gate();
  const broadcast = new Net.Broadcast.Producer();
  pub.publish(Net.Path.from(p), broadcast);
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      const track = req.accept();
      for (const [i, frames] of GROUPS.entries()) {
        // Paced by the subscriber (a publisher that runs ahead sends only its newest group).
        if (i > 0 && i < 3) await H.waitFor(() => uni().filter((s) => s.fin).length >= i, 10_000, `group ${i - 1} at the raw subscriber`);
        if (i === 3) await more.wait;
        const g = track.appendGroup();
        for (const payload of frames) g.writeFrame({ payload, timestamp: Net.Time.Timestamp.fromMillis(i) });
        g.close();
      }
    }
  })().catch(() => {});
  // Wait for the namespace to be announced (a @moq/net watcher sees it), then subscribe.
  const watcher = await netConnect(m.url);
  await netWaitActive(watcher, p);
  const subId = 0;
  let nextId = 2;
  mux.write(control, subscribe(d, subId, p, "video"));
  await answer(0x04, subId);

  // The live subscription receives groups 0..2: their sequences and frames, as published.
  await mux.waitUntil(() => uni().filter((s) => s.fin).length >= 3, 10_000, "three SUBGROUP streams");
  const live = uni().filter((s) => s.fin).map((s) => parseSubgroup16(s.data())).sort((a, b) => a.group - b.group);
  assert.deepEqual(live.map((g) => g.frames), GROUPS.slice(0, 3).map((g) => g.map((f) => Buffer.from(f))));
  const seq = live.map((g) => g.group);
  const published = (from, to) => live.filter((g) => g.group >= from && g.group <= to).flatMap((g) => g.frames);
  const lastObject = GROUPS[2].length - 1;

  const fetchStream = async (id) => {
    const s = await mux.waitUntil(() => uni().find((x) => x.fin && x.data()[0] === 0x05 && readVarint(x.data(), 1).value === id), 10_000, `FETCH stream ${id}`);
    return parseFetch(s.data(), d.name);
  };
  const expectObjects = (got, from, to) => {
    assert.deepEqual(got.objects.map((o) => o.payload), published(from, to));
    assert.deepEqual(got.objects.map((o) => o.group), live.filter((g) => g.group >= from && g.group <= to).flatMap((g) => g.frames.map(() => g.group)));
  };

  // Standalone FETCH of groups seq[0]..seq[2] (End {seq[2], 0}: the whole group): FETCH_OK, whose
  // End Location is one past the largest object, and every object byte for byte.
  const standalone = nextId;
  nextId += 2;
  mux.write(control, fetchStandalone(standalone, p, "video", [seq[0], 0], [seq[2], 0]));
  const ok = await answer(0x18, standalone);
  assert.deepEqual(varints(ok.body.subarray(2), 2), [seq[2], lastObject + 1]);
  expectObjects(await fetchStream(standalone), seq[0], seq[2]);

  // A second subscription begins at Largest {seq[2], lastObject}; its relative joining FETCH two
  // groups back and its absolute joining FETCH from seq[1] return the same bytes.
  const sub2 = nextId;
  nextId += 2;
  mux.write(control, subscribe(d, sub2, p, "video"));
  await answer(0x04, sub2);
  const relative = nextId;
  nextId += 2;
  mux.write(control, fetchJoining(relative, 2, sub2, 2));
  await answer(0x18, relative);
  expectObjects(await fetchStream(relative), seq[0], seq[2]);
  const absolute = nextId;
  nextId += 2;
  mux.write(control, fetchJoining(absolute, 3, sub2, seq[1]));
  await answer(0x18, absolute);
  expectObjects(await fetchStream(absolute), seq[1], seq[2]);

  // TRACK_STATUS: REQUEST_OK with LARGEST_OBJECT (0x09) {seq[2], lastObject}.
  const status = nextId;
  nextId += 2;
  mux.write(control, msg(0x0d, varint(status), tuple(p), str("video"), d.params));
  const st = await answer(0x07, status);
  const stAfterId = readVarint(st.body, 0).next;
  assert.deepEqual(varints(st.body.subarray(stAfterId), 5), [1, 0x09, 2 + (seq[2] >= 64 ? 1 : 0), seq[2], lastObject]);

  // A FETCH of a track nobody publishes: REQUEST_ERROR DOES_NOT_EXIST (0x10); a range that ends
  // before it starts, and one starting past the largest object: INVALID_RANGE (0x11).
  const codeOf = async (id) => {
    const e = await answer(0x05, id);
    return varints(e.body, 2)[1];
  };
  const unknown = nextId;
  nextId += 2;
  mux.write(control, fetchStandalone(unknown, `${p}-nobody`, "video", [0, 0], [1, 0]));
  assert.equal(await codeOf(unknown), 0x10);
  const backwards = nextId;
  nextId += 2;
  mux.write(control, fetchStandalone(backwards, p, "video", [seq[2], 0], [seq[0], 0]));
  assert.equal(await codeOf(backwards), 0x11);
  const beyond = nextId;
  nextId += 2;
  mux.write(control, fetchStandalone(beyond, p, "video", [seq[2] + 5, 0], [seq[2] + 6, 0]));
  assert.equal(await codeOf(beyond), 0x11);

  // REQUEST_UPDATE of the first subscription: SUBSCRIPTION_FILTER AbsoluteRange {0, 0} to End
  // Group seq[2] + 1 (inclusive). Then groups 3..5 are published: the narrowed subscription gets
  // group 3 and ends with PUBLISH_DONE SUBSCRIPTION_ENDED (0x3); the other one gets all three.
  const update = nextId;
  nextId += 2;
  const filter = Buffer.concat([varint(4), varint(0), varint(0), varint(seq[2] + 1)]);
  mux.write(control, msg(0x02, varint(update), varint(subId), varint(1), varint(0x21), varint(filter.length), filter));
  await answer(0x07, update);
  more.open();
  const done = await answer(0x0b, subId);
  assert.equal(varints(done.body, 2)[1], 0x3);
  const byAlias = (alias) => uni().filter((s) => s.fin && s.data()[0] !== 0x05).map((s) => parseSubgroup16(s.data())).filter((g) => g.alias === alias).map((g) => g.group).sort((a, b) => a - b);
  await mux.waitUntil(() => byAlias(sub2).length >= 4, 10_000, "groups 3..5 on the second subscription");
  assert.deepEqual(byAlias(subId), [seq[0], seq[1], seq[2], seq[2] + 1]);
  assert.deepEqual(byAlias(sub2), [seq[2], seq[2] + 1, seq[2] + 2, seq[2] + 3]);
  assert.equal(mux.appClose, null);
  mux.close();
  pub.close();
  watcher.close();
  // Under the asan stage's build, a sanitizer report fails the test here.
  await m.stop();
  assert.doesNotMatch(m.stderrText(), /Sanitizer|runtime error/);
});
