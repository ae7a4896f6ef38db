#include "fabric/scenario/workload.h"

#include <string>

#include "fabric/wire/psn.h"

namespace fathom::sim {

FlowDriver::FlowDriver(Network* network, std::vector<Flow> flows, const FlowOptions& options)
    : network_(network), flows_(std::move(flows)), options_(options), results_(flows_.size()) {}

Status FlowDriver::Setup() {
  const int32_t hosts = network_->host_count();
  if (options_.qps_per_connection < 1) {
    return InvalidArgument("flows: qps_per_connection " +
                           std::to_string(options_.qps_per_connection) + " must be >= 1");
  }
  cqs_.assign(static_cast<size_t>(hosts), nullptr);
  flow_conns_.assign(flows_.size(), {});
  Rng psn_rng = network_->engine().MakeRng(0xF10E5);
  for (size_t f = 0; f < flows_.size(); ++f) {
    const Flow& flow = flows_[f];
    if (flow.src < 0 || flow.src >= hosts || flow.dst < 0 || flow.dst >= hosts ||
        flow.src == flow.dst) {
      return InvalidArgument("flow " + std::to_string(f) + ": src " + std::to_string(flow.src) +
                             " dst " + std::to_string(flow.dst) + " not two distinct hosts of " +
                             std::to_string(hosts));
    }
    const bool read = options_.op == FlowOp::kRead;
    const int32_t req = read ? flow.dst : flow.src;
    const int32_t resp = read ? flow.src : flow.dst;
    for (int32_t r : {req, resp}) {
      if (cqs_[static_cast<size_t>(r)] == nullptr) {
        CompletionQueue* cq = network_->nic(r).CreateCq();
        cq->set_callback([this](const Completion& c) { OnCompletion(c); });
        cqs_[static_cast<size_t>(r)] = cq;
      }
    }
    const int nq = options_.qps_per_connection;
    for (int q = 0; q < nq; ++q) {
      Nic& a = network_->nic(req);
      Nic& b = network_->nic(resp);
      CompletionQueue* acq = cqs_[static_cast<size_t>(req)];
      CompletionQueue* bcq = cqs_[static_cast<size_t>(resp)];
      FATHOM_ASSIGN_OR_RETURN(uint32_t aq, a.CreateQp(acq, acq, options_.qp));
      FATHOM_ASSIGN_OR_RETURN(uint32_t bq, b.CreateQp(bcq, bcq, options_.qp));
      // Random initial PSNs (as rxe and NICs pick them) exercise 24-bit wrap.
      const uint32_t apsn = static_cast<uint32_t>(psn_rng.Next()) & wire::kPsnMask;
      const uint32_t bpsn = static_cast<uint32_t>(psn_rng.Next()) & wire::kPsnMask;
      const int32_t anode = network_->topology().hosts()[static_cast<size_t>(req)];
      const int32_t bnode = network_->topology().hosts()[static_cast<size_t>(resp)];
      FATHOM_RETURN_IF_ERROR(a.ModifyToInit(aq));
      FATHOM_RETURN_IF_ERROR(b.ModifyToInit(bq));
      FATHOM_RETURN_IF_ERROR(a.ModifyToRtr(aq, bnode, bq, bpsn));
      FATHOM_RETURN_IF_ERROR(b.ModifyToRtr(bq, anode, aq, apsn));
      FATHOM_RETURN_IF_ERROR(a.ModifyToRts(aq, apsn));
      FATHOM_RETURN_IF_ERROR(b.ModifyToRts(bq, bpsn));
      // Split the bytes: the first QPs take the remainder.
      uint64_t share = flow.bytes / static_cast<uint64_t>(nq);
      if (static_cast<uint64_t>(q) < flow.bytes % static_cast<uint64_t>(nq)) ++share;
      flow_conns_[f].push_back(static_cast<int32_t>(conns_.size()));
      conns_.push_back(Conn{static_cast<int32_t>(f), req, resp, aq, bq, share});
    }
    network_->engine().Schedule<&FlowDriver::OnStart>(flow.start, EventKind::kFlowStart,
                                                      static_cast<uint32_t>(f), this, f);
  }
  SetupReceives();
  return Status::Ok();
}

void FlowDriver::OnStart(void* driver, uint64_t flow) {
  static_cast<FlowDriver*>(driver)->StartFlow(static_cast<int32_t>(flow));
}

void FlowDriver::StartFlow(int32_t f) {
  FlowResult& r = results_[static_cast<size_t>(f)];
  // wr_id: flow index in the high bits, so completions find their flow.
  const uint64_t wr_base = static_cast<uint64_t>(f) << 24;
  const uint64_t chunk = options_.message_bytes == 0
                             ? kMaxFlowWrBytes
                             : std::min<uint64_t>(options_.message_bytes, kMaxFlowWrBytes);
  uint32_t posted = 0;
  Status failure;
  if (planned_receives_) StartReceives(f);
  for (int32_t ci : flow_conns_[static_cast<size_t>(f)]) {
    const Conn& c = conns_[static_cast<size_t>(ci)];
    uint64_t left = c.bytes;
    do {
      const uint64_t len = std::min(left, chunk);
      left -= len;
      SendWr wr;
      wr.wr_id = wr_base | posted;
      wr.sge.length = static_cast<uint32_t>(len);
      wr.opcode = options_.op == FlowOp::kWrite  ? WrOpcode::kRdmaWrite
                  : options_.op == FlowOp::kSend ? WrOpcode::kSend
                                                 : WrOpcode::kRdmaRead;
      if (options_.op == FlowOp::kSend && !planned_receives_) {
        RecvWr rr;
        rr.wr_id = wr_base | (1u << 23) | posted;
        rr.sge.length = static_cast<uint32_t>(len);
        Status s = network_->nic(c.responder).PostRecv(c.resp_qpn, rr);
        if (!s.ok()) failure = s;
      }
      Status s = network_->nic(c.requester).PostSend(c.req_qpn, wr);
      if (!s.ok()) failure = s;
      ++posted;
    } while (left > 0);
  }
  r.wrs_left = posted;
  if (!failure.ok()) {
    r.state = FlowState::kFailed;
    r.end = network_->engine().Now();
    r.first_error = WcStatus::kLocQpOpErr;
    ++failed_;
  }
}

Status FlowDriver::PostReceivesAhead(const std::function<bool(int32_t rank)>& here) {
  if (options_.op != FlowOp::kSend) return Status::Ok();
  if (planned_receives_) {
    return FailedPrecondition("PostReceivesAhead: the receive model posts its own receives");
  }
  // As StartFlow numbers and sizes them.
  const uint64_t chunk = options_.message_bytes == 0
                             ? kMaxFlowWrBytes
                             : std::min<uint64_t>(options_.message_bytes, kMaxFlowWrBytes);
  for (size_t f = 0; f < flows_.size(); ++f) {
    const uint64_t wr_base = static_cast<uint64_t>(f) << 24;
    uint32_t posted = 0;
    for (int32_t ci : flow_conns_[f]) {
      const Conn& c = conns_[static_cast<size_t>(ci)];
      const bool ahead = here(c.responder) && !here(c.requester);
      uint64_t left = c.bytes;
      do {
        const uint64_t len = std::min(left, chunk);
        left -= len;
        if (ahead) {
          RecvWr rr;
          rr.wr_id = wr_base | (1u << 23) | posted;
          rr.sge.length = static_cast<uint32_t>(len);
          FATHOM_RETURN_IF_ERROR(network_->nic(c.responder).PostRecv(c.resp_qpn, rr));
        }
        ++posted;
      } while (left > 0);
    }
  }
  return Status::Ok();
}

void FlowDriver::OnCompletion(const Completion& c) {
  ++status_counts_[static_cast<size_t>(c.status) & 31];
  const size_t f = static_cast<size_t>(c.wr_id >> 24);
  if (f >= results_.size()) return;
  const bool recv_side = ((c.wr_id >> 23) & 1) != 0;
  // The first error of each QP pair, even after its flow has failed (the
  // others of the flow carry their own). Receive completions are the
  // responder QP's, the rest the requester's.
  if (c.status != WcStatus::kSuccess) {
    conn_errors_.resize(conns_.size());
    for (int32_t ci : flow_conns_[f]) {
      const Conn& conn = conns_[static_cast<size_t>(ci)];
      if ((recv_side ? conn.resp_qpn : conn.req_qpn) != c.qp_num) continue;
      ConnError& e = conn_errors_[static_cast<size_t>(ci)];
      if (!e.errored) e = ConnError{true, c.status, c.time};
      break;
    }
  }
  FlowResult& r = results_[f];
  if (r.state != FlowState::kPending) return;
  if (c.status != WcStatus::kSuccess) {
    r.state = FlowState::kFailed;
    r.end = c.time;
    r.first_error = c.status;
    ++failed_;
  } else if (!recv_side && --r.wrs_left == 0) {
    r.state = FlowState::kDone;
    r.end = c.time;
    ++completed_;
  } else if (recv_side && planned_receives_) {
    const size_t k = static_cast<size_t>(c.wr_id & ((1u << 23) - 1));
    if (k < flow_conns_[f].size()) OnRecvConsumed(flow_conns_[f][k]);
  }
  if (stop_when_done_ && all_finished()) network_->engine().Stop();
}

std::vector<FlowDriver::QpInfo> FlowDriver::Qps() const {
  std::vector<QpInfo> out;
  out.reserve(conns_.size());
  for (const std::vector<int32_t>& cs : flow_conns_) {
    for (int32_t ci : cs) {
      const Conn& c = conns_[static_cast<size_t>(ci)];
      QpInfo q{c.flow, c.requester, c.responder, c.req_qpn, c.resp_qpn};
      if (static_cast<size_t>(ci) < conn_errors_.size()) {
        const ConnError& e = conn_errors_[static_cast<size_t>(ci)];
        q.errored = e.errored;
        q.first_error = e.status;
        q.first_error_time = e.time;
      }
      out.push_back(q);
    }
  }
  return out;
}

std::vector<Flow> PermutationFlows(int32_t hosts, uint64_t bytes, Picoseconds start, Rng& rng) {
  std::vector<int32_t> perm(static_cast<size_t>(hosts));
  for (int32_t i = 0; i < hosts; ++i) perm[static_cast<size_t>(i)] = i;
  // Sattolo's algorithm: a uniformly random single cycle, so no fixed points.
  for (int32_t i = hosts - 1; i > 0; --i) {
    const auto j = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(i)));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  std::vector<Flow> flows;
  for (int32_t i = 0; i < hosts && hosts > 1; ++i) {
    flows.push_back(Flow{i, perm[static_cast<size_t>(i)], bytes, start});
  }
  return flows;
}

std::vector<Flow> AllToAllFlows(int32_t hosts, uint64_t bytes, Picoseconds start) {
  std::vector<Flow> flows;
  for (int32_t s = 0; s < hosts; ++s) {
    for (int32_t d = 0; d < hosts; ++d) {
      if (s != d) flows.push_back(Flow{s, d, bytes, start});
    }
  }
  return flows;
}

std::vector<Flow> IncastFlows(int32_t hosts, int32_t target, int32_t senders, uint64_t bytes,
                              Picoseconds start) {
  std::vector<Flow> flows;
  for (int32_t s = 0; s < hosts && static_cast<int32_t>(flows.size()) < senders; ++s) {
    if (s != target) flows.push_back(Flow{s, target, bytes, start});
  }
  return flows;
}

}  // namespace fathom::sim
