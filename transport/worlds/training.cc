#include "transport/worlds/training.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <utility>

#include "fabric/scenario/training_spec.h"
#include "faults/spec.h"
#include "transport/collectives/collective.h"
#include "transport/collectives/cost_model.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/worlds/dist_backend.h"
#include "transport/worlds/sweep.h"

namespace fathom::transport::worlds {

using namespace fathom::transport::coll;  // NOLINT: the loop runs the collectives

namespace {

Picoseconds Us(double us) { return Picoseconds::FromSeconds(us * 1e-6); }

std::string SizeText(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%lluM", static_cast<unsigned long long>(bytes >> 20));
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%lluK", static_cast<unsigned long long>(bytes >> 10));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

std::string Ranks(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

// A group's view of a world rank's device: the communicator numbers its
// peers within the group, the fabric by world rank (the host a QP goes to),
// so CreateQp maps one to the other; everything else is the world's device
// (with its verbs faults).
class GroupDevice final : public Device {
 public:
  GroupDevice(Device* world, std::vector<int> members)
      : world_(world), members_(std::move(members)) {}
  const DeviceInfo& info() const override { return world_->info(); }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, uint64_t length,
                                                         uint32_t access) override {
    return world_->RegisterMemory(addr, length, access);
  }
  StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override {
    return world_->CreateCq(depth);
  }
  StatusOr<std::unique_ptr<QueuePair>> CreateQp(int peer_rank, const QpOptions& options,
                                                CompletionQueue* cq) override {
    if (peer_rank < 0 || peer_rank >= static_cast<int>(members_.size())) {
      return InvalidArgument("CreateQp: group rank " + std::to_string(peer_rank) + " outside 0.." +
                             std::to_string(members_.size() - 1));
    }
    return world_->CreateQp(members_[static_cast<size_t>(peer_rank)], options, cq);
  }
  std::vector<AsyncEvent> TakeAsyncEvents() override { return world_->TakeAsyncEvents(); }

 private:
  Device* world_;
  std::vector<int> members_;
};

}  // namespace

StatusOr<TrainingPlan> TrainingPlanFromScenario(const sim::LoadedScenario& scenario, int nranks) {
  const proto::TrainingSpec& t = scenario.spec.workload().training();
  const config::SourceMap& m = scenario.map;
  TrainingPlan plan;
  plan.iterations = t.has_iterations() ? t.iterations() : -1;
  plan.duration = t.has_duration_us() ? Us(t.duration_us()) : Picoseconds();
  plan.compute = Us(t.compute_us());
  plan.checkpoint_every = t.checkpoint_every();
  plan.checkpoint = Us(t.checkpoint_us());
  for (int i = 0; i < t.collectives_size(); ++i) {
    const proto::TrainingCollectiveSpec& c = t.collectives(i);
    const std::string p = "workload.training.collectives[" + std::to_string(i) + "]";
    TrainingCollective tc;
    FATHOM_ASSIGN_OR_RETURN(tc.kind, ParseCollKind(c.op()));
    tc.name = c.name().empty() ? c.op() + "#" + std::to_string(i) : c.name();
    tc.bytes = c.bytes();
    if (!c.algo().empty()) {
      FATHOM_ASSIGN_OR_RETURN(tc.algo, ParseAlgorithm(c.algo()));
    }
    for (int g = 0; g < c.groups_size(); ++g) {
      std::vector<int> group;
      for (int r = 0; r < c.groups(g).ranks_size(); ++r) {
        const int rank = c.groups(g).ranks(r);
        if (rank >= nranks) {
          return m.Error(p + ".groups[" + std::to_string(g) + "].ranks[" + std::to_string(r) + "]",
                         "rank " + std::to_string(rank) + ", but the run has " +
                             std::to_string(nranks) +
                             " ranks (--ranks, or the hosts that reach "
                             "each other)");
        }
        group.push_back(rank);
      }
      tc.groups.push_back(std::move(group));
    }
    if (tc.groups.empty()) {
      std::vector<int> all;
      for (int r = 0; r < nranks; ++r) all.push_back(r);
      tc.groups.push_back(std::move(all));
    }
    plan.collectives.push_back(std::move(tc));
  }
  for (int i = 0; i < scenario.spec.faults_size(); ++i) {
    const proto::FaultSpec& f = scenario.spec.faults(i);
    if (!f.has_at_iteration()) continue;
    plan.iteration_faults.push_back(IterationFault{false, i, faults::FaultName(f, i),
                                                   f.at_iteration(), Us(f.iteration_offset_us())});
  }
  for (int i = 0; i < scenario.spec.verbs_faults_size(); ++i) {
    const proto::VerbsFaultSpec& f = scenario.spec.verbs_faults(i);
    if (!f.has_at_iteration()) continue;
    plan.iteration_faults.push_back(
        IterationFault{true, i, "verbs_faults[" + std::to_string(i) + "] " + f.kind(),
                       f.at_iteration(), Us(f.iteration_offset_us())});
  }
  return plan;
}

std::vector<std::string> DescribePlan(const TrainingPlan& plan) {
  std::vector<std::string> lines;
  for (const TrainingCollective& c : plan.collectives) {
    bool same = true;
    for (const auto& g : c.groups) same = same && g.size() == c.groups[0].size();
    std::string s = std::string(CollKindName(c.kind)) + " '" + c.name + "' " +
                    (c.kind == CollKind::kBarrier ? std::string("") : SizeText(c.bytes) + " ") +
                    "x " + std::to_string(c.groups.size()) +
                    (c.groups.size() == 1 ? " group" : " groups");
    if (same) s += " of " + std::to_string(c.groups[0].size()) + " ranks";
    if (c.algo != Algorithm::kAuto) s += " (" + std::string(AlgorithmName(c.algo)) + ")";
    lines.push_back(s);
  }
  return lines;
}

// One collective of the plan: a communicator per (group, member) on the
// member's device, and one driver that runs every group at once.
struct TrainingRunner::Entry {
  TrainingCollective spec;
  std::vector<std::unique_ptr<Device>> devices;      // per comm (outlive them)
  std::vector<std::unique_ptr<Communicator>> comms;  // all groups, in order
  std::vector<int> world_rank;                       // per comm
  std::vector<int> group;                            // per comm
  std::vector<CollSpec> specs;                       // per group
  // Maps stuck QPs' group ranks and peers to world ranks (the fabric's
  // evidence takes world ranks), through the QP that names them.
  std::function<void(std::vector<StuckQp>*)> to_world;
  std::unique_ptr<Driver> driver;
};

StatusOr<std::unique_ptr<TrainingRunner>> TrainingRunner::Create(SimWorld* world,
                                                                 TrainingPlan plan) {
  std::unique_ptr<TrainingRunner> t(new TrainingRunner());
  t->world_ = world;
  CommOptions copt = world->comm_options();
  // Timing only: hours of training would otherwise reduce real buffers.
  copt.modelled = true;
  for (const TrainingCollective& c : plan.collectives) {
    auto e = std::make_unique<Entry>();
    e->spec = c;
    std::vector<Communicator*> all;
    for (size_t g = 0; g < c.groups.size(); ++g) {
      const int n = static_cast<int>(c.groups[g].size());
      std::vector<Communicator*> members;
      for (int r = 0; r < n; ++r) {
        const int wr = c.groups[g][static_cast<size_t>(r)];
        e->devices.push_back(std::make_unique<GroupDevice>(&world->device(wr), c.groups[g]));
        FATHOM_ASSIGN_OR_RETURN(auto comm,
                                Communicator::Create(e->devices.back().get(), r, n, copt));
        members.push_back(comm.get());
        e->world_rank.push_back(wr);
        e->group.push_back(static_cast<int>(g));
        e->comms.push_back(std::move(comm));
      }
      FATHOM_RETURN_IF_ERROR(ExchangeAndConnect(members).WithContext(
          "training collective '" + c.name + "' group " + std::to_string(g)));
      all.insert(all.end(), members.begin(), members.end());
      CollSpec spec;
      spec.kind = c.kind;
      spec.nranks = n;
      spec.count = c.bytes / CountUnitBytes(c.kind, n, DataType::kFloat32);
      spec.root = 0;
      spec.algorithm =
          c.algo == Algorithm::kAuto
              ? ChooseAlgorithm(c.kind, c.bytes, n, world->alpha_beta(), copt.chunk_bytes)
              : c.algo;
      if (c.kind != CollKind::kAllReduce) spec.algorithm = Algorithm::kRing;
      e->specs.push_back(spec);
    }
    // The world's watchdog; its fabric evidence takes world ranks, so the
    // group's ranks are mapped through the QP that names them.
    DriverOptions dopt = world->driver_options();
    std::map<std::pair<int, uint32_t>, std::pair<int, int>> by_qp;  // (rank, qpn) -> (world, group)
    for (size_t i = 0; i < e->comms.size(); ++i) {
      for (Conn* conn : e->comms[i]->conns()) {
        by_qp[{e->comms[i]->rank(), conn->qp->qp_num()}] = {e->world_rank[i], e->group[i]};
      }
    }
    const std::vector<std::vector<int>> groups = c.groups;
    e->to_world = [by_qp, groups](std::vector<StuckQp>* qps) {
      for (StuckQp& q : *qps) {
        auto it = by_qp.find({q.rank, q.qpn});
        if (it == by_qp.end()) continue;
        const auto& members = groups[static_cast<size_t>(it->second.second)];
        q.rank = it->second.first;
        if (q.peer >= 0 && q.peer < static_cast<int>(members.size())) {
          q.peer = members[static_cast<size_t>(q.peer)];
        }
      }
    };
    if (dopt.fabric_evidence) {
      auto inner = dopt.fabric_evidence;
      dopt.fabric_evidence = [inner, to_world = e->to_world](const std::vector<StuckQp>& qps) {
        std::vector<StuckQp> mapped = qps;
        to_world(&mapped);
        return inner(mapped);
      };
    }
    e->driver = std::make_unique<Driver>(&world->fabric().clock(), all, dopt);
    t->entries_.push_back(std::move(e));
  }
  t->plan_ = std::move(plan);
  return t;
}

TrainingRunner::~TrainingRunner() {
  // Drivers unhook the CQs of their communicators first.
  for (auto& e : entries_) {
    e->driver.reset();
    e->comms.clear();
  }
}

void TrainingRunner::Idle(Picoseconds until, DistSimBackend* dist) {
  sim::Engine& engine = world_->engine();
  const auto wall = std::chrono::steady_clock::now();
  if (dist != nullptr) {
    dist->Idle(until);
  } else {
    // A completion stops the engine (EmulatedFabric::OnCompletion): go on.
    while (engine.Now() < until) engine.Run(until);
  }
  idle_wall_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
}

void TrainingRunner::NoteFailure(const Entry& e, int64_t it, Picoseconds t0, const RunOutcome& out,
                                 int failed_group, std::vector<int> stalled,
                                 TrainingResult* res) const {
  res->failed = true;
  res->hung = out.hung;
  res->failed_iteration = it;
  res->failed_iteration_start = t0;
  res->failed_collective = e.spec.name;
  res->failed_at = out.end;
  res->error_status = out.hung ? "" : ErrorStatusIn(out.status.message());
  res->failed_group = failed_group;
  res->stalled_ranks = std::move(stalled);
  std::sort(res->stalled_ranks.begin(), res->stalled_ranks.end());
  std::string where =
      "training: iteration " + std::to_string(it) + ", collective '" + e.spec.name + "'";
  if (e.spec.groups.size() > 1) {
    where += ": the ranks below are group ranks; group g rank i is world rank groups[g][i]:";
    for (size_t g = 0; g < e.spec.groups.size(); ++g) {
      where += " " + std::to_string(g) + "=" + Ranks(e.spec.groups[g]);
    }
  } else if (e.spec.groups[0].size() != static_cast<size_t>(world_->nranks())) {
    where += ": the ranks below are group ranks; rank i is world rank " + Ranks(e.spec.groups[0]) +
             "[i]";
  }
  res->report = where + "\n" + out.report;
}

bool TrainingRunner::ArmIterationFaults(int64_t it, TrainingResult* res) {
  const Picoseconds now = world_->fabric().clock().Now();
  for (const IterationFault& f : plan_.iteration_faults) {
    if (f.iteration != it) continue;
    const Picoseconds at = now + f.offset;
    res->status =
        world_->ArmScenarioFault(f.verbs, f.index, at)
            .WithContext("training: arming " + f.name + " at iteration " + std::to_string(it));
    if (!res->status.ok()) return false;
    res->armed.push_back({f.name, it, at});
  }
  return true;
}

TrainingResult TrainingRunner::Run() {
  TrainingResult res;
  sim::Engine& engine = world_->engine();
  const uint64_t events_before = engine.events_dispatched();
  Clock& clock = world_->fabric().clock();
  res.start = clock.Now();
  for (int64_t it = 0;; ++it) {
    if (plan_.iterations >= 0 && it >= plan_.iterations) break;
    if (plan_.duration > Picoseconds() && clock.Now() - res.start >= plan_.duration) break;
    if (it >= sim::kMaxTrainingIterations) break;
    const Picoseconds t0 = clock.Now();
    Idle(t0 + plan_.compute);
    // This iteration's faults act from its first post on (IterationFault).
    if (!ArmIterationFaults(it, &res)) break;
    for (auto& e : entries_) {
      std::vector<std::unique_ptr<RankCollective>> colls;
      std::vector<RankCollective*> ptrs;
      colls.reserve(e->comms.size());
      for (size_t i = 0; i < e->comms.size(); ++i) {
        colls.push_back(std::make_unique<RankCollective>(
            e->comms[i].get(), e->specs[static_cast<size_t>(e->group[i])], DataType::kFloat32,
            RedOp::kSum, nullptr, nullptr));
        ptrs.push_back(colls.back().get());
      }
      RunOutcome out = e->driver->Run(ptrs);
      if (out.status.ok()) continue;
      // Which group: the first whose ranks had not finished.
      int failed_group = -1;
      std::vector<int> stalled;
      for (size_t i = 0; i < colls.size(); ++i) {
        if (colls[i]->done()) continue;
        if (failed_group < 0) failed_group = e->group[i];
        if (out.hung) stalled.push_back(e->world_rank[i]);
      }
      NoteFailure(*e, it, t0, out, failed_group, std::move(stalled), &res);
      break;
    }
    if (res.failed) break;
    if (plan_.checkpoint_every > 0 && (it + 1) % plan_.checkpoint_every == 0) {
      Idle(clock.Now() + plan_.checkpoint);
    }
    res.iteration_times.push_back(clock.Now() - t0);
    ++res.completed;
  }
  res.end = clock.Now();
  res.events = engine.events_dispatched() - events_before;
  res.idle_wall_s = idle_wall_s_;
  return res;
}

TrainingResult TrainingRunner::RunWindowed(DistSimBackend* dist) {
  TrainingResult res;
  parallel::Comm* comm = dist->comm();
  Clock& clock = world_->fabric().clock();
  // The windowed loop hooks the CQs of the ranks this process runs.
  for (auto& e : entries_) e->driver.reset();
  const uint64_t events_before = dist->EventsSum();
  res.start = clock.Now();
  // The agreed end of the last collective: where the next compute starts
  // (the clock is at the window boundary after it).
  Picoseconds last_end = res.start;
  for (int64_t it = 0;; ++it) {
    if (plan_.iterations >= 0 && it >= plan_.iterations) break;
    if (plan_.duration > Picoseconds() && last_end - res.start >= plan_.duration) break;
    if (it >= sim::kMaxTrainingIterations) break;
    const Picoseconds t0 = last_end;
    Idle(std::max(t0 + plan_.compute, clock.Now()), dist);
    if (!ArmIterationFaults(it, &res)) break;
    // The armed fault's events act where their node is.
    if (!res.armed.empty() && res.armed.back().iteration == it) dist->RetainArmed();
    for (auto& e : entries_) {
      std::vector<std::unique_ptr<RankCollective>> colls;
      std::vector<RankCollective*> ptrs;
      std::vector<Communicator*> comms;
      std::vector<int> ids;
      for (size_t i = 0; i < e->comms.size(); ++i) {
        if (!dist->Owns(e->world_rank[i])) continue;
        colls.push_back(std::make_unique<RankCollective>(
            e->comms[i].get(), e->specs[static_cast<size_t>(e->group[i])], DataType::kFloat32,
            RedOp::kSum, nullptr, nullptr));
        ptrs.push_back(colls.back().get());
        comms.push_back(e->comms[i].get());
        ids.push_back(static_cast<int>(i));
      }
      const RunOutcome out =
          dist->RunWindows(comms, ptrs, ids, static_cast<int>(e->comms.size()), e->to_world);
      last_end = out.end;
      if (out.status.ok()) continue;
      // The first group with a rank not finished, over every process's.
      std::vector<int64_t> group{INT64_MAX};
      for (size_t k = 0; k < colls.size(); ++k) {
        if (!colls[k]->done()) {
          group[0] = std::min<int64_t>(group[0], e->group[static_cast<size_t>(ids[k])]);
        }
      }
      comm->AllMin(&group);
      std::vector<int> stalled;
      for (int id : out.stuck_ranks) stalled.push_back(e->world_rank[static_cast<size_t>(id)]);
      NoteFailure(*e, it, t0, out, group[0] == INT64_MAX ? -1 : static_cast<int>(group[0]),
                  std::move(stalled), &res);
      break;
    }
    if (res.failed) break;
    if (plan_.checkpoint_every > 0 && (it + 1) % plan_.checkpoint_every == 0) {
      last_end = last_end + plan_.checkpoint;
      Idle(std::max(last_end, clock.Now()), dist);
    }
    res.iteration_times.push_back(last_end - t0);
    ++res.completed;
  }
  res.end = last_end;
  dist->UpdateDigest();
  res.events = dist->EventsSum() - events_before;
  res.idle_wall_s = idle_wall_s_;
  return res;
}

}  // namespace fathom::transport::worlds
