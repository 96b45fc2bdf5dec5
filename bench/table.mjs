// Turns bench/relay_bench.sh's output (a case name and a JSON object a line) into the Markdown
// tables of docs/BENCHMARKS.md:  bench/relay_bench.sh build | tee out; node bench/table.mjs < out
import { readFileSync } from "node:fs";

const f = (v, d = 2) => (typeof v === "number" ? v.toFixed(d) : "-");
const rows = readFileSync(0, "utf8").split("\n").filter((l) => l && !l.startsWith("#"))
  .map((l) => { const i = l.indexOf(" "); return [l.slice(0, i), JSON.parse(l.slice(i + 1))]; });

const fanoutRow = (name, j) =>
  `| ${name} | ${j.viewers} | ${j.transport} | ${f(j.throughput_gbps, 3)} | ${j.frames_lost} (${f(j.delivered_ratio, 4)}) | ` +
  `${f(j.latency_ms?.p50, 1)} / ${f(j.latency_ms?.p99, 1)} / ${f(j.latency_ms?.p999, 1)} | ${f(j.bystander_latency_ms?.p50)} / ${f(j.bystander_latency_ms?.p99, 1)} | ` +
  `${f(j.relay_cpu_s / j.window_s * 100, 0)}% | ${f(j.relay_ns_per_byte)} | ${f(j.limit_ns_per_byte)} | ${f(j.relay_vs_limit)} | ` +
  `${f(j.relay_rss_per_viewer_kb, 0)} | ${f(j.relay_datagrams_per_send, 1)} / ${f(j.relay_gso_segments_per_message, 1)} | ${f(j.relay_syscalls_per_packet, 3)} | ` +
  `${f(j.generator_cpu_share * 100, 0)}% | ${j.generator_drops} | ${j.valid ? "yes" : "no: " + j.invalid_reason} |`;

console.log("| case | viewers | transport | Gbit/s | lost (delivered) | latency p50 / p99 / p99.9 ms | bystander p50 / p99 ms | relay core | relay ns/B | limit ns/B | relay/limit | KB/viewer | dgrams per send / GSO run | syscalls/pkt | generator core | gen drops | valid |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const [name, j] of rows) {
  if (name.startsWith("fanout") && !j.find_max && j.viewers) console.log(fanoutRow(name, j));
  if (j.find_max) {
    for (const t of j.trials) console.log(fanoutRow(`${name} trial`, t));
  }
}
for (const [name, j] of rows) {
  if (j.find_max) {
    console.log(`\n${name}: largest viewer count that held (p99 <= ${j.max_p99_ms} ms, nothing lost, valid): ` +
      `${j.max_viewers_held}; ran out first: ${j.limited_by}`);
  }
  if (name === "limits") {
    console.log(`\nlimits: seal ${f(j.crypto.seal_ns_per_byte, 3)} ns/B (${f(j.crypto.seal_ns_per_packet, 0)} ns per ${j.packet_size}-byte packet), ` +
      `open ${f(j.crypto.open_ns_per_byte, 3)} ns/B`);
    console.log("| UDP mode | batch | ns/B (whole process) | sender ns/B | receiver kept up |\n|---|---|---|---|---|");
    for (const u of j.udp) console.log(`| ${u.mode} | ${u.batch} | ${f(u.ns_per_byte, 3)} | ${f(u.sender_ns_per_byte, 3)} | ${u.receiver_kept_up ? "yes" : "no"} |`);
  }
  if (name === "msgs") {
    console.log("\n| msgs | delivered | msgs/s | relay ns/msg | packets/msg | syscalls/pkt | p50 / p99 ms | generator core | valid |\n|---|---|---|---|---|---|---|---|---|");
    for (const m of j.msgs) {
      console.log(`| ${m.publishers} -> ${m.subscribers} | ${m.messages_delivered} of ${m.messages_sent * m.subscribers} | ${f(m.messages_per_second, 0)} | ${f(m.relay_ns_per_message, 0)} | ` +
        `${f(m.relay_packets_per_message, 3)} | ${f(m.relay_syscalls_per_packet, 3)} | ${f(m.latency_ms.p50)} / ${f(m.latency_ms.p99)} | ${f(m.generator_cpu_share * 100, 0)}% | ${m.valid ? "yes" : "no: " + m.invalid_reason} |`);
    }
  }
}
