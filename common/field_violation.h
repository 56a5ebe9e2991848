// Which request field a refusal is about, carried on the absl::Status
// itself, so that it survives every layer between the validation that names
// it and the gRPC boundary, where common/grpc_status.h sends it as a
// google.rpc.BadRequest field violation any client can read (and reads it
// back into the same payload on the client side). The message text stays
// what it always was; the field is in addition to it, not instead.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace weightpath {

namespace field_violation_internal {
inline constexpr char kPayloadUrl[] = "type.weightpath/field-violation";
}  // namespace field_violation_internal

// `status` (not OK) naming `field`, a path in the request as protobuf spells
// it ("profile.arch", "rollout.stages[1].percent").
inline absl::Status WithViolatedField(absl::Status status, absl::string_view field) {
  status.SetPayload(field_violation_internal::kPayloadUrl, absl::Cord(field));
  return status;
}

// INVALID_ARGUMENT with `message` as its whole text, naming `field`.
inline absl::Status InvalidArgumentForField(absl::string_view field, absl::string_view message) {
  return WithViolatedField(absl::InvalidArgumentError(message), field);
}

// The field `status` names; nullopt when it names none.
inline std::optional<std::string> ViolatedField(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  const auto payload = status.GetPayload(field_violation_internal::kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

}  // namespace weightpath
