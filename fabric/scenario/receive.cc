// The receive side of SEND flows: the scenario's receive plans checked and
// converted, and FlowDriver's receive-side members, which post receives as
// the plans say (receive.h).
#include "fabric/scenario/receive.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "fabric/scenario/workload.h"

namespace fathom::sim {
namespace {

std::string Us(double us) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%g us", us);
  return buf;
}

Picoseconds FromUs(double us) { return Picoseconds::FromSeconds(us * 1e-6); }

// A time in microseconds, finite, in [0, max_us].
Status CheckUs(const config::SourceMap& map, const std::string& path, double us, double max_us) {
  if (!std::isfinite(us) || us < 0 || us > max_us) {
    return map.Error(path, Us(us) + " must be a finite time in [0, 9e12] us (virtual time is " +
                               "int64 picoseconds, ~106 days)");
  }
  return Status::Ok();
}

// The latest time a flow can start (workload.start_us + jitter + its own
// start_us), to bound start + delay.
double LatestStartUs(const proto::WorkloadSpec& w) {
  double latest = 0;
  for (const proto::FlowSpec& f : w.flows()) latest = std::max(latest, f.start_us());
  return w.start_us() + w.start_jitter_us() + latest;
}

Status CheckPlan(const proto::ReceiveSpec& r, const std::string& path, double latest_start_us,
                 const config::SourceMap& map, double max_us) {
  using RS = proto::ReceiveSpec;
  const RS::Post post = r.post();
  if (r.has_queue_depth() && (r.queue_depth() < 1 || r.queue_depth() > kMaxRecvQueueDepth)) {
    return map.Error(path + ".queue_depth",
                     std::to_string(r.queue_depth()) + " is out of range 1.." +
                         std::to_string(kMaxRecvQueueDepth) +
                         " (max_recv_wr; a ConnectX reports max_qp_wr 32768)");
  }
  if (r.has_queue_depth() && post == RS::POST_NONE) {
    return map.Error(path + ".queue_depth", "post: none posts no receive to queue");
  }
  FATHOM_RETURN_IF_ERROR(CheckUs(map, path + ".delay_us", r.delay_us(), max_us));
  FATHOM_RETURN_IF_ERROR(CheckUs(map, path + ".interval_us", r.interval_us(), max_us));
  if (r.delay_us() != 0 && post != RS::POST_DELAYED && post != RS::POST_RATE) {
    return map.Error(path + ".delay_us", "only with post: delayed or rate");
  }
  if (r.interval_us() != 0 && post != RS::POST_RATE) {
    return map.Error(path + ".interval_us", "only with post: rate");
  }
  if (post == RS::POST_RATE && !(r.interval_us() >= 1e-6)) {
    return map.Error(path + ".interval_us",
                     "post: rate needs an interval of at least 1e-6 us (one picosecond)");
  }
  if (latest_start_us + r.delay_us() > max_us) {
    return map.Error(path + ".delay_us", "the flow's start + " + Us(r.delay_us()) + " = " +
                                             Us(latest_start_us + r.delay_us()) +
                                             " is beyond 9e12 us");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateReceiveSide(const proto::Scenario& spec, const topo::Topology& topology,
                           const config::SourceMap& map, double max_time_us) {
  const proto::WorkloadSpec& w = spec.workload();
  const bool send = spec.transport().opcode() == "send";
  const double latest = LatestStartUs(w);
  auto not_send = [&](const std::string& path) {
    return map.Error(path,
                     "only for transport.opcode send (a WRITE or READ consumes no receive), "
                     "but the opcode is " +
                         (spec.transport().opcode().empty() ? std::string("write (the default)")
                                                            : spec.transport().opcode()));
  };
  if (w.has_receive()) {
    if (!send) return not_send("workload.receive");
    FATHOM_RETURN_IF_ERROR(CheckPlan(w.receive(), "workload.receive", latest, map, max_time_us));
  }
  for (int i = 0; i < w.flows_size(); ++i) {
    if (!w.flows(i).has_receive()) continue;
    const std::string p = "workload.flows[" + std::to_string(i) + "].receive";
    if (!send) return not_send(p);
    FATHOM_RETURN_IF_ERROR(CheckPlan(w.flows(i).receive(), p, latest, map, max_time_us));
  }
  for (int i = 0; i < w.receiver_not_ready_size(); ++i) {
    const std::string p = "workload.receiver_not_ready[" + std::to_string(i) + "]";
    if (!send) return not_send(p);
    const proto::ReceiverNotReadySpec& nr = w.receiver_not_ready(i);
    auto node = topology.FindNode(nr.host());
    if (!node.ok() || topology.node(*node).kind != topo::NodeKind::kHost) {
      return map.Error(p + ".host", "'" + nr.host() + "' is not a host of topology '" +
                                        topology.name() + "' (hosts are h0..h" +
                                        std::to_string(topology.hosts().size() - 1) + ")");
    }
    FATHOM_RETURN_IF_ERROR(CheckUs(map, p + ".from_us", nr.from_us(), max_time_us));
    FATHOM_RETURN_IF_ERROR(CheckUs(map, p + ".to_us", nr.to_us(), max_time_us));
    if (!(nr.to_us() > nr.from_us())) {
      return map.Error(p + ".to_us",
                       Us(nr.to_us()) + " must be after from_us (" + Us(nr.from_us()) + ")");
    }
  }
  return Status::Ok();
}

ReceivePlan ToReceivePlan(const proto::ReceiveSpec& spec) {
  using RS = proto::ReceiveSpec;
  ReceivePlan plan;
  switch (spec.post()) {
    case RS::POST_PREPOSTED:
      plan.post = RecvPost::kPreposted;
      break;
    case RS::POST_DELAYED:
      plan.post = RecvPost::kDelayed;
      break;
    case RS::POST_RATE:
      plan.post = RecvPost::kRate;
      break;
    case RS::POST_NONE:
      plan.post = RecvPost::kNone;
      break;
    default:
      plan.post = RecvPost::kPerSend;
  }
  plan.queue_depth = spec.has_queue_depth() ? spec.queue_depth() : 0;
  plan.delay = FromUs(spec.delay_us());
  plan.interval = FromUs(spec.interval_us());
  return plan;
}

std::vector<NotReadyWindow> ToNotReadyWindows(const proto::WorkloadSpec& workload,
                                              const topo::Topology& topology) {
  std::vector<NotReadyWindow> out;
  for (const proto::ReceiverNotReadySpec& nr : workload.receiver_not_ready()) {
    auto node = topology.FindNode(nr.host());
    if (!node.ok()) continue;  // ValidateReceiveSide refused it
    out.push_back({topology.HostRank(*node), FromUs(nr.from_us()), FromUs(nr.to_us())});
  }
  return out;
}

// FlowDriver's receive side. Only SEND flows with a non-default plan or a
// window come here; the default keeps StartFlow's receive per SEND.

void FlowDriver::SetupReceives() {
  planned_receives_ = false;
  if (options_.op != FlowOp::kSend) return;
  bool planned = !options_.receive.IsDefault() || !options_.not_ready.empty();
  for (const ReceivePlan& p : options_.flow_receive) planned = planned || !p.IsDefault();
  if (!planned) return;
  planned_receives_ = true;
  const uint64_t chunk = options_.message_bytes == 0
                             ? kMaxFlowWrBytes
                             : std::min<uint64_t>(options_.message_bytes, kMaxFlowWrBytes);
  recv_.assign(conns_.size(), RecvSide{});
  for (const auto& conns : flow_conns_) {
    for (size_t k = 0; k < conns.size(); ++k) {
      const Conn& c = conns_[static_cast<size_t>(conns[k])];
      RecvSide& rs = recv_[static_cast<size_t>(conns[k])];
      // As many receives as StartFlow posts SENDs: one per chunk, at least one.
      rs.left = c.bytes == 0 ? 1 : static_cast<uint32_t>((c.bytes + chunk - 1) / chunk);
      rs.length = static_cast<uint32_t>(std::min(c.bytes, chunk));
      rs.index = static_cast<uint32_t>(k);
    }
  }
  for (size_t ci = 0; ci < conns_.size(); ++ci) {
    if (PlanOf(conns_[ci].flow).post == RecvPost::kPreposted) {
      PostReceives(static_cast<int32_t>(ci));
    }
  }
}

void FlowDriver::StartReceives(int32_t f) {
  const ReceivePlan& plan = PlanOf(f);
  const Picoseconds now = network_->engine().Now();
  for (int32_t ci : flow_conns_[static_cast<size_t>(f)]) {
    switch (plan.post) {
      case RecvPost::kPerSend:
        PostReceives(ci);
        break;
      case RecvPost::kDelayed:
        if (plan.delay.ps() == 0) {
          PostReceives(ci);
        } else {
          WakeAt(ci, now + plan.delay);
        }
        break;
      case RecvPost::kRate:
        if (plan.delay.ps() == 0) {
          RateTick(ci);
        } else {
          WakeAt(ci, now + plan.delay);
        }
        break;
      case RecvPost::kPreposted:  // posted at setup
      case RecvPost::kNone:
        break;
    }
  }
}

void FlowDriver::OnRecvConsumed(int32_t ci) {
  RecvSide& rs = recv_[static_cast<size_t>(ci)];
  if (rs.posted > 0) --rs.posted;
  const ReceivePlan& plan = PlanOf(conns_[static_cast<size_t>(ci)].flow);
  if (plan.post == RecvPost::kRate) {
    if (rs.waiting_room) {
      rs.waiting_room = false;
      RateTick(ci);
    }
  } else if (plan.post != RecvPost::kNone) {
    PostReceives(ci);  // the host reposts as each receive completes
  }
}

void FlowDriver::PostReceives(int32_t ci) {
  const Conn& c = conns_[static_cast<size_t>(ci)];
  RecvSide& rs = recv_[static_cast<size_t>(ci)];
  if (results_[static_cast<size_t>(c.flow)].state != FlowState::kPending || rs.left == 0) return;
  const Picoseconds now = network_->engine().Now();
  if (const Picoseconds until = NotReadyUntil(c.responder, now); until.ps() != 0) {
    WakeAt(ci, until);
    return;
  }
  const uint32_t depth = PlanOf(c.flow).queue_depth;
  const FlowResult& r = results_[static_cast<size_t>(c.flow)];
  while (rs.left > 0 && (depth == 0 || rs.posted < depth) && r.state == FlowState::kPending) {
    if (!PostOneReceive(ci)) return;
  }
}

void FlowDriver::RateTick(int32_t ci) {
  const Conn& c = conns_[static_cast<size_t>(ci)];
  RecvSide& rs = recv_[static_cast<size_t>(ci)];
  if (results_[static_cast<size_t>(c.flow)].state != FlowState::kPending || rs.left == 0) return;
  const Picoseconds now = network_->engine().Now();
  if (const Picoseconds until = NotReadyUntil(c.responder, now); until.ps() != 0) {
    WakeAt(ci, until);
    return;
  }
  const ReceivePlan& plan = PlanOf(c.flow);
  if (plan.queue_depth != 0 && rs.posted >= plan.queue_depth) {
    rs.waiting_room = true;  // the next completion frees a slot (OnRecvConsumed)
    return;
  }
  if (!PostOneReceive(ci)) return;
  if (rs.left > 0) WakeAt(ci, now + plan.interval);
}

bool FlowDriver::PostOneReceive(int32_t ci) {
  const Conn& c = conns_[static_cast<size_t>(ci)];
  RecvSide& rs = recv_[static_cast<size_t>(ci)];
  RecvWr rr;
  // As StartFlow's: the flow in the high bits, bit 23 = a receive; the low
  // bits say which of the flow's connections (OnCompletion).
  rr.wr_id = (static_cast<uint64_t>(c.flow) << 24) | (1u << 23) | rs.index;
  rr.sge.length = rs.length;
  --rs.left;
  ++rs.posted;
  const Status s = network_->nic(c.responder).PostRecv(c.resp_qpn, rr);
  if (s.ok()) return true;
  FlowResult& r = results_[static_cast<size_t>(c.flow)];
  if (r.state == FlowState::kPending) {
    r.state = FlowState::kFailed;
    r.end = network_->engine().Now();
    r.first_error = WcStatus::kLocQpOpErr;
    ++failed_;
  }
  return false;
}

void FlowDriver::WakeAt(int32_t ci, Picoseconds at) {
  RecvSide& rs = recv_[static_cast<size_t>(ci)];
  if (rs.wake_pending) return;  // that wake re-checks everything
  rs.wake_pending = true;
  // A workload event: the trace shows it with the flow's start events.
  network_->engine().Schedule<&FlowDriver::OnRecvEvent>(
      at, EventKind::kFlowStart, static_cast<uint32_t>(conns_[static_cast<size_t>(ci)].flow), this,
      static_cast<uint64_t>(ci));
}

void FlowDriver::OnRecvEvent(void* driver, uint64_t conn) {
  auto* self = static_cast<FlowDriver*>(driver);
  const auto ci = static_cast<int32_t>(conn);
  self->recv_[conn].wake_pending = false;
  if (self->PlanOf(self->conns_[conn].flow).post == RecvPost::kRate) {
    self->RateTick(ci);
  } else {
    self->PostReceives(ci);
  }
  if (self->stop_when_done_ && self->all_finished()) self->network_->engine().Stop();
}

Picoseconds FlowDriver::NotReadyUntil(int32_t host, Picoseconds now) const {
  Picoseconds until;
  for (const NotReadyWindow& w : options_.not_ready) {
    if (w.host == host && w.from <= now && now < w.to && w.to > until) until = w.to;
  }
  return until;
}

}  // namespace fathom::sim
