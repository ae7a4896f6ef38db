// fathom: network fabric emulator and RDMA transport testbed — the program.
#include <algorithm>
#include <cstdio>
#include <vector>

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
  return action();
}

}  // namespace fathom::tools

int main(int argc, char** argv) { return fathom::tools::Main(argc, argv); }
