// weightpath-agent: runs on every device, before its inference engine.
//   weightpath-agent probe [--root DIR] [-o json|text]
//   weightpath-agent boot --config FILE [--root DIR]
//   weightpath-agent report --file FILE [--config FILE]
#include <cstdio>
#include <cstring>

#include "agent/boot_command.h"
#include "agent/boot_flow.h"
#include "agent/probe/probe_command.h"
#include "agent/report_command.h"

namespace {

void PrintUsage(FILE* stream) {
  std::fputs(
      "usage: weightpath-agent <command> [options]\n"
      "  probe [--root DIR] [-o json|text]   print this device's hardware profile\n"
      "  boot --config FILE [--root DIR]     resolve, fetch and hand over the weight path\n"
      "  report --file FILE [--config FILE]  send one measurement the engine benchmark wrote\n"
      "Run `weightpath-agent <command> --help` for a command's options and exit codes.\n",
      stream);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return weightpath::agent::kExitUsage;
  }
  const char* command = argv[1];
  if (std::strcmp(command, "probe") == 0) return weightpath::probe::RunProbeCommand(argc - 1, argv + 1);
  if (std::strcmp(command, "boot") == 0) return weightpath::agent::RunBootCommand(argc - 1, argv + 1);
  if (std::strcmp(command, "report") == 0) {
    return weightpath::agent::RunReportCommand(argc - 1, argv + 1);
  }
  if (std::strcmp(command, "--help") == 0 || std::strcmp(command, "-h") == 0 ||
      std::strcmp(command, "help") == 0) {
    PrintUsage(stdout);
    return 0;
  }
  std::fprintf(stderr, "weightpath-agent: unknown command '%s'\n", command);
  PrintUsage(stderr);
  return weightpath::agent::kExitUsage;
}
