#include "transport/worlds/dist_backend.h"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <queue>
#include <utility>

#include "transport/collectives/driver.h"

namespace fathom::transport::worlds {

using namespace fathom::transport::coll;  // NOLINT: the backend runs the collectives

DistSimBackend::DistSimBackend(SimWorld* world, parallel::Comm* comm)
    : world_(world), comm_(comm), base_(world) {}

StatusOr<std::unique_ptr<DistSimBackend>> DistSimBackend::Create(SimWorld* world,
                                                                 parallel::Comm* comm) {
  if (!world->engine().canonical_order()) {
    return InvalidArgument("DistSimBackend: the world's engine must run in the canonical order");
  }
  std::unique_ptr<DistSimBackend> b(new DistSimBackend(world, comm));
  b->run_ = std::make_unique<parallel::DistributedRun>(comm, &world->topology(), &b->no_spec_);
  if (const intranode::ServerFabric* server = world->server(); server != nullptr) {
    // The server tier couples a server's GPUs (NVLink copies, PXN relays
    // through a peer GPU's NIC, PCIe bounces) with no link latency between
    // them, and its events (kUser) name no node: one process simulates each
    // server whole (PartitionFabric's `together`: on plain wiring with the
    // leaf its NICs share, on rail wiring as a unit of its own whose NIC
    // cables cross). Nothing of the tier crosses, so no NVLink latency is
    // ever a lookahead (a zero one needs no check), and the canonical
    // order of a server's events is that of one process.
    const topo::ServerTier& tier = server->tier();
    std::vector<std::vector<int32_t>> servers(static_cast<size_t>(tier.servers));
    for (const topo::GpuPlace& g : tier.gpus) {
      servers[static_cast<size_t>(g.server)].push_back(
          world->topology().hosts()[static_cast<size_t>(g.host)]);
    }
    std::erase_if(servers, [](const std::vector<int32_t>& s) { return s.empty(); });
    b->run_->set_keep_together(std::move(servers));
  }
  // The flow model's work is per host (its NIC, QPs and ranks); its
  // switches carry no events, so a split by switch units could leave a
  // process with no rank at all (docs/PARALLEL.md).
  b->run_->set_partition_by_hosts(world->flow() != nullptr);
  // The work is where the ranks are: a world of fewer ranks than the
  // topology has hosts is cut across the ranks' hosts (partition.h).
  std::vector<char> used(world->topology().nodes().size(), 0);
  for (int r = 0; r < world->nranks(); ++r)
    used[static_cast<size_t>(world->fabric().NodeOf(r))] = 1;
  b->run_->set_used_hosts(std::move(used));
  FATHOM_RETURN_IF_ERROR(b->run_->OnNetwork(world->network()));
  FATHOM_RETURN_IF_ERROR(b->run_->AdoptQps(world->network()));
  for (int r = 0; r < world->nranks(); ++r) {
    if (b->run_->partition().Owns(comm->rank(), world->fabric().NodeOf(r))) b->local_.push_back(r);
  }
  b->window_ps_ = b->run_->window().ps();
  if (sim::FlowFabric* flow = world->flow(); flow != nullptr) {
    // Every process keeps the flow model; the posts of a class of flows
    // that spans processes cross, and reach the wire after the profile's
    // post-to-wire delay: the lookahead (docs/FLOW.md, "Across processes").
    // A profile without one runs across processes only where no post
    // crosses (Admit, before each collective).
    const sim::NicProfile& profile = world->network_config().nic;
    const int64_t lookahead = sim::PostToWireDelay(profile, 0).ps();
    if (comm->size() > 1 && lookahead <= 0) {
      b->no_post_lookahead_ = true;
      flow->set_no_post_lookahead(true);
    }
    if (lookahead > 0) b->window_ps_ = std::min(b->window_ps_, lookahead);
    std::vector<char> local_nodes(world->topology().nodes().size(), 0);
    for (size_t node = 0; node < local_nodes.size(); ++node) {
      local_nodes[node] = b->run_->partition().Owns(comm->rank(), static_cast<int32_t>(node));
    }
    flow->Split(std::move(local_nodes), comm->rank() == 0);
  }
  // Verbs faults act where their rank's NIC is (the events they schedule
  // are that process's; sim_world.h).
  std::vector<char> local(static_cast<size_t>(world->nranks()), 0);
  for (int r : b->local_) local[static_cast<size_t>(r)] = 1;
  world->SplitVerbsFaults([local](int r) { return local[static_cast<size_t>(r)] != 0; });
  return b;
}

uint64_t DistSimBackend::flow_posts_shipped() const {
  return world_->flow() != nullptr ? world_->flow()->posts_shipped() : 0;
}

uint64_t DistSimBackend::flow_acks_shipped() const {
  return world_->flow() != nullptr ? world_->flow()->acks_shipped() : 0;
}

uint64_t DistSimBackend::flow_arrivals_shipped() const {
  return world_->flow() != nullptr ? world_->flow()->arrivals_shipped() : 0;
}

uint64_t DistSimBackend::flow_posts_kept() const {
  return world_->flow() != nullptr ? world_->flow()->posts_kept() : 0;
}

const sim::FlowModel::Stats* DistSimBackend::flow_stats() const {
  return world_->flow() != nullptr ? &world_->flow()->model().stats() : nullptr;
}

std::string DistSimBackend::Where() const {
  return base_.Where() + ", canonical event order, " + std::to_string(comm_->size()) +
         (comm_->size() == 1 ? " process" : " processes");
}

std::string DistSimBackend::WhereJson() const {
  char digest[24];
  std::snprintf(digest, sizeof(digest), "%016" PRIx64, trace_digest());
  return base_.WhereJson() +
         ",\"event_order\":\"canonical\",\"processes\":" + std::to_string(comm_->size()) +
         ",\"trace_digest\":\"" + digest + "\"";
}

Backend::Counters DistSimBackend::FabricCounters() {
  run_->Settle();  // the shipped entries that arrived leave their ports' accounts
  Counters c = base_.FabricCounters();
  std::vector<uint64_t> v;
  for (const auto& [name, value] : c) v.push_back(value);
  comm_->AllSum(&v);
  for (size_t i = 0; i < c.size(); ++i) c[i].second = v[i];
  return c;
}

Status DistSimBackend::Combine(double*, int64_t* wrong) {
  // The times are the same everywhere (Run agrees on start and end); the
  // wrong elements are counted where the ranks are.
  if (*wrong < 0) return Status::Ok();
  std::vector<uint64_t> v{static_cast<uint64_t>(*wrong)};
  comm_->AllSum(&v);
  *wrong = static_cast<int64_t>(v[0]);
  return Status::Ok();
}

bool DistSimBackend::WriteTrace(const std::string& path, const Trace& trace, bool) {
  // Every process's ranks' steps on rank 0, one file: the times are on the
  // one virtual clock, and the events go in (start, rank, stream, name)
  // order, which no partition changes. Fields by tab, events by newline
  // (TraceEvent's strings hold neither).
  std::string mine;
  for (const TraceEvent& e : trace.events) {
    mine += e.name + "\t" + std::to_string(e.rank) + "\t" + std::to_string(e.stream) + "\t" +
            std::to_string(e.start.ps()) + "\t" + std::to_string(e.duration.ps()) + "\t" + e.args +
            "\n";
  }
  const std::vector<std::string> all = comm_->Gather(mine);
  if (comm_->rank() != 0) return true;
  Trace merged;
  for (const std::string& text : all) {
    size_t at = 0;
    while (at < text.size()) {
      const size_t end = text.find('\n', at);
      std::vector<std::string> f;
      size_t from = at;
      for (int k = 0; k < 5; ++k) {
        const size_t tab = text.find('\t', from);
        f.push_back(text.substr(from, tab - from));
        from = tab + 1;
      }
      TraceEvent e;
      e.name = f[0];
      e.rank = std::stoi(f[1]);
      e.stream = std::stoi(f[2]);
      e.start = Picoseconds(std::stoll(f[3]));
      e.duration = Picoseconds(std::stoll(f[4]));
      e.args = text.substr(from, end - from);
      merged.events.push_back(std::move(e));
      at = end + 1;
    }
  }
  std::stable_sort(merged.events.begin(), merged.events.end(),
                   [](const TraceEvent& a, const TraceEvent& b) {
                     if (a.start != b.start) return a.start < b.start;
                     if (a.rank != b.rank) return a.rank < b.rank;
                     if (a.stream != b.stream) return a.stream < b.stream;
                     return a.name < b.name;
                   });
  return WriteTraceFile(path, merged.ToJson());
}

RunOutcome DistSimBackend::Run(const CollSpec& spec, DataType type, RedOp op,
                               const std::vector<const void*>& in, const std::vector<void*>& out,
                               Trace* trace) {
  const size_t n = local_.size();
  std::vector<std::unique_ptr<RankCollective>> colls;
  std::vector<RankCollective*> ptrs;
  std::vector<Communicator*> comms;
  for (size_t i = 0; i < n; ++i) {
    comms.push_back(&world_->comm(local_[i]));
    colls.push_back(std::make_unique<RankCollective>(comms[i], spec, type, op,
                                                     i < in.size() ? in[i] : nullptr,
                                                     i < out.size() ? out[i] : nullptr, trace));
    ptrs.push_back(colls.back().get());
  }
  if (Status s = PlanFlows(spec); !s.ok()) {
    RunOutcome failed;
    failed.status = s;
    return failed;
  }
  if (Status s = NoPostCrosses(); !s.ok()) {
    RunOutcome failed;
    failed.status = s;
    return failed;
  }
  RunOutcome res = RunWindows(comms, ptrs, local_, nranks());
  // Back to every flow everywhere for what runs next without a plan (a
  // training loop's groups): nothing runs after a collective that ended.
  if (res.status.ok() && world_->flow() != nullptr) {
    (void)world_->flow()->Plan({}, run_->partition().owner, comm_->rank(), comm_->size(), true);
  }
  UpdateDigest();
  return res;
}

Status DistSimBackend::Admit(const CollSpec& spec) {
  if (!no_post_lookahead_) return Status::Ok();
  FATHOM_RETURN_IF_ERROR(PlanFlows(spec));
  const Status s = NoPostCrosses();
  (void)world_->flow()->Plan({}, run_->partition().owner, comm_->rank(), comm_->size(), true);
  return s;
}

Status DistSimBackend::AdmitWithoutPlan() const {
  return no_post_lookahead_ ? NoPostCrosses() : Status::Ok();
}

Status DistSimBackend::NoPostCrosses() const {
  if (!no_post_lookahead_) return Status::Ok();
  const std::string why = world_->flow()->PostsCrossBecause(comm_->size());
  if (why.empty()) return Status::Ok();
  const sim::NicProfile& profile = world_->network_config().nic;
  return InvalidArgument(
      "--fabric-model flow across " + std::to_string(comm_->size()) +
      " processes: the NIC profile " + profile.name +
      " posts with no delay (doorbell + WQE fetch + per-message + DMA read = 0 ps), and " + why +
      ", so a post in one process would start a flow in the others at once (no lookahead); use "
      "a profile with a delay (--profile cx6, the default), one process, or a collective whose "
      "flows share no link across processes (a ring)");
}

Status DistSimBackend::PlanFlows(const CollSpec& spec) {
  sim::FlowFabric* flow = world_->flow();
  if (flow == nullptr) return Status::Ok();
  // Classes change only while no flow runs anywhere (a failed collective
  // may leave some running).
  std::vector<uint64_t> running{flow->model().running()};
  comm_->AllSum(&running);
  if (running[0] != 0) {
    return FailedPrecondition("flow model: " + std::to_string(running[0]) +
                              " flows of the previous collective still run");
  }
  // Every rank's data QPs, alike in every process (each builds every
  // rank's communicator): the spec as RankCollective::Start completes it.
  // A server tier's PXN relays send on a peer GPU's NIC: every flow
  // everywhere there.
  std::vector<std::pair<int32_t, uint32_t>> data;
  bool full = world_->server() != nullptr;
  for (int r = 0; r < nranks() && !full; ++r) {
    Communicator& c = world_->comm(r);
    CollSpec s = spec;
    s.gpus_per_server = c.options().gpus_per_server;
    if (s.kind != CollKind::kAllReduce || s.algorithm == Algorithm::kRing ||
        Hierarchical(s.nranks, s.gpus_per_server)) {
      s.channels = c.options().channels;
    }
    const int32_t node = world_->fabric().NodeOf(r);
    for (const auto& [peer, channel] : DataPeers(s, c.rank())) {
      Conn* conn = c.FindConn(peer, channel);
      if (conn == nullptr) {
        full = true;  // the collective fails on its own; nothing to split
        break;
      }
      for (int q = 0; q < conn->nqps(); ++q) data.emplace_back(node, conn->qp_at(q).qp_num());
    }
  }
  const StatusOr<size_t> classes =
      flow->Plan(std::move(data), run_->partition().owner, comm_->rank(), comm_->size(), full);
  return classes.ok() ? Status::Ok() : classes.status();
}

void DistSimBackend::UpdateDigest() {
  sim::FlowFabric* flow = world_->flow();
  std::vector<uint64_t> sum{run_->LocalDigestSum(world_->engine()) -
                            (flow != nullptr ? flow->uncounted_sum() : 0)};
  comm_->AllSum(&sum);
  digest_sum_ = sum[0];
}

uint64_t DistSimBackend::EventsSum() {
  // The replicated flow model's events count once (where Split counts
  // them), as in the digest.
  sim::FlowFabric* flow = world_->flow();
  std::vector<uint64_t> v{run_->LocalEvents(world_->engine()) -
                          (flow != nullptr ? flow->uncounted_events() : 0)};
  comm_->AllSum(&v);
  return v[0];
}

bool DistSimBackend::Owns(int rank) const {
  return std::binary_search(local_.begin(), local_.end(), rank);
}

std::vector<int64_t> DistSimBackend::ExchangeWindow(int64_t next_local,
                                                    const std::vector<int64_t>& words,
                                                    bool window_ran) {
  // One exchange between windows (DistributedRun::ExchangeWindow): the
  // window's packets, the flow model's posts and ACKs (flow_fabric.h), and
  // the words every process agrees on (their least). Each process's next
  // time is known before the delivery: the packets' arrivals and the ACKs
  // it ships are in it, and a post is in its poster's NIC queue already.
  sim::FlowFabric* flow = world_->flow();
  std::vector<std::string> flow_out;
  if (flow != nullptr) {
    // After a window the engine has run every event up to its clock (the
    // window's end); before the first, none at its clock.
    const int64_t through = world_->engine().Now().ps() - (window_ran ? 0 : 1);
    flow_out = flow->TakeOutbox(run_->partition().owner, comm_->rank(), comm_->size(), through,
                                &next_local);
  }
  std::vector<int64_t> v{next_local};
  v.insert(v.end(), words.begin(), words.end());
  const std::vector<std::string> in =
      run_->ExchangeWindow(world_->network(), &v, flow_out, window_ran);
  if (flow != nullptr) flow->TakeInbox(in);
  return v;
}

void DistSimBackend::RunUntil(int64_t stop_at) {
  // A completion stops the engine (EmulatedFabric::OnCompletion): go on
  // (no collective runs while the loop idles).
  emulated::EmulatedFabric& fabric = world_->fabric();
  sim::Engine& engine = world_->engine();
  do {
    fabric.TakeCompletionFlag();
    engine.Run(Picoseconds(stop_at));
    fabric.TakeCompletionFlag();
  } while (engine.Now().ps() < stop_at);
}

void DistSimBackend::Idle(Picoseconds until) {
  // Window by window where some process has an event (a fault's, a late
  // packet's or completion's), skipping to the agreed next event otherwise,
  // as RunWindows skips empty windows; the clock ends at `until` in every
  // process.
  sim::Engine& engine = world_->engine();
  const int64_t q = window_ps_;
  bool window_ran = false;
  while (engine.Now() < until) {
    const std::vector<int64_t> v = ExchangeWindow(INT64_MAX, {}, window_ran);
    window_ran = true;
    const int64_t next = std::max(v[0], engine.Now().ps());
    if (next >= until.ps()) {
      engine.SetClock(until);
      break;
    }
    const int64_t from = next - next % q;
    RunUntil(std::min(from + q - 1, until.ps() - 1));
  }
}

namespace {

// One rank's part of a hang's report, as it crosses between processes
// (JSON): its id, its rank in its communicator, whether it is stuck (its
// StuckRankReport) and its device's async events.
struct RankPart {
  int id = 0;
  int rank = 0;
  bool stuck = false;
  StuckRankReport report;
  std::string async;
};

nlohmann::json PartJson(const RankPart& p) {
  nlohmann::json qps = nlohmann::json::array();
  for (size_t k = 0; k < p.report.qps.size(); ++k) {
    const StuckQp& q = p.report.qps[k];
    qps.push_back({q.rank, q.peer, q.channel, q.qpn, q.outstanding_sends, q.outstanding_recvs,
                   q.have_last, static_cast<int>(q.last_status), q.in_error,
                   p.report.silent_for[k].ps()});
  }
  return {{"id", p.id},
          {"rank", p.rank},
          {"stuck", p.stuck},
          {"text", p.report.text},
          {"qp_lines", p.report.qp_lines},
          {"qps", std::move(qps)},
          {"waits_for", p.report.waits_for},
          {"async", p.async}};
}

RankPart PartOf(const nlohmann::json& j) {
  RankPart p;
  p.id = j.at("id").get<int>();
  p.rank = j.at("rank").get<int>();
  p.stuck = j.at("stuck").get<bool>();
  p.report.text = j.at("text").get<std::string>();
  p.report.qp_lines = j.at("qp_lines").get<std::vector<std::string>>();
  for (const nlohmann::json& v : j.at("qps")) {
    StuckQp q;
    q.rank = v[0].get<int>();
    q.peer = v[1].get<int>();
    q.channel = v[2].get<int>();
    q.qpn = v[3].get<uint32_t>();
    q.outstanding_sends = v[4].get<int>();
    q.outstanding_recvs = v[5].get<int>();
    q.have_last = v[6].get<bool>();
    q.last_status = static_cast<WcStatus>(v[7].get<int>());
    q.in_error = v[8].get<bool>();
    p.report.qps.push_back(q);
    p.report.silent_for.push_back(Picoseconds(v[9].get<int64_t>()));
  }
  p.report.waits_for = j.at("waits_for").get<std::vector<int>>();
  p.async = j.at("async").get<std::string>();
  return p;
}

}  // namespace

std::string DistSimBackend::HangReport(const std::vector<Communicator*>& comms,
                                       const std::vector<RankCollective*>& colls,
                                       const std::vector<int>& ids, Picoseconds now,
                                       const std::function<void(std::vector<StuckQp>*)>& to_world,
                                       std::vector<StuckQp>* stuck) {
  // Each process describes its ranks (their QPs and devices are its own);
  // every process gets every part, in id order (the order of the Driver's
  // ranks, whose report this one is), so that all agree on the stuck QPs
  // whose paths the fabric's evidence walks.
  nlohmann::json mine = nlohmann::json::array();
  for (size_t i = 0; i < comms.size(); ++i) {
    RankPart p;
    p.id = ids[i];
    p.rank = comms[i]->rank();
    p.stuck = !colls[i]->done();
    if (p.stuck) p.report = Driver::DescribeStuckRank(*comms[i], *colls[i], now);
    p.async = Driver::AsyncEventLinesOf(*comms[i]);
    if (p.stuck || !p.async.empty()) mine.push_back(PartJson(p));
  }
  std::vector<RankPart> parts;
  for (const std::string& bytes :
       comm_->Exchange(std::vector<std::string>(static_cast<size_t>(comm_->size()), mine.dump()))) {
    for (const nlohmann::json& j : nlohmann::json::parse(bytes)) parts.push_back(PartOf(j));
  }
  std::sort(parts.begin(), parts.end(),
            [](const RankPart& a, const RankPart& b) { return a.id < b.id; });
  // As Driver::WatchdogReport puts them together.
  Driver::ReportJoin join;
  std::string async;
  for (RankPart& p : parts) {
    async += p.async;
    if (p.stuck) join.Add(p.rank, std::move(p.report), stuck);
  }
  std::string r = join.Text();
  r += Driver::MarkCulprit(join.waits_for(), join.silent_for(), 0, stuck);
  r += async;
  std::vector<StuckQp> world_qps = *stuck;
  if (to_world) to_world(&world_qps);
  return r + FabricEvidence(world_qps);
}

std::string DistSimBackend::AsyncEventLines(const std::vector<Communicator*>& comms,
                                            const std::vector<int>& ids) {
  // Each process drains its ranks' devices; rank 0 puts the lines in id
  // order (the Driver's order of its ranks).
  nlohmann::json mine = nlohmann::json::array();
  for (size_t i = 0; i < comms.size(); ++i) {
    const std::string lines = Driver::AsyncEventLinesOf(*comms[i]);
    if (!lines.empty()) mine.push_back({ids[i], lines});
  }
  std::vector<std::pair<int, std::string>> all;
  for (const std::string& bytes : comm_->Gather(mine.dump())) {
    if (bytes.empty()) continue;  // Gather gives the parts on rank 0 only
    for (const nlohmann::json& j : nlohmann::json::parse(bytes)) {
      all.emplace_back(j[0].get<int>(), j[1].get<std::string>());
    }
  }
  std::sort(all.begin(), all.end());
  std::string r;
  for (const auto& [id, lines] : all) r += lines;
  return r;
}

std::string DistSimBackend::FabricEvidence(const std::vector<StuckQp>& qps) {
  // SimWorld's fabric_evidence (sim_world.cc), with the counters of every
  // process: each reads the nodes it simulates, the sums are the whole.
  emulated::EmulatedFabric& fabric = world_->fabric();
  std::vector<emulated::EmulatedFabric::QpRef> refs;
  const std::string culprit = CulpritLine(fabric, qps, &refs);
  const parallel::Partition& partition = run_->partition();
  const int32_t me = comm_->rank();
  emulated::EmulatedFabric::EvidenceFacts facts =
      fabric.CollectEvidence(refs, [&](int32_t node) { return partition.Owns(me, node); });
  comm_->AllSum(&facts.counts);
  // A port's fault text is its node's process's (the others' are empty).
  for (const std::string& bytes : comm_->Gather(nlohmann::json(facts.texts).dump())) {
    if (bytes.empty()) continue;  // Gather gives the parts on rank 0 only
    const std::vector<std::string> theirs = nlohmann::json::parse(bytes);
    for (size_t k = 0; k < facts.texts.size() && k < theirs.size(); ++k) {
      if (facts.texts[k].empty()) facts.texts[k] = theirs[k];
    }
  }
  const faulty::FaultInjector* inj = world_->verbs_faults();
  const std::string verbs =
      inj == nullptr ? std::string() : inj->MergedReport(comm_->Gather(inj->EncodeLocalStats()));
  return culprit + fabric.FormatEvidence(refs, facts) + verbs;
}

RunOutcome DistSimBackend::RunWindows(const std::vector<Communicator*>& comms,
                                      const std::vector<RankCollective*>& colls,
                                      const std::vector<int>& ids, int total,
                                      const std::function<void(std::vector<StuckQp>*)>& to_world) {
  sim::Engine& engine = world_->engine();
  emulated::EmulatedFabric& fabric = world_->fabric();
  const int64_t q = window_ps_;
  const int64_t timeout = world_->driver_options().timeout.ps();
  constexpr int64_t kNever = INT64_MAX;
  RunOutcome res;
  res.start = engine.Now();
  const size_t n = comms.size();
  // The ready list, fed by the CQs (as the Driver's).
  std::vector<int> ready, batch;
  std::vector<char> queued(n, 0);
  for (size_t i = 0; i < n; ++i) {
    comms[i]->cq().SetNotify([&ready, &queued, i] {
      if (!queued[i]) {
        queued[i] = 1;
        ready.push_back(static_cast<int>(i));
      }
    });
  }
  std::vector<char> done(n, 0), failed(n, 0);
  size_t done_count = 0;
  int64_t finish = res.start.ps();  // when the last local rank finished
  int64_t last_progress = res.start.ps();
  // The first local error by (not a flush, time, id): NCCL reports the
  // completion that broke the run, not the WRs flushed after it.
  int64_t err_key = kNever, err_time = kNever;
  std::string err_msg;
  auto fail_rank = [&](size_t i, const Status& s) {
    failed[i] = 1;
    const bool flush = s.message().find("IBV_WC_WR_FLUSH_ERR") != std::string::npos;
    const int64_t key = (int64_t{flush} << 32) | ids[i];
    const int64_t t = engine.Now().ps();
    if (t < err_time || (t == err_time && key < err_key)) {
      err_time = t;
      err_key = key;
      err_msg = s.message();
    }
  };
  // What the verbs faults did, from the processes that ran their ranks
  // (rank 0's; empty without faults): a swallowed error shows only here
  // (CASES.md 20), as in the Driver's report. Every process calls it.
  auto fault_report = [&]() -> std::string {
    const faulty::FaultInjector* inj = world_->verbs_faults();
    return inj == nullptr ? std::string()
                          : inj->MergedReport(comm_->Gather(inj->EncodeLocalStats()));
  };
  auto note_done = [&](size_t i) {
    if (done[i] == 0 && colls[i]->done()) {
      done[i] = 1;
      ++done_count;
      finish = std::max(finish, engine.Now().ps());
    }
  };
  using Wake = std::pair<int64_t, int>;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<Wake>> wakes;
  std::vector<int64_t> wake_set(n, kNever);
  auto note_wake = [&](size_t i) {
    const int64_t w = colls[i]->next_wake().ps();
    if (w != kNever && w != wake_set[i]) {
      wake_set[i] = w;
      wakes.emplace(w, static_cast<int>(i));
    }
  };
  for (size_t i = 0; i < n; ++i) {
    Status s = colls[i]->Start(engine.Now());
    if (!s.ok()) {
      fail_rank(i, s.WithContext("rank " + std::to_string(comms[i]->rank())));
      continue;
    }
    note_done(i);
    note_wake(i);
  }
  auto drain = [&] {
    while (!ready.empty()) {
      batch.swap(ready);
      ready.clear();
      const Picoseconds now = engine.Now();
      bool progressed = false;
      for (int ii : batch) {
        const size_t i = static_cast<size_t>(ii);
        queued[i] = 0;
        if (failed[i]) continue;
        StatusOr<int> polled = comms[i]->Poll(now);
        if (!polled.ok()) {
          fail_rank(i, polled.status());
          continue;
        }
        bool ran = false;
        Status s = colls[i]->Advance(now, &ran);
        if (!s.ok()) {
          fail_rank(i, s.WithContext("rank " + std::to_string(comms[i]->rank())));
          continue;
        }
        note_done(i);
        note_wake(i);
        progressed = progressed || polled.value() > 0 || ran;
      }
      batch.clear();
      if (progressed) last_progress = now.ps();
    }
  };
  // Agreed between windows, and before the first: the earliest event or
  // reduction anywhere, the latest progress, whether every rank is done
  // (and when the last finished), the earliest error.
  std::vector<int64_t> v;
  int64_t clock_after = res.start.ps();
  bool window_ran = false;
  for (;;) {
    drain();
    v = ExchangeWindow(
        wakes.empty() ? kNever : wakes.top().first,
        {-last_progress, -static_cast<int64_t>(done_count < n ? 1 : 0), -finish, err_time},
        window_ran);
    window_ran = true;
    const int64_t next = v[0], progress = -v[1], finish_all = -v[3], error_at = v[4];
    const bool all_done = v[2] == 0;
    if (error_at != kNever) {
      // The earliest error anywhere; every process gets its message (the
      // outcome is the same everywhere).
      std::vector<int64_t> key{err_time == error_at ? err_key : kNever};
      comm_->AllMin(&key);
      const std::vector<std::string> msgs = comm_->Exchange(std::vector<std::string>(
          static_cast<size_t>(comm_->size()),
          err_time == error_at && err_key == key[0] ? err_msg : std::string()));
      std::string msg;
      for (const std::string& m : msgs) msg = msg.empty() ? m : msg;
      res.status = Aborted(msg + "; collective aborted on all " + std::to_string(total) + " ranks");
      res.report = res.status.message() + "\n" + AsyncEventLines(comms, ids) + fault_report();
      res.end = Picoseconds(error_at);
      break;
    }
    if (all_done) {
      res.end = Picoseconds(finish_all);
      break;
    }
    const int64_t deadline = progress + timeout;
    if (next == kNever || next > deadline) {
      // No rank anywhere progressed for the timeout: the watchdog's verdict,
      // at the deadline, with every process's stuck ranks.
      engine.SetClock(Picoseconds(deadline));
      clock_after = deadline;
      std::vector<uint64_t> stuck_bits((static_cast<size_t>(total) + 63) / 64, 0);
      for (size_t i = 0; i < n; ++i) {
        if (colls[i]->done()) continue;
        const int r = ids[i];
        stuck_bits[static_cast<size_t>(r) / 64] |= uint64_t{1} << (r % 64);
      }
      comm_->AllOr(&stuck_bits);
      for (int r = 0; r < total; ++r) {
        if ((stuck_bits[static_cast<size_t>(r) / 64] >> (r % 64)) & 1) res.stuck_ranks.push_back(r);
      }
      char head[256];
      std::snprintf(
          head, sizeof(head),
          "watchdog: no progress on any rank for %.6f s; %zu of %d ranks stuck%s\n",
          Picoseconds(deadline - progress).seconds(), res.stuck_ranks.size(), total,
          next == kNever ? " (the simulator has no event left: nothing can ever complete)" : "");
      res.hung = true;
      res.report =
          head + HangReport(comms, colls, ids, Picoseconds(deadline), to_world, &res.stuck_qps);
      res.status = DeadlineExceeded(res.report);
      res.end = Picoseconds(deadline);
      break;
    }
    // The window of the earliest event, on the grid of q, cut at the
    // deadline (the next agreement says whether anyone progressed by then).
    const int64_t from = next - next % q;
    const int64_t until = std::min(from + q - 1, deadline);
    for (;;) {
      drain();
      int64_t stop_at = until;
      if (!wakes.empty()) stop_at = std::min(stop_at, wakes.top().first);
      fabric.TakeCompletionFlag();
      engine.Run(Picoseconds(stop_at));
      fabric.TakeCompletionFlag();
      while (!wakes.empty() && wakes.top().first <= engine.Now().ps()) {
        const size_t i = static_cast<size_t>(wakes.top().second);
        if (wake_set[i] == wakes.top().first) wake_set[i] = kNever;
        wakes.pop();
        if (!queued[i]) {
          queued[i] = 1;
          ready.push_back(static_cast<int>(i));
        }
      }
      if (ready.empty() && engine.Now().ps() >= until) break;
    }
    clock_after = until + 1;
  }
  for (Communicator* c : comms) c->cq().SetNotify(nullptr);
  // The next collective starts at the next window boundary, the same for
  // every process.
  if (!res.hung) engine.SetClock(Picoseconds(clock_after));
  return res;
}

}  // namespace fathom::transport::worlds
