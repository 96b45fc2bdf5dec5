// FETCH (standalone and joining) and TRACK_STATUS through moqd on IETF drafts 17, 18 and 20, each
// request on its own bidi stream: @moq/net 0.3.4 publishes (over whatever moqd picks for it), and
// a raw client (raw_ietf.mjs) asks, because @moq/net 0.3.4 serves no FETCH on 17+ and has no API to
// send one (NET-0.3.md §4.3: "0x16 FETCH not served"). What FETCH returns is compared byte for byte
// with what the live subscription received from the same publisher. Layouts: d17 §9.14 FETCH, §9.15
// FETCH_OK, §9.16 TRACK_STATUS, §10.4.4 FETCH_HEADER; d18 §10.12 (no Request ID Delta), §11.4.4
// (Group / Object ID Deltas); d20 §10.13 (the range in LOCATION_FILTER, §5.1.2).
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { GROUPS, closeNetConnections, netConnect, netPublish, netWaitActive } from "./net_client.mjs";
import { lo, loStr, loTuple, msg17, messages, parseSubgroup17, rawSession, readLo } from "./raw_ietf.mjs";

const { moqd } = H.moqdsOfFile(() => {
  closeNetConnections();
  H.closeAllConnections();
});

const d17 = (v) => v === "moq-transport-17";
const d20 = (v) => v === "moq-transport-20";
const reqId = (v, id) => Buffer.concat([lo(id), d17(v) ? lo(0) : Buffer.alloc(0)]);
const hexb = (h) => Buffer.from(h.replace(/\s/g, ""), "hex");
const nsOf = (p) => loTuple(...p.split("/"));
// SUBSCRIBE as @moq/net 0.3.4 writes it: forward 1, priority 7, the draft's join filter, group
// order 2 (17..19 LargestObject; 20 relative 1).
const subscribe = (v, id, p) => msg17(0x03, reqId(v, id), nsOf(p), loStr("video"), hexb(`04 10 01 10 07 01 01 ${d20(v) ? "01" : "02"} 01 02`));
// Standalone FETCH of groups [from, to] whole: 17..19 Start {from, 0}, End {to + 1, 0}... written
// as End {to, 0} ("Object 0: the whole End Group"); 20 LOCATION_FILTER {from, 0, to - from}.
function fetchStandalone(v, id, p, from, to) {
  if (d20(v)) {
    const f = Buffer.concat([lo(from), lo(0), lo(to - from)]);
    return msg17(0x16, reqId(v, id), lo(1), nsOf(p), loStr("video"), lo(1), lo(0x21), lo(f.length), f);
  }
  return msg17(0x16, reqId(v, id), lo(1), nsOf(p), loStr("video"), lo(from), lo(0), lo(to), lo(0), lo(0));
}
// Relative joining FETCH of subscription `joined`, `back` groups before the joined location's
// group (20: StartGroup back + 1, §10.13.2.1 {Largest.Group + 1 - StartGroup, 0}).
function fetchJoining(v, id, joined, back) {
  if (d20(v)) return msg17(0x16, reqId(v, id), lo(2), lo(joined), lo(1), lo(0x21), lo(1), lo(back + 1));
  return msg17(0x16, reqId(v, id), lo(2), lo(joined), lo(back), lo(0));
}

// A FETCH stream (ascending): FETCH_HEADER {0x05, id}, then objects {flags, [group], [subgroup],
// [object], [priority], [properties], length, payload}; from 18 Group ID / Object ID are deltas.
function parseFetch(b, v) {
  assert.equal(b[0], 0x05, "FETCH_HEADER");
  const id = readLo(b, 1);
  let at = id.next;
  const take = () => {
    const r = readLo(b, at);
    at = r.next;
    return r.value;
  };
  const deltas = !d17(v);
  const objects = [];
  let prev = null;
  while (at < b.length) {
    const f = take();
    let group = prev?.group;
    if (f & 0x08) {
      const g = take();
      group = deltas && prev ? prev.group + g + 1 : g;
    }
    if ((f & 0x03) === 0x03) take();
    let object = prev ? prev.object + 1 : 0;
    if (f & 0x04) {
      const o = take();
      object = deltas && prev && !(f & 0x08) ? prev.object + o : o;
    }
    if (f & 0x10) at += 1;
    if (f & 0x20) {
      // The object's extension block (FETCH carries the publisher's blocks): its length, then
      // skipped. (`at += take()` would add to the `at` read before take() moved it.)
      const n = Number(take());
      at += n;
    }
    const len = take();
    objects.push({ group, object, payload: Buffer.from(b.subarray(at, at + len)) });
    at += len;
    prev = { group, object };
  }
  return { requestId: id.value, objects };
}

for (const version of ["moq-transport-17", "moq-transport-18", "moq-transport-20"]) {
  test(`${version} raw client: FETCH and joining FETCH return exactly what @moq/net published, each on its own request stream; TRACK_STATUS answers there`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const m = await moqd([]);
    const p = `${H.uniquePrefix(version)}/alice`;
    const { mux } = await rawSession(m, version);
    const serverUni = () => [...mux.streams.values()].filter((s) => s.id !== 3 && (s.id & 3) === 3);
    const subgroups = () => serverUni().filter((s) => s.fin && s.data()[0] !== 0x05).map((s) => parseSubgroup17(s.data()));

    // @moq/net publishes GROUPS, each after the raw subscriber got the one before (a publisher
    // that runs ahead sends only its newest group).
    const pub = await netConnect(m.url);
    netPublish(pub, p, GROUPS, { before: (i) => H.waitFor(() => subgroups().length >= i, 10_000, `group ${i - 1} at the raw subscriber`) });
    await netWaitActive(await netConnect(m.url), p);

    const onStream = async (bytes, type, what) => {
      const s = mux.open();
      mux.write(s, bytes);
      const st = await mux.waitStream(s, (x) => messages(x.data()).length > 0, 10_000, what);
      const first = messages(st.data())[0];
      assert.equal(first.type, type, `${what}: message 0x${first.type.toString(16)}`);
      return { id: s, stream: st, first };
    };
    await onStream(subscribe(version, 0, p), 0x04, "SUBSCRIBE_OK");
    await mux.waitUntil(() => subgroups().length >= GROUPS.length, 10_000, "every group on the live subscription");
    const live = subgroups().sort((a, b) => a.group - b.group);
    assert.deepEqual(live.map((g) => g.frames), GROUPS.map((g) => g.map((f) => Buffer.from(f))));
    const seq = live.map((g) => g.group);
    const published = (from, to) => live.filter((g) => g.group >= from && g.group <= to).flatMap((g) => g.frames);

    const fetchStream = async (id) => {
      const s = await mux.waitUntil(() => serverUni().find((x) => x.fin && x.data()[0] === 0x05 && readLo(x.data(), 1).value === id), 10_000, `FETCH stream ${id}`);
      return parseFetch(s.data(), version);
    };
    const expectObjects = (got, from, to) => {
      assert.deepEqual(got.objects.map((o) => o.payload), published(from, to));
      assert.deepEqual(got.objects.map((o) => o.group), live.filter((g) => g.group >= from && g.group <= to).flatMap((g) => g.frames.map(() => g.group)));
    };

    // Standalone FETCH of every group: FETCH_OK on the FETCH's own stream, then its FIN once the
    // data stream ended; the objects byte for byte.
    const a = await onStream(fetchStandalone(version, 2, p, seq[0], seq.at(-1)), 0x18, "FETCH_OK");
    expectObjects(await fetchStream(2), seq[0], seq.at(-1));
    await mux.waitStream(a.id, (x) => x.fin, 10_000, "FIN of the FETCH's request stream");
    // A second subscription begins at the largest object; its relative joining FETCH one group
    // back returns the last two groups.
    await onStream(subscribe(version, 4, p), 0x04, "SUBSCRIBE_OK of the second subscription");
    await onStream(fetchJoining(version, 6, 4, 1), 0x18, "FETCH_OK of the joining FETCH");
    expectObjects(await fetchStream(6), seq.at(-2), seq.at(-1));
    // TRACK_STATUS: REQUEST_OK (d18+: TRACK_STATUS_OK) on its own stream, then FIN.
    const st = await onStream(msg17(0x0d, reqId(version, 8), nsOf(p), loStr("video"), lo(0)), 0x07, "TRACK_STATUS answer");
    await mux.waitStream(st.id, (x) => x.fin, 10_000, "FIN after TRACK_STATUS_OK");
    // A FETCH of a track nobody publishes: REQUEST_ERROR (0x05) DOES_NOT_EXIST (0x10), FIN.
    const e = await onStream(fetchStandalone(version, 10, `${p}-nobody`, 0, 1), 0x05, "REQUEST_ERROR");
    assert.equal(readLo(e.first.body, 0).value, 0x10);
    assert.equal(mux.appClose, null);
  });
}
