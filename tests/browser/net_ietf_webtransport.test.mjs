// @moq/net 0.3.4's IETF MoQ Transport code in headless Chromium over WebTransport through moqd,
// one test per draft row: moqd serves only that draft (--versions) and the pages force it too,
// by offering only its WebTransport subprotocol (page/net.mjs passes `protocols` through
// @moq/net's `webtransport` option, which replaces its own list). One page publishes a few groups
// of distinct frames; a second page (over WebTransport) and @moq/net in Node (over WebSocket,
// in the draft's WebSocket form: qmux-02, or qmux-01 for 18 and 20) both subscribe, and every frame reaches both byte for
// byte. Then Node publishes and the second page subscribes, byte for byte. The pages' WebSocket
// fallback is disabled; each page's WebTransports must become ready offering and agreeing the
// row's subprotocol, every client must report the draft, and moqd must log the pages' sessions
// as transport=webtransport and Node's as websocket/qmux-0N, all of that draft. Draft 19 has no
// WebSocket form in @moq/net, so its row is page to page only. A draft moqd gains
// is one more row in DRAFTS.
import assert from "node:assert/strict";
import { after } from "node:test";
import * as Net from "@moq/net";
import {
  b64, browserTest, callPage, countFrames, moqdStopsCleanly, openPage, randomFrame, startMoqd,
  loggedTransports, stopMoqdClean, text, uniquePrefix, useBrowser, waitFor, withDeadline,
} from "./browser.mjs";

// version: moqd's --versions name, which @moq/net also reports as conn.version. offer: the only
// WebTransport subprotocol the pages offer. agreed: the subprotocol the WebTransport must end up
// with. Draft 14 has no WebTransport subprotocol of its own: @moq/net reaches it by "moql" and a
// CLIENT_SETUP offering lite-02, lite-01 and draft 14, from which moqd picks 14.
// nodeWs: how moqd logs @moq/net in Node over WebSocket on that draft (qmux-01 is the only form
// @moq/net offers for 18 and 20); null for draft 19, which @moq/net never offers over WebSocket:
// that row is page to page only.
const DRAFTS = [
  { version: "moq-transport-20", offer: "moqt-20", agreed: "moqt-20", nodeWs: "websocket/qmux-01" },
  { version: "moq-transport-19", offer: "moqt-19", agreed: "moqt-19", nodeWs: null },
  { version: "moq-transport-18", offer: "moqt-18", agreed: "moqt-18", nodeWs: "websocket/qmux-01" },
  { version: "moq-transport-17", offer: "moqt-17", agreed: "moqt-17", nodeWs: "websocket/qmux-02" },
  { version: "moq-transport-16", offer: "moqt-16", agreed: "moqt-16", nodeWs: "websocket/qmux-02" },
  { version: "moq-transport-15", offer: "moqt-15", agreed: "moqt-15", nodeWs: "websocket/qmux-02" },
  { version: "moq-transport-14", offer: "moql", agreed: "moql", nodeWs: "websocket/qmux-02" },
];

const ctx = useBrowser([], { page: "net.mjs" });

const started = [];
const nodeConns = [];
after(async () => {
  for (const c of nodeConns.splice(0)) {
    try {
      c.close();
    } catch {}
  }
  for (const m of started) await m.stop().catch(() => {});
});

// @moq/net in Node (over WebSocket: Node has no WebTransport), as the page connects.
async function nodeConnect(url) {
  const conn = await withDeadline(Net.Connection.connect(new URL(url)), 10_000, `@moq/net in Node to connect to ${url}`);
  nodeConns.push(conn);
  return conn;
}

// Node publishes broadcast `p` with track `name`: `groups` (arrays of Uint8Array), group i once
// release(i) was called.
function nodePublish(conn, p, name, groups) {
  const gates = groups.map(() => Promise.withResolvers());
  const broadcast = new Net.Broadcast.Producer();
  conn.publish(Net.Path.from(p), broadcast);
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      if (req.name !== name) {
        req.reject(new Error(`unknown track ${req.name}`));
        continue;
      }
      const track = req.accept();
      (async () => {
        let ts = 0;
        for (const [i, frames] of groups.entries()) {
          await gates[i].promise;
          const g = track.appendGroup();
          for (const payload of frames) g.writeFrame({ payload, timestamp: Net.Time.Timestamp.fromMillis(ts++) });
          g.close();
        }
      })().catch((err) => {
        if (!/closed/.test(String(err?.message ?? err))) console.error("nodePublish", err);
      });
    }
  })().catch((err) => console.error("nodePublish", err));
  return { release: (i) => gates[i].resolve() };
}

// Node subscribes to track `name` of `p` once it is announced; received: [{group, frames}].
async function nodeSubscribe(conn, p, name) {
  const announced = conn.announced(Net.Path.from(""));
  try {
    await withDeadline((async () => {
      for (;;) {
        const e = await announced.next();
        if (!e) throw new Error("announcements ended");
        if (e.path === p && e.active) return;
      }
    })(), 10_000, `announcement of ${p} in Node`);
  } finally {
    announced.close();
  }
  const sub = conn.consume(Net.Path.from(p)).subscribe(name);
  const received = [];
  (async () => {
    for (;;) {
      const g = await sub.recvGroup();
      if (!g) break;
      const entry = { group: g.sequence, frames: [] };
      received.push(entry);
      (async () => {
        for (let f; (f = await g.readFrame()); ) entry.frames.push(Buffer.from(f.payload));
      })().catch(() => {});
    }
  })().catch(() => {});
  return received;
}

const frameCount = (received) => received.reduce((n, g) => n + g.frames.length, 0);

// Distinct frames in every group: text, an empty frame, random bytes up to 70 KB (several
// QUIC packets, and over 64 KiB so the length varint takes 4 bytes).
const groups = () => [
  [text("group 0 frame 0"), randomFrame(40_000)],
  [new Uint8Array(0), randomFrame(17), text("group 1 frame 2")],
  [randomFrame(70_000), text("group 2")],
  [randomFrame(3000), text("last group")],
];

for (const { version, offer, agreed, nodeWs } of DRAFTS) {
  const what = nodeWs
    ? "a page publishes to a page and to Node over WebSocket, Node publishes to a page"
    : "a page publishes to a page (no WebSocket form of this draft)";
  browserTest(ctx, `@moq/net 0.3.4 over ${version} forced (WebTransport offering only ${offer}): ${what}, byte for byte`, async (t, state) => {
    const moqd = await startMoqd(["--versions", version]);
    started.push(moqd);
    const shown = ctx.moqd;
    ctx.moqd = moqd; // browserTest saves this moqd's stderr if the test fails
    try {
      const root = uniquePrefix(`net-${version}`);
      const url = `${moqd.url}${root}`;
      const opts = { ms: 10_000, protocols: [offer] };
      const checkPage = (name, info) => {
        assert.ok(info.webtransports.length >= 1, `the ${name} page's WebTransports: ${JSON.stringify(info.webtransports)}`);
        for (const w of info.webtransports) {
          assert.deepEqual(w.protocols, [offer], `the ${name} page's offered subprotocols`);
          assert.equal(w.ready, "ok", `the ${name} page's WebTransport: ${JSON.stringify(w)}`);
          assert.equal(w.protocol, agreed, `the ${name} page's agreed subprotocol`);
        }
        assert.equal(info.version, version, `the ${name}'s negotiated version`);
      };
      // A page publishes "page/b"; a second page and Node subscribe.
      const sent = groups();
      state.page = await openPage(ctx);
      state.page2 = await openPage(ctx);
      const pub = await callPage(state.page, "netPublish", [url, "page/b", "video", sent.map((g) => g.map(b64)), opts],
        12_000, `the publishing page to connect over WebTransport offering ${offer}`);
      checkPage("publisher", pub);
      const sub = await callPage(state.page2, "netSubscribe", [url, "page/b", "video", opts],
        12_000, `the subscribing page to connect over WebTransport offering ${offer} and subscribe`);
      checkPage("subscriber", sub);
      const node = nodeWs ? await nodeConnect(url) : null;
      if (node) assert.equal(node.version, version, "the Node client's negotiated version");
      const atNode = node ? await nodeSubscribe(node, "page/b", "video") : null;
      // Release group i once both viewers have every frame before it (the relay may skip a
      // group that a newer one overtakes).
      let got = [];
      for (let i = 0; i < sent.length; i++) {
        await callPage(state.page, "netRelease", [i], 2_000, `releasing group ${i}`);
        const want = countFrames(sent.slice(0, i + 1));
        await waitFor(async () => {
          got = await state.page2.evaluate(() => window.netReceived());
          return got.reduce((n, g) => n + g.frames.length, 0) >= want && (!atNode || frameCount(atNode) >= want);
        }, 10_000, `the subscribing page and Node to receive ${want} frames`);
      }
      const want = sent.map((g) => g.map((f) => Buffer.from(f)));
      assert.deepEqual(got.map((g) => g.frames.map((f) => Buffer.from(f, "base64"))), want, "page -> page, byte for byte");
      const byGroup = (r) => [...r].sort((a, b) => a.group - b.group).map((g) => g.frames);
      if (atNode) assert.deepEqual(byGroup(atNode), want, "page -> Node, byte for byte");
      // Node publishes "node/b"; the second page subscribes (a second connection of that page).
      if (node) {
        const sent2 = groups();
        const nodePub = nodePublish(node, "node/b", "video", sent2);
        const sub2 = await callPage(state.page2, "netSubscribe", [url, "node/b", "video", opts],
          12_000, `the page to connect offering ${offer} and subscribe to Node's broadcast`);
        checkPage("second subscriber", sub2);
        for (let i = 0; i < sent2.length; i++) {
          nodePub.release(i);
          const n = countFrames(sent2.slice(0, i + 1));
          await waitFor(async () => {
            got = await state.page2.evaluate(() => window.netReceived());
            return got.reduce((k, g) => k + g.frames.length, 0) >= n;
          }, 10_000, `the page to receive ${n} frames from Node`);
      }
      assert.deepEqual(got.map((g) => g.frames.map((f) => Buffer.from(f, "base64"))), sent2.map((g) => g.map((f) => Buffer.from(f))),
        "Node -> page, byte for byte");
      }
      const expected = node
        ? [`webtransport ${version}`, `webtransport ${version}`, `webtransport ${version}`, `${nodeWs} ${version}`]
        : [`webtransport ${version}`, `webtransport ${version}`];
      const sessions = await waitFor(() => {
        const s = loggedTransports(moqd, root);
        return s.length >= expected.length && s;
      }, 5_000, `moqd to log the ${expected.length} sessions at /${root}`);
      assert.deepEqual(sessions.map((s) => `${s.transport} ${s.version}`).sort(), expected.sort(),
        `moqd's sessions: ${JSON.stringify(sessions)}`);
      t.diagnostic(`sessions ${JSON.stringify(sessions)}, groups ${JSON.stringify(got.map((g) => g.group))}`);
      node?.close();
      await state.page.evaluate(() => window.closeAll());
      await state.page2.evaluate(() => window.closeAll());
      await stopMoqdClean(moqd);
    } finally {
      ctx.moqd = shown;
    }
  });
}

moqdStopsCleanly(ctx);
