// How WebTransport sessions end between Chromium and moqd: the page's close code and reason reach
// moqd's MoQ session (CLOSE_WEBTRANSPORT_SESSION), and moqd's drain on SIGTERM reaches the page
// as a clean close with moq-lite's going-away code (27).
import assert from "node:assert/strict";
import { browserTest, callPage, httpsUrl, openPage, uniquePrefix, useBrowser, waitFor } from "./browser.mjs";

const ctx = useBrowser();

// The end line of the session whose start line named `root`.
function loggedEnd(root) {
  const log = ctx.moqd.stderrText();
  const start = new RegExp(`session (\\d+) start peer=\\S+ transport=webtransport version=\\S+ path=/${root}$`, "m").exec(log);
  if (!start) return null;
  const end = new RegExp(`session ${start[1]} end peer=\\S+ version=\\S+ code=(\\d+) reason=(.*)$`, "m").exec(log);
  return end && { code: Number(end[1]), reason: end[2] };
}

browserTest(ctx, "the page's close code and reason end moqd's session", async (t, state) => {
  const root = uniquePrefix("wt-close");
  state.page = await openPage(ctx);
  const protocol = await callPage(state.page, "openSession", [`${httpsUrl(ctx.moqd.url)}${root}`], 12_000,
    "a WebTransport session from the page");
  assert.equal(protocol, "moq-lite-04");
  const health = async () => (await fetch(`${ctx.moqd.url}health`)).json();
  await waitFor(async () => (await health()).sessions_by_transport.webtransport === 1, 5_000,
    "/health to count the page's WebTransport session");
  await callPage(state.page, "closeSession", [42, "bye from the page"], 5_000, "close()");
  const end = await waitFor(() => loggedEnd(root), 5_000, "moqd to log the session's end");
  assert.deepEqual(end, { code: 42, reason: "bye from the page" });
  await waitFor(async () => (await health()).sessions_by_transport.webtransport === 0, 5_000,
    "/health to drop the page's session");
});

browserTest(ctx, "SIGTERM closes the page's session with going away, and moqd exits 0", async (t, state) => {
  const root = uniquePrefix("wt-drain");
  state.page = await openPage(ctx);
  await callPage(state.page, "openSession", [`${httpsUrl(ctx.moqd.url)}${root}`], 12_000,
    "a WebTransport session from the page");
  await waitFor(() => /transport=webtransport/.test(ctx.moqd.stderrText()), 5_000, "moqd to start the session");
  const stopped = ctx.moqd.stop({ ms: 15_000 });
  const closed = await callPage(state.page, "sessionClosed", [10_000], 12_000, "the session to be closed by moqd");
  assert.equal(closed.closeCode, 27, `the page saw ${JSON.stringify(closed)}`);
  assert.deepEqual(await stopped, { code: 0, signal: null });
});
