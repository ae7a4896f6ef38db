// Runs a command line through the shell and collects what it printed and its
// exit status: how the CLI tests drive the `fathom` program as users do.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace fathom::test_util {

struct CommandResult {
  int exit_code = -1;  // -1: could not start, or ended by a signal
  std::string out;     // stdout, and stderr too when merged
};

inline CommandResult RunCommand(const std::string& cmd, bool merge_stderr = true) {
  CommandResult r;
  FILE* p = popen((merge_stderr ? cmd + " 2>&1" : cmd).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A file the command wrote, whole and byte for byte ("" if it is missing).
inline std::string ReadFile(const std::string& path) {
  std::string bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return bytes;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) bytes.append(buf, n);
  std::fclose(f);
  return bytes;
}

}  // namespace fathom::test_util
