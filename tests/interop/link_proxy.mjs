// A userspace relay for one cluster link, for tests on hosts whose kernel has no netem: it
// listens on listenHost at one port for both TCP and UDP (a moqd URL's port serves both) and
// forwards to targetHost:targetPort. UDP datagrams (QUIC) are delayed by `delayMs` each way and
// dropped with probability `loss` each way, from a seeded generator so a run can be repeated; TCP
// (the link's fetch of /certificate.sha256) is passed through unchanged. One upstream UDP socket
// per client address, as a NAT would keep. Counts what it forwarded and dropped.
import dgram from "node:dgram";
import net from "node:net";

// Park-Miller: small, seeded, good enough to pick which datagrams are lost.
function rng(seed) {
  let s = (seed % 2147483646) + 1;
  return () => (s = (s * 48271) % 2147483647) / 2147483647;
}

export async function startLinkProxy({ listenHost, targetHost, targetPort, delayMs = 0, loss = 0,
  seed = 1 }) {
  const random = rng(seed);
  const stats = { forwarded: 0, dropped: 0 };
  const sockets = new Set();
  const upstreams = new Map();  // "addr:port" of a client -> its upstream socket
  let closed = false;

  const tcp = net.createServer((client) => {
    const up = net.connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(up);
    const end = () => { client.destroy(); up.destroy(); sockets.delete(client); sockets.delete(up); };
    client.on("error", end).on("close", end);
    up.on("error", end).on("close", end);
    client.pipe(up);
    up.pipe(client);
  });
  await new Promise((resolve, reject) => {
    tcp.once("error", reject);
    tcp.listen(0, listenHost, resolve);
  });
  const port = tcp.address().port;
  const udp = dgram.createSocket("udp4");
  await new Promise((resolve, reject) => {
    udp.once("error", reject);
    udp.bind(port, listenHost, resolve);
  });

  // Delivers `send` after the delay unless the datagram is lost; equal delays keep the order.
  const pass = (send) => {
    if (loss > 0 && random() < loss) {
      stats.dropped++;
      return;
    }
    stats.forwarded++;
    if (delayMs > 0) setTimeout(send, delayMs);
    else send();
  };
  udp.on("message", (msg, from) => {
    const key = `${from.address}:${from.port}`;
    let up = upstreams.get(key);
    if (!up) {
      up = dgram.createSocket("udp4");
      up.on("message", (back) => pass(() => { if (!closed) udp.send(back, from.port, from.address); }));
      up.on("error", () => {});
      up.bind(0);
      upstreams.set(key, up);
    }
    pass(() => { if (!closed) up.send(msg, targetPort, targetHost); });
  });
  udp.on("error", () => {});

  return {
    host: listenHost,
    port,
    url: `http://${listenHost}:${port}/`,
    stats,
    close: async () => {
      closed = true;
      for (const s of sockets) s.destroy();
      for (const u of upstreams.values()) u.close();
      udp.close();
      await new Promise((resolve) => tcp.close(resolve));
    },
  };
}
