// The canonical event order (Engine::set_canonical_order): ties in time by
// (kind, component), then schedule order; a digest that sums per-event
// digests, so engines that split the events give the one engine's digest.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "base/rng.h"
#include "fabric/sim/engine.h"

namespace fathom::sim {
namespace {

struct Seen {
  Engine* engine;
  std::vector<std::tuple<int64_t, uint32_t, uint64_t>> order;  // time, component, arg
  static void On(void* obj, uint64_t arg) {
    auto* s = static_cast<Seen*>(obj);
    s->engine->TraceMix(arg * 0x9e37);
    s->order.emplace_back(s->engine->Now().ps(), static_cast<uint32_t>(arg >> 32), arg);
  }
};

struct Planned {
  int64_t time;
  EventKind kind;
  uint32_t component;
  uint64_t arg;
};

std::vector<Planned> Plan(uint64_t seed) {
  Rng rng(seed, 1);
  std::vector<Planned> plan;
  for (uint64_t i = 0; i < 3000; ++i) {
    const uint32_t component = static_cast<uint32_t>(rng.Below(40));
    plan.push_back({static_cast<int64_t>(rng.Below(50)),
                    rng.Below(2) == 0 ? EventKind::kArrival : EventKind::kNicPump, component,
                    (uint64_t{component} << 32) | i});
  }
  return plan;
}

TEST(CanonicalOrderTest, TiesGoByKindAndComponentThenScheduleOrder) {
  Engine engine(1);
  engine.set_canonical_order(true);
  Seen seen{&engine, {}};
  std::vector<Planned> plan = Plan(5);
  for (const Planned& p : plan) {
    engine.Schedule<&Seen::On>(Picoseconds(p.time), p.kind, p.component, &seen, p.arg);
  }
  EXPECT_EQ(engine.Run(), plan.size());
  std::stable_sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) {
    return std::tie(a.time, a.kind, a.component) < std::tie(b.time, b.kind, b.component);
  });
  ASSERT_EQ(seen.order.size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(std::get<2>(seen.order[i]), plan[i].arg) << i;
  }
}

TEST(CanonicalOrderTest, DigestOfSplitEnginesIsTheOneEnginesDigest) {
  const std::vector<Planned> plan = Plan(9);
  auto run = [&](auto keep, bool reversed) {
    Engine engine(1);
    engine.set_canonical_order(true);
    Seen seen{&engine, {}};
    std::vector<Planned> mine;
    for (const Planned& p : plan) {
      if (keep(p)) mine.push_back(p);
    }
    // Schedule order differs between runs; the digest must not care
    // (distinct (time, kind, component) keys here only where it matters:
    // same-key events keep their relative order in both).
    if (reversed) {
      std::stable_partition(mine.begin(), mine.end(),
                            [](const Planned& p) { return p.component % 3 == 0; });
    }
    for (const Planned& p : mine) {
      engine.Schedule<&Seen::On>(Picoseconds(p.time), p.kind, p.component, &seen, p.arg);
    }
    engine.Run();
    return std::pair{engine.digest_sum(), engine.trace_digest()};
  };
  const auto [all_sum, all_digest] = run([](const Planned&) { return true; }, false);
  const auto [even, even_digest] = run([](const Planned& p) { return p.component % 2 == 0; }, true);
  const auto [odd, odd_digest] = run([](const Planned& p) { return p.component % 2 == 1; }, false);
  EXPECT_EQ(Engine::CanonicalDigest(even + odd), all_digest);
  EXPECT_NE(even_digest, all_digest);
  // The default order's digest is a different function (not a sum).
  Engine plain(1);
  Seen seen{&plain, {}};
  for (const Planned& p : plan) {
    plain.Schedule<&Seen::On>(Picoseconds(p.time), p.kind, p.component, &seen, p.arg);
  }
  plain.Run();
  EXPECT_NE(plain.trace_digest(), all_digest);
  (void)all_sum;
  (void)odd_digest;
}

TEST(CanonicalOrderTest, RetainEventsDropsWhatAPartitionDoesNotOwn) {
  Engine engine(1);
  engine.set_canonical_order(true);
  Seen seen{&engine, {}};
  for (uint32_t c = 0; c < 10; ++c) {
    engine.Schedule<&Seen::On>(Picoseconds(100 - c), EventKind::kFlowStart, c, &seen,
                               uint64_t{c} << 32);
  }
  engine.RetainEvents([](const Event& e) { return e.component % 2 == 0; });
  EXPECT_EQ(engine.pending(), 5u);
  EXPECT_EQ(engine.NextEventTime().ps(), 92);
  EXPECT_EQ(engine.Run(), 5u);
  for (const auto& [t, c, arg] : seen.order) EXPECT_EQ(c % 2, 0u);
  EXPECT_EQ(engine.last_event_time().ps(), 100);
}

// A workload whose handlers schedule more events, at the same picosecond,
// within a bucket, a few buckets on, and beyond the wheel (the heap): the
// engine must dispatch it in exactly (time, kind, component, schedule
// order), as a plain ordered set does. The times are multiples of 512 ps
// plus a few offsets, so most events tie with others (and buckets of
// hundreds of ties take the large-bucket sort).
struct Spawner {
  Engine* engine = nullptr;
  uint64_t scheduled = 0;
  static constexpr uint64_t kLimit = 60000;
  std::vector<std::pair<int64_t, uint64_t>> seen;  // time, arg
  struct Child {
    int64_t at;
    EventKind kind;
    uint32_t component;
    uint64_t arg;
  };
  // The children of the event `arg` at `now`: the same in the engine and the
  // reference, while fewer than kLimit events were scheduled.
  static std::vector<Child> Children(int64_t now, uint64_t arg, uint64_t* scheduled) {
    std::vector<Child> out;
    const uint64_t h = Mix64(arg);
    const uint64_t n = h % 3;
    for (uint64_t j = 0; j < n && *scheduled < kLimit; ++j, ++*scheduled) {
      const uint64_t c = Mix64(h + j);
      static constexpr int64_t kDelays[] = {0, 0, 3, 512, 512, 1024, 5 * 512, 70'000'000};
      const int64_t at = now + kDelays[c % 8];
      out.push_back({at, (c >> 8) % 2 == 0 ? EventKind::kArrival : EventKind::kNicPump,
                     static_cast<uint32_t>((c >> 16) % 6), c});
    }
    return out;
  }
  static void On(void* obj, uint64_t arg) {
    auto* s = static_cast<Spawner*>(obj);
    const int64_t now = s->engine->Now().ps();
    s->seen.emplace_back(now, arg);
    for (const Child& c : Children(now, arg, &s->scheduled)) {
      s->engine->Schedule<&Spawner::On>(Picoseconds(c.at), c.kind, c.component, s, c.arg);
    }
  }
};

TEST(CanonicalOrderTest, WheelAndHeapDispatchInTheCanonicalOrder) {
  // The first events: 400 at one picosecond of bucket 2 (a large bucket of
  // ties), and 200 spread over the first microsecond.
  std::vector<Spawner::Child> first;
  for (uint64_t i = 0; i < 600; ++i) {
    const uint64_t c = Mix64(i ^ 0x5eed);
    first.push_back({i < 400 ? 1100 : static_cast<int64_t>(c % 1'000'000),
                     c % 2 == 0 ? EventKind::kArrival : EventKind::kNicPump,
                     static_cast<uint32_t>((c >> 8) % 6), c});
  }
  Engine engine(1);
  engine.set_canonical_order(true);
  Spawner spawner;
  spawner.engine = &engine;
  spawner.scheduled = first.size();
  for (const Spawner::Child& c : first) {
    engine.Schedule<&Spawner::On>(Picoseconds(c.at), c.kind, c.component, &spawner, c.arg);
  }
  engine.Run();

  // The reference: an ordered set of (time, kind, component, schedule
  // number).
  std::set<std::tuple<int64_t, EventKind, uint32_t, uint64_t, uint64_t>> pending;
  uint64_t number = 0;
  for (const Spawner::Child& c : first) pending.emplace(c.at, c.kind, c.component, number++, c.arg);
  std::vector<std::pair<int64_t, uint64_t>> expected;
  uint64_t scheduled = first.size();
  while (!pending.empty()) {
    const auto [at, kind, component, seq, arg] = *pending.begin();
    pending.erase(pending.begin());
    expected.emplace_back(at, arg);
    for (const Spawner::Child& c : Spawner::Children(at, arg, &scheduled)) {
      pending.emplace(c.at, c.kind, c.component, number++, c.arg);
    }
  }
  ASSERT_GT(expected.size(), 50000u);
  ASSERT_EQ(spawner.seen.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(spawner.seen[i], expected[i]) << "event " << i;
  }
}

TEST(CanonicalOrderTest, RetainEventsAndNextEventTimeSeeTheWheelAndTheHeap) {
  // Events in the window (bucket 0), in wheel buckets and beyond the wheel.
  Engine engine(1);
  engine.set_canonical_order(true);
  Seen seen{&engine, {}};
  const int64_t times[] = {300, 200, 5000, 4000, 900'000, 800'000, 90'000'000, 80'000'000};
  auto schedule = [&](uint32_t c) {
    engine.Schedule<&Seen::On>(Picoseconds(times[c]), EventKind::kFlowStart, c, &seen,
                               uint64_t{c} << 32);
  };
  // First only beyond the window: the next event is found in the wheel.
  for (uint32_t c = 2; c < 8; ++c) schedule(c);
  EXPECT_EQ(engine.NextEventTime().ps(), 4000);
  schedule(0);
  schedule(1);
  EXPECT_EQ(engine.NextEventTime().ps(), 200);
  engine.RetainEvents([](const Event& e) { return e.component % 2 == 0; });
  EXPECT_EQ(engine.pending(), 4u);
  EXPECT_EQ(engine.NextEventTime().ps(), 300);
  EXPECT_EQ(engine.Run(Picoseconds(1000)), 1u);
  EXPECT_EQ(engine.NextEventTime().ps(), 5000);
  engine.RetainEvents([](const Event& e) { return e.component != 2; });
  EXPECT_EQ(engine.NextEventTime().ps(), 900'000);
  EXPECT_EQ(engine.Run(Picoseconds(1'000'000)), 1u);
  EXPECT_EQ(engine.NextEventTime().ps(), 90'000'000);
  EXPECT_EQ(engine.Run(), 1u);
  EXPECT_EQ(engine.NextEventTime(), Picoseconds::Max());
  ASSERT_EQ(seen.order.size(), 3u);
  EXPECT_EQ(std::get<1>(seen.order[0]), 0u);
  EXPECT_EQ(std::get<1>(seen.order[1]), 4u);
  EXPECT_EQ(std::get<1>(seen.order[2]), 6u);
}

}  // namespace
}  // namespace fathom::sim
