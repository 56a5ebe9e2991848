// Child processes for tests that drive real binaries (weightpath-server,
// -agent, weightpathctl, python3, Prometheus): one fork/exec/wait in one
// place, so every suite gets the same signal mask, environment and
// kill-on-exit behaviour.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weightpath::testing {

// How a child ended.
struct ExitStatus {
  int exit_code = -1;  // -1 when a signal ended it
  int signal = 0;      // that signal; 0 when it exited
};

struct SpawnOptions {
  // Read by the test with Subprocess::WaitForLine; else written to
  // `stdout_path` ("" discards it).
  bool pipe_stdout = false;
  std::string stdout_path;
  // "" discards it; may name the same file as stdout_path.
  std::string stderr_path;
  // Append to the files instead of truncating them.
  bool append = false;
  // Added to (or replacing in) this process's environment.
  std::map<std::string, std::string> extra_environment;
};

// A running child. It starts with no signal blocked (a test runner may block
// some; a service manager would not), argv[0] is looked up on PATH when it
// has no slash, and it is killed (SIGKILL) and reaped when the object goes
// away still running.
class Subprocess {
 public:
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const std::vector<std::string>& argv,
                                                           const SpawnOptions& options);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal_number) const;

  // The next stdout line starting with `prefix` (earlier lines are
  // skipped); needs pipe_stdout. DEADLINE_EXCEEDED after `timeout`,
  // UNAVAILABLE when the child closes stdout (exits) first.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Duration timeout);

  // How it ended, once it has; nullopt while it runs. Never blocks.
  std::optional<ExitStatus> Poll();
  // Waits until it ends; SIGKILL after `timeout`.
  ExitStatus Wait(absl::Duration timeout);
  // SIGTERM, then Wait(grace).
  ExitStatus Terminate(absl::Duration grace);

 private:
  Subprocess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  pid_t pid_;
  int stdout_fd_;  // -1 unless piped
  std::string buffered_;
  std::optional<ExitStatus> ended_;
};

struct ProcessResult {
  int exit_code = -1;  // -1 when a signal or the timeout ended it
  std::string out;
  std::string err;
  absl::Duration wall_time;
};

// Runs to completion (SIGKILL after `timeout`) and captures what it printed.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& extra_environment = {},
                         absl::Duration timeout = absl::Minutes(2));

}  // namespace weightpath::testing
