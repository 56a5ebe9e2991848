// The boot flow in-process, with a fake clock and a scripted server: the
// budget and the fallbacks are checked without any real waiting.
#include "agent/flow/boot_flow.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "agent/engine/handover.h"
#include "agent/decision/last_good_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/engine_unit.h"
#include "tests/agent/fake_clock.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakeClock;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteTextFile;
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
    start_ = clock_.MonotonicNow();
  }

  BootDependencies Dependencies(
      std::function<absl::StatusOr<v1::ResolveWeightPathResponse>(absl::Duration timeout)> server) {
    BootDependencies dependencies;
    dependencies.clock = &clock_;
    dependencies.random = &random_;
    dependencies.agent_version = "test";
    dependencies.probe = [this]() -> absl::StatusOr<v1::HardwareProfile> { return profile_; };
    dependencies.resolve = [this, server](const v1::ResolveWeightPathRequest& request,
                                          absl::Duration timeout) {
      requests_.push_back(request);
      call_starts_.push_back(clock_.MonotonicNow());
      timeouts_.push_back(timeout);
      return server(timeout);
    };
    return dependencies;
  }

  // A server decision for this device whose artifact is a real file.
  v1::ResolveWeightPathResponse ServedDecision(uint32_t seed = 1) {
    const std::string source = dir_.Sub(absl::StrCat("served/w4a8-amx-", seed, ".bin"));
    v1::ResolveWeightPathResponse response;
    response.set_hardware_class("x86_cpu");
    response.mutable_weight_path()->set_name("w4a8-amx");
    response.mutable_weight_path()->set_quantization("gptq");
    response.set_model("Spark-X2.5-1.7B");
    response.set_policy_version("test");
    *response.mutable_artifact() = testing::WriteArtifact(
        source, testing::ArtifactBytes(64 * 1024, seed), "file://" + source);
    (*response.mutable_engine_kwargs()->mutable_fields())["max_model_len"].set_number_value(4096);
    response.set_decision_etag(absl::StrCat("etag-", seed));
    return response;
  }

  std::string CachedArtifact(const v1::ResolveWeightPathResponse& response) const {
    return config_.cache_dir + "/" + response.artifact().sha256();
  }

  // The hand-over files run the way the engine's unit runs them.
  testing::EngineLaunch LaunchEngine() {
    return testing::LaunchWithShell(config_.env_file, testing::WriteFakeEngine(dir_.path()));
  }

  TempDir dir_;
  FakeClock clock_;
  SeededRandomSource random_;
  AgentConfig config_;
  v1::HardwareProfile profile_;
  MonotonicTime start_;
  std::vector<v1::ResolveWeightPathRequest> requests_;
  std::vector<MonotonicTime> call_starts_;
  std::vector<absl::Duration> timeouts_;
};

TEST_F(AgentBootFlow, UnreachableServerFallsBackOfflineWithinTheBudget) {
  BootDependencies dependencies =
      Dependencies([](absl::Duration) { return absl::UnavailableError("connection refused"); });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kOffline);
  EXPECT_THAT(outcome->fallback_reason, HasSubstr("budget exhausted"));
  EXPECT_GE(requests_.size(), 2u);
  EXPECT_LE(clock_.MonotonicNow(), start_ + config_.budget);
  EXPECT_EQ(requests_.front().device_id(), "edge-unit-0001");
  EXPECT_EQ(requests_.front().profile().arch(), "x86_64");
  absl::StatusOr<DecisionRecord> written = DecisionFromJson(
      ReadTextFile(config_.decision_file), config_.decision_file);
  ASSERT_THAT(written, IsOk());
  EXPECT_EQ(written->source, DecisionSource::kOffline);
  EXPECT_FALSE(std::filesystem::exists(LastGoodPath(config_.state_dir)));
}

TEST_F(AgentBootFlow, SilentServerGetsFullCallDeadlinesAndNoMoreThanTheBudget) {
  BootDependencies dependencies = Dependencies([this](absl::Duration timeout) {
    clock_.Advance(timeout);
    return absl::DeadlineExceededError("deadline exceeded");
  });
  ASSERT_THAT(RunBootFlow(config_, dependencies), IsOk());
  ASSERT_FALSE(timeouts_.empty());
  // Retries leave the fallbacks their share of the budget.
  const MonotonicTime resolve_end = start_ + config_.budget * (1 - kFallbackShareOfBudget);
  for (size_t i = 0; i < timeouts_.size(); ++i) {
    EXPECT_EQ(timeouts_[i], std::min(config_.call_timeout, resolve_end - call_starts_[i]));
  }
  EXPECT_LE(clock_.MonotonicNow(), resolve_end);
}

TEST_F(AgentBootFlow, NonRetryableAnswerFallsBackAfterOneCallWithoutWaiting) {
  BootDependencies dependencies = Dependencies(
      [](absl::Duration) { return absl::NotFoundError("model \"x\" is not in the catalog"); });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kOffline);
  EXPECT_THAT(outcome->fallback_reason, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(requests_.size(), 1u);
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(AgentBootFlow, ResponseWithoutAUsableArtifactIsNotHandedOver) {
  BootDependencies dependencies = Dependencies([](absl::Duration) {
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
      Dependencies([](absl::Duration) { return absl::UnavailableError("unused"); });
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

TEST_F(AgentBootFlow, ServerDecisionIsDownloadedHandedOverAndSavedAsLastGood) {
  const v1::ResolveWeightPathResponse served = ServedDecision();
  BootDependencies dependencies = Dependencies([&](absl::Duration) { return served; });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kServer);
  EXPECT_EQ(outcome->record.artifact_path, CachedArtifact(served));
  EXPECT_TRUE(std::filesystem::exists(LastGoodPath(config_.state_dir)));
}

// What a compromised server would send: keys that the engine unit's shell
// would run. None of it is downloaded, written or saved; the device falls
// back as if the server were down, and the reason names the key.
TEST_F(AgentBootFlow, ServerDecisionWithAKeyTheShellWouldRunIsRefusedBeforeAnythingIsWritten) {
  const std::string marker = dir_.Sub("pwned");
  for (const std::string& key :
       {absl::StrCat("max_model_len $(touch ", marker, ");x"), absl::StrCat("x`touch ", marker, "`"),
        std::string("a\nb")}) {
    SCOPED_TRACE(key);
    std::filesystem::remove_all(dir_.Sub("run"));
    v1::ResolveWeightPathResponse served = ServedDecision();
    (*served.mutable_engine_kwargs()->mutable_fields())[key].set_number_value(4096);
    BootDependencies dependencies = Dependencies([&](absl::Duration) { return served; });
    absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
    ASSERT_THAT(outcome, IsOk());
    EXPECT_EQ(outcome->record.source, DecisionSource::kOffline);
    EXPECT_THAT(outcome->fallback_reason,
                AllOf(HasSubstr("INVALID_ARGUMENT"), HasSubstr("server response: engine_kwargs: key"),
                      HasSubstr(absl::CHexEscape(key))));
    EXPECT_FALSE(std::filesystem::exists(CachedArtifact(served))) << "downloaded anyway";
    EXPECT_FALSE(std::filesystem::exists(LastGoodPath(config_.state_dir)));
    EXPECT_THAT(ReadTextFile(config_.env_file), Not(HasSubstr("touch")));
    const testing::EngineLaunch launch = LaunchEngine();
    EXPECT_EQ(launch.exit_code, 0) << launch.err;
    EXPECT_FALSE(std::filesystem::exists(marker));
  }
}

TEST_F(AgentBootFlow, RefusedServerDecisionLeavesTheLastGoodOneInCharge) {
  const v1::ResolveWeightPathResponse good = ServedDecision(1);
  BootDependencies first = Dependencies([&](absl::Duration) { return good; });
  ASSERT_THAT(RunBootFlow(config_, first), IsOk());
  const std::string saved = ReadTextFile(LastGoodPath(config_.state_dir));

  v1::ResolveWeightPathResponse poisoned = ServedDecision(2);
  auto* names = (*poisoned.mutable_engine_kwargs()->mutable_fields())["served_model_name"]
                    .mutable_list_value();
  names->add_values()->set_string_value("--trust-remote-code");
  BootDependencies second = Dependencies([&](absl::Duration) { return poisoned; });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, second);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kLastGood);
  EXPECT_EQ(outcome->record.artifact_path, CachedArtifact(good));
  EXPECT_THAT(outcome->fallback_reason, HasSubstr("engine_kwargs.served_model_name[0]"));
  EXPECT_EQ(ReadTextFile(LastGoodPath(config_.state_dir)), saved);
  EXPECT_FALSE(std::filesystem::exists(CachedArtifact(poisoned)));
}

// A last good file edited on the device (or saved by an agent that did not
// check) is refused on read; the offline decision does not inherit its
// artifact either.
TEST_F(AgentBootFlow, PoisonedLastGoodFileIsNotRepeated) {
  const v1::ResolveWeightPathResponse good = ServedDecision(1);
  BootDependencies first = Dependencies([&](absl::Duration) { return good; });
  ASSERT_THAT(RunBootFlow(config_, first), IsOk());
  const std::string marker = dir_.Sub("pwned");
  std::string saved = ReadTextFile(LastGoodPath(config_.state_dir));
  const std::string quantization_entry = "\"max_model_len\": 4096";
  ASSERT_NE(saved.find(quantization_entry), std::string::npos) << saved;
  saved.replace(saved.find(quantization_entry), quantization_entry.size(),
                absl::StrCat("\"x $(touch ", marker, ")\": 1"));
  WriteTextFile(LastGoodPath(config_.state_dir), saved);

  BootDependencies down =
      Dependencies([](absl::Duration) { return absl::UnavailableError("connection refused"); });
  absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, down);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(outcome->record.source, DecisionSource::kOffline);
  EXPECT_EQ(outcome->record.artifact_path, "");
  EXPECT_EQ(requests_.back().known_decision_etag(), "") << "a refused decision is not held";
  const testing::EngineLaunch launch = LaunchEngine();
  EXPECT_EQ(launch.exit_code, 0) << launch.err;
  EXPECT_FALSE(std::filesystem::exists(marker));
}

// NTP steps the date of a board without a real-time clock by a year, in
// either direction, in the middle of the boot. The budget is monotonic:
// the boot makes the same calls and ends at the same monotonic instant.
TEST_F(AgentBootFlow, WallClockStepsDuringTheBootLeaveTheBudgetAsItWas) {
  auto boot = [this](bool step) {
    clock_ = FakeClock();
    random_ = SeededRandomSource(42);  // the same jitter draws for both boots
    requests_.clear();
    timeouts_.clear();
    call_starts_.clear();
    int calls = 0;
    BootDependencies dependencies = Dependencies([&](absl::Duration timeout) {
      if (step) {
        clock_.StepWallClock(++calls % 2 == 1 ? absl::Hours(24 * 365) : -absl::Hours(24 * 365) * 2);
      }
      clock_.Advance(timeout);
      return absl::DeadlineExceededError("no answer");
    });
    const MonotonicTime start = clock_.MonotonicNow();
    absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
    EXPECT_THAT(outcome, IsOk());
    return std::make_pair(clock_.MonotonicNow() - start, timeouts_);
  };
  const auto steady = boot(false);
  const auto stepped = boot(true);
  EXPECT_EQ(stepped.first, steady.first);
  EXPECT_EQ(stepped.second, steady.second);
  EXPECT_LE(steady.first, config_.budget);
  EXPECT_GE(steady.second.size(), 2u);
}

// A step between the resolve and the download leaves the download the rest
// of the budget, not nothing (forwards) or a year (backwards).
TEST_F(AgentBootFlow, WallClockStepBeforeTheDownloadStillLeavesItTheBudget) {
  for (const absl::Duration step : {absl::Hours(24 * 365), -absl::Hours(24 * 365)}) {
    SCOPED_TRACE(absl::FormatDuration(step));
    std::filesystem::remove_all(config_.cache_dir);
    const v1::ResolveWeightPathResponse served = ServedDecision();
    BootDependencies dependencies = Dependencies([&](absl::Duration) {
      clock_.StepWallClock(step);
      return served;
    });
    absl::StatusOr<BootOutcome> outcome = RunBootFlow(config_, dependencies);
    ASSERT_THAT(outcome, IsOk());
    EXPECT_EQ(outcome->record.source, DecisionSource::kServer) << outcome->fallback_reason;
  }
}

// A crash between creating a temporary file and its rename leaves it
// behind; the next boot removes those of the agent's own naming, and
// nothing else.
TEST_F(AgentBootFlow, StaleTemporaryFilesOfTheAgentsOwnNamingAreRemovedAtBoot) {
  const std::string sha(64, 'c');
  const std::vector<std::string> stale = {
      dir_.Sub("run/.decision.json.tmp.AbC123"), dir_.Sub("run/.engine.env.tmp.x0Y9zZ"),
      dir_.Sub("state/.last_good_decision.json.tmp.q1w2e3"),
      dir_.Sub("cache/." + sha + ".verified.tmp.ABCDEF")};
  const std::vector<std::string> kept = {
      dir_.Sub("run/.decision.json.tmp.abc"),        // not mkstemp's six
      dir_.Sub("run/.decision.json.tmp.abc-12"),     // not letters and digits
      dir_.Sub("run/.other.json.tmp.ABCDEF"),        // not a file the agent writes
      dir_.Sub("run/decision.json.tmp.ABCDEF"),      // no leading dot
      dir_.Sub("cache/.notasha.verified.tmp.ABCDEF"),
      dir_.Sub("state/keep.txt")};
  const std::string fresh = dir_.Sub("run/.engine.env.tmp.FRESH1");  // a write in progress
  const std::string outside = dir_.Sub("outside.txt");
  const std::string link = dir_.Sub("run/.engine.env.tmp.LINK01");
  WriteTextFile(outside, "not the agent's");
  for (const std::string& path : stale) WriteTextFile(path, "half");
  for (const std::string& path : kept) WriteTextFile(path, "other");
  WriteTextFile(fresh, "in progress");
  ASSERT_EQ(::symlink(outside.c_str(), link.c_str()), 0);
  // Crash leftovers from a minute ago, and from a wall clock that has since
  // gone back a year.
  const struct timespec old_times[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  const absl::Time future = absl::Now() + absl::Hours(24 * 365);
  const struct timespec future_times[2] = {absl::ToTimespec(future), absl::ToTimespec(future)};
  for (size_t i = 0; i < stale.size(); ++i) {
    ASSERT_EQ(::utimensat(AT_FDCWD, stale[i].c_str(), i % 2 == 0 ? old_times : future_times, 0), 0);
  }
  for (const std::string& path : kept) ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), old_times, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, link.c_str(), old_times, AT_SYMLINK_NOFOLLOW), 0);

  BootDependencies dependencies =
      Dependencies([](absl::Duration) { return absl::UnavailableError("connection refused"); });
  ASSERT_THAT(RunBootFlow(config_, dependencies), IsOk());
  for (const std::string& path : stale) EXPECT_FALSE(std::filesystem::exists(path)) << path;
  for (const std::string& path : kept) EXPECT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_TRUE(std::filesystem::exists(fresh));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(ReadTextFile(outside), "not the agent's");
}

}  // namespace
}  // namespace weightpath::agent
