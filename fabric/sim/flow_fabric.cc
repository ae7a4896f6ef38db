// FlowFabric: the NICs' flow model glue (flow_fabric.h).
#include "fabric/sim/flow_fabric.h"

#include <algorithm>

namespace fathom::sim {

StatusOr<std::unique_ptr<FlowFabric>> FlowFabric::Attach(Network* network,
                                                         const NetworkConfig& config) {
  // A QP's route (QpFlow::path) starts at its NIC's port: a route the
  // Network cannot fix (longer than kPathMax links) would be empty.
  if (!config.fixed_paths) {
    return FailedPrecondition(
        "flow model: needs each QP's fixed route (network fixed_paths on); it is off");
  }
  std::unique_ptr<FlowFabric> f(new FlowFabric(network));
  for (Port* p : network->ports()) f->link_of_.emplace(p, f->model_.AddLink(p->config().rate));
  for (int32_t r = 0; r < network->host_count(); ++r) {
    Nic* nic = &network->nic(r);
    const size_t node = static_cast<size_t>(nic->host());
    if (f->nic_of_node_.size() <= node) f->nic_of_node_.resize(node + 1, nullptr);
    f->nic_of_node_[node] = nic;
    nic->set_flow_fabric(f.get());
  }
  return f;
}

FlowFabric::~FlowFabric() {
  for (Nic* nic : nic_of_node_) {
    if (nic != nullptr) nic->set_flow_fabric(nullptr);
  }
}

void FlowFabric::Deliver(Nic* src, uint32_t src_qpn, Nic* dst, uint32_t dst_qpn, const SendWr& wr,
                         uint32_t npkts, uint32_t end_psn, Picoseconds forward, Picoseconds back,
                         int rnr_retry, int64_t rnr_wait_ps) {
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(messages_pool_.size());
    messages_pool_.emplace_back();
  }
  messages_pool_[index] =
      Message{src, dst, src_qpn, dst_qpn, wr, npkts, end_psn, back, rnr_retry, rnr_wait_ps};
  ++messages_;
  Engine& e = network_->engine();
  e.Schedule<&FlowFabric::OnArrive>(e.Now() + forward, EventKind::kQpTimer,
                                    static_cast<uint32_t>(dst->host()), this, index);
}

void FlowFabric::OnArrive(void* fabric, uint64_t index) {
  FlowFabric* self = static_cast<FlowFabric*>(fabric);
  const Message& m = self->messages_pool_[index];
  const uint64_t key = (uint64_t{static_cast<uint32_t>(m.dst->host())} << 32) | m.dst_qpn;
  if (!self->blocked_.empty()) {  // nearly always empty: no RNR wait anywhere
    auto it = self->blocked_.find(key);
    if (it != self->blocked_.end()) {
      it->second.push_back(static_cast<uint32_t>(index));  // behind a waiting message
      return;
    }
  }
  self->TryReceive(static_cast<uint32_t>(index), key);
}

bool FlowFabric::TryReceive(uint32_t index, uint64_t key) {
  Message& m = messages_pool_[index];
  bool rnr = false;
  const WcStatus status = m.dst->FlowReceive(m.dst_qpn, m.wr, m.npkts, m.end_psn, &rnr);
  Engine& e = network_->engine();
  if (rnr) {
    // The RNR NAK goes back, the requester waits its RNR timer and sends
    // the message again (modelled as arriving again after the wait; the
    // bytes are not re-sent on the links), as long as rnr_retry allows.
    ++rnr_retries_;
    if (m.rnr_left == 0) {
      m.rnr_left = -1;  // fails at the requester
    } else {
      if (m.rnr_left != 7) --m.rnr_left;
      auto& queue = blocked_[key];
      queue.insert(queue.begin(), index);
      e.Schedule<&FlowFabric::OnRnrRetry>(e.Now() + m.back + Picoseconds(m.rnr_wait_ps),
                                          EventKind::kQpTimer, static_cast<uint32_t>(m.dst->host()),
                                          this, key);
      return false;
    }
  } else if (status != WcStatus::kSuccess) {
    m.rnr_left = -2 - static_cast<int>(status);  // the NAK's status, for OnAck
  }
  e.Schedule<&FlowFabric::OnAck>(e.Now() + m.back, EventKind::kQpTimer,
                                 static_cast<uint32_t>(m.src->host()), this, index);
  return true;
}

void FlowFabric::OnRnrRetry(void* fabric, uint64_t key) {
  FlowFabric* self = static_cast<FlowFabric*>(fabric);
  auto it = self->blocked_.find(key);
  if (it == self->blocked_.end()) return;
  std::vector<uint32_t> queue = std::move(it->second);
  self->blocked_.erase(it);
  for (size_t i = 0; i < queue.size(); ++i) {
    if (!self->TryReceive(queue[i], key)) {
      // It waits again (TryReceive queued it first): the rest stay behind.
      auto& again = self->blocked_[key];
      again.insert(again.end(), queue.begin() + static_cast<std::ptrdiff_t>(i) + 1, queue.end());
      return;
    }
  }
}

void FlowFabric::OnAck(void* fabric, uint64_t index) {
  FlowFabric* self = static_cast<FlowFabric*>(fabric);
  const Message m = self->messages_pool_[index];
  self->free_.push_back(static_cast<uint32_t>(index));
  WcStatus status = WcStatus::kSuccess;
  if (m.rnr_left == -1) status = WcStatus::kRnrRetryExcErr;
  if (m.rnr_left <= -2) status = static_cast<WcStatus>(-2 - m.rnr_left);
  m.src->FlowAcked(m.src_qpn, m.end_psn, status);
}

}  // namespace fathom::sim
