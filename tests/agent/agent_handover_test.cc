#include "agent/engine/handover.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "agent/decision/decision_record.h"
#include "agent/decision/engine_input.h"
#include "agent/decision/last_good_store.h"
#include "agent/engine/shell_quote.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/agent/engine_unit.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::EngineLaunch;
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
                                "/var/cache/weightpath/" + std::string(64, 'a') +
                                " --served-model-name Spark-X2.5-1.7B");
}

TEST(AgentHandover, ADirectoryBuildIsTheModelAndTheEngineServesItUnderTheModelsName) {
  DecisionRecord record = SampleRecord("/var/cache/weightpath/builds/" + std::string(64, 'b'));
  v1::Artifact& artifact = *record.response.mutable_artifact();
  artifact.clear_uri();
  v1::BuildFile* config = artifact.add_files();
  config->set_path("config.json");
  config->set_sha256(std::string(64, 'c'));
  config->set_size_bytes(700);
  config->set_uri("https://weights.example/b/config.json");
  EXPECT_EQ(EngineArgs(record), "--quantization gptq --model /var/cache/weightpath/builds/" +
                                    std::string(64, 'b') + " --served-model-name Spark-X2.5-1.7B");
  // The policy may name the served model itself.
  (*record.response.mutable_engine_kwargs()->mutable_fields())["served_model_name"]
      .set_string_value("spark");
  EXPECT_EQ(EngineArgs(record), "--quantization gptq --served-model-name spark --model "
                                "/var/cache/weightpath/builds/" + std::string(64, 'b'));
}

TEST(AgentHandover, AGgufBuildGetsTheTokenizerTheCatalogNames) {
  DecisionRecord record = SampleRecord("/cache/" + std::string(64, 'a'));
  record.response.mutable_artifact()->set_tokenizer("Spark/Spark-X2.5-1.7B");
  EXPECT_EQ(EngineArgs(record), "--quantization gptq --model /cache/" + std::string(64, 'a') +
                                    " --served-model-name Spark-X2.5-1.7B --tokenizer "
                                    "Spark/Spark-X2.5-1.7B");
  record.response.mutable_artifact()->set_tokenizer("--trust-remote-code");
  EXPECT_THAT(ValidateForEngine(record),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("artifact.tokenizer")));
  record.response.mutable_artifact()->clear_tokenizer();
  record.response.set_model("-evil");
  EXPECT_THAT(ValidateForEngine(record),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model")));
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
  EXPECT_EQ(argv, "<--quantization><gptq><--model><" + awkward_path +
                      "><--served-model-name><Spark-X2.5-1.7B>");
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

TEST(AgentHandover, EnvFileQuoteAvoidsTheFormsSystemdReadsDifferently) {
  EXPECT_EQ(EnvFileQuote("w4a8-amx"), "w4a8-amx");
  EXPECT_EQ(EnvFileQuote(""), "''");
  EXPECT_EQ(EnvFileQuote("two words $HOME"), "'two words $HOME'");
  // No '\'' splicing: systemd would keep the quotes after the first part.
  EXPECT_EQ(EnvFileQuote("it's"), "\"it's\"");
  EXPECT_EQ(EnvFileQuote("a'b\"c$d`e\\f"), "\"a'b\\\"c\\$d\\`e\\\\f\"");
}

// Everything a hostile server could put in a decision that is still a valid
// decision: quotes of both kinds, command substitutions, backticks,
// backslashes, JSON holding all of those.
DecisionRecord HostileButValidRecord(const std::string& artifact_path, const std::string& marker) {
  DecisionRecord record = SampleRecord(artifact_path);
  auto& fields = *record.response.mutable_engine_kwargs()->mutable_fields();
  fields.clear();
  const std::string nasty = absl::StrCat("it's \"q\" $(touch ", marker, ") `touch ", marker,
                                         "` ';touch ", marker, ";' \\ end");
  // First in the sorted line: the first quote is where systemd's reading of
  // sh-style '\'' splicing turns quoted text into unquoted text.
  (*fields["additional_config"].mutable_struct_value()->mutable_fields())["x"].set_string_value(
      absl::StrCat("$(touch ", marker, ")"));
  fields["chat_template"].set_string_value(nasty);
  (*fields["hf_overrides"].mutable_struct_value()->mutable_fields())["x"].set_string_value(
      absl::StrCat("$(touch ", marker, ")'\"\n"));
  auto* names = fields["served_model_name"].mutable_list_value();
  names->add_values()->set_string_value("a b");
  names->add_values()->set_string_value(absl::StrCat("c'd$(touch ", marker, ")"));
  fields["enforce_eager"].set_bool_value(true);
  fields["max_model_len"].set_number_value(8192);
  record.response.set_model(absl::StrCat("m'odel $(touch ", marker, ")"));
  record.response.mutable_weight_path()->set_name(absl::StrCat("`touch ", marker, "`"));
  return record;
}

std::vector<std::string> HostileRecordArgv(const std::string& artifact_path,
                                           const std::string& marker) {
  return {"--additional-config",
          absl::StrCat("{\"x\":\"$(touch ", marker, ")\"}"),
          "--chat-template",
          absl::StrCat("it's \"q\" $(touch ", marker, ") `touch ", marker, "` ';touch ", marker,
                       ";' \\ end"),
          "--enforce-eager",
          "--hf-overrides",
          absl::StrCat("{\"x\":\"$(touch ", marker, ")'\\\"\\n\"}"),
          "--max-model-len",
          "8192",
          "--served-model-name",
          "a b",
          absl::StrCat("c'd$(touch ", marker, ")"),
          "--model",
          artifact_path};
}

// The env file as the shipped unit consumes it, in both ways it can be read:
// sh's `.` and systemd's EnvironmentFile=, then the unit's own `eval`. The
// engine sees exactly the decision's arguments, and nothing runs.
TEST(AgentHandover, HostileValuesReachTheEngineVerbatimAndRunNothing) {
  TempDir dir;
  const std::string marker = dir.Sub("pwned");
  const std::string artifact = dir.Sub("cache dir/it's $here `x` \"y\" \\z");
  const DecisionRecord record = HostileButValidRecord(artifact, marker);
  ASSERT_THAT(ValidateForEngine(record), IsOk());
  ASSERT_THAT(WriteHandover(record, dir.Sub("run/decision.json"), dir.Sub("run/engine.env")),
              IsOk());
  const std::string engine = testing::WriteFakeEngine(dir.path());
  const std::vector<std::string> expected = HostileRecordArgv(artifact, marker);

  const EngineLaunch from_sh = testing::LaunchWithShell(dir.Sub("run/engine.env"), engine);
  EXPECT_EQ(from_sh.exit_code, 0) << from_sh.err;
  EXPECT_THAT(from_sh.argv, ElementsAreArray(expected));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "sh ran a command from the decision";

  absl::StatusOr<std::map<std::string, std::string>> systemd =
      testing::ReadLikeSystemd(dir.Sub("run/engine.env"));
  if (absl::IsUnimplemented(systemd.status())) GTEST_SKIP() << systemd.status();
  ASSERT_THAT(systemd, IsOk());
  EXPECT_EQ(systemd->at("WEIGHTPATH_ARTIFACT"), artifact);
  EXPECT_EQ(systemd->at("WEIGHTPATH_MODEL"), record.response.model());
  EXPECT_EQ(systemd->at("WEIGHTPATH_PATH"), record.response.weight_path().name());
  EXPECT_EQ(systemd->at("WEIGHTPATH_ENGINE_ARGS"), EngineArgs(record));
  const EngineLaunch from_systemd = testing::LaunchWithEnvironment(*systemd, engine);
  EXPECT_EQ(from_systemd.exit_code, 0) << from_systemd.err;
  EXPECT_THAT(from_systemd.argv, ElementsAreArray(expected));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the unit ran a command from the decision";
}

// Every variable reads back the same in sh and in systemd.
TEST(AgentHandover, ShAndSystemdReadTheSameEnvFile) {
  TempDir dir;
  const DecisionRecord record = HostileButValidRecord(dir.Sub("a'b"), dir.Sub("m"));
  WriteTextFile(dir.Sub("engine.env"), EnvFileContents(record));
  absl::StatusOr<std::map<std::string, std::string>> systemd =
      testing::ReadLikeSystemd(dir.Sub("engine.env"));
  if (absl::IsUnimplemented(systemd.status())) GTEST_SKIP() << systemd.status();
  ASSERT_THAT(systemd, IsOk());
  ASSERT_EQ(systemd->size(), 6u);
  for (const auto& [name, value] : *systemd) {
    EXPECT_EQ(RunShell(". " + ShellQuote(dir.Sub("engine.env")) + " && printf '%s' \"$" + name +
                       "\""),
              value)
        << name;
  }
}

// Keys are written as flag names, unquoted: anything but a plain name is
// refused before either file or the last good decision is written.
TEST(AgentHandover, KeysTheShellWouldReadAsCodeAreRefusedBeforeAnythingIsWritten) {
  const std::vector<std::string> hostile_keys = {
      "max_model_len $(touch /tmp/x);x", "a`touch /tmp/x`", "x;reboot", "a b", "x|y",
      "x>y",  "",  "--", "-x", "_x", "é", "a\nb", std::string("a\0b", 3), std::string(129, 'k')};
  for (const std::string& key : hostile_keys) {
    SCOPED_TRACE(absl::CHexEscape(key));
    TempDir dir;
    DecisionRecord record = SampleRecord("/cache/e");
    (*record.response.mutable_engine_kwargs()->mutable_fields())[key].set_number_value(1);
    EXPECT_FALSE(IsEngineFlagName(key));
    EXPECT_THAT(ValidateForEngine(record),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("engine_kwargs: key"), HasSubstr("not a flag name"))));
    EXPECT_THAT(WriteHandover(record, dir.Sub("run/decision.json"), dir.Sub("run/engine.env")),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("engine_kwargs")));
    EXPECT_FALSE(std::filesystem::exists(dir.Sub("run/engine.env")));
    EXPECT_FALSE(std::filesystem::exists(dir.Sub("run/decision.json")));
    EXPECT_THAT(SaveLastGood(record, dir.Sub("state")),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_FALSE(std::filesystem::exists(LastGoodPath(dir.Sub("state"))));
  }
  for (const std::string key : {"max_model_len", "max-num-seqs", "tp2", "0x"}) {
    EXPECT_TRUE(IsEngineFlagName(key)) << key;
  }
}

TEST(AgentHandover, ValuesThatCannotPassThroughTheUnitAreRefusedNamingTheField) {
  struct Case {
    const char* name;
    std::function<void(DecisionRecord&)> poison;
    const char* field;
  };
  auto kwarg = [](DecisionRecord& record, const std::string& key) -> google::protobuf::Value& {
    return (*record.response.mutable_engine_kwargs()->mutable_fields())[key];
  };
  const Case cases[] = {
      {"NUL in a value",
       [&](DecisionRecord& r) {
         kwarg(r, "tokenizer").set_string_value(std::string("a\0b", 3));
       },
       "engine_kwargs.tokenizer"},
      {"newline in a value",
       [&](DecisionRecord& r) { kwarg(r, "tokenizer").set_string_value("a\nrm -rf /"); },
       "engine_kwargs.tokenizer"},
      {"option as a list element",
       [&](DecisionRecord& r) {
         auto* list = kwarg(r, "served_model_name").mutable_list_value();
         list->add_values()->set_string_value("x");
         list->add_values()->set_string_value("--trust-remote-code");
       },
       "engine_kwargs.served_model_name[1]"},
      {"option as a value",
       [&](DecisionRecord& r) { kwarg(r, "tokenizer").set_string_value("-x"); },
       "engine_kwargs.tokenizer"},
      {"NaN",
       [&](DecisionRecord& r) { kwarg(r, "max_model_len").set_number_value(std::nan("")); },
       "engine_kwargs.max_model_len"},
      {"infinity in JSON",
       [&](DecisionRecord& r) {
         (*kwarg(r, "hf_overrides").mutable_struct_value()->mutable_fields())["x"].set_number_value(
             std::numeric_limits<double>::infinity());
       },
       "engine_kwargs.hf_overrides.x"},
      {"carriage return in the model", [](DecisionRecord& r) { r.response.set_model("m\r"); },
       "model"},
      {"escape in the path name",
       [](DecisionRecord& r) { r.response.mutable_weight_path()->set_name("\x1b[2J"); },
       "weight_path.name"},
      {"tab in the quantization",
       [](DecisionRecord& r) { r.response.mutable_weight_path()->set_quantization("a\tb"); },
       "weight_path.quantization"},
      {"DEL in the artifact path", [](DecisionRecord& r) { r.artifact_path = "/cache/\x7f"; },
       "artifact_path"},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    TempDir dir;
    DecisionRecord record = SampleRecord("/cache/f");
    test_case.poison(record);
    EXPECT_THAT(ValidateForEngine(record),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(test_case.field)));
    EXPECT_THAT(WriteHandover(record, dir.Sub("decision.json"), dir.Sub("engine.env")),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_FALSE(std::filesystem::exists(dir.Sub("engine.env")));
  }
}

// A saved decision that could not have been handed over (edited, or saved by
// an agent that did not check) is not a decision to repeat.
TEST(AgentHandover, APoisonedSavedDecisionIsRefusedOnReadNamingTheFileAndKey) {
  TempDir state;
  WriteTextFile(LastGoodPath(state.path()),
                R"json({"decision_source": "server", "artifact_path": "/cache/g", "model": "m",
                        "engine_kwargs": {"x $(touch /tmp/x)": 1}})json");
  EXPECT_THAT(LoadLastGood(state.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(LastGoodPath(state.path())), HasSubstr("engine_kwargs"),
                             HasSubstr("x $(touch /tmp/x)"))));
  EXPECT_THAT(ReadDecisionFile(LastGoodPath(state.path())),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AgentHandover, ADecisionFileThatIsNotARegularFileIsRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  EXPECT_THAT(ReadDecisionFile(dir.Sub("fifo")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a FIFO")));
  EXPECT_THAT(ReadDecisionFile("/dev/zero"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a character device")));
  EXPECT_THAT(ReadDecisionFile(dir.Sub("absent.json")), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace weightpath::agent
