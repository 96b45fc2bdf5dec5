// Records every WebTransport the page opens, with how its `ready` ended and the protocol it
// agreed, so that a test can tell which transport a client library used (none exposes it). Import
// it before the library: ES modules run in import order, so the wrapper is in place first.
export const webtransports = [];

if (globalThis.WebTransport) {
  const Native = globalThis.WebTransport;
  globalThis.WebTransport = class RecordingWebTransport extends Native {
    constructor(url, options) {
      super(url, options);
      const entry = { url: String(url), protocols: options?.protocols ?? [], ready: "pending" };
      webtransports.push(entry);
      this.ready.then(
        () => {
          entry.ready = "ok";
          entry.protocol = this.protocol;
        },
        (err) => (entry.ready = `failed: ${err?.message ?? err}`),
      );
    }
  };
}
