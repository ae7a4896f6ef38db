#include "base/huge_pages.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace fathom {
namespace {

constexpr char kTunables[] = "GLIBC_TUNABLES";
constexpr char kHugeTlb[] = "glibc.malloc.hugetlb";
// Set only between the exec and the new image's first step: "applied" marks
// the re-executed image, kSaved carries the caller's GLIBC_TUNABLES (absent
// when the caller had none).
constexpr char kSwitch[] = "FATHOM_HUGE_PAGES";
constexpr char kSaved[] = "FATHOM_HUGE_PAGES_SAVED_TUNABLES";

bool advised = false;

bool UnderValgrind() {
  // valgrind preloads its malloc replacement (vgpreload_*.so); an exec would
  // also leave valgrind unless it follows children.
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

void RestoreEnvironment() {
  if (const char* saved = std::getenv(kSaved)) {
    setenv(kTunables, saved, 1);
    unsetenv(kSaved);
  } else {
    unsetenv(kTunables);
  }
  unsetenv(kSwitch);
}

}  // namespace

void PreferHugePages(char** argv) {
  const char* sw = std::getenv(kSwitch);
  if (sw != nullptr && std::strcmp(sw, "applied") == 0) {
    RestoreEnvironment();
    advised = true;
    return;
  }
  if (sw != nullptr && std::strcmp(sw, "0") == 0) return;
  const char* tunables = std::getenv(kTunables);
  if (tunables != nullptr && std::strstr(tunables, kHugeTlb) != nullptr) return;
  if (BuiltWithAddressSanitizer() || UnderValgrind() || !ThpModeIsMadvise()) return;

  std::string value = std::string(kHugeTlb) + "=1";
  if (tunables != nullptr && *tunables != '\0') {
    setenv(kSaved, tunables, 1);
    value = std::string(tunables) + ":" + value;
  }
  setenv(kTunables, value.c_str(), 1);
  setenv(kSwitch, "applied", 1);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc, a seccomp policy...): go on as we are.
  RestoreEnvironment();
}

bool HugePagesAdvised() { return advised; }

bool BuiltWithAddressSanitizer() {
  // GCC defines the macro, clang names the feature.
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

bool ThpModeIsMadvise() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return std::getline(in, line) && line.find("[madvise]") != std::string::npos;
}

}  // namespace fathom
