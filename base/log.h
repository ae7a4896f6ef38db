// fathom's diagnostic log: one process-wide level, lines on stderr. A small
// facade over spdlog, so that callers neither compile spdlog nor format a
// message the level would drop (FATHOM_LOG builds it only when enabled).
// Diagnostics only: what a command reports to its user, and the errors tests
// read, are printed by the command itself.
//
// Levels: trace < debug < info < warn < error < off; the default is warn.
// The program sets it from -v (info), -vv (debug), --log-level or the
// FATHOM_LOG_LEVEL environment variable (tools/main.cc). Thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "base/status.h"

namespace fathom::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

inline constexpr Level kDefaultLevel = Level::kWarn;
inline constexpr const char* kLevelEnv = "FATHOM_LOG_LEVEL";

// "trace", "debug", "info", "warn" (or "warning"), "error", "off", any case;
// INVALID_ARGUMENT naming the value and the accepted names otherwise.
StatusOr<Level> ParseLevel(std::string_view name);
const char* LevelName(Level level);
// The level that `count` -v flags ask for: 0 = the default, 1 = info, 2 or
// more = debug.
Level LevelForVerbosity(int count);
// FATHOM_LOG_LEVEL parsed (errors name the variable), nullopt when unset or
// empty.
StatusOr<std::optional<Level>> LevelFromEnv();

void SetLevel(Level level);
// The current level: the last SetLevel, else FATHOM_LOG_LEVEL when it is
// valid, else warn.
Level GetLevel();
inline bool Enabled(Level level) { return level != Level::kOff && level >= GetLevel(); }

// Writes one line at `level` (no check: use FATHOM_LOG).
void Write(Level level, std::string_view message);

}  // namespace fathom::log

// FATHOM_LOG(kInfo, "accepted " + peer): `message` is evaluated only when
// the level is enabled.
#define FATHOM_LOG(level, message)                                  \
  do {                                                              \
    if (::fathom::log::Enabled(::fathom::log::Level::level)) {      \
      ::fathom::log::Write(::fathom::log::Level::level, (message)); \
    }                                                               \
  } while (0)
