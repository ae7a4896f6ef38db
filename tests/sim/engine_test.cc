#include "fabric/sim/engine.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <tuple>
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
    engine.Schedule<&Recorder::On>(Picoseconds(t), EventKind::kUser, 0, &rec, i);
    expected.emplace_back(t, i);
  }
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  EXPECT_EQ(engine.Run(), 5000u);
  EXPECT_EQ(rec.seen, expected);
}

// Events whose handlers schedule 0-2 more events each, `delay` after Now(),
// until `max_events` were scheduled; records the order they ran in and the
// order an ordered set of (time, schedule sequence) gives them.
struct OrderCheck {
  Engine* engine;
  Rng rng;
  std::function<int64_t(Rng&)> delay;
  uint64_t max_events;
  uint64_t next_id = 0;
  std::set<std::tuple<int64_t, uint64_t>> reference;  // (time, id = schedule sequence)
  std::vector<uint64_t> seen;

  void Add(int64_t at) {
    const uint64_t id = next_id++;
    reference.emplace(at, id);
    engine->Schedule<&OrderCheck::On>(Picoseconds(at), EventKind::kUser, 0, this, id);
  }
  static void On(void* obj, uint64_t id) {
    auto* c = static_cast<OrderCheck*>(obj);
    c->seen.push_back(id);
    if (c->next_id >= c->max_events) return;
    const int n = static_cast<int>(c->rng.Below(3));
    for (int i = 0; i < n; ++i) c->Add(c->engine->Now().ps() + c->delay(c->rng));
  }
  std::vector<uint64_t> Expected() const {
    std::vector<uint64_t> ids;
    for (const auto& [t, id] : reference) ids.push_back(id);
    return ids;
  }
};

// Handlers schedule more events (some at Now(), many ties) while the list is
// large: the order must be exactly (time, schedule order), as a plain ordered
// set of (time, sequence) gives it.
TEST(EngineTest, EventsScheduledFromHandlersKeepTimeThenScheduleOrder) {
  Engine engine;
  OrderCheck check{&engine, Rng(5, 6),
                   [](Rng& r) { return static_cast<int64_t>(r.Below(4) * 1000); }, 200000};
  for (int i = 0; i < 3000; ++i) check.Add(static_cast<int64_t>(check.rng.Below(50)) * 1000);
  // Run in slices too: stopping at a time limit must not disturb the order.
  engine.Run(Picoseconds(20000));
  engine.Run(Picoseconds(20000));
  engine.Run();
  ASSERT_EQ(check.seen.size(), check.reference.size());
  EXPECT_EQ(check.seen, check.Expected());
  EXPECT_GT(engine.peak_pending(), 1000u);
}

// The wheel holds the near future and a heap the rest: events spread from
// picoseconds to seconds ahead, scheduled from handlers, across wheel turns
// and gaps where only far events remain, must still run in (time, schedule
// order), as an ordered set gives it.
TEST(EngineTest, NearAndFarEventsInterleaveInExactOrder) {
  auto spread = [](Rng& r) -> int64_t {
    switch (r.Below(6)) {
      case 0:
        return 0;  // now: joins the window being run
      case 1:
        return static_cast<int64_t>(r.Below(2048));  // the same or the next buckets
      case 2:
        return static_cast<int64_t>(r.Below(400000));  // a few hundred ns
      case 3:
        return static_cast<int64_t>(r.Below(40000000));  // past one wheel turn
      case 4:
        return 16777216 - 1024 + static_cast<int64_t>(r.Below(4096));  // the wheel's edge
      default:
        return static_cast<int64_t>(r.Below(2000000000000));  // up to 2 s
    }
  };
  Engine engine;
  OrderCheck check{&engine, Rng(11, 12), spread, 100000};
  for (int i = 0; i < 500; ++i) check.Add(spread(check.rng));
  engine.Run(Picoseconds(5000000));
  engine.Run(Picoseconds(900000000000));
  engine.Run();
  ASSERT_EQ(check.seen.size(), check.reference.size());
  EXPECT_EQ(check.seen, check.Expected());
  EXPECT_EQ(engine.pending(), 0u);
}

// Ranks in lockstep: a thousand events at one picosecond, each scheduling
// its next a fixed time later, some a few picoseconds off (the same wheel
// bucket, a different time). Buckets then hold hundreds of events over many
// blocks, some already in order and some not; the order must stay exact.
TEST(EngineTest, LockstepBucketsOfManyEventsKeepExactOrder) {
  auto step = [](Rng& r) -> int64_t {
    return 84000 + (r.Below(4) == 0 ? static_cast<int64_t>(r.Below(200)) : 0);
  };
  Engine engine;
  OrderCheck check{&engine, Rng(21, 22), step, 200000};
  for (int i = 0; i < 1000; ++i) check.Add(0);
  engine.Run();
  ASSERT_EQ(check.seen.size(), check.reference.size());
  EXPECT_EQ(check.seen, check.Expected());
  EXPECT_GT(engine.peak_pending(), 500u);
}

// Large buckets whose events are spread over every picosecond a bucket
// spans, and over neighbouring buckets, in no particular schedule order:
// each is sorted without comparisons, and the order must stay exact,
// bucket after bucket (the sort leaves nothing behind for the next).
TEST(EngineTest, LargeBucketsSpreadOverEveryPicosecondKeepExactOrder) {
  auto step = [](Rng& r) -> int64_t {
    return 84000 + static_cast<int64_t>(r.Below(r.Below(2) == 0 ? 3 : 1500));
  };
  Engine engine;
  OrderCheck check{&engine, Rng(31, 32), step, 300000};
  for (int i = 0; i < 2000; ++i) check.Add(static_cast<int64_t>(check.rng.Below(700)));
  engine.Run();
  ASSERT_EQ(check.seen.size(), check.reference.size());
  EXPECT_EQ(check.seen, check.Expected());
  EXPECT_GT(engine.peak_pending(), 1000u);
}

// Large buckets in which every run of consecutively scheduled events is in
// time order but the runs are not, each run filling the bucket's blocks
// whole or part (runs of the block size, one less and one more): the sort
// must see the order across blocks, not only within them. And buckets in
// order throughout, which it copies as they are.
TEST(EngineTest, LargeBucketsInOrderWithinBlocksButNotAcrossThemKeepExactOrder) {
  constexpr int kBlock = static_cast<int>(Engine::kBlockEvents);
  for (int run_length : {kBlock - 1, kBlock, kBlock + 1}) {
    Engine engine;
    OrderCheck check{&engine, Rng(41, 42), [](Rng&) -> int64_t { return 0; }, 0};
    int64_t bucket = 100 * 512;
    for (int runs = 8; runs <= 12; ++runs, bucket += 4096) {
      // Descending runs, each ascending: later runs start earlier.
      for (int r = 0; r < runs; ++r) {
        for (int i = 0; i < run_length; ++i) check.Add(bucket + (runs - r) * 20 + i);
      }
      // The next bucket in order throughout (ties included).
      for (int i = 0; i < runs * run_length; ++i) check.Add(bucket + 2048 + i / 3);
    }
    engine.Run();
    ASSERT_EQ(check.seen.size(), check.reference.size()) << "runs of " << run_length;
    EXPECT_EQ(check.seen, check.Expected()) << "runs of " << run_length;
  }
}

// TiesBetweenFarAndNearEventsGoInScheduleOrder's handler (at namespace
// scope: a handler is a template argument, which needs linkage).
struct Chain {
  Engine* engine;
  Recorder* rec;
  int64_t t;
  static void On(void* obj, uint64_t arg) {
    auto* c = static_cast<Chain*>(obj);
    Recorder::On(c->rec, arg);
    if (arg == 0) {  // at 90 us: two for t, now within a wheel turn
      c->engine->Schedule<&Chain::On>(Picoseconds(c->t), EventKind::kUser, 0, c, 2);
      c->engine->Schedule<&Chain::On>(Picoseconds(c->t), EventKind::kUser, 0, c, 3);
    } else if (arg == 2) {  // at t: one more for t itself
      c->engine->Schedule<&Chain::On>(Picoseconds(c->t), EventKind::kUser, 0, c, 4);
    }
  }
};

// An event scheduled beyond the wheel's reach, and events scheduled later for
// the same picosecond once it is near (into the wheel, and from a handler
// running at that picosecond, into the window being run): the far one was
// scheduled first and runs first, then the others in schedule order.
TEST(EngineTest, TiesBetweenFarAndNearEventsGoInScheduleOrder) {
  Engine engine;
  Recorder rec{&engine, {}};
  const int64_t t = 100000000;  // 100 us: beyond the wheel (33.6 us) at time 0
  Chain chain{&engine, &rec, t};
  engine.Schedule<&Chain::On>(Picoseconds(t), EventKind::kUser, 0, &chain, 1);
  engine.Schedule<&Chain::On>(Picoseconds(90000000), EventKind::kUser, 0, &chain, 0);
  EXPECT_EQ(engine.Run(), 5u);
  EXPECT_EQ(rec.seen, (std::vector<std::pair<int64_t, uint64_t>>{
                          {90000000, 0}, {t, 1}, {t, 2}, {t, 3}, {t, 4}}));
}

// An event names its handler by number: one number per function, the same
// whichever way it is asked for, and the table gives the function back.
TEST(EngineTest, HandlersAreNumberedOncePerFunction) {
  const HandlerId recorder = RegisterHandler(&Recorder::On);
  EXPECT_EQ(RegisterHandler(&Recorder::On), recorder);
  EXPECT_EQ(kHandlerOf<&Recorder::On>, recorder);
  EXPECT_EQ(g_event_handlers[recorder], &Recorder::On);
  const HandlerId chain = kHandlerOf<&Chain::On>;
  EXPECT_NE(chain, recorder);
  EXPECT_EQ(g_event_handlers[chain], &Chain::On);
}

TEST(EngineTest, RunUntilStopsAndResumes) {
  Engine engine;
  Recorder rec{&engine, {}};
  engine.Schedule<&Recorder::On>(Picoseconds(10), EventKind::kUser, 0, &rec, 1);
  engine.Schedule<&Recorder::On>(Picoseconds(30), EventKind::kUser, 0, &rec, 2);
  EXPECT_EQ(engine.Run(Picoseconds(20)), 1u);
  EXPECT_EQ(engine.Now(), Picoseconds(20));
  EXPECT_EQ(engine.Run(), 1u);
  EXPECT_EQ(engine.Now(), Picoseconds(30));
}

TEST(EngineTest, DigestDependsOnEventsAndIsReproducible) {
  auto digest = [](int64_t second_time) {
    Engine engine;
    Recorder rec{&engine, {}};
    engine.Schedule<&Recorder::On>(Picoseconds(5), EventKind::kUser, 1, &rec, 0);
    engine.Schedule<&Recorder::On>(Picoseconds(second_time), EventKind::kUser, 2, &rec, 0);
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
