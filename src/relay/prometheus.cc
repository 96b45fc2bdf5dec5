// GET /metrics: the workers' counters in the Prometheus text exposition format (version 0.0.4),
// summed over workers at scrape time (each counter has one writer, its worker; see metrics.h).
#include <cstdio>

#include "relay/quic_endpoint.h"
#include "relay/relay.h"
#include "relay/worker.h"

namespace moqd::relay {
namespace {

class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += " ";
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += " ";
    out_ += type;
    out_ += "\n";
  }
  void sample(const std::string& name, const std::string& labels, uint64_t v) {
    out_ += name;
    if (!labels.empty()) {
      out_ += "{" + labels + "}";
    }
    out_ += " " + std::to_string(v) + "\n";
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.6f", v);
    out_ += name;
    if (!labels.empty()) {
      out_ += "{" + labels + "}";
    }
    out_ += std::string(" ") + buf + "\n";
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string label(const char* k, const std::string& v) { return std::string(k) + "=\"" + v + "\""; }

const char* action_name(size_t a) {
  static constexpr const char* kNames[] = {"connect", "publish", "subscribe"};
  return kNames[a];
}

}  // namespace

size_t metric_version_index(wire::Version v) {
  for (size_t i = 0; i < kMetricVersionCount; ++i) {
    if (kMetricVersions[i] == v) {
      return i;
    }
  }
  return 0;
}

std::string Relay::metrics_text() const {
  Exposition e;
  const auto& ws = relay_workers_;
  auto sum = [&ws](auto get) {
    uint64_t n = 0;
    for (const auto& w : ws) {
      n += get(*w);
    }
    return n;
  };

  e.family("moqd_info", "gauge", "moqd's version (value 1).");
  e.sample("moqd_info", label("version", MOQD_VERSION_STRING), uint64_t{1});
  e.family("moqd_workers", "gauge", "Worker event loops.");
  e.sample("moqd_workers", "", static_cast<uint64_t>(ws.size()));

  e.family("moqd_sessions", "gauge", "MoQ sessions open, by transport and protocol version.");
  for (size_t t = 0; t < kTransportClasses; ++t) {
    for (size_t v = 0; v < kMetricVersionCount; ++v) {
      uint64_t started = sum([&](const RelayWorker& w) { return w.metrics().sessions_started[t][v].get(); });
      uint64_t ended = sum([&](const RelayWorker& w) { return w.metrics().sessions_ended[t][v].get(); });
      if (started == 0) {
        continue;
      }
      e.sample("moqd_sessions",
               label("transport", transport_class_name(static_cast<TransportClass>(t))) + "," +
                   label("version", wire::version_name(kMetricVersions[v])),
               started - ended);
    }
  }
  e.family("moqd_sessions_started_total", "counter",
           "MoQ sessions that completed setup, by transport and protocol version.");
  for (size_t t = 0; t < kTransportClasses; ++t) {
    for (size_t v = 0; v < kMetricVersionCount; ++v) {
      uint64_t started = sum([&](const RelayWorker& w) { return w.metrics().sessions_started[t][v].get(); });
      if (started == 0) {
        continue;
      }
      e.sample("moqd_sessions_started_total",
               label("transport", transport_class_name(static_cast<TransportClass>(t))) + "," +
                   label("version", wire::version_name(kMetricVersions[v])),
               started);
    }
  }
  e.family("moqd_sessions_closed_total", "counter",
           "MoQ sessions closed, by the moq-lite error code they closed with.");
  for (size_t c = 0; c <= kMaxCodeLabel + 1; ++c) {
    uint64_t n = sum([&](const RelayWorker& w) { return w.metrics().sessions_closed_by_code[c].get(); });
    if (n == 0) {
      continue;
    }
    std::string code = c <= kMaxCodeLabel ? std::to_string(c) : "other";
    std::string name = c <= kMaxCodeLabel ? error_code_name(static_cast<ErrorCode>(c)) : "other";
    e.sample("moqd_sessions_closed_total", label("code", code) + "," + label("name", name), n);
  }
  e.family("moqd_sessions_expired_total", "counter",
           "Sessions closed because their token or grant expired.");
  e.sample("moqd_sessions_expired_total", "", sum([](const RelayWorker& w) { return w.metrics().sessions_expired.get(); }));
  e.family("moqd_goaways_sent_total", "counter", "GOAWAY messages sent while draining.");
  e.sample("moqd_goaways_sent_total", "", sum([](const RelayWorker& w) { return w.metrics().goaways_sent.get(); }));

  e.family("moqd_auth_refusals_total", "counter",
           "Refused connects, publishes and subscribes, by action and reason.");
  for (size_t a = 0; a < kAuthActions; ++a) {
    for (size_t r = 0; r < kAuthRefusals; ++r) {
      uint64_t n = sum([&](const RelayWorker& w) { return w.metrics().auth_refusals[a][r].get(); });
      if (n == 0) {
        continue;
      }
      e.sample("moqd_auth_refusals_total",
               label("action", action_name(a)) + "," +
                   label("reason", auth::refusal_name(static_cast<auth::Refusal>(r))),
               n);
    }
  }

  auto traffic = [&](const char* name, const char* type, const char* help, auto get) {
    e.family(name, type, help);
    e.sample(name, "", sum([&](const RelayWorker& w) { return get(w.traffic()); }));
  };
  using T = session::TrafficCounters;
  e.family("moqd_subscriptions_open", "gauge", "Subscriptions being served to viewers.");
  e.sample("moqd_subscriptions_open", "",
           sum([](const RelayWorker& w) { return w.traffic().subscriptions_opened.get(); }) -
               sum([](const RelayWorker& w) { return w.traffic().subscriptions_closed.get(); }));
  traffic("moqd_subscriptions_total", "counter", "Subscriptions accepted.",
          [](const T& t) { return t.subscriptions_opened.get(); });
  e.family("moqd_announces_active", "gauge", "Broadcasts announced by connected publishers.");
  e.sample("moqd_announces_active", "",
           sum([](const RelayWorker& w) { return w.traffic().announces_opened.get(); }) -
               sum([](const RelayWorker& w) { return w.traffic().announces_closed.get(); }));
  traffic("moqd_announces_total", "counter", "Broadcast announcements accepted from publishers.",
          [](const T& t) { return t.announces_opened.get(); });
  traffic("moqd_announces_looped_total", "counter",
          "Announcements from cluster peers dropped because they had already crossed this relay.",
          [](const T& t) { return t.announces_looped.get(); });
  e.family("moqd_announce_updates_total", "counter",
           "Hop-list updates: announcements re-sent to cluster peers (sent) or applied from them "
           "(received) because a route's hop list changed (a warm copy came or went, or another "
           "route).");
  e.sample("moqd_announce_updates_total", label("direction", "sent"),
           sum([](const RelayWorker& w) { return w.traffic().announce_updates_sent.get(); }));
  e.sample("moqd_announce_updates_total", label("direction", "received"),
           sum([](const RelayWorker& w) { return w.traffic().announce_updates_received.get(); }));
  e.family("moqd_ietf_datagram_objects_total", "counter",
           "IETF objects that came as OBJECT_DATAGRAMs, by how they reached IETF subscribers: as a "
           "datagram, or on a SUBGROUP stream (no datagrams on the transport, too big, refused).");
  e.sample("moqd_ietf_datagram_objects_total", label("sent_as", "datagram"),
           sum([](const RelayWorker& w) { return w.traffic().datagrams_forwarded.get(); }));
  e.sample("moqd_ietf_datagram_objects_total", label("sent_as", "stream"),
           sum([](const RelayWorker& w) { return w.traffic().datagram_stream_fallbacks.get(); }));
  traffic("moqd_frames_received_total", "counter", "Frames received from publishers.",
          [](const T& t) { return t.frames_in.get(); });
  traffic("moqd_payload_bytes_received_total", "counter", "Frame payload bytes received from publishers.",
          [](const T& t) { return t.bytes_in.get(); });
  traffic("moqd_frames_sent_total", "counter",
          "Frames handed to viewers' transports (one per frame per viewer).",
          [](const T& t) { return t.frames_out.get(); });
  traffic("moqd_payload_bytes_sent_total", "counter", "Frame payload bytes handed to viewers' transports.",
          [](const T& t) { return t.bytes_out.get(); });

  e.family("moqd_groups_skipped_total", "counter",
           "Groups dropped by skip-ahead: by slow viewers, and by feeds to slow workers.");
  e.sample("moqd_groups_skipped_total", label("by", "viewer"),
           sum([](const RelayWorker& w) { return w.viewer_skips().groups.get(); }));
  e.sample("moqd_groups_skipped_total", label("by", "worker"),
           sum([](const RelayWorker& w) { return w.bridge_skips().groups.get(); }));

  e.family("moqd_delivery_latency_seconds", "histogram",
           "Inside the relay: a frame's last byte entering the track cache to that byte handed to "
           "a viewer's transport (the worker loop's clock; per delivery).");
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kLatencyBuckets; ++b) {
    cumulative += sum([&](const RelayWorker& w) { return w.traffic().delivery_latency.bucket(b); });
    char le[32];
    if (b < std::size(kLatencyBoundsUs)) {
      snprintf(le, sizeof le, "%g", static_cast<double>(kLatencyBoundsUs[b]) / 1e6);
    } else {
      snprintf(le, sizeof le, "+Inf");
    }
    e.sample("moqd_delivery_latency_seconds_bucket", label("le", le), cumulative);
  }
  e.sample("moqd_delivery_latency_seconds_sum", "",
           static_cast<double>(sum([](const RelayWorker& w) { return w.traffic().delivery_latency.sum_us(); })) / 1e6);
  e.sample("moqd_delivery_latency_seconds_count", "", cumulative);

  e.family("moqd_quic_handshakes_started_total", "counter", "QUIC connections accepted from Initials.");
  e.sample("moqd_quic_handshakes_started_total", "", sum([](const RelayWorker& w) { return w.metrics().quic_handshakes_started.get(); }));
  e.family("moqd_quic_handshakes_completed_total", "counter", "QUIC handshakes completed.");
  e.sample("moqd_quic_handshakes_completed_total", "", sum([](const RelayWorker& w) { return w.metrics().quic_handshakes_completed.get(); }));
  e.family("moqd_quic_retries_total", "counter", "Retry packets sent above --max-handshakes-per-second.");
  e.sample("moqd_quic_retries_total", "", sum([](const RelayWorker& w) { return w.metrics().quic_retries.get(); }));
  e.family("moqd_quic_invalid_tokens_total", "counter", "Initials with an invalid Retry token.");
  e.sample("moqd_quic_invalid_tokens_total", "", sum([](const RelayWorker& w) { return w.metrics().quic_invalid_tokens.get(); }));
  e.family("moqd_connections_refused_total", "counter",
           "Connections refused by --max-connections or --max-connections-per-address.");
  e.sample("moqd_connections_refused_total", "", sum([](const RelayWorker& w) { return w.metrics().connections_refused.get(); }));
  e.family("moqd_quic_missteered_datagrams_total", "counter",
           "QUIC datagrams that reached a worker other than their connection's and were forwarded.");
  e.sample("moqd_quic_missteered_datagrams_total", "", sum([](const RelayWorker& w) { return w.quic_forwarded(); }));
  e.family("moqd_udp_datagrams_received_total", "counter", "UDP datagrams received.");
  e.sample("moqd_udp_datagrams_received_total", "", sum([](const RelayWorker& w) { return w.udp_stats().datagrams_in; }));
  e.family("moqd_udp_datagrams_sent_total", "counter", "UDP datagrams sent.");
  e.sample("moqd_udp_datagrams_sent_total", "", sum([](const RelayWorker& w) { return w.udp_stats().datagrams_out; }));

  e.family("moqd_worker_busy_seconds_total", "counter",
           "Time each worker's event loop spent working rather than waiting for events.");
  for (const auto& w : ws) {
    e.sample("moqd_worker_busy_seconds_total", label("worker", std::to_string(w->index())),
             static_cast<double>(w->loop_busy_us()) / 1e6);
  }
  e.family("moqd_worker_sessions", "gauge", "Sessions per worker.");
  for (const auto& w : ws) {
    e.sample("moqd_worker_sessions", label("worker", std::to_string(w->index())),
             static_cast<uint64_t>(std::max<int64_t>(0, w->sessions.load(std::memory_order_relaxed))));
  }
  e.family("moqd_connections", "gauge", "TCP and QUIC connections open.");
  e.sample("moqd_connections", "",
           static_cast<uint64_t>(std::max<int64_t>(0, sum([](const RelayWorker& w) {
             return static_cast<uint64_t>(w.connections.load(std::memory_order_relaxed));
           }))));
  return e.take();
}

}  // namespace moqd::relay
