// libFuzzer target: a topology file (a TopologySpec at the root) through the
// YAML loader and BuildTopology, as `fathom topo FILE.yaml` loads it.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "topologies/spec.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // See scenario_load_fuzz.cc: keep accepted topologies small (the seed
  // corpus's xlarge.yaml, k=32, is refused here).
  ::setenv("FATHOM_TOPOLOGY_MEMORY_LIMIT", "4M", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fathom::proto::TopologySpec spec;
  fathom::config::SourceMap map;
  const fathom::Status s =
      fathom::config::LoadYamlString(text, "fuzz.yaml", &spec, {.source_map = &map});
  if (!s.ok()) return 0;
  auto t = fathom::topo::BuildTopology(spec, &map, "");
  if (t.ok() && !t->Validate().ok()) std::abort();  // a built topology is a valid one
  return 0;
}
