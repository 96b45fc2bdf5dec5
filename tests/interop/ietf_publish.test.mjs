// PUBLISH (publisher-initiated subscription) through moqd on moq-transport-16 and -15: a raw IETF
// publisher (raw.mjs over qmux-00.moqt-NN) sends PUBLISH for one track, without PUBLISH_NAMESPACE,
// reads PUBLISH_OK, then writes SUBGROUP streams under the alias it chose; @moq/net 0.3.4 finds the
// broadcast by discovery, subscribes through moqd and must read every frame byte for byte; the
// publisher's PUBLISH_DONE ends the viewer's subscription and withdraws the broadcast. @moq/net
// 0.3.4 never sends PUBLISH (it only decodes one, as a subscriber), so moqd's PUBLISH is tested
// only against this raw client. Layouts: d16 §9.13 PUBLISH, §9.14 PUBLISH_OK, §10.4.2 SUBGROUP.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import * as H from "./harness.mjs";
import { varint, str } from "./raw.mjs";
import { IMPL, controlSession16, hex, msg16 as msg, tuple16 as tuple } from "./raw_ietf.mjs";
import { closeNetConnections, netConnect, netWaitActive, netSubscribe, flat, count } from "./net_client.mjs";

const started = [];
after(async () => {
  closeNetConnections();
  for (const m of started) await m.stop().catch(() => {});
});

const DRAFTS = [
  { name: "moq-transport-16", protocol: "qmux-00.moqt-16", setup: hex(`2000130202 8000a455 050b${IMPL}`) },
  { name: "moq-transport-15", protocol: "qmux-00.moqt-15", setup: hex(`2000130202 8000a455 070b${IMPL}`) },
];

// A SUBGROUP stream, type 0x18 (subgroup 0, end of group, with Publisher Priority): alias, group,
// priority, then each frame as {object id delta 0, length, payload}; an empty frame carries
// Object Status 0 after its zero length.
function subgroup(alias, group, frames) {
  const parts = [varint(0x18), varint(alias), varint(group), Buffer.from([0])];
  for (const f of frames) {
    parts.push(varint(0), varint(f.length));
    parts.push(f.length > 0 ? Buffer.from(f) : varint(0));
  }
  return Buffer.concat(parts);
}

const GROUPS = [
  [H.text("sync"), H.randomFrame(12_000)],
  [new Uint8Array(0), H.randomFrame(17), H.randomFrame(3000)],
  [H.randomFrame(1), H.randomFrame(20_000)],
];

for (const d of DRAFTS) test(`${d.name} through moqd: a raw client's PUBLISH is answered PUBLISH_OK (Forward 1) and its track reaches a @moq/net 0.3.4 viewer byte for byte; PUBLISH_DONE ends it`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const m = await H.startMoqd(["--versions", d.name]);
  started.push(m);
  const p = `${H.uniquePrefix(d.name)}/alice`;

  const { mux, control, messages } = await controlSession16(m, d.protocol, d.setup);

  // PUBLISH id 0, track "video", alias 5, FORWARD (0x10) 0: moqd answers Forward 1 anyway. d16
  // ends the message with an empty Track Extensions block (nothing to write).
  const alias = 5;
  mux.write(control, msg(0x1d, varint(0), tuple(p), str("video"), varint(alias), hex("01 10 00")));
  const ok = await mux.waitUntil(() => messages().find((x) => x.type === 0x1e || x.type === 0x05), 10_000, "PUBLISH_OK");
  assert.equal(ok.type, 0x1e, "PUBLISH_OK, not REQUEST_ERROR");
  // Request id 0, then parameters: FORWARD 1 first (0x10 is the smallest type moqd writes, so it
  // reads the same delta-coded or not).
  assert.deepEqual([...ok.body.subarray(0, 4)], [0x00, 0x03, 0x10, 0x01]);

  // The broadcast is discoverable without PUBLISH_NAMESPACE; a @moq/net viewer subscribes.
  const viewer = await netConnect(m.url);
  await netWaitActive(viewer, p);
  const v = netSubscribe(viewer, p, "video");
  for (const [i, frames] of GROUPS.entries()) {
    const s = mux.open({ uni: true });
    mux.write(s, subgroup(alias, 10 + i, frames), { fin: true });
    await H.waitFor(() => v.state.n >= count(GROUPS.slice(0, i + 1)), 10_000, `group ${10 + i} at the viewer`);
  }
  assert.deepEqual(v.ordered().flat(), flat(GROUPS));
  assert.deepEqual([...v.groups.keys()].sort((a, b) => a - b), [10, 11, 12]);

  // PUBLISH_DONE id 0, TRACK_ENDED (2), 3 streams: the viewer's subscription ends, moqd answers
  // UNSUBSCRIBE (0x0a) and the broadcast is withdrawn.
  mux.write(control, msg(0x0b, varint(0), varint(2), varint(3), str("")));
  await H.waitFor(() => v.state.ended, 10_000, "the viewer's subscription to end");
  await mux.waitUntil(() => messages().find((x) => x.type === 0x0a), 10_000, "UNSUBSCRIBE");
  assert.ok(!mux.appClose, "the session stays up");
  mux.close();
});
