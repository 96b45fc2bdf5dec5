// A subscriber that stops reading: moqd measures progress by bytes leaving the connection, so a
// paused peer is closed with code 3 (timeout) after --stall-timeout while the bystander keeps
// receiving every frame.
// scripts/test.sh runs this file alone (see interop() there): its bystander must lose no frame, which a file starving it of CPU can break (it did under ASan).
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { TEST_TIMEOUT_MS, moqdStopsCleanly, startBystander, useMoqd } from "./harness.mjs";
import { RawLite, peerField, sessionEndRe, waitLog } from "./raw.mjs";

const ctx = useMoqd(["--stall-timeout", "2s"]);
let bystander;
const startedBystander = async () => (bystander ??= await startBystander(ctx.moqd.url));
after(() => bystander?.stop());

test("a subscriber that stops reading is closed with 3 after --stall-timeout", { timeout: TEST_TIMEOUT_MS }, async () => {
  await startedBystander();
  const peer = await RawLite.connect(ctx.moqd);
  await peer.setup();
  const { id } = peer.subscribe("bystander", "bulk");
  await peer.mux.waitUntil(() => peer.groups().some((g) => g.subscribeId === id), 5_000, "the first bulk group");
  peer.tcp.pause();
  const started = Date.now();
  await waitLog(ctx.moqd, new RegExp(`session \\d+ closing ${peerField(peer.tcp)} .*code=3 \\(timeout\\)`), 15_000);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= 1_500, `closed after ${elapsed} ms, before --stall-timeout 2s`);
  await waitLog(ctx.moqd, sessionEndRe(peer.tcp, 3));
  peer.tcp.destroy();
  await bystander.check();
});

moqdStopsCleanly(ctx);
