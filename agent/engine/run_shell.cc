#include "agent/engine/run_shell.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace weightpath::agent {

absl::Status RunShellCommand(const std::string& command, const std::string& what) {
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/bin/sh", nullptr, nullptr,
                                  const_cast<char* const*>(argv), environ);
  if (spawned != 0) {
    return absl::UnavailableError(
        absl::StrCat(what, ": cannot start /bin/sh: ", std::strerror(spawned)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat(what, ": waitpid: ", std::strerror(errno)));
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  if (WIFEXITED(status)) {
    return absl::AbortedError(
        absl::StrCat(what, " '", command, "' exited with status ", WEXITSTATUS(status)));
  }
  return absl::AbortedError(absl::StrCat(what, " '", command, "' was killed by signal ",
                                         WIFSIGNALED(status) ? WTERMSIG(status) : -1));
}

}  // namespace weightpath::agent
