// Hostile peers at the HTTP/1.1 and WebSocket layers. One moqd for the file; a bystander
// publisher/subscriber pair streams throughout, and after every attack the test asserts what the
// attacker saw, what moqd logged, and that the bystander lost nothing.
// scripts/test.sh runs this file alone (see interop() there): its bystander must lose no frame, and a slowloris be closed within 4 s.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { TEST_TIMEOUT_MS, moqdStopsCleanly, startBystander, useMoqd } from "./harness.mjs";
import { Opcode, RawLite, RawTcp, RawWs, parseHttpResponse, peerField, sessionEndRe, upgradeRequest, waitLog, wsFrame } from "./raw.mjs";

const MAX_WS_MESSAGE = 65536;
const ctx = useMoqd(["--upgrade-timeout", "1s", "--setup-timeout", "1s", "--stall-timeout", "2s", "--max-ws-message-size", String(MAX_WS_MESSAGE)]);
// Started by the first test (root-level before hooks are not ordered after useMoqd's).
let bystander;
const startedBystander = async () => (bystander ??= await startBystander(ctx.moqd.url));
after(() => bystander?.stop());

const opts = { timeout: TEST_TIMEOUT_MS };
const host = () => `${ctx.moqd.host}:${ctx.moqd.port}`;

// Sends `bytes` on a fresh TCP connection and returns the HTTP status moqd answered with, after
// checking moqd closed the connection and logged the refusal.
async function httpExchange(bytes, ms = 5_000) {
  const tcp = await RawTcp.connect(ctx.moqd.host, ctx.moqd.port);
  tcp.write(bytes);
  const ended = await tcp.waitClosed(ms);
  const resp = parseHttpResponse(tcp.received());
  assert.ok(resp, `no HTTP response; got ${JSON.stringify(tcp.received().toString())}`);
  assert.equal(ended.how, "fin", "moqd closes the connection gracefully after its answer");
  await waitLog(ctx.moqd, refusedRe(tcp, resp.status));
  return resp.status;
}

const refusedRe = (tcp, status) => new RegExp(`http refused ${peerField(tcp)} status=${status} `);

test("garbage instead of an HTTP request gets 400 and a close", opts, async () => {
  await startedBystander();
  // A first byte of 0x16 is TLS on this port: a malformed ClientHello ends the connection with
  // moqd's log line instead of an HTTP answer.
  const tcp = await RawTcp.connect(ctx.moqd.host, ctx.moqd.port);
  tcp.write(Buffer.from("\x16\x03\x01\x00\x0bgarbage\r\n\r\n", "latin1"));  // one whole record
  await tcp.waitClosed(5_000);
  assert.ok(!tcp.received().toString("latin1").startsWith("HTTP/"), "no HTTP answer to a TLS record");
  await waitLog(ctx.moqd, new RegExp(`tls failed ${peerField(tcp)} handshake=incomplete reason=`));
  assert.equal(await httpExchange("NOT HTTP AT ALL\r\n\r\n"), 400);
  await bystander.check();
});

test("an upgrade without Sec-WebSocket-Key gets 400", opts, async () => {
  await startedBystander();
  assert.equal(await httpExchange(upgradeRequest({ host: host(), key: null })), 400);
  await bystander.check();
});

test("an upgrade offering no acceptable subprotocol gets 400", opts, async () => {
  await startedBystander();
  assert.equal(await httpExchange(upgradeRequest({ host: host(), protocols: ["moq-lite-99", "chat"] })), 400);
  assert.equal(await httpExchange(upgradeRequest({ host: host(), protocols: null })), 400);
  await bystander.check();
});

test("a slowloris header trickled and never finished gets 408 after --upgrade-timeout", opts, async () => {
  await startedBystander();
  const tcp = await RawTcp.connect(ctx.moqd.host, ctx.moqd.port);
  const started = Date.now();
  const head = `GET / HTTP/1.1\r\nHost: ${host()}\r\nUpgrade: websocket\r\nX-Slow: ${"z".repeat(200)}`;
  let i = 0;
  // Pacing the attacker (a byte every 20 ms) is the scenario, not a wait.
  const trickle = setInterval(() => tcp.write(head[i++ % head.length]), 20);
  try {
    await tcp.waitClosed(5_000, "moqd to drop the slowloris");
  } finally {
    clearInterval(trickle);
  }
  const elapsed = Date.now() - started;
  assert.equal(parseHttpResponse(tcp.received())?.status, 408);
  await waitLog(ctx.moqd, refusedRe(tcp, 408));
  assert.ok(elapsed >= 900 && elapsed < 4_000, `closed after ${elapsed} ms with --upgrade-timeout 1s`);
  await bystander.check();
});

test("a huge request header gets 431", opts, async () => {
  await startedBystander();
  const status = await httpExchange(`GET / HTTP/1.1\r\nHost: ${host()}\r\nX-Huge: ${"h".repeat(256 * 1024)}\r\n\r\n`);
  assert.equal(status, 431);
  await bystander.check();
});

test("an unmasked client frame is closed with 1002", opts, async () => {
  await startedBystander();
  const ws = await RawWs.connect(ctx.moqd);
  ws.send(wsFrame(Opcode.binary, Buffer.from([0x0a, 0x00, 0x01, 0x20]), { mask: false }));
  assert.equal((await ws.waitCloseFrame(5_000)).code, 1002);
  await ws.tcp.waitClosed(5_000);
  await waitLog(ctx.moqd, sessionEndRe(ws.tcp, 1002));
  await bystander.check();
});

test("a WebSocket message over --max-ws-message-size is closed with 1009", opts, async () => {
  await startedBystander();
  const ws = await RawWs.connect(ctx.moqd);
  // moqd allows the flag's value plus 4 KiB for the multiplexer's frame header. The limit is on
  // the whole message, so two fragments each under it must still fail.
  const fragment = (MAX_WS_MESSAGE + 4096) / 2 + 1000;
  ws.send(wsFrame(Opcode.binary, Buffer.alloc(fragment), { fin: false }));
  ws.send(wsFrame(Opcode.continuation, Buffer.alloc(fragment)));
  assert.equal((await ws.waitCloseFrame(5_000)).code, 1009);
  await ws.tcp.waitClosed(5_000);
  await waitLog(ctx.moqd, sessionEndRe(ws.tcp, 1009));

  const big = await RawWs.connect(ctx.moqd);
  // A single frame header announcing 2^40 bytes: refused from the header, before any payload.
  big.send(wsFrame(Opcode.binary, Buffer.alloc(0), { declaredLength: 2 ** 40 }));
  assert.equal((await big.waitCloseFrame(5_000)).code, 1009);
  await waitLog(ctx.moqd, sessionEndRe(big.tcp, 1009));
  await bystander.check();
});

test("an abrupt TCP reset mid-frame ends only that session", opts, async () => {
  await startedBystander();
  const peer = await RawLite.connect(ctx.moqd);
  await peer.setup();
  const frame = wsFrame(Opcode.binary, Buffer.alloc(5000, 7));
  peer.mux.ws.send(frame.subarray(0, 1234));
  peer.tcp.reset();
  // 1006: the WebSocket went away without a close frame.
  await waitLog(ctx.moqd, sessionEndRe(peer.tcp, 1006));
  await bystander.check();
});

test("a half-open connection (client shuts its write side after the upgrade) is ended", opts, async () => {
  await startedBystander();
  const peer = await RawLite.connect(ctx.moqd);
  await peer.setup();
  peer.tcp.shutdownWrite();
  await peer.tcp.waitClosed(5_000, "moqd to close the half-open connection");
  await waitLog(ctx.moqd, sessionEndRe(peer.tcp, 1006));
  await bystander.check();
});

moqdStopsCleanly(ctx);
