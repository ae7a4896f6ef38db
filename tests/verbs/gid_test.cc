// GID parsing, formatting, sysfs reading and selection, without a device:
// the table shapes are those rxe and mlx5 show (TESTBED.md: rxe has GID 0 =
// IPv6 link-local and GID 1 = IPv4-mapped, each as RoCE v1 and v2).
#include "transport/verbs/gid.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/scratch_dir.h"

namespace fathom::transport::verbs {
namespace {

Gid G(const char* text) {
  auto g = ParseGid(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : Gid{};
}

TEST(GidTest, ParsesSysfsAndIpv6FormsAndFormatsSysfsForm) {
  const Gid a = G("fe80:0000:0000:0000:5054:00ff:fe12:3456");
  EXPECT_EQ(a[0], 0xfe);
  EXPECT_EQ(a[15], 0x56);
  EXPECT_EQ(FormatGid(a), "fe80:0000:0000:0000:5054:00ff:fe12:3456");
  const Gid b = G("::ffff:192.0.2.1");
  EXPECT_EQ(FormatGid(b), "0000:0000:0000:0000:0000:ffff:c000:0201");
  EXPECT_TRUE(IsIpv4MappedGid(b));
  EXPECT_FALSE(IsIpv4MappedGid(a));
  EXPECT_TRUE(IsLinkLocalGid(a));
  EXPECT_FALSE(IsLinkLocalGid(b));
  EXPECT_TRUE(IsZeroGid(G("0000:0000:0000:0000:0000:0000:0000:0000")));
}

TEST(GidTest, RejectsMalformedGidNamingIt) {
  auto g = ParseGid("fe80:zz");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("fe80:zz"), std::string::npos);
}

TEST(GidTest, ParsesGidTypes) {
  EXPECT_EQ(*ParseGidType("RoCE v2\n", true), GidType::kRoceV2);
  EXPECT_EQ(*ParseGidType("IB/RoCE v1", true), GidType::kRoceV1);
  EXPECT_EQ(*ParseGidType("IB/RoCE v1", false), GidType::kIb);
  EXPECT_FALSE(ParseGidType("RoCE v3", true).ok());
}

std::vector<GidEntry> RxeTable() {
  // rxe on eth0 with fe80:: and 192.0.2.1, plus a global IPv6 address.
  return {
      {0, G("fe80::5054:ff:fe12:3456"), GidType::kRoceV1, "eth0"},
      {1, G("fe80::5054:ff:fe12:3456"), GidType::kRoceV2, "eth0"},
      {2, G("::ffff:192.0.2.1"), GidType::kRoceV1, "eth0"},
      {3, G("::ffff:192.0.2.1"), GidType::kRoceV2, "eth0"},
      {4, G("2001:db8::1"), GidType::kRoceV1, "eth0"},
      {5, G("2001:db8::1"), GidType::kRoceV2, "eth0"},
  };
}

TEST(GidSelectTest, RoceDefaultIsRoceV2Ipv4Mapped) {
  const auto table = RxeTable();
  auto e = SelectGid(table, {}, /*is_ethernet=*/true, "rxe0", 1);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->index, 3);
  EXPECT_EQ(e->type, GidType::kRoceV2);
}

TEST(GidSelectTest, Ipv6OnRequestPrefersGlobalOverLinkLocal) {
  auto table = RxeTable();
  auto e = SelectGid(table, {GidMode::kRoceV2Ipv6, -1}, true, "rxe0", 1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->index, 5);
  table.resize(4);  // no global address: link-local is what remains
  e = SelectGid(table, {GidMode::kRoceV2Ipv6, -1}, true, "rxe0", 1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->index, 1);
}

TEST(GidSelectTest, ExplicitIndexAndMissingIndexNamesTheTable) {
  const auto table = RxeTable();
  auto e = SelectGid(table, {GidMode::kIndex, 2}, true, "rxe0", 1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->type, GidType::kRoceV1);
  e = SelectGid(table, {GidMode::kIndex, 9}, true, "rxe0", 1);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_NE(e.status().message().find("GID index 9"), std::string::npos);
  EXPECT_NE(e.status().message().find("rxe0 port 1"), std::string::npos);
  EXPECT_NE(e.status().message().find("3=0000:0000:0000:0000:0000:ffff:c000:0201 (RoCE v2)"),
            std::string::npos);
}

TEST(GidSelectTest, NoIpv4AddressIsAClearError) {
  const std::vector<GidEntry> table = {{1, G("fe80::1"), GidType::kRoceV2, "eth0"}};
  auto e = SelectGid(table, {}, true, "mlx5_0", 1);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("IPv4"), std::string::npos);
}

TEST(GidSelectTest, InfiniBandAutoIsIndexZero) {
  const std::vector<GidEntry> table = {{0, G("fe80::2:c903:0:1"), GidType::kIb, ""}};
  auto e = SelectGid(table, {}, /*is_ethernet=*/false, "mlx4_0", 1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->index, 0);
  EXPECT_FALSE(SelectGid({}, {}, false, "mlx4_0", 1).ok());
}

class SysfsGidTest : public ::testing::Test {
 protected:
  void Write(const std::string& rel, const std::string& text) {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  test_util::ScratchDir tmp_;
  const std::filesystem::path root_{tmp_.path()};
};

TEST_F(SysfsGidTest, ReadsTypesAndNetdevsAndSkipsEmptySlots) {
  const std::string port = "rxe0/ports/1/";
  Write(port + "gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3456\n");
  Write(port + "gids/1", "0000:0000:0000:0000:0000:ffff:c000:0201\n");
  Write(port + "gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n");
  Write(port + "gids/10", "0000:0000:0000:0000:0000:ffff:c000:0201\n");
  Write(port + "gid_attrs/types/0", "IB/RoCE v1\n");
  Write(port + "gid_attrs/types/1", "RoCE v1\n");
  Write(port + "gid_attrs/types/10", "RoCE v2\n");
  Write(port + "gid_attrs/ndevs/10", "eth0\n");
  auto table = ReadSysfsGidTable(root_.string(), "rxe0", 1, true);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->size(), 3u);
  EXPECT_EQ((*table)[0].index, 0);
  EXPECT_EQ((*table)[0].type, GidType::kRoceV1);
  EXPECT_EQ((*table)[2].index, 10);  // numeric order, not text order
  EXPECT_EQ((*table)[2].netdev, "eth0");
  auto chosen = SelectGid(*table, {}, true, "rxe0", 1);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->index, 10);
}

TEST_F(SysfsGidTest, MissingPortAndBadGidAreErrorsNamingThePath) {
  auto t = ReadSysfsGidTable(root_.string(), "rxe0", 2, true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("rxe0/ports/2/gids"), std::string::npos);
  Write("rxe0/ports/1/gids/0", "not-a-gid\n");
  t = ReadSysfsGidTable(root_.string(), "rxe0", 1, true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("gids/0"), std::string::npos);
}

}  // namespace
}  // namespace fathom::transport::verbs
