// Shared helpers for the interop tests: start moqd, run the moq CLI, and drive the real
// @moq/lite client as publisher or subscriber. Every wait has a deadline; there is no sleep
// used as synchronisation (waitFor polls a condition every few milliseconds, bounded).
import "./polyfill.mjs";

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import * as Moq from "@moq/lite";

export { Moq };

const here = path.dirname(fileURLToPath(import.meta.url));
export const MOQD_BIN = path.resolve(process.env.MOQD_BIN ?? path.join(here, "../../build/bin/moqd"));
export const MOQ_BIN = path.resolve(process.env.MOQ_BIN ?? path.join(here, "../../build/bin/moq"));
// True when MOQD_BIN is built with ASan or TSan: their allocators keep freed memory (quarantine)
// and moqd does not trim under them, so RSS bounds and RSS recovery are not checked there. Nor
// are bounds on how long an attack may stall a bystander: an unoptimized, sanitized moqd under a
// flood is many times slower (on a busy machine the ASan build stalled one 3-13 s where the
// optimized build stalled it 0.15 s); the optimized build's run checks them, and the sanitized
// run still checks that no frame is lost.
export const MOQD_SANITIZED = (() => {
  try {
    const bin = fs.readFileSync(MOQD_BIN);
    return bin.includes("__asan_init") || bin.includes("__tsan_init");
  } catch {
    return false;
  }
})();


// Per-test bound, for `test(name, { timeout: TEST_TIMEOUT_MS }, fn)`.
export const TEST_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------------------------------------
// Process-wide setup

// The library logs every stream at debug level; keep test output readable.
console.debug = () => {};

// @moq/qmux can enqueue into a closed stream controller when frames arrive after close()
// (README §7.5), which would otherwise kill the process or fail whichever test is running.
// Such teardown noise, and anything after teardown began, is recorded and swallowed; any other
// error goes on to the listeners that were there before (node:test's, which fail the test).
const asyncErrors = [];
let tearingDown = false;
const BENIGN = /Invalid state|already closed|closed stream|WebSocket (is not open|was closed)|cancel/i;
function recordAsyncError(kind, err) {
  asyncErrors.push({ kind, err });
  if (process.env.INTEROP_VERBOSE) console.error(`[interop] ${kind}:`, err);
}
function guard(kind) {
  const previous = process.listeners(kind);
  process.removeAllListeners(kind);
  process.on(kind, (err, ...rest) => {
    recordAsyncError(kind, err);
    if (tearingDown || BENIGN.test(String(err?.message ?? err))) return;
    for (const listener of previous) listener.call(process, err, ...rest);
    if (previous.length === 0 && kind === "uncaughtException") throw err;
  });
}
// Called once node:test has installed its own listeners (from useMoqd's before hook).
let guarded = false;
function installGuards() {
  if (guarded) return;
  guarded = true;
  guard("unhandledRejection");
  guard("uncaughtException");
}
process.on("unhandledRejection", (err) => recordAsyncError("unhandledRejection (early)", err));

// Errors that escaped to the process level so far (informational; teardown noise lands here).
export function recordedAsyncErrors() {
  return asyncErrors.slice();
}

// Children still alive when the test process exits are killed, so a failed test never leaks
// a moqd holding a port.
const liveChildren = new Set();
process.on("exit", () => {
  for (const child of liveChildren) child.kill("SIGKILL");
});

// ---------------------------------------------------------------------------------------------
// Waiting

export async function withDeadline(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// Polls `cond` (sync or async) until it returns a truthy value, which is returned.
// `what` is a string or a function giving one (evaluated on timeout, so it can show state).
export async function waitFor(cond, ms, what, intervalMs = 10) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await cond();
    if (value) return value;
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${ms} ms waiting for ${typeof what === "function" ? what() : what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// A one-shot gate: `await g.wait` until somebody calls `g.open()`.
export function gate() {
  const { promise, resolve } = Promise.withResolvers();
  let isOpen = false;
  return {
    wait: promise,
    open() {
      isOpen = true;
      resolve();
    },
    get isOpen() {
      return isOpen;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Data helpers

const encoder = new TextEncoder();
export const text = (s) => encoder.encode(s);
export const bytes = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);

export function randomFrame(size) {
  return new Uint8Array(randomBytes(size));
}

let pathCounter = 0;
// A broadcast path no other test in this process uses: "interop/<tag>-<n>-<random>".
export function uniquePrefix(tag) {
  pathCounter += 1;
  return `interop/${tag}-${pathCounter}-${randomBytes(3).toString("hex")}`;
}

// ---------------------------------------------------------------------------------------------
// Processes

function collect(stream) {
  const chunks = [];
  stream.on("data", (c) => chunks.push(c));
  return () => Buffer.concat(chunks);
}

function watchExit(proc) {
  liveChildren.add(proc);
  return new Promise((resolve) => {
    proc.on("error", (err) => {
      liveChildren.delete(proc);
      resolve({ code: null, signal: null, error: err });
    });
    proc.on("exit", (code, signal) => {
      liveChildren.delete(proc);
      resolve({ code, signal });
    });
  });
}

async function stopProcess(proc, exited, what, ms) {
  if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
  try {
    return await withDeadline(exited, ms, `${what} to exit after SIGTERM`);
  } catch (err) {
    proc.kill("SIGKILL");
    await exited;
    throw err;
  }
}

const READY_RE = /^moqd ready url=(http:\/\/([^\s/]+):(\d+)\/)$/;

// Starts moqd on 127.0.0.1 port 0 with `workers` workers (default 2; plus `args`) and resolves once it printed
// its ready line. stop() sends SIGTERM and resolves with {code, signal}.
// `wrap` runs moqd through another command that execs it (e.g. ["prlimit", "--nofile=1024:4096"]).
export async function startMoqd(args = [], { readyMs = 10_000, bin = MOQD_BIN, wrap = [], workers = 2 } = {}) {
  const argv = ["--listen", "127.0.0.1:0", "--workers", String(workers), ...args];
  const proc = wrap.length
    ? spawn(wrap[0], [...wrap.slice(1), bin, ...argv], { stdio: ["ignore", "pipe", "pipe"] })
    : spawn(bin, argv, { stdio: ["ignore", "pipe", "pipe"] });
  const exited = watchExit(proc);
  const stderr = collect(proc.stderr);
  const stdoutLines = [];
  const lines = readline.createInterface({ input: proc.stdout });
  const firstLine = new Promise((resolve) => {
    lines.on("line", (line) => {
      stdoutLines.push(line);
      if (stdoutLines.length === 1) resolve(line);
    });
  });
  const describe = () => `${bin} ${argv.join(" ")}\nstderr:\n${stderr().toString()}`;

  let line;
  try {
    line = await withDeadline(
      Promise.race([
        firstLine,
        exited.then((r) => {
          throw new Error(`moqd exited before ready: ${JSON.stringify(r)}`);
        }),
      ]),
      readyMs,
      "the moqd ready line",
    );
  } catch (err) {
    proc.kill("SIGKILL");
    await exited;
    throw new Error(`${err.message}\n${describe()}`);
  }
  const m = READY_RE.exec(line);
  if (!m) {
    proc.kill("SIGKILL");
    await exited;
    throw new Error(`unexpected first stdout line from moqd: ${JSON.stringify(line)}\n${describe()}`);
  }

  return {
    url: m[1],
    host: m[2],
    port: Number(m[3]),
    proc,
    exited,
    stdoutText: () => stdoutLines.join("\n"),
    stderrText: () => stderr().toString(),
    describe,
    stop: ({ ms = 10_000 } = {}) => stopProcess(proc, exited, "moqd", ms),
  };
}

// For a file whose tests start their own moqd: `moqd(args, opts)` starts one (as startMoqd) and
// adds it to `started`, where a test may also push one it started otherwise. After the file,
// `closeClients()` runs, every one in `started` is stopped, and none of them may have written a
// sanitizer report to its stderr (ASan/UBSan, when MOQD_BIN is build-asan's).
export const SANITIZER_REPORT = /ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer/;
export function moqdsOfFile(closeClients = () => {}) {
  const started = [];
  after(async () => {
    closeClients();
    for (const m of started) await m.stop().catch(() => {});
    for (const m of started) assert.doesNotMatch(m.stderrText(), SANITIZER_REPORT);
  });
  const moqd = async (args = [], opts) => {
    const m = await startMoqd(args, opts);
    started.push(m);
    return m;
  };
  return { started, moqd };
}

// Stops moqd with SIGTERM and asserts a clean exit (code 0).
export async function stopMoqdClean(moqd, opts) {
  const result = await moqd.stop(opts);
  assert.deepEqual(result, { code: 0, signal: null }, `moqd did not exit cleanly\n${moqd.describe()}`);
}

// Spawns `moq ARGS` and returns a handle; stdin stays open until endStdin().
export function spawnMoq(args, { bin = MOQ_BIN, env } = {}) {
  const proc = spawn(bin, args, { stdio: ["pipe", "pipe", "pipe"], env: env ? { ...process.env, ...env } : process.env });
  const exited = watchExit(proc);
  const stdout = collect(proc.stdout);
  const stderr = collect(proc.stderr);
  proc.stdin.on("error", () => {}); // EPIPE when moq exits first; the exit status tells.
  const describe = () =>
    `${bin} ${args.join(" ")}\nstdout:\n${stdout().toString()}\nstderr:\n${stderr().toString()}`;
  return {
    proc,
    exited,
    stdout,
    stdoutText: () => stdout().toString(),
    stderrText: () => stderr().toString(),
    describe,
    write: (data) => proc.stdin.write(data),
    endStdin: () => proc.stdin.end(),
    waitStdout: (pred, ms, what) =>
      waitFor(
        () => {
          if (pred(stdout())) return true;
          if (proc.exitCode !== null || proc.signalCode !== null)
            throw new Error(`moq exited while waiting for ${what}\n${describe()}`);
          return false;
        },
        ms,
        () => `${what}\n${describe()}`,
      ),
    wait: async (ms, what = "moq to exit") => {
      try {
        return await withDeadline(exited, ms, what);
      } catch (err) {
        throw new Error(`${err.message}\n${describe()}`);
      }
    },
    stop: ({ ms = 5_000 } = {}) => stopProcess(proc, exited, "moq", ms),
  };
}

// Runs `moq ARGS` to completion, feeding `stdin`; resolves with {code, signal, stdout (Buffer), stderr}.
export async function runMoq(args, { stdin, timeoutMs = 15_000, bin, env } = {}) {
  const m = spawnMoq(args, { bin, env });
  if (stdin !== undefined) m.write(stdin);
  m.endStdin();
  let result;
  try {
    result = await m.wait(timeoutMs);
  } catch (err) {
    m.proc.kill("SIGKILL");
    await m.exited;
    throw err;
  }
  return { ...result, stdout: m.stdout(), stderr: m.stderrText() };
}

// ---------------------------------------------------------------------------------------------
// WebSocket framing control

// Records every WebSocket the client opens with the subprotocol the server selected.
export const negotiated = [];
const BaseWebSocket = globalThis.WebSocket;

// Makes new client WebSockets offer only `framing` ("qmux-00" or "webtransport") instead of
// "qmux-00, webtransport". Returns an uninstall function; connections already open keep theirs.
export function forceFraming(framing) {
  assert.ok(framing === "qmux-00" || framing === "webtransport", `unknown framing ${framing}`);
  class ForcedWebSocket extends BaseWebSocket {
    constructor(url, protocols, options) {
      const offered = [protocols ?? []].flat().filter((p) => p === framing);
      super(url, offered, options);
      this.addEventListener("open", () => negotiated.push({ url: String(url), offered, protocol: this.protocol }));
    }
  }
  globalThis.WebSocket = ForcedWebSocket;
  return () => {
    globalThis.WebSocket = BaseWebSocket;
  };
}

// ---------------------------------------------------------------------------------------------
// @moq/lite client

const liveConnections = new Set();

// Connects to `url` (the relay URL plus an optional session root path).
export async function connect(url, { ms = 10_000 } = {}) {
  const conn = await withDeadline(Moq.Connection.connect(new URL(url)), ms, `connect to ${url}`);
  liveConnections.add(conn);
  conn.closed.finally(() => liveConnections.delete(conn)).catch(() => {});
  return conn;
}

export function closeConnection(conn) {
  liveConnections.delete(conn);
  try {
    conn.close();
  } catch (err) {
    recordAsyncError("close", err);
  }
}

export function closeAllConnections() {
  for (const conn of [...liveConnections]) closeConnection(conn);
}

// Records every announcement under `prefix` seen on `conn`.
export function watchAnnounced(conn, prefix = "") {
  const announced = conn.announced(prefix);
  const entries = [];
  const state = { ended: false, error: undefined };
  (async () => {
    try {
      for (;;) {
        const entry = await announced.next();
        if (!entry) break;
        entries.push({ path: entry.path, active: entry.active });
      }
    } catch (err) {
      state.error = err;
    }
    state.ended = true;
  })();
  const isActive = (p) => {
    let active = false;
    for (const e of entries) if (e.path === p) active = e.active;
    return active;
  };
  return {
    entries,
    isActive,
    // Resolves once the latest announcement of `p` says `active`.
    waitFor: (p, active, ms = 10_000) =>
      waitFor(
        () => {
          if (entries.some((e) => e.path === p) && isActive(p) === active) return true;
          if (state.ended) throw new Error(`announced(${prefix}) ended (${state.error ?? "no error"}) before ${p} active=${active}`);
          return false;
        },
        ms,
        () => `announcement ${p} active=${active} (seen: ${JSON.stringify(entries)})`,
      ),
    close: () => announced.close(),
  };
}

function parentOf(p) {
  const i = p.lastIndexOf("/");
  return i < 0 ? "" : p.slice(0, i);
}

// Waits until `path` is announced active on `conn` (watching its parent prefix).
export async function waitActive(conn, p, { prefix = parentOf(p), ms = 10_000 } = {}) {
  const watcher = watchAnnounced(conn, prefix);
  try {
    await watcher.waitFor(p, true, ms);
  } finally {
    watcher.close();
  }
}

// Writes `groups` (arrays of Uint8Array frames) to `track`, one group per entry.
// before(i) is awaited before group i; holdOpen (boolean, or a function of i) keeps group i
// open until the next group starts (or until afterLast resolves, for the last one).
// Closes the track unless keepTrack.
export async function writeGroups(track, groups, { before, holdOpen = false, afterLast, keepTrack = false } = {}) {
  let open;
  for (let i = 0; i < groups.length; i++) {
    if (before) await before(i);
    open?.close();
    open = track.appendGroup();
    for (const frame of groups[i]) open.writeFrame(frame);
    if (!(typeof holdOpen === "function" ? holdOpen(i) : holdOpen)) {
      open.close();
      open = undefined;
    }
  }
  if (afterLast) await afterLast();
  open?.close();
  if (!keepTrack) track.close();
}

// Publishes a broadcast at `path` on `conn`. For every track the relay requests, writes
// `tracks[name]` with writeGroups(..., opts) and closes the track; an unknown track name is
// closed with an error. Resolves `requests` as they arrive.
export function publishBroadcast(conn, p, tracks, opts = {}) {
  const broadcast = new Moq.Broadcast();
  conn.publish(p, broadcast);
  const requests = [];
  const serving = [];
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      requests.push({ name: req.track.name, priority: req.priority, track: req.track });
      const groups = tracks[req.track.name];
      if (!groups) {
        req.track.close(new Error(`unknown track ${req.track.name}`));
        continue;
      }
      serving.push(writeGroups(req.track, groups, opts).catch((err) => recordAsyncError("writeGroups", err)));
    }
  })().catch((err) => recordAsyncError("requested", err));
  return {
    broadcast,
    requests,
    waitRequest: (name, ms = 10_000) =>
      waitFor(() => requests.find((r) => r.name === name), ms, `a subscription to track ${name} of ${p}`),
    close: () => broadcast.close(),
  };
}

// Subscribes to `trackName` of `path` and records frames per group as they arrive (groups are
// read concurrently, so a group held open does not block later ones). Uses recvGroup() +
// group.readFrame(), never track.readFrame(), which skips groups (README §7.5).
export function subscribeTrack(conn, p, trackName, { priority = 0 } = {}) {
  const broadcast = conn.consume(p);
  const track = broadcast.subscribe(trackName, priority);
  const groups = []; // [{group, frames: [Buffer], done, error}] in arrival order
  const state = { ended: false, error: undefined };
  const frameCount = () => groups.reduce((n, g) => n + g.frames.length, 0);
  const finished = (async () => {
    const readers = [];
    try {
      for (;;) {
        const group = await track.recvGroup();
        if (!group) break;
        const entry = { group: group.sequence, frames: [], done: false, error: undefined };
        groups.push(entry);
        readers.push(
          (async () => {
            for (;;) {
              const frame = await group.readFrame();
              if (!frame) break;
              entry.frames.push(Buffer.from(frame));
            }
            entry.done = true;
          })().catch((err) => {
            entry.error = err;
          }),
        );
      }
      await Promise.all(readers);
    } catch (err) {
      state.error = err;
    }
    state.ended = true;
  })();
  const what = (s) => `${s} on ${p}/${trackName} (have ${JSON.stringify(summary(groups))}, ended=${state.ended}, error=${state.error})`;
  return {
    track,
    broadcast,
    groups,
    state,
    frameCount,
    // Groups sorted by sequence: [{group, frames}].
    received: () => normalize(groups),
    waitFrames: (n, ms = 10_000) =>
      waitFor(
        () => {
          if (frameCount() >= n) return true;
          if (state.ended) throw new Error(what(`track ended before ${n} frames`));
          return false;
        },
        ms,
        () => what(`${n} frames`),
      ),
    waitUntil: (pred, ms = 10_000, desc = "a condition") =>
      waitFor(
        () => {
          if (pred(groups)) return true;
          if (state.ended) throw new Error(what(`track ended before ${desc}`));
          return false;
        },
        ms,
        () => what(desc),
      ),
    // Resolves when the track has ended (and all its groups were read); rejects on deadline.
    waitEnd: async (ms = 10_000) => {
      try {
        await withDeadline(finished, ms, "the end of the track");
      } catch (err) {
        throw new Error(what(err.message));
      }
    },
    close: () => track.close(),
  };
}

function summary(groups) {
  return groups.map((g) => ({ group: g.group, frames: g.frames.length, done: g.done }));
}

function normalize(groups) {
  return [...groups].sort((a, b) => a.group - b.group).map((g) => ({ group: g.group, frames: g.frames }));
}

// Waits for `path` to be announced, subscribes, and collects frames until `frames` frames
// arrived (or the track ends): [{group, frames: [Buffer]}] sorted by group.
export async function collectTrack(conn, p, trackName, { frames, priority = 0, ms = 10_000 } = {}) {
  await waitActive(conn, p, { ms });
  const sub = subscribeTrack(conn, p, trackName, { priority });
  if (frames === undefined) await sub.waitEnd(ms);
  else
    await waitFor(() => sub.frameCount() >= frames || sub.state.ended, ms, `${frames} frames on ${p}/${trackName}`);
  sub.close();
  return sub.received();
}

// The expected value of received() for `groups` written from sequence `first`.
export function expectedGroups(groups, first = 0) {
  return groups.map((frames, i) => ({ group: first + i, frames: frames.map((f) => bytes(f)) }));
}

// Asserts `received` (from received()) has exactly `groups` from sequence `first`, byte for
// byte; groups below `first` are ignored.
export function assertGroups(received, groups, first = 0, msg = "") {
  const got = received.filter((g) => g.group >= first);
  assert.deepStrictEqual(got, expectedGroups(groups, first), msg);
}

// ---------------------------------------------------------------------------------------------
// The moq CLI against the JS client (cli, framing, quic_cross, webtransport_cli; ietf_cli.mjs
// takes lengthPrefixed)

// What `moq sub` prints by default for `frames` (arrays of frames flattened): each frame, then "\n".
export const lines = (frames) => Buffer.concat(frames.flat().map((f) => Buffer.concat([bytes(f), Buffer.from("\n")])));

// Groups of lines for publishSynced and `moq sub` (line-per-frame output): group 0 the "sync"
// line, then text, an empty frame, 3000 random bytes with no "\n" in them, and a 20 KB line.
export const lineGroups = () => [
  [text("sync")],
  [text("hello"), text("world")],
  [new Uint8Array(0), text("after an empty frame")],
  [randomFrame(3000).map((b) => (b === 10 ? 11 : b))],
  [text("x".repeat(20_000))],
];

// Frames as `moq pub --length-prefixed` reads them and `moq sub --length-prefixed` prints them:
// each after its length (32 bits, big-endian).
export const lengthPrefixed = (frames) =>
  Buffer.concat(
    frames.map((f) => {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(f.length);
      return Buffer.concat([len, bytes(f)]);
    }),
  );

// Publishes `groups` on track "video" of `p` from `pubConn`, resolved once `observer` sees the
// broadcast: group 0 stays open until `attached` opens, so a subscriber (a late joiner) is attached
// before the rest is written, and the track ends once `end` opens.
export async function publishSynced(pubConn, observer, p, groups) {
  const attached = gate();
  const end = gate();
  publishBroadcast(pubConn, p, { video: groups }, {
    holdOpen: (i) => i === 0,
    before: (i) => (i === 1 ? attached.wait : undefined),
    afterLast: () => end.wait,
  });
  await waitActive(observer, p);
  return { attached, end };
}

// `sub` (a spawned `moq sub` on publishSynced's track) prints group 0's "sync" line, then, once
// `synced()` has run and `attached` opened, every line of `groups`; it exits 0 when `end` ends
// the track, having printed exactly those lines.
export async function cliSubReadsLines(sub, groups, { attached, end }, synced = async () => {}) {
  await sub.waitStdout((out) => out.toString() === "sync\n", 10_000, "the sync line");
  await synced();
  attached.open();
  const expected = lines(groups);
  await sub.waitStdout((out) => out.length >= expected.length, 10_000, "every line");
  end.open();
  const exit = await sub.wait(10_000, "moq sub to exit after the track ended");
  assert.deepEqual(exit, { code: 0, signal: null }, sub.describe());
  assert.deepStrictEqual(sub.stdout(), expected, sub.describe());
}

// Six frames (text, 1 byte, empty, 40 KB, 1200 bytes, text) written to `pub`, a spawned
// `moq pub --length-prefixed --group-every 2`, reach `sub` (a subscribeTrack on its track) as three
// groups of two, byte for byte; moq pub exits 0 at EOF on its stdin.
export async function cliPubFramesReachJs(pub, sub) {
  const frames = [text("f0"), randomFrame(1), new Uint8Array(0), randomFrame(40_000), randomFrame(1200), text("f5")];
  pub.write(lengthPrefixed(frames.slice(0, 1))); // group 0 stays open until the next frame: the subscriber attaches on it
  await sub.waitFrames(1, 10_000);
  pub.write(lengthPrefixed(frames.slice(1)));
  pub.endStdin();
  await sub.waitFrames(frames.length, 10_000);
  const expected = [];
  for (let i = 0; i < frames.length; i += 2) expected.push([frames[i], frames[i + 1]]);
  assertGroups(sub.received(), expected);
  const exit = await pub.wait(10_000, "moq pub to exit after stdin EOF");
  assert.deepEqual(exit, { code: 0, signal: null }, pub.describe());
}

// Fetches `url` with a deadline; resolves with the Response.
export function httpGet(url, { ms = 5_000, headers } = {}) {
  return withDeadline(fetch(url, { headers, signal: AbortSignal.timeout(ms) }), ms + 100, `GET ${url}`);
}

export const countFrames = (groups) => groups.reduce((n, g) => n + g.length, 0);

// Pacing for publishers that must spread groups over time. Not used to wait for anything.
export const pace = (ms) => new Promise((r) => setTimeout(r, ms));

// Declares one moqd for the calling test file: started before the first test; the last test
// of the file should be moqdStopsCleanly(ctx). Anything left running is killed after.
// For a file that starts its own moqd processes instead of useMoqd(): the same guards against
// @moq/qmux's teardown noise, installed once node:test's listeners are in place.
export function useTeardownGuards() {
  before(() => installGuards());
}

export function useMoqd(args = []) {
  const ctx = { moqd: undefined };
  before(async () => {
    installGuards();
    ctx.moqd = await startMoqd(args);
  });
  after(async () => {
    tearingDown = true;
    closeAllConnections();
    const proc = ctx.moqd?.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) await ctx.moqd.stop().catch(() => {});
  });
  return ctx;
}

// The final test of a file: clients gone, SIGTERM, exit status 0.
export function moqdStopsCleanly(ctx) {
  test("moqd exits 0 on SIGTERM", { timeout: TEST_TIMEOUT_MS }, async () => {
    tearingDown = true;
    closeAllConnections();
    await stopMoqdClean(ctx.moqd);
  });
}

// ---------------------------------------------------------------------------------------------
// Bystander (hostile and resource tests)

// The bytes of frame `n` of a bystander track: a label then a pattern derived from n.
export function bystanderFrame(n, size = 64) {
  const b = Buffer.alloc(size);
  b.write(`frame ${n} `);
  for (let i = Buffer.byteLength(`frame ${n} `); i < size; i++) b[i] = (n * 31 + i) & 0xff;
  return b;
}

// The largest wait, in ms, between two arrivals at a bystander's subscriber (`sub.frameCount()`),
// sampled every `everyMs` from now until stop(): how long an attack froze the bystander.
export function watchGaps(sub, everyMs = 5) {
  const gaps = { max: 0 };
  let count = sub.frameCount();
  let last = Date.now();
  const timer = setInterval(() => {
    const n = sub.frameCount();
    const now = Date.now();
    if (n !== count) {
      if (now - last > gaps.max) {
        gaps.max = now - last;
        gaps.at = new Date(now).toISOString();
      }
      count = n;
      last = now;
    }
  }, everyMs);
  gaps.stop = () => clearInterval(timer);
  return gaps;
}

// A JS publisher and a JS subscriber on their own connections that keep a live track flowing
// while a test attacks moqd: `track` gets a frame every `everyMs` (groups of `framesPerGroup`),
// frame n in group floor(n / framesPerGroup). check() waits until the subscriber has every frame
// published so far and asserts them byte for byte, from its first group on, with no gap, no
// group error, and both connections open. A second track `bulkTrack`, served only when
// requested, carries `bulkFrameSize`-byte frames as fast as `bulkEveryMs` allows (for tests that
// need a subscriber's socket to fill up).
export async function startBystander(url, {
  path: p = "bystander",
  track: trackName = "t",
  everyMs = 20,
  framesPerGroup = 10,
  frameSize = 64,
  bulkTrack = "bulk",
  bulkFrameSize = 128 * 1024,
  bulkEveryMs = 5,
} = {}) {
  const pubConn = await connect(url);
  const subConn = await connect(url);
  const closed = { pub: false, sub: false };
  pubConn.closed.then(() => (closed.pub = true), () => (closed.pub = true));
  subConn.closed.then(() => (closed.sub = true), () => (closed.sub = true));
  const broadcast = new Moq.Broadcast();
  pubConn.publish(p, broadcast);
  const state = { published: 0, requests: 0, timers: [], stopped: false };
  let served = false;
  (async () => {
    for (;;) {
      const req = await broadcast.requested();
      if (!req) break;
      state.requests++;
      if (req.track.name === bulkTrack) {
        serveBulk(req.track);
        continue;
      }
      if (req.track.name !== trackName || served) {
        // A second upstream request for the live track would restart its sequences.
        state.unexpected = `request #${state.requests} for ${req.track.name}`;
        req.track.close(new Error("unexpected request"));
        continue;
      }
      served = true;
      serveLive(req.track);
    }
  })().catch((err) => recordAsyncError("bystander requested", err));

  function serveLive(track) {
    let group;
    const timer = setInterval(() => {
      const n = state.published;
      if (n % framesPerGroup === 0) {
        group?.close();
        group = track.appendGroup();
      }
      group.writeFrame(bystanderFrame(n, frameSize));
      state.published = n + 1;
    }, everyMs);
    state.timers.push(timer);
  }

  function serveBulk(track) {
    let group;
    let n = 0;
    const frame = bystanderFrame(0, bulkFrameSize);
    const timer = setInterval(() => {
      try {
        if (n % 8 === 0) {
          group?.close();
          group = track.appendGroup();
        }
        group.writeFrame(frame);
        n++;
      } catch {
        clearInterval(timer); // the relay ended the subscription
      }
    }, bulkEveryMs);
    state.timers.push(timer);
  }

  await waitActive(subConn, p);
  const sub = subscribeTrack(subConn, p, trackName);
  await sub.waitFrames(1, 10_000);

  const describe = () =>
    `bystander published=${state.published} requests=${state.requests} unexpected=${state.unexpected} closed=${JSON.stringify(closed)} ` +
    `received=${JSON.stringify(summary(sub.groups))} ended=${sub.state.ended} error=${sub.state.error}`;

  // Frames of the first received group onwards, in order: [{n, bytes}] where n is the frame number.
  const flatten = () => {
    const groups = normalize(sub.groups);
    const out = [];
    for (const g of groups) g.frames.forEach((f, i) => out.push({ n: g.group * framesPerGroup + i, bytes: f }));
    return out;
  };

  return {
    state,
    sub,
    describe,
    // Asserts the bystander lost nothing up to now.
    async check(ms = 10_000) {
      const target = state.published;
      const first = Math.min(...sub.groups.map((g) => g.group)) * framesPerGroup;
      await waitFor(
        () => {
          if (sub.state.ended) throw new Error(`bystander subscription ended: ${describe()}`);
          return flatten().filter((f) => f.n < target).length >= target - first;
        },
        ms,
        () => `the bystander to receive frames ${first}..${target - 1}: ${describe()}`,
      );
      const frames = flatten().filter((f) => f.n < state.published);
      assert.equal(state.unexpected, undefined, describe());
      assert.ok(!closed.pub && !closed.sub, `a bystander connection closed: ${describe()}`);
      for (const g of sub.groups) assert.equal(g.error, undefined, `bystander group ${g.group} failed: ${describe()}`);
      frames.forEach((f, i) => {
        assert.equal(f.n, first + i, `bystander gap at frame ${first + i}: ${describe()}`);
        assert.ok(f.bytes.equals(bystanderFrame(f.n, frameSize)), `bystander frame ${f.n} differs`);
      });
      return frames.length;
    },
    stop() {
      state.stopped = true;
      for (const t of state.timers) clearInterval(t);
      closeConnection(subConn);
      closeConnection(pubConn);
    },
  };
}

// startBystander() on a worker thread of its own, for tests whose main thread is busy attacking
// moqd: a flood written from this thread delays this thread's timers and reads by hundreds of
// milliseconds on a loaded machine, and a bystander sharing the thread would report that delay as
// moqd's. The same checks, as promises: waitFrames(n, ms), watchGaps() then gaps() -> {max, at}
// (the longest time in ms between two frames arriving, and when it ended), check(ms), stop().
export async function startBystanderThread(url, options = {}) {
  const { Worker } = await import("node:worker_threads");
  const worker = new Worker(new URL("./bystander_thread.mjs", import.meta.url), { workerData: { url, options } });
  const pending = new Map();
  let nextId = 0;
  let failed = null;
  const ready = new Promise((resolve, reject) => {
    worker.on("message", (m) => {
      if (m.ready) return resolve();
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(new Error(`bystander thread: ${m.error}`));
    });
    worker.on("error", (err) => {
      failed = err;
      reject(err);
      for (const p of pending.values()) p.reject(err);
      pending.clear();
    });
  });
  await ready;
  const call = (op, ...args) => {
    if (failed) return Promise.reject(failed);
    return new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, op, args });
    });
  };
  return {
    waitFrames: (n, ms = 10_000) => call("waitFrames", n, ms),
    watchGaps: () => call("watchGaps"),
    gaps: () => call("gaps"),
    check: (ms = 10_000) => call("check", ms),
    async stop() {
      if (failed) return;
      await call("stop").catch(() => {});
      await worker.terminate();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// QUIC (moq CLI over QUIC)

// The hex SHA-256 moqd serves at /certificate.sha256 (trimmed), for --tls-fingerprint.
export async function certificateSha256(baseUrl) {
  const res = await httpGet(new URL("/certificate.sha256", baseUrl));
  assert.equal(res.status, 200, `GET /certificate.sha256 answered ${res.status}`);
  const hex = (await res.text()).trim();
  assert.match(hex, /^[0-9a-f]{64}$/i, "certificate.sha256 body");
  return hex;
}

// `http://HOST:PORT/...` as `https://HOST:PORT/...` (same port: moqd serves QUIC on the UDP side).
export const httpsUrl = (url) => String(url).replace(/^http:/, "https:");
