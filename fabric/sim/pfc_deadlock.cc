#include "fabric/sim/pfc_deadlock.h"

#include <algorithm>
#include <map>

namespace fathom::sim {

std::vector<PfcQueue> FindPfcCycle(const std::vector<PfcWait>& waits) {
  // Nodes: the paused queues, in the waits' order; edges to the holders
  // that are themselves paused queues of the same class.
  std::map<PfcQueue, size_t> index;
  for (const PfcWait& w : waits) index.emplace(PfcQueue{w.paused, w.tc}, index.size());
  std::vector<std::vector<size_t>> next(waits.size());
  std::vector<PfcQueue> node(index.size());
  for (const auto& [q, i] : index) node[i] = q;
  for (const PfcWait& w : waits) {
    const size_t from = index.at(PfcQueue{w.paused, w.tc});
    for (Port* h : w.holders) {
      auto it = index.find(PfcQueue{h, w.tc});
      if (it != index.end()) next[from].push_back(it->second);
    }
  }
  // Depth-first search with colours; the first back edge closes a cycle.
  enum : uint8_t { kWhite, kGrey, kBlack };
  std::vector<uint8_t> colour(node.size(), kWhite);
  std::vector<size_t> stack;
  std::vector<size_t> edge;  // per stack entry: the next edge to follow
  for (size_t root = 0; root < node.size(); ++root) {
    if (colour[root] != kWhite) continue;
    stack = {root};
    edge = {0};
    colour[root] = kGrey;
    while (!stack.empty()) {
      const size_t u = stack.back();
      if (edge.back() == next[u].size()) {
        colour[u] = kBlack;
        stack.pop_back();
        edge.pop_back();
        continue;
      }
      const size_t v = next[u][edge.back()++];
      if (colour[v] == kGrey) {
        // The cycle: v ... u on the stack.
        const auto at = std::find(stack.begin(), stack.end(), v);
        std::vector<size_t> cyc(at, stack.end());
        std::rotate(cyc.begin(), std::min_element(cyc.begin(), cyc.end()), cyc.end());
        std::vector<PfcQueue> out;
        for (size_t i : cyc) out.push_back(node[i]);
        return out;
      }
      if (colour[v] == kWhite) {
        colour[v] = kGrey;
        stack.push_back(v);
        edge.push_back(0);
      }
    }
  }
  return {};
}

PfcDeadlockDetector::PfcDeadlockDetector(Engine* engine, Snapshot snapshot, Picoseconds interval,
                                         Picoseconds persist)
    : engine_(engine), snapshot_(std::move(snapshot)), interval_(interval), persist_(persist) {}

void PfcDeadlockDetector::Start() {
  scheduled_ = true;
  engine_->Schedule<&PfcDeadlockDetector::OnCheck>(engine_->Now() + interval_, EventKind::kUser,
                                                   kCheckComponent, this, 0);
}

void PfcDeadlockDetector::OnCheck(void* obj, uint64_t) {
  auto* self = static_cast<PfcDeadlockDetector*>(obj);
  self->scheduled_ = false;
  if (self->record_) {
    self->check_event_times_.push_back(self->engine_->Now().ps());
    ++self->checks_;
    if (!self->deadlocked()) self->record_(self->engine_->Now());
    return;  // the next is scheduled once this one is decided (ResumeDeferred)
  }
  self->Check();
  // Once declared, or with nothing else pending (an idle fabric), stop.
  if (self->deadlocked() || self->engine_->pending() <= self->idle_pending_) return;
  self->Start();
}

void PfcDeadlockDetector::ResumeDeferred() {
  if (deadlocked() || scheduled_ || check_event_times_.empty()) return;
  scheduled_ = true;
  // One interval after the last check (never before now: a window longer
  // than the interval decides its checks at its end).
  engine_->Schedule<&PfcDeadlockDetector::OnCheck>(
      Picoseconds(check_event_times_.back()) + interval_, EventKind::kUser, kCheckComponent, this,
      0);
}

void PfcDeadlockDetector::Check() {
  ++checks_;
  if (deadlocked()) return;
  Decide(engine_->Now(), snapshot_());
}

void PfcDeadlockDetector::Decide(Picoseconds now, const std::vector<PfcWait>& waits) {
  if (deadlocked()) return;
  std::vector<PfcQueue> cycle = FindPfcCycle(waits);
  if (cycle.empty()) return;
  // The cycle closed when its last queue was paused.
  Picoseconds closed;
  for (const PfcQueue& q : cycle) {
    for (const PfcWait& w : waits) {
      if (w.paused == q.first && w.tc == q.second) closed = std::max(closed, w.since);
    }
  }
  if (now - closed < persist_) return;
  deadlock_ = std::move(cycle);
  first_seen_ = closed;
  declared_at_ = now;
}

}  // namespace fathom::sim
