// IETF MoQ Transport sessions through moqd, with the real npm clients over WebSocket in Node:
// @moq/net 0.3.4 forced to each draft moqd serves (15 and 16 by moqd's --versions, which leaves
// only qmux-NN.moqt-15 / qmux-NN.moqt-16; 14 through SETUP on the moql forms) as publisher and
// subscriber, byte for byte over several groups; @moq/lite 0.2.2's draft 14 (its only IETF draft
// over WebSocket: it offers bare qmux-00 and webtransport, so SETUP picks the version); late join
// and end of track; and across protocol families through moqd (a moq-lite publisher to an IETF
// subscriber and the reverse). Hostile input on a raw session of each draft closes it with the
// draft's termination code, and draining sends GOAWAY.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import { GROUPS, before, closeNetConnections, count, flat, netConnect, netCrossLite, netCrossLiteLateJoiner, netLateJoiner, netPubSub, netSubscribe, netWaitActive } from "./net_client.mjs";
import { varint, str, waitLog } from "./raw.mjs";
import { IMPL, controlSession16, hex, msg16 } from "./raw_ietf.mjs";

const started = [];
after(async () => {
  closeNetConnections();
  H.closeAllConnections();
  for (const m of started) await m.stop().catch(() => {});
});

async function moqd(args) {
  const m = await H.startMoqd(args);
  started.push(m);
  return m;
}

for (const version of ["moq-transport-16", "moq-transport-15", "moq-transport-14"]) {
  test(`@moq/net 0.3.4 publishes and subscribes byte for byte over ${version}, and the end of the track arrives`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(["--versions", version]);
    const p = `${H.uniquePrefix(version)}/alice`;
    const { pub, sub, s } = await netPubSub(m, version, "qmux-02", p);
    // The publisher closed the track: PUBLISH_DONE reaches moqd, which ends the track and sends
    // its own PUBLISH_DONE to the subscriber.
    await H.waitFor(() => s.state.ended, 10_000, "the end of the track at the subscriber");
    pub.close();
    sub.close();
  });
}

// @moq/net 0.3.4 on d14-16 ends a subscription as soon as it reads PUBLISH_DONE (it does not wait
// for the Stream Count) and drops the objects it has not read by then, so moqd sends PUBLISH_DONE
// only once the viewer's qmux-02 has answered a QX_PING sent after every group stream's FIN
// (docs/ARCHITECTURE.md). A moq-lite
// publisher (@moq/lite 0.2.2, lite-02: its track's end reaches moqd after its last group was read)
// writes sixteen groups of 600 KB at once and ends the track; the d16 viewer's track reader must
// return done (not throw) with every group whole. Before that wait the viewer lost frames of the
// last groups in 8 runs of 8 (each run here is one such try).
test("@moq/net 0.3.4 over moq-transport-16: the end of the track arrives after every group, whole, and the track reader returns done", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd(["--versions", "moq-lite-02,moq-transport-16"]);
  const groups = [[H.text("first")], ...Array.from({ length: 16 }, (_, g) => Array.from({ length: 10 }, (_, i) => H.randomFrame(60_000 + 10 * g + i)))];
  for (let run = 0; run < 3; run++) {
    const p = `${H.uniquePrefix(`end-${run}`)}/alice`;
    const pub = await H.connect(m.url);
    const sub = await netConnect(m.url);
    assert.equal(sub.version, "moq-transport-16");
    const holder = {};
    // Only the first group is paced (the subscription is in place); the rest go out at once.
    H.publishBroadcast(pub, p, { video: groups }, {
      before: (i) => (i === 1 ? H.waitFor(() => holder.s.state.n >= 1, 10_000, "group 0") : Promise.resolve()),
    });
    await netWaitActive(sub, p);
    holder.s = netSubscribe(sub, p, "video");
    await H.waitFor(() => holder.s.state.ended, 15_000, `run ${run}: the end of the track at the subscriber`);
    const st = holder.s.state;
    assert.equal(st.error, undefined, `run ${run}: the track reader threw`);
    assert.ok(st.done, `run ${run}: the track reader did not return done`);
    // A group cut short by the end still closes cleanly at @moq/net: wait for the group readers,
    // then compare every frame.
    await H.waitFor(() => holder.s.complete.size === holder.s.groups.size, 5_000, `run ${run}: the group readers`);
    assert.deepEqual(holder.s.ordered().map((g) => g.length), groups.map((g) => g.length), `run ${run}: frames per group`);
    assert.deepEqual(holder.s.ordered().flat(), flat(groups));
    assert.equal(st.groupErrors, 0);
    H.closeConnection(pub);
    sub.close();
  }
});

// The late joiner gets the newest cached group (2) at once: SUBSCRIBE's LargestObject filter.
test("@moq/net 0.3.4 over moq-transport-16: a late joiner starts at the newest group", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  await netLateJoiner(await moqd(["--versions", "moq-transport-16"]));
});

test("@moq/lite 0.2.2 publishes and subscribes byte for byte over moq-transport-14 (SETUP picks it)", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd(["--versions", "moq-transport-14"]);
  const p = `${H.uniquePrefix("lite14")}/alice`;
  const pub = await H.connect(m.url);
  const sub = await H.connect(m.url);
  await waitLog(m, /transport=websocket\/qmux-00 version=moq-transport-14 /);
  const watcher = H.watchAnnounced(sub, p.slice(0, p.lastIndexOf("/")));
  const holder = {};
  H.publishBroadcast(pub, p, { video: GROUPS }, {
    before: (i) => (i === 0 ? Promise.resolve() : H.waitFor(() => holder.s.frameCount() >= count(GROUPS.slice(0, i)), 10_000, `group ${i - 1}`)),
  });
  await watcher.waitFor(p, true);
  watcher.close();
  holder.s = H.subscribeTrack(sub, p, "video");
  await H.waitFor(() => holder.s.frameCount() >= count(GROUPS), 10_000, `${count(GROUPS)} frames`);
  assert.deepEqual(holder.s.groups.flatMap((g) => g.frames), flat(GROUPS));
  H.closeConnection(pub);
  H.closeConnection(sub);
});

// moqd serving moq-lite-02 (SETUP) and moq-transport-16 (its own ALPN): @moq/lite 0.2.2 offers only
// the bare forms, so it speaks lite-02; @moq/net 0.3.4 is given qmux-02.moqt-16.
for (const dir of ["lite-to-ietf", "ietf-to-lite"]) {
  test(`cross-protocol through moqd: ${dir === "lite-to-ietf" ? "a moq-lite-02 publisher to a moq-transport-16 subscriber" : "a moq-transport-16 publisher to a moq-lite-02 subscriber"}`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(["--versions", "moq-lite-02,moq-transport-16"]);
    // The moq-lite publisher closes the track after the last group: the end reaches the IETF
    // subscriber as PUBLISH_DONE.
    await netCrossLite(m, "moq-transport-16", dir, { ietfSeesEnd: true });
  });
}

for (const dir of ["lite-to-ietf", "ietf-to-lite"]) {
  test(`cross-protocol late join through moqd: ${dir === "lite-to-ietf" ? "a moq-lite-02 publisher, moq-transport-16 viewers" : "a moq-transport-16 publisher, moq-lite-02 viewers"}; the late one starts at the newest group`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    await netCrossLiteLateJoiner(await moqd(["--versions", "moq-lite-02,moq-transport-16"]), "moq-transport-16", dir);
  });
}

test("cross-protocol: `moq pub` (moq-lite over WebSocket) to a @moq/net 0.3.4 subscriber on moq-transport-16", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd(["--versions", "moq-lite-02,moq-transport-16"]);
  const p = `${H.uniquePrefix("moqpub")}/alice`;
  const net = await netConnect(m.url);
  assert.equal(net.version, "moq-transport-16");
  const pub = H.spawnMoq(["pub", m.url, p, "--track", "video", "--group-every", "2", "--transport", "ws", "--versions", "moq-lite-02"]);
  try {
    await netWaitActive(net, p).catch((err) => {
      throw new Error(`${err.message}\n${pub.describe()}`);
    });
    const s = netSubscribe(net, p, "video");
    const frames = ["l0", "l1", "", "l3", "l4 with spaces", "l5"];
    pub.write(`${frames[0]}\n`);  // group 0 stays open until the next line
    await H.waitFor(() => s.state.n >= 1, 10_000, "the first frame");
    pub.write(frames.slice(1).map((f) => `${f}\n`).join(""));
    pub.endStdin();
    await H.waitFor(() => s.state.n >= frames.length, 10_000, `${frames.length} frames`);
    assert.deepEqual(s.ordered(), [[0, 1], [2, 3], [4, 5]].map((g) => g.map((i) => Buffer.from(frames[i]))));
    const exit = await pub.wait(10_000, "moq pub to exit after stdin EOF");
    assert.deepEqual(exit, { code: 0, signal: null }, pub.describe());
    await H.waitFor(() => s.state.ended, 10_000, "the end of the track at the IETF subscriber");
  } finally {
    await pub.stop().catch(() => {});
  }
  net.close();
});

// ---------------------------------------------------------------------------------------------
// Hostile input on a raw session of each draft.

// Per draft: how the raw client reaches it (subprotocol, moqd's --versions), its CLIENT_SETUP
// (protocol/README.md §2.4, §2.5: @moq/lite's bytes), and the SERVER_SETUP moqd must answer
// (MaxRequestId 1024; d14 also selects 0xff00000e; d16 delta-codes the key, which from 0 is 2).
const DRAFTS = [
  {
    name: "moq-transport-16",
    protocol: "qmux-00.moqt-16",
    setup: `2000130202 8000a455 050b${IMPL}`,
    serverSetup: "21000401024400",
  },
  {
    name: "moq-transport-15",
    protocol: "qmux-00.moqt-15",
    setup: `2000130202 8000a455 070b${IMPL}`,
    serverSetup: "21000401024400",
  },
  {
    name: "moq-transport-14",
    protocol: "qmux-00",
    setup: `20002c03 c0000000ff0dad02 c0000000ff0dad01 c0000000ff00000e 0202 8000a455 070b${IMPL}`,
    serverSetup: "21000cc0000000ff00000e01024400",
  },
];

async function rawSession(m, d) {
  const { ws, mux, control } = await controlSession16(m, d.protocol, hex(d.setup));
  assert.equal(ws.subprotocol, d.protocol);
  return { mux, control };
}

const msg = (type, body) => msg16(type, ...body);

const ns = (...fields) => Buffer.concat([varint(fields.length), ...fields.map((f) => str(f))]);
// PUBLISH_NAMESPACE: the same bytes in 14, 15 and 16 when it carries no parameters.
const publishNamespace = (id, tuple) => msg(0x06, [varint(id), tuple, varint(0)]);

for (const d of DRAFTS) {
  test(`${d.name} raw: SERVER_SETUP grants request ids; bad input closes with the draft's code; drain sends GOAWAY`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd(["--versions", d.name, "--drain-timeout", "2s"]);
    {
      const { mux, control } = await rawSession(m, d);
      assert.equal(mux.stream(control).data().subarray(0, d.serverSetup.length / 2).toString("hex"), d.serverSetup);
      // Unknown message type 0x3e on the control stream: PROTOCOL_VIOLATION (0x3).
      mux.write(control, msg(0x3e, []));
      assert.equal((await mux.waitAppClose(5_000)).code, 0x3);
    }
    {
      // A request id out of sequence (2 before 0): INVALID_REQUEST_ID (0x4).
      const { mux, control } = await rawSession(m, d);
      mux.write(control, publishNamespace(2, ns("room")));
      assert.equal((await mux.waitAppClose(5_000)).code, 0x4);
    }
    {
      // A request id reused (0 twice): INVALID_REQUEST_ID, after the first was accepted (0x07).
      const { mux, control } = await rawSession(m, d);
      mux.write(control, publishNamespace(0, ns("a")));
      await mux.waitStream(control, (s) => s.data().subarray(d.serverSetup.length / 2).includes(Buffer.from([0x07])), 5_000, "the namespace accepted");
      mux.write(control, publishNamespace(0, ns("b")));
      assert.equal((await mux.waitAppClose(5_000)).code, 0x4);
    }
    {
      // A truncated parameter: SUBSCRIBE_NAMESPACE whose parameter count says 1 and nothing follows.
      const { mux, control } = await rawSession(m, d);
      const options = d.name === "moq-transport-16" ? [varint(1)] : [];
      const sn = msg(0x11, [varint(0), ns("room"), ...options, varint(1)]);
      if (d.name === "moq-transport-16") {
        const own = mux.open();  // d16: SUBSCRIBE_NAMESPACE on its own bidi stream
        mux.write(own, sn);
      } else {
        mux.write(control, sn);
      }
      // A message that ends inside its parameters: PROTOCOL_VIOLATION.
      assert.equal((await mux.waitAppClose(5_000)).code, 0x3);
    }
    {
      // A request id over the limit: SERVER_SETUP granted MAX_REQUEST_ID 1024, so a first request
      // with id 1024 is TOO_MANY_REQUESTS (0x7).
      const { mux, control } = await rawSession(m, d);
      mux.write(control, publishNamespace(1024, ns("room")));
      assert.equal((await mux.waitAppClose(5_000)).code, 0x7);
    }
    {
      // A parameter PUBLISH_NAMESPACE does not take (d14: DELIVERY_TIMEOUT 0x02, 15/16:
      // SUBSCRIBER_PRIORITY 0x20): d16 closes with PROTOCOL_VIOLATION; 14 and 15 ignore it (their
      // text: receivers ignore unrecognized parameters) and accept the namespace (0x07).
      const { mux, control } = await rawSession(m, d);
      const type = d.name === "moq-transport-14" ? 0x02 : 0x20;
      mux.write(control, msg(0x06, [varint(0), ns("room"), varint(1), varint(type), varint(7)]));
      if (d.name === "moq-transport-16") {
        assert.equal((await mux.waitAppClose(5_000)).code, 0x3);
      } else {
        await mux.waitStream(control, (s) => s.data().subarray(d.serverSetup.length / 2).includes(Buffer.from([0x07])), 5_000, "the namespace accepted");
      }
    }
    {
      // A namespace tuple over 32 fields: PROTOCOL_VIOLATION.
      const { mux, control } = await rawSession(m, d);
      mux.write(control, publishNamespace(0, ns(...Array.from({ length: 33 }, (_, i) => `f${i}`))));
      assert.equal((await mux.waitAppClose(5_000)).code, 0x3);
    }
    // Other sessions are unaffected: a fresh one completes SETUP, and moqd draining (SIGTERM) sends
    // it GOAWAY (0x10) on the control stream.
    const { mux, control } = await rawSession(m, d);
    const before = mux.stream(control).data().length;
    m.proc.kill("SIGTERM");
    await mux.waitStream(control, (s) => s.data().length > before && s.data()[before] === 0x10, 5_000, "GOAWAY");
  });
}
