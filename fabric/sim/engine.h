// The discrete-event engine of the fabric simulator: virtual time in integer
// picoseconds, an event list, and the trace digest that proves determinism.
//
// There is no global engine: every component holds the Engine* it was built
// with. An event is a POD (time, handler, object, argument); the handler is
// a plain function pointer called with the object pointer, so the hot path
// makes no allocation and no virtual call (STYLE.md, htsim-like). Ties in
// time go in schedule order: the same inputs give the same order, bit for
// bit (see the event list below for how).
//
// The event list is a timing wheel for the near future plus a heap for the
// rest. Nearly every event of a packet simulation lands within a few
// microseconds (the next arrival of a busy link, a NIC's next turn), so the
// wheel's buckets (512 ps wide, 33.6 us in all) take a push in O(1): a
// bucket is a chain of blocks of seven events. A bucket's events are sorted by
// time (stably) when it joins the window, a sorted array of the next
// events spanning one or more buckets, from which the engine fetches the
// memory of events several turns ahead. Events beyond the wheel (timeouts,
// flow starts) wait in a 4-ary min-heap. Each pop takes the lesser of the
// two heads, so the order is exactly (time, schedule order) whatever the
// structure. Events are stored whole (32 bytes) wherever they are, so
// dispatching one reads nothing beside the list.
//
// Schedule order needs no sequence number in the wheel: a bucket keeps its
// events in schedule order and is sorted stably by time, and an event that
// joins the window directly was scheduled after everything there. Only the
// heap numbers its events. And on a tie between the heap and the wheel the
// heap's event goes first: it was scheduled first (when it was scheduled
// its time was beyond the wheel's reach, which only grows while any wheel
// event is pending).
//
// The canonical order (set_canonical_order, for distributed runs,
// fabric/parallel/): ties in time go by (kind, component) and only then in
// schedule order, and the digest is a sum of per-event digests. Neither
// depends on which events share an engine, so a fabric split across
// processes gives the same digest as one engine (docs/PARALLEL.md says why
// the default order cannot: a tie between events scheduled by two
// partitions at one picosecond would need the global schedule order). It
// runs on the same wheel, window and heap: a bucket joining the window is
// sorted by (time, kind, component) instead of by time, stably, which is
// that order because the bucket holds its events in schedule order; an
// event joining the window directly goes after every event with its key or
// a lesser one; and a tie of the window's head with the heap's is settled
// by (kind, component) first, then, as in the default order, for the heap.
// The dispatch loop is the default's (a template on the order), so the
// canonical order fetches ahead as the default does.
//
// Threading: an Engine and everything scheduled on it belong to one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "base/rng.h"
#include "base/units.h"

namespace fathom::sim {

using EventFn = void (*)(void* obj, uint64_t arg);

// Event handlers are numbered, process-wide, so that an event names its
// handler in 2 bytes rather than an 8-byte pointer: an event takes 32
// bytes (half a cache line, never split across two; seven to a wheel
// block). The contract: at most kMaxHandlers functions per process, numbers
// taken before main, no static initializer schedules an event; the table is
// shared by every engine (docs/PERFORMANCE.md).
using HandlerId = uint16_t;
inline constexpr size_t kMaxHandlers = 256;
// The number of `fn`: the same for the same function, whichever thread
// asks (a mutex). Aborts, naming the limit, past kMaxHandlers functions.
HandlerId RegisterHandler(EventFn fn);
// The handlers by number: each entry is written once, by RegisterHandler,
// before its number is handed out; the dispatcher only reads.
extern EventFn g_event_handlers[kMaxHandlers];
// The number of handler F, registered before main (dynamic initialization
// of a variable template), so that scheduling reads it and never registers.
// So no static initializer may schedule an event.
template <EventFn F>
inline const HandlerId kHandlerOf = RegisterHandler(F);

// A fetch hint for the events of one handler: called with an event's object
// and argument a few events before its turn (the object's first line or two,
// and an arrival's packet, were fetched a few events before that), so that
// it can fetch the memory the handler will reach through those pointers.
// By handler, not by kind: one kind (kQpTimer, kUser) runs handlers of
// several objects (the flow model's shared FlowFabric and FlowModel, whose
// hints follow the event's argument to the rank's NIC and QP).
// It must only read. One call per event, not a chain of stages: a second
// stage costs more in calls than it saves in waiting (docs/PERFORMANCE.md).
using PrefetchFn = void (*)(const void* obj, uint64_t arg);

// What an event is, for the digest and the trace file. Stable numbers: they
// are part of every recorded trace digest.
enum class EventKind : uint16_t {
  kArrival = 1,    // a packet reaches the far end of a link
  kNicPump = 2,    // a NIC's port is free: send the next packet
  kQpTimer = 3,    // local ACK timeout / RNR wait of a QP
  kFlowStart = 4,  // a workload flow starts
  kUser = 5,       // tests and adapters
  kFault = 6,      // a fault changes what a NIC sees (port down/up, host crash)
};

// Sees each dispatched event (Engine::set_tracer): its time, kind and
// component (what the component number means depends on the kind; see
// event_trace.h).
using TraceFn = void (*)(void* ctx, Picoseconds at, EventKind kind, uint32_t component);

// One pending event: when (ties go in schedule order) and what (the
// handler, by number, and its arguments). The event list moves these
// whole, 32 bytes each, so dispatching one and fetching ahead read the list
// itself and nothing beside it.
struct Event {
  uint64_t time;
  void* obj;
  uint64_t arg;
  uint32_t component;
  EventKind kind;
  HandlerId handler;  // g_event_handlers[handler](obj, arg)
};
static_assert(sizeof(Event) == 32);

class Engine {
 public:
  // Takes the event list's first storage (window and wheel blocks) now, so
  // that a run does not start by faulting it in.
  explicit Engine(uint64_t seed = 1);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Events per block of a wheel bucket's chain (see below; public for the
  // tests that fill blocks whole and in part).
  static constexpr uint32_t kBlockEvents = 7;

  Picoseconds Now() const { return Picoseconds(now_ps_); }
  uint64_t seed() const { return seed_; }
  Rng MakeRng(uint64_t component) const { return Rng(seed_, component); }

  // Schedules Fn(obj, arg) at absolute time `at` (>= Now(); earlier times are
  // clamped to Now(), which keeps causality). Forced inline, with Insert:
  // GCC otherwise outlines them from the larger handlers, and the call costs
  // more than the common path. Fn is numbered by kHandlerOf (see above).
  template <EventFn Fn>
  [[gnu::always_inline]] void Schedule(Picoseconds at, EventKind kind, uint32_t component,
                                       void* obj, uint64_t arg) {
    const int64_t t = at.ps() < now_ps_ ? now_ps_ : at.ps();
    Insert(static_cast<uint64_t>(t), kind, component, kHandlerOf<Fn>, obj, arg);
  }

  // Sets the fetch hint for the events of handler Fn (null: none).
  template <EventFn Fn>
  void set_prefetcher(PrefetchFn fn) {
    prefetchers_[kHandlerOf<Fn>] = fn;
  }

  // Runs events until the list is empty, the next event is later than
  // `until`, or Stop() is called. Returns the number of events dispatched.
  uint64_t Run(Picoseconds until = Picoseconds::Max());
  void Stop() { stop_ = true; }

  // Folds a handler's key fields (PSN, QPN, ...) into the digest. A fold is
  // a rotate, an xor and a multiply by an odd constant (FxHash's step): a
  // bijection of the digest for a given value, so one differing value
  // always shows, and bits reach the low end through the rotate. It is on
  // the critical path of every event (each fold needs the last), where a
  // full mix is measurably slower; trace_digest() mixes in full once.
  void TraceMix(uint64_t v) { digest_ = Fold(digest_, v); }
  static uint64_t Fold(uint64_t d, uint64_t v) {
    return (((d << 5) | (d >> 59)) ^ v) * 0x9e3779b97f4a7c15ULL;
  }
  // The canonical order's digest of one event whose handler folds nothing
  // in (what the run loop sums for it): for the sender's stand-ins of
  // another process's events (fabric/parallel/pfc_cross.h), to take out.
  static uint64_t CanonicalEventDigest(int64_t time_ps, EventKind kind, uint32_t component) {
    return Mix64(Fold(kDigestStart, static_cast<uint64_t>(time_ps)) ^
                 ((static_cast<uint64_t>(kind) << 32) | component));
  }
  uint64_t trace_digest() const {
    return canonical_ ? CanonicalDigest(digest_sum_) : Mix64(digest_);
  }

  // The canonical order (see the header comment): call before anything is
  // scheduled. Events are then dispatched in (time, kind, component,
  // schedule order); each event's digest (its time, kind, component and the
  // handler's TraceMix values) is mixed in full and summed, so the sum over
  // several engines is the sum of one engine.
  void set_canonical_order(bool on) { canonical_ = on; }
  bool canonical_order() const { return canonical_; }
  // The canonical digest's running sum (add the sums of several engines,
  // modulo 2^64, then CanonicalDigest).
  uint64_t digest_sum() const { return digest_sum_; }
  static uint64_t CanonicalDigest(uint64_t sum) { return Mix64(sum ^ 0xca90ca90ca90ca90ULL); }
  // The time of the next pending event (Max when none) and of the last one
  // dispatched (canonical order only; 0 when none).
  Picoseconds NextEventTime() const;
  Picoseconds last_event_time() const { return Picoseconds(last_event_ps_); }
  // Sets the clock between runs (distributed runs agree where a run ended);
  // never before the last event dispatched.
  void SetClock(Picoseconds t) { now_ps_ = t.ps() > last_event_ps_ ? t.ps() : last_event_ps_; }
  // Drops the pending events `keep` rejects, keeping the others' order
  // (setup: a partition keeps the events of what it owns).
  void RetainEvents(const std::function<bool(const Event&)>& keep);
  uint64_t events_dispatched() const { return dispatched_; }
  size_t pending() const { return pending_; }
  // Largest the event list has been (for memory figures).
  size_t peak_pending() const { return peak_pending_; }
  // When set, fn(ctx, time, kind, component) sees every event just before
  // its handler runs (costly; for --trace only: see fabric/scenario/event_trace.h); null to
  // disable. The digest is the same either way.
  void set_tracer(TraceFn fn, void* ctx) {
    trace_fn_ = fn;
    trace_ctx_ = ctx;
    observed_ = trace_fn_ != nullptr || progress_fn_ != nullptr;
  }
  // Called every `every` events from Run() (progress bars); null to disable.
  void set_progress(void (*fn)(void* ctx, const Engine&), void* ctx, uint64_t every) {
    progress_fn_ = fn;
    observed_ = trace_fn_ != nullptr || progress_fn_ != nullptr;
    progress_ctx_ = ctx;
    progress_every_ = every == 0 ? 1 : every;
    progress_countdown_ = progress_every_;
  }

 private:
  // A wheel bucket is a chain of blocks, newest block first, each holding up
  // to kBlockEvents in schedule order. A lone event (the common case) and the
  // header share the first cache line; a bucket of a thousand events at one
  // picosecond (ranks in lockstep) costs a dependent load per seven events,
  // not per event. Blocks come from a free list.
  struct alignas(64) Block {
    uint32_t count;
    uint32_t next;
    uint32_t below;  // events in the older blocks of the chain (all full)
    Event events[kBlockEvents];
  };
  static_assert(sizeof(Block) == 256);
  static constexpr uint32_t kNone = ~uint32_t{0};
  // Wheel geometry: 2^kBucketShift ps per bucket, 2^kWheelBits buckets.
  // 512 ps: fewer, fuller buckets to load than 256 ps, less to sort in
  // each than 1024 ps (docs/PERFORMANCE.md).
  static constexpr int kBucketShift = 9;
  static constexpr int kWheelBits = 16;
  static constexpr uint64_t kWheelSize = uint64_t{1} << kWheelBits;
  static constexpr uint64_t kWheelMask = kWheelSize - 1;
  // How many events ahead the dispatcher fetches an event's object (and an
  // arrival's packet), then calls the kind's fetch hint.
  static constexpr size_t kObjAhead = 8;
  static constexpr size_t kHintAhead = 4;
  static_assert(kHintAhead < kObjAhead);
  // The window takes in the next bucket when fewer events than this remain,
  // so fetches ahead do not stop at a bucket's end.
  static constexpr size_t kWindowLow = kObjAhead + 1;
  // The window slides back to the front once this many events ran (and at
  // least as many as it still holds, so a slide copies no more than ran).
  static constexpr size_t kWindowSlide = 256;

  // Wheel and window order: by time, and stably (ties keep their order).
  static bool Before(const Event& a, const Event& b) { return a.time < b.time; }
  // The canonical order's tie key, (kind, component), and its wheel and
  // window order: by time, then that key, and stably.
  static uint64_t CanonKey(const Event& e) {
    return static_cast<uint64_t>(e.kind) << 32 | e.component;
  }
  static bool CanonBefore(const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && CanonKey(a) < CanonKey(b));
  }
  template <bool kCanonical>
  static bool OrderBefore(const Event& a, const Event& b) {
    return kCanonical ? CanonBefore(a, b) : Before(a, b);
  }
  // The heap's events carry their schedule number.
  // `key` is (kind, component) in the canonical order, 0 otherwise.
  struct FarEvent {
    Event e;
    uint64_t key;
    uint64_t seq;
  };
  static bool FarBefore(const FarEvent& a, const FarEvent& b) {
    if (a.e.time != b.e.time) return a.e.time < b.e.time;
    if (a.key != b.key) return a.key < b.key;
    return a.seq < b.seq;
  }
  // Run's loop, for the default order or the canonical one.
  template <bool kCanonical>
  uint64_t RunLoop(Picoseconds until);
  // The canonical order of a bucket's `n` events just sorted by time
  // (stably): each run of equal times sorted by CanonKey, stably.
  static void SortTiesByKey(Event* run, size_t n);
  // The wheel index of the first non-empty bucket after the active one
  // (wheel_count_ > 0).
  [[gnu::always_inline]] inline uint64_t NextBucketIndex() const;
  // Calls the fetch hint of `e`'s handler, if any.
  void Hint(const Event& e) const {
    const PrefetchFn fn = prefetchers_[e.handler];
    if (fn != nullptr) fn(e.obj, e.arg);
  }
  // A block for a bucket's chain, in front of `next` (kNone: a new chain).
  uint32_t NewBlock(uint32_t next);
  // Puts block `b` on the free list (its events are gone).
  void ReleaseBlock(uint32_t b) {
    blocks_[b].next = free_block_;
    free_block_ = b;
  }
  // Adds an event. The common case (a wheel bucket) writes the fields
  // straight into the bucket's block: an Event built on the stack and
  // copied was written as scalars and read back as vectors, which the CPU
  // cannot forward from its store buffer, a stall on every insert.
  [[gnu::always_inline]] inline void Insert(uint64_t time, EventKind kind, uint32_t component,
                                            HandlerId handler, void* obj, uint64_t arg);
  // Appends the next non-empty wheel bucket to the window, sorted.
  void LoadNextBucket();
  // Buckets of more events than this are sorted by SortLargeBucket.
  static constexpr size_t kInsertionSortMax = 32;
  // Writes the `n` events of the chain from `block` on to `run` in the
  // order they were scheduled, and frees the blocks.
  void CopyInScheduleOrder(uint32_t block, Event* run, size_t n);
  // Writes the `n` events of the chain from `block` on to `run`, sorted,
  // and frees the blocks.
  void SortLargeBucket(uint32_t block, Event* run, size_t n);
  void InsertActive(const Event& e);
  // Makes room for `n` more events at the window's end: slides the events
  // still to run to the front, growing the storage if they do not leave room.
  void WindowRoom(size_t n);
  // Moves `e` (just written at run[n]) down to its place in the sorted
  // run[0, n), shifting later events up.
  template <bool kCanonical = false>
  static void SinkInto(Event* run, size_t n, const Event& e) {
    const Event moving = e;  // `e` may be run[n], which the shift overwrites
    size_t i = n;
    while (i > 0 && OrderBefore<kCanonical>(moving, run[i - 1])) {
      run[i] = run[i - 1];
      --i;
    }
    run[i] = moving;
  }
  void FarPush(const Event& e);
  Event FarPop();
  void FarSiftUp(size_t hole, FarEvent e);  // by value: e may be far_[hole]

  uint64_t seed_;
  int64_t now_ps_ = 0;
  bool canonical_ = false;
  uint64_t digest_sum_ = 0;
  int64_t last_event_ps_ = 0;
  uint64_t far_seq_ = 0;  // schedule numbers of the heap's events
  static constexpr uint64_t kDigestStart = 0xcbf29ce484222325ULL;
  uint64_t digest_ = kDigestStart;
  uint64_t dispatched_ = 0;
  size_t peak_pending_ = 0;
  bool stop_ = false;
  size_t pending_ = 0;
  // The wheel: bucket b (absolute number time >> kBucketShift) lives at
  // index b & kWheelMask as a chain of blocks; a bit per bucket says non-empty,
  // a summary bit per 64 buckets says a word is non-empty. Every event in the
  // buckets has b in (active_bucket_, active_bucket_ + kWheelSize).
  std::vector<uint32_t> bucket_head_ = std::vector<uint32_t>(kWheelSize, kNone);
  std::vector<Block> blocks_;
  uint32_t free_block_ = kNone;
  std::vector<uint64_t> bucket_bits_ = std::vector<uint64_t>(kWheelSize / 64, 0);
  std::vector<uint64_t> bucket_summary_ = std::vector<uint64_t>(kWheelSize / 64 / 64, 0);
  size_t wheel_count_ = 0;  // events in the buckets (not in the window)
  // SortLargeBucket's counts by picosecond within a bucket: all zero
  // between calls.
  uint32_t bucket_keys_[1u << kBucketShift] = {};
  // The window: the events of every bucket up to active_bucket_, sorted;
  // [win_pos_, win_end_) still to run. Events due at or before active_bucket_
  // are inserted here, in order. Plain storage rather than a vector: a
  // bucket's events are appended by a copy loop (a bucket holds two or three
  // events, where a vector's range insert costs a library call), and the
  // window slides back to the front often, so that it stays in L1.
  uint64_t active_bucket_ = 0;
  std::unique_ptr<Event[]> win_;
  size_t win_pos_ = 0;
  size_t win_end_ = 0;
  size_t win_cap_ = 0;
  std::vector<FarEvent> far_;  // 4-ary min-heap of events beyond the wheel
  // far_'s earliest time, kNoTime when it is empty: the dispatcher compares
  // the window's next event with it, not with the heap (a load and a branch
  // fewer per event; on a tie the heap's event goes first).
  static constexpr uint64_t kNoTime = ~uint64_t{0};
  uint64_t far_time_ = kNoTime;
  // A tracer or a progress callback is set: one branch per event when
  // neither is.
  bool observed_ = false;
  PrefetchFn prefetchers_[kMaxHandlers] = {};  // by handler number
  uint64_t progress_countdown_ = 0;
  TraceFn trace_fn_ = nullptr;
  void* trace_ctx_ = nullptr;
  void (*progress_fn_)(void*, const Engine&) = nullptr;
  void* progress_ctx_ = nullptr;
  uint64_t progress_every_ = 1u << 20;
};

// The common case inline: an event within the wheel joins its bucket's chain.
inline void Engine::Insert(uint64_t time, EventKind kind, uint32_t component, HandlerId handler,
                           void* obj, uint64_t arg) {
  ++pending_;
  if (pending_ > peak_pending_) peak_pending_ = pending_;
  if (wheel_count_ == 0 && win_pos_ == win_end_) {
    // Nothing near is pending: the wheel starts over at the present.
    active_bucket_ = static_cast<uint64_t>(now_ps_) >> kBucketShift;
  }
  const uint64_t b = time >> kBucketShift;
  // The rare cases, out of line: due in the window already, or beyond the
  // wheel.
  if (b <= active_bucket_) {
    InsertActive(Event{time, obj, arg, component, kind, handler});
    return;
  }
  if (b - active_bucket_ >= kWheelSize) {
    FarPush(Event{time, obj, arg, component, kind, handler});
    return;
  }
  const uint64_t i = b & kWheelMask;
  uint32_t head = bucket_head_[i];
  if (head == kNone) {
    // The bucket's first event: it becomes non-empty.
    head = NewBlock(kNone);
    bucket_head_[i] = head;
    bucket_bits_[i >> 6] |= uint64_t{1} << (i & 63);
    bucket_summary_[i >> 12] |= uint64_t{1} << ((i >> 6) & 63);
  } else if (blocks_[head].count == kBlockEvents) {
    head = NewBlock(head);
    bucket_head_[i] = head;
  }
  Block& block = blocks_[head];
  Event& slot = block.events[block.count++];
  slot.time = time;
  slot.obj = obj;
  slot.arg = arg;
  slot.component = component;
  slot.kind = kind;
  slot.handler = handler;
  ++wheel_count_;
}

inline uint32_t Engine::NewBlock(uint32_t next) {
  uint32_t b = free_block_;
  if (b != kNone) {
    free_block_ = blocks_[b].next;
  } else {
    b = static_cast<uint32_t>(blocks_.size());
    blocks_.emplace_back();
  }
  blocks_[b].count = 0;
  blocks_[b].next = next;
  blocks_[b].below = next == kNone ? 0 : blocks_[next].below + kBlockEvents;
  return b;
}

}  // namespace fathom::sim
