#include "ctl/resolve_output.h"

#include <iomanip>
#include <sstream>
#include <string>

#include "common/control_characters.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::ctl {
namespace {

std::string KwargsText(const google::protobuf::Struct& kwargs) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(kwargs, &json, options).ok()) return "?";
  return json;
}

void Line(std::ostream& out, std::string_view label, const std::string& value) {
  out << std::left << std::setw(16) << label << ControlEscaped(value) << "\n";
}

}  // namespace

std::string PriorityWord(v1::Priority priority) {
  switch (priority) {
    case v1::PRIORITY_SPEED:
      return "speed";
    case v1::PRIORITY_FIDELITY:
      return "fidelity";
    default:
      return "unspecified";
  }
}

std::string ArtifactSummary(const v1::Artifact& artifact) {
  if (artifact.files_size() > 0) {
    uint64_t bytes = 0;
    for (const v1::BuildFile& file : artifact.files()) bytes += file.size_bytes();
    return absl::StrCat("directory build: ", artifact.files_size(),
                        artifact.files_size() == 1 ? " file, " : " files, ", bytes,
                        " bytes (manifest sha256 ", artifact.sha256(), ")");
  }
  if (artifact.uri().empty()) return "-";
  if (!artifact.tokenizer().empty()) {
    return absl::StrCat(artifact.uri(), "  (tokenizer ", artifact.tokenizer(), ")");
  }
  return artifact.uri();
}

absl::Status WriteResolveResponse(const v1::ResolveWeightPathResponse& response,
                                  ViewOutput format, std::ostream& out) {
  if (format != ViewOutput::kTable) return WriteMessage(response, format, out);

  const v1::WeightPathSpec& path = response.weight_path();
  std::string build = path.quantization().empty() ? "model dtype" : path.quantization();
  if (path.has_group_size()) absl::StrAppend(&build, ", group ", path.group_size());
  if (path.has_bits_per_weight()) {
    absl::StrAppend(&build, ", ", path.bits_per_weight(), " bits/weight");
  }
  Line(out, "hardware class", response.hardware_class());
  Line(out, "weight path", absl::StrCat(path.name(), "  (policy path ", path.path_id(), ")"));
  Line(out, "build", build);
  Line(out, "runs in vLLM", path.runs_in_vllm() ? "yes" : "no (exported artifact)");
  Line(out, "verified", path.verified() ? "yes" : "no, measure before trusting it");
  Line(out, "engine kwargs", KwargsText(response.engine_kwargs()));
  Line(out, "priority", PriorityWord(response.effective_priority()));
  Line(out, "matched rule", response.matched_rule());
  Line(out, "policy", response.policy_version());
  if (response.has_artifact() && ArtifactSummary(response.artifact()) != "-") {
    Line(out, "artifact", ArtifactSummary(response.artifact()));
  }
  Line(out, "rationale", path.rationale());
  return absl::OkStatus();
}

}  // namespace weightpath::ctl
