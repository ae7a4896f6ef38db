// The `fathom` program is one binary with subcommands. Each subcommand lives
// in its own tools/cmd_*.cc and registers itself here at static-init time, so
// adding a subcommand touches no shared file.
//
// Exit codes (DESIGN.md): 0 success, 1 the run found a failure (hang, error,
// mismatch), 2 bad usage or bad input.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace fathom::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A subcommand: `setup` declares its options on `sub` and returns the action
// to run once the command line has parsed. The action returns the exit code.
struct Command {
  std::string name;
  std::string description;
  std::function<std::function<int()>(CLI::App* sub)> setup;
  int order = 100;  // position in `fathom --help`
};

// Adds a command to the program's registry; returns true (for static init).
bool RegisterCommand(Command command);

}  // namespace fathom::tools

// Used at namespace scope in a cmd_*.cc file.
#define FATHOM_REGISTER_COMMAND(ident, ...) \
  static const bool fathom_registered_##ident = ::fathom::tools::RegisterCommand(__VA_ARGS__)
