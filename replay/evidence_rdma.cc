// Per-node RDMA counters: `rdma statistic show` (iproute2 rdma/stat.c: one
// "link DEV/PORT name value name value ..." line per port; -p puts the pairs
// on indented lines, -j prints JSON) and hw_counters dumps (one file per
// counter under /sys/class/infiniband/DEV/ports/N/hw_counters/, `grep .`
// over them, or "name value" / "name: value" lines).
//
// Counter names: rxe from the kernel's drivers/infiniband/sw/rxe/
// rxe_hw_counters.c; mlx5 from drivers/infiniband/hw/mlx5/counters.c (the
// q-counters, congestion and extended sets); the IB port counters both
// report (include/rdma/ib_pma.h, ROCEV2.md "Counters users look at").
#include <algorithm>
#include <nlohmann/json.hpp>

#include "replay/evidence_internal.h"

namespace fathom::replay::internal {
namespace {

constexpr std::string_view kRxe[] = {"sent_pkts",           "rcvd_pkts",
                                     "duplicate_request",   "out_of_seq_request",
                                     "rcvd_rnr_err",        "send_rnr_err",
                                     "rcvd_seq_err",        "ack_deferred",
                                     "retry_exceeded_err",  "retry_rnr_exceeded_err",
                                     "completer_retry_err", "send_err",
                                     "link_downed",         "rdma_sends",
                                     "rdma_recvs"};

constexpr std::string_view kMlx5[] = {"rx_write_requests",
                                      "rx_read_requests",
                                      "rx_atomic_requests",
                                      "rx_dct_connect",
                                      "out_of_buffer",
                                      "out_of_sequence",
                                      "duplicate_request",
                                      "rnr_nak_retry_err",
                                      "packet_seq_err",
                                      "implied_nak_seq_err",
                                      "local_ack_timeout_err",
                                      "resp_local_length_error",
                                      "resp_cqe_error",
                                      "req_cqe_error",
                                      "req_remote_invalid_request",
                                      "req_remote_access_errors",
                                      "resp_remote_access_errors",
                                      "resp_cqe_flush_error",
                                      "req_cqe_flush_error",
                                      "req_transport_retries_exceeded",
                                      "req_rnr_retries_exceeded",
                                      "roce_adp_retrans",
                                      "roce_adp_retrans_to",
                                      "roce_slow_restart",
                                      "roce_slow_restart_cnps",
                                      "roce_slow_restart_trans",
                                      "rp_cnp_ignored",
                                      "rp_cnp_handled",
                                      "np_ecn_marked_roce_packets",
                                      "np_cnp_sent",
                                      "rx_icrc_encapsulated",
                                      "resp_rnr_nak",
                                      "rx_dct_connect"};

// IB port counters (PMA) every driver's port shows.
constexpr std::string_view kPort[] = {
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
    "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "VL15_dropped", "port_xmit_wait", "port_xmit_data",
    "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
    // The hw_counters directory's own attribute (ms the
    // counts are cached for), every driver's.
    "lifespan", "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets",
    "multicast_rcv_packets"};

template <size_t N>
bool In(const std::string_view (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

// Records one counter; unknown names are kept and listed.
void Put(HostState& h, const std::string& name, uint64_t v) {
  h.rdma_counters[name] = v;
  if (!IsRxeCounter(name) && !IsMlx5Counter(name) && !In(kPort, name) &&
      std::find(h.unknown_counters.begin(), h.unknown_counters.end(), name) ==
          h.unknown_counters.end()) {
    h.unknown_counters.push_back(name);
  }
}

// After a file: the driver from what was read, and the report's verdict on
// names neither driver uses.
void Finish(HostState& h, const std::string& device, const std::vector<std::string>& names,
            SourceReport* src) {
  std::string drv = DriverFromDevice(device);
  if (drv.empty()) drv = DriverFromCounters(names);
  if (!device.empty() && h.device.empty()) h.device = device;
  if (!drv.empty()) h.driver = drv;
  std::vector<std::string> unknown;
  for (const std::string& n : names) {
    if (std::find(h.unknown_counters.begin(), h.unknown_counters.end(), n) !=
        h.unknown_counters.end()) {
      unknown.push_back(n);
    }
  }
  if (!unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", " : "") + unknown[i];
    if (unknown.size() > 5) list += ", ...";
    NoteProblem(src, 0,
                std::to_string(unknown.size()) + " counter(s) of an unknown driver (" +
                    (drv.empty() ? "neither rxe nor mlx5 names" : "not " + drv + " names") +
                    "): " + list + "; kept, not interpreted");
  }
}

std::optional<uint64_t> Count(std::string_view s) {
  auto v = ParseInt(s);
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

}  // namespace

bool IsRxeCounter(std::string_view name) { return In(kRxe, name); }
bool IsMlx5Counter(std::string_view name) { return In(kMlx5, name); }

std::string DriverFromCounters(const std::vector<std::string>& names) {
  int rxe = 0, mlx5 = 0;
  for (const std::string& n : names) {
    // Names both use (duplicate_request, link_downed) decide nothing.
    const bool r = IsRxeCounter(n), m = IsMlx5Counter(n);
    if (r && !m) ++rxe;
    if (m && !r) ++mlx5;
  }
  if (rxe > mlx5) return "rxe";
  if (mlx5 > rxe) return "mlx5";
  return "";
}

std::string DriverFromDevice(std::string_view d) {
  if (StartsWith(d, "mlx5")) return "mlx5";
  if (StartsWith(d, "rxe")) return "rxe";
  return "";
}

void ParseRdmaStatistic(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "rdma_statistic";
  const std::string host = file.host.empty() ? "unknown" : file.host;
  if (file.host.empty()) NoteProblem(src, 0, "no host in the path; counters filed under 'unknown'");
  HostState& h = Host(ev, host);
  std::vector<std::string> names;
  std::string device;
  const std::string_view head = Trim(file.text);
  if (StartsWith(head, "[")) {
    auto j = nlohmann::json::parse(file.text, nullptr, false);
    if (j.is_discarded() || !j.is_array()) {
      src->use = SourceReport::Use::kUnusable;
      src->reason = "JSON that is not `rdma -j statistic show` output";
      return;
    }
    for (const auto& port : j) {
      if (!port.is_object()) continue;
      if (port.contains("ifname") && port["ifname"].is_string() && device.empty()) {
        device = port["ifname"].get<std::string>();
      }
      for (const auto& [k, v] : port.items()) {
        if (k == "ifindex" || k == "ifname" || k == "port" || !v.is_number_unsigned()) continue;
        Put(h, k, v.get<uint64_t>());
        names.push_back(k);
      }
      ++src->lines_recognised;
    }
    Finish(h, device, names, src);
    return;
  }
  bool in_link = false;
  int n = 0;
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    const auto w = SplitWords(raw);
    if (w.empty()) continue;
    size_t i = 0;
    if (w[0] == "link" && w.size() >= 2) {
      in_link = true;
      if (device.empty()) device = w[1].substr(0, w[1].find('/'));
      i = 2;
    } else if (!in_link || !std::isspace(static_cast<unsigned char>(raw[0]))) {
      ++src->lines_ignored;
      continue;
    }
    bool ok = true;
    for (; i + 1 < w.size(); i += 2) {
      auto v = Count(w[i + 1]);
      if (!v) {
        ok = false;
        break;
      }
      Put(h, w[i], *v);
      names.push_back(w[i]);
    }
    if (!ok || i != w.size()) NoteProblem(src, n, "pairs of name and count expected");
    ++src->lines_recognised;
  }
  Finish(h, device, names, src);
}

void ParseHwCounters(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "hw_counters";
  const std::string host = file.host.empty() ? "unknown" : file.host;
  if (file.host.empty()) NoteProblem(src, 0, "no host in the path; counters filed under 'unknown'");
  HostState& h = Host(ev, host);
  std::vector<std::string> names;
  std::string device;
  auto device_of = [](std::string_view path) -> std::string {
    const size_t i = path.find("infiniband/");
    if (i == std::string_view::npos) return "";
    std::string_view rest = path.substr(i + 11);
    return std::string(rest.substr(0, rest.find('/')));
  };
  // One file per counter: the path names it, the content is the count.
  const size_t slash = file.rel.rfind("hw_counters/");
  const auto lines = SplitLines(file.text);
  if (slash != std::string::npos && file.rel.find('/', slash + 12) == std::string::npos) {
    const std::string name = file.rel.substr(slash + 12);
    const auto v = lines.empty() ? std::nullopt : Count(lines[0]);
    if (!v) {
      src->use = SourceReport::Use::kUnusable;
      src->reason = "line 1: a counter file holds one count";
      return;
    }
    Put(h, name, *v);
    names.push_back(name);
    ++src->lines_recognised;
    Finish(h, device_of(file.rel), names, src);
    return;
  }
  int n = 0;
  for (std::string_view raw : lines) {
    ++n;
    std::string_view l = Trim(raw);
    if (l.empty() || l[0] == '#') continue;
    std::string name;
    std::string value;
    if (StartsWith(l, "/") || Contains(l, "hw_counters/")) {
      // `grep . /sys/class/infiniband/*/ports/*/hw_counters/*`: PATH:VALUE.
      const size_t colon = l.rfind(':');
      const size_t s = l.rfind('/', colon);
      if (colon == std::string_view::npos || s == std::string_view::npos) {
        NoteProblem(src, n, "PATH:VALUE expected");
        ++src->lines_ignored;
        continue;
      }
      name = std::string(l.substr(s + 1, colon - s - 1));
      value = std::string(l.substr(colon + 1));
      if (device.empty()) device = device_of(l);
    } else {
      auto w = SplitWords(l);
      if (w.size() != 2) {
        NoteProblem(src, n, "'name value' expected");
        ++src->lines_ignored;
        continue;
      }
      name = w[0];
      if (!name.empty() && name.back() == ':') name.pop_back();
      value = w[1];
    }
    auto v = Count(value);
    if (!v) {
      NoteProblem(src, n, "count '" + value + "' of " + name + " is not a number");
      ++src->lines_ignored;
      continue;
    }
    Put(h, name, *v);
    names.push_back(name);
    ++src->lines_recognised;
  }
  if (device.empty()) device = device_of(file.rel);
  Finish(h, device, names, src);
}

}  // namespace fathom::replay::internal
