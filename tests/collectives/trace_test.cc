// The trace of `fathom coll --trace`: the compact form ranks send to rank 0
// (round trip, the byte cap that keeps the first events, rejection of
// garbage) and the merge of two ranks' events, each on its own clock, into
// one Chrome trace on one timeline, checked with the tests' strict JSON
// reader.
#include "transport/collectives/trace.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/json_reader.h"

namespace fathom::transport::coll {
namespace {

// `n` events of rank `rank` at origin + 10 us, + 20 us, ... each 2 us long,
// alternating streams 0 and 1.
RankTrace Ranked(int rank, Picoseconds origin, int n) {
  RankTrace t;
  t.rank = rank;
  t.origin = origin;
  for (int i = 0; i < n; ++i) {
    TraceEvent e;
    e.name = i % 2 == 0 ? "recv-reduce-send" : "wait";
    e.rank = rank;
    e.stream = i % 2;
    e.start = origin + Picoseconds::FromMicroseconds(10 * (i + 1));
    e.duration = Picoseconds::FromMicroseconds(2);
    e.args = "\"step\":" + std::to_string(i) + ",\"to\":" + std::to_string(1 - rank);
    t.events.push_back(e);
  }
  t.total_events = t.events.size();
  return t;
}

std::map<std::string, std::string> ParseJson(const std::string& text) {
  std::map<std::string, std::string> j;
  EXPECT_TRUE(test_util::Json(text).Parse(&j)) << text;
  return j;
}

TEST(TraceTest, EncodeDecodeRoundTrip) {
  const RankTrace t = Ranked(3, Picoseconds::FromMicroseconds(123456), 5);
  size_t kept = 0;
  const std::string text = EncodeRankTrace(t, 1 << 20, &kept);
  EXPECT_EQ(kept, 5u);
  auto back = DecodeRankTrace(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->origin, t.origin);
  EXPECT_EQ(back->total_events, 5u);
  ASSERT_EQ(back->events.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(back->events[i].name, t.events[i].name);
    EXPECT_EQ(back->events[i].rank, 3);
    EXPECT_EQ(back->events[i].stream, t.events[i].stream);
    EXPECT_EQ(back->events[i].start, t.events[i].start);
    EXPECT_EQ(back->events[i].duration, t.events[i].duration);
    EXPECT_EQ(back->events[i].args, t.events[i].args);
  }
}

TEST(TraceTest, TheCapKeepsTheFirstWholeEventsAndSaysHowMany) {
  const RankTrace t = Ranked(1, Picoseconds(0), 100);
  const std::string whole = EncodeRankTrace(t, 1 << 20);
  size_t kept = 0;
  const std::string capped = EncodeRankTrace(t, whole.size() / 2, &kept);
  EXPECT_LE(capped.size(), whole.size() / 2);
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, 100u);
  auto back = DecodeRankTrace(capped);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->total_events, 100u);
  ASSERT_EQ(back->events.size(), kept);
  EXPECT_EQ(back->events.back().args, t.events[kept - 1].args);
  // Below the header's size: only the header, which still says 0 of 100.
  auto empty = DecodeRankTrace(EncodeRankTrace(t, 1, &kept));
  EXPECT_EQ(kept, 0u);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->total_events, 100u);
  EXPECT_TRUE(empty->events.empty());
}

TEST(TraceTest, DecodeRejectsWhatEncodeDoesNotWrite) {
  for (const std::string& bad :
       {std::string(), std::string("garbage\n"), std::string("fathom-trace\t2\t0\t0\t0\t0\n"),
        std::string("fathom-trace\t1\t0\t0\t1\t1\n"),  // 1 event promised
        std::string("fathom-trace\t1\t0\t0\t1\t1\nwait\tx\t1\t2\t\n"),
        std::string("fathom-trace\t1\t0\t0\t0\t0")}) {  // no newline
    auto r = DecodeRankTrace(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("DecodeRankTrace: line"), std::string::npos);
    }
  }
}

TEST(TraceTest, MergeOfTwoRanksPutsBothOnOneTimeline) {
  // Two clocks 5 s apart: rank 0 read 1 s at the reference, rank 1 read 6 s.
  RankTrace r0 = Ranked(0, Picoseconds::FromSeconds(1), 2);
  auto r1 = DecodeRankTrace(EncodeRankTrace(Ranked(1, Picoseconds::FromSeconds(6), 3), 1 << 20));
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  const std::string json = MergedTraceJson({r0, *r1}, {"aligned \"at\" the barrier", "second"});
  const auto j = ParseJson(json);
  const std::vector<test_util::TraceEvent> events = test_util::TraceEvents(j);
  std::map<int, std::string> process_name = test_util::TraceProcessNames(events);
  std::map<int, int> complete;  // pid -> "X" events
  int complete_seen = 0;
  for (const test_util::TraceEvent& e : events) {
    if (e.at("ph") != "X") continue;
    const int pid = std::stoi(e.at("pid"));
    const int k = ++complete[pid];
    SCOPED_TRACE("rank " + std::to_string(pid) + " event " + std::to_string(k));
    // The k-th event of every rank is k x 10 us after its own reference,
    // whatever its clock read there.
    EXPECT_EQ(std::stod(e.at("ts")), 10.0 * k);
    EXPECT_EQ(std::stod(e.at("dur")), 2.0);
    EXPECT_EQ(e.at("tid"), std::to_string((k - 1) % 2));
    EXPECT_EQ(e.at("name"), k % 2 == 1 ? "recv-reduce-send" : "wait");
    EXPECT_EQ(e.at("args.step"), std::to_string(k - 1));
    ++complete_seen;
  }
  EXPECT_EQ(complete_seen, 5);
  EXPECT_EQ(complete[0], 2);
  EXPECT_EQ(complete[1], 3);
  EXPECT_EQ(process_name[0], "rank 0");
  EXPECT_EQ(process_name[1], "rank 1");
  EXPECT_EQ(j.at("otherData.note0"), "aligned \"at\" the barrier");
  EXPECT_EQ(j.at("otherData.note1"), "second");
}

// The sim's single-process trace keeps its format.
TEST(TraceTest, SimTraceJsonIsUnchanged) {
  Trace t;
  t.events.push_back(
      {"send", 2, 1, Picoseconds::FromMicroseconds(5), Picoseconds(1500000), "\"step\":0"});
  EXPECT_EQ(t.ToJson(),
            "{\"traceEvents\":[{\"name\":\"send\",\"ph\":\"X\",\"ts\":5.000000,\"dur\":1.500000,"
            "\"pid\":2,\"tid\":1,\"args\":{\"step\":0}}]}\n");
}

}  // namespace
}  // namespace fathom::transport::coll
