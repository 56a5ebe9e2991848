#include "ctl/rollout_yaml.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_yaml.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::ctl {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

class YamlToJson {
 public:
  explicit YamlToJson(absl::string_view source_name) : source_name_(source_name) {}

  // `where` holds the file's own keys: escaped, a newline in one cannot
  // start a line of its own where the error is printed.
  absl::Status Error(const YAML::Node& node, absl::string_view where, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_name_, ":", node.Mark().line + 1, ": ",
                                                   ControlEscaped(where), ": ",
                                                   ControlEscaped(what)));
  }

  // `message` is the type the node must fill; null for a value whose shape
  // the JSON parser alone judges (map values, scalars of leaf fields).
  absl::Status Convert(const YAML::Node& node, const Descriptor* message, const std::string& where,
                       std::string* json) const {
    if (message != nullptr && IsWellKnown(message)) message = nullptr;
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        json->append("null");
        return absl::OkStatus();
      case YAML::NodeType::Scalar:
        AppendScalar(node, json);
        return absl::OkStatus();
      case YAML::NodeType::Sequence: {
        json->append("[");
        int index = 0;
        for (const YAML::Node& item : node) {
          if (index > 0) json->append(",");
          absl::Status converted = Convert(item, message, absl::StrCat(where, "[", index, "]"), json);
          if (!converted.ok()) return converted;
          ++index;
        }
        json->append("]");
        return absl::OkStatus();
      }
      case YAML::NodeType::Map:
        return ConvertMap(node, message, where, json);
    }
    return Error(node, where, "unsupported YAML node");
  }

 private:
  static bool IsWellKnown(const Descriptor* message) {
    return message->file()->package() == "google.protobuf";
  }

  static const FieldDescriptor* FindField(const Descriptor* message, const std::string& key) {
    if (const FieldDescriptor* field = message->FindFieldByName(key)) return field;
    for (int i = 0; i < message->field_count(); ++i) {
      if (message->field(i)->json_name() == key) return message->field(i);
    }
    return nullptr;
  }

  static std::string KnownKeys(const Descriptor* message) {
    std::vector<std::string> names;
    for (int i = 0; i < message->field_count(); ++i) names.push_back(message->field(i)->name());
    return absl::StrJoin(names, ", ");
  }

  absl::Status ConvertMap(const YAML::Node& node, const Descriptor* message,
                          const std::string& where, std::string* json) const {
    json->append("{");
    bool first = true;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) return Error(entry.first, where, "keys must be plain names");
      const std::string key = entry.first.Scalar();
      const std::string path = absl::StrCat(where, ".", key);
      const Descriptor* value_type = nullptr;
      if (message != nullptr) {
        const FieldDescriptor* field = FindField(message, key);
        if (field == nullptr) {
          return Error(entry.first, path,
                       absl::StrCat("unknown key (", message->name(), " has: ", KnownKeys(message),
                                    ")"));
        }
        // A proto map's keys are the user's (labels), so only its values'
        // type carries on; a message field's keys are checked one level down.
        if (field->is_map()) {
          const FieldDescriptor* map_value = field->message_type()->map_value();
          value_type = map_value->message_type();
          if (!entry.second.IsMap()) return Error(entry.second, path, "must be a map");
          absl::Status converted = ConvertUserMap(entry.second, value_type, path, json, &first, key);
          if (!converted.ok()) return converted;
          continue;
        }
        value_type = field->message_type();
      }
      if (!first) json->append(",");
      first = false;
      AppendString(key, json);
      json->append(":");
      absl::Status converted = Convert(entry.second, value_type, path, json);
      if (!converted.ok()) return converted;
    }
    json->append("}");
    return absl::OkStatus();
  }

  absl::Status ConvertUserMap(const YAML::Node& node, const Descriptor* value_type,
                              const std::string& where, std::string* json, bool* first,
                              const std::string& key) const {
    if (!*first) json->append(",");
    *first = false;
    AppendString(key, json);
    json->append(":{");
    bool first_entry = true;
    for (const auto& entry : node) {
      if (!first_entry) json->append(",");
      first_entry = false;
      const std::string name = entry.first.Scalar();
      AppendString(name, json);
      json->append(":");
      if (value_type == nullptr && entry.second.IsScalar()) {
        // Label values are strings even when they look like numbers (tier: 2).
        AppendString(entry.second.Scalar(), json);
        continue;
      }
      absl::Status converted = Convert(entry.second, value_type, absl::StrCat(where, ".", name), json);
      if (!converted.ok()) return converted;
    }
    json->append("}");
    return absl::OkStatus();
  }

  // Plain scalars keep their YAML meaning (true, 12, 0.05); quoted ones are
  // strings. The JSON parser then checks each against its field's type.
  static void AppendScalar(const YAML::Node& node, std::string* json) {
    const std::string& text = node.Scalar();
    if (node.Tag() != "!") {
      if (text == "true" || text == "false") {
        json->append(text);
        return;
      }
      double number = 0;
      if (!text.empty() && absl::SimpleAtod(text, &number) && text != "inf" && text != "nan" &&
          text.find_first_of("xX") == std::string::npos) {
        json->append(text);
        return;
      }
    }
    AppendString(text, json);
  }

  static void AppendString(const std::string& text, std::string* json) {
    json->push_back('"');
    for (char c : text) {
      switch (c) {
        case '"': json->append("\\\""); break;
        case '\\': json->append("\\\\"); break;
        case '\n': json->append("\\n"); break;
        case '\t': json->append("\\t"); break;
        case '\r': json->append("\\r"); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            json->append(absl::StrCat("\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2)));
          } else {
            json->push_back(c);
          }
      }
    }
    json->push_back('"');
  }

  std::string source_name_;
};

}  // namespace

absl::StatusOr<v1::Rollout> ParseRolloutYaml(absl::string_view yaml_text,
                                             absl::string_view source_name) {
  // A rollout becomes one gRPC message of at most 64 KiB, so a megabyte of
  // text (aliases counted as what they repeat) is far more than enough; the
  // conversion below recurses, which the depth limit bounds.
  yaml::Limits limits;
  limits.max_bytes = 1024 * 1024;
  limits.max_nodes = 50000;
  ASSIGN_OR_RETURN(const YAML::Node document, yaml::LoadBounded(yaml_text, source_name, limits));
  if (!document.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ":1: a rollout file must be a YAML map (id, selector, action, stages, ...)"));
  }
  std::string json;
  const YamlToJson converter(source_name);
  absl::Status converted = converter.Convert(document, v1::Rollout::descriptor(), "rollout", &json);
  if (!converted.ok()) return converted;

  v1::Rollout rollout;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &rollout, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", std::string(parsed.message())));
  }
  return rollout;
}

}  // namespace weightpath::ctl
