// A raw client for hostile tests: every layer built byte by byte over node:net, so a test can
// misbehave at any of them. Layers, each usable alone:
//   RawTcp     - a TCP socket that records what arrives and how it ends (garbage, slowloris, reset)
//   RawWs      - the HTTP/1.1 upgrade and RFC 6455 frames (masked or not, any opcode, any size)
//   RawMux     - qmux-00 (or legacy "webtransport") frames on a RawWs, with per-stream records
//   RawLite    - moq-lite-02 on a RawMux: CLIENT_SETUP, ANNOUNCE_PLEASE, SUBSCRIBE, GROUP streams
// Nothing here retries or sleeps: every wait polls a condition against a deadline.
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";

// ---------------------------------------------------------------------------------------------
// Varints (QUIC, RFC 9000 §16)

// Encodes `v` (number or BigInt) in its shortest form, or in exactly `len` bytes (1, 2, 4, 8).
export function varint(v, len) {
  const n = BigInt(v);
  if (n < 0n || n >= 1n << 62n) throw new Error(`varint out of range: ${v}`);
  const size = len ?? (n < 64n ? 1 : n < 16384n ? 2 : n < 1n << 30n ? 4 : 8);
  const prefix = { 1: 0n, 2: 1n, 4: 2n, 8: 3n }[size];
  if (prefix === undefined || n >= 1n << BigInt(size * 8 - 2)) throw new Error(`varint ${v} does not fit ${size} bytes`);
  const out = Buffer.alloc(size);
  let x = n | (prefix << BigInt(size * 8 - 2));
  for (let i = size - 1; i >= 0; i--) {
    out[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  return out;
}

// Decodes a varint at `buf[pos]`: {value (Number if safe, else BigInt), next}, or null if truncated.
export function readVarint(buf, pos = 0) {
  if (pos >= buf.length) return null;
  const size = 1 << (buf[pos] >> 6);
  if (pos + size > buf.length) return null;
  let x = BigInt(buf[pos] & 0x3f);
  for (let i = 1; i < size; i++) x = (x << 8n) | BigInt(buf[pos + i]);
  return { value: x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x, next: pos + size };
}

// A moq-lite string: varint length + UTF-8.
export function str(s) {
  const b = Buffer.from(s, "utf8");
  return Buffer.concat([varint(b.length), b]);
}

// A moq-lite message: varint size + body.
export function sized(...parts) {
  const body = Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p))));
  return Buffer.concat([varint(body.length), body]);
}

// ---------------------------------------------------------------------------------------------
// Waiting

async function poll(cond, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() >= deadline) throw new Error(`timed out after ${ms} ms waiting for ${typeof what === "function" ? what() : what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

// ---------------------------------------------------------------------------------------------
// RawTcp

// A plain TCP connection. `received()` is everything read so far; `ended` tells how the peer
// finished: {how: "fin" | "reset" | "error", code} once the socket is closed.
export class RawTcp {
  // `localAddress` binds the client end (another loopback address, 127.0.0.2, is another source).
  static async connect(host, port, ms = 5_000, localAddress = undefined) {
    const socket = net.connect({ host, port, ...(localAddress ? { localAddress } : {}) });
    const raw = new RawTcp(socket);
    await poll(() => raw.connected || raw.ended, ms, `TCP connect to ${host}:${port}`);
    if (!raw.connected) throw new Error(`TCP connect to ${host}:${port} failed: ${JSON.stringify(raw.ended)}`);
    return raw;
  }

  constructor(socket) {
    this.socket = socket;
    this.chunks = [];
    this.size = 0;
    this.connected = false;
    this.finReceived = false; // the peer shut its write side
    this.ended = null;
    this.listeners = [];
    socket.setNoDelay(true);
    socket.on("connect", () => {
      this.connected = true;
      this.localPort = socket.localPort;
    });
    socket.on("data", (d) => {
      this.chunks.push(d);
      this.size += d.length;
      for (const l of this.listeners) l(d);
    });
    socket.on("end", () => {
      this.finReceived = true;
    });
    socket.on("error", (err) => {
      this.error = err;
    });
    socket.on("close", () => {
      const code = this.error?.code;
      this.ended = { how: code === "ECONNRESET" ? "reset" : code ? "error" : "fin", code };
    });
  }

  onData(fn) {
    this.listeners.push(fn);
  }

  received() {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  write(bytes) {
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  // Stops reading: the kernel buffers fill and the peer's writes block.
  pause() {
    this.socket.pause();
  }

  // Shuts our write side (FIN) and keeps reading.
  shutdownWrite() {
    this.socket.end();
  }

  // An abrupt RST.
  reset() {
    this.socket.resetAndDestroy();
  }

  destroy() {
    this.socket.destroy();
  }

  waitData(pred, ms, what = "data") {
    return poll(() => pred(this.received()), ms, () => `${what} (have ${this.size} bytes, ended=${JSON.stringify(this.ended)})`);
  }

  // Resolves with `ended` once the connection is closed (the peer closed it, or it reset).
  waitClosed(ms, what = "the server to close the connection") {
    return poll(() => this.ended, ms, () => `${what} (have ${this.size} bytes)`);
  }

  // Resolves once the peer sent FIN or the socket closed.
  waitPeerDone(ms, what = "the server to end the connection") {
    return poll(() => this.finReceived || this.ended, ms, () => `${what} (have ${this.size} bytes)`);
  }
}

// Parses an HTTP/1.1 response head from `buf`: {status, headers (lower-case names), headEnd}, or null.
export function parseHttpResponse(buf) {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.1 (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`not an HTTP response: ${JSON.stringify(lines[0])}`);
  const headers = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(":");
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status: Number(m[1]), headers, headEnd: end + 4 };
}

// The text of an upgrade request. `key: null` omits Sec-WebSocket-Key; `protocols: null` omits
// Sec-WebSocket-Protocol.
export function upgradeRequest({ host, path = "/", key = randomBytes(16).toString("base64"), protocols = ["qmux-00"], extra = [] }) {
  const lines = [
    `GET ${path} HTTP/1.1`,
    `Host: ${host}`,
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Version: 13",
  ];
  if (key !== null) lines.push(`Sec-WebSocket-Key: ${key}`);
  if (protocols !== null) lines.push(`Sec-WebSocket-Protocol: ${protocols.join(", ")}`);
  lines.push(...extra);
  return `${lines.join("\r\n")}\r\n\r\n`;
}

// ---------------------------------------------------------------------------------------------
// RawWs

export const Opcode = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 };

// Builds one WebSocket frame. Client frames are masked unless `mask: false`.
export function wsFrame(opcode, payload = Buffer.alloc(0), { mask = true, fin = true, rsv = 0, declaredLength } = {}) {
  const len = declaredLength ?? payload.length;
  const head = [((fin ? 0x80 : 0) | (rsv << 4) | opcode) & 0xff];
  const m = mask ? 0x80 : 0;
  let ext = Buffer.alloc(0);
  if (len < 126) head.push(m | len);
  else if (len < 65536) {
    head.push(m | 126);
    ext = Buffer.alloc(2);
    ext.writeUInt16BE(len);
  } else {
    head.push(m | 127);
    ext = Buffer.alloc(8);
    ext.writeBigUInt64BE(BigInt(len));
  }
  const parts = [Buffer.from(head), ext];
  if (mask) {
    const key = randomBytes(4);
    const body = Buffer.from(payload);
    for (let i = 0; i < body.length; i++) body[i] ^= key[i & 3];
    parts.push(key, body);
  } else {
    parts.push(Buffer.from(payload));
  }
  return Buffer.concat(parts);
}

// A WebSocket client after a completed upgrade. `messages` holds whole binary messages from the
// server; `closeFrame` the server's close frame {code, reason}; `onMessage(fn)` taps messages.
export class RawWs {
  // Opens TCP, sends the upgrade offering `protocols`, and checks the 101 and its accept key.
  static async connect(moqd, { protocols = ["qmux-00"], path = "/", ms = 5_000, localAddress } = {}) {
    const tcp = await RawTcp.connect(moqd.host, moqd.port, ms, localAddress);
    const key = randomBytes(16).toString("base64");
    tcp.write(upgradeRequest({ host: `${moqd.host}:${moqd.port}`, path, key, protocols }));
    const resp = await tcp.waitData((b) => parseHttpResponse(b), ms, "the upgrade response");
    if (resp.status !== 101) throw new Error(`upgrade answered ${resp.status}`);
    const accept = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
    if (resp.headers["sec-websocket-accept"] !== accept) throw new Error("bad Sec-WebSocket-Accept");
    return new RawWs(tcp, resp.headers["sec-websocket-protocol"], resp.headEnd);
  }

  constructor(tcp, subprotocol, offset) {
    this.tcp = tcp;
    this.subprotocol = subprotocol;
    this.offset = offset; // where unparsed frame bytes start in tcp.received()
    this.messages = [];
    this.closeFrame = null;
    this.pings = [];
    this.partial = [];
    this.handlers = [];
    this.protocolError = null;
    this.echoClose = true;
    tcp.onData(() => this.parse());
    this.parse();
  }

  onMessage(fn) {
    this.handlers.push(fn);
  }

  parse() {
    const buf = this.tcp.received();
    for (;;) {
      const rest = buf.subarray(this.offset);
      if (rest.length < 2) return;
      const fin = (rest[0] & 0x80) !== 0;
      const opcode = rest[0] & 0x0f;
      if (rest[1] & 0x80) {
        this.protocolError = "masked server frame";
        return;
      }
      let len = rest[1] & 0x7f;
      let pos = 2;
      if (len === 126) {
        if (rest.length < 4) return;
        len = rest.readUInt16BE(2);
        pos = 4;
      } else if (len === 127) {
        if (rest.length < 10) return;
        len = Number(rest.readBigUInt64BE(2));
        pos = 10;
      }
      if (rest.length < pos + len) return;
      const payload = Buffer.from(rest.subarray(pos, pos + len));
      this.offset += pos + len;
      if (opcode === Opcode.close) {
        this.closeFrame = payload.length >= 2 ? { code: payload.readUInt16BE(0), reason: payload.subarray(2).toString() } : { code: 1005, reason: "" };
        // Like a browser, answer the close (RFC 6455 §5.5.1) unless the test wants a silent peer.
        if (this.echoClose) this.tcp.write(wsFrame(Opcode.close, payload.subarray(0, 2)));
      } else if (opcode === Opcode.ping || opcode === Opcode.pong) {
        this.pings.push({ opcode, payload });
      } else {
        this.partial.push(payload);
        if (fin) {
          const message = Buffer.concat(this.partial);
          this.partial = [];
          this.messages.push(message);
          for (const h of this.handlers) h(message);
        }
      }
    }
  }

  send(bytes) {
    this.tcp.write(bytes);
  }

  sendBinary(payload, opts) {
    this.tcp.write(wsFrame(Opcode.binary, payload, opts));
  }

  sendClose(code = 1000, reason = "") {
    const p = Buffer.alloc(2 + Buffer.byteLength(reason));
    p.writeUInt16BE(code);
    p.write(reason, 2);
    this.tcp.write(wsFrame(Opcode.close, p));
  }

  // Resolves with the server's close frame {code, reason}.
  waitCloseFrame(ms, what = "a WebSocket close frame") {
    return poll(() => this.closeFrame, ms, () => `${what} (tcp ended=${JSON.stringify(this.tcp.ended)})`);
  }
}

// ---------------------------------------------------------------------------------------------
// RawMux

export const QX_TRANSPORT_PARAMETERS = 0x3f5153300d0a0d0an;

// Generous receive limits, so the server never waits for our MAX_* frames.
export const BIG_PARAMS = { 4: 1 << 30, 5: 1 << 24, 6: 1 << 24, 7: 1 << 24, 8: 1 << 16, 9: 1 << 16 };

// qmux-00 frame builders (legacy framing where noted by the RawMux methods).
export const qmux = {
  params(params = BIG_PARAMS) {
    const body = Buffer.concat(
      Object.entries(params).map(([id, v]) => {
        const value = varint(v);
        return Buffer.concat([varint(Number(id)), varint(value.length), value]);
      }),
    );
    return Buffer.concat([varint(QX_TRANSPORT_PARAMETERS, 8), varint(body.length), body]);
  },
  stream(id, data = Buffer.alloc(0), { fin = false, len = true, offset } = {}) {
    const type = 0x08 | (offset !== undefined ? 0x04 : 0) | (len ? 0x02 : 0) | (fin ? 0x01 : 0);
    const parts = [varint(type), varint(id)];
    if (offset !== undefined) parts.push(varint(offset));
    if (len) parts.push(varint(data.length));
    parts.push(Buffer.from(data));
    return Buffer.concat(parts);
  },
  reset: (id, code, finalSize = 0) => Buffer.concat([varint(0x04), varint(id), varint(code), varint(finalSize)]),
  stopSending: (id, code) => Buffer.concat([varint(0x05), varint(id), varint(code)]),
  close: (code, reason = "") => Buffer.concat([varint(0x1d), varint(code), varint(0), str(reason)]),
  maxData: (max) => Buffer.concat([varint(0x10), varint(max)]),
  maxStreamData: (id, max) => Buffer.concat([varint(0x11), varint(id), varint(max)]),
};

// Decodes one server frame (one message). Returns {kind, ...} or {kind: "bad"}.
export function decodeMux(framing, msg) {
  let pos = 0;
  const v = () => {
    const r = readVarint(msg, pos);
    if (!r) throw new Error("truncated");
    pos = r.next;
    return r.value;
  };
  try {
    if (framing === "webtransport") {
      const type = msg[pos++];
      if (type === 0x08 || type === 0x09) return { kind: "stream", id: v(), fin: type === 0x09, data: msg.subarray(pos) };
      if (type === 0x04) return { kind: "reset", id: v(), code: v() };
      if (type === 0x05) return { kind: "stop", id: v(), code: v() };
      if (type === 0x1d) return { kind: "close", code: v(), reason: msg.subarray(pos).toString() };
      return { kind: "bad", type };
    }
    const type = v();
    if (type === QX_TRANSPORT_PARAMETERS) return { kind: "params" };
    if (typeof type === "number" && type >= 0x08 && type <= 0x0f) {
      const id = v();
      if (type & 0x04) v();
      let data;
      if (type & 0x02) {
        const n = v();
        data = msg.subarray(pos, pos + n);
      } else data = msg.subarray(pos);
      return { kind: "stream", id, fin: (type & 1) === 1, data };
    }
    if (type === 0x04) return { kind: "reset", id: v(), code: v(), finalSize: v() };
    if (type === 0x05) return { kind: "stop", id: v(), code: v() };
    if (type === 0x1c || type === 0x1d) {
      const code = v();
      v();
      const n = v();
      return { kind: "close", code, reason: msg.subarray(pos, pos + n).toString() };
    }
    if (type === 0x10) return { kind: "maxData", max: v() };
    if (type === 0x11) return { kind: "maxStreamData", id: v(), max: v() };
    if (type === 0x12 || type === 0x13) return { kind: "maxStreams", uni: type === 0x13, max: v() };
    return { kind: "other", type };
  } catch {
    return { kind: "bad" };
  }
}

// Stream ids (QUIC): client bidi 0,4,8..; server bidi 1,5,9..; client uni 2,6..; server uni 3,7..
export const streamId = (index, { uni = false, server = false } = {}) => (index << 2) | (uni ? 2 : 0) | (server ? 1 : 0);
export const isServerStream = (id) => (id & 1) === 1;
export const isUniStream = (id) => (id & 2) === 2;

// The multiplexer over a RawWs. Records, per stream id: {data (Buffer), fin, reset (code),
// stop (code)}; `appClose` is the server's APPLICATION_CLOSE {code, reason}.
export class RawMux {
  static async connect(moqd, { framing = "qmux-00", params = BIG_PARAMS, path = "/", ms = 5_000 } = {}) {
    const ws = await RawWs.connect(moqd, { protocols: [framing], path, ms });
    if (ws.subprotocol !== framing) throw new Error(`server selected ${ws.subprotocol}, not ${framing}`);
    const mux = new RawMux(ws, framing);
    if (framing === "qmux-00" && params) mux.sendRaw(qmux.params(params));
    return mux;
  }

  constructor(ws, framing) {
    this.ws = ws;
    this.tcp = ws.tcp;
    this.framing = framing;
    this.streams = new Map();
    this.appClose = null;
    this.badFrames = [];
    this.serverParams = false;
    this.nextIndex = { bidi: 0, uni: 0 };
    this.streamListeners = [];
    ws.onMessage((m) => this.onMessage(m));
    for (const m of ws.messages) this.onMessage(m);
  }

  stream(id) {
    let s = this.streams.get(id);
    if (!s) {
      s = { id, chunks: [], fin: false, reset: undefined, stop: undefined };
      s.data = () => Buffer.concat(s.chunks);
      this.streams.set(id, s);
      for (const l of this.streamListeners) l(s);
    }
    return s;
  }

  onNewStream(fn) {
    this.streamListeners.push(fn);
  }

  onMessage(msg) {
    const f = decodeMux(this.framing, msg);
    switch (f.kind) {
      case "params":
        this.serverParams = true;
        return;
      case "stream": {
        const s = this.stream(f.id);
        if (f.data.length) s.chunks.push(Buffer.from(f.data));
        if (f.fin) s.fin = true;
        s.onData?.();
        return;
      }
      case "reset":
        this.stream(f.id).reset = f.code;
        return;
      case "stop":
        this.stream(f.id).stop = f.code;
        return;
      case "close":
        this.appClose = { code: f.code, reason: f.reason };
        return;
      case "bad":
        this.badFrames.push(msg);
        return;
      default:
        return;
    }
  }

  // One mux frame in one masked binary WebSocket message.
  sendRaw(frame, wsOpts) {
    this.ws.sendBinary(frame, wsOpts);
  }

  // Allocates the next client stream id of a kind.
  open({ uni = false } = {}) {
    const kind = uni ? "uni" : "bidi";
    return streamId(this.nextIndex[kind]++, { uni });
  }

  write(id, data, { fin = false } = {}) {
    if (this.framing === "webtransport") {
      this.sendRaw(Buffer.concat([Buffer.from([fin ? 0x09 : 0x08]), varint(id), Buffer.from(data)]));
    } else {
      this.sendRaw(qmux.stream(id, data, { fin }));
    }
  }

  reset(id, code) {
    this.sendRaw(this.framing === "webtransport" ? Buffer.concat([Buffer.from([0x04]), varint(id), varint(code)]) : qmux.reset(id, code));
  }

  stopSending(id, code) {
    this.sendRaw(this.framing === "webtransport" ? Buffer.concat([Buffer.from([0x05]), varint(id), varint(code)]) : qmux.stopSending(id, code));
  }

  close(code = 0, reason = "") {
    this.sendRaw(this.framing === "webtransport" ? Buffer.concat([Buffer.from([0x1d]), varint(code), Buffer.from(reason)]) : qmux.close(code, reason));
  }

  waitStream(id, pred, ms, what) {
    return poll(() => pred(this.stream(id)) && this.stream(id), ms, () => `${what ?? `stream ${id}`} (${this.describe()})`);
  }

  // Resolves with the truthy value of cond().
  waitUntil(cond, ms, what) {
    return poll(cond, ms, () => `${what} (${this.describe()})`);
  }

  // Resolves with the APPLICATION_CLOSE {code, reason}.
  waitAppClose(ms, what = "APPLICATION_CLOSE") {
    return poll(() => this.appClose, ms, () => `${what} (${this.describe()})`);
  }

  // Resolves once the server ended the session by any means: APPLICATION_CLOSE, WebSocket close or TCP close.
  waitEnded(ms, what = "the server to end the session") {
    return poll(() => this.appClose || this.ws.closeFrame || this.tcp.ended, ms, () => `${what} (${this.describe()})`);
  }

  describe() {
    const streams = [...this.streams.values()].map((s) => ({ id: s.id, bytes: s.chunks.reduce((n, c) => n + c.length, 0), fin: s.fin, reset: s.reset, stop: s.stop }));
    return `appClose=${JSON.stringify(this.appClose)} wsClose=${JSON.stringify(this.ws.closeFrame)} tcp=${JSON.stringify(this.tcp.ended)} streams=${JSON.stringify(streams)}`;
  }
}

// ---------------------------------------------------------------------------------------------
// RawLite (moq-lite-02)

// The CLIENT_SETUP @moq/lite 0.2.2 sends (protocol README §2.4), with the 0x20 type and u16 length.
export const CLIENT_SETUP = Buffer.from(
  "20002c03c0000000ff0dad02c0000000ff0dad01c0000000ff00000e020280 00a455070b6d6f712d6c6974652d6a73".replace(/\s/g, ""),
  "hex",
);
// SERVER_SETUP selecting moq-lite-02 with no parameters.
export const SERVER_SETUP_LITE02 = Buffer.from("21 00 09 c0 00 00 00 ff 0d ad 02 00".replace(/\s/g, ""), "hex");

export const lite = {
  announcePlease: (prefix) => Buffer.concat([varint(1), sized(str(prefix))]),
  announceInit: (suffixes) => sized(varint(suffixes.length), ...suffixes.map(str)),
  announce: (active, suffix) => sized(Buffer.from([active ? 1 : 0]), str(suffix)),
  subscribe: (id, broadcast, track, priority = 0) => Buffer.concat([varint(2), sized(varint(id), str(broadcast), str(track), Buffer.from([priority]))]),
  subscribeOk: () => Buffer.from([0]),
  groupHeader: (subscribeId, sequence) => Buffer.concat([Buffer.from([0]), sized(varint(subscribeId), varint(sequence))]),
  frame: (payload) => Buffer.concat([varint(payload.length), Buffer.from(payload)]),
};

// Parses a moq-lite GROUP stream (after its 00 type byte): {subscribeId, sequence, frames: [Buffer]}
// for the complete frames so far, or null before the header is complete.
export function parseGroupStream(buf) {
  if (buf.length < 1 || buf[0] !== 0) return null;
  const size = readVarint(buf, 1);
  if (!size || size.next + size.value > buf.length) return null;
  const id = readVarint(buf, size.next);
  const seq = readVarint(buf, id.next);
  let pos = size.next + size.value;
  const frames = [];
  for (;;) {
    const n = readVarint(buf, pos);
    if (!n || n.next + n.value > buf.length) break;
    frames.push(buf.subarray(n.next, n.next + n.value));
    pos = n.next + n.value;
  }
  return { subscribeId: id.value, sequence: seq.value, frames };
}

// A moq-lite-02 session over a RawMux. setup() does the SETUP exchange on client bidi stream 0.
// Server-opened bidi streams are recorded; announce(...) answers the relay's ANNOUNCE_PLEASE and
// onSubscribe(fn) is called with {streamId, id, broadcast, track} for each SUBSCRIBE it sends.
export class RawLite {
  static async connect(moqd, opts = {}) {
    const mux = await RawMux.connect(moqd, opts);
    return new RawLite(mux);
  }

  constructor(mux) {
    this.mux = mux;
    this.nextSubscribeId = 0;
    this.subscribeHandlers = [];
    this.announceStream = undefined;
    this.serverSubscribes = [];
    this.parsedSubscribe = new Set();
    mux.onNewStream((s) => {
      if (isServerStream(s.id) && !isUniStream(s.id)) s.onData = () => this.onServerBidi(s);
    });
  }

  get tcp() {
    return this.mux.tcp;
  }

  // Sends CLIENT_SETUP (or `bytes`) on stream 0; with `wait`, resolves once SERVER_SETUP arrived.
  async setup({ bytes = CLIENT_SETUP, wait = true, ms = 5_000 } = {}) {
    const id = this.mux.open();
    this.setupStream = id;
    this.mux.write(id, bytes);
    if (!wait) return undefined;
    await this.mux.waitStream(id, (s) => s.data().length >= SERVER_SETUP_LITE02.length, ms, "SERVER_SETUP");
    return this.mux.stream(id).data();
  }

  onServerBidi(s) {
    const data = s.data();
    if (data[0] === 1 && this.announceStream === undefined) {
      this.announceStream = s.id;
      this.onAnnouncePlease?.(s.id);
    } else if (data[0] === 2 && !this.parsedSubscribe.has(s.id)) {
      const size = readVarint(data, 1);
      if (!size || size.next + size.value > data.length) return;
      this.parsedSubscribe.add(s.id);
      let pos = size.next;
      const id = readVarint(data, pos);
      pos = id.next;
      const b = readVarint(data, pos);
      const broadcast = data.subarray(b.next, b.next + b.value).toString();
      pos = b.next + b.value;
      const t = readVarint(data, pos);
      const track = data.subarray(t.next, t.next + t.value).toString();
      const sub = { streamId: s.id, id: id.value, broadcast, track };
      this.serverSubscribes.push(sub);
      for (const h of this.subscribeHandlers) h(sub);
    }
  }

  // Publishes `paths` to the relay: answers its ANNOUNCE_PLEASE with ANNOUNCE_INIT.
  announce(paths) {
    this.onAnnouncePlease = (id) => this.mux.write(id, lite.announceInit(paths));
    if (this.announceStream !== undefined) this.onAnnouncePlease(this.announceStream);
  }

  onSubscribe(fn) {
    this.subscribeHandlers.push(fn);
    for (const sub of this.serverSubscribes) fn(sub);
  }

  // Opens a Subscribe stream: returns {streamId, id}.
  subscribe(broadcast, track, priority = 0) {
    const streamId = this.mux.open();
    const id = this.nextSubscribeId++;
    this.mux.write(streamId, lite.subscribe(id, broadcast, track, priority));
    return { streamId, id };
  }

  // Group streams received so far (server uni streams), parsed.
  groups() {
    return [...this.mux.streams.values()]
      .filter((s) => isServerStream(s.id) && isUniStream(s.id))
      .map((s) => ({ streamId: s.id, fin: s.fin, reset: s.reset, ...parseGroupStream(s.data()) }));
  }
}

// ---------------------------------------------------------------------------------------------
// moqd's log

// Resolves with the match of `re` in moqd's stderr (the log is written by a background thread).
export function waitLog(moqd, re, ms = 5_000) {
  return poll(() => re.exec(moqd.stderrText()), ms, () => `moqd to log ${re}\nstderr:\n${moqd.stderrText()}`);
}

// A regex source matching the peer field of moqd's session log lines for this connection.
export function peerField(tcp) {
  return `peer=127\\.0\\.0\\.1:${tcp.localPort}\\b`;
}

// The log line moqd writes when the session of `tcp` ends with `code`.
export function sessionEndRe(tcp, code) {
  return new RegExp(`session \\d+ end ${peerField(tcp)} .*code=${code}\\b.*`);
}
