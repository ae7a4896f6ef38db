// Text and JSON renderings of a scenario run (scenario.h). The JSON keys are
// the ones `fathom sim --json` documents; the table carries the same facts.
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "base/json.h"
#include "fabric/scenario/scenario.h"

namespace fathom::sim {
namespace {

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string Duration(double ns) {
  if (ns >= 1e9) return Fmt("%.3f s", ns / 1e9);
  if (ns >= 1e6) return Fmt("%.3f ms", ns / 1e6);
  if (ns >= 1e3) return Fmt("%.3f us", ns / 1e3);
  return Fmt("%.0f ns", ns);
}

// A port's PFC counters by their mlx5 ethtool names (pfc.h), the
// priorities that have any; durations in microseconds, as ethtool's.
std::vector<std::pair<std::string, uint64_t>> PfcNamed(const PfcCounters& c) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t p = 0; p < kPriorities; ++p) {
    if (c.rx_pause[p] + c.tx_pause[p] + c.headroom_drops[p] + c.watchdog_dropped[p] +
            c.watchdog_forwarded[p] ==
        0) {
      continue;
    }
    const std::string prio = "prio" + std::to_string(p);
    out.push_back({"rx_" + prio + "_pause", c.rx_pause[p]});
    out.push_back({"rx_" + prio + "_pause_duration", c.rx_pause_duration_ps[p] / 1000000});
    out.push_back({"tx_" + prio + "_pause", c.tx_pause[p]});
    out.push_back({"tx_" + prio + "_pause_duration", c.tx_pause_duration_ps[p] / 1000000});
    if (c.headroom_drops[p] > 0) out.push_back({prio + "_headroom_drops", c.headroom_drops[p]});
    if (c.watchdog_dropped[p] > 0) {
      out.push_back({prio + "_pfc_wd_dropped", c.watchdog_dropped[p]});
    }
    if (c.watchdog_forwarded[p] > 0) {
      out.push_back({prio + "_pfc_wd_forwarded", c.watchdog_forwarded[p]});
    }
  }
  return out;
}

std::string FormatPfc(const std::vector<std::pair<std::string, PfcCounters>>& ports) {
  std::string s = "pfc        ports that paused or were paused (durations in us):\n";
  // The ports that sent PAUSE first (the switches' side of each hop), the
  // most first: where the congestion is.
  std::vector<std::pair<std::string, PfcCounters>> sorted = ports;
  auto sent = [](const PfcCounters& c) {
    uint64_t n = 0;
    for (uint64_t v : c.tx_pause) n += v;
    return n;
  };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const auto& a, const auto& b) { return sent(a.second) > sent(b.second); });
  const size_t kMaxPorts = 16;
  for (size_t i = 0; i < sorted.size() && i < kMaxPorts; ++i) {
    s += Fmt("  %-24s", sorted[i].first.c_str());
    for (const auto& [name, v] : PfcNamed(sorted[i].second)) {
      s += Fmt(" %s %" PRIu64, name.c_str(), v);
    }
    s += "\n";
  }
  if (ports.size() > kMaxPorts) {
    s += Fmt("  ... and %zu more ports (--json lists all)\n", ports.size() - kMaxPorts);
  }
  return s;
}

std::string PfcJson(const std::vector<std::pair<std::string, PfcCounters>>& ports) {
  std::string s = "  \"pfc\": {";
  bool first = true;
  for (const auto& [port, c] : ports) {
    s += Fmt("%s%s: {", first ? "" : ", ", JsonString(port).c_str());
    first = false;
    bool first_counter = true;
    for (const auto& [name, v] : PfcNamed(c)) {
      s += Fmt("%s\"%s\": %" PRIu64, first_counter ? "" : ", ", name.c_str(), v);
      first_counter = false;
    }
    s += "}";
  }
  return s + "},\n";
}

}  // namespace

std::string FormatSummary(const RunReport& r) {
  std::string s;
  s += Fmt("scenario   %s\n", r.name.empty() ? "(unnamed)" : r.name.c_str());
  s += Fmt("topology   %s, %d hosts, NIC %.0f Gb/s, seed %" PRIu64 "\n", r.topology.c_str(),
           r.hosts, r.line_rate_gbps, r.seed);
  s += Fmt("flows      %d total: %d completed, %d failed, %d stalled\n", r.flows_total,
           r.flows_completed, r.flows_failed, r.flows_stalled);
  s += Fmt("FCT        p50 %s   p99 %s   max %s\n", Duration(r.fct_p50_ns).c_str(),
           Duration(r.fct_p99_ns).c_str(), Duration(r.fct_max_ns).c_str());
  s += Fmt("goodput    %.2f Gb/s aggregate, %.2f Gb/s per flow (mean, %.1f%% of line rate)\n",
           r.goodput_gbps, r.mean_flow_gbps,
           r.line_rate_gbps > 0 ? 100.0 * r.mean_flow_gbps / r.line_rate_gbps : 0.0);
  uint64_t total_drops = 0;
  std::string reasons;
  for (const auto& [reason, n] : r.drops) {
    total_drops += n;
    reasons += Fmt(" %s=%" PRIu64, reason.c_str(), n);
  }
  s += Fmt("drops      %" PRIu64 "%s\n", total_drops, reasons.c_str());
  const size_t kMaxPorts = 8;
  for (size_t i = 0; i < r.port_drops.size() && i < kMaxPorts; ++i) {
    const auto& [name, c] = r.port_drops[i];
    s += Fmt("  %-24s port_xmit_discards %" PRIu64 "  mtu_discards %" PRIu64
             "  port_rcv_errors %" PRIu64 "\n",
             name.c_str(), c[0], c[1], c[2]);
  }
  if (r.port_drops.size() > kMaxPorts) {
    s += Fmt("  ... and %zu more ports with drops\n", r.port_drops.size() - kMaxPorts);
  }
  s += Fmt("transport  retransmitted_packets %" PRIu64 "  packet_seq_err %" PRIu64
           "  local_ack_timeout_err %" PRIu64 "  implied_nak_seq_err %" PRIu64 "  rnr_naks %" PRIu64
           "  out_of_sequence %" PRIu64 "  duplicate_request %" PRIu64 "\n",
           r.retransmitted_packets, r.packet_seq_err, r.local_ack_timeout_err,
           r.implied_nak_seq_err, r.rnr_naks, r.out_of_sequence, r.duplicate_request);
  std::string statuses;
  for (const auto& [name, n] : r.completion_statuses) {
    statuses += Fmt(" %s=%" PRIu64, name.c_str(), n);
  }
  s += Fmt("completions%s\n", statuses.empty() ? " none" : statuses.c_str());
  if (!r.faults_summary.empty()) s += "faults\n" + r.faults_summary;
  if (!r.port_pfc.empty()) s += FormatPfc(r.port_pfc);
  s += r.pfc_field_summary;
  if (r.captured_frames > 0) s += Fmt("captured   %" PRIu64 " frames\n", r.captured_frames);
  s +=
      Fmt("engine     %s simulated, %" PRIu64 " events, %" PRIu64
          " packet-hops in %.3f s wall (%.1f M hops/s), peak %zu packets in flight\n",
          Duration(r.sim_time_ns).c_str(), r.events, r.packet_hops, r.wall_s,
          r.wall_s > 0 ? static_cast<double>(r.packet_hops) / r.wall_s / 1e6 : 0.0, r.peak_packets);
  s += Fmt("digest     %016" PRIx64 "\n", r.trace_digest);
  return s;
}

std::string FormatJson(const RunReport& r) {
  std::string s = "{\n";
  s += "  \"name\": " + JsonString(r.name) + ",\n";
  s += "  \"topology\": " + JsonString(r.topology) + ",\n";
  s += Fmt("  \"seed\": %" PRIu64 ",\n  \"hosts\": %d,\n", r.seed, r.hosts);
  s +=
      Fmt("  \"flows_total\": %d,\n  \"flows_completed\": %d,\n  \"flows_failed\": %d,\n"
          "  \"flows_stalled\": %d,\n",
          r.flows_total, r.flows_completed, r.flows_failed, r.flows_stalled);
  s += Fmt("  \"fct_ns\": {\"p50\": %.0f, \"p99\": %.0f, \"max\": %.0f},\n", r.fct_p50_ns,
           r.fct_p99_ns, r.fct_max_ns);
  s += Fmt("  \"goodput_gbps\": %.3f,\n  \"mean_flow_gbps\": %.3f,\n", r.goodput_gbps,
           r.mean_flow_gbps);
  s += "  \"drops\": {";
  bool first = true;
  for (const auto& [reason, n] : r.drops) {
    s += Fmt("%s\"%s\": %" PRIu64, first ? "" : ", ", reason.c_str(), n);
    first = false;
  }
  s += "},\n  \"port_drops\": {";
  first = true;
  for (const auto& [name, c] : r.port_drops) {
    s += Fmt("%s%s: {\"port_xmit_discards\": %" PRIu64 ", \"mtu_discards\": %" PRIu64
             ", \"port_rcv_errors\": %" PRIu64 "}",
             first ? "" : ", ", JsonString(name).c_str(), c[0], c[1], c[2]);
    first = false;
  }
  s += "},\n";
  s += Fmt("  \"retransmitted_packets\": %" PRIu64 ",\n  \"packet_seq_err\": %" PRIu64
           ",\n  \"local_ack_timeout_err\": %" PRIu64 ",\n  \"implied_nak_seq_err\": %" PRIu64
           ",\n  \"rnr_naks\": %" PRIu64 ",\n",
           r.retransmitted_packets, r.packet_seq_err, r.local_ack_timeout_err,
           r.implied_nak_seq_err, r.rnr_naks);
  s += "  \"completion_statuses\": {";
  first = true;
  for (const auto& [name, n] : r.completion_statuses) {
    s += Fmt("%s\"%s\": %" PRIu64, first ? "" : ", ", name.c_str(), n);
    first = false;
  }
  s += "},\n";
  if (!r.port_pfc.empty()) s += PfcJson(r.port_pfc);
  if (!r.pfc_field_summary.empty()) {
    s +=
        Fmt("  \"pfc_deadlock\": %s,\n  \"pfc_deadlock_cycle\": %s,\n"
            "  \"pfc_watchdog_storms\": %" PRIu64 ",\n  \"pfc_watchdog_restored\": %" PRIu64 ",\n",
            r.pfc_deadlock ? "true" : "false", JsonString(r.pfc_deadlock_cycle).c_str(),
            r.pfc_watchdog_storms, r.pfc_watchdog_restored);
  }
  s += Fmt("  \"packet_hops\": %" PRIu64 ",\n  \"events\": %" PRIu64
           ",\n  \"sim_time_ns\": %.0f,\n  \"wall_s\": %.6f,\n  \"trace_digest\": \"%016" PRIx64
           "\"\n}\n",
           r.packet_hops, r.events, r.sim_time_ns, r.wall_s, r.trace_digest);
  return s;
}

}  // namespace fathom::sim
