// What the audit trail keeps of one FleetAdmin call (AuditEvent in
// proto/weightpath/v1/fleet.proto). Every text field is one bounded line:
// the request and the error message carry the caller's words (a rollout id,
// a reason), so control characters are written as \xNN and each field is
// cut to its cap, marked with how much was left out.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace weightpath::server {

inline constexpr size_t kAuditFieldMaxBytes = 256;     // identity, target
inline constexpr size_t kAuditSummaryMaxBytes = 1024;  // request_summary
inline constexpr size_t kAuditMessageMaxBytes = 1024;  // message
// A string field inside the summary: long ones are cut to this first, so
// one long field (a rollout's description) does not hide the others.
inline constexpr size_t kAuditSummaryStringMaxBytes = 128;

// `text` with control characters escaped, cut at `max_bytes` (on a UTF-8
// character boundary) with " ...(+N bytes)" appended when it was longer.
std::string AuditText(absl::string_view text, size_t max_bytes);

// What the call is about, read from the request whatever its type: its
// string field `id` (RolloutControlRequest, DeleteRolloutRequest), else the
// `id` of its message field `rollout` (Create/UpdateRolloutRequest), else its
// `device_id`; "" when it has none of them.
std::string AuditTarget(const google::protobuf::Message& request);

// The request in protobuf text format on one line, bounded as above.
std::string AuditRequestSummary(const google::protobuf::Message& request);

}  // namespace weightpath::server
