// Subgroups, object ids with gaps and extension blocks (Properties on 18+) through moqd, on
// moq-transport-16 and -20 (and from 16 to 20): a raw IETF publisher and a raw IETF subscriber, because @moq/net 0.3.4
// writes neither (its SUBGROUP streams are subgroup 0 with ids 0, 1, 2 ..., and its object
// properties hold only its timestamp: node_modules/@moq/net/ietf/object.js). What the subscriber
// reads after moqd's SUBGROUP_HEADER must be the objects the publisher wrote, byte for byte. A
// raw moq-lite-02 subscriber of the same track gets what moq-lite can carry and a reset with
// UNSUPPORTED where it cannot (never a silent cut); moqd runs 2 workers, so the track may cross
// between them.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { RawWs, RawMux, RawLite, qmux, BIG_PARAMS, readVarint, isServerStream, isUniStream } from "./raw.mjs";
import { CLIENT_SETUP, IMPL, RawMux01, hex, lo } from "./raw_ietf.mjs";

const muxes = [];
const { moqd } = H.moqdsOfFile(() => {
  for (const m of muxes) {
    try {
      m.tcp.destroy();
    } catch {}
  }
});

// UNSUPPORTED (src/base/error.h ErrorCode::kUnsupported), moqd's reset code on moq-lite streams.
const UNSUPPORTED = 17;

// Varints: QUIC's on 16, leading ones on 20 (raw_ietf.mjs lo). Every value here is below 2^14.
const quic = (v) => (v < 0x40 ? Buffer.from([v]) : Buffer.from([0x40 | (v >> 8), v & 0xff]));

const DRAFTS = [
  {
    name: "moq-transport-16",
    protocol: "qmux-00.moqt-16",
    v: quic,
    requestStreams: false,
    setup: hex(`2000130202 8000a455 050b${IMPL}`),
    // SUBSCRIBE params (delta-coded): forward 1, priority 7, filter LargestObject, group order 2.
    params: hex("04 1001 1007 010102 0102"),
    firstObject: 0x00,
  },
  {
    name: "moq-transport-20",
    protocol: "qmux-01.moqt-20",
    v: lo,
    requestStreams: true,
    setup: CLIENT_SETUP, // @moq/net 0.3.4's SETUP on 17..20
    // The same with d20's relative filter 1.
    params: hex("04 10 01 10 07 01 01 01 01 02"),
    firstObject: 0x40, // d18+ FIRST_OBJECT on the SUBGROUP_HEADER type
  },
];

function message(d, type, ...body) {
  const b = Buffer.concat(body);
  const len = Buffer.alloc(2);
  len.writeUInt16BE(b.length);
  return Buffer.concat([d.v(type), len, b]);
}
const str = (d, s) => Buffer.concat([d.v(Buffer.byteLength(s)), Buffer.from(s)]);
const tuple = (d, path) => {
  const f = path.split("/");
  return Buffer.concat([d.v(f.length), ...f.map((x) => str(d, x))]);
};
// Control messages {type, body} back to back in `buf` (types below 0x40: one byte either way).
function messages(d, buf) {
  const out = [];
  for (let pos = 0; pos + 3 <= buf.length; ) {
    const len = buf.readUInt16BE(pos + 1);
    if (pos + 3 + len > buf.length) break;
    out.push({ type: buf[pos], body: buf.subarray(pos + 3, pos + 3 + len) });
    pos += 3 + len;
  }
  return out;
}

// A raw IETF session: d16 with its control stream (SETUP exchanged), d20 with SETUP on uni streams.
async function session(m, d) {
  const ws = await RawWs.connect(m, { protocols: [d.protocol] });
  assert.equal(ws.subprotocol, d.protocol);
  const mux = d.protocol.startsWith("qmux-00") ? new RawMux(ws, "qmux-00") : new RawMux01(ws, "qmux-01");
  muxes.push(mux);
  mux.sendRaw(qmux.params(BIG_PARAMS));
  if (!d.requestStreams) {
    const control = mux.open();
    mux.write(control, d.setup);
    await mux.waitStream(control, (s) => s.data().length >= 3 && s.data().length >= 3 + s.data().readUInt16BE(1), 5_000, "SERVER_SETUP");
    const setupLen = 3 + mux.stream(control).data().readUInt16BE(1);
    const controlMessages = () => messages(d, mux.stream(control).data().subarray(setupLen));
    // One request: on the control stream (16) or a bidi stream of its own (20); resolves with
    // the messages that answer it.
    const request = (bytes) => {
      mux.write(control, bytes);
      return controlMessages;
    };
    return { mux, request, incomingRequests: () => [{ id: control, messages: controlMessages }] };
  }
  mux.write(mux.open({ uni: true }), d.setup);
  await mux.waitStream(3, (s) => s.data().length >= 4, 5_000, "moqd's SETUP");
  const request = (bytes) => {
    const id = mux.open();
    mux.write(id, bytes);
    return () => messages(d, mux.stream(id).data());
  };
  // moqd's own requests: server-opened bidi streams.
  const incomingRequests = () =>
    [...mux.streams.values()].filter((s) => isServerStream(s.id) && !isUniStream(s.id)).map((s) => ({ id: s.id, messages: () => messages(d, s.data()) }));
  return { mux, request, incomingRequests };
}

// The objects the publisher writes (every varint below 0x40: one byte in both forms), extension
// blocks delta-coded as 16+ write them:
//   subgroup 3 of group 4: id 5 {0x0d: aa bb} "abc", id 8 (a gap) {0x10: 5, 0x1d: cc} "z";
//   subgroup 0 of group 4: id 0 {0x10: 7} (a timestamp alone: moq-lite carries it) "q";
//   subgroup 0 of group 5: ids 0 and 2 (a gap moq-lite cannot number), no properties.
const SG3 = "05 04 0d 02 aa bb 03 61 62 63 02 05 10 05 0d 01 cc 01 7a";
const SG0 = "00 02 10 07 01 71";
const G5 = "00 00 01 63 01 00 01 64";

// [publisher's draft, subscriber's draft]: each draft alone, and 16 to 20 (the blocks here read
// the same in both encodings, so they cross unchanged; wire/ietf_properties_test.cc has blocks
// that are rewritten).
const CASES = [[DRAFTS[0], DRAFTS[0]], [DRAFTS[1], DRAFTS[1]], [DRAFTS[0], DRAFTS[1]]];

for (const [d, ds] of CASES) {
  const name = d === ds ? d.name : `${d.name} to ${ds.name}`;
  test(`${name}: subgroups, object ids with gaps and extension blocks reach an IETF subscriber byte for byte; a moq-lite subscriber gets what moq-lite carries and UNSUPPORTED for the rest`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const versions = d === ds ? d.name : `${d.name},${ds.name}`;
    const m = await moqd(["--versions", `${versions},moq-lite-02`]);
    const path = `${H.uniquePrefix(d.name)}/alice`;

    // The publisher: PUBLISH_NAMESPACE, answered REQUEST_OK (0x07).
    const pub = await session(m, d);
    const pn = pub.request(message(d, 0x06, d.v(0), tuple(d, path), d.v(0)));
    await pub.mux.waitUntil(() => pn().some((x) => x.type === 0x07), 5_000, "REQUEST_OK for PUBLISH_NAMESPACE");

    // The IETF subscriber (request id 0) and the moq-lite one.
    const sub = await session(m, ds);
    const subAnswers = sub.request(message(ds, 0x03, ds.v(0), tuple(ds, path), str(ds, "video"), ds.params));
    const lite = await RawLite.connect(m);
    muxes.push(lite.mux);
    await lite.setup();
    const liteSub = lite.subscribe(path, "video");

    // moqd subscribes upstream once: SUBSCRIBE_OK alias 9 from the publisher (d16 names the
    // request id, which moqd chose; d20 answers on moqd's own request stream).
    const upstream = await pub.mux.waitUntil(() => {
      for (const r of pub.incomingRequests()) {
        const s = r.messages().find((x) => x.type === 0x03);
        if (s) return { stream: r.id, requestId: readVarint(s.body, 0).value };
      }
      return null;
    }, 10_000, "moqd's SUBSCRIBE upstream");
    pub.mux.write(upstream.stream, d.requestStreams ? message(d, 0x04, d.v(9), d.v(0)) : message(d, 0x04, d.v(upstream.requestId), d.v(9), d.v(0)));
    await sub.mux.waitUntil(() => subAnswers().some((x) => x.type === 0x04), 10_000, "SUBSCRIBE_OK at the IETF subscriber");
    await lite.mux.waitStream(liteSub.streamId, (s) => s.data().length > 0, 10_000, "SUBSCRIBE_OK at the moq-lite subscriber");

    // The SUBGROUP streams: type 0x1d (extensions, subgroup field, end of group) and 0x19 (the
    // same, subgroup 0), + FIRST_OBJECT on 20; alias 9, publisher priority 0x80.
    const t = (base) => (base | d.firstObject).toString(16);
    const publish = (h) => {
      const id = pub.mux.open({ uni: true });
      pub.mux.write(id, hex(h), { fin: true });
    };
    publish(`${t(0x1d)} 09 04 03 80 ${SG3}`);
    publish(`${t(0x19)} 09 04 80 ${SG0}`);
    publish(`${t(0x19)} 09 05 80 ${G5}`);

    // The IETF subscriber: moqd's alias is its request id (0), priority its own (7).
    // (On 20 moqd's first uni stream, 3, is its SETUP.)
    const uniFrom = (mux) => [...mux.streams.values()].filter((s) => isServerStream(s.id) && isUniStream(s.id) && !(ds.requestStreams && s.id === 3));
    const ts = (base) => (base | ds.firstObject).toString(16);
    const want = [
      `${ts(0x1d)} 00 04 03 07 ${SG3}`,
      `${ts(0x19)} 00 04 07 ${SG0}`,
      `${ts(0x19)} 00 05 07 ${G5}`,
    ].map((h) => hex(h).toString("hex"));
    await sub.mux.waitUntil(() => uniFrom(sub.mux).filter((s) => s.fin).length >= 3, 10_000, "three SUBGROUP streams");
    const got = uniFrom(sub.mux).map((s) => s.data().toString("hex")).sort();
    assert.deepEqual(got, [...want].sort());

    // The moq-lite subscriber: group 4 is its subgroup 0 ("q"; subgroup 3 is not sent), group 5
    // is cut at the object moq-lite cannot number, with UNSUPPORTED. What the stream held before
    // the reset (its GROUP header, "c") may or may not arrive: a reset discards what was not sent.
    const done = () => lite.groups().filter((g) => g.fin || g.reset !== undefined);
    await lite.mux.waitUntil(() => done().length >= 2, 10_000, "two moq-lite group streams ended");
    const groups = lite.groups();
    assert.equal(groups.length, 2, JSON.stringify(groups));
    const g4 = groups.find((g) => g.fin);
    assert.equal(g4.sequence, 4);
    assert.equal(g4.reset, undefined);
    assert.deepEqual(g4.frames.map((f) => Buffer.from(f).toString()), ["q"]);
    const g5 = groups.find((g) => !g.fin);
    assert.equal(g5.reset, UNSUPPORTED);
    if (g5.sequence !== undefined) {
      assert.equal(g5.sequence, 5);
      assert.ok(["", "c"].includes(g5.frames.map((f) => Buffer.from(f).toString()).join(",")), JSON.stringify(g5));
    }
    await H.waitFor(() => /refused: a subgroup other than 0|refused: an object moq-lite cannot carry/.test(m.stderrText()), 5_000, "moqd's log line naming the refusal");
    assert.equal(pub.mux.appClose, null);
    assert.equal(sub.mux.appClose, null);
  });
}
