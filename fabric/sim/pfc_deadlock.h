// PFC deadlock detection (CASES.md 17): lossless queues that pause each
// other in a cycle never drain, whatever the hosts do. A PAUSEd egress
// queue (port P, class c) waits for the far end's ingress account of class
// c to fall below XON; the bytes in that account sit in the far end's
// egress queues; if one of those is itself PAUSEd, P waits on it. A cycle
// of such waits is a cyclic buffer dependency: once every queue on it is
// paused, none can send again (Hu et al., "Deadlocks in Datacenter
// Networks: Why Do They Form, and How to Avoid Them", HotNets 2016; Shpiner
// et al., "Unlocking Credit Loop Deadlock", HotNets 2016).
//
// The detector takes snapshots of the waits (from the ports' PFC state,
// through a callback the caller provides) and finds a cycle among them; a
// cycle whose queues have all been paused without a break for at least the
// persistence time is a deadlock (congestion can close a cycle for a
// moment, but then XON soon breaks it; in a deadlock the PAUSE refreshes
// never stop). It owns its snapshots and findings; the Engine and
// the ports belong to the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "base/units.h"
#include "fabric/sim/engine.h"

namespace fathom::sim {

class Port;

// One PAUSEd egress queue and the far end's egress ports holding the bytes
// of the account that pauses it (the same class).
struct PfcWait {
  Port* paused;
  int tc;
  std::vector<Port*> holders;
  Picoseconds since;  // paused without a break since
};

// A queue: (egress port, class).
using PfcQueue = std::pair<Port*, int>;

// A cycle of waits among `waits`: each queue waits on the next, the last on
// the first. Empty when there is none. Deterministic: the cycle found first
// from the waits in their order, rotated to start at its first queue in
// that order.
std::vector<PfcQueue> FindPfcCycle(const std::vector<PfcWait>& waits);

class PfcDeadlockDetector {
 public:
  using Snapshot = std::function<std::vector<PfcWait>()>;
  // Checks every `interval` (engine events while others are pending) and
  // on Check(); a cycle of queues all paused for `persist` is a deadlock.
  PfcDeadlockDetector(Engine* engine, Snapshot snapshot, Picoseconds interval, Picoseconds persist);
  PfcDeadlockDetector(const PfcDeadlockDetector&) = delete;
  PfcDeadlockDetector& operator=(const PfcDeadlockDetector&) = delete;

  void Start();
  // Stops rescheduling when no more than `n` events are pending (the
  // other periodic checks of the run: with nothing else pending the fabric
  // is idle). Default 0.
  void set_idle_pending(size_t n) { idle_pending_ = n; }
  // Looks for a cycle now.
  void Check();
  // Declares a deadlock if `waits`, a snapshot taken at `at`, hold a cycle
  // of queues all paused for the persistence time (Check's decision).
  void Decide(Picoseconds at, const std::vector<PfcWait>& waits);

  // Deferred checks, for a distributed run (fabric/parallel/): the waits
  // span every process's ports, so a check event only calls `record(now)`
  // (each process notes its ports' part) and the run decides later, at the
  // window's end, from every process's parts (Decide), and then schedules
  // the next check (ResumeDeferred), one interval later, unless a deadlock
  // was declared: the checks run as in one process, but for the idle stop
  // (the run sees when only periodic events are pending). Every process
  // runs every check event (kind kUser, component kCheckComponent). Before
  // Start.
  static constexpr uint32_t kCheckComponent = 0;
  void set_deferred(std::function<void(Picoseconds now)> record) { record_ = std::move(record); }
  // After the deferred checks of a window were decided: the next check.
  void ResumeDeferred();
  // Whether a check event is pending.
  bool scheduled() const { return scheduled_; }
  // Deferred: the times of the check events run.
  const std::vector<int64_t>& check_event_times() const { return check_event_times_; }

  bool deadlocked() const { return !deadlock_.empty(); }
  // The deadlock's cycle (empty: none) and when it was declared.
  const std::vector<PfcQueue>& cycle() const { return deadlock_; }
  Picoseconds declared_at() const { return declared_at_; }
  // When the cycle it declared closed (its last queue paused).
  Picoseconds first_seen() const { return first_seen_; }
  uint64_t checks() const { return checks_; }

 private:
  static void OnCheck(void* self, uint64_t);
  Engine* engine_;
  size_t idle_pending_ = 0;
  Snapshot snapshot_;
  Picoseconds interval_;
  Picoseconds persist_;
  Picoseconds first_seen_ = Picoseconds::Max();
  std::vector<PfcQueue> deadlock_;
  Picoseconds declared_at_ = Picoseconds::Max();
  uint64_t checks_ = 0;
  std::function<void(Picoseconds)> record_;
  bool scheduled_ = false;
  std::vector<int64_t> check_event_times_;
};

}  // namespace fathom::sim
