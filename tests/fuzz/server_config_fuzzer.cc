// weightpath-server --config FILE: the YAML file of flag values, read through
// the same bounded file read and flag parsers the server uses. The text is
// written to a file because the file read (one descriptor, a size bound) is
// part of what is under test.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "server/config/server_config.h"
#include "tests/fuzz/fuzz_support.h"

ABSL_DECLARE_FLAG(std::string, config);

namespace {

const std::string& ConfigPath() {
  static const std::string* const path = [] {
    const char* dir = std::getenv("TMPDIR");
    return new std::string(absl::StrCat(dir != nullptr && *dir != '\0' ? dir : "/tmp",
                                        "/weightpath-fuzz-server-config-", getpid(), ".yaml"));
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  {
    std::ofstream out(ConfigPath(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    FUZZ_CHECK(out.good(), "cannot write the config file");
  }
  // Every input starts from the flags' defaults.
  absl::FlagSaver restore;
  absl::SetFlag(&FLAGS_config, ConfigPath());
  // "listen" stands for a flag given on the command line: the file's value
  // for it must be skipped, not applied.
  const std::set<std::string> on_command_line = {"listen"};
  absl::StatusOr<server::ServerConfig> config = server::ServerConfigFromFlags(on_command_line);
  if (!config.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(config.status()), config.status().ToString());
    return 0;
  }
  FUZZ_CHECK(server::ValidateServerConfig(*config).ok(), "accepted config fails validation");
  FUZZ_CHECK(config->listen == "127.0.0.1:50051", "the file overrode a command-line flag");
  return 0;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::atexit([] { unlink(ConfigPath().c_str()); });
  return 0;
}
