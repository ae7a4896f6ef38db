#include "transport/worlds/verbs_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "transport/collectives/report.h"

namespace fathom::transport::worlds {

using namespace fathom::transport::coll;  // NOLINT: the backend runs the collectives

std::string VerbsBackend::Where() const {
  return std::to_string(nranks()) + " ranks (one per process), rank " +
         std::to_string(world_->rank()) + " on " + world_->device_info().name + " (" +
         world_->device_info().gid_type + ", active_mtu " +
         std::to_string(world_->device_info().active_mtu) + ")" + PerNode();
}

std::string VerbsBackend::PerNode() const {
  // --ranks-per-node: say that the rings and trees are hierarchical, and
  // what carries a node's own hops (its device, QP to QP: rxe's loopback).
  const int g = world_->comm().options().gpus_per_server;
  if (g <= 1) return "";
  return ", " + std::to_string(g) +
         " ranks per node (hierarchical rings and trees; peers on a "
         "node QP to QP on its device)";
}

std::string VerbsBackend::WhereJson() const {
  return "\"device\":\"" + world_->device_info().name +
         "\",\"rank\":" + std::to_string(world_->rank());
}

std::vector<std::string> VerbsBackend::DeviceLines() {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  const auto& d = world_->device_info();
  const std::string mine =
      DeviceLine(world_->rank(), static_cast<int>(getpid()), host,
                 d.name + " port " + std::to_string(d.port) + " (" + d.gid_type + ", " +
                     d.link_layer + ", active_mtu " + std::to_string(d.active_mtu) + ")");
  auto all = world_->bootstrap().AllGather(mine);
  if (!all.ok()) return {mine};
  return *all;
}

BitsPerSecond VerbsBackend::link_bandwidth() {
  double g = world_->device_info().active_gbps;
  auto all = world_->bootstrap().AllGather(std::to_string(g));
  if (all.ok()) {
    for (const std::string& s : *all) g = std::min(g, std::atof(s.c_str()));
  }
  return BitsPerSecond(static_cast<int64_t>((g > 0 ? g : 10) * 1e9));
}

coll::RunOutcome VerbsBackend::Run(const coll::CollSpec& spec, coll::DataType type, coll::RedOp op,
                                   const std::vector<const void*>& in,
                                   const std::vector<void*>& out, coll::Trace* trace) {
  return world_->Run(spec, type, op, in.at(0), out.at(0), trace);
}

Status VerbsBackend::Combine(double* time_us, int64_t* wrong) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g %lld", *time_us, static_cast<long long>(*wrong));
  FATHOM_ASSIGN_OR_RETURN(auto all, world_->bootstrap().AllGather(buf));
  double sum = 0, lo = 0, hi = 0, first = 0;
  int64_t w = -1;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string& s = all[i];
    double rt = 0;
    long long rw = -1;
    if (std::sscanf(s.c_str(), "%lf %lld", &rt, &rw) != 2) {
      return InvalidArgument("fathom coll: malformed per-rank result '" + s + "'");
    }
    if (i == 0) first = lo = hi = rt;
    sum += rt;
    lo = std::min(lo, rt);
    hi = std::max(hi, rt);
    if (rw >= 0) w = (w < 0 ? 0 : w) + rw;
  }
  *time_us = average_ == 0   ? first
             : average_ == 2 ? lo
             : average_ == 3 ? hi
                             : sum / static_cast<double>(std::max<size_t>(1, all.size()));
  *wrong = w;
  return Status::Ok();
}

bool VerbsBackend::WriteTrace(const std::string& path, const coll::Trace& trace, bool failed) {
  const int me = world_->rank();
  const std::string own_path = path + "." + std::to_string(me);
  std::vector<std::string> notes = {kAlignmentNote};
  std::string why;
  if (failed) {
    // After a failure the bootstrap is usually aborted: then the gather
    // would only fail (or wait for ranks that will not come). The ranks
    // sent their steps with their reports instead.
    if (Status s = world_->bootstrap().PollAbort(); !s.ok()) why = s.message();
  }
  const RankTrace mine = world_->OwnSteps(trace);
  if (!why.empty() && me != 0) {
    // This rank's steps went to rank 0 with its report; all of them here.
    std::fprintf(stderr,
                 "fathom coll: rank %d: --trace: the run failed; %zu of %zu events went to "
                 "rank 0 with this rank's report, all of them are in %s\n",
                 me, world_->reported_trace_events(), trace.events.size(), own_path.c_str());
    notes.push_back("rank " + std::to_string(me) + "'s steps only, all of them; rank 0's " + path +
                    " has every rank's that reached it");
    return WriteTraceFile(own_path, MergedTraceJson({mine}, notes));
  }
  if (!why.empty()) {
    auto all = world_->TracesAfterFailure(trace);
    if (all.ok() && all->size() > 1) {
      notes.push_back("the run failed (" + why +
                      "); the other ranks sent their steps with their reports");
      for (const RankTrace& r : *all) {
        if (r.events.size() < r.total_events) {
          notes.push_back(
              "rank " + std::to_string(r.rank) + ": the first " + std::to_string(r.events.size()) +
              " of " + std::to_string(r.total_events) + " events; all of them are in " + path +
              "." + std::to_string(r.rank) + " on rank " + std::to_string(r.rank) + "'s host");
        }
      }
      if (all->size() < static_cast<size_t>(nranks())) {
        notes.push_back(std::to_string(nranks() - static_cast<int>(all->size())) +
                        " rank(s) sent no steps (their process may be gone)");
      }
      return WriteTraceFile(path, MergedTraceJson(*all, notes));
    }
    if (!all.ok()) why += "; " + all.status().message();
  }
  if (why.empty()) {
    size_t sent = 0;
    auto all = world_->GatherTrace(trace, kTraceGatherBudgetBytes, &sent);
    if (all.ok()) {
      bool ok = true;
      if (sent < trace.events.size()) {
        std::fprintf(stderr,
                     "fathom coll: rank %d: --trace: %zu of %zu events went to rank 0 (%zu "
                     "bytes per rank at most); all of them are in %s\n",
                     me, sent, trace.events.size(),
                     kTraceGatherBudgetBytes / static_cast<size_t>(std::max(1, nranks() - 1)),
                     own_path.c_str());
        if (!WriteTraceFile(own_path, MergedTraceJson({mine}, notes))) ok = false;
      }
      if (me != 0) return ok;
      for (const RankTrace& r : *all) {
        if (r.events.size() < r.total_events) {
          notes.push_back(
              "rank " + std::to_string(r.rank) + ": the first " + std::to_string(r.events.size()) +
              " of " + std::to_string(r.total_events) +
              " events (the gather's share per rank is full); all of them are in " + path + "." +
              std::to_string(r.rank) + " on rank " + std::to_string(r.rank) + "'s host");
          std::fprintf(stderr, "fathom coll: --trace %s: %s\n", path.c_str(), notes.back().c_str());
        }
      }
      return WriteTraceFile(path, MergedTraceJson(*all, notes)) && ok;
    }
    why = all.status().message();
  }
  const std::string where = me == 0 ? path : own_path;
  notes.push_back("rank " + std::to_string(me) +
                  "'s steps only: the ranks' traces could not be gathered (" + why +
                  "); rank 0 writes " + path + ", each other rank " + path +
                  ".<rank> on its own host, all on this timeline");
  std::fprintf(stderr,
               "fathom coll: rank %d: --trace: cannot gather every rank's steps on rank 0 "
               "(%s); wrote this rank's to %s\n",
               me, why.c_str(), where.c_str());
  return WriteTraceFile(where, MergedTraceJson({mine}, notes));
}

}  // namespace fathom::transport::worlds
