#include "agent/engine/handover.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "agent/base/atomic_file.h"
#include "agent/decision/engine_input.h"
#include "agent/base/local_file.h"
#include "agent/engine/shell_quote.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace weightpath::agent {
namespace {

std::string FlagName(const std::string& key) {
  return absl::StrCat("--", absl::StrReplaceAll(key, {{"_", "-"}}));
}

std::string ScalarText(const google::protobuf::Value& value) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kStringValue:
      return value.string_value();
    case google::protobuf::Value::kNumberValue:
      return absl::StrCat(value.number_value());
    case google::protobuf::Value::kBoolValue:
      return value.bool_value() ? "true" : "false";
    default: {
      // Nested objects reach the engine as JSON, the form vLLM's dict
      // arguments take.
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(value, &json);
      return json;
    }
  }
}

void AppendKwarg(const std::string& key, const google::protobuf::Value& value,
                 std::vector<std::string>* args) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kNullValue:
      return;
    case google::protobuf::Value::kBoolValue:
      if (value.bool_value()) args->push_back(FlagName(key));
      return;
    case google::protobuf::Value::kListValue:
      args->push_back(FlagName(key));
      for (const auto& element : value.list_value().values()) {
        args->push_back(ShellQuote(ScalarText(element)));
      }
      return;
    default:
      args->push_back(FlagName(key));
      args->push_back(ShellQuote(ScalarText(value)));
      return;
  }
}

// Most boots and run passes confirm the decision already handed over; an
// identical file is left alone (no two fsyncs, no flash wear, no mtime
// change for a unit that watches it). The current file is read the bounded
// way, so a hostile path costs at most one byte more than the new contents.
absl::Status ReplaceIfDifferent(const std::string& path, absl::string_view contents) {
  const absl::StatusOr<std::string> current = ReadLocalFile(path, "hand-over", contents.size());
  if (current.ok() && *current == contents) return absl::OkStatus();
  return WriteFileAtomically(path, contents);
}

}  // namespace

std::string EngineArgs(const DecisionRecord& record) {
  const auto& kwargs = record.response.engine_kwargs().fields();
  // protobuf maps iterate in no fixed order; sorted keys keep the line
  // stable from boot to boot.
  std::vector<std::string> keys;
  for (const auto& entry : kwargs) keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> args;
  const bool has_build = !record.artifact_path.empty();
  const auto set_by_kwargs = [&kwargs](absl::string_view flag) {
    return kwargs.count(std::string(flag)) > 0 ||
           kwargs.count(absl::StrReplaceAll(flag, {{"_", "-"}})) > 0;
  };
  for (const std::string& key : keys) {
    if (key == "model" && has_build) continue;  // the artifact decides
    AppendKwarg(key, kwargs.at(key), &args);
  }
  if (has_build) {
    args.push_back("--model");
    args.push_back(ShellQuote(record.artifact_path));
    // The engine's API and metrics carry the model's name, not a cache path
    // that changes with every build (unless the policy names it itself).
    const std::string& model = record.response.model();
    if (!model.empty() && !set_by_kwargs("served_model_name")) {
      args.push_back("--served-model-name");
      args.push_back(ShellQuote(model));
    }
    // A single-file GGUF build holds no tokenizer of its own.
    const std::string& tokenizer = record.response.artifact().tokenizer();
    if (!tokenizer.empty() && !set_by_kwargs("tokenizer")) {
      args.push_back("--tokenizer");
      args.push_back(ShellQuote(tokenizer));
    }
  }
  return absl::StrJoin(args, " ");
}

std::string EnvFileContents(const DecisionRecord& record) {
  const auto& response = record.response;
  std::string contents =
      "# Written by weightpath-agent boot. Source it from sh, or name it in the engine unit's\n"
      "# EnvironmentFile=; WEIGHTPATH_ENGINE_ARGS is quoted for `eval`.\n";
  auto line = [&contents](absl::string_view name, absl::string_view value) {
    absl::StrAppend(&contents, name, "=", EnvFileQuote(value), "\n");
  };
  line("WEIGHTPATH_SOURCE", DecisionSourceName(record.source));
  line("WEIGHTPATH_PATH", response.weight_path().name());
  line("WEIGHTPATH_MODEL", response.model());
  line("WEIGHTPATH_ARTIFACT", record.artifact_path);
  line("WEIGHTPATH_QUANTIZATION", response.weight_path().quantization());
  line("WEIGHTPATH_ENGINE_ARGS", EngineArgs(record));
  return contents;
}

absl::Status WriteHandover(const DecisionRecord& record, const std::string& decision_file,
                           const std::string& env_file) {
  // Callers refuse such a decision on receipt; this is the last line before
  // the engine's shell reads the files.
  RETURN_IF_ERROR(ValidateForEngine(record));
  ASSIGN_OR_RETURN(std::string json, DecisionToJson(record));
  RETURN_IF_ERROR(ReplaceIfDifferent(env_file, EnvFileContents(record)));
  // The JSON's key order is not stable from one write to the next (it goes
  // through a protobuf map), so the decision file is compared as a record.
  const absl::StatusOr<DecisionRecord> current = ReadDecisionFile(decision_file);
  if (current.ok() && current->source == record.source &&
      current->artifact_path == record.artifact_path &&
      google::protobuf::util::MessageDifferencer::Equals(current->response, record.response)) {
    return absl::OkStatus();
  }
  return WriteFileAtomically(decision_file, json);
}

}  // namespace weightpath::agent
