#include "transport/worlds/verbs_world.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <thread>

#include "transport/bootstrap/endpoints.h"

namespace fathom::transport::worlds {

using namespace fathom::transport::coll;  // NOLINT: the worlds run the collectives

namespace {

// The abort reason other ranks print: the first line of a completion error,
// or the watchdog's headline and its per-QP lines. Kept short (one bootstrap
// message, one log line each).
std::string AbortReason(const RunOutcome& r) {
  const std::string& text = r.report.empty() ? r.status.message() : r.report;
  if (!r.hung) return text.substr(0, text.find('\n'));
  std::string out;
  size_t pos = 0;
  while (pos < text.size() && out.size() < 2048) {
    const size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end == std::string::npos ? end : end - pos);
    if (pos == 0 || line.find(": no completion for ") != std::string::npos) {
      out += (out.empty() ? "" : "; ") + line;
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<VerbsWorld>> VerbsWorld::Create(const VerbsWorldOptions& options) {
  if (options.nranks < 1 || options.rank < 0 || options.rank >= options.nranks) {
    return InvalidArgument("VerbsWorld: rank " + std::to_string(options.rank) + " of " +
                           std::to_string(options.nranks) + " ranks");
  }
  std::unique_ptr<VerbsWorld> w(new VerbsWorld(options));
  verbs::DeviceOptions d = options.device;
  d.rank = options.rank;
  FATHOM_ASSIGN_OR_RETURN(w->device_, verbs::OpenDevice(d));
  if (!options.verbs_faults.empty()) {
    // The events mode sleeps on the backend CQ's channel, which a wrapper
    // hides; busy polling sees what the wrapper releases.
    if (d.cq_mode == verbs::CqMode::kEvents) {
      return InvalidArgument("verbs faults need --cq-mode poll (not events)");
    }
    std::vector<faulty::VerbsFault> plan = options.verbs_faults;
    for (faulty::VerbsFault& f : plan) {
      faulty::PlanError e;
      if (!faulty::Finish(&f, options.nranks, &e)) {
        return InvalidArgument("--verbs-fault '" + f.text + "': '" + e.token + "': " + e.message);
      }
    }
    faulty::FaultEnv env;
    env.clock = &w->clock_;
    env.origin = w->clock_.Now();
    w->injector_ = std::make_unique<faulty::FaultInjector>(std::move(plan), std::move(env));
    w->device_ = w->injector_->Wrap(std::move(w->device_), options.rank);
  }
  if (options.rank == 0) {
    bootstrap::RootOptions ro;
    ro.bind_address = options.bootstrap_address;
    ro.port = options.bootstrap_port;
    ro.world_size = options.nranks;
    ro.token = options.token;
    ro.accept_timeout = options.bootstrap_timeout;
    FATHOM_ASSIGN_OR_RETURN(w->root_, bootstrap::Root::Start(ro));
  }
  bootstrap::RankOptions ro;
  ro.root_address = options.bootstrap_address;
  ro.root_port = options.bootstrap_port;
  ro.rank = options.rank;
  ro.world_size = options.nranks;
  ro.token = options.token;
  ro.connect_timeout = options.bootstrap_timeout;
  ro.op_timeout = options.bootstrap_timeout + options.watchdog * 2;
  FATHOM_ASSIGN_OR_RETURN(w->boot_, bootstrap::Rank::Connect(ro));
  FATHOM_ASSIGN_OR_RETURN(
      w->comm_, Communicator::Create(w->device_.get(), options.rank, options.nranks, options.comm));
  if (Status s = w->Connect(); !s.ok()) {
    (void)w->boot_->Abort("rank " + std::to_string(options.rank) +
                          " could not connect: " + s.message());
    return s;
  }
  // Connect() ended with a barrier: every rank reads its clock here.
  w->trace_origin_ = w->clock_.Now();
  if (d.cq_mode == verbs::CqMode::kEvents) {
    w->clock_.set_events_cq(dynamic_cast<verbs::VerbsCompletionQueue*>(&w->comm_->cq()));
  }
  DriverOptions dopt;
  dopt.timeout = options.watchdog;
  dopt.poll_all = true;
  if (const faulty::FaultInjector* injector = w->injector_.get()) {
    dopt.fabric_evidence = [injector](const std::vector<StuckQp>&) { return injector->Report(); };
  }
  bootstrap::Rank* boot = w->boot_.get();
  dopt.abort_check = [boot] { return boot->PollAbort(); };
  w->driver_ = std::make_unique<Driver>(&w->clock_, std::vector<Communicator*>{w->comm_.get()},
                                        std::move(dopt));
  return w;
}

// One round: every rank sends one record with its port facts and, per QP,
// the peer, channel, QPN, PSN and the staging slots the peer writes into.
Status VerbsWorld::Connect() {
  const int me = options_.rank;
  EndpointInfo port;
  port.rank = me;
  const std::vector<ConnRecord> mine = comm_->LocalRecords();
  if (!mine.empty()) port = mine.front().endpoint;
  proto::EndpointRecord record = bootstrap::MakeEndpointRecord(port);
  record.set_rank(me);
  if (mine.empty()) record.set_gid(std::string(16, '\0'));
  for (const ConnRecord& c : mine) {
    proto::QpRecord* q = record.add_qps();
    q->set_peer_rank(c.peer);
    q->set_qpn(c.endpoint.qpn);
    q->set_psn(c.endpoint.psn);
    q->set_channel(c.channel);
    q->mutable_buffer()->set_addr(c.staging.addr);
    q->mutable_buffer()->set_length(c.staging.length);
    q->mutable_buffer()->set_rkey(c.staging.rkey);
  }
  FATHOM_ASSIGN_OR_RETURN(auto all, boot_->ExchangeEndpoints(record));
  std::vector<ConnRecord> from_peers;
  for (const proto::EndpointRecord& r : all) {
    if (r.rank() == me) continue;
    int nth = 0;
    for (const proto::QpRecord& q : r.qps()) {
      if (q.peer_rank() != me) continue;
      ConnRecord c;
      c.rank = r.rank();
      c.peer = me;
      c.channel = q.channel();
      FATHOM_ASSIGN_OR_RETURN(c.endpoint, bootstrap::RemoteEndpoint(r, me, nth++));
      c.staging = {q.buffer().addr(), q.buffer().length(), q.buffer().rkey()};
      from_peers.push_back(c);
    }
  }
  FATHOM_RETURN_IF_ERROR(comm_->Connect(from_peers));
  // Every rank's receives are posted before anyone writes (no RNR at start).
  return boot_->Barrier();
}

bool VerbsWorld::PollingClock::Progress(Picoseconds until) {
  const Picoseconds left = until - Now();
  if (events_cq_ == nullptr || left <= Picoseconds(0)) {
    sched_yield();
    return true;
  }
  // DEADLINE_EXCEEDED (no event) is the normal way out; a real error of the
  // channel shows up as a stall the watchdog reports.
  (void)events_cq_->WaitForEvent(std::min(left, Picoseconds::FromMilliseconds(10)));
  return true;
}

RunOutcome VerbsWorld::Run(const CollSpec& spec, DataType type, RedOp op, const void* in, void* out,
                           Trace* trace) {
  RankCollective coll(comm_.get(), spec, type, op, in, out, trace);
  RunOutcome r = driver_->Run({&coll});
  if (r.status.ok()) return r;
  if (!r.remote_abort) (void)boot_->Abort(AbortReason(r));
  // Every rank tells the root where it stood, so that rank 0 prints the
  // whole hang in one place (NCCL leaves the user to collect N logs), and
  // sends its steps when this run was traced, for rank 0's one timeline.
  std::string steps;
  if (trace != nullptr) {
    steps = EncodeRankTrace(OwnSteps(*trace), kMaxReportTraceBytes, &reported_trace_events_);
  }
  (void)boot_->Report(r.report.substr(0, kMaxReportBytes), steps);
  if (root_ != nullptr) {
    const std::string own = r.report;
    r.report += GatheredReports();
    r.report += WorldCulprit(own);
  }
  return r;
}

std::string VerbsWorld::WorldCulprit(const std::string& own) const {
  // Each rank's watchdog sees only its own QPs. A QP in ERR with sends
  // outstanding wins: they can never complete (their flushes did not
  // surface), so the others wait behind it — and a rank that learnt of the
  // abort before its own watchdog fired lists it without naming a culprit.
  // Otherwise the lowest rank's own culprit line (driver.cc MarkCulprit).
  // "" when no rank's watchdog found a hang.
  std::vector<std::pair<int, const std::string*>> views = {{options_.rank, &own}};
  for (const proto::Report& rep : failure_reports_) {
    if (rep.rank() != options_.rank) views.emplace_back(rep.rank(), &rep.text());
  }
  std::sort(views.begin(), views.end());
  // Only for a hang some rank's watchdog found: an error that surfaced
  // names its QP already.
  bool hung = false;
  for (const auto& [rank, text] : views) {
    hung = hung || text->find("watchdog: no progress") != std::string::npos;
  }
  if (!hung) return "";
  static const std::regex in_err(
      R"(qp to rank (\d+) channel (\d+) qpn (0x[0-9a-f]+) state IBV_QPS_ERR: ([1-9]\d*) send WRs)");
  for (const auto& [rank, text] : views) {
    std::smatch m;
    if (std::regex_search(*text, m, in_err)) {
      return "watchdog (all ranks): culprit rank " + std::to_string(rank) + " -> rank " +
             m[1].str() + " qpn " + m[3].str() + " channel " + m[2].str() + ": " + m[4].str() +
             " send WRs outstanding in IBV_QPS_ERR, which never complete (their flushes did "
             "not surface); the other stuck ranks wait behind it\n";
    }
  }
  static constexpr std::string_view kMark = "watchdog: culprit ";
  for (const auto& [rank, text] : views) {
    const size_t at = text->find(kMark);
    if (at == std::string::npos) continue;
    const size_t end = text->find('\n', at);
    return "watchdog (all ranks): culprit " +
           text->substr(at + kMark.size(),
                        end == std::string::npos ? end : end - at - kMark.size()) +
           "\n";
  }
  return "";
}

RankTrace VerbsWorld::OwnSteps(const Trace& trace) const {
  RankTrace mine;
  mine.rank = options_.rank;
  mine.origin = trace_origin_;
  mine.total_events = trace.events.size();
  mine.events = trace.events;
  return mine;
}

StatusOr<std::vector<RankTrace>> VerbsWorld::TracesAfterFailure(const Trace& trace) const {
  if (root_ == nullptr) {
    return FailedPrecondition("VerbsWorld::TracesAfterFailure: rank " +
                              std::to_string(options_.rank) + " is not rank 0");
  }
  std::vector<RankTrace> out = {OwnSteps(trace)};
  for (const proto::Report& r : failure_reports_) {
    if (r.rank() == options_.rank || r.trace().empty()) continue;
    auto t = DecodeRankTrace(r.trace());
    if (!t.ok()) {
      return t.status().WithContext("VerbsWorld::TracesAfterFailure: the steps of rank " +
                                    std::to_string(r.rank()));
    }
    if (t->rank != r.rank()) {
      return InvalidArgument("VerbsWorld::TracesAfterFailure: rank " + std::to_string(r.rank()) +
                             " sent the steps of rank " + std::to_string(t->rank));
    }
    out.push_back(std::move(t).value());
  }
  return out;
}

std::string VerbsWorld::GatheredReports() {
  // The others learn of the abort at their next check (a millisecond) and
  // report at once; a rank whose process died never does.
  const Picoseconds wait = std::min(options_.watchdog, Picoseconds::FromSeconds(5));
  failure_reports_ = root_->WaitReports(options_.nranks, wait);
  const auto& reports = failure_reports_;
  std::string out = "# every rank's view, gathered on rank 0 (" + std::to_string(reports.size()) +
                    " of " + std::to_string(options_.nranks) + " reported):\n";
  size_t next = 0;
  for (int rank = 0; rank < options_.nranks; ++rank) {
    if (rank == options_.rank) {
      // Its own report is the text above.
      out += "## rank " + std::to_string(rank) + ": above\n";
      if (next < reports.size() && reports[next].rank() == rank) ++next;
    } else if (next < reports.size() && reports[next].rank() == rank) {
      std::string text = reports[next++].text();
      if (!text.empty() && text.back() != '\n') text += '\n';
      // Indented under its rank, line by line.
      out += "## rank " + std::to_string(rank) + "\n";
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t end = text.find('\n', pos);
        out += "  " + text.substr(pos, end - pos + 1);
        pos = end + 1;
      }
    } else {
      out += "## rank " + std::to_string(rank) + ": no report within " +
             std::to_string(wait.seconds()) + " s (its process may be gone)\n";
    }
  }
  return out;
}

StatusOr<std::vector<RankTrace>> VerbsWorld::GatherTrace(const Trace& trace, size_t budget_bytes,
                                                         size_t* sent) {
  const int me = options_.rank;
  RankTrace mine = OwnSteps(trace);
  // Rank 0 keeps its own events: it sends nothing, and the others' share of
  // every round grows.
  std::string payload;
  size_t kept = mine.events.size();
  if (me != 0) {
    const size_t share = budget_bytes / static_cast<size_t>(std::max(1, options_.nranks - 1));
    payload = EncodeRankTrace(mine, share, &kept);
  }
  if (sent != nullptr) *sent = kept;
  FATHOM_ASSIGN_OR_RETURN(auto all, bootstrap::AllGatherChunked(*boot_, payload));
  std::vector<RankTrace> out;
  if (me != 0) return out;
  out.push_back(std::move(mine));
  for (size_t r = 1; r < all.size(); ++r) {
    auto t = DecodeRankTrace(all[r]);
    if (!t.ok()) {
      return t.status().WithContext("VerbsWorld::GatherTrace: the trace of rank " +
                                    std::to_string(r));
    }
    if (t->rank != static_cast<int>(r)) {
      return InvalidArgument("VerbsWorld::GatherTrace: rank " + std::to_string(r) +
                             " sent a trace of rank " + std::to_string(t->rank));
    }
    out.push_back(std::move(t).value());
  }
  return out;
}

Status VerbsWorld::Finish() {
  if (finished_) return Status::Ok();
  finished_ = true;
  driver_.reset();
  boot_.reset();  // Goodbye (unless aborted)
  if (root_) {
    Status s = root_->Wait(options_.bootstrap_timeout);
    // Wait() returns as soon as the root has queued its abort notices; give
    // its I/O thread a moment to send them before the destructor stops it,
    // so the other ranks learn the reason rather than just losing the root.
    if (!s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    root_.reset();
    return s;
  }
  return Status::Ok();
}

VerbsWorld::~VerbsWorld() {
  (void)Finish();
  // QPs, CQ and registrations before the device (transport.h).
  comm_.reset();
  device_.reset();
}

}  // namespace fathom::transport::worlds
