#include "fabric/sim/engine.h"

#include <cinttypes>

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

void Engine::Push(const Event& e) {
  size_t i = heap_.size();
  heap_.push_back(e);
  if (heap_.size() > peak_pending_) peak_pending_ = heap_.size();
  Event* h = heap_.data();
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    if (!Before(e, h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

Event Engine::PopMin() {
  Event top = heap_.front();
  Event last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (n == 0) return top;
  Event* h = heap_.data();
  size_t i = 0;
  for (;;) {
    size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    size_t end = c + 4 < n ? c + 4 : n;
    for (size_t j = c + 1; j < end; ++j) {
      if (Before(h[j], h[best])) best = j;
    }
    if (!Before(h[best], last)) break;
    h[i] = h[best];
    i = best;
  }
  h[i] = last;
  return top;
}

uint64_t Engine::Run(Picoseconds until) {
  stop_ = false;
  uint64_t n = 0;
  while (!heap_.empty() && !stop_) {
    if (heap_.front().time_ps > until.ps()) break;
    Event e = PopMin();
    now_ps_ = e.time_ps;
    digest_ = Mix64(digest_ ^ static_cast<uint64_t>(e.time_ps)) ^
              ((static_cast<uint64_t>(e.kind) << 32) | e.component);
    if (trace_file_ != nullptr) {
      std::fprintf(trace_file_, "%" PRId64 " %u %u\n", e.time_ps, static_cast<unsigned>(e.kind),
                   e.component);
    }
    e.fn(e.obj, e.arg);
    ++n;
    ++dispatched_;
    if (progress_fn_ != nullptr && dispatched_ % progress_every_ == 0) {
      progress_fn_(progress_ctx_, *this);
    }
  }
  // Time advances to `until` when the run ends by reaching it, so that a
  // later Run() continues from there.
  if (!stop_ && until != Picoseconds::Max() && now_ps_ < until.ps()) now_ps_ = until.ps();
  return n;
}

}  // namespace fathom::sim
