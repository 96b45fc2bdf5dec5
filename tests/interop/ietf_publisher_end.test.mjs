// scripts/test.sh runs this file alone
// An @moq/net 0.3.4 publisher on moq-transport-16 that writes several large groups as fast as it
// can and ends the track at once: its PUBLISH_DONE carries Stream Count 0 and reaches moqd before
// the streams of its last groups have been read. Every frame still reaches a @moq/lite 0.2.2
// subscriber (moq-lite-02), and then the end of the track, in each of 8 runs. (moqd used to end
// the upstream track 200 ms after PUBLISH_DONE once no stream was being read: frames of the last
// groups were lost in about 2 runs of 8.) Moves ~40 MB through moqd: run it alone.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "./harness.mjs";
import { closeNetConnections, netConnect, netPublish } from "./net_client.mjs";
import { waitLog } from "./raw.mjs";

const { moqd } = H.moqdsOfFile(() => {
  closeNetConnections();
  H.closeAllConnections();
});

const RUNS = Number(process.env.RUNS ?? 8);
// A small first group, paced (the subscription is in place), then six large ones at once.
const BIG = [[H.text("first")], ...Array.from({ length: 6 }, (_, i) => [H.text(`g${i}`), H.randomFrame(600_000), H.randomFrame(200_000)])];

test(`an @moq/net 0.3.4 moq-transport-16 publisher that ends right after ${BIG.length - 1} large groups: a subscriber gets every frame, ${RUNS} runs`, { timeout: 4 * H.TEST_TIMEOUT_MS }, async () => {
  const m = await moqd(["--versions", "moq-lite-02,moq-transport-16"]);
  const lite = await H.connect(m.url);
  await waitLog(m, /version=moq-lite-02 /);
  const want = BIG.flat().map((f) => Buffer.from(f));
  const lost = [];
  for (let run = 0; run < RUNS; run++) {
    const p = `${H.uniquePrefix(`pubend${run}`)}/alice`;
    const net = await netConnect(m.url);
    assert.equal(net.version, "moq-transport-16");
    const holder = {};
    netPublish(net, p, BIG, {
      before: (i) => (i === 1 ? H.waitFor(() => holder.s.frameCount() >= 1, 10_000, "group 0") : Promise.resolve()),
      end: true,
    });
    const watcher = H.watchAnnounced(lite, p.slice(0, p.lastIndexOf("/")));
    await watcher.waitFor(p, true);
    watcher.close();
    const s = H.subscribeTrack(lite, p, "video");
    holder.s = s;
    await s.waitEnd(20_000).catch(() => {});
    const got = [...s.groups].sort((a, b) => Number(a.group) - Number(b.group)).flatMap((g) => g.frames);
    if (got.length !== want.length) lost.push(`run ${run}: ${got.length} of ${want.length} frames, groups ${JSON.stringify(s.groups.map((g) => [Number(g.group), g.frames.length, g.done, String(g.error ?? "")]))}`);
    else assert.deepEqual(got, want, `run ${run}`);
    net.close();
  }
  assert.deepEqual(lost, [], "frames lost");
  H.closeConnection(lite);
});
