// Runs a program to completion and captures what it printed, for tests that
// drive real binaries.
#pragma once

#include <string>
#include <vector>

namespace weightpath::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when it did not exit normally
  std::string out;
  std::string err;
};

ProcessResult RunProcess(const std::vector<std::string>& argv);

}  // namespace weightpath::testing
