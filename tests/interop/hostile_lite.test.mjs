// Hostile peers at the qmux-00 and moq-lite-02 layers, and a peer that stops reading. One moqd
// for the file; a bystander publisher/subscriber pair streams throughout, and after every attack
// the test asserts what the attacker saw, what moqd logged, and that the bystander lost nothing.
// scripts/test.sh runs this file alone (see interop() there): its bystander must lose no frame, and a stalled SETUP be closed within 4 s.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { TEST_TIMEOUT_MS, connect, moqdStopsCleanly, startBystander, subscribeTrack, useMoqd, waitActive } from "./harness.mjs";
import { CLIENT_SETUP, RawLite, RawMux, lite, qmux, sessionEndRe, varint, waitLog } from "./raw.mjs";

const MAX_FRAME = 1024;
const ctx = useMoqd([
  "--upgrade-timeout", "1s",
  "--setup-timeout", "1s",
  "--stall-timeout", "2s",
  "--max-frame-size", String(MAX_FRAME),
]);
// Started by the first test (root-level before hooks are not ordered after useMoqd's).
let bystander;
const startedBystander = async () => (bystander ??= await startBystander(ctx.moqd.url));
after(() => bystander?.stop());

const opts = { timeout: TEST_TIMEOUT_MS };

async function setUp() {
  const peer = await RawLite.connect(ctx.moqd);
  await peer.setup();
  return peer;
}

// The session of `peer` still works: a SUBSCRIBE to the bystander's track gets group data.
async function assertAlive(peer) {
  const { id } = peer.subscribe("bystander", "t");
  await peer.mux.waitUntil(
    () => peer.groups().some((g) => g.subscribeId === id && g.frames?.length > 0),
    5_000,
    "a bystander group on the attacker's session after the attack",
  );
  assert.equal(peer.mux.appClose, null, peer.mux.describe());
}

async function assertClosedWith(peer, codes) {
  const close = await peer.mux.waitAppClose(5_000);
  assert.ok(codes.includes(close.code), `APPLICATION_CLOSE ${JSON.stringify(close)}, expected one of ${codes}`);
  await waitLog(ctx.moqd, sessionEndRe(peer.tcp, close.code));
  return close;
}

test("a malformed qmux frame gets APPLICATION_CLOSE 1002", opts, async () => {
  await startedBystander();
  const mux = await RawMux.connect(ctx.moqd);
  mux.sendRaw(Buffer.from([0x0a, 0x00, 0x10, 0x20])); // STREAM LEN=16 with 1 byte of data
  assert.equal((await mux.waitAppClose(5_000)).code, 1002);
  await mux.tcp.waitClosed(5_000);
  await waitLog(ctx.moqd, sessionEndRe(mux.tcp, 1002));
  await bystander.check();
});

test("STREAM data past the flow-control credit closes the session", opts, async () => {
  await startedBystander();
  const mux = await RawMux.connect(ctx.moqd);
  // moqd grants 1 MiB per stream; one frame carrying 1 MiB + 1 cannot have been allowed.
  mux.sendRaw(qmux.stream(0, Buffer.alloc((1 << 20) + 1)));
  const close = await mux.waitAppClose(5_000);
  assert.equal(close.code, 1002);
  assert.match(close.reason, /flow control/);
  await waitLog(ctx.moqd, sessionEndRe(mux.tcp, 1002));
  await bystander.check();
});

test("a peer that never finishes SETUP is closed with 3 after --setup-timeout", opts, async () => {
  await startedBystander();
  const peer = await RawLite.connect(ctx.moqd);
  const started = Date.now();
  await peer.setup({ bytes: CLIENT_SETUP.subarray(0, 10), wait: false });
  await assertClosedWith(peer, [3]);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= 900 && elapsed < 4_000, `closed after ${elapsed} ms with --setup-timeout 1s`);
  await bystander.check();
});

test("a malformed CLIENT_SETUP is closed with 5 or 15", opts, async () => {
  await startedBystander();
  // Declares 5 versions in a 2-byte body.
  const malformed = await RawLite.connect(ctx.moqd);
  await malformed.setup({ bytes: Buffer.from("20000205c0", "hex"), wait: false });
  await assertClosedWith(malformed, [5, 15]);
  await bystander.check();
});

test("an unknown bidi stream type is reset with 10 and the session stays up", opts, async () => {
  await startedBystander();
  const peer = await setUp();
  const id = peer.mux.open();
  peer.mux.write(id, Buffer.from([0x3e, 0x01, 0x00]));
  const s = await peer.mux.waitStream(id, (st) => st.reset !== undefined, 5_000, "RESET_STREAM");
  assert.equal(s.reset, 10);
  await assertAlive(peer);
  await bystander.check();
});

test("an unknown uni stream type gets STOP_SENDING 10 and the session stays up", opts, async () => {
  await startedBystander();
  const peer = await setUp();
  const id = peer.mux.open({ uni: true });
  peer.mux.write(id, Buffer.from([0x07, 0x01, 0x02]));
  const s = await peer.mux.waitStream(id, (st) => st.stop !== undefined, 5_000, "STOP_SENDING");
  assert.equal(s.stop, 10);
  await assertAlive(peer);
  await bystander.check();
});

test("a SUBSCRIBE for an unknown broadcast is reset with 13 and the session stays up", opts, async () => {
  await startedBystander();
  const peer = await setUp();
  const { streamId } = peer.subscribe("no/such/broadcast", "t");
  const s = await peer.mux.waitStream(streamId, (st) => st.reset !== undefined, 5_000, "RESET_STREAM");
  assert.equal(s.reset, 13);
  await waitLog(ctx.moqd, /subscribe refused broadcast=no\/such\/broadcast track=t code=13/);
  await assertAlive(peer);
  await bystander.check();
});

test("a malformed SUBSCRIBE closes the session with 5", opts, async () => {
  await startedBystander();
  const peer = await setUp();
  // Body of 3 bytes: id 0, then a broadcast name claiming 5 bytes.
  peer.mux.write(peer.mux.open(), Buffer.from([0x02, 0x03, 0x00, 0x05, 0x61]));
  await assertClosedWith(peer, [5]);
  await bystander.check();
});

test("a message size near 2^62 closes the session with 11 or 5, promptly", opts, async () => {
  await startedBystander();
  const peer = await setUp();
  peer.mux.write(peer.mux.open(), Buffer.concat([Buffer.from([0x02]), varint((1n << 62n) - 1n, 8), Buffer.from([0x00, 0x01])]));
  await assertClosedWith(peer, [11, 5]);
  // The same size on a GROUP stream header.
  const pub = await setUp();
  pub.mux.write(pub.mux.open({ uni: true }), Buffer.concat([Buffer.from([0x00]), varint((1n << 62n) - 2n, 8)]));
  await assertClosedWith(pub, [11, 5]);
  await bystander.check();
});

test("a published frame over --max-frame-size gets STOP_SENDING 14 and the session stays up", opts, async () => {
  await startedBystander();
  const pub = await setUp();
  pub.announce(["hostile/big"]);
  pub.onSubscribe((sub) => {
    pub.mux.write(sub.streamId, lite.subscribeOk());
    const big = pub.mux.open({ uni: true });
    // No FIN: the group is live, so moqd has a reason to tell us to stop sending it.
    pub.mux.write(big, Buffer.concat([lite.groupHeader(sub.id, 0), lite.frame(Buffer.alloc(2000, 1))]));
    pub.bigStream = big;
  });
  const conn = await connect(ctx.moqd.url);
  await waitActive(conn, "hostile/big");
  const sub = subscribeTrack(conn, "hostile/big", "t");
  await pub.mux.waitUntil(() => pub.bigStream !== undefined, 5_000, "the relay's SUBSCRIBE");
  const s = await pub.mux.waitStream(pub.bigStream, (st) => st.stop !== undefined, 5_000, "STOP_SENDING on the oversized group");
  assert.equal(s.stop, 14);
  await waitLog(ctx.moqd, new RegExp(`frame of 2000 bytes over --max-frame-size; group dropped code=14`));
  // The publisher's session carries on: its next group reaches the subscriber.
  const ok = pub.mux.open({ uni: true });
  pub.mux.write(ok, Buffer.concat([lite.groupHeader(pub.serverSubscribes[0].id, 1), lite.frame(Buffer.from("small"))]), { fin: true });
  await sub.waitUntil((groups) => groups.some((g) => g.group === 1 && g.frames.length === 1), 5_000, "group 1");
  assert.deepEqual(sub.groups.find((g) => g.group === 1).frames, [Buffer.from("small")]);
  assert.equal(pub.mux.appClose, null, pub.mux.describe());
  sub.close();
  await bystander.check();
});

test("a group stream whose FIN cuts a frame header closes the session with 5, promptly", opts, async () => {
  await startedBystander();
  const pub = await setUp();
  pub.announce(["hostile/cut"]);
  pub.onSubscribe((sub) => {
    pub.mux.write(sub.streamId, lite.subscribeOk());
    // Frame "a", then 0x40: the first byte of a two-byte frame size, then FIN. moqd used to wait
    // for the rest of the header until the session ended.
    const g = pub.mux.open({ uni: true });
    pub.mux.write(g, Buffer.concat([lite.groupHeader(sub.id, 0), lite.frame(Buffer.from("a")), Buffer.from([0x40])]), { fin: true });
    pub.cutStream = g;
  });
  const conn = await connect(ctx.moqd.url);
  await waitActive(conn, "hostile/cut");
  const sub = subscribeTrack(conn, "hostile/cut", "t");
  await pub.mux.waitUntil(() => pub.cutStream !== undefined, 5_000, "the relay's SUBSCRIBE");
  await assertClosedWith(pub, [5]);
  sub.close();
  await bystander.check();
});

moqdStopsCleanly(ctx);
