#include "fabric/scenario/scenario.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <tuple>

#include "base/verbs_types.h"
#include "fabric/scenario/capture.h"
#include "fabric/scenario/congestion_spec.h"
#include "fabric/scenario/event_trace.h"
#include "fabric/scenario/expect.h"
#include "fabric/scenario/fault_attach.h"
#include "fabric/scenario/network_config.h"
#include "fabric/scenario/pfc_field.h"
#include "fabric/scenario/qos.h"
#include "fabric/scenario/receive.h"
#include "fabric/scenario/training_spec.h"
#include "fabric/scenario/workload.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"
#include "faults/spec.h"
#include "topologies/spec.h"

namespace fathom::sim {
namespace {

constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 30;
// Virtual time is int64 picoseconds (9.22e18 ps, ~106 days). Every time in a
// scenario, and every sum of them the run forms (start + jitter + a flow's
// own start), must stay below this many microseconds (~104 days), the same
// bound the fault timeline uses.
constexpr double kMaxTimeUs = 9.0e12;
// Bounds on what a workload may ask the driver to allocate: 1 TiB per flow,
// 2^20 flows (an all-to-all of 1024 hosts), 2^21 connections (flows x
// qps_per_connection), and 2^23 - 1 work requests in all (FlowDriver posts
// every WR of a flow when it starts, and a flow's WR count must fit the 23
// bits its wr_id layout gives it).
constexpr uint64_t kMaxFlowBytes = uint64_t{1} << 40;
constexpr int64_t kMaxFlows = int64_t{1} << 20;
constexpr int64_t kMaxConnections = int64_t{1} << 21;
constexpr int64_t kMaxWorkRequests = (int64_t{1} << 23) - 1;
constexpr uint64_t kMaxSwitchBufferBytes = uint64_t{1} << 40;
// FlowDriver splits a flow into WRs of at most 2^30 bytes.
constexpr uint64_t kMaxWrBytes = uint64_t{1} << 30;

bool IsWcStatusName(const std::string& name) {
  for (int s = 0; s <= static_cast<int>(WcStatus::kGeneralErr); ++s) {
    if (WcStatusName(static_cast<WcStatus>(s)) == name) return true;
  }
  return false;
}

// Host rank of a host node name, or an error placed on `path`.
StatusOr<int32_t> HostRank(const LoadedScenario& sc, const std::string& name,
                           const std::string& path) {
  auto node = sc.topology.FindNode(name);
  if (!node.ok() || sc.topology.node(*node).kind != topo::NodeKind::kHost) {
    return sc.map.Error(path, "'" + name + "' is not a host of topology '" + sc.topology.name() +
                                  "' (hosts are h0..h" +
                                  std::to_string(sc.topology.hosts().size() - 1) + ")");
  }
  return sc.topology.HostRank(*node);
}

Status CheckRange(const config::SourceMap& map, const std::string& path, int64_t v, int64_t lo,
                  int64_t hi) {
  if (v < lo || v > hi) {
    return map.Error(path, std::to_string(v) + " is out of range " + std::to_string(lo) + ".." +
                               std::to_string(hi));
  }
  return Status::Ok();
}

std::string Us(double us) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%g us", us);
  return buf;
}

// A time in microseconds: finite, >= 0, and representable in picoseconds.
Status CheckTimeUs(const config::SourceMap& map, const std::string& path, double us) {
  if (!std::isfinite(us) || us < 0 || us > kMaxTimeUs) {
    return map.Error(path, Us(us) + " must be a finite time in [0, 9e12] us (virtual time is " +
                               "int64 picoseconds, ~106 days)");
  }
  return Status::Ok();
}

Status CheckFlowBytes(const config::SourceMap& map, const std::string& path, uint64_t bytes) {
  if (bytes > kMaxFlowBytes) {
    return map.Error(
        path, std::to_string(bytes) + " bytes is more than a flow may move (2^40, " + "1 TiB)");
  }
  return Status::Ok();
}

// How many work requests FlowDriver will post for one flow of `bytes`.
int64_t WorkRequests(uint64_t bytes, int64_t qps, uint64_t message_bytes) {
  const uint64_t chunk = message_bytes == 0 ? kMaxWrBytes : std::min(message_bytes, kMaxWrBytes);
  // Each QP posts at least one WR; the rest is ceil(bytes / chunk) at most
  // one more per QP for the split's remainders.
  return qps + static_cast<int64_t>(bytes / chunk);
}

// Counts what the workload will allocate, before RunScenario does.
Status CheckWorkloadSize(const LoadedScenario& sc, int64_t hosts) {
  const proto::Scenario& s = sc.spec;
  const config::SourceMap& m = sc.map;
  const proto::WorkloadSpec& w = s.workload();
  const proto::TransportSpec& t = s.transport();
  const int64_t qps = t.has_qps_per_connection() ? t.qps_per_connection() : 1;
  const uint64_t message_bytes = t.has_message_bytes() ? t.message_bytes() : 0;
  int64_t flows = 0;
  int64_t wrs = 0;
  switch (w.pattern()) {
    case proto::WorkloadSpec::PATTERN_PERMUTATION:
      flows = hosts;
      break;
    case proto::WorkloadSpec::PATTERN_ALL_TO_ALL:
      flows = hosts * (hosts - 1);
      break;
    case proto::WorkloadSpec::PATTERN_INCAST:
      flows = w.incast_senders() == 0 ? hosts - 1 : w.incast_senders();
      break;
    default:
      flows = w.flows_size();
      for (const proto::FlowSpec& f : w.flows()) {
        wrs += WorkRequests(f.bytes() != 0 ? f.bytes() : w.flow_bytes(), qps, message_bytes);
      }
  }
  const std::string what =
      flows == w.flows_size() && !w.flows().empty() ? "workload.flows" : "workload.pattern";
  if (flows > kMaxFlows) {
    return m.Error(what, std::to_string(flows) + " flows on " + std::to_string(hosts) +
                             " hosts; at most 2^20 (1048576) are supported");
  }
  if (flows * qps > kMaxConnections) {
    return m.Error("transport.qps_per_connection",
                   std::to_string(flows) + " flows x " + std::to_string(qps) + " QPs = " +
                       std::to_string(flows * qps) + " connections; at most 2^21 (2097152)");
  }
  if (w.pattern() != proto::WorkloadSpec::PATTERN_FLOWS) {
    wrs = flows * WorkRequests(w.flow_bytes(), qps, message_bytes);
  }
  if (wrs > kMaxWorkRequests) {
    return m.Error(
        t.has_message_bytes() ? "transport.message_bytes" : "workload.flow_bytes",
        "the flows need " + std::to_string(wrs) +
            " work requests in all; at most 2^23 - 1 (8388607): fewer or smaller flows," +
            " or larger transport.message_bytes");
  }
  return Status::Ok();
}

Status Validate(const LoadedScenario& sc) {
  const proto::Scenario& s = sc.spec;
  const config::SourceMap& m = sc.map;
  // 1e-6 us is one picosecond, the engine's tick.
  if (!std::isfinite(s.end_time_us()) || !(s.end_time_us() >= 1e-6) ||
      s.end_time_us() > kMaxTimeUs) {
    return m.Error("end_time_us", Us(s.end_time_us()) +
                                      " must be a finite time in [1e-6, 9e12] us (virtual time " +
                                      "is int64 picoseconds, ~106 days)");
  }
  const proto::TransportSpec& t = s.transport();
  if (t.has_ib_timeout())
    FATHOM_RETURN_IF_ERROR(CheckRange(m, "transport.ib_timeout", t.ib_timeout(), 0, 31));
  if (t.has_retry_cnt())
    FATHOM_RETURN_IF_ERROR(CheckRange(m, "transport.retry_cnt", t.retry_cnt(), 0, 7));
  if (t.has_rnr_retry())
    FATHOM_RETURN_IF_ERROR(CheckRange(m, "transport.rnr_retry", t.rnr_retry(), 0, 7));
  if (t.has_min_rnr_timer()) {
    FATHOM_RETURN_IF_ERROR(CheckRange(m, "transport.min_rnr_timer", t.min_rnr_timer(), 0, 31));
  }
  if (t.has_traffic_class()) {
    FATHOM_RETURN_IF_ERROR(CheckRange(m, "transport.traffic_class", t.traffic_class(), 0, 255));
  }
  if (t.has_qps_per_connection()) {
    FATHOM_RETURN_IF_ERROR(
        CheckRange(m, "transport.qps_per_connection", t.qps_per_connection(), 1, 64));
  }
  if (t.has_max_rd_atomic()) {
    FATHOM_RETURN_IF_ERROR(CheckRange(m, "transport.max_rd_atomic", t.max_rd_atomic(), 1, 16));
  }
  if (t.has_mtu_bytes() && MtuBytesToEnum(t.mtu_bytes()) <= 0) {
    return m.Error("transport.mtu_bytes", std::to_string(t.mtu_bytes()) +
                                              " is not a verbs MTU (256, 512, 1024, 2048, 4096)");
  }
  if (!t.nic_profile().empty() && !NicProfileNamed(t.nic_profile()).ok()) {
    return m.Error("transport.nic_profile",
                   "'" + t.nic_profile() + "' is not one of " + std::string(NicProfileNames()));
  }
  if (!t.opcode().empty() && t.opcode() != "write" && t.opcode() != "send" &&
      t.opcode() != "read") {
    return m.Error("transport.opcode", "'" + t.opcode() + "' is not one of write, send, read");
  }
  if (t.has_message_bytes() && (t.message_bytes() == 0 || t.message_bytes() > kMaxMessageBytes)) {
    return m.Error("transport.message_bytes",
                   std::to_string(t.message_bytes()) + " must be between 1 and 2^30");
  }
  const proto::NetworkSpec& n = s.network();
  if (n.has_switch_buffer_bytes() && n.switch_buffer_bytes() < 9216) {
    return m.Error("network.switch_buffer_bytes",
                   std::to_string(n.switch_buffer_bytes()) + " cannot hold one jumbo frame (9216)");
  }
  if (n.has_switch_buffer_bytes() && n.switch_buffer_bytes() > kMaxSwitchBufferBytes) {
    return m.Error("network.switch_buffer_bytes",
                   std::to_string(n.switch_buffer_bytes()) + " is more than 2^40 bytes (1 TiB)");
  }
  if (n.has_qos()) FATHOM_RETURN_IF_ERROR(ValidateQos(n.qos(), sc.topology, m));
  FATHOM_RETURN_IF_ERROR(ValidatePfcField(s, m));
  const proto::WorkloadSpec& w = s.workload();
  const int32_t hosts = static_cast<int32_t>(sc.topology.hosts().size());
  if (w.pattern() == proto::WorkloadSpec::PATTERN_UNSPECIFIED) {
    return m.Error("workload.pattern",
                   "must be permutation, all_to_all, incast, flows or training");
  }
  // A training loop (issue 27) is fathom coll's: its own checks, then the
  // rest of the file's.
  const bool training = w.pattern() == proto::WorkloadSpec::PATTERN_TRAINING;
  if (training) FATHOM_RETURN_IF_ERROR(ValidateTraining(sc));
  FATHOM_RETURN_IF_ERROR(ValidateCollExpect(sc));
  FATHOM_RETURN_IF_ERROR(ValidateIterationFaults(sc));
  if (hosts < 2) return m.Error("topology", "needs at least 2 hosts for a workload");
  FATHOM_RETURN_IF_ERROR(CheckTimeUs(m, "workload.start_us", w.start_us()));
  FATHOM_RETURN_IF_ERROR(CheckTimeUs(m, "workload.start_jitter_us", w.start_jitter_us()));
  if (w.start_us() + w.start_jitter_us() > kMaxTimeUs) {
    return m.Error("workload.start_jitter_us",
                   "start_us + start_jitter_us = " + Us(w.start_us() + w.start_jitter_us()) +
                       " is beyond 9e12 us");
  }
  FATHOM_RETURN_IF_ERROR(CheckFlowBytes(m, "workload.flow_bytes", w.flow_bytes()));
  if (w.pattern() == proto::WorkloadSpec::PATTERN_FLOWS) {
    if (w.flows_size() == 0) return m.Error("workload.flows", "pattern flows needs a flows list");
    for (int i = 0; i < w.flows_size(); ++i) {
      const std::string p = "workload.flows[" + std::to_string(i) + "]";
      const proto::FlowSpec& f = w.flows(i);
      FATHOM_ASSIGN_OR_RETURN(int32_t src, HostRank(sc, f.src(), p + ".src"));
      FATHOM_ASSIGN_OR_RETURN(int32_t dst, HostRank(sc, f.dst(), p + ".dst"));
      if (src == dst) return m.Error(p + ".dst", "a flow cannot go from a host to itself");
      if (f.bytes() == 0 && w.flow_bytes() == 0) {
        return m.Error(p + ".bytes", "no size: set bytes or workload.flow_bytes");
      }
      FATHOM_RETURN_IF_ERROR(CheckTimeUs(m, p + ".start_us", f.start_us()));
      if (w.start_us() + w.start_jitter_us() + f.start_us() > kMaxTimeUs) {
        return m.Error(p + ".start_us", "workload.start_us + start_jitter_us + this = " +
                                            Us(w.start_us() + w.start_jitter_us() + f.start_us()) +
                                            " is beyond 9e12 us");
      }
      FATHOM_RETURN_IF_ERROR(CheckFlowBytes(m, p + ".bytes", f.bytes()));
    }
  } else if (!training) {
    if (w.flows_size() > 0) return m.Error("workload.flows", "only with pattern: flows");
    if (w.flow_bytes() == 0) return m.Error("workload.flow_bytes", "must be > 0");
  }
  if (w.pattern() == proto::WorkloadSpec::PATTERN_INCAST) {
    if (!w.incast_target().empty()) {
      FATHOM_RETURN_IF_ERROR(HostRank(sc, w.incast_target(), "workload.incast_target").status());
    }
    if (w.incast_senders() < 0 || w.incast_senders() > hosts - 1) {
      return m.Error("workload.incast_senders", std::to_string(w.incast_senders()) +
                                                    " senders, but only " +
                                                    std::to_string(hosts - 1) + " other hosts");
    }
  }
  for (const auto& [name, count] : s.expect().completion_statuses()) {
    if (!IsWcStatusName(name)) {
      return m.Error("expect.completion_statuses[" + name + "]",
                     "'" + name + "' is not an ibv_wc_status name (e.g. IBV_WC_RETRY_EXC_ERR)");
    }
  }
  FATHOM_RETURN_IF_ERROR(CheckWorkloadSize(sc, hosts));
  FATHOM_RETURN_IF_ERROR(ValidateReceiveSide(s, sc.topology, m, kMaxTimeUs));
  for (const auto& [field, has, value] :
       {std::tuple{"expect.flows_completed", s.expect().has_flows_completed(),
                   s.expect().flows_completed()},
        std::tuple{"expect.flows_failed", s.expect().has_flows_failed(), s.expect().flows_failed()},
        std::tuple{"expect.flows_stalled", s.expect().has_flows_stalled(),
                   s.expect().flows_stalled()}}) {
    if (has && value < 0) return m.Error(field, "must not be negative");
  }
  FATHOM_RETURN_IF_ERROR(ValidateCongestion(s, sc.topology, m));
  // The fault timeline is checked again when it is attached (with any
  // --fault flags); checking it here puts its errors with the others.
  FATHOM_RETURN_IF_ERROR(faults::ValidateFaults(s.faults(), "faults", m));
  return ValidateExpect(sc, -1, t.has_qps_per_connection() ? t.qps_per_connection() : 1);
}

StatusOr<LoadedScenario> Finish(LoadedScenario sc) {
  auto topo = topo::BuildTopology(sc.spec.topology(), &sc.map, "topology");
  if (!topo.ok()) return topo.status();
  sc.topology = std::move(topo).value();
  FATHOM_RETURN_IF_ERROR(Validate(sc));
  return sc;
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  idx = idx == 0 ? 0 : idx - 1;
  return sorted[std::min(idx, sorted.size() - 1)];
}

struct Progress {
  std::chrono::steady_clock::time_point start;
  double end_ns;
  static void Print(void* ctx, const Engine& e) {
    auto* self = static_cast<Progress*>(ctx);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - self->start).count();
    std::fprintf(stderr, "\r[sim] %10.3f us of %.3f us  %6.2f M events/s   ", e.Now().us(),
                 self->end_ns / 1e3, wall > 0 ? e.events_dispatched() / wall / 1e6 : 0.0);
  }
};

// The per-flow table: outcome, times, QPs and their counters.
void FillFlowTable(const LoadedScenario& sc, Network& net, const FlowDriver& driver, RunReport* r) {
  const std::vector<Flow>& flows = driver.flows();
  const auto host_name = [&](int32_t rank) {
    return sc.topology.node(sc.topology.hosts()[static_cast<size_t>(rank)]).name;
  };
  r->flow_table.resize(flows.size());
  for (size_t i = 0; i < flows.size(); ++i) {
    const FlowResult& fr = driver.results()[i];
    FlowReport& row = r->flow_table[i];
    row.index = static_cast<int32_t>(i);
    row.src = host_name(flows[i].src);
    row.dst = host_name(flows[i].dst);
    row.bytes = flows[i].bytes;
    row.start_ns = flows[i].start.ns();
    row.status = fr.state == FlowState::kDone     ? "completed"
                 : fr.state == FlowState::kFailed ? "failed"
                                                  : "stalled";
    if (fr.state != FlowState::kPending) row.end_ns = fr.end.ns();
    if (fr.state == FlowState::kDone) row.fct_ns = (fr.end - flows[i].start).ns();
  }
  for (const FlowDriver::QpInfo& q : driver.Qps()) {
    FlowReport& row = r->flow_table[static_cast<size_t>(q.flow)];
    QpReport qr;
    qr.qp = static_cast<int32_t>(row.qps.size());
    qr.qpn = q.req_qpn;
    qr.peer_qpn = q.resp_qpn;
    qr.host = host_name(q.requester);
    qr.peer_host = host_name(q.responder);
    const Nic& req = net.nic(q.requester);
    if (auto st = req.GetQpState(q.req_qpn); st.ok()) qr.state = std::string(QpStateName(*st));
    if (auto c = req.GetQpCounters(q.req_qpn); c.ok()) qr.requester = *c;
    if (auto c = net.nic(q.responder).GetQpCounters(q.resp_qpn); c.ok()) qr.responder = *c;
    if (auto d = req.GetQpDcqcnStats(q.req_qpn); d.ok() && d->cnp_seen) {
      qr.dcqcn = true;
      qr.dcqcn_rate_gbps = d->rate_bps / 1e9;
      qr.dcqcn_min_gbps = d->min_bps / 1e9;
      qr.dcqcn_mean_gbps = d->mean_bps / 1e9;
      qr.dcqcn_cuts = d->cuts;
    }
    if (q.errored) {
      qr.first_error = std::string(WcStatusName(q.first_error));
      qr.first_error_ns = q.first_error_time.ns();
      // The flow's first error is its QPs' earliest.
      if (row.first_error_ns < 0 || qr.first_error_ns < row.first_error_ns) {
        row.first_error = qr.first_error;
        row.first_error_ns = qr.first_error_ns;
      }
      if (r->first_error_ns < 0 || qr.first_error_ns < r->first_error_ns) {
        r->first_error_ns = qr.first_error_ns;
      }
    }
    row.retransmissions += qr.requester.retransmitted_packets;
    row.qps.push_back(std::move(qr));
  }
  for (size_t i = 0; i < flows.size(); ++i) {
    // A post that failed fails its flow without a completion.
    const FlowResult& fr = driver.results()[i];
    FlowReport& row = r->flow_table[i];
    if (fr.state == FlowState::kFailed && row.first_error.empty()) {
      row.first_error = std::string(WcStatusName(fr.first_error));
      row.first_error_ns = fr.end.ns();
      if (r->first_error_ns < 0 || row.first_error_ns < r->first_error_ns) {
        r->first_error_ns = row.first_error_ns;
      }
    }
  }
}

void FillFaultStats(const proto::Scenario& s, FaultAttachment* faults, Picoseconds now,
                    RunReport* r) {
  const std::vector<FaultAttachment::FaultReport> rows = faults->Report(now);
  for (size_t i = 0; i < rows.size(); ++i) {
    FaultStats fs{rows[i].name, rows[i].kind, rows[i].target, rows[i].attachments,
                  rows[i].counters};
    if (i < static_cast<size_t>(s.faults_size())) {
      const faults::Window w = faults::WindowOf(s.faults(static_cast<int>(i)));
      const Picoseconds until = std::min(w.end, now);
      if (until > w.start) fs.active_ns = (until - w.start).ns();
    }
    r->fault_stats.push_back(std::move(fs));
  }
}

}  // namespace

std::string ReportPortName(const topo::Topology& topology, int32_t node, int32_t port) {
  const int32_t peer = topology.Peer(node, port).node;
  std::string name = topology.node(node).name + "->" + topology.node(peer).name;
  for (int32_t p = 0; p < topology.PortCount(node); ++p) {
    if (p != port && topology.Peer(node, p).node == peer) return name + "#" + std::to_string(port);
  }
  return name;
}

StatusOr<LoadedScenario> LoadScenario(const std::string& path) {
  LoadedScenario sc;
  sc.path = path;
  sc.map = config::SourceMap(path);
  config::YamlLoadOptions opts;
  opts.source_map = &sc.map;
  FATHOM_RETURN_IF_ERROR(config::LoadYamlFile(path, &sc.spec, opts));
  return Finish(std::move(sc));
}

StatusOr<LoadedScenario> LoadScenarioString(const std::string& text, const std::string& name) {
  LoadedScenario sc;
  sc.path = name;
  sc.map = config::SourceMap(name);
  config::YamlLoadOptions opts;
  opts.source_map = &sc.map;
  FATHOM_RETURN_IF_ERROR(config::LoadYamlString(text, name, &sc.spec, opts));
  return Finish(std::move(sc));
}

StatusOr<RunReport> RunScenario(const LoadedScenario& sc, const RunOptions& options) {
  const proto::Scenario& s = sc.spec;
  // Captures first: a bad link name or an unwritable path costs nothing.
  std::vector<std::unique_ptr<PortCapture>> own_captures;
  std::vector<PortCapture*> captures = options.open_captures;
  for (const auto& [what, path] : options.captures) {
    FATHOM_ASSIGN_OR_RETURN(auto cap, PortCapture::Open(sc.topology, what, path));
    captures.push_back(cap.get());
    own_captures.push_back(std::move(cap));
  }
  FATHOM_RETURN_IF_ERROR(CheckDisjoint(captures, sc.topology));
  // What only fathom coll runs or checks (training_spec.h).
  if (s.workload().pattern() == proto::WorkloadSpec::PATTERN_TRAINING) {
    return sc.map.Error(
        "workload.pattern",
        "training runs on the collectives: fathom coll train --scenario " + sc.path);
  }
  if (const std::string f = CollOnlyExpectField(s.expect()); !f.empty()) {
    return sc.map.Error(f, "is checked by fathom coll --scenario, not fathom sim");
  }
  const uint64_t seed = options.seed.value_or(s.seed() == 0 ? 1 : s.seed());
  Engine engine(seed);
  if (options.hooks != nullptr) engine.set_canonical_order(true);
  // The workload's flows, ahead of the network: a distributed run's
  // partition weighs the hosts they use (RunHooks::OnFlows).
  const proto::WorkloadSpec& w = s.workload();
  const int32_t hosts = static_cast<int32_t>(sc.topology.hosts().size());
  const Picoseconds start = Picoseconds::FromSeconds(w.start_us() * 1e-6);
  Rng rng = engine.MakeRng(0xF1085);
  std::vector<Flow> flows;
  switch (w.pattern()) {
    case proto::WorkloadSpec::PATTERN_PERMUTATION:
      flows = PermutationFlows(hosts, w.flow_bytes(), start, rng);
      break;
    case proto::WorkloadSpec::PATTERN_ALL_TO_ALL:
      flows = AllToAllFlows(hosts, w.flow_bytes(), start);
      break;
    case proto::WorkloadSpec::PATTERN_INCAST: {
      int32_t target = 0;
      if (!w.incast_target().empty()) {
        FATHOM_ASSIGN_OR_RETURN(target, HostRank(sc, w.incast_target(), "workload.incast_target"));
      }
      flows = IncastFlows(hosts, target, w.incast_senders() == 0 ? hosts - 1 : w.incast_senders(),
                          w.flow_bytes(), start);
      break;
    }
    default:
      for (int i = 0; i < w.flows_size(); ++i) {
        const proto::FlowSpec& f = w.flows(i);
        const std::string p = "workload.flows[" + std::to_string(i) + "]";
        FATHOM_ASSIGN_OR_RETURN(int32_t src, HostRank(sc, f.src(), p + ".src"));
        FATHOM_ASSIGN_OR_RETURN(int32_t dst, HostRank(sc, f.dst(), p + ".dst"));
        flows.push_back(Flow{src, dst, f.bytes() != 0 ? f.bytes() : w.flow_bytes(),
                             start + Picoseconds::FromSeconds(f.start_us() * 1e-6)});
      }
  }
  if (w.start_jitter_us() > 0) {
    const int64_t jitter_ps = Picoseconds::FromSeconds(w.start_jitter_us() * 1e-6).ps();
    for (Flow& f : flows)
      f.start += Picoseconds(static_cast<int64_t>(rng.Below(static_cast<uint64_t>(jitter_ps) + 1)));
  }
  if (options.hooks != nullptr) options.hooks->OnFlows(flows);
  // The same fabric `fathom coll --scenario` builds from this scenario.
  FATHOM_ASSIGN_OR_RETURN(const NetworkConfig nc, ScenarioNetworkConfig(s));
  Network net(&engine, &sc.topology, nc);
  if (options.hooks != nullptr) FATHOM_RETURN_IF_ERROR(options.hooks->OnNetwork(net));
  // The captures tap the network's ports: they let go before it goes.
  struct DetachCaptures {
    const std::vector<PortCapture*>& captures;
    ~DetachCaptures() {
      for (PortCapture* cap : captures) cap->Detach();
    }
  } detach_captures{captures};

  std::unique_ptr<FaultAttachment> faults;
  if (s.faults_size() > 0) {
    FATHOM_ASSIGN_OR_RETURN(faults, FaultAttachment::Attach(&net, s.faults(), seed, sc.map));
  }
  // PFC watchdog, deadlock check and storms (off without a lossless class).
  PfcFieldOptions pfc_options = PfcFieldOptionsOf(s, nc.qos);
  // A distributed run (hooks) checks for a deadlock only when the scenario
  // expects an outcome: its checks gather every process's ports at the
  // windows' ends (PfcField::Split), a cost the other runs need not pay.
  if (options.hooks != nullptr && !s.expect().has_pfc_deadlock() &&
      s.expect().pfc_deadlock_cycle().empty()) {
    pfc_options.detect_deadlock = false;
  }
  PfcField pfc_field(&net, pfc_options);
  AttachPfcStorms(s, sc.topology, &pfc_field);
  if (options.hooks != nullptr) options.hooks->OnPfcField(&pfc_field);
  pfc_field.Start();

  const proto::TransportSpec& t = s.transport();
  FlowOptions fo;
  fo.qp.path_mtu_bytes = t.has_mtu_bytes() ? t.mtu_bytes() : 4096;
  fo.qp.timeout = t.has_ib_timeout() ? t.ib_timeout() : 20;
  fo.qp.retry_cnt = t.has_retry_cnt() ? t.retry_cnt() : 7;
  fo.qp.rnr_retry = t.has_rnr_retry() ? t.rnr_retry() : 7;
  fo.qp.min_rnr_timer = t.has_min_rnr_timer() ? t.min_rnr_timer() : 12;
  fo.qp.max_rd_atomic = t.has_max_rd_atomic() ? t.max_rd_atomic() : 16;
  fo.qp.traffic_class = static_cast<uint8_t>(t.has_traffic_class() ? t.traffic_class() : 0);
  fo.qp.rxe_infinite_retry = t.rxe_infinite_retry();
  fo.qps_per_connection = t.has_qps_per_connection() ? t.qps_per_connection() : 1;
  fo.op = t.opcode() == "send"   ? FlowOp::kSend
          : t.opcode() == "read" ? FlowOp::kRead
                                 : FlowOp::kWrite;
  fo.message_bytes = t.has_message_bytes() ? t.message_bytes() : 0;
  // The receive side (receive.h): per-flow plans only for the flows list.
  fo.receive = ToReceivePlan(w.receive());
  if (w.pattern() == proto::WorkloadSpec::PATTERN_FLOWS) {
    for (const proto::FlowSpec& f : w.flows()) {
      fo.flow_receive.push_back(f.has_receive() ? ToReceivePlan(f.receive()) : fo.receive);
    }
  }
  fo.not_ready = ToNotReadyWindows(w, sc.topology);
  FlowDriver driver(&net, flows, fo);
  FATHOM_RETURN_IF_ERROR(driver.Setup());
  if (options.hooks != nullptr) FATHOM_RETURN_IF_ERROR(options.hooks->OnWorkload(net, driver));

  for (PortCapture* cap : captures) cap->Attach(&net);
  const Picoseconds end = Picoseconds::FromSeconds(s.end_time_us() * 1e-6);
  Progress progress{std::chrono::steady_clock::now(), end.ns()};
  if (options.progress) engine.set_progress(&Progress::Print, &progress, 1u << 20);
  if (options.trace != nullptr) options.trace->Attach(&engine);

  const auto wall_start = std::chrono::steady_clock::now();
  if (options.hooks != nullptr) {
    options.hooks->Run(net, driver, end);
  } else {
    engine.Run(end);
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (options.progress) std::fprintf(stderr, "\r%80s\r", "");

  RunReport r;
  r.name = s.name();
  r.topology = sc.topology.name();
  r.seed = seed;
  r.hosts = hosts;
  r.flows_total = static_cast<int32_t>(flows.size());
  r.flows_completed = driver.completed();
  r.flows_failed = driver.failed();
  r.flows_stalled = r.flows_total - r.flows_completed - r.flows_failed;
  std::vector<double> fct;
  double first_start = 0, last_end = 0, rate_sum = 0;
  bool any = false;
  for (size_t i = 0; i < flows.size(); ++i) {
    const FlowResult& fr = driver.results()[i];
    if (fr.state != FlowState::kDone) continue;
    const double ns = (fr.end - flows[i].start).ns();
    fct.push_back(ns);
    r.bytes_completed += flows[i].bytes;
    if (ns > 0) rate_sum += static_cast<double>(flows[i].bytes) * 8 / ns;
    first_start = any ? std::min(first_start, flows[i].start.ns()) : flows[i].start.ns();
    last_end = any ? std::max(last_end, fr.end.ns()) : fr.end.ns();
    any = true;
  }
  std::sort(fct.begin(), fct.end());
  r.fct_p50_ns = Percentile(fct, 0.50);
  r.fct_p99_ns = Percentile(fct, 0.99);
  r.fct_max_ns = fct.empty() ? 0 : fct.back();
  if (any && last_end > first_start) {
    r.goodput_gbps = static_cast<double>(r.bytes_completed) * 8 / (last_end - first_start);
  }
  if (!fct.empty()) r.mean_flow_gbps = rate_sum / static_cast<double>(fct.size());
  if (hosts > 0 && net.topology().PortCount(net.topology().hosts()[0]) > 0) {
    r.line_rate_gbps = net.port(net.topology().hosts()[0], 0).config().rate.gbps();
  }
  for (size_t i = 0; i < static_cast<size_t>(DropReason::kCount); ++i) {
    if (net.drops().by_reason[i] > 0) {
      r.drops[DropReasonName(static_cast<DropReason>(i))] = net.drops().by_reason[i];
    }
  }
  for (const auto& port : net.ports()) {
    const PortCounters& c = port->counters();
    r.packet_hops += c.port_xmit_packets;
    const std::string name = ReportPortName(sc.topology, port->config().node, port->config().index);
    if (c.port_xmit_discards + c.mtu_discards + c.port_rcv_errors > 0) {
      r.port_drops.push_back({name, {c.port_xmit_discards, c.mtu_discards, c.port_rcv_errors}});
    }
    r.ports.push_back(
        PortReport{name, sc.topology.node(port->config().node).name, port->config().index, c});
    if (const std::optional<PfcCounters> pfc = port->pfc_counters(); pfc.has_value()) {
      r.port_pfc.push_back({name, *pfc});
    }
  }
  // Worst ports first: the summary shows the first few.
  std::stable_sort(r.port_drops.begin(), r.port_drops.end(), [](const auto& a, const auto& b) {
    return a.second[0] + a.second[1] + a.second[2] > b.second[0] + b.second[1] + b.second[2];
  });
  FillFlowTable(sc, net, driver, &r);
  const QpCounters q = net.TotalQpCounters();
  r.retransmitted_packets = q.retransmitted_packets;
  r.packet_seq_err = q.packet_seq_err;
  r.local_ack_timeout_err = q.local_ack_timeout_err;
  r.roce_adp_retrans = q.roce_adp_retrans;
  r.nic_profile = nc.nic.name;
  r.implied_nak_seq_err = q.implied_nak_seq_err;
  r.rnr_naks = q.rcvd_rnr_err;
  r.duplicate_request = q.duplicate_request;
  r.out_of_sequence = q.out_of_sequence;
  r.retry_exceeded_err = q.retry_exceeded_err;
  r.rnr_nak_retry_err = q.rnr_nak_retry_err;
  r.send_rnr_err = q.send_rnr_err;
  r.ecn_enabled = nc.ecn.enabled;
  r.dcqcn_enabled = nc.dcqcn.enabled;
  r.ecn_marked_packets = net.TotalEcnMarkedPackets();
  r.dcqcn = net.TotalDcqcnCounters();
  for (size_t st = 0; st < driver.status_counts().size(); ++st) {
    if (driver.status_counts()[st] > 0) {
      r.completion_statuses[std::string(WcStatusName(static_cast<WcStatus>(st)))] =
          driver.status_counts()[st];
    }
  }
  r.events = engine.events_dispatched();
  r.sim_time_ns = engine.Now().ns();
  r.wall_s = wall;
  r.trace_digest = engine.trace_digest();
  r.peak_packets = net.pool().peak_in_use();
  if (faults != nullptr) {
    r.faults_summary = faults->Summary(engine.Now());
    FillFaultStats(s, faults.get(), engine.Now(), &r);
  }
  pfc_field.Finish();
  r.pfc_field_summary = pfc_field.Summary();
  r.pfc_deadlock_cycle = pfc_field.CycleName();
  r.pfc_deadlock = !r.pfc_deadlock_cycle.empty();
  if (pfc_field.watchdog() != nullptr) {
    // The whole fabric's (a distributed run gathered them in Finish).
    r.pfc_watchdog_storms = pfc_field.storms_detected();
    r.pfc_watchdog_restored = pfc_field.storms_restored();
  }
  for (const PortCapture* cap : captures) r.captured_frames += cap->frames();
  for (const auto& cap : own_captures) FATHOM_RETURN_IF_ERROR(cap->Flush());
  return r;
}

std::vector<std::string> CheckExpectations(const proto::Scenario& spec, const RunReport& r) {
  std::vector<std::string> out;
  const proto::ExpectSpec& e = spec.expect();
  auto check = [&](const char* what, bool has, int64_t want, int64_t got) {
    if (has && want != got) {
      out.push_back("expectation not met: " + std::string(what) + ": expected " +
                    std::to_string(want) + ", got " + std::to_string(got));
    }
  };
  check("flows_completed", e.has_flows_completed(), e.flows_completed(), r.flows_completed);
  check("flows_failed", e.has_flows_failed(), e.flows_failed(), r.flows_failed);
  check("flows_stalled", e.has_flows_stalled(), e.flows_stalled(), r.flows_stalled);
  check("pfc_deadlock", e.has_pfc_deadlock(), e.pfc_deadlock(), r.pfc_deadlock);
  check("pfc_watchdog_storms", e.has_pfc_watchdog_storms(), e.pfc_watchdog_storms(),
        static_cast<int64_t>(r.pfc_watchdog_storms));
  check("pfc_watchdog_restored", e.has_pfc_watchdog_restored(), e.pfc_watchdog_restored(),
        static_cast<int64_t>(r.pfc_watchdog_restored));
  if (!e.pfc_deadlock_cycle().empty() && e.pfc_deadlock_cycle() != r.pfc_deadlock_cycle) {
    out.push_back("expectation not met: pfc_deadlock_cycle: expected \"" + e.pfc_deadlock_cycle() +
                  "\", got \"" + r.pfc_deadlock_cycle + "\"");
  }
  std::vector<bool> accepted_failed, accepted_stalled;
  CheckSignature(e, r, &out, &accepted_failed, &accepted_stalled);
  // A run-wide error time, or an error that must surface, expects failures.
  bool expects_errors =
      e.first_error_us().has_value() || (e.has_no_error_surfaced() && !e.no_error_surfaced());
  for (const auto& [name, want] : e.completion_statuses()) {
    if (name != WcStatusName(WcStatus::kSuccess) && want > 0) expects_errors = true;
    auto it = r.completion_statuses.find(name);
    const uint64_t got = it == r.completion_statuses.end() ? 0 : it->second;
    if (got != want) {
      out.push_back("expectation not met: completion_statuses." + name + ": expected " +
                    std::to_string(want) + ", got " + std::to_string(got));
    }
  }
  // Failed or stalled flows are what `fathom sim` exists to find: a failure
  // of the run unless the scenario says it expects them.
  // ... or names each of them in expect.flows / expect.qps.
  int32_t failed_named = 0, stalled_named = 0;
  for (size_t i = 0; i < r.flow_table.size(); ++i) {
    const std::string& st = r.flow_table[i].status;
    if (st == "failed" && accepted_failed[i]) ++failed_named;
    if (st == "stalled" && accepted_stalled[i]) ++stalled_named;
  }
  const bool all_failed_named = failed_named == r.flows_failed;
  const bool all_stalled_named = stalled_named == r.flows_stalled;
  const bool failed =
      r.flows_failed > 0 && !e.has_flows_failed() && !expects_errors && !all_failed_named;
  const bool stalled = r.flows_stalled > 0 && !e.has_flows_stalled() && !all_stalled_named;
  if (failed || stalled) {
    const std::string of = " of " + std::to_string(r.flows_total) + " flows ";
    std::string what;
    if (failed) {
      std::string errors;
      for (const auto& [name, n] : r.completion_statuses) {
        if (name == WcStatusName(WcStatus::kSuccess)) continue;
        errors += (errors.empty() ? "" : ", ") + name + "=" + std::to_string(n);
      }
      what = std::to_string(r.flows_failed) + of + "failed" +
             (errors.empty() ? "" : " (" + errors + ")");
    }
    if (stalled) {
      what += (what.empty() ? std::to_string(r.flows_stalled) + of
                            : " and " + std::to_string(r.flows_stalled) + " ") +
              "stalled (not done when the run ended)";
    }
    const std::string fields = failed && stalled ? "expect.flows_failed and expect.flows_stalled"
                               : failed          ? "expect.flows_failed"
                                                 : "expect.flows_stalled";
    out.push_back(what +
                  (spec.has_expect()
                       ? ", which the scenario's expect block does not accept (set "
                       : ", and the scenario has no expect block to accept it (set ") +
                  fields + ")");
  }
  return out;
}

StatusOr<std::vector<std::string>> CheckExpectations(const LoadedScenario& sc, const RunReport& r) {
  FATHOM_RETURN_IF_ERROR(CheckExpectReferences(sc, r));
  return CheckExpectations(sc.spec, r);
}

}  // namespace fathom::sim
