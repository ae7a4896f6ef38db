// FlowModel: a flow-level (fluid) model of bulk transfers over directed
// links, the opt-in alternative to packetization (NetworkConfig::flow_model,
// docs/FLOW.md). A flow is a number of bytes on a fixed sequence of links;
// each link is a capacity (its line rate); the flows crossing a link share
// it by max-min fairness, computed by progressive filling (Bertsekas and
// Gallager, "Data Networks", 2nd ed., sec. 6.5.2), as SimGrid's validated
// flow models do (Velho et al., "On the validity of flow-level TCP network
// models for grid and cloud simulations", ACM TOMACS 23(4), 2013, which also
// shows where the fluid view errs: short and heavily contended transfers).
// Rates change only when a flow starts or finishes, and then only for the
// flows connected to it through shared links (its component): ring and rail
// traffic rarely contends, so components stay small.
//
// Time is integer picoseconds: a flow's finish is the ceiling of its
// remaining bytes over its rate, one engine event (kUser, component = the
// flow's slot); an event superseded by a rate change is skipped by its
// generation. Deterministic: the same starts in the same order give the
// same rates and times (no hashing, no unordered iteration).
//
// Ownership: the model owns its links and flows; the Engine is the caller's
// and must outlive it. One thread (the engine's).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/units.h"
#include "fabric/sim/engine.h"

namespace fathom::sim {

class FlowModel {
 public:
  // Called at a flow's finish with the tag given to Start.
  using DoneFn = void (*)(void* ctx, uint64_t tag);
  static constexpr size_t kMaxLinks = 8;

  // A finish event's object is the model: its fetch hint fetches the flow
  // and calls `done_hint` (if set) with the flow's ctx and tag, to fetch
  // what the DoneFn will read.
  explicit FlowModel(Engine* engine) : engine_(engine) {
    engine_->set_prefetcher<&FlowModel::OnFinish>(&FlowModel::PrefetchFinish);
  }
  void set_done_hint(PrefetchFn hint) { done_hint_ = hint; }
  FlowModel(const FlowModel&) = delete;
  FlowModel& operator=(const FlowModel&) = delete;

  // A directed link of `rate` (> 0); returns its id (0, 1, ...).
  int32_t AddLink(BitsPerSecond rate);
  size_t links() const { return links_.size(); }
  // Starts a flow of `bytes` over `links` (ids, at most kMaxLinks; none:
  // it finishes now) at the engine's current time, in slot class `cls`
  // (SetClasses; ignored without classes). Returns its id.
  int32_t Start(std::span<const int32_t> links, uint64_t bytes, DoneFn done, void* ctx,
                uint64_t tag, uint32_t cls = 0);
  // A transfer too short to share (one packet: the caller decides): it
  // takes the time it would take alone, `bytes` at its slowest link's rate
  // (what Start gives a lone flow), and then `done` runs as for a flow. It
  // joins no link's sharing, so it neither slows nor re-rates the flows
  // there (docs/FLOW.md, "Single-packet messages"). Returns its id (a flow
  // slot, so its finish orders and counts as a flow's).
  int32_t Pass(std::span<const int32_t> links, uint64_t bytes, DoneFn done, void* ctx,
               uint64_t tag);

  // Pass's time: `bytes` at the slowest of `links` (ceiling, picoseconds).
  int64_t LoneTime(std::span<const int32_t> links, uint64_t bytes) const;
  // A split run's pass (flow_fabric.h) takes no flow slot (the slots must
  // be the same in every process): its caller schedules the finish and
  // counts it here.
  void CountPass() { ++stats_.passes; }

  // A running flow's current rate in bits per second (0 when not running).
  double RateBps(int32_t flow) const;
  size_t running() const { return running_; }
  struct Stats {
    uint64_t flows = 0;            // started (Start)
    uint64_t passes = 0;           // Pass: outside the sharing
    uint64_t recomputes = 0;       // components re-filled
    uint64_t component_flows = 0;  // summed over recomputes
    uint64_t largest_component = 0;
  };
  const Stats& stats() const { return stats_; }
  // Split runs (flow_fabric.h): every process runs every finish event, one
  // counts them; the others take each one's digest out (uncounted_sum).
  void set_uncounted(bool on) { uncounted_ = on; }
  // Slot classes of a split run whose processes replicate only some flows
  // (FlowFabric::Plan): flows of class c (1..sizes.size()) take slots
  // base(c) .. base(c) + sizes[c-1] - 1 (base: the sizes before it), last
  // freed first, so a flow's slot (its finish's component) depends only on
  // its class's starts and finishes, the same in every process that runs
  // them. `counted[c-1]`: this process counts class c's finishes (instead
  // of set_uncounted's). Empty `sizes`: one pool, every flow's (the
  // default); coming back to it from classes starts its slots afresh.
  // Only while no flow runs (false otherwise: nothing changed).
  bool SetClasses(std::vector<uint32_t> sizes, std::vector<char> counted);
  uint64_t uncounted_sum() const { return uncounted_sum_; }
  uint64_t uncounted_events() const { return uncounted_events_; }

 private:
  struct Link {
    double capacity;  // bytes per picosecond
    std::vector<int32_t> flows;
    uint64_t mark = 0;
    // Progressive filling's scratch.
    double left = 0;
    int32_t unfixed = 0;
    uint32_t place = 0;  // index in the component's links
    bool dirty = false;
  };
  struct Flow {
    int32_t links[kMaxLinks];
    uint8_t nlinks = 0;
    bool running = false;
    bool fixed = false;
    uint64_t mark = 0;
    uint32_t gen = 0;       // 31 bits: ScheduleFinish's event carries the uncounted bit above
    uint32_t cls = 0;       // slot class (SetClasses)
    double remaining = 0;   // bytes, as of last_ps
    double rate = 0;        // bytes per picosecond
    double fixed_rate = 0;  // progressive filling's result
    int64_t last_ps = 0;
    DoneFn done = nullptr;
    void* ctx = nullptr;
    uint64_t tag = 0;
  };
  static void OnFinish(void* model, uint64_t arg);
  double Slowest(std::span<const int32_t> links) const;  // capacity, bytes per ps
  static void PrefetchFinish(const void* model, uint64_t arg);
  // Re-fills the component reachable from `seeds` and re-schedules the
  // finish of every flow in it whose rate changed.
  void Recompute(std::span<const int32_t> seeds);
  // Progressive filling of the component in comp_links_/comp_flows_ with a
  // heap of the links by share (large components).
  void FillByHeap();
  void FixFlowsOf(const Link& bottleneck, double share);
  // Re-schedules the finish of each component flow whose rate changed.
  void Reschedule(int64_t now);
  void ScheduleFinish(int32_t id, int64_t at_ps);
  // A free flow slot (of class `cls`), running, with its callback; no links yet.
  int32_t TakeFlow(uint64_t bytes, DoneFn done, void* ctx, uint64_t tag, uint32_t cls);
  static constexpr uint32_t kGenMask = 0x7FFFFFFFu;
  static constexpr uint32_t kUncountedBit = 0x80000000u;
  // Components of at most this many links are filled by scanning.
  static constexpr size_t kScanLinks = 24;

  Engine* engine_;
  PrefetchFn done_hint_ = nullptr;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<int32_t> free_;
  int32_t next_new_ = 0;  // the next slot never taken (one pool)
  // SetClasses's, by class - 1: first slot, slots, slots taken so far,
  // freed slots, counted here.
  std::vector<int32_t> class_base_, class_size_, class_next_;
  std::vector<std::vector<int32_t>> class_free_;
  std::vector<char> class_counted_;
  size_t running_ = 0;
  uint64_t epoch_ = 0;
  std::vector<int32_t> comp_links_, comp_flows_;  // scratch
  std::vector<std::pair<double, uint32_t>> heap_;
  Stats stats_;
  bool uncounted_ = false;
  uint64_t uncounted_sum_ = 0;
  uint64_t uncounted_events_ = 0;
};

}  // namespace fathom::sim
