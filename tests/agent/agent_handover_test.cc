#include "agent/handover.h"

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "agent/decision_record.h"
#include "agent/last_good_store.h"
#include "agent/shell_quote.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::HasSubstr;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

// Output of `sh -c script` (the real POSIX shell the engine unit uses).
std::string RunShell(const std::string& script) {
  const std::string command = "/bin/sh -c " + ShellQuote(script);
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  size_t read_bytes = 0;
  while ((read_bytes = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output.append(buffer, read_bytes);
  }
  const int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << script;
  return output;
}

DecisionRecord SampleRecord(const std::string& artifact_path) {
  DecisionRecord record;
  record.source = DecisionSource::kServer;
  record.artifact_path = artifact_path;
  v1::ResolveWeightPathResponse& response = record.response;
  response.set_hardware_class("x86_cpu");
  response.mutable_weight_path()->set_name("w4a8-amx");
  response.mutable_weight_path()->set_quantization("gptq");
  response.mutable_weight_path()->set_bits_per_weight(4.25);
  response.mutable_weight_path()->set_group_size(128);
  response.mutable_artifact()->set_uri("https://weights.example/w4a8.bin");
  response.mutable_artifact()->set_sha256(std::string(64, 'a'));
  response.mutable_artifact()->set_size_bytes(5'000'000'000ULL);
  (*response.mutable_engine_kwargs()->mutable_fields())["quantization"].set_string_value("gptq");
  response.set_effective_priority(v1::PRIORITY_SPEED);
  response.set_policy_version("sha256:0123456789abcdef");
  response.set_matched_rule("x86-amx-speed");
  response.set_model("Spark-X2.5-1.7B");
  return record;
}

TEST(AgentHandover, ShellQuoteLeavesPlainWordsAndQuotesTheRest) {
  EXPECT_EQ(ShellQuote("/var/cache/weightpath/abc"), "/var/cache/weightpath/abc");
  EXPECT_EQ(ShellQuote("two words"), "'two words'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("$HOME;rm -rf /"), "'$HOME;rm -rf /'");
}

TEST(AgentHandover, EngineArgsCarryKwargsThenTheModelPath) {
  DecisionRecord record = SampleRecord("/var/cache/weightpath/" + std::string(64, 'a'));
  auto& fields = *record.response.mutable_engine_kwargs()->mutable_fields();
  fields["enforce_eager"].set_bool_value(true);
  fields["disable_log_stats"].set_bool_value(false);
  fields["max_model_len"].set_number_value(8192);
  EXPECT_EQ(EngineArgs(record), "--enforce-eager --max-model-len 8192 --quantization gptq --model "
                                "/var/cache/weightpath/" + std::string(64, 'a'));
}

TEST(AgentHandover, EngineArgsWithoutArtifactHaveNoModel) {
  EXPECT_EQ(EngineArgs(SampleRecord("")), "--quantization gptq");
}

TEST(AgentHandover, EnvFileSourcesExactlyInAPosixShell) {
  TempDir dir;
  const std::string awkward_path = dir.Sub("cache dir/it's $here");
  const DecisionRecord record = SampleRecord(awkward_path);
  WriteTextFile(dir.Sub("engine.env"), EnvFileContents(record));
  const std::string sourced = RunShell(
      ". " + ShellQuote(dir.Sub("engine.env")) +
      " && printf '%s|%s|%s|%s|%s' \"$WEIGHTPATH_SOURCE\" \"$WEIGHTPATH_PATH\" "
      "\"$WEIGHTPATH_MODEL\" \"$WEIGHTPATH_ARTIFACT\" \"$WEIGHTPATH_QUANTIZATION\"");
  EXPECT_EQ(sourced, "server|w4a8-amx|Spark-X2.5-1.7B|" + awkward_path + "|gptq");
  // eval splits the argument line back into exactly the engine's argv.
  const std::string argv = RunShell(". " + ShellQuote(dir.Sub("engine.env")) +
                                    " && eval \"set -- $WEIGHTPATH_ENGINE_ARGS\" && "
                                    "printf '<%s>' \"$@\"");
  EXPECT_EQ(argv, "<--quantization><gptq><--model><" + awkward_path + ">");
}

TEST(AgentHandover, DecisionJsonUsesProtoFieldNamesAndAddsSourceAndPath) {
  absl::StatusOr<std::string> json = DecisionToJson(SampleRecord("/cache/a"));
  ASSERT_THAT(json, IsOk());
  EXPECT_THAT(*json, HasSubstr("\"decision_source\": \"server\""));
  EXPECT_THAT(*json, HasSubstr("\"artifact_path\": \"/cache/a\""));
  EXPECT_THAT(*json, HasSubstr("\"weight_path\""));
  EXPECT_THAT(*json, HasSubstr("\"hardware_class\": \"x86_cpu\""));
  EXPECT_THAT(*json, HasSubstr("\"size_bytes\": \"5000000000\""));
}

TEST(AgentHandover, DecisionJsonRoundTrips) {
  for (DecisionSource source :
       {DecisionSource::kServer, DecisionSource::kLastGood, DecisionSource::kOffline}) {
    DecisionRecord record = SampleRecord("/cache/b");
    record.source = source;
    absl::StatusOr<std::string> json = DecisionToJson(record);
    ASSERT_THAT(json, IsOk());
    absl::StatusOr<DecisionRecord> parsed = DecisionFromJson(*json, "decision.json");
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(parsed->source, source);
    EXPECT_EQ(parsed->artifact_path, "/cache/b");
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed->response,
                                                                   record.response));
  }
}

TEST(AgentHandover, DecisionJsonWithAnUnknownSourceIsRefused) {
  EXPECT_THAT(DecisionFromJson(R"({"decision_source": "guess", "model": "m"})", "last.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("last.json"), HasSubstr("decision_source"))));
  EXPECT_THAT(DecisionFromJson(R"({"model": "m"})", "last.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("decision_source")));
  EXPECT_THAT(DecisionFromJson("{not json", "last.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("last.json")));
}

TEST(AgentHandover, WriteHandoverWritesBothFiles) {
  TempDir dir;
  const DecisionRecord record = SampleRecord("/cache/c");
  ASSERT_THAT(WriteHandover(record, dir.Sub("run/decision.json"), dir.Sub("run/engine.env")),
              IsOk());
  absl::StatusOr<DecisionRecord> parsed =
      DecisionFromJson(ReadTextFile(dir.Sub("run/decision.json")), "decision.json");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->artifact_path, "/cache/c");
  EXPECT_EQ(ReadTextFile(dir.Sub("run/engine.env")), EnvFileContents(record));
}

TEST(AgentHandover, LastGoodStoreRoundTripsAndReportsAbsence) {
  TempDir state;
  EXPECT_THAT(LoadLastGood(state.path()), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_THAT(SaveLastGood(SampleRecord("/cache/d"), state.path()), IsOk());
  absl::StatusOr<DecisionRecord> loaded = LoadLastGood(state.path());
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->artifact_path, "/cache/d");
  EXPECT_EQ(loaded->response.weight_path().name(), "w4a8-amx");
  WriteTextFile(LastGoodPath(state.path()), "{\"decision_source\": 7}");
  EXPECT_THAT(LoadLastGood(state.path()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("decision_source")));
}

}  // namespace
}  // namespace weightpath::agent
