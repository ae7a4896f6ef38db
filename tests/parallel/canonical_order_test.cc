// The canonical event order (Engine::set_canonical_order): ties in time by
// (kind, component), then schedule order; a digest that sums per-event
// digests, so engines that split the events give the one engine's digest.
#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace
}  // namespace fathom::sim
