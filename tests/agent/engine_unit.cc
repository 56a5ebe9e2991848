#include "tests/agent/engine_unit.h"

#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/agent/temp_dir.h"
#include "tests/support/subprocess.h"

namespace weightpath::agent::testing {
namespace {

EngineLaunch ToLaunch(const ::weightpath::testing::ProcessResult& result) {
  EngineLaunch launch;
  launch.exit_code = result.exit_code;
  launch.err = result.err;
  // The stand-in prints "<arg>" per argument: "<a><b c>" -> {"a", "b c"}.
  absl::string_view out = result.out;
  if (absl::ConsumePrefix(&out, "<") && absl::ConsumeSuffix(&out, ">")) {
    launch.argv = absl::StrSplit(out, "><");
  }
  return launch;
}

// libsystemd-shared-NNN.so where Debian and others install it.
std::string FindLibsystemdShared() {
  for (const char* pattern :
       {"/usr/lib/*/systemd/libsystemd-shared-*.so", "/usr/lib/systemd/libsystemd-shared-*.so",
        "/lib/systemd/libsystemd-shared-*.so"}) {
    glob_t found{};
    const bool any = ::glob(pattern, 0, nullptr, &found) == 0 && found.gl_pathc > 0;
    std::string path = any ? found.gl_pathv[0] : "";
    ::globfree(&found);
    if (any) return path;
  }
  return "";
}

}  // namespace

std::string UnitExecStartScript(const std::string& engine) {
  return absl::StrCat("eval \"exec ", engine, " serve $WEIGHTPATH_ENGINE_ARGS\"");
}

std::string WriteFakeEngine(const std::string& dir) {
  const std::string path = dir + "/fake-vllm";
  WriteTextFile(path, "#!/bin/sh\n[ \"$1\" = serve ] || exit 9\nshift\nprintf '<%s>' \"$@\"\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

EngineLaunch LaunchWithShell(const std::string& env_file, const std::string& engine) {
  return ToLaunch(::weightpath::testing::RunProcess(
      {"/bin/sh", "-c", absl::StrCat(". \"$1\" && ", UnitExecStartScript(engine)), "sh", env_file},
      {}, absl::Seconds(30)));
}

absl::StatusOr<std::map<std::string, std::string>> ReadLikeSystemd(const std::string& env_file) {
  const std::string library = FindLibsystemdShared();
  if (library.empty()) return absl::UnimplementedError("libsystemd-shared is not installed");
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnimplementedError(absl::StrCat("cannot load ", library, ": ", ::dlerror()));
  }
  // src/basic/env-file.h: int load_env_file(FILE *f, const char *fname, char ***ret);
  // exec_context_load_environment() in src/core/execute.c reads every
  // EnvironmentFile= with it.
  using LoadEnvFile = int (*)(FILE*, const char*, char***);
  auto load = reinterpret_cast<LoadEnvFile>(::dlsym(handle, "load_env_file"));
  if (load == nullptr) {
    return absl::UnimplementedError(absl::StrCat(library, " has no load_env_file"));
  }
  char** assignments = nullptr;
  const int result = load(nullptr, env_file.c_str(), &assignments);
  if (result < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("systemd refuses ", env_file, ": error ", -result));
  }
  std::map<std::string, std::string> environment;
  for (char** entry = assignments; entry != nullptr && *entry != nullptr; ++entry) {
    const std::pair<std::string, std::string> pair =
        absl::StrSplit(*entry, absl::MaxSplits('=', 1));
    environment[pair.first] = pair.second;
    std::free(*entry);
  }
  std::free(assignments);
  // The library stays loaded: it registers destructors with the process.
  return environment;
}

EngineLaunch LaunchWithEnvironment(const std::map<std::string, std::string>& environment,
                                   const std::string& engine) {
  return ToLaunch(::weightpath::testing::RunProcess({"/bin/sh", "-c", UnitExecStartScript(engine)},
                                                    environment, absl::Seconds(30)));
}

}  // namespace weightpath::agent::testing
