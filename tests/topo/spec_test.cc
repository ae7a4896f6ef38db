// TopologySpec (YAML) -> Topology: every shape, the cluster_network block of
// DESIGN.md as is, link overrides, and semantic errors placed on their line.
#include "topologies/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace fathom::topo {
namespace {

using ::testing::HasSubstr;

StatusOr<Topology> FromYaml(std::string_view yaml) {
  fathom::proto::TopologySpec spec;
  config::SourceMap map;
  FATHOM_RETURN_IF_ERROR(config::LoadYamlString(yaml, "net.yaml", &spec, {.source_map = &map}));
  return BuildTopology(spec, &map);
}

constexpr std::string_view kClusterNetwork = R"(cluster_network:
  node_type: "compute-8gpu"
  scale_levels:
    - {level: "small",  gpu_count: 16,   servers: 2,   connection: "copper_cable_direct"}
    - {level: "medium", gpu_count: 128,  servers: 16,  connection: "copper_cable_switch"}
    - {level: "large",  gpu_count: 1024, servers: 128, connection: "npo_optical_engine"}
  features:
    - rdma_enabled: true
    - ipv6_support: true
)";

TEST(SpecTest, ClusterNetworkBlockAsIsBuildsTheFirstLevel) {
  fathom::proto::TopologySpec spec;
  ASSERT_TRUE(config::LoadYamlString(kClusterNetwork, "design.yaml", &spec).ok());
  EXPECT_EQ(spec.cluster_network().scale_levels_size(), 3);
  ASSERT_EQ(spec.cluster_network().features_size(), 2);
  EXPECT_TRUE(spec.cluster_network().features(0).rdma_enabled());
  EXPECT_TRUE(spec.cluster_network().features(1).ipv6_support());
  EXPECT_FALSE(spec.cluster_network().features(1).has_rdma_enabled());
  auto t = BuildTopology(spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 16u);
  EXPECT_EQ(t->name(), "back-to-back gpus=8");
}

TEST(SpecTest, LevelSelectsAScaleLevel) {
  auto medium = FromYaml(std::string(kClusterNetwork) + "level: medium\n");
  ASSERT_TRUE(medium.ok()) << medium.status().ToString();
  EXPECT_EQ(medium->hosts().size(), 128u);
  EXPECT_EQ(medium->Summarize().switches_per_tier[2], 4);
  auto large = FromYaml(std::string(kClusterNetwork) + "level: large\n");
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->hosts().size(), 1024u);
  auto bad = FromYaml(std::string(kClusterNetwork) + "level: huge\n");
  EXPECT_EQ(bad.status().message(),
            "net.yaml:10:8: level: 'huge' is not a scale level (small, medium, large)");
}

TEST(SpecTest, ClusterNetworkSemanticErrorsNameTheLine) {
  auto t = FromYaml(R"(cluster_network:
  node_type: compute-8gpu
  scale_levels:
    - {level: small, gpu_count: 15, servers: 2, connection: copper_cable_direct}
)");
  EXPECT_EQ(t.status().message(),
            "net.yaml:4:33: cluster_network.scale_levels[0].gpu_count: 15 is not servers (2) "
            "* 8 GPUs of compute-8gpu");
  t = FromYaml("cluster_network:\n  node_type: gpu-box\n  scale_levels: []\n");
  EXPECT_THAT(t.status().message(), HasSubstr("net.yaml:2:14: cluster_network.node_type: "));
  t = FromYaml(R"(cluster_network:
  node_type: compute-8gpu
  scale_levels:
    - {level: x, gpu_count: 24, servers: 3, connection: copper_cable_direct}
)");
  EXPECT_THAT(t.status().message(), HasSubstr("net.yaml:4:7: cluster_network.scale_levels[0]: "));
  EXPECT_THAT(t.status().message(), HasSubstr("exactly 2 servers"));
}

TEST(SpecTest, FatTreeKMustBeEvenOnItsLine) {
  auto t = FromYaml("fat_tree:\n  k: 7\n");
  EXPECT_EQ(t.status().message(), "net.yaml:2:6: fat_tree.k: 7: k must be even, in 2..128");
  auto missing = FromYaml("fat_tree:\n  rail_optimized: true\n");
  EXPECT_EQ(missing.status().message(), "net.yaml:2:3: fat_tree: missing required key 'k'");
}

TEST(SpecTest, ShapesAndLinkSpecs) {
  auto t = FromYaml(R"(leaf_spine:
  leaves: 2
  spines: 2
  hosts_per_leaf: 8
  host_link: {rate_gbps: 200, latency_ns: 12.5}
  fabric_link: {mtu_bytes: 9000}
)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Link& host = t->link(t->LinksAtTier(1).front());
  EXPECT_EQ(host.rate, BitsPerSecond::Gbps(200));
  EXPECT_EQ(host.latency, Picoseconds(12500));
  EXPECT_EQ(host.mtu_ab, 4200);
  EXPECT_EQ(t->link(t->LinksAtTier(2).front()).mtu_ab, 9000);

  auto b2b = FromYaml("back_to_back: {gpus_per_server: 2}\n");
  ASSERT_TRUE(b2b.ok());
  EXPECT_EQ(b2b->hosts().size(), 4u);
  auto preset = FromYaml("preset: fat-tree:k=4\n");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->hosts().size(), 16u);
  EXPECT_THAT(FromYaml("preset: nope\n").status().message(),
              HasSubstr("net.yaml:1:9: preset: unknown topology preset 'nope'"));
  EXPECT_THAT(FromYaml("fat_tree: {k: 4, host_link: {rate_gbps: -1}}\n").status().message(),
              HasSubstr("fat_tree.host_link.rate_gbps: "));
  EXPECT_THAT(FromYaml("level: small\npreset: small\n").status().message(),
              HasSubstr("net.yaml:1:8: level: only applies to cluster_network"));
  EXPECT_EQ(FromYaml("{}\n").status().message(),
            "net.yaml:1:1: <root>: no topology given (one of: preset, leaf_spine, fat_tree, "
            "back_to_back, cluster_network)");
}

TEST(SpecTest, LinkOverridesByTierAndSelector) {
  auto t = FromYaml(R"(preset: "leaf-spine:leaves=2,spines=2,hosts=8"
link_overrides:
  - {tier: 2, rate_gbps: 100}
  - {links: "h3-leaf0", mtu_up_bytes: 1500}
  - {links: "spine1", latency_ns: 1000}
)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int32_t l : t->LinksAtTier(2)) EXPECT_EQ(t->link(l).rate, BitsPerSecond::Gbps(100));
  const Link& h3 = t->link(*t->FindLink("h3-leaf0"));
  EXPECT_EQ(h3.mtu_ab, 1500);
  EXPECT_EQ(h3.mtu_ba, 4200);
  EXPECT_EQ(t->link(*t->FindLink("leaf1-spine1")).latency, Picoseconds::FromNanoseconds(1000));
  EXPECT_EQ(t->link(*t->FindLink("leaf1-spine0")).latency, Picoseconds::FromNanoseconds(5));
  // 8 x 400 Gb/s down, 2 x 100 Gb/s up.
  EXPECT_DOUBLE_EQ(t->Summarize().oversubscription[1], 16.0);
  const TopologySummary sum = t->Summarize();
  EXPECT_EQ(sum.mtu_min_bytes, 1500);
  EXPECT_EQ(sum.mtu_max_bytes, 4200);
  EXPECT_EQ(sum.asymmetric_mtu_links, 1);
  EXPECT_EQ(sum.links_per_tier[1].latency, Picoseconds::FromNanoseconds(5));

  auto bad = FromYaml("preset: small\nlink_overrides:\n  - {links: \"leaf*\", mtu_bytes: 1500}\n");
  EXPECT_THAT(bad.status().message(), HasSubstr("net.yaml:3:13: link_overrides[0].links: "));
  bad = FromYaml("preset: small\nlink_overrides:\n  - {tier: 3, mtu_bytes: 1500}\n");
  EXPECT_THAT(bad.status().message(), HasSubstr("link_overrides[0].tier: this topology has no"));
  bad = FromYaml("preset: small\nlink_overrides:\n  - {tier: 0, mtu_bytes: 20}\n");
  EXPECT_THAT(bad.status().message(), HasSubstr("link_overrides[0].mtu_bytes: 20 must be"));
}

TEST(SpecTest, PathPrefixForEmbeddedSpecs) {
  fathom::proto::TopologySpec spec;
  spec.mutable_fat_tree()->set_k(3);
  config::SourceMap map("scenario.yaml");
  map.Add("topology.fat_tree.k", {12, 5});
  EXPECT_EQ(BuildTopology(spec, &map, "topology").status().message(),
            "scenario.yaml:12:5: topology.fat_tree.k: 3: k must be even, in 2..128");
  EXPECT_EQ(BuildTopology(spec).status().message(), "fat_tree.k: 3: k must be even, in 2..128");
}

TEST(SpecTest, ExampleFilesBuildAndValidate) {
  const std::filesystem::path dir =
      std::filesystem::path(FATHOM_SOURCE_DIR) / "scenarios/topologies";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    auto t = LoadTopologyFile(entry.path().string());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_TRUE(t->Validate().ok()) << entry.path() << ": " << t->Validate().ToString();
  }
  EXPECT_GE(files, 4);
  EXPECT_EQ(LoadTopologyFile("/nonexistent/x.yaml").status().code(), StatusCode::kIoError);
}

// Issue 24: a YAML topology too large to route is refused on its line,
// with the estimate, before anything is allocated.
TEST(TopologySpecTest, TooLargeForMemoryNamesTheLine) {
  // Computed routing admits k=64 (issue 30); 16 M leaf-spine links do not fit.
  auto t = FromYaml("# too big\nleaf_spine: {leaves: 4096, spines: 4096, hosts_per_leaf: 8}\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("net.yaml:2:"));
  EXPECT_THAT(t.status().message(), HasSubstr("need about 4.7 GiB"));
  auto ls = FromYaml("leaf_spine: {leaves: 16384, spines: 1024, hosts_per_leaf: 64}\n");
  ASSERT_FALSE(ls.ok());
  EXPECT_THAT(ls.status().message(), HasSubstr("net.yaml:1:"));
  EXPECT_THAT(ls.status().message(), HasSubstr("more than the limit of"));
}

TEST(TopologySpecTest, RatesAndDelaysMustBeFiniteAndRepresentable) {
  for (const char* link : {"{rate_gbps: .nan}", "{rate_gbps: 1e-300}", "{rate_gbps: .inf}",
                           "{latency_ns: .nan}", "{latency_ns: 1e300}", "{latency_ns: -1}"}) {
    auto t = FromYaml(std::string("fat_tree:\n  k: 4\n  host_link: ") + link + "\n");
    ASSERT_FALSE(t.ok()) << link;
    EXPECT_THAT(t.status().message(), HasSubstr("net.yaml:3:")) << link;
    EXPECT_THAT(t.status().message(), HasSubstr("fat_tree.host_link.")) << link;
  }
  auto over = FromYaml("leaf_spine: {leaves: 2, hosts_per_leaf: 8, oversubscription: 1e-300}\n");
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr("not a whole number"));
}

}  // namespace
}  // namespace fathom::topo
