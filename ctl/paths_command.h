// weightpathctl paths --profile FILE: every weight path of the server's
// policy for one device, chosen, compatible or incompatible, each with its
// verification evidence (ExplainDecisionResponse.paths), and NVIDIA NIM's
// three groups for the model: runnable, low on memory, incompatible.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ctl/command.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::ctl {

int RunPathsCommand(const std::vector<std::string>& args, CommandIo io);

// "runnable", "low on memory", "incompatible" or "not judged" (a server
// that predates the field).
std::string FitWord(v1::PathCandidate::Fit fit);

// Engine kwargs as the agent hands them to the engine, `name=value`
// sorted by name; "none" when empty.
std::string EngineArgsWords(const google::protobuf::Struct& kwargs);

// The paths in NIM's groups, one line each: the memory per GPU needed and
// the context that fits, or the failing requirement. `indent` before each
// line; shared by `paths` and `explain`.
void WriteFitGroups(const v1::ExplainDecisionResponse& response, std::string_view indent,
                    std::ostream& out);

}  // namespace weightpath::ctl
