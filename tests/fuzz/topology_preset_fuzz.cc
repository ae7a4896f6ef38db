// libFuzzer target: topology preset strings ("fat-tree:k=8,rail",
// "leaf-spine:leaves=4,spines=2,hosts=8") through topo::BuildPreset, as
// `fathom topo PRESET` and `fathom coll --topology PRESET` take them.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "topologies/builders.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Keep accepted topologies small (the size guard is what is exercised;
  // scenario_load_fuzz.cc says why 4 MiB: `xlarge`, k=32, is refused).
  ::setenv("FATHOM_TOPOLOGY_MEMORY_LIMIT", "4M", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = fathom::topo::BuildPreset(text);
  if (t.ok() && !t->Validate().ok()) std::abort();
  return 0;
}
