#include "agent/decision/decision_record.h"

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/decision/engine_input.h"
#include "agent/base/local_file.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::agent {
namespace {

constexpr char kArtifactPathField[] = "artifact_path";
constexpr char kDecisionSourceField[] = "decision_source";

absl::Status FromProtobufStatus(const google::protobuf::util::Status& status,
                                absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(context, ": ", status.message().as_string()));
}

absl::StatusOr<DecisionSource> ParseDecisionSource(absl::string_view name) {
  if (name == "server") return DecisionSource::kServer;
  if (name == "last_good") return DecisionSource::kLastGood;
  if (name == "offline") return DecisionSource::kOffline;
  return absl::InvalidArgumentError(absl::StrCat(
      kDecisionSourceField, ": '", name, "' is not server, last_good or offline"));
}

}  // namespace

absl::string_view DecisionSourceName(DecisionSource source) {
  switch (source) {
    case DecisionSource::kServer:
      return "server";
    case DecisionSource::kLastGood:
      return "last_good";
    case DecisionSource::kOffline:
      return "offline";
  }
  return "unknown";
}

absl::StatusOr<std::string> DecisionToJson(const DecisionRecord& record) {
  google::protobuf::util::JsonPrintOptions compact;
  compact.preserve_proto_field_names = true;
  std::string response_json;
  RETURN_IF_ERROR(FromProtobufStatus(
      google::protobuf::util::MessageToJsonString(record.response, &response_json, compact),
      "decision"));
  // Going through Struct adds the two agent fields beside the response's
  // own instead of nesting it, so the engine side reads one flat object.
  google::protobuf::Struct document;
  RETURN_IF_ERROR(FromProtobufStatus(
      google::protobuf::util::JsonStringToMessage(response_json, &document), "decision"));
  (*document.mutable_fields())[kArtifactPathField].set_string_value(record.artifact_path);
  (*document.mutable_fields())[kDecisionSourceField].set_string_value(
      std::string(DecisionSourceName(record.source)));
  google::protobuf::util::JsonPrintOptions readable;
  readable.add_whitespace = true;
  std::string json;
  RETURN_IF_ERROR(FromProtobufStatus(
      google::protobuf::util::MessageToJsonString(document, &json, readable), "decision"));
  return json;
}

absl::StatusOr<DecisionRecord> DecisionFromJson(absl::string_view json,
                                                absl::string_view source_name) {
  google::protobuf::Struct document;
  RETURN_IF_ERROR(FromProtobufStatus(
      google::protobuf::util::JsonStringToMessage(google::protobuf::StringPiece(json.data(), json.size()),
                                                  &document),
      source_name));
  auto& fields = *document.mutable_fields();
  DecisionRecord record;
  auto source = fields.find(kDecisionSourceField);
  if (source == fields.end() || source->second.kind_case() != google::protobuf::Value::kStringValue) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", kDecisionSourceField, " missing or not a string"));
  }
  absl::StatusOr<DecisionSource> parsed_source = ParseDecisionSource(source->second.string_value());
  if (!parsed_source.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", parsed_source.status().message()));
  }
  record.source = *parsed_source;
  auto artifact_path = fields.find(kArtifactPathField);
  if (artifact_path != fields.end()) {
    if (artifact_path->second.kind_case() != google::protobuf::Value::kStringValue) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": ", kArtifactPathField, " is not a string"));
    }
    record.artifact_path = artifact_path->second.string_value();
  }
  fields.erase(kDecisionSourceField);
  fields.erase(kArtifactPathField);
  std::string response_json;
  RETURN_IF_ERROR(FromProtobufStatus(
      google::protobuf::util::MessageToJsonString(document, &response_json), source_name));
  RETURN_IF_ERROR(FromProtobufStatus(
      google::protobuf::util::JsonStringToMessage(response_json, &record.response), source_name));
  return record;
}

absl::StatusOr<DecisionRecord> ReadDecisionFile(const std::string& path) {
  // A decision is a few KiB; anything that is not a plain file of sane size
  // (a FIFO, /dev/zero behind a symlink) is refused before it is read.
  constexpr size_t kMaxDecisionFileBytes = 4 << 20;
  ASSIGN_OR_RETURN(std::string contents, ReadLocalFile(path, "decision", kMaxDecisionFileBytes));
  ASSIGN_OR_RETURN(DecisionRecord record, DecisionFromJson(contents, path));
  // A file is only as trustworthy as the directory it sits in: one that the
  // agent would never have handed over (edited, or written by an older agent
  // that did not check) is not a decision to repeat.
  if (absl::Status usable = ValidateForEngine(record); !usable.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", usable.message()));
  }
  return record;
}

}  // namespace weightpath::agent
