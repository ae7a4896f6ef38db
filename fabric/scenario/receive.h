// The receive side of SEND flows (issue 27): when a flow's receiving host
// posts its receive WRs (per SEND, all at time 0, after a delay, at a rate,
// or never), how many it keeps posted at once (the receive queue depth),
// and windows in which a host posts none ("receiver not ready"). A SEND
// that finds no receive meets an RNR NAK (IBTA 9.7.5.2.8) and the NIC's
// min_rnr_timer / rnr_retry machinery; this file only decides when receives
// are posted. FlowDriver (workload.h) runs the plan; its receive-side
// members are in receive.cc.
//
// The default plan (per SEND, unlimited depth, no window) is what the flow
// workload always did, and FlowDriver runs it on its original path, so
// every recorded trace digest stays the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "proto/scenario.pb.h"
#include "proto/yaml_loader.h"
#include "topologies/topology.h"

namespace fathom::sim {

enum class RecvPost : uint8_t {
  kPerSend,    // one receive just before each SEND is posted (the default)
  kPreposted,  // all at time 0, before any flow starts
  kDelayed,    // all at `delay` after the flow starts
  kRate,       // one every `interval`, the first `delay` after the flow starts
  kNone,       // never: every SEND meets RNR NAKs
};

struct ReceivePlan {
  RecvPost post = RecvPost::kPerSend;
  // Receives posted and not yet consumed, per QP, at most (max_recv_wr);
  // 0 = as many as the flow needs. The host reposts one as each completes
  // (kRate: the next post waits for a free slot).
  uint32_t queue_depth = 0;
  Picoseconds delay;
  Picoseconds interval;  // kRate, > 0
  bool IsDefault() const { return post == RecvPost::kPerSend && queue_depth == 0; }
};

// From `from` to `to` (virtual time) host rank `host` posts no receives;
// what it would have posted then it posts at `to`.
struct NotReadyWindow {
  int32_t host = -1;
  Picoseconds from;
  Picoseconds to;
};

// The largest queue_depth: a ConnectX-5/6 reports max_qp_wr 32768 in
// ibv_devinfo -v (rxe: RXE_MAX_QP_WR 0x4000 in rxe_param.h).
inline constexpr uint32_t kMaxRecvQueueDepth = 32768;

// Checks workload.receive, each workload.flows[i].receive and
// workload.receiver_not_ready: values, units, hosts, and that they are used
// with transport.opcode send only. `max_time_us` bounds every time and sum
// of times (virtual time is int64 picoseconds). Errors name file:line and
// the field (InvalidArgument).
Status ValidateReceiveSide(const proto::Scenario& spec, const topo::Topology& topology,
                           const config::SourceMap& map, double max_time_us);

ReceivePlan ToReceivePlan(const proto::ReceiveSpec& spec);

// The windows of workload.receiver_not_ready, hosts as ranks (the spec must
// have passed ValidateReceiveSide).
std::vector<NotReadyWindow> ToNotReadyWindows(const proto::WorkloadSpec& workload,
                                              const topo::Topology& topology);

}  // namespace fathom::sim
