// `fathom sim SCENARIO.yaml`: run a scenario in virtual time and summarize
// it; exit 1 when the outcome differs from the scenario's `expect` block, 2
// for a bad scenario file or flag.
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fabric/sim/scenario.h"
#include "faults/spec.h"
#include "tools/command.h"

namespace fathom::tools {
namespace {

struct SimFlags {
  std::string scenario;
  std::optional<uint64_t> seed;
  std::string json;
  std::vector<std::string> pcap;
  std::string trace;
  bool quiet = false;
  std::vector<std::string> faults;  // --fault: one-off faults, scenario syntax
};

int RunSim(const SimFlags& f) {
  auto loaded = sim::LoadScenario(f.scenario);
  if (!loaded.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", loaded.status().message().c_str());
    return kExitUsage;
  }
  if (Status s = faults::AppendFaultFlags(f.faults, loaded->spec.mutable_faults()); !s.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", s.message().c_str());
    return kExitUsage;
  }
  sim::RunOptions opts;
  opts.seed = f.seed;
  for (const std::string& p : f.pcap) {
    const size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) {
      std::fprintf(stderr, "fathom sim: --pcap %s: expected LINK=FILE (e.g. h0-leaf0=h0.pcap)\n",
                   p.c_str());
      return kExitUsage;
    }
    opts.captures.emplace_back(p.substr(0, eq), p.substr(eq + 1));
  }
  FILE* trace = nullptr;
  if (!f.trace.empty()) {
    trace = std::fopen(f.trace.c_str(), "w");
    if (trace == nullptr) {
      std::fprintf(stderr, "fathom sim: --trace %s: cannot create the file\n", f.trace.c_str());
      return kExitUsage;
    }
    opts.trace_file = trace;
  }
  opts.progress = !f.quiet && isatty(STDERR_FILENO) != 0;
  auto report = sim::RunScenario(*loaded, opts);
  if (trace != nullptr) std::fclose(trace);
  if (!report.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", report.status().message().c_str());
    return report.status().code() == StatusCode::kInvalidArgument ||
                   report.status().code() == StatusCode::kNotFound
               ? kExitUsage
               : kExitFailure;
  }
  if (!f.json.empty()) {
    FILE* out = f.json == "-" ? stdout : std::fopen(f.json.c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "fathom sim: --json %s: cannot create the file\n", f.json.c_str());
      return kExitUsage;
    }
    const std::string json = sim::FormatJson(*report);
    std::fwrite(json.data(), 1, json.size(), out);
    if (out != stdout) std::fclose(out);
  }
  if (!f.quiet && f.json != "-") std::fputs(sim::FormatSummary(*report).c_str(), stdout);
  const std::vector<std::string> mismatches = sim::CheckExpectations(loaded->spec, *report);
  for (const std::string& m : mismatches) {
    std::fprintf(stderr, "fathom sim: %s: expectation not met: %s\n", f.scenario.c_str(),
                 m.c_str());
  }
  return mismatches.empty() ? kExitOk : kExitFailure;
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    sim, Command{"sim", "Run a scenario in the fabric simulator (virtual time) and summarize it",
                 [](CLI::App* sub) -> std::function<int()> {
                   auto flags = std::make_shared<SimFlags>();
                   sub->add_option("scenario", flags->scenario, "scenario file (YAML)")->required();
                   sub->add_option("--seed", flags->seed, "override the scenario's seed");
                   sub->add_option("--json", flags->json,
                                   "write the report as JSON to this file ('-' = stdout)");
                   sub->add_option(
                          "--pcap", flags->pcap,
                          "capture a link (both directions) as LINK=FILE, e.g. h0-leaf0=h0.pcap")
                       ->expected(1)
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
                   sub->add_option("--trace", flags->trace,
                                   "write every event (time_ps kind component) here");
                   sub->add_flag("--quiet", flags->quiet, "no summary table, no progress");
                   sub->add_option(
                          "--fault", flags->faults,
                          "add a fault, scenario syntax: kind=loss,link=leaf0-spine0,rate=0.01 or "
                          "'{kind: loss, ...}' (see `fathom faults`)")
                       ->expected(1)
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
                   return [flags] { return RunSim(*flags); };
                 },
                 30});

}  // namespace fathom::tools
