// The other half of harness.mjs's startBystanderThread(): runs startBystander() and watchGaps()
// on this worker thread's own event loop, and answers the main thread's requests
// ({id, op, args} -> {id, ok, value | error}).
import { parentPort, workerData } from "node:worker_threads";

import { startBystander, watchGaps } from "./harness.mjs";

const bystander = await startBystander(workerData.url, workerData.options);
let gaps = null;

const ops = {
  waitFrames: (n, ms) => bystander.sub.waitFrames(n, ms).then(() => bystander.sub.frameCount()),
  watchGaps: () => {
    gaps = watchGaps(bystander.sub);
  },
  gaps: () => ({ max: gaps?.max ?? 0, at: gaps?.at ?? null }),
  check: (ms) => bystander.check(ms),
  stop: () => {
    gaps?.stop();
    bystander.stop();
  },
};

parentPort.on("message", async ({ id, op, args }) => {
  try {
    parentPort.postMessage({ id, ok: true, value: await ops[op](...args) });
  } catch (err) {
    parentPort.postMessage({ id, ok: false, error: String(err?.stack ?? err) });
  }
  if (op === "stop") parentPort.close();
});
parentPort.postMessage({ ready: true });
