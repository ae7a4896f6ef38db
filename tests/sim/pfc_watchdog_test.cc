// The PFC watchdog's state machine and the PFC deadlock finder on their own,
// with a scripted pause state: virtual times and counters only.
#include "fabric/sim/pfc_watchdog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "fabric/sim/pfc_deadlock.h"

namespace fathom::sim {
namespace {

Picoseconds Ms(int64_t ms) { return Picoseconds::FromMilliseconds(ms); }
Picoseconds Us(int64_t us) { return Picoseconds::FromMicroseconds(us); }

// A scripted queue: PAUSE holds it over each [start, end) interval.
struct Script {
  Engine* engine;
  std::vector<std::pair<Picoseconds, Picoseconds>> paused;
  std::vector<std::pair<Picoseconds, bool>> mitigations;  // when, on
  PfcWdAction last_action = PfcWdAction::kForward;
  static Picoseconds Since(void* ctx, Port*, int) {
    auto* s = static_cast<Script*>(ctx);
    const Picoseconds now = s->engine->Now();
    for (const auto& [a, b] : s->paused) {
      if (a <= now && now < b) return a;
    }
    return Picoseconds::Max();
  }
  // A PAUSE refresh every 100 us while paused.
  static uint64_t Frames(void* ctx, Port*, int) {
    auto* s = static_cast<Script*>(ctx);
    const Picoseconds now = s->engine->Now();
    uint64_t n = 0;
    for (const auto& [a, b] : s->paused) {
      if (a > now) continue;
      n += static_cast<uint64_t>(((std::min(now, b) - a).ps() + Us(100).ps() - 1) / Us(100).ps());
    }
    return n;
  }
  static void Mitigate(void* ctx, Port*, int, PfcWdAction action, bool on) {
    auto* s = static_cast<Script*>(ctx);
    s->mitigations.push_back({s->engine->Now(), on});
    s->last_action = action;
  }
  static uint64_t TxDropped(void*, Port*, int) { return 7; }
  PfcQueueControl Control() {
    return PfcQueueControl{&Since, &Frames, &Mitigate, &TxDropped, nullptr, this};
  }
};

// Keeps the engine busy until `until` so that the watchdog keeps polling.
void Nothing(void*, uint64_t) {}
void KeepAlive(Engine& engine, Picoseconds until) {
  engine.Schedule<&Nothing>(until, EventKind::kUser, 0, nullptr, 0);
}

TEST(PfcWatchdogTest, DetectsWithinOnePollOfTheDetectionTimeAndRestores) {
  Engine engine(1);
  Script script{&engine, {{Ms(1), Ms(500)}}, {}};
  PfcWatchdogConfig config;  // 200 ms detection and restoration, 100 ms polls
  PfcWatchdog wd(&engine, config, script.Control());
  Port* const port = reinterpret_cast<Port*>(0x1000);
  wd.Watch(port, 3);
  wd.Start();
  KeepAlive(engine, Ms(2000));
  engine.Run(Ms(2000));
  ASSERT_EQ(wd.events().size(), 2u);
  // Paused from 1 ms: stormed at the first poll at or after 201 ms.
  const PfcWatchdog::Event& d = wd.events()[0];
  EXPECT_TRUE(d.detected);
  EXPECT_EQ(d.paused_since, Ms(1));
  EXPECT_GE(d.at, Ms(201));
  EXPECT_LT(d.at, Ms(201) + config.poll_interval);
  EXPECT_EQ(d.at, Ms(300));
  EXPECT_EQ(d.port, port);
  EXPECT_EQ(d.tc, 3);
  // PAUSE stops at 500 ms; the poll at 500 ms sees its last frames, and
  // 200 ms later, none having come since, the queue is restored.
  const PfcWatchdog::Event& r = wd.events()[1];
  EXPECT_FALSE(r.detected);
  EXPECT_EQ(r.at, Ms(700));
  ASSERT_EQ(script.mitigations.size(), 2u);
  EXPECT_EQ(script.mitigations[0], (std::pair{Ms(300), true}));
  EXPECT_EQ(script.mitigations[1], (std::pair{Ms(700), false}));
  EXPECT_EQ(script.last_action, PfcWdAction::kDrop);
  const PfcWatchdog::QueueStats s = wd.stats(0);
  EXPECT_EQ(s.storm_detected, 1u);
  EXPECT_EQ(s.storm_restored, 1u);
  EXPECT_FALSE(s.stormed);
  EXPECT_EQ(s.tx_dropped_packets, 7u);
  EXPECT_EQ(s.rx_dropped_packets, 0u);
}

TEST(PfcWatchdogTest, APauseWithABreakIsNotAStorm) {
  Engine engine(1);
  // 149 ms, a 10 ms break, 190 ms: never 200 ms without a break.
  Script script{&engine, {{Ms(1), Ms(150)}, {Ms(160), Ms(350)}}, {}};
  PfcWatchdog wd(&engine, PfcWatchdogConfig{}, script.Control());
  wd.Watch(nullptr, 3);
  wd.Start();
  KeepAlive(engine, Ms(1000));
  engine.Run(Ms(1000));
  EXPECT_TRUE(wd.events().empty());
  EXPECT_EQ(wd.storms_detected(), 0u);
  EXPECT_TRUE(script.mitigations.empty());
}

TEST(PfcWatchdogTest, PauseThatResumesDuringMitigationDelaysRestoration) {
  Engine engine(1);
  // A 10 ms detection time (a scenario may set one below the deployed
  // 100 ms to keep virtual time short), 1 ms polls, 20 ms restoration; the
  // storm goes on while mitigated, stops 3 ms, comes back 5 ms, stops.
  PfcWatchdogConfig config;
  config.detection_time = Ms(10);
  config.restoration_time = Ms(20);
  config.poll_interval = Ms(1);
  config.action = PfcWdAction::kForward;
  Script script{&engine, {{Us(500), Ms(30)}, {Ms(33), Ms(38)}}, {}};
  PfcWatchdog wd(&engine, config, script.Control());
  wd.Watch(nullptr, 3);
  wd.Start();
  KeepAlive(engine, Ms(100));
  engine.Run(Ms(100));
  ASSERT_EQ(wd.events().size(), 2u);
  EXPECT_EQ(wd.events()[0].at, Ms(11));  // 0.5 ms + 10 ms, next poll
  // Free from 38 ms on: restored 20 ms later.
  EXPECT_EQ(wd.events()[1].at, Ms(58));
  EXPECT_EQ(script.last_action, PfcWdAction::kForward);
}

TEST(PfcWatchdogTest, StopsPollingWhenTheFabricIsIdle) {
  Engine engine(1);
  Script script{&engine, {}, {}};
  PfcWatchdog wd(&engine, PfcWatchdogConfig{}, script.Control());
  wd.Watch(nullptr, 3);
  wd.Start();
  engine.Run(Ms(10000));
  // One poll found nothing else pending and did not schedule another.
  EXPECT_EQ(wd.polls(), 1u);
}

Port* P(uintptr_t i) { return reinterpret_cast<Port*>(i * 64); }

TEST(PfcDeadlockTest, FindsTheCycleOfWaits) {
  // Four paused queues wait on each other in a ring 1 -> 2 -> 3 -> 4 -> 1;
  // 5 waits on 1 but is not on the ring; 6 is a holder that is not paused.
  const std::vector<PfcWait> waits = {
      {P(5), 3, {P(1)}}, {P(2), 3, {P(6), P(3)}}, {P(1), 3, {P(2)}},
      {P(3), 3, {P(4)}}, {P(4), 3, {P(1)}},
  };
  const std::vector<PfcQueue> cycle = FindPfcCycle(waits);
  ASSERT_EQ(cycle.size(), 4u);
  // Starts at the first queue of the ring in the waits' order (2).
  EXPECT_EQ(cycle[0], (PfcQueue{P(2), 3}));
  EXPECT_EQ(cycle[1], (PfcQueue{P(3), 3}));
  EXPECT_EQ(cycle[2], (PfcQueue{P(4), 3}));
  EXPECT_EQ(cycle[3], (PfcQueue{P(1), 3}));
}

TEST(PfcDeadlockTest, NoCycleInAChainOrAcrossClasses) {
  // An incast's pause tree: paused queues wait toward the congested port,
  // which is not paused.
  EXPECT_TRUE(FindPfcCycle({{P(1), 3, {P(9)}}, {P(2), 3, {P(9)}}, {P(3), 3, {P(1)}}}).empty());
  // A ring whose last wait is on another class is not a cycle.
  EXPECT_TRUE(FindPfcCycle({{P(1), 3, {P(2)}}, {P(2), 3, {P(3)}}, {P(3), 4, {P(1)}}}).empty());
  EXPECT_TRUE(FindPfcCycle({}).empty());
}

TEST(PfcDeadlockTest, ACycleMustPersistToBeADeadlock) {
  Engine engine(1);
  std::vector<PfcWait> now_waits;
  PfcDeadlockDetector det(
      &engine, [&] { return now_waits; }, Ms(1), Ms(2));
  // A ring whose second queue was paused at 1 ms (the first at 0).
  now_waits = {{P(1), 3, {P(2)}, Ms(0)}, {P(2), 3, {P(1)}, Ms(1)}};
  KeepAlive(engine, Ms(2));
  engine.Run(Ms(2));
  det.Check();  // closed 1 ms ago: not yet
  EXPECT_FALSE(det.deadlocked());
  // The second queue resumed and paused again at 2.5 ms: the clock restarts.
  now_waits[1].since = Us(2500);
  KeepAlive(engine, Ms(4));
  engine.Run(Ms(4));
  det.Check();
  EXPECT_FALSE(det.deadlocked());
  det.Start();
  KeepAlive(engine, Ms(10));
  engine.Run(Ms(10));
  ASSERT_TRUE(det.deadlocked());
  EXPECT_EQ(det.first_seen(), Us(2500));
  EXPECT_EQ(det.declared_at(), Ms(5));  // the first check at or after 4.5 ms
  EXPECT_EQ(det.cycle().size(), 2u);
}

}  // namespace
}  // namespace fathom::sim
