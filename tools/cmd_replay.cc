// `fathom replay EVIDENCE [--json OUT|-] [--html OUT] [--scenario-out DIR]
// [--jobs N] [--top N]`: field diagnosis (issue 28). Reads a hung or failed
// job's evidence bundle (a directory or tarball), forms hypotheses as
// scenarios, simulates and scores them, ablates the best and reports the
// ranked root causes with the reproducing scenario.
// Exit codes: 0 a cause found, 1 no hypothesis reproduces the symptom (or
// there is none), 2 unusable input or a bad flag.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "base/temp_dir.h"
#include "replay/engine.h"
#include "replay/evidence.h"
#include "replay/html.h"
#include "replay/report.h"
#include "tools/command.h"

namespace fathom::tools {
namespace {

struct ReplayFlags {
  std::string evidence;
  std::string json;  // file, or "-" for stdout
  std::string html;
  std::string scenario_out;
  int jobs = 0;  // 0: one per core, at most --top
  int top = 8;
};

bool WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

int RunReplay(const ReplayFlags& flags) {
  auto evidence = replay::ReadEvidence(flags.evidence);
  if (!evidence.ok()) {
    std::fprintf(stderr, "fathom replay: %s\n", evidence.status().message().c_str());
    return replay::kExitUnusable;
  }
  replay::ReplayOptions options;
  options.top = flags.top;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  options.jobs = flags.jobs > 0 ? flags.jobs : static_cast<int>(std::max(1L, cores));
  options.scenario_out = flags.scenario_out;
  if (options.scenario_out.empty()) {
    // The reproducing scenario is always written somewhere the user can run
    // it: a new directory under $TMPDIR (or /tmp), which is the user's to keep.
    const StatusOr<std::string> dir = MakeTempDir("fathom-replay-scenarios");
    if (dir.ok()) options.scenario_out = dir.value();
  }
  auto result = replay::Replay(*evidence, options);
  if (!result.ok()) {
    std::fprintf(stderr, "fathom replay: %s: %s\n", flags.evidence.c_str(),
                 result.status().message().c_str());
    return replay::kExitUnusable;
  }
  bool outputs_ok = true;
  if (flags.json == "-") {
    std::fputs(replay::FormatJson(*result).c_str(), stdout);
  } else {
    std::fputs(replay::FormatText(*result).c_str(), stdout);
    if (!flags.json.empty() && !WriteText(flags.json, replay::FormatJson(*result))) {
      std::fprintf(stderr, "fathom replay: --json: cannot write %s\n", flags.json.c_str());
      outputs_ok = false;
    }
  }
  if (!flags.html.empty() && !WriteText(flags.html, replay::RenderHtml(*result))) {
    std::fprintf(stderr, "fathom replay: --html: cannot write %s\n", flags.html.c_str());
    outputs_ok = false;
  }
  if (!outputs_ok) return replay::kExitUnusable;
  return replay::ExitCode(*result);
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    replay,
    Command{"replay",
            "Diagnose a hung or failed job from its evidence: simulate hypotheses, rank root "
            "causes",
            [](CLI::App* sub) -> std::function<int()> {
              auto flags = std::make_shared<ReplayFlags>();
              sub->add_option("evidence", flags->evidence,
                              "the evidence bundle: a directory or a .tar/.tar.gz/.tgz (NCCL "
                              "logs, rdma statistic / hw_counters, ibv_devinfo, ip link, GIDs, "
                              "ethtool -S, topology, neighbours, switch counters, link events, "
                              "captures; every part optional)")
                  ->required();
              sub->add_option("--json", flags->json,
                              "write the result as JSON to OUT ('-': to stdout instead of the "
                              "text report)")
                  ->type_name("OUT|-");
              sub->add_option("--html", flags->html,
                              "write a self-contained HTML report (fabric as SVG with the "
                              "suspects, timeline, counters, ranking) to OUT")
                  ->type_name("OUT");
              sub->add_option(
                     "--scenario-out", flags->scenario_out,
                     "write each simulated hypothesis' scenario to DIR (default: a new "
                     "directory under $TMPDIR or /tmp); the reproducing one pins its outcome in an "
                     "expect block, a regression test for `fathom sim`")
                  ->type_name("DIR");
              sub->add_option("--jobs", flags->jobs,
                              "simulations at once, each in its own process (default: one per "
                              "core)")
                  ->check(CLI::Range(1, 256));
              sub->add_option("--top", flags->top,
                              "how many hypotheses to simulate, the best by the evidence alone "
                              "(default 8)")
                  ->check(CLI::Range(1, 64));
              sub->footer(
                  "Exit codes: 0 a cause reproduces the symptom; 1 none of the simulated "
                  "hypotheses does (or the evidence shows no symptom); 2 unusable evidence "
                  "(nothing readable, no fabric and no host) or a bad flag.");
              return [flags] { return RunReplay(*flags); };
            },
            35});

}  // namespace fathom::tools
