// The saved decision file (last_good_decision.json, decision.json): read
// back at boot from a disk a crash or an attacker may have written. Parsed,
// checked for the engine, and, when it passes, turned into the hand-over
// files the engine's unit runs (`eval "exec vllm serve
// $WEIGHTPATH_ENGINE_ARGS"`).
//
// For a decision ValidateForEngine accepts:
//  - it is written back and read back as the same record;
//  - every line of the env file reads back as exactly its value;
//  - $WEIGHTPATH_ENGINE_ARGS, run through eval, does nothing but split into
//    words (no expansion, substitution, globbing, redirection or second
//    command), and those words are exactly the arguments the decision
//    asks for.
// The shell is modelled below for the forms that may occur; anything else
// outside quotes counts as a failure, so the model errs towards refusing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/decision/decision_record.h"
#include "agent/decision/engine_input.h"
#include "agent/engine/handover.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_support.h"

namespace weightpath::fuzz {
namespace {

// The words a POSIX shell's `eval` makes of `text`, or nullopt when it would
// do anything beyond quote removal and splitting at blanks.
std::optional<std::vector<std::string>> ShellWords(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    if (!in_word && (c == '#' || c == '~')) return std::nullopt;  // comment, tilde expansion
    if (c == '\'') {
      const size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos) return std::nullopt;
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '$' || text[j] == '`') return std::nullopt;
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("$`\"\\\n").find(text[j + 1]) != std::string_view::npos) {
          ++j;
        }
        word += text[j];
      }
      if (j >= text.size()) return std::nullopt;
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= text.size() || text[i + 1] == '\n') return std::nullopt;
      word += text[++i];
    } else if (std::string_view("|&;<>()$`*?[\n\r").find(c) != std::string_view::npos ||
               static_cast<unsigned char>(c) < 0x20) {
      return std::nullopt;
    } else {
      word += c;
    }
    in_word = true;
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// A NAME=value line's value as both sh's `.` and systemd's EnvironmentFile=
// read it, for the three forms they agree on: a bare word of characters
// neither treats specially, '...' without a single quote inside, and "..."
// with \ " $ ` escaped. nullopt for anything else.
std::optional<std::string> EnvValue(std::string_view quoted) {
  if (quoted.empty()) return std::string();
  if (quoted.front() == '\'') {
    if (quoted.size() < 2 || quoted.back() != '\'') return std::nullopt;
    const std::string_view inner = quoted.substr(1, quoted.size() - 2);
    if (inner.find('\'') != std::string_view::npos) return std::nullopt;
    return std::string(inner);
  }
  if (quoted.front() == '"') {
    if (quoted.size() < 2 || quoted.back() != '"') return std::nullopt;
    std::string value;
    for (size_t i = 1; i + 1 < quoted.size(); ++i) {
      char c = quoted[i];
      if (c == '\\') {
        if (i + 2 >= quoted.size()) return std::nullopt;
        c = quoted[++i];
        if (std::string_view("\\\"$`").find(c) == std::string_view::npos) return std::nullopt;
      } else if (c == '"' || c == '$' || c == '`') {
        return std::nullopt;
      }
      value += c;
    }
    return value;
  }
  for (char c : quoted) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string_view("_-./:,+@%").find(c) != std::string_view::npos;
    if (!plain) return std::nullopt;
  }
  return std::string(quoted);
}

std::string Scalar(const google::protobuf::Value& value) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kStringValue:
      return value.string_value();
    case google::protobuf::Value::kNumberValue:
      return absl::StrCat(value.number_value());
    case google::protobuf::Value::kBoolValue:
      return value.bool_value() ? "true" : "false";
    default: {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(value, &json);
      return json;
    }
  }
}

// The engine arguments the decision asks for, unquoted (handover.h).
std::vector<std::string> ExpectedArguments(const agent::DecisionRecord& record) {
  const auto& kwargs = record.response.engine_kwargs().fields();
  std::vector<std::string> keys;
  for (const auto& entry : kwargs) keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> args;
  for (const std::string& key : keys) {
    if (key == "model" && !record.artifact_path.empty()) continue;
    const google::protobuf::Value& value = kwargs.at(key);
    const std::string flag = absl::StrCat("--", absl::StrReplaceAll(key, {{"_", "-"}}));
    switch (value.kind_case()) {
      case google::protobuf::Value::kNullValue:
        break;
      case google::protobuf::Value::kBoolValue:
        if (value.bool_value()) args.push_back(flag);
        break;
      case google::protobuf::Value::kListValue:
        args.push_back(flag);
        for (const auto& element : value.list_value().values()) args.push_back(Scalar(element));
        break;
      default:
        args.push_back(flag);
        args.push_back(Scalar(value));
    }
  }
  if (!record.artifact_path.empty()) {
    args.push_back("--model");
    args.push_back(record.artifact_path);
    // The engine serves the model under its name, and a single-file build
    // names its tokenizer, unless the policy's kwargs set either itself.
    const auto set_by_kwargs = [&kwargs](const std::string& underscored,
                                         const std::string& dashed) {
      return kwargs.count(underscored) > 0 || kwargs.count(dashed) > 0;
    };
    if (!record.response.model().empty() &&
        !set_by_kwargs("served_model_name", "served-model-name")) {
      args.push_back("--served-model-name");
      args.push_back(record.response.model());
    }
    if (!record.response.artifact().tokenizer().empty() && !set_by_kwargs("tokenizer", "tokenizer")) {
      args.push_back("--tokenizer");
      args.push_back(record.response.artifact().tokenizer());
    }
  }
  return args;
}

void CheckHandover(const agent::DecisionRecord& record) {
  const std::string engine_args = agent::EngineArgs(record);
  const std::optional<std::vector<std::string>> words = ShellWords(engine_args);
  FUZZ_CHECK(words.has_value(),
             absl::StrCat("eval would do more than split WEIGHTPATH_ENGINE_ARGS: ", engine_args));
  const std::vector<std::string> expected = ExpectedArguments(record);
  FUZZ_CHECK(*words == expected,
             absl::StrCat("engine argv differs: [", absl::StrJoin(*words, "] ["), "] vs [",
                          absl::StrJoin(expected, "] ["), "]"));

  const std::vector<std::pair<std::string, std::string>> values = {
      {"WEIGHTPATH_SOURCE", std::string(agent::DecisionSourceName(record.source))},
      {"WEIGHTPATH_PATH", record.response.weight_path().name()},
      {"WEIGHTPATH_MODEL", record.response.model()},
      {"WEIGHTPATH_ARTIFACT", record.artifact_path},
      {"WEIGHTPATH_QUANTIZATION", record.response.weight_path().quantization()},
      {"WEIGHTPATH_ENGINE_ARGS", engine_args},
  };
  size_t next = 0;
  for (absl::string_view line : absl::StrSplit(agent::EnvFileContents(record), '\n')) {
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    FUZZ_CHECK(next < values.size(), absl::StrCat("unexpected env line: ", line));
    const auto& [name, value] = values[next++];
    FUZZ_CHECK(absl::StartsWith(line, absl::StrCat(name, "=")),
               absl::StrCat("env line out of order: ", line));
    const std::optional<std::string> read = EnvValue(
        std::string_view(line.data() + name.size() + 1, line.size() - name.size() - 1));
    FUZZ_CHECK(read.has_value() && *read == value,
               absl::StrCat("env line does not read back as its value: ", line));
  }
  FUZZ_CHECK(next == values.size(), "env file is missing lines");
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view text = fuzz::Text(data, size);
  absl::StatusOr<agent::DecisionRecord> record =
      agent::DecisionFromJson(absl::string_view(text.data(), text.size()), "fuzz-decision.json");
  if (!record.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(record.status()), record.status().ToString());
    return 0;
  }
  const absl::Status usable = agent::ValidateForEngine(*record);
  if (!usable.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(usable), usable.ToString());
    return 0;
  }
  absl::StatusOr<std::string> written = agent::DecisionToJson(*record);
  FUZZ_CHECK(written.ok(), absl::StrCat("a usable decision cannot be written: ",
                                        written.status().ToString()));
  absl::StatusOr<agent::DecisionRecord> reread = agent::DecisionFromJson(*written, "written.json");
  FUZZ_CHECK(reread.ok(), absl::StrCat("a written decision does not read back: ",
                                       reread.status().ToString(), "\n", *written));
  FUZZ_CHECK(reread->source == record->source && reread->artifact_path == record->artifact_path &&
                 google::protobuf::util::MessageDifferencer::Equals(reread->response,
                                                                    record->response),
             absl::StrCat("decision changed on the way back:\n", *written));
  FUZZ_CHECK(agent::ValidateForEngine(*reread).ok(), "the written decision is no longer usable");
  fuzz::CheckHandover(*record);
  return 0;
}
