// The PFC field cases on a running Network (issue 26, CASES.md 16-17): the
// switches' PFC watchdog wired to the ports' PFC (fabric/sim/pfc.h), the
// PFC deadlock detector fed from the ports' pause state and the switches'
// ingress accounts, PFC storms from a host's NIC (the pfc_storm fault),
// and the report of what PFC did: PAUSE frames per tier, watchdog events,
// the deadlock's cycle of ports.
//
// Ownership: PfcField owns the watchdog and the detector; the Network must
// outlive it, and it must outlive the run. One thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/sim/network.h"
#include "fabric/sim/pfc_deadlock.h"
#include "fabric/sim/pfc_watchdog.h"
#include "proto/scenario.pb.h"
#include "proto/yaml_loader.h"

namespace fathom::sim {

struct PfcFieldOptions {
  // The lossless classes (QosConfig::lossless_mask()); 0: nothing to do.
  uint8_t lossless = 0;
  // Every switch egress port watches each lossless class (none: no watchdog).
  std::optional<PfcWatchdogConfig> watchdog;
  // The deadlock check: every `deadlock_interval`, a cycle of queues all
  // paused for `deadlock_persist`. 2 ms is six 100 Gb/s max-quanta PAUSEs
  // (65535 x 512 bit times = 335 us): only refreshes keep a queue paused so
  // long, and in a cycle only a deadlock refreshes them all.
  bool detect_deadlock = true;
  Picoseconds deadlock_interval = Picoseconds::FromMilliseconds(1);
  Picoseconds deadlock_persist = Picoseconds::FromMilliseconds(2);
};

// How a distributed run (fabric/parallel/, issue 30) splits the PFC field:
// which switches this process simulates, and a collective that hands every
// process's bytes (by rank) to every process.
struct PfcFieldSplit {
  std::function<bool(int32_t node)> owns;
  std::function<std::vector<std::string>(const std::string& mine)> all_gather;
};

class PfcField {
 public:
  // Nothing to do (no watchdog, no check) without a lossless class.
  PfcField(Network* net, const PfcFieldOptions& options);
  ~PfcField();
  PfcField(const PfcField&) = delete;
  PfcField& operator=(const PfcField&) = delete;

  // Starts the watchdog's polls and the deadlock checks.
  void Start();
  // A storm: from `start`, host rank `host`'s NIC sends PAUSE for
  // `priority` (max quanta, refreshed) until `end` (Max: to the end of the
  // run). Schedules the events now.
  void Storm(int32_t host, int priority, Picoseconds start, Picoseconds end);
  // Checks for a deadlock once more (the end of the run). Split: a
  // collective, and it gathers every process's watchdog for the report.
  void Finish();

  // Splits the field across processes (before Start; for the canonical
  // order): the watchdog watches this process's switches and polls them
  // switch by switch (PfcWatchdog::set_per_node_polls); the deadlock check
  // defers (PfcDeadlockDetector::set_deferred): each check event notes the
  // paused queues of this process's ports and the bytes its switches hold
  // for each paused upstream, and OnWindow decides from every process's
  // notes, so the waits are those one process sees at that event.
  void Split(PfcFieldSplit split);
  // A distributed run's window ended (every process calls it): decides the
  // deferred checks of the window, in time order.
  void OnWindow();
  // Whether the field schedules periodic events (polls, checks), which go
  // on until the run ends; how many are pending; and whether something
  // keeps them needed when nothing else is pending (a stormed queue waits
  // for its restoration).
  bool periodic() const { return watchdog_ != nullptr || deadlock_ != nullptr; }
  size_t periodic_pending() const;
  bool any_stormed() const { return watchdog_ != nullptr && watchdog_->any_stormed(); }
  // Storms detected / restored in the whole fabric (split: after Finish).
  uint64_t storms_detected() const;
  uint64_t storms_restored() const;

  PfcWatchdog* watchdog() { return watchdog_.get(); }
  PfcDeadlockDetector* deadlock() { return deadlock_.get(); }
  // PAUSE frames sent / received per topology tier (0: hosts), summed over
  // classes.
  struct TierPause {
    int tier;
    uint64_t tx_pause = 0;
    uint64_t rx_pause = 0;
  };
  std::vector<TierPause> PauseByTier() const;
  // "spine0:1 -> leaf1:2 -> ... -> spine0:1": the deadlock's egress ports
  // (node:port, as `fathom topo --links` names link ends); empty: none.
  std::string CycleName() const;
  // The lines of the run summary (empty without PFC).
  std::string Summary() const;
  // PAUSE frames the host's NIC sent (a storm's).
  uint64_t TxPauseOfHost(int32_t host_rank) const;

 private:
  std::vector<PfcWait> Snapshot() const;
  // Split: this process's part of a check at `now`, appended to notes_.
  void Note(Picoseconds now);
  // Split: decides the noted checks from every process's notes (a
  // collective).
  void Decide();
  // The watchdog as the summary shows it: this process's, or (split, after
  // Finish) every process's merged in the order one process lists them.
  struct WatchdogRow {
    Port* port;
    int tc;
    PfcWatchdog::QueueStats stats;
  };
  struct WatchdogView {
    uint64_t detected = 0, restored = 0;
    std::vector<WatchdogRow> queues;  // the queues that stormed
    std::vector<PfcWatchdog::Event> events;
  };
  WatchdogView LocalWatchdog() const;
  void GatherWatchdog();
  bool split_ = false;
  PfcFieldSplit split_with_;
  std::string notes_;  // deferred checks not yet decided
  uint64_t noted_ = 0;
  std::optional<WatchdogView> merged_;
  static Picoseconds PausedSince(void* ctx, Port* port, int tc);
  static uint64_t PauseFrames(void* ctx, Port* port, int tc);
  static void Mitigate(void* ctx, Port* port, int tc, PfcWdAction action, bool on);
  static uint64_t TxDropped(void* ctx, Port* port, int tc);
  struct StormEvent;
  static void OnStorm(void* obj, uint64_t);

  Network* net_;
  uint8_t lossless_ = 0;
  std::unique_ptr<PfcWatchdog> watchdog_;
  std::unique_ptr<PfcDeadlockDetector> deadlock_;
  std::vector<std::unique_ptr<StormEvent>> storms_;
};

// Scenario side. Checks network.qos.pfc_watchdog (times in range, the poll
// no longer than detection and restoration, a known action) and each
// pfc_storm fault (its priority a lossless class of network.qos); errors
// name file:line and the field.
Status ValidatePfcField(const proto::Scenario& s, const config::SourceMap& map);
// The options a validated scenario asks for (lossless classes from `qos`).
PfcFieldOptions PfcFieldOptionsOf(const proto::Scenario& s, const QosConfig& qos);
// Schedules the scenario's pfc_storm faults on `field`.
void AttachPfcStorms(const proto::Scenario& s, const topo::Topology& topo, PfcField* field);

}  // namespace fathom::sim
