// Node 20 gaps that @moq/lite 0.2.2 relies on (protocol README §7.1). Import this module before
// @moq/lite: ESM evaluates imports in order, so harness.mjs lists it first.
import { WebSocket } from "ws";

if (!Promise.withResolvers) {
  Promise.withResolvers = () => {
    let resolve, reject;
    const promise = new Promise((a, b) => { resolve = a; reject = b; });
    return { promise, resolve, reject };
  };
}

// Without it the relay's Announce stream is reset when the published set changes.
if (!Set.prototype.difference) {
  Object.defineProperty(Set.prototype, "difference", {
    configurable: true,
    writable: true,
    value(other) {
      const out = new Set();
      for (const v of this) if (!other.has(v)) out.add(v);
      return out;
    },
  });
}

globalThis.WebSocket ??= WebSocket;
