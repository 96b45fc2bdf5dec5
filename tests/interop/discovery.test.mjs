// Discovery through moqd: announced() sees broadcasts become active and end.
import { test } from "node:test";
import * as H from "./harness.mjs";

const ctx = H.useMoqd();
const T = { timeout: H.TEST_TIMEOUT_MS };

test("announced: active on publish, ended when the broadcast closes", T, async () => {
  const prefix = H.uniquePrefix("disc");
  const observer = await H.connect(ctx.moqd.url);
  const watch = H.watchAnnounced(observer, prefix);
  const pubConn = await H.connect(ctx.moqd.url);
  const p = `${prefix}/bob`;
  const pub = H.publishBroadcast(pubConn, p, {});
  await watch.waitFor(p, true);
  pub.close();
  await watch.waitFor(p, false);
  watch.close();
});

test("announced: ended when the publisher's connection closes", T, async () => {
  const prefix = H.uniquePrefix("discconn");
  const observer = await H.connect(ctx.moqd.url);
  const watch = H.watchAnnounced(observer, prefix);
  const pubConn = await H.connect(ctx.moqd.url);
  const p = `${prefix}/carol`;
  H.publishBroadcast(pubConn, p, {});
  await watch.waitFor(p, true);
  H.closeConnection(pubConn);
  await watch.waitFor(p, false);
  watch.close();
});

test("announced: a watcher that starts later sees broadcasts already active", T, async () => {
  const prefix = H.uniquePrefix("discinit");
  const pubConn = await H.connect(ctx.moqd.url);
  const paths = [`${prefix}/a`, `${prefix}/b`, `${prefix}/c/d`];
  for (const p of paths) H.publishBroadcast(pubConn, p, {});
  await H.waitActive(await H.connect(ctx.moqd.url), paths[2]);
  const watch = H.watchAnnounced(await H.connect(ctx.moqd.url), prefix);
  for (const p of paths) await watch.waitFor(p, true);
  watch.close();
});

test("the URL path is the session root: /ROOM publishes under ROOM/", T, async () => {
  const room = H.uniquePrefix("room").replaceAll("/", "-");
  const pubConn = await H.connect(`${ctx.moqd.url}${room}`);
  const watch = H.watchAnnounced(await H.connect(ctx.moqd.url), room);
  H.publishBroadcast(pubConn, "bob", {});
  await watch.waitFor(`${room}/bob`, true);
  watch.close();
});

H.moqdStopsCleanly(ctx);
