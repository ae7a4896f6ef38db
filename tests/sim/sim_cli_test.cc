// `fathom sim` as users run it: exit codes (1 for failed or stalled flows
// the scenario does not expect, 2 for bad flags and unwritable outputs,
// checked before the run), --seed's range, --json on stdout and --json-out,
// --pcap of a whole switch, and --trace as Chrome trace JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "fabric/wire/pcap.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace fathom::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
const std::string kScenarios = std::string(FATHOM_SOURCE_DIR) + "/scenarios/";

test_util::CommandResult Sim(const std::string& args, bool merge_stderr = true) {
  return test_util::RunCommand(kFathom + " sim " + args, merge_stderr);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One flow into a black hole: it fails (retry_cnt exceeded) within 4 ms,
// or with rxe's infinite retry it never ends (stalled at end_time_us).
std::string BlackHole(const std::string& transport_extra, const std::string& expect) {
  return "name: black-hole\nseed: 5\nend_time_us: 10000\n"
         "topology: {preset: \"leaf-spine:leaves=2,spines=1,hosts=2,gpus=1\"}\n"
         "transport: {ib_timeout: 8, message_bytes: 65536" +
         transport_extra +
         "}\n"
         "workload: {pattern: flows, flows: [{src: h0, dst: h2, bytes: 262144}]}\n"
         "faults: [{kind: black_hole, link: h0-leaf0, from: h0}]\n" +
         expect;
}

const char* kFails = ", retry_cnt: 2";
const char* kStalls = ", retry_cnt: 7, rxe_infinite_retry: true";

// A flow that completes, on the same small fabric.
const char* kOneFlow =
    "name: one-flow\nseed: 2\nend_time_us: 10000\n"
    "topology: {preset: \"leaf-spine:leaves=2,spines=1,hosts=2,gpus=1\"}\n"
    "transport: {opcode: send, message_bytes: 10000}\n"
    "workload: {pattern: flows, flows: [{src: h0, dst: h2, bytes: 30000}]}\n";

// Issue 24: failed flows and no `expect` block exited 0, silently with --quiet.
TEST(SimCliTest, FailedFlowsWithoutExpectExitOneWithAReasonEvenQuiet) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.Write("failed.yaml", BlackHole(kFails, ""));
  auto r = Sim(path + " --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("1 of 1 flows failed (IBV_WC_RETRY_EXC_ERR=1"));
  EXPECT_THAT(r.out, HasSubstr("the scenario has no expect block to accept it (set "
                               "expect.flows_failed)"));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  // The reason is on stderr: stdout stays empty with --quiet.
  EXPECT_EQ(Sim(path + " --quiet", /*merge_stderr=*/false).out, "");
}

TEST(SimCliTest, StalledFlowsWithoutExpectExitOne) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.Write("stalled.yaml", BlackHole(kStalls, "expect: {}\n"));
  auto r = Sim(path);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("1 of 1 flows stalled (not done when the run ended)"));
  EXPECT_THAT(r.out, HasSubstr("set expect.flows_stalled"));
}

TEST(SimCliTest, FailuresTheExpectBlockExpectsExitZero) {
  test_util::ScratchDir tmp;
  auto failed =
      Sim(tmp.Write("expected_fail.yaml", BlackHole(kFails, "expect: {flows_failed: 1}\n")) +
          " --quiet");
  EXPECT_EQ(failed.exit_code, 0) << failed.out;
  EXPECT_EQ(failed.out, "");
  auto by_status =
      Sim(tmp.Write("expected_status.yaml", BlackHole(kFails,
                                                      "expect:\n  completion_statuses:\n"
                                                      "    IBV_WC_RETRY_EXC_ERR: 1\n"
                                                      "    IBV_WC_WR_FLUSH_ERR: 3\n")) +
          " --quiet");
  EXPECT_EQ(by_status.exit_code, 0) << by_status.out;
  auto stalled =
      Sim(tmp.Write("expected_stall.yaml", BlackHole(kStalls, "expect: {flows_stalled: 1}\n")) +
          " --quiet");
  EXPECT_EQ(stalled.exit_code, 0) << stalled.out;
  // A mismatch is still a failure.
  auto wrong = Sim(tmp.Write("wrong.yaml", BlackHole(kFails, "expect: {flows_failed: 0}\n")));
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
  EXPECT_THAT(wrong.out, HasSubstr("expectation not met: flows_failed: expected 0, got 1"));
}

// The quick examples meet their expectations from the command line too
// (the fault examples run in tests/faults/scenarios_test).
class SimCliExampleTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SimCliExampleTest, ExitsZero) {
  auto r = Sim(kScenarios + GetParam() + " --quiet");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(Examples, SimCliExampleTest,
                         ::testing::Values("permutation_k4.yaml", "incast.yaml",
                                           "retry_exceeded.yaml"));

// Issue 24: --pcap to an unwritable path exited 1 (--json, --trace 2), and
// --json's file was only opened after the whole run. Every output is
// checked before the run: the trace opened next to it records nothing.
TEST(SimCliTest, UnwritableOutputsExitTwoBeforeTheRun) {
  test_util::ScratchDir tmp;
  const std::string scenario = tmp.Write("one.yaml", kOneFlow);
  const std::string trace = tmp.File("before.json");
  for (const std::string bad :
       {"--pcap h0-leaf0=/nonexistent/x.pcap", "--json-out /nonexistent/x.json"}) {
    std::remove(trace.c_str());
    auto r = Sim(scenario + " --trace " + trace + " " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("/nonexistent/x."));
    EXPECT_THAT(r.out, HasSubstr("cannot create the file"));
    EXPECT_THAT(r.out, Not(HasSubstr("digest")));
    EXPECT_THAT(ReadFile(trace), Not(HasSubstr("arrival"))) << bad;
  }
  auto t = Sim(scenario + " --trace /nonexistent/t.json");
  EXPECT_EQ(t.exit_code, 2) << t.out;
  EXPECT_THAT(t.out, HasSubstr("--trace /nonexistent/t.json: cannot create the file"));
  // A write that fails (a full disk) is the output's failure too.
  auto full = Sim(scenario + " --quiet --pcap h0=/dev/full");
  EXPECT_EQ(full.exit_code, 2) << full.out;
  EXPECT_THAT(full.out, HasSubstr("--pcap h0=/dev/full"));
}

// Issue 24: --seed -1 wrapped to 2^64-1; the YAML loader refuses a negative seed.
TEST(SimCliTest, SeedOutOfRangeIsAUsageError) {
  test_util::ScratchDir tmp;
  const std::string scenario = tmp.Write("one.yaml", kOneFlow);
  for (const std::string seed : {"-1", "18446744073709551616", "1.5", "x"}) {
    auto r = Sim(scenario + " --seed " + seed);
    EXPECT_EQ(r.exit_code, 2) << seed << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("--seed: " + seed + " is not a seed"));
    EXPECT_THAT(r.out, HasSubstr("[0, 18446744073709551615]"));
  }
  auto top = Sim(scenario + " --seed 18446744073709551615 --json");
  EXPECT_EQ(top.exit_code, 0) << top.out;
  EXPECT_THAT(top.out, HasSubstr("\"seed\": 18446744073709551615,"));
}

// Issue 24: --json took a FILE in sim and was a flag everywhere else.
TEST(SimCliTest, JsonIsAFlagAndJsonOutTakesTheFile) {
  test_util::ScratchDir tmp;
  const std::string scenario = tmp.Write("one.yaml", kOneFlow);
  auto r = Sim(scenario + " --json", /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);  // stdout is the JSON, nothing else
  EXPECT_EQ(j.at("flows_completed"), 1);
  EXPECT_EQ(j.at("name"), "one-flow");

  const std::string out = tmp.File("report.json");
  auto both = Sim(scenario + " --json-out " + out, /*merge_stderr=*/false);
  EXPECT_EQ(both.exit_code, 0) << both.out;
  EXPECT_THAT(both.out, HasSubstr("flows      1 total: 1 completed"));
  EXPECT_EQ(nlohmann::json::parse(ReadFile(out)).at("trace_digest"), j.at("trace_digest"));

  auto old = Sim(scenario + " --json " + out);
  EXPECT_EQ(old.exit_code, 2) << old.out;
  EXPECT_THAT(old.out, HasSubstr("not expected: " + out));
}

// Issue 24: --pcap with a switch's name captured only its first link.
TEST(SimCliTest, PcapOfASwitchCapturesAllItsLinks) {
  test_util::ScratchDir tmp;
  const std::string scenario = tmp.Write("one.yaml", kOneFlow);
  auto frames = [](const std::string& path) {
    auto reader = wire::PcapReader::Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return -1;
    wire::PcapRecord rec;
    int n = 0;
    while (true) {
      auto more = (*reader)->Next(&rec);
      if (!more.ok() || !*more) break;
      ++n;
    }
    return n;
  };
  const std::string all = tmp.File("leaf0.pcap"), host = tmp.File("h0.pcap"),
                    up = tmp.File("up.pcap");
  auto r = Sim(scenario + " --quiet --pcap leaf0=" + all);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The flow crosses leaf0 on h0-leaf0 and leaf0-spine0 (h1-leaf0 is idle).
  auto parts = Sim(scenario + " --quiet --pcap h0-leaf0=" + host + " --pcap leaf0-spine0=" + up);
  ASSERT_EQ(parts.exit_code, 0) << parts.out;
  EXPECT_GT(frames(host), 0);
  EXPECT_GT(frames(up), 0);
  EXPECT_EQ(frames(all), frames(host) + frames(up));
  // A link in two captures, and a name that is no link, are refused.
  auto twice = Sim(scenario + " --pcap leaf0=" + all + " --pcap h0-leaf0=" + host);
  EXPECT_EQ(twice.exit_code, 2) << twice.out;
  EXPECT_THAT(twice.out, HasSubstr("both capture link h0-leaf0"));
  auto unknown = Sim(scenario + " --pcap leaf9=" + all);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_THAT(unknown.out, HasSubstr("links are h0-leaf0, h1-leaf0, h2-leaf1"));
}

// Issue 24: --trace wrote "time_ps kind component" lines; now Chrome trace
// JSON with a named track per component.
TEST(SimCliTest, TraceIsChromeTraceJson) {
  test_util::ScratchDir tmp;
  const std::string scenario = tmp.Write("one.yaml", kOneFlow);
  const std::string trace = tmp.File("trace.json");
  auto r = Sim(scenario + " --json --trace " + trace, /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto report = nlohmann::json::parse(r.out);
  const auto doc = nlohmann::json::parse(ReadFile(trace));
  ASSERT_TRUE(doc.at("traceEvents").is_array());
  std::set<std::string> kinds, processes, threads;
  uint64_t instants = 0;
  double last_ts = 0;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M") {
      if (e.at("name") == "process_name") processes.insert(e.at("args").at("name"));
      if (e.at("name") == "thread_name") threads.insert(e.at("args").at("name"));
      continue;
    }
    ASSERT_EQ(ph, "i");
    ASSERT_TRUE(e.at("pid").is_number_integer() && e.at("tid").is_number_integer());
    const double ts = e.at("ts");
    EXPECT_GE(ts, last_ts);  // dispatch order is time order
    last_ts = ts;
    kinds.insert(e.at("name"));
    ++instants;
  }
  EXPECT_EQ(instants, report.at("events").get<uint64_t>());
  EXPECT_TRUE(kinds.count("arrival") && kinds.count("nic_pump") && kinds.count("flow_start"));
  for (const std::string& k : kinds) {
    EXPECT_TRUE(
        std::set<std::string>({"arrival", "nic_pump", "qp_timer", "flow_start", "fault", "user"})
            .count(k))
        << k;
  }
  EXPECT_TRUE(processes.count("h0") && processes.count("leaf0") && processes.count("workload"));
  EXPECT_TRUE(threads.count("NIC")) << doc.dump();
  EXPECT_TRUE(threads.count("port 0 rx h0-leaf0")) << doc.dump();  // at leaf0, from h0
  EXPECT_EQ(doc.at("displayTimeUnit"), "ns");
  EXPECT_GT(last_ts, 0);
  EXPECT_LE(last_ts, report.at("sim_time_ns").get<double>() / 1e3 + 1e-3);  // JSON: whole ns
}

// A --fault flag's error used to name the scenario's last fault line
// ("retry_exceeded.yaml:18:3: faults[1].link"): it names the flag now.
TEST(SimCliTest, ABadFaultFlagIsNamedNotTheScenarioLine) {
  auto r = Sim(kScenarios + "retry_exceeded.yaml --quiet --fault kind=loss,link=nosuch,rate=0.1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--fault 'kind=loss,link=nosuch,rate=0.1'"));
  EXPECT_THAT(r.out, HasSubstr("'nosuch' matches no link"));
  EXPECT_THAT(r.out, Not(HasSubstr("retry_exceeded.yaml:")));
}

// Issue 27: the flow table as CSV (by the file's extension) or JSON, and
// in --json; an unknown extension is a bad flag (2) before the run.
TEST(SimCliTest, FlowsOutWritesCsvOrJson) {
  test_util::ScratchDir tmp;
  const std::string scenario =
      tmp.Write("flows.yaml", BlackHole(kFails, "expect: {flows_failed: 1}\n"));
  const std::string csv = tmp.File("flows.csv"), json = tmp.File("flows.json");
  auto r = Sim(scenario + " --quiet --flows-out " + csv);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadFile(csv),
            "index,src,dst,qpns,peer_qpns,bytes,start_ns,end_ns,fct_ns,status,first_error,"
            "first_error_ns,retransmissions\n"
            "0,h0,h2,0x11,0x11,262144,0.000,3145728.000,,failed,IBV_WC_RETRY_EXC_ERR,"
            "3145728.000,128\n");
  r = Sim(scenario + " --json --flows-out " + json, /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto table = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(nlohmann::json::parse(r.out).at("flows"), table);
  EXPECT_EQ(table.at(0).at("status"), "failed");
  auto bad = Sim(scenario + " --flows-out " + tmp.File("flows.txt"));
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_THAT(bad.out,
              HasSubstr("--flows-out " + tmp.File("flows.txt") + ": the file name must end in"));
  EXPECT_THAT(bad.out, Not(HasSubstr("scenario ")));  // no run
}

// A missed signature exits 1 with expected vs got; an expect item naming
// what the run does not have exits 2 naming file:line:field.
TEST(SimCliTest, SignatureExpectationsExitOneOrTwo) {
  test_util::ScratchDir tmp;
  auto missed = Sim(tmp.Write("sig1.yaml", BlackHole(kFails,
                                                     "expect:\n  first_error_us: {value: 1000, "
                                                     "tolerance_pct: 1}\n")) +
                    " --quiet");
  EXPECT_EQ(missed.exit_code, 1) << missed.out;
  EXPECT_THAT(missed.out, HasSubstr("first_error_us: expected 1000 us +- 10 us, got 3145.728 us"));
  const std::string bad =
      tmp.Write("sig2.yaml", BlackHole(kFails, "expect:\n  flows: [{dst: h1, status: failed}]\n"));
  auto no_flow = Sim(bad + " --quiet");
  EXPECT_EQ(no_flow.exit_code, 2) << no_flow.out;
  EXPECT_THAT(no_flow.out, HasSubstr(bad + ":9:"));
  EXPECT_THAT(no_flow.out, HasSubstr("expect.flows[0].dst: no flow of this run goes * -> h1"));
  const std::string unknown = tmp.Write(
      "sig3.yaml", BlackHole(kFails, "expect:\n  counters: [{name: nak_count, equal: 1}]\n"));
  auto counter = Sim(unknown + " --quiet");
  EXPECT_EQ(counter.exit_code, 2) << counter.out;
  EXPECT_THAT(counter.out, HasSubstr(unknown + ":9:"));
  EXPECT_THAT(counter.out, HasSubstr("expect.counters[0].name: 'nak_count' is not a counter"));
}

}  // namespace
}  // namespace fathom::sim
