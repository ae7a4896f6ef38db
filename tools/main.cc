// fathom: network fabric emulator and RDMA transport testbed — the program.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "base/log.h"
#include "tools/command.h"

namespace fathom::tools {
namespace {
std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace

bool RegisterCommand(Command command) {
  Registry().push_back(std::move(command));
  return true;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "fathom: a network fabric emulator and RDMA transport testbed.\n"
      "Exit codes: 0 success, 1 the run found a failure, 2 bad usage or input."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fathom 0.1.0");
  // Global diagnostics (base/log.h), accepted before or after the
  // subcommand: fallthrough hands the subcommand's unknown options up here.
  int verbosity = 0;
  std::string log_level;
  app.add_flag("-v,--verbose", verbosity,
               "log more on stderr: -v info (connections, retries, boot steps), -vv debug");
  app.add_option("--log-level", log_level,
                 "log level: trace, debug, info, warn (default), error or off; overrides -v "
                 "and the FATHOM_LOG_LEVEL environment variable")
      ->check([](const std::string& v) {
        auto level = log::ParseLevel(v);
        return level.ok() ? std::string() : level.status().message();
      });
  app.fallthrough();

  auto& commands = Registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const Command& a, const Command& b) { return a.order < b.order; });
  std::function<int()> action;
  for (Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    auto run = c.setup(sub);
    sub->callback([&action, run] { action = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  if (!action) return kExitUsage;
  auto env_level = log::LevelFromEnv();
  if (!env_level.ok()) {
    std::fprintf(stderr, "fathom: %s\n", env_level.status().message().c_str());
    return kExitUsage;
  }
  if (!log_level.empty()) {
    log::SetLevel(*log::ParseLevel(log_level));
  } else if (verbosity > 0) {
    log::SetLevel(log::LevelForVerbosity(verbosity));
  } else {
    log::SetLevel(env_level->value_or(log::kDefaultLevel));
  }
  if (HugePagesAdvised()) {
    FATHOM_LOG(kInfo,
               "heap advised for 2 MiB pages (glibc.malloc.hugetlb=1; FATHOM_HUGE_PAGES=0 "
               "turns this off)");
  }
  return action();
}

}  // namespace fathom::tools

int main(int argc, char** argv) {
  fathom::PreferHugePages(argv);
  return fathom::tools::Main(argc, argv);
}
