#include "agent/probe/shared_library.h"

#include <dlfcn.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weightpath::probe {

absl::StatusOr<SharedLibrary> SharedLibrary::Open(const std::string& name_or_path) {
  // RTLD_LOCAL keeps the driver's symbols from clashing with ours.
  void* handle = dlopen(name_or_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::NotFoundError(
        absl::StrCat("cannot load ", name_or_path, ": ", error ? error : "unknown dlopen error"));
  }
  return SharedLibrary(handle, name_or_path);
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), name_(std::move(other.name_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<void*> SharedLibrary::Lookup(const char* symbol) const {
  dlerror();  // clear a stale error so a NULL-valued symbol is told apart
  void* address = dlsym(handle_, symbol);
  if (address == nullptr) {
    return absl::NotFoundError(absl::StrCat(name_, " does not export ", symbol));
  }
  return address;
}

}  // namespace weightpath::probe
