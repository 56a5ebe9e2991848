// The last decision the server made whose artifact verified, kept in the
// state directory so a later boot without a server can repeat it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "agent/decision/decision_record.h"

namespace weightpath::agent {

std::string LastGoodPath(const std::string& state_dir);

// Replaces the stored decision atomically; refuses (INVALID_ARGUMENT) one
// that fails ValidateForEngine.
absl::Status SaveLastGood(const DecisionRecord& record, const std::string& state_dir);

// NOT_FOUND on a device with no history; INVALID_ARGUMENT when the file is
// unreadable as a decision or holds one that cannot be handed to the engine
// (see ReadDecisionFile).
absl::StatusOr<DecisionRecord> LoadLastGood(const std::string& state_dir);

}  // namespace weightpath::agent
