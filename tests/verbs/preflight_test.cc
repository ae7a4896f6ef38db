// doctor's consistency checks over hand-built rank facts.
#include "transport/verbs/preflight.h"

#include <gtest/gtest.h>

namespace fathom::transport::verbs {
namespace {

RankFacts Rxe(int rank, int mtu, int eth_mtu) {
  RankFacts r;
  r.rank = rank;
  r.host = "vm" + std::to_string(rank);
  r.info.name = "rxe0";
  r.info.fw_ver = "0.0.0";
  r.info.link_layer = "Ethernet";
  r.info.port_state = "ACTIVE";
  r.info.active_mtu = mtu;
  r.info.netdev_mtu = eth_mtu;
  r.info.gid_type = "RoCE v2";
  r.info.gid_index = 1;
  return r;
}

bool Has(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v) {
    if (s.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(PreflightTest, ConsistentRanksHaveNoFindings) {
  EXPECT_TRUE(FindInconsistencies({Rxe(0, 4096, 9000), Rxe(1, 4096, 9000)}).empty());
}

TEST(PreflightTest, MtuMismatchIsFlaggedWithRanks) {
  // TESTBED: MTU 1500 on one VM (active_mtu 1024), 9000 on the others (4096).
  const auto f = FindInconsistencies({Rxe(0, 4096, 9000), Rxe(1, 1024, 1500), Rxe(2, 4096, 9000)});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(Has(f, "active_mtu differs: 1024 on rank 1; 4096 on ranks 0, 2"));
  EXPECT_TRUE(
      Has(f, "Ethernet MTU of the RoCE netdevs differs: 1500 on rank 1; 9000 on ranks 0, 2"));
  // The findings state the fact itself: a field engineer has no CASES.md.
  EXPECT_TRUE(Has(f, "sends packets the other end drops"));
  EXPECT_TRUE(Has(f, "frames larger than the smaller MTU are dropped silently"));
  EXPECT_FALSE(Has(f, "CASES"));
}

TEST(PreflightTest, StateLinkLayerGidTypeFirmwareAndMissingDevice) {
  RankFacts down = Rxe(1, 4096, 9000);
  down.info.port_state = "DOWN";
  RankFacts ib = Rxe(2, 4096, 9000);
  ib.info.link_layer = "InfiniBand";
  ib.info.gid_type = "IB";
  ib.info.fw_ver = "20.31.1014";
  RankFacts none;
  none.rank = 3;
  none.host = "h3";
  none.error = "OpenDevice: no RDMA device";
  const auto f = FindInconsistencies({Rxe(0, 4096, 9000), down, ib, none});
  EXPECT_TRUE(Has(f, "rank 1 (vm1) rxe0 port 1 is DOWN, not ACTIVE"));
  EXPECT_TRUE(Has(f, "link layers are mixed: Ethernet on ranks 0, 1; InfiniBand on rank 2"));
  EXPECT_TRUE(Has(f, "GID types differ"));
  EXPECT_TRUE(Has(f, "firmware versions differ"));
  EXPECT_TRUE(Has(f, "rank 3 (h3) has no usable device: OpenDevice: no RDMA device"));
  const std::string table = FactsTable({Rxe(0, 4096, 9000), none});
  EXPECT_NE(table.find("eth_mtu"), std::string::npos);
  EXPECT_NE(table.find("no RDMA device"), std::string::npos);
}

}  // namespace
}  // namespace fathom::transport::verbs
