// Prints the bytes @moq/net 0.3.4's own IETF encoders write for the messages moqd decodes, per
// draft, as "name draft hex". src/wire/ietf_test.cc transcribes them; rerun after an upgrade:
//   cd tests/interop && node ietf_fixtures.mjs
import { Writer } from "./node_modules/@moq/net/stream.js";
import * as Sub from "./node_modules/@moq/net/ietf/subscribe.js";
import * as PubNs from "./node_modules/@moq/net/ietf/publish_namespace.js";
import * as SubNs from "./node_modules/@moq/net/ietf/subscribe_namespace.js";
import * as Req from "./node_modules/@moq/net/ietf/request.js";
import * as Setup from "./node_modules/@moq/net/ietf/setup.js";
import * as Pub from "./node_modules/@moq/net/ietf/publish.js";
import { GoAway } from "./node_modules/@moq/net/ietf/goaway.js";
import { SetupOptions } from "./node_modules/@moq/net/ietf/parameters.js";
import { Version } from "./node_modules/@moq/net/ietf/version.js";
import { joinFilter } from "./node_modules/@moq/net/ietf/subscribe.js";

async function bytes(version, type, msg) {
  const chunks = [];
  const w = new Writer(new WritableStream({ write(c) { chunks.push(new Uint8Array(c)); } }), version);
  if (type !== undefined) await w.u53(type);
  await msg.encode(w, version);
  w.close();
  await w.closed;
  return Buffer.concat(chunks).toString("hex");
}

const drafts = { 14: Version.DRAFT_14, 15: Version.DRAFT_15, 16: Version.DRAFT_16 };
for (const [n, v] of Object.entries(drafts)) {
  const opts = new SetupOptions();
  opts.setVarint(0x02n, 42069n);
  opts.setBytes(0x07n, new TextEncoder().encode("moq-lite-js"));
  const out = {
    client_setup: [0x20, new Setup.ClientSetup({ versions: [v], parameters: opts })],
    server_setup: [0x21, new Setup.ServerSetup({ version: v, parameters: new SetupOptions() })],
    subscribe: [0x03, new Sub.Subscribe({ requestId: 2n, trackNamespace: "room/alice", trackName: "video", subscriberPriority: 7, filter: joinFilter(v) })],
    subscribe_ok: [0x04, new Sub.SubscribeOk({ requestId: 2n, trackAlias: 2n })],
    subscribe_error: [0x05, n === "14" ? new Sub.SubscribeError({ requestId: 2n, errorCode: 404, reasonPhrase: "Broadcast not found" }) : new Req.RequestError({ requestId: 2n, errorCode: 404, reasonPhrase: "Broadcast not found" })],
    unsubscribe: [0x0a, new Sub.Unsubscribe({ requestId: 2n })],
    publish_namespace: [0x06, new PubNs.PublishNamespace({ requestId: 0n, trackNamespace: "room/alice" })],
    publish_namespace_ok: [0x07, n === "14" ? new PubNs.PublishNamespaceOk({ requestId: 0n }) : new Req.RequestOk({ requestId: 0n })],
    publish_namespace_done: [0x09, new PubNs.PublishNamespaceDone({ trackNamespace: "room/alice", requestId: 0n })],
    subscribe_namespace: [0x11, new SubNs.SubscribeNamespaceLegacy({ namespace: "room", requestId: 0n })],
    max_request_id: [0x15, new Req.MaxRequestId({ requestId: 100n })],
    goaway: [0x10, new GoAway({ newSessionUri: "https://relay.example/moq" })],
    publish_done: [0x0b, new Pub.PublishDone({ requestId: 2n, statusCode: 200, reasonPhrase: "OK", streamCount: 0 })],
  };
  if (n !== "14") {
    out.namespace = [0x08, new SubNs.SubscribeNamespaceEntry({ suffix: "alice" })];
    out.namespace_done = [0x0e, new SubNs.SubscribeNamespaceEntryDone({ suffix: "alice" })];
  }
  for (const [name, [type, msg]] of Object.entries(out)) {
    try {
      console.log(name, n, await bytes(v, type, msg));
    } catch (e) {
      console.log(name, n, "ERROR", e.message);
    }
  }
}
