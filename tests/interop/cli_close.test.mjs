// How the moq CLI ends a WebSocket session: its close frame (1000), then it waits for moqd's close
// frame and TCP close before exiting (RFC 6455 §7.1.1), so moqd never logs an abnormal end (1006).
// moqd's "session N end ... code=C" line carries the WebSocket code when the WebSocket ended the
// session, and 0 for a normal close (1000) or a qmux CLOSE with code 0.
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { waitLog } from "./raw.mjs";

const ctx = H.useMoqd();
const T = { timeout: H.TEST_TIMEOUT_MS };
const WS = ["--transport", "ws"];
const OPCODE_CLOSE = 8;

const sessionEnd = (peer) => new RegExp(`session \\d+ end ${peer ? `peer=127\\.0\\.0\\.1:${peer}\\b` : ""}.*code=(\\d+)\\b`);

// WebSocket frames of one direction of a connection, after the HTTP head; calls onFrame(opcode,
// payload) for each whole frame, unmasking client frames.
function frameReader(onFrame) {
  let buf = Buffer.alloc(0);
  let inHead = true;
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    if (inHead) {
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      buf = buf.subarray(end + 4);
      inHead = false;
    }
    for (;;) {
      if (buf.length < 2) return;
      const masked = (buf[1] & 0x80) !== 0;
      let len = buf[1] & 0x7f;
      let at = 2;
      if (len === 126) {
        if (buf.length < 4) return;
        len = buf.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (buf.length < 10) return;
        len = Number(buf.readBigUInt64BE(2));
        at = 10;
      }
      const key = masked ? buf.subarray(at, at + 4) : null;
      if (masked) at += 4;
      if (buf.length < at + len) return;
      const payload = Buffer.from(buf.subarray(at, at + len));
      if (key) for (let i = 0; i < payload.length; i++) payload[i] ^= key[i & 3];
      onFrame(buf[0] & 0x0f, payload);
      buf = buf.subarray(at + len);
    }
  };
}

// A TCP proxy in front of moqd that delays every byte moqd sends by `delayMs` and records, in
// order, when the client's close frame passed, when moqd's close frame reached the client, and
// when the client closed its side (FIN or reset).
async function startDelayProxy(moqd, delayMs) {
  const log = { events: [], upstreamPort: undefined, clientCloseCode: undefined };
  const at = (what) => log.events.push(what);
  const server = net.createServer((client) => {
    const upstream = net.connect(moqd.port, moqd.host, () => {
      log.upstreamPort = upstream.localPort;
    });
    const fromClient = frameReader((op, payload) => {
      if (op === OPCODE_CLOSE) {
        log.clientCloseCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        at("client close frame");
      }
    });
    const toClient = frameReader((op) => {
      if (op === OPCODE_CLOSE) at("moqd close frame delivered");
    });
    client.on("data", (d) => {
      fromClient(d);
      upstream.write(d);
    });
    client.on("end", () => {
      at("client closed");
      upstream.end();
    });
    client.on("error", () => at("client closed"));
    upstream.on("data", (d) =>
      setTimeout(() => {
        if (client.destroyed || client.writableEnded) return;
        client.write(d);
        toClient(d);
      }, delayMs),
    );
    upstream.on("end", () => setTimeout(() => client.end(), delayMs));
    upstream.on("error", () => client.destroy());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/`, log, close: () => server.close() };
}

test("moq pub over WebSocket waits for moqd's close frame before closing TCP", T, async () => {
  const proxy = await startDelayProxy(ctx.moqd, 300);
  try {
    const p = `${H.uniquePrefix("wsclose")}/alice`;
    const pub = H.spawnMoq(["pub", proxy.url, p, "--track", "video", ...WS]);
    pub.write("a frame\n");
    await H.waitFor(() => proxy.log.upstreamPort !== undefined, 10_000, "the proxied connection");
    const peer = proxy.log.upstreamPort;
    await waitLog(ctx.moqd, new RegExp(`session \\d+ start peer=127\\.0\\.0\\.1:${peer}\\b`), 10_000);
    pub.endStdin(); // the session is up: a clean close from here on
    const exit = await pub.wait(10_000, "moq pub to exit after stdin EOF");
    assert.deepEqual(exit, { code: 0, signal: null }, pub.describe());
    assert.equal(proxy.log.clientCloseCode, 1000, `${JSON.stringify(proxy.log)}\n${pub.describe()}`);
    // moqd's close frame is 300 ms behind: a client that exits at once closes before it arrives.
    assert.deepEqual(
      proxy.log.events.filter((e) => e !== "client close frame"),
      ["moqd close frame delivered", "client closed"],
      JSON.stringify(proxy.log),
    );
    const end = await waitLog(ctx.moqd, sessionEnd(peer));
    assert.equal(end[1], "0", end[0]);
  } finally {
    proxy.close();
  }
});

test("moq pub over WebSocket whose stdin ends before the upgrade: moqd logs a normal close, not 1006", T, async () => {
  // The 101 is 200 ms away when stdin has already ended: the CLI must finish the upgrade and
  // close the session, not drop TCP mid-handshake.
  const proxy = await startDelayProxy(ctx.moqd, 200);
  try {
    const p = `${H.uniquePrefix("wseof")}/bob`;
    const r = await H.runMoq(["pub", proxy.url, p, "--track", "video", ...WS], { stdin: "only\n" });
    assert.equal(r.code, 0, r.stderr);
    const end = await waitLog(ctx.moqd, sessionEnd(proxy.log.upstreamPort));
    assert.notEqual(end[1], "1006", end[0]);
    assert.equal(end[1], "0", end[0]);
    assert.equal(proxy.log.clientCloseCode, 1000, JSON.stringify(proxy.log));
  } finally {
    proxy.close();
  }
});

H.moqdStopsCleanly(ctx);
