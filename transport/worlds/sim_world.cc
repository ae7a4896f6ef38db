#include "transport/worlds/sim_world.h"

#include <algorithm>

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

StatusOr<std::unique_ptr<SimWorld>> SimWorld::Create(topo::Topology topology,
                                                     const SimWorldOptions& options) {
  std::unique_ptr<SimWorld> w(new SimWorld());
  w->topology_ = std::make_unique<topo::Topology>(std::move(topology));
  const int hosts = static_cast<int>(w->topology_->hosts().size());
  if (options.nranks < 0 || options.nranks > hosts) {
    return InvalidArgument("SimWorld: " + std::to_string(options.nranks) + " ranks on " +
                           w->topology_->name() + " with " + std::to_string(hosts) + " hosts");
  }
  FATHOM_ASSIGN_OR_RETURN(std::vector<int> placement, PlaceRanks(*w->topology_, options.nranks));
  w->engine_ = std::make_unique<sim::Engine>(options.seed);
  w->network_ =
      std::make_unique<sim::Network>(w->engine_.get(), w->topology_.get(), options.network);
  emulated::EmulatedOptions eopt = options.emulated;
  eopt.hosts = placement;
  const int n = static_cast<int>(placement.size());
  w->fabric_ = std::make_unique<emulated::EmulatedFabric>(w->network_.get(), eopt);
  std::vector<Communicator*> comms;
  for (int r = 0; r < n; ++r) {
    FATHOM_ASSIGN_OR_RETURN(auto dev, w->fabric_->OpenDevice(r));
    FATHOM_ASSIGN_OR_RETURN(auto comm, Communicator::Create(dev.get(), r, n, options.comm));
    comms.push_back(comm.get());
    w->devices_.push_back(std::move(dev));
    w->comms_.push_back(std::move(comm));
  }
  FATHOM_RETURN_IF_ERROR(ExchangeAndConnect(comms));
  DriverOptions dopt;
  dopt.timeout =
      options.watchdog > Picoseconds() ? options.watchdog : DefaultWatchdog(options.comm.qp);
  emulated::EmulatedFabric* fabric = w->fabric_.get();
  dopt.fabric_evidence = [fabric](const std::vector<StuckQp>& qps) {
    std::vector<emulated::EmulatedFabric::QpRef> refs;
    std::string culprit;
    for (const StuckQp& q : qps) {
      if (q.outstanding_sends > 0) refs.push_back({q.rank, q.peer, q.qpn});
      if (q.culprit) {
        culprit = "fabric: the culprit's QP runs from host " + fabric->HostName(q.rank) +
                  " (rank " + std::to_string(q.rank) + ") to host " + fabric->HostName(q.peer) +
                  " (rank " + std::to_string(q.peer) + ")\n";
      }
    }
    return culprit + fabric->Evidence(refs);
  };
  w->driver_ = std::make_unique<Driver>(&w->fabric_->clock(), comms, dopt);
  w->comm_options_ = options.comm;
  return w;
}

StatusOr<std::unique_ptr<SimWorld>> SimWorld::CreateFromScenario(
    const sim::LoadedScenario& scenario, SimWorldOptions options) {
  const auto& t = scenario.spec.transport();
  if (t.has_ib_timeout()) options.comm.qp.timeout = t.ib_timeout();
  if (t.has_retry_cnt()) options.comm.qp.retry_cnt = t.retry_cnt();
  if (t.has_qps_per_connection()) options.comm.channels = t.qps_per_connection();
  if (t.has_mtu_bytes()) options.comm.qp.path_mtu = t.mtu_bytes();
  if (t.rxe_infinite_retry()) options.emulated.rxe_infinite_retry = true;
  if (scenario.spec.seed() != 0) options.seed = scenario.spec.seed();
  FATHOM_ASSIGN_OR_RETURN(std::unique_ptr<SimWorld> w, Create(scenario.topology, options));
  if (scenario.spec.faults_size() > 0) {
    FATHOM_ASSIGN_OR_RETURN(w->faults_,
                            sim::FaultAttachment::Attach(w->network_.get(), scenario.spec.faults(),
                                                         options.seed, scenario.map));
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
