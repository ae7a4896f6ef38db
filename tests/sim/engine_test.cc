#include "fabric/sim/engine.h"

#include <gtest/gtest.h>

#include <vector>

namespace fathom::sim {
namespace {

struct Recorder {
  Engine* engine;
  std::vector<std::pair<int64_t, uint64_t>> seen;
  static void On(void* obj, uint64_t arg) {
    auto* r = static_cast<Recorder*>(obj);
    r->seen.emplace_back(r->engine->Now().ps(), arg);
  }
};

TEST(EngineTest, DispatchesInTimeOrderAndTiesInScheduleOrder) {
  Engine engine(7);
  Recorder rec{&engine, {}};
  Rng rng(3, 4);
  std::vector<std::pair<int64_t, uint64_t>> expected;
  for (uint64_t i = 0; i < 5000; ++i) {
    const int64_t t = static_cast<int64_t>(rng.Below(100));  // many ties
    engine.Schedule(Picoseconds(t), EventKind::kUser, 0, &Recorder::On, &rec, i);
    expected.emplace_back(t, i);
  }
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  EXPECT_EQ(engine.Run(), 5000u);
  EXPECT_EQ(rec.seen, expected);
}

TEST(EngineTest, RunUntilStopsAndResumes) {
  Engine engine;
  Recorder rec{&engine, {}};
  engine.Schedule(Picoseconds(10), EventKind::kUser, 0, &Recorder::On, &rec, 1);
  engine.Schedule(Picoseconds(30), EventKind::kUser, 0, &Recorder::On, &rec, 2);
  EXPECT_EQ(engine.Run(Picoseconds(20)), 1u);
  EXPECT_EQ(engine.Now(), Picoseconds(20));
  EXPECT_EQ(engine.Run(), 1u);
  EXPECT_EQ(engine.Now(), Picoseconds(30));
}

TEST(EngineTest, DigestDependsOnEventsAndIsReproducible) {
  auto digest = [](int64_t second_time) {
    Engine engine;
    Recorder rec{&engine, {}};
    engine.Schedule(Picoseconds(5), EventKind::kUser, 1, &Recorder::On, &rec, 0);
    engine.Schedule(Picoseconds(second_time), EventKind::kUser, 2, &Recorder::On, &rec, 0);
    engine.Run();
    return engine.trace_digest();
  };
  EXPECT_EQ(digest(9), digest(9));
  EXPECT_NE(digest(9), digest(10));
}

TEST(RngTest, StreamsDependOnSeedAndComponent) {
  Rng a(1, 1), b(1, 1), c(1, 2), d(2, 1);
  const uint64_t va = a.Next();
  EXPECT_EQ(va, b.Next());
  EXPECT_NE(va, c.Next());
  EXPECT_NE(va, d.Next());
  for (int i = 0; i < 1000; ++i) {
    EXPECT_LT(a.Below(7), 7u);
    const double u = a.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace fathom::sim
