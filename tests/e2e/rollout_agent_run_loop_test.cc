// The agent's run loop with an injected clock and randomness, a scripted
// server and real shell scripts as apply/check commands (a script that
// fails for the new build is a real failure, not a mock).
#include <sys/stat.h>

#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/decision/decision_record.h"
#include "agent/flow/run_loop.h"
#include "agent/engine/run_shell.h"
#include "common/retry_pushback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/fake_clock.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weightpath::testing::StatusIs;
using testing::FakeClock;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteTextFile;

// Always draws the same point of the range, so the schedule is exact.
class FixedRandom : public RandomSource {
 public:
  explicit FixedRandom(double fraction) : fraction_(fraction) {}
  double Uniform(double low, double high) override { return low + (high - low) * fraction_; }

 private:
  double fraction_;
};

v1::ResolveWeightPathResponse Decision(const std::string& path, const std::string& rollout_id,
                                       uint32_t interval_seconds) {
  v1::ResolveWeightPathResponse response;
  response.set_hardware_class("x86_cpu");
  response.mutable_weight_path()->set_name(path);
  response.set_model("qwen2.5-1.5b-instruct");
  response.set_policy_version("policy-test");
  response.set_resolve_interval_seconds(interval_seconds);
  if (!rollout_id.empty()) {
    response.mutable_rollout()->set_rollout_id(rollout_id);
    response.mutable_rollout()->set_bucket(12);
  }
  return response;
}

void WriteScript(const std::string& path, const std::string& body) {
  WriteTextFile(path, absl::StrCat("#!/bin/sh\n", body));
  ::chmod(path.c_str(), 0755);
}

class RunLoopTest : public ::testing::Test {
 protected:
  RunLoopTest() : random_(0.0) {
    config_.server = "127.0.0.1:1";
    config_.device_id = "device-0002";
    config_.labels["workload"] = "agentic";
    config_.state_dir = dir_.Sub("state");
    config_.cache_dir = dir_.Sub("cache");
    config_.decision_file = dir_.Sub("run/decision.json");
    config_.env_file = dir_.Sub("run/engine.env");
    config_.resolve_interval = absl::Seconds(600);
    // The "engine" restarts by recording which path it was given; it cannot
    // start the tinygemm build, as a broken new build would not.
    WriteScript(dir_.Sub("apply.sh"),
                absl::StrCat(". ", config_.env_file, "\necho \"$WEIGHTPATH_PATH\" >> ",
                             dir_.Sub("applied.log"), "\n",
                             "[ \"$WEIGHTPATH_PATH\" != w4a16-tinygemm ] || exit 3\n"));
    config_.apply_command = dir_.Sub("apply.sh");

    dependencies_.clock = &clock_;
    dependencies_.random = &random_;
    dependencies_.agent_version = "test";
    dependencies_.probe = [] {
      v1::HardwareProfile profile;
      profile.set_arch("x86_64");
      return absl::StatusOr<v1::HardwareProfile>(profile);
    };
    dependencies_.resolve = [this](const v1::ResolveWeightPathRequest& request, absl::Duration)
        -> absl::StatusOr<v1::ResolveWeightPathResponse> {
      requests_.push_back(request);
      if (answers_.empty()) return absl::UnavailableError("server down");
      absl::StatusOr<v1::ResolveWeightPathResponse> answer = answers_.front();
      if (answers_.size() > 1) answers_.pop_front();
      return answer;
    };
    dependencies_.report = [this](const v1::ReportOutcomeRequest& request, absl::Duration) {
      if (!report_status_.ok()) return report_status_;
      reports_.push_back(request);
      return absl::OkStatus();
    };
    dependencies_.run_command = RunShellCommand;
  }

  std::vector<v1::Outcome> ReportedOutcomes() const {
    std::vector<v1::Outcome> outcomes;
    for (const auto& report : reports_) outcomes.push_back(report.outcome());
    return outcomes;
  }

  DecisionRecord Running(const std::string& path) {
    DecisionRecord record;
    record.response = Decision(path, "", 3600);
    return record;
  }

  TempDir dir_;
  FakeClock clock_;
  FixedRandom random_;
  AgentConfig config_;
  RunDependencies dependencies_;
  std::deque<absl::StatusOr<v1::ResolveWeightPathResponse>> answers_;
  std::vector<v1::ResolveWeightPathRequest> requests_;
  std::vector<v1::ReportOutcomeRequest> reports_;
  absl::Status report_status_;
};

TEST_F(RunLoopTest, AppliesANewDecisionAndReportsEngineStartedWithTheRollout) {
  WriteScript(dir_.Sub("apply.sh"), absl::StrCat("echo ok >> ", dir_.Sub("applied.log"), "\n"));
  answers_.push_back(Decision("w4a16-tinygemm", "agentic-fidelity", 300));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));

  EXPECT_EQ(loop.RunOnce(), PassResult::kApplied);

  ASSERT_THAT(ReportedOutcomes(), ElementsAre(v1::OUTCOME_ENGINE_STARTED));
  EXPECT_EQ(reports_[0].rollout_id(), "agentic-fidelity");
  EXPECT_EQ(reports_[0].path(), "w4a16-tinygemm");
  EXPECT_EQ(reports_[0].device_id(), "device-0002");
  EXPECT_FALSE(reports_[0].idempotency_key().empty());
  EXPECT_EQ(requests_.at(0).labels().at("workload"), "agentic");
  absl::StatusOr<DecisionRecord> written =
      DecisionFromJson(ReadTextFile(config_.decision_file), "decision.json");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->response.weight_path().name(), "w4a16-tinygemm");
  EXPECT_EQ(written->response.rollout().rollout_id(), "agentic-fidelity");
  EXPECT_EQ(ReadTextFile(dir_.Sub("applied.log")), "ok\n");
  EXPECT_TRUE(std::filesystem::exists(config_.state_dir)) << "last good decision saved";
}

TEST_F(RunLoopTest, AnUnchangedAnswerKeepsTheDecisionWithoutTouchingTheEngine) {
  DecisionRecord running = Running("w4a8-amx");
  running.response.set_decision_etag("0123456789abcdef0123456789abcdef");
  v1::ResolveWeightPathResponse unchanged;
  unchanged.set_unchanged(true);
  unchanged.set_decision_etag(running.response.decision_etag());
  unchanged.set_policy_version("policy-test-2");
  unchanged.set_resolve_interval_seconds(120);
  answers_.push_back(unchanged);
  RunLoop loop(config_, dependencies_, running);

  EXPECT_EQ(loop.RunOnce(), PassResult::kUnchanged);
  EXPECT_EQ(requests_.at(0).known_decision_etag(), running.response.decision_etag());
  EXPECT_TRUE(reports_.empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("applied.log"))) << "the engine was restarted";
  EXPECT_FALSE(std::filesystem::exists(config_.decision_file)) << "the decision was rewritten";
  EXPECT_EQ(loop.next_wait(), absl::Seconds(120) * 0.8);

  // "Unchanged" for a decision the device does not hold is not believed.
  v1::ResolveWeightPathResponse wrong = unchanged;
  wrong.set_decision_etag("ffffffffffffffffffffffffffffffff");
  answers_.clear();
  answers_.push_back(wrong);
  EXPECT_EQ(loop.RunOnce(), PassResult::kResolveFailed);
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("applied.log")));
}

TEST_F(RunLoopTest, FailingApplyGoesBackToThePreviousDecisionAndReportsBoth) {
  answers_.push_back(Decision("w4a16-tinygemm", "agentic-fidelity", 300));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));

  EXPECT_EQ(loop.RunOnce(), PassResult::kRolledBack);

  EXPECT_THAT(ReportedOutcomes(),
              ElementsAre(v1::OUTCOME_ENGINE_START_FAILED, v1::OUTCOME_ROLLED_BACK));
  for (const auto& report : reports_) {
    EXPECT_EQ(report.rollout_id(), "agentic-fidelity") << "the failed build's rollout hears of it";
    EXPECT_EQ(report.path(), "w4a16-tinygemm");
  }
  EXPECT_THAT(reports_[0].detail(), HasSubstr("apply_command"));
  EXPECT_THAT(reports_[0].detail(), HasSubstr("exited with status 3"));
  EXPECT_NE(reports_[0].idempotency_key(), reports_[1].idempotency_key());
  // Tried the new build, then restarted the old one.
  EXPECT_EQ(ReadTextFile(dir_.Sub("applied.log")), "w4a16-tinygemm\nw4a8-amx\n");
  absl::StatusOr<DecisionRecord> written =
      DecisionFromJson(ReadTextFile(config_.decision_file), "decision.json");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->response.weight_path().name(), "w4a8-amx");
  EXPECT_THAT(ReadTextFile(config_.env_file), HasSubstr("WEIGHTPATH_PATH=w4a8-amx"));
  EXPECT_EQ(loop.current()->response.weight_path().name(), "w4a8-amx");
}

TEST_F(RunLoopTest, ABuildThatFailedIsNotRetriedUntilTheAnswerChanges) {
  answers_.push_back(Decision("w4a16-tinygemm", "agentic-fidelity", 300));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  ASSERT_EQ(loop.RunOnce(), PassResult::kRolledBack);

  EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected);
  EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected);

  EXPECT_EQ(reports_.size(), 2u) << "no repeated failure reports";
  EXPECT_EQ(ReadTextFile(dir_.Sub("applied.log")), "w4a16-tinygemm\nw4a8-amx\n");
}

TEST_F(RunLoopTest, EveryReportSaysWhatRunsOnceItsEventIsOver) {
  answers_.push_back(Decision("w4a16-tinygemm", "agentic-fidelity", 300));
  DecisionRecord running = Running("w4a8-amx");
  running.response.set_decision_etag("0123456789abcdef0123456789abcdef");
  RunLoop loop(config_, dependencies_, running);
  ASSERT_EQ(loop.RunOnce(), PassResult::kRolledBack);

  // The reports are about the build that failed; what runs is the old one.
  ASSERT_THAT(ReportedOutcomes(),
              ElementsAre(v1::OUTCOME_ENGINE_START_FAILED, v1::OUTCOME_ROLLED_BACK));
  for (const auto& report : reports_) {
    EXPECT_EQ(report.path(), "w4a16-tinygemm");
    ASSERT_TRUE(report.has_running());
    EXPECT_EQ(report.running().path(), "w4a8-amx");
    EXPECT_EQ(report.running().model(), "qwen2.5-1.5b-instruct");
    EXPECT_EQ(report.running().decision_etag(), "0123456789abcdef0123456789abcdef");
    EXPECT_EQ(report.running().source(), v1::BOOT_SOURCE_SERVER);
    EXPECT_FALSE(report.running().nothing_running());
  }

  // A build that starts is what runs after its report.
  WriteScript(dir_.Sub("apply.sh"), "exit 0\n");
  answers_.clear();
  answers_.push_back(Decision("bf16", "", 300));
  ASSERT_EQ(loop.RunOnce(), PassResult::kApplied);
  EXPECT_EQ(reports_.back().outcome(), v1::OUTCOME_ENGINE_STARTED);
  EXPECT_EQ(reports_.back().running().path(), "bf16");
}

TEST_F(RunLoopTest, WithNothingToGoBackToTheReportsSayNothingRuns) {
  answers_.push_back(Decision("w4a16-tinygemm", "", 300));
  RunLoop loop(config_, dependencies_, std::nullopt);
  ASSERT_EQ(loop.RunOnce(), PassResult::kRolledBack);
  ASSERT_FALSE(reports_.empty());
  for (const auto& report : reports_) {
    EXPECT_TRUE(report.running().nothing_running()) << v1::Outcome_Name(report.outcome());
    EXPECT_TRUE(report.running().path().empty());
  }
}

TEST_F(RunLoopTest, WhenGoingBackFailsTooTheRollbackSaysNothingRuns) {
  WriteScript(dir_.Sub("apply.sh"), "exit 4\n");
  answers_.push_back(Decision("w4a16-tinygemm", "", 300));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  ASSERT_EQ(loop.RunOnce(), PassResult::kRolledBack);
  ASSERT_THAT(ReportedOutcomes(),
              ElementsAre(v1::OUTCOME_ENGINE_START_FAILED, v1::OUTCOME_ROLLED_BACK));
  EXPECT_THAT(reports_[1].detail(), HasSubstr("previous decision restored but"));
  EXPECT_TRUE(reports_[1].running().nothing_running());

  // Until a build starts again.
  WriteScript(dir_.Sub("apply.sh"), "exit 0\n");
  answers_.clear();
  answers_.push_back(Decision("bf16", "", 300));
  ASSERT_EQ(loop.RunOnce(), PassResult::kApplied);
  EXPECT_EQ(reports_.back().running().path(), "bf16");
}

TEST_F(RunLoopTest, AFailedBuildIsTriedAgainOnTheServersScheduleDoublingEachTime) {
  v1::ResolveWeightPathResponse offered = Decision("w4a16-tinygemm", "agentic-fidelity", 300);
  offered.set_failed_build_retry_seconds(600);
  answers_.push_back(offered);
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  ASSERT_EQ(loop.RunOnce(), PassResult::kRolledBack);

  clock_.Advance(absl::Seconds(599));
  EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected) << "before the server's interval";
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(loop.RunOnce(), PassResult::kRolledBack) << "tried again after 600 s";
  // The second failure doubles the wait.
  clock_.Advance(absl::Seconds(1199));
  EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(loop.RunOnce(), PassResult::kRolledBack) << "tried again after 1200 s";
  EXPECT_EQ(ReadTextFile(dir_.Sub("applied.log")),
            "w4a16-tinygemm\nw4a8-amx\nw4a16-tinygemm\nw4a8-amx\nw4a16-tinygemm\nw4a8-amx\n");
  // Each try is reported, so the rollout's gates and the drift see it.
  EXPECT_EQ(reports_.size(), 6u);

  // The cause passes (a disk cleaned, an engine fixed): the next try converges.
  WriteScript(dir_.Sub("apply.sh"), "exit 0\n");
  clock_.Advance(absl::Seconds(2400));
  EXPECT_EQ(loop.RunOnce(), PassResult::kApplied);
  EXPECT_EQ(reports_.back().outcome(), v1::OUTCOME_ENGINE_STARTED);
  EXPECT_EQ(reports_.back().running().path(), "w4a16-tinygemm");
}

TEST_F(RunLoopTest, AServersRetryIntervalIsHeldToTheConfiguredBounds) {
  config_.min_resolve_interval = absl::Seconds(30);
  v1::ResolveWeightPathResponse offered = Decision("w4a16-tinygemm", "", 300);
  offered.set_failed_build_retry_seconds(1);
  answers_.push_back(offered);
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  ASSERT_EQ(loop.RunOnce(), PassResult::kRolledBack);
  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected) << "1 s is held to min_resolve_interval";
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(loop.RunOnce(), PassResult::kRolledBack);

  answers_.front()->set_failed_build_retry_seconds(4294967295u);
  clock_.Advance(absl::Hours(24) * 2 - absl::Seconds(1));
  EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(loop.RunOnce(), PassResult::kRolledBack) << "held to 24 h (doubled once)";
}

TEST_F(RunLoopTest, TheLongestWaitBetweenTriesIsSixteenTimesTheServersInterval) {
  WriteScript(dir_.Sub("check.sh"), "exit 1\n");
  config_.engine_check_command = dir_.Sub("check.sh");
  v1::ResolveWeightPathResponse offered = Decision("bf16", "", 300);
  offered.set_failed_build_retry_seconds(60);
  answers_.push_back(offered);
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  ASSERT_EQ(loop.RunOnce(), PassResult::kRolledBack);
  // Waits of 60, 120, 240, 480, then 960 s for every later try.
  for (int wait : {60, 120, 240, 480, 960, 960}) {
    clock_.Advance(absl::Seconds(wait - 1));
    EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected) << wait;
    clock_.Advance(absl::Seconds(1));
    EXPECT_EQ(loop.RunOnce(), PassResult::kRolledBack) << wait;
  }
}

TEST_F(RunLoopTest, FailingEngineCheckAlsoRollsBack) {
  WriteScript(dir_.Sub("apply.sh"), "exit 0\n");
  WriteScript(dir_.Sub("check.sh"), "echo 'engine not serving' >&2\nexit 7\n");
  config_.engine_check_command = dir_.Sub("check.sh");
  answers_.push_back(Decision("w4a16-tinygemm", "agentic-fidelity", 300));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));

  EXPECT_EQ(loop.RunOnce(), PassResult::kRolledBack);

  EXPECT_THAT(ReportedOutcomes(),
              ElementsAre(v1::OUTCOME_ENGINE_START_FAILED, v1::OUTCOME_ROLLED_BACK));
  EXPECT_THAT(reports_[0].detail(), HasSubstr("engine_check_command"));
  EXPECT_THAT(reports_[0].detail(), HasSubstr("status 7"));
}

TEST_F(RunLoopTest, WaitsTheServersIntervalWithJitter) {
  answers_.push_back(Decision("w4a8-amx", "", 300));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  EXPECT_EQ(loop.RunOnce(), PassResult::kUnchanged);
  EXPECT_EQ(loop.next_wait(), absl::Seconds(240)) << "0.8 x 300 s at the low end of the jitter";

  FixedRandom high(1.0);
  dependencies_.random = &high;
  loop.RunOnce();
  EXPECT_EQ(loop.next_wait(), absl::Seconds(360)) << "1.2 x 300 s at the high end";
  EXPECT_TRUE(reports_.empty()) << "an unchanged decision is not news";
}

// A hostile server's 4294967295 s (the agent slept ~119 years: no
// re-resolve, trust update or report until a restart) and 1 s (a fleet
// polling every second) are held to the config's bounds, 30 s and 24 h by
// default; so is a pushback.
TEST_F(RunLoopTest, TheServersIntervalIsHeldToTheConfiguredBounds) {
  answers_.push_back(Decision("w4a8-amx", "", 4294967295u));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(loop.RunOnce(), PassResult::kUnchanged);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("the server suggests resolving every 4294967295 s; using 24h"));
  EXPECT_EQ(loop.next_wait(), absl::Hours(24) * 0.8);

  answers_.clear();
  answers_.push_back(Decision("w4a8-amx", "", 1));
  loop.RunOnce();
  EXPECT_EQ(loop.next_wait(), absl::Seconds(30) * 0.8);

  config_.min_resolve_interval = absl::Seconds(5);
  config_.max_resolve_interval = absl::Minutes(2);
  answers_.clear();
  answers_.push_back(Decision("w4a8-amx", "", 1));
  loop.RunOnce();
  EXPECT_EQ(loop.next_wait(), absl::Seconds(5) * 0.8);
  answers_.clear();
  answers_.push_back(Decision("w4a8-amx", "", 600));
  loop.RunOnce();
  EXPECT_EQ(loop.next_wait(), absl::Minutes(2) * 0.8);
  answers_.clear();
  answers_.push_back(Decision("w4a8-amx", "", 90));
  loop.RunOnce();
  EXPECT_EQ(loop.next_wait(), absl::Seconds(90) * 0.8) << "within the bounds: as suggested";

  // "Come back in 2^31 ms" (24.8 days) is no longer than the longest interval.
  config_.resolve_interval = absl::Minutes(1);
  answers_.clear();
  answers_.push_back(WithRetryPushback(absl::ResourceExhaustedError("shedding load"),
                                       absl::Milliseconds(int64_t{1} << 31)));
  EXPECT_EQ(loop.RunOnce(), PassResult::kResolveFailed);
  EXPECT_EQ(loop.next_wait(), absl::Minutes(2));
}

TEST_F(RunLoopTest, RunSleepsOnTheInjectedClockBetweenPasses) {
  answers_.push_back(Decision("w4a8-amx", "", 100));
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  int passes = 0;
  loop.Run([&passes] { return passes++ < 3; });
  EXPECT_THAT(clock_.sleeps(),
              ElementsAre(absl::Seconds(80), absl::Seconds(80), absl::Seconds(80)));
  EXPECT_EQ(requests_.size(), 3u);
}

TEST_F(RunLoopTest, UnreachableServerKeepsTheDecisionAndUsesTheConfiguredInterval) {
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  EXPECT_EQ(loop.RunOnce(), PassResult::kResolveFailed);
  EXPECT_EQ(loop.next_wait(), absl::Seconds(480)) << "0.8 x resolve_interval 600 s";
  EXPECT_EQ(loop.current()->response.weight_path().name(), "w4a8-amx");
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("applied.log")));
}

TEST_F(RunLoopTest, ReportsThatCouldNotBeSentAreSentOnTheNextPass) {
  WriteScript(dir_.Sub("apply.sh"), "exit 0\n");
  answers_.push_back(Decision("w4a16-tinygemm", "agentic-fidelity", 300));
  report_status_ = absl::UnavailableError("connection refused");
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));
  ASSERT_EQ(loop.RunOnce(), PassResult::kApplied);
  ASSERT_EQ(loop.unsent_reports().size(), 1u);

  report_status_ = absl::OkStatus();
  EXPECT_EQ(loop.RunOnce(), PassResult::kUnchanged);
  EXPECT_TRUE(loop.unsent_reports().empty());
  EXPECT_THAT(ReportedOutcomes(), ElementsAre(v1::OUTCOME_ENGINE_STARTED));
}

TEST_F(RunLoopTest, JoiningARolloutWithTheBuildAlreadyRunningReportsWithoutRestarting) {
  answers_.push_back(Decision("w4a16-tinygemm", "agentic-fidelity", 300));
  RunLoop loop(config_, dependencies_, Running("w4a16-tinygemm"));

  EXPECT_EQ(loop.RunOnce(), PassResult::kUnchanged);

  ASSERT_THAT(ReportedOutcomes(), ElementsAre(v1::OUTCOME_ENGINE_STARTED));
  EXPECT_EQ(reports_[0].rollout_id(), "agentic-fidelity");
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("applied.log"))) << "no restart";
}

TEST_F(RunLoopTest, AnArtifactThatDoesNotVerifyIsReportedAndNotApplied) {
  WriteScript(dir_.Sub("apply.sh"), absl::StrCat("echo ran >> ", dir_.Sub("applied.log"), "\n"));
  v1::ResolveWeightPathResponse response = Decision("w4a16-tinygemm", "agentic-fidelity", 300);
  v1::Artifact artifact = testing::WriteArtifact(
      dir_.Sub("served/model.bin"), testing::ArtifactBytes(4096, 7),
      absl::StrCat("file://", dir_.Sub("served/model.bin")));
  artifact.set_sha256(std::string(64, 'a'));  // not these bytes
  *response.mutable_artifact() = artifact;
  answers_.push_back(response);
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));

  EXPECT_EQ(loop.RunOnce(), PassResult::kFetchFailed);

  EXPECT_THAT(ReportedOutcomes(), ElementsAre(v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("applied.log")));
  EXPECT_EQ(loop.RunOnce(), PassResult::kSkippedRejected);
}

TEST_F(RunLoopTest, AVerifiedArtifactIsHandedToTheEngine) {
  WriteScript(dir_.Sub("apply.sh"), "exit 0\n");
  v1::ResolveWeightPathResponse response = Decision("w4a8-amx", "", 300);
  *response.mutable_artifact() = testing::WriteArtifact(
      dir_.Sub("served/model.bin"), testing::ArtifactBytes(4096, 9),
      absl::StrCat("file://", dir_.Sub("served/model.bin")));
  answers_.push_back(response);
  RunLoop loop(config_, dependencies_, std::nullopt);

  EXPECT_EQ(loop.RunOnce(), PassResult::kApplied);

  EXPECT_EQ(loop.current()->artifact_path,
            absl::StrCat(config_.cache_dir, "/", response.artifact().sha256()));
  EXPECT_THAT(ReadTextFile(config_.env_file), HasSubstr(response.artifact().sha256()));
  EXPECT_EQ(reports_.at(0).artifact_sha256(), response.artifact().sha256());
  EXPECT_EQ(reports_.at(0).rollout_id(), "");
}

// A server answer the engine's unit cannot be given safely (a key its
// shell would run) is refused whole: the running decision stays, nothing is
// fetched, written, applied or saved.
TEST_F(RunLoopTest, ADecisionTheEngineUnitCannotTakeSafelyIsRefusedAndTheCurrentOneKept) {
  WriteScript(dir_.Sub("apply.sh"), absl::StrCat("echo ran >> ", dir_.Sub("applied.log"), "\n"));
  v1::ResolveWeightPathResponse response = Decision("w4a16-tinygemm", "agentic-fidelity", 300);
  const std::string marker = dir_.Sub("pwned");
  (*response.mutable_engine_kwargs()->mutable_fields())[absl::StrCat("x $(touch ", marker, ")")]
      .set_number_value(1);
  *response.mutable_artifact() = testing::WriteArtifact(
      dir_.Sub("served/model.bin"), testing::ArtifactBytes(4096, 3),
      absl::StrCat("file://", dir_.Sub("served/model.bin")));
  answers_.push_back(response);
  RunLoop loop(config_, dependencies_, Running("w4a8-amx"));

  EXPECT_EQ(loop.RunOnce(), PassResult::kRefusedDecision);

  EXPECT_EQ(loop.current()->response.weight_path().name(), "w4a8-amx");
  EXPECT_FALSE(std::filesystem::exists(config_.env_file));
  EXPECT_FALSE(std::filesystem::exists(config_.decision_file));
  EXPECT_FALSE(std::filesystem::exists(config_.state_dir)) << "saved as last good";
  EXPECT_FALSE(std::filesystem::exists(
      absl::StrCat(config_.cache_dir, "/", response.artifact().sha256())))
      << "fetched";
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("applied.log")));
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_TRUE(reports_.empty());
}

TEST(RunShellCommandTest, NamesTheConfigKeyAndTheExitStatus) {
  EXPECT_TRUE(RunShellCommand("true", "apply_command").ok());
  EXPECT_THAT(RunShellCommand("exit 4", "apply_command"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("apply_command 'exit 4' exited with status 4")));
  EXPECT_THAT(RunShellCommand("kill -9 $$", "engine_check_command"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("killed by signal 9")));
}

}  // namespace
}  // namespace weightpath::agent
