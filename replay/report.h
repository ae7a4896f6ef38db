// Replay's text and JSON reports (issue 28): what was read (each source and
// its fate), the symptom, the ranked causes with the evidence for and
// against each, the ablation and the reproducing scenario. The HTML report
// is html.h's.
#pragma once

#include <string>

#include "replay/result.h"

namespace fathom::replay {

std::string FormatText(const ReplayResult& result);
// One JSON object (nlohmann-json), every field of the result.
std::string FormatJson(const ReplayResult& result);

}  // namespace fathom::replay
