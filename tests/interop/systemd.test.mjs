// systemd's Type=notify protocol: READY=1 once moqd accepts connections (its ready line is out),
// RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 when the drain starts; exit 0. Driven by
// notify_listen.py, which plays systemd's side of NOTIFY_SOCKET (Node has no unix datagrams).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { test } from "node:test";
import * as H from "./harness.mjs";

test("moqd notifies READY=1, RELOADING=1/READY=1 on SIGHUP, STOPPING=1 on SIGTERM, and exits 0", { timeout: 30_000 }, () => {
  const out = execFileSync("/usr/bin/python3", [new URL("./notify_listen.py", import.meta.url).pathname,
    H.MOQD_BIN, "--listen", "127.0.0.1:0", "--workers", "1", "--drain-timeout", "1s"],
  { encoding: "utf8", timeout: 25_000 });
  const r = JSON.parse(out);
  assert.deepEqual(r.messages, ["READY=1", "RELOADING=1", "READY=1", "STOPPING=1"]);
  assert.match(r.ready_line, /^moqd ready url=http:\/\/127\.0\.0\.1:\d+\/$/);
  assert.equal(r.exit, 0);
});

test("dist/moqd.service is a Type=notify unit that reloads with SIGHUP; dist/moqd.toml checks", () => {
  const unit = fs.readFileSync(new URL("../../dist/moqd.service", import.meta.url), "utf8");
  assert.match(unit, /^Type=notify$/m);
  assert.match(unit, /^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
  assert.match(unit, /^KillSignal=SIGTERM$/m);
  const r = execFileSync(H.MOQD_BIN, ["--check-config", new URL("../../dist/moqd.toml", import.meta.url).pathname],
    { encoding: "utf8" });
  assert.match(r, /^metrics-listen = "127\.0\.0\.1:9100"$/m);
});
