// PfcWatchdog: the switch feature that finds a lossless queue stuck behind
// PFC PAUSE (a PFC storm, CASES.md 16) and works around it, as SONiC's
// pfcwd, Arista's and Cisco's PFC watchdogs do. Three steps per (egress
// port, lossless class) queue:
// - detection: the queue has been paused by its peer continuously for the
//   detection time. The watchdog checks every poll interval, so it declares
//   the storm at the first poll at or after pause start + detection time
//   (within one poll interval of it);
// - mitigation: the configured action, until restoration. `drop` discards
//   the packets waiting in the queue and every packet of the class sent to
//   it, and ignores PAUSE (so the queue drains and pauses nothing
//   upstream); `forward` ignores PAUSE and keeps sending. (SONiC's drop also
//   discards what the stormed port receives on the class; not modelled
//   here: a storming NIC sends no data.)
// - restoration: no PAUSE frame has arrived for the restoration time (as
//   SONiC's restoration checks the PFC rx counter), counted from the last
//   poll that saw a new one, so within one poll interval of the last frame
//   plus the restoration time: the queue honours PAUSE again.
// Sources: SONiC PFC watchdog design (github.com/sonic-net/SONiC wiki
// "PFC-Watchdog-Design"; sonic-mgmt docs/pfcwd: drop discards queued, new
// and received packets of the queue, forward ignores PAUSE), and the SONiC
// CLI (sonic-utilities pfcwd/main.py: DEFAULT_DETECTION_TIME 200 ms,
// DEFAULT_RESTORATION_TIME 200 ms, DEFAULT_POLL_INTERVAL 200 ms, detection
// 100..5000 ms, restoration 100..60000 ms, poll 100..1000 ms, action drop).
// Juniper's PFC watchdog (docs "cos-pfc-watchdog-configure") polls every
// 100 ms and detects after 2 polls (200 ms), recovery 200 ms.
//
// The watchdog does not know how PFC is built: it reads the pause state and
// applies its action through a PfcQueueControl (fabric/scenario wires it to
// the ports' PFC). It owns its queue states and counters; the Engine, the
// ports and the control's context belong to the caller and must outlive it.
// Off (not built) it costs nothing; built, one engine event per poll.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/units.h"
#include "fabric/sim/engine.h"

namespace fathom::sim {

class Port;

enum class PfcWdAction : uint8_t { kDrop, kForward };
const char* PfcWdActionName(PfcWdAction a);

struct PfcWatchdogConfig {
  // SONiC's defaults (sonic-utilities pfcwd/main.py) for detection and
  // restoration; Juniper's 100 ms poll so that detection lands within 100 ms
  // of the detection time (SONiC polls every 200 ms).
  Picoseconds detection_time = Picoseconds::FromMilliseconds(200);
  Picoseconds restoration_time = Picoseconds::FromMilliseconds(200);
  Picoseconds poll_interval = Picoseconds::FromMilliseconds(100);
  PfcWdAction action = PfcWdAction::kDrop;
};

// How the watchdog sees and acts on one queue (egress `port`, class `tc`).
struct PfcQueueControl {
  // When the peer's PAUSE began holding the queue without a break;
  // Picoseconds::Max() when no PAUSE holds it.
  Picoseconds (*paused_since)(void* ctx, Port* port, int tc);
  // PAUSE frames received for the class so far (honoured or not).
  uint64_t (*pause_frames)(void* ctx, Port* port, int tc);
  // Starts (on) or ends (off) the mitigation `action` on the queue.
  void (*mitigate)(void* ctx, Port* port, int tc, PfcWdAction action, bool on);
  // Packets of the queue the mitigation dropped so far: waiting in or
  // arriving for the queue (tx), and received for its class on the port's
  // ingress (rx). Either may be null (counted as 0).
  uint64_t (*tx_dropped)(void* ctx, Port* port, int tc);
  uint64_t (*rx_dropped)(void* ctx, Port* port, int tc);
  void* ctx;
};

class PfcWatchdog {
 public:
  // Per queue, named after SONiC's COUNTERS_DB fields
  // (PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED / _RESTORED, _TX_DROPPED_PACKETS,
  // _RX_DROPPED_PACKETS) and PFC_WD_STATUS (stormed / operational).
  struct QueueStats {
    uint64_t storm_detected = 0;
    uint64_t storm_restored = 0;
    uint64_t tx_dropped_packets = 0;
    uint64_t rx_dropped_packets = 0;
    bool stormed = false;
  };
  // A detection or a restoration, in time order.
  struct Event {
    Picoseconds at;
    Port* port;
    int tc;
    bool detected;             // false: restored
    Picoseconds paused_since;  // detected: when the pause began
  };

  PfcWatchdog(Engine* engine, const PfcWatchdogConfig& config, const PfcQueueControl& control);
  PfcWatchdog(const PfcWatchdog&) = delete;
  PfcWatchdog& operator=(const PfcWatchdog&) = delete;

  // Watches (port, tc): a switch egress port and a lossless class. Before Start.
  void Watch(Port* port, int tc);
  // First poll one poll interval from now, then every poll interval while
  // other events are pending or a queue is stormed (an idle fabric ends the
  // run; a paused one still has its PAUSE refreshes pending).
  void Start();
  // Stops rescheduling when no more than `n` events are pending (the
  // other periodic checks of the run: with nothing else pending the fabric
  // is idle). Default 0.
  void set_idle_pending(size_t n) { idle_pending_ = n; }
  // Polls now (tests; Start's events call it).
  void Poll();

  // Polls by switch, for the canonical order of a distributed run
  // (fabric/parallel/): Start schedules one poll event per switch node
  // (kind kUser, component kNodePollComponent + node) that polls that
  // node's queues and is rescheduled every poll interval until the run
  // ends (the run, not the watchdog, sees when the fabric is idle). A
  // poll's effects stay on its switch's ports until a link carries them
  // (a drop, an XON, a resumed frame), so polls of several switches at one
  // time act as one poll of them all, and the process that owns a switch
  // polls it as one process does. Before Start.
  static constexpr uint32_t kNodePollComponent = 1u << 20;
  void set_per_node_polls(bool on) { per_node_ = on; }
  // Keeps watching only the queues `keep` accepts (a process's switches).
  // Before Start.
  void RetainQueues(const std::function<bool(const Port* port)>& keep);
  // Per-node polls: the poll events pending (one per switch polled once
  // started). Whether a queue is stormed now.
  size_t node_polls() const { return per_node_ ? node_polls_.size() : 0; }
  bool any_stormed() const { return storms_detected() != storms_restored(); }

  const PfcWatchdogConfig& config() const { return config_; }
  size_t queue_count() const { return queues_.size(); }
  Port* port(size_t i) const { return queues_[i].port; }
  int tc(size_t i) const { return queues_[i].tc; }
  // Counters of queue i (the drop counters read now).
  QueueStats stats(size_t i) const;
  const std::vector<Event>& events() const { return events_; }
  // Storms detected / restored over all queues.
  uint64_t storms_detected() const;
  uint64_t storms_restored() const;
  uint64_t polls() const { return polls_; }

 private:
  struct Queue {
    Port* port;
    int tc;
    QueueStats stats;
    // Stormed: pause_frames as last seen to move, and the poll that saw it.
    uint64_t frames = 0;
    Picoseconds frames_read;
  };
  static void OnPoll(void* self, uint64_t);
  static void OnNodePoll(void* self, uint64_t node_poll);
  // Polls queues [begin, end).
  void PollQueues(size_t begin, size_t end);
  // Per-node polls: a switch node and its queues [begin, end).
  struct NodePoll {
    int32_t node;
    size_t begin, end;
  };
  void ScheduleNodePoll(size_t i);

  Engine* engine_;
  bool per_node_ = false;
  std::vector<NodePoll> node_polls_;
  size_t idle_pending_ = 0;
  PfcWatchdogConfig config_;
  PfcQueueControl control_;
  std::vector<Queue> queues_;
  std::vector<Event> events_;
  uint64_t polls_ = 0;
};

}  // namespace fathom::sim
