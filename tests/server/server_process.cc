#include "tests/server/server_process.h"

#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace weightpath::server::testing {
namespace {

// Start-up on a 2-core CI machine running other suites can be slow.
constexpr absl::Duration kStartTimeout = absl::Seconds(30);

bool Names(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& arg : args) {
    if (absl::StartsWith(arg, "--" + flag + "=")) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> Spawn(
    std::vector<std::string> args, ::weightpath::testing::SpawnOptions options) {
  args.insert(args.begin(), WEIGHTPATH_SERVER_BINARY);
  return ::weightpath::testing::Subprocess::Start(args, options);
}

ExitResult ToExitResult(const ::weightpath::testing::ExitStatus& status) {
  ExitResult result;
  result.exit_code = status.exit_code;
  result.signal = status.signal;
  return result;
}

// "listening grpc=ADDR metrics=ADDR": the server's start-up line.
void ParseListening(absl::string_view line, std::string* grpc, std::string* metrics) {
  for (absl::string_view field : absl::StrSplit(line, ' ')) {
    if (absl::ConsumePrefix(&field, "grpc=")) *grpc = std::string(field);
    if (absl::ConsumePrefix(&field, "metrics=")) *metrics = std::string(field);
  }
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/wp-server-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void WriteFileOrDie(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  if (!out) {
    ADD_FAILURE() << "cannot write " << path;
    std::abort();
  }
}

void WriteSecretFileOrDie(const std::string& path, const std::string& contents) {
  WriteFileOrDie(path, contents);
  if (::chmod(path.c_str(), 0600) != 0) {
    ADD_FAILURE() << "cannot chmod 600 " << path;
    std::abort();
  }
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    std::abort();
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(std::vector<std::string> args) {
  if (!Names(args, "listen")) args.push_back("--listen=127.0.0.1:0");
  if (!Names(args, "metrics_listen")) args.push_back("--metrics_listen=127.0.0.1:0");
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  process->log_dir_ = std::make_unique<TempDir>();
  process->log_path_ = process->log_dir_->File("server.log");
  // The default store is a file in the working directory; each test server
  // gets its own so parallel tests never share a registry by accident.
  if (!Names(args, "store")) args.push_back("--store=sqlite:" + process->log_dir_->File("fleet.db"));
  // The suites' requests stand for single-file agents: the embedded demo's
  // directory builds would be refused to them (accepts_directory_builds).
  if (!Names(args, "catalog")) args.push_back("--catalog=" WEIGHTPATH_SINGLE_FILE_CATALOG);
  ::weightpath::testing::SpawnOptions options;
  options.pipe_stdout = true;
  options.stderr_path = process->log_path_;
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> spawned =
      Spawn(std::move(args), options);
  if (!spawned.ok()) return spawned.status();
  process->process_ = *std::move(spawned);

  absl::StatusOr<std::string> line = process->process_->WaitForLine("listening ", kStartTimeout);
  if (line.ok()) ParseListening(*line, &process->grpc_address_, &process->metrics_address_);
  if (!line.ok() || process->grpc_address_.empty()) {
    return absl::UnavailableError(
        absl::StrCat("server did not start: ", line.ok() ? *line : line.status().ToString(),
                     "\nlog:\n", process->Log()));
  }
  return process;
}

ExitResult ServerProcess::RunToExit(std::vector<std::string> args, absl::Duration timeout) {
  TempDir dir;
  const std::string log_path = dir.File("server.log");
  if (!Names(args, "store")) args.push_back("--store=sqlite:" + dir.File("fleet.db"));
  // Ports picked by the kernel, unless the test is about them: a start that
  // gets past the check under test must not fail on, or take, a fixed port
  // another suite holds.
  if (!Names(args, "listen")) args.push_back("--listen=127.0.0.1:0");
  if (!Names(args, "metrics_listen")) args.push_back("--metrics_listen=127.0.0.1:0");
  ::weightpath::testing::SpawnOptions options;
  options.stderr_path = log_path;
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> process =
      Spawn(std::move(args), options);
  ExitResult result;
  if (process.ok()) result = ToExitResult((*process)->Wait(timeout));
  result.log = ReadFileOrDie(log_path);
  return result;
}

ServerProcess::~ServerProcess() = default;

void ServerProcess::Signal(int signal_number) const {
  if (process_ != nullptr) process_->Signal(signal_number);
}

bool ServerProcess::Running() const { return process_ != nullptr && !process_->Poll().has_value(); }

pid_t ServerProcess::pid() const { return process_ != nullptr ? process_->pid() : -1; }

ExitResult ServerProcess::WaitForExit(absl::Duration timeout) {
  ExitResult result;
  if (process_ != nullptr) result = ToExitResult(process_->Wait(timeout));
  process_.reset();
  result.log = Log();
  return result;
}

std::string ServerProcess::Log() const { return ReadFileOrDie(log_path_); }

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(host_port.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", host_port));
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &address.sin_addr);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", host_port, ": ", std::strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port, "\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write failed");
  }
  std::string response;
  char buffer[16384];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || body == std::string::npos) {
    return absl::DataLossError(absl::StrCat("not an HTTP response: ", response.substr(0, 200)));
  }
  if (!absl::StrContains(response.substr(0, response.find("\r\n")), " 200")) {
    return absl::UnavailableError(response.substr(0, response.find("\r\n")));
  }
  return response.substr(body + 4);
}

absl::StatusOr<double> SampleValue(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series)) continue;
    if (!absl::ConsumePrefix(&line, " ")) continue;
    double value = 0;
    if (!absl::SimpleAtod(line, &value)) {
      return absl::DataLossError(absl::StrCat("unparsable sample: ", series, " ", line));
    }
    return value;
  }
  return absl::NotFoundError(absl::StrCat("no sample ", series));
}

std::string SingleFileCatalogYaml() { return ReadFileOrDie(WEIGHTPATH_SINGLE_FILE_CATALOG); }

}  // namespace weightpath::server::testing
