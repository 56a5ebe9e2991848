// Rollout files through the real weightpathctl, before any server is asked:
// an enum in the spellings operators use elsewhere (the agent config's
// `priority: fidelity`, Kubernetes' `NotIn`) is taken, and a value it cannot
// take is named at its file:line with the values it can.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace weightpath::ctl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

class CtlRolloutFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ctl_rollout_file_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `weightpathctl apply -f FILE` against a port nothing listens on: a file
  // that parses gets as far as the connection (exit 1, UNAVAILABLE).
  ProcessResult Apply(const std::string& yaml) {
    const std::string file = dir_ + "/rollout.yaml";
    std::ofstream(file, std::ios::trunc) << yaml;
    return RunProcess({WEIGHTPATHCTL_PATH, "apply", "-f", file, "--server", "127.0.0.1:1",
                       "--timeout", "2"});
  }

  std::string dir_;
};

TEST_F(CtlRolloutFileTest, TheAgentConfigsPrioritySpellingsAreTakenAndATypoIsNamedAtItsLine) {
  for (const char* priority : {"fidelity", "FIDELITY", "PRIORITY_FIDELITY"}) {
    ProcessResult taken = Apply(std::string("id: agentic\n"
                                            "selector:\n"
                                            "  match_expressions: [{key: tier, operator: NotIn, values: [lab]}]\n"
                                            "action:\n"
                                            "  set_priority: ") +
                                priority + "\nstages: [{percent: 100, report_timeout_seconds: 60}]\n");
    EXPECT_EQ(taken.exit_code, 1) << priority << ": " << taken.err;
    EXPECT_THAT(taken.err, HasSubstr("UNAVAILABLE")) << priority;
  }
  ProcessResult typo = Apply(
      "id: agentic\nselector: {all: true}\naction:\n  set_priority: FIDELTY\n"
      "stages: [{percent: 100, report_timeout_seconds: 60}]\n");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err,
              AllOf(HasSubstr("rollout.yaml:4:17: rollout.action.set_priority: 'FIDELTY' is not a "
                              "Priority; accepted: speed, fidelity (any case, or PRIORITY_SPEED, "
                              "PRIORITY_FIDELITY)"),
                    Not(HasSubstr("type.googleapis.com"))));
}

}  // namespace
}  // namespace weightpath::ctl
