// Shared by the libFuzzer targets of tests/fuzz.
//
// A target turns a property it checks into a crash with FUZZ_CHECK, so that
// libFuzzer keeps the input and scripts/fuzz fails: "the fuzzer found
// something" is always a crash, a leak, a timeout or running out of memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace weightpath::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* condition,
                              const std::string& detail) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", file, line, condition,
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string_view Text(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A refusal must be one the caller is documented to handle: a reader of
// untrusted text answers INVALID_ARGUMENT, never INTERNAL, UNKNOWN or OK with
// garbage. An empty message would leave an operator nothing to go on.
inline bool IsCleanRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument && !status.message().empty();
}

}  // namespace weightpath::fuzz

#define FUZZ_CHECK(condition, detail)                                           \
  do {                                                                          \
    if (!(condition)) ::weightpath::fuzz::Fail(__FILE__, __LINE__, #condition, (detail)); \
  } while (false)
