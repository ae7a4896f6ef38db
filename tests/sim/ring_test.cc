#include "fabric/sim/ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "fabric/sim/engine.h"

namespace fathom::sim {
namespace {

struct Item {
  uint64_t a = 0;
  uint32_t b = 0;
};

TEST(RingTest, StartsEmptyAndKeepsFifoOrderAcrossGrowth) {
  Ring<Item> r;
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.size(), 0u);
  for (uint32_t i = 0; i < 100; ++i) r.push_back(Item{i * 10, i});
  ASSERT_EQ(r.size(), 100u);
  EXPECT_EQ(r.front().b, 0u);
  EXPECT_EQ(r.back().b, 99u);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(r[i].a, i * 10u);
  std::vector<uint32_t> seen;
  for (const Item& it : r) seen.push_back(it.b);
  ASSERT_EQ(seen.size(), 100u);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
}

// Random pushes and pops, wrapping round and growing while wrapped, against
// std::deque: the NIC's queues rely on exactly its semantics.
TEST(RingTest, MatchesADequeUnderRandomOperations) {
  Ring<Item> r;
  std::deque<Item> d;
  Rng rng(1, 2);
  for (int step = 0; step < 200000; ++step) {
    const uint64_t op = rng.Below(10);
    if (op < 5 || d.empty()) {
      const Item it{rng.Next(), static_cast<uint32_t>(step)};
      r.push_back(it);
      d.push_back(it);
    } else if (op < 8) {
      r.pop_front();
      d.pop_front();
    } else if (op < 9) {
      r.pop_back();
      d.pop_back();
    } else if (rng.Below(100) == 0) {
      r.clear();
      d.clear();
    }
    ASSERT_EQ(r.size(), d.size());
    if (!d.empty()) {
      ASSERT_EQ(r.front().b, d.front().b);
      ASSERT_EQ(r.back().b, d.back().b);
      const size_t i = rng.Below(d.size());
      ASSERT_EQ(r[i].a, d[i].a);
      ASSERT_EQ(r.at_address(i), &r[i]);
    }
  }
}

TEST(RingTest, MovesItsStorage) {
  Ring<Item> r;
  for (uint32_t i = 0; i < 20; ++i) r.push_back(Item{i, i});
  r.pop_front();
  Ring<Item> moved = std::move(r);
  ASSERT_EQ(moved.size(), 19u);
  EXPECT_EQ(moved.front().b, 1u);
  EXPECT_EQ(moved.back().b, 19u);
}

}  // namespace
}  // namespace fathom::sim
