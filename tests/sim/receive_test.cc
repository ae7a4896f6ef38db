// The receive side of SEND flows (issue 27): receives posted late, at a
// rate, never, or held back by a "receiver not ready" window, and what the
// NIC's RNR machinery makes of it, in virtual time and counters: RNR NAK
// counts and the gaps the RNR timer codes give (IBTA table 45, CASES.md
// 22), IBV_WC_RNR_RETRY_EXC_ERR after rnr_retry waits (rxe's completer),
// the start-up race between senders and a late receiver, the receive queue
// depth, the example scenarios, and bad receive blocks (exit 2 material).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/verbs_types.h"
#include "fabric/scenario/scenario.h"
#include "fabric/scenario/workload.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"
#include "tests/sim/sim_test_util.h"

namespace fathom::sim {
namespace {

using ::testing::HasSubstr;

Picoseconds Us(double us) { return Picoseconds::FromSeconds(us * 1e-6); }

// `hosts` hosts on one switch, 100 Gb/s links of 1 us.
topo::Topology Star(int hosts) {
  topo::TopologyBuilder b("star");
  const int32_t sw = b.AddSwitch("leaf0", topo::kTierLeaf);
  const topo::LinkParams lp{testing::k100G, Picoseconds::FromMicroseconds(1), 4200};
  for (int h = 0; h < hosts; ++h) {
    (void)b.Connect(b.AddHost("h" + std::to_string(h), h, 0), sw, lp);
  }
  return std::move(b).Build().value();
}

FlowOptions SendOptions(int rnr_timer_code, int rnr_retry = 7) {
  FlowOptions fo;
  fo.op = FlowOp::kSend;
  fo.qp.min_rnr_timer = rnr_timer_code;
  fo.qp.rnr_retry = rnr_retry;
  fo.message_bytes = 4096;
  return fo;
}

struct Outcome {
  std::vector<FlowResult> results;
  std::vector<QpCounters> nic;  // per host rank
  Picoseconds end;
  uint64_t digest = 0;
};

// Runs `flows` on a star of `hosts`; `until` stops the engine early (the
// counters are then those of that moment).
Outcome RunFlows(int hosts, std::vector<Flow> flows, const FlowOptions& fo,
                 Picoseconds until = Picoseconds::Max()) {
  topo::Topology topo = Star(hosts);
  Engine engine(7);
  Network net(&engine, &topo, {});
  FlowDriver driver(&net, std::move(flows), fo);
  EXPECT_TRUE(driver.Setup().ok());
  engine.Run(until);
  Outcome o;
  o.results = driver.results();
  for (int h = 0; h < hosts; ++h) o.nic.push_back(net.nic(h).TotalCounters());
  o.end = engine.Now();
  o.digest = engine.trace_digest();
  return o;
}

// One 4 KiB SEND h0 -> h1 with receives preposted: no RNR NAK, and its
// completion time is one round trip (SEND there, ACK back) — also the time
// an RNR NAK takes to come back and the SEND to go again.
Picoseconds BaselineRoundTrip(int code) {
  FlowOptions fo = SendOptions(code);
  fo.receive.post = RecvPost::kPreposted;
  const Outcome o = RunFlows(2, {Flow{0, 1, 4096, Picoseconds(0)}}, fo);
  EXPECT_EQ(o.results[0].state, FlowState::kDone);
  EXPECT_EQ(o.nic[0].rcvd_rnr_err, 0u);
  return o.results[0].end;
}

class RnrTimerCodeTest : public ::testing::TestWithParam<int> {};

// The receiver posts late enough for exactly n tries to find no receive:
// n RNR NAKs sent and received, and each costs one RNR timer of the
// responder's code plus a round trip.
TEST_P(RnrTimerCodeTest, EachNakCostsOneTimerOfTheCode) {
  const int code = GetParam();
  const Picoseconds timer(RnrTimerPs(code));
  const Picoseconds rtt = BaselineRoundTrip(code);
  constexpr int kNaks = 3;
  FlowOptions fo = SendOptions(code);
  fo.receive.post = RecvPost::kDelayed;
  // Tries reach h1 about rtt/2 + k (timer + rtt): post between try n-1 and n.
  fo.receive.delay = Picoseconds(rtt.ps() / 2 + (timer + rtt).ps() * (2 * kNaks - 1) / 2);
  const Outcome o = RunFlows(2, {Flow{0, 1, 4096, Picoseconds(0)}}, fo);
  ASSERT_EQ(o.results[0].state, FlowState::kDone);
  EXPECT_EQ(o.nic[0].rcvd_rnr_err, uint64_t{kNaks});
  EXPECT_EQ(o.nic[1].send_rnr_err, uint64_t{kNaks});
  EXPECT_EQ(o.nic[0].rnr_nak_retry_err, 0u);
  const Picoseconds want = rtt + (timer + rtt) * kNaks;
  EXPECT_NEAR(o.results[0].end.ns(), want.ns(), 1.0)
      << "code " << code << " timer " << timer.us() << " us, rtt " << rtt.ns() << " ns";
}

// Codes from the shortest (1: 10 us) to the longest (0: 655.36 ms).
INSTANTIATE_TEST_SUITE_P(Codes, RnrTimerCodeTest, ::testing::Values(1, 12, 14, 20, 31, 0));

TEST(RnrTimerTableTest, TheCodesAreTheIbtaTable) {
  // CASES.md 22: code 0 655.36 ms, 1 0.01 ms, 12 0.64 ms, 31 491.52 ms.
  constexpr int64_t kUs = 1'000'000;  // picoseconds
  EXPECT_EQ(RnrTimerPs(0), 655360 * kUs);
  EXPECT_EQ(RnrTimerPs(1), 10 * kUs);
  EXPECT_EQ(RnrTimerPs(12), 640 * kUs);
  EXPECT_EQ(RnrTimerPs(31), 491520 * kUs);
}

class RnrRetryTest : public ::testing::TestWithParam<int> {};

// A receiver that never posts: rnr_retry r allows r waits; the (r+1)th NAK
// completes the SEND with IBV_WC_RNR_RETRY_EXC_ERR (13), as rxe's completer
// does (COMPST_RNR_RETRY: rnr_retry > 0 decrements and waits, else the
// error). So the error comes r timers and r+1 round trips after the start.
TEST_P(RnrRetryTest, ErrorAfterRetryWaits) {
  const int retry = GetParam();
  constexpr int kCode = 14;  // 1.28 ms
  const Picoseconds timer(RnrTimerPs(kCode));
  const Picoseconds rtt = BaselineRoundTrip(kCode);
  FlowOptions fo = SendOptions(kCode, retry);
  fo.receive.post = RecvPost::kNone;
  const Outcome o = RunFlows(2, {Flow{0, 1, 4096, Picoseconds(0)}}, fo);
  ASSERT_EQ(o.results[0].state, FlowState::kFailed);
  EXPECT_EQ(o.results[0].first_error, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(static_cast<int>(o.results[0].first_error), 13);
  EXPECT_EQ(o.nic[0].rcvd_rnr_err, static_cast<uint64_t>(retry + 1));
  EXPECT_EQ(o.nic[0].rnr_nak_retry_err, 1u);
  EXPECT_EQ(o.nic[1].send_rnr_err, static_cast<uint64_t>(retry + 1));
  const Picoseconds want = timer * retry + rtt * (retry + 1);
  EXPECT_NEAR(o.results[0].end.ns(), want.ns(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Retries, RnrRetryTest, ::testing::Values(0, 1, 3, 6));

// rnr_retry 7 is infinite (IBTA): a receiver that never posts stalls the
// flow without an error, NAK after NAK.
TEST(RnrRetryInfiniteTest, SevenRetriesForever) {
  constexpr int kCode = 1;  // 10 us
  FlowOptions fo = SendOptions(kCode, 7);
  fo.receive.post = RecvPost::kNone;
  const Outcome o = RunFlows(2, {Flow{0, 1, 4096, Picoseconds(0)}}, fo, Us(1000));
  EXPECT_EQ(o.results[0].state, FlowState::kPending);
  EXPECT_EQ(o.nic[0].rnr_nak_retry_err, 0u);
  // One NAK per (10 us + a round trip of a few us) over 1 ms.
  EXPECT_GT(o.nic[0].rcvd_rnr_err, 60u);
  EXPECT_LT(o.nic[0].rcvd_rnr_err, 100u);
}

// The start-up race: h0's receiving process is not ready until 50 us (a
// not-ready window over its preposted receives), while senders start at 0,
// 30 and 80 us. Those that start before h0 is ready meet RNR NAKs (one per
// 10 us timer plus a round trip) and land after 50 us; the late one meets
// none. With h0 ready from the start nobody meets any.
TEST(StartupRaceTest, SendersBeforeTheReceiverMeetRnrNaks) {
  const std::vector<Flow> flows = {Flow{1, 0, 4096, Us(0)}, Flow{2, 0, 4096, Us(30)},
                                   Flow{3, 0, 4096, Us(80)}};
  FlowOptions fo = SendOptions(1);
  fo.receive.post = RecvPost::kPreposted;
  const Outcome ready = RunFlows(4, flows, fo);
  for (int h = 1; h <= 3; ++h) EXPECT_EQ(ready.nic[static_cast<size_t>(h)].rcvd_rnr_err, 0u);

  fo.not_ready = {NotReadyWindow{0, Us(0), Us(50)}};
  const Outcome late = RunFlows(4, flows, fo);
  const Picoseconds rtt = BaselineRoundTrip(1);
  const Picoseconds period = Picoseconds(RnrTimerPs(1)) + rtt;
  for (size_t i = 0; i < flows.size(); ++i) {
    const FlowResult& r = late.results[i];
    ASSERT_EQ(r.state, FlowState::kDone) << "flow " << i;
    const uint64_t naks = late.nic[i + 1].rcvd_rnr_err;
    if (flows[i].start < Us(50)) {
      // Tries reach h0 at start + rtt/2 + k periods; those before 50 us fail.
      const int64_t first = (flows[i].start + Picoseconds(rtt.ps() / 2)).ps();
      const uint64_t want =
          static_cast<uint64_t>((Us(50).ps() - first + period.ps() - 1) / period.ps());
      EXPECT_EQ(naks, want) << "flow " << i;
      EXPECT_GT(r.end, Us(50)) << "flow " << i;
      EXPECT_NEAR(r.end.ns(), (flows[i].start + rtt + period * static_cast<int64_t>(naks)).ns(),
                  1.0)
          << "flow " << i;
    } else {
      EXPECT_EQ(naks, 0u) << "flow " << i;
      EXPECT_EQ(r.end - flows[i].start, ready.results[i].end - flows[i].start);
    }
  }
}

// Receives posted at a rate slower than the sender: every SEND but those
// that find a receive already posted waits out RNR timers; the flow ends
// about when the last receive is posted.
TEST(StartupRaceTest, ReceivesAtARatePaceTheSender) {
  FlowOptions fo = SendOptions(1);  // 10 us
  fo.receive.post = RecvPost::kRate;
  fo.receive.interval = Us(100);
  const Outcome o = RunFlows(2, {Flow{0, 1, 8 * 4096, Picoseconds(0)}}, fo);
  ASSERT_EQ(o.results[0].state, FlowState::kDone);
  // The 8th receive is posted at 700 us; the SEND that takes it lands
  // within one RNR period (10 us + a round trip) after.
  EXPECT_GT(o.results[0].end, Us(700));
  EXPECT_LT(o.results[0].end, Us(715));
  EXPECT_GT(o.nic[0].rcvd_rnr_err, 7u * 5);  // ~8 NAKs per 100 us gap
}

// The receive queue depth bounds what a host has posted at once: 16 SENDs
// into a queue of 4, preposted, and h1 not ready from 1 us (before the
// first SEND lands) to 1.5 ms: 4 land, then nothing until h1 reposts.
// Without the depth all 16 were preposted and the window changes nothing.
TEST(QueueDepthTest, OnlyDepthReceivesLandWhileTheHostIsNotReady) {
  FlowOptions fo = SendOptions(12);  // 0.64 ms
  fo.receive.post = RecvPost::kPreposted;
  fo.not_ready = {NotReadyWindow{1, Us(1), Us(1500)}};
  const std::vector<Flow> flow = {Flow{0, 1, 16 * 4096, Picoseconds(0)}};

  const Outcome unlimited = RunFlows(2, flow, fo);
  ASSERT_EQ(unlimited.results[0].state, FlowState::kDone);
  EXPECT_EQ(unlimited.nic[0].rcvd_rnr_err, 0u);
  EXPECT_LT(unlimited.results[0].end, Us(20));

  fo.receive.queue_depth = 4;
  const Outcome at_1ms = RunFlows(2, flow, fo, Us(1000));
  EXPECT_EQ(at_1ms.nic[1].rdma_recvs, 4u);
  EXPECT_EQ(at_1ms.results[0].state, FlowState::kPending);

  const Outcome done = RunFlows(2, flow, fo);
  ASSERT_EQ(done.results[0].state, FlowState::kDone);
  EXPECT_EQ(done.nic[1].rdma_recvs, 16u);
  // The 5th SEND tries at ~6 us, 0.65 and 1.29 ms (h1 not ready), then lands.
  EXPECT_EQ(done.nic[0].rcvd_rnr_err, 3u);
  EXPECT_GT(done.results[0].end, Us(1500));
}

// A depth of 1 with an immediate repost still keeps up with back-to-back
// SENDs (the repost happens as the receive completes, before the next SEND
// lands); with post: rate the next receive waits for a free slot and the
// interval both.
TEST(QueueDepthTest, RateWaitsForAFreeSlot) {
  FlowOptions fo = SendOptions(1);
  fo.receive.post = RecvPost::kPerSend;
  fo.receive.queue_depth = 1;
  const Outcome one = RunFlows(2, {Flow{0, 1, 8 * 4096, Picoseconds(0)}}, fo);
  ASSERT_EQ(one.results[0].state, FlowState::kDone);
  EXPECT_EQ(one.nic[0].rcvd_rnr_err, 0u);
  EXPECT_EQ(one.nic[1].rdma_recvs, 8u);

  fo.receive.post = RecvPost::kRate;
  fo.receive.interval = Picoseconds(1);  // as fast as the depth lets
  const Outcome rate = RunFlows(2, {Flow{0, 1, 8 * 4096, Picoseconds(0)}}, fo);
  ASSERT_EQ(rate.results[0].state, FlowState::kDone);
  EXPECT_EQ(rate.nic[1].rdma_recvs, 8u);
  EXPECT_EQ(rate.nic[0].rcvd_rnr_err, 0u);
}

// Each QP of a connection has its own receive queue: 4 QPs of a flow,
// depth 2 each, 8 SENDs per QP, h1 not ready from 1 to 100 us: two land on
// every QP, each QP's third meets RNR NAKs until the window ends, then all
// land.
TEST(QueueDepthTest, PerQpOfAConnection) {
  FlowOptions fo = SendOptions(1);
  fo.qps_per_connection = 4;
  fo.receive.post = RecvPost::kPreposted;
  fo.receive.queue_depth = 2;
  fo.not_ready = {NotReadyWindow{1, Us(1), Us(100)}};
  const Outcome o = RunFlows(2, {Flow{0, 1, 4 * 8 * 4096, Picoseconds(0)}}, fo, Us(90));
  EXPECT_EQ(o.nic[1].rdma_recvs, 4u * 2);  // two per QP before the window ends
  EXPECT_GT(o.nic[0].rcvd_rnr_err, 0u);
  const Outcome done = RunFlows(2, {Flow{0, 1, 4 * 8 * 4096, Picoseconds(0)}}, fo);
  ASSERT_EQ(done.results[0].state, FlowState::kDone);
  EXPECT_EQ(done.nic[1].rdma_recvs, 4u * 8);
  EXPECT_GT(done.results[0].end, Us(100));
}

// The default plan is the original path: a receive just before each SEND,
// the same trace digest; an explicit per_send with no depth is the default.
TEST(DefaultReceiveTest, DefaultKeepsTheTraceDigest) {
  const std::vector<Flow> flows = {Flow{0, 1, 65536, Picoseconds(0)}, Flow{2, 3, 65536, Us(3)}};
  FlowOptions fo = SendOptions(12);
  const Outcome a = RunFlows(4, flows, fo);
  fo.receive = ReceivePlan{};
  fo.flow_receive = {ReceivePlan{}, ReceivePlan{}};
  const Outcome b = RunFlows(4, flows, fo);
  EXPECT_EQ(a.digest, b.digest);
  // Preposted receives: the same outcome (no RNR), by another path.
  fo.receive.post = RecvPost::kPreposted;
  fo.flow_receive.clear();
  const Outcome c = RunFlows(4, flows, fo);
  EXPECT_EQ(c.results[0].end, a.results[0].end);
  EXPECT_EQ(c.results[1].end, a.results[1].end);
  EXPECT_EQ(c.nic[0].rcvd_rnr_err, 0u);
}

// A per-flow plan overrides the workload's: only the flow whose receiver
// never posts fails.
TEST(DefaultReceiveTest, PerFlowPlans) {
  FlowOptions fo = SendOptions(1, 2);
  ReceivePlan none;
  none.post = RecvPost::kNone;
  fo.flow_receive = {ReceivePlan{}, none};
  const Outcome o =
      RunFlows(4, {Flow{0, 1, 4096, Picoseconds(0)}, Flow{2, 3, 4096, Picoseconds(0)}}, fo);
  EXPECT_EQ(o.results[0].state, FlowState::kDone);
  EXPECT_EQ(o.results[1].state, FlowState::kFailed);
  EXPECT_EQ(o.results[1].first_error, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(o.nic[0].rcvd_rnr_err, 0u);
  EXPECT_EQ(o.nic[2].rcvd_rnr_err, 3u);
}

std::string Example(const char* name) {
  return std::string(FATHOM_SOURCE_DIR) + "/scenarios/faults/" + name;
}

// scenarios/faults/rnr_not_ready.yaml: a receiver 2 ms late (4 RNR NAKs at
// code 12) and a depth-4 queue behind a not-ready window (3 more); both
// flows recover.
TEST(RnrScenarioTest, NotReadyRecovers) {
  auto sc = LoadScenario(Example("rnr_not_ready.yaml"));
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(CheckExpectations(sc->spec, *r), ::testing::IsEmpty()) << FormatSummary(*r);
  EXPECT_EQ(r->flows_completed, 2);
  EXPECT_EQ(r->rnr_naks, 4u + 3u);
  // The late receiver's flow ends at its fifth try, 4 x (0.64 ms + a round
  // trip of a few us) after it started.
  EXPECT_NEAR(r->fct_max_ns, 4 * 640e3, 4 * 10e3) << FormatSummary(*r);

  // Mutation: without the receive plans and the window nothing waits.
  sc->spec.mutable_workload()->clear_receiver_not_ready();
  for (auto& f : *sc->spec.mutable_workload()->mutable_flows()) f.clear_receive();
  auto plain = RunScenario(*sc, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->rnr_naks, 0u);
  EXPECT_LT(plain->fct_max_ns, 100e3);
}

// scenarios/faults/rnr_retry_exhausted.yaml: rnr_retry 3 at code 14
// (1.28 ms): IBV_WC_RNR_RETRY_EXC_ERR after 4 NAKs, at 3 x 1.28 ms plus 4
// round trips (a few us each) — the run stops at that completion.
TEST(RnrScenarioTest, RetryExhaustedAtThePredictedTime) {
  auto sc = LoadScenario(Example("rnr_retry_exhausted.yaml"));
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(CheckExpectations(sc->spec, *r), ::testing::IsEmpty()) << FormatSummary(*r);
  EXPECT_EQ(r->completion_statuses["IBV_WC_RNR_RETRY_EXC_ERR"], 1u);
  EXPECT_EQ(r->rnr_naks, 4u);
  const int retry = sc->spec.transport().rnr_retry();
  const double timer_ns =
      static_cast<double>(RnrTimerPs(sc->spec.transport().min_rnr_timer())) / 1e3;
  const double want_ns = retry * timer_ns;  // + (retry + 1) round trips
  EXPECT_GT(r->sim_time_ns, want_ns);
  EXPECT_LT(r->sim_time_ns, want_ns + (retry + 1) * 10e3) << FormatSummary(*r);
  // Mutation: one more retry is one more timer later.
  sc->spec.mutable_transport()->set_rnr_retry(retry + 1);
  auto more = RunScenario(*sc, {});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->rnr_naks, 5u);
  EXPECT_NEAR(more->sim_time_ns - r->sim_time_ns, timer_ns, 10e3);
}

struct BadReceive {
  const char* name;
  std::string yaml;  // appended under workload: (line 12 on)
  std::string opcode = "send";
  int line;
  const char* field;
};

std::string ScenarioWith(const BadReceive& c) {
  return "name: t\n"                                                    // 1
         "end_time_us: 1000\n"                                          // 2
         "topology:\n"                                                  // 3
         "  preset: \"leaf-spine:leaves=2,spines=1,hosts=2,gpus=1\"\n"  // 4
         "transport:\n"                                                 // 5
         "  opcode: " +
         c.opcode +
         "\n"                            // 6
         "workload:\n"                   // 7
         "  pattern: flows\n"            // 8
         "  flow_bytes: 65536\n"         // 9
         "  flows:\n"                    // 10
         "    - {src: h0, dst: h2}\n" +  // 11
         c.yaml;
}

class BadReceiveTest : public ::testing::TestWithParam<BadReceive> {};

TEST_P(BadReceiveTest, ErrorNamesFileLineAndField) {
  const BadReceive& c = GetParam();
  auto sc = LoadScenarioString(ScenarioWith(c), "bad.yaml");
  ASSERT_FALSE(sc.ok()) << c.name;
  EXPECT_EQ(sc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sc.status().message(), HasSubstr("bad.yaml:" + std::to_string(c.line) + ":"));
  EXPECT_THAT(sc.status().message(), HasSubstr(c.field));
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, BadReceiveTest,
    ::testing::Values(
        BadReceive{"UnknownPost", "  receive: {post: eventually}\n", "send", 12, "post"},
        BadReceive{"DepthZero", "  receive: {queue_depth: 0}\n", "send", 12,
                   "workload.receive.queue_depth"},
        BadReceive{"DepthTooLarge", "  receive: {queue_depth: 40000}\n", "send", 12,
                   "workload.receive.queue_depth"},
        BadReceive{"DepthWithNone", "  receive: {post: none, queue_depth: 4}\n", "send", 12,
                   "workload.receive.queue_depth"},
        BadReceive{"RateWithoutInterval", "  receive: {post: rate}\n", "send", 12,
                   "workload.receive.interval_us"},
        BadReceive{"NegativeInterval", "  receive: {post: rate, interval_us: -1}\n", "send", 12,
                   "workload.receive.interval_us"},
        BadReceive{"IntervalWithoutRate", "  receive: {post: delayed, interval_us: 5}\n", "send",
                   12, "workload.receive.interval_us"},
        BadReceive{"DelayWithPreposted", "  receive: {post: preposted, delay_us: 5}\n", "send", 12,
                   "workload.receive.delay_us"},
        BadReceive{"DelayNaN", "  receive: {post: delayed, delay_us: .nan}\n", "send", 12,
                   "workload.receive.delay_us"},
        BadReceive{"DelayOverflows",
                   "  start_us: 8e12\n  receive: {post: delayed, delay_us: 5e12}\n", "send", 13,
                   "workload.receive.delay_us"},
        BadReceive{"ReceiveWithWrites", "  receive: {post: preposted}\n", "write", 12,
                   "workload.receive"},
        BadReceive{"FlowReceiveWithReads", "    - {src: h1, dst: h3, receive: {post: none}}\n",
                   "read", 12, "workload.flows[1].receive"},
        BadReceive{"FlowDepthTooLarge", "    - {src: h1, dst: h3, receive: {queue_depth: 99999}}\n",
                   "send", 12, "workload.flows[1].receive.queue_depth"},
        BadReceive{"WindowUnknownHost",
                   "  receiver_not_ready:\n    - {host: h9, from_us: 0, to_us: 5}\n", "send", 13,
                   "workload.receiver_not_ready[0].host"},
        BadReceive{"WindowOnASwitch",
                   "  receiver_not_ready:\n    - {host: leaf0, from_us: 0, to_us: 5}\n", "send", 13,
                   "workload.receiver_not_ready[0].host"},
        BadReceive{"WindowBackwards",
                   "  receiver_not_ready:\n    - {host: h2, from_us: 10, to_us: 5}\n", "send", 13,
                   "workload.receiver_not_ready[0].to_us"},
        BadReceive{"WindowWithoutEnd", "  receiver_not_ready:\n    - {host: h2, from_us: 10}\n",
                   "send", 13, "to_us"},
        BadReceive{"WindowWithWrites",
                   "  receiver_not_ready:\n    - {host: h2, from_us: 0, to_us: 5}\n", "write", 13,
                   "workload.receiver_not_ready[0]"}),
    [](const ::testing::TestParamInfo<BadReceive>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fathom::sim
