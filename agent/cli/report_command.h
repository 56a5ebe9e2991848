// weightpath-agent report: sends one measurement an engine benchmark wrote.
#pragma once

#include <string>

namespace weightpath::agent {

std::string ReportUsage();

// argv[0] is "report". Exit codes: 0 recorded (or recognised as already
// recorded), 1 the server refused or could not be reached within the
// budget, 2 bad command line or unusable input file / config.
int RunReportCommand(int argc, char** argv);

}  // namespace weightpath::agent
