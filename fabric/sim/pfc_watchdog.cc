#include "fabric/sim/pfc_watchdog.h"

#include <algorithm>

#include "fabric/sim/port.h"

namespace fathom::sim {

const char* PfcWdActionName(PfcWdAction a) { return a == PfcWdAction::kDrop ? "drop" : "forward"; }

PfcWatchdog::PfcWatchdog(Engine* engine, const PfcWatchdogConfig& config,
                         const PfcQueueControl& control)
    : engine_(engine), config_(config), control_(control) {}

void PfcWatchdog::Watch(Port* port, int tc) { queues_.push_back(Queue{port, tc, {}}); }

void PfcWatchdog::RetainQueues(const std::function<bool(const Port* port)>& keep) {
  queues_.erase(
      std::remove_if(queues_.begin(), queues_.end(), [&](const Queue& q) { return !keep(q.port); }),
      queues_.end());
}

void PfcWatchdog::ScheduleNodePoll(size_t i) {
  engine_->Schedule<&PfcWatchdog::OnNodePoll>(
      engine_->Now() + config_.poll_interval, EventKind::kUser,
      kNodePollComponent + static_cast<uint32_t>(node_polls_[i].node), this, i);
}

void PfcWatchdog::OnNodePoll(void* obj, uint64_t i) {
  auto* self = static_cast<PfcWatchdog*>(obj);
  const NodePoll& n = self->node_polls_[i];
  ++self->polls_;
  self->PollQueues(n.begin, n.end);
  self->ScheduleNodePoll(i);
}

void PfcWatchdog::Start() {
  if (per_node_) {
    // The queues come switch by switch (Watch in port order).
    node_polls_.clear();
    for (size_t i = 0; i < queues_.size(); ++i) {
      const int32_t node = queues_[i].port->config().node;
      if (node_polls_.empty() || node_polls_.back().node != node) {
        node_polls_.push_back(NodePoll{node, i, i});
      }
      node_polls_.back().end = i + 1;
    }
    for (size_t i = 0; i < node_polls_.size(); ++i) ScheduleNodePoll(i);
    return;
  }
  engine_->Schedule<&PfcWatchdog::OnPoll>(engine_->Now() + config_.poll_interval, EventKind::kUser,
                                          0, this, 0);
}

void PfcWatchdog::OnPoll(void* obj, uint64_t) {
  auto* self = static_cast<PfcWatchdog*>(obj);
  self->Poll();
  // Nothing else pending and no queue stormed: the fabric is idle and the
  // run is over (a paused queue keeps its peer's PAUSE refreshes pending; a
  // stormed one waits for its restoration).
  if (self->engine_->pending() <= self->idle_pending_ &&
      self->storms_detected() == self->storms_restored()) {
    return;
  }
  self->Start();
}

void PfcWatchdog::Poll() {
  ++polls_;
  PollQueues(0, queues_.size());
}

void PfcWatchdog::PollQueues(size_t begin, size_t end) {
  const Picoseconds now = engine_->Now();
  for (size_t i = begin; i < end; ++i) {
    Queue& q = queues_[i];
    if (!q.stats.stormed) {
      // Paused without a break for the detection time: a storm.
      const Picoseconds since = control_.paused_since(control_.ctx, q.port, q.tc);
      if (since != Picoseconds::Max() && now - since >= config_.detection_time) {
        q.stats.stormed = true;
        ++q.stats.storm_detected;
        q.frames = control_.pause_frames(control_.ctx, q.port, q.tc);
        q.frames_read = now;
        events_.push_back(Event{now, q.port, q.tc, true, since});
        control_.mitigate(control_.ctx, q.port, q.tc, config_.action, true);
      }
      continue;
    }
    // Stormed: restore once no PAUSE frame has arrived for the restoration
    // time: none since the poll that last saw the count move.
    const uint64_t frames = control_.pause_frames(control_.ctx, q.port, q.tc);
    if (frames != q.frames) {
      q.frames = frames;
      q.frames_read = now;
      continue;
    }
    if (now - q.frames_read >= config_.restoration_time) {
      q.stats.stormed = false;
      ++q.stats.storm_restored;
      events_.push_back(Event{now, q.port, q.tc, false, Picoseconds::Max()});
      control_.mitigate(control_.ctx, q.port, q.tc, config_.action, false);
    }
  }
}

PfcWatchdog::QueueStats PfcWatchdog::stats(size_t i) const {
  const Queue& q = queues_[i];
  QueueStats s = q.stats;
  if (control_.tx_dropped != nullptr) {
    s.tx_dropped_packets = control_.tx_dropped(control_.ctx, q.port, q.tc);
  }
  if (control_.rx_dropped != nullptr) {
    s.rx_dropped_packets = control_.rx_dropped(control_.ctx, q.port, q.tc);
  }
  return s;
}

uint64_t PfcWatchdog::storms_detected() const {
  uint64_t n = 0;
  for (const Queue& q : queues_) n += q.stats.storm_detected;
  return n;
}

uint64_t PfcWatchdog::storms_restored() const {
  uint64_t n = 0;
  for (const Queue& q : queues_) n += q.stats.storm_restored;
  return n;
}

}  // namespace fathom::sim
