// Runs the real weightpath-server as a child process for the chart's
// integration test, and reads its Prometheus endpoint over plain HTTP.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weightpath::helm_test {

class ServerProcess {
 public:
  // Starts `binary args...` with its output in `log_path` and waits (up to
  // `start_timeout`) for its "listening grpc=ADDR metrics=ADDR" line.
  // DEADLINE_EXCEEDED or INTERNAL with the server's own output when it does
  // not come up.
  static absl::StatusOr<ServerProcess> Start(const std::string& binary,
                                             const std::vector<std::string>& args,
                                             const std::string& log_path,
                                             absl::Duration start_timeout);
  ServerProcess(ServerProcess&& other) noexcept;
  ServerProcess& operator=(ServerProcess&&) = delete;
  ServerProcess(const ServerProcess&) = delete;
  ~ServerProcess();  // kills a server still running

  const std::string& metrics_address() const { return metrics_address_; }

  // Sends SIGTERM and returns the exit status (or -1 if it died by a signal).
  int TerminateAndWait();

 private:
  ServerProcess(pid_t pid, std::string metrics_address)
      : pid_(pid), metrics_address_(std::move(metrics_address)) {}

  pid_t pid_ = -1;
  std::string metrics_address_;
};

// GET http://ADDRESS/metrics, body only. UNAVAILABLE when it cannot connect.
absl::StatusOr<std::string> FetchMetrics(const std::string& address);

}  // namespace weightpath::helm_test
