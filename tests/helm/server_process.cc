#include "tests/helm/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/helm/chart_text.h"

namespace weightpath::helm_test {

absl::StatusOr<ServerProcess> ServerProcess::Start(const std::string& binary,
                                                   const std::vector<std::string>& args,
                                                   const std::string& log_path,
                                                   absl::Duration start_timeout) {
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // A file rather than a pipe: the server logs for its whole life, and a
  // pipe nobody drains would eventually block it.
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat(log_path, ": ", strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(log_fd);

  static const std::regex kListening(R"re(listening grpc=(\S+) metrics=(\S+))re");
  const absl::Time deadline = absl::Now() + start_timeout;
  std::string printed;
  std::smatch match;
  for (;;) {
    absl::StatusOr<std::string> log = ReadFileText(log_path);
    printed = log.ok() ? *log : std::string();
    if (std::regex_search(printed, match, kListening)) break;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return absl::InternalError(absl::StrCat("weightpath-server exited (status ", status,
                                              ") before listening: ", printed));
    }
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return absl::DeadlineExceededError(
          absl::StrCat("weightpath-server printed no listening line in ",
                       absl::FormatDuration(start_timeout), ": ", printed));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return ServerProcess(pid, match[2].str());
}

ServerProcess::ServerProcess(ServerProcess&& other) noexcept
    : pid_(other.pid_), metrics_address_(std::move(other.metrics_address_)) {
  other.pid_ = -1;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int ServerProcess::TerminateAndWait() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

absl::StatusOr<std::string> FetchMetrics(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address ", address, " has no port"));
  }
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &target.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address ", address, " is not IPv4"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  if (connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", address, ": ", strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET /metrics HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("write to ", address, ": ", strerror(errno)));
  }
  std::string response;
  char buffer[8192];
  ssize_t got = 0;
  while ((got = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, got);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("no HTTP response from ", address));
  }
  return response.substr(body + 4);
}

}  // namespace weightpath::helm_test
