#include "testbed/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace fathom::testbed {

StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path,
                      int pass_fd) {
  if (argv.empty()) return InvalidArgument("Spawn: empty argv");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return IoError("Spawn(" + argv[0] + ") open log " + log_path + ": " + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(log_fd);
    return IoError("Spawn(" + argv[0] + ") fork: " + std::strerror(err));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    setpgid(0, 0);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    if (pass_fd >= 0) {
      // dup2 clears close-on-exec on the copy; on the same number it does
      // nothing, so clear it by hand.
      if (pass_fd == kPassedFd) {
        fcntl(kPassedFd, F_SETFD, 0);
      } else if (dup2(pass_fd, kPassedFd) < 0) {
        _exit(126);
      }
    }
    execvp(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  setpgid(pid, pid);  // also from the parent: no window where a signal misses the group
  return pid;
}

std::optional<int> PollExit(pid_t pid) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) return status;
  if (r < 0 && errno == ECHILD) return 0;  // already reaped
  return std::nullopt;
}

bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

void Terminate(pid_t pid, std::chrono::milliseconds grace) {
  if (pid <= 0 || PollExit(pid).has_value()) return;
  // The group holds the child and anything it forked; pid == pgid by Spawn.
  kill(-pid, SIGTERM);
  kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (PollExit(pid).has_value()) {
      kill(-pid, SIGKILL);  // stragglers of the group, if any
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

StatusOr<int> RunToCompletion(const std::vector<std::string>& argv, const std::string& log_path,
                              std::chrono::seconds deadline) {
  FATHOM_ASSIGN_OR_RETURN(const pid_t pid, Spawn(argv, log_path));
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (auto st = PollExit(pid)) return ExitCode(*st);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Terminate(pid, std::chrono::milliseconds(1000));
  return DeadlineExceeded(argv[0] + " did not finish within " + std::to_string(deadline.count()) +
                          " s (log " + log_path + ")");
}

}  // namespace fathom::testbed
