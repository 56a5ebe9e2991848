#include "tests/support/subprocess.h"

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

namespace weightpath::testing {
namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

std::vector<std::string> Environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (extra.count(text.substr(0, text.find('='))) == 0) environment.push_back(text);
  }
  for (const auto& [name, value] : extra) environment.push_back(name + "=" + value);
  return environment;
}

// Opened before fork: the child must not allocate or fail silently.
int OpenOutput(const std::string& path, bool append) {
  if (path.empty()) return ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC),
                0644);
}

ExitStatus Decode(int status) {
  ExitStatus decoded;
  if (WIFEXITED(status)) decoded.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) decoded.signal = WTERMSIG(status);
  return decoded;
}

std::string TempPattern(const char* name) {
  const char* base = std::getenv("TEST_TMPDIR");
  if (base == nullptr) base = std::getenv("TMPDIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "-XXXXXX");
}

std::string ReadAndRemove(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  ::unlink(path.c_str());
  return contents.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const std::vector<std::string>& argv,
                                                              const SpawnOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("argv is empty");
  int pipe_fds[2] = {-1, -1};
  if (options.pipe_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  const int out_fd = options.pipe_stdout ? pipe_fds[1] : OpenOutput(options.stdout_path, options.append);
  const int err_fd = !options.stderr_path.empty() && options.stderr_path == options.stdout_path
                         ? ::fcntl(out_fd, F_DUPFD_CLOEXEC, 0)
                         : OpenOutput(options.stderr_path, options.append);
  auto close_all = [&] {
    for (int fd : {out_fd, err_fd, pipe_fds[0]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (out_fd < 0 || err_fd < 0) {
    close_all();
    return absl::InternalError(absl::StrCat("cannot open the output of ", argv[0], ": ",
                                            std::strerror(errno)));
  }
  std::vector<std::string> arguments = argv;
  std::vector<std::string> environment = Environment(options.extra_environment);
  std::vector<char*> c_arguments = CStrings(arguments);
  std::vector<char*> c_environment = CStrings(environment);

  const pid_t pid = ::fork();
  if (pid < 0) {
    close_all();
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(c_arguments[0], c_arguments.data(), c_environment.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
  return std::unique_ptr<Subprocess>(new Subprocess(pid, pipe_fds[0]));
}

Subprocess::~Subprocess() {
  if (!ended_.has_value()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

void Subprocess::Signal(int signal_number) const {
  if (!ended_.has_value()) ::kill(pid_, signal_number);
}

absl::StatusOr<std::string> Subprocess::WaitForLine(const std::string& prefix,
                                                    absl::Duration timeout) {
  if (stdout_fd_ < 0) return absl::FailedPreconditionError("stdout is not piped");
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
      return absl::DeadlineExceededError(absl::StrCat("no line starting with '", prefix, "' in ",
                                                      absl::FormatDuration(timeout)));
    }
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t read_bytes = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (read_bytes <= 0) {
      return absl::UnavailableError(absl::StrCat("the process exited before printing '", prefix,
                                                 "'; it printed: ", buffered_));
    }
    buffered_.append(chunk, static_cast<size_t>(read_bytes));
  }
}

std::optional<ExitStatus> Subprocess::Poll() {
  if (ended_.has_value()) return ended_;
  int status = 0;
  pid_t done;
  do {
    done = ::waitpid(pid_, &status, WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done == pid_) {
    ended_ = Decode(status);
  } else if (done < 0) {
    ended_ = ExitStatus{};  // not our child any more: nothing left to wait for
  }
  return ended_;
}

ExitStatus Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Poll().has_value()) {
    if (absl::Now() >= deadline) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      ended_ = Decode(status);
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return *ended_;
}

ExitStatus Subprocess::Terminate(absl::Duration grace) {
  Signal(SIGTERM);
  return Wait(grace);
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& extra_environment,
                         absl::Duration timeout) {
  ProcessResult result;
  // mkstemp keeps parallel tests apart; the files go once they are read.
  std::string out_path = TempPattern("wp-stdout");
  std::string err_path = TempPattern("wp-stderr");
  const int out_fd = ::mkstemp(out_path.data());
  const int err_fd = ::mkstemp(err_path.data());
  if (out_fd >= 0) ::close(out_fd);
  if (err_fd >= 0) ::close(err_fd);
  if (out_fd < 0 || err_fd < 0) {
    result.err = absl::StrCat("mkstemp: ", std::strerror(errno));
    return result;
  }
  SpawnOptions options;
  options.stdout_path = out_path;
  options.stderr_path = err_path;
  options.extra_environment = extra_environment;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Subprocess>> process = Subprocess::Start(argv, options);
  if (process.ok()) {
    const ExitStatus status = (*process)->Wait(timeout);
    result.exit_code = status.exit_code;
  }
  result.wall_time = absl::Now() - start;
  result.out = ReadAndRemove(out_path);
  result.err = ReadAndRemove(err_path);
  if (!process.ok()) result.err = std::string(process.status().message());
  return result;
}

}  // namespace weightpath::testing
