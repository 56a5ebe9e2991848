#include "ctl/view_output.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "ctl/command.h"
#include "ctl/command_error.h"
#include "ctl/rollout_client.h"
#include "google/protobuf/util/json_util.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::ctl {
namespace {

// JSON is YAML, so the document is re-emitted node by node in block style;
// strings stay quoted where YAML would read them as something else.
void EmitNode(const YAML::Node& node, YAML::Emitter& out) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (const auto& entry : node) {
        out << YAML::Key << entry.first.Scalar() << YAML::Value;
        EmitNode(entry.second, out);
      }
      out << YAML::EndMap;
      return;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) EmitNode(item, out);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Scalar:
      // A JSON string arrives tagged "!" (it was quoted); numbers and
      // booleans come plain and stay plain.
      if (node.Tag() == "!") {
        out << YAML::DoubleQuoted << node.Scalar();
      } else {
        out << node.Scalar();
      }
      return;
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out << YAML::Null;
      return;
  }
}

}  // namespace

std::vector<FlagSpec> ViewFlags(std::vector<FlagSpec> own) {
  own.push_back({"output", 'o', true, "table (default), json or yaml"});
  own.push_back({"help", 'h', false, "show this help"});
  for (FlagSpec& spec : ConnectionFlags()) own.push_back(std::move(spec));
  return own;
}

absl::StatusOr<ViewOutput> ParseViewOutput(const std::optional<std::string>& text) {
  if (!text.has_value() || *text == "table") return ViewOutput::kTable;
  if (*text == "json") return ViewOutput::kJson;
  if (*text == "yaml") return ViewOutput::kYaml;
  return absl::InvalidArgumentError(
      absl::StrCat("-o/--output '", *text, "' is not one of: json, table, yaml"));
}

namespace {

absl::StatusOr<std::string> ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (auto printed = google::protobuf::util::MessageToJsonString(message, &json, options);
      !printed.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the answer: ", printed.ToString()));
  }
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

absl::Status WriteJsonText(const std::string& json, ViewOutput output, std::ostream& out) {
  if (output == ViewOutput::kJson) {
    out << json << "\n";
    return absl::OkStatus();
  }
  YAML::Emitter emitter;
  EmitNode(YAML::Load(json), emitter);
  if (!emitter.good()) {
    return absl::InternalError(absl::StrCat("cannot print YAML: ", emitter.GetLastError()));
  }
  out << emitter.c_str() << "\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteJsonDocument(const std::string& json, ViewOutput output, std::ostream& out) {
  std::string trimmed = json;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  return WriteJsonText(trimmed, output, out);
}

absl::Status WriteMessage(const google::protobuf::Message& message, ViewOutput output,
                          std::ostream& out) {
  absl::StatusOr<std::string> json = ProtoJson(message);
  if (!json.ok()) return json.status();
  return WriteJsonText(*json, output, out);
}

absl::Status WriteMessages(const std::vector<NamedMessage>& messages, ViewOutput output,
                           std::ostream& out) {
  std::string json = "{";
  for (size_t i = 0; i < messages.size(); ++i) {
    absl::StatusOr<std::string> part = ProtoJson(*messages[i].second);
    if (!part.ok()) return part.status();
    absl::StrAppend(&json, i == 0 ? "\n" : ",\n", "\"", messages[i].first, "\": ", *part);
  }
  json += "\n}";
  return WriteJsonText(json, output, out);
}

int ReportServerError(std::string_view command, const absl::Status& status, std::ostream& err) {
  if (ReceivedFrom(status).has_value()) {
    ReportError(command, status, err);
  } else {
    ReportError(command,
                absl::Status(status.code(), absl::StrCat(absl::StatusCodeToString(status.code()),
                                                         ": ", status.message())),
                err);
  }
  return kExitFailure;
}

std::string Counted(uint64_t count, std::string_view singular, std::string_view plural) {
  const std::string_view noun = count == 1 ? singular : plural;
  return absl::StrCat(count, " ", absl::string_view(noun.data(), noun.size()));
}

}  // namespace weightpath::ctl
