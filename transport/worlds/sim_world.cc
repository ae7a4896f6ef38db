#include "transport/worlds/sim_world.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "fabric/scenario/network_config.h"
#include "fabric/sim/nic_profile.h"
#include "fabric/sim/packet.h"

namespace fathom::transport::worlds {

using namespace fathom::transport::coll;  // NOLINT: the worlds run the collectives

StatusOr<std::vector<int>> PlaceRanks(const topo::Topology& topology, int nranks) {
  const auto& hosts = topology.hosts();
  const int available = static_cast<int>(hosts.size());
  std::vector<int> placement;
  if (topology.reachability() == topo::Reachability::kAllPairs) {
    const int n = nranks == 0 ? available : std::min(nranks, available);
    for (int h = 0; h < n; ++h) placement.push_back(h);
  } else {
    // Greedy in host order: a host joins when it reaches every host placed
    // so far. Rail-only wiring then yields one rail (server 0 GPU 0, server
    // 1 GPU 0, ...).
    for (int h = 0; h < available; ++h) {
      if (nranks > 0 && static_cast<int>(placement.size()) == nranks) break;
      bool reaches_all = true;
      for (int p : placement) {
        reaches_all =
            reaches_all &&
            topology.Reachable(hosts[static_cast<size_t>(h)], hosts[static_cast<size_t>(p)]) &&
            topology.Reachable(hosts[static_cast<size_t>(p)], hosts[static_cast<size_t>(h)]);
      }
      if (reaches_all) placement.push_back(h);
    }
  }
  if (placement.empty() || (nranks > 0 && static_cast<int>(placement.size()) < nranks)) {
    return InvalidArgument(
        "SimWorld: " + std::to_string(nranks) + " ranks on " + topology.name() + ": only " +
        std::to_string(placement.size()) +
        " of its hosts reach each other (rail-only wiring connects the NICs of one rail); "
        "ask for at most that many ranks, or use a switched topology (e.g. medium)");
  }
  return placement;
}

Picoseconds DefaultWatchdog(const QpOptions& qp) {
  // timeout 0 disables the local ACK timer (IBTA C9-140): no budget to
  // derive from; use NCCL's default exponent 20.
  const int exponent = qp.timeout > 0 && qp.timeout <= 31 ? qp.timeout : 20;
  const int retries = qp.retry_cnt >= 0 && qp.retry_cnt <= 7 ? qp.retry_cnt : 7;
  const Picoseconds ack_timeout = Picoseconds::FromNanoseconds(4096) * (int64_t{1} << exponent);
  const Picoseconds budget = ack_timeout * (retries + 1);
  return std::max(Picoseconds::FromSeconds(1.0), budget * 2);
}

Picoseconds DefaultWatchdog(const QpOptions& qp, const sim::NicProfile& nic) {
  const Picoseconds nominal = DefaultWatchdog(qp);
  const Picoseconds error = sim::RetryExceededTime(nic, qp.timeout, qp.retry_cnt);
  if (error.ps() > std::numeric_limits<int64_t>::max() / 4) return nominal;  // infinite
  return std::max(nominal, error * 2);
}

namespace {

// The path the fabric routes `src` -> `dst` (host node ids) on: the first
// port of each hop's ECMP set (ECMP paths are equal in length; builders give
// a tier one rate and latency).
PathFigures WalkPath(const topo::Topology& t, int32_t src, int32_t dst) {
  PathFigures p;
  p.hops = 0;
  int64_t rate = 0;
  int32_t node = src;
  while (node != dst && p.hops < 64) {
    const auto ports = t.NextHops(node, dst);
    if (ports.empty()) break;
    const topo::Link& link = t.link(t.LinkAt(node, ports[0]));
    p.wire_latency = p.wire_latency + link.latency;
    rate = rate == 0 ? link.rate.bps() : std::min(rate, link.rate.bps());
    ++p.hops;
    node = t.Peer(node, ports[0]).node;
  }
  p.bottleneck = BitsPerSecond(rate);
  return p;
}

// The NIC profile's time per message outside the topology's links: post to
// wire and receive completion (sim::PerMessageOverhead, for an empty
// message: the payload's DMA is in the step's estimate) and the TX and RX
// pipelines, which the Network adds to the host links' latency.
Picoseconds NicLatency(const sim::NetworkConfig& nc) {
  return sim::PerMessageOverhead(nc.nic, 0) + nc.nic.tx_pipeline + nc.nic.rx_pipeline;
}

AlphaBeta ComputeWorldAlphaBeta(const topo::Topology& t, const std::vector<int>& placement,
                                const sim::NetworkConfig& nc, int path_mtu) {
  const int n = static_cast<int>(placement.size());
  auto node = [&](int r) {
    return t.hosts()[static_cast<size_t>(placement[static_cast<size_t>(r)])];
  };
  std::vector<std::pair<int, int>> pairs;
  for (int r = 0; r < n && n > 1; ++r) {
    pairs.emplace_back(r, (r + 1) % n);
    for (int tree = 0; tree < 2; ++tree) {
      const TreeLinks l = DoubleTreeLinks(n, tree, r);
      if (l.parent >= 0) pairs.emplace_back(r, l.parent);
    }
  }
  AlphaBeta worst;
  bool have = false;
  const uint32_t mtu = static_cast<uint32_t>(path_mtu > 0 ? path_mtu : 4096);
  for (const auto& [a, b] : pairs) {
    PathFigures p = WalkPath(t, node(a), node(b));
    if (p.hops == 0) continue;
    p.mtu_payload_bytes = mtu;
    // Collectives move data as RDMA WRITE with immediate (communicator.cc).
    p.small_frame_bytes = sim::FrameWireBytes(sim::Opcode::kRdmaWriteOnlyWithImmediate, 0, nc.ipv6);
    p.full_frame_bytes = sim::FrameWireBytes(sim::Opcode::kRdmaWriteMiddle, mtu, nc.ipv6);
    p.nic_latency = NicLatency(nc);
    p.dma_rate = nc.nic.pcie_rate;
    const AlphaBeta ab = ComputeAlphaBeta(p);
    if (!have || ab.alpha > worst.alpha) {
      const double bw = have ? std::min(worst.payload_bytes_per_s, ab.payload_bytes_per_s)
                             : ab.payload_bytes_per_s;
      worst = ab;
      worst.payload_bytes_per_s = bw;
    } else {
      worst.payload_bytes_per_s = std::min(worst.payload_bytes_per_s, ab.payload_bytes_per_s);
    }
    have = true;
  }
  return worst;
}

// The server tier's placement: rank r on GPU r (server-major), its NIC's
// host for the network; every pair of ranks on different servers that a
// hierarchical ring or tree joins must have a path.
StatusOr<std::vector<int>> PlaceGpus(const topo::Topology& t, const topo::ServerTier& tier,
                                     int nranks, bool all_pairs) {
  const int gpus = tier.gpu_count();
  const int g = tier.spec.gpus;
  const int n = nranks == 0 ? gpus : nranks;
  if (n < 1 || n > gpus) {
    return InvalidArgument("SimWorld: " + std::to_string(nranks) + " ranks on " + t.name() +
                           " with a server tier of " + std::to_string(tier.servers) +
                           " servers x " + std::to_string(g) + " GPUs = " + std::to_string(gpus) +
                           " GPUs: ask for 1.." + std::to_string(gpus) + " ranks (one per GPU)");
  }
  if (n > g && n % g != 0) {
    return InvalidArgument("SimWorld: " + std::to_string(n) + " ranks with " + std::to_string(g) +
                           " GPUs per server: ranks fill whole servers (a multiple of " +
                           std::to_string(g) + "), or at most one server's");
  }
  std::vector<int> placement(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    placement[static_cast<size_t>(r)] = tier.gpus[static_cast<size_t>(r)].host;
  // Channels up to the GPUs per server cover every ring and tree shape the
  // collectives use (channel c and c + G are alike).
  for (int r = 0; r < n; ++r) {
    for (const auto& [peer, ch] : NeededConnections(n, r, std::min(n, g), g, all_pairs)) {
      const topo::GpuPlace& a = tier.gpus[static_cast<size_t>(r)];
      const topo::GpuPlace& b = tier.gpus[static_cast<size_t>(peer)];
      if (a.server == b.server) continue;
      const int32_t ha = t.hosts()[static_cast<size_t>(a.host)];
      const int32_t hb = t.hosts()[static_cast<size_t>(b.host)];
      // Rail-only wiring: NCCL's PXN relays through the GPU on the peer's
      // rail (topo::PxnProxyGpu; transport/intranode does it).
      if (!t.Reachable(ha, hb) &&
          (topo::PxnProxyGpu(t, tier, r, peer) < 0 || topo::PxnProxyGpu(t, tier, peer, r) < 0)) {
        return InvalidArgument("SimWorld: rank " + std::to_string(r) + " (server " +
                               std::to_string(a.server) + " GPU " + std::to_string(a.gpu) +
                               ", NIC " + t.node(ha).name + ") and rank " + std::to_string(peer) +
                               " (NIC " + t.node(hb).name + ") are joined by channel " +
                               std::to_string(ch) + " but " + t.name() +
                               " has no path between their NICs, nor through another GPU's NIC "
                               "of their servers (PXN)");
      }
    }
  }
  return placement;
}

// Two tiers for `--algo auto` and the docs' formula (cost_model.h): the
// network between servers (the slowest path a cross-server pair uses) and
// NVLink inside them.
AlphaBeta ServerAlphaBeta(const topo::Topology& t, const topo::ServerTier& tier,
                          const std::vector<int>& placement, const sim::NetworkConfig& nc,
                          int path_mtu, int channels) {
  const int n = static_cast<int>(placement.size());
  const int g = std::min(tier.spec.gpus, n);
  AlphaBeta ab;
  // The network tier: one cross-server hop of each ring (same rail).
  if (n > g) {
    std::vector<int> pair;
    const RingOrder order(n, tier.spec.gpus, 0);
    for (int pos = 0; pos < n; ++pos) {
      const int a = order.RankAt(pos), b = order.RankAt(pos + 1);
      if (a / g == b / g) continue;
      pair = {placement[static_cast<size_t>(a)], placement[static_cast<size_t>(b)]};
      break;
    }
    ab = ComputeWorldAlphaBeta(t, pair, nc, path_mtu);
  }
  ab.gpus_per_server = g;
  ab.channels = std::max(1, channels);
  ab.nvlink_alpha = tier.spec.nvlink_latency;
  ab.nvlink_bytes_per_s = static_cast<double>(tier.spec.nvlink_rate.bps()) / 8.0;
  if (n <= g) {
    // One server: NVLink only.
    ab.alpha = ab.nvlink_alpha;
    ab.payload_bytes_per_s = ab.nvlink_bytes_per_s;
    ab.hops = 1;
  }
  return ab;
}

}  // namespace

// Runs the fault injector's callbacks at their virtual time as engine events,
// then stops Run() as a completion does, so the driver sees what they did.
class SimWorld::Waker {
 public:
  explicit Waker(emulated::EmulatedFabric* fabric) : fabric_(fabric) {}
  void At(int rank, Picoseconds at, std::function<void()> fn) {
    const uint64_t id = next_++;
    fns_.emplace(id, Pending{rank, std::move(fn)});
    fabric_->engine().Schedule<&Waker::Fire>(at, sim::EventKind::kUser, 0, this, id);
  }
  // Drops the pending wake-ups of the ranks `local` rejects, events and all
  // (a split fabric: their process runs them; each counts in the digest once).
  void KeepOnly(const std::function<bool(int rank)>& local) {
    fabric_->engine().RetainEvents([&](const sim::Event& e) {
      if (e.handler != sim::kHandlerOf<&Waker::Fire> || e.obj != this) return true;
      auto it = fns_.find(e.arg);
      return it == fns_.end() || local(it->second.rank);
    });
    std::erase_if(fns_, [&](const auto& kv) { return !local(kv.second.rank); });
  }

 private:
  struct Pending {
    int rank;
    std::function<void()> fn;
  };
  static void Fire(void* obj, uint64_t id) {
    auto* w = static_cast<Waker*>(obj);
    auto it = w->fns_.find(id);
    if (it == w->fns_.end()) return;
    std::function<void()> fn = std::move(it->second.fn);
    w->fns_.erase(it);
    fn();
    w->fabric_->OnCompletion();
  }

  emulated::EmulatedFabric* fabric_;
  uint64_t next_ = 0;
  std::map<uint64_t, Pending> fns_;
};

std::string CulpritLine(const emulated::EmulatedFabric& fabric,
                        const std::vector<coll::StuckQp>& qps,
                        std::vector<emulated::EmulatedFabric::QpRef>* refs) {
  std::string culprit;
  for (const coll::StuckQp& q : qps) {
    if (q.outstanding_sends > 0) refs->push_back({q.rank, q.peer, q.qpn});
    if (q.culprit) {
      culprit = "fabric: the culprit's QP runs from host " + fabric.HostName(q.rank) + " (rank " +
                std::to_string(q.rank) + ") to host " + fabric.HostName(q.peer) + " (rank " +
                std::to_string(q.peer) + ")\n";
    }
  }
  return culprit;
}

StatusOr<std::unique_ptr<SimWorld>> SimWorld::Create(topo::Topology topology,
                                                     const SimWorldOptions& options_in) {
  std::unique_ptr<SimWorld> w(new SimWorld());
  w->topology_ = std::make_unique<topo::Topology>(std::move(topology));
  SimWorldOptions options = options_in;
  std::optional<topo::ServerTier> tier;
  std::vector<int> placement;
  if (options.server) {
    FATHOM_ASSIGN_OR_RETURN(tier, topo::BuildServerTier(*w->topology_, *options.server));
    FATHOM_ASSIGN_OR_RETURN(
        placement, PlaceGpus(*w->topology_, *tier, options.nranks, options.comm.all_pairs));
    options.comm.gpus_per_server = tier->spec.gpus;
  } else {
    const int hosts = static_cast<int>(w->topology_->hosts().size());
    if (options.nranks < 0 || options.nranks > hosts) {
      return InvalidArgument("SimWorld: " + std::to_string(options.nranks) + " ranks on " +
                             w->topology_->name() + " with " + std::to_string(hosts) + " hosts");
    }
    FATHOM_ASSIGN_OR_RETURN(placement, PlaceRanks(*w->topology_, options.nranks));
  }
  w->engine_ = std::make_unique<sim::Engine>(options.seed);
  if (options.canonical_order) w->engine_->set_canonical_order(true);
  w->network_ =
      std::make_unique<sim::Network>(w->engine_.get(), w->topology_.get(), options.network);
  if (options.network.flow_model) {
    // What the flow model does not model is refused (docs/FLOW.md).
    if (!options.verbs_faults.empty()) {
      return InvalidArgument("SimWorld: the flow model (fabric model flow) does not model faults");
    }
    FATHOM_ASSIGN_OR_RETURN(w->flow_, sim::FlowFabric::Attach(w->network_.get(), options.network));
  }
  emulated::EmulatedOptions eopt = options.emulated;
  eopt.hosts = placement;
  const int n = static_cast<int>(placement.size());
  w->fabric_ = std::make_unique<emulated::EmulatedFabric>(w->network_.get(), eopt);
  if (tier) {
    std::vector<int32_t> gpu_of_rank(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) gpu_of_rank[static_cast<size_t>(r)] = r;
    w->server_ = std::make_unique<intranode::ServerFabric>(w->fabric_.get(), std::move(*tier),
                                                           std::move(gpu_of_rank));
  }
  if (!options.verbs_faults.empty()) {
    std::vector<faulty::VerbsFault> plan = options.verbs_faults;
    for (faulty::VerbsFault& f : plan) {
      faulty::PlanError e;
      if (!faulty::Finish(&f, n, &e)) {
        // A scenario's faults were checked against the file already: these
        // are the flag's.
        return InvalidArgument("--verbs-fault '" + f.text + "': '" + e.token + "': " + e.message);
      }
    }
    w->waker_ = std::make_unique<Waker>(w->fabric_.get());
    faulty::FaultEnv env;
    env.clock = &w->fabric_->clock();
    Waker* waker = w->waker_.get();
    env.wake_at = [waker](int rank, Picoseconds at, std::function<void()> fn) {
      waker->At(rank, at, std::move(fn));
    };
    w->injector_ = std::make_unique<faulty::FaultInjector>(std::move(plan), std::move(env));
  }
  // Every rank's staging is in this process and nothing pins it: consumed
  // slots give their pages back beyond the budget
  // (CommOptions::release_staging).
  options.comm.release_staging = true;
  w->staging_budget_ = std::make_unique<StagingBudget>();
  options.comm.staging_budget = w->staging_budget_.get();
  std::vector<Communicator*> comms;
  for (int r = 0; r < n; ++r) {
    FATHOM_ASSIGN_OR_RETURN(auto dev,
                            w->server_ ? w->server_->OpenDevice(r) : w->fabric_->OpenDevice(r));
    if (w->injector_) dev = w->injector_->Wrap(std::move(dev), r);
    FATHOM_ASSIGN_OR_RETURN(auto comm, Communicator::Create(dev.get(), r, n, options.comm));
    comms.push_back(comm.get());
    w->devices_.push_back(std::move(dev));
    w->comms_.push_back(std::move(comm));
  }
  FATHOM_RETURN_IF_ERROR(ExchangeAndConnect(comms));
  DriverOptions dopt;
  dopt.timeout = options.watchdog > Picoseconds()
                     ? options.watchdog
                     : DefaultWatchdog(options.comm.qp, options.network.nic);
  emulated::EmulatedFabric* fabric = w->fabric_.get();
  const faulty::FaultInjector* injector = w->injector_.get();
  dopt.fabric_evidence = [fabric, injector](const std::vector<StuckQp>& qps) {
    std::vector<emulated::EmulatedFabric::QpRef> refs;
    const std::string culprit = CulpritLine(*fabric, qps, &refs);
    // What the injected verbs faults did: a swallowed error is invisible
    // to the ranks, so the watchdog says it (CASES.md 20).
    return culprit + fabric->Evidence(refs) + (injector ? injector->Report() : std::string());
  };
  w->driver_options_ = dopt;
  w->driver_ = std::make_unique<Driver>(&w->fabric_->clock(), comms, dopt);
  w->comm_options_ = options.comm;
  w->network_config_ = options.network;
  w->profile_ = options.profile;
  // A scenario's network.qos may make a class lossless without --fabric.
  w->lossless_ = options.lossless || options.network.qos.lossless_mask() != 0;
  const int path_mtu =
      options.comm.qp.path_mtu > 0 ? options.comm.qp.path_mtu : w->fabric_->ActiveMtu(0);
  if (w->server_) {
    w->alpha_beta_ = ServerAlphaBeta(*w->topology_, w->server_->tier(), placement, options.network,
                                     path_mtu, options.comm.channels);
  } else {
    w->alpha_beta_ = ComputeWorldAlphaBeta(*w->topology_, placement, options.network, path_mtu);
  }
  return w;
}

StatusOr<std::unique_ptr<SimWorld>> SimWorld::CreateFromScenario(
    const sim::LoadedScenario& scenario, SimWorldOptions options, std::vector<std::string>* notes) {
  const proto::Scenario& spec = scenario.spec;
  const config::SourceMap& m = scenario.map;
  const auto& t = spec.transport();
  if (!t.opcode().empty() && t.opcode() != "write") {
    return m.Error("transport.opcode",
                   "'" + t.opcode() +
                       "': fathom coll moves data as RDMA WRITE with immediate (as NCCL's IB "
                       "transport does); remove it, or run the scenario with fathom sim");
  }
  // The chunk sizes the staging slots (slots x chunk per connection): keep
  // them in memory, and one element of the widest type in each.
  constexpr uint64_t kMaxChunk = uint64_t{64} << 20;
  if (t.has_message_bytes() && (t.message_bytes() < 8 || t.message_bytes() > kMaxChunk)) {
    return m.Error("transport.message_bytes",
                   std::to_string(t.message_bytes()) +
                       ": fathom coll posts writes of this size (its chunk); 8 to 64 MiB");
  }
  if (t.has_ib_timeout()) options.comm.qp.timeout = t.ib_timeout();
  if (t.has_retry_cnt()) options.comm.qp.retry_cnt = t.retry_cnt();
  if (t.has_rnr_retry()) options.comm.qp.rnr_retry = t.rnr_retry();
  if (t.has_min_rnr_timer()) options.comm.qp.min_rnr_timer = t.min_rnr_timer();
  if (t.has_traffic_class()) options.comm.qp.traffic_class = t.traffic_class();
  if (t.has_max_rd_atomic()) options.comm.qp.max_rd_atomic = t.max_rd_atomic();
  if (t.has_qps_per_connection()) options.comm.qps_per_connection = t.qps_per_connection();
  if (t.has_mtu_bytes()) options.comm.qp.path_mtu = t.mtu_bytes();
  if (t.has_message_bytes()) options.comm.chunk_bytes = t.message_bytes();
  if (t.rxe_infinite_retry()) options.emulated.rxe_infinite_retry = true;
  if (spec.seed() != 0) options.seed = spec.seed();
  FATHOM_ASSIGN_OR_RETURN(options.network, sim::ScenarioNetworkConfig(spec, options.network));
  if (notes != nullptr && spec.workload().pattern() != proto::WorkloadSpec::PATTERN_TRAINING) {
    notes->push_back(scenario.path +
                     ": workload and end_time_us not used: the collective and its size sweep "
                     "are the workload");
  }
  const size_t verbs_base = options.verbs_faults.size();  // the flag's come first
  if (spec.verbs_faults_size() > 0) {
    FATHOM_ASSIGN_OR_RETURN(std::vector<int> placement,
                            PlaceRanks(scenario.topology, options.nranks));
    FATHOM_ASSIGN_OR_RETURN(std::vector<faulty::VerbsFault> plan,
                            VerbsFaultsFromScenario(scenario, static_cast<int>(placement.size())));
    options.verbs_faults.insert(options.verbs_faults.end(), plan.begin(), plan.end());
  }
  FATHOM_ASSIGN_OR_RETURN(std::unique_ptr<SimWorld> w, Create(scenario.topology, options));
  w->scenario_verbs_base_ = verbs_base;
  if (spec.faults_size() > 0) {
    FATHOM_ASSIGN_OR_RETURN(
        w->faults_,
        sim::FaultAttachment::Attach(w->network_.get(), spec.faults(), options.seed, scenario.map));
    // The watchdog names the faults that dropped or corrupted frames on the
    // stuck QPs' paths, and their links.
    const sim::FaultAttachment* faults = w->faults_.get();
    w->fabric_->set_port_evidence([faults](const sim::Port& port) {
      const faults::FaultSet* set = faults->FaultsAt(&port);
      std::string out;
      for (size_t m = 0; set != nullptr && m < set->size(); ++m) {
        const faults::Counters& c = set->counters(m);
        if (c.frames_dropped + c.frames_corrupted == 0) continue;
        const std::string& label = set->label(m);  // "<name>@<from>><to>"
        out += (out.empty() ? "fault " : "; fault ") + label.substr(0, label.rfind('@')) +
               " frames_seen " + std::to_string(c.frames_seen) + " frames_dropped " +
               std::to_string(c.frames_dropped) + " frames_corrupted " +
               std::to_string(c.frames_corrupted);
      }
      return out;
    });
  }
  return w;
}

SimWorld::~SimWorld() {
  // The faults hook the network's links: they go first.
  faults_.reset();
  driver_.reset();
  comms_.clear();
  devices_.clear();
  injector_.reset();
}

void SimWorld::SplitVerbsFaults(std::function<bool(int rank)> local) {
  if (injector_ == nullptr) return;
  waker_->KeepOnly(local);
  injector_->set_local(std::move(local));
}

Status SimWorld::ArmScenarioFault(bool verbs, int index, Picoseconds at) {
  if (at < engine_->Now()) {
    return InvalidArgument("ArmScenarioFault: at " + std::to_string(at.ps()) +
                           " ps is before now " + std::to_string(engine_->Now().ps()));
  }
  if (!verbs) {
    if (faults_ == nullptr) return InvalidArgument("ArmScenarioFault: the world has no faults");
    return faults_->Arm(index, at);
  }
  const size_t i = scenario_verbs_base_ + static_cast<size_t>(index);
  if (injector_ == nullptr || index < 0 || i >= injector_->plan().size()) {
    return InvalidArgument("ArmScenarioFault: no verbs fault " + std::to_string(index));
  }
  injector_->Arm(i, at);
  return Status::Ok();
}

StatusOr<std::vector<faulty::VerbsFault>> VerbsFaultsFromScenario(
    const sim::LoadedScenario& scenario, int nranks) {
  std::vector<faulty::VerbsFault> out;
  const config::SourceMap& map = scenario.map;
  for (int i = 0; i < scenario.spec.verbs_faults_size(); ++i) {
    const proto::VerbsFaultSpec& spec = scenario.spec.verbs_faults(i);
    const std::string path = "verbs_faults[" + std::to_string(i) + "]";
    faulty::VerbsFault f;
    if (!faulty::ParseKind(spec.kind(), &f.kind)) {
      return map.Error(path + ".kind",
                       "'" + spec.kind() +
                           "' is not one of fail_post delay_completions swallow_error qp_error "
                           "async_event");
    }
    f.text = map.Where(path) + " " + spec.kind();
    faulty::PlanError e;
    auto set = [&](const char* key, const std::string& value) {
      return faulty::SetKey(&f, key, value, &e);
    };
    // The flag's grammar wants a unit; a scenario's times are in us.
    auto us = [](double v) {
      char buf[48];
      std::snprintf(buf, sizeof(buf), "%.6fus", v);
      return std::string(buf);
    };
    const bool ok =
        set("rank", std::to_string(spec.rank())) &&
        (!spec.has_qp() || set("qp", std::to_string(spec.qp()))) &&
        (spec.qpn() == 0 || set("qpn", std::to_string(spec.qpn()))) &&
        (!spec.has_peer() || set("peer", std::to_string(spec.peer()))) &&
        (spec.at_us() == 0 || set("at", us(spec.at_us()))) &&
        set("after", std::to_string(spec.after())) && set("count", std::to_string(spec.count())) &&
        (spec.delay_us() == 0 || set("delay", us(spec.delay_us()))) &&
        (spec.error().empty() || set("error", spec.error())) &&
        (spec.queue().empty() || set("queue", spec.queue())) &&
        (spec.event().empty() || set("event", spec.event())) && faulty::Finish(&f, nranks, &e);
    if (!ok) {
      const std::string field = e.key == "at" ? "at_us" : e.key == "delay" ? "delay_us" : e.key;
      return map.Error(path + (field.empty() ? "" : "." + field), e.message);
    }
    // Placed at an iteration: nothing until the training loop arms it.
    if (spec.has_at_iteration()) f.at = Picoseconds::Max();
    out.push_back(std::move(f));
  }
  return out;
}

RunOutcome SimWorld::Run(const CollSpec& spec, DataType type, RedOp op,
                         const std::vector<const void*>& in, const std::vector<void*>& out,
                         Trace* trace) {
  std::vector<std::unique_ptr<RankCollective>> colls;
  std::vector<RankCollective*> ptrs;
  for (int r = 0; r < nranks(); ++r) {
    const void* i = r < static_cast<int>(in.size()) ? in[static_cast<size_t>(r)] : nullptr;
    void* o = r < static_cast<int>(out.size()) ? out[static_cast<size_t>(r)] : nullptr;
    colls.push_back(std::make_unique<RankCollective>(comms_[static_cast<size_t>(r)].get(), spec,
                                                     type, op, i, o, trace));
    ptrs.push_back(colls.back().get());
  }
  return driver_->Run(ptrs);
}

}  // namespace fathom::transport::worlds
