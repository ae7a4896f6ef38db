// The merge of a distributed run's captures and trace (capture_merge.h):
// streams merge by canonical key, keeping a stream's ties in order, and in
// one process the merged files are byte for byte what the writers give
// when they write as the run goes.
#include "fabric/parallel/capture_merge.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fabric/parallel/parallel_run.h"
#include "fabric/scenario/scenario.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace fathom::parallel {
namespace {

std::string Record(int64_t time, uint16_t kind, uint32_t component, char tag) {
  std::string r(OutputMerge::kKeyBytes + 1, '\0');
  std::memcpy(r.data(), &time, 8);
  std::memcpy(r.data() + 8, &kind, 2);
  std::memcpy(r.data() + 10, &component, 4);
  r[OutputMerge::kKeyBytes] = tag;
  return r;
}

TEST(CaptureMergeTest, StreamsMergeByTimeKindComponentKeepingTiesInStreamOrder) {
  // Rank 0 holds node 3's events, rank 1 node 5's; each stream in its
  // process's dispatch order, with two records of one event (a, b).
  const std::string r0 = Record(10, 1, 3, 'a') + Record(10, 1, 3, 'b') + Record(20, 6, 3, 'e');
  const std::string r1 = Record(5, 2, 5, 'z') + Record(10, 1, 5, 'c') + Record(20, 1, 5, 'd');
  std::string order;
  OutputMerge::MergeStreams(
      {r0, r1}, [](const char*) { return size_t{1}; },
      [&](size_t, const char* record) { order += record[OutputMerge::kKeyBytes]; });
  EXPECT_EQ(order, "zabcde");
}

using fathom::test_util::ReadFile;

// One canonical-order run of the re-route scenario, writing a capture of
// two links and the trace either as it goes or through the merge.
void RunWithOutputs(const std::string& dir, bool merged) {
  auto sc =
      sim::LoadScenario(std::string(FATHOM_SOURCE_DIR) + "/tests/parallel/scenarios/reroute.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  const std::string tag = merged ? "merged" : "direct";
  auto cap = sim::PortCapture::Open(sc->topology, "leaf1", dir + "/" + tag + ".pcap");
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  std::FILE* trace_file = std::fopen((dir + "/" + tag + ".json").c_str(), "w");
  ASSERT_NE(trace_file, nullptr);
  sim::EventTraceWriter trace(trace_file, &sc->topology);
  LocalComm comm;
  DistributedRun run(&comm, &sc->topology, &sc->spec);
  sim::RunOptions opts;
  opts.hooks = &run;
  opts.open_captures = {cap->get()};
  OutputMerge outputs(&comm, opts.open_captures, &trace, /*tracing=*/true);
  if (merged) {
    run.set_outputs(&outputs);
  } else {
    // The capture writes to its file again, and the trace sees the engine.
    cap.value()->set_sink(nullptr, nullptr);
    opts.trace = &trace;
  }
  auto report = sim::RunScenario(*sc, opts);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_GT(report->captured_frames, 0u);
  EXPECT_TRUE(trace.Finish(tag).ok());
  EXPECT_TRUE(cap.value()->Flush().ok());
  std::fclose(trace_file);
}

TEST(CaptureMergeTest, OneProcessMergedFilesAreTheDirectlyWrittenOnes) {
  test_util::ScratchDir tmp;
  const std::string d = tmp.path();
  RunWithOutputs(d, /*merged=*/false);
  RunWithOutputs(d, /*merged=*/true);
  const std::string direct = ReadFile(d + "/direct.pcap");
  EXPECT_GT(direct.size(), 24u);
  EXPECT_TRUE(ReadFile(d + "/merged.pcap") == direct);
  const std::string trace = ReadFile(d + "/direct.json");
  EXPECT_NE(trace.find("\"name\":\"fault\""), std::string::npos);
  EXPECT_TRUE(ReadFile(d + "/merged.json") == trace);
}

}  // namespace
}  // namespace fathom::parallel
