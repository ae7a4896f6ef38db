// FlowFabric: the NICs' flow model glue (flow_fabric.h).
#include "fabric/sim/flow_fabric.h"

#include <algorithm>

#include "base/pod_bytes.h"
#include "fabric/wire/psn.h"

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
  Engine& e = network->engine();
  e.set_prefetcher<&FlowFabric::OnArrive>(&FlowFabric::PrefetchArrive);
  e.set_prefetcher<&FlowFabric::OnAck>(&FlowFabric::PrefetchAck);
  // A flow's finish: its sender's NIC and QP (Nic::OnFlowSent).
  f->model_.set_done_hint([](const void* nic, uint64_t qpn) {
    Nic::PrefetchFlowQp(static_cast<const Nic*>(nic), static_cast<uint32_t>(qpn), false);
  });
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

uint32_t FlowFabric::TakeSlot() {
  if (!free_.empty()) {
    const uint32_t index = free_.back();
    free_.pop_back();
    return index;
  }
  messages_pool_.emplace_back();
  return static_cast<uint32_t>(messages_pool_.size() - 1);
}

void FlowFabric::Deliver(Nic* src, uint32_t src_qpn, Nic* dst, uint32_t dst_qpn, const SendWr& wr,
                         uint32_t npkts, uint32_t end_psn, Picoseconds forward, Picoseconds back,
                         int rnr_retry, int64_t rnr_wait_ps) {
  const uint32_t index = TakeSlot();
  messages_pool_[index] =
      Message{src, dst, src_qpn, dst_qpn, wr, npkts, end_psn, back, rnr_retry, rnr_wait_ps};
  ++messages_;
  Engine& e = network_->engine();
  e.Schedule<&FlowFabric::OnArrive>(e.Now() + forward, EventKind::kQpTimer,
                                    static_cast<uint32_t>(dst->host()), this, index);
}

void FlowFabric::PrefetchArrive(const void* fabric, uint64_t index) {
  const Message& m = static_cast<const FlowFabric*>(fabric)->messages_pool_[index];
  Nic::PrefetchFlowQp(m.dst, m.dst_qpn, true);
}

void FlowFabric::PrefetchAck(const void* fabric, uint64_t index) {
  const Message& m = static_cast<const FlowFabric*>(fabric)->messages_pool_[index];
  if (m.src != nullptr) Nic::PrefetchFlowQp(m.src, m.src_qpn, false);
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
  SendAck(index, e.Now() + m.back);
  return true;
}

void FlowFabric::SendAck(uint32_t index, Picoseconds at) {
  if (!split_) {
    Engine& e = network_->engine();
    e.Schedule<&FlowFabric::OnAck>(at, EventKind::kQpTimer,
                                   static_cast<uint32_t>(messages_pool_[index].src->host()), this,
                                   index);
    return;
  }
  const Message& m = messages_pool_[index];
  acks_out_.push_back(AckNote{at.ps(), m.src->host(), m.src_qpn, m.end_psn, m.rnr_left});
  free_.push_back(index);
}

void FlowFabric::Split(std::vector<char> local, bool counts_replicas) {
  split_ = true;
  local_ = std::move(local);
  model_.set_uncounted(!counts_replicas);
}

void FlowFabric::NotePost(const Nic& nic, uint32_t qpn, const SendWr& wr, int64_t at_ps) {
  if (split_) posts_out_.push_back(PostNote{at_ps, nic.host(), qpn, wr});
}

std::vector<std::string> FlowFabric::TakeOutbox(const std::vector<int32_t>& owner, int32_t me,
                                                int32_t procs, int64_t* least) {
  // Per destination: the post count, the posts, then the ACKs.
  std::vector<std::string> out(static_cast<size_t>(procs));
  for (int32_t p = 0; p < procs; ++p) {
    if (p == me) continue;  // its own posts are in its send queues already
    std::string& o = out[static_cast<size_t>(p)];
    AppendPod(&o, static_cast<uint64_t>(posts_out_.size()));
    for (const PostNote& n : posts_out_) AppendPod(&o, n);
    posts_shipped_ += posts_out_.size();
  }
  if (out[static_cast<size_t>(me)].empty()) AppendPod(&out[static_cast<size_t>(me)], uint64_t{0});
  for (const AckNote& a : acks_out_) {
    const int32_t p = owner[static_cast<size_t>(a.src_host)];
    AppendPod(&out[static_cast<size_t>(p)], a);
    *least = std::min(*least, a.at_ps);
    if (p != me) ++acks_shipped_;
  }
  posts_out_.clear();
  acks_out_.clear();
  return out;
}

void FlowFabric::TakeInbox(const std::vector<std::string>& in) {
  std::vector<AckNote> acks;
  for (const std::string& batch : in) {
    const char* at = batch.data();
    const char* const end = at + batch.size();
    uint64_t nposts = 0;
    if (!ReadPod(at, end, &nposts)) continue;
    PostNote n;
    for (uint64_t i = 0; i < nposts && ReadPod(at, end, &n); ++i) {
      // The replica's NIC queues it as its own PostSend would have.
      Nic* nic = NicOfHost(n.host);
      if (nic == nullptr) continue;
      nic->delayed_posts_.push_back(Nic::DelayedPost{n.at_ps, n.qpn, n.wr});
      if (nic->delayed_posts_.size() == 1) nic->ScheduleDelayed(0, n.at_ps);
    }
    AckNote a;
    while (ReadPod(at, end, &a)) acks.push_back(a);
  }
  // One order for any number of processes (the senders' order is not).
  std::sort(acks.begin(), acks.end(), [](const AckNote& a, const AckNote& b) {
    if (a.at_ps != b.at_ps) return a.at_ps < b.at_ps;
    if (a.src_host != b.src_host) return a.src_host < b.src_host;
    if (a.src_qpn != b.src_qpn) return a.src_qpn < b.src_qpn;
    return wire::PsnDiff(a.end_psn, b.end_psn) < 0;
  });
  Engine& e = network_->engine();
  for (const AckNote& a : acks) {
    const uint32_t index = TakeSlot();
    Message& m = messages_pool_[index];
    m = Message{};
    m.src = NicOfHost(a.src_host);
    m.src_qpn = a.src_qpn;
    m.end_psn = a.end_psn;
    m.rnr_left = a.rnr_left;
    e.Schedule<&FlowFabric::OnAck>(Picoseconds(a.at_ps), EventKind::kQpTimer,
                                   static_cast<uint32_t>(a.src_host), this, index);
  }
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
