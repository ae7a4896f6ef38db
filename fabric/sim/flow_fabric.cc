// FlowFabric: the NICs' flow model glue (flow_fabric.h).
#include "fabric/sim/flow_fabric.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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

uint32_t FlowFabric::Deliver(Nic* src, uint32_t src_qpn, Nic* dst, uint32_t dst_qpn,
                             const SendWr& wr, uint32_t npkts, uint32_t end_psn,
                             Picoseconds forward, Picoseconds back, int rnr_retry,
                             int64_t rnr_wait_ps) {
  const uint32_t index = TakeSlot();
  messages_pool_[index] =
      Message{src, dst, src_qpn, dst_qpn, wr, npkts, end_psn, back, rnr_retry, false, rnr_wait_ps};
  ++messages_;
  Engine& e = network_->engine();
  e.Schedule<&FlowFabric::OnArrive>(e.Now() + forward, EventKind::kQpTimer,
                                    static_cast<uint32_t>(dst->host()), this, index);
  return index;
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
  if (m.withdrawn) [[unlikely]] {  // its QP failed before it left (Withdraw)
    --self->messages_;
    self->free_.push_back(static_cast<uint32_t>(index));
    return;
  }
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

StatusOr<size_t> FlowFabric::Plan(std::vector<std::pair<int32_t, uint32_t>> data,
                                  const std::vector<int32_t>& owner, int32_t me, int32_t procs,
                                  bool full) {
  if (model_.running() != 0) {
    return FailedPrecondition("FlowFabric::Plan: " + std::to_string(model_.running()) +
                              " flows still run");
  }
  std::sort(data.begin(), data.end());
  data.erase(std::unique(data.begin(), data.end()), data.end());
  std::vector<Nic::Qp*> qps;
  for (const auto& [host, qpn] : data) {
    Nic* nic = NicOfHost(host);
    Nic::Qp* qp = nic != nullptr ? nic->FindQp(qpn) : nullptr;
    if (qp == nullptr) {
      return InvalidArgument("FlowFabric::Plan: no QP " + std::to_string(qpn) + " at host node " +
                             std::to_string(host));
    }
    nic->FlowRouteOf(*qp);
    qps.push_back(qp);
  }
  // Union-find over the QPs, joined by the links their routes share.
  std::vector<uint32_t> up(qps.size());
  for (uint32_t i = 0; i < up.size(); ++i) up[i] = i;
  auto root = [&up](uint32_t i) {
    while (up[i] != i) i = up[i] = up[up[i]];
    return i;
  };
  std::vector<int32_t> first_on(static_cast<size_t>(model_.links()), -1);
  for (uint32_t i = 0; i < qps.size(); ++i) {
    const Nic::Qp::FlowRoute& r = qps[i]->flow_route;
    for (size_t k = 0; k < r.nlinks; ++k) {
      int32_t& first = first_on[static_cast<size_t>(r.links[k])];
      if (first < 0) {
        first = static_cast<int32_t>(i);
      } else {
        const uint32_t a = root(i), b = root(static_cast<uint32_t>(first));
        up[std::max(a, b)] = std::min(a, b);
      }
    }
  }
  // Classes numbered by their first QP in (host, QPN) order: the same in
  // every process.
  std::vector<uint32_t> class_of_root(qps.size(), 0);
  std::vector<uint32_t> sizes;
  for (uint32_t i = 0; i < qps.size(); ++i) {
    const uint32_t r = root(i);
    if (class_of_root[r] == 0) {
      sizes.push_back(0);
      class_of_root[r] = static_cast<uint32_t>(sizes.size());
    }
    ++sizes[class_of_root[r] - 1];
  }
  if (full || sizes.size() <= 1) sizes.clear();
  classes_ = sizes.size();
  procs_ = procs;
  holds_.assign(classes_ * static_cast<size_t>(procs), 0);
  for (Nic* nic : nic_of_node_) {
    if (nic == nullptr) continue;
    for (uint32_t i = 0; i < nic->qp_count_; ++i) nic->QpAt(i)->flow_route.split_class = 0;
  }
  std::vector<char> counted(classes_, 0);
  if (classes_ != 0) {
    for (uint32_t i = 0; i < qps.size(); ++i) {
      const uint32_t c = class_of_root[root(i)];
      qps[i]->flow_route.split_class = c;
      const int32_t p = owner[static_cast<size_t>(data[i].first)];
      holds_[(c - 1) * static_cast<size_t>(procs) + static_cast<size_t>(p)] = 1;
    }
    for (size_t c = 0; c < classes_; ++c) {
      // The least process replicating the class counts its finishes.
      for (int32_t p = 0; p < procs; ++p) {
        if (holds_[c * static_cast<size_t>(procs) + static_cast<size_t>(p)] != 0) {
          counted[c] = p == me;
          break;
        }
      }
    }
  }
  if (!model_.SetClasses(std::move(sizes), std::move(counted))) {
    return FailedPrecondition("FlowFabric::Plan: the flow model refused its classes");
  }
  return classes_;
}

std::string FlowFabric::PostsCrossBecause(int32_t procs) const {
  if (procs <= 1) return "";
  if (classes_ == 0) {
    return "every process replicates every flow (no plan of the data QPs, or they all share "
           "links: one class)";
  }
  for (size_t c = 0; c < classes_; ++c) {
    int32_t first = -1;
    for (int32_t p = 0; p < procs_; ++p) {  // Plan's
      if (holds_[c * static_cast<size_t>(procs_) + static_cast<size_t>(p)] == 0) continue;
      if (first < 0) {
        first = p;
        continue;
      }
      return "data QPs whose routes share links (class " + std::to_string(c + 1) + " of " +
             std::to_string(classes_) + ") are in processes " + std::to_string(first) + " and " +
             std::to_string(p);
    }
  }
  return "";
}

void FlowFabric::NotePost(const Nic& nic, uint32_t qpn, const SendWr& wr, int64_t at_ps) {
  if (!split_) return;
  Nic* n = NicOfHost(nic.host());
  Nic::Qp* qp = n->FindQp(qpn);
  Nic::Qp::FlowRoute& r = qp->flow_route;
  ++r.split_posts;
  // The replicas' copy of the QP is idle when every message shipped to
  // them has left here (the same flows finish at the same times there);
  // messages leave in post order. A folded one-packet message counts as
  // sent from its start (Nic::FlowActivate) but leaves at flow_free_ps.
  const bool leaving = network_->engine().Now().ps() < qp->flow_free_ps;
  const bool replica_idle = r.split_sent - (leaving ? 1u : 0u) >= r.split_shipped;
  const bool one_packet = wr.sge.length <= static_cast<uint32_t>(qp->attr.path_mtu_bytes);
  if (one_packet && replica_idle) {
    // Kept home: it shares no link (FlowModel::Pass) and the replicas have
    // nothing of this QP to send behind it. It leaves when it reaches the
    // send queue or when the one kept before it left, whichever is later
    // (a shipped one before it has left already).
    const int64_t start = std::max(at_ps, r.split_kept_until);
    r.split_kept_until = start + n->FlowLoneTime(*qp, wr);
    ++posts_kept_;
    return;
  }
  // A message kept home may still be leaving when this one reaches the
  // send queue: the replicas hold the QP until it has.
  if (classes_ != 0 && r.split_class == 0) [[unlikely]] {
    // Its flow could share a link with a class whose processes do not
    // replicate it: results would depend on the number of processes.
    std::fprintf(stderr,
                 "flow model: a %u-byte message on QP 0x%x of host node %d, which the "
                 "collective did not declare as a data QP (FlowFabric::Plan)\n",
                 wr.sge.length, qpn, nic.host());
    std::abort();
  }
  const int64_t free_at = replica_idle && r.split_kept_until >= at_ps ? r.split_kept_until : -1;
  r.split_shipped = r.split_posts;
  posts_out_.push_back(PostNote{at_ps, nic.host(), qpn, wr, free_at});
  posts_out_class_.push_back(r.split_class);
}

void FlowFabric::OnKeptDone(void* nic, uint64_t qpn) {
  Nic* n = static_cast<Nic*>(nic);
  FlowFabric* self = n->flow_;
  self->Uncount(self->network_->engine().Now().ps(), EventKind::kUser,
                PassKey(n->host(), static_cast<uint32_t>(qpn)));
  Nic::Qp* qp = n->FindQp(static_cast<uint32_t>(qpn));
  qp->flow_busy = false;
  n->FlowActivate(*qp);
}

void FlowFabric::NoteArrival(Nic* src, uint32_t src_qpn, Nic* dst, uint32_t dst_qpn,
                             const SendWr& wr, uint32_t npkts, uint32_t end_psn, Picoseconds later,
                             Picoseconds forward, Picoseconds back, int rnr_retry,
                             int64_t rnr_wait_ps) {
  const Picoseconds leave = network_->engine().Now() + later;
  const ArriveNote note{(leave + forward).ps(),
                        src->host(),
                        dst->host(),
                        src_qpn,
                        dst_qpn,
                        wr,
                        npkts,
                        end_psn,
                        back.ps(),
                        rnr_retry,
                        rnr_wait_ps};
  if (later.ps() == 0) {
    arrivals_out_.push_back(note);
  } else {
    arrivals_held_.emplace_back(leave.ps(), note);
  }
}

SendWr FlowFabric::WithdrawHeld(int32_t src_host, uint32_t src_qpn) {
  for (size_t i = arrivals_held_.size(); i-- > 0;) {
    const ArriveNote& a = arrivals_held_[i].second;
    if (a.src_host != src_host || a.src_qpn != src_qpn) continue;
    const SendWr wr = a.wr;
    arrivals_held_.erase(arrivals_held_.begin() + static_cast<std::ptrdiff_t>(i));
    return wr;
  }
  // Nic::FlowWithdrawFold calls this only while its message is leaving,
  // which is while its arrival is held.
  std::fprintf(stderr, "flow model: no held arrival of QP 0x%x of host node %d to withdraw\n",
               src_qpn, src_host);
  std::abort();
}

std::vector<std::string> FlowFabric::TakeOutbox(const std::vector<int32_t>& owner, int32_t me,
                                                int32_t procs, int64_t through_ps, int64_t* least) {
  // The folded messages that have left go with the rest; those still
  // leaving stay, and the run must reach the window they leave in.
  std::erase_if(arrivals_held_, [&](const std::pair<int64_t, ArriveNote>& held) {
    if (held.first <= through_ps) {
      arrivals_out_.push_back(held.second);
      return true;
    }
    *least = std::min(*least, held.first);
    return false;
  });
  // Per destination: the post count, the posts, the arrival count, the
  // arrivals, then the ACKs.
  std::vector<std::vector<const ArriveNote*>> arrivals(static_cast<size_t>(procs));
  for (const ArriveNote& a : arrivals_out_) {
    const int32_t p = owner[static_cast<size_t>(a.dst_host)];
    arrivals[static_cast<size_t>(p)].push_back(&a);
    *least = std::min(*least, a.at_ps);
    if (p != me) ++arrivals_shipped_;
  }
  std::vector<std::string> out(static_cast<size_t>(procs));
  const uint64_t shipped_before = posts_shipped_;
  for (int32_t p = 0; p < procs; ++p) {
    std::string& o = out[static_cast<size_t>(p)];
    if (p == me) {
      AppendPod(&o, uint64_t{0});  // its own posts are in its send queues already
    } else if (classes_ == 0) {
      AppendPod(&o, static_cast<uint64_t>(posts_out_.size()));
      for (const PostNote& n : posts_out_) AppendPod(&o, n);
      posts_shipped_ += posts_out_.size();
    } else {
      // Only to the processes that replicate the post's class (Plan).
      const size_t count_at = o.size();
      AppendPod(&o, uint64_t{0});
      uint64_t count = 0;
      for (size_t i = 0; i < posts_out_.size(); ++i) {
        const uint32_t c = posts_out_class_[i];
        if (c == 0 || holds_[(c - 1) * static_cast<size_t>(procs_) + static_cast<size_t>(p)] == 0) {
          continue;
        }
        AppendPod(&o, posts_out_[i]);
        ++count;
      }
      std::memcpy(o.data() + count_at, &count, sizeof(count));
      posts_shipped_ += count;
    }
    AppendPod(&o, static_cast<uint64_t>(arrivals[static_cast<size_t>(p)].size()));
    for (const ArriveNote* a : arrivals[static_cast<size_t>(p)]) AppendPod(&o, *a);
  }
  if (no_post_lookahead_ && posts_shipped_ != shipped_before) [[unlikely]] {
    // DistSimBackend admitted the run because no class spans processes
    // (PostsCrossBecause): a post crossing now would start its flow there
    // before the window that carries it.
    std::fprintf(stderr,
                 "flow model: %llu posts crossed to other processes with a NIC profile that "
                 "posts with no delay (no lookahead)\n",
                 static_cast<unsigned long long>(posts_shipped_ - shipped_before));
    std::abort();
  }
  for (const AckNote& a : acks_out_) {
    const int32_t p = owner[static_cast<size_t>(a.src_host)];
    AppendPod(&out[static_cast<size_t>(p)], a);
    *least = std::min(*least, a.at_ps);
    if (p != me) ++acks_shipped_;
  }
  posts_out_.clear();
  posts_out_class_.clear();
  acks_out_.clear();
  arrivals_out_.clear();
  return out;
}

void FlowFabric::TakeInbox(const std::vector<std::string>& in) {
  std::vector<AckNote> acks;
  std::vector<ArriveNote> arrivals;
  Engine& e = network_->engine();
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
      if (n.free_at >= 0) {
        // Busy with what was kept home until it leaves, at the time and
        // component of the event that frees the QP in its own process
        // (Nic::OnFlowFree).
        nic->FindQp(n.qpn)->flow_busy = true;
        ++replica_holds_;
        e.Schedule<&FlowFabric::OnKeptDone>(Picoseconds(n.free_at), EventKind::kUser,
                                            PassKey(n.host, n.qpn), nic, n.qpn);
      }
    }
    uint64_t narrivals = 0;
    if (!ReadPod(at, end, &narrivals)) continue;
    ArriveNote r;
    for (uint64_t i = 0; i < narrivals && ReadPod(at, end, &r); ++i) arrivals.push_back(r);
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
  std::sort(arrivals.begin(), arrivals.end(), [](const ArriveNote& a, const ArriveNote& b) {
    if (a.at_ps != b.at_ps) return a.at_ps < b.at_ps;
    if (a.dst_host != b.dst_host) return a.dst_host < b.dst_host;
    if (a.dst_qpn != b.dst_qpn) return a.dst_qpn < b.dst_qpn;
    return wire::PsnDiff(a.end_psn, b.end_psn) < 0;
  });
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
  for (const ArriveNote& r : arrivals) {
    // At r.at_ps (at least a window ahead: the route's latency).
    Deliver(NicOfHost(r.src_host), r.src_qpn, NicOfHost(r.dst_host), r.dst_qpn, r.wr, r.npkts,
            r.end_psn, Picoseconds(r.at_ps) - e.Now(), Picoseconds(r.back_ps), r.rnr_retry,
            r.rnr_wait_ps);
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
