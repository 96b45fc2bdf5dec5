// PUBLISH (publisher-initiated subscription) through moqd on moq-transport-17, -18 and -20: a raw
// IETF publisher (raw_ietf.mjs rawSession over the draft's WebSocket protocol) opens a request
// stream with PUBLISH for one track, without PUBLISH_NAMESPACE, reads moqd's answer on that stream
// (d17 §9.12 PUBLISH_OK 0x1E; d18 §10.5 and d20: REQUEST_OK, #1611), then writes SUBGROUP streams
// under the alias it chose. A @moq/net 0.3.4 viewer on the same draft and a @moq/lite 0.2.2 viewer
// on moq-lite-02 must read every frame byte for byte; the publisher's PUBLISH_DONE (Stream Count 3)
// and FIN on the request stream end the track: the moq-lite viewer sees the end (@moq/net 0.3.4 over
// WebSocket surfaces no end of a subscription on 17+, see ietf_session_d17.test.mjs), moqd closes
// its side of the request stream with nothing after its answer, and the broadcast is withdrawn.
// @moq/net 0.3.4 never sends PUBLISH (it refuses one as a subscriber), so moqd's PUBLISH on 17+ is
// tested only against this raw client. Draft 19 is not reached over WebSocket (NET-0.3.md §1.1):
// session_tests PublishRequestStreamTest covers it. Layouts: wire/ietf_publish_d17_test.cc.
// The last tests: a PUBLISH whose Track Properties declare TIMESCALE (0x08) 90000, and objects
// carrying LOC Timestamps (0x10) in it, reach a @moq/net 0.3.4 viewer on moq-lite-05 with those
// timestamps in that timescale (TRACK_INFO's), as an upstream SUBSCRIBE_OK's TIMESCALE would.
// The last test: a d20 PUBLISH with FORWARD 0 (d20 §10.11), which moqd starts with REQUEST_UPDATE
// FORWARD 1 (§10.9) on the PUBLISH's stream when a viewer subscribes and pauses with FORWARD 0
// once the last viewer has gone (after --upstream-linger); the raw publisher sends objects only
// after the FORWARD 1, and moqd's REQUEST_UPDATE bytes are checked against @moq/net 0.3.4's own
// Parameters and message encoders (its SubscribeUpdate class writes no parameters).
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import { waitLog } from "./raw.mjs";
import { lo, loStr, loTuple, messages, msg17, rawSession } from "./raw_ietf.mjs";
import { closeNetConnections, count, flat, netConnect, netSubscribe, netWaitActive } from "./net_client.mjs";
import * as Net from "@moq/net";
import { Writer } from "./node_modules/@moq/net/stream.js";
import * as NetMessage from "./node_modules/@moq/net/ietf/message.js";
import { Parameters } from "./node_modules/@moq/net/ietf/parameters.js";
import { Version } from "./node_modules/@moq/net/ietf/version.js";

const started = [];
after(async () => {
  closeNetConnections();
  H.closeAllConnections();
  for (const m of started) await m.stop().catch(() => {});
  for (const m of started) assert.doesNotMatch(m.stderrText(), /ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer/);
});

// A SUBGROUP stream on 17+: type 0x18 (subgroup 0, end of group, Publisher Priority; from 18 with
// FIRST_OBJECT 0x40, d18 §11.4.2), alias, group, priority 0, then each frame as {object id delta 0,
// length, payload}; an empty frame carries Object Status 0 after its zero length.
function subgroup(version, alias, group, frames) {
  const type = version === "moq-transport-17" ? 0x18 : 0x58;
  const parts = [lo(type), lo(alias), lo(group), Buffer.from([0])];
  for (const f of frames) {
    parts.push(lo(0), lo(f.length));
    parts.push(f.length > 0 ? Buffer.from(f) : lo(0));
  }
  return Buffer.concat(parts);
}

const GROUPS = [
  [H.text("sync"), H.randomFrame(12_000)],
  [new Uint8Array(0), H.randomFrame(17), H.randomFrame(3000)],
  [H.randomFrame(1), H.randomFrame(20_000)],
];

// Writes GROUPS as groups 10, 11 and 12 under `alias`, each on a SUBGROUP stream of its own, waiting
// after each until the @moq/net viewer `v` and the @moq/lite viewer `l` both have it; then both
// must have read every frame byte for byte, in groups 10..12.
async function sendGroupsToBoth(mux, version, alias, v, l) {
  for (const [i, frames] of GROUPS.entries()) {
    const u = mux.open({ uni: true });
    mux.write(u, subgroup(version, alias, 10 + i, frames), { fin: true });
    await H.waitFor(() => v.state.n >= count(GROUPS.slice(0, i + 1)) && l.frameCount() >= count(GROUPS.slice(0, i + 1)), 10_000, `group ${10 + i} at both viewers`);
  }
  assert.deepEqual(v.ordered().flat(), flat(GROUPS));
  assert.deepEqual([...v.groups.keys()].sort((a, b) => a - b), [10, 11, 12]);
  assert.deepEqual(l.groups.flatMap((g) => g.frames), flat(GROUPS));
}

for (const version of ["moq-transport-17", "moq-transport-18", "moq-transport-20"]) {
  test(`${version} through moqd: a raw client's PUBLISH on its request stream is accepted and its track reaches a @moq/net 0.3.4 viewer (${version}) and a @moq/lite viewer (moq-lite-02) byte for byte; PUBLISH_DONE and FIN end it`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await H.startMoqd(["--versions", `moq-lite-02,${version}`]);
    started.push(m);
    const p = `${H.uniquePrefix(version)}/alice`;
    const raw = await rawSession(m, version);
    const { mux } = raw;

    // PUBLISH id 0 (d17: Required Request ID Delta 0), track "video", alias 5, FORWARD (0x10) 1
    // as a uint8, no Track Properties.
    const alias = 5;
    const s = mux.open();
    const d17 = version === "moq-transport-17";
    mux.write(s, msg17(0x1d, lo(0), d17 ? lo(0) : Buffer.alloc(0), loTuple(...p.split("/")), loStr("video"), lo(alias), Buffer.from([0x01, 0x10, 0x01])));
    await mux.waitStream(s, (x) => messages(x.data()).length > 0, 10_000, "moqd's answer to PUBLISH");
    const [answer] = messages(mux.stream(s).data());
    if (d17) {
      // d17 §9.12 PUBLISH_OK: no Request ID; FORWARD 1 first (the smallest type moqd writes).
      assert.equal(answer.type, 0x1e, "PUBLISH_OK");
      assert.deepEqual([...answer.body.subarray(0, 3)], [0x03, 0x10, 0x01]);
    } else if (version === "moq-transport-18") {
      // d18 §10.5: REQUEST_OK with PUBLISH_OK's parameters (FORWARD 1 first), no Track Properties.
      assert.equal(answer.type, 0x07, "REQUEST_OK");
      assert.deepEqual([...answer.body.subarray(0, 3)], [0x03, 0x10, 0x01]);
    } else {
      // d20 (#1834): the subscription parameters are PUBLISH's; the acceptance is an empty REQUEST_OK.
      assert.equal(answer.type, 0x07, "REQUEST_OK");
      assert.deepEqual([...answer.body], [0x00]);
    }

    // The broadcast is discoverable without PUBLISH_NAMESPACE, over both protocol families.
    const net = await netConnect(m.url);
    assert.equal(net.version, version);
    const lite = await H.connect(m.url);
    await waitLog(m, /version=moq-lite-02 /);
    await netWaitActive(net, p);
    const v = netSubscribe(net, p, "video");
    const watcher = H.watchAnnounced(lite, p.slice(0, p.lastIndexOf("/")));
    await watcher.waitFor(p, true);
    const l = H.subscribeTrack(lite, p, "video");
    await sendGroupsToBoth(mux, version, alias, v, l);

    // PUBLISH_DONE (no Request ID on 17+) TRACK_ENDED (2), Stream Count 3, then FIN: the track
    // ends at the moq-lite viewer, moqd FINs the request stream with nothing after its answer, and
    // the broadcast is withdrawn.
    mux.write(s, msg17(0x0b, lo(2), lo(3), loStr("")), { fin: true });
    await l.waitEnd(10_000);
    await mux.waitStream(s, (x) => x.fin, 10_000, "moqd's FIN on the PUBLISH stream");
    assert.deepEqual(messages(mux.stream(s).data()).map((x) => x.type), [answer.type]);
    await watcher.waitFor(p, false);
    watcher.close();
    assert.ok(!mux.appClose, "the session stays up");
    net.close();
    H.closeConnection(lite);
    mux.close();
  });
}

// Connects with @moq/net offering only the WebSocket subprotocol `protocol`.
async function connectAs(url, protocol) {
  const Base = globalThis.WebSocket;
  class Forced extends Base {
    constructor(u, protocols, options) {
      super(u, [protocols ?? []].flat().filter((x) => x === protocol), options);
    }
  }
  globalThis.WebSocket = Forced;
  try {
    return await netConnect(url);
  } finally {
    globalThis.WebSocket = Base;
  }
}

// 90 kHz timestamps, going backwards inside a group as B-frames do.
const STAMPED = [
  [[H.text("i0"), 900_000], [H.randomFrame(4000), 903_000]],
  [[H.text("p1"), 906_000], [H.randomFrame(9), 904_500]],
];

for (const version of ["moq-transport-18", "moq-transport-20"]) {
  test(`${version} through moqd: a raw client's PUBLISH with TIMESCALE 90000 gives a @moq/net 0.3.4 moq-lite-05 viewer its timestamps in that timescale`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await H.startMoqd(["--versions", `moq-lite-05,${version}`]);
    started.push(m);
    const p = `${H.uniquePrefix("pubts")}/alice`;
    const raw = await rawSession(m, version);
    const { mux } = raw;
    // PUBLISH id 0, "video", alias 5, FORWARD 1, Track Properties {TIMESCALE (0x08): 90000} (d18
    // §10.10, d20 §10.11: after the parameters, to the end of the message).
    const alias = 5;
    const s = mux.open();
    mux.write(s, msg17(0x1d, lo(0), loTuple(...p.split("/")), loStr("video"), lo(alias), Buffer.from([0x01, 0x10, 0x01]), lo(0x08), lo(90_000)));
    await mux.waitStream(s, (x) => messages(x.data()).length > 0, 10_000, "moqd's answer to PUBLISH");
    assert.equal(messages(mux.stream(s).data())[0].type, 0x07, "REQUEST_OK");

    const lite = await connectAs(m.url, "qmux-02.moq-lite-05");
    assert.equal(lite.version, "moq-lite-05");
    await netWaitActive(lite, p);
    const seen = [];
    const v = netSubscribe(lite, p, "video", { onFrame: (g, f) => seen.push([g, f.timestamp?.value, f.timestamp?.scale]) });
    for (const [i, frames] of STAMPED.entries()) {
      // SUBGROUP 0x59 (properties, end of group, FIRST_OBJECT; d18 §11.4.2), alias, group, priority
      // 0; each object: id delta 0, its properties {Timestamp (0x10): t}, length, payload.
      const parts = [lo(0x59), lo(alias), lo(20 + i), Buffer.from([0])];
      for (const [payload, t] of frames) {
        const props = Buffer.concat([lo(0x10), lo(t)]);
        parts.push(lo(0), lo(props.length), props, lo(payload.length), Buffer.from(payload));
      }
      const u = mux.open({ uni: true });
      mux.write(u, Buffer.concat(parts), { fin: true });
      await H.waitFor(() => v.state.n >= STAMPED.slice(0, i + 1).flat().length, 10_000, `group ${20 + i}`);
    }
    assert.deepEqual(v.ordered().flat(), STAMPED.flat().map(([f]) => Buffer.from(f)));
    const want = STAMPED.flatMap((frames, i) => frames.map(([, t]) => [20 + i, t, 90_000]));
    assert.deepEqual(seen.sort((a, b) => a[0] - b[0]), want);
    v.sub.close();
    lite.close();
    mux.close();
  });
}
// REQUEST_UPDATE (0x02) of request id `id` with FORWARD `forward`, as @moq/net 0.3.4's encoders
// write it on draft 20: its message framing (u16 length) around the Request ID and its Parameters.
async function netRequestUpdate(id, forward) {
  const chunks = [];
  const w = new Writer(new WritableStream({ write(c) { chunks.push(new Uint8Array(c)); } }), Version.DRAFT_20);
  await w.u53(0x02);
  await NetMessage.encode(w, async (mw) => {
    await mw.u62(BigInt(id));
    const params = new Parameters();
    params.forward = forward;
    await params.encode(mw, Version.DRAFT_20);
  });
  w.close();
  await w.closed;
  return Buffer.concat(chunks);
}

test("moq-transport-20 through moqd: a raw client's PUBLISH with FORWARD 0 is accepted, started by moqd's REQUEST_UPDATE FORWARD 1 when a @moq/net 0.3.4 viewer subscribes (its objects then reach it and a @moq/lite moq-lite-02 viewer byte for byte), and paused by REQUEST_UPDATE FORWARD 0 once both viewers have gone", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const version = "moq-transport-20";
  const m = await H.startMoqd(["--versions", `moq-lite-02,${version}`, "--upstream-linger", "300ms"]);
  started.push(m);
  const p = `${H.uniquePrefix("fwd0")}/alice`;
  const { mux } = await rawSession(m, version);
  const alias = 5;
  const s = mux.open();
  // PUBLISH id 0, track "video", alias 5, FORWARD (0x10) 0, no Track Properties.
  mux.write(s, msg17(0x1d, lo(0), loTuple(...p.split("/")), loStr("video"), lo(alias), Buffer.from([0x01, 0x10, 0x00])));
  const onStream = () => messages(mux.stream(s).data());
  await mux.waitStream(s, () => onStream().length > 0, 10_000, "moqd's answer to PUBLISH");
  assert.deepEqual(onStream().map((x) => [x.type, [...x.body]]), [[0x07, [0x00]]], "an empty REQUEST_OK");

  const net = await netConnect(m.url);
  assert.equal(net.version, version);
  const lite = await H.connect(m.url);
  await waitLog(m, /version=moq-lite-02 /);
  await netWaitActive(net, p);
  const watcher = H.watchAnnounced(lite, p.slice(0, p.lastIndexOf("/")));
  await watcher.waitFor(p, true);
  // Discovery is no demand: still nothing after the REQUEST_OK.
  assert.equal(onStream().length, 1);

  // A viewer: REQUEST_UPDATE, moqd's first request id (1, a server's), FORWARD 1.
  const v = netSubscribe(net, p, "video");
  await mux.waitStream(s, () => onStream().length >= 2, 10_000, "REQUEST_UPDATE FORWARD 1");
  const answerLen = 4; // 07 0001 00
  const start = mux.stream(s).data().subarray(answerLen);
  assert.equal(start.toString("hex"), (await netRequestUpdate(1, true)).toString("hex"));
  assert.equal(start.toString("hex"), "0200040101" + "1001");
  mux.write(s, msg17(0x07, lo(0))); // REQUEST_OK
  const l = H.subscribeTrack(lite, p, "video");

  await sendGroupsToBoth(mux, version, alias, v, l);
  assert.equal(onStream().length, 2, "the second viewer sends no second FORWARD 1");

  // Both viewers go: after the linger, REQUEST_UPDATE id 3 FORWARD 0.
  watcher.close();
  net.close();
  H.closeConnection(lite);
  await mux.waitStream(s, () => onStream().length >= 3, 10_000, "REQUEST_UPDATE FORWARD 0");
  const pause = mux.stream(s).data().subarray(answerLen + start.length);
  assert.equal(pause.toString("hex"), (await netRequestUpdate(3, false)).toString("hex"));
  mux.write(s, msg17(0x07, lo(0)));

  // PUBLISH_DONE TRACK_ENDED, Stream Count 3, and FIN: moqd FINs its side with nothing more.
  mux.write(s, msg17(0x0b, lo(2), lo(3), loStr("")), { fin: true });
  await mux.waitStream(s, (x) => x.fin, 10_000, "moqd's FIN on the PUBLISH stream");
  assert.deepEqual(onStream().map((x) => x.type), [0x07, 0x02, 0x02]);
  assert.ok(!mux.appClose, "the session stays up");
  mux.close();
});
