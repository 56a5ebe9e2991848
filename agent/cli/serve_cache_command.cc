#include "agent/cli/serve_cache_command.h"

#include <signal.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/cli/command_options.h"
#include "agent/sitecache/site_cache.h"

namespace weightpath::agent {
namespace {

constexpr int kExitServed = 0;
constexpr int kExitUnusable = 1;

}  // namespace

std::string ServeCacheUsage() {
  return "usage: weightpath-agent serve-cache --listen HOST:PORT --cache-dir DIR --upstream URL "
         "[--upstream URL...] [--max-bytes N] [--max-connections N]\n"
         "  Serves GET/HEAD /blobs/sha256/<64 hex> (Range) from DIR (the agent's cache_dir "
         "layout),\n"
         "  fetching a missing blob from the upstreams in order and verifying its SHA-256 "
         "before\n"
         "  serving it; GET /metrics; every other path 404. Runs until SIGTERM.\n"
         "  --max-bytes N       evict least recently served blobs above N bytes (0: no cap)\n"
         "  --max-connections N at most N requests served at once, more answered 503\n"
         "                      (default 256)\n"
         "Exit 0 stopped by a signal; 1 cannot listen or use DIR; 2 bad command line.\n";
}

int RunServeCacheCommand(int argc, char** argv) {
  const absl::StatusOr<CommandOptions> options = ParseCommandOptions(
      argc, argv, {"--listen", "--cache-dir", "--max-bytes", "--max-connections"}, {},
      {"--upstream"});
  if (!options.ok()) return UsageError("serve-cache", options.status().message(), ServeCacheUsage());
  if (options->help()) {
    std::fputs(ServeCacheUsage().c_str(), stdout);
    return kExitServed;
  }
  SiteCacheOptions site;
  for (const char* required : {"--listen", "--cache-dir"}) {
    if (!options->Has(required)) {
      return UsageError("serve-cache", absl::StrCat(required, " is required"), ServeCacheUsage());
    }
  }
  site.listen = *options->Value("--listen");
  site.cache_dir = *options->Value("--cache-dir");
  site.upstreams = options->Values("--upstream");
  if (site.upstreams.empty()) {
    return UsageError("serve-cache", "--upstream is required (one or more)", ServeCacheUsage());
  }
  if (std::optional<std::string> max_bytes = options->Value("--max-bytes")) {
    if (!absl::SimpleAtoi(*max_bytes, &site.max_bytes)) {
      return UsageError("serve-cache", absl::StrCat("--max-bytes: '", *max_bytes, "' is not a number"),
                        ServeCacheUsage());
    }
  }
  if (std::optional<std::string> connections = options->Value("--max-connections")) {
    if (!absl::SimpleAtoi(*connections, &site.max_connections) || site.max_connections < 1 ||
        site.max_connections > 4096) {
      return UsageError("serve-cache",
                        absl::StrCat("--max-connections: '", *connections, "' is not 1 to 4096"),
                        ServeCacheUsage());
    }
  }
  // The signals are taken by sigwait below, in this thread only: blocked
  // before any serving thread exists, so they inherit the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  absl::StatusOr<std::unique_ptr<SiteCache>> cache = StartSiteCache(site);
  if (!cache.ok()) {
    if (absl::IsInvalidArgument(cache.status())) {
      return UsageError("serve-cache", cache.status().message(), ServeCacheUsage());
    }
    std::fprintf(stderr, "weightpath-agent serve-cache: %s\n", cache.status().ToString().c_str());
    return kExitUnusable;
  }
  std::printf("LISTENING %d\n", (*cache)->port());
  std::fflush(stdout);
  int received = 0;
  sigwait(&stop, &received);
  (*cache)->Stop();
  return kExitServed;
}

}  // namespace weightpath::agent
