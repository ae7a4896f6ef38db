// FlowModel (fabric/sim/flow_model.h): max-min fair rates by progressive
// filling, finish times in integer picoseconds.
#include "fabric/sim/flow_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fathom::sim {
namespace {

struct Done {
  std::vector<std::pair<uint64_t, int64_t>> at;  // tag, time
  Engine* engine;
};
void OnDone(void* ctx, uint64_t tag) {
  Done* d = static_cast<Done*>(ctx);
  d->at.emplace_back(tag, d->engine->Now().ps());
}

// ceil(bytes * 8 / rate) in picoseconds.
int64_t LineTimePs(uint64_t bytes, int64_t bps) {
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(bytes) * 8e12 / static_cast<double>(bps)));
}

TEST(FlowModelTest, AloneAFlowRunsAtTheSlowestLinksRate) {
  Engine engine(1);
  FlowModel m(&engine);
  const int32_t a = m.AddLink(BitsPerSecond::Gbps(400));
  const int32_t b = m.AddLink(BitsPerSecond::Gbps(100));
  const int32_t c = m.AddLink(BitsPerSecond::Gbps(400));
  Done d{{}, &engine};
  const std::vector<int32_t> path{a, b, c};
  const int32_t f = m.Start(path, 1'000'003, &OnDone, &d, 7);
  EXPECT_DOUBLE_EQ(m.RateBps(f), 100e9);
  engine.Run();
  ASSERT_EQ(d.at.size(), 1u);
  EXPECT_EQ(d.at[0].first, 7u);
  EXPECT_EQ(d.at[0].second, LineTimePs(1'000'003, 100'000'000'000));
  EXPECT_EQ(m.running(), 0u);
}

// Slot classes (FlowModel::SetClasses, for FlowFabric::Plan): a class's
// flows take its own slots, whatever the other classes run, the finishes
// of an uncounted class come out of the digest, and the one pool comes
// back afresh.
TEST(FlowModelTest, ClassesTakeTheirOwnSlots) {
  Engine engine(1);
  FlowModel m(&engine);
  const int32_t a = m.AddLink(BitsPerSecond::Gbps(400));
  const int32_t b = m.AddLink(BitsPerSecond::Gbps(400));
  Done d{{}, &engine};
  const std::vector<int32_t> pa{a}, pb{b};
  EXPECT_EQ(m.Start(pa, 4096, &OnDone, &d, 1), 0);  // the one pool
  EXPECT_FALSE(m.SetClasses({2, 1}, {1, 0}));       // a flow runs
  engine.Run();
  ASSERT_TRUE(m.SetClasses({2, 1}, {1, 0}));
  EXPECT_EQ(m.Start(pb, 4096, &OnDone, &d, 2, 2), 2);  // class 2: slot 2
  EXPECT_EQ(m.Start(pa, 4096, &OnDone, &d, 3, 1), 0);  // class 1: slots 0, 1
  EXPECT_EQ(m.Start(pa, 4096, &OnDone, &d, 4, 1), 1);
  engine.Run();
  ASSERT_EQ(d.at.size(), 4u);
  // Class 2's finish (one event) is not counted here; class 1's are.
  EXPECT_EQ(m.uncounted_events(), 1u);
  EXPECT_EQ(m.Start(pa, 4096, &OnDone, &d, 5, 1), 1);  // the last freed first
  engine.Run();
  ASSERT_TRUE(m.SetClasses({}, {}));
  EXPECT_EQ(m.Start(pb, 4096, &OnDone, &d, 6), 0);  // the one pool, afresh
  EXPECT_EQ(m.Start(pb, 4096, &OnDone, &d, 7), 1);
  engine.Run();
  EXPECT_EQ(d.at.size(), 7u);
}

TEST(FlowModelTest, TwoFlowsOnOneLinkGetHalfEach) {
  Engine engine(1);
  FlowModel m(&engine);
  const int32_t shared = m.AddLink(BitsPerSecond::Gbps(400));
  const int32_t x = m.AddLink(BitsPerSecond::Gbps(400));
  const int32_t y = m.AddLink(BitsPerSecond::Gbps(400));
  Done d{{}, &engine};
  const std::vector<int32_t> p1{x, shared}, p2{y, shared};
  const int32_t f1 = m.Start(p1, 1 << 20, &OnDone, &d, 1);
  const int32_t f2 = m.Start(p2, 1 << 20, &OnDone, &d, 2);
  EXPECT_DOUBLE_EQ(m.RateBps(f1), 200e9);
  EXPECT_DOUBLE_EQ(m.RateBps(f2), 200e9);
  engine.Run();
  ASSERT_EQ(d.at.size(), 2u);
  EXPECT_EQ(d.at[0].second, LineTimePs(1 << 20, 200'000'000'000));
  EXPECT_EQ(d.at[1].second, d.at[0].second);
}

TEST(FlowModelTest, MaxMinFairnessGivesTheSparePartOfALinkToTheUnconstrainedFlow) {
  // A crosses l0 (100G) and l1 (400G), B l1 only, D l0 only. A and D share
  // l0: 50G each; B gets what A leaves of l1, 350G.
  Engine engine(1);
  FlowModel m(&engine);
  const int32_t l0 = m.AddLink(BitsPerSecond::Gbps(100));
  const int32_t l1 = m.AddLink(BitsPerSecond::Gbps(400));
  Done d{{}, &engine};
  const std::vector<int32_t> pa{l0, l1}, pb{l1}, pd{l0};
  const int32_t a = m.Start(pa, 1 << 20, &OnDone, &d, 1);
  const int32_t b = m.Start(pb, 1 << 20, &OnDone, &d, 2);
  const int32_t dd = m.Start(pd, 1 << 20, &OnDone, &d, 3);
  EXPECT_DOUBLE_EQ(m.RateBps(a), 50e9);
  EXPECT_DOUBLE_EQ(m.RateBps(dd), 50e9);
  EXPECT_DOUBLE_EQ(m.RateBps(b), 350e9);
}

TEST(FlowModelTest, AFinishSpeedsUpTheFlowsThatSharedItsLinks) {
  Engine engine(1);
  FlowModel m(&engine);
  const int32_t l = m.AddLink(BitsPerSecond::Gbps(400));
  Done d{{}, &engine};
  const std::vector<int32_t> p{l};
  m.Start(p, 1'000'000, &OnDone, &d, 1);
  m.Start(p, 3'000'000, &OnDone, &d, 2);
  engine.Run();
  ASSERT_EQ(d.at.size(), 2u);
  // Both at 200G until the first has sent 1 MB (it and 1 MB of the second);
  // then the second alone at 400G for its last 2 MB.
  const int64_t t1 = LineTimePs(1'000'000, 200'000'000'000);
  EXPECT_EQ(d.at[0].first, 1u);
  EXPECT_EQ(d.at[0].second, t1);
  EXPECT_EQ(d.at[1].first, 2u);
  EXPECT_NEAR(static_cast<double>(d.at[1].second),
              static_cast<double>(t1 + LineTimePs(2'000'000, 400'000'000'000)), 1.0);
  EXPECT_EQ(m.stats().flows, 2u);
}

TEST(FlowModelTest, APassTakesItsLoneTimeAndLeavesTheFlowsOnItsLinksAlone) {
  // A 1 MB flow on a (400G) and b (100G); a 70-byte pass on the same links
  // starts while it runs: the pass takes 70 bytes at 100G, the flow keeps
  // the whole 100G and finishes when it would have alone.
  Engine engine(1);
  FlowModel m(&engine);
  const int32_t a = m.AddLink(BitsPerSecond::Gbps(400));
  const int32_t b = m.AddLink(BitsPerSecond::Gbps(100));
  Done d{{}, &engine};
  const std::vector<int32_t> path{a, b};
  const int32_t f = m.Start(path, 1'000'000, &OnDone, &d, 1);
  const int32_t p = m.Pass(path, 70, &OnDone, &d, 2);
  EXPECT_NE(p, f);
  EXPECT_DOUBLE_EQ(m.RateBps(f), 100e9);
  EXPECT_EQ(m.running(), 2u);
  engine.Run();
  ASSERT_EQ(d.at.size(), 2u);
  EXPECT_EQ(d.at[0].first, 2u);
  EXPECT_EQ(d.at[0].second, LineTimePs(70, 100'000'000'000));
  EXPECT_EQ(d.at[1].first, 1u);
  EXPECT_EQ(d.at[1].second, LineTimePs(1'000'000, 100'000'000'000));
  // One component walk: the flow's own start, alone; none for the pass.
  EXPECT_EQ(m.stats().recomputes, 1u);
  EXPECT_EQ(m.stats().flows, 1u);
  EXPECT_EQ(m.stats().passes, 1u);
  EXPECT_EQ(m.running(), 0u);
}

}  // namespace
}  // namespace fathom::sim
