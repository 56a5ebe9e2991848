// What a weightpathctl subcommand is: a name, a one-line summary, and a
// function from its arguments to an exit code. Each subcommand lives in its
// own file and is listed once in command_table.cc.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/command_line.h"

namespace weightpath::ctl {

// Exit codes every subcommand uses.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the input was fine; something else failed
inline constexpr int kExitUsage = kExitUsageError;  // bad flags or bad input files

struct CommandIo {
  std::ostream& out;
  std::ostream& err;
};

using CommandFunction = int (*)(const std::vector<std::string>& args, CommandIo io);

struct Command {
  std::string_view name;
  std::string_view summary;
  CommandFunction run;
};

}  // namespace weightpath::ctl
