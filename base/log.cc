#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <string>

namespace fathom::log {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_level{kUnset};

spdlog::level::level_enum ToSpd(Level level) {
  switch (level) {
    case Level::kTrace:
      return spdlog::level::trace;
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      break;
  }
  return spdlog::level::off;
}

// Our own logger rather than spdlog's default one: stderr only (stdout
// carries reports), no colour codes in files and pipes. The facade does the
// level check, so the logger passes everything it is given. Made by the
// compiled library's factory, not make_shared here: a sink's shared_ptr
// built in this file trips UBSan's vptr check against the library's copy
// of the same template (asan preset, clang against the gcc-built spdlog).
spdlog::logger& Logger() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("fathom");
    if (!l) l = spdlog::stderr_logger_mt("fathom");
    l->set_pattern("[%H:%M:%S.%e] [fathom] [%l] %v");
    l->set_level(spdlog::level::trace);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

}  // namespace

StatusOr<Level> ParseLevel(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "trace") return Level::kTrace;
  if (lower == "debug") return Level::kDebug;
  if (lower == "info") return Level::kInfo;
  if (lower == "warn" || lower == "warning") return Level::kWarn;
  if (lower == "error") return Level::kError;
  if (lower == "off") return Level::kOff;
  return InvalidArgument("log level \"" + std::string(name) +
                         "\": expected trace, debug, info, warn, error or off");
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kTrace:
      return "trace";
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
    case Level::kOff:
      break;
  }
  return "off";
}

Level LevelForVerbosity(int count) {
  if (count <= 0) return kDefaultLevel;
  return count == 1 ? Level::kInfo : Level::kDebug;
}

StatusOr<std::optional<Level>> LevelFromEnv() {
  const char* value = std::getenv(kLevelEnv);
  if (value == nullptr || *value == '\0') return std::optional<Level>();
  auto level = ParseLevel(value);
  if (!level.ok()) return InvalidArgument(std::string(kLevelEnv) + ": " + level.status().message());
  return std::optional<Level>(*level);
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

Level GetLevel() {
  int v = g_level.load(std::memory_order_relaxed);
  if (v == kUnset) {
    auto env = LevelFromEnv();
    const Level initial = env.ok() && env->has_value() ? **env : kDefaultLevel;
    // Another thread may have set a level meanwhile; that one wins.
    g_level.compare_exchange_strong(v, static_cast<int>(initial), std::memory_order_relaxed);
    v = g_level.load(std::memory_order_relaxed);
  }
  return static_cast<Level>(v);
}

void Write(Level level, std::string_view message) {
  if (level == Level::kOff) return;
  Logger().log(ToSpd(level), "{}", message);
}

}  // namespace fathom::log
