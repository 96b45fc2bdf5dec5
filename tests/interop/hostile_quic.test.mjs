// Hostile datagrams on moqd's UDP (QUIC) side: random garbage, truncated and undecryptable
// Initials, short-header packets for unknown connection IDs (stateless resets: size, timing,
// rate limit), a client that starts a real handshake and then goes silent, and a flood of valid
// Initials from random connection IDs (held to --max-pending-handshakes). One moqd for the
// file; a JS bystander pair over WebSocket and a `moq sub` over QUIC read a live track
// throughout, and after every attack the test asserts neither lost anything.
// scripts/test.sh runs this file alone (see interop() there): it counts stateless resets per rate-limit window.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import dgram from "node:dgram";
import { readFileSync } from "node:fs";
import { after, test } from "node:test";

import { MOQD_SANITIZED, TEST_TIMEOUT_MS, moqdStopsCleanly, pace, spawnMoq, startBystander, startMoqd, stopMoqdClean, useMoqd, waitFor } from "./harness.mjs";

// The flood test's bounds: handshakes from unproven addresses held per worker, and how long.
const MAX_PENDING = 64;
const ctx = useMoqd(["--max-pending-handshakes", String(MAX_PENDING), "--handshake-timeout", "2s"]);
const opts = { timeout: TEST_TIMEOUT_MS };

const SEED = Number(process.env.HOSTILE_QUIC_SEED ?? (Date.now() & 0x7fffffff));
console.log(`hostile_quic seed=${SEED} (rerun with HOSTILE_QUIC_SEED=${SEED})`);

// mulberry32: small, seedable, good enough for fuzz inputs.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = prng(SEED);
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const randBytes = (n) => Buffer.from(Array.from({ length: n }, () => randInt(0, 255)));

// ---------------------------------------------------------------------------------------------
// Bystanders: the JS pair over WebSocket, and `moq sub` over QUIC on the same track.

let bystander;
let quicSub;
async function bystanders() {
  if (!bystander) {
    bystander = await startBystander(ctx.moqd.url);
    quicSub = spawnMoq(["sub", ctx.moqd.url, "bystander", "--track", "t", "--transport", "quic"]);
    await quicSub.waitStdout((out) => out.length > 0, 10_000, "the QUIC bystander's first frame");
  }
}
after(() => {
  bystander?.stop();
  quicSub?.stop().catch(() => {});
});

// Both bystanders kept receiving: the JS one lost nothing, the QUIC one kept printing frames.
async function checkBystanders() {
  const before = quicSub.stdout().length;
  await bystander.check();
  await quicSub.waitStdout((out) => out.length >= before + 64 * 5, 5_000, "the QUIC bystander to keep printing frames");
  assert.equal(ctx.moqd.proc.exitCode, null, `moqd exited\n${ctx.moqd.describe()}`);
}

// ---------------------------------------------------------------------------------------------
// Raw UDP

async function udpPeer(port = ctx.moqd.port) {
  const sock = dgram.createSocket({ type: "udp4", recvBufferSize: 8 << 20 });
  const received = [];
  sock.on("message", (msg) => received.push({ at: Date.now(), msg }));
  await new Promise((resolve) => sock.bind(0, "127.0.0.1", resolve));
  const send = (buf) =>
    new Promise((resolve, reject) => sock.send(buf, port, "127.0.0.1", (err) => (err ? reject(err) : resolve())));
  return { sock, received, send, close: () => sock.close() };
}

// Sends `bufs` in batches so the socket's send queue stays bounded.
async function sendAll(peer, bufs, batch = 200) {
  for (let i = 0; i < bufs.length; i += batch) await Promise.all(bufs.slice(i, i + batch).map((b) => peer.send(b)));
}

const isShortHeader = (b) => b.length > 0 && (b[0] & 0x80) === 0;

function shortHeader(len, dcid) {
  const b = randBytes(len);
  b[0] = 0x40 | (b[0] & 0x3f);
  dcid.copy(b, 1);
  return b;
}

const unknownCid = (worker) => Buffer.concat([Buffer.from([worker]), randBytes(15)]);

// ---------------------------------------------------------------------------------------------
// QUIC v1 Initial packets (RFC 9001 §5)

const INITIAL_SALT = Buffer.from("38762cf7f55934b34d179ae6a4c80cadccbb7f0a", "hex");

function initialKeys(dcid, label) {
  const initial = crypto.createHmac("sha256", INITIAL_SALT).update(dcid).digest();
  // HKDF-Expand-Label with one HMAC block (every output here is <= 32 bytes).
  const expand = (prk, label, length) => {
    const full = Buffer.from(`tls13 ${label}`);
    const info = Buffer.concat([Buffer.from([length >> 8, length & 0xff, full.length]), full, Buffer.from([0])]);
    return crypto.createHmac("sha256", prk).update(Buffer.concat([info, Buffer.from([1])])).digest().subarray(0, length);
  };
  const secret = expand(initial, label, 32);
  return { key: expand(secret, "quic key", 16), iv: expand(secret, "quic iv", 12), hp: expand(secret, "quic hp", 16) };
}

const u16 = (n) => Buffer.from([n >> 8, n & 0xff]);
const vec8 = (b) => Buffer.concat([Buffer.from([b.length]), b]);
const vec16 = (b) => Buffer.concat([u16(b.length), b]);
const ext = (type, body) => Buffer.concat([u16(type), vec16(body)]);

function varint(n) {
  if (n < 0x40) return Buffer.from([n]);
  if (n < 0x4000) return u16(0x4000 | n);
  const b = Buffer.alloc(4);
  b.writeUInt32BE(0x80000000 | n);
  return b;
}

// A TLS 1.3 ClientHello that GnuTLS accepts: X25519, TLS_AES_128_GCM_SHA256, moqd's ALPNs and
// the QUIC transport parameters extension with initial_source_connection_id.
// One key share for every ClientHello: generating a key pair per Initial (thousands in the flood
// tests) once deadlocked Node 20's main thread in a KeyGenJob destructor run by the GC.
const clientKeyShare = Buffer.from(
  crypto.generateKeyPairSync("x25519").publicKey.export({ format: "jwk" }).x, "base64url");

function clientHello(scid, alpns = ["moq-lite-04", "moq-lite-03", "moql"]) {
  const pub = clientKeyShare;
  const alpn = vec16(Buffer.concat(alpns.map((s) => vec8(Buffer.from(s)))));
  const tp = Buffer.concat([
    varint(0x0f), varint(scid.length), scid, // initial_source_connection_id
    varint(0x04), varint(4), Buffer.from([0x80, 0x10, 0x00, 0x00]), // initial_max_data 1 MiB
  ]);
  const extensions = Buffer.concat([
    ext(10, vec16(u16(0x001d))), // supported_groups: x25519
    ext(13, vec16(Buffer.concat([0x0403, 0x0804, 0x0807, 0x0805, 0x0503].map(u16)))), // signature_algorithms
    ext(43, vec8(u16(0x0304))), // supported_versions: TLS 1.3
    ext(51, vec16(Buffer.concat([u16(0x001d), vec16(pub)]))), // key_share
    ext(16, alpn),
    ext(0x39, tp),
  ]);
  const body = Buffer.concat([
    u16(0x0303),
    crypto.randomBytes(32),
    vec8(Buffer.alloc(0)), // legacy_session_id
    vec16(u16(0x1301)),
    vec8(Buffer.from([0])),
    vec16(extensions),
  ]);
  return Buffer.concat([Buffer.from([1, 0, body.length >> 8, body.length & 0xff]), body]);
}

// An Initial padded to 1200 bytes carrying `payload` (frames), protected with the keys derived
// from `dcid` unless `garbage` (then the payload is random bytes that fail authentication).
function initialPacket({ dcid, scid, payload, garbage = false }) {
  const pnLen = 4;
  const header0 = Buffer.concat([
    Buffer.from([0xc0 | (pnLen - 1), 0, 0, 0, 1]),
    vec8(dcid),
    vec8(scid),
    varint(0), // token length
  ]);
  const total = 1200;
  const payloadLen = total - header0.length - 2 - pnLen - 16; // 2: the length varint
  const plain = Buffer.concat([payload, Buffer.alloc(payloadLen - payload.length)]); // PADDING
  const header = Buffer.concat([header0, u16(0x4000 | (pnLen + plain.length + 16)), Buffer.alloc(pnLen)]);
  if (garbage) return Buffer.concat([header, randBytes(plain.length + 16)]);
  const { key, iv, hp } = initialKeys(dcid, "client in");
  const cipher = crypto.createCipheriv("aes-128-gcm", key, iv); // packet number 0: nonce = iv
  cipher.setAAD(header);
  const sealed = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  const pnOffset = header.length - pnLen;
  const sample = sealed.subarray(4 - pnLen, 4 - pnLen + 16);
  const ecb = crypto.createCipheriv("aes-128-ecb", hp, null);
  const mask = ecb.update(sample);
  const out = Buffer.concat([header, sealed]);
  out[0] ^= mask[0] & 0x0f;
  for (let i = 0; i < pnLen; i++) out[pnOffset + i] ^= mask[1 + i];
  return out;
}

function readVarint(b, off) {
  const len = 1 << (b[off] >> 6);
  let v = b[off] & 0x3f;
  for (let i = 1; i < len; i++) v = v * 256 + b[off + i];
  return [v, off + len];
}

// Decrypts the first packet of a server Initial datagram (keys from the client's original
// DCID) and returns the first handshake message type in its CRYPTO data (2: ServerHello), or
// throws describing what came instead.
function serverInitialHandshakeType(datagram, originalDcid) {
  const { key, iv, hp } = initialKeys(originalDcid, "server in");
  let off = 6 + datagram[5];
  off += 1 + datagram[off];
  const [tokenLen, o1] = readVarint(datagram, off);
  const [length, pnOffset] = readVarint(datagram, o1 + tokenLen);
  const mask = crypto.createCipheriv("aes-128-ecb", hp, null).update(datagram.subarray(pnOffset + 4, pnOffset + 20));
  const first = datagram[0] ^ (mask[0] & 0x0f);
  const pnLen = (first & 3) + 1;
  const header = Buffer.from(datagram.subarray(0, pnOffset + pnLen));
  header[0] = first;
  let pn = 0;
  for (let i = 0; i < pnLen; i++) {
    header[pnOffset + i] ^= mask[1 + i];
    pn = pn * 256 + header[pnOffset + i];
  }
  const nonce = Buffer.from(iv);
  for (let i = 0; i < 4; i++) nonce[11 - i] ^= (pn >>> (8 * i)) & 0xff;
  const body = datagram.subarray(pnOffset + pnLen, pnOffset + length);
  const decipher = crypto.createDecipheriv("aes-128-gcm", key, nonce);
  decipher.setAAD(header);
  decipher.setAuthTag(body.subarray(body.length - 16));
  const plain = Buffer.concat([decipher.update(body.subarray(0, body.length - 16)), decipher.final()]);
  for (let p = 0; p < plain.length; ) {
    const [type, next] = readVarint(plain, p);
    p = next;
    if (type === 0x00) continue; // PADDING
    if (type === 0x02 || type === 0x03) { // ACK
      let v;
      [v, p] = readVarint(plain, p); // largest
      [v, p] = readVarint(plain, p); // delay
      let ranges;
      [ranges, p] = readVarint(plain, p);
      [v, p] = readVarint(plain, p); // first range
      for (let i = 0; i < 2 * ranges + (type === 0x03 ? 3 : 0); i++) [v, p] = readVarint(plain, p);
      continue;
    }
    if (type === 0x06) {
      [, p] = readVarint(plain, p); // offset
      [, p] = readVarint(plain, p); // length
      return plain[p];
    }
    if (type === 0x1c) { // CONNECTION_CLOSE (transport)
      const [code] = readVarint(plain, p);
      return { close: code };
    }
    throw new Error(`server Initial frame type 0x${type.toString(16)} before CRYPTO: ${plain.subarray(p - 1, p + 40).toString("hex")}`);
  }
  throw new Error("server Initial without a CRYPTO frame");
}

const cryptoFrame = (data) => Buffer.concat([varint(0x06), varint(0), varint(data.length), data]);

// ---------------------------------------------------------------------------------------------

test("2,000 random datagrams of 1..1500 bytes leave moqd and the bystanders unaffected", opts, async () => {
  await bystanders();
  const peer = await udpPeer();
  try {
    const bufs = Array.from({ length: 2000 }, () => randBytes(randInt(1, 1500)));
    await sendAll(peer, bufs);
    await pace(200);
    await checkBystanders();
  } finally {
    peer.close();
  }
});

test("truncated Initials and an undecryptable 1200-byte Initial are dropped", opts, async () => {
  await bystanders();
  const peer = await udpPeer();
  try {
    const dcid = randBytes(8);
    const scid = randBytes(8);
    const full = initialPacket({ dcid, scid, payload: Buffer.alloc(0), garbage: true });
    // The length varint claims 1200 - header bytes; cut the datagram well short of it.
    for (const n of [30, 60, 200]) await peer.send(full.subarray(0, n));
    await peer.send(full);
    await pace(300);
    await checkBystanders();
    // None of these could start a connection; an answer would mean moqd kept state for them.
    const longAnswers = peer.received.filter((r) => !isShortHeader(r.msg));
    assert.equal(longAnswers.length, 0, `moqd answered a broken Initial: ${longAnswers.map((r) => r.msg.toString("hex")).join(" ")}`);
  } finally {
    peer.close();
  }
});

test("a short-header packet for an unknown CID gets a stateless reset smaller than it; bursts are rate limited", opts, async () => {
  await bystanders();
  const peer = await udpPeer();
  try {
    for (const worker of [0, 1]) {
      peer.received.length = 0;
      // Resets are rate limited per second (the random datagrams of the previous test may have used
      // this second's budget), so the trigger is repeated until an answer comes.
      await waitFor(
        async () => {
          if (peer.received.length > 0) return true;
          await peer.send(shortHeader(100, unknownCid(worker)));
          return false;
        },
        3_000,
        `a stateless reset for a CID of worker ${worker}`,
        200,
      );
      const { msg } = peer.received[0];
      assert.ok(msg.length < 100 && msg.length >= 21, `stateless reset of ${msg.length} bytes for a 100-byte trigger`);
      assert.equal(msg[0] & 0xc0, 0x40, "a stateless reset looks like a short-header packet");
    }

    // 25 bytes: an answer must be shorter still (and at least 21), or there is none.
    peer.received.length = 0;
    await peer.send(shortHeader(25, unknownCid(0)));
    await pace(500);
    for (const { msg } of peer.received) assert.ok(msg.length < 25 && msg.length >= 21, `reset of ${msg.length} bytes for a 25-byte trigger`);

    // Let the rate-limit window roll, then a burst.
    await pace(1_000);
    peer.received.length = 0;
    const burst = Array.from({ length: 5000 }, (_, i) => shortHeader(100, unknownCid(i % 2)));
    const started = Date.now();
    await sendAll(peer, burst);
    const sendMs = Date.now() - started;
    await pace(1_000);
    const resets = peer.received.length;
    console.log(`burst of 5000 triggers sent in ${sendMs} ms got ${resets} stateless resets`);
    assert.ok(resets > 0, "no stateless reset at all for the burst");
    assert.ok(resets < 5000, `${resets} stateless resets for 5000 triggers: not rate limited`);
    await checkBystanders();
  } finally {
    peer.close();
  }
});

test("an Initial offering only an unknown ALPN is refused with no_application_protocol", opts, async () => {
  await bystanders();
  const peer = await udpPeer();
  try {
    const dcid = randBytes(8);
    const scid = randBytes(8);
    await peer.send(initialPacket({ dcid, scid, payload: cryptoFrame(clientHello(scid, ["h9-unknown"])) }));
    await waitFor(() => peer.received.length > 0, 2_000, "moqd's answer to an Initial with an unknown ALPN");
    // 0x178 = 0x100 + TLS alert 120 (no_application_protocol), RFC 9001 §4.8.
    assert.deepEqual(serverInitialHandshakeType(peer.received[0].msg, dcid), { close: 0x178 });
    await checkBystanders();
  } finally {
    peer.close();
  }
});

// Every ALPN of the default --versions (the table's order): 12, more than the 8 GnuTLS 3.7 takes
// in one gnutls_alpn_set_protocols. moqd picks from the ClientHello, so each one alone, and all
// of them at once, start a handshake over raw QUIC. "moq-00" is draft 14's own ALPN (SETUP picks
// 14 there: src/session/ietf_session_test.cc, Moq00AlpnIsDraft14ThroughSetup).
const DEFAULT_ALPNS = ["moq-lite-05", "moq-lite-04", "moq-lite-03", "moqt-20", "moqt-19", "moqt-18",
  "moqt-17", "moqt-16", "moqt-15", "moql", "moq-00", "h3"];

test("every ALPN of the default --versions is reachable over raw QUIC", opts, async () => {
  await bystanders();
  for (const alpns of [...DEFAULT_ALPNS.map((a) => [a]), DEFAULT_ALPNS, ["h9-unknown", "moqt-15"]]) {
    const peer = await udpPeer();
    try {
      const dcid = randBytes(8);
      const scid = randBytes(8);
      await peer.send(initialPacket({ dcid, scid, payload: cryptoFrame(clientHello(scid, alpns)) }));
      await waitFor(() => peer.received.length > 0, 2_000, `moqd's answer to an Initial offering ${alpns}`);
      assert.equal(serverInitialHandshakeType(peer.received[0].msg, dcid), 2, `a ServerHello for ${alpns}`);
    } finally {
      peer.close();
    }
  }
  await checkBystanders();
});

test("moq-00 is served only while draft 14 is: --versions moq-transport-16 refuses it with no_application_protocol", opts, async () => {
  const m = await startMoqd(["--versions", "moq-transport-16"]);
  try {
    for (const [alpns, want] of [[["moq-00"], { close: 0x178 }], [["moqt-16"], 2]]) {
      const peer = await udpPeer(m.port);
      try {
        const dcid = randBytes(8);
        const scid = randBytes(8);
        await peer.send(initialPacket({ dcid, scid, payload: cryptoFrame(clientHello(scid, alpns)) }));
        await waitFor(() => peer.received.length > 0, 2_000, `moqd's answer to an Initial offering ${alpns}`);
        assert.deepEqual(serverInitialHandshakeType(peer.received[0].msg, dcid), want, `${alpns}`);
      } finally {
        peer.close();
      }
    }
  } finally {
    await m.stop();
  }
});

test("a client that sends one Initial and goes silent: moqd answers, then drops the connection", { timeout: 45_000 }, async () => {
  await bystanders();
  const peer = await udpPeer();
  try {
    const dcid = randBytes(8);
    const scid = randBytes(8);
    const sent = Date.now();
    await peer.send(initialPacket({ dcid, scid, payload: cryptoFrame(clientHello(scid)) }));
    await waitFor(() => peer.received.length > 0, 2_000, "moqd's answer to a valid Initial");
    const first = peer.received[0].msg;
    assert.ok(!isShortHeader(first) && ((first[0] >> 4) & 3) === 0, `expected a server Initial: ${first.subarray(0, 8).toString("hex")}`);
    assert.equal(first.readUInt32BE(1), 1, "QUIC version");
    assert.ok(first.subarray(6, 6 + first[5]).equals(scid), "the server Initial's DCID is our SCID");
    const serverCid = first.subarray(7 + first[5], 7 + first[5] + first[6 + first[5]]);
    assert.equal(serverCid.length, 16, "moqd's CIDs are 16 bytes");
    assert.ok(serverCid[0] < 2, `the CID names worker ${serverCid[0]} of 2`);
    assert.equal(serverInitialHandshakeType(first, dcid), 2, "the server Initial carries a ServerHello (the handshake started)");

    // While the connection exists, a short-header packet for its CID reaches it (no reset).
    const probe = () => peer.send(shortHeader(100, serverCid));
    await probe();
    await pace(300);
    assert.equal(peer.received.filter((r) => isShortHeader(r.msg)).length, 0, "a stateless reset for a live connection's CID");
    await checkBystanders();

    // Silent from here on; once moqd gives the handshake up, the same probe gets a stateless reset.
    await waitFor(
      async () => {
        if (peer.received.some((r) => isShortHeader(r.msg))) return true;
        await probe();
        return false;
      },
      40_000,
      "moqd to drop the silent handshake (a stateless reset for its CID)",
      500,
    );
    const resetAt = peer.received.find((r) => isShortHeader(r.msg)).at;
    const lastLong = Math.max(...peer.received.filter((r) => !isShortHeader(r.msg)).map((r) => r.at));
    console.log(`silent handshake dropped after ${resetAt - sent} ms; ${peer.received.filter((r) => !isShortHeader(r.msg)).length} server long-header datagrams, the last at ${lastLong - sent} ms`);
    assert.ok(lastLong <= resetAt, "moqd kept sending for a connection it had dropped");
    const before = peer.received.length;
    await pace(1_000);
    assert.equal(peer.received.slice(before).filter((r) => !isShortHeader(r.msg)).length, 0, "moqd still sends for the dropped connection");
    await checkBystanders();
  } finally {
    peer.close();
  }
});

const rssMb = (pid = ctx.moqd.proc.pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;

test("a flood of valid Initials holds at most --max-pending-handshakes per worker; the rest get a Retry", { timeout: 60_000 }, async () => {
  await bystanders();
  const TOTAL = 1_500;
  const baseline = rssMb();
  const peer = await udpPeer();
  try {
    const scids = [];
    const packets = [];
    for (let i = 0; i < TOTAL; i++) {
      const scid = crypto.randomBytes(8);
      scids.push(scid.toString("hex"));
      packets.push(initialPacket({ dcid: crypto.randomBytes(8), scid, payload: cryptoFrame(clientHello(scid)) }));
    }
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb())), 20);
    const started = Date.now();
    await sendAll(peer, packets, 100);
    const sentMs = Date.now() - started;
    // Each Initial is answered once, either with a Retry (type 3) or with the server's Initial.
    const answer = new Map();
    const classify = () => {
      for (const { msg } of peer.received) {
        if (isShortHeader(msg)) continue;
        const scid = msg.subarray(6, 6 + msg[5]).toString("hex"); // their DCID is our SCID
        if (!answer.has(scid)) answer.set(scid, ((msg[0] >> 4) & 3) === 3 ? "retry" : "accepted");
      }
      return answer.size;
    };
    await waitFor(() => classify() >= TOTAL * 0.95, 10_000, () => `answers to ${TOTAL} Initials (have ${answer.size})`, 50);
    clearInterval(sampler);
    const accepted = [...answer.values()].filter((v) => v === "accepted").length;
    const retried = answer.size - accepted;
    console.log(`# ${TOTAL} Initials in ${sentMs} ms: ${accepted} accepted, ${retried} Retry; moqd RSS ${baseline.toFixed(1)} -> peak ${peak.toFixed(1)} MB`);
    // Two workers; the handshake timeout may free a few slots while the flood lasts.
    assert.ok(accepted <= 2 * MAX_PENDING + 16, `${accepted} handshakes accepted (cap ${MAX_PENDING} per worker)`);
    assert.ok(retried >= TOTAL * 0.95 - accepted - 1, `${retried} Retries`);
    if (!MOQD_SANITIZED) assert.ok(peak < baseline + 64, `moqd RSS peaked at ${peak.toFixed(1)} MB from ${baseline.toFixed(1)} MB`);
    assert.match(ctx.moqd.stderrText(), /quic: \d+ handshakes pending on worker \d \(--max-pending-handshakes\); answering every Initial with Retry/);
    await checkBystanders();
    // The pending handshakes time out, and a new Initial is accepted again.
    const scid = crypto.randomBytes(8);
    const late = await udpPeer();
    try {
      await waitFor(
        async () => {
          late.received.length = 0;
          await late.send(initialPacket({ dcid: crypto.randomBytes(8), scid, payload: cryptoFrame(clientHello(scid)) }));
          await pace(200);
          return late.received.some((r) => !isShortHeader(r.msg) && ((r.msg[0] >> 4) & 3) === 0);
        },
        15_000,
        "a new Initial to be accepted once the flood's handshakes timed out",
        100,
      );
    } finally {
      late.close();
    }
  } finally {
    peer.close();
  }
});

// Memory given back: a moqd without the pending cap takes the same flood (every handshake held,
// RSS up by tens of MB); once they time out, the freed memory is trimmed and RSS comes back.
test("after a flood of held handshakes times out, moqd's RSS returns to within 16 MB of its baseline", { timeout: 60_000, skip: MOQD_SANITIZED && "a sanitizer's allocator keeps freed memory" }, async () => {
  const RSS_MARGIN_MB = 16;
  const open = await startMoqd(["--max-pending-handshakes", "100000", "--handshake-timeout", "2s"]);
  const peer = await udpPeer(open.port);
  try {
    const pid = open.proc.pid;
    const baseline = rssMb(pid);
    const packets = [];
    for (let i = 0; i < 1_500; i++) {
      const scid = crypto.randomBytes(8);
      packets.push(initialPacket({ dcid: crypto.randomBytes(8), scid, payload: cryptoFrame(clientHello(scid)) }));
    }
    await sendAll(peer, packets, 100);
    let peak = baseline;
    await waitFor(() => (peak = Math.max(peak, rssMb(pid))) > baseline + RSS_MARGIN_MB * 2, 10_000,
      () => `the flood to raise RSS (${rssMb(pid).toFixed(1)} MB from ${baseline.toFixed(1)} MB)`, 20);
    const highAt = Date.now();
    await waitFor(() => rssMb(pid) < baseline + RSS_MARGIN_MB, 10_000,
      () => `RSS ${rssMb(pid).toFixed(1)} MB to return within ${RSS_MARGIN_MB} MB of ${baseline.toFixed(1)} MB`, 50);
    console.log(`# RSS ${baseline.toFixed(1)} MB -> ${peak.toFixed(1)} MB -> ${rssMb(pid).toFixed(1)} MB, back ${Date.now() - highAt} ms after the peak was seen`);
    // The log thread writes the trim's line a moment after it.
    await waitFor(() => /memory: returned freed memory to the system/.test(open.stderrText()), 5_000,
      () => `moqd to log its malloc_trim\n${open.stderrText()}`);
  } finally {
    peer.close();
    await stopMoqdClean(open);
  }
});

moqdStopsCleanly(ctx);
