// A dlopen'ed library, closed when it goes out of scope. The GPU driver
// libraries are looked up at run time so one agent binary runs on machines
// with and without NVIDIA's driver.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace weightpath::probe {

class SharedLibrary {
 public:
  // NOT_FOUND, with dlerror()'s words, when the library cannot be loaded.
  static absl::StatusOr<SharedLibrary> Open(const std::string& name_or_path);

  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  // NOT_FOUND naming the symbol and the library when it is not exported.
  template <typename FunctionPointer>
  absl::StatusOr<FunctionPointer> Function(const char* symbol) const {
    auto address = Lookup(symbol);
    if (!address.ok()) return address.status();
    return reinterpret_cast<FunctionPointer>(*address);
  }

  const std::string& name() const { return name_; }

 private:
  SharedLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  absl::StatusOr<void*> Lookup(const char* symbol) const;

  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace weightpath::probe
