#include "fabric/parallel/parallel_run.h"

#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string_view>

#include "base/pod_bytes.h"
#include "fabric/parallel/pfc_cross.h"
#include "fabric/scenario/pfc_field.h"
#include "fabric/scenario/reroute.h"
#include "fabric/scenario/workload.h"

namespace fathom::parallel {
namespace {

// This thread's CPU time (user and system), in seconds.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A shipped entry's form (see Ship).
enum Form : uint8_t {
  kCompact = 0,      // a compact entry (Held words; the flow by number)
  kPooled = 1,       // a pool packet to deliver
  kAlonePacket = 2,  // a packet a fault delayed, travelling on its own
  kLostEntry = 3,    // lost on the wire: its arrival takes it off the ring
  kAloneEntry = 4,   // the ring entry of the last kAlonePacket
  // Or-ed into a form that carries a packet: its payload bytes follow it
  // (uint16 length, then the bytes), for packets that move real data.
  kWithData = 0x80,
  // Or-ed in: the packet's RETH address is relative to its region (the
  // memory behind it has another address in each process).
  kRelativeVa = 0x40,
};

bool HasReth(sim::Opcode op) {
  return op == sim::Opcode::kRdmaWriteFirst || op == sim::Opcode::kRdmaWriteOnly ||
         op == sim::Opcode::kRdmaWriteOnlyWithImmediate || op == sim::Opcode::kRdmaReadRequest;
}

struct Header {
  int32_t node;
  int32_t index;
  uint32_t flow;
  uint8_t form;
  uint64_t w0;
  uint64_t w1;
};
constexpr size_t kHeaderBytes = 4 + 4 + 4 + 1 + 8 + 8;

template <typename T>
T Get(const char*& at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  at += sizeof(T);
  return v;
}

}  // namespace

DistributedRun::DistributedRun(Comm* comm, const topo::Topology* topology,
                               const proto::Scenario* spec)
    : comm_(comm), topology_(topology), spec_(spec) {
#ifdef __GLIBC__
  // Every window builds its batches (the outbox, the flow model's notes, the
  // received copies) and frees them at its end, at the top of the heap,
  // where glibc gives back anything above its trim threshold: the next
  // window's batches were fresh pages, a page fault each 4 KiB, every
  // window. Keeping up to 64 MiB free at the top costs no more memory than
  // the largest window held. Allocator policy only: no event changes.
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

Status DistributedRun::OnNetwork(sim::Network& net) {
  const int32_t size = comm_->size();
  if (size > 1) {
    for (int i = 0; i < spec_->faults_size(); ++i) {
      if (!spec_->faults(i).reroute_via().empty()) reroutes_ = true;
    }
  }
  if (by_hosts_) {
    FATHOM_ASSIGN_OR_RETURN(partition_, PartitionHosts(*topology_, size, together_, used_));
  } else {
    FATHOM_ASSIGN_OR_RETURN(partition_, PartitionFabric(*topology_, size, together_, used_));
  }
  const sim::Port* any_host_port = nullptr;
  for (int32_t h : topology_->hosts()) {
    if (topology_->PortCount(h) > 0) {
      any_host_port = &net.port(h, 0);
      break;
    }
  }
  // The NIC pipelines Network folds into host links: the least of the two
  // directions of a host link, over its configured latency.
  Picoseconds extra(0);
  if (any_host_port != nullptr) {
    const topo::Link& l = topology_->link(any_host_port->config().link);
    const Picoseconds up = any_host_port->config().latency - l.latency;
    const Picoseconds down = any_host_port->peer()->config().latency - l.latency;
    extra = std::min(up, down);
  }
  FATHOM_ASSIGN_OR_RETURN(window_, SyncWindow(*topology_, partition_, extra));
  outbox_.assign(static_cast<size_t>(size), std::string());
  net_ = &net;
  host_index_.assign(static_cast<size_t>(topology_->nodes().size()), -1);
  for (size_t h = 0; h < topology_->hosts().size(); ++h) {
    host_index_[static_cast<size_t>(topology_->hosts()[h])] = static_cast<int32_t>(h);
  }
  const int32_t me = comm_->rank();
  for (sim::Port* p : net.ports()) {
    const int32_t tx = p->config().node;
    const int32_t rx = p->peer()->config().node;
    const bool owns_tx = partition_.Owns(me, tx);
    const bool owns_rx = partition_.Owns(me, rx);
    if (owns_tx && !owns_rx) {
      p->set_remote(&link_);
      // PAUSE pulls back queued frames: ship them once they started.
      p->set_ship_deferred(UsesPfc(net));
      remote_ports_.push_back(p);
    } else if (!owns_tx && owns_rx) {
      p->set_mirror(true);
    }
    // A re-route must never hand a packet to one of these (CheckNoHandOff).
    if (!owns_tx && reroutes_) foreign_ports_.push_back(p);
  }
  return Status::Ok();
}

void DistributedRun::OnFlows(const std::vector<sim::Flow>& flows) {
  const std::vector<int32_t>& hosts = topology_->hosts();
  used_.assign(topology_->nodes().size(), 0);
  for (const sim::Flow& f : flows) {
    for (const int32_t rank : {f.src, f.dst}) {
      if (rank >= 0 && static_cast<size_t>(rank) < hosts.size()) {
        used_[static_cast<size_t>(hosts[static_cast<size_t>(rank)])] = 1;
      }
    }
  }
}

void DistributedRun::NumberFlows(sim::Network& net) {
  for (int32_t h = 0; h < net.host_count(); ++h) {
    net.nic(h).ForEachFlow([&](sim::QpFlow& f) {
      flow_ids_.emplace(&f, static_cast<uint32_t>(flows_.size()));
      flows_.push_back(&f);
    });
  }
}

Status DistributedRun::AdoptQps(sim::Network& net) {
  NumberFlows(net);
  net.engine().RetainEvents([this](const sim::Event& e) { return KeepHere(e); });
  // Shipped payloads live until the packet that carries them is freed.
  net.pool().set_on_free_data(&DistributedRun::FreeShippedData, this);
  return Status::Ok();
}

bool DistributedRun::KeepHere(const sim::Event& e) {
  const int32_t me = comm_->rank();
  switch (e.kind) {
    case sim::EventKind::kFault:
      if (KeepReroute(e)) return true;
      [[fallthrough]];
    case sim::EventKind::kNicPump:
      return e.component < partition_.owner.size() &&
             partition_.Owns(me, static_cast<int32_t>(e.component));
    case sim::EventKind::kQpTimer:
      return e.component / 65536u < partition_.owner.size() &&
             partition_.Owns(me, static_cast<int32_t>(e.component / 65536u));
    default:
      return true;
  }
}

void DistributedRun::RetainOwnEvents(sim::Network& net) {
  // The pending re-routes kept before are seen again: the list keeps each
  // (time, node) as often as the more of the two counts.
  std::vector<std::pair<int64_t, uint32_t>> before;
  before.swap(foreign_reroutes_);
  net.engine().RetainEvents([this](const sim::Event& e) { return KeepHere(e); });
  std::sort(before.begin(), before.end());
  std::sort(foreign_reroutes_.begin(), foreign_reroutes_.end());
  std::vector<std::pair<int64_t, uint32_t>> merged;
  std::set_union(before.begin(), before.end(), foreign_reroutes_.begin(), foreign_reroutes_.end(),
                 std::back_inserter(merged));
  foreign_reroutes_ = std::move(merged);
}

uint64_t DistributedRun::LocalEvents(const sim::Engine& engine) const {
  uint64_t events = engine.events_dispatched() - SettleEvents(remote_ports_);
  for (const auto& [time, component] : foreign_reroutes_) {
    if (time <= engine.last_event_time().ps()) --events;
  }
  return events;
}

bool DistributedRun::KeepReroute(const sim::Event& e) {
  // Every process applies a re-route (its routes are its own copy); the
  // process that owns the event's node counts it.
  if (e.handler != sim::kHandlerOf<&sim::Reroute::OnApply> &&
      e.handler != sim::kHandlerOf<&sim::Reroute::OnRestore>) {
    return false;
  }
  if (e.component >= partition_.owner.size() ||
      !partition_.Owns(comm_->rank(), static_cast<int32_t>(e.component))) {
    foreign_reroutes_.emplace_back(static_cast<int64_t>(e.time), e.component);
  }
  return true;
}

void DistributedRun::DropForeignReroutes(int64_t last_until) {
  // The foreign events this process ran (their digests: LocalDigestSum).
  for (const auto& [time, component] : foreign_reroutes_) {
    if (time <= last_until) --stats_.events;
  }
}

void DistributedRun::CheckNoHandOff() const {
  // A port this process does not send on sent (or queued, or dropped) a
  // packet: a switch here put it in another switch's queue, which a switch
  // never does (reroute.h), and the run is wrong. Counters only grow, so
  // one look at the end sees any.
  for (const sim::Port* p : foreign_ports_) {
    bool sent = p->send_attempts() > 0;
    if (p->pfc() != nullptr) {
      for (int tc = 0; tc < 8; ++tc) sent = sent || p->waiting_bytes(tc) > 0;
    }
    if (!sent) continue;
    std::fprintf(stderr,
                 "fathom: internal error: process %d handed a packet to port %d of node %s, "
                 "which another process sends on (a re-route forwarded it outside a link)\n",
                 comm_->rank(), p->config().index, topology_->node(p->config().node).name.c_str());
    std::abort();
  }
}

bool DistributedRun::RelativeVa(const sim::Packet& p, uint64_t* va) const {
  if (!HasReth(p.opcode) || p.ext().rkey == sim::kModelledKey) return false;
  const int32_t host = host_index_[static_cast<size_t>(p.flow->dst_host)];
  if (host < 0) return false;
  const sim::MemoryRegion* mr = net_->nic(host).RegionOfKey(p.ext().rkey);
  if (mr == nullptr || p.ext().va < mr->addr) return false;  // the far end will refuse it
  *va = p.ext().va - mr->addr;
  return true;
}

void DistributedRun::AbsoluteVa(sim::Packet* p, uint64_t offset) const {
  const int32_t host = host_index_[static_cast<size_t>(p->flow->dst_host)];
  const sim::MemoryRegion* mr = host < 0 ? nullptr : net_->nic(host).RegionOfKey(p->ext().rkey);
  p->ext().va = (mr != nullptr ? mr->addr : 0) + offset;
}

void DistributedRun::FreeShippedData(void* ctx, sim::Packet* p) {
  static_cast<DistributedRun*>(ctx)->shipped_data_.erase(p);
}

void DistributedRun::ShipStarted(sim::Network& net) {
  const int64_t until = net.engine().Now().ps();
  for (sim::Port* p : remote_ports_) p->ShipStarted(until);
}

int64_t DistributedRun::NextTime(sim::Engine& engine) const {
  int64_t t = engine.NextEventTime().ps();
  for (const sim::Port* p : remote_ports_) t = std::min(t, p->next_ship_ps());
  return t;
}

uint64_t DistributedRun::LocalDigestSum(const sim::Engine& engine) const {
  uint64_t sum = engine.digest_sum() - SettleDigest(remote_ports_);
  // The re-routes run here for another process's node (KeepReroute): a
  // re-route mixes nothing of its own in, so each one's digest is the bare
  // event's. Those up to the last event ran (no partial time: nothing stops
  // the engine mid-picosecond here).
  for (const auto& [time, component] : foreign_reroutes_) {
    if (time <= engine.last_event_time().ps()) {
      sum -= sim::Engine::CanonicalEventDigest(time, sim::EventKind::kFault, component);
    }
  }
  return sum;
}

std::vector<std::string> DistributedRun::ExchangeWindow(sim::Network& net,
                                                        std::vector<int64_t>* agree,
                                                        const std::vector<std::string>& extra,
                                                        bool window_ran) {
  ShipStarted(net);
  std::vector<int64_t>& words = *agree;
  words[0] = std::min({words[0], NextTime(net.engine()), shipped_arrival_});
  shipped_arrival_ = Picoseconds::Max().ps();
  const auto exchange_start = std::chrono::steady_clock::now();
  const double cpu_start = ThreadCpuSeconds();
  // Per destination: the words, the packets' byte count, the packets, the
  // caller's batch.
  const size_t head = words.size() * sizeof(int64_t);
  for (size_t p = 0; p < outbox_.size(); ++p) {
    std::string& b = outbox_[p];
    stats_.shipped_bytes += b.size();
    std::string m;
    m.reserve(head + sizeof(uint64_t) + b.size() + (p < extra.size() ? extra[p].size() : 0));
    m.append(reinterpret_cast<const char*>(words.data()), head);
    AppendPod(&m, static_cast<uint64_t>(b.size()));
    m += b;
    if (p < extra.size()) m += extra[p];
    b = std::move(m);
  }
  const std::vector<std::string> in = comm_->Exchange(outbox_);
  for (std::string& b : outbox_) b.clear();
  std::vector<std::string> extra_in(in.size());
  for (size_t p = 0; p < in.size(); ++p) {
    const std::string& b = in[p];
    const char* at = b.data();
    const char* const end = at + b.size();
    for (int64_t& w : words) {
      int64_t theirs = Picoseconds::Max().ps();
      ReadPod(at, end, &theirs);
      w = std::min(w, theirs);
    }
    uint64_t packets = 0;
    ReadPod(at, end, &packets);
    packets = std::min<uint64_t>(packets, static_cast<uint64_t>(end - at));
    Deliver(net, std::string_view(at, packets));
    at += packets;
    extra_in[p].assign(at, end);
  }
  stats_.sync_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_start).count();
  stats_.sync_cpu_s += ThreadCpuSeconds() - cpu_start;
  if (window_ran) ++stats_.windows;
  return extra_in;
}

void DistributedRun::Settle() {
  for (sim::Port* p : remote_ports_) p->SettleShipped();
  CheckNoHandOff();
}

Status DistributedRun::OnWorkload(sim::Network& net, sim::FlowDriver& driver) {
  // The run stops when every process agrees every flow finished (Run).
  driver.set_stop_when_done(false);
  NumberFlows(net);
  // SEND: the receives a flow's start posts at its responder, posted here
  // ahead when another process starts the flow.
  if (comm_->size() > 1) {
    const int32_t me_here = comm_->rank();
    Status s = driver.PostReceivesAhead([&](int32_t rank) {
      return partition_.Owns(me_here, topology_->hosts()[static_cast<size_t>(rank)]);
    });
    if (!s.ok()) {
      return InvalidArgument(
          "receive: the receive model (planned receives) is not supported across processes "
          "yet; run it in one process");
    }
  }
  // Keep the events of what this process owns: a flow starts where its
  // requester is (the responder of a READ is its source), a fault event
  // (port transitions and crashes of a host) and a NIC's where its node is.
  const bool read = spec_->transport().opcode() == "read";
  const int32_t me = comm_->rank();
  const std::vector<sim::Flow>& flows = driver.flows();
  net.engine().RetainEvents([&](const sim::Event& e) {
    switch (e.kind) {
      case sim::EventKind::kFlowStart: {
        if (e.component >= flows.size()) return true;
        const sim::Flow& f = flows[e.component];
        const int32_t requester = read ? f.dst : f.src;
        return partition_.Owns(me, topology_->hosts()[static_cast<size_t>(requester)]);
      }
      case sim::EventKind::kFault:
        if (KeepReroute(e)) return true;
        [[fallthrough]];
      case sim::EventKind::kNicPump:  // a NIC's events: its host's node
        return e.component < partition_.owner.size() &&
               partition_.Owns(me, static_cast<int32_t>(e.component));
      case sim::EventKind::kQpTimer:  // host node * 65536 + QPN
        return e.component / 65536u < partition_.owner.size() &&
               partition_.Owns(me, static_cast<int32_t>(e.component / 65536u));
      default:
        return true;
    }
  });
  return Status::Ok();
}

void DistributedRun::Ship(void* ctx, const sim::Port& port, uint64_t w0, uint64_t w1, bool alone) {
  auto* self = static_cast<DistributedRun*>(ctx);
  const int32_t to = self->partition_.owner[static_cast<size_t>(port.peer()->config().node)];
  std::string& out = self->outbox_[static_cast<size_t>(to)];
  const sim::Packet* p = nullptr;
  uint8_t form;
  const sim::QpFlow* flow;
  if (alone) {
    form = kAlonePacket;
    p = reinterpret_cast<const sim::Packet*>(w1);
    flow = p->flow;
  } else if ((w0 & sim::Port::kHeldPooled) == 0) {
    form = kCompact;
    flow = sim::Port::CompactFlow(w1);
  } else {
    const uint64_t tag = w1 & sim::Port::kHeldTags;
    p = reinterpret_cast<const sim::Packet*>(w1 & ~uint64_t{sim::Port::kHeldTags});
    flow = p->flow;
    form = tag == 0 ? kPooled : tag == 1 ? kLostEntry : kAloneEntry;
    if (form == kAloneEntry) p = nullptr;  // the far end has the packet already
  }
  const bool with_data = p != nullptr && p->data() != nullptr;
  if (with_data) form |= kWithData;
  uint64_t va_offset = 0;
  const bool relative = p != nullptr && self->RelativeVa(*p, &va_offset);
  if (relative) form |= kRelativeVa;
  // When the entry arrives there (Held's words), for Sync.
  const int64_t arrive = alone ? static_cast<int64_t>(w0)
                               : static_cast<int64_t>((w0 & sim::Port::kHeldPooled) != 0
                                                          ? w0 & ~sim::Port::kHeldPooled
                                                          : w0 & sim::Port::kHeldTimeMask);
  self->shipped_arrival_ = std::min(self->shipped_arrival_, arrive);
  AppendPod(&out, port.config().node);
  AppendPod(&out, port.config().index);
  // A PAUSE frame has no QP flow (pfc_cross.h).
  const bool mac_control = p != nullptr && static_cast<uint8_t>(p->opcode) == sim::kPauseOpcode;
  AppendPod(&out, mac_control ? kMacControlFlowId : self->flow_ids_.at(flow));
  AppendPod(&out, form);
  AppendPod(&out, w0);
  AppendPod(&out, w1);
  if (p != nullptr) {
    out.append(reinterpret_cast<const char*>(p), sizeof(sim::Packet));
    out.append(reinterpret_cast<const char*>(&p->ext()), sizeof(sim::PacketExt));
  }
  if (relative) AppendPod(&out, va_offset);
  if (with_data) {
    // The bytes as they are now: the requester may not touch a buffer
    // before its WR completes, which is after this packet arrives.
    AppendPod(&out, p->payload_bytes);
    out.append(reinterpret_cast<const char*>(p->data()), p->payload_bytes);
  }
  ++self->stats_.shipped;
}

void DistributedRun::Deliver(sim::Network& net, std::string_view batch) {
  const char* at = batch.data();
  const char* end = at + batch.size();
  while (at < end) {
    Header h;
    h.node = Get<int32_t>(at);
    h.index = Get<int32_t>(at);
    h.flow = Get<uint32_t>(at);
    h.form = Get<uint8_t>(at);
    const bool with_data = (h.form & kWithData) != 0;
    const bool relative = (h.form & kRelativeVa) != 0;
    h.form &= static_cast<uint8_t>(~(kWithData | kRelativeVa));
    h.w0 = Get<uint64_t>(at);
    h.w1 = Get<uint64_t>(at);
    sim::Port& port = net.port(h.node, h.index);
    const sim::QpFlow* flow = h.flow == kMacControlFlowId ? MacControlFlow() : flows_[h.flow];
    if (h.form == kCompact) {
      net.pool().AddCompact();  // as the sending NIC counted it
      port.ReceiveShipped(h.w0, sim::Port::CompactWithFlow(h.w1, flow), false);
      continue;
    }
    if (h.form == kAloneEntry) {
      port.ReceiveShipped(h.w0, reinterpret_cast<uint64_t>(last_alone_) | 2, false);
      continue;
    }
    sim::Packet* p = net.pool().Alloc();
    std::memcpy(static_cast<void*>(p), at, sizeof(sim::Packet));
    at += sizeof(sim::Packet);
    std::memcpy(static_cast<void*>(&p->ext()), at, sizeof(sim::PacketExt));
    at += sizeof(sim::PacketExt);
    // This process's addresses: the flow, its route, no payload bytes
    // (modelled flows only).
    p->flow = flow;
    p->next_out = sim::NextHop(*flow, p->hops);
    p->has_data = 0;
    p->ext().data = nullptr;
    if (relative) AbsoluteVa(p, Get<uint64_t>(at));
    if (with_data) {
      const uint16_t n = Get<uint16_t>(at);
      std::string& bytes = shipped_data_[p];
      bytes.assign(at, n);
      at += n;
      p->set_data(reinterpret_cast<const uint8_t*>(bytes.data()));
    }
    switch (h.form) {
      case kPooled:
        port.ReceiveShipped(h.w0, reinterpret_cast<uint64_t>(p), false);
        break;
      case kLostEntry:
        port.ReceiveShipped(h.w0, reinterpret_cast<uint64_t>(p) | 1, false);
        break;
      default:  // kAlonePacket
        last_alone_ = p;
        port.ReceiveShipped(h.w0, reinterpret_cast<uint64_t>(p), true);
        break;
    }
  }
  static_assert(kHeaderBytes == sizeof(int32_t) * 2 + sizeof(uint32_t) + 1 + 16);
}

void DistributedRun::OnPfcField(sim::PfcField* field) {
  if (!field->periodic()) return;
  pfc_field_ = field;
  const int32_t me = comm_->rank();
  field->Split(sim::PfcFieldSplit{[this, me](int32_t node) { return partition_.Owns(me, node); },
                                  [this](const std::string& mine) {
                                    // Exchange with the same bytes for everyone: an all-gather.
                                    return comm_->Exchange(std::vector<std::string>(
                                        static_cast<size_t>(comm_->size()), mine));
                                  }});
}

bool DistributedRun::OnlyPeriodicPending(sim::Engine& engine) const {
  if (engine.pending() > pfc_field_->periodic_pending() || pfc_field_->any_stormed()) return false;
  for (const sim::Port* p : remote_ports_) {
    if (p->next_ship_ps() != INT64_MAX) return false;
  }
  return true;
}

bool DistributedRun::AllDecided(const sim::FlowDriver& driver, uint64_t decided_sum) {
  const std::vector<sim::FlowResult>& results = driver.results();
  if (decided_sum < results.size()) return false;
  // Enough decisions in all: are they of every flow (a flow may be decided
  // on both of its ends)? A collective, in the last windows only.
  std::vector<uint64_t> bits((results.size() + 63) / 64, 0);
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].state != sim::FlowState::kPending) bits[i / 64] |= uint64_t{1} << (i % 64);
  }
  comm_->AllOr(&bits);
  size_t n = 0;
  for (uint64_t b : bits) n += static_cast<size_t>(__builtin_popcountll(b));
  return n == results.size();
}

DistributedRun::Agreement DistributedRun::Sync(sim::Network& net, const sim::FlowDriver& driver) {
  sim::Engine& engine = net.engine();
  // This process's word on the next window, ahead of its packets to every
  // process: what Run decides from is the state after the delivery, which
  // the senders know. The packets delivered here schedule their arrivals,
  // and nothing earlier (a port's ring is in arrival order): the earliest
  // event anywhere is the least of every process's own next event and the
  // arrivals it shipped (shipped_arrival_). Delivering changes no flow's
  // state, and any packet shipped makes its receiver busy.
  Control mine;
  mine.next = std::min(NextTime(engine), shipped_arrival_);
  const std::vector<sim::FlowResult>& results = driver.results();
  for (const sim::FlowResult& r : results) mine.decided += r.state != sim::FlowState::kPending;
  mine.idle = pfc_field_ != nullptr && shipped_arrival_ == Picoseconds::Max().ps() &&
              OnlyPeriodicPending(engine);
  shipped_arrival_ = Picoseconds::Max().ps();
  const auto start = std::chrono::steady_clock::now();
  for (std::string& b : outbox_) {
    stats_.shipped_bytes += b.size();
    b.insert(0, reinterpret_cast<const char*>(&mine), sizeof(mine));
  }
  const std::vector<std::string> in = comm_->Exchange(outbox_);
  for (std::string& b : outbox_) b.clear();
  Agreement all;
  all.next = Picoseconds::Max().ps();
  all.idle = true;
  for (const std::string& b : in) {
    Control c;
    std::memcpy(&c, b.data(), sizeof(c));
    all.next = std::min(all.next, c.next);
    all.decided += c.decided;
    all.idle = all.idle && c.idle != 0;
    Deliver(net, std::string_view(b).substr(sizeof(Control)));
  }
  stats_.sync_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return all;
}

void DistributedRun::Run(sim::Network& net, sim::FlowDriver& driver, Picoseconds end) {
  sim::Engine& engine = net.engine();
  const int64_t q = window_.ps();
  bool stopped = false;
  using Clock = std::chrono::steady_clock;
  if (outputs_ != nullptr) {
    // A re-route another process owns is that process's to report; an
    // arrival at a node another process owns is a PFC settle event here
    // (pfc_cross.h), the far end's process traces the arrival itself.
    const int32_t me = comm_->rank();
    outputs_->set_skip([this, me](sim::EventKind kind, uint32_t component) {
      if (kind == sim::EventKind::kArrival) {
        const uint32_t node = component / 1024;  // node * 1024 + port (port.cc)
        return node < partition_.owner.size() && !partition_.Owns(me, static_cast<int32_t>(node));
      }
      // Every process runs the deferred deadlock checks (pfc_field.h):
      // rank 0 reports them.
      if (kind == sim::EventKind::kUser && component == sim::PfcDeadlockDetector::kCheckComponent &&
          pfc_field_ != nullptr && pfc_field_->deadlock() != nullptr) {
        return me != 0;
      }
      return kind == sim::EventKind::kFault && component < partition_.owner.size() &&
             !partition_.Owns(me, static_cast<int32_t>(component));
    });
    outputs_->Attach(&engine);
  }
  int64_t last_until = -1;  // the end of the last window run
  // One exchange a window (Sync) carries the packets and the agreement on
  // the next one; the first has no packets.
  Agreement agreed = Sync(net, driver);
  for (;;) {
    // No flows: nothing to finish, run to the end.
    if (!driver.results().empty()) {
      const auto decide_start = Clock::now();
      if (AllDecided(driver, agreed.decided)) stopped = true;
      stats_.sync_wall_s += std::chrono::duration<double>(Clock::now() - decide_start).count();
    }
    if (stopped || agreed.next == Picoseconds::Max().ps() || agreed.next > end.ps()) break;
    if (agreed.idle) break;  // idle: as if nothing were pending
    // The window of the earliest event anywhere, on the grid of q.
    const int64_t from = agreed.next - agreed.next % q;
    const int64_t until = std::min(from + q - 1, end.ps());
    engine.Run(Picoseconds(until));
    last_until = until;
    ShipStarted(net);
    agreed = Sync(net, driver);
    ++stats_.windows;
    if (pfc_field_ != nullptr) {
      // The deferred deadlock checks it decides may schedule events: agree
      // on the next event and on idleness once more (a watchdog's or a
      // deadlock check's run only).
      pfc_field_->OnWindow();
      const auto again_start = Clock::now();
      std::vector<int64_t> v{NextTime(engine), OnlyPeriodicPending(engine) ? 1 : 0};
      comm_->AllMin(&v);
      agreed.next = v[0];
      agreed.idle = v[1] == 1;
      stats_.sync_wall_s += std::chrono::duration<double>(Clock::now() - again_start).count();
    }
    if (outputs_ != nullptr) outputs_->OnWindow();
  }
  if (outputs_ != nullptr) outputs_->Finish();
  // Where the run ended, the same for every partition: the last event
  // anywhere when the flows stopped it (as Engine::Stop leaves the clock),
  // else the end time.
  std::vector<int64_t> last{engine.last_event_time().ps()};
  comm_->AllMax(&last);
  engine.SetClock(stopped ? Picoseconds(last[0]) : end);
  Settle();
  // Less the settle events of the remote ports (pfc_cross.h), which one
  // process does not run.
  stats_.digest_sum = LocalDigestSum(engine);
  stats_.events = engine.events_dispatched() - SettleEvents(remote_ports_);
  if (!foreign_reroutes_.empty()) DropForeignReroutes(last_until);
  // Every process runs the deferred deadlock checks; rank 0 counts them.
  if (pfc_field_ != nullptr && pfc_field_->deadlock() != nullptr && comm_->rank() != 0) {
    for (int64_t t : pfc_field_->deadlock()->check_event_times()) {
      stats_.digest_sum -= sim::Engine::CanonicalEventDigest(
          t, sim::EventKind::kUser, sim::PfcDeadlockDetector::kCheckComponent);
      --stats_.events;
    }
  }
}

}  // namespace fathom::parallel
