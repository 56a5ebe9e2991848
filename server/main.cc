// weightpath-server: with no arguments it serves the bundled default policy
// and the embedded demo catalog on loopback ports.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "server/observability/logging.h"
#include "server/server.h"
#include "server/config/server_config.h"
#include "spdlog/spdlog.h"

namespace {

// Every connection to the gRPC port is a descriptor, and past the limit less
// a reserve the port closes new connections at once (server/grpc_listener.h).
// The soft limit is often 1024 while the hard limit allows far more (systemd:
// 1024 and 524288; the packaged unit sets LimitNOFILE=65536 for both), so the
// server takes all it is allowed; --max_connections is the cap to choose.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("descriptor limit stays at {}: setrlimit: {}", before, std::strerror(errno));
    return;
  }
  spdlog::info("descriptor limit raised from {} to the hard limit {}", before, limit.rlim_cur);
}

}  // namespace

int main(int argc, char** argv) {
  using weightpath::server::WeightPathServer;
  const std::set<std::string> on_command_line =
      weightpath::server::FlagNamesOnCommandLine(argc, argv);
  // abseil lists under --help only flags defined in a file named after the
  // program; the server's flags live in server/, so name that instead.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "server/");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Serves ResolveWeightPath over gRPC. With no flags: bundled policy, demo catalog, "
      "127.0.0.1:50051 and metrics on 127.0.0.1:9464.");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<weightpath::server::ServerConfig> config =
      weightpath::server::ServerConfigFromFlags(on_command_line);
  if (!config.ok()) {
    std::fprintf(stderr, "weightpath-server: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  weightpath::server::ConfigureLogging(config->log_format, config->log_level);
  // Debian's abseil keeps Mutex deadlock detection on, which walks a lock
  // graph on every Lock() of the per-request metrics lookup; the server's
  // few locks are never nested, so it buys nothing here.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // A file size limit (RLIMIT_FSIZE: systemd's LimitFSIZE=, a container's
  // ulimit -f) reached by the SQLite store or the log would otherwise end
  // the process with SIGXFSZ. Ignored, the write fails with EFBIG instead:
  // the store answers UNAVAILABLE and resolves go on.
  std::signal(SIGXFSZ, SIG_IGN);
  RaiseDescriptorLimit();

  // Blocked before gRPC starts its threads, so every thread inherits the mask
  // and the signals are taken only by the sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  absl::StatusOr<std::unique_ptr<WeightPathServer>> server = WeightPathServer::Start(*config);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", std::string(server.status().message()));
    return 1;
  }
  // One machine-readable line for scripts and tests that pass port 0.
  std::printf("listening grpc=%s metrics=%s\n", (*server)->grpc_address().c_str(),
              (*server)->metrics_address().c_str());
  std::fflush(stdout);

  for (;;) {
    int signal_number = 0;
    if (sigwait(&signals, &signal_number) != 0) continue;
    if (signal_number == SIGHUP) {
      spdlog::info("SIGHUP: reloading policy and catalog");
      (*server)->RequestReload();
      continue;
    }
    spdlog::info("{}: shutting down, in-flight calls get {}",
                 (*server)->listener_deaf() ? "gRPC listener deaf"
                 : signal_number == SIGTERM ? "SIGTERM"
                                            : "SIGINT",
                 absl::FormatDuration(config->shutdown_grace));
    break;
  }
  (*server)->Shutdown(config->shutdown_grace);
  if ((*server)->listener_deaf()) {
    spdlog::error("stopped: the gRPC listener had stopped accepting connections (exit 1)");
    return 1;
  }
  spdlog::info("stopped");
  return 0;
}
