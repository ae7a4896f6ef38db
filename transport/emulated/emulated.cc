#include "transport/emulated/emulated.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <set>
#include <utility>
#include <vector>

namespace fathom::transport::emulated {
namespace {

class EmulatedMr final : public MemoryRegion {
 public:
  EmulatedMr(sim::Nic* nic, const sim::MemoryRegion& mr) : nic_(nic), mr_(mr) {}
  ~EmulatedMr() override { (void)nic_->DeregisterMemory(mr_.lkey); }
  void* addr() const override { return reinterpret_cast<void*>(mr_.addr); }
  uint64_t length() const override { return mr_.length; }
  uint32_t lkey() const override { return mr_.lkey; }
  uint32_t rkey() const override { return mr_.rkey; }

 private:
  sim::Nic* nic_;
  sim::MemoryRegion mr_;
};

class EmulatedQp;

// Completions arrive from the engine through the sim CQ's direct function,
// with the EmulatedQp their sim QP carries (Nic::SetQpContext: no lookup,
// no std::function between the NIC and here), and wait, converted, until
// Poll(). A completion and the poll after it read the CQ's first two lines
// only (64-byte aligned: at thousands of ranks each line is a miss).
class alignas(64) EmulatedCq final : public CompletionQueue {
 public:
  EmulatedCq(EmulatedFabric* fabric, sim::CompletionQueue* cq, int depth)
      : fabric_(fabric), cq_(cq), depth_(depth) {
    cq_->set_direct(&EmulatedCq::OnSim, this);
  }
  ~EmulatedCq() override { cq_->set_direct(nullptr, nullptr); }
  int Poll(std::span<Completion> out) override {
    int n = 0;
    while (n < static_cast<int>(out.size()) && head_ < count_) {
      out[static_cast<size_t>(n++)] = At(head_++);
    }
    if (head_ == count_) {
      // Drained: the next completion takes slot 0 again. more_ holds the
      // entries past kInline, so it has some only when count_ is past it.
      if (count_ > kInline) more_.clear();
      head_ = count_ = 0;
    } else if (head_ > kInline && head_ - kInline >= more_.size() / 2) {
      // Polled in part for long: drop what was taken (the queue stays
      // bounded by what waits, not by what ever arrived).
      const size_t taken = head_ - kInline;
      more_.erase(more_.begin(), more_.begin() + static_cast<std::ptrdiff_t>(taken));
      count_ -= taken;
      head_ = kInline;
    }
    return n;
  }
  void SetNotify(std::function<void()> notify) override { notify_ = std::move(notify); }
  sim::CompletionQueue* sim_cq() const { return cq_; }

 private:
  // sim::CompletionQueue::DirectFn; `qp` is the EmulatedQp (null: the QP
  // is being destroyed, its flushes carry no peer).
  static void OnSim(void* cq, void* qp, const sim::Completion& c);

  // The waiting completions in arrival order: slots [0, kInline) here, the
  // rest in more_. The driver polls after each completion, so the queue is
  // drained nearly every time and a completion lands in slot 0, in the CQ's
  // own lines (a deque's node was one more cache miss per completion).
  static constexpr size_t kInline = 2;
  Completion& At(size_t i) { return i < kInline ? inline_[i] : more_[i - kInline]; }
  void Push(const Completion& c) {
    if (count_ < kInline) {
      inline_[count_] = c;
    } else {
      more_.push_back(c);
    }
    ++count_;
  }

  // Line 0: what a completion reads (OnSim), then slot 0 in line 1.
  std::function<void()> notify_;
  EmulatedFabric* fabric_;
  size_t count_ = 0;  // pushed since the queue was last drained
  size_t head_ = 0;   // next to poll
  Completion inline_[kInline];
  std::vector<Completion> more_;
  sim::CompletionQueue* cq_;
  int depth_;
};

class EmulatedQp final : public QueuePair {
 public:
  EmulatedQp(EmulatedFabric* fabric, sim::Nic* nic, EmulatedCq* cq, int rank, int peer,
             uint32_t qpn, const QpOptions& options, int path_mtu, int active_mtu)
      : fabric_(fabric),
        nic_(nic),
        cq_(cq),
        rank_(rank),
        peer_(peer),
        qpn_(qpn),
        options_(options),
        path_mtu_(path_mtu),
        active_mtu_(active_mtu) {
    (void)nic_->SetQpContext(qpn_, this);  // the QP exists: CreateQp made it
  }
  ~EmulatedQp() override {
    (void)nic_->SetQpContext(qpn_, nullptr);
    (void)nic_->ModifyToError(qpn_);
  }
  uint32_t qp_num() const override { return qpn_; }
  int peer_rank() const override { return peer_; }
  QpState state() const override {
    auto s = nic_->GetQpState(qpn_);
    return s.ok() ? s.value() : QpState::kErr;
  }
  EndpointInfo LocalInfo() const override {
    EndpointInfo e;
    e.rank = rank_;
    e.qpn = qpn_;
    e.psn = Psn();
    const int32_t host = fabric_->NodeOf(rank_);
    e.gid[10] = 0xff;  // IPv4-mapped ::ffff:10.x.y.z, the host node id inside
    e.gid[11] = 0xff;
    e.gid[12] = 10;
    e.gid[13] = static_cast<uint8_t>(host >> 16);
    e.gid[14] = static_cast<uint8_t>(host >> 8);
    e.gid[15] = static_cast<uint8_t>(host);
    e.gid_index = 1;
    e.active_mtu = active_mtu_;
    return e;
  }
  Status Connect(const EndpointInfo& remote) override {
    const std::string call = "Connect qpn " + Hex(qpn_) + " -> rank " +
                             std::to_string(remote.rank) + " qpn " + Hex(remote.qpn);
    if (remote.rank != peer_ || remote.rank < 0 || remote.rank >= fabric_->nranks()) {
      return InvalidArgument(call + ": the QP was created for rank " + std::to_string(peer_));
    }
    if (options_.path_mtu == 0 && remote.active_mtu != fabric_->ActiveMtu(peer_)) {
      return InvalidArgument(call + ": peer active_mtu " + std::to_string(remote.active_mtu) +
                             " differs from the fabric's " +
                             std::to_string(fabric_->ActiveMtu(peer_)));
    }
    // CreateQp() took the QP to INIT; Connect() is INIT -> RTR -> RTS only,
    // as on verbs (a second Connect() is refused, naming the state).
    if (state() != QpState::kInit) {
      return FailedPrecondition(call + ": QP is in " + std::string(QpStateName(state())) +
                                ", not IBV_QPS_INIT");
    }
    const int32_t host = fabric_->NodeOf(peer_);
    FATHOM_RETURN_IF_ERROR(nic_->ModifyToRtr(qpn_, host, remote.qpn, remote.psn).WithContext(call));
    FATHOM_RETURN_IF_ERROR(nic_->ModifyToRts(qpn_, Psn()).WithContext(call));
    connected_ = true;
    return Status::Ok();
  }
  int path_mtu() const override { return connected_ ? path_mtu_ : 0; }
  Status PostSend(const SendWr& wr) override {
    if (sends_ >= options_.max_send_wr) {
      return Unavailable("ibv_post_send rank " + std::to_string(rank_) + " qpn " + Hex(qpn_) +
                         ": send queue full (max_send_wr " + std::to_string(options_.max_send_wr) +
                         ")");
    }
    NoteSend(wr.signaled);
    // The NIC refuses a WR, changing nothing, unless the QP is in RTS; the
    // state is asked only then (a lookup and a StatusOr per post before).
    Status st = nic_->PostSend(qpn_, wr);
    if (st.ok()) return st;
    if (state() == QpState::kErr) {
      // verbs accepts WRs in ERR and completes each with a flush error
      // (IBTA C10-42; rxe, mlx5), where the NIC model refuses them.
      sim::Completion c;
      c.wr_id = wr.wr_id;
      c.status = WcStatus::kWrFlushErr;
      c.opcode = SendCompletionOpcode(wr.opcode);
      c.qp_num = qpn_;
      c.time = fabric_->engine().Now();
      cq_->sim_cq()->Push(c, this);
      return Status::Ok();
    }
    --sends_;  // refused: not outstanding
    if (mixed_) signaled_.pop_back();
    if (sends_ == 0) EndMixed();
    return st;
  }
  Status PostRecv(const RecvWr& wr) override {
    if (recvs_ >= options_.max_recv_wr) {
      return Unavailable("ibv_post_recv rank " + std::to_string(rank_) + " qpn " + Hex(qpn_) +
                         ": receive queue full (max_recv_wr " +
                         std::to_string(options_.max_recv_wr) + ")");
    }
    ++recvs_;
    Status st = nic_->PostRecv(qpn_, wr);
    if (!st.ok()) --recvs_;
    return st;
  }
  int outstanding_sends() const override { return sends_; }
  int outstanding_recvs() const override { return recvs_; }
  Status ModifyToError() override { return nic_->ModifyToError(qpn_); }

  // A completion of this QP: unsignaled sends before a signaled one are done
  // too (verbs semantics).
  void OnCompletion(const Completion& c) {
    if (static_cast<uint8_t>(c.opcode) & 0x80) {
      if (recvs_ > 0) --recvs_;
      return;
    }
    if (!mixed_) {
      // Every outstanding send is signaled: this completion is the oldest's.
      if (sends_ > 0) --sends_;
      return;
    }
    while (sends_ > 0) {
      const bool signaled = signaled_.front();
      signaled_.pop_front();
      --sends_;
      if (signaled || c.status != WcStatus::kSuccess) break;
    }
    if (sends_ == 0) EndMixed();  // none outstanding: counting suffices again
  }

 private:
  uint32_t Psn() const { return (qpn_ * 0x9E3779B1u) & 0xffffffu; }
  // A send was accepted: counted, and its signaled flag kept once the QP
  // has unsignaled sends outstanding.
  void NoteSend(bool signaled) {
    if (!signaled && !mixed_) {
      mixed_ = true;
      signaled_.assign(static_cast<size_t>(sends_), true);
    }
    if (mixed_) signaled_.push_back(signaled);
    ++sends_;
  }
  void EndMixed() {
    mixed_ = false;
    signaled_.clear();
  }

  // A post and a completion read the first line only: the NIC and QPN,
  // the peer, the counts and (options_ first) the queue limits.
  EmulatedFabric* fabric_;
  sim::Nic* nic_;
  EmulatedCq* cq_;
  int rank_, peer_;
  uint32_t qpn_;
  // Sends posted, not completed. Once one is unsignaled (mixed_, until
  // none is outstanding), signaled_ holds every outstanding send's flag,
  // oldest first (an unsignaled send completes with the next signaled one:
  // verbs); otherwise it is empty and a completion only counts (the
  // collectives signal every send).
  int sends_ = 0;
  int recvs_ = 0;
  bool mixed_ = false;
  bool connected_ = false;
  QpOptions options_;
  int path_mtu_, active_mtu_;
  std::deque<bool> signaled_;
};

void EmulatedCq::OnSim(void* cq, void* qp, const sim::Completion& c) {
  EmulatedCq* self = static_cast<EmulatedCq*>(cq);
  Completion out{c};  // the verbs fields as the NIC reported them; the peer below
  if (qp != nullptr) {
    EmulatedQp* eqp = static_cast<EmulatedQp*>(qp);
    out.peer_rank = eqp->peer_rank();
    eqp->OnCompletion(out);
  }
  self->Push(out);
  (void)self->depth_;
  if (self->notify_) self->notify_();
  self->fabric_->OnCompletion();
}

class EmulatedDevice final : public Device {
 public:
  EmulatedDevice(EmulatedFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {
    nic_ = &fabric->network().nic(fabric->HostOf(rank));
    const auto& topo = fabric->network().topology();
    const int32_t host = fabric->NodeOf(rank);
    info_.name = "sim:" + topo.node(host).name;
    info_.fw_ver = "fathom-sim";
    info_.link_layer = "Emulated";
    info_.port_state = "ACTIVE";
    info_.active_mtu = fabric->ActiveMtu(rank);
    info_.gid_index = 1;
    info_.gid = "::ffff:10." + std::to_string((host >> 16) & 0xff) + "." +
                std::to_string((host >> 8) & 0xff) + "." + std::to_string(host & 0xff);
    info_.gid_type = "RoCE v2";
    if (topo.PortCount(host) > 0) {
      const topo::Link& link = topo.link(topo.LinkAt(host, 0));
      info_.netdev_mtu = link.a == host ? link.mtu_ab : link.mtu_ba;
      info_.active_gbps = link.rate.gbps();
    }
  }
  const DeviceInfo& info() const override { return info_; }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, uint64_t length,
                                                         uint32_t access) override {
    FATHOM_ASSIGN_OR_RETURN(sim::MemoryRegion mr, nic_->RegisterMemory(addr, length, access));
    return std::unique_ptr<MemoryRegion>(new EmulatedMr(nic_, mr));
  }
  StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override {
    return std::unique_ptr<CompletionQueue>(new EmulatedCq(fabric_, nic_->CreateCq(), depth));
  }
  StatusOr<std::unique_ptr<QueuePair>> CreateQp(int peer_rank, const QpOptions& options,
                                                CompletionQueue* cq) override {
    if (peer_rank < 0 || peer_rank >= fabric_->nranks()) {
      return InvalidArgument("ibv_create_qp rank " + std::to_string(rank_) + ": peer rank " +
                             std::to_string(peer_rank) + " outside 0.." +
                             std::to_string(fabric_->nranks() - 1));
    }
    auto* ecq = dynamic_cast<EmulatedCq*>(cq);
    if (ecq == nullptr) return InvalidArgument("ibv_create_qp: CQ is not an emulated CQ");
    const int local = fabric_->ActiveMtu(rank_);
    const int path =
        options.path_mtu > 0 ? options.path_mtu : std::min(local, fabric_->ActiveMtu(peer_rank));
    sim::QpAttr attr;
    attr.path_mtu_bytes = path;
    attr.timeout = options.timeout;
    attr.retry_cnt = options.retry_cnt;
    attr.rnr_retry = options.rnr_retry;
    attr.min_rnr_timer = options.min_rnr_timer;
    attr.max_rd_atomic = options.max_rd_atomic;
    attr.traffic_class = static_cast<uint8_t>(options.traffic_class);
    attr.rxe_infinite_retry = fabric_->options().rxe_infinite_retry;
    attr.ack_every_packets = fabric_->options().ack_every_packets;
    FATHOM_ASSIGN_OR_RETURN(uint32_t qpn, nic_->CreateQp(ecq->sim_cq(), ecq->sim_cq(), attr));
    // Straight to INIT, as the verbs backend (and rc_pingpong) does, so that
    // receives can be posted before Connect() on both (ibv_post_recv is
    // valid from INIT on, not in RESET).
    FATHOM_RETURN_IF_ERROR(nic_->ModifyToInit(qpn).WithContext(
        "ibv_create_qp rank " + std::to_string(rank_) + " peer " + std::to_string(peer_rank)));
    return std::unique_ptr<QueuePair>(
        new EmulatedQp(fabric_, nic_, ecq, rank_, peer_rank, qpn, options, path, local));
  }
  // The NIC's port events (a link fault on this host's link), as verbs
  // names them; the virtual time goes in the detail.
  std::vector<AsyncEvent> TakeAsyncEvents() override {
    std::vector<AsyncEvent> out;
    for (const sim::Nic::PortEvent& e : nic_->TakePortEvents()) {
      AsyncEvent a;
      a.type = e.up ? "IBV_EVENT_PORT_ACTIVE" : "IBV_EVENT_PORT_ERR";
      a.port = 1;
      a.detail = "rank " + std::to_string(rank_) + " port 1 " + (e.up ? "up" : "down") + " at " +
                 std::to_string(e.at.ps() / 1000) + " ns (virtual)";
      out.push_back(std::move(a));
    }
    return out;
  }

 private:
  EmulatedFabric* fabric_;
  int rank_;
  sim::Nic* nic_;
  DeviceInfo info_;
};

}  // namespace

int ActiveMtuForEthernetMtu(int eth_mtu) {
  for (int m = 4096; m >= 256; m /= 2) {
    if (m + 80 <= eth_mtu) return m;
  }
  return 0;
}

Picoseconds SimClock::Now() { return fabric_->engine().Now(); }

bool SimClock::Progress(Picoseconds until) {
  fabric_->TakeCompletionFlag();
  fabric_->engine().Run(until);
  const bool completed = fabric_->TakeCompletionFlag();
  return completed || fabric_->engine().pending() > 0;
}

EmulatedFabric::EmulatedFabric(sim::Network* network, const EmulatedOptions& options)
    : network_(network), options_(options), clock_(this) {}

int EmulatedFabric::ActiveMtu(int rank) const {
  const auto& topo = network_->topology();
  const int32_t host = NodeOf(rank);
  if (topo.PortCount(host) == 0) return 4096;
  const topo::Link& link = topo.link(topo.LinkAt(host, 0));
  const int eth = link.a == host ? link.mtu_ab : link.mtu_ba;
  return eth <= 0 ? 4096 : ActiveMtuForEthernetMtu(eth);
}

void EmulatedFabric::OnCompletion() {
  completion_flag_ = true;
  network_->engine().Stop();
}

StatusOr<std::unique_ptr<Device>> EmulatedFabric::OpenDevice(int rank) {
  if (rank < 0 || rank >= nranks()) {
    return InvalidArgument("OpenDevice: rank " + std::to_string(rank) + " outside 0.." +
                           std::to_string(nranks() - 1));
  }
  return std::unique_ptr<Device>(new EmulatedDevice(this, rank));
}

std::string EmulatedFabric::HostName(int rank) const {
  return network_->topology().node(NodeOf(rank)).name;
}

std::string EmulatedFabric::Evidence(const std::vector<QpRef>& qps) {
  return FormatEvidence(qps, CollectEvidence(qps, nullptr));
}

void EmulatedFabric::VisitEvidencePaths(
    const std::vector<QpRef>& qps, const std::function<void(const QpRef&)>& on_qp,
    const std::function<void(int32_t, int32_t)>& on_port) const {
  const auto& topo = network_->topology();
  for (const QpRef& q : qps) {
    on_qp(q);
    // Every port on a shortest path rank -> peer (any ECMP choice), and back
    // (the ACKs): the ones whose drop counters moved are the evidence.
    for (int dir = 0; dir < 2; ++dir) {
      const int32_t src = NodeOf(dir == 0 ? q.rank : q.peer);
      const int32_t dst = NodeOf(dir == 0 ? q.peer : q.rank);
      std::vector<int32_t> frontier{src};
      std::set<int32_t> seen{src};
      while (!frontier.empty()) {
        std::vector<int32_t> next;
        for (int32_t node : frontier) {
          const bool first_hop = node == src;
          std::span<const int32_t> hops;
          std::vector<int32_t> host_port{0};
          if (first_hop) {
            hops = std::span<const int32_t>(host_port);
          } else {
            hops = topo.NextHops(node, dst);
          }
          for (int32_t p : hops) {
            if (p >= topo.PortCount(node)) continue;
            on_port(node, p);
            const int32_t peer = topo.Peer(node, p).node;
            if (peer != dst && seen.insert(peer).second) next.push_back(peer);
          }
        }
        frontier.swap(next);
      }
    }
  }
}

EmulatedFabric::EvidenceFacts EmulatedFabric::CollectEvidence(
    const std::vector<QpRef>& qps, const std::function<bool(int32_t node)>& owns) {
  EvidenceFacts f;
  auto here = [&](int32_t node) { return !owns || owns(node); };
  VisitEvidencePaths(
      qps,
      [&](const QpRef& q) {
        sim::QpCounters c{};
        if (here(NodeOf(q.rank))) {
          auto counters = network_->nic(HostOf(q.rank)).GetQpCounters(q.qpn);
          if (counters.ok()) c = counters.value();
        }
        f.counts.insert(f.counts.end(), {c.retransmitted_packets, c.local_ack_timeout_err,
                                         c.packet_seq_err, c.retry_exceeded_err});
      },
      [&](int32_t node, int32_t p) {
        const sim::Port& port = network_->port(node, p);
        const bool mine = here(node);
        const sim::PortCounters& pc = port.counters();
        // The receive errors are counted where the frame arrives: the
        // peer's node.
        const bool peer_here = port.peer() != nullptr && here(port.peer()->config().node);
        f.counts.insert(f.counts.end(),
                        {mine ? pc.mtu_discards : 0, mine ? pc.port_xmit_discards : 0,
                         peer_here ? port.peer()->counters().port_rcv_errors : 0,
                         mine ? pc.port_xmit_packets : 0});
        // Fault models drop on the wire without moving port counters: the
        // hook names them and the link.
        f.texts.push_back(mine && port_evidence_ ? port_evidence_(port) : std::string());
      });
  const sim::DropStats& drops = network_->drops();
  f.counts.insert(f.counts.end(), drops.by_reason.begin(), drops.by_reason.end());
  return f;
}

std::string EmulatedFabric::FormatEvidence(const std::vector<QpRef>& qps,
                                           const EvidenceFacts& facts) const {
  const auto& topo = network_->topology();
  std::string r;
  char buf[512];
  std::set<std::pair<int32_t, int32_t>> ports;        // (node, port) already reported
  std::set<std::pair<int32_t, int32_t>> fault_ports;  // the same, for fault models
  int lines = 0;
  size_t at = 0, text_at = 0;
  VisitEvidencePaths(
      qps,
      [&](const QpRef& q) {
        const uint64_t* c = &facts.counts[at];
        at += 4;
        if (c[0] + c[1] + c[2] + c[3] > 0) {
          std::snprintf(buf, sizeof(buf),
                        "fabric: rank %d -> rank %d qpn 0x%x: retransmitted_packets %llu "
                        "local_ack_timeout_err %llu packet_seq_err %llu retry_exceeded_err %llu\n",
                        q.rank, q.peer, q.qpn, static_cast<unsigned long long>(c[0]),
                        static_cast<unsigned long long>(c[1]),
                        static_cast<unsigned long long>(c[2]),
                        static_cast<unsigned long long>(c[3]));
          r += buf;
        }
      },
      [&](int32_t node, int32_t p) {
        const uint64_t* c = &facts.counts[at];
        at += 4;
        const std::string& faults = facts.texts[text_at++];
        const uint64_t dropped = c[0] + c[1];
        const uint64_t errors = c[2];
        if (!faults.empty() && fault_ports.insert({node, p}).second && lines < 64) {
          const topo::Link& link = topo.link(topo.LinkAt(node, p));
          r += "fabric: link " + link.name + " (" + topo.node(node).name + " -> " +
               topo.node(topo.Peer(node, p).node).name + "): " + faults + "\n";
          ++lines;
        }
        if ((dropped + errors) > 0 && ports.insert({node, p}).second && lines < 64) {
          const topo::Link& link = topo.link(topo.LinkAt(node, p));
          std::snprintf(
              buf, sizeof(buf),
              "fabric: link %s (%s -> %s, mtu %d): mtu_discards %llu "
              "port_xmit_discards %llu port_rcv_errors %llu port_xmit_packets "
              "%llu\n",
              link.name.c_str(), topo.node(node).name.c_str(),
              topo.node(topo.Peer(node, p).node).name.c_str(),
              network_->port(node, p).config().mtu_bytes, static_cast<unsigned long long>(c[0]),
              static_cast<unsigned long long>(c[1]), static_cast<unsigned long long>(errors),
              static_cast<unsigned long long>(c[3]));
          r += buf;
          ++lines;
        }
      });
  std::string by_reason;
  for (size_t i = 0; at + i < facts.counts.size(); ++i) {
    if (facts.counts[at + i] == 0) continue;
    by_reason += " " + std::string(sim::DropReasonName(static_cast<sim::DropReason>(i))) + " " +
                 std::to_string(facts.counts[at + i]);
  }
  if (!by_reason.empty()) r += "fabric: drops in the whole network:" + by_reason + "\n";
  if (r.empty()) r = "fabric: no drops or retransmissions on the stuck QPs' paths\n";
  return r;
}

}  // namespace fathom::transport::emulated
