#include "server/resolve/request_validation.h"

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/field_violation.h"
#include "common/status_macros.h"
#include "policy/hardware_class.h"
#include "store/measurement_validation.h"

namespace weightpath::server {
namespace {

// [A-Za-z0-9._:/@+=-], one entry per byte value: a device id is checked on
// every resolve.
// 1 or 0 rather than bool, so AllDeviceIdChars can AND them as integers.
constexpr std::array<uint8_t, 256> kDeviceIdChars = [] {
  std::array<uint8_t, 256> table{};
  for (int c = 'a'; c <= 'z'; ++c) table[c] = 1;
  for (int c = 'A'; c <= 'Z'; ++c) table[c] = 1;
  for (int c = '0'; c <= '9'; ++c) table[c] = 1;
  for (const char c : {'.', '_', ':', '/', '@', '+', '=', '-'}) table[static_cast<uint8_t>(c)] = 1;
  return table;
}();

bool IsDeviceIdChar(char c) { return kDeviceIdChars[static_cast<uint8_t>(c)] != 0; }

// Every byte one of kDeviceIdChars, as a yes or no for the memo's path (it
// runs on every answer). One table load and one AND a byte, four bytes a
// step and no branch per byte: the per-byte early exit cost more on the ids
// that pass than it saved on the few that do not.
bool AllDeviceIdChars(absl::string_view device_id) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(device_id.data());
  const size_t size = device_id.size();
  unsigned all = 1;
  size_t i = 0;
  for (; i + 4 <= size; i += 4) {
    all &= kDeviceIdChars[bytes[i]] & kDeviceIdChars[bytes[i + 1]] & kDeviceIdChars[bytes[i + 2]] &
           kDeviceIdChars[bytes[i + 3]];
  }
  for (; i < size; ++i) all &= kDeviceIdChars[bytes[i]];
  return all != 0;
}

constexpr std::array<bool, 256> kLowerHexDigits = [] {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'f'; ++c) table[c] = true;
  return table;
}();

constexpr size_t kMaxEtagBytes = 64;

absl::Status CheckLength(absl::string_view value, absl::string_view field) {
  if (value.size() <= kMaxStringBytes) return absl::OkStatus();
  return InvalidArgumentForField(field, absl::StrCat(field, " is ", value.size(),
                                                    " bytes; at most ", kMaxStringBytes,
                                                    " are accepted"));
}

// The field name is only built when something is wrong, so the common path
// does not allocate.
absl::Status CheckLengthAt(absl::string_view value, absl::string_view list_field, int index,
                           absl::string_view member = {}) {
  if (value.size() <= kMaxStringBytes) return absl::OkStatus();
  std::string field = absl::StrCat(list_field, "[", index, "]");
  if (!member.empty()) absl::StrAppend(&field, ".", member);
  return CheckLength(value, field);
}

absl::Status CheckCount(int count, int limit, absl::string_view field) {
  if (count <= limit) return absl::OkStatus();
  return InvalidArgumentForField(
      field, absl::StrCat(field, " has ", count, " entries; at most ", limit, " are accepted"));
}

absl::StatusOr<policy::HardwareClass> ValidateProfile(const v1::HardwareProfile& profile) {
  RETURN_IF_ERROR(CheckLength(profile.arch(), "profile.arch"));
  RETURN_IF_ERROR(CheckLength(profile.cpu_model(), "profile.cpu_model"));
  RETURN_IF_ERROR(CheckLength(profile.accelerator(), "profile.accelerator"));
  RETURN_IF_ERROR(CheckLength(profile.gpu_name(), "profile.gpu_name"));
  RETURN_IF_ERROR(CheckLength(profile.host_os(), "profile.host_os"));
  RETURN_IF_ERROR(CheckLength(profile.source(), "profile.source"));

  RETURN_IF_ERROR(CheckCount(profile.cpu_flags_size(), kMaxCpuFlags, "profile.cpu_flags"));
  // A hundred flags per request: one tight pass, the error built only for
  // the first one too long.
  int flag_index = 0;
  for (const std::string& flag : profile.cpu_flags()) {
    if (flag.size() > kMaxStringBytes) return CheckLengthAt(flag, "profile.cpu_flags", flag_index);
    ++flag_index;
  }
  RETURN_IF_ERROR(CheckCount(profile.clusters_size(), kMaxClusters, "profile.clusters"));
  for (int i = 0; i < profile.clusters_size(); ++i) {
    if (profile.clusters(i).cpus_size() > kMaxCpusPerCluster) {
      return CheckCount(profile.clusters(i).cpus_size(), kMaxCpusPerCluster,
                        absl::StrCat("profile.clusters[", i, "].cpus"));
    }
  }
  RETURN_IF_ERROR(
      CheckCount(profile.gpu_capability_size(), kMaxGpuCapability, "profile.gpu_capability"));
  RETURN_IF_ERROR(
      CheckCount(profile.accelerators_size(), kMaxAccelerators, "profile.accelerators"));
  for (int i = 0; i < profile.accelerators_size(); ++i) {
    const v1::AcceleratorInfo& info = profile.accelerators(i);
    RETURN_IF_ERROR(CheckLengthAt(info.kind(), "profile.accelerators", i, "kind"));
    RETURN_IF_ERROR(CheckLengthAt(info.vendor(), "profile.accelerators", i, "vendor"));
    RETURN_IF_ERROR(CheckLengthAt(info.name(), "profile.accelerators", i, "name"));
    RETURN_IF_ERROR(CheckLengthAt(info.source(), "profile.accelerators", i, "source"));
    RETURN_IF_ERROR(CheckLengthAt(info.reason(), "profile.accelerators", i, "reason"));
    RETURN_IF_ERROR(CheckLengthAt(info.route(), "profile.accelerators", i, "route"));
    RETURN_IF_ERROR(CheckLengthAt(info.driver(), "profile.accelerators", i, "driver"));
  }
  RETURN_IF_ERROR(CheckLength(profile.gpu_driver_version(), "profile.gpu_driver_version"));
  RETURN_IF_ERROR(CheckLength(profile.cuda_driver_version(), "profile.cuda_driver_version"));
  RETURN_IF_ERROR(CheckLength(profile.l4t_release(), "profile.l4t_release"));
  RETURN_IF_ERROR(CheckLength(profile.cuda_visible_devices(), "profile.cuda_visible_devices"));
  RETURN_IF_ERROR(CheckLength(profile.gpu_inventory_source(), "profile.gpu_inventory_source"));
  RETURN_IF_ERROR(CheckCount(profile.gpus_size(), kMaxGpus, "profile.gpus"));
  for (int i = 0; i < profile.gpus_size(); ++i) {
    const v1::GpuDevice& gpu = profile.gpus(i);
    RETURN_IF_ERROR(CheckLengthAt(gpu.uuid(), "profile.gpus", i, "uuid"));
    RETURN_IF_ERROR(CheckLengthAt(gpu.name(), "profile.gpus", i, "name"));
    RETURN_IF_ERROR(CheckLengthAt(gpu.pci_bus_id(), "profile.gpus", i, "pci_bus_id"));
    RETURN_IF_ERROR(CheckLengthAt(gpu.reason(), "profile.gpus", i, "reason"));
    RETURN_IF_ERROR(CheckLengthAt(gpu.source(), "profile.gpus", i, "source"));
    if (gpu.capability_size() > kMaxGpuCapability) {
      return CheckCount(gpu.capability_size(), kMaxGpuCapability,
                        absl::StrCat("profile.gpus[", i, "].capability"));
    }
    if (gpu.mig_instances_size() > kMaxMigInstancesPerGpu) {
      return CheckCount(gpu.mig_instances_size(), kMaxMigInstancesPerGpu,
                        absl::StrCat("profile.gpus[", i, "].mig_instances"));
    }
    for (int m = 0; m < gpu.mig_instances_size(); ++m) {
      const v1::MigInstance& instance = gpu.mig_instances(m);
      for (const std::string* text : {&instance.uuid(), &instance.profile(), &instance.reason()}) {
        if (text->size() > kMaxStringBytes) {
          return CheckLength(*text, absl::StrCat("profile.gpus[", i, "].mig_instances[", m, "]"));
        }
      }
    }
  }
  RETURN_IF_ERROR(CheckCount(profile.probe_notes_size(), kMaxProbeNotes, "profile.probe_notes"));
  for (int i = 0; i < profile.probe_notes_size(); ++i) {
    RETURN_IF_ERROR(CheckLengthAt(profile.probe_notes(i), "profile.probe_notes", i));
  }
  // Classification decides which kernels a device may be handed; the policy
  // library names profile.arch (or profile.accelerator) when it cannot.
  return policy::ClassifyHardware(profile);
}

}  // namespace

absl::Status ValidateDeviceId(absl::string_view device_id) {
  if (device_id.empty()) return InvalidArgumentForField("device_id", "device_id is required");
  if (device_id.size() > kMaxDeviceIdBytes) {
    return InvalidArgumentForField("device_id", absl::StrCat("device_id is ", device_id.size(),
                                                             " bytes; at most ", kMaxDeviceIdBytes,
                                                             " are accepted"));
  }
  for (size_t i = 0; i < device_id.size(); ++i) {
    if (!IsDeviceIdChar(device_id[i])) {
      return InvalidArgumentForField("device_id", absl::StrCat(
          "device_id has a character outside [A-Za-z0-9._:/@+=-] at byte ", i));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateKnownDecisionEtag(absl::string_view etag) {
  // Ours are 32 digits; the bound (kMaxEtagBytes) leaves room for a longer hash later.
  if (etag.size() > kMaxEtagBytes) {
    return InvalidArgumentForField("known_decision_etag",
                                   absl::StrCat("known_decision_etag is ", etag.size(),
                                                " bytes; at most ", kMaxEtagBytes, " are accepted"));
  }
  for (size_t i = 0; i < etag.size(); ++i) {
    if (!kLowerHexDigits[static_cast<uint8_t>(etag[i])]) {
      return InvalidArgumentForField("known_decision_etag", absl::StrCat(
          "known_decision_etag has a character other than a lowercase hex digit at byte ", i,
          "; send back the decision_etag of an earlier answer, or nothing"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateResolveRequest(const v1::ResolveWeightPathRequest& request) {
  return ValidateAndClassifyResolveRequest(request).status();
}

absl::StatusOr<policy::HardwareClass> ValidateAndClassifyResolveRequest(
    const v1::ResolveWeightPathRequest& request) {
  RETURN_IF_ERROR(ValidateDeviceId(request.device_id()));
  RETURN_IF_ERROR(CheckLength(request.model(), "model"));
  RETURN_IF_ERROR(CheckLength(request.agent_version(), "agent_version"));
  RETURN_IF_ERROR(ValidateKnownDecisionEtag(request.known_decision_etag()));
  if (static_cast<int>(request.labels_size()) > kMaxLabels) {
    return CheckCount(static_cast<int>(request.labels_size()), kMaxLabels, "labels");
  }
  for (const auto& [key, value] : request.labels()) {
    if (key.empty()) return InvalidArgumentForField("labels", "labels has an empty key");
    if (key.size() > kMaxStringBytes) {
      return InvalidArgumentForField("labels", absl::StrCat("labels has a key of ", key.size(),
                                                            " bytes; at most ", kMaxStringBytes,
                                                            " are accepted"));
    }
    if (value.size() > kMaxStringBytes) {
      return CheckLength(value, absl::StrCat("labels[\"", key, "\"]"));
    }
  }
  if (!v1::Priority_IsValid(request.priority())) {
    return InvalidArgumentForField(
        "priority", absl::StrCat("priority ", static_cast<int>(request.priority()),
                     " is not one of PRIORITY_UNSPECIFIED, PRIORITY_SPEED, PRIORITY_FIDELITY"));
  }
  if (!request.has_profile()) return InvalidArgumentForField("profile", "profile is required");
  return ValidateProfile(request.profile());
}

bool RequestHeadIsValid(const RequestHead& head) {
  // The same checks as ValidateResolveRequest, as a yes or no: any fault is
  // left to it. DecodeRequestHead already held each label to a non-empty key
  // and lengths under 128 bytes, and the priority to the enum's values.
  if (head.device_id.empty() || head.device_id.size() > kMaxDeviceIdBytes) return false;
  if (!AllDeviceIdChars(head.device_id)) return false;
  if (head.model.size() > kMaxStringBytes || head.agent_version.size() > kMaxStringBytes) return false;
  // Entries on the wire bound the distinct keys the map ends up with.
  return head.label_count <= kMaxLabels;
}

bool KnownDecisionEtagIsValid(absl::string_view etag) {
  if (etag.size() > kMaxEtagBytes) return false;
  for (const char c : etag) {
    if (!kLowerHexDigits[static_cast<uint8_t>(c)]) return false;
  }
  return true;
}

absl::Status ValidateReport(const v1::ReportMeasurementRequest& request) {
  RETURN_IF_ERROR(store::ValidateMeasurement(request));
  return ValidateDeviceId(request.device_id());
}

absl::Status ValidateReport(const v1::ReportOutcomeRequest& request) {
  RETURN_IF_ERROR(store::ValidateOutcome(request));
  return ValidateDeviceId(request.device_id());
}

}  // namespace weightpath::server
