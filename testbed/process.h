// Child processes the testbed starts (qemu, the asset builder, native-mode
// commands). Each child gets PR_SET_PDEATHSIG(SIGKILL) and its own process
// group, so a test that is killed leaves no VM behind, and teardown signals
// exactly the ids it started: SIGTERM, a grace period, then SIGKILL.
//
// PR_SET_PDEATHSIG fires when the *thread* that forked exits: spawn from a
// thread that outlives the child (the testbed's owner thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace fathom::testbed {

// The descriptor number a child gets for Spawn's `pass_fd`.
inline constexpr int kPassedFd = 3;

// Starts argv[0] (searched in PATH) with stdin from /dev/null and stdout and
// stderr appended to `log_path`. Returns the child's pid. `pass_fd` (if not
// -1; the caller keeps its own copy) becomes descriptor kPassedFd in the
// child; no other descriptor opened with O_CLOEXEC reaches it.
StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path,
                      int pass_fd = -1);

// Non-blocking: the exit status (as from waitpid) if `pid` has exited and
// was reaped now, nothing while it runs.
std::optional<int> PollExit(pid_t pid);

// SIGTERM to the child's process group, wait up to `grace`, then SIGKILL and
// reap. Safe on a pid that has already been reaped (does nothing).
void Terminate(pid_t pid, std::chrono::milliseconds grace);

// Decodes a waitpid status into an exit code: the code, or 128 + signal.
int ExitCode(int wait_status);

// Runs argv to completion (with a deadline); returns its exit code.
StatusOr<int> RunToCompletion(const std::vector<std::string>& argv, const std::string& log_path,
                              std::chrono::seconds deadline);

// True while a process with this pid exists (zombies included).
bool ProcessExists(pid_t pid);

}  // namespace fathom::testbed
