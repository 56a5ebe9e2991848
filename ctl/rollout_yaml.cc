#include "ctl/rollout_yaml.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bounded_yaml.h"
#include "common/strict_yaml.h"
#include "common/status_macros.h"
#include "deploy/rollout_validation.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::ctl {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Rollout YAML to the JSON of a v1::Rollout: the keys are checked against
// the message each mapping fills, the values' types are left to the JSON
// parser.
class YamlToJson {
 public:
  explicit YamlToJson(absl::string_view source_name) : reader_(source_name) {}

  // `message` is the type the entry's value must fill; null for a value
  // whose shape the JSON parser alone judges (map values, scalars of leaf
  // fields).
  absl::Status Convert(const yaml::Entry& entry, const Descriptor* message,
                       std::string* json) const {
    if (message != nullptr && IsWellKnown(message)) message = nullptr;
    switch (entry.value.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        json->append("null");
        return absl::OkStatus();
      case YAML::NodeType::Scalar:
        AppendScalar(entry.value, json);
        return absl::OkStatus();
      case YAML::NodeType::Sequence: {
        ASSIGN_OR_RETURN(const std::vector<yaml::Entry> items, yaml::ReadList(reader_, entry));
        json->append("[");
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) json->append(",");
          RETURN_IF_ERROR(Convert(items[i], message, json));
        }
        json->append("]");
        return absl::OkStatus();
      }
      case YAML::NodeType::Map:
        return ConvertMap(entry, message, json);
    }
    return yaml::Fault(reader_, entry, "unsupported YAML node");
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

  // Rollout fields the server keeps (its progress and its counts): a file
  // that sets them would be claiming a state it cannot have.
  static bool IsServerSet(const Descriptor* message, const FieldDescriptor* field) {
    return message == v1::Rollout::descriptor() && deploy::IsServerSetRolloutField(*field);
  }

  static std::vector<absl::string_view> FieldNames(const Descriptor* message) {
    std::vector<absl::string_view> names;
    for (int i = 0; i < message->field_count(); ++i) {
      if (!IsServerSet(message, message->field(i))) names.push_back(message->field(i)->name());
    }
    return names;
  }

  absl::Status ConvertMap(const yaml::Entry& entry, const Descriptor* message,
                          std::string* json) const {
    ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::ReadAnyKeys(reader_, entry));
    json->append("{");
    bool first = true;
    for (const yaml::Entry& field_entry : map.entries()) {
      const Descriptor* value_type = nullptr;
      if (message != nullptr) {
        const FieldDescriptor* field = FindField(message, field_entry.key);
        if (field == nullptr) return yaml::UnknownKey(reader_, field_entry, FieldNames(message));
        if (IsServerSet(message, field)) {
          return yaml::Fault(reader_, field_entry,
                             "is set by the server (a rollout's progress and counts), not by a "
                             "rollout file; remove it");
        }
        // A proto map's keys are the user's (labels), so only its values'
        // type carries on; a message field's keys are checked one level down.
        if (field->is_map()) {
          const Descriptor* map_value_type = field->message_type()->map_value()->message_type();
          RETURN_IF_ERROR(ConvertUserMap(field_entry, map_value_type, json, &first));
          continue;
        }
        value_type = field->message_type();
      }
      if (!first) json->append(",");
      first = false;
      AppendString(field_entry.key, json);
      json->append(":");
      RETURN_IF_ERROR(Convert(field_entry, value_type, json));
    }
    json->append("}");
    return absl::OkStatus();
  }

  absl::Status ConvertUserMap(const yaml::Entry& entry, const Descriptor* value_type,
                              std::string* json, bool* first) const {
    ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::ReadAnyKeys(reader_, entry));
    if (!*first) json->append(",");
    *first = false;
    AppendString(entry.key, json);
    json->append(":{");
    bool first_entry = true;
    for (const yaml::Entry& user_entry : map.entries()) {
      if (!first_entry) json->append(",");
      first_entry = false;
      AppendString(user_entry.key, json);
      json->append(":");
      if (value_type == nullptr && user_entry.value.IsScalar()) {
        // Label values are strings even when they look like numbers (tier: 2).
        AppendString(user_entry.value.Scalar(), json);
        continue;
      }
      RETURN_IF_ERROR(Convert(user_entry, value_type, json));
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

  const yaml::Reader reader_;
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
  RETURN_IF_ERROR(converter.Convert(yaml::Entry{"", "rollout", YAML::Mark::null_mark(), document},
                                    v1::Rollout::descriptor(), &json));

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
