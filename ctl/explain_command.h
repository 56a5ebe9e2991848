// weightpathctl explain DEVICE_ID | --profile FILE: why the server decides
// what it decides for a device (ExplainDecision).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/command_line.h"
#include "ctl/command.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::ctl {

int RunExplainCommand(const std::vector<std::string>& args, CommandIo io);

// The ExplainDecision request for a hardware profile JSON file and the
// --labels, --priority and --model flags present in `arguments` (speed
// when no --priority), as `explain --profile` and `paths` send it.
// INVALID_ARGUMENT naming the file or the flag.
absl::StatusOr<v1::ExplainDecisionRequest> ExplainProfileRequest(const std::string& profile_path,
                                                                 const ParsedArguments& arguments);

// "speed", "fidelity"; "unspecified" otherwise.
std::string PriorityWord(v1::Priority priority);
// "policy", "fleet", "none", "unavailable (...)".
std::string VerificationSourceWord(v1::Verification::Source source);

}  // namespace weightpath::ctl
