#include "fabric/sim/engine.h"

#include <cinttypes>
#include <cstdlib>

namespace fathom::sim {

Rng::Rng(uint64_t seed, uint64_t component) {
  uint64_t x = Mix64(seed ^ Mix64(component + 0x632be59bd9b4e019ULL));
  for (uint64_t& s : s_) {
    x += 0x9e3779b97f4a7c15ULL;
    s = Mix64(x);
  }
}

uint64_t Rng::Next() {
  auto rotl = [](uint64_t v, int k) { return (v << k) | (v >> (64 - k)); };
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint32_t Engine::NewSlot() {
  if (bodies_.size() > kSlotMask) {
    // More pending events than a key can name: a runaway model, not a load
    // this engine is built for. Stop loudly rather than misorder events.
    std::fprintf(stderr, "fathom sim: more than %llu pending events\n",
                 static_cast<unsigned long long>(kSlotMask + 1));
    std::abort();
  }
  bodies_.emplace_back();
  return static_cast<uint32_t>(bodies_.size() - 1);
}

// Places `k` at the hole `i` or above it, moving larger parents down.
inline void Engine::SiftUp(size_t i, const Key& k) {
  Key* h = heap_.data();
  const Uint128 rank = Rank(k);
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (rank >= Rank(h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = k;
}

void Engine::Push(const Key& k) {
  heap_.push_back(k);
  if (heap_.size() > peak_pending_) peak_pending_ = heap_.size();
  SiftUp(heap_.size() - 1, k);
}

// Removes the root by walking the hole down to a leaf along the least child,
// then sifting the last key up from there: the last key almost always
// belongs near the bottom, which saves comparing it at every level.
Engine::Key Engine::PopMin() {
  Key* h = heap_.data();
  const Key top = h[0];
  const size_t n = heap_.size() - 1;
  const Key last = h[n];
  heap_.pop_back();
  if (n == 0) return top;
  size_t i = 0;
  for (;;) {
    const size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    Uint128 best_rank = Rank(h[c]);
    const size_t end = c + 4 < n ? c + 4 : n;
    for (size_t j = c + 1; j < end; ++j) {
      const Uint128 r = Rank(h[j]);
      const bool less = r < best_rank;
      best = less ? j : best;
      best_rank = less ? r : best_rank;
    }
    h[i] = h[best];
    i = best;
  }
  SiftUp(i, last);
  return top;
}

uint64_t Engine::Run(Picoseconds until) {
  stop_ = false;
  uint64_t n = 0;
  const uint64_t limit = static_cast<uint64_t>(until.ps() < 0 ? 0 : until.ps());
  while (!heap_.empty() && !stop_) {
    if (heap_.front().time > limit) break;
    const Key k = PopMin();
    const uint32_t slot = static_cast<uint32_t>(k.seq_slot & kSlotMask);
    const EventBody e = bodies_[slot];
    free_slots_.push_back(slot);
    // The next event's object (a Port, mostly) is cold by the time its turn
    // comes at 1024 hosts; start fetching it while this handler runs.
    if (!heap_.empty()) __builtin_prefetch(bodies_[heap_.front().seq_slot & kSlotMask].obj);
    now_ps_ = static_cast<int64_t>(k.time);
    digest_ = Mix64(digest_ ^ k.time) ^ ((static_cast<uint64_t>(e.kind) << 32) | e.component);
    if (trace_file_ != nullptr) {
      std::fprintf(trace_file_, "%" PRId64 " %u %u\n", now_ps_, static_cast<unsigned>(e.kind),
                   e.component);
    }
    e.fn(e.obj, e.arg);
    ++n;
    ++dispatched_;
    if (progress_fn_ != nullptr && --progress_countdown_ == 0) {
      progress_countdown_ = progress_every_;
      progress_fn_(progress_ctx_, *this);
    }
  }
  // Time advances to `until` when the run ends by reaching it, so that a
  // later Run() continues from there.
  if (!stop_ && until != Picoseconds::Max() && now_ps_ < until.ps()) now_ps_ = until.ps();
  return n;
}

}  // namespace fathom::sim
