#include "transport/collectives/driver.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <utility>

#include "transport/wait.h"

namespace fathom::transport::coll {

Driver::Driver(Clock* clock, std::vector<Communicator*> comms, DriverOptions options)
    : clock_(clock), comms_(std::move(comms)), options_(std::move(options)) {
  queued_.assign(comms_.size(), 0);
  for (size_t i = 0; i < comms_.size(); ++i) {
    comms_[i]->cq().SetNotify([this, i] {
      if (!queued_[i]) {
        queued_[i] = 1;
        ready_.push_back(static_cast<int>(i));
      }
    });
  }
}

Driver::~Driver() {
  for (Communicator* c : comms_) c->cq().SetNotify(nullptr);
}

RunOutcome Driver::Run(const std::vector<RankCollective*>& colls) {
  RunOutcome out;
  out.start = clock_->Now();
  Picoseconds last_progress = out.start;
  auto fail = [&](Status s) {
    // NCCL reports the completion that broke the run; when this rank only
    // saw flushed WRs, another rank may hold the cause.
    if (s.message().find("IBV_WC_WR_FLUSH_ERR") != std::string::npos) {
      for (Communicator* c : comms_) {
        StatusOr<int> other = c->Poll(clock_->Now());
        if (!other.ok() &&
            other.status().message().find("IBV_WC_WR_FLUSH_ERR") == std::string::npos) {
          s = other.status();
          break;
        }
      }
    }
    // One rank per process (verbs): the caller tells the other ranks.
    out.status = Aborted(s.message() +
                         (comms_.size() == 1 && comms_[0]->nranks() > 1
                              ? "; collective aborted on rank " + std::to_string(comms_[0]->rank())
                              : "; collective aborted on all " + std::to_string(colls.size()) +
                                    " ranks driven here"));
    out.report = out.status.message() + "\n" + AsyncEventLines();
    out.end = clock_->Now();
    return out;
  };
  // Ranks finish only in Start() or Advance(); counting them there keeps a
  // turn of the loop O(ranks polled), not O(ranks) (1024 ranks in the sim).
  std::vector<uint8_t> finished(colls.size(), 0);
  size_t finished_count = 0;
  auto note_done = [&](size_t i) {
    if (finished[i] == 0 && colls[i]->done()) {
      finished[i] = 1;
      ++finished_count;
    }
  };
  for (size_t i = 0; i < colls.size(); ++i) {
    Status s = colls[i]->Start(clock_->Now());
    if (!s.ok()) return fail(s.WithContext("rank " + std::to_string(comms_[i]->rank())));
    note_done(i);
  }
  // Ranks whose reductions end at a time (RankCollective::next_wake): the
  // clock runs to the earliest, and that rank is advanced then.
  using Wake = std::pair<Picoseconds, int>;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<Wake>> wakes;
  std::vector<Picoseconds> wake_set(colls.size(), Picoseconds::Max());
  auto note_wake = [&](size_t i) {
    const Picoseconds w = colls[i]->next_wake();
    if (w != Picoseconds::Max() && w != wake_set[i]) {
      wake_set[i] = w;
      wakes.emplace(w, static_cast<int>(i));
    }
  };
  for (size_t i = 0; i < colls.size(); ++i) note_wake(i);
  std::vector<int> batch;
  Picoseconds next_abort_check = out.start;
  while (true) {
    bool progressed = false;
    if (options_.poll_all) {
      for (size_t i = 0; i < comms_.size(); ++i) {
        if (!queued_[i]) {
          queued_[i] = 1;
          ready_.push_back(static_cast<int>(i));
        }
      }
    }
    while (!ready_.empty()) {
      batch.swap(ready_);
      ready_.clear();
      for (int i : batch) {
        queued_[static_cast<size_t>(i)] = 0;
        const Picoseconds now = clock_->Now();
        StatusOr<int> n = comms_[static_cast<size_t>(i)]->Poll(now);
        if (!n.ok()) return fail(n.status());
        bool ran = false;
        Status s = colls[static_cast<size_t>(i)]->Advance(now, &ran);
        if (!s.ok()) return fail(s.WithContext("rank " + std::to_string(comms_[i]->rank())));
        note_done(static_cast<size_t>(i));
        note_wake(static_cast<size_t>(i));
        if (n.value() > 0 || ran) progressed = true;
      }
      batch.clear();
      if (options_.poll_all) break;
    }
    if (progressed) last_progress = clock_->Now();
    if (finished_count == colls.size()) break;
    if (options_.abort_check && clock_->Now() >= next_abort_check) {
      next_abort_check = clock_->Now() + options_.abort_check_interval;
      Status s = options_.abort_check();
      if (!s.ok()) {
        // Another rank gave up; say where this one stood (the step, its
        // QPs' outstanding WRs), which the report gathered on rank 0 shows.
        out.status = s;
        out.remote_abort = true;
        out.report = s.message() + "\n" +
                     WatchdogReport(colls, clock_->Now() - last_progress, false, &out.stuck_qps,
                                    /*aborted=*/true);
        out.end = clock_->Now();
        return out;
      }
    }
    const Picoseconds deadline = last_progress + options_.timeout;
    bool can = true;
    if (clock_->Now() < deadline && ready_.empty()) {
      can = clock_->Progress(wakes.empty() ? deadline : std::min(deadline, wakes.top().first));
    }
    while (!wakes.empty() && wakes.top().first <= clock_->Now()) {
      const size_t i = static_cast<size_t>(wakes.top().second);
      if (wake_set[i] == wakes.top().first) wake_set[i] = Picoseconds::Max();
      wakes.pop();
      if (!queued_[i]) {
        queued_[i] = 1;
        ready_.push_back(static_cast<int>(i));
      }
    }
    const bool nothing_left = !can && ready_.empty() && wakes.empty();
    if (nothing_left || (clock_->Now() >= deadline && ready_.empty() && !options_.poll_all) ||
        (options_.poll_all && clock_->Now() >= deadline)) {
      out.hung = true;
      for (size_t i = 0; i < colls.size(); ++i) {
        if (!colls[i]->done()) out.stuck_ranks.push_back(comms_[i]->rank());
      }
      std::sort(out.stuck_ranks.begin(), out.stuck_ranks.end());
      out.report =
          WatchdogReport(colls, clock_->Now() - last_progress, nothing_left, &out.stuck_qps);
      out.status = DeadlineExceeded(out.report);
      out.end = clock_->Now();
      return out;
    }
  }
  out.end = clock_->Now();
  return out;
}

std::string Driver::WatchdogReport(const std::vector<RankCollective*>& colls,
                                   Picoseconds stalled_for, bool nothing_left,
                                   std::vector<StuckQp>* stuck, bool aborted) {
  std::string r;
  char buf[512];
  int stuck_ranks = 0;
  for (RankCollective* c : colls) stuck_ranks += c->done() ? 0 : 1;
  if (aborted) {
    const std::string who = comms_.size() == 1 ? "rank " + std::to_string(comms_[0]->rank())
                                               : std::to_string(comms_.size()) + " ranks";
    std::snprintf(buf, sizeof(buf), "%s when the run was aborted: last progress %.6f s before\n",
                  who.c_str(), stalled_for.seconds());
  } else if (comms_.size() == 1 && comms_[0]->nranks() > 1) {
    // One rank per process (verbs): the other ranks' watchdogs speak for them.
    std::snprintf(buf, sizeof(buf),
                  "watchdog: no progress on rank %d (of %d, one per process) for %.6f s\n",
                  comms_[0]->rank(), comms_[0]->nranks(), stalled_for.seconds());
  } else {
    std::snprintf(
        buf, sizeof(buf), "watchdog: no progress on any rank for %.6f s; %d of %zu ranks stuck%s\n",
        stalled_for.seconds(), stuck_ranks, colls.size(),
        nothing_left ? " (the simulator has no event left: nothing can ever complete)" : "");
  }
  r += buf;
  const Picoseconds now = clock_->Now();
  const size_t first_stuck = stuck->size();
  ReportJoin join;
  for (size_t i = 0; i < colls.size(); ++i) {
    if (colls[i]->done()) continue;
    join.Add(comms_[i]->rank(), DescribeStuckRank(*comms_[i], *colls[i], now), stuck);
  }
  r += join.Text();
  if (!aborted) r += MarkCulprit(join.waits_for(), join.silent_for(), first_stuck, stuck);
  r += AsyncEventLines();
  if (options_.fabric_evidence) r += options_.fabric_evidence(*stuck);
  return r;
}

void Driver::ReportJoin::Add(int rank, StuckRankReport part, std::vector<StuckQp>* stuck) {
  waits_for_.emplace_back(rank, std::move(part.waits_for));
  if (shown_ < kMaxRanksInReport) ranks_text_ += part.text;
  for (const std::string& l : part.qp_lines) {
    if (qp_line_count_ >= kMaxQpLines) break;
    qp_lines_ += l;
    ++qp_line_count_;
  }
  stuck->insert(stuck->end(), part.qps.begin(), part.qps.end());
  silent_for_.insert(silent_for_.end(), part.silent_for.begin(), part.silent_for.end());
  ++shown_;
}

std::string Driver::ReportJoin::Text() const {
  std::string r = ranks_text_;
  if (shown_ > kMaxRanksInReport) {
    r += "... " + std::to_string(shown_ - kMaxRanksInReport) + " more stuck ranks\n";
  }
  return r + qp_lines_;
}

StuckRankReport Driver::DescribeStuckRank(Communicator& comm, RankCollective& coll,
                                          Picoseconds now) {
  StuckRankReport part;
  char buf[512];
  const auto waits = coll.DescribeWait(&part.waits_for);
  for (const auto& w : waits) part.text += "rank " + std::to_string(comm.rank()) + ": " + w + "\n";
  for (Conn* c : comm.conns()) {
    const int os = c->qp->outstanding_sends();
    bool waited = false;
    for (int p : part.waits_for) waited = waited || p == c->peer;
    if (os == 0 && !waited) continue;
    StuckQp q{
        comm.rank(),  c->peer,       c->channel, c->qp->qp_num(), os, c->qp->outstanding_recvs(),
        c->have_last, c->last.status};
    q.in_error = c->qp->state() == QpState::kErr;
    part.qps.push_back(q);
    part.silent_for.push_back(c->have_last ? now - c->last_completion_time : now);
    const std::string last =
        c->have_last ? std::string(WcStatusName(c->last.status)) : std::string("none");
    std::snprintf(buf, sizeof(buf),
                  "  qp to rank %d channel %d qpn 0x%x state %s: %d send WRs and %d recv "
                  "WRs outstanding; last completion %s\n",
                  c->peer, c->channel, c->qp->qp_num(),
                  std::string(QpStateName(c->qp->state())).c_str(), os, c->qp->outstanding_recvs(),
                  c->have_last ? DescribeCompletion(c->last).c_str() : "none");
    part.text += buf;
    if (os > 0) {
      const Picoseconds since = c->have_last ? now - c->last_completion_time : now;
      std::snprintf(buf, sizeof(buf),
                    "rank %d -> rank %d qpn 0x%x: no completion for %.6f s (outstanding %d "
                    "WRs, last status %s)\n",
                    comm.rank(), c->peer, c->qp->qp_num(), since.seconds(), os, last.c_str());
      part.qp_lines.push_back(buf);
    }
  }
  AddMoreQps(comm, now, &part);
  return part;
}

void Driver::AddMoreQps(Communicator& comm, Picoseconds now, StuckRankReport* part) {
  // A connection's QPs past the first (multi_qp.h) hash onto paths of their
  // own: each with sends that do not complete is a stuck QP of its own, for
  // the culprit and the fabric's evidence. Silence is the connection's.
  char buf[256];
  for (Conn* c : comm.conns()) {
    for (int k = 1; k < c->nqps(); ++k) {
      QueuePair& qp = c->qp_at(k);
      const int os = qp.outstanding_sends();
      if (os == 0) continue;
      StuckQp q{comm.rank(),  c->peer,       c->channel, qp.qp_num(), os, qp.outstanding_recvs(),
                c->have_last, c->last.status};
      q.in_error = qp.state() == QpState::kErr;
      part->qps.push_back(q);
      const Picoseconds since = c->have_last ? now - c->last_completion_time : now;
      part->silent_for.push_back(since);
      std::snprintf(buf, sizeof(buf),
                    "rank %d -> rank %d qpn 0x%x (QP %d of its connection): no completion for "
                    "%.6f s (outstanding %d WRs)\n",
                    comm.rank(), c->peer, qp.qp_num(), k, since.seconds(), os);
      part->qp_lines.push_back(buf);
    }
  }
}

std::string Driver::MarkCulprit(const std::vector<std::pair<int, std::vector<int>>>& waits_for,
                                const std::vector<Picoseconds>& silent_for, size_t first,
                                std::vector<StuckQp>* stuck) {
  // Wait-for: a rank waits behind a peer whose QP toward it has sends that
  // do not complete. The culprit is a QP with such sends whose own rank
  // waits behind no such QP: nobody holds it up, so the hang starts there
  // (in a ring, every other rank waits behind it, directly or in turn).
  // Among several, the one silent longest; when every candidate is itself
  // held up (a cycle), the one silent longest of all.
  auto sending = [&](int rank, int peer) {
    for (size_t k = first; k < stuck->size(); ++k) {
      const StuckQp& q = (*stuck)[k];
      if (q.rank == rank && q.peer == peer && q.outstanding_sends > 0) return true;
    }
    return false;
  };
  auto held_up = [&](int rank) {
    for (const auto& [r, peers] : waits_for) {
      if (r != rank) continue;
      for (int p : peers) {
        if (sending(p, rank)) return true;
      }
    }
    return false;
  };
  // A QP in ERR with sends outstanding comes first: those sends can never
  // complete, so in a cycle (a two-rank ring is always one) it is where the
  // hang starts, whichever QP has been silent longest.
  size_t best = stuck->size();
  bool best_free = false;
  bool best_err = false;
  for (size_t k = first; k < stuck->size(); ++k) {
    const StuckQp& q = (*stuck)[k];
    if (q.outstanding_sends == 0) continue;
    const bool free = !held_up(q.rank);
    const Picoseconds silent = silent_for[k - first];
    const bool better =
        best == stuck->size() || (q.in_error && !best_err) ||
        (q.in_error == best_err &&
         ((free && !best_free) || (free == best_free && silent > silent_for[best - first])));
    if (better) {
      best = k;
      best_free = free;
      best_err = q.in_error;
    }
  }
  if (best == stuck->size()) return "";
  StuckQp& q = (*stuck)[best];
  q.culprit = true;
  const std::string why =
      best_err    ? "; it is in IBV_QPS_ERR, so they never will (their flushes did not surface)"
      : best_free ? "; no stuck QP holds rank " + std::to_string(q.rank) +
                        " up: the other stuck ranks wait behind it"
                  : "; every stuck QP waits behind another (a cycle): this one has been silent "
                    "longest";
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "watchdog: culprit rank %d -> rank %d qpn 0x%x channel %d: %d send WRs without a "
                "completion for %.6f s%s\n",
                q.rank, q.peer, q.qpn, q.channel, q.outstanding_sends,
                silent_for[best - first].seconds(), why.c_str());
  return buf;
}

std::string Driver::AsyncEventLines() {
  // The events a device raised during the run (a port that went down, a QP
  // that went fatal) are often the cause of the hang: say them, the way
  // NCCL logs "NET/IB : Got async event : port error" (CASES.md 9, 20).
  std::string r;
  std::vector<Device*> seen;
  for (Communicator* c : comms_) {
    Device* d = &c->device();
    if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;
    seen.push_back(d);
    r += AsyncEventLinesOf(*c);
  }
  return r;
}

std::string Driver::AsyncEventLinesOf(Communicator& comm) {
  std::string r;
  for (const AsyncEvent& e : comm.device().TakeAsyncEvents()) {
    r += "rank " + std::to_string(comm.rank()) + ": async event " + e.type;
    if (!e.detail.empty()) r += " (" + e.detail + ")";
    r += "\n";
  }
  return r;
}

}  // namespace fathom::transport::coll
