// Raw IETF client pieces for drafts 17 to 20 (request streams) over WebSocket: leading-ones
// varints, messages, a qmux-01 mux that splits moqd's packed records, and a session with SETUP
// exchanged on uni streams. The same as ietf_session_d17.test.mjs's own (which predates this
// module); used by ietf_fetch_d17.test.mjs.
import assert from "node:assert/strict";
import { RawWs, RawMux, qmux, BIG_PARAMS, readVarint } from "./raw.mjs";

export const RAW_PROTOCOL = {
  "moq-transport-17": "qmux-00.moqt-17",
  "moq-transport-18": "qmux-01.moqt-18",
  "moq-transport-20": "qmux-01.moqt-20",
};
// @moq/net 0.3.4's SETUP on 17..20 (ietf_fixtures.mjs): Implementation "moq-lite-js", RELAY_HOPS
// (its origin) and SOLICIT 1.
export const CLIENT_SETUP = Buffer.from("af00001b070b6d6f712d6c6974652d6a73c40b4e08fe0a5a2adb5a87d40501", "hex");
export const SERVER_SETUP = "af000000";

// Leading-ones varint (protocol/README.md §1.2), the form of every varint on 17+.
export function lo(v) {
  if (v < 0x80) return Buffer.from([v]);
  if (v < 0x4000) return Buffer.from([0x80 | (v >> 8), v & 0xff]);
  if (v < 0x200000) return Buffer.from([0xc0 | (v >> 16), (v >> 8) & 0xff, v & 0xff]);
  throw new Error("lo: value too large for this test");
}
export function readLo(buf, pos) {
  const b = buf[pos];
  let n = 0;
  while (n < 8 && b & (0x80 >> n)) n++;
  const len = n === 7 ? 7 : n === 8 ? 9 : n + 1;
  let v = BigInt(n >= 7 ? 0 : b & (0xff >> (n + 1)));
  for (let i = 1; i < len; i++) v = (v << 8n) | BigInt(buf[pos + i]);
  return { value: Number(v), next: pos + len };
}
export const loStr = (s) => Buffer.concat([lo(Buffer.byteLength(s)), Buffer.from(s)]);
export const loTuple = (...f) => Buffer.concat([lo(f.length), ...f.map(loStr)]);
export function msg17(type, ...body) {
  const b = Buffer.concat(body);
  const len = Buffer.alloc(2);
  len.writeUInt16BE(b.length);
  return Buffer.concat([lo(type), len, b]);
}
// Messages `type (i) length (16) body` back to back (complete ones only).
export function messages(buf) {
  const out = [];
  for (let pos = 0; pos < buf.length; ) {
    const t = readLo(buf, pos);
    if (t.next + 2 > buf.length) break;
    const len = buf.readUInt16BE(t.next);
    if (t.next + 2 + len > buf.length) break;
    out.push({ type: t.value, body: buf.subarray(t.next + 2, t.next + 2 + len) });
    pos = t.next + 2 + len;
  }
  return out;
}

// qmux-01 records may carry several frames (moqd packs them): split them for RawMux, which reads
// one frame per message. Lengths per RFC 9000 §19 / NET-0.3.md §2.2.
const QX_TP = 0x3f5153300d0a0d0an;
function splitRecord(msg) {
  const frames = [];
  let pos = 0;
  const v = () => {
    const r = readVarint(msg, pos);
    pos = r.next;
    return r.value;
  };
  while (pos < msg.length) {
    const start = pos;
    const type = v();
    if (type === 0) continue; // PADDING
    if (type >= 0x08 && type <= 0x0f) {
      v();
      if (type & 0x04) v();
      if (type & 0x02) {
        const n = Number(v());
        pos += n;
      } else pos = msg.length;
    } else if (type === 0x04) { v(); v(); v(); }
    else if (type === 0x05 || type === 0x11 || type === 0x15) { v(); v(); }
    else if (type === 0x1c || type === 0x1d) {
      v();
      v();
      const n = Number(v());
      pos += n;
    }
    else if (type === 0x10 || type === 0x12 || type === 0x13 || type === 0x14 || type === 0x16 || type === 0x17) v();
    else if (typeof type === "bigint") {
      const n = Number(v());
      if (type === QX_TP) pos += n;
    }
    else pos = msg.length;
    frames.push(msg.subarray(start, pos));
  }
  return frames;
}
class RawMux01 extends RawMux {
  onMessage(msg) {
    for (const f of splitRecord(Buffer.from(msg))) super.onMessage(f);
  }
}

// A raw session of `version`: SETUP sent on uni stream 2, moqd's SETUP read on its first uni
// stream (3).
export async function rawSession(m, version) {
  const protocol = RAW_PROTOCOL[version];
  const ws = await RawWs.connect(m, { protocols: [protocol] });
  assert.equal(ws.subprotocol, protocol);
  const framing = protocol.split(".")[0];
  const mux = framing === "qmux-00" ? new RawMux(ws, framing) : new RawMux01(ws, framing);
  mux.sendRaw(qmux.params(BIG_PARAMS));
  const setup = mux.open({ uni: true });
  mux.write(setup, CLIENT_SETUP);
  const theirs = await mux.waitStream(3, (x) => x.data().length >= 4, 5_000, "moqd's SETUP");
  assert.equal(theirs.data().subarray(0, 4).toString("hex"), SERVER_SETUP);
  return { mux, setup };
}
