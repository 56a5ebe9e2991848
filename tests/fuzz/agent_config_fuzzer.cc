// The agent's boot config (agent.yaml): YAML text in, an AgentConfig or a
// refusal naming the line. An accepted config is what the boot then does
// arithmetic with, so its durations are checked to be usable: positive, the
// base retry delay within the maximum, and a backoff that stays within
// bounds for any number of attempts.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/config/agent_config.h"
#include "agent/net/retry_policy.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// A device root holding only /etc/machine-id, for configs without device_id.
const std::string& FakeRoot() {
  static const std::string* const root = [] {
    const char* dir = std::getenv("TMPDIR");
    auto* path = new std::string(absl::StrCat(dir != nullptr && *dir != '\0' ? dir : "/tmp",
                                              "/weightpath-fuzz-agent-root-", getpid()));
    std::filesystem::create_directories(*path + "/etc");
    std::ofstream(*path + "/etc/machine-id") << "0123456789abcdef0123456789abcdef\n";
    return path;
  }();
  return *root;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  FakeRoot();
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(FakeRoot(), ignored);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view text = fuzz::Text(data, size);
  absl::StatusOr<agent::AgentConfig> config = agent::ParseAgentConfig(
      absl::string_view(text.data(), text.size()), "fuzz-agent.yaml", FakeRoot());
  if (!config.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(config.status()), config.status().ToString());
    return 0;
  }
  FUZZ_CHECK(!config->server.empty(), "accepted without a server");
  FUZZ_CHECK(!config->device_id.empty(), "accepted without a device id");
  for (absl::Duration duration : {config->budget, config->call_timeout, config->retry_base_delay,
                                  config->retry_max_delay, config->resolve_interval,
                                  config->min_resolve_interval, config->max_resolve_interval}) {
    FUZZ_CHECK(duration > absl::ZeroDuration(), "a duration that is not positive");
  }
  FUZZ_CHECK(config->retry_base_delay <= config->retry_max_delay, "base delay above the maximum");
  FUZZ_CHECK(config->min_resolve_interval <= config->resolve_interval &&
                 config->resolve_interval <= config->max_resolve_interval,
             "resolve_interval outside min_resolve_interval..max_resolve_interval");
  agent::RetryOptions options;
  options.call_timeout = config->call_timeout;
  options.base_delay = config->retry_base_delay;
  options.max_delay = config->retry_max_delay;
  absl::Duration previous = absl::ZeroDuration();
  for (int attempt = 0; attempt < 80; ++attempt) {
    const absl::Duration ceiling = agent::BackoffCeiling(options, attempt);
    FUZZ_CHECK(ceiling >= previous && ceiling <= options.max_delay,
               absl::StrCat("backoff ceiling ", absl::FormatDuration(ceiling), " at attempt ",
                            attempt));
    previous = ceiling;
  }
  return 0;
}
