// scenarios/cases/: CASES.md field cases as scenarios, each pinning its
// signature in `expect` (issue 27). Every one passes as written, and each
// fails its expectations once its fault is deleted (the mutation check:
// the expectations hold the fault's signature, not the healthy run's).
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "fabric/scenario/scenario.h"

namespace fathom::sim {
namespace {

class CasesScenarioTest : public ::testing::TestWithParam<const char*> {
 protected:
  StatusOr<LoadedScenario> Load() {
    return LoadScenario(std::string(FATHOM_SOURCE_DIR) + "/scenarios/cases/" + GetParam());
  }
};

TEST_P(CasesScenarioTest, PassesItsSignature) {
  auto sc = Load();
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  ASSERT_GT(sc->spec.faults_size(), 0);
  ASSERT_TRUE(sc->spec.has_expect());
  auto report = RunScenario(sc.value(), RunOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto misses = CheckExpectations(sc.value(), report.value());
  ASSERT_TRUE(misses.ok()) << misses.status().ToString();
  EXPECT_TRUE(misses->empty()) << misses->front();
}

TEST_P(CasesScenarioTest, FailsWithoutItsFault) {
  auto sc = Load();
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  sc->spec.clear_faults();
  // Counters of the deleted fault name nothing now; the rest must fail.
  auto* counters = sc->spec.mutable_expect()->mutable_counters();
  for (int i = counters->size() - 1; i >= 0; --i) {
    if (!counters->Get(i).fault().empty()) counters->DeleteSubrange(i, 1);
  }
  auto report = RunScenario(sc.value(), RunOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto misses = CheckExpectations(sc.value(), report.value());
  ASSERT_TRUE(misses.ok()) << misses.status().ToString();
  EXPECT_FALSE(misses->empty()) << "the expectations hold without the fault";
}

INSTANTIATE_TEST_SUITE_P(Cases, CasesScenarioTest,
                         ::testing::Values("gid_link_local.yaml", "timeout_path.yaml",
                                           "read_under_load.yaml", "fec_one_end.yaml",
                                           "port_cycling_init.yaml", "flush_after_error.yaml"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           n = n.substr(0, n.find('.'));
                           std::string out;  // gid_link_local -> GidLinkLocal
                           bool up = true;
                           for (char c : n) {
                             if (c == '_') {
                               up = true;
                               continue;
                             }
                             out += up ? static_cast<char>(std::toupper(c)) : c;
                             up = false;
                           }
                           return out;
                         });

}  // namespace
}  // namespace fathom::sim
