#include "tests/agent/range_http_server.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

#ifndef WEIGHTPATH_RANGE_HTTP_SERVER_SCRIPT
#error "the test target defines WEIGHTPATH_RANGE_HTTP_SERVER_SCRIPT"
#endif

namespace weightpath::agent::testing {

absl::StatusOr<std::unique_ptr<RangeHttpServer>> RangeHttpServer::Start(
    const std::string& root, const std::string& work_dir, const std::string& default_query) {
  const std::string log_path = work_dir + "/http-requests.log";
  ::weightpath::testing::SpawnOptions options;
  options.pipe_stdout = true;
  options.stderr_path = work_dir + "/http-server.stderr";
  ASSIGN_OR_RETURN(std::unique_ptr<::weightpath::testing::Subprocess> process,
                   ::weightpath::testing::Subprocess::Start(
                       {"python3", WEIGHTPATH_RANGE_HTTP_SERVER_SCRIPT, "--root", root,
                        "--request-log", log_path, "--default-query", default_query},
                       options));
  // Generous: a cold python3 start on a loaded 2-core machine is slow.
  ASSIGN_OR_RETURN(std::string line, process->WaitForLine("PORT ", absl::Seconds(30)));
  int port = 0;
  if (!absl::SimpleAtoi(line.substr(5), &port)) {
    return absl::InternalError(absl::StrCat("unexpected startup line: ", line));
  }
  return std::unique_ptr<RangeHttpServer>(new RangeHttpServer(std::move(process), port, log_path));
}

std::string RangeHttpServer::Url(const std::string& relative) const {
  return absl::StrCat("http://127.0.0.1:", port_, "/", relative);
}

std::vector<std::string> RangeHttpServer::RequestLog() const {
  std::vector<std::string> lines;
  std::ifstream in(log_path_);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace weightpath::agent::testing
