#include "fabric/scenario/expect.h"

#include <fnmatch.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/verbs_types.h"
#include "faults/spec.h"

namespace fathom::sim {
namespace {

// The same bound scenario times have (scenario.cc: int64 picoseconds).
constexpr double kMaxTimeUs = 9.0e12;

enum class CounterKind { kNone, kQp, kPort, kFault };

// A fault model counts port_xmit_discards and port_rcv_errors as the port
// would; with a `fault` scope the name is the fault's counter, otherwise
// the port's.
CounterKind KindOf(const proto::CounterExpect& c) {
  const std::string& name = c.name();
  if (name == "rnr_naks") return CounterKind::kQp;
  CounterKind kind = CounterKind::kNone;
  faults::Counters{}.ForEach([&](const char* n, uint64_t) {
    if (name == n) kind = CounterKind::kFault;
  });
  if (kind == CounterKind::kFault && !c.fault().empty()) return kind;
  ForEachQpCounter(QpCounters{}, [&](const char* n, uint64_t) {
    if (name == n) kind = CounterKind::kQp;
  });
  ForEachPortCounter(PortCounters{}, [&](const char* n, uint64_t) {
    if (name == n) kind = CounterKind::kPort;
  });
  return kind;
}

std::string CounterNames() {
  std::string qp, port, fault;
  ForEachQpCounter(QpCounters{}, [&](const char* n, uint64_t) { qp += std::string(" ") + n; });
  ForEachPortCounter(PortCounters{},
                     [&](const char* n, uint64_t) { port += std::string(" ") + n; });
  faults::Counters{}.ForEach([&](const char* n, uint64_t) { fault += std::string(" ") + n; });
  return "QP:" + qp + " rnr_naks; port:" + port + "; fault:" + fault;
}

uint64_t QpValue(const QpCounters& c, const std::string& name) {
  const std::string n = name == "rnr_naks" ? "rcvd_rnr_err" : name;
  uint64_t v = 0;
  ForEachQpCounter(c, [&](const char* k, uint64_t x) {
    if (n == k) v = x;
  });
  return v;
}

uint64_t PortValue(const PortCounters& c, const std::string& name) {
  uint64_t v = 0;
  ForEachPortCounter(c, [&](const char* k, uint64_t x) {
    if (name == k) v = x;
  });
  return v;
}

uint64_t FaultValue(const faults::Counters& c, const std::string& name) {
  uint64_t v = 0;
  c.ForEach([&](const char* k, uint64_t x) {
    if (name == k) v = x;
  });
  return v;
}

bool IsWcStatus(const std::string& name) {
  for (int s = 0; s <= static_cast<int>(WcStatus::kGeneralErr); ++s) {
    if (WcStatusName(static_cast<WcStatus>(s)) == name) return true;
  }
  return false;
}

bool IsQpState(const std::string& name) {
  for (int s = 0; s <= static_cast<int>(QpState::kErr); ++s) {
    if (QpStateName(static_cast<QpState>(s)) == name) return true;
  }
  return false;
}

// Every reason but kNone (a verdict, not a drop); the lossless classes'
// reasons come after it (faults/frame.h).
bool IsDropReasonValue(int i) { return i != static_cast<int>(DropReason::kNone); }

bool IsDropReason(const std::string& name) {
  for (int i = 0; i < static_cast<int>(DropReason::kCount); ++i) {
    if (IsDropReasonValue(i) && name == DropReasonName(static_cast<DropReason>(i))) return true;
  }
  return false;
}

// Microseconds to the nanosecond, trailing zeros trimmed: "34359738.368".
std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

Status CheckUs(const config::SourceMap& m, const std::string& path, double us) {
  if (!std::isfinite(us) || us < 0 || us > kMaxTimeUs) {
    return m.Error(path, Num(us) + " us must be a finite time in [0, 9e12] us");
  }
  return Status::Ok();
}

Status CheckTime(const config::SourceMap& m, const std::string& path, const proto::TimeExpect& t) {
  if (!t.has_value()) {
    if (t.tolerance_pct() != 0 || t.tolerance_us() != 0) {
      return m.Error(path + ".value", "a tolerance needs a value to be a tolerance of");
    }
    return Status::Ok();
  }
  FATHOM_RETURN_IF_ERROR(CheckUs(m, path + ".value", t.value()));
  if (!std::isfinite(t.tolerance_pct()) || t.tolerance_pct() < 0 || t.tolerance_pct() > 100) {
    return m.Error(path + ".tolerance_pct", Num(t.tolerance_pct()) + " must be in [0, 100]");
  }
  return CheckUs(m, path + ".tolerance_us", t.tolerance_us());
}

Status CheckBounds(const config::SourceMap& m, const std::string& path, bool has_eq, bool has_min,
                   uint64_t min, bool has_max, uint64_t max) {
  if (!has_eq && !has_min && !has_max) {
    return m.Error(path, "checks nothing: set equal, at_least or at_most");
  }
  if (has_min && has_max && min > max) {
    return m.Error(path + ".at_least",
                   std::to_string(min) + " is above at_most " + std::to_string(max));
  }
  return Status::Ok();
}

// Unmet: "expected X, got Y" for a count against a bound; empty when met.
std::string MissBound(bool has_eq, uint64_t eq, bool has_min, uint64_t min, bool has_max,
                      uint64_t max, uint64_t got) {
  std::string want;
  if (has_eq && got != eq) want = std::to_string(eq);
  if (has_min && got < min) want = "at least " + std::to_string(min);
  if (has_max && got > max) want = "at most " + std::to_string(max);
  return want.empty() ? "" : "expected " + want + ", got " + std::to_string(got);
}

// Unmet time: empty when met. `got_ns` < 0: no such time.
std::string MissTime(const proto::TimeExpect& t, double got_ns) {
  if (!t.has_value()) return "";
  const double tol = std::max(t.value() * t.tolerance_pct() / 100.0, t.tolerance_us());
  const std::string want =
      "expected " + Num(t.value()) + " us" + (tol > 0 ? " +- " + Num(tol) + " us" : "");
  if (got_ns < 0) return want + ", got none";
  const double got_us = got_ns / 1e3;
  // Exact: within a picosecond (the engine's tick; doubles carry the us).
  if (std::fabs(got_us - t.value()) <= std::max(tol, 1e-6)) return "";
  return want + ", got " + Num(got_us) + " us";
}

int64_t FlowCount(const LoadedScenario& sc) {
  const proto::WorkloadSpec& w = sc.spec.workload();
  const int64_t hosts = static_cast<int64_t>(sc.topology.hosts().size());
  switch (w.pattern()) {
    case proto::WorkloadSpec::PATTERN_PERMUTATION:
      return hosts > 1 ? hosts : 0;
    case proto::WorkloadSpec::PATTERN_ALL_TO_ALL:
      return hosts * (hosts - 1);
    case proto::WorkloadSpec::PATTERN_INCAST:
      return w.incast_senders() == 0 ? hosts - 1 : w.incast_senders();
    default:
      return w.flows_size();
  }
}

Status CheckHost(const LoadedScenario& sc, const std::string& name, const std::string& path) {
  auto node = sc.topology.FindNode(name);
  if (!node.ok() || sc.topology.node(*node).kind != topo::NodeKind::kHost) {
    return sc.map.Error(path,
                        "'" + name + "' is not a host of topology '" + sc.topology.name() + "'");
  }
  return Status::Ok();
}

bool FlowMatches(const proto::FlowExpect& f, const FlowReport& row) {
  if (f.has_flow()) return row.index == f.flow();
  return (f.src().empty() || f.src() == row.src) && (f.dst().empty() || f.dst() == row.dst);
}

std::string FlowLabel(const FlowReport& row) {
  return "flow " + std::to_string(row.index) + " " + row.src + "->" + row.dst;
}

}  // namespace

Status ValidateExpect(const LoadedScenario& sc, int64_t flows_hint, int32_t qps) {
  const proto::ExpectSpec& e = sc.spec.expect();
  const config::SourceMap& m = sc.map;
  const int64_t flows = flows_hint >= 0 ? flows_hint : FlowCount(sc);
  auto check_flow = [&](const std::string& path, int64_t f) -> Status {
    if (f < 0 || f >= flows) {
      return m.Error(path, "flow " + std::to_string(f) + " does not exist: the workload has " +
                               std::to_string(flows) + " flows (0.." + std::to_string(flows - 1) +
                               ")");
    }
    return Status::Ok();
  };
  for (int i = 0; i < e.flows_size(); ++i) {
    const proto::FlowExpect& f = e.flows(i);
    const std::string p = "expect.flows[" + std::to_string(i) + "]";
    if (f.has_flow() && (!f.src().empty() || !f.dst().empty())) {
      return m.Error(p + ".flow", "select a flow by index or by src/dst, not both");
    }
    if (!f.has_flow() && f.src().empty() && f.dst().empty()) {
      return m.Error(p, "names no flow: set flow (an index) or src and/or dst");
    }
    if (f.has_flow()) FATHOM_RETURN_IF_ERROR(check_flow(p + ".flow", f.flow()));
    if (!f.src().empty()) FATHOM_RETURN_IF_ERROR(CheckHost(sc, f.src(), p + ".src"));
    if (!f.dst().empty()) FATHOM_RETURN_IF_ERROR(CheckHost(sc, f.dst(), p + ".dst"));
    if (!f.status().empty() && f.status() != "completed" && f.status() != "failed" &&
        f.status() != "stalled") {
      return m.Error(p + ".status",
                     "'" + f.status() + "' is not a flow status: completed, failed or stalled");
    }
    if (!f.first_error().empty() && !IsWcStatus(f.first_error())) {
      return m.Error(p + ".first_error", "'" + f.first_error() +
                                             "' is not an ibv_wc_status name (e.g. "
                                             "IBV_WC_RETRY_EXC_ERR)");
    }
    FATHOM_RETURN_IF_ERROR(CheckTime(m, p + ".first_error_us", f.first_error_us()));
    if (f.has_fct_at_least_us())
      FATHOM_RETURN_IF_ERROR(CheckUs(m, p + ".fct_at_least_us", f.fct_at_least_us()));
    if (f.has_fct_at_most_us())
      FATHOM_RETURN_IF_ERROR(CheckUs(m, p + ".fct_at_most_us", f.fct_at_most_us()));
    if (f.has_fct_at_least_us() && f.has_fct_at_most_us() &&
        f.fct_at_least_us() > f.fct_at_most_us()) {
      return m.Error(p + ".fct_at_least_us", "is above fct_at_most_us");
    }
    if (f.status().empty() && f.first_error().empty() && !f.first_error_us().has_value() &&
        !f.has_fct_at_least_us() && !f.has_fct_at_most_us()) {
      return m.Error(p, "checks nothing: set status, first_error, first_error_us or fct bounds");
    }
  }
  for (int i = 0; i < e.qps_size(); ++i) {
    const proto::QpExpect& q = e.qps(i);
    const std::string p = "expect.qps[" + std::to_string(i) + "]";
    FATHOM_RETURN_IF_ERROR(check_flow(p + ".flow", q.flow()));
    if (q.qp() < 0 || q.qp() >= qps) {
      return m.Error(p + ".qp", "QP " + std::to_string(q.qp()) + " does not exist: each flow has " +
                                    std::to_string(qps) + " (transport.qps_per_connection)");
    }
    if (!q.first_error().empty() && q.first_error() != "none" && !IsWcStatus(q.first_error())) {
      return m.Error(p + ".first_error",
                     "'" + q.first_error() + "' is neither an ibv_wc_status name nor \"none\"");
    }
    if (!q.state().empty() && !IsQpState(q.state())) {
      return m.Error(p + ".state",
                     "'" + q.state() + "' is not an ibv_qp_state name (e.g. IBV_QPS_ERR)");
    }
    FATHOM_RETURN_IF_ERROR(CheckTime(m, p + ".first_error_us", q.first_error_us()));
    if (q.first_error().empty() && q.state().empty() && !q.first_error_us().has_value()) {
      return m.Error(p, "checks nothing: set first_error, first_error_us or state");
    }
  }
  for (int i = 0; i < e.counters_size(); ++i) {
    const proto::CounterExpect& c = e.counters(i);
    const std::string p = "expect.counters[" + std::to_string(i) + "]";
    const CounterKind kind = KindOf(c);
    if (kind == CounterKind::kNone) {
      return m.Error(p + ".name", "'" + c.name() + "' is not a counter the report prints (" +
                                      CounterNames() + ")");
    }
    const int scopes = !c.port().empty() + !c.node().empty() + !c.ports().empty() +
                       !c.fault().empty() + c.has_flow();
    if (scopes > 1) {
      return m.Error(p, "more than one scope: set one of port, node, ports, fault, flow");
    }
    if (c.has_qp() && !c.has_flow()) return m.Error(p + ".qp", "needs flow (the QP's flow)");
    const char* kind_name = kind == CounterKind::kQp     ? "a QP counter"
                            : kind == CounterKind::kPort ? "a port counter"
                                                         : "a fault counter";
    auto refuse = [&](const char* field, const char* takes) {
      return m.Error(p + "." + field, "'" + c.name() + "' is " + kind_name + ": its scope is " +
                                          takes + " (or none: the whole fabric)");
    };
    if (kind == CounterKind::kQp && (!c.port().empty() || !c.ports().empty() || !c.fault().empty()))
      return refuse(!c.port().empty()    ? "port"
                    : !c.ports().empty() ? "ports"
                                         : "fault",
                    "node (a host) or flow (+ qp)");
    if (kind == CounterKind::kPort && (!c.fault().empty() || c.has_flow()))
      return refuse(!c.fault().empty() ? "fault" : "flow", "port, node or ports");
    if (kind == CounterKind::kFault &&
        (!c.port().empty() || !c.node().empty() || !c.ports().empty() || c.has_flow()))
      return refuse(!c.port().empty()    ? "port"
                    : !c.node().empty()  ? "node"
                    : !c.ports().empty() ? "ports"
                                         : "flow",
                    "fault");
    if (!c.node().empty()) {
      if (kind == CounterKind::kQp) {
        FATHOM_RETURN_IF_ERROR(CheckHost(sc, c.node(), p + ".node"));
      } else if (!sc.topology.FindNode(c.node()).ok()) {
        return m.Error(p + ".node",
                       "'" + c.node() + "' is not a node of topology '" + sc.topology.name() + "'");
      }
    }
    if (!c.port().empty()) {
      const size_t colon = c.port().rfind(':');
      auto node = sc.topology.FindNode(c.port().substr(0, colon == std::string::npos ? 0 : colon));
      int32_t index = -1;
      if (colon != std::string::npos && colon + 1 < c.port().size() &&
          c.port().find_first_not_of("0123456789", colon + 1) == std::string::npos &&
          c.port().size() - colon <= 6) {
        index = std::stoi(c.port().substr(colon + 1));
      }
      if (!node.ok() || index < 0 || index >= sc.topology.PortCount(*node)) {
        return m.Error(p + ".port", "'" + c.port() +
                                        "' is not a port: NODE:INDEX, an existing node and "
                                        "port index (e.g. leaf0:3)");
      }
    }
    if (!c.ports().empty()) {
      bool any = false;
      for (int32_t n = 0; n < static_cast<int32_t>(sc.topology.nodes().size()) && !any; ++n) {
        for (int32_t pi = 0; pi < sc.topology.PortCount(n) && !any; ++pi) {
          any = fnmatch(c.ports().c_str(), ReportPortName(sc.topology, n, pi).c_str(), 0) == 0;
        }
      }
      if (!any) {
        return m.Error(p + ".ports", "'" + c.ports() +
                                         "' matches no port name (names are as the report "
                                         "prints them: leaf0->spine0, h3->leaf0)");
      }
    }
    if (!c.fault().empty()) {
      bool found = false;
      std::string names;
      for (int fi = 0; fi < sc.spec.faults_size(); ++fi) {
        const std::string n = faults::FaultName(sc.spec.faults(fi), fi);
        found = found || n == c.fault();
        names += (names.empty() ? "" : ", ") + n;
      }
      if (!found) {
        return m.Error(p + ".fault", "'" + c.fault() + "' is not a fault of the scenario (" +
                                         (names.empty() ? "it has none" : names) + ")");
      }
    }
    if (c.has_flow()) FATHOM_RETURN_IF_ERROR(check_flow(p + ".flow", c.flow()));
    if (c.has_qp() && (c.qp() < 0 || c.qp() >= qps)) {
      return m.Error(p + ".qp", "QP " + std::to_string(c.qp()) + " does not exist: each flow has " +
                                    std::to_string(qps));
    }
    FATHOM_RETURN_IF_ERROR(CheckBounds(m, p, c.has_equal(), c.has_at_least(), c.at_least(),
                                       c.has_at_most(), c.at_most()));
  }
  for (const auto& [reason, b] : e.drops()) {
    const std::string p = "expect.drops[" + reason + "]";
    if (!IsDropReason(reason)) {
      std::string names;
      for (int i = 0; i < static_cast<int>(DropReason::kCount); ++i) {
        if (!IsDropReasonValue(i)) continue;
        names +=
            std::string(names.empty() ? "" : ", ") + DropReasonName(static_cast<DropReason>(i));
      }
      return m.Error(p, "'" + reason + "' is not a drop reason (" + names + ")");
    }
    FATHOM_RETURN_IF_ERROR(CheckBounds(m, p, b.has_equal(), b.has_at_least(), b.at_least(),
                                       b.has_at_most(), b.at_most()));
  }
  return CheckTime(m, "expect.first_error_us", e.first_error_us());
}

void CheckSignature(const proto::ExpectSpec& e, const RunReport& r, std::vector<std::string>* out,
                    std::vector<bool>* accepted_failed, std::vector<bool>* accepted_stalled) {
  const std::string miss = "expectation not met: ";
  accepted_failed->assign(r.flow_table.size(), false);
  accepted_stalled->assign(r.flow_table.size(), false);
  for (int i = 0; i < e.flows_size(); ++i) {
    const proto::FlowExpect& f = e.flows(i);
    const std::string p = "flows[" + std::to_string(i) + "]";
    for (const FlowReport& row : r.flow_table) {
      if (!FlowMatches(f, row)) continue;
      const std::string at = miss + p + " (" + FlowLabel(row) + ")";
      const size_t idx = static_cast<size_t>(row.index);
      if (f.status() == "failed" || !f.first_error().empty() || f.first_error_us().has_value()) {
        (*accepted_failed)[idx] = true;
      }
      if (f.status() == "stalled") (*accepted_stalled)[idx] = true;
      if (!f.status().empty() && f.status() != row.status) {
        out->push_back(at + ": status: expected " + f.status() + ", got " + row.status);
      }
      if (!f.first_error().empty() && f.first_error() != row.first_error) {
        out->push_back(at + ": first_error: expected " + f.first_error() + ", got " +
                       (row.first_error.empty() ? "none" : row.first_error));
      }
      if (std::string m = MissTime(f.first_error_us(), row.first_error_ns); !m.empty()) {
        out->push_back(at + ": first_error_us: " + m);
      }
      if (f.has_fct_at_least_us() || f.has_fct_at_most_us()) {
        const double fct_us = row.fct_ns / 1e3;
        if (row.fct_ns < 0) {
          out->push_back(at + ": fct: expected a completion time, got none (" + row.status + ")");
        } else if (f.has_fct_at_least_us() && fct_us < f.fct_at_least_us()) {
          out->push_back(at + ": fct: expected at least " + Num(f.fct_at_least_us()) + " us, got " +
                         Num(fct_us) + " us");
        } else if (f.has_fct_at_most_us() && fct_us > f.fct_at_most_us()) {
          out->push_back(at + ": fct: expected at most " + Num(f.fct_at_most_us()) + " us, got " +
                         Num(fct_us) + " us");
        }
      }
    }
  }
  for (int i = 0; i < e.qps_size(); ++i) {
    const proto::QpExpect& q = e.qps(i);
    const std::string p = "qps[" + std::to_string(i) + "]";
    if (q.flow() < 0 || static_cast<size_t>(q.flow()) >= r.flow_table.size()) continue;
    const FlowReport& row = r.flow_table[static_cast<size_t>(q.flow())];
    if (q.qp() < 0 || static_cast<size_t>(q.qp()) >= row.qps.size()) continue;
    const QpReport& qr = row.qps[static_cast<size_t>(q.qp())];
    char qpn[16];
    std::snprintf(qpn, sizeof(qpn), "0x%x", qr.qpn);
    const std::string at =
        miss + p + " (" + FlowLabel(row) + " qp " + std::to_string(q.qp()) + " qpn " + qpn + ")";
    if (!q.first_error().empty() && q.first_error() != "none") {
      (*accepted_failed)[static_cast<size_t>(q.flow())] = true;
    }
    const std::string got_error = qr.first_error.empty() ? "none" : qr.first_error;
    if (!q.first_error().empty() && q.first_error() != got_error) {
      out->push_back(at + ": first_error: expected " + q.first_error() + ", got " + got_error);
    }
    if (std::string m = MissTime(q.first_error_us(), qr.first_error_ns); !m.empty()) {
      out->push_back(at + ": first_error_us: " + m);
    }
    if (!q.state().empty() && q.state() != qr.state) {
      out->push_back(at + ": state: expected " + q.state() + ", got " + qr.state);
    }
  }
  for (int i = 0; i < e.counters_size(); ++i) {
    const proto::CounterExpect& c = e.counters(i);
    const CounterKind kind = KindOf(c);
    uint64_t got = 0;
    std::string scope = "the whole fabric";
    if (kind == CounterKind::kQp) {
      for (const FlowReport& row : r.flow_table) {
        if (c.has_flow() && row.index != c.flow()) continue;
        for (const QpReport& qr : row.qps) {
          if (c.has_qp() && qr.qp != c.qp()) continue;
          // A QP pair's counters are both ends'; a host's, its QPs' at either end.
          if (c.node().empty() || qr.host == c.node()) got += QpValue(qr.requester, c.name());
          if (c.node().empty() || qr.peer_host == c.node()) got += QpValue(qr.responder, c.name());
        }
      }
      if (c.has_flow()) {
        scope = "flow " + std::to_string(c.flow()) +
                (c.has_qp() ? " qp " + std::to_string(c.qp()) : std::string());
      }
      if (!c.node().empty()) scope = "host " + c.node();
    } else if (kind == CounterKind::kPort) {
      for (const PortReport& pr : r.ports) {
        if (!c.port().empty() && c.port() != pr.node + ":" + std::to_string(pr.index)) continue;
        if (!c.node().empty() && c.node() != pr.node) continue;
        if (!c.ports().empty() && fnmatch(c.ports().c_str(), pr.name.c_str(), 0) != 0) continue;
        got += PortValue(pr.counters, c.name());
      }
      if (!c.port().empty()) scope = "port " + c.port();
      if (!c.node().empty()) scope = "node " + c.node();
      if (!c.ports().empty()) scope = "ports " + c.ports();
    } else if (kind == CounterKind::kFault) {
      for (const FaultStats& fs : r.fault_stats) {
        if (c.fault().empty() || c.fault() == fs.name) got += FaultValue(fs.counters, c.name());
      }
      if (!c.fault().empty()) scope = "fault " + c.fault();
    }
    const std::string m = MissBound(c.has_equal(), c.equal(), c.has_at_least(), c.at_least(),
                                    c.has_at_most(), c.at_most(), got);
    if (!m.empty()) {
      out->push_back(miss + "counters[" + std::to_string(i) + "] " + c.name() + " at " + scope +
                     ": " + m);
    }
  }
  for (const auto& [reason, b] : e.drops()) {
    auto it = r.drops.find(reason);
    const uint64_t got = it == r.drops.end() ? 0 : it->second;
    const std::string m = MissBound(b.has_equal(), b.equal(), b.has_at_least(), b.at_least(),
                                    b.has_at_most(), b.at_most(), got);
    if (!m.empty()) out->push_back(miss + "drops." + reason + ": " + m);
  }
  if (e.has_no_error_surfaced()) {
    std::string errors;
    for (const auto& [name, n] : r.completion_statuses) {
      if (name == WcStatusName(WcStatus::kSuccess)) continue;
      errors += (errors.empty() ? "" : ", ") + name + "=" + std::to_string(n);
    }
    if (e.no_error_surfaced() && !errors.empty()) {
      out->push_back(miss + "no_error_surfaced: expected no error completion, got " + errors);
    } else if (!e.no_error_surfaced() && errors.empty()) {
      out->push_back(miss + "no_error_surfaced: false: expected an error completion, got none");
    }
  }
  if (std::string m = MissTime(e.first_error_us(), r.first_error_ns); !m.empty()) {
    out->push_back(miss + "first_error_us: " + m);
  }
}

Status CheckExpectReferences(const LoadedScenario& sc, const RunReport& r) {
  const proto::ExpectSpec& e = sc.spec.expect();
  for (int i = 0; i < e.flows_size(); ++i) {
    const proto::FlowExpect& f = e.flows(i);
    if (f.has_flow()) continue;
    bool any = false;
    for (const FlowReport& row : r.flow_table) any = any || FlowMatches(f, row);
    if (!any) {
      const std::string p = "expect.flows[" + std::to_string(i) + "]";
      return sc.map.Error(f.src().empty() ? p + ".dst" : p + ".src",
                          "no flow of this run goes " + (f.src().empty() ? "*" : f.src()) + " -> " +
                              (f.dst().empty() ? "*" : f.dst()) +
                              " (see the flow table: fathom sim --flows-out FILE.csv)");
    }
  }
  return Status::Ok();
}

}  // namespace fathom::sim

namespace fathom::sim {

Status ValidateTimeExpect(const config::SourceMap& m, const std::string& path,
                          const proto::TimeExpect& t) {
  return CheckTime(m, path, t);
}

std::string MissTimeUs(const proto::TimeExpect& t, double got_us) {
  return MissTime(t, got_us < 0 ? -1 : got_us * 1e3);
}

std::string UsText(double us) { return Num(us); }

}  // namespace fathom::sim
