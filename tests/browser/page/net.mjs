// The browser side of net_webtransport.test.mjs: @moq/net 0.3.4 running in Chromium. esbuild
// bundles this file at test time; the test calls the window.* functions below with
// page.evaluate. Frames cross the page.evaluate boundary as base64 strings. The WebSocket
// fallback is disabled, so only WebTransport can connect. With `protocols` (net_ietf_webtransport)
// the page's WebTransport offers only those subprotocols (@moq/net spreads its `webtransport`
// option over its own list), which forces the client to one version whatever the server prefers.
import { webtransports } from "./record_webtransport.mjs";
import { deadline, fromBase64, toBase64 } from "./util.mjs";
import * as Net from "@moq/net";

const connections = [];

async function connect(url, ms, protocols) {
  let conn;
  const props = { websocket: { enabled: false } };
  if (protocols) props.webtransport = { protocols };
  try {
    conn = await deadline(Net.Connection.connect(new URL(url), props), ms, `connect to ${url}`);
  } catch (err) {
    const reasons = err.errors ? err.errors.map((e) => e?.message ?? String(e)).join("; ") : err.message;
    throw new Error(`connect to ${url} failed: ${reasons}; WebTransports: ${JSON.stringify(webtransports)}`);
  }
  connections.push(conn);
  return conn;
}

// Group i is written only once the test called netRelease(i): the relay may skip a group that a
// newer one overtakes, so the test releases the next group after the viewer has the previous one.
const gates = [];
function gate(i) {
  while (gates.length <= i) {
    let open;
    const opened = new Promise((resolve) => (open = resolve));
    gates.push({ opened, open });
  }
  return gates[i];
}
window.netRelease = (i) => gate(i).open();

// Connects to `url` and publishes broadcast `path`; every request for `trackName` is accepted
// and gets `groups` (arrays of base64 frames), group i once released. Requests are served
// concurrently (with moq-lite-05 a relay's TRACK and SUBSCRIBE may both be pending). Resolves
// once connected, with the negotiated version and the page's WebTransports.
window.netPublish = async (url, path, trackName, groups, { ms = 10_000, protocols } = {}) => {
  const conn = await connect(url, ms, protocols);
  const broadcast = new Net.Broadcast.Producer();
  conn.publish(Net.Path.from(path), broadcast);
  const serve = async (req) => {
    if (req.name !== trackName) {
      req.reject(new Error(`unknown track ${req.name}`));
      return;
    }
    const track = req.accept();
    let ts = 0;
    for (const [i, frames] of groups.entries()) {
      await gate(i).opened;
      const group = track.appendGroup();
      for (const frame of frames) group.writeFrame({ payload: fromBase64(frame), timestamp: Net.Time.Timestamp.fromMillis(ts++) });
      group.close();
    }
    // The track stays open: the viewer reads what it needs, then the test closes everything.
  };
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      serve(req).catch((err) => {
        if (!/closed/.test(String(err?.message ?? err))) console.error("netPublish:", err);
      });
    }
  })().catch((err) => console.error("netPublish:", err));
  return { version: conn.version, webtransports };
};

// Connects to `url`, waits for `path` to be announced and subscribes to `trackName`; frames are
// collected in the background (see netReceived). Resolves once subscribed, with the negotiated
// version and the page's WebTransports.
let received = [];
window.netSubscribe = async (url, path, trackName, { ms = 10_000, protocols } = {}) => {
  const conn = await connect(url, ms, protocols);
  const parent = path.slice(0, path.lastIndexOf("/"));
  const name = path.slice(path.lastIndexOf("/") + 1);
  const announced = conn.announced(Net.Path.from(parent)); // events carry the path under it
  try {
    await deadline(
      (async () => {
        for (;;) {
          const entry = await announced.next();
          if (!entry) throw new Error("announcements ended");
          if (entry.path === name && entry.active) return;
        }
      })(),
      ms,
      `announcement of ${path}`,
    );
  } finally {
    announced.close();
  }
  const sub = conn.consume(Net.Path.from(path)).subscribe(trackName);
  received = [];
  (async () => {
    for (;;) {
      const group = await sub.recvGroup();
      if (!group) break;
      const entry = { group: group.sequence, frames: [] };
      received.push(entry);
      (async () => {
        for (let frame; (frame = await group.readFrame()); ) entry.frames.push(toBase64(frame.payload));
      })().catch((err) => console.error("netSubscribe group:", err));
    }
  })().catch((err) => console.error("netSubscribe:", err));
  return { version: conn.version, webtransports };
};

// What netSubscribe received so far: [{group, frames: [base64]}] sorted by group sequence.
window.netReceived = () => [...received].sort((a, b) => a.group - b.group);

window.closeAll = () => {
  for (const conn of connections.splice(0)) {
    try {
      conn.close();
    } catch {}
  }
};

window.moqReady = true;
