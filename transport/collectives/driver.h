// Driver: runs the ranks of a collective to completion, and the watchdog.
//
// One thread drives every rank it holds (all ranks in the simulator, one
// per process over verbs): a ready list fed by the CQ notifications
// (CompletionQueue::SetNotify) names the ranks to poll; when it is empty the
// driver lets the Clock progress (the simulator runs events until the next
// completion; verbs returns at once and the driver polls every rank).
//
// Watchdog: progress is any completion or any step executed on any rank.
// When none happens for `timeout` on the clock (wall time over verbs,
// virtual time in the simulator), or the simulator has nothing left to run,
// the run stops with a report: each stuck rank's collective, stream and
// step, the peers it waits for, per QP the outstanding WRs and the last
// completion status, one NCCL-like line per stuck QP, and (simulator) the
// fabric evidence a callback supplies. A completion error on any rank aborts
// every rank with the status and the peer, as NCCL does: here, every rank
// this driver holds; across processes, the caller tells the others (the
// bootstrap's abort) and their drivers learn it through abort_check.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "transport/collectives/collective.h"

namespace fathom::transport::coll {

// A QP the watchdog reports on: who, to whom, which QP.
struct StuckQp {
  int rank = -1;
  int peer = -1;
  int channel = 0;
  uint32_t qpn = 0;
  int outstanding_sends = 0;
  int outstanding_recvs = 0;
  bool have_last = false;
  WcStatus last_status = WcStatus::kSuccess;
  // The QP the hang starts from: its sends do not complete, and its rank
  // waits behind no other stuck QP (the others wait behind it).
  bool culprit = false;
  // The QP is in ERR: its outstanding sends can never complete (their
  // flushes were lost, e.g. swallowed by the library, CASES.md 20).
  bool in_error = false;
};

struct DriverOptions {
  Picoseconds timeout = Picoseconds::FromSeconds(30);
  // Verbs: poll every rank each turn (no notifications needed).
  bool poll_all = false;
  // Simulator: text naming the links/ports whose drops touched these QPs.
  std::function<std::string(const std::vector<StuckQp>&)> fabric_evidence;
  // Verbs (one rank per process): asked between turns, at most once per
  // `abort_check_interval` on the clock, whether another rank gave up (the
  // bootstrap's abort notice). A non-OK status stops the run with it.
  std::function<Status()> abort_check;
  Picoseconds abort_check_interval = Picoseconds::FromMilliseconds(1);
};

struct RunOutcome {
  Status status;  // OK, ABORTED (completion error) or DEADLINE_EXCEEDED (hang)
  bool hung = false;
  bool remote_abort = false;  // stopped by abort_check (another rank's failure)
  std::string report;         // the watchdog's report (empty when OK)
  std::vector<StuckQp> stuck_qps;
  Picoseconds start, end;  // on the clock
  // hung: the ranks (Communicator::rank) whose collective had not finished
  // when the watchdog fired, ascending (`expect.stalled_ranks`).
  std::vector<int> stuck_ranks;
};

// One stuck rank's part of the watchdog's report (Driver::DescribeStuckRank):
// what a report merged from several processes needs (DistSimBackend).
struct StuckRankReport {
  std::string text;                     // its wait lines and its QPs' state lines
  std::vector<std::string> qp_lines;    // "rank a -> rank b qpn ...: no completion ..."
  std::vector<StuckQp> qps;             // its stuck QPs
  std::vector<Picoseconds> silent_for;  // parallel to qps
  std::vector<int> waits_for;           // the peers it waits for
};

class Driver {
 public:
  // Reports stay readable at 1024 ranks: the first ranks and QP lines in full.
  static constexpr int kMaxRanksInReport = 32;
  static constexpr int kMaxQpLines = 64;

  // Borrows the clock and communicators; installs CQ notifications.
  Driver(Clock* clock, std::vector<Communicator*> comms, DriverOptions options);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Runs one collective: colls[i] belongs to comms[i]. Returns when all are
  // done, on a completion error, or when the watchdog fires.
  RunOutcome Run(const std::vector<RankCollective*>& colls);

  // The report's part about `comm`'s rank, whose collective `coll` is not
  // done, at `now`: its wait and QPs (every QP line; the report keeps the
  // first kMaxQpLines over its ranks).
  // Stuck ranks' parts put together as the watchdog's report shows them:
  // the first kMaxRanksInReport ranks' text, then the first kMaxQpLines QP
  // lines; the stuck QPs go to `stuck`, and what MarkCulprit needs is kept.
  // WatchdogReport's, and a report merged from several processes'
  // (DistSimBackend).
  class ReportJoin {
   public:
    void Add(int rank, StuckRankReport part, std::vector<StuckQp>* stuck);
    // The ranks' text, "... N more stuck ranks", the QP lines.
    std::string Text() const;
    const std::vector<std::pair<int, std::vector<int>>>& waits_for() const { return waits_for_; }
    const std::vector<Picoseconds>& silent_for() const { return silent_for_; }

   private:
    std::string ranks_text_;
    std::string qp_lines_;
    int shown_ = 0;
    int qp_line_count_ = 0;
    std::vector<std::pair<int, std::vector<int>>> waits_for_;  // rank -> peers it waits for
    std::vector<Picoseconds> silent_for_;                      // parallel to the stuck QPs
  };
  static StuckRankReport DescribeStuckRank(Communicator& comm, RankCollective& coll,
                                           Picoseconds now);
  // Marks the culprit among stuck[first..] (StuckQp::culprit) and says it
  // in one line; `waits_for` is each stuck rank's awaited peers,
  // `silent_for` each stuck QP's time since its last completion.
  static std::string MarkCulprit(const std::vector<std::pair<int, std::vector<int>>>& waits_for,
                                 const std::vector<Picoseconds>& silent_for, size_t first,
                                 std::vector<StuckQp>* stuck);
  // The async events of `comm`'s device since the last call, as report
  // lines (one device's part of AsyncEventLines).
  static std::string AsyncEventLinesOf(Communicator& comm);

 private:
  // The stuck QPs of `comm` past each connection's first (several QPs per
  // connection, multi_qp.h), appended to the rank's part.
  static void AddMoreQps(Communicator& comm, Picoseconds now, StuckRankReport* part);
  // Drains every device's async events into report lines.
  std::string AsyncEventLines();
  // The watchdog's report: who waits where, the QPs' outstanding WRs and
  // last completions. `aborted`: not this watchdog's verdict but the state
  // the ranks driven here were in when another rank's abort stopped the run.
  std::string WatchdogReport(const std::vector<RankCollective*>& colls, Picoseconds stalled_for,
                             bool nothing_left, std::vector<StuckQp>* stuck, bool aborted = false);

  Clock* clock_;
  std::vector<Communicator*> comms_;
  DriverOptions options_;
  std::vector<int> ready_;
  std::vector<char> queued_;
};

}  // namespace fathom::transport::coll
