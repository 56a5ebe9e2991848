// The boot flow in-process, with a fake clock and a scripted server: the
// budget and the fallbacks are checked without any real waiting.
#include "agent/boot_flow.h"

#include <filesystem>
#include <vector>

#include "agent/last_good_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/fake_clock.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::HasSubstr;
using testing::FakeClock;
using testing::ReadTextFile;
using testing::TempDir;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

class AgentBootFlow : public ::testing::Test {
 protected:
  AgentBootFlow() : random_(42) {
    config_.server = "127.0.0.1:1";
    config_.device_id = "edge-unit-0001";
    config_.state_dir = dir_.Sub("state");
    config_.cache_dir = dir_.Sub("cache");
    config_.decision_file = dir_.Sub("run/decision.json");
    config_.env_file = dir_.Sub("run/engine.env");
    config_.budget = absl::Seconds(10);
    config_.call_timeout = absl::Seconds(2);
    config_.retry_base_delay = absl::Milliseconds(500);
    config_.retry_max_delay = absl::Seconds(4);
    profile_.set_arch("x86_64");
    profile_.add_cpu_flags("avx512f");
    profile_.add_cpu_flags("amx_tile");
    profile_.set_accelerator("none");
    start_ = clock_.Now();
  }

  BootDependencies Dependencies(
      std::function<absl::StatusOr<v1::ResolveWeightPathResponse>(absl::Time deadline)> server) {
    BootDependencies dependencies;
    dependencies.clock = &clock_;
    dependencies.random = &random_;
    dependencies.agent_version = "test";
    dependencies.probe = [this]() -> absl::StatusOr<v1::HardwareProfile> { return profile_; };
    dependencies.resolve = [this, server](const v1::ResolveWeightPathRequest& request,
                                          absl::Time deadline) {
      requests_.push_back(request);
      call_starts_.push_back(clock_.Now());
      deadlines_.push_back(deadline);
      return server(deadline);
    };
    return dependencies;
  }

  TempDir dir_;
  FakeClock clock_;
  SeededRandomSource random_;
  AgentConfig config_;
  v1::HardwareProfile profile_;
  absl::Time start_;
  std::vector<v1::ResolveWeightPathRequest> requests_;
  std::vector<absl::Time> call_starts_;
  std::vector<absl::Time> deadlines_;
};

TEST_F(AgentBootFlow, UnreachableServerFallsBackOfflineWithinTheBudget) {
  BootDependencies dependencies =
      Dependencies([](absl::Time) { return absl::UnavailableError("connection refused"); });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kOffline);
  EXPECT_THAT(outcome->fallback_reason, HasSubstr("budget exhausted"));
  EXPECT_GE(requests_.size(), 2u);
  EXPECT_LE(clock_.Now(), start_ + config_.budget);
  EXPECT_EQ(requests_.front().device_id(), "edge-unit-0001");
  EXPECT_EQ(requests_.front().profile().arch(), "x86_64");
  absl::StatusOr<DecisionRecord> written = DecisionFromJson(
      ReadTextFile(config_.decision_file), config_.decision_file);
  ASSERT_THAT(written, IsOk());
  EXPECT_EQ(written->source, DecisionSource::kOffline);
  EXPECT_FALSE(std::filesystem::exists(LastGoodPath(config_.state_dir)));
}

TEST_F(AgentBootFlow, SilentServerGetsFullCallDeadlinesAndNoMoreThanTheBudget) {
  BootDependencies dependencies = Dependencies([this](absl::Time deadline) {
    clock_.Advance(deadline - clock_.Now());
    return absl::DeadlineExceededError("deadline exceeded");
  });
  ASSERT_THAT(RunBootFlow(config_, dependencies), IsOk());
  ASSERT_FALSE(deadlines_.empty());
  // Retries leave the fallbacks their share of the budget.
  const absl::Time resolve_end = start_ + config_.budget * (1 - kFallbackShareOfBudget);
  for (size_t i = 0; i < deadlines_.size(); ++i) {
    EXPECT_EQ(deadlines_[i], std::min(call_starts_[i] + config_.call_timeout, resolve_end));
  }
  EXPECT_LE(clock_.Now(), resolve_end);
}

TEST_F(AgentBootFlow, NonRetryableAnswerFallsBackAfterOneCallWithoutWaiting) {
  BootDependencies dependencies = Dependencies(
      [](absl::Time) { return absl::NotFoundError("model \"x\" is not in the catalog"); });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kOffline);
  EXPECT_THAT(outcome->fallback_reason, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(requests_.size(), 1u);
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(AgentBootFlow, ResponseWithoutAUsableArtifactIsNotHandedOver) {
  BootDependencies dependencies = Dependencies([](absl::Time) {
    v1::ResolveWeightPathResponse response;
    response.mutable_weight_path()->set_name("w4a8-amx");
    return response;
  });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kOffline);
  EXPECT_THAT(outcome->fallback_reason, HasSubstr("artifact.uri"));
}

TEST_F(AgentBootFlow, FailedProbeWithoutHistoryIsAFailedPreconditionAndWritesNothing) {
  BootDependencies dependencies =
      Dependencies([](absl::Time) { return absl::UnavailableError("unused"); });
  dependencies.probe = []() -> absl::StatusOr<v1::HardwareProfile> {
    return absl::InvalidArgumentError("WEIGHTPATH_HW_PROFILE=/x.json: not JSON");
  };
  EXPECT_THAT(RunBootFlow(config_, dependencies),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("probe")));
  EXPECT_TRUE(requests_.empty());
  EXPECT_FALSE(std::filesystem::exists(config_.decision_file));
  EXPECT_FALSE(std::filesystem::exists(config_.env_file));
}

TEST_F(AgentBootFlow, ExitCodesPerSource) {
  EXPECT_EQ(ExitCodeFor(DecisionSource::kServer), 0);
  EXPECT_EQ(ExitCodeFor(DecisionSource::kLastGood), 3);
  EXPECT_EQ(ExitCodeFor(DecisionSource::kOffline), 4);
}

}  // namespace
}  // namespace weightpath::agent
