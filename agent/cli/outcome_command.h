// `weightpath-agent outcome --config FILE --outcome engine_started|
// engine_start_failed|tasks [--tasks-completed N --tasks-undone N
// --tasks-failed N] [--detail TEXT]`: one ReportOutcome about the decision
// in decision_file, for the engine's unit (ExecStartPost) and the engine
// harness, which know things the agent cannot see.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/config/agent_config.h"
#include "agent/cli/command_options.h"
#include "agent/decision/decision_record.h"
#include "agent/engine/engine_readiness.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

struct OutcomeArguments {
  std::string config_path;
  std::string root = "/";
  v1::Outcome outcome = v1::OUTCOME_UNSPECIFIED;
  uint32_t tasks_completed = 0;
  uint32_t tasks_undone = 0;
  uint32_t tasks_failed = 0;
  std::string detail;
  // --wait-ready URL [--ready-timeout D]: engine_started is reported only
  // once URL answers 200; engine_start_failed when it does not in time.
  std::optional<ReadinessWait> wait_ready;
};

// INVALID_ARGUMENT naming the flag: missing --config or --outcome, an
// outcome outside the three, a count that is not a number, counts without
// `tasks` or `tasks` without any count.
absl::StatusOr<OutcomeArguments> ParseOutcomeArguments(const CommandOptions& options);

// The report about `decision` (path, artifact, policy version and rollout
// attribution of the build the engine runs), stamped `now`.
v1::ReportOutcomeRequest BuildOutcomeReport(const AgentConfig& config,
                                            const OutcomeArguments& arguments,
                                            const DecisionRecord& decision, absl::Time now);

std::string OutcomeUsage();

// argv as the agent's dispatcher passes it: argv[0] is "outcome".
// Exit 0 when the server accepted it (or had it already), 1 when it could
// not be sent or was refused, 2 for a bad command line.
int RunOutcomeCommand(int argc, char** argv);

}  // namespace weightpath::agent
