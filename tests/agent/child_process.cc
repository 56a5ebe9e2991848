#include "tests/agent/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace weightpath::agent::testing {
namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Waits for `pid` until `deadline`; true when it exited (status stored).
bool WaitUntil(pid_t pid, absl::Time deadline, int* status) {
  for (;;) {
    const pid_t done = ::waitpid(pid, status, WNOHANG);
    if (done == pid) return true;
    if (done < 0 && errno != EINTR) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& stderr_path) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  std::vector<std::string> arguments = argv;
  std::vector<char*> c_arguments = CStrings(arguments);
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) ::dup2(err, STDERR_FILENO);
    ::execvp(c_arguments[0], c_arguments.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, pipe_fds[0]));
}

ChildProcess::~ChildProcess() {
  Stop();
  ::close(stdout_fd_);
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    size_t newline;
    while ((newline = buffered_.find('\n')) != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      if (line.rfind(prefix, 0) == 0) return line;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("no line starting with '", prefix, "'"));
    }
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t read_bytes = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (read_bytes <= 0) {
      return absl::UnavailableError(
          absl::StrCat("the process exited before printing '", prefix, "'"));
    }
    buffered_.append(chunk, static_cast<size_t>(read_bytes));
  }
}

void ChildProcess::Stop(absl::Duration grace) {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  if (!WaitUntil(pid_, absl::Now() + grace, &status)) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

CompletedProcess RunProcess(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& extra_environment,
                            absl::Duration timeout) {
  char out_template[] = "/tmp/wp-agent-stdout-XXXXXX";
  char err_template[] = "/tmp/wp-agent-stderr-XXXXXX";
  const int out_fd = ::mkstemp(out_template);
  const int err_fd = ::mkstemp(err_template);

  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if (extra_environment.count(name) == 0) environment.push_back(text);
  }
  for (const auto& [name, value] : extra_environment) environment.push_back(name + "=" + value);
  std::vector<std::string> arguments = argv;
  std::vector<char*> c_arguments = CStrings(arguments);
  std::vector<char*> c_environment = CStrings(environment);

  CompletedProcess result;
  const absl::Time start = absl::Now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execve(c_arguments[0], c_arguments.data(), c_environment.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0 && !WaitUntil(pid, start + timeout, &status)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    status = -1;
  }
  result.wall_time = absl::Now() - start;
  if (pid > 0 && status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  ::close(out_fd);
  ::close(err_fd);
  result.stdout_text = ReadWhole(out_template);
  result.stderr_text = ReadWhole(err_template);
  ::unlink(out_template);
  ::unlink(err_template);
  return result;
}

}  // namespace weightpath::agent::testing
