// Raw IETF MoQ Transport client pieces over raw.mjs's RawWs / RawMux, shared by the ietf_*.test.mjs
// files that write and read the drafts' bytes themselves:
//   drafts 14..16 - QUIC varints (raw.mjs varint/readVarint), one control stream: msg16, tuple16,
//                   controlMessages16, controlSession16, parseSubgroup16
//   drafts 17..20 - leading-ones varints (lo/readLo), a bidi stream per request, SETUP on uni
//                   streams: msg17, messages, loStr, loTuple, parseSubgroup17, rawSession
//   qmux-01       - RawMux01, which splits moqd's packed records into the one-frame messages
//                   RawMux reads (splitRecord)
import assert from "node:assert/strict";
import * as Net from "@moq/net";
import { RawWs, RawMux, qmux, BIG_PARAMS, varint, readVarint, str } from "./raw.mjs";

// @moq/lite's Implementation string, as the SETUP fixtures write it (hex).
export const IMPL = Buffer.from("moq-lite-js").toString("hex");
export const hex = (h) => Buffer.from(h.replace(/\s/g, ""), "hex");

// ---------------------------------------------------------------------------------------------
// Drafts 14..16: `type (i) length (16) body` with QUIC varints, on one control stream.

// `type (i) length (16) body` with the varint encoder `enc`.
function framed(enc) {
  return (type, ...body) => {
    const b = Buffer.concat(body);
    const len = Buffer.alloc(2);
    len.writeUInt16BE(b.length);
    return Buffer.concat([enc(type), len, b]);
  };
}
export const msg16 = framed(varint);
export const tuple16 = (path) => {
  const fields = path.split("/");
  return Buffer.concat([varint(fields.length), ...fields.map((f) => str(f))]);
};
// Control messages as {type, body} back to back in `buf` (complete ones only).
export function controlMessages16(buf) {
  const out = [];
  let at = 0;
  for (;;) {
    const t = readVarint(buf, at);
    if (!t || t.next + 2 > buf.length) break;
    const len = buf.readUInt16BE(t.next);
    if (t.next + 2 + len > buf.length) break;
    out.push({ type: t.value, body: buf.subarray(t.next + 2, t.next + 2 + len) });
    at = t.next + 2 + len;
  }
  return out;
}

// A raw session over qmux-00 with a control stream: `setup` (CLIENT_SETUP bytes) written on client
// bidi stream 0, resolved once moqd's whole SERVER_SETUP is there. `messages()` are the control
// messages after it.
export async function controlSession16(m, protocol, setup) {
  const ws = await RawWs.connect(m, { protocols: [protocol] });
  const mux = new RawMux(ws, "qmux-00");
  mux.sendRaw(qmux.params(BIG_PARAMS));
  const control = mux.open();
  mux.write(control, setup);
  const s = await mux.waitStream(control, (x) => x.data().length >= 3 && x.data().length >= 3 + x.data().readUInt16BE(1), 5_000, "SERVER_SETUP");
  const setupLen = 3 + s.data().readUInt16BE(1);
  return { ws, mux, control, setupLen, messages: () => controlMessages16(mux.stream(control).data().subarray(setupLen)) };
}

// ---------------------------------------------------------------------------------------------
// Leading-ones varints (protocol/README.md §1.2), the form of every varint on 17+.

// Encodes as @moq/net writes them (shortest form; it never writes the 7-byte 1111110x form).
export const lo = (v) => Buffer.from(Net.Varint.encodeLeadingOnes(BigInt(v)));

// Decodes the varint at `buf[pos]`: {value (Number), next}. n leading ones take n + 1 bytes
// (1111110x: 7, 11111110: 8), except 11111111: 9.
export function readLo(buf, pos) {
  const b = buf[pos];
  let n = 0;
  while (n < 8 && b & (0x80 >> n)) n++;
  const len = n === 8 ? 9 : n + 1;
  let v = BigInt(n >= 7 ? 0 : b & (0xff >> (n + 1)));
  for (let i = 1; i < len; i++) v = (v << 8n) | BigInt(buf[pos + i]);
  return { value: Number(v), next: pos + len };
}
export const loStr = (s) => Buffer.concat([lo(Buffer.byteLength(s)), Buffer.from(s)]);
export const loTuple = (...f) => Buffer.concat([lo(f.length), ...f.map(loStr)]);

// A 17+ message: `type (i) length (16) body`.
export const msg17 = framed(lo);
// 17+ messages back to back as {type, body} (complete ones only).
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

// A SUBGROUP stream moqd wrote, read with the varint reader `read` (readVarint on 14..16, readLo on
// 17+): {alias, group, frames}. Type, alias, group, publisher priority; objects: delta,
// [extension block when the type's 0x01 bit is set], length, payload, or Object Status after a
// zero length.
function subgroupParser(read) {
  return (b) => {
    const type = read(b, 0);
    const alias = read(b, type.next);
    const group = read(b, alias.next);
    let pos = group.next + 1; // publisher priority
    const frames = [];
    while (pos < b.length) {
      const delta = read(b, pos);
      let at = delta.next;
      if (type.value & 0x01) {
        // The publisher's extension block (@moq/net's timestamp property), forwarded as it came.
        const ext = read(b, at);
        at = ext.next + ext.value;
      }
      const len = read(b, at);
      pos = len.next;
      if (len.value === 0) pos = read(b, pos).next; // Object Status
      frames.push(Buffer.from(b.subarray(pos, pos + len.value)));
      pos += len.value;
    }
    return { alias: alias.value, group: group.value, frames };
  };
}
export const parseSubgroup16 = subgroupParser(readVarint);
export const parseSubgroup17 = subgroupParser(readLo);

// ---------------------------------------------------------------------------------------------
// qmux-01

const QX_TP = 0x3f5153300d0a0d0an;

// qmux-01 records may carry several frames (moqd packs them): the frames of one record. Lengths
// per RFC 9000 §19 / NET-0.3.md §2.2.
export function splitRecord(msg) {
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
        const n = Number(v()); // read before `pos +=` reads pos
        pos += n;
      } else pos = msg.length;
    } else if (type === 0x04) {
      v(); v(); v();
    } else if (type === 0x05 || type === 0x11 || type === 0x15) {
      v(); v();
    } else if (type === 0x1c || type === 0x1d) {
      // moqd's qmux CONNECTION_CLOSE carries the frame type field in both (raw.mjs decodeMux).
      v();
      v();
      const n = Number(v());
      pos += n;
    } else if (type === 0x10 || type === 0x12 || type === 0x13 || type === 0x14 || type === 0x16 || type === 0x17) v();
    else if (typeof type === "bigint") {
      const n = Number(v());
      if (type === QX_TP) pos += n;
    } else pos = msg.length;
    frames.push(msg.subarray(start, pos));
  }
  return frames;
}

// A RawMux over qmux-01: each record is split into frames before RawMux reads them.
export class RawMux01 extends RawMux {
  onMessage(msg) {
    let frames;
    try {
      frames = splitRecord(Buffer.from(msg));
    } catch (err) {
      throw new Error(`record ${Buffer.from(msg).toString("hex")}: ${err}`);
    }
    for (const f of frames) super.onMessage(f);
  }
}

// ---------------------------------------------------------------------------------------------
// Raw sessions of drafts 17, 18, 20 over WebSocket (19 is not offered there by @moq/net 0.3.4).

export const RAW_PROTOCOL = {
  "moq-transport-17": "qmux-00.moqt-17",
  "moq-transport-18": "qmux-01.moqt-18",
  "moq-transport-20": "qmux-01.moqt-20",
};
// @moq/net 0.3.4's SETUP on 17..20 (ietf_fixtures.mjs): Implementation "moq-lite-js", RELAY_HOPS
// with its origin 0x0a5a2adb5a87d4 (an 8-byte leading-ones varint, fe...), SOLICIT 1.
export const CLIENT_SETUP = Buffer.from("af00001b070b6d6f712d6c6974652d6a73c40b4e08fe0a5a2adb5a87d40501", "hex");
// moqd's SETUP with no options; the stream stays open (GOAWAY goes there).
export const SERVER_SETUP = "af000000";

// A raw session of `version`: CLIENT_SETUP sent on uni stream 2 (`setup`), moqd's whole SETUP read
// on its first uni stream (3) and returned as hex (`serverSetup`); unless `expectSetup` is null, it
// must be that hex. `groups()` parses moqd's finished SUBGROUP streams: group id -> payloads.
export async function rawSession(m, version, { expectSetup = SERVER_SETUP, clientSetup = CLIENT_SETUP } = {}) {
  const protocol = RAW_PROTOCOL[version];
  const ws = await RawWs.connect(m, { protocols: [protocol] });
  assert.equal(ws.subprotocol, protocol);
  const framing = protocol.split(".")[0];
  const mux = framing === "qmux-00" ? new RawMux(ws, framing) : new RawMux01(ws, framing);
  mux.sendRaw(qmux.params(BIG_PARAMS));
  const setup = mux.open({ uni: true });
  mux.write(setup, clientSetup);
  const theirs = await mux.waitStream(3, (x) => x.data().length >= 4 && x.data().length >= 4 + x.data().readUInt16BE(2), 5_000, "moqd's SETUP");
  const serverSetup = theirs.data().subarray(0, 4 + theirs.data().readUInt16BE(2)).toString("hex");
  if (expectSetup !== null) assert.equal(serverSetup, expectSetup);
  const groups = () => {
    const out = new Map();
    for (const st of mux.streams.values()) {
      if (st.id === 3 || (st.id & 3) !== 3 || !st.fin) continue;
      const { group, frames } = parseSubgroup17(st.data());
      out.set(group, frames);
    }
    return out;
  };
  return { mux, setup, serverSetup, groups };
}
