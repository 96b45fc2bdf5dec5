// The bench scripts leave alone the moqd processes they did not start. bench/heap_sites.sh ends
// its own moqd with SIGKILL; it used to find that moqd by command line (`pgrep -f "^$B/bin/moqd
// --listen" | head -1`), which also matches any other moqd run from the same binary path (a soak,
// `moq bench churn`, the interop harness's own) and picks the oldest: a 1-hour bench/soak.sh lost
// its moqd at minute 15, with no log line, no core and nothing in dmesg, when heap_sites.sh ran
// beside it. Here a bystander moqd started the same way must still be serving after a short
// heap_sites.sh run. Not run against a sanitized moqd (heaptrack's LD_PRELOAD and ASan's runtime
// cannot both come first): scripts/test.sh leaves this file out of that stage.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import * as H from "./harness.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

// Runs a script in a process group of its own, so a timeout ends it and everything it started.
function runScript(argv, { env, timeoutMs }) {
  return new Promise((resolve) => {
    const p = spawn(argv[0], argv.slice(1), { cwd: repo, env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"], detached: true });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => {
      try { process.kill(-p.pid, "SIGKILL"); } catch {}
    }, timeoutMs);
    p.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out });
    });
  });
}

test("bench/heap_sites.sh ends only the moqd it started, not another run from the same binary", { timeout: 150_000 }, async () => {
  // Started first, so it has the lower pid: `pgrep ... | head -1` picked it.
  const bystander = await H.startMoqd();
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "heap_sites_test."));
  try {
    const build = path.dirname(path.dirname(H.MOQD_BIN));
    const r = await runScript(["bench/heap_sites.sh", build, "1", "2"],
      { env: { OUT: out, DURATION: "3", KILL_AT: "1" }, timeoutMs: 120_000 });
    const { exitCode, signalCode } = bystander.proc;
    assert.ok(exitCode === null && signalCode === null,
      `the bystander moqd ended (${signalCode ?? exitCode}) during heap_sites.sh\n${r.out}`);
    const health = await H.httpGet(`${bystander.url}health`);
    assert.equal(health.status, 200, "the bystander moqd's /health");
    assert.equal(r.code, 0, `heap_sites.sh exited ${r.code ?? r.signal}\n${r.out}`);
    assert.match(r.out, /total memory leaked: .* over 1 viewers/, r.out);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
    // Still running: it must stop cleanly. Already ended: the assertion above says how.
    if (bystander.proc.exitCode === null && bystander.proc.signalCode === null) await H.stopMoqdClean(bystander);
  }
});
