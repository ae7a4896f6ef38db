// Fault spec tests: scenario YAML -> validated FaultSpecs -> models, and
// the bad inputs the issue lists, each naming the scenario line.
#include "faults/spec.h"

#include <gtest/gtest.h>

#include <string>

#include "proto/faults.pb.h"
#include "proto/yaml_loader.h"

namespace fathom::faults {
namespace {

// Loads a FaultTimeline from YAML and validates it like a scenario does.
Status Load(const std::string& yaml, proto::FaultTimeline* out) {
  config::SourceMap map("t.yaml");
  config::YamlLoadOptions options;
  options.source_map = &map;
  FATHOM_RETURN_IF_ERROR(config::LoadYamlString(yaml, "t.yaml", out, options));
  return ValidateFaults(out->faults(), "faults", map);
}

std::string LoadError(const std::string& yaml) {
  proto::FaultTimeline t;
  const Status s = Load(yaml, &t);
  EXPECT_FALSE(s.ok()) << yaml;
  return s.message();
}

TEST(FaultSpec, LoadsATimelineAndBuildsModels) {
  proto::FaultTimeline t;
  ASSERT_TRUE(Load(R"(seed: 7
faults:
  - {kind: loss, link: leaf1-spine3, rate: 0.05, start_us: 10}
  - {kind: link_flap, link: leaf2-spine1, start_us: 1000, duration_us: 50, period_us: 400}
  - {kind: fec, link: "tier:2", fec_mode: kp4, pre_fec_ber: 2.4e-4}
  - {kind: mtu, link: leaf1-spine1, from: leaf1, mtu_bytes: 1500}
  - {kind: black_hole, link: leaf1-spine2, filter: {udp_sport: 0xC001}}
  - {kind: host_crash, host: h3, start_us: 5}
)",
                   &t)
                  .ok());
  ASSERT_EQ(t.faults_size(), 6);
  Placement place;
  place.scenario_seed = t.seed();
  place.label = "loss#0@leaf1-spine3";
  auto loss = BuildModel(t.faults(0), place);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  ASSERT_TRUE(std::holds_alternative<BernoulliLoss>(*loss));
  EXPECT_DOUBLE_EQ(std::get<BernoulliLoss>(*loss).rate(), 0.05);
  EXPECT_EQ(std::get<BernoulliLoss>(*loss).window().start, Picoseconds::FromMicroseconds(10));

  auto flap = BuildModel(t.faults(1), place);
  ASSERT_TRUE(flap.ok());
  const FlapSchedule& s = std::get<LinkFlapModel>(*flap).schedule();
  EXPECT_EQ(s.period, Picoseconds::FromMicroseconds(400));
  EXPECT_EQ(s.duration, Picoseconds::FromMicroseconds(50));

  place.link_rate = BitsPerSecond::Gbps(400);
  auto fec = BuildModel(t.faults(2), place);
  ASSERT_TRUE(fec.ok());
  EXPECT_EQ(std::get<FecModel>(*fec).code().t, 15);
  place.link_rate = BitsPerSecond::Gbps(25);  // KP4 does not run at 25G
  auto bad_fec = BuildModel(t.faults(2), place);
  ASSERT_FALSE(bad_fec.ok());
  EXPECT_NE(bad_fec.status().message().find("25 Gb/s"), std::string::npos);

  place.link_rate = BitsPerSecond();
  EXPECT_EQ(std::get<MtuModel>(*BuildModel(t.faults(3), place)).mtu_bytes(), 1500u);
  EXPECT_EQ(std::get<BlackHoleModel>(*BuildModel(t.faults(4), place)).filter().udp_sport, 0xC001);
  EXPECT_FALSE(BuildModel(t.faults(5), place).ok());  // host not resolved
  place.crashed_host = 3;
  EXPECT_EQ(std::get<HostCrashModel>(*BuildModel(t.faults(5), place)).host(), 3);
}

TEST(FaultSpec, LinkBudgetGivesTheBer) {
  proto::FaultTimeline t;
  ASSERT_TRUE(Load(R"(faults:
  - kind: fec
    link: leaf1-spine1
    fec_mode: kp4
    link_budget: {tx_power_dbm: 0, length_km: 2, rx_sensitivity_dbm: -1.8}
)",
                   &t)
                  .ok());
  Placement place;
  place.label = "fec";
  auto m = BuildModel(t.faults(0), place);
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(std::get<FecModel>(*m).params().pre_fec_ber, 2.4e-4, 1e-9);
}

TEST(FaultSpec, BadInputNamesTheLine) {
  EXPECT_EQ(LoadError("faults:\n  - {kind: lose, link: a-b}\n").substr(0, 9), "t.yaml:2:");
  EXPECT_NE(LoadError("faults:\n  - {kind: lose, link: a-b}\n").find("unknown fault kind"),
            std::string::npos);
  // BER outside [0, 0.5).
  std::string e = LoadError("faults:\n  - {kind: fec, link: a-b, pre_fec_ber: 0.5}\n");
  EXPECT_NE(e.find("t.yaml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("faults[0].pre_fec_ber"), std::string::npos) << e;
  EXPECT_NE(LoadError("faults:\n  - {kind: corrupt, link: a-b, ber: -1}\n").find("outside"),
            std::string::npos);
  // Negative time.
  e = LoadError("faults:\n  - {kind: loss, link: a-b, start_us: -5}\n");
  EXPECT_NE(e.find("faults[0].start_us"), std::string::npos) << e;
  // Overlapping outages of one flap, and two faults of one kind at once.
  e = LoadError("faults:\n  - {kind: link_flap, link: a-b, duration_us: 500, period_us: 400}\n");
  EXPECT_NE(e.find("overlaps"), std::string::npos) << e;
  e = LoadError(
      "faults:\n"
      "  - {kind: link_down, link: a-b, start_us: 0, duration_us: 100}\n"
      "  - {kind: link_down, link: a-b, start_us: 50, duration_us: 100}\n");
  EXPECT_NE(e.find("t.yaml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("overlaps faults[0]"), std::string::npos) << e;
  // Not one kind's parameter; no target; FEC mode unknown.
  e = LoadError("faults:\n  - {kind: loss, link: a-b, mtu_bytes: 1500}\n");
  EXPECT_NE(e.find("not a parameter of kind loss"), std::string::npos) << e;
  EXPECT_NE(LoadError("faults:\n  - {kind: loss, rate: 0.1}\n").find("exactly one target"),
            std::string::npos);
  EXPECT_NE(LoadError("faults:\n  - {kind: fec, link: a-b, fec_mode: ldpc}\n").find("ldpc"),
            std::string::npos);
  EXPECT_NE(LoadError("faults:\n  - {kind: loss, link: a-b, rate: 1.5}\n").find("probability"),
            std::string::npos);
  // Back to back windows do not overlap.
  proto::FaultTimeline t;
  EXPECT_TRUE(Load("faults:\n"
                   "  - {kind: link_down, link: a-b, start_us: 0, duration_us: 100}\n"
                   "  - {kind: link_down, link: a-b, start_us: 100, duration_us: 100}\n",
                   &t)
                  .ok());
}

TEST(FaultFlag, KeyValueAndFlowMapSyntax) {
  auto a = ParseFaultFlag("kind=loss,link=leaf1-spine3,rate=0.01,filter.qpn=17");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->kind(), "loss");
  EXPECT_EQ(a->link(), "leaf1-spine3");
  EXPECT_DOUBLE_EQ(a->rate(), 0.01);
  EXPECT_EQ(a->filter().qpn(), 17u);
  auto b = ParseFaultFlag("{kind: fec, link: \"tier:2\", pre_fec_ber: 1e-4}");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->link(), "tier:2");
  auto c = ParseFaultFlag("kind=link_down,link=tier:2,start_us=10");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->link(), "tier:2");
  auto bad = ParseFaultFlag("kind=loss,link=a-b,rate=2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("--fault", 0), 0u) << bad.status().message();
  EXPECT_FALSE(ParseFaultFlag("kind=warp,link=a-b").ok());
  EXPECT_FALSE(ParseFaultFlag("kind").ok());
}

TEST(FaultKinds, CatalogueCoversEveryBuildableKind) {
  for (const KindInfo& k : FaultKinds()) {
    proto::FaultSpec spec;
    spec.set_kind(std::string(k.name));
    if (k.name == "host_crash" || k.name == "pfc_storm") {
      spec.set_host("h0");
    } else {
      spec.set_link("a-b");
    }
    if (k.name == "link_flap") {
      spec.set_duration_us(1);
      spec.set_period_us(2);
    }
    config::SourceMap map("x");
    ASSERT_TRUE(ValidateFaultSpec(spec, "", map).ok()) << k.name;
    if (k.name == "pfc_storm") {
      // Not a frame model: the scenario drives the NIC (fabric/scenario/pfc_field.h).
      EXPECT_FALSE(BuildModel(spec, Placement{}).ok());
      EXPECT_EQ(PfcStormOf(spec).priority, 3);
      continue;
    }
    Placement place;
    place.label = std::string(k.name);
    place.crashed_host = 0;
    auto m = BuildModel(spec, place);
    ASSERT_TRUE(m.ok()) << k.name << ": " << m.status().ToString();
    const std::string kind = ModelKindName(*m);
    EXPECT_TRUE(kind == k.name || (k.name == "link_down" && kind == "link_flap")) << kind;
  }
}

}  // namespace
}  // namespace fathom::faults
