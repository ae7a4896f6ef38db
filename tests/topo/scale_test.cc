// Issue 30: a k=64 fat-tree (the xxlarge preset, 65,536 hosts) builds and
// routes within a memory bound, in a process of its own so that its peak
// RSS (getrusage) is this topology's. With routing tables it needed about
// 27 GB and died of bad_alloc; computed routing needs the graph only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>

#include "topologies/builders.h"

namespace fathom::topo {
namespace {

// The bound this test asserts on the process's peak RSS: generous against
// the topology estimate (about 80 MiB), far below the tables' 27 GB.
constexpr int64_t kK64PeakRssBound = int64_t{512} << 20;  // 512 MiB

int64_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
}

TEST(Scale, K64BuildsAndRoutesWithinTheMemoryBound) {
  ::unsetenv("FATHOM_TOPOLOGY_MEMORY_LIMIT");
  auto t = BuildPreset("xxlarge");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name(), "fat-tree k=64");
  ASSERT_EQ(t->hosts().size(), 65536u);
  EXPECT_EQ(t->nodes().size(), 65536u + 64 * 32 * 2 + 32 * 32);
  EXPECT_EQ(t->links().size(), 65536u + 64u * 32 * 32 * 2);
  EXPECT_EQ(t->routing(), Routing::kUpDown);
  const int64_t estimate = EstimateTopologyBytes(
      static_cast<int64_t>(t->nodes().size()), static_cast<int64_t>(t->hosts().size()),
      static_cast<int64_t>(t->links().size()), Routing::kUpDown);
  EXPECT_LE(estimate, kDefaultTopologyMemoryLimit);
  // Route: walk every host to a partner far away (another pod) and to its
  // neighbours, taking a hash-chosen ECMP port at each hop; each walk
  // reaches its destination in exactly HopCount hops.
  const auto& hosts = t->hosts();
  const size_t n = hosts.size();
  int64_t walks = 0;
  for (size_t s = 0; s < n; ++s) {
    for (size_t offset : {size_t{1}, size_t{17}, n / 2 + 3}) {
      const int32_t src = hosts[s];
      const int32_t dst = hosts[(s + offset) % n];
      int32_t node = src;
      int hops = 0;
      uint64_t mix = s * 0x9E3779B97F4A7C15ull + offset;
      while (node != dst && hops < 8) {
        const auto set = t->NextHops(node, dst);
        ASSERT_FALSE(set.empty()) << t->node(node).name << " -> " << t->node(dst).name;
        mix = mix * 6364136223846793005ull + 1442695040888963407ull;
        node = t->Peer(node, set[(mix >> 33) % set.size()]).node;
        ++hops;
      }
      ASSERT_EQ(node, dst);
      ASSERT_EQ(hops, t->HopCount(src, dst));
      ++walks;
    }
  }
  EXPECT_EQ(walks, static_cast<int64_t>(3 * n));
  EXPECT_EQ(t->HopCount(hosts[0], hosts[n - 1]), 6);
  const int64_t rss = PeakRssBytes();
  std::printf("k=64 fat-tree: estimate %s, peak RSS %s (bound %s)\n", FormatBytes(estimate).c_str(),
              FormatBytes(rss).c_str(), FormatBytes(kK64PeakRssBound).c_str());
  EXPECT_LE(rss, kK64PeakRssBound);
}

TEST(Scale, TooBigIsRefusedUpFrontWithTheEstimate) {
  ::unsetenv("FATHOM_TOPOLOGY_MEMORY_LIMIT");
  // 2^20 hosts with 16 M leaf-spine links: several GiB of graph alone.
  auto t = BuildPreset("leaf-spine:leaves=16384,spines=1024,hosts=64");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr("need about"));
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr("more than the limit of"));
  EXPECT_LE(PeakRssBytes(), kK64PeakRssBound);
}

}  // namespace
}  // namespace fathom::topo
