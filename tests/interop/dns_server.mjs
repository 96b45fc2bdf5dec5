// A tiny authoritative DNS server for tests (RFC 1035 over UDP, on 127.0.0.1, port 0): answers A
// and AAAA questions for the names in `zone` from address lists the test changes while it runs,
// with a fixed TTL; any other name gets NXDOMAIN. `silent = true` drops every query (a resolver
// that stopped answering). `queries` records what was asked, with when.
import dgram from "node:dgram";
import net from "node:net";

const TYPE_A = 1;
const TYPE_AAAA = 28;

// The question's name (lowercase, no trailing dot), type and the offset past the question.
function parseQuestion(msg) {
  if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return null;
  const labels = [];
  let off = 12;
  for (;;) {
    if (off >= msg.length) return null;
    const n = msg[off];
    if (n === 0) { off += 1; break; }
    if (n > 63 || off + 1 + n > msg.length) return null;
    labels.push(msg.subarray(off + 1, off + 1 + n).toString("latin1"));
    off += 1 + n;
  }
  if (off + 4 > msg.length) return null;
  return { name: labels.join(".").toLowerCase(), type: msg.readUInt16BE(off), end: off + 4 };
}

function addressBytes(addr, type) {
  if (type === TYPE_A) return Buffer.from(addr.split(".").map(Number));
  // AAAA: expand "::" and write 8 groups.
  const [head, tail = ""] = addr.split("::");
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = addr.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  const b = Buffer.alloc(16);
  groups.forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
  return b;
}

export async function startDnsServer({ ttl = 1 } = {}) {
  const sock = dgram.createSocket("udp4");
  const server = { zone: new Map(), ttl, silent: false, queries: [], port: 0 };
  sock.on("message", (msg, rinfo) => {
    const q = parseQuestion(msg);
    if (!q) return;
    server.queries.push({ name: q.name, type: q.type, at: Date.now() });
    if (server.silent) return;
    const addrs = server.zone.get(q.name);
    const want = q.type === TYPE_A ? 4 : q.type === TYPE_AAAA ? 6 : 0;
    const answers = addrs && want ? addrs.filter((a) => net.isIP(a) === want) : [];
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0);                 // id
    header.writeUInt16BE(0x8400 | (msg[2] & 0x01) << 8 | (addrs ? 0 : 3), 2);  // QR AA RD, rcode
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    const parts = [header, msg.subarray(12, q.end)];
    for (const a of answers) {
      const data = addressBytes(a, q.type);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0);  // the question's name
      rr.writeUInt16BE(q.type, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(server.ttl, 6);
      rr.writeUInt16BE(data.length, 10);
      parts.push(rr, data);
    }
    sock.send(Buffer.concat(parts), rinfo.port, rinfo.address);
  });
  await new Promise((resolve) => sock.bind(0, "127.0.0.1", resolve));
  server.port = sock.address().port;
  server.address = `127.0.0.1:${server.port}`;
  server.close = () => new Promise((resolve) => sock.close(resolve));
  return server;
}
