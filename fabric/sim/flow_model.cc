// FlowModel: max-min fair sharing by progressive filling over the component
// a start or finish touches (flow_model.h).
#include "fabric/sim/flow_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>

namespace fathom::sim {
namespace {

// Bits per second -> bytes per picosecond.
double BytesPerPs(double bps) { return bps / 8e12; }

}  // namespace

int32_t FlowModel::AddLink(BitsPerSecond rate) {
  assert(rate.bps() > 0);
  Link l;
  l.capacity = BytesPerPs(static_cast<double>(rate.bps()));
  links_.push_back(std::move(l));
  return static_cast<int32_t>(links_.size() - 1);
}

bool FlowModel::SetClasses(std::vector<uint32_t> sizes, std::vector<char> counted) {
  if (running_ != 0) return false;
  if (sizes.empty()) {
    if (class_base_.empty()) return true;  // one pool already: its slots stay as they are
    class_base_.clear();
    class_size_.clear();
    class_next_.clear();
    class_free_.clear();
    class_counted_.clear();
    free_.clear();
    next_new_ = 0;
    return true;
  }
  const size_t n = sizes.size();
  class_base_.assign(n, 0);
  class_size_.assign(n, 0);
  class_next_.assign(n, 0);
  class_free_.assign(n, {});
  int32_t base = 0;
  for (size_t c = 0; c < n; ++c) {
    class_base_[c] = base;
    class_size_[c] = static_cast<int32_t>(sizes[c]);
    base += static_cast<int32_t>(sizes[c]);
  }
  class_counted_ = std::move(counted);
  class_counted_.resize(n, 0);
  if (flows_.size() < static_cast<size_t>(base)) flows_.resize(static_cast<size_t>(base));
  return true;
}

int32_t FlowModel::TakeFlow(uint64_t bytes, DoneFn done, void* ctx, uint64_t tag, uint32_t cls) {
  int32_t id;
  if (class_base_.empty()) {
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = next_new_++;
      if (static_cast<size_t>(id) >= flows_.size()) flows_.resize(static_cast<size_t>(id) + 1);
    }
  } else {
    const size_t c = static_cast<size_t>(cls) - 1;
    if (cls == 0 || c >= class_base_.size() ||
        (class_free_[c].empty() && class_next_[c] >= class_size_[c])) {
      // A flow its class has no slot for (FlowFabric::Plan gives each
      // class one per QP, and a QP has one flow at a time).
      std::fprintf(stderr, "flow model: no slot of class %u for a flow (%zu classes)\n", cls,
                   class_base_.size());
      std::abort();
    }
    if (!class_free_[c].empty()) {
      id = class_free_[c].back();
      class_free_[c].pop_back();
    } else {
      id = class_base_[c] + class_next_[c]++;
    }
  }
  Flow& f = flows_[static_cast<size_t>(id)];
  f.cls = cls;
  f.nlinks = 0;
  f.running = true;
  f.remaining = static_cast<double>(bytes);
  f.rate = 0;
  f.last_ps = engine_->Now().ps();
  f.done = done;
  f.ctx = ctx;
  f.tag = tag;
  ++running_;
  return id;
}

double FlowModel::Slowest(std::span<const int32_t> links) const {
  double slowest = 0;
  for (int32_t l : links) {
    const double c = links_[static_cast<size_t>(l)].capacity;
    if (slowest == 0 || c < slowest) slowest = c;
  }
  return slowest;
}

namespace {
// `bytes` at `rate` (bytes per ps; 0: no link), rounded up.
int64_t TimeAt(double rate, uint64_t bytes) {
  return rate > 0 ? static_cast<int64_t>(std::ceil(static_cast<double>(bytes) / rate)) : 0;
}
}  // namespace

int64_t FlowModel::LoneTime(std::span<const int32_t> links, uint64_t bytes) const {
  return TimeAt(Slowest(links), bytes);
}

int32_t FlowModel::Pass(std::span<const int32_t> links, uint64_t bytes, DoneFn done, void* ctx,
                        uint64_t tag) {
  const int32_t id = TakeFlow(bytes, done, ctx, tag, 0);
  ++stats_.passes;
  Flow& f = flows_[static_cast<size_t>(id)];
  // On no link's list: OnFinish finds nothing to take it off or re-fill.
  f.rate = Slowest(links);
  const int64_t ps = TimeAt(f.rate, bytes);
  ScheduleFinish(id, f.last_ps + ps);
  return id;
}

int32_t FlowModel::Start(std::span<const int32_t> links, uint64_t bytes, DoneFn done, void* ctx,
                         uint64_t tag, uint32_t cls) {
  assert(links.size() <= kMaxLinks);
  const int32_t id = TakeFlow(bytes, done, ctx, tag, cls);
  Flow& f = flows_[static_cast<size_t>(id)];
  f.nlinks = static_cast<uint8_t>(links.size());
  for (size_t i = 0; i < links.size(); ++i) f.links[i] = links[i];
  ++stats_.flows;
  if (links.empty()) {
    ScheduleFinish(id, f.last_ps);
    return id;
  }
  // Alone on its links (the common case: a ring's flows rarely share), it
  // runs at its slowest link's rate and touches no other flow: what
  // progressive filling over its own component gives, without the walk.
  bool alone = true;
  double slowest = 0;
  for (int32_t l : links) {
    Link& link = links_[static_cast<size_t>(l)];
    if (!link.flows.empty()) alone = false;
    if (slowest == 0 || link.capacity < slowest) slowest = link.capacity;
    link.flows.push_back(id);
  }
  if (alone) {
    ++stats_.recomputes;
    ++stats_.component_flows;
    stats_.largest_component = std::max<uint64_t>(stats_.largest_component, 1);
    f.rate = slowest;
    ScheduleFinish(id, f.last_ps + static_cast<int64_t>(std::ceil(f.remaining / f.rate)));
    return id;
  }
  Recompute(links);
  return id;
}

double FlowModel::RateBps(int32_t flow) const {
  if (flow < 0 || static_cast<size_t>(flow) >= flows_.size()) return 0;
  const Flow& f = flows_[static_cast<size_t>(flow)];
  return f.running ? f.rate * 8e12 : 0;
}

void FlowModel::PrefetchFinish(const void* model, uint64_t arg) {
  const FlowModel* self = static_cast<const FlowModel*>(model);
  const Flow& f = self->flows_.data()[arg >> 32];
  __builtin_prefetch(&f);
  __builtin_prefetch(reinterpret_cast<const char*>(&f) + 64);
  // A superseded finish (its generation is old) calls nothing.
  if (self->done_hint_ != nullptr && f.running &&
      f.gen == (static_cast<uint32_t>(arg) & kGenMask)) {
    self->done_hint_(f.ctx, f.tag);
  }
}

void FlowModel::OnFinish(void* model, uint64_t arg) {
  FlowModel* self = static_cast<FlowModel*>(model);
  const int32_t id = static_cast<int32_t>(arg >> 32);
  if ((static_cast<uint32_t>(arg) & kUncountedBit) != 0) [[unlikely]] {
    ++self->uncounted_events_;
    self->uncounted_sum_ += Engine::CanonicalEventDigest(
        self->engine_->Now().ps(), EventKind::kUser, static_cast<uint32_t>(id));
  }
  Flow& f = self->flows_[static_cast<size_t>(id)];
  if (!f.running || f.gen != (static_cast<uint32_t>(arg) & kGenMask)) return;  // superseded
  f.running = false;
  --self->running_;
  int32_t links[kMaxLinks];
  const size_t n = f.nlinks;
  bool shared = false;  // another flow is on one of its links
  for (size_t i = 0; i < n; ++i) {
    links[i] = f.links[i];
    std::vector<int32_t>& on = self->links_[static_cast<size_t>(links[i])].flows;
    on.erase(std::find(on.begin(), on.end(), id));
    shared = shared || !on.empty();
  }
  const DoneFn done = f.done;
  void* ctx = f.ctx;
  const uint64_t tag = f.tag;
  if (self->class_base_.empty()) {
    self->free_.push_back(id);
  } else {
    self->class_free_[f.cls - 1].push_back(id);
  }
  // The flows that shared a link with it speed up now, before the callback
  // starts anything new. Alone, it leaves nobody to speed up.
  if (shared) self->Recompute(std::span<const int32_t>(links, n));
  done(ctx, tag);
}

void FlowModel::Recompute(std::span<const int32_t> seeds) {
  const int64_t now = engine_->Now().ps();
  const uint64_t mark = ++epoch_;
  comp_links_.clear();
  comp_flows_.clear();
  // The component: links and flows reachable through shared links, in a
  // deterministic (breadth-first, insertion) order.
  for (int32_t l : seeds) {
    Link& link = links_[static_cast<size_t>(l)];
    if (link.mark != mark) {
      link.mark = mark;
      comp_links_.push_back(l);
    }
  }
  for (size_t i = 0; i < comp_links_.size(); ++i) {
    for (int32_t id : links_[static_cast<size_t>(comp_links_[i])].flows) {
      Flow& f = flows_[static_cast<size_t>(id)];
      if (f.mark == mark) continue;
      f.mark = mark;
      comp_flows_.push_back(id);
      for (size_t k = 0; k < f.nlinks; ++k) {
        Link& link = links_[static_cast<size_t>(f.links[k])];
        if (link.mark != mark) {
          link.mark = mark;
          comp_links_.push_back(f.links[k]);
        }
      }
    }
  }
  ++stats_.recomputes;
  stats_.component_flows += comp_flows_.size();
  stats_.largest_component = std::max<uint64_t>(stats_.largest_component, comp_flows_.size());
  // Bytes sent so far at the old rates.
  for (int32_t id : comp_flows_) {
    Flow& f = flows_[static_cast<size_t>(id)];
    f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.last_ps));
    f.last_ps = now;
    f.fixed = false;
  }
  for (uint32_t i = 0; i < comp_links_.size(); ++i) {
    Link& link = links_[static_cast<size_t>(comp_links_[i])];
    link.place = i;
    link.dirty = false;
    link.left = link.capacity;
    link.unfixed = static_cast<int32_t>(link.flows.size());
  }
  // Progressive filling: the link with the least fair share left fixes the
  // rate of every flow still unfixed on it; repeat. The links wait in a
  // min-heap by (share, place in the component); an entry whose link's
  // share has changed since is stale and skipped (the change pushed a new
  // one), so each step costs a log, not a scan of the component.
  auto share_of = [](const Link& link) { return std::max(0.0, link.left) / link.unfixed; };
  // A small component (nearly all: a ring's flows meet one or two others)
  // scans its links for the least (share, place) instead: the heap's
  // order exactly (every link's latest entry is its current share), with
  // none of its pushes.
  if (comp_links_.size() <= kScanLinks) {
    while (true) {
      double share = 0;
      Link* best = nullptr;
      for (int32_t l : comp_links_) {
        Link& link = links_[static_cast<size_t>(l)];
        if (link.unfixed == 0) continue;
        const double s = share_of(link);
        if (best == nullptr || s < share) {
          share = s;
          best = &link;
        }
      }
      if (best == nullptr) break;
      FixFlowsOf(*best, share);
    }
  } else {
    FillByHeap();
  }
  Reschedule(now);
}

// Progressive filling's step: every unfixed flow on `bottleneck` gets
// `share`, and the links it crosses lose it (marked dirty for the heap).
void FlowModel::FixFlowsOf(const Link& bottleneck, double share) {
  for (int32_t id : bottleneck.flows) {
    Flow& f = flows_[static_cast<size_t>(id)];
    if (f.fixed) continue;
    f.fixed = true;
    f.fixed_rate = share;
    for (size_t k = 0; k < f.nlinks; ++k) {
      Link& link = links_[static_cast<size_t>(f.links[k])];
      link.left -= share;
      --link.unfixed;
      link.dirty = true;
    }
  }
}

void FlowModel::FillByHeap() {
  auto share_of = [](const Link& link) { return std::max(0.0, link.left) / link.unfixed; };
  using Entry = std::pair<double, uint32_t>;  // share, index into comp_links_
  std::vector<Entry>& heap = heap_;
  heap.clear();
  for (uint32_t i = 0; i < comp_links_.size(); ++i) {
    const Link& link = links_[static_cast<size_t>(comp_links_[i])];
    if (link.unfixed > 0) heap.emplace_back(share_of(link), i);
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Entry top = heap.back();
    heap.pop_back();
    Link& best = links_[static_cast<size_t>(comp_links_[top.second])];
    if (best.unfixed == 0 || share_of(best) != top.first) continue;  // stale
    const double share = top.first;
    FixFlowsOf(best, share);
    // The links those flows crossed have new shares.
    for (int32_t id : best.flows) {
      const Flow& f = flows_[static_cast<size_t>(id)];
      for (size_t k = 0; k < f.nlinks; ++k) {
        Link& link = links_[static_cast<size_t>(f.links[k])];
        if (!link.dirty) continue;
        link.dirty = false;
        if (link.unfixed > 0) {
          heap.emplace_back(share_of(link), link.place);
          std::push_heap(heap.begin(), heap.end(), std::greater<>());
        }
      }
    }
  }
}

void FlowModel::Reschedule(int64_t now) {
  for (int32_t id : comp_flows_) {
    Flow& f = flows_[static_cast<size_t>(id)];
    if (f.fixed_rate == f.rate) continue;  // its finish event stands
    f.rate = f.fixed_rate;
    const double ps = f.rate > 0 ? std::ceil(f.remaining / f.rate) : 0;
    ScheduleFinish(id, now + static_cast<int64_t>(ps));
  }
}

// A new finish event for flow `id` at `at_ps`; the generation makes any
// earlier one stale (OnFinish ignores it).
void FlowModel::ScheduleFinish(int32_t id, int64_t at_ps) {
  Flow& f = flows_[static_cast<size_t>(id)];
  f.gen = (f.gen + 1) & kGenMask;
  // Whether this process counts it is decided now: a superseded finish
  // may run after the classes changed (SetClasses).
  const bool uncounted = class_base_.empty() ? uncounted_ : class_counted_[f.cls - 1] == 0;
  engine_->Schedule<&FlowModel::OnFinish>(
      Picoseconds(at_ps), EventKind::kUser, static_cast<uint32_t>(id), this,
      (uint64_t{static_cast<uint32_t>(id)} << 32) | f.gen | (uncounted ? kUncountedBit : 0));
}

}  // namespace fathom::sim
