// fabric/wire throughput: parse + ICRC verify, and build (lengths, IPv4
// checksum, pad and ICRC computed), over the frames of the real rxe capture.
// Run: build-release/bench/wire_bench (figures are frames/s and bytes/s).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"

namespace fathom::wire {
namespace {

const std::vector<std::vector<uint8_t>>& RoceFrames() {
  static const std::vector<std::vector<uint8_t>> frames = [] {
    std::vector<std::vector<uint8_t>> out;
    auto reader = PcapReader::Open(std::string(FATHOM_TESTDATA_DIR) + "/rxe-send-ipv4.pcap");
    if (!reader.ok()) return out;
    PcapRecord record;
    while (true) {
      auto more = (*reader)->Next(&record);
      if (!more.ok() || !*more) break;
      if (Parse(record.data).ok()) out.emplace_back(record.data.begin(), record.data.end());
    }
    return out;
  }();
  return frames;
}

void BM_ParseAndVerifyIcrc(benchmark::State& state) {
  const auto& frames = RoceFrames();
  if (frames.empty()) {
    state.SkipWithError("capture not found");
    return;
  }
  size_t i = 0;
  int64_t bytes = 0;
  uint64_t bad = 0;
  for (auto _ : state) {
    const auto& f = frames[i];
    const ParseResult r = Parse(f);
    bad += !IcrcOk(r);
    bytes += static_cast<int64_t>(f.size());
    if (++i == frames.size()) i = 0;
  }
  benchmark::DoNotOptimize(bad);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(bytes);
  state.counters["icrc_bad"] = static_cast<double>(bad);
}
BENCHMARK(BM_ParseAndVerifyIcrc);

void BM_ParseOnly(benchmark::State& state) {
  const auto& frames = RoceFrames();
  if (frames.empty()) {
    state.SkipWithError("capture not found");
    return;
  }
  size_t i = 0;
  for (auto _ : state) {
    const ParseResult r = Parse(frames[i]);
    benchmark::DoNotOptimize(r.frame.bth.psn);
    if (++i == frames.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseOnly);

// Build with everything computed, as the simulator does for its captures.
void BM_BuildComputed(benchmark::State& state) {
  const auto& frames = RoceFrames();
  if (frames.empty()) {
    state.SkipWithError("capture not found");
    return;
  }
  std::vector<RoceFrame> specs;
  for (const auto& f : frames) {
    specs.push_back(Parse(f).frame);
    specs.back().keep = RoceFrame::Keep{};
  }
  std::vector<uint8_t> out(9216);
  size_t i = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    auto n = Build(specs[i], out);
    bytes += static_cast<int64_t>(*n);
    benchmark::DoNotOptimize(out.data());
    if (++i == specs.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_BuildComputed);

}  // namespace
}  // namespace fathom::wire

BENCHMARK_MAIN();
