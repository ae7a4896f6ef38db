// libFuzzer target for capture files: each input is written to a file in a
// scratch directory (tests/scratch_dir.h) and read through PcapReader
// (libpcap: pcap and pcapng) and the codec, as `fathom decode` does. Errors
// are expected; crashes and sanitizer reports are not. libpcap itself is not instrumented, so the
// corpus carries pcapng seeds (fuzz_seeds) and the target also drives fathom's own code behind
// libpcap directly: the first 16 bytes of every input are a (seconds, nanoseconds) pair for
// CaptureTimeFromLibpcap, whose result must be exact or saturated — a violation aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "base/units.h"
#include "fabric/wire/capture_stats.h"
#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"
#include "tests/scratch_dir.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckCaptureTime(int64_t seconds, int64_t nanoseconds) {
  using fathom::Int128;
  const fathom::wire::CaptureTime t = fathom::wire::CaptureTimeFromLibpcap(seconds, nanoseconds);
  const Int128 exact = static_cast<Int128>(seconds) * 1000000000 + nanoseconds;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (seconds < 0) {
    Check(t.clamped && t.ns == kMax);
  } else if (t.clamped) {
    Check(exact > kMax || exact < std::numeric_limits<int64_t>::min());
  } else {
    Check(static_cast<Int128>(t.ns) == exact);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fathom::wire;
  if (size >= 16) {
    int64_t seconds, nanoseconds;
    std::memcpy(&seconds, data, 8);
    std::memcpy(&nanoseconds, data + 8, 8);
    CheckCaptureTime(seconds, nanoseconds);
  }
  // One file, rewritten for every input, in a directory removed when
  // libFuzzer exits (it calls exit(), which runs static destructors).
  static const fathom::test_util::ScratchDir tmp;
  static const std::string path = tmp.File("input.pcap");
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto reader = PcapReader::Open(path);
  if (!reader.ok()) return 0;
  CaptureStats stats;
  PcapRecord record;
  for (int i = 0; i < 10000; ++i) {
    auto more = (*reader)->Next(&record);
    if (!more.ok() || !*more) break;
    // What decode relies on: a clamped time is saturated, never wrapped.
    Check(!record.timestamp_clamped || record.timestamp_ns == std::numeric_limits<int64_t>::max());
    stats.Add(Parse(record.data));
  }
  return 0;
}
