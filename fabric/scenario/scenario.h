// Scenarios: load a YAML scenario (proto/scenario.proto) with the shared
// loader, check it (errors name file:line and field), build the topology,
// network, workload and fault timeline, run it in virtual time, and report
// what happened — the engine of `fathom sim`, also used by tests and bench.
//
// Ownership: LoadedScenario is a value; RunScenario builds and destroys its
// whole world per call, so runs are independent and deterministic.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "fabric/sim/dcqcn.h"
#include "fabric/sim/pfc.h"
#include "fabric/sim/port.h"
#include "fabric/sim/qp.h"
#include "faults/frame.h"
#include "proto/scenario.pb.h"
#include "proto/yaml_loader.h"
#include "topologies/topology.h"

namespace fathom::sim {

struct LoadedScenario {
  std::string path;
  proto::Scenario spec;
  config::SourceMap map;
  topo::Topology topology;
};

// Loads and validates a scenario file; InvalidArgument "file:line:col:
// field: problem" for anything wrong, IoError/NotFound for unreadable files.
StatusOr<LoadedScenario> LoadScenario(const std::string& path);
StatusOr<LoadedScenario> LoadScenarioString(const std::string& text, const std::string& name);

class EventTraceWriter;
class PortCapture;
class FlowDriver;
class Network;
class PfcField;
struct Flow;

// A distributed run's part in RunScenario (fabric/parallel/ implements it;
// issue 30). With hooks the engine takes the canonical order
// (Engine::set_canonical_order) and the hooks run it: the partition's
// links are wired once the network is built, events of what this process
// does not own are dropped after setup, and Run replaces Engine::Run.
class RunHooks {
 public:
  virtual ~RunHooks() = default;
  // The workload's flows (workload.h), before OnNetwork: a distributed run
  // balances its partition by the hosts they use.
  virtual void OnFlows(const std::vector<Flow>& flows) { (void)flows; }
  // After the network is built, before faults and workload attach.
  virtual Status OnNetwork(Network& net) = 0;
  // After the workload's setup (its QPs connected, its starts scheduled).
  virtual Status OnWorkload(Network& net, FlowDriver& driver) = 0;
  // Runs the events up to `end`; leaves the engine's clock where every
  // process agrees the run ended.
  virtual void Run(Network& net, FlowDriver& driver, Picoseconds end) = 0;
  // The run's PFC field (pfc_field.h), built, before it starts: a
  // distributed run splits it (PfcField::Split) and calls its OnWindow.
  virtual void OnPfcField(PfcField* field) { (void)field; }
};

struct RunOptions {
  std::optional<uint64_t> seed;  // overrides the scenario's
  // Sees every event (Chrome trace JSON; not owned): RunScenario attaches it
  // to the run's engine, the caller Finish()es it afterwards.
  EventTraceWriter* trace = nullptr;
  // (link selector, pcap path) pairs to capture (PortCapture::Open's names):
  // RunScenario opens them before it builds anything, and reports a write
  // error as the run's error.
  std::vector<std::pair<std::string, std::string>> captures;
  // Captures the caller opened (PortCapture::Open on the scenario's
  // topology; not owned): attached for the run and detached before
  // RunScenario returns; the caller checks their status().
  std::vector<PortCapture*> open_captures;
  bool progress = false;  // a progress line on stderr (only for terminals)
  // A distributed run (not owned); null: this process runs it all, in the
  // engine's default order.
  RunHooks* hooks = nullptr;
};

// One QP pair of a flow (issue 27's per-flow table): the requester QP's
// number, final state and counters, its peer's, and the first error
// completion either side saw.
struct QpReport {
  int32_t qp = 0;               // index within its flow, 0..qps_per_connection-1
  uint32_t qpn = 0;             // requester (the host that posts)
  uint32_t peer_qpn = 0;        // responder
  std::string host, peer_host;  // requester's and responder's host names
  std::string state;            // the requester QP's final ibv_qp_state name
  std::string first_error;      // an IBV_WC_* name, empty when none
  double first_error_ns = -1;   // -1: none
  QpCounters requester, responder;
  // The requester's DCQCN rate limiter (transport.dcqcn) at the end of the
  // run: rate now, lowest, time-weighted mean from its first CNP (Gb/s),
  // and its cuts; dcqcn false when no CNP reached it.
  bool dcqcn = false;
  double dcqcn_rate_gbps = 0, dcqcn_min_gbps = 0, dcqcn_mean_gbps = 0;
  uint64_t dcqcn_cuts = 0;
};

// One flow's outcome: a row of `fathom sim --flows-out`.
struct FlowReport {
  int32_t index = 0;
  std::string src, dst;  // host names
  uint64_t bytes = 0;
  double start_ns = 0;
  double end_ns = -1;       // completed or failed; -1 while stalled
  double fct_ns = -1;       // completed flows only
  std::string status;       // "completed", "failed", "stalled"
  std::string first_error;  // the flow's first error completion, empty when none
  double first_error_ns = -1;
  uint64_t retransmissions = 0;  // retransmitted_packets of its requester QPs
  std::vector<QpReport> qps;
};

// A port's IB counters under a name unique in the fabric ("leaf0->h3"; a
// parallel link adds the port index: "leaf0->spine0#5").
struct PortReport {
  std::string name;
  std::string node;
  int32_t index = 0;
  PortCounters counters;
};

// A fault of the timeline: the counters it moved and how long it was active.
struct FaultStats {
  std::string name, kind, target;
  int32_t attachments = 0;  // port directions it is attached to
  faults::Counters counters;
  double active_ns = 0;  // of its window, up to the end of the run
};

struct RunReport {
  std::string name;
  std::string topology;
  uint64_t seed = 0;
  int32_t hosts = 0;
  int32_t flows_total = 0;
  int32_t flows_completed = 0;
  int32_t flows_failed = 0;
  int32_t flows_stalled = 0;
  double fct_p50_ns = 0, fct_p99_ns = 0, fct_max_ns = 0;
  uint64_t bytes_completed = 0;
  double goodput_gbps = 0;                // completed bytes over the time they took, all flows
  double mean_flow_gbps = 0;              // per completed flow, averaged
  double line_rate_gbps = 0;              // of a host NIC
  std::map<std::string, uint64_t> drops;  // by reason
  // Ports with drops: "leaf0->h3" -> {tail drops, mtu drops, rx errors}.
  std::vector<std::pair<std::string, std::array<uint64_t, 3>>> port_drops;
  uint64_t retransmitted_packets = 0;
  uint64_t packet_seq_err = 0, local_ack_timeout_err = 0, implied_nak_seq_err = 0;
  uint64_t rnr_naks = 0, duplicate_request = 0, out_of_sequence = 0;
  std::map<std::string, uint64_t> completion_statuses;  // by IBV_WC_* name
  uint64_t packet_hops = 0;                             // packets put on a link
  uint64_t events = 0;
  double sim_time_ns = 0;
  double wall_s = 0;
  uint64_t trace_digest = 0;
  size_t peak_packets = 0;  // in flight at once (pool)
  std::string faults_summary;
  uint64_t captured_frames = 0;
  // Issue 27: per flow, every port, per fault, and the run's first error.
  std::vector<FlowReport> flow_table;
  std::vector<PortReport> ports;
  std::vector<FaultStats> fault_stats;
  double first_error_ns = -1;  // the earliest error completion; -1: none
  uint64_t retry_exceeded_err = 0, rnr_nak_retry_err = 0, send_rnr_err = 0;
  std::string nic_profile = "ideal";  // transport.nic_profile
  uint64_t roce_adp_retrans = 0;      // ConnectX adaptive retransmissions
  // ECN and DCQCN (network.ecn, transport.dcqcn): packets switch ports
  // marked CE, and the NICs' mlx5 counters; reported when either is on.
  bool ecn_enabled = false;
  bool dcqcn_enabled = false;
  uint64_t ecn_marked_packets = 0;
  DcqcnCounters dcqcn;
  // PFC counters of the ports that sent or received a PAUSE frame, dropped
  // past headroom or by the watchdog: "leaf0->h3" -> counters.
  std::vector<std::pair<std::string, PfcCounters>> port_pfc;
  // PFC field cases (pfc_field.h): the summary lines, the deadlock (its
  // cycle of ports, empty: none), the watchdog's storms.
  std::string pfc_field_summary;
  bool pfc_deadlock = false;
  std::string pfc_deadlock_cycle;
  uint64_t pfc_watchdog_storms = 0, pfc_watchdog_restored = 0;
};

StatusOr<RunReport> RunScenario(const LoadedScenario& scenario, const RunOptions& options);

// Why the run counts as a failure, one line each; empty when it does not.
// Each difference between the scenario's `expect` block and the report
// ("expectation not met: flows_failed: expected 1, got 0"), and failed or
// stalled flows the block does not expect: failed flows are expected when
// it sets flows_failed or expects an error completion status, stalled flows
// when it sets flows_stalled. So a scenario without an `expect` block fails
// when any flow fails or stalls.
std::vector<std::string> CheckExpectations(const proto::Scenario& spec, const RunReport& report);

// The same with the scenario's file: references that only the run can
// resolve (an expect.flows item whose src/dst matches no flow) are bad input,
// InvalidArgument naming file:line and field (exit 2), not a failed run.
StatusOr<std::vector<std::string>> CheckExpectations(const LoadedScenario& scenario,
                                                     const RunReport& report);

// The port names a report uses (PortReport::name), for node `node`'s port
// `port`: "a->b", plus "#<port>" when `node` has several links to b.
std::string ReportPortName(const topo::Topology& topology, int32_t node, int32_t port);

std::string FormatSummary(const RunReport& report);
// `fathom sim --json`: every figure of the summary, the flow table and the
// fault statistics (nlohmann-json; keys unique).
std::string FormatJson(const RunReport& report);
// The flow table alone: JSON (a list of rows, times in ns, null when there
// is none) or CSV (a header line; times in ns, empty when there is none; a
// flow's QPNs in hex joined by ';').
std::string FormatFlowsJson(const RunReport& report);
std::string FormatFlowsCsv(const RunReport& report);

}  // namespace fathom::sim
