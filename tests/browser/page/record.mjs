// Records every WebTransport, WebSocketStream and WebSocket the page opens, with how it went, so
// that a test can tell which transport and which WebSocket subprotocol the moq-dev components
// used (they do not expose it). Imported first by player.mjs: ES modules run in import order, so
// the wrappers are installed before @moq/* load. @moq/qmux uses WebSocketStream where Chromium
// has it, a WebSocket ponyfill otherwise.
export { webtransports } from "./record_webtransport.mjs";
export const websockets = [];

if (globalThis.WebSocketStream) {
  const Native = globalThis.WebSocketStream;
  globalThis.WebSocketStream = class RecordingWebSocketStream extends Native {
    constructor(url, options) {
      super(url, options);
      const entry = { api: "WebSocketStream", url: String(url), offered: options?.protocols ?? [], state: "connecting" };
      websockets.push(entry);
      this.opened.then(
        (o) => {
          entry.state = "open";
          entry.protocol = o.protocol;
        },
        (err) => (entry.state = `failed: ${err?.message ?? err}`),
      );
      this.closed.then(
        (c) => {
          entry.state = "closed";
          entry.close = { code: c.closeCode, reason: c.reason };
        },
        (err) => (entry.state = `closed: ${err?.message ?? err}`),
      );
    }
  };
}

if (globalThis.WebSocket) {
  const Native = globalThis.WebSocket;
  globalThis.WebSocket = class RecordingWebSocket extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      const entry = { api: "WebSocket", url: String(url), offered: protocols ?? [], state: "connecting" };
      websockets.push(entry);
      this.addEventListener("open", () => {
        entry.state = "open";
        entry.protocol = this.protocol;
      });
      this.addEventListener("close", (ev) => {
        entry.state = "closed";
        entry.close = { code: ev.code, reason: ev.reason };
      });
    }
  };
}
