// SIGHUP re-reads the config file: a new certificate is used by new QUIC and TLS connections
// while existing sessions keep flowing; a broken file keeps the running configuration and says
// why; a setting that needs a restart is logged as such. moqd --check-config validates a file.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { after, test } from "node:test";
import * as H from "./harness.mjs";

const T = { timeout: 40_000 };
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moqd-reload-"));
const started = [];
after(async () => {
  for (const m of started) {
    if (m.proc.exitCode === null && m.proc.signalCode === null) await m.stop().catch(() => {});
  }
});

// A self-signed ECDSA P-256 certificate for 127.0.0.1; returns its files and DER SHA-256 (hex).
function makeCertificate(name) {
  const cert = path.join(dir, `${name}.crt`), key = path.join(dir, `${name}.key`);
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", key, "-out", cert, "-days", "10", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], { stdio: "ignore" });
  const sha = new X509Certificate(fs.readFileSync(cert)).fingerprint256.replaceAll(":", "").toLowerCase();
  return { cert, key, sha };
}

// The SHA-256 of the certificate a fresh TLS connection to the TCP port sees.
function tlsCertificateSha(port) {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] }, () => {
      const sha = s.getPeerCertificate().fingerprint256.replaceAll(":", "").toLowerCase();
      s.end();
      resolve(sha);
    });
    s.on("error", reject);
  });
}

const frameCount = (m) => m.stdoutText().split("\n").filter(Boolean).length;

test("SIGHUP with a new certificate: sessions keep flowing, new connections see the new one; a broken file is refused", T, async () => {
  const a = makeCertificate("a"), b = makeCertificate("b");
  const live = { cert: path.join(dir, "live.crt"), key: path.join(dir, "live.key") };
  fs.copyFileSync(a.cert, live.cert);
  fs.copyFileSync(a.key, live.key);
  const config = path.join(dir, "moqd.toml");
  const good = `tls-cert = "${live.cert}"\ntls-key = "${live.key}"\ncache-groups = 8\nmax-frame-size = "1MiB"\n`;
  fs.writeFileSync(config, good);
  const moqd = await H.startMoqd(["--config", config]);
  started.push(moqd);
  const hash = async () => (await (await H.httpGet(`${moqd.url}certificate.sha256`)).text()).trim();
  assert.equal(await hash(), a.sha);
  assert.equal(await tlsCertificateSha(moqd.port), a.sha);

  // A live stream across the reload: moq pub -> moqd -> moq sub, both over QUIC.
  const p = H.uniquePrefix("reload");
  const pub = H.spawnMoq(["pub", moqd.url, p, "--track", "t"]);
  let n = 0;
  const timer = setInterval(() => pub.write(`frame ${n++}\n`), 20);
  const sub = H.spawnMoq(["sub", moqd.url, p, "--track", "t"]);
  try {
    await sub.waitStdout(() => frameCount(sub) >= 10, 10_000, "frames before the reload");

    fs.copyFileSync(b.cert, live.cert);
    fs.copyFileSync(b.key, live.key);
    moqd.proc.kill("SIGHUP");
    await H.waitFor(() => moqd.stderrText().includes(`reload: applied (certificate sha256=${b.sha}`), 5_000,
      "the reload line with the new certificate");
    assert.equal(await hash(), b.sha);
    assert.equal(await tlsCertificateSha(moqd.port), b.sha);
    // A new QUIC connection is served the new certificate: pinning it works, pinning the old fails.
    const url = H.httpsUrl(moqd.url);
    const ok = await H.runMoq(["announced", url, "", "--tls-fingerprint", b.sha, "--timeout", "0.5"]);
    assert.equal(ok.code, 0, ok.stderr);
    const old = await H.runMoq(["announced", url, "", "--tls-fingerprint", a.sha, "--timeout", "0.5"]);
    assert.notEqual(old.code, 0, "the old certificate is no longer served");
    // The session that started before the reload still flows.
    const before = frameCount(sub);
    await sub.waitStdout(() => frameCount(sub) >= before + 20, 5_000, "frames after the reload");

    // A broken file: the running configuration stays, and the log says why.
    fs.writeFileSync(config, `tls-cert = "${path.join(dir, "missing.crt")}"\ntls-key = "${live.key}"\n`);
    moqd.proc.kill("SIGHUP");
    await H.waitFor(() => /reload: the configuration is invalid .* keeping the running one/.test(moqd.stderrText()),
      5_000, "the refused reload");
    assert.match(moqd.stderrText(), /moqd: TLS certificate: /);
    assert.equal(await hash(), b.sha);
    fs.writeFileSync(config, "this is = not [ toml\n");
    moqd.proc.kill("SIGHUP");
    await H.waitFor(() => (moqd.stderrText().match(/reload: the configuration is invalid/g) ?? []).length === 2,
      5_000, "the second refused reload");
    // A restart-only setting is reported, the rest applied.
    fs.writeFileSync(config, good.replace("cache-groups = 8", "cache-groups = 16"));
    moqd.proc.kill("SIGHUP");
    await H.waitFor(() => /reload: cache-groups changed \("8" -> "16"\) but needs a restart; keeping "8"/.test(moqd.stderrText()),
      5_000, () => `the restart-only warning\n${moqd.stderrText()}`);
    const last = frameCount(sub);
    await sub.waitStdout(() => frameCount(sub) >= last + 10, 5_000, "frames after the refused reloads");
  } finally {
    clearInterval(timer);
    await sub.stop().catch(() => {});
    await pub.stop().catch(() => {});
  }
  await H.stopMoqdClean(moqd);
});

test("moqd --check-config prints the effective settings; MOQD_* variables count; a bad file exits 2", T, async () => {
  const config = path.join(dir, "check.toml");
  fs.writeFileSync(config, `max-frame-size = "2MiB"\nauth-public = ["anon", "demo"]\n`);
  const run = (args, env = {}) => {
    try {
      return { code: 0, out: execFileSync(H.MOQD_BIN, args, { env: { ...process.env, ...env }, encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"] }) };
    } catch (err) {
      return { code: err.status, out: String(err.stdout), err: String(err.stderr) };
    }
  };
  const r = run(["--check-config", config], { MOQD_STALL_TIMEOUT: "7s" });
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^max-frame-size = "2MiB"$/m);
  assert.match(r.out, /^auth-public = \["anon", "demo"\]$/m);
  assert.match(r.out, /^stall-timeout = "7s"$/m);
  assert.match(r.out, /^drain-timeout = "10s"$/m);
  // Flags win over the environment, which wins over the file.
  const r2 = run(["--check-config", config, "--max-frame-size", "3MiB"], { MOQD_MAX_FRAME_SIZE: "4MiB" });
  assert.match(r2.out, /^max-frame-size = "3MiB"$/m);
  const r3 = run(["--check-config", config], { MOQD_MAX_FRAME_SIZE: "4MiB" });
  assert.match(r3.out, /^max-frame-size = "4MiB"$/m);
  fs.writeFileSync(config, `max-frame-size = "lots"\n`);
  const bad = run(["--check-config", config]);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /invalid value for --max-frame-size/);
  fs.writeFileSync(config, `no-such-key = 1\n`);
  assert.equal(run(["--check-config", config]).code, 2);
});
