// Runs the real weightpath-server binary for a test: on ports it picks itself
// (port 0), read back from its start-up line, stopped (SIGKILL if need be)
// when the object goes away.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/subprocess.h"

namespace weightpath::server::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFileOrDie(const std::string& path, const std::string& contents);
// Mode 0600, as the server and weightpathctl require of a token file.
void WriteSecretFileOrDie(const std::string& path, const std::string& contents);
std::string ReadFileOrDie(const std::string& path);
// tests/data/single_file_catalog.yaml: the catalog a test server loads
// unless the test names one (every build one file).
std::string SingleFileCatalogYaml();

struct ExitResult {
  int exit_code = -1;      // -1 when killed by a signal
  int signal = 0;
  std::string log;         // everything it wrote to stderr
};

class ServerProcess {
 public:
  // Adds --listen/--metrics_listen on 127.0.0.1:0 unless `args` names them.
  // Waits (generously, for a loaded CI machine) for the listening line.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(std::vector<std::string> args);
  // Runs the binary expecting it to exit by itself (e.g. refusing to start).
  static ExitResult RunToExit(std::vector<std::string> args, absl::Duration timeout);

  ~ServerProcess();

  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  pid_t pid() const;
  void Signal(int signal_number) const;
  // Whether it has not ended (by itself or a signal) yet; never blocks.
  bool Running() const;
  // Waits for the process to end; kills it after `timeout`.
  ExitResult WaitForExit(absl::Duration timeout);
  // The log so far.
  std::string Log() const;

 private:
  ServerProcess() = default;

  std::unique_ptr<TempDir> log_dir_;
  std::string log_path_;
  std::unique_ptr<::weightpath::testing::Subprocess> process_;  // null once waited for
  std::string grpc_address_;
  std::string metrics_address_;
};

// Plain HTTP/1.0 GET on 127.0.0.1 over a socket; the body, or an error.
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path);

// Value of one sample line of a Prometheus text exposition, e.g.
// SampleValue(text, "weightpath_policy_reloads_total{result=\"error\"}");
// labels must be written in the order the server prints them (sorted).
// NOT_FOUND when absent.
absl::StatusOr<double> SampleValue(const std::string& exposition, const std::string& series);

}  // namespace weightpath::server::testing
