// Text and JSON renderings of a scenario run (scenario.h). The JSON keys are
// the ones `fathom sim --json` documents; the table carries the same facts.
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fabric/scenario/expect.h"
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

}  // namespace

std::string FormatSummary(const RunReport& r) {
  std::string s;
  s += Fmt("scenario   %s\n", r.name.empty() ? "(unnamed)" : r.name.c_str());
  s += Fmt("topology   %s, %d hosts, NIC %.0f Gb/s, seed %" PRIu64 "\n", r.topology.c_str(),
           r.hosts, r.line_rate_gbps, r.seed);
  s += Fmt("nic        profile %s, roce_adp_retrans %" PRIu64 "\n", r.nic_profile.c_str(),
           r.roce_adp_retrans);
  s += Fmt("flows      %d total: %d completed, %d failed, %d stalled\n", r.flows_total,
           r.flows_completed, r.flows_failed, r.flows_stalled);
  s += Fmt("FCT        p50 %s   p99 %s   max %s\n", Duration(r.fct_p50_ns).c_str(),
           Duration(r.fct_p99_ns).c_str(), Duration(r.fct_max_ns).c_str());
  s += Fmt("goodput    %.2f Gb/s aggregate, %.2f Gb/s per flow (mean, %.1f%% of line rate)\n",
           r.goodput_gbps, r.mean_flow_gbps,
           r.line_rate_gbps > 0 ? 100.0 * r.mean_flow_gbps / r.line_rate_gbps : 0.0);
  uint64_t total_drops = 0;
  std::string reasons;
  // Largest first (then by name): the cause usually leads.
  std::vector<std::pair<std::string, uint64_t>> by_count(r.drops.begin(), r.drops.end());
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [reason, n] : by_count) {
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
  if (r.first_error_ns >= 0) {
    s += Fmt("first error at %s (virtual time)\n", Duration(r.first_error_ns).c_str());
  }
  // The flows that did not complete, first few (the whole table: --flows-out).
  const size_t kMaxFlows = 8;
  size_t shown = 0, unfinished = 0;
  for (const FlowReport& f : r.flow_table) {
    if (f.status == "completed") continue;
    if (++unfinished > kMaxFlows) continue;
    ++shown;
    s += Fmt("  flow %-5d %s -> %s %s", f.index, f.src.c_str(), f.dst.c_str(), f.status.c_str());
    if (!f.first_error.empty()) {
      s += Fmt(" %s at %s", f.first_error.c_str(), Duration(f.first_error_ns).c_str());
    }
    s += Fmt("  retransmitted_packets %" PRIu64 "\n", f.retransmissions);
  }
  if (unfinished > shown) s += Fmt("  ... and %zu more flows not completed\n", unfinished - shown);
  if (r.ecn_enabled || r.dcqcn_enabled) {
    s += Fmt("ecn/dcqcn  ecn_marked_packets %" PRIu64 "  np_ecn_marked_roce_packets %" PRIu64
             "  np_cnp_sent %" PRIu64 "  rp_cnp_handled %" PRIu64 "  rp_cnp_ignored %" PRIu64 "\n",
             r.ecn_marked_packets, r.dcqcn.np_ecn_marked_roce_packets, r.dcqcn.np_cnp_sent,
             r.dcqcn.rp_cnp_handled, r.dcqcn.rp_cnp_ignored);
    // The rate limiters the CNPs drove, first few (all: --json / --flows-out).
    const size_t kMaxQps = 8;
    size_t limited = 0;
    for (const FlowReport& f : r.flow_table) {
      for (const QpReport& q : f.qps) {
        if (!q.dcqcn || ++limited > kMaxQps) continue;
        s +=
            Fmt("  dcqcn rate flow %d qp %d %s -> %s: now %.2f Gb/s, min %.2f, mean %.2f, "
                "%" PRIu64 " cuts\n",
                f.index, q.qp, q.host.c_str(), q.peer_host.c_str(), q.dcqcn_rate_gbps,
                q.dcqcn_min_gbps, q.dcqcn_mean_gbps, q.dcqcn_cuts);
      }
    }
    if (limited > kMaxQps) s += Fmt("  ... and %zu more rate-limited QPs\n", limited - kMaxQps);
  }
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

namespace {

using Json = nlohmann::ordered_json;

// -1 (no such time) as null.
Json TimeOrNull(double ns) { return ns < 0 ? Json(nullptr) : Json(ns); }

Json QpCountersJson(const QpCounters& c) {
  Json j = Json::object();
  ForEachQpCounter(c, [&](const char* name, uint64_t v) { j[name] = v; });
  return j;
}

Json FlowRowJson(const FlowReport& f) {
  Json row;
  row["index"] = f.index;
  row["src"] = f.src;
  row["dst"] = f.dst;
  Json qpns = Json::array(), peers = Json::array();
  for (const QpReport& q : f.qps) {
    qpns.push_back(q.qpn);
    peers.push_back(q.peer_qpn);
  }
  row["qpns"] = qpns;
  row["peer_qpns"] = peers;
  row["bytes"] = f.bytes;
  row["start_ns"] = f.start_ns;
  row["end_ns"] = TimeOrNull(f.end_ns);
  row["fct_ns"] = TimeOrNull(f.fct_ns);
  row["status"] = f.status;
  row["first_error"] = f.first_error.empty() ? Json(nullptr) : Json(f.first_error);
  row["first_error_ns"] = TimeOrNull(f.first_error_ns);
  row["retransmissions"] = f.retransmissions;
  Json qps = Json::array();
  for (const QpReport& q : f.qps) {
    Json jq;
    jq["qp"] = q.qp;
    jq["qpn"] = q.qpn;
    jq["peer_qpn"] = q.peer_qpn;
    jq["host"] = q.host;
    jq["peer_host"] = q.peer_host;
    jq["state"] = q.state;
    jq["first_error"] = q.first_error.empty() ? Json(nullptr) : Json(q.first_error);
    jq["first_error_ns"] = TimeOrNull(q.first_error_ns);
    jq["requester_counters"] = QpCountersJson(q.requester);
    jq["responder_counters"] = QpCountersJson(q.responder);
    jq["dcqcn"] = q.dcqcn ? Json{{"rate_gbps", q.dcqcn_rate_gbps},
                                 {"min_gbps", q.dcqcn_min_gbps},
                                 {"mean_gbps", q.dcqcn_mean_gbps},
                                 {"cuts", q.dcqcn_cuts}}
                          : Json(nullptr);
    qps.push_back(std::move(jq));
  }
  row["qps"] = std::move(qps);
  return row;
}

std::string Dump(const Json& j) {
  // Names come from the scenario file: never throw on bad UTF-8.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string FormatJson(const RunReport& r) {
  Json j;
  j["name"] = r.name;
  j["topology"] = r.topology;
  j["seed"] = r.seed;
  j["hosts"] = r.hosts;
  j["nic_profile"] = r.nic_profile;
  j["roce_adp_retrans"] = r.roce_adp_retrans;
  if (!r.port_pfc.empty()) {
    // The ports that sent or received PAUSE (or dropped lossless frames).
    Json pfc = Json::object();
    for (const auto& [port, c] : r.port_pfc) {
      Json jp = Json::object();
      for (const auto& [name, v] : PfcNamed(c)) jp[name] = v;
      pfc[port] = std::move(jp);
    }
    j["pfc"] = std::move(pfc);
  }
  if (!r.pfc_field_summary.empty()) {
    j["pfc_deadlock"] = r.pfc_deadlock;
    j["pfc_deadlock_cycle"] = r.pfc_deadlock_cycle;
    j["pfc_watchdog_storms"] = r.pfc_watchdog_storms;
    j["pfc_watchdog_restored"] = r.pfc_watchdog_restored;
  }
  if (r.ecn_enabled || r.dcqcn_enabled) {
    j["ecn_marked_packets"] = r.ecn_marked_packets;
    j["np_ecn_marked_roce_packets"] = r.dcqcn.np_ecn_marked_roce_packets;
    j["np_cnp_sent"] = r.dcqcn.np_cnp_sent;
    j["rp_cnp_handled"] = r.dcqcn.rp_cnp_handled;
    j["rp_cnp_ignored"] = r.dcqcn.rp_cnp_ignored;
  }
  j["flows_total"] = r.flows_total;
  j["flows_completed"] = r.flows_completed;
  j["flows_failed"] = r.flows_failed;
  j["flows_stalled"] = r.flows_stalled;
  j["fct_ns"] = {{"p50", r.fct_p50_ns}, {"p99", r.fct_p99_ns}, {"max", r.fct_max_ns}};
  j["bytes_completed"] = r.bytes_completed;
  j["goodput_gbps"] = r.goodput_gbps;
  j["mean_flow_gbps"] = r.mean_flow_gbps;
  j["line_rate_gbps"] = r.line_rate_gbps;
  j["drops"] = Json::object();
  for (const auto& [reason, n] : r.drops) j["drops"][reason] = n;
  j["port_drops"] = Json::object();
  for (const auto& [name, c] : r.port_drops) {
    j["port_drops"][name] = {
        {"port_xmit_discards", c[0]}, {"mtu_discards", c[1]}, {"port_rcv_errors", c[2]}};
  }
  j["retransmitted_packets"] = r.retransmitted_packets;
  j["packet_seq_err"] = r.packet_seq_err;
  j["local_ack_timeout_err"] = r.local_ack_timeout_err;
  j["implied_nak_seq_err"] = r.implied_nak_seq_err;
  j["rnr_naks"] = r.rnr_naks;
  j["out_of_sequence"] = r.out_of_sequence;
  j["duplicate_request"] = r.duplicate_request;
  j["retry_exceeded_err"] = r.retry_exceeded_err;
  j["rnr_nak_retry_err"] = r.rnr_nak_retry_err;
  j["send_rnr_err"] = r.send_rnr_err;
  j["completion_statuses"] = Json::object();
  for (const auto& [name, n] : r.completion_statuses) j["completion_statuses"][name] = n;
  j["first_error_ns"] = TimeOrNull(r.first_error_ns);
  Json faults = Json::array();
  for (const FaultStats& f : r.fault_stats) {
    Json jf;
    jf["name"] = f.name;
    jf["kind"] = f.kind;
    jf["target"] = f.target;
    jf["attachments"] = f.attachments;
    jf["active_ns"] = f.active_ns;
    Json counters = Json::object();
    f.counters.ForEach([&](const char* n, uint64_t v) { counters[n] = v; });
    jf["counters"] = std::move(counters);
    faults.push_back(std::move(jf));
  }
  j["faults"] = std::move(faults);
  j["captured_frames"] = r.captured_frames;
  j["packet_hops"] = r.packet_hops;
  j["events"] = r.events;
  j["peak_packets"] = r.peak_packets;
  j["sim_time_ns"] = r.sim_time_ns;
  j["wall_s"] = r.wall_s;
  j["trace_digest"] = Fmt("%016" PRIx64, r.trace_digest);
  Json flows = Json::array();
  for (const FlowReport& f : r.flow_table) flows.push_back(FlowRowJson(f));
  j["flows"] = std::move(flows);
  return Dump(j);
}

std::string FormatFlowsJson(const RunReport& r) {
  Json flows = Json::array();
  for (const FlowReport& f : r.flow_table) flows.push_back(FlowRowJson(f));
  return Dump(flows);
}

std::string FormatFlowsCsv(const RunReport& r) {
  // Times in ns as in the JSON; empty cells for times that do not exist.
  // Host names and statuses never hold commas or quotes (topology names are
  // identifiers), so no quoting is needed.
  std::string s =
      "index,src,dst,qpns,peer_qpns,bytes,start_ns,end_ns,fct_ns,status,first_error,"
      "first_error_ns,retransmissions\n";
  auto time = [](double ns) { return ns < 0 ? std::string() : Fmt("%.3f", ns); };
  for (const FlowReport& f : r.flow_table) {
    std::string qpns, peers;
    for (const QpReport& q : f.qps) {
      qpns += (qpns.empty() ? "" : ";") + Hex(q.qpn);
      peers += (peers.empty() ? "" : ";") + Hex(q.peer_qpn);
    }
    s += Fmt("%d,%s,%s,%s,%s,%" PRIu64 ",%s,%s,%s,%s,%s,%s,%" PRIu64 "\n", f.index, f.src.c_str(),
             f.dst.c_str(), qpns.c_str(), peers.c_str(), f.bytes, time(f.start_ns).c_str(),
             time(f.end_ns).c_str(), time(f.fct_ns).c_str(), f.status.c_str(),
             f.first_error.c_str(), time(f.first_error_ns).c_str(), f.retransmissions);
  }
  return s;
}

}  // namespace fathom::sim
