// The discrete-event engine of the fabric simulator: virtual time in integer
// picoseconds, an event list, and the trace digest that proves determinism.
//
// There is no global engine: every component holds the Engine* it was built
// with. An event is a POD (time, sequence, handler, object, argument); the
// handler is a plain function pointer called with the object pointer, so the
// hot path makes no allocation and no virtual call (STYLE.md, htsim-like).
// Ties in time are broken by a monotonic sequence number: the same inputs give
// the same order, bit for bit.
//
// The event list is a 4-ary min-heap of 16-byte keys (time, then sequence
// and slot) compared as one 128-bit number, so that a pop picks the least of
// four children without a branch, the four in 64 bytes; what an
// event does sits in a slot array the heap never moves.
//
// Threading: an Engine and everything scheduled on it belong to one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "base/units.h"

namespace fathom::sim {

__extension__ typedef unsigned __int128 Uint128;

using EventFn = void (*)(void* obj, uint64_t arg);

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

// What an event does: the handler and its arguments. The event list keeps
// these in slots apart from the 16-byte keys it orders, so that reordering the
// list moves keys only (four to a cache line).
struct EventBody {
  EventFn fn;
  void* obj;
  uint64_t arg;
  uint32_t component;
  EventKind kind;
};

// 64-bit mixing (splitmix64's finalizer): fast, good avalanche.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A per-component random stream: xoshiro256** seeded through splitmix64 from
// hash(scenario seed, component id), so adding a component never shifts the
// numbers another one sees.
class Rng {
 public:
  Rng() : Rng(0, 0) {}
  Rng(uint64_t seed, uint64_t component);
  uint64_t Next();
  // Uniform in [0, n); n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<Uint128>(Next()) * n) >> 64);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

class Engine {
 public:
  explicit Engine(uint64_t seed = 1) : seed_(seed) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Picoseconds Now() const { return Picoseconds(now_ps_); }
  uint64_t seed() const { return seed_; }
  Rng MakeRng(uint64_t component) const { return Rng(seed_, component); }

  // Schedules fn(obj, arg) at absolute time `at` (>= Now(); earlier times are
  // clamped to Now(), which keeps causality).
  void Schedule(Picoseconds at, EventKind kind, uint32_t component, EventFn fn, void* obj,
                uint64_t arg) {
    const int64_t t = at.ps() < now_ps_ ? now_ps_ : at.ps();
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = NewSlot();
    }
    bodies_[slot] = EventBody{fn, obj, arg, component, kind};
    Push(Key{static_cast<uint64_t>(t), (next_seq_++ << kSlotBits) | slot});
  }

  // Runs events until the list is empty, the next event is later than
  // `until`, or Stop() is called. Returns the number of events dispatched.
  uint64_t Run(Picoseconds until = Picoseconds::Max());
  void Stop() { stop_ = true; }

  // Folds a handler's key fields (PSN, QPN, ...) into the digest.
  void TraceMix(uint64_t v) { digest_ = Mix64(digest_ ^ (v + 0x9e3779b97f4a7c15ULL)); }
  uint64_t trace_digest() const { return digest_; }
  uint64_t events_dispatched() const { return dispatched_; }
  size_t pending() const { return heap_.size(); }
  // Largest the event list has been (for memory figures).
  size_t peak_pending() const { return peak_pending_; }
  // When set, every dispatched event is written as one line
  // "time_ps kind component" (costly; for --trace only). Not owned.
  void set_trace_file(FILE* f) { trace_file_ = f; }
  // Called every `every` events from Run() (progress bars); null to disable.
  void set_progress(void (*fn)(void* ctx, const Engine&), void* ctx, uint64_t every) {
    progress_fn_ = fn;
    progress_ctx_ = ctx;
    progress_every_ = every == 0 ? 1 : every;
    progress_countdown_ = progress_every_;
  }

 private:
  // An entry of the event list: the time, then the schedule sequence number
  // (ties in time go in schedule order) with the body's slot in its low bits;
  // ordered as one 128-bit number. 40 bits of sequence last 10^12 events; 24
  // bits of slot allow 16.7 M pending events.
  struct Key {
    uint64_t time;
    uint64_t seq_slot;
  };
  static constexpr int kSlotBits = 24;
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
  uint32_t NewSlot();
  void Push(const Key& k);
  Key PopMin();
  void SiftUp(size_t hole, const Key& k);
  static Uint128 Rank(const Key& k) { return (static_cast<Uint128>(k.time) << 64) | k.seq_slot; }

  uint64_t seed_;
  int64_t now_ps_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t digest_ = 0xcbf29ce484222325ULL;
  uint64_t dispatched_ = 0;
  size_t peak_pending_ = 0;
  bool stop_ = false;
  std::vector<Key> heap_;  // the event list
  std::vector<EventBody> bodies_;
  std::vector<uint32_t> free_slots_;
  uint64_t progress_countdown_ = 0;
  FILE* trace_file_ = nullptr;
  void (*progress_fn_)(void*, const Engine&) = nullptr;
  void* progress_ctx_ = nullptr;
  uint64_t progress_every_ = 1u << 20;
};

}  // namespace fathom::sim
