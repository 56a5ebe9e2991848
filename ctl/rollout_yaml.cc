#include "ctl/rollout_yaml.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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
      const FieldDescriptor* field = nullptr;
      if (message != nullptr) {
        field = FindField(message, field_entry.key);
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
      if (field != nullptr && value_type == nullptr) {
        RETURN_IF_ERROR(ConvertLeaf(field_entry, *field, json));
        continue;
      }
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

  // A field of a scalar type (or a list of them): each value is checked
  // here, where its line is known, so that the JSON parser after us never
  // has to refuse one with only a type URL to say where.
  absl::Status ConvertLeaf(const yaml::Entry& entry, const FieldDescriptor& field,
                           std::string* json) const {
    if (field.is_repeated() && entry.value.IsSequence()) {
      ASSIGN_OR_RETURN(const std::vector<yaml::Entry> items, yaml::ReadList(reader_, entry));
      json->append("[");
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) json->append(",");
        RETURN_IF_ERROR(ConvertScalar(items[i], field, json));
      }
      json->append("]");
      return absl::OkStatus();
    }
    return ConvertScalar(entry, field, json);
  }

  absl::Status ConvertScalar(const yaml::Entry& entry, const FieldDescriptor& field,
                             std::string* json) const {
    if (entry.value.IsNull() || !entry.value.IsDefined()) {
      json->append("null");
      return absl::OkStatus();
    }
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_ENUM: {
        ASSIGN_OR_RETURN(const std::string name, EnumValueName(entry, *field.enum_type()));
        AppendString(name, json);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        ASSIGN_OR_RETURN(const bool value, yaml::ReadBool(reader_, entry));
        json->append(value ? "true" : "false");
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64: {
        const bool is_unsigned = field.cpp_type() == FieldDescriptor::CPPTYPE_UINT32 ||
                                 field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
        const bool is_32 = field.cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
                           field.cpp_type() == FieldDescriptor::CPPTYPE_UINT32;
        const int64_t max = is_32 ? (is_unsigned ? int64_t{0xFFFFFFFF} : int64_t{0x7FFFFFFF})
                                  : std::numeric_limits<int64_t>::max();
        const int64_t min = is_unsigned ? 0 : (is_32 ? -int64_t{0x80000000}
                                                     : std::numeric_limits<int64_t>::min());
        ASSIGN_OR_RETURN(const int64_t value, yaml::ReadInt64(reader_, entry, min, max));
        json->append(absl::StrCat(value));
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        ASSIGN_OR_RETURN(const double value, yaml::ReadDouble(reader_, entry));
        json->append(absl::StrFormat("%.17g", value));
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        // A version like 2026.12 is text to the message, whatever YAML
        // would make of it.
        ASSIGN_OR_RETURN(const std::string text, yaml::ReadString(reader_, entry));
        AppendString(text, json);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        break;
    }
    return Convert(entry, nullptr, json);
  }

  // The value names an operator writes for an enum: the proto name
  // (PRIORITY_FIDELITY), or the part after the enum's prefix in any case,
  // with or without underscores (FIDELITY, fidelity; NOT_IN, NotIn), the
  // spellings the agent config and Kubernetes selectors use. The zero
  // value means "unset" and is no choice.
  absl::StatusOr<std::string> EnumValueName(const yaml::Entry& entry,
                                            const google::protobuf::EnumDescriptor& type) const {
    ASSIGN_OR_RETURN(const std::string text,
                     yaml::ReadScalar(reader_, entry, absl::StrCat("a ", type.name())));
    const std::string prefix = EnumPrefix(type);
    const std::string wanted = Folded(text);
    std::vector<std::string> short_names;
    std::vector<std::string> full_names;
    for (int i = 0; i < type.value_count(); ++i) {
      const google::protobuf::EnumValueDescriptor& value = *type.value(i);
      if (value.number() == 0) continue;
      const std::string short_name = absl::AsciiStrToLower(
          absl::StartsWith(value.name(), prefix) ? value.name().substr(prefix.size())
                                                 : value.name());
      if (wanted == Folded(value.name()) || wanted == Folded(short_name)) return value.name();
      short_names.push_back(short_name);
      full_names.push_back(value.name());
    }
    return yaml::Fault(reader_, entry,
                       absl::StrCat("'", text, "' is not a ", type.name(), "; accepted: ",
                                    absl::StrJoin(short_names, ", "), " (any case, or ",
                                    absl::StrJoin(full_names, ", "), ")"));
  }

  // "PRIORITY_" for Priority: what its zero value's name has before
  // UNSPECIFIED; "" when it has no such value.
  static std::string EnumPrefix(const google::protobuf::EnumDescriptor& type) {
    const google::protobuf::EnumValueDescriptor* zero = type.FindValueByNumber(0);
    if (zero == nullptr || !absl::EndsWith(zero->name(), "UNSPECIFIED")) return "";
    return zero->name().substr(0, zero->name().size() - std::string("UNSPECIFIED").size());
  }

  static std::string Folded(absl::string_view text) {
    std::string folded;
    for (char c : text) {
      if (c != '_' && c != '-') folded.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    }
    return folded;
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
