#include "tests/ctl/process_runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace weightpath::testing {
namespace {

std::string ReadAndRemove(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path.c_str());
  return text.str();
}

// A file in the test's temp dir; mkstemp keeps parallel tests apart.
std::string MakeTempFile(int* fd) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/ctl_output_XXXXXX";
  *fd = mkstemp(pattern.data());
  return pattern;
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv) {
  ProcessResult result;
  int out_fd = -1;
  int err_fd = -1;
  const std::string out_path = MakeTempFile(&out_fd);
  const std::string err_path = MakeTempFile(&err_fd);
  if (out_fd < 0 || err_fd < 0) return result;

  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_fd);
  close(err_fd);
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  result.out = ReadAndRemove(out_path);
  result.err = ReadAndRemove(err_path);
  return result;
}

}  // namespace weightpath::testing
