// Flow workloads: each flow moves `bytes` from one host to another over its
// own RC connection(s) (qps_per_connection QPs, the bytes split between
// them), with modelled payloads (no data is moved). A flow completes when
// every WR of every QP completed successfully, fails at its first error
// completion, and is stalled if neither happened by the end of the run.
//
// Ownership: FlowDriver keeps pointers to the Network (which must outlive
// it) and owns the flow table; it installs completion callbacks on the CQs it
// creates. Everything runs on the engine's thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "base/verbs_types.h"
#include "fabric/scenario/receive.h"
#include "fabric/sim/network.h"
#include "fabric/sim/qp.h"

namespace fathom::sim {

struct Flow {
  int32_t src = -1;  // host ranks
  int32_t dst = -1;
  uint64_t bytes = 0;
  Picoseconds start;
};

enum class FlowOp : uint8_t { kWrite, kSend, kRead };

struct FlowOptions {
  QpAttr qp;
  int qps_per_connection = 1;
  FlowOp op = FlowOp::kWrite;
  uint64_t message_bytes = 0;  // 0: one WR per QP
  // The receive side of kSend flows (receive.h): one plan for every flow,
  // or one per flow (flow_receive[i], when not empty), and windows in which
  // a host posts no receives. All default: a receive just before each SEND.
  ReceivePlan receive;
  std::vector<ReceivePlan> flow_receive;
  std::vector<NotReadyWindow> not_ready;
};

// The largest WR a flow posts (below the NIC's 2^31 message limit): a QP's
// share of a flow is cut into WRs of min(message_bytes, this).
inline constexpr uint64_t kMaxFlowWrBytes = uint64_t{1} << 30;

enum class FlowState : uint8_t { kPending, kDone, kFailed };

struct FlowResult {
  FlowState state = FlowState::kPending;
  Picoseconds end;                            // when it completed or failed
  WcStatus first_error = WcStatus::kSuccess;  // for kFailed
  uint32_t wrs_left = 0;
};

class FlowDriver {
 public:
  FlowDriver(Network* network, std::vector<Flow> flows, const FlowOptions& options);
  FlowDriver(const FlowDriver&) = delete;
  FlowDriver& operator=(const FlowDriver&) = delete;

  // Creates and connects the QPs and schedules each flow's start.
  Status Setup();

  const std::vector<Flow>& flows() const { return flows_; }
  const std::vector<FlowResult>& results() const { return results_; }
  int32_t completed() const { return completed_; }
  int32_t failed() const { return failed_; }
  bool all_finished() const { return completed_ + failed_ == static_cast<int32_t>(flows_.size()); }
  // Completions seen, by WcStatus value (successes included).
  const std::array<uint64_t, 32>& status_counts() const { return status_counts_; }
  // When set, the engine stops once every flow has finished.
  void set_stop_when_done(bool v) { stop_when_done_ = v; }

  // One QP pair of a flow, for reports and expectations: its ranks, QPNs and
  // the first error completion either side saw.
  struct QpInfo {
    int32_t flow = -1;
    int32_t requester = -1;  // rank that posts (src; dst for READ)
    int32_t responder = -1;
    uint32_t req_qpn = 0;
    uint32_t resp_qpn = 0;
    bool errored = false;
    WcStatus first_error = WcStatus::kSuccess;
    Picoseconds first_error_time;
  };
  // Every QP pair, flow by flow, in the order of each flow's QPs.
  std::vector<QpInfo> Qps() const;

  // A distributed run (fabric/parallel): posts now, on the responders
  // `here` names whose requesters it does not, the receives each SEND
  // flow's start would post there (another process starts the flow). The
  // same receives, only earlier: nothing arrives before the start. Not for
  // the receive model (planned receives): FAILED_PRECONDITION.
  Status PostReceivesAhead(const std::function<bool(int32_t rank)>& here);

 private:
  struct Conn {
    int32_t flow;
    int32_t requester;  // rank that posts (src; dst for READ)
    int32_t responder;
    uint32_t req_qpn;
    uint32_t resp_qpn;
    uint64_t bytes;
  };
  static void OnStart(void* driver, uint64_t flow);
  void StartFlow(int32_t flow);
  void OnCompletion(const Completion& c);

  // The receive side when a plan is not the default or a window is set
  // (receive.cc); otherwise StartFlow posts a receive before each SEND.
  struct RecvSide {
    uint32_t left = 0;    // receives still to post
    uint32_t posted = 0;  // posted and not yet consumed
    uint32_t length = 0;  // bytes of each (the QP's largest message)
    uint32_t index = 0;   // the connection's position in its flow (wr_id)
    bool wake_pending = false;
    bool waiting_room = false;  // kRate: the next post waits for a completion
  };
  const ReceivePlan& PlanOf(int32_t flow) const {
    return options_.flow_receive.empty() ? options_.receive
                                         : options_.flow_receive[static_cast<size_t>(flow)];
  }
  void SetupReceives();
  void StartReceives(int32_t flow);
  void OnRecvConsumed(int32_t conn);
  // Posts what the plan lets `conn` post now (not kRate).
  void PostReceives(int32_t conn);
  void RateTick(int32_t conn);
  bool PostOneReceive(int32_t conn);
  void WakeAt(int32_t conn, Picoseconds at);
  static void OnRecvEvent(void* driver, uint64_t conn);
  // The end of the not-ready window `host` is in at `now`; zero: none.
  Picoseconds NotReadyUntil(int32_t host, Picoseconds now) const;

  Network* network_;
  std::vector<Flow> flows_;
  FlowOptions options_;
  std::vector<FlowResult> results_;
  std::vector<Conn> conns_;
  struct ConnError {
    bool errored = false;
    WcStatus status = WcStatus::kSuccess;
    Picoseconds time;
  };
  std::vector<ConnError> conn_errors_;  // parallel to conns_
  std::vector<std::vector<int32_t>> flow_conns_;
  std::vector<CompletionQueue*> cqs_;  // per host rank
  std::array<uint64_t, 32> status_counts_{};
  int32_t completed_ = 0;
  int32_t failed_ = 0;
  bool stop_when_done_ = true;
  bool planned_receives_ = false;
  std::vector<RecvSide> recv_;  // per conn, when planned_receives_
};

// Workload generators (ranks 0..hosts-1). Permutation: a seeded random
// derangement (nobody sends to itself). All-to-all: every ordered pair.
std::vector<Flow> PermutationFlows(int32_t hosts, uint64_t bytes, Picoseconds start, Rng& rng);
std::vector<Flow> AllToAllFlows(int32_t hosts, uint64_t bytes, Picoseconds start);
std::vector<Flow> IncastFlows(int32_t hosts, int32_t target, int32_t senders, uint64_t bytes,
                              Picoseconds start);

}  // namespace fathom::sim
