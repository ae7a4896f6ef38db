// EndpointInfo <-> EndpointRecord, including several QPs toward one peer.
#include "transport/bootstrap/endpoints.h"

#include <gtest/gtest.h>

namespace fathom::transport::bootstrap {
namespace {

TEST(EndpointsTest, RoundTripsQpsTowardEachPeer) {
  EndpointInfo local;
  local.rank = 2;
  local.lid = 9;
  local.gid[15] = 7;
  local.gid_index = 3;
  local.active_mtu = 1024;
  proto::EndpointRecord rec = MakeEndpointRecord(local);
  for (uint32_t i = 0; i < 3; ++i) {
    EndpointInfo qp = local;
    qp.qpn = 0x20 + i;
    qp.psn = 0x100 + i;
    AddQp(&rec, i == 1 ? 5 : 0, qp);
  }
  auto first = RemoteEndpoint(rec, 0, 0);
  auto second = RemoteEndpoint(rec, 0, 1);
  auto to5 = RemoteEndpoint(rec, 5, 0);
  ASSERT_TRUE(first.ok() && second.ok() && to5.ok());
  EXPECT_EQ(first->qpn, 0x20u);
  EXPECT_EQ(second->qpn, 0x22u);
  EXPECT_EQ(to5->qpn, 0x21u);
  EXPECT_EQ(to5->psn, 0x101u);
  EXPECT_EQ(to5->rank, 2);
  EXPECT_EQ(to5->lid, 9);
  EXPECT_EQ(to5->gid[15], 7);
  EXPECT_EQ(to5->gid_index, 3);
  EXPECT_EQ(to5->active_mtu, 1024);
  auto missing = RemoteEndpoint(rec, 5, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no QP #1 toward rank 5"), std::string::npos);
  EXPECT_FALSE(RemoteBufferOf(rec, 0).ok());
  rec.set_gid("short");
  EXPECT_FALSE(RemoteEndpoint(rec, 0, 0).ok());
}

}  // namespace
}  // namespace fathom::transport::bootstrap
