// weightpathctl explain DEVICE_ID | --profile FILE: why the server decides
// what it decides for a device (ExplainDecision).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/command_line.h"
#include "ctl/command.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::ctl {

int RunExplainCommand(const std::vector<std::string>& args, CommandIo io);

// What `explain` and `paths` evaluate, given the same way to both: a
// registered DEVICE_ID (the first argument), evaluated on what it last sent,
// or --profile FILE with --labels, --priority and --model.
struct ExplainSubject {
  std::optional<std::string> device_id;
  std::vector<std::string> flags;  // the arguments after DEVICE_ID
};
ExplainSubject SplitExplainSubject(const std::vector<std::string>& args);
// The subject's flags (--profile, --labels, --priority, --model) and the views'.
const std::vector<FlagSpec>& ExplainSubjectFlags();

// The ExplainDecision request: the device id, or the hardware profile JSON
// file and the --labels, --priority and --model flags present in
// `arguments` (speed when no --priority). INVALID_ARGUMENT naming the file
// or the flag (a usage error: exit 2).
absl::StatusOr<v1::ExplainDecisionRequest> ExplainSubjectRequest(
    const std::optional<std::string>& device_id, const ParsedArguments& arguments);

// "device ID" or "profile FILE", as the views head their answer.
std::string ExplainSubjectWords(const std::optional<std::string>& device_id,
                                const ParsedArguments& arguments);

// "speed", "fidelity"; "unspecified" otherwise.
std::string PriorityWord(v1::Priority priority);
// "policy", "fleet", "none", "unavailable (...)".
std::string VerificationSourceWord(v1::Verification::Source source);

}  // namespace weightpath::ctl
