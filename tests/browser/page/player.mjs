// The moq-dev project's own components in Chromium: `<moq-publish>` (@moq/publish 0.2.17, with
// Chromium's fake camera and microphone) and `<moq-watch>` (@moq/watch 0.4.6, WebCodecs, paints
// a <canvas>). esbuild bundles this file at test time; the test opens it in two browser contexts,
// one publishing, one watching, and calls the window.* functions below with page.evaluate.
// First, so that its wrappers are in place before the packages load.
import { webtransports, websockets } from "./record.mjs";
import "@moq/publish/element";
import "@moq/watch/element";

const transports = () => ({
  webtransports,
  websockets: websockets.map(({ api, url, protocol, state, close }) => ({ api, url, protocol, state, close })),
  offered: websockets[0]?.offered ?? [],
});

let element;

// Noting the connection of `el` (a Moq.Connection.Reload): its status and the version of the
// established session.
function connectionInfo(el) {
  const established = el.connection.established.peek();
  return { status: el.connection.status.peek(), version: established?.version };
}

// <moq-publish url name source="camera"> with a <video> preview. `websocket: false` disables the
// WebSocket fallback (set before `url`, so that it applies to the first attempt).
window.startPublish = (url, name, { websocket = true } = {}) => {
  const el = document.createElement("moq-publish");
  if (!websocket) el.connection.websocket = { enabled: false };
  const video = document.createElement("video");
  video.muted = true;
  video.autoplay = true;
  el.appendChild(video);
  el.setAttribute("name", name);
  el.setAttribute("source", "camera");
  el.setAttribute("url", url);
  document.body.appendChild(el);
  element = el;
};

// <moq-watch url name visible="always" muted> painting into a <canvas>.
window.startWatch = (url, name, { websocket = true } = {}) => {
  const el = document.createElement("moq-watch");
  if (!websocket) el.connection.websocket = { enabled: false };
  const canvas = document.createElement("canvas");
  el.appendChild(canvas);
  el.setAttribute("name", name);
  el.setAttribute("visible", "always");
  el.setAttribute("muted", "");
  el.setAttribute("url", url);
  document.body.appendChild(el);
  element = el;
};

window.publishState = () => {
  const el = element;
  return {
    ...connectionInfo(el),
    video: el.video.peek() !== undefined,
    audio: el.audio.peek() !== undefined,
    ...transports(),
  };
};

// A checksum of the canvas's pixels, or undefined while it is empty.
function canvasSample(canvas) {
  if (!canvas.width || !canvas.height) return undefined;
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let h = 0x811c9dc5;
  for (let i = 0; i < data.length; i += 4) {
    h ^= data[i] | (data[i + 1] << 8) | (data[i + 2] << 16);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return `${canvas.width}x${canvas.height}:${h.toString(16)}`;
}

window.watchState = () => {
  const el = element;
  const catalog = el.catalog;
  return {
    ...connectionInfo(el),
    catalog: catalog === undefined ? undefined : JSON.parse(JSON.stringify(catalog)),
    frames: el.video.out.stats.peek()?.frameCount ?? 0,
    canvas: canvasSample(el.querySelector("canvas")),
    ...transports(),
  };
};

// Two canvas samples `ms` apart (the test's "does the picture move" check, not a wait).
window.sampleCanvasTwice = async (ms) => {
  const canvas = element.querySelector("canvas");
  const first = canvasSample(canvas);
  await new Promise((resolve) => setTimeout(resolve, ms));
  return [first, canvasSample(canvas)];
};

window.moqReady = true;
