// weightpath-agent: runs on every device, before its inference engine.
//   weightpath-agent probe [--root DIR] [-o json|text]
//   weightpath-agent boot --config FILE [--root DIR]
//   weightpath-agent run --config FILE [--root DIR] [--once]
//   weightpath-agent outcome --config FILE --outcome ... [--tasks-* N]
//   weightpath-agent report --file FILE [--config FILE]
//   weightpath-agent trust status [--config FILE] [-o json]
//   weightpath-agent cache [list|gc] [--config FILE] [-o json]
//   weightpath-agent serve-cache --listen ADDR --cache-dir DIR --upstream URL...
#include <csignal>
#include <cstdio>
#include <cstring>

#include "agent/cli/boot_command.h"
#include "agent/cli/cache_command.h"
#include "agent/flow/boot_flow.h"
#include "agent/cli/outcome_command.h"
#include "agent/cli/run_command.h"
#include "agent/cli/serve_cache_command.h"
#include "agent/probe/probe_command.h"
#include "agent/cli/report_command.h"
#include "agent/cli/trust_status_command.h"

namespace {

void PrintUsage(FILE* stream) {
  std::fputs(
      "usage: weightpath-agent <command> [options]\n"
      "  probe [--root DIR] [-o json|text]   print this device's hardware profile\n"
      "  boot --config FILE [--root DIR]     resolve, fetch and hand over the weight path\n"
      "  run --config FILE [--once]          re-resolve periodically, apply changes, report\n"
      "  outcome --config FILE --outcome X   report engine_started/engine_start_failed/tasks\n"
      "  report --file FILE [--config FILE]  send one measurement the engine benchmark wrote\n"
      "  trust status [--config FILE]        what this device trusts of the signed metadata\n"
      "  cache [list|gc] [--config FILE]     what the build cache holds; evict by hand\n"
      "  serve-cache --listen A --cache-dir D --upstream URL  a site cache of blobs\n"
      "Run `weightpath-agent <command> --help` for a command's options and exit codes.\n",
      stream);
}

}  // namespace

int main(int argc, char** argv) {
  // A write past the file size limit (a container's `ulimit -f`, systemd's
  // LimitFSIZE=) would kill the agent with SIGXFSZ mid-download, leaving no
  // decision and no report. Ignored, the write fails with EFBIG, which the
  // download names and cleans up after like a full volume.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    PrintUsage(stderr);
    return weightpath::agent::kExitUsage;
  }
  const char* command = argv[1];
  if (std::strcmp(command, "probe") == 0) return weightpath::probe::RunProbeCommand(argc - 1, argv + 1);
  if (std::strcmp(command, "boot") == 0) return weightpath::agent::RunBootCommand(argc - 1, argv + 1);
  if (std::strcmp(command, "run") == 0) return weightpath::agent::RunRunCommand(argc - 1, argv + 1);
  if (std::strcmp(command, "outcome") == 0) {
    return weightpath::agent::RunOutcomeCommand(argc - 1, argv + 1);
  }
  if (std::strcmp(command, "report") == 0) {
    return weightpath::agent::RunReportCommand(argc - 1, argv + 1);
  }
  if (std::strcmp(command, "trust") == 0) {
    return weightpath::agent::RunTrustCommand(argc - 1, argv + 1);
  }
  if (std::strcmp(command, "cache") == 0) {
    return weightpath::agent::RunCacheCommand(argc - 1, argv + 1);
  }
  if (std::strcmp(command, "serve-cache") == 0) {
    return weightpath::agent::RunServeCacheCommand(argc - 1, argv + 1);
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
