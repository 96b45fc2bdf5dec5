// The browser side of the tests: @moq/lite 0.2.2 running in Chromium. esbuild bundles this file
// at test time; the test calls the window.* functions below with page.evaluate. Frames cross the
// page.evaluate boundary as base64 strings. Every function gives up by itself after `ms`.
import { webtransports } from "./record_webtransport.mjs";
import { deadline, fromBase64, toBase64 } from "./util.mjs";
import * as Moq from "@moq/lite";

const connections = [];

// `websocket: false` disables @moq/lite's WebSocket fallback, so only WebTransport can connect.
// `protocols` replaces the WebTransport's subprotocol offer (@moq/lite spreads its `webtransport`
// option into the WebTransport options), e.g. ["moqt-16"] to force that draft.
async function connect(url, { websocket = true, ms, protocols }) {
  const props = websocket ? {} : { websocket: { enabled: false } };
  if (protocols) props.webtransport = { protocols };
  let conn;
  try {
    conn = await deadline(Moq.Connection.connect(new URL(url), props), ms, `connect to ${url}`);
  } catch (err) {
    const reasons = err.errors ? err.errors.map((e) => e?.message ?? String(e)).join("; ") : err.message;
    throw new Error(`connect to ${url} failed: ${reasons}; WebTransports: ${JSON.stringify(webtransports)}`);
  }
  connections.push(conn);
  return conn;
}

// Connects to `url` and publishes broadcast `path`; every request for `trackName` gets `groups`
// (arrays of base64 frames), one group each, then the track closes. Resolves once connected;
// the connection stays open until closeAll().
window.publish = async (url, path, trackName, groups, { websocket = true, ms = 10_000, protocols } = {}) => {
  const conn = await connect(url, { websocket, ms, protocols });
  const broadcast = new Moq.Broadcast();
  conn.publish(Moq.Path.from(path), broadcast);
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      if (req.track.name !== trackName) {
        req.track.close(new Error(`unknown track ${req.track.name}`));
        continue;
      }
      for (const frames of groups) {
        const group = req.track.appendGroup();
        for (const frame of frames) group.writeFrame(fromBase64(frame));
        group.close();
      }
      req.track.close();
    }
  })().catch((err) => console.error("publish:", err));
  return { version: conn.version, webtransports };
};

// Connects to `url`, waits for `path` to be announced, subscribes to `trackName` and collects
// frames until `frames` arrived or the track ended: [{group, frames: [base64]}] sorted by group.
window.subscribe = async (url, path, trackName, frames, { websocket = true, ms = 10_000, protocols } = {}) => {
  const conn = await connect(url, { websocket, ms, protocols });
  const announced = conn.announced(Moq.Path.empty());
  await deadline(
    (async () => {
      for (;;) {
        const entry = await announced.next();
        if (!entry) throw new Error("announcements ended");
        if (entry.path === path && entry.active) return;
      }
    })(),
    ms,
    `announcement of ${path}`,
  );
  announced.close();

  const track = conn.consume(Moq.Path.from(path)).subscribe(trackName, 0);
  const groups = [];
  const count = () => groups.reduce((n, g) => n + g.frames.length, 0);
  const readers = [];
  const receiving = (async () => {
    for (;;) {
      const group = await track.recvGroup();
      if (!group) break;
      const entry = { group: group.sequence, frames: [] };
      groups.push(entry);
      readers.push(
        (async () => {
          for (let frame; (frame = await group.readFrame()); ) entry.frames.push(toBase64(frame));
        })(),
      );
    }
    await Promise.all(readers);
  })();
  const enough = (async () => {
    while (count() < frames) await new Promise((r) => setTimeout(r, 10));
  })();
  await deadline(Promise.race([receiving, enough]), ms, `${frames} frames (have ${count()})`).catch((err) => {
    throw new Error(`${err.message}; received ${JSON.stringify(groups.map((g) => [g.group, g.frames.length]))}`);
  });
  track.close();
  groups.sort((a, b) => a.group - b.group);
  return { version: conn.version, webtransports, groups };
};

window.closeAll = () => {
  for (const conn of connections.splice(0)) conn.close();
};

// A bare WebTransport session (no @moq/lite) to `httpsUrl`, trusting the hash moqd serves at
// /certificate.sha256: reports ready and the negotiated protocol, then sends a datagram "hi", a
// uni stream "uni" and a bidi stream "bidi" (each step bounded by 3 s; its failure is reported in
// `errors`, not thrown), and closes. Used to capture Chromium's bytes.
window.rawWebTransport = async (httpsUrl, { ms = 10_000 } = {}) => {
  const hashUrl = new URL("/certificate.sha256", httpsUrl.replace(/^https:/, "http:"));
  const hex = (await (await deadline(fetch(hashUrl), 5_000, `GET ${hashUrl}`)).text()).trim();
  const hash = Uint8Array.from(hex.match(/../g), (h) => parseInt(h, 16));
  const wt = new WebTransport(httpsUrl, {
    protocols: ["moq-lite-04", "moq-lite-03", "moql"],
    serverCertificateHashes: [{ algorithm: "sha-256", value: hash }],
  });
  wt.closed.catch(() => {});
  const result = { ready: false, protocol: undefined, errors: [] };
  await deadline(wt.ready, ms, `WebTransport ready to ${httpsUrl}`);
  result.ready = true;
  result.protocol = wt.protocol;
  const step = async (name, fn) => {
    try {
      await deadline(fn(), 3_000, name);
    } catch (err) {
      result.errors.push(`${name}: ${err?.message ?? err}`);
    }
  };
  const encode = (s) => new TextEncoder().encode(s);
  await step("datagram", async () => {
    const writable = wt.datagrams.createWritable ? wt.datagrams.createWritable() : wt.datagrams.writable;
    const writer = writable.getWriter();
    await writer.write(encode("hi"));
    writer.releaseLock();
  });
  await step("uni stream", async () => {
    const writer = (await wt.createUnidirectionalStream()).getWriter();
    await writer.write(encode("uni"));
    await writer.close();
  });
  await step("bidi stream", async () => {
    const writer = (await wt.createBidirectionalStream()).writable.getWriter();
    await writer.write(encode("bidi"));
    await writer.close();
  });
  wt.close();
  await deadline(wt.closed, 3_000, "WebTransport closed").catch(() => {});
  return result;
};

// A bare WebTransport session kept open for window.closeSession / window.sessionClosed.
let session;
window.openSession = async (httpsUrl, { ms = 10_000 } = {}) => {
  const hashUrl = new URL("/certificate.sha256", httpsUrl.replace(/^https:/, "http:"));
  const hex = (await (await deadline(fetch(hashUrl), 5_000, `GET ${hashUrl}`)).text()).trim();
  const hash = Uint8Array.from(hex.match(/../g), (h) => parseInt(h, 16));
  session = new WebTransport(httpsUrl, {
    protocols: ["moq-lite-04", "moq-lite-03", "moql"],
    serverCertificateHashes: [{ algorithm: "sha-256", value: hash }],
  });
  session.closedInfo = session.closed.then(
    (info) => ({ closeCode: info.closeCode, reason: info.reason }),
    (err) => ({ error: String(err?.message ?? err) }),
  );
  await deadline(session.ready, ms, `WebTransport ready to ${httpsUrl}`);
  return session.protocol;
};
// Closes the session with CLOSE_WEBTRANSPORT_SESSION(code, reason).
window.closeSession = (closeCode, reason) => session.close({ closeCode, reason });
// How the session ended: {closeCode, reason} on a clean close, {error} otherwise.
window.sessionClosed = (ms = 10_000) => deadline(session.closedInfo, ms, "the WebTransport session to close");

window.moqReady = true;
