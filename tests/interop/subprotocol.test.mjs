// The WebSocket subprotocol moqd selects from the offer lists the real clients send
// (protocol/NET-0.3.md §1.1), from lists mixing what it serves with what it does not, and under
// --versions; a refusal is a 400 and a log line. Then a normal close from each @moq/qmux version
// (0.0.6, 0.1.3, 0.3.3) reaches moqd as code 0 with its reason, and moqd's close reason reaches
// each of them intact.
import assert from "node:assert/strict";
import { test, after } from "node:test";
import { fileURLToPath } from "node:url";
import path from "node:path";
import * as H from "./harness.mjs";
import { RawTcp, parseHttpResponse, upgradeRequest, waitLog } from "./raw.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

const LISTS = {
  "@moq/lite 0.2.2": "qmux-00, webtransport",
  "@moq/net 0.1.9 (@moq/publish 0.2.17)": "qmux-01, qmux-00, webtransport",
  "@moq/net 0.2.8 (@moq/watch 0.4.6)":
    "qmux-02.moq-lite-05, qmux-01.moq-lite-05, qmux-00.moq-lite-05, qmux-02.moq-lite-04, qmux-01.moq-lite-04, " +
    "qmux-00.moq-lite-04, qmux-02.moq-lite-03, qmux-01.moq-lite-03, qmux-00.moq-lite-03, qmux-02.moql, " +
    "qmux-01.moql, qmux-00.moql, qmux-01.moqt-18, qmux-02.moqt-17, qmux-01.moqt-17, qmux-00.moqt-17, " +
    "qmux-02.moqt-16, qmux-01.moqt-16, qmux-00.moqt-16, qmux-02.moqt-15, qmux-01.moqt-15, qmux-00.moqt-15, " +
    "qmux-02, qmux-01, qmux-00, webtransport",
  "@moq/net 0.3.4":
    "qmux-02.moq-lite-05, qmux-01.moq-lite-05, qmux-00.moq-lite-05, qmux-02.moq-lite-04, qmux-01.moq-lite-04, " +
    "qmux-00.moq-lite-04, qmux-02.moq-lite-03, qmux-01.moq-lite-03, qmux-00.moq-lite-03, qmux-02.moql, " +
    "qmux-01.moql, qmux-00.moql, qmux-01.moqt-20, qmux-01.moqt-18, qmux-02.moqt-17, qmux-01.moqt-17, " +
    "qmux-00.moqt-17, qmux-02.moqt-16, qmux-01.moqt-16, qmux-00.moqt-16, qmux-02.moqt-15, qmux-01.moqt-15, " +
    "qmux-00.moqt-15, qmux-02, qmux-01, qmux-00, webtransport",
};

// What moqd answers an upgrade offering `protocols`: {status, protocol}.
async function offer(moqd, protocols) {
  const tcp = await RawTcp.connect(moqd.host, moqd.port);
  try {
    tcp.write(upgradeRequest({ host: `${moqd.host}:${moqd.port}`, protocols: [protocols] }));
    const resp = await tcp.waitData((b) => parseHttpResponse(b), 5_000, "the upgrade response");
    return { status: resp.status, protocol: resp.headers["sec-websocket-protocol"] };
  } finally {
    tcp.destroy();
  }
}

const started = [];
async function moqdWith(args) {
  const m = await H.startMoqd(args);
  started.push(m);
  return m;
}
after(async () => {
  for (const m of started) await m.stop().catch(() => {});
});

test("every real client's offer list gets the newest protocol and framing moqd serves", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const moqd = await moqdWith([]);
  const want = {
    "@moq/lite 0.2.2": "qmux-00",
    "@moq/net 0.1.9 (@moq/publish 0.2.17)": "qmux-01",
    "@moq/net 0.2.8 (@moq/watch 0.4.6)": "qmux-02.moq-lite-05",
    "@moq/net 0.3.4": "qmux-02.moq-lite-05",
  };
  for (const [who, list] of Object.entries(LISTS)) {
    assert.deepEqual(await offer(moqd, list), { status: 101, protocol: want[who] }, who);
  }
  // The reproduction: lite-05 offered first, and served.
  assert.deepEqual(await offer(moqd, "qmux-00.moq-lite-05, qmux-00.moq-lite-04, qmux-00"), { status: 101, protocol: "qmux-00.moq-lite-05" });
  // Offered last, still preferred.
  assert.deepEqual(await offer(moqd, "qmux-00, qmux-01.moq-lite-04, qmux-01.moq-lite-05"), { status: 101, protocol: "qmux-01.moq-lite-05" });
  // Server preference whatever the client's order.
  assert.deepEqual(await offer(moqd, "webtransport, qmux-00, qmux-01.moq-lite-03"), { status: 101, protocol: "qmux-01.moq-lite-03" });
  await H.stopMoqdClean(moqd);
});

test("an offer list with nothing moqd serves gets 400 and a log line", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const moqd = await moqdWith([]);
  // moqt-19 is never reached over WebSocket, moqt-20 only as qmux-01., moqt-21 is unknown.
  const r = await offer(moqd, "qmux-00.moqt-20, qmux-01.moqt-19, qmux-00.moqt-21, qmux-00.moq-lite-06-wip, qmux-09, chat");
  assert.equal(r.status, 400);
  assert.equal(r.protocol, undefined);
  await waitLog(moqd, /websocket refused peer=\S+: no acceptable subprotocol offered="qmux-00\.moqt-20, qmux-01\.moqt-19, qmux-00\.moqt-21, qmux-00\.moq-lite-06-wip, qmux-09, chat" accepted=qmux-02\.moq-lite-05,/);
  await H.stopMoqdClean(moqd);
});

test("--versions changes the choice", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const lite04 = await moqdWith(["--versions", "moq-lite-04"]);
  assert.deepEqual(await offer(lite04, LISTS["@moq/net 0.3.4"]), { status: 101, protocol: "qmux-02.moq-lite-04" });
  await H.stopMoqdClean(lite04);
  const lite03 = await moqdWith(["--versions", "moq-lite-03"]);
  assert.deepEqual(await offer(lite03, LISTS["@moq/net 0.3.4"]), { status: 101, protocol: "qmux-02.moq-lite-03" });
  assert.equal((await offer(lite03, LISTS["@moq/lite 0.2.2"])).status, 400);
  assert.equal((await offer(lite03, LISTS["@moq/net 0.1.9 (@moq/publish 0.2.17)"])).status, 400);
  await H.stopMoqdClean(lite03);
  const lite02 = await moqdWith(["--versions", "moq-lite-02,moq-lite-01"]);
  assert.deepEqual(await offer(lite02, LISTS["@moq/net 0.3.4"]), { status: 101, protocol: "qmux-02.moql" });
  assert.deepEqual(await offer(lite02, LISTS["@moq/lite 0.2.2"]), { status: 101, protocol: "qmux-00" });
  await H.stopMoqdClean(lite02);
});

// --- closes with the real @moq/qmux packages ---

const QMUX = {
  "0.0.6": { module: "@moq/qmux", framing: "qmux-00" },
  "0.1.3": { module: "moq-qmux-013", framing: "qmux-01" },
  "0.3.3": { module: path.join(here, "node_modules/@moq/net/node_modules/@moq/qmux/index.js"), framing: "qmux-02" },
};

async function qmuxSession(version, url) {
  const mod = await import(QMUX[version].module);
  const Session = mod.default;
  const session = new Session(url, {});
  await H.withDeadline(session.ready, 5_000, `@moq/qmux ${version} ready`);
  return session;
}

for (const version of Object.keys(QMUX)) {
  test(`@moq/qmux ${version}: a normal close reaches moqd as code 0 with its reason`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const moqd = await moqdWith([]);
    const session = await qmuxSession(version, moqd.url);
    const stream = await session.createBidirectionalStream();
    const w = stream.writable.getWriter();
    await w.write(new Uint8Array([0x20])); // the start of a CLIENT_SETUP: moqd waits for the rest
    session.close({ closeCode: 0, reason: `bye from ${version}` });
    await waitLog(moqd, new RegExp(`session \\d+ end peer=\\S+ version=\\S+ code=0 reason=bye from ${version.replaceAll(".", "\\.")}$`, "m"));
    await H.stopMoqdClean(moqd);
  });

  test(`@moq/qmux ${version}: moqd's close reason arrives intact`, { timeout: H.TEST_TIMEOUT_MS }, async () => {
    const moqd = await moqdWith([]);
    const session = await qmuxSession(version, moqd.url);
    // A CLIENT_SETUP offering no version: moqd closes the session and says why.
    const stream = await session.createBidirectionalStream();
    const w = stream.writable.getWriter();
    await w.write(new Uint8Array([0x20, 0x00, 0x02, 0x00, 0x00]));
    const info = await H.withDeadline(session.closed.catch((e) => ({ error: String(e) })), 5_000, "the session to close");
    const m = await waitLog(moqd, /session \d+ closing peer=\S+ version=\S+ code=(\d+) \(\S+\) detail=(.*)$/m);
    // 0.0.6 reports the WebSocket close frame (1000 and the same reason), the others the
    // APPLICATION_CLOSE frame.
    assert.ok(m[2].length > 0, "moqd gave a reason");
    const code = version === "0.0.6" ? 1000 : Number(m[1]);
    assert.deepEqual(info, { closeCode: code, reason: m[2] }, `${JSON.stringify(info)} ${m[0]}`);
    await H.stopMoqdClean(moqd);
  });
}

// --- moq offers the same table ---

test("moq over WebSocket gets qmux-02.moq-lite-05, or what --framing and --versions leave", { timeout: H.TEST_TIMEOUT_MS }, async () => {
  const moqd = await moqdWith([]);
  const cases = [
    [[], "websocket/qmux-02 version=moq-lite-05"],
    [["--framing", "qmux-01"], "websocket/qmux-01 version=moq-lite-05"],
    [["--versions", "moq-lite-04"], "websocket/qmux-02 version=moq-lite-04"],
    [["--versions", "moq-lite-03", "--framing", "qmux-00"], "websocket/qmux-00 version=moq-lite-03"],
    [["--versions", "moq-lite-02"], "websocket/qmux-02 version=moq-lite-02"],
    [["--framing", "webtransport"], "websocket/webtransport version=moq-lite-02"],
  ];
  for (const [i, [args, want]] of cases.entries()) {
    const ann = H.spawnMoq(["announced", moqd.url, `room${i}`, "--transport", "ws", ...args]);
    try {
      await waitLog(moqd, new RegExp(`session ${i + 1} start peer=\\S+ transport=${want} `));
    } finally {
      await ann.stop();
    }
  }
  await H.stopMoqdClean(moqd);
});
