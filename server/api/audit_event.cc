#include "server/api/audit_event.h"

#include "absl/strings/str_cat.h"
#include "common/control_characters.h"
#include "common/text_bounds.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace weightpath::server {
namespace {

using google::protobuf::FieldDescriptor;

// The string field `name` of `message`, if it has one.
const FieldDescriptor* StringField(const google::protobuf::Message& message, const char* name) {
  const FieldDescriptor* field = message.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr || field->is_repeated() || field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
    return nullptr;
  }
  return field;
}

}  // namespace

std::string AuditText(absl::string_view text, size_t max_bytes) {
  return CutToBytes(ControlEscaped(text), max_bytes);
}

std::string AuditTarget(const google::protobuf::Message& request) {
  const google::protobuf::Reflection* reflection = request.GetReflection();
  if (const FieldDescriptor* id = StringField(request, "id"); id != nullptr) {
    return AuditText(reflection->GetString(request, id), kAuditFieldMaxBytes);
  }
  const FieldDescriptor* rollout = request.GetDescriptor()->FindFieldByName("rollout");
  if (rollout != nullptr && !rollout->is_repeated() &&
      rollout->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    const google::protobuf::Message& inner = reflection->GetMessage(request, rollout);
    if (const FieldDescriptor* id = StringField(inner, "id"); id != nullptr) {
      return AuditText(inner.GetReflection()->GetString(inner, id), kAuditFieldMaxBytes);
    }
  }
  if (const FieldDescriptor* device = StringField(request, "device_id"); device != nullptr) {
    return AuditText(reflection->GetString(request, device), kAuditFieldMaxBytes);
  }
  return "";
}

std::string AuditRequestSummary(const google::protobuf::Message& request) {
  google::protobuf::TextFormat::Printer printer;
  // Deterministic and on one line (DebugString may add random spacing).
  printer.SetSingleLineMode(true);
  printer.SetUseShortRepeatedPrimitives(true);
  printer.SetTruncateStringFieldLongerThan(kAuditSummaryStringMaxBytes);
  std::string text;
  printer.PrintToString(request, &text);
  // Single-line mode leaves a space after the last field.
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return AuditText(text, kAuditSummaryMaxBytes);
}

}  // namespace weightpath::server
