// libFuzzer target: the `--fault` flag parser (faults::ParseFaultFlag), both
// the "kind=loss,link=...,rate=..." form and the YAML flow-map form.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "faults/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = fathom::faults::ParseFaultFlag(text);
  if (spec.ok()) {
    // What the parser accepts must pass validation as a timeline entry.
    google::protobuf::RepeatedPtrField<fathom::proto::FaultSpec> one;
    *one.Add() = *spec;
    if (!fathom::faults::ValidateFaults(one, "faults", fathom::config::SourceMap("--fault")).ok()) {
      std::abort();
    }
    (void)fathom::faults::WindowOf(*spec);
    (void)fathom::faults::FlapScheduleOf(*spec);
  }
  return 0;
}
