#include "agent/net/curl_library.h"

#include <dlfcn.h>

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weightpath::agent {
namespace {

template <typename Function>
bool Resolve(void* library, const char* symbol, Function*& target, std::string& missing) {
  target = reinterpret_cast<Function*>(::dlsym(library, symbol));
  if (target == nullptr && missing.empty()) missing = symbol;
  return target != nullptr;
}

std::atomic<bool> load_attempted{false};

absl::StatusOr<const CurlApi*> LoadCurlUncached() {
  load_attempted.store(true);
  // Never unloaded: libcurl keeps global state (TLS backends) that must
  // outlive every handle, and the process ends soon after a boot anyway.
  void* library = ::dlopen(kCurlLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = ::dlerror();
    return absl::FailedPreconditionError(absl::StrCat("cannot load ", kCurlLibraryName,
                                                      " for downloads: ",
                                                      reason != nullptr ? reason : "unknown"));
  }
  static CurlApi api;
  CURLcode (*global_init)(long flags) = nullptr;
  std::string missing;
  Resolve(library, "curl_global_init", global_init, missing);
  Resolve(library, "curl_easy_init", api.easy_init, missing);
  Resolve(library, "curl_easy_setopt", api.easy_setopt, missing);
  Resolve(library, "curl_easy_perform", api.easy_perform, missing);
  Resolve(library, "curl_easy_getinfo", api.easy_getinfo, missing);
  Resolve(library, "curl_easy_cleanup", api.easy_cleanup, missing);
  Resolve(library, "curl_easy_strerror", api.easy_strerror, missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kCurlLibraryName, " lacks the symbol ", missing));
  }
  if (const CURLcode code = global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK) {
    return absl::FailedPreconditionError(absl::StrCat(kCurlLibraryName,
                                                      ": curl_global_init failed: ",
                                                      api.easy_strerror(code)));
  }
  return &api;
}

}  // namespace

absl::StatusOr<const CurlApi*> LoadCurl() {
  // Function-local static: thread-safe, and tried only once per process.
  static const absl::StatusOr<const CurlApi*> loaded = LoadCurlUncached();
  return loaded;
}

absl::Status CurlLoadFailure() {
  if (!load_attempted.load()) return absl::OkStatus();
  return LoadCurl().status();
}

}  // namespace weightpath::agent
