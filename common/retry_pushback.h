// A server's "come back in N ms" (gRPC's grpc-retry-pushback-ms trailer,
// gRFC A6) carried on an absl::Status, so it travels with the refusal
// through every layer between the code that decides it and the code that
// acts on it: the server's handlers to the one place that finishes a call,
// the agent's clients to its retry policy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace weightpath {

// The trailing metadata key, as gRPC's own retry code reads it.
inline constexpr char kRetryPushbackHeader[] = "grpc-retry-pushback-ms";

namespace retry_pushback_internal {
inline constexpr char kPayloadUrl[] = "type.weightpath/retry-pushback-ms";
}  // namespace retry_pushback_internal

// The trailer's value as gRFC A6 reads it: a non-negative decimal count of
// milliseconds; anything else (negative, not a number) asks the client not
// to retry at all, given as absl::InfiniteDuration().
inline absl::Duration ParseRetryPushback(absl::string_view text) {
  int64_t ms = 0;
  if (!absl::SimpleAtoi(text, &ms) || ms < 0) return absl::InfiniteDuration();
  return absl::Milliseconds(ms);
}

// `status` (not OK) telling the caller to wait `wait` before trying again.
inline absl::Status WithRetryPushback(absl::Status status, absl::Duration wait) {
  const int64_t ms = wait == absl::InfiniteDuration() ? -1 : absl::ToInt64Milliseconds(wait);
  status.SetPayload(retry_pushback_internal::kPayloadUrl, absl::Cord(std::to_string(ms)));
  return status;
}

// The wait `status` carries (InfiniteDuration: do not retry); nullopt when
// it carries none.
inline std::optional<absl::Duration> RetryPushback(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  const auto payload = status.GetPayload(retry_pushback_internal::kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  return ParseRetryPushback(std::string(*payload));
}

}  // namespace weightpath
