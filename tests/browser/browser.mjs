// Browser side of the harness: bundles page/page.mjs with esbuild into a temp dir, serves it
// from 127.0.0.1 port 0 (loaded as http://localhost:PORT/, another origin than moqd's
// http://127.0.0.1:PORT/, and a secure context, so WebTransport exists), and drives Debian's
// headless Chromium with playwright-core. The moqd and Node-client helpers come from
// ../interop/harness.mjs (needs `npm ci` in tests/interop as well).
import { mkdtemp, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { chromium } from "playwright-core";
import { TEST_TIMEOUT_MS, useMoqd, withDeadline } from "../interop/harness.mjs";

export * from "../interop/harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
export const CHROMIUM_BIN = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";

// docs CONVENTIONS: never --disable-quic. Playwright's launch() adds a fresh --user-data-dir.
const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const INDEX_HTML = `<!doctype html>
<meta charset="utf-8">
<title>moqd browser test</title>
<script type="module" src="/page.js"></script>
`;

// Bundles page/<entry> and serves it; resolves with {origin, close()}.
async function servePage(dir, entry) {
  await esbuild.build({
    entryPoints: [path.join(here, "page", entry)],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "chrome120",
    outfile: path.join(dir, "page.js"),
    logLevel: "warning",
  });
  const files = { "/favicon.ico": ["image/x-icon", ""], "/": ["text/html", INDEX_HTML], "/page.js": ["text/javascript", await readFile(path.join(dir, "page.js"))] };
  const server = http.createServer((req, res) => {
    const file = files[new URL(req.url, "http://x").pathname];
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": file[0], "cache-control": "no-store" }).end(file[1]);
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return {
    origin: `http://localhost:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

// Declares, for the calling test file, one moqd (via the interop harness), one page server and
// one Chromium. ctx.moqd, ctx.browser, ctx.origin, ctx.chromiumVersion are set in before().
// `page` names the file under page/ that is bundled as the page's script; `chromiumArgs` are
// added to CHROMIUM_FLAGS.
export function useBrowser(moqdArgs = [], { page = "page.mjs", chromiumArgs = [] } = {}) {
  const ctx = useMoqd(moqdArgs);
  let server;
  let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "moqd-browser-"));
    server = await servePage(dir, page);
    ctx.origin = server.origin;
    ctx.browser = await chromium.launch({
      executablePath: CHROMIUM_BIN,
      headless: true,
      args: [...CHROMIUM_FLAGS, ...chromiumArgs],
      timeout: 20_000,
    });
    ctx.chromiumVersion = ctx.browser.version();
    console.log(`chromium ${ctx.chromiumVersion} (${CHROMIUM_BIN}), page origin ${ctx.origin}, moqd ${ctx.moqd.url}`);
  });
  after(async () => {
    await ctx.browser?.close().catch(() => {});
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return ctx;
}

// Opens a fresh context and page on the test page and waits until the bundle ran. With
// `webtransport: false` the page has no WebTransport (deleted before any page script runs).
// The page's console is recorded in page.consoleLines.
export async function openPage(ctx, { webtransport = true } = {}) {
  const context = await ctx.browser.newContext();
  if (!webtransport) await context.addInitScript(() => delete globalThis.WebTransport);
  const page = await context.newPage();
  page.consoleLines = [];
  page.on("console", (m) => page.consoleLines.push(`[${m.type()}] ${m.text()}`));
  page.on("pageerror", (err) => page.consoleLines.push(`[pageerror] ${err.stack ?? err}`));
  page.on("requestfailed", (r) => page.consoleLines.push(`[requestfailed] ${r.url()} ${r.failure()?.errorText}`));
  await page.goto(`${ctx.origin}/`, { timeout: 10_000 });
  await page.waitForFunction(() => window.moqReady === true, null, { timeout: 10_000 });
  page.closeAll = () => context.close().catch(() => {});
  return page;
}

// Calls window[fn](...args) in the page, bounded by `ms`; a page-side error or the deadline
// rejects with `what` in the message.
export async function callPage(page, fn, args, ms, what) {
  const call = page.evaluate(([name, list]) => window[name](...list), [fn, args]);
  call.catch(() => {}); // after the deadline it rejects when the page closes: not an unhandled rejection
  try {
    return await withDeadline(call, ms, what);
  } catch (err) {
    throw new Error(`${what}: ${err.message}`);
  }
}

const ARTIFACTS = process.env.BROWSER_ARTIFACTS ?? path.join(os.tmpdir(), "moqd-browser-artifacts");

// test() whose failure saves the page's console and moqd's stderr under $BROWSER_ARTIFACTS
// (default $TMPDIR/moqd-browser-artifacts/<test>/) and names the folder in the error.
// fn(t, state): put the page in state.page (and a second one in state.page2) so that their
// consoles are saved. The test is bounded by `timeout` ms.
export function browserTest(ctx, name, fn, { timeout = TEST_TIMEOUT_MS } = {}) {
  test(name, { timeout }, async (t) => {
    const state = {};
    try {
      await fn(t, state);
    } catch (err) {
      const dir = path.join(ARTIFACTS, name.replace(/[^A-Za-z0-9_-]+/g, "_"));
      await mkdir(dir, { recursive: true });
      await writeFile(path.join(dir, "page-console.log"), (state.page?.consoleLines ?? []).join("\n") + "\n");
      if (state.page2) await writeFile(path.join(dir, "page2-console.log"), state.page2.consoleLines.join("\n") + "\n");
      await writeFile(path.join(dir, "moqd-stderr.log"), ctx.moqd?.stderrText() ?? "");
      const tail = (ctx.moqd?.stderrText() ?? "").split("\n").slice(-15).join("\n");
      err.message += `\n(page console and moqd stderr saved in ${dir})\nmoqd stderr tail:\n${tail}`;
      throw err;
    } finally {
      await state.page?.closeAll();
      await state.page2?.closeAll();
    }
  });
}

// The transports moqd logged for sessions whose root is `root`:
//   "session 3 start peer=... transport=webtransport version=moq-lite-04 path=/root"
export function loggedTransports(moqd, root) {
  const re = new RegExp(`session \\d+ start peer=\\S+ transport=(\\S+) version=(\\S+) path=/${root}$`, "gm");
  return [...moqd.stderrText().matchAll(re)].map((m) => ({ transport: m[1], version: m[2] }));
}

export const b64 = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString("base64");
