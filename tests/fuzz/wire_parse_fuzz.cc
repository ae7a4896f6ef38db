// libFuzzer target for the RoCEv2 parser. Beyond "no crash, no sanitizer
// report", it checks the codec's invariants on every input that parses:
//   - Build(Parse(f).frame) reproduces f byte for byte;
//   - building the same headers with every field computed gives a frame that
//     parses as RoCE with a verifying ICRC.
// A violated invariant aborts, which libFuzzer reports as a crash.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "fabric/wire/capture_stats.h"
#include "fabric/wire/roce.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fathom::wire;
  const std::span<const uint8_t> in(data, size);
  const ParseResult r = Parse(in);
  if (!r.ok()) {
    Check(!r.message.empty());
    Check(r.error != ParseError::kNone);
    return 0;
  }
  (void)IcrcOk(r);
  static uint8_t out[70000];
  auto n = Build(r.frame, out);
  Check(n.ok());
  Check(*n == size && std::memcmp(out, data, size) == 0);

  RoceFrame fresh = r.frame;
  fresh.keep = RoceFrame::Keep{};
  fresh.trailer = {};
  auto m = Build(fresh, out);
  Check(m.ok());
  const ParseResult again = Parse(std::span<const uint8_t>(out, *m));
  Check(again.ok());
  Check(IcrcOk(again));
  Check(again.frame.bth.psn == r.frame.bth.psn &&
        again.frame.payload.size() == r.frame.payload.size());

  CaptureStats stats;
  stats.Add(r);
  stats.Add(again);
  return 0;
}
