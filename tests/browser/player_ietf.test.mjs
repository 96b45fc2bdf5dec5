// The live camera broadcast of `<moq-publish>` (@moq/publish 0.2.17, moq-lite) read through moqd
// by `@moq/net` 0.3.4 in Node on moq-transport-16, compared byte for byte with what a moq-lite
// viewer (`@moq/lite` 0.2.2 in Node) reads of the same tracks. moqd serves only moq-lite-02 and
// moq-transport-16 (`--versions moq-lite-02,moq-transport-16`): the publisher's page has no
// WebTransport, so its `@moq/net` 0.1.9 offers the bare qmux-01 / qmux-00 / webtransport forms and
// SETUP gives it moq-lite-02 (over WebTransport it would offer moqt-16 as well, and moqd would pick
// that), `@moq/net` 0.3.4 offers qmux-02.moqt-16 (moqd prefers a draft's own protocol to SETUP),
// and `@moq/lite` 0.2.2 offers only the bare forms (moq-lite-02). Both viewers subscribe to
// catalog.json and to the catalog's first video and audio renditions at the same time; every
// group both read to its end must hold the same frames, byte for byte and in the same order.
// About 10 s (Chromium start, camera, two video groups).
import assert from "node:assert/strict";
import { after } from "node:test";
import {
  browserTest, callPage, closeAllConnections, closeConnection, connect, loggedTransports, moqdStopsCleanly, openPage, subscribeTrack,
  uniquePrefix, useBrowser, waitFor,
} from "./browser.mjs";
import { closeNetConnections, netConnect, netSubscribe, netWaitActive } from "../interop/net_client.mjs";

const ctx = useBrowser(["--versions", "moq-lite-02,moq-transport-16"], {
  page: "player.mjs",
  chromiumArgs: [
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
  ],
});

after(() => {
  closeNetConnections();
  closeAllConnections();
});

const state = (page, fn) => page.evaluate((name) => window[name](), fn);

// Groups (by sequence) that both viewers read to their end: @moq/net's `complete` set and
// @moq/lite's entries marked done.
function commonComplete(net, lite) {
  const liteDone = new Map(lite.groups.filter((g) => g.done).map((g) => [g.group, g.frames]));
  return [...net.complete].filter((seq) => liteDone.has(seq)).sort((a, b) => a - b)
    .map((seq) => ({ seq, net: net.groups.get(seq), lite: liteDone.get(seq) }));
}

const describe = (net, lite) => JSON.stringify({
  net: [...net.groups.entries()].map(([seq, f]) => [seq, f.length, net.complete.has(seq)]),
  lite: lite.groups.map((g) => [g.group, g.frames.length, g.done]),
});

browserTest(ctx, "@moq/publish 0.2.17 (moq-lite-02) -> moqd -> @moq/net 0.3.4 on moq-transport-16: catalog, video and audio byte for byte as a moq-lite viewer reads them", async (t, s) => {
  const started = Date.now();
  const root = uniquePrefix("player-d16");
  const p = `${root}/cam`;

  s.page = await openPage(ctx, { webtransport: false });
  await callPage(s.page, "startPublish", [`${ctx.moqd.url}${root}`, "cam", { websocket: true }], 5_000, "the publisher page to start");
  let pub;
  await waitFor(async () => {
    pub = await state(s.page, "publishState");
    return pub.version && pub.video && pub.audio;
  }, 15_000, () => `<moq-publish> to connect with camera and microphone; last ${JSON.stringify(pub)}`, 100);
  assert.equal(pub.version, "moq-lite-02");

  const net = await netConnect(ctx.moqd.url);
  assert.equal(net.version, "moq-transport-16");
  const lite = await connect(ctx.moqd.url);
  await netWaitActive(net, p, 15_000);

  // catalog.json: one JSON catalog per group, the same bytes at both viewers.
  const netCat = netSubscribe(net, p, "catalog.json");
  const liteCat = subscribeTrack(lite, p, "catalog.json");
  // A catalog group stays open until the catalog changes: its first frame (the whole catalog) at
  // both is enough. The first catalog can come before the encoder is configured (no video
  // rendition yet): the newest group whose catalog has video and audio renditions is compared.
  const renditions = (buf) => {
    try {
      const c = JSON.parse(buf.toString());
      return Object.keys(c.video?.renditions ?? {}).length > 0 && Object.keys(c.audio?.renditions ?? {}).length > 0 && c;
    } catch {
      return false;
    }
  };
  const sharedCatalog = () => [...netCat.groups.keys()].sort((a, b) => b - a).find((seq) => netCat.groups.get(seq).length >= 1 &&
    liteCat.groups.some((g) => g.group === seq && g.frames.length >= 1) && renditions(netCat.groups.get(seq)[0]));
  await waitFor(() => sharedCatalog() !== undefined, 15_000, () => `a catalog with video and audio at both viewers: ${describe(netCat, liteCat)}; first frames ${JSON.stringify([...netCat.groups.values()].map((f) => f[0]?.toString().slice(0, 300)))}`);
  const catSeq = sharedCatalog();
  const netFirst = netCat.groups.get(catSeq)[0];
  const liteFirst = liteCat.groups.find((g) => g.group === catSeq).frames[0];
  assert.ok(netFirst.equals(liteFirst), "catalog.json frame differs between the d16 and the moq-lite viewer");
  const catalog = JSON.parse(netFirst.toString());
  t.diagnostic(`catalog (group ${catSeq}, ${netFirst.length} bytes): ${JSON.stringify(catalog).slice(0, 400)}`);
  const videoTracks = Object.keys(catalog.video.renditions);
  const audioTracks = Object.keys(catalog.audio.renditions);

  // The first video and audio renditions, subscribed at both viewers at the same time.
  const tracks = [
    { name: videoTracks[0], groups: 2 },
    { name: audioTracks[0], groups: 3 },
  ].map((x) => ({ ...x, net: netSubscribe(net, p, x.name), lite: subscribeTrack(lite, p, x.name) }));
  for (const x of tracks) {
    await waitFor(() => commonComplete(x.net, x.lite).length >= x.groups, 20_000,
      () => `${x.groups} groups of ${x.name} complete at both viewers: ${describe(x.net, x.lite)}`, 50);
    const common = commonComplete(x.net, x.lite);
    for (const g of common) {
      assert.ok(g.net.length >= 1, `${x.name} group ${g.seq} is empty`);
      assert.equal(g.net.length, g.lite.length, `${x.name} group ${g.seq}: ${g.net.length} frames at @moq/net (d16), ${g.lite.length} at @moq/lite (lite-02)`);
      g.net.forEach((f, i) => assert.ok(f.equals(g.lite[i]), `${x.name} group ${g.seq} frame ${i} differs (${f.length} vs ${g.lite[i].length} bytes)`));
    }
    const frames = common.reduce((n, g) => n + g.net.length, 0);
    const bytes = common.reduce((n, g) => n + g.net.reduce((m, f) => m + f.length, 0), 0);
    const seqs = common.map((g) => g.seq);
    t.diagnostic(`${x.name}: ${seqs.length} groups (${seqs[0]}..${seqs.at(-1)}) identical at both viewers (${frames} frames, ${bytes} bytes)`);
  }

  const sessions = loggedTransports(ctx.moqd, root);
  t.diagnostic(`moqd sessions at /${root}: ${JSON.stringify(sessions)}`);
  assert.deepEqual(sessions, [{ transport: "websocket/qmux-01", version: "moq-lite-02" }]);
  // Both Node viewers connected at "/": one d16 session on qmux-02.moqt-16, one moq-lite-02.
  const all = [...ctx.moqd.stderrText().matchAll(/session \d+ start peer=\S+ transport=(\S+) version=(\S+) path=\/$/gm)].map((m) => `${m[1]} ${m[2]}`);
  assert.ok(all.includes("websocket/qmux-02 moq-transport-16"), `no d16 viewer session: ${JSON.stringify(all)}`);
  assert.ok(all.some((x) => x.endsWith(" moq-lite-02")), `no moq-lite-02 viewer session: ${JSON.stringify(all)}`);
  net.close();
  closeConnection(lite);
  t.diagnostic(`took ${Date.now() - started} ms`);
}, { timeout: 60_000 });

moqdStopsCleanly(ctx);
