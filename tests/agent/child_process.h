// Real processes for the agent's tests: the HTTP server script, the
// weightpath-server binary and the agent itself, each on loopback.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weightpath::agent::testing {

// A long-running child whose stdout the test reads line by line (to learn
// the port it bound) and whose stderr goes to a file. Killed on destruction.
class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::string& stderr_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The first stdout line starting with `prefix`; DEADLINE_EXCEEDED after
  // `timeout`, UNAVAILABLE when the child exits first.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Duration timeout);

  // SIGTERM, then SIGKILL if it has not exited within `grace`.
  void Stop(absl::Duration grace = absl::Seconds(5));

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}
  pid_t pid_;
  int stdout_fd_;
  std::string buffered_;
};

struct CompletedProcess {
  int exit_code = -1;  // -1 when killed by a signal or the timeout
  std::string stdout_text;
  std::string stderr_text;
  absl::Duration wall_time;
};

// Runs to completion with `extra_environment` added to this process's;
// killed after `timeout`.
CompletedProcess RunProcess(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& extra_environment,
                            absl::Duration timeout);

}  // namespace weightpath::agent::testing
