// Issue 27: signature expectations (per flow and QP, counters at a scope,
// drops, no error surfaced, error times with a tolerance) — met, missed
// (expected vs got) and bad input (file:line:field) — and the report: the
// JSON round trip (unique keys, every counter the text prints), the flow
// table as JSON and CSV.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fabric/scenario/scenario.h"

namespace fathom::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One 256 KiB flow h0 -> h2 into a black hole on h0's link: 3 local ACK
// timeouts of 4.096 us x 2^8 = 1.048576 ms, then IBV_WC_RETRY_EXC_ERR at
// 3145.728 us; and a second flow h1 -> h3 that completes.
const std::string kBase =
    "name: sig\nseed: 5\nend_time_us: 10000\n"
    "topology: {preset: \"leaf-spine:leaves=2,spines=1,hosts=2,gpus=1\"}\n"
    "transport: {ib_timeout: 8, retry_cnt: 2, message_bytes: 65536}\n"
    "workload: {pattern: flows, flows: [{src: h0, dst: h2, bytes: 262144}, "
    "{src: h1, dst: h3, bytes: 262144}]}\n"
    "faults: [{kind: black_hole, link: h0-leaf0, from: h0}]\n";

StatusOr<LoadedScenario> Load(const std::string& expect) {
  return LoadScenarioString(kBase + expect, "sig.yaml");
}

const RunReport& Report() {
  static const RunReport* report = [] {
    auto sc = Load("");
    EXPECT_TRUE(sc.ok()) << sc.status().ToString();
    auto r = RunScenario(*sc, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return new RunReport(std::move(r).value());
  }();
  return *report;
}

std::vector<std::string> Check(const std::string& expect) {
  auto sc = Load(expect);
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  if (!sc.ok()) return {"load failed"};
  auto out = CheckExpectations(*sc, Report());
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<std::string>{"bad input"};
}

TEST(SignatureTest, TheRunsFlowTable) {
  const RunReport& r = Report();
  ASSERT_EQ(r.flow_table.size(), 2u);
  const FlowReport& f = r.flow_table[0];
  EXPECT_EQ(f.src, "h0");
  EXPECT_EQ(f.dst, "h2");
  EXPECT_EQ(f.status, "failed");
  EXPECT_EQ(f.first_error, "IBV_WC_RETRY_EXC_ERR");
  EXPECT_DOUBLE_EQ(f.first_error_ns, 3 * 1048576.0);
  EXPECT_EQ(f.fct_ns, -1);
  EXPECT_GT(f.retransmissions, 0u);
  ASSERT_EQ(f.qps.size(), 1u);
  EXPECT_EQ(f.qps[0].state, "IBV_QPS_ERR");
  EXPECT_EQ(f.qps[0].requester.local_ack_timeout_err, 3u);
  EXPECT_EQ(r.flow_table[1].status, "completed");
  EXPECT_GT(r.flow_table[1].fct_ns, 0);
  EXPECT_EQ(r.flow_table[1].first_error, "");
  EXPECT_DOUBLE_EQ(r.first_error_ns, 3 * 1048576.0);
  ASSERT_EQ(r.fault_stats.size(), 1u);
  EXPECT_GT(r.fault_stats[0].counters.frames_dropped, 0u);
  EXPECT_DOUBLE_EQ(r.fault_stats[0].active_ns, r.sim_time_ns);
}

TEST(SignatureTest, MetExpectationsPassAndAcceptTheFailedFlow) {
  EXPECT_THAT(Check("expect:\n"
                    "  first_error_us: {value: 3145.728}\n"
                    "  flows:\n"
                    "    - {flow: 0, status: failed, first_error: IBV_WC_RETRY_EXC_ERR,\n"
                    "       first_error_us: {value: 3100, tolerance_pct: 2}}\n"
                    "    - {src: h1, dst: h3, status: completed, fct_at_most_us: 1000}\n"
                    "  qps:\n"
                    "    - {flow: 0, qp: 0, first_error: IBV_WC_RETRY_EXC_ERR, state: "
                    "IBV_QPS_ERR}\n"
                    "    - {flow: 1, qp: 0, first_error: none, state: IBV_QPS_RTS}\n"
                    "  counters:\n"
                    "    - {name: local_ack_timeout_err, flow: 0, qp: 0, equal: 3}\n"
                    "    - {name: local_ack_timeout_err, node: h0, equal: 3}\n"
                    "    - {name: local_ack_timeout_err, node: h1, equal: 0}\n"
                    "    - {name: frames_dropped, fault: \"black_hole#0\", at_least: 1}\n"
                    "    - {name: port_xmit_packets, port: \"h1:0\", at_least: 64}\n"
                    "    - {name: port_xmit_packets, ports: \"h0->*\", at_least: 1}\n"
                    "    - {name: port_xmit_discards, at_most: 0}\n"
                    "  drops: {impairment: {at_least: 1}, tail_drop: {equal: 0}}\n"
                    "  no_error_surfaced: false\n"),
              IsEmpty());
}

TEST(SignatureTest, MissedExpectationsSayExpectedAndGot) {
  EXPECT_THAT(Check("expect:\n  flows: [{flow: 0, status: completed}]\n"),
              ElementsAre(HasSubstr("flows[0] (flow 0 h0->h2): status: expected completed, "
                                    "got failed"),
                          // Not accepted as a failure either.
                          HasSubstr("1 of 2 flows failed")));
  EXPECT_THAT(Check("expect:\n  first_error_us: {value: 6291.456, tolerance_pct: 1}\n"),
              ElementsAre(HasSubstr("first_error_us: expected 6291.456 us +- 62.915 us, got "
                                    "3145.728 us")));
  EXPECT_THAT(Check("expect:\n  flows: [{flow: 1, first_error_us: {value: 10}}]\n"),
              ElementsAre(HasSubstr("flows[0] (flow 1 h1->h3): first_error_us: expected 10 us, "
                                    "got none"),
                          HasSubstr("1 of 2 flows failed")));
  EXPECT_THAT(Check("expect:\n  flows_failed: 1\n  counters:\n"
                    "    - {name: local_ack_timeout_err, flow: 0, at_least: 4}\n"
                    "    - {name: port_xmit_packets, port: \"h1:0\", at_most: 2}\n"),
              ElementsAre(HasSubstr("counters[0] local_ack_timeout_err at flow 0: expected at "
                                    "least 4, got 3"),
                          HasSubstr("counters[1] port_xmit_packets at port h1:0: expected at "
                                    "most 2, got")));
  EXPECT_THAT(Check("expect:\n  flows_failed: 1\n  drops: {impairment: {equal: 0}}\n"),
              ElementsAre(HasSubstr("drops.impairment: expected 0, got")));
  EXPECT_THAT(Check("expect:\n  flows_failed: 1\n  no_error_surfaced: true\n"),
              ElementsAre(HasSubstr("no_error_surfaced: expected no error completion, got "
                                    "IBV_WC_RETRY_EXC_ERR=1")));
  EXPECT_THAT(Check("expect:\n  flows_failed: 1\n"
                    "  qps: [{flow: 0, qp: 0, state: IBV_QPS_RTS}]\n"),
              ElementsAre(HasSubstr("qps[0] (flow 0 h0->h2 qp 0 qpn 0x")));
  EXPECT_THAT(Check("expect:\n  flows: [{flow: 1, fct_at_least_us: 5000}]\n  flows_failed: 1\n"),
              ElementsAre(HasSubstr("fct: expected at least 5000 us, got")));
}

struct BadCase {
  const char* name;
  const char* expect;
  const char* message;  // after "sig.yaml:LINE:COL: "
};

class BadExpectTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadExpectTest, NamesFileLineAndField) {
  auto sc = Load(std::string("expect:\n") + GetParam().expect);
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().code(), StatusCode::kInvalidArgument);
  // The expect block starts on line 7 of the file.
  EXPECT_THAT(sc.status().message(), ::testing::MatchesRegex("sig\\.yaml:(8|9):[0-9]+: .*"))
      << sc.status().message();
  EXPECT_THAT(sc.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadExpectTest,
    ::testing::Values(
        BadCase{"UnknownCounter", "  counters: [{name: bogus_err, equal: 1}]\n",
                "expect.counters[0].name: 'bogus_err' is not a counter the report prints"},
        BadCase{"FlowOutOfRange", "  flows: [{flow: 2, status: failed}]\n",
                "expect.flows[0].flow: flow 2 does not exist: the workload has 2 flows"},
        BadCase{"UnknownHost", "  flows: [{src: h9, status: failed}]\n",
                "expect.flows[0].src: 'h9' is not a host"},
        BadCase{"QpOutOfRange", "  qps: [{flow: 0, qp: 1, state: IBV_QPS_ERR}]\n",
                "expect.qps[0].qp: QP 1 does not exist: each flow has 1"},
        BadCase{"NegativeTime", "  first_error_us: {value: -5}\n",
                "expect.first_error_us.value: -5 us must be a finite time"},
        BadCase{"ToleranceWithoutValue", "  first_error_us: {tolerance_pct: 1}\n",
                "expect.first_error_us.value: a tolerance needs a value"},
        BadCase{"NegativeFct", "  flows: [{flow: 0, fct_at_most_us: -1}]\n",
                "expect.flows[0].fct_at_most_us: -1 us must be a finite time"},
        BadCase{"UnknownPort",
                "  counters: [{name: port_xmit_packets, port: \"h0:7\", equal: 1}]\n",
                "expect.counters[0].port: 'h0:7' is not a port"},
        BadCase{"UnknownFault", "  counters: [{name: frames_dropped, fault: loss#3, equal: 1}]\n",
                "expect.counters[0].fault: 'loss#3' is not a fault of the scenario (black_hole#0)"},
        BadCase{"GlobMatchesNothing",
                "  counters: [{name: port_xmit_packets, ports: \"x*\", "
                "equal: 1}]\n",
                "expect.counters[0].ports: 'x*' matches no port name"},
        BadCase{"WrongScope",
                "  counters: [{name: local_ack_timeout_err, port: \"h0:0\", "
                "equal: 1}]\n",
                "expect.counters[0].port: 'local_ack_timeout_err' is a QP counter"},
        BadCase{"NoBound", "  counters: [{name: port_xmit_packets}]\n",
                "expect.counters[0]: checks nothing"},
        BadCase{"UnknownDropReason", "  drops: {lost: {equal: 1}}\n",
                "expect.drops[lost]: 'lost' is not a drop reason"},
        BadCase{"UnknownStatus", "  flows: [{flow: 0, status: hung}]\n",
                "expect.flows[0].status: 'hung' is not a flow status"},
        BadCase{"UnknownWcStatus", "  qps: [{flow: 0, qp: 0, first_error: IBV_WC_OOPS}]\n",
                "expect.qps[0].first_error: 'IBV_WC_OOPS' is neither"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

// src/dst that name hosts but no flow of the run: known only after it.
TEST(SignatureTest, ASelectorMatchingNoFlowIsBadInput) {
  auto sc = Load("expect:\n  flows: [{src: h2, status: failed}]\n");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto out = CheckExpectations(*sc, Report());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("sig.yaml:9:17: expect.flows[0].src: no flow of this run goes h2 -> *"));
}

// Every key of every object once: nlohmann keeps the last of duplicates,
// so the parse callback sees them.
std::vector<std::string> DuplicateKeys(const std::string& text) {
  std::vector<std::set<std::string>> objects;
  std::vector<std::string> dups;
  const nlohmann::json parsed =
      nlohmann::json::parse(text, [&](int, nlohmann::json::parse_event_t e, nlohmann::json& v) {
        if (e == nlohmann::json::parse_event_t::object_start) objects.emplace_back();
        if (e == nlohmann::json::parse_event_t::object_end) objects.pop_back();
        if (e == nlohmann::json::parse_event_t::key &&
            !objects.back().insert(v.get<std::string>()).second) {
          dups.push_back(v.get<std::string>());
        }
        return true;
      });
  return dups;
}

// Whether `j` holds key `name` with value `value` anywhere.
bool HasKeyValue(const nlohmann::json& j, const std::string& name, uint64_t value) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == name && v.is_number() && v.get<uint64_t>() == value) return true;
      if (HasKeyValue(v, name, value)) return true;
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (HasKeyValue(v, name, value)) return true;
    }
  }
  return false;
}

// The text's counters: "name N" (names with an underscore) and "NAME=N",
// except the per-flow lines (the flow table holds those).
std::vector<std::pair<std::string, uint64_t>> TextCounters(const std::string& text) {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::istringstream lines(text);
  std::string line;
  const std::regex token("([A-Za-z_]+_[A-Za-z_]+|[A-Za-z_]+(?==))[ =]([0-9]+)\\b");
  while (std::getline(lines, line)) {
    // Not counters: the topology's name ("leaves=2") and the engine's line.
    if (line.rfind("  flow ", 0) == 0 || line.rfind("engine", 0) == 0 ||
        line.rfind("topology", 0) == 0) {
      continue;
    }
    for (std::sregex_iterator it(line.begin(), line.end(), token), end; it != end; ++it) {
      out.emplace_back((*it)[1], std::stoull((*it)[2]));
    }
  }
  return out;
}

TEST(SignatureTest, JsonRoundTripHasUniqueKeysAndEveryCounterOfTheText) {
  // Parallel links (a spine's two links to a leaf) and a fault: the cases
  // that lost keys before.
  const std::string text =
      "name: parallel\nseed: 3\nend_time_us: 20000\n"
      "topology: {leaf_spine: {leaves: 2, spines: 1, hosts_per_leaf: 4, uplinks_per_pair: 2, "
      "host_link: {rate_gbps: 100}, fabric_link: {rate_gbps: 100}}}\n"
      "network: {switch_buffer_bytes: 65536}\n"
      "transport: {ib_timeout: 8, retry_cnt: 7}\n"
      "workload: {pattern: all_to_all, flow_bytes: 262144}\n"
      "faults: [{kind: loss, link: \"leaf0-spine0*\", rate: 0.01}]\n";
  auto sc = LoadScenarioString(text, "parallel.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string json = FormatJson(*r);
  EXPECT_THAT(DuplicateKeys(json), IsEmpty());
  const auto j = nlohmann::json::parse(json);
  const std::string summary = FormatSummary(*r);
  const auto counters = TextCounters(summary);
  ASSERT_GT(counters.size(), 10u) << summary;
  for (const auto& [name, value] : counters) {
    EXPECT_TRUE(HasKeyValue(j, name, value)) << name << " " << value << " is in the text only:\n"
                                             << summary;
  }
  // Each port once, under its own name: the parallel links' ports differ.
  std::set<std::string> names;
  for (const PortReport& p : r->ports) EXPECT_TRUE(names.insert(p.name).second) << p.name;
  EXPECT_TRUE(names.count("spine0->leaf0#0") + names.count("spine0->leaf0#1") == 2)
      << *names.begin();
  EXPECT_EQ(j.at("flows").size(), r->flow_table.size());
  EXPECT_EQ(j.at("faults").at(0).at("name"), "loss#0");
  EXPECT_TRUE(j.at("faults").at(0).at("counters").contains("frames_dropped"));
  EXPECT_EQ(j.at("out_of_sequence"), r->out_of_sequence);
  EXPECT_EQ(j.at("duplicate_request"), r->duplicate_request);
}

TEST(SignatureTest, FlowTableAsCsvAndJson) {
  const RunReport& r = Report();
  std::istringstream csv(FormatFlowsCsv(r));
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream in(line);
    while (std::getline(in, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(rows[0],
              ElementsAre("index", "src", "dst", "qpns", "peer_qpns", "bytes", "start_ns", "end_ns",
                          "fct_ns", "status", "first_error", "first_error_ns", "retransmissions"));
  for (const auto& row : rows) EXPECT_EQ(row.size(), rows[0].size()) << line;
  EXPECT_EQ(rows[1][1], "h0");
  EXPECT_EQ(rows[1][3].rfind("0x", 0), 0u);
  EXPECT_EQ(rows[1][8], "");  // no FCT: it failed
  EXPECT_EQ(rows[1][9], "failed");
  EXPECT_EQ(rows[1][10], "IBV_WC_RETRY_EXC_ERR");
  EXPECT_EQ(rows[1][11], "3145728.000");
  EXPECT_EQ(rows[2][9], "completed");
  const auto j = nlohmann::json::parse(FormatFlowsJson(r));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0].at("first_error_ns"), 3145728.0);
  EXPECT_TRUE(j[1].at("first_error").is_null());
  EXPECT_EQ(j[0].at("qps").at(0).at("state"), "IBV_QPS_ERR");
}

}  // namespace
}  // namespace fathom::sim
