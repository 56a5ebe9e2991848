#include "agent/decision/engine_input.h"

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"

namespace weightpath::agent {
namespace {

constexpr size_t kMaxFlagNameBytes = 128;

bool IsControl(char c) {
  const unsigned char byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

// The first control character of `text`, as the error shows it.
absl::Status RefuseControlCharacters(absl::string_view text, absl::string_view field) {
  for (char c : text) {
    if (!IsControl(c)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": holds the control character 0x",
                     absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2), " (\"",
                     absl::CHexEscape(text.substr(0, 64)), text.size() > 64 ? "..." : "",
                     "\"), which cannot be passed to the engine's unit safely"));
  }
  return absl::OkStatus();
}

absl::Status CheckArgument(const std::string& text, const std::string& field) {
  if (absl::Status status = RefuseControlCharacters(text, field); !status.ok()) return status;
  if (!text.empty() && text[0] == '-') {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", absl::CHexEscape(text.substr(0, 64)),
        "\" starts with '-', which the engine's argument parser would take for an option"));
  }
  return absl::OkStatus();
}

// `is_argv_element`: the value reaches the engine as one argv element of
// its own (a scalar, or an element of a top-level list). Anything nested
// deeper travels inside a JSON argument, where JSON escapes every string,
// so only its numbers need checking: a non-finite one has no JSON form.
absl::Status CheckValue(const google::protobuf::Value& value, const std::string& field,
                        bool is_argv_element) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kNumberValue:
      if (!std::isfinite(value.number_value())) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": ", value.number_value(), " is not a finite number"));
      }
      return absl::OkStatus();
    case google::protobuf::Value::kStringValue:
      return is_argv_element ? CheckArgument(value.string_value(), field) : absl::OkStatus();
    case google::protobuf::Value::kListValue: {
      const auto& values = value.list_value().values();
      for (int i = 0; i < values.size(); ++i) {
        absl::Status status = CheckValue(values[i], absl::StrCat(field, "[", i, "]"), false);
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    }
    case google::protobuf::Value::kStructValue:
      for (const auto& [key, nested] : value.struct_value().fields()) {
        absl::Status status =
            CheckValue(nested, absl::StrCat(field, ".", absl::CHexEscape(key)), false);
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

// One engine_kwargs entry, as AppendKwarg in handover.cc turns it into argv:
// a list spreads into one argument per element, anything else is one.
absl::Status CheckKwarg(const std::string& key, const google::protobuf::Value& value) {
  const std::string field = absl::StrCat("engine_kwargs.", key);
  if (value.kind_case() != google::protobuf::Value::kListValue) {
    return CheckValue(value, field, true);
  }
  const auto& values = value.list_value().values();
  for (int i = 0; i < values.size(); ++i) {
    absl::Status status = CheckValue(values[i], absl::StrCat(field, "[", i, "]"), true);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

bool IsEngineFlagName(absl::string_view key) {
  if (key.empty() || key.size() > kMaxFlagNameBytes) return false;
  if (!absl::ascii_isalnum(static_cast<unsigned char>(key[0]))) return false;
  for (char c : key) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

absl::Status ValidateForEngine(const DecisionRecord& record) {
  const v1::ResolveWeightPathResponse& response = record.response;
  for (const auto& [key, value] : response.engine_kwargs().fields()) {
    if (!IsEngineFlagName(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "engine_kwargs: key \"", absl::CHexEscape(key.substr(0, 128)),
          key.size() > 128 ? "..." : "",
          "\" is not a flag name (1 to 128 letters, digits, '_' or '-', starting with a letter "
          "or digit); the engine's unit would hand it to the shell unquoted"));
    }
    if (absl::Status status = CheckKwarg(key, value); !status.ok()) return status;
  }
  // Everything else that the env file carries as a value.
  struct Field {
    const char* name;
    const std::string* value;
  };
  for (const Field& field :
       {Field{"weight_path.name", &response.weight_path().name()},
        Field{"weight_path.quantization", &response.weight_path().quantization()},
        Field{"model", &response.model()}, Field{"artifact_path", &record.artifact_path}}) {
    if (absl::Status status = RefuseControlCharacters(*field.value, field.name); !status.ok()) {
      return status;
    }
  }
  // Arguments of their own on the engine's command line (hand-over's
  // --served-model-name and --tokenizer).
  for (const Field& field : {Field{"model", &response.model()},
                             Field{"artifact.tokenizer", &response.artifact().tokenizer()}}) {
    if (absl::Status status = CheckArgument(*field.value, field.name); !status.ok()) return status;
  }
  // The decision file is the record of what the engine runs: a decision with
  // no JSON form (a non-finite number anywhere) could not be written.
  if (absl::StatusOr<std::string> json = DecisionToJson(record); !json.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the decision has no JSON form: ", json.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace weightpath::agent
