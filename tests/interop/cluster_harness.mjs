// What the cluster tests share: a moqd started as a named cluster node with its metrics listener,
// its /cluster view, and a wait for its links.
import assert from "node:assert/strict";
import * as H from "./harness.mjs";

// Starts moqd as cluster node `name` (plus `args`), with /cluster on a metrics listener at
// r.metrics; pushes it to `started` (the file's after() stops them) and resolves with it.
export async function startClusterRelay(started, name, args = []) {
  const r = await H.startMoqd(["--cluster-node", name, "--metrics-listen", "127.0.0.1:0",
    "--log-level", "info", ...args]);
  started.push(r);
  const m = /^moqd metrics url=(\S+)$/m.exec(r.stdoutText());
  assert.ok(m, `metrics url of ${name}`);
  r.metrics = m[1];
  r.name = name;
  return r;
}

// The relay's GET /cluster, parsed.
export async function clusterOf(r) {
  const res = await H.httpGet(`${r.metrics}cluster`);
  assert.equal(res.status, 200);
  return res.json();
}

// Waits until exactly `n` of the relay's cluster links are up.
export async function waitLinksUp(r, n, ms = 15_000) {
  await H.waitFor(async () => (await clusterOf(r)).links.filter((l) => l.state === "up").length === n,
    ms, `${r.name}: ${n} cluster links up`, 100);
}
