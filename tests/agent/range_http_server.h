// tests/agent/range_http_server.py as a test fixture: serves `root` on a
// loopback port the kernel picks and logs every request.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/subprocess.h"

namespace weightpath::agent::testing {

class RangeHttpServer {
 public:
  // `work_dir` holds the request log and the server's stderr.
  // `default_query` ("trickle=10"): the fault knobs for every request
  // without a query of its own, for a mirror known only by its base URL.
  static absl::StatusOr<std::unique_ptr<RangeHttpServer>> Start(
      const std::string& root, const std::string& work_dir, const std::string& default_query = "");

  // http://127.0.0.1:<port>/<relative>
  std::string Url(const std::string& relative) const;
  int port() const { return port_; }
  // One line per request: "GET <path> range=<Range or -> status=<n> bytes=<n>".
  std::vector<std::string> RequestLog() const;
  void Stop() { process_->Terminate(absl::Seconds(5)); }

 private:
  RangeHttpServer(std::unique_ptr<::weightpath::testing::Subprocess> process, int port, std::string log_path)
      : process_(std::move(process)), port_(port), log_path_(std::move(log_path)) {}
  std::unique_ptr<::weightpath::testing::Subprocess> process_;
  int port_;
  std::string log_path_;
};

}  // namespace weightpath::agent::testing
