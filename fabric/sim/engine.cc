#include "fabric/sim/engine.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace fathom::sim {

EventFn g_event_handlers[kMaxHandlers] = {};

HandlerId RegisterHandler(EventFn fn) {
  // A function-local mutex and count: handlers register during static
  // initialization, in no fixed order between files.
  static std::mutex mu;
  static size_t count = 0;
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = 0; i < count; ++i) {
    if (g_event_handlers[i] == fn) return static_cast<HandlerId>(i);
  }
  if (count == kMaxHandlers) {
    std::fprintf(stderr, "fathom::sim::RegisterHandler: more than %zu event handlers\n",
                 kMaxHandlers);
    std::abort();
  }
  g_event_handlers[count] = fn;
  return static_cast<HandlerId>(count++);
}

Engine::Engine(uint64_t seed) : seed_(seed) {
  win_cap_ = 1024;
  win_ = std::make_unique<Event[]>(win_cap_);
  blocks_.resize(256);
  for (uint32_t b = static_cast<uint32_t>(blocks_.size()); b-- > 0;) ReleaseBlock(b);
}

void Engine::WindowRoom(size_t n) {
  const size_t live = win_end_ - win_pos_;
  if (win_end_ + n <= win_cap_ && (win_pos_ < kWindowSlide || win_pos_ < live)) return;
  Event* to = win_.get();
  if (live + n > win_cap_ / 2) {
    // Grow: half the storage free after the slide keeps slides rare.
    win_cap_ = std::max<size_t>(2 * (live + n), 1024);
    auto bigger = std::make_unique<Event[]>(win_cap_);
    std::copy(win_.get() + win_pos_, win_.get() + win_end_, bigger.get());
    win_ = std::move(bigger);
  } else if (win_pos_ > 0) {
    std::copy(to + win_pos_, to + win_end_, to);  // left overlap: forward copy
  }
  win_pos_ = 0;
  win_end_ = live;
}

// How far InsertActive steps an event back one place at a time in the
// canonical order before it bisects.
constexpr size_t kStepBack = 8;

void Engine::InsertActive(const Event& e) {
  // Usually the latest of the window (it has the highest sequence number);
  // otherwise the later ones shift up.
  // In the canonical order it goes after every event of its key or a lesser
  // one, which were all scheduled before it.
  WindowRoom(1);
  Event* w = win_.get();
  w[win_end_] = e;
  if (canonical_) {
    // Ranks in lockstep leave hundreds of ties in the window, and an event
    // of a lesser key (a CQ's, made by an arrival) goes before the rest of
    // them. A few places back are stepped as SinkInto does; beyond, the
    // place is found by bisection and the rest moved as one block. The same
    // place as SinkInto's (the sorted run's first event the new one
    // precedes).
    Event* run = w + win_pos_;
    const Event moving = e;
    size_t i = win_end_ - win_pos_;
    const size_t stop = i > kStepBack ? i - kStepBack : 0;
    while (i > stop && CanonBefore(moving, run[i - 1])) {
      run[i] = run[i - 1];
      --i;
    }
    if (i > 0 && i == stop && CanonBefore(moving, run[i - 1])) {
      Event* at = std::upper_bound(run, run + i, moving, CanonBefore);
      std::memmove(static_cast<void*>(at + 1), at,
                   static_cast<size_t>(run + i - at) * sizeof(Event));
      *at = moving;
    } else {
      run[i] = moving;
    }
  } else {
    SinkInto(w + win_pos_, win_end_ - win_pos_, w[win_end_]);
  }
  ++win_end_;
}

inline uint64_t Engine::NextBucketIndex() const {
  // The first non-empty bucket after the current one, going round the wheel
  // once: every bucket event lies within one turn, so wheel order is time
  // order.
  const uint64_t from = (active_bucket_ + 1) & kWheelMask;
  uint64_t index = 0;
  bool found = false;
  // The rest of `from`'s word, then the summary from the next word on, then
  // the words before it (the wrap), then `from`'s word below `from`.
  const uint64_t w0 = from >> 6;
  const uint64_t first = bucket_bits_[w0] & (~uint64_t{0} << (from & 63));
  if (first != 0) {
    index = (w0 << 6) | static_cast<uint64_t>(__builtin_ctzll(first));
    found = true;
  } else {
    const uint64_t words = kWheelSize / 64;
    for (uint64_t step = 1; step <= words && !found; ++step) {
      const uint64_t w = (w0 + step) & (words - 1);
      // Skip 64 empty words at a time through the summary when aligned.
      if ((w & 63) == 0 && step + 64 <= words && bucket_summary_[w >> 6] == 0) {
        step += 63;
        continue;
      }
      uint64_t bits = bucket_bits_[w];
      if (w == w0) bits &= ~(~uint64_t{0} << (from & 63));
      if (bits != 0) {
        index = (w << 6) | static_cast<uint64_t>(__builtin_ctzll(bits));
        found = true;
      }
    }
  }
  if (!found) std::abort();  // wheel_count_ > 0 says a bucket holds events
  return index;
}

void Engine::LoadNextBucket() {
  const uint64_t index = NextBucketIndex();
  const uint64_t from = (active_bucket_ + 1) & kWheelMask;
  active_bucket_ += ((index - from) & kWheelMask) + 1;
  uint32_t block = bucket_head_[index];
  bucket_head_[index] = kNone;
  bucket_bits_[index >> 6] &= ~(uint64_t{1} << (index & 63));
  // The next bucket's newest block, when this word of the bitmap names it:
  // the next call reads it first, and it was written a microsecond or more
  // ago (a few thousand events at 1024 hosts), long enough to leave the
  // cache.
  if (const uint64_t later = bucket_bits_[index >> 6] & (~uint64_t{0} << (index & 63));
      later != 0) {
    const uint32_t next = bucket_head_[(index & ~uint64_t{63}) | __builtin_ctzll(later)];
    __builtin_prefetch(&blocks_[next]);
    __builtin_prefetch(reinterpret_cast<const char*>(&blocks_[next]) + 64);
  }
  if (bucket_bits_[index >> 6] == 0) {
    bucket_summary_[index >> 12] &= ~(uint64_t{1} << ((index >> 6) & 63));
  }
  // The chain holds its newest block first, which counts the others.
  const size_t n = size_t{blocks_[block].below} + blocks_[block].count;
  WindowRoom(n);
  Event* run = win_.get() + win_end_;
  win_end_ += n;
  wheel_count_ -= n;
  // Every event here is later than every event already in the window (an
  // earlier bucket), so only the new run needs sorting, stably (ties keep
  // their schedule order).
  if (n > kInsertionSortMax) {
    SortLargeBucket(block, run, n);
    if (canonical_) [[unlikely]]
      SortTiesByKey(run, n);
    return;
  }
  // Small, as it nearly always is: in schedule order (which is often time
  // order too), then sorted by insertion.
  CopyInScheduleOrder(block, run, n);
  if (canonical_) [[unlikely]] {
    for (size_t i = 1; i < n; ++i) {
      if (CanonBefore(run[i], run[i - 1])) SinkInto<true>(run, i, run[i]);
    }
    return;
  }
  // Often in time order already: only an event earlier than the one
  // before it moves.
  for (size_t i = 1; i < n; ++i) {
    if (Before(run[i], run[i - 1])) SinkInto(run, i, run[i]);
  }
}

void Engine::SortTiesByKey(Event* run, size_t n) {
  for (size_t from = 0; from < n;) {
    size_t to = from + 1;
    while (to < n && run[to].time == run[from].time) ++to;
    if (to - from <= kInsertionSortMax) {
      for (size_t i = from + 1; i < to; ++i) {
        if (CanonKey(run[i]) < CanonKey(run[i - 1])) {
          SinkInto<true>(run + from, i - from, run[i]);
        }
      }
    } else {
      // Hundreds of ties (ranks in lockstep): a merge sort, which keeps
      // schedule order among equal keys.
      std::stable_sort(run + from, run + to,
                       [](const Event& a, const Event& b) { return CanonKey(a) < CanonKey(b); });
    }
    from = to;
  }
}

void Engine::CopyInScheduleOrder(uint32_t block, Event* run, size_t n) {
  // The chain holds its newest block first: each block goes to its place
  // counted from the end.
  size_t to = n;
  while (block != kNone) {
    Block& b = blocks_[block];
    to -= b.count;
    for (uint32_t i = 0; i < b.count; ++i) run[to + i] = b.events[i];
    const uint32_t next = b.next;
    ReleaseBlock(block);
    block = next;
  }
}

void Engine::SortLargeBucket(uint32_t block, Event* run, size_t n) {
  // Large buckets come from ranks, NICs or links in lockstep: hundreds of
  // events over a few distinct picoseconds (1.8 on average at 1024 hosts),
  // most often scheduled in time order already (two thirds of them there).
  // One pass over the blocks counts each key (the picosecond within the
  // bucket) and checks that order. A bucket in order is copied as it is,
  // oldest block first. Otherwise a counting sort puts each event in its
  // place without comparisons: the counts become the end of each key's
  // range, and the events are placed newest first from those ends down,
  // which keeps ties in schedule order. Both passes keep the current key's
  // count or end in a register while the key repeats: a count in memory,
  // updated event after event, makes each update wait for the last.
  // Only the keys in use are summed and cleared.
  constexpr uint32_t kKeyMask = (1u << kBucketShift) - 1;
  constexpr uint32_t kNoKey = ~uint32_t{0};
  uint32_t* ends = bucket_keys_;
  uint32_t lo = kKeyMask;
  uint32_t hi = 0;
  uint32_t key_now = kNoKey;  // the key being counted, and its count so far
  uint32_t key_count = 0;
  // The chain runs newest block first: the sequence is in order when each
  // block is, and each ends no later than the newer block starts.
  bool in_order = true;
  uint64_t newer_first = ~uint64_t{0};
  for (uint32_t b = block; b != kNone; b = blocks_[b].next) {
    const Block& k = blocks_[b];
    if (k.next != kNone) {
      // The next block, whole (the chain is the only way to it).
      const char* next = reinterpret_cast<const char*>(&blocks_[k.next]);
      for (int line = 0; line < 4; ++line) __builtin_prefetch(next + 64 * line);
    }
    uint64_t prev = 0;
    for (uint32_t i = 0; i < k.count; ++i) {
      const uint64_t time = k.events[i].time;
      in_order &= prev <= time;
      prev = time;
      const uint32_t key = static_cast<uint32_t>(time) & kKeyMask;
      if (key != key_now) {
        if (key_now != kNoKey) ends[key_now] += key_count;
        key_now = key;
        key_count = 0;
      }
      ++key_count;
      lo = key < lo ? key : lo;
      hi = key > hi ? key : hi;
    }
    in_order &= prev <= newer_first;
    newer_first = k.count > 0 ? k.events[0].time : newer_first;
  }
  if (key_now != kNoKey) ends[key_now] += key_count;
  if (in_order) {
    CopyInScheduleOrder(block, run, n);
    std::fill(ends + lo, ends + hi + 1, 0u);
    return;
  }
  uint32_t sum = 0;
  for (uint32_t key = lo; key <= hi; ++key) {
    sum += ends[key];
    ends[key] = sum;
  }
  key_now = kNoKey;
  uint32_t end = 0;  // key_now's end
  while (block != kNone) {
    Block& b = blocks_[block];
    for (uint32_t i = b.count; i-- > 0;) {
      const Event& e = b.events[i];
      const uint32_t key = static_cast<uint32_t>(e.time) & kKeyMask;
      if (key != key_now) {
        if (key_now != kNoKey) ends[key_now] = end;
        key_now = key;
        end = ends[key];
      }
      run[--end] = e;
    }
    const uint32_t next = b.next;
    ReleaseBlock(block);
    block = next;
  }
  // Each end is now its range's start; the next large bucket counts from 0.
  std::fill(ends + lo, ends + hi + 1, 0u);
}

// Places `e` at the hole `i` or above it, moving larger parents down.
void Engine::FarSiftUp(size_t i, const FarEvent e) {
  FarEvent* h = far_.data();
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (!FarBefore(e, h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

void Engine::FarPush(const Event& e) {
  const uint64_t key =
      canonical_ ? (static_cast<uint64_t>(e.kind) << 32 | e.component) : uint64_t{0};
  far_.push_back(FarEvent{e, key, far_seq_++});
  FarSiftUp(far_.size() - 1, far_.back());
  far_time_ = far_[0].e.time;
}

// Removes the root by walking the hole down to a leaf along the least child,
// then sifting the last event up from there: the last one almost always
// belongs near the bottom, which saves comparing it at every level.
Event Engine::FarPop() {
  FarEvent* h = far_.data();
  const Event top = h[0].e;
  const size_t n = far_.size() - 1;
  const FarEvent last = h[n];
  far_.pop_back();
  if (n == 0) {
    far_time_ = kNoTime;
    return top;
  }
  size_t i = 0;
  for (;;) {
    const size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    const size_t end = c + 4 < n ? c + 4 : n;
    for (size_t j = c + 1; j < end; ++j) {
      if (FarBefore(h[j], h[best])) best = j;
    }
    h[i] = h[best];
    i = best;
  }
  FarSiftUp(i, last);
  far_time_ = far_[0].e.time;
  return top;
}

Picoseconds Engine::NextEventTime() const {
  uint64_t t = far_time_;
  if (win_pos_ < win_end_) {
    // The window is sorted, and its events are earlier than the buckets'.
    t = std::min(t, win_[win_pos_].time);
  } else if (wheel_count_ > 0) {
    for (uint32_t b = bucket_head_[NextBucketIndex()]; b != kNone; b = blocks_[b].next) {
      for (uint32_t i = 0; i < blocks_[b].count; ++i) t = std::min(t, blocks_[b].events[i].time);
    }
  }
  return t == kNoTime ? Picoseconds::Max() : Picoseconds(static_cast<int64_t>(t));
}

void Engine::RetainEvents(const std::function<bool(const Event&)>& keep) {
  size_t dropped = 0;
  // The window: in place, in order.
  size_t to = win_pos_;
  for (size_t i = win_pos_; i < win_end_; ++i) {
    if (keep(win_[i])) win_[to++] = win_[i];
  }
  dropped += win_end_ - to;
  win_end_ = to;
  // The wheel: each bucket's chain out in schedule order, and what is kept
  // back in the same order (a bucket's order is its schedule order).
  std::vector<Event> chain;
  for (uint64_t w = 0; w < kWheelSize / 64; ++w) {
    for (uint64_t bits = bucket_bits_[w]; bits != 0; bits &= bits - 1) {
      const uint64_t i = (w << 6) | static_cast<uint64_t>(__builtin_ctzll(bits));
      const uint32_t head = bucket_head_[i];
      const size_t n = size_t{blocks_[head].below} + blocks_[head].count;
      chain.resize(n);
      CopyInScheduleOrder(head, chain.data(), n);
      wheel_count_ -= n;
      uint32_t block = kNone;
      for (const Event& e : chain) {
        if (!keep(e)) {
          ++dropped;
          continue;
        }
        if (block == kNone || blocks_[block].count == kBlockEvents) block = NewBlock(block);
        blocks_[block].events[blocks_[block].count++] = e;
        ++wheel_count_;
      }
      bucket_head_[i] = block;
      if (block == kNone) bucket_bits_[w] &= ~(uint64_t{1} << (i & 63));
    }
  }
  for (uint64_t w = 0; w < kWheelSize / 64; ++w) {
    const uint64_t bit = uint64_t{1} << (w & 63);
    if (bucket_bits_[w] != 0) {
      bucket_summary_[w >> 6] |= bit;
    } else {
      bucket_summary_[w >> 6] &= ~bit;
    }
  }
  // The heap.
  std::vector<FarEvent> kept;
  for (const FarEvent& f : far_) {
    if (keep(f.e)) kept.push_back(f);
  }
  dropped += far_.size() - kept.size();
  far_.clear();
  for (const FarEvent& f : kept) {
    far_.push_back(f);
    FarSiftUp(far_.size() - 1, far_.back());
  }
  far_time_ = far_.empty() ? kNoTime : far_[0].e.time;
  pending_ -= dropped;
}

uint64_t Engine::Run(Picoseconds until) {
  return canonical_ ? RunLoop<true>(until) : RunLoop<false>(until);
}

template <bool kCanonical>
uint64_t Engine::RunLoop(Picoseconds until) {
  stop_ = false;
  uint64_t n = 0;
  const uint64_t limit = static_cast<uint64_t>(until.ps() < 0 ? 0 : until.ps());
  while (!stop_) {
    if (win_end_ - win_pos_ < kWindowLow && wheel_count_ > 0) {
      LoadNextBucket();  // never empty: wheel_count_ > 0
    }
    Event e;
    // On a tie the heap's event goes first (it was scheduled first; see the
    // header), so the window's goes only when strictly earlier (in the
    // canonical order: earlier, or at that time with a lesser key).
    bool from_window = win_pos_ < win_end_ && win_[win_pos_].time < far_time_;
    if constexpr (kCanonical) {
      from_window = from_window || (win_pos_ < win_end_ && win_[win_pos_].time == far_time_ &&
                                    CanonKey(win_[win_pos_]) < far_[0].key);
    }
    if (from_window) {
      // Fetch ahead within the sorted window: the object (a Port, mostly)
      // and packet of the event kObjAhead turns on; then the kind's hint
      // follows the pointers from there, kHintAhead turns on. At 1024 hosts
      // all of these are cold by the time their turn comes.
      const size_t pos = win_pos_;
      const Event* w = win_.get();
      const size_t size = win_end_;
      if (w[pos].time > limit) break;
      if (pos + kObjAhead < size) {
        const Event& ahead = w[pos + kObjAhead];
        // Objects keep their hot fields in two lines: a NIC's, and a port's
        // for an arrival (the ring in the first, the buffer account the
        // arrival settles in the second). An arrival reads its packet too.
        __builtin_prefetch(ahead.obj);
        __builtin_prefetch(static_cast<const char*>(ahead.obj) + 64);
        if (ahead.kind == EventKind::kArrival) {
          __builtin_prefetch(reinterpret_cast<const void*>(ahead.arg));
        }
      }
      if (pos + kHintAhead < size) Hint(w[pos + kHintAhead]);
      e = w[pos];
      ++win_pos_;
    } else if (!far_.empty()) {
      if (far_[0].e.time > limit) break;
      e = FarPop();
    } else {
      break;
    }
    --pending_;
    now_ps_ = static_cast<int64_t>(e.time);
    if constexpr (kCanonical) {
      // This event's own digest: the same fold as the default order's, from
      // a fixed start, then mixed in full and summed (order-independent).
      last_event_ps_ = now_ps_;
      digest_ = kDigestStart;
    }
    TraceMix(e.time);
    digest_ ^= (static_cast<uint64_t>(e.kind) << 32) | e.component;
    if (observed_ && trace_fn_ != nullptr) {
      trace_fn_(trace_ctx_, Picoseconds(now_ps_), e.kind, e.component);
    }
    g_event_handlers[e.handler](e.obj, e.arg);
    if constexpr (kCanonical) digest_sum_ += Mix64(digest_);
    ++n;
    ++dispatched_;
    if (observed_ && progress_fn_ != nullptr && --progress_countdown_ == 0) {
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
