#include "policy/profile_json.h"

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "policy/absl_view.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::policy {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// JSON numbers arrive as doubles; integers above 2^53 cannot be told apart
// from their neighbours, which no real byte count reaches.
constexpr double kLargestExactInteger = 9007199254740992.0;

absl::string_view JsonKind(const Value& value) {
  switch (value.kind_case()) {
    case Value::kNullValue:
      return "null";
    case Value::kNumberValue:
      return "a number";
    case Value::kStringValue:
      return "a string";
    case Value::kBoolValue:
      return "a boolean";
    case Value::kStructValue:
      return "an object";
    case Value::kListValue:
      return "a list";
    case Value::KIND_NOT_SET:
      return "nothing";
  }
  return "nothing";
}

class JsonFieldReader {
 public:
  explicit JsonFieldReader(absl::string_view source_name) : source_name_(source_name) {}

  absl::Status WrongType(absl::string_view field, const Value& value,
                         absl::string_view expected) const {
    return absl::InvalidArgumentError(absl::StrCat(source_name_, ": field '", field,
                                                   "': expected ", expected, ", got ",
                                                   JsonKind(value)));
  }

  absl::Status Read(absl::string_view field, const Value& value, std::string* out) const {
    if (value.kind_case() != Value::kStringValue) return WrongType(field, value, "a string");
    *out = value.string_value();
    return absl::OkStatus();
  }

  absl::Status Read(absl::string_view field, const Value& value, bool* out) const {
    if (value.kind_case() != Value::kBoolValue) return WrongType(field, value, "true or false");
    *out = value.bool_value();
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> ReadUnsigned(absl::string_view field, const Value& value,
                                        double largest) const {
    if (value.kind_case() == Value::kStringValue) {
      // Protobuf's own JSON writes 64-bit integers as decimal strings; a
      // profile printed that way must read back.
      uint64_t parsed = 0;
      if (!absl::SimpleAtoi(value.string_value(), &parsed) ||
          static_cast<double>(parsed) > largest) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_name_, ": field '", field,
                         "': expected a non-negative integer up to ", largest, ", got \"",
                         value.string_value(), "\""));
      }
      return parsed;
    }
    if (value.kind_case() != Value::kNumberValue) {
      return WrongType(field, value, "a non-negative integer");
    }
    double number = value.number_value();
    if (number < 0 || number != std::floor(number) || number > largest) {
      return absl::InvalidArgumentError(absl::StrCat(source_name_, ": field '", field,
                                                     "': expected a non-negative integer up to ",
                                                     largest, ", got ", number));
    }
    return static_cast<uint64_t>(number);
  }

  absl::Status Read(absl::string_view field, const Value& value, uint32_t* out) const {
    ASSIGN_OR_RETURN(uint64_t number,
                     ReadUnsigned(field, value, std::numeric_limits<uint32_t>::max()));
    *out = static_cast<uint32_t>(number);
    return absl::OkStatus();
  }

  absl::Status Read(absl::string_view field, const Value& value, uint64_t* out) const {
    ASSIGN_OR_RETURN(*out, ReadUnsigned(field, value, kLargestExactInteger));
    return absl::OkStatus();
  }

  // Calls `read_item(item_field, item)` for each element of a JSON list.
  template <typename ReadItem>
  absl::Status ForEach(absl::string_view field, const Value& value, ReadItem read_item) const {
    if (value.kind_case() != Value::kListValue) return WrongType(field, value, "a list");
    const ListValue& list = value.list_value();
    for (int i = 0; i < list.values_size(); ++i) {
      RETURN_IF_ERROR(read_item(absl::StrCat(field, "[", i, "]"), list.values(i)));
    }
    return absl::OkStatus();
  }

  absl::Status ExpectObject(absl::string_view field, const Value& value) const {
    if (value.kind_case() != Value::kStructValue) return WrongType(field, value, "an object");
    return absl::OkStatus();
  }

 private:
  std::string source_name_;
};

// Setter helpers keep the field table below one line per field.
template <typename T, typename Message, typename Setter>
absl::Status ReadInto(const JsonFieldReader& reader, absl::string_view field, const Value& value,
                      Message* message, Setter setter) {
  T parsed{};
  RETURN_IF_ERROR(reader.Read(field, value, &parsed));
  (message->*setter)(parsed);
  return absl::OkStatus();
}

absl::Status ReadCluster(const JsonFieldReader& reader, const std::string& field,
                         const Value& value, v1::CpuCluster* cluster) {
  RETURN_IF_ERROR(reader.ExpectObject(field, value));
  for (const auto& [key, member] : value.struct_value().fields()) {
    if (member.kind_case() == Value::kNullValue) continue;
    const std::string child = absl::StrCat(field, ".", key);
    if (key == "max_khz") {
      RETURN_IF_ERROR(ReadInto<uint64_t>(reader, child, member, cluster,
                                         &v1::CpuCluster::set_max_khz));
    } else if (key == "cpus") {
      RETURN_IF_ERROR(reader.ForEach(child, member, [&](const std::string& item_field,
                                                        const Value& item) {
        uint32_t cpu = 0;
        RETURN_IF_ERROR(reader.Read(item_field, item, &cpu));
        cluster->add_cpus(cpu);
        return absl::OkStatus();
      }));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadAccelerator(const JsonFieldReader& reader, const std::string& field,
                             const Value& value, v1::AcceleratorInfo* info) {
  RETURN_IF_ERROR(reader.ExpectObject(field, value));
  using Info = v1::AcceleratorInfo;
  using StringSetter = void (Info::*)(const std::string&);
  const std::pair<absl::string_view, StringSetter> kStrings[] = {
      {"kind", &Info::set_kind},     {"vendor", &Info::set_vendor}, {"name", &Info::set_name},
      {"source", &Info::set_source}, {"reason", &Info::set_reason}, {"route", &Info::set_route},
      {"driver", &Info::set_driver},
  };
  for (const auto& [key, member] : value.struct_value().fields()) {
    if (member.kind_case() == Value::kNullValue) continue;
    const std::string child = absl::StrCat(field, ".", key);
    if (key == "usable") {
      RETURN_IF_ERROR(ReadInto<bool>(reader, child, member, info, &Info::set_usable));
      continue;
    }
    for (const auto& [name, setter] : kStrings) {
      if (key == name) {
        std::string text;
        RETURN_IF_ERROR(reader.Read(child, member, &text));
        (info->*setter)(text);
      }
    }
  }
  return absl::OkStatus();
}

// A GPU is read with protobuf's own JSON reader: its fields are the
// probe's, printed by protobuf, and none is one the seed's files used.
absl::Status ReadGpu(const JsonFieldReader& reader, const std::string& field, const Value& value,
                     v1::GpuDevice* gpu) {
  RETURN_IF_ERROR(reader.ExpectObject(field, value));
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(value, &json).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": cannot be read"));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // newer probes keep working with older tools
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, gpu, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": not a GPU: ", std::string(parsed.message())));
  }
  return absl::OkStatus();
}

absl::Status ReadStrings(const JsonFieldReader& reader, absl::string_view field,
                         const Value& value, google::protobuf::RepeatedPtrField<std::string>* out) {
  return reader.ForEach(field, value, [&](const std::string& item_field, const Value& item) {
    std::string text;
    RETURN_IF_ERROR(reader.Read(item_field, item, &text));
    out->Add(std::move(text));
    return absl::OkStatus();
  });
}

absl::Status ReadProfileField(const JsonFieldReader& reader, const std::string& key,
                              const Value& value, v1::HardwareProfile* profile) {
  using P = v1::HardwareProfile;
  using StringSetter = void (P::*)(const std::string&);
  static const std::pair<absl::string_view, StringSetter> kStrings[] = {
      {"arch", &P::set_arch},         {"cpu_model", &P::set_cpu_model},
      {"accelerator", &P::set_accelerator}, {"gpu_name", &P::set_gpu_name},
      {"host_os", &P::set_host_os},   {"source", &P::set_source},
      {"gpu_driver_version", &P::set_gpu_driver_version},
      {"cuda_driver_version", &P::set_cuda_driver_version},
      {"l4t_release", &P::set_l4t_release},
      {"cuda_visible_devices", &P::set_cuda_visible_devices},
      {"gpu_inventory_source", &P::set_gpu_inventory_source},
  };
  using Uint32Setter = void (P::*)(uint32_t);
  static const std::pair<absl::string_view, Uint32Setter> kUint32s[] = {
      {"n_logical", &P::set_n_logical},       {"n_physical", &P::set_n_physical},
      {"numa_nodes", &P::set_numa_nodes},     {"gpu_sm_count", &P::set_gpu_sm_count},
      {"thermal_zones", &P::set_thermal_zones}, {"l4t_major", &P::set_l4t_major},
  };
  using Uint64Setter = void (P::*)(uint64_t);
  static const std::pair<absl::string_view, Uint64Setter> kUint64s[] = {
      {"ram_total_bytes", &P::set_ram_total_bytes},
      {"ram_available_bytes", &P::set_ram_available_bytes},
      {"gpu_mem_bytes", &P::set_gpu_mem_bytes},
  };
  using BoolSetter = void (P::*)(bool);
  static const std::pair<absl::string_view, BoolSetter> kBools[] = {
      {"supports_bf16", &P::set_supports_bf16},
      {"supports_fp16", &P::set_supports_fp16},
  };

  for (const auto& [name, setter] : kStrings) {
    if (key == name) {
      std::string text;
      RETURN_IF_ERROR(reader.Read(key, value, &text));
      (profile->*setter)(text);
      return absl::OkStatus();
    }
  }
  for (const auto& [name, setter] : kUint32s) {
    if (key == name) return ReadInto<uint32_t>(reader, key, value, profile, setter);
  }
  for (const auto& [name, setter] : kUint64s) {
    if (key == name) return ReadInto<uint64_t>(reader, key, value, profile, setter);
  }
  for (const auto& [name, setter] : kBools) {
    if (key == name) return ReadInto<bool>(reader, key, value, profile, setter);
  }
  if (key == "cpu_flags") return ReadStrings(reader, key, value, profile->mutable_cpu_flags());
  if (key == "probe_notes") {
    return ReadStrings(reader, key, value, profile->mutable_probe_notes());
  }
  if (key == "gpu_capability") {
    return reader.ForEach(key, value, [&](const std::string& item_field, const Value& item) {
      uint32_t part = 0;
      RETURN_IF_ERROR(reader.Read(item_field, item, &part));
      profile->add_gpu_capability(part);
      return absl::OkStatus();
    });
  }
  if (key == "clusters") {
    return reader.ForEach(key, value, [&](const std::string& item_field, const Value& item) {
      return ReadCluster(reader, item_field, item, profile->add_clusters());
    });
  }
  if (key == "gpus_probed_unix_seconds") {
    uint64_t seconds = 0;
    RETURN_IF_ERROR(reader.Read(key, value, &seconds));
    profile->set_gpus_probed_unix_seconds(static_cast<int64_t>(seconds));
    return absl::OkStatus();
  }
  if (key == "gpus") {
    return reader.ForEach(key, value, [&](const std::string& item_field, const Value& item) {
      return ReadGpu(reader, item_field, item, profile->add_gpus());
    });
  }
  if (key == "accelerators") {
    return reader.ForEach(key, value, [&](const std::string& item_field, const Value& item) {
      return ReadAccelerator(reader, item_field, item, profile->add_accelerators());
    });
  }
  // Keys this build does not know are ignored, as the seed's from_dict did,
  // so newer probes keep working with older tools.
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::HardwareProfile> ParseProfileJson(std::string_view json_text,
                                                     std::string_view source_text) {
  const absl::string_view json = AbslView(json_text);
  const absl::string_view source_name = AbslView(source_text);
  if (absl::StripAsciiWhitespace(json).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": empty, expected a JSON object"));
  }
  Value document;
  google::protobuf::util::JsonParseOptions options;
  auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &document, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": not valid JSON: ", std::string(parsed.message())));
  }
  if (document.kind_case() != Value::kStructValue) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": expected a JSON object at the top level, got ", JsonKind(document)));
  }
  JsonFieldReader reader(source_name);
  v1::HardwareProfile profile;
  // Map iteration order is unspecified; read in key order so the first error
  // reported for a file is always the same one.
  std::vector<std::string> keys;
  for (const auto& [key, value] : document.struct_value().fields()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    const Value& value = document.struct_value().fields().at(key);
    if (value.kind_case() == Value::kNullValue) continue;  // null means unset
    RETURN_IF_ERROR(ReadProfileField(reader, key, value, &profile));
  }
  return profile;
}

absl::StatusOr<v1::Priority> ParsePriority(std::string_view priority_text) {
  const absl::string_view text = AbslView(priority_text);
  const std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lowered == "speed") return v1::PRIORITY_SPEED;
  if (lowered == "fidelity") return v1::PRIORITY_FIDELITY;
  return absl::InvalidArgumentError(
      absl::StrCat("priority '", text, "' is not one of: speed, fidelity"));
}

absl::StatusOr<Labels> ParseLabels(std::string_view labels_text) {
  const absl::string_view text = AbslView(labels_text);
  Labels labels;
  if (absl::StripAsciiWhitespace(text).empty()) return labels;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    const size_t equals = item.find('=');
    if (equals == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: item '", item, "' is not key=value"));
    }
    const std::string key(absl::StripAsciiWhitespace(item.substr(0, equals)));
    const std::string value(absl::StripAsciiWhitespace(item.substr(equals + 1)));
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("labels: item '", item, "' has an empty key"));
    }
    if (value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: key '", key, "' has an empty value"));
    }
    if (!labels.insert({key, value}).second) {
      return absl::InvalidArgumentError(absl::StrCat("labels: key '", key, "' is given twice"));
    }
  }
  return labels;
}

}  // namespace weightpath::policy
