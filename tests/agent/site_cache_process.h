// The real `weightpath-agent serve-cache` as a test fixture: started on a
// loopback port the kernel picks, its stderr (the log) in a file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/support/subprocess.h"

namespace weightpath::agent::testing {

class SiteCacheProcess {
 public:
  static absl::StatusOr<std::unique_ptr<SiteCacheProcess>> Start(
      const std::string& agent_binary, const std::string& cache_dir,
      const std::vector<std::string>& upstreams, const std::string& stderr_path,
      const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {agent_binary, "serve-cache", "--listen", "127.0.0.1:0",
                                     "--cache-dir", cache_dir};
    for (const std::string& upstream : upstreams) {
      argv.push_back("--upstream");
      argv.push_back(upstream);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    ::weightpath::testing::SpawnOptions options;
    options.pipe_stdout = true;
    options.stderr_path = stderr_path;
    ASSIGN_OR_RETURN(std::unique_ptr<::weightpath::testing::Subprocess> process,
                     ::weightpath::testing::Subprocess::Start(argv, options));
    ASSIGN_OR_RETURN(std::string line, process->WaitForLine("LISTENING ", absl::Seconds(30)));
    int port = 0;
    if (!absl::SimpleAtoi(line.substr(10), &port)) {
      return absl::InternalError(absl::StrCat("unexpected startup line: ", line));
    }
    return std::unique_ptr<SiteCacheProcess>(new SiteCacheProcess(std::move(process), port));
  }

  std::string BaseUrl() const { return absl::StrCat("http://127.0.0.1:", port_); }
  int port() const { return port_; }
  pid_t pid() const { return process_->pid(); }
  void Stop() { process_->Terminate(absl::Seconds(10)); }

 private:
  SiteCacheProcess(std::unique_ptr<::weightpath::testing::Subprocess> process, int port)
      : process_(std::move(process)), port_(port) {}
  std::unique_ptr<::weightpath::testing::Subprocess> process_;
  int port_;
};

}  // namespace weightpath::agent::testing
