// `fathom coll train --scenario` (issue 27): a training loop of compute,
// collectives over rank groups and checkpoints; a fault hours into the run
// hits the iteration running then; the scenario's expect block pins the
// signature (the failing iteration, the error or the stalled ranks, the
// iteration times) and a miss exits 1. Mutation checks: each example with
// its fault deleted fails its own expectations. Bad input exits 2 naming
// file:line and the field.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fabric/scenario/scenario.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"
#include "transport/worlds/sim_world.h"
#include "transport/worlds/training.h"

namespace fathom::transport::worlds {
namespace {

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
const std::string kScenarios = std::string(FATHOM_SOURCE_DIR) + "/scenarios/";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The scenario without its top-level `key:` block (the key's line and the
// indented or list lines under it).
std::string WithoutBlock(const std::string& text, const std::string& key) {
  std::stringstream in(text);
  std::string line, out;
  bool skipping = false;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      skipping = true;
      continue;
    }
    if (skipping && !line.empty() && line[0] != ' ' && line[0] != '-' && line[0] != '#') {
      skipping = false;
    }
    if (!skipping) out += line + "\n";
  }
  return out;
}

// A training loop run through the API (scenario text -> world -> plan ->
// runner): its result and the world's trace digest.
struct Trained {
  TrainingResult r;
  uint64_t digest = 0;
};
Trained Train(const std::string& yaml, bool canonical = false) {
  auto sc = sim::LoadScenarioString(yaml, "train.yaml");
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  SimWorldOptions opt;
  opt.canonical_order = canonical;
  auto world = SimWorld::CreateFromScenario(sc.value(), opt);
  EXPECT_TRUE(world.ok()) << world.status().ToString();
  auto plan = TrainingPlanFromScenario(sc.value(), world.value()->nranks());
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  auto runner = TrainingRunner::Create(world.value().get(), plan.value());
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  Trained out;
  out.r = runner.value()->Run();
  out.digest = world.value()->engine().trace_digest();
  return out;
}

// Two leaves of two hosts and the transport's retry settings, up to the
// training block's keys: the at-iteration tests add theirs.
const char kTwoLeavesTraining[] = R"(end_time_us: 1
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
transport:
  ib_timeout: 14
  retry_cnt: 7
workload:
  pattern: training
  training:
)";

// Link down at hour 7: iteration 839 (30 s of compute each) fails with
// error 12 one retry budget after its allreduce starts; every earlier
// iteration took the same time.
TEST(CollTrainingTest, LinkDownAtHourSevenHitsIteration839) {
  auto r = test_util::RunCommand(kFathom + " coll train --scenario " + kScenarios +
                                 "coll/training_link_down_hour7.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# iterations completed 839, virtual time 25200.544558 s"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# FAILED: iteration 839"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("IBV_WC_RETRY_EXC_ERR at t=25200544557.830 us"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# expectations met"), std::string::npos) << r.out;
}

// A data/tensor-parallel job with rxe's infinite retry: the lost link
// stalls the tensor-parallel allgather of group {2,3}; no error surfaces;
// the watchdog's report names the world ranks of the group's QPs and the
// fault that dropped their frames.
TEST(CollTrainingTest, StallInOneGroupIsFoundByTheWatchdog) {
  auto r = test_util::RunCommand(kFathom + " coll train --json --scenario " + kScenarios +
                                 "coll/training_dp_stall.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"status\":\"hung\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"first_failed_iteration\":839"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"failed_collective\":\"tp\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"stalled_ranks\":[2,3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fabric: the culprit's QP runs from host h2 (rank 2) to host h3 (rank 3)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fault link_down#0"), std::string::npos) << r.out;
}

// Mutation: without the fault neither example shows its signature, and
// its expectations fail the run (exit 1, expected vs got).
TEST(CollTrainingTest, WithoutTheFaultTheExpectationsFail) {
  test_util::ScratchDir tmp;
  for (const char* name : {"training_link_down_hour7.yaml", "training_dp_stall.yaml"}) {
    SCOPED_TRACE(name);
    const std::string path = tmp.Write(std::string("nofault_") + name,
                                       WithoutBlock(Read(kScenarios + "coll/" + name), "faults"));
    auto r = test_util::RunCommand(kFathom + " coll train --scenario " + path);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("expectation not met: first_failed_iteration: expected 839, got -1"),
              std::string::npos)
        << r.out;
  }
}

// Compute gaps cost no events: a loop of 50 iterations with 1 h of compute
// each dispatches exactly as many events as one with 1 s (either gap is
// longer than anything a collective leaves behind: its QPs' last local ACK
// timers, 4.096 us x 2^14 = 67 ms, fire once in the gap and find nothing).
TEST(CollTrainingTest, IdleComputeCostsNoEvents) {
  auto events = [](double compute_us) {
    const std::string yaml = R"(name: idle
end_time_us: 1
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
workload:
  pattern: training
  training:
    iterations: 50
    compute_us: )" + std::to_string(compute_us) +
                             R"(
    collectives:
      - {op: allreduce, bytes: 65536}
)";
    const TrainingResult r = Train(yaml).r;
    EXPECT_EQ(r.completed, 50);
    EXPECT_FALSE(r.failed);
    return std::pair{r.events, (r.end - r.start).seconds()};
  };
  const auto [busy_events, busy_s] = events(1e6);
  const auto [idle_events, idle_s] = events(3600e6);
  EXPECT_EQ(idle_events, busy_events);
  EXPECT_NEAR(idle_s - busy_s, 50 * (3600.0 - 1.0), 1e-6);
}

// `fathom coll --scenario` checks a sweep's expect block: busbw and time
// bounds per size, printed expected vs got, exit 1 on a miss.
TEST(CollTrainingTest, SweepExpectationsBoundBusbwAndTime) {
  test_util::ScratchDir tmp;
  const std::string base = R"(name: sweep
end_time_us: 1
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
workload:
  pattern: permutation
  flow_bytes: 4096
expect:
  no_error_surfaced: true
  coll_hang: false
  coll_sizes:
)";
  const std::string args = " -b 1M -e 1M -n 2 -w 1";
  const std::string ok =
      tmp.Write("sweep_ok.yaml",
                base + "    - {bytes: 1048576, busbw_at_least_gbs: 1, time_at_most_us: 10000}\n");
  auto r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + ok + args);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# expectations met"), std::string::npos) << r.out;
  const std::string miss =
      tmp.Write("sweep_miss.yaml", base + "    - {bytes: 1048576, busbw_at_least_gbs: 1000}\n");
  r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + miss + args);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("expectation not met: coll_sizes 1048576 B out-of-place busbw: expected at "
                       "least 1000.00 GB/s, got "),
            std::string::npos)
      << r.out;
  // An expected error that does not come is a miss too.
  const std::string err =
      tmp.Write("sweep_err.yaml", base + "    - {bytes: 1048576, busbw_at_least_gbs: 1}\n" +
                                      "  coll_error: IBV_WC_RETRY_EXC_ERR\n");
  r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + err + args);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("expectation not met: coll_error: expected IBV_WC_RETRY_EXC_ERR, got none"),
            std::string::npos)
      << r.out;
}

// The hang of CASES.md 20 passes its pinned signature; without the
// swallow the error surfaces and the same block fails.
TEST(CollTrainingTest, SwallowedErrorSignatureAndItsMutation) {
  test_util::ScratchDir tmp;
  const std::string path = kScenarios + "coll/swallowed_error_hang.yaml";
  const std::string args = " -b 1M -e 1M -n 1 -w 0";
  auto r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + path + args);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# expectations met"), std::string::npos) << r.out;
  const std::string mutated = tmp.Write("noswallow.yaml", WithoutBlock(Read(path), "verbs_faults"));
  r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + mutated + args);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("expectation not met: coll_hang: expected true, got false"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("expectation not met: no_error_surfaced: expected true, got false "
                       "(IBV_WC_RETRY_EXC_ERR)"),
            std::string::npos)
      << r.out;
}

// Bad input: file:line and the field, exit 2.
TEST(CollTrainingTest, BadInputNamesFileLineAndField) {
  test_util::ScratchDir tmp;
  const std::string head = R"(name: bad
end_time_us: 1
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
workload:
  pattern: training
  training:
    iterations: 5
    collectives:
)";
  struct Case {
    std::string body;
    std::string want;
  };
  for (const Case& k : {
           Case{
               "      - {op: allreduce, bytes: 4096, groups: [{ranks: [0, 1]}, {ranks: [1, 2]}]}\n",
               "collectives[0].groups[1].ranks[0]: rank 1 is in an earlier group"},
           Case{"      - {op: allreduce, bytes: 4096, groups: [{ranks: [0, 7]}]}\n",
                "collectives[0].groups[0].ranks[1]: rank 7 does not exist"},
           Case{"      - {op: alltoall, bytes: 4096}\n", "collectives[0].op: 'alltoall'"},
           Case{"      - {op: allreduce, bytes: 4096}\nexpect:\n  flows_completed: 3\n",
                "expect.flows_completed: is checked by fathom sim"},
           Case{"      - {op: allreduce, bytes: 4096}\nexpect:\n  stalled_ranks: [9]\n",
                "expect.stalled_ranks[0]: rank 9 does not exist"},
           Case{"      - {op: allreduce, bytes: 4096}\nexpect:\n  iteration_p50_us: {value: -1}\n",
                "expect.iteration_p50_us.value"},
       }) {
    SCOPED_TRACE(k.body);
    const std::string path = tmp.Write("bad_training.yaml", head + k.body);
    auto r = test_util::RunCommand(kFathom + " coll train --scenario " + path);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("bad_training.yaml:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(k.want), std::string::npos) << r.out;
  }
  // coll refuses a sweep op on the loop.
  const std::string path =
      tmp.Write("training_sim.yaml", head + "      - {op: allreduce, bytes: 4096}\n");
  auto r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + path);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("fathom coll train --scenario"), std::string::npos) << r.out;
}

// A fault placed at an iteration (faults[].at_iteration) is armed when
// that iteration posts its first collective: the example's link goes down
// at iteration 42 and iteration 42's allreduce fails with error 12 one
// retry budget after it was posted, whatever the compute time before it.
TEST(CollTrainingTest, FaultAtAnIterationHitsThatIteration) {
  test_util::ScratchDir tmp;
  const std::string path = kScenarios + "coll/training_link_down_at_iteration.yaml";
  auto r = test_util::RunCommand(kFathom + " coll train --scenario " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# fault link_down#0 placed at iteration 42: acts from t="),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# FAILED: iteration 42 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("IBV_WC_RETRY_EXC_ERR"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# expectations met"), std::string::npos) << r.out;
  // Mutation: the fault one iteration later fails the pinned expectation.
  std::string text = Read(path);
  const size_t at = text.find("at_iteration: 42");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 16, "at_iteration: 43");
  r = test_util::RunCommand(kFathom + " coll train --scenario " + tmp.Write("at43.yaml", text));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("expectation not met: first_failed_iteration: expected 42, got 43"),
            std::string::npos)
      << r.out;
  // A second fault after the failure is never armed, and the report says so.
  text = Read(path);
  const size_t faults = text.find("faults:\n");
  ASSERT_NE(faults, std::string::npos);
  text.insert(faults + 8, "  - {kind: loss, link: h0-leaf0, rate: 0.5, at_iteration: 60}\n");
  r = test_util::RunCommand(kFathom + " coll train --scenario " + tmp.Write("at60.yaml", text));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# fault loss#0 placed at iteration 60: not reached, never acted"),
            std::string::npos)
      << r.out;
}

// Through the API: where the faults are armed, and that the offset counts
// from the iteration's first post (a 0.5 s offset with 1 s of compute and a
// few-us allreduce lands in the next iteration's compute, so the next
// iteration is the one that fails). A verbs fault placed at an iteration
// acts at that iteration's first post.
TEST(CollTrainingTest, IterationOffsetAndVerbsFaultsAtAnIteration) {
  const std::string head =
      "name: at-iteration\n" + std::string(kTwoLeavesTraining) + R"(    iterations: 20
    compute_us: 1000000
    collectives:
      - {op: allreduce, bytes: 65536}
)";
  auto run = [](const std::string& yaml) { return Train(yaml).r; };
  const TrainingResult base = run(head);
  ASSERT_FALSE(base.failed);
  ASSERT_EQ(base.completed, 20);
  const Picoseconds iteration = base.iteration_times[0];
  const Picoseconds compute = Picoseconds::FromSeconds(1);
  {
    SCOPED_TRACE("offset 0");
    const TrainingResult r = run(head +
                                 "faults:\n  - {kind: link_down, link: h3-leaf1, "
                                 "at_iteration: 5, duration_us: 60000000}\n");
    ASSERT_EQ(r.armed.size(), 1u);
    EXPECT_EQ(r.armed[0].iteration, 5);
    // Iterations 0..4 took the fault-free time; the fault acts when
    // iteration 5's compute ends.
    EXPECT_EQ(r.armed[0].at, base.start + iteration * 5 + compute);
    EXPECT_EQ(r.failed_iteration, 5);
    EXPECT_EQ(r.error_status, "IBV_WC_RETRY_EXC_ERR");
  }
  {
    SCOPED_TRACE("offset 0.5 s");
    const TrainingResult r = run(head +
                                 "faults:\n  - {kind: link_down, link: h3-leaf1, at_iteration: 5, "
                                 "iteration_offset_us: 500000, duration_us: 60000000}\n");
    ASSERT_EQ(r.armed.size(), 1u);
    EXPECT_EQ(r.armed[0].at, base.start + iteration * 5 + compute + Picoseconds::FromSeconds(0.5));
    EXPECT_EQ(r.failed_iteration, 6);
  }
  {
    SCOPED_TRACE("verbs fault");
    const TrainingResult r = run(head +
                                 "verbs_faults:\n  - {kind: fail_post, rank: 1, at_iteration: "
                                 "7}\n  - {kind: qp_error, rank: 2, at_iteration: 19}\n");
    ASSERT_EQ(r.armed.size(), 1u);  // iteration 19 never came
    EXPECT_EQ(r.armed[0].name, "verbs_faults[0] fail_post");
    EXPECT_EQ(r.armed[0].at, base.start + iteration * 7 + compute);
    EXPECT_TRUE(r.failed);
    EXPECT_EQ(r.failed_iteration, 7);
    EXPECT_EQ(r.completed, 7);
  }
}

// Bad placements: file:line and the field, exit 2.
TEST(CollTrainingTest, BadIterationPlacementNamesFileLineAndField) {
  test_util::ScratchDir tmp;
  const std::string head = R"(name: bad
end_time_us: 1
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
workload:
  pattern: training
  training:
    iterations: 5
    compute_us: 1000
    collectives:
      - {op: allreduce, bytes: 4096}
)";
  struct Case {
    std::string body;
    std::string want;
  };
  for (const Case& k : {
           Case{"faults:\n  - {kind: link_down, link: h3-leaf1, at_iteration: 5}\n",
                "faults[0].at_iteration: iteration 5 never runs: the job has 5 "
                "iterations (0..4)"},
           Case{"faults:\n  - {kind: link_down, link: h3-leaf1, at_iteration: -1}\n",
                "faults[0].at_iteration: -1 is negative"},
           Case{"faults:\n  - {kind: link_down, link: h3-leaf1, at_iteration: 2, start_us: 0}\n",
                "faults[0].start_us: set start_us (a time) or at_iteration (an iteration), not "
                "both"},
           Case{"faults:\n  - {kind: link_down, link: h3-leaf1, iteration_offset_us: 3}\n",
                "faults[0].iteration_offset_us: needs at_iteration"},
           Case{"faults:\n  - {kind: link_down, link: h3-leaf1, at_iteration: 1, "
                "iteration_offset_us: -3}\n",
                "faults[0].iteration_offset_us"},
           Case{"verbs_faults:\n  - {kind: qp_error, rank: 1, at_us: 10, at_iteration: 1}\n",
                "verbs_faults[0].at_us: set at_us (a time) or at_iteration"},
           Case{"verbs_faults:\n  - {kind: qp_error, rank: 1, at_iteration: 9}\n",
                "verbs_faults[0].at_iteration: iteration 9 never runs"},
       }) {
    SCOPED_TRACE(k.body);
    const std::string path = tmp.Write("bad_at.yaml", head + k.body);
    auto r = test_util::RunCommand(kFathom + " coll train --scenario " + path);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("bad_at.yaml:13:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(k.want), std::string::npos) << r.out;
  }
  // Not a training scenario: there are no iterations.
  const std::string flows = tmp.Write("at_flows.yaml", R"(name: flows
end_time_us: 1000
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
workload:
  pattern: permutation
  flow_bytes: 4096
faults:
  - {kind: loss, link: h3-leaf1, rate: 0.1, at_iteration: 3}
)");
  for (const std::string cmd : {" sim ", " coll allreduce -b 4K -e 4K -n 1 -w 0 --scenario "}) {
    auto r = test_util::RunCommand(kFathom + cmd + flows);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("at_flows.yaml:9:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("faults[0].at_iteration: places a fault at an iteration of a training "
                         "loop, but the workload is not one"),
              std::string::npos)
        << r.out;
  }
}

// The lines of a run's text output that do not depend on the event order:
// all but the wall-time line and the canonical digest's.
std::string WithoutWallAndDigest(const std::string& out) {
  std::stringstream in(out);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.rfind("# wall ", 0) == 0 || line.rfind("# trace digest ", 0) == 0) continue;
    kept += line + "\n";
  }
  return kept;
}

// The digest a canonical run printed ("" when none).
std::string DigestIn(const std::string& out) {
  const std::string head = "# trace digest ";
  const size_t at = out.find(head);
  return at == std::string::npos ? std::string() : out.substr(at + head.size(), 16);
}

// The line of `out` that starts with `head` ("" when none).
std::string LineOf(const std::string& out, const std::string& head) {
  const size_t at = out.find(head);
  return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
}

// `--event-order canonical` (one process): the windowed loop that runs
// across MPI processes (a collective starts at the window boundary after
// the one before it; docs/PARALLEL.md, "Training loops"). With one
// collective per iteration and compute of at least a window, that is the
// default order's loop: every line of the report but the wall time is the
// same. With two (training_dp_stall.yaml), the second starts up to a
// window later: the iterations, the failing iteration, collective and group
// are the default order's, the times not. The canonical trace digest is
// the same run to run, and `fathom sim` gives it too.
TEST(CollTrainingTest, CanonicalOrderRunsTheWindowedLoop) {
  for (const char* name : {"training_dp_stall.yaml", "training_link_down_at_iteration.yaml",
                           "training_link_down_hour7.yaml"}) {
    SCOPED_TRACE(name);
    const std::string cmd = kFathom + " coll train --scenario " + kScenarios + "coll/" + name;
    // stdout, then stderr (the report of the failure) on its own.
    const test_util::CommandResult def = test_util::RunCommand(cmd, /*merge_stderr=*/false);
    const test_util::CommandResult canon =
        test_util::RunCommand(cmd + " --event-order canonical", /*merge_stderr=*/false);
    ASSERT_EQ(def.exit_code, 0) << def.out;
    ASSERT_EQ(canon.exit_code, 0) << canon.out;
    EXPECT_NE(canon.out.find("# FAILED: iteration "), std::string::npos) << canon.out;
    EXPECT_NE(canon.out.find("# expectations met"), std::string::npos) << canon.out;
    if (std::string(name) == "training_dp_stall.yaml") {
      EXPECT_NE(LineOf(def.out, "# iterations completed 839,"), "") << def.out;
      EXPECT_NE(LineOf(canon.out, "# iterations completed 839,"), "") << canon.out;
      const std::string failed = "# FAILED: iteration 839 (started t=";
      EXPECT_NE(canon.out.find(failed), std::string::npos) << canon.out;
      EXPECT_NE(canon.out.find("collective 'tp' group 1: no progress"), std::string::npos)
          << canon.out;
      EXPECT_NE(WithoutWallAndDigest(canon.out), WithoutWallAndDigest(def.out));
    } else {
      EXPECT_EQ(WithoutWallAndDigest(canon.out), WithoutWallAndDigest(def.out));
    }
    const std::string canon_err =
        test_util::RunCommand(cmd + " --event-order canonical 2>&1 >/dev/null", false).out;
    EXPECT_NE(canon_err.find("training: iteration "), std::string::npos) << canon_err;
    EXPECT_EQ(DigestIn(def.out), "") << def.out;
    const std::string digest = DigestIn(canon.out);
    ASSERT_EQ(digest.size(), 16u) << canon.out;
    EXPECT_NE(canon.out.find("# trace digest " + digest + " (canonical event order, 1 process)"),
              std::string::npos)
        << canon.out;
    // The same digest again, and in the JSON report; the default order's
    // JSON has none.
    EXPECT_EQ(DigestIn(test_util::RunCommand(cmd + " --event-order canonical").out), digest);
    const test_util::CommandResult json =
        test_util::RunCommand(cmd + " --event-order canonical --json", /*merge_stderr=*/false);
    EXPECT_EQ(json.exit_code, 0) << json.out;
    EXPECT_NE(json.out.find("\"event_order\":\"canonical\",\"processes\":1,\"trace_digest\":\"" +
                            digest + "\""),
              std::string::npos)
        << json.out;
    EXPECT_EQ(test_util::RunCommand(cmd + " --json", false).out.find("trace_digest"),
              std::string::npos);
    // `fathom sim` runs the same loop in the same order: the same digest.
    EXPECT_EQ(DigestIn(test_util::RunCommand(kFathom + " sim " + kScenarios + "coll/" + name +
                                             " --event-order canonical")
                           .out),
              digest);
  }
}

// The same through the API, with faults armed mid-run at an iteration (a
// link down and verbs faults): the outcome (iterations, failing iteration,
// collective and group, error, report, events, faults armed) is the default
// order's, and the canonical digest the same run to run. Their times may
// not be: a fault's events that tie at one picosecond with the traffic's go
// in another order (docs/PARALLEL.md, "Training loops": the link down fails
// 87 ns later, delayed completions make the iterations they hit 167 ns
// longer), so times are compared where no fault acts.
TEST(CollTrainingTest, CanonicalOrderArmsIterationFaultsAsTheDefault) {
  const std::string head =
      "name: at-iteration-canonical\n" + std::string(kTwoLeavesTraining) + R"(    iterations: 12
    compute_us: 1000
    checkpoint_every: 4
    checkpoint_us: 300
    collectives:
      - {op: allgather, bytes: 65536, name: tp, groups: [{ranks: [0, 1]}, {ranks: [2, 3]}]}
      - {op: allreduce, bytes: 131072, name: dp, groups: [{ranks: [0, 2]}, {ranks: [1, 3]}]}
)";
  std::vector<uint64_t> digests;
  for (const std::string& faults :
       {std::string(),
        std::string("faults:\n  - {kind: link_down, link: h3-leaf1, at_iteration: 5, "
                    "iteration_offset_us: 3, duration_us: 60000000}\n"),
        std::string("verbs_faults:\n  - {kind: delay_completions, rank: 1, delay_us: 40, "
                    "at_iteration: 2}\n  - {kind: qp_error, rank: 2, at_iteration: 7}\n")}) {
    SCOPED_TRACE(faults);
    const Trained def = Train(head + faults, false);
    const Trained canon = Train(head + faults, true);
    const size_t k = digests.size();  // 0: no fault, 1: link down, 2: verbs faults
    EXPECT_EQ(canon.r.completed, def.r.completed);
    EXPECT_EQ(canon.r.start, def.r.start);
    if (k < 2) {
      EXPECT_EQ(canon.r.iteration_times, def.r.iteration_times);
    }
    if (k == 0) {
      EXPECT_EQ(canon.r.end, def.r.end);
    }
    EXPECT_EQ(canon.r.failed, def.r.failed);
    EXPECT_EQ(canon.r.failed, k > 0);
    EXPECT_EQ(canon.r.hung, def.r.hung);
    EXPECT_EQ(canon.r.failed_iteration, def.r.failed_iteration);
    if (k < 2) {
      EXPECT_EQ(canon.r.failed_iteration_start, def.r.failed_iteration_start);
    }
    EXPECT_EQ(canon.r.failed_collective, def.r.failed_collective);
    EXPECT_EQ(canon.r.failed_group, def.r.failed_group);
    EXPECT_EQ(canon.r.error_status, def.r.error_status);
    EXPECT_EQ(canon.r.stalled_ranks, def.r.stalled_ranks);
    EXPECT_EQ(canon.r.report, def.r.report);
    EXPECT_EQ(canon.r.events, def.r.events);
    ASSERT_EQ(canon.r.armed.size(), def.r.armed.size());
    for (size_t i = 0; i < def.r.armed.size(); ++i) {
      EXPECT_EQ(canon.r.armed[i].name, def.r.armed[i].name);
      EXPECT_EQ(canon.r.armed[i].iteration, def.r.armed[i].iteration);
      if (k < 2) {
        EXPECT_EQ(canon.r.armed[i].at, def.r.armed[i].at);
      }
    }
    EXPECT_TRUE(canon.r.status.ok()) << canon.r.status.ToString();
    EXPECT_EQ(Train(head + faults, true).digest, canon.digest);
    digests.push_back(canon.digest);
  }
  EXPECT_NE(digests[0], digests[1]);
  EXPECT_NE(digests[0], digests[2]);
  EXPECT_NE(digests[1], digests[2]);
}

// `fathom sim` runs a training scenario through the same loop and report
// as `fathom coll train`, and honours its expect block (a miss exits 1).
// Flow-level outputs are refused.
TEST(CollTrainingTest, SimRunsTheTrainingLoop) {
  test_util::ScratchDir tmp;
  const std::string path = kScenarios + "coll/training_link_down_hour7.yaml";
  auto r = test_util::RunCommand(kFathom + " sim " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# fathom sim: training loop, 4 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# iterations completed 839, virtual time 25200.544558 s"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("IBV_WC_RETRY_EXC_ERR at t=25200544557.830 us"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# expectations met"), std::string::npos) << r.out;
  r = test_util::RunCommand(kFathom + " sim --json " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"first_failed_iteration\":839"), std::string::npos) << r.out;
  const std::string nofault = tmp.Write("sim_nofault.yaml", WithoutBlock(Read(path), "faults"));
  r = test_util::RunCommand(kFathom + " sim " + nofault);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("fathom sim: expectation not met: first_failed_iteration: expected 839, "
                       "got -1"),
            std::string::npos)
      << r.out;
  r = test_util::RunCommand(kFathom + " sim --flows-out /tmp/x.csv " + path);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("fathom sim: --flows-out: a training scenario has no flows"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace fathom::transport::worlds
