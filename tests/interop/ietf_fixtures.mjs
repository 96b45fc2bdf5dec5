// The bytes @moq/net 0.3.4's own IETF encoders write for the messages moqd decodes, per draft.
// src/wire/ietf_test.cc holds them as its "JS" fixtures; ietf_fixtures.test.mjs checks that each
// still appears there. To print them ("name draft hex"): cd tests/interop && node ietf_fixtures.mjs
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

export async function fixtures() {
const rows = [];
const drafts = {
  14: Version.DRAFT_14, 15: Version.DRAFT_15, 16: Version.DRAFT_16, 17: Version.DRAFT_17,
  18: Version.DRAFT_18, 19: Version.DRAFT_19, 20: Version.DRAFT_20,
};
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
    subscribe_update: [0x02, new Sub.SubscribeUpdate({ requestId: 4n })],
    publish_namespace: [0x06, new PubNs.PublishNamespace({ requestId: 0n, trackNamespace: "room/alice" })],
    publish_namespace_ok: [0x07, n === "14" ? new PubNs.PublishNamespaceOk({ requestId: 0n }) : new Req.RequestOk({ requestId: 0n })],
    publish_namespace_done: [0x09, new PubNs.PublishNamespaceDone({ trackNamespace: "room/alice", requestId: 0n })],
    subscribe_namespace: [0x11, new SubNs.SubscribeNamespaceLegacy({ namespace: "room", requestId: 0n })],
    max_request_id: [0x15, new Req.MaxRequestId({ requestId: 100n })],
    goaway: [0x10, new GoAway({ newSessionUri: "https://relay.example/moq" })],
    publish_done: [0x0b, new Pub.PublishDone({ requestId: 2n, statusCode: 200, reasonPhrase: "OK", streamCount: 0 })],
  };
  if (Number(n) >= 17) {
    const o = new SetupOptions();
    o.setBytes(0x07n, new TextEncoder().encode("moq-lite-js"));
    o.setBytes(0x40b55n, new Uint8Array([0xfe, 0x0a, 0x5a, 0x2a, 0xdb, 0x5a, 0x87, 0xd4]));
    o.setVarint(0x40b5an, 1n);
    out.setup = [0x2f00, new Setup.Setup({ parameters: o })];
    out.setup_empty = [0x2f00, new Setup.Setup()];
    delete out.client_setup;
    delete out.server_setup;
    delete out.publish_namespace_done;
    delete out.unsubscribe;
    delete out.max_request_id;
  }
  if (Number(n) >= 18) {
    // Draft 18 renumbered SUBSCRIBE_NAMESPACE to 0x50 (no Subscribe Options); 0x11 is gone.
    out.subscribe_namespace = [0x50, new SubNs.SubscribeNamespace({ namespace: "room", requestId: 0n })];
    // Track Properties: TIMESCALE 1000 and DEFAULT_PUBLISHER_GROUP_ORDER 2 (descending).
    out.subscribe_ok_properties = [0x04, new Sub.SubscribeOk({ trackAlias: 2n, largest: { groupId: 5n, objectId: 3n }, properties: { timescale: 1000, groupOrder: 2 } })];
  }
  if (n === "20") {
    // The d20-only parameters: FILL_PARAMETERS (JS only) and INCLUDE_PROPERTIES 0.
    out.subscribe_fill = [0x03, new Sub.Subscribe({ requestId: 2n, trackNamespace: "room/alice", trackName: "video", subscriberPriority: 7, filter: { kind: "absolute", startGroup: 5n, startObject: 1n, endGroup: 9n, endObject: 4n }, fill: { filter: { kind: "relative", groups: 3n } }, propertiesWanted: false })];
  }
  if (n !== "14") {
    out.namespace = [0x08, new SubNs.SubscribeNamespaceEntry({ suffix: "alice" })];
    out.namespace_done = [0x0e, new SubNs.SubscribeNamespaceEntryDone({ suffix: "alice" })];
  }
  for (const [name, [type, msg]] of Object.entries(out)) {
    rows.push({ name, draft: Number(n), hex: await bytes(v, type, msg) });
  }
}
return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const r of await fixtures()) console.log(r.name, r.draft, r.hex);
}
