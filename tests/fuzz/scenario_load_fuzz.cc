// libFuzzer target: a scenario file through the YAML loader AND the scenario
// validation (LoadScenarioString), as `fathom sim FILE` loads it. Any crash,
// sanitizer report, uncaught exception or hang is a finding; a rejected
// input must come back as a Status.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fabric/scenario/scenario.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Small topologies only: the size guard itself is exercised, and a valid
  // k=32 fat-tree (9.3 MiB with computed routes) takes over 10 s under ASan
  // to validate (every host pair's up/down routes), the fuzzer's time limit
  // per input. 4 MiB admits up to k=24 (3,456 hosts).
  ::setenv("FATHOM_TOPOLOGY_MEMORY_LIMIT", "4M", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto sc = fathom::sim::LoadScenarioString(text, "fuzz.yaml");
  if (!sc.ok() && sc.status().message().empty()) std::abort();  // errors must say something
  return 0;
}
